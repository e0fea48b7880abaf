/* TEMPORARY STUB (to be replaced): element-wise exp, log, sigmoid, tanh.
 * API: olc_<op>_<type>_<level>(const T *x, T *y, int64_t n)
 *   op    in exp, log, sigmoid, tanh
 *   type  f32 (float), f16 (uint16_t IEEE half bits), bf16 (uint16_t bfloat16 bits)
 *   level scalar, avx2 (only #if OLC_X86), avx512 (only #if OLC_X86 && OLC_HAVE_AVX512)
 * plus olc_<op>_f64_scalar(const double *x, double *y, int64_t n).
 */
#ifndef OLC_MATH_H
#define OLC_MATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "olc_cpu.h"

static inline float olc_sigmoidf_ref(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline double olc_sigmoid_ref(double x) { return 1.0 / (1.0 + exp(-x)); }

static inline float olc_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0) {
        if (m == 0) bits = sign;
        else { float f = (float)m * 5.9604644775390625e-08f; memcpy(&bits, &f, 4); bits |= sign; }
    } else if (e == 31) bits = sign | 0x7f800000 | (m << 13);
    else bits = sign | ((e + 112) << 23) | (m << 13);
    float f; memcpy(&f, &bits, 4); return f;
}
static inline uint16_t olc_f2h(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000; x &= 0x7fffffff;
    if (x > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((x >> 13) & 0x3ff));
    if (x >= 0x477ff000) return (uint16_t)(sign | 0x7c00);
    if (x < 0x38800000) { float a; memcpy(&a, &x, 4); return (uint16_t)(sign | (uint16_t)lrintf(a * 16777216.0f)); }
    uint32_t r = x + 0xfff + ((x >> 13) & 1) - 0x38000000;
    return (uint16_t)(sign | (r >> 13));
}
static inline float olc_bf2f(uint16_t h) { uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f; }
static inline uint16_t olc_f2bf(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

#define OLC_STUB(op, fexpr, dexpr)                                                         \
    static void olc_##op##_f32_scalar(const float *x, float *y, int64_t n) {               \
        for (int64_t i = 0; i < n; ++i) { float v = x[i]; y[i] = fexpr; }                  \
    }                                                                                      \
    static void olc_##op##_f16_scalar(const uint16_t *x, uint16_t *y, int64_t n) {         \
        for (int64_t i = 0; i < n; ++i) { float v = olc_h2f(x[i]); y[i] = olc_f2h(fexpr); } \
    }                                                                                      \
    static void olc_##op##_bf16_scalar(const uint16_t *x, uint16_t *y, int64_t n) {        \
        for (int64_t i = 0; i < n; ++i) { float v = olc_bf2f(x[i]); y[i] = olc_f2bf(fexpr); } \
    }                                                                                      \
    static void olc_##op##_f64_scalar(const double *x, double *y, int64_t n) {             \
        for (int64_t i = 0; i < n; ++i) { double v = x[i]; y[i] = dexpr; }                 \
    }

OLC_STUB(exp, expf(v), exp(v))
OLC_STUB(log, logf(v), log(v))
OLC_STUB(sigmoid, olc_sigmoidf_ref(v), olc_sigmoid_ref(v))
OLC_STUB(tanh, tanhf(v), tanh(v))

#if OLC_X86
#define OLC_STUB_LEVEL(op, lvl)                                                                   \
    static void olc_##op##_f32_##lvl(const float *x, float *y, int64_t n) { olc_##op##_f32_scalar(x, y, n); } \
    static void olc_##op##_f16_##lvl(const uint16_t *x, uint16_t *y, int64_t n) { olc_##op##_f16_scalar(x, y, n); } \
    static void olc_##op##_bf16_##lvl(const uint16_t *x, uint16_t *y, int64_t n) { olc_##op##_bf16_scalar(x, y, n); }
OLC_STUB_LEVEL(exp, avx2) OLC_STUB_LEVEL(log, avx2) OLC_STUB_LEVEL(sigmoid, avx2) OLC_STUB_LEVEL(tanh, avx2)
#if OLC_HAVE_AVX512
OLC_STUB_LEVEL(exp, avx512) OLC_STUB_LEVEL(log, avx512) OLC_STUB_LEVEL(sigmoid, avx512) OLC_STUB_LEVEL(tanh, avx512)
#endif
#endif

#endif
