/* The float64 loop of one activation (libm, the operator's formula as
 * written: the built-ins'): olc_uact_<op>_f64, scalar only.  olc_unary.h
 * includes it once per operator with OLC_UACT_OP (relu, ..., sqrt) and
 * OLC_UACT_EXPR, the result for one element v with the parameters a, b, c
 * (alpha, beta, gamma).  No include guard. */

static void OLC_CAT(OLC_CAT(olc_uact, OLC_UACT_OP), f64)(const void *px, void *py, int64_t n, const double *p) {
    const double *x = (const double *)px;
    double *y = (double *)py;
    const double a = p[0], b = p[1], c = p[2];
    (void)a;
    (void)b;
    (void)c;
    for (int64_t i = 0; i < n; ++i) {
        double v = x[i];
        y[i] = (OLC_UACT_EXPR);
    }
}
