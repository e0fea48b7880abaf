/* Body (no include guard): Winograd F(2x2, 3x3)'s transforms of one tile
 * at one level; olc_conv.h includes it once per level
 * (common/olc_each_level.h).  Each works on rows of values, one per
 * channel, the loops over them vectorised at the level's width; only
 * additions and subtractions, so every level gives the same bits.  Both
 * transforms are two steps, first down the 4 rows of a tile, then across
 * its 4 columns:
 * B^T: (r0, r1, r2, r3) = (a0 - a2, a1 + a2, a2 - a1, a1 - a3);
 * A^T: (r0, r1) = (a0 + a1 + a2, a1 - a2 - a3). */
static inline __attribute__((always_inline)) OLC_LVL_ATTR void OLC_FN(olc_conv_wino_bt)(
        const float *restrict a0, const float *restrict a1, const float *restrict a2,
        const float *restrict a3, float *restrict r0, float *restrict r1, float *restrict r2,
        float *restrict r3, int64_t n) {
    for (int64_t c = 0; c < n; ++c) {
        r0[c] = a0[c] - a2[c];
        r1[c] = a1[c] + a2[c];
        r2[c] = a2[c] - a1[c];
        r3[c] = a1[c] - a3[c];
    }
}

static inline __attribute__((always_inline)) OLC_LVL_ATTR void OLC_FN(olc_conv_wino_at)(
        const float *restrict a0, const float *restrict a1, const float *restrict a2,
        const float *restrict a3, float *restrict r0, float *restrict r1, int64_t n) {
    for (int64_t c = 0; c < n; ++c) {
        r0[c] = a0[c] + a1[c] + a2[c];
        r1[c] = a1[c] - a2[c] - a3[c];
    }
}

/* V[xi][c] = (B^T d B)[xi] of one tile: d[i][k][c] = d[i * ld + k * C + c]
 * (channel innermost), V[xi] at vt + xi * nC; r: 16 C floats. */
OLC_LVL_ATTR static void OLC_FN(olc_conv_wino_in_tile)(const float *d, int64_t ld, int64_t C,
                                                       float *vt, int64_t nC, float *r) {
    for (int k = 0; k < 4; ++k)  /* r[i][k] = (B^T d)[i][k] */
        OLC_FN(olc_conv_wino_bt)(d + k * C, d + ld + k * C, d + 2 * ld + k * C,
                                 d + 3 * ld + k * C, r + k * C, r + (4 + k) * C,
                                 r + (8 + k) * C, r + (12 + k) * C, C);
    for (int i = 0; i < 4; ++i) {  /* V[4 i + j] = (r B)[i][j] */
        const float *ri = r + 4 * i * C;
        float *vi = vt + 4 * i * nC;
        OLC_FN(olc_conv_wino_bt)(ri, ri + C, ri + 2 * C, ri + 3 * C, vi, vi + nC, vi + 2 * nC,
                                 vi + 3 * nC, C);
    }
}

/* o[2 i + k][j] = (A^T m A)[i][k] of n channels of one tile: m[xi][j] =
 * s[xi * nM + j]; a: 8 x OLC_CONV_WINO_MB floats. */
OLC_LVL_ATTR static void OLC_FN(olc_conv_wino_out_tile)(const float *s, int64_t nM, int64_t n,
                                                        float a[2][4][OLC_CONV_WINO_MB],
                                                        float o[4][OLC_CONV_WINO_MB]) {
    for (int k = 0; k < 4; ++k)  /* a[i][k] = (A^T m)[i][k] */
        OLC_FN(olc_conv_wino_at)(s + k * nM, s + (4 + k) * nM, s + (8 + k) * nM,
                                 s + (12 + k) * nM, a[0][k], a[1][k], n);
    for (int i = 0; i < 2; ++i)  /* o[2 i + k] = (a A)[i][k] */
        OLC_FN(olc_conv_wino_at)(a[i][0], a[i][1], a[i][2], a[i][3], o[2 * i], o[2 * i + 1], n);
}
