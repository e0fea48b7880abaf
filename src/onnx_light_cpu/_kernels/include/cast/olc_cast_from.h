/* The native conversions from one source type at one level (a body file:
 * see common/olc_level.h).  cast/olc_cast_level.h includes it once per
 * source type with these set, and the body undefines them at its end:
 *
 *   OLC_S      the source element type
 *   OLC_SN     its name: OLC_CASTFN(dst) is olc_cast_<SN>_<dst>_<level>
 *   OLC_LD(v)  an element as a C number (its "natural" type: float for
 *              float16 and bfloat16)
 *
 * One loop per destination type, y[i] = OLC_ST_<dst>(OLC_LD(x[i])), then
 * the row of the dispatch table, olc_cast_<SN>_row_<level>.
 */

OLC_LVL_ATTR static void OLC_CASTFN(bool)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    uint8_t *y = (uint8_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_bool(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(u8)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    uint8_t *y = (uint8_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_u8(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(i8)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    int8_t *y = (int8_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_i8(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(u16)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    uint16_t *y = (uint16_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_u16(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(i16)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    int16_t *y = (int16_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_i16(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(u32)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    uint32_t *y = (uint32_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_u32(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(i32)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    int32_t *y = (int32_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_i32(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(u64)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    uint64_t *y = (uint64_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_u64(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(i64)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    int64_t *y = (int64_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_i64(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(f16)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    uint16_t *y = (uint16_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_f16(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(bf16)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    uint16_t *y = (uint16_t *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_bf16(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(f32)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    float *y = (float *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_f32(OLC_LD(x[i]));
}
OLC_LVL_ATTR static void OLC_CASTFN(f64)(const void *px, void *py, int64_t n, const void *aux) {
    const OLC_S *x = (const OLC_S *)px;
    double *y = (double *)py;
    (void)aux;
    for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_f64(OLC_LD(x[i]));
}

/* By destination, in olc_cast_index order. */
static const olc_cast_fn OLC_CASTFN(row)[13] = {
    OLC_CASTFN(bool), OLC_CASTFN(u8), OLC_CASTFN(i8), OLC_CASTFN(u16), OLC_CASTFN(i16),
    OLC_CASTFN(u32), OLC_CASTFN(i32), OLC_CASTFN(u64), OLC_CASTFN(i64), OLC_CASTFN(f16),
    OLC_CASTFN(bf16), OLC_CASTFN(f32), OLC_CASTFN(f64),
};

#undef OLC_S
#undef OLC_SN
#undef OLC_LD
