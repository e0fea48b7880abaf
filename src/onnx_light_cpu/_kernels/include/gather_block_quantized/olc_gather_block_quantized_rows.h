/* The row loop of GatherBlockQuantized, compiled once per level (see
 * common/olc_level.h) around that level's OLC_FN(olc_gbq_group):
 * included by olc_gather_block_quantized.h for scalar, avx2 and avx512. */

/* Output rows [r0, r1) for constant bits and output type (each call below
 * gives the compiler one specialised copy). */
OLC_LVL_ATTR static inline __attribute__((always_inline)) void OLC_FN(olc_gbq_rows_of)(
    const olc_gbq_args *a, int bits, int f16, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        int64_t row = olc_gbq_src_row(a, r);
        if (row < 0) {
            olc_gbq_zero_row(a, f16, r);
            continue;
        }
        const uint8_t *src = a->data + row * a->P;
        const uint8_t *zrow = a->zp ? a->zp + row * a->zp_bytes : NULL;
        void *out = (char *)a->out + r * a->D * (f16 ? 2 : 4);
        for (int64_t g = 0; g < a->G; ++g) {
            int64_t j0 = g * a->block, j1 = j0 + a->block < a->D ? j0 + a->block : a->D;
            int zp = zrow ? (int)olc_bc_zp(zrow, bits, g) : olc_bc_zp_default(bits);
            OLC_FN(olc_gbq_group)(src, bits, f16, j0, j1, zp, olc_gbq_scale(a, row, g), out);
        }
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_gbq_rows)(const olc_gbq_args *a, int64_t r0, int64_t r1) {
    const int f16 = a->dtype == OLC_FLOAT16;
    switch (a->bits) {
    case 2:
        if (f16) OLC_FN(olc_gbq_rows_of)(a, 2, 1, r0, r1);
        else OLC_FN(olc_gbq_rows_of)(a, 2, 0, r0, r1);
        break;
    case 4:
        if (f16) OLC_FN(olc_gbq_rows_of)(a, 4, 1, r0, r1);
        else OLC_FN(olc_gbq_rows_of)(a, 4, 0, r0, r1);
        break;
    default:
        if (f16) OLC_FN(olc_gbq_rows_of)(a, 8, 1, r0, r1);
        else OLC_FN(olc_gbq_rows_of)(a, 8, 0, r0, r1);
    }
}
