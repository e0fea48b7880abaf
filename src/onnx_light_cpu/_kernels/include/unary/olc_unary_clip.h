/* Clip loops at one level (a body file: see common/olc_level.h), one per
 * element type, written once and compiled per level so that the compiler
 * vectorises each with that level's registers.
 *
 * y = min(max(x, lo), hi) as NumPy's clip computes it: an element equal
 * to a bound keeps its own bits (-0 stays -0 against a +0 bound), a NaN
 * element stays NaN, and lo > hi gives hi everywhere.  (A NaN bound is
 * the adapter's business.)  float16 and bfloat16 compare through integer
 * keys (olc_clip_key16 in unary/olc_unary.h), so they vectorise too. */

OLC_LVL_ATTR static void OLC_FN(olc_clip_f32)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    const float *x = (const float *)px, lo = *(const float *)plo, hi = *(const float *)phi;
    float *y = (float *)py;
    for (int64_t i = 0; i < n; ++i) { float v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_f64)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    const double *x = (const double *)px, lo = *(const double *)plo, hi = *(const double *)phi;
    double *y = (double *)py;
    for (int64_t i = 0; i < n; ++i) { double v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_i8)(const void *px, void *py, int64_t n,
                                             const void *plo, const void *phi) {
    const int8_t *x = (const int8_t *)px, lo = *(const int8_t *)plo, hi = *(const int8_t *)phi;
    int8_t *y = (int8_t *)py;
    for (int64_t i = 0; i < n; ++i) { int8_t v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_i16)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    const int16_t *x = (const int16_t *)px, lo = *(const int16_t *)plo, hi = *(const int16_t *)phi;
    int16_t *y = (int16_t *)py;
    for (int64_t i = 0; i < n; ++i) { int16_t v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_i32)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    const int32_t *x = (const int32_t *)px, lo = *(const int32_t *)plo, hi = *(const int32_t *)phi;
    int32_t *y = (int32_t *)py;
    for (int64_t i = 0; i < n; ++i) { int32_t v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_i64)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    const int64_t *x = (const int64_t *)px, lo = *(const int64_t *)plo, hi = *(const int64_t *)phi;
    int64_t *y = (int64_t *)py;
    for (int64_t i = 0; i < n; ++i) { int64_t v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_u8)(const void *px, void *py, int64_t n,
                                             const void *plo, const void *phi) {
    const uint8_t *x = (const uint8_t *)px, lo = *(const uint8_t *)plo, hi = *(const uint8_t *)phi;
    uint8_t *y = (uint8_t *)py;
    for (int64_t i = 0; i < n; ++i) { uint8_t v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_u16)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    const uint16_t *x = (const uint16_t *)px, lo = *(const uint16_t *)plo, hi = *(const uint16_t *)phi;
    uint16_t *y = (uint16_t *)py;
    for (int64_t i = 0; i < n; ++i) { uint16_t v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_u32)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    const uint32_t *x = (const uint32_t *)px, lo = *(const uint32_t *)plo, hi = *(const uint32_t *)phi;
    uint32_t *y = (uint32_t *)py;
    for (int64_t i = 0; i < n; ++i) { uint32_t v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_u64)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    const uint64_t *x = (const uint64_t *)px, lo = *(const uint64_t *)plo, hi = *(const uint64_t *)phi;
    uint64_t *y = (uint64_t *)py;
    for (int64_t i = 0; i < n; ++i) { uint64_t v = lo > x[i] ? lo : x[i]; y[i] = v > hi ? hi : v; }
}
/* float16 and bfloat16: the same loop; a magnitude above `inf_bits` (the
 * type's infinity) is a NaN, which stays. */
OLC_LVL_ATTR static inline void OLC_FN(olc_clip_half)(const void *px, void *py, int64_t n,
                                                      const void *plo, const void *phi,
                                                      uint16_t inf_bits) {
    const uint16_t *x = (const uint16_t *)px, lo = *(const uint16_t *)plo, hi = *(const uint16_t *)phi;
    const int32_t klo = olc_clip_key16(lo), khi = olc_clip_key16(hi);
    uint16_t *y = (uint16_t *)py;
    for (int64_t i = 0; i < n; ++i) {
        int32_t k = olc_clip_key16(x[i]);
        uint16_t r = klo > k ? lo : x[i];
        r = (klo > k ? klo : k) > khi ? hi : r;
        y[i] = (x[i] & 0x7fffu) > inf_bits ? x[i] : r;
    }
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_f16)(const void *px, void *py, int64_t n,
                                              const void *plo, const void *phi) {
    OLC_FN(olc_clip_half)(px, py, n, plo, phi, 0x7c00u);
}
OLC_LVL_ATTR static void OLC_FN(olc_clip_bf16)(const void *px, void *py, int64_t n,
                                               const void *plo, const void *phi) {
    OLC_FN(olc_clip_half)(px, py, n, plo, phi, 0x7f80u);
}
