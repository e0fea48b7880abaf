/* The row loop of typed GatherBlockQuantized, compiled once per level (see
 * common/olc_level.h) around that level's OLC_FN(olc_gbqt_span): included
 * by olc_gather_block_typed.h for scalar, avx2 and avx512. */

/* One run of L elements along the last axis (k_last, or -1 when the
 * gather axis is the last one): data from src, output from element o, the
 * scale offset of its first element s0; cut into spans that share one
 * scale and zero point. */
OLC_LVL_ATTR static inline void OLC_FN(olc_gbqt_run)(const olc_gbqt_args *a, const uint8_t *src,
                                                     int64_t o, int64_t s0, int k_last) {
    const int64_t L = a->L;
    const size_t size = a->dtype == OLC_FLOAT ? 4 : 2;
    int64_t span = L;
    if (k_last >= 0 && k_last == a->q) span = a->block;
    else if (k_last >= 0 && a->sstride[k_last] != 0) span = 1;
    for (int64_t e0 = 0; e0 < L; e0 += span) {
        int64_t s = s0 + (k_last < 0 ? 0 : olc_gbqt_contrib(a, k_last, e0));
        float zp = a->zp ? a->lut[a->zp[s]] : 0.0f;
        int64_t n = e0 + span < L ? span : L - e0;
        OLC_FN(olc_gbqt_span)(a->lut, src + e0, zp, olc_gbqt_scale(a, s),
                              (char *)a->out + (size_t)(o + e0) * size, n, a->dtype);
    }
}

/* Output rows [r0, r1). */
OLC_LVL_ATTR static void OLC_FN(olc_gbqt_rows)(const olc_gbqt_args *a, int64_t r0, int64_t r1) {
    const int64_t B = a->J * a->L;
    const int k_last = a->g < a->rank - 1 ? a->rank - 1 : -1;
    const size_t size = a->dtype == OLC_FLOAT ? 4 : 2;
    for (int64_t r = r0; r < r1; ++r) {
        int64_t m = r / a->n_idx, n = r - m * a->n_idx;
        int64_t i = a->idx64 ? ((const int64_t *)a->idx)[n] : (int64_t)((const int32_t *)a->idx)[n];
        if (i < -a->A || i >= a->A) {
            memset((char *)a->out + (size_t)(r * B) * size, 0, (size_t)B * size);
            continue;
        }
        if (i < 0) i += a->A;
        const uint8_t *src = a->data + ((m * a->A + i) * B);
        /* the scale offset of the row's first element: axis g, then the axes before it */
        int64_t s_row = olc_gbqt_contrib(a, a->g, i);
        for (int k = a->g - 1; k >= 0; --k) {
            s_row += olc_gbqt_contrib(a, k, m % a->dims[k]);
            m /= a->dims[k];
        }
        for (int64_t j = 0; j < a->J; ++j) {
            /* axes g+1 .. rank-2 of run j */
            int64_t s = s_row, rem = j;
            for (int k = a->rank - 2; k > a->g; --k) {
                s += olc_gbqt_contrib(a, k, rem % a->dims[k]);
                rem /= a->dims[k];
            }
            OLC_FN(olc_gbqt_run)(a, src + j * a->L, r * B + j * a->L, s, k_last);
        }
    }
}
