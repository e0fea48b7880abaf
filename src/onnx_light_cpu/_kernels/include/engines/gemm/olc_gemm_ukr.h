/* The float32 micro-kernels of one vector level (a body file: see
 * common/olc_level.h), included by olc_gemm.h for avx2 and avx512.
 *
 * The includer defines OLC_LVL, OLC_LVL_ATTR, OLC_UKR_MR and OLC_UKR_NR
 * (rows and columns of a block: 6 x 16 on AVX2, 12 x 32 on AVX-512, two
 * vectors a row), and the level's steps olc_gemm_<step>_<level>: zero,
 * broadcast of one float of A, load and store of a whole vector, fma,
 * mul, and the column edge of a row (the first ncols columns only: through
 * a buffer on AVX2, masked on AVX-512).
 *
 * The kernels are written once with the row count R as a parameter,
 * always inlined into one function per R (olc_ukr_<level>_<R>,
 * olc_ukr_<level>_direct_<R>, olc_ukr_<level>_strided_<R>: the entries of
 * olc_sgemm_cfg): R is then a constant, the loops over rows unroll and the
 * accumulators stay in registers. */

#define OLC_UKR(name) OLC_CAT(OLC_FN(olc_ukr), name)
#define OLC_UKR_V OLC_FN(olc_vf)
#define OLC_UKR_W (OLC_UKR_NR / 2)

/* A panel's last NR/2 columns or fewer (P = 49 pixels on AVX2: 3 panels
 * and 1 column): the left half of the panel only, half the multiply-adds.
 * Each lane is summed as in the full kernel, so results do not change. */
static inline __attribute__((always_inline)) OLC_LVL_ATTR void
OLC_UKR(half)(const int R, const int direct, int64_t kc, const float *a, int64_t lda,
              const float *b, int64_t ldb, float *c, int64_t ldc, float alpha, int acc,
              int64_t ncols) {
    int64_t sb = ldb ? ldb : OLC_UKR_NR;
    OLC_UKR_V t0[OLC_UKR_MR];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) t0[r] = OLC_FN(olc_gemm_zero)();
    for (int64_t k = 0; k < kc; ++k) {
        OLC_UKR_V b0 = OLC_FN(olc_gemm_ld)(b + k * sb);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            OLC_UKR_V ar = OLC_FN(olc_gemm_bcast)(direct ? &a[r * lda + k] : &a[k * OLC_UKR_MR + r]);
            t0[r] = OLC_FN(olc_gemm_fma)(ar, b0, t0[r]);
        }
    }
    OLC_UKR_V va = OLC_FN(olc_gemm_set1)(alpha);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        float *cr = c + r * ldc;
        OLC_FN(olc_gemm_edge1)(cr, ncols, va, t0[r], acc);
    }
}

#ifdef OLC_UKR_NARROW
/* A panel's last OLC_UKR_NARROW columns or fewer, on the vectors of level
 * OLC_UKR_NARROW_LVL, that wide (AVX-512: AVX2's 8 lanes of 256 bits,
 * half the half kernel's multiply-adds; a 1x1 Conv at 14x14 ends its 196
 * columns with 4), stored by the level's olc_gemm_nedge.  Each lane is
 * summed as in the full kernel: the same bits (ARCHITECTURE.md,
 * "Convolution"). */
#define OLC_UKR_NFN(name) OLC_CAT(name, OLC_UKR_NARROW_LVL)
#define OLC_UKR_NV OLC_UKR_NFN(olc_vf)
static inline __attribute__((always_inline)) OLC_LVL_ATTR void
OLC_UKR(narrow)(const int R, const int direct, int64_t kc, const float *a, int64_t lda,
                const float *b, int64_t ldb, float *c, int64_t ldc, float alpha, int acc,
                int64_t ncols) {
    int64_t sb = ldb ? ldb : OLC_UKR_NR;
    OLC_UKR_NV t0[OLC_UKR_MR];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) t0[r] = OLC_UKR_NFN(olc_gemm_zero)();
    for (int64_t k = 0; k < kc; ++k) {
        OLC_UKR_NV b0 = OLC_UKR_NFN(olc_gemm_ld)(b + k * sb);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            OLC_UKR_NV ar = OLC_UKR_NFN(olc_gemm_bcast)(direct ? &a[r * lda + k] : &a[k * OLC_UKR_MR + r]);
            t0[r] = OLC_UKR_NFN(olc_gemm_fma)(ar, b0, t0[r]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) OLC_FN(olc_gemm_nedge)(c + r * ldc, ncols, alpha, t0[r], acc);
}
#undef OLC_UKR_NFN
#undef OLC_UKR_NV
#endif

/* A whole micro-tile's store with an olc_ukr_epi (olc_gemm.h): each sum as
 * the plain store makes it, then + bias, + z and the activation, each
 * rounded as olc_conv_epilogue rounds it (max(a, v) keeps a NaN v). */
static inline __attribute__((always_inline)) OLC_LVL_ATTR void
OLC_UKR(store_epi)(const int R, float *c, int64_t ldc, OLC_UKR_V va, int acc,
                   const OLC_UKR_V *t0, const OLC_UKR_V *t1, const olc_ukr_epi *epi) {
    const int act = epi->act;
    const OLC_UKR_V lo = OLC_FN(olc_gemm_set1)(act == OLC_UKR_EPI_CLIP ? epi->a : 0.0f);
    const OLC_UKR_V hi = OLC_FN(olc_gemm_set1)(epi->b);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        float *cr = c + r * ldc;
        OLC_UKR_V v[2] = {t0[r], t1[r]};
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            float *p = cr + h * OLC_UKR_W;
            OLC_UKR_V x = acc ? OLC_FN(olc_gemm_fma)(va, v[h], OLC_FN(olc_gemm_ld)(p))
                              : OLC_FN(olc_gemm_mul)(va, v[h]);
            if (epi->bias != NULL)
                x = OLC_FN(olc_gemm_add)(x, OLC_FN(olc_gemm_set1)(epi->bias[r]));
            if (epi->z != NULL) {
                const float *zr = epi->z + r * epi->ldz + h * OLC_UKR_W;
                x = OLC_FN(olc_gemm_add)(x, OLC_FN(olc_gemm_ld)(zr));
            }
            if (act != OLC_UKR_EPI_NONE) x = OLC_FN(olc_gemm_max)(lo, x);
            if (act == OLC_UKR_EPI_CLIP) x = OLC_FN(olc_gemm_min)(hi, x);
            OLC_FN(olc_gemm_st)(p, x);
        }
    }
}

/* direct: row r of A at a + r * lda (A read in place); else a packed
 * micro-panel, element (k, r) at a[k * MR + r].  ldb: row k of B at
 * b + k * ldb (B read in place); 0: a packed panel, row k at b + k * NR. */
static inline __attribute__((always_inline)) OLC_LVL_ATTR void
OLC_UKR(rows)(const int R, const int direct, int64_t kc, const float *a, int64_t lda,
              const float *b, int64_t ldb, float *c, int64_t ldc, float alpha, int acc,
              int64_t ncols, const olc_ukr_epi *epi) {
#ifdef OLC_UKR_NARROW
    if (ncols <= OLC_UKR_NARROW) {
        OLC_UKR(narrow)(R, direct, kc, a, lda, b, ldb, c, ldc, alpha, acc, ncols);
        return;
    }
#endif
    if (ncols <= OLC_UKR_W) {
        OLC_UKR(half)(R, direct, kc, a, lda, b, ldb, c, ldc, alpha, acc, ncols);
        return;
    }
    int64_t sb = ldb ? ldb : OLC_UKR_NR;
    if (ncols == OLC_UKR_NR) {
        /* ask for the lines this call stores (for writing) and the
         * residual it adds, while the sums run: at batch 8 a Conv's output
         * and Z come from memory (2 threads, in one process alternating:
         * ResNet-50 340 -> 321 ms, DenseNet-121 290 -> 274-281, MobileNet-V2
         * 35.6-39.1 -> 34.6-38.4; batch 1 the same within the noise) */
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            __builtin_prefetch(c + r * ldc, 1, 3);
            if (OLC_UKR_NR * sizeof(float) > 64) __builtin_prefetch(c + r * ldc + 16, 1, 3);
            if (epi != NULL && epi->z != NULL) {
                __builtin_prefetch(epi->z + r * epi->ldz, 0, 3);
                if (OLC_UKR_NR * sizeof(float) > 64)
                    __builtin_prefetch(epi->z + r * epi->ldz + 16, 0, 3);
            }
        }
    }
    /* a few rows of packed weights: ask for them ahead (olc_gemm.h) */
    const int stream = R <= OLC_GEMM_STREAM_ROWS && ldb == 0 && !olc_cpu_is_amd();
    OLC_UKR_V t0[OLC_UKR_MR], t1[OLC_UKR_MR];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        t0[r] = OLC_FN(olc_gemm_zero)(); t1[r] = OLC_FN(olc_gemm_zero)();
    }
    for (int64_t k = 0; k < kc; ++k) {
        OLC_UKR_V b0 = OLC_FN(olc_gemm_ld)(b + k * sb);
        OLC_UKR_V b1 = OLC_FN(olc_gemm_ld)(b + k * sb + OLC_UKR_W);
        if (stream) {
            const char *ahead = (const char *)(b + k * OLC_UKR_NR) + OLC_GEMM_AHEAD;
            __builtin_prefetch(ahead, 0, 1);
            if (OLC_UKR_NR * sizeof(float) > 64) __builtin_prefetch(ahead + 64, 0, 1);
        }
        if (ldb) {
            /* B read in place: row k of the panel after next.  Its rows
             * are a plane apart (a 1x1 Conv's input channels), too many
             * streams for the prefetcher; a block's first row of A reads B
             * from L3 in a model (MobileNet-V2 at 2 threads 5.53 -> 5.39
             * ms, alone each 1x1 layer the same or up to 6 % faster).  At
             * batch 8 B comes from memory, and one panel ahead was too
             * short for few rows of A: two panels, 2 threads, in one
             * process alternating: 1x1 32 -> 16 at 112x112 1.57-1.74 ->
             * 0.75-0.87 ms, 256 -> 64 at 56x56 6.5 -> 5.3 ms; MobileNet-V2
             * 38.9 -> 37.8 ms, DenseNet-121 260 -> 249 ms; batch 1 and 1
             * thread the same within the noise */
            const char *next = (const char *)(b + k * sb + 2 * OLC_UKR_NR);
            __builtin_prefetch(next, 0, 3);
            if (OLC_UKR_NR * sizeof(float) > 64) __builtin_prefetch(next + 64, 0, 3);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            OLC_UKR_V ar = OLC_FN(olc_gemm_bcast)(direct ? &a[r * lda + k] : &a[k * OLC_UKR_MR + r]);
            t0[r] = OLC_FN(olc_gemm_fma)(ar, b0, t0[r]);
            t1[r] = OLC_FN(olc_gemm_fma)(ar, b1, t1[r]);
        }
    }
    OLC_UKR_V va = OLC_FN(olc_gemm_set1)(alpha);
    if (ncols == OLC_UKR_NR && epi != NULL) {
        OLC_UKR(store_epi)(R, c, ldc, va, acc, t0, t1, epi);
        return;
    }
    if (ncols == OLC_UKR_NR) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            float *cr = c + r * ldc;
            if (acc) {
                OLC_FN(olc_gemm_st)(cr, OLC_FN(olc_gemm_fma)(va, t0[r], OLC_FN(olc_gemm_ld)(cr)));
                OLC_FN(olc_gemm_st)(cr + OLC_UKR_W,
                                    OLC_FN(olc_gemm_fma)(va, t1[r], OLC_FN(olc_gemm_ld)(cr + OLC_UKR_W)));
            } else {
                OLC_FN(olc_gemm_st)(cr, OLC_FN(olc_gemm_mul)(va, t0[r]));
                OLC_FN(olc_gemm_st)(cr + OLC_UKR_W, OLC_FN(olc_gemm_mul)(va, t1[r]));
            }
        }
        return;
    }
    /* Column edge (unrolled, so the accumulators stay in registers in the
     * main loop). */
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        float *cr = c + r * ldc;
        OLC_FN(olc_gemm_edge2)(cr, ncols, va, t0[r], t1[r], acc);
    }
}

/* One entry per row count: packed A, A read in place, then A and B both
 * read in place (whole panels only). */
OLC_LVL_ATTR static void
OLC_UKR(1)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(1, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(2)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(2, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(3)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(3, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(4)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(4, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(5)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(5, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(6)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(6, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
#if OLC_UKR_MR >= 12
OLC_LVL_ATTR static void
OLC_UKR(7)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(7, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(8)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(8, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(9)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
           float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(9, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(10)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
            float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(10, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(11)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
            float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(11, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(12)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
            float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(12, 0, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
#endif
OLC_LVL_ATTR static void
OLC_UKR(direct_1)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(1, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_2)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(2, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_3)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(3, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_4)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(4, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_5)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(5, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_6)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(6, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
#if OLC_UKR_MR >= 12
OLC_LVL_ATTR static void
OLC_UKR(direct_7)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(7, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_8)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(8, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_9)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                  float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(9, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_10)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                   float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(10, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_11)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                   float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(11, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(direct_12)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                   float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(12, 1, kc, a, lda, b, 0, c, ldc, alpha, acc, ncols, epi);
}
#endif
OLC_LVL_ATTR static void
OLC_UKR(strided_1)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(1, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_2)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(2, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_3)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(3, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_4)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(4, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_5)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(5, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_6)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(6, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
#if OLC_UKR_MR >= 12
OLC_LVL_ATTR static void
OLC_UKR(strided_7)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(7, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_8)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(8, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_9)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                   float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(9, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_10)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(10, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_11)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(11, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
OLC_LVL_ATTR static void
OLC_UKR(strided_12)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float *c, int64_t ldc, float alpha, int acc, const olc_ukr_epi *epi) {
    OLC_UKR(rows)(12, 1, kc, a, lda, b, ldb, c, ldc, alpha, acc, OLC_UKR_NR, epi);
}
#endif
#undef OLC_UKR
#undef OLC_UKR_V
#undef OLC_UKR_W
