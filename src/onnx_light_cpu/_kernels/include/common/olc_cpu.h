/* CPU feature detection and the instruction-set levels of the kernels.
 *
 * Level 0 is portable C, level 1 AVX2+FMA+F16C, level 2 AVX-512
 * (F, BW, VL, DQ), level 3 AVX-512 with VNNI (vpdpbusd).  Each vectorised
 * kernel has one function per level; the caller picks one from the active
 * level, once, outside any parallel loop.  Only the int8 dot products have
 * a level-3 function: every other kernel runs its AVX-512 one there
 * (olc_build_level).
 */
#ifndef OLC_CPU_H
#define OLC_CPU_H

#define OLC_SCALAR 0
#define OLC_AVX2 1
#define OLC_AVX512 2
#define OLC_AVX512_VNNI 3

#if defined(__x86_64__) || defined(_M_X64)
#define OLC_X86 1
#include <immintrin.h>
#define OLC_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define OLC_TARGET_AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define OLC_TARGET_AVX512_VNNI \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#else
#define OLC_X86 0
#endif

#ifndef OLC_HAVE_AVX512
#define OLC_HAVE_AVX512 0
#endif

#include <stdint.h>

/* The elements (of `size` bytes) before the first cache line boundary at or
 * after y, at most n.  Store-bound loops run them alone first: their
 * vector stores then fill whole lines.  NumPy's large buffers start 16
 * bytes past a line, and stores across two lines cost such a loop 14 %
 * (Abs of 1M float32 on a 2-core Zen 4: 93.7 us against 82.4 in C). */
static inline int64_t olc_line_head(const void *y, int64_t size, int64_t n) {
    const int64_t head = (int64_t)((0u - (uintptr_t)y) & 63u) / size;
    return head < n ? head : n;
}

/* Whether the CPU is AMD's: a tuning choice, never a correctness one (the
 * float GEMM's stream prefetch, engines/gemm/olc_gemm.h). */
static inline int olc_cpu_is_amd(void) {
#if OLC_X86 && defined(__GNUC__)
    static int amd = -1;
    if (amd < 0) {
        __builtin_cpu_init();
        amd = __builtin_cpu_is("amd") ? 1 : 0;
    }
    return amd;
#else
    return 0;
#endif
}

/* The level a kernel without int8 dot products runs at: `level` capped to
 * AVX-512 and to the levels this build compiled (the CPU's support is
 * checked once, by olc_detect_simd_level). */
static inline int olc_build_level(int level) {
#if !OLC_X86
    (void)level;
    return OLC_SCALAR;
#elif !OLC_HAVE_AVX512
    return level > OLC_AVX2 ? OLC_AVX2 : level;
#else
    return level > OLC_AVX512 ? OLC_AVX512 : level;
#endif
}

/* The level of the int8 dot products: as olc_build_level, VNNI kept. */
static inline int olc_int8_level(int level) {
#if OLC_X86 && OLC_HAVE_AVX512
    return level;
#else
    return olc_build_level(level);
#endif
}

/* The highest level this CPU (and OS) supports and this build contains.
 * __builtin_cpu_supports also checks that the OS saves the wide registers. */
static int olc_detect_simd_level(void) {
#if OLC_X86 && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    int level = OLC_SCALAR;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
        level = OLC_AVX2;
#if OLC_HAVE_AVX512
    if (level == OLC_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        level = OLC_AVX512;
    if (level >= OLC_AVX512 && __builtin_cpu_supports("avx512vnni"))
        level = OLC_AVX512_VNNI;
#endif
    return level;
#else
    return OLC_SCALAR;
#endif
}

#endif
