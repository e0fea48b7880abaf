/* The int8 engine's tile on AVX-512, compiled once per level (see
 * common/olc_level.h): included by olc_matmul_nbits.h for avx512 and
 * avx512vnni, whose dot-product steps (olc_int8_dot.h) are vpmaddubsw +
 * vpmaddwd and vpdpbusd.
 *
 * One register holds the tile's 16 columns x 4 k.  A row keeps four int32
 * accumulators, so that at M = 1 four products are in flight (a chain of
 * vpdpbusd on one register waits its 5-cycle latency each time). */

/* Rows [0, mr) of a tile, mr a constant at each call (below). */
OLC_LVL_ATTR static inline __attribute__((always_inline)) void OLC_FN(olc_q8_rows)(
    int mr, const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa, const int32_t *sums,
    const float *bias, int nc, float *y, int64_t ldy) {
    const int64_t nb = w->nb, block = w->block, kp = nb * block;
    const int64_t bb = olc_q8_block_bytes(block, w->packed4);
    const __m512i m15 = _mm512_set1_epi8(15);
    const int split = w->split;
    __m512 acc[OLC_NB_MR];
    for (int r = 0; r < mr; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *q = w->codes + (t * nb + b) * bb;
        const int8_t *x0 = qa + b * block;
        olc_q8_prefetch(w, t, b, bb);
        __m512i d0[OLC_NB_MR], d1[OLC_NB_MR], d2[OLC_NB_MR], d3[OLC_NB_MR];
        for (int r = 0; r < mr; ++r) d0[r] = d1[r] = d2[r] = d3[r] = _mm512_setzero_si512();
        if (w->packed4) {
            for (int64_t p = 0; p < block; p += 16) {
                __m512i v0 = _mm512_loadu_si512((const void *)(q + p * 8));
                __m512i v1 = _mm512_loadu_si512((const void *)(q + p * 8 + 64));
                __m512i lo0 = _mm512_and_si512(v0, m15);
                __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m15);
                __m512i lo1 = _mm512_and_si512(v1, m15);
                __m512i hi1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m15);
                for (int r = 0; r < mr; ++r) {
                    const int8_t *xr = x0 + r * kp + p;
                    OLC_FN(olc_i8_dot4x2)(&d0[r], &d1[r], lo0, _mm512_set1_epi32(olc_q8_load4(xr)),
                                          hi0, _mm512_set1_epi32(olc_q8_load4(xr + 4)));
                    OLC_FN(olc_i8_dot4x2)(&d2[r], &d3[r], lo1,
                                          _mm512_set1_epi32(olc_q8_load4(xr + 8)), hi1,
                                          _mm512_set1_epi32(olc_q8_load4(xr + 12)));
                }
            }
        } else {
            for (int64_t p = 0; p < block; p += 16) {
                const uint8_t *qp = q + p * OLC_Q8_NR;
                __m512i v0 = _mm512_loadu_si512((const void *)qp);
                __m512i v1 = _mm512_loadu_si512((const void *)(qp + 64));
                __m512i v2 = _mm512_loadu_si512((const void *)(qp + 128));
                __m512i v3 = _mm512_loadu_si512((const void *)(qp + 192));
                for (int r = 0; r < mr; ++r) {
                    const int8_t *xr = x0 + r * kp + p;
                    __m512i x_0 = _mm512_set1_epi32(olc_q8_load4(xr));
                    __m512i x_1 = _mm512_set1_epi32(olc_q8_load4(xr + 4));
                    __m512i x_2 = _mm512_set1_epi32(olc_q8_load4(xr + 8));
                    __m512i x_3 = _mm512_set1_epi32(olc_q8_load4(xr + 12));
                    if (split) {
                        d0[r] = OLC_FN(olc_i8_dot4_split)(d0[r], v0, x_0);
                        d1[r] = OLC_FN(olc_i8_dot4_split)(d1[r], v1, x_1);
                        d2[r] = OLC_FN(olc_i8_dot4_split)(d2[r], v2, x_2);
                        d3[r] = OLC_FN(olc_i8_dot4_split)(d3[r], v3, x_3);
                    } else {
                        d0[r] = OLC_FN(olc_i8_dot4)(d0[r], v0, x_0);
                        d1[r] = OLC_FN(olc_i8_dot4)(d1[r], v1, x_1);
                        d2[r] = OLC_FN(olc_i8_dot4)(d2[r], v2, x_2);
                        d3[r] = OLC_FN(olc_i8_dot4)(d3[r], v3, x_3);
                    }
                }
            }
        }
        __m512 vs = _mm512_loadu_ps(w->scales + (t * nb + b) * OLC_Q8_NR);
        __m512i vz = _mm512_cvtepu8_epi32(
            _mm_loadu_si128((const __m128i *)(w->zp + (t * nb + b) * OLC_Q8_NR)));
        for (int r = 0; r < mr; ++r) {
            __m512i dot =
                _mm512_add_epi32(_mm512_add_epi32(d0[r], d1[r]), _mm512_add_epi32(d2[r], d3[r]));
            __m512i d =
                _mm512_sub_epi32(dot, _mm512_mullo_epi32(vz, _mm512_set1_epi32(sums[r * nb + b])));
            __m512 f = _mm512_mul_ps(vs, _mm512_set1_ps(sa[r * nb + b]));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), f, acc[r]);
        }
    }
    __mmask16 m = (__mmask16)((1u << nc) - 1);
    __m512 vb = bias ? _mm512_maskz_loadu_ps(m, bias) : _mm512_setzero_ps();
    for (int r = 0; r < mr; ++r) _mm512_mask_storeu_ps(y + r * ldy, m, _mm512_add_ps(acc[r], vb));
}

/* One function per row count: olc_q8_tile<mr>_<level>. */
OLC_LVL_ATTR static void OLC_FN(olc_q8_tile1)(const olc_q8_w *w, int64_t t, const int8_t *qa,
                                               const float *sa, const int32_t *sums,
                                               const float *bias, int nc, float *y, int64_t ldy) {
    OLC_FN(olc_q8_rows)(1, w, t, qa, sa, sums, bias, nc, y, ldy);
}
OLC_LVL_ATTR static void OLC_FN(olc_q8_tile2)(const olc_q8_w *w, int64_t t, const int8_t *qa,
                                               const float *sa, const int32_t *sums,
                                               const float *bias, int nc, float *y, int64_t ldy) {
    OLC_FN(olc_q8_rows)(2, w, t, qa, sa, sums, bias, nc, y, ldy);
}
OLC_LVL_ATTR static void OLC_FN(olc_q8_tile3)(const olc_q8_w *w, int64_t t, const int8_t *qa,
                                               const float *sa, const int32_t *sums,
                                               const float *bias, int nc, float *y, int64_t ldy) {
    OLC_FN(olc_q8_rows)(3, w, t, qa, sa, sums, bias, nc, y, ldy);
}
OLC_LVL_ATTR static void OLC_FN(olc_q8_tile4)(const olc_q8_w *w, int64_t t, const int8_t *qa,
                                               const float *sa, const int32_t *sums,
                                               const float *bias, int nc, float *y, int64_t ldy) {
    OLC_FN(olc_q8_rows)(4, w, t, qa, sa, sums, bias, nc, y, ldy);
}
