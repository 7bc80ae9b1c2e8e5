/*
 * The fuzz cases of conv_tbc_case.h from a seeded PRNG instead of a fuzzer,
 * for the normal test run (tests/test_fuzz_driver.py builds it with ASan and
 * UBSan), or replaying input files:
 *
 *   random_descriptors [--seed S] [--iterations N] [--seconds T] [--save DIR]
 *   random_descriptors FILE...
 *
 * Random mode stops after N inputs or T seconds, whichever comes first.
 * Each input is 32..512 bytes; a byte is 0 ("keep the consistent value")
 * with a probability drawn per input, so that most inputs change a few
 * things of a valid call and reach phase 2. When an input ends the process
 * (an oracle of conv_tbc_case.h, a sanitizer, a signal), it is left in
 * DIR/crash-<seed>-<iteration> (default: the current directory), ready for
 * tests/fuzz/regressions/ and for the libFuzzer target.
 *
 * Prints one line of statistics: how many inputs reached which outcome.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sanitizer/common_interface_defs.h>

#include "conv_tbc_case.h"

/* Undefined behaviour ends the run, also where the library was built to
 * report and go on (meson's b_sanitize does not stop on UBSan errors). */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The input about to run is written to its crash file first and removed
 * once it has run, so that whatever ends the process (an oracle, a
 * sanitizer, a signal, a timeout's SIGKILL) leaves it behind. */
static bool write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

static const char *saved_path;

static void announce_saved(void)
{
    if (saved_path)
        fprintf(stderr, "random_descriptors: the input is saved as %s\n", saved_path);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int replay(int count, char **files, long *outcomes)
{
    for (int i = 0; i < count; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f) {
            fprintf(stderr, "random_descriptors: cannot open %s: %s\n", files[i], strerror(errno));
            return 2;
        }
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        fprintf(stderr, "replaying %s (%zu bytes)\n", files[i], n);
        outcomes[fz_run_input(buf, n)]++;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    long iterations = -1;
    double seconds = -1;
    const char *save_dir = ".";
    int first_file = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc)
            iterations = strtol(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--save") == 0 && i + 1 < argc)
            save_dir = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--seed S] [--iterations N] [--seconds T] [--save DIR] | FILE...\n", argv[0]);
            return 2;
        } else {
            first_file = i;
            break;
        }
    }

    fz_init();
    long outcomes[FZ_OUTCOMES] = {0};
    long runs = 0;
    if (first_file < argc) {
        int rc = replay(argc - first_file, argv + first_file, outcomes);
        if (rc)
            return rc;
        runs = argc - first_file;
    } else {
        if (iterations < 0 && seconds < 0)
            iterations = 1000;
        static uint8_t current[512];
        static char crash_path[4096];
        fz_before_abort = announce_saved;
        __sanitizer_set_death_callback(announce_saved);
        double deadline = seconds >= 0 ? now_seconds() + seconds : 0;
        for (long it = 0; iterations < 0 || it < iterations; it++) {
            if (seconds >= 0 && now_seconds() >= deadline)
                break;
            uint64_t state = seed * 0x100000001b3ULL + (uint64_t)it;
            (void)splitmix64(&state);
            size_t current_size = 32 + splitmix64(&state) % (sizeof current - 31);
            /* Chance of a 0 byte: 1/2 .. 63/64, fixed for the input. */
            unsigned keep = 1 + (unsigned)(splitmix64(&state) % 6);
            for (size_t k = 0; k < current_size; k++) {
                uint64_t r = splitmix64(&state);
                current[k] = (r & ((1u << keep) - 1)) ? 0 : (uint8_t)(r >> 32);
            }
            snprintf(crash_path, sizeof crash_path, "%s/crash-%llu-%ld", save_dir, (unsigned long long)seed, it);
            if (!write_file(crash_path, current, current_size)) {
                fprintf(stderr, "random_descriptors: cannot write %s: %s\n", crash_path, strerror(errno));
                return 2;
            }
            saved_path = crash_path;
            outcomes[fz_run_input(current, current_size)]++;
            saved_path = NULL;
            remove(crash_path);
            runs++;
        }
    }
    fz_shutdown();
    printf("inputs %ld: skipped %ld, refused at phase 1 %ld, phase 1 only %ld, refused at phase 2 %ld, run %ld\n",
           runs, outcomes[FZ_SKIPPED], outcomes[FZ_REFUSED_AT_PHASE1], outcomes[FZ_PHASE1_OK],
           outcomes[FZ_PHASE2_REFUSED], outcomes[FZ_PHASE2_OK]);
    return 0;
}
