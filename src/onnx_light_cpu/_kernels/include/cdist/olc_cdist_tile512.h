/* The AVX-512 register tile OLC_CDIST_TILE_FN of OLC_CDIST_R rows of a by
 * 32 columns of bt: 2R accumulators.  Runs whole tiles from row i on and
 * returns the first row it left.  Included by olc_cdist.h; no include
 * guard. */

static OLC_TARGET_AVX512 int64_t OLC_CDIST_TILE_FN(const olc_cdist_args *p, int64_t i, int64_t r1) {
    const float *a = (const float *)p->a, *bt = (const float *)p->bt; float *y = (float *)p->y;
    const int64_t N = p->N, K = p->K;
    for (; i + OLC_CDIST_R <= r1; i += OLC_CDIST_R) {
        const float *ar = a + i * K;
        for (int64_t j = 0; j < N; j += 32) {
            int64_t left = N - j;
            __mmask16 m0 = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            __mmask16 m1 = left >= 32 ? (__mmask16)0xffff
                         : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : (__mmask16)0;
            __m512 c0[OLC_CDIST_R], c1[OLC_CDIST_R];
            for (int r = 0; r < OLC_CDIST_R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
            const float *b = bt + j;
            for (int64_t k = 0; k < K; ++k, b += N) {
                __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
                for (int r = 0; r < OLC_CDIST_R; ++r) {
                    __m512 v = _mm512_set1_ps(ar[r * K + k]);
                    __m512 d0 = _mm512_sub_ps(b0, v), d1 = _mm512_sub_ps(b1, v);
                    c0[r] = _mm512_fmadd_ps(d0, d0, c0[r]);
                    c1[r] = _mm512_fmadd_ps(d1, d1, c1[r]);
                }
            }
            float *yr = y + i * N + j;
            for (int r = 0; r < OLC_CDIST_R; ++r, yr += N) {
                if (p->sqrt_) { c0[r] = _mm512_sqrt_ps(c0[r]); c1[r] = _mm512_sqrt_ps(c1[r]); }
                _mm512_mask_storeu_ps(yr, m0, c0[r]);
                _mm512_mask_storeu_ps(yr + 16, m1, c1[r]);
            }
        }
    }
    return i;
}
