/* The float 8 conversions from one source type (a body file, like those of
 * common/olc_level.h but not per level: these loops are portable).
 * olc_cast.h includes it once per float source type with OLC_S, OLC_SN and
 * OLC_LD(v) set as for cast/olc_cast_from.h; the body undefines them.
 * OLC_CASTFN8(dst) is olc_cast_<SN>_<dst>. */

/* y = x in the float 8 format (M mantissa bits, bias B, ...: olc_f2f8),
 * always inlined with constant parameters. */
static inline OLC_ALWAYS_INLINE void OLC_CASTFN8(to_f8)(const void *px, void *py, int64_t n,
                                                        int flags, const int M, const int B,
                                                        const uint32_t maxcode, const int kind) {
    const OLC_S *x = (const OLC_S *)px;
    uint8_t *y = (uint8_t *)py;
    if (flags & OLC_CAST_SATURATE)
        for (int64_t i = 0; i < n; ++i) y[i] = olc_f2f8((double)OLC_LD(x[i]), M, B, maxcode, kind, 1);
    else
        for (int64_t i = 0; i < n; ++i) y[i] = olc_f2f8((double)OLC_LD(x[i]), M, B, maxcode, kind, 0);
}
static void OLC_CASTFN8(e4m3fn)(const void *x, void *y, int64_t n, const void *aux) {
    OLC_CASTFN8(to_f8)(x, y, n, *(const int *)aux, 3, 7, 0x7eu, OLC_F8_FN);
}
static void OLC_CASTFN8(e4m3fnuz)(const void *x, void *y, int64_t n, const void *aux) {
    OLC_CASTFN8(to_f8)(x, y, n, *(const int *)aux, 3, 8, 0x7fu, OLC_F8_FNUZ);
}
static void OLC_CASTFN8(e5m2)(const void *x, void *y, int64_t n, const void *aux) {
    OLC_CASTFN8(to_f8)(x, y, n, *(const int *)aux, 2, 15, 0x7bu, OLC_F8_IEEE);
}
static void OLC_CASTFN8(e5m2fnuz)(const void *x, void *y, int64_t n, const void *aux) {
    OLC_CASTFN8(to_f8)(x, y, n, *(const int *)aux, 2, 16, 0x7fu, OLC_F8_FNUZ);
}
static void OLC_CASTFN8(e8m0)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    uint8_t *y = (uint8_t *)py;
    const int flags = *(const int *)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = olc_f2e8m0((float)OLC_LD(x[i]), flags);
}

#undef OLC_S
#undef OLC_SN
#undef OLC_LD
