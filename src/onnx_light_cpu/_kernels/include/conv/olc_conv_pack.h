/* Body (no include guard): olc_conv_pack_cols at one level; olc_conv.h
 * includes it once per level (common/olc_each_level.h), so that the
 * strided gathers of the columns vectorise at the level's width.  It only
 * moves values: every level writes the same columns. */
OLC_LVL_ATTR static void OLC_FN(olc_conv_pack_cols)(const olc_conv_geom *g, const float *x,
                                                    const olc_conv_seg *seg, int64_t nseg,
                                                    int64_t pt, int64_t k0, int64_t k1,
                                                    int64_t nr, float *lines, float *dst) {
    int64_t kk = g->kd * g->kh * g->kw, K = g->C * kk, s = g->sw;
    int64_t npad = (pt + nr - 1) / nr * nr;
    /* row k is input channel c, tap (a, b, e): stepped row by row, not
     * divided out (with the segment bounds' divisions gone and
     * olc_conv_even: 3x3/2 128 -> 128 at 56x56, 1 thread, 2484 -> 2393 us,
     * of which the columns took about 436) */
    int64_t c = k0 / kk, r = k0 % kk;
    int64_t a = r / (g->kh * g->kw), b = (r / g->kw) % g->kh, e = r % g->kw;
    for (int64_t k = k0; k < k1; ++k) {
        float *line = lines + (k - k0) * npad;
        const float *xc = x + c * g->D * g->H * g->W;
        for (int64_t j = pt; j < npad; ++j) line[j] = 0.0f;
        for (int64_t t = 0; t < nseg; ++t) {
            float *out = line + seg[t].j;
            int64_t L = seg[t].len;
            int64_t id = seg[t].d0 + a * g->dd, ih = seg[t].h0 + b * g->dh;
            if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) {
                memset(out, 0, (size_t)L * sizeof(float));
                continue;
            }
            const float *xr = xc + (id * g->H + ih) * g->W;
            /* columns lo..hi of the segment read the row, the others are pads */
            int64_t iw0 = seg[t].w0 + e * g->dw;
            int64_t lo = iw0 >= 0 ? 0 : olc_conv_ceil_div(-iw0, s);
            int64_t hi = g->W - iw0 > 0 ? olc_conv_ceil_div(g->W - iw0, s) : 0;
            if (hi > L) hi = L;
            if (lo > hi) lo = hi;
            for (int64_t q = 0; q < lo; ++q) out[q] = 0.0f;
            if (s == 1)
                memcpy(out + lo, xr + iw0 + lo, (size_t)(hi - lo) * sizeof(float));
            else if (s == 2)
                OLC_FN(olc_conv_even)(out + lo, xr + iw0 + 2 * lo, hi - lo);
            else
                for (int64_t q = lo; q < hi; ++q) out[q] = xr[iw0 + q * s];
            for (int64_t q = hi; q < L; ++q) out[q] = 0.0f;
        }
        if (olc_conv_next_tap(g, &a, &b, &e)) ++c;
    }
    /* k0..k1 never cross a block of OLC_GEMM_KC rows (both multiples of 16) */
    int64_t pc = k0 / OLC_GEMM_KC * OLC_GEMM_KC;
    int64_t kc = K - pc < OLC_GEMM_KC ? K - pc : OLC_GEMM_KC;
    float *base = dst + pc * npad + (k0 - pc) * nr;
    int64_t rows = k1 - k0;
    for (int64_t jb = 0; jb < npad; jb += nr) {
        float *d = base + jb * kc;
        if (nr == 16)
            for (int64_t q = 0; q < rows; ++q) memcpy(d + q * 16, lines + q * npad + jb, 64);
        else if (nr == 32)
            for (int64_t q = 0; q < rows; ++q) memcpy(d + q * 32, lines + q * npad + jb, 128);
        else
            for (int64_t q = 0; q < rows; ++q)
                memcpy(d + q * nr, lines + q * npad + jb, (size_t)nr * sizeof(float));
    }
}
