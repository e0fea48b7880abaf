/* The float32 output rows of the spatial pools at one vector level (a body
 * file, see common/olc_level.h): olc_pooling_rows_f32_<level> and
 * olc_pooling_rows_sep_<level>, accumulators in registers; and the global
 * pools' planes, olc_pooling_gplane_f32_<level>.  olc_pooling.h
 * includes it at AVX2 and AVX-512 with
 *
 *     OLC_POOLING_VW      the floats in a vector (8, 16)
 *     OLC_POOLING_MASKED  0 (AVX2): two vectors at a time, then whole
 *                         vectors, the last one ending at b (it may redo a
 *                         few columns: the same values); an interior
 *                         narrower than a vector goes the scalar way.
 *                         1 (AVX-512): one vector at a time, the last one
 *                         masked to the columns left.
 *
 * and the level's words olc_pooling_{set,op,part,part_of,ld,ld2,st,ldm}_<level>
 * and olc_pooling_{gop,ldu,ldt,fold}_<level> (see
 * olc_pooling.h).  The scalar twin is olc_pooling_rows_f32_scalar: every
 * column takes the same operations in the same order (the square fused
 * into the add aside).  No include guard. */

/* The interior columns [a, b) of a row for one op and stride (constants
 * once inlined into olc_pooling_rows_f32), the row's fields in locals. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_pooling_vec)(
    float *yr, const float *const *rows, int nrows, const olc_pooling_rowspec *r, int64_t a, int64_t b,
    const int op, const int64_t s) {
    typedef OLC_FN(olc_vf) V;
    const int64_t kw = r->kw, dw = r->dw, pw = r->pw;
    const float *cw = r->cw;
    const V init = OLC_FN(olc_pooling_set)(r->init), cdh = OLC_FN(olc_pooling_set)(r->cdh);
    const int seed = op == OLC_POOLING_OP_MAX;
    int64_t j = a;
#if !OLC_POOLING_MASKED
    const OLC_FN(olc_pooling_part) whole = OLC_FN(olc_pooling_part_of)(OLC_POOLING_VW);
    /* two vectors at a time: two independent chains */
    for (; j + 2 * OLC_POOLING_VW <= b; j += 2 * OLC_POOLING_VW) {
        V acc0 = init, acc1 = init;
        for (int q = 0; q < nrows; ++q) {
            const float *base = rows[q] + j * s - pw;
            for (int64_t k = 0; k < kw; ++k, base += dw) {
                V v0 = s == 1 ? OLC_FN(olc_pooling_ld)(base, whole)
                              : OLC_FN(olc_pooling_ld2)(base, whole);
                V v1 = s == 1 ? OLC_FN(olc_pooling_ld)(base + OLC_POOLING_VW, whole)
                              : OLC_FN(olc_pooling_ld2)(base + 2 * OLC_POOLING_VW, whole);
                if (seed && q == 0 && k == 0) {
                    acc0 = v0;
                    acc1 = v1;
                } else {
                    acc0 = OLC_FN(olc_pooling_op)(acc0, v0, op);
                    acc1 = OLC_FN(olc_pooling_op)(acc1, v1, op);
                }
            }
        }
        if (cw) {
            acc0 = acc0 / (cdh * OLC_FN(olc_pooling_ld)(cw + j, whole));
            acc1 = acc1 / (cdh * OLC_FN(olc_pooling_ld)(cw + j + OLC_POOLING_VW, whole));
        }
        OLC_FN(olc_pooling_st)(yr + j, OLC_POOLING_VW, acc0);
        OLC_FN(olc_pooling_st)(yr + j + OLC_POOLING_VW, OLC_POOLING_VW, acc1);
    }
#endif
    for (; j < b; j += OLC_POOLING_VW) {
#if OLC_POOLING_MASKED
        const OLC_FN(olc_pooling_part) n = OLC_FN(olc_pooling_part_of)(b - j < OLC_POOLING_VW ? b - j : OLC_POOLING_VW);
#else
        const OLC_FN(olc_pooling_part) n = whole;
        if (j + OLC_POOLING_VW > b) j = b - OLC_POOLING_VW;
#endif
        V acc = init;
        for (int q = 0; q < nrows; ++q) {
            const float *base = rows[q] + j * s - pw;
            for (int64_t k = 0; k < kw; ++k, base += dw) {
                V v = s == 1 ? OLC_FN(olc_pooling_ld)(base, n) : OLC_FN(olc_pooling_ld2)(base, n);
                acc = seed && q == 0 && k == 0 ? v : OLC_FN(olc_pooling_op)(acc, v, op);
            }
        }
        if (cw) acc = acc / (cdh * OLC_FN(olc_pooling_ld)(cw + j, n));
        OLC_FN(olc_pooling_st)(yr + j, n, acc);
    }
}

/* Separable sums (AveragePool, LpPool with p = 2): the window's input
 * rows added column by column into t (squares for LpPool), then each
 * output column sums its taps of t: 2 + 2 adds an output instead of 8 for
 * a 3x3 window.  The sums run in another order than the scalar twin's
 * row-major one (within float32 rounding; the same at every thread count).
 * The max keeps the direct path: the first tap's NaN rule is not
 * separable.  t has room for a vector past W. */
OLC_LVL_ATTR static void OLC_FN(olc_pooling_vertical)(float *t, const float *const *rows, int nrows,
                                                     int64_t W, int op) {
    typedef OLC_FN(olc_vf) V;
    int64_t w = 0;  /* op is ADD or SQ */
#if !OLC_POOLING_MASKED
    const OLC_FN(olc_pooling_part) whole = OLC_FN(olc_pooling_part_of)(OLC_POOLING_VW);
    for (; w + OLC_POOLING_VW <= W; w += OLC_POOLING_VW) {
        V v = OLC_FN(olc_pooling_ld)(rows[0] + w, whole);
        if (op == OLC_POOLING_OP_SQ) v = v * v;
        for (int q = 1; q < nrows; ++q) v = OLC_FN(olc_pooling_op)(v, OLC_FN(olc_pooling_ld)(rows[q] + w, whole), op);
        OLC_FN(olc_pooling_st)(t + w, OLC_POOLING_VW, v);
    }
#endif
    for (; w < W; w += OLC_POOLING_VW) {  /* AVX2: the tail, once */
        V v = OLC_FN(olc_pooling_ldm)(rows[0] + w, W - w);
        if (op == OLC_POOLING_OP_SQ) v = v * v;
        for (int q = 1; q < nrows; ++q) v = OLC_FN(olc_pooling_op)(v, OLC_FN(olc_pooling_ldm)(rows[q] + w, W - w), op);
        OLC_FN(olc_pooling_st)(t + w, OLC_FN(olc_pooling_part_of)(W - w), v);
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_pooling_rows_f32)(float *yr, const float *const *rows, int nrows,
                                                     const olc_pooling_rowspec *r) {
    const int64_t a = r->a, b = r->b;
    const int64_t s = r->s;
    if (s > 2) { olc_pooling_rows_f32_scalar(yr, rows, nrows, r); return; }
    olc_pooling_cols_f32(yr, rows, nrows, r, 0, a);
    olc_pooling_cols_f32(yr, rows, nrows, r, b, r->OW);
#if OLC_POOLING_MASKED
    if (a >= b) return;
#else
    if (b - a < OLC_POOLING_VW) { olc_pooling_inner_f32(yr, rows, nrows, r, a, b); return; }
#endif
    switch (r->op * 2 + (int)(s - 1)) {
    case 0: OLC_FN(olc_pooling_vec)(yr, rows, nrows, r, a, b, OLC_POOLING_OP_MAX, 1); break;
    case 1: OLC_FN(olc_pooling_vec)(yr, rows, nrows, r, a, b, OLC_POOLING_OP_MAX, 2); break;
    case 2: OLC_FN(olc_pooling_vec)(yr, rows, nrows, r, a, b, OLC_POOLING_OP_ADD, 1); break;
    case 3: OLC_FN(olc_pooling_vec)(yr, rows, nrows, r, a, b, OLC_POOLING_OP_ADD, 2); break;
    case 4: OLC_FN(olc_pooling_vec)(yr, rows, nrows, r, a, b, OLC_POOLING_OP_SQ, 1); break;
    default: OLC_FN(olc_pooling_vec)(yr, rows, nrows, r, a, b, OLC_POOLING_OP_SQ, 2); break;
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_pooling_rows_sep)(float *yr, const float *const *rows, int nrows,
                                                     const olc_pooling_rowspec *r) {
    if (nrows > 1 && r->op != OLC_POOLING_OP_MAX && r->t && r->W <= OLC_POOLING_TROW && r->s <= 2) {
        float *t = r->t;
        const float *one[1] = {t};
        olc_pooling_rowspec h = *r;
        OLC_FN(olc_pooling_vertical)(t, rows, nrows, r->W, r->op);
        if (h.op == OLC_POOLING_OP_SQ) h.op = OLC_POOLING_OP_ADD;
        OLC_FN(olc_pooling_rows_f32)(yr, one, 1, &h);
        return;
    }
    OLC_FN(olc_pooling_rows_f32)(yr, rows, nrows, r);
}

/* float32 global pools: one plane of n elements reduced to its sum (how
 * 0), sum of |x| (1), of squares (2) or its max (4, every lane starting
 * from x[0]).  Two vector accumulators, a masked tail, then the lanes in a
 * fixed order: the same bits at every thread count (the levels add in
 * different orders).  The scalar twin is olc_pooling_global_f32_scalar's
 * sixteen partials. */
OLC_LVL_ATTR static float OLC_FN(olc_pooling_gplane_f32)(const float *x, int64_t n, int how) {
    typedef OLC_FN(olc_vf) V;
    const float init = how == 4 ? x[0] : 0.0f;
    const V vi = OLC_FN(olc_pooling_set)(init);
    V a0 = vi, a1 = vi;
    int64_t j = 0;
    for (; j + 2 * OLC_POOLING_VW <= n; j += 2 * OLC_POOLING_VW) {
        a0 = OLC_FN(olc_pooling_gop)(a0, OLC_FN(olc_pooling_ldu)(x + j), how);
        a1 = OLC_FN(olc_pooling_gop)(a1, OLC_FN(olc_pooling_ldu)(x + j + OLC_POOLING_VW), how);
    }
    if (j + OLC_POOLING_VW <= n) {
        a0 = OLC_FN(olc_pooling_gop)(a0, OLC_FN(olc_pooling_ldu)(x + j), how);
        j += OLC_POOLING_VW;
    }
    if (j < n) a1 = OLC_FN(olc_pooling_gop)(a1, OLC_FN(olc_pooling_ldt)(x + j, n - j, vi, how), how);
    return OLC_FN(olc_pooling_fold)(a0, a1, how);
}
