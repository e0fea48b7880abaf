/* The spans of one pair of element types at every level, and their
 * row-range functions: a body file (common/olc_level.h) that olc_rotary.h
 * includes once per pair with OLC_ROPE_X / OLC_ROPE_C (the type tags f32,
 * f16, bf16 of x and of the caches) and OLC_ROPE_T / OLC_ROPE_CT (their C
 * types).  Names: OLC_ROPE_FN(olc_rope_span, avx2) is
 * olc_rope_span_<x>_<c>_avx2.  No include guard. */

/* ---- scalar ---- */

static void OLC_ROPE_FN(olc_rope_span, scalar)(const void *xv, void *yv, const void *cv,
                                              const void *sv, int64_t half) {
    const OLC_ROPE_T *x = (const OLC_ROPE_T *)xv;
    OLC_ROPE_T *y = (OLC_ROPE_T *)yv;
    const OLC_ROPE_CT *c = (const OLC_ROPE_CT *)cv, *s = (const OLC_ROPE_CT *)sv;
    for (int64_t i = 0; i < half; ++i) {
        float a = OLC_ROPE_XFN(olc_rope_ld, scalar)(x[i]);
        float b = OLC_ROPE_XFN(olc_rope_ld, scalar)(x[i + half]);
        float cf = OLC_ROPE_CFN(olc_rope_ld, scalar)(c[i]);
        float sf = OLC_ROPE_CFN(olc_rope_ld, scalar)(s[i]);
        y[i] = OLC_ROPE_XFN(olc_rope_st, scalar)(a * cf - b * sf);
        y[i + half] = OLC_ROPE_XFN(olc_rope_st, scalar)(a * sf + b * cf);
    }
}
static void OLC_ROPE_FN(olc_ropei_span, scalar)(const void *xv, void *yv, const void *cv,
                                               const void *sv, int64_t half) {
    const OLC_ROPE_T *x = (const OLC_ROPE_T *)xv;
    OLC_ROPE_T *y = (OLC_ROPE_T *)yv;
    const OLC_ROPE_CT *c = (const OLC_ROPE_CT *)cv, *s = (const OLC_ROPE_CT *)sv;
    for (int64_t i = 0; i < half; ++i) {
        float a = OLC_ROPE_XFN(olc_rope_ld, scalar)(x[2 * i]);
        float b = OLC_ROPE_XFN(olc_rope_ld, scalar)(x[2 * i + 1]);
        float cf = OLC_ROPE_CFN(olc_rope_ld, scalar)(c[i]);
        float sf = OLC_ROPE_CFN(olc_rope_ld, scalar)(s[i]);
        y[2 * i] = OLC_ROPE_XFN(olc_rope_st, scalar)(a * cf - b * sf);
        y[2 * i + 1] = OLC_ROPE_XFN(olc_rope_st, scalar)(a * sf + b * cf);
    }
}
static void OLC_ROPE_FN(olc_rope, scalar)(const olc_rope_args *p, int64_t r0, int64_t r1) {
    olc_rope_rows_(p, r0, r1, OLC_ROPE_FN(olc_rope_span, scalar), sizeof(OLC_ROPE_T),
                   sizeof(OLC_ROPE_CT));
}
static void OLC_ROPE_FN(olc_ropei, scalar)(const olc_rope_args *p, int64_t r0, int64_t r1) {
    olc_rope_rows_(p, r0, r1, OLC_ROPE_FN(olc_ropei_span, scalar), sizeof(OLC_ROPE_T),
                   sizeof(OLC_ROPE_CT));
}

/* ---- AVX2 ---- */
#if OLC_X86

/* 8 pairs (x1[i], x2[i]) -> (y1[i], y2[i]). */
static inline OLC_TARGET_AVX2 void OLC_ROPE_FN(olc_rope_blk, avx2)(
        const OLC_ROPE_T *x1, const OLC_ROPE_T *x2, OLC_ROPE_T *y1, OLC_ROPE_T *y2,
        const OLC_ROPE_CT *c, const OLC_ROPE_CT *s) {
    __m256 re, im;
    olc_rope_rot_avx2(OLC_ROPE_XFN(olc_ld, avx2)(x1), OLC_ROPE_XFN(olc_ld, avx2)(x2),
                      OLC_ROPE_CFN(olc_ld, avx2)(c), OLC_ROPE_CFN(olc_ld, avx2)(s), &re, &im);
    OLC_ROPE_XFN(olc_st, avx2)(y1, re);
    OLC_ROPE_XFN(olc_st, avx2)(y2, im);
}
static OLC_TARGET_AVX2 void OLC_ROPE_FN(olc_rope_span, avx2)(const void *xv, void *yv,
        const void *cv, const void *sv, int64_t half) {
    const OLC_ROPE_T *x = (const OLC_ROPE_T *)xv;
    OLC_ROPE_T *y = (OLC_ROPE_T *)yv;
    const OLC_ROPE_CT *c = (const OLC_ROPE_CT *)cv, *s = (const OLC_ROPE_CT *)sv;
    int64_t i = 0;
    for (; i + 8 <= half; i += 8)
        OLC_ROPE_FN(olc_rope_blk, avx2)(x + i, x + half + i, y + i, y + half + i, c + i, s + i);
    if (i < half) {
        size_t k = (size_t)(half - i);
        OLC_ROPE_T b1[8] = {0}, b2[8] = {0};
        OLC_ROPE_CT bc[8] = {0}, bs[8] = {0};
        memcpy(b1, x + i, k * sizeof(OLC_ROPE_T)); memcpy(b2, x + half + i, k * sizeof(OLC_ROPE_T));
        memcpy(bc, c + i, k * sizeof(OLC_ROPE_CT)); memcpy(bs, s + i, k * sizeof(OLC_ROPE_CT));
        OLC_ROPE_FN(olc_rope_blk, avx2)(b1, b2, b1, b2, bc, bs);
        memcpy(y + i, b1, k * sizeof(OLC_ROPE_T)); memcpy(y + half + i, b2, k * sizeof(OLC_ROPE_T));
    }
}
/* 8 interleaved pairs x[0, 16) -> y[0, 16). */
static inline OLC_TARGET_AVX2 void OLC_ROPE_FN(olc_ropei_blk, avx2)(
        const OLC_ROPE_T *x, OLC_ROPE_T *y, const OLC_ROPE_CT *c, const OLC_ROPE_CT *s) {
    __m256 e, o, re, im, u, v;
    olc_rope_deinterleave_avx2(OLC_ROPE_XFN(olc_ld, avx2)(x), OLC_ROPE_XFN(olc_ld, avx2)(x + 8),
                               &e, &o);
    olc_rope_rot_avx2(e, o, OLC_ROPE_CFN(olc_ld, avx2)(c), OLC_ROPE_CFN(olc_ld, avx2)(s), &re, &im);
    olc_rope_interleave_avx2(re, im, &u, &v);
    OLC_ROPE_XFN(olc_st, avx2)(y, u);
    OLC_ROPE_XFN(olc_st, avx2)(y + 8, v);
}
static OLC_TARGET_AVX2 void OLC_ROPE_FN(olc_ropei_span, avx2)(const void *xv, void *yv,
        const void *cv, const void *sv, int64_t half) {
    const OLC_ROPE_T *x = (const OLC_ROPE_T *)xv;
    OLC_ROPE_T *y = (OLC_ROPE_T *)yv;
    const OLC_ROPE_CT *c = (const OLC_ROPE_CT *)cv, *s = (const OLC_ROPE_CT *)sv;
    int64_t i = 0;
    for (; i + 8 <= half; i += 8)
        OLC_ROPE_FN(olc_ropei_blk, avx2)(x + 2 * i, y + 2 * i, c + i, s + i);
    if (i < half) {
        size_t k = (size_t)(half - i);
        OLC_ROPE_T bx[16] = {0};
        OLC_ROPE_CT bc[8] = {0}, bs[8] = {0};
        memcpy(bx, x + 2 * i, 2 * k * sizeof(OLC_ROPE_T));
        memcpy(bc, c + i, k * sizeof(OLC_ROPE_CT)); memcpy(bs, s + i, k * sizeof(OLC_ROPE_CT));
        OLC_ROPE_FN(olc_ropei_blk, avx2)(bx, bx, bc, bs);
        memcpy(y + 2 * i, bx, 2 * k * sizeof(OLC_ROPE_T));
    }
}
static OLC_TARGET_AVX2 void OLC_ROPE_FN(olc_rope, avx2)(const olc_rope_args *p, int64_t r0, int64_t r1) {
    olc_rope_rows_(p, r0, r1, OLC_ROPE_FN(olc_rope_span, avx2), sizeof(OLC_ROPE_T),
                   sizeof(OLC_ROPE_CT));
}
static OLC_TARGET_AVX2 void OLC_ROPE_FN(olc_ropei, avx2)(const olc_rope_args *p, int64_t r0, int64_t r1) {
    olc_rope_rows_(p, r0, r1, OLC_ROPE_FN(olc_ropei_span, avx2), sizeof(OLC_ROPE_T),
                   sizeof(OLC_ROPE_CT));
}
#endif

/* ---- AVX-512: 16 pairs a step, masked tails ---- */
#if OLC_X86 && OLC_HAVE_AVX512

static OLC_TARGET_AVX512 void OLC_ROPE_FN(olc_rope_span, avx512)(const void *xv, void *yv,
        const void *cv, const void *sv, int64_t half) {
    const OLC_ROPE_T *x = (const OLC_ROPE_T *)xv;
    OLC_ROPE_T *y = (OLC_ROPE_T *)yv;
    const OLC_ROPE_CT *c = (const OLC_ROPE_CT *)cv, *s = (const OLC_ROPE_CT *)sv;
    for (int64_t i = 0; i < half; i += 16) {
        __mmask16 m = olc_tail_mask16(half - i);
        __m512 a = OLC_ROPE_XFN(olc_ld, avx512)(x + i, m);
        __m512 b = OLC_ROPE_XFN(olc_ld, avx512)(x + half + i, m);
        __m512 cf = OLC_ROPE_CFN(olc_ld, avx512)(c + i, m);
        __m512 sf = OLC_ROPE_CFN(olc_ld, avx512)(s + i, m);
        OLC_ROPE_XFN(olc_st, avx512)(y + i, m, _mm512_sub_ps(_mm512_mul_ps(a, cf), _mm512_mul_ps(b, sf)));
        OLC_ROPE_XFN(olc_st, avx512)(y + half + i, m,
                                     _mm512_add_ps(_mm512_mul_ps(a, sf), _mm512_mul_ps(b, cf)));
    }
}
static OLC_TARGET_AVX512 void OLC_ROPE_FN(olc_ropei_span, avx512)(const void *xv, void *yv,
        const void *cv, const void *sv, int64_t half) {
    const OLC_ROPE_T *x = (const OLC_ROPE_T *)xv;
    OLC_ROPE_T *y = (OLC_ROPE_T *)yv;
    const OLC_ROPE_CT *c = (const OLC_ROPE_CT *)cv, *s = (const OLC_ROPE_CT *)sv;
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ih = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int64_t i = 0; i < half; i += 16) {
        __mmask16 m = olc_tail_mask16(half - i);
        __mmask16 ma = olc_tail_mask16(2 * (half - i));
        __mmask16 mb = olc_tail_mask16(2 * (half - i) - 16 > 0 ? 2 * (half - i) - 16 : 0);
        __m512 u = OLC_ROPE_XFN(olc_ld, avx512)(x + 2 * i, ma);
        __m512 v = OLC_ROPE_XFN(olc_ld, avx512)(x + 2 * i + 16, mb);
        __m512 a = _mm512_permutex2var_ps(u, ie, v), b = _mm512_permutex2var_ps(u, io, v);
        __m512 cf = OLC_ROPE_CFN(olc_ld, avx512)(c + i, m);
        __m512 sf = OLC_ROPE_CFN(olc_ld, avx512)(s + i, m);
        __m512 re = _mm512_sub_ps(_mm512_mul_ps(a, cf), _mm512_mul_ps(b, sf));
        __m512 im = _mm512_add_ps(_mm512_mul_ps(a, sf), _mm512_mul_ps(b, cf));
        OLC_ROPE_XFN(olc_st, avx512)(y + 2 * i, ma, _mm512_permutex2var_ps(re, il, im));
        OLC_ROPE_XFN(olc_st, avx512)(y + 2 * i + 16, mb, _mm512_permutex2var_ps(re, ih, im));
    }
}
static OLC_TARGET_AVX512 void OLC_ROPE_FN(olc_rope, avx512)(const olc_rope_args *p, int64_t r0,
                                                            int64_t r1) {
    olc_rope_rows_(p, r0, r1, OLC_ROPE_FN(olc_rope_span, avx512), sizeof(OLC_ROPE_T),
                   sizeof(OLC_ROPE_CT));
}
static OLC_TARGET_AVX512 void OLC_ROPE_FN(olc_ropei, avx512)(const olc_rope_args *p, int64_t r0,
                                                             int64_t r1) {
    olc_rope_rows_(p, r0, r1, OLC_ROPE_FN(olc_ropei_span, avx512), sizeof(OLC_ROPE_T),
                   sizeof(OLC_ROPE_CT));
}
#endif
