/*
 * libFuzzer target: aclnnConvTbcBackward with hostile tensor descriptors.
 * The decoding and the oracles are in conv_tbc_case.h (shared with the
 * seeded driver random_descriptors.c); the build and run commands are in
 * tests/fuzz/README.md.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime */

#include <stddef.h>
#include <stdint.h>

#include "conv_tbc_case.h"

/* Undefined behaviour ends the run, also where the library was built to
 * report and go on (meson's b_sanitize does not stop on UBSan errors). */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)fz_run_input(data, size);
    return 0;
}
