/* The plain apply of one level, arithmetic, x type and scale type
 * OLC_NORM_TS (scale, bias and y).  Included by olc_normalization_plain_x.h;
 * no include guard. */

OLC_LVL_ATTR static void OLC_NORM_FN_XS(olc_norm_apply)(const void *px, int64_t n, double mean_,
                                                       double inv_, const void *ps, const void *pb,
                                                       void *py) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    const OLC_NORM_S *s = (const OLC_NORM_S *)ps, *b = (const OLC_NORM_S *)pb;
    OLC_NORM_S *y = (OLC_NORM_S *)py;
    OLC_NORM_A mean = (OLC_NORM_A)mean_, inv = (OLC_NORM_A)inv_;
    if (b) {
        for (int64_t i = 0; i < n; ++i)
            y[i] = OLC_NORM_ST_S(((OLC_NORM_A)OLC_NORM_LD_X(x, i) - mean) * inv *
                                 (OLC_NORM_A)OLC_NORM_LD_S(s, i) + (OLC_NORM_A)OLC_NORM_LD_S(b, i));
    } else {
        for (int64_t i = 0; i < n; ++i)
            y[i] = OLC_NORM_ST_S(((OLC_NORM_A)OLC_NORM_LD_X(x, i) - mean) * inv *
                                 (OLC_NORM_A)OLC_NORM_LD_S(s, i));
    }
}
