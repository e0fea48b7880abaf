/* Softmax along the middle axis of an [N, inner] block of one float type,
 * columns [c0, c1): max per column, exp, column sums, scale.  A body file
 * (not per level): olc_reduce.h includes it for float32 and float64 with
 * OLC_T (the type), OLC_TN (its name: olc_softmax_cols_<TN>) and OLC_EXP
 * (its exp) set; the body undefines them. */

static void OLC_CAT(olc_softmax_cols, OLC_TN)(const OLC_T *x, OLC_T *y, int64_t N, int64_t inner,
                                               int64_t c0, int64_t c1) {
    OLC_T m[OLC_COL_BLOCK], s[OLC_COL_BLOCK];
    for (int64_t b0 = c0; b0 < c1; b0 += OLC_COL_BLOCK) {
        int64_t w = c1 - b0 < OLC_COL_BLOCK ? c1 - b0 : OLC_COL_BLOCK;
        for (int64_t c = 0; c < w; ++c) {
            m[c] = -INFINITY;
            s[c] = 0;
        }
        for (int64_t r = 0; r < N; ++r)
            for (int64_t c = 0; c < w; ++c) {
                OLC_T v = x[r * inner + b0 + c];
                m[c] = v > m[c] || v != v ? v : m[c];
            }
        for (int64_t r = 0; r < N; ++r)
            for (int64_t c = 0; c < w; ++c) {
                OLC_T e = OLC_EXP(x[r * inner + b0 + c] - m[c]);
                y[r * inner + b0 + c] = e;
                s[c] += e;
            }
        for (int64_t r = 0; r < N; ++r)
            for (int64_t c = 0; c < w; ++c) y[r * inner + b0 + c] /= s[c];
    }
}

#undef OLC_T
#undef OLC_TN
#undef OLC_EXP
