/* Body (no include guard): the blocked loop of one arithmetic type OLC_GT
 * at one level, olc_gemm_<OLC_GN>_<OLC_LVL> (olc_gemm_f64_avx2, ...);
 * included by olc_gemm_generic.h.
 *
 * Rows i0..i1 of C (row-major, N columns) = A B; A strided, B row-major
 * contiguous (N columns).  Blocks of 4 rows x 16 columns are summed over
 * all of K in a fixed-size array the compiler keeps in vector registers;
 * the last columns (fewer than 16) go through a plain loop.  Each element
 * is summed in k order either way. */
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_gemm, OLC_GN))(const void *av, int64_t rsa,
                                                           int64_t csa, const void *bv, void *cv,
                                                           int64_t N, int64_t K, int64_t i0,
                                                           int64_t i1) {
    const OLC_GT *a = (const OLC_GT *)av, *b = (const OLC_GT *)bv;
    OLC_GT *c = (OLC_GT *)cv;
    int64_t nfull = N - N % 16;
    for (int64_t i = i0; i < i1; i += 4) {
        int64_t rows = i1 - i < 4 ? i1 - i : 4;
        for (int64_t j0 = 0; j0 < nfull; j0 += 16) {
            OLC_GT acc[4][16];
            for (int r = 0; r < 4; ++r)
                for (int j = 0; j < 16; ++j) acc[r][j] = 0;
            for (int64_t k = 0; k < K; ++k) {
                const OLC_GT *bk = b + k * N + j0;
                for (int r = 0; r < 4; ++r) {
                    OLC_GT ar = r < rows ? a[(i + r) * rsa + k * csa] : 0;
                    for (int j = 0; j < 16; ++j) acc[r][j] += ar * bk[j];
                }
            }
            for (int64_t r = 0; r < rows; ++r)
                memcpy(c + (i + r) * N + j0, acc[r], 16 * sizeof(OLC_GT));
        }
        for (int64_t r = 0; r < rows; ++r) {
            OLC_GT *cr = c + (i + r) * N;
            for (int64_t j = nfull; j < N; ++j) {
                OLC_GT s = 0;
                for (int64_t k = 0; k < K; ++k) s += a[(i + r) * rsa + k * csa] * b[k * N + j];
                cr[j] = s;
            }
        }
    }
}
