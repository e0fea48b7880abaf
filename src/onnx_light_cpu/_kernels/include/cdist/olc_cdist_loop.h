/* The plain distance loop olc_cdist_<type>_<level> of one level and element
 * type OLC_CDIST_TN (f32, f64): output columns in tiles that stay in L1
 * while k runs, the inner loop over j for the compiler to vectorise.
 * Included by olc_cdist.h; no include guard. */

OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_cdist, OLC_CDIST_TN))(const olc_cdist_args *p, int64_t r0,
                                                                 int64_t r1) {
    typedef OLC_CAT(olc_cdist_t, OLC_CDIST_TN) T;
    const T *a = (const T *)p->a, *bt = (const T *)p->bt; T *y = (T *)p->y;
    const int64_t N = p->N, K = p->K;
    for (int64_t i = r0; i < r1; ++i) {
        T *restrict yr = y + i * N;
        const T *ar = a + i * K;
        for (int64_t j0 = 0; j0 < N; j0 += OLC_CDIST_TILE) {
            int64_t j1 = j0 + OLC_CDIST_TILE < N ? j0 + OLC_CDIST_TILE : N;
            for (int64_t j = j0; j < j1; ++j) yr[j] = 0;
            for (int64_t k = 0; k < K; ++k) {
                const T av = ar[k];
                const T *restrict br = bt + k * N;
                for (int64_t j = j0; j < j1; ++j) {
                    T d = br[j] - av;
                    yr[j] += d * d;
                }
            }
            if (p->sqrt_)
                for (int64_t j = j0; j < j1; ++j) yr[j] = OLC_CAT(OLC_CDIST_SQRT, OLC_CDIST_TN)(yr[j]);
        }
    }
}
