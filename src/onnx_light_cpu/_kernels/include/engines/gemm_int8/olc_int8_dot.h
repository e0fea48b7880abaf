/* The int8 dot-product steps of both int8 engines: MatMulInteger's
 * (olc_gemm_int8.h) and MatMulNBits' (olc_q8_* in olc_matmul_nbits.h,
 * which QMoE reaches).  Both bring their operands to unsigned x signed
 * bytes (u8 x s8), the form vpdpbusd takes, and accumulate int32: every
 * step is exact, so the levels give the same integers.
 *
 * Per level (avx2, avx512, avx512vnni; int32 lanes, 4-byte groups):
 *   olc_i8_dot4_<lvl>(acc, u, s)        acc + sum of the group's 4 products.
 *       VNNI: vpdpbusd.  Without VNNI: vpmaddubsw (pair sums in int16,
 *       saturating) then vpmaddwd with ones, exact only for u < 128
 *       (2 x 127 x 128 < 2^15): codes of at most 7 bits.
 *   olc_i8_dot4_split_<lvl>(acc, u, s)  the same for any u: without VNNI
 *       the high bit of u goes through its own vpmaddubsw (8-bit codes).
 *   olc_i8_dot4x2_<lvl>(&a, &b, lo, xl, hi, xh)  adds lo . xl and hi . xh
 *       for u < 16 (4-bit codes): VNNI into a and b (two chains in
 *       flight); without VNNI both into a, the two groups' four products
 *       summed in one int16 (4 x 15 x 128 < 2^15), b untouched.
 *   olc_i8_madd16_<lvl>(acc, x, y)      acc + vpmaddwd of int16 pairs (avx2,
 *       avx512).  MatMulInteger without VNNI widens its bytes to int16 and
 *       takes pairs of k instead: its u spans 0..255, where vpmaddubsw
 *       would saturate (2 x 255 x 128), and its layout of B is made for
 *       pairs.
 *   olc_i8_hsum_<lvl>(v)                sum of the int32 lanes (avx2, avx512).
 */
#ifndef OLC_INT8_DOT_H
#define OLC_INT8_DOT_H
#include <stdint.h>
#include "common/olc_cpu.h"

#define OLC_I8_INLINE static inline __attribute__((always_inline))

#if OLC_X86
OLC_I8_INLINE OLC_TARGET_AVX2 __m256i olc_i8_dot4_avx2(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s),
                                                   _mm256_set1_epi16(1)));
}

OLC_I8_INLINE OLC_TARGET_AVX2 __m256i olc_i8_dot4_split_avx2(__m256i acc, __m256i u,
                                                             __m256i s) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i ul = _mm256_and_si256(u, _mm256_set1_epi8(0x7f));
    __m256i uh = _mm256_and_si256(u, _mm256_set1_epi8((char)0x80));
    return _mm256_add_epi32(acc, _mm256_add_epi32(
                                     _mm256_madd_epi16(_mm256_maddubs_epi16(ul, s), ones),
                                     _mm256_madd_epi16(_mm256_maddubs_epi16(uh, s), ones)));
}

OLC_I8_INLINE OLC_TARGET_AVX2 void olc_i8_dot4x2_avx2(__m256i *a, __m256i *b, __m256i lo,
                                                      __m256i xl, __m256i hi, __m256i xh) {
    (void)b;
    __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
    *a = _mm256_add_epi32(*a, _mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}

OLC_I8_INLINE OLC_TARGET_AVX2 __m256i olc_i8_madd16_avx2(__m256i acc, __m256i x, __m256i y) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
}

OLC_I8_INLINE OLC_TARGET_AVX2 int32_t olc_i8_hsum_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
OLC_I8_INLINE OLC_TARGET_AVX512 __m512i olc_i8_dot4_avx512(__m512i acc, __m512i u, __m512i s) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s),
                                                   _mm512_set1_epi16(1)));
}

OLC_I8_INLINE OLC_TARGET_AVX512 __m512i olc_i8_dot4_split_avx512(__m512i acc, __m512i u,
                                                                 __m512i s) {
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i s1 = _mm512_maddubs_epi16(_mm512_and_si512(u, _mm512_set1_epi8(0x7f)), s);
    __m512i s2 = _mm512_maddubs_epi16(_mm512_and_si512(u, _mm512_set1_epi8((char)0x80)), s);
    return _mm512_add_epi32(acc, _mm512_add_epi32(_mm512_madd_epi16(s1, ones),
                                                  _mm512_madd_epi16(s2, ones)));
}

OLC_I8_INLINE OLC_TARGET_AVX512 void olc_i8_dot4x2_avx512(__m512i *a, __m512i *b, __m512i lo,
                                                          __m512i xl, __m512i hi, __m512i xh) {
    (void)b;
    __m512i s16 = _mm512_add_epi16(_mm512_maddubs_epi16(lo, xl), _mm512_maddubs_epi16(hi, xh));
    *a = _mm512_add_epi32(*a, _mm512_madd_epi16(s16, _mm512_set1_epi16(1)));
}

OLC_I8_INLINE OLC_TARGET_AVX512 __m512i olc_i8_madd16_avx512(__m512i acc, __m512i x,
                                                             __m512i y) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(x, y));
}

OLC_I8_INLINE OLC_TARGET_AVX512 int32_t olc_i8_hsum_avx512(__m512i v) {
    return _mm512_reduce_add_epi32(v);
}

OLC_I8_INLINE OLC_TARGET_AVX512_VNNI __m512i olc_i8_dot4_avx512vnni(__m512i acc, __m512i u,
                                                                    __m512i s) {
    return _mm512_dpbusd_epi32(acc, u, s);
}

OLC_I8_INLINE OLC_TARGET_AVX512_VNNI __m512i olc_i8_dot4_split_avx512vnni(__m512i acc,
                                                                          __m512i u,
                                                                          __m512i s) {
    return _mm512_dpbusd_epi32(acc, u, s);
}

OLC_I8_INLINE OLC_TARGET_AVX512_VNNI void olc_i8_dot4x2_avx512vnni(__m512i *a, __m512i *b,
                                                                   __m512i lo, __m512i xl,
                                                                   __m512i hi, __m512i xh) {
    *a = _mm512_dpbusd_epi32(*a, lo, xl);
    *b = _mm512_dpbusd_epi32(*b, hi, xh);
}
#endif

#endif
