/*
 * The AVX512_BF16 entry: the AVX-512 kernels, built again with
 * -mavx512bf16, plus the VDPBF16PS kernel on bfloat16 pairs. One source, so
 * the entry starts from the AVX-512 one and differs only by what it adds.
 */
#define CTBC_AVX512_WITH_BF16 1
#include "compute/kernels/kernel_avx512.c"
