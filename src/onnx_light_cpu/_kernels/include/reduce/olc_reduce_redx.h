/* One kind of ReduceMax, ReduceMin, ReduceProd or ReduceSum on one element
 * type at one level (a body file, see common/olc_level.h): the functions
 * olc_redx_rows_<kind>_<type>_<level> and olc_redx_cols_<kind>_<type>_<level>
 * (what they compute: reduce/olc_reduce_ext.h).  reduce/olc_reduce_kinds.h
 * includes it once per kind with
 *
 *     OLC_REDX_KIND       max, min, prod or sum
 *     OLC_REDX_INIT       the kind's identity on the accumulator type
 *     OLC_REDX_JOIN(a, v) one step (OLC_REDX_MAX, _MIN, _MUL, _ADD)
 *     OLC_REDX_NANCHK(v)  1 for a NaN the result must take (Max, Min on floats)
 *     OLC_REDX_PAD        1: the row's tail joins all 16 lanes, padded with
 *                         the identity (faster for the sums and products,
 *                         slower for Max and Min with their NaN flag)
 *
 * and the type's OLC_REDX_TN (name), OLC_REDX_T (element), OLC_REDX_A
 * (accumulator), OLC_REDX_LOAD(v), OLC_REDX_STORE(v).  Rows shorter than two
 * lane widths run in one sequence, longer ones in 16 lanes.  No include
 * guard. */

OLC_LVL_ATTR static void OLC_FN(OLC_CAT(OLC_CAT(olc_redx_rows, OLC_REDX_KIND), OLC_REDX_TN))(
        const void *px, void *po, int64_t R, int64_t a0, int64_t a1) {
    typedef OLC_REDX_T T;
    typedef OLC_REDX_A A;
    const T *x = (const T *)px;
    T *out = (T *)po;
    for (int64_t a = a0; a < a1; ++a) {
        const T *row = x + a * R;
        int nan = 0;
        A r = (A)(OLC_REDX_INIT);
        if (R < 2 * OLC_REDX_LANES) {
            for (int64_t i = 0; i < R; ++i) {
                A v = OLC_REDX_LOAD(row[i]);
                nan |= OLC_REDX_NANCHK(v);
                r = OLC_REDX_JOIN(r, v);
            }
        } else {
            A acc[OLC_REDX_LANES];
            for (int j = 0; j < OLC_REDX_LANES; ++j) acc[j] = (A)(OLC_REDX_INIT);
            int64_t i = 0;
            for (; i + OLC_REDX_LANES <= R; i += OLC_REDX_LANES)
                for (int j = 0; j < OLC_REDX_LANES; ++j) {
                    A v = OLC_REDX_LOAD(row[i + j]);
                    nan |= OLC_REDX_NANCHK(v);
                    acc[j] = OLC_REDX_JOIN(acc[j], v);
                }
            if (!(OLC_REDX_PAD)) {
                for (int j = 0; i + j < R; ++j) {
                    A v = OLC_REDX_LOAD(row[i + j]);
                    nan |= OLC_REDX_NANCHK(v);
                    acc[j] = OLC_REDX_JOIN(acc[j], v);
                }
            } else if (i < R) { /* the tail padded with the identity: acc keeps constant indices */
                A tail[OLC_REDX_LANES];
                for (int j = 0; j < OLC_REDX_LANES; ++j) tail[j] = i + j < R ? OLC_REDX_LOAD(row[i + j]) : (A)(OLC_REDX_INIT);
                for (int j = 0; j < OLC_REDX_LANES; ++j) {
                    A v = tail[j];
                    nan |= OLC_REDX_NANCHK(v);
                    acc[j] = OLC_REDX_JOIN(acc[j], v);
                }
            }
            for (int w = OLC_REDX_LANES / 2; w >= 1; w /= 2)
                for (int j = 0; j < w; ++j) acc[j] = OLC_REDX_JOIN(acc[j], acc[j + w]);
            r = acc[0];
        }
        out[a] = (T)OLC_REDX_STORE(nan ? (A)NAN : r);
    }
}

OLC_LVL_ATTR static void OLC_FN(OLC_CAT(OLC_CAT(olc_redx_cols, OLC_REDX_KIND), OLC_REDX_TN))(
        const void *px, void *po, int64_t R, int64_t B, int64_t b0, int64_t b1) {
    typedef OLC_REDX_T T;
    typedef OLC_REDX_A A;
    const T *x = (const T *)px;
    T *out = (T *)po;
    A acc[OLC_COL_BLOCK];
    unsigned char nan[OLC_COL_BLOCK];
    for (int64_t c0 = b0; c0 < b1; c0 += OLC_COL_BLOCK) {
        int64_t m = b1 - c0 < OLC_COL_BLOCK ? b1 - c0 : OLC_COL_BLOCK;
        for (int64_t b = 0; b < m; ++b) {
            acc[b] = (A)(OLC_REDX_INIT);
            nan[b] = 0;
        }
        for (int64_t r = 0; r < R; ++r) {
            const T *row = x + r * B + c0;
            for (int64_t b = 0; b < m; ++b) {
                A v = OLC_REDX_LOAD(row[b]);
                nan[b] |= (unsigned char)OLC_REDX_NANCHK(v);
                acc[b] = OLC_REDX_JOIN(acc[b], v);
            }
        }
        for (int64_t b = 0; b < m; ++b) out[c0 + b] = (T)OLC_REDX_STORE(nan[b] ? (A)NAN : acc[b]);
    }
}
