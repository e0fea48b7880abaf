/* Relu (signed types) and Sign of one integer type: olc_uact_relu_<type>,
 * olc_uact_sign_<type>, scalar only.  olc_unary.h includes it once per type
 * with OLC_UACT_T (the element), OLC_UACT_TN (i8 ... u64) and
 * OLC_UACT_SIGNED.  No include guard. */

#if OLC_UACT_SIGNED
static void OLC_CAT(olc_uact_relu, OLC_UACT_TN)(const void *px, void *py, int64_t n, const double *p) {
    const OLC_UACT_T *x = (const OLC_UACT_T *)px;
    OLC_UACT_T *y = (OLC_UACT_T *)py;
    (void)p;
    for (int64_t i = 0; i < n; ++i) {
        OLC_UACT_T v = x[i];
        y[i] = (OLC_UACT_T)(v > 0 ? v : 0);
    }
}
#endif

static void OLC_CAT(olc_uact_sign, OLC_UACT_TN)(const void *px, void *py, int64_t n, const double *p) {
    const OLC_UACT_T *x = (const OLC_UACT_T *)px;
    OLC_UACT_T *y = (OLC_UACT_T *)py;
    (void)p;
    for (int64_t i = 0; i < n; ++i) {
        OLC_UACT_T v = x[i];
#if OLC_UACT_SIGNED
        y[i] = (OLC_UACT_T)((v > 0) - (v < 0));
#else
        y[i] = (OLC_UACT_T)(v > 0);
#endif
    }
}
