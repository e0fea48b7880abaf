/* The ScatterND update loop of one element type (a body file, like those
 * of common/olc_level.h but not per level).  olc_tensor.h includes it once
 * per type with these set, and the body undefines them at its end:
 *
 *   OLC_T      the element type
 *   OLC_TN     its name: the function is olc_scatter_<TN>
 *   OLC_U      for an integer type: the unsigned type sums and products
 *              wrap through, as NumPy's do
 *   OLC_LD(v), OLC_ST(v)  for a float type: an element as a C float or
 *              double and back (one operation in float32 rounded back to
 *              float16 / bfloat16 equals the operation rounded directly:
 *              float32 has more than 2p+2 bits)
 *
 * y[off[i] + t] op= u[i * slice + t] in update order (duplicates follow
 * each other as in the sequential definition).  max/min follow
 * numpy.maximum/minimum: a NaN on either side wins.
 */

static void OLC_CAT(olc_scatter, OLC_TN)(void *py, const void *pu, const int64_t *off, int64_t m,
                                          int64_t slice, int red) {
    OLC_T *y = (OLC_T *)py;
    const OLC_T *u = (const OLC_T *)pu;
    for (int64_t i = 0; i < m; ++i) {
        OLC_T *d = y + off[i];
        const OLC_T *s = u + i * slice;
        switch (red) {
#ifdef OLC_U
        case OLC_RED_ADD:
            for (int64_t t = 0; t < slice; ++t) d[t] = (OLC_T)(OLC_U)((OLC_U)d[t] + (OLC_U)s[t]);
            break;
        case OLC_RED_MUL:
            for (int64_t t = 0; t < slice; ++t) d[t] = (OLC_T)(OLC_U)((OLC_U)d[t] * (OLC_U)s[t]);
            break;
        case OLC_RED_MAX:
            for (int64_t t = 0; t < slice; ++t) d[t] = s[t] > d[t] ? s[t] : d[t];
            break;
        case OLC_RED_MIN:
            for (int64_t t = 0; t < slice; ++t) d[t] = s[t] < d[t] ? s[t] : d[t];
            break;
#else
        case OLC_RED_ADD:
            for (int64_t t = 0; t < slice; ++t) d[t] = OLC_ST(OLC_LD(d[t]) + OLC_LD(s[t]));
            break;
        case OLC_RED_MUL:
            for (int64_t t = 0; t < slice; ++t) d[t] = OLC_ST(OLC_LD(d[t]) * OLC_LD(s[t]));
            break;
        case OLC_RED_MAX:
            for (int64_t t = 0; t < slice; ++t) {
                __typeof__(OLC_LD(d[t])) a = OLC_LD(d[t]), b = OLC_LD(s[t]);
                d[t] = (a != a) ? d[t] : (b != b || b > a) ? s[t] : d[t];
            }
            break;
        case OLC_RED_MIN:
            for (int64_t t = 0; t < slice; ++t) {
                __typeof__(OLC_LD(d[t])) a = OLC_LD(d[t]), b = OLC_LD(s[t]);
                d[t] = (a != a) ? d[t] : (b != b || b < a) ? s[t] : d[t];
            }
            break;
#endif
        default: memcpy(d, s, (size_t)slice * sizeof(OLC_T));
        }
    }
}

#undef OLC_T
#undef OLC_TN
#undef OLC_U
#undef OLC_LD
#undef OLC_ST
