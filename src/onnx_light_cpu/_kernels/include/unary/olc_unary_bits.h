/* The bit loops of the unary kernels at one level (a body file: see
 * common/olc_level.h).  Written once and compiled per level so that the
 * compiler vectorises each with that level's registers.  Abs of a float
 * type clears the sign bit (NaN payloads survive); Not flips the 0/1 byte
 * of a bool. */

OLC_LVL_ATTR static void OLC_FN(olc_abs_bits16)(const void *px, void *py, int64_t n) {
    const uint16_t *x = (const uint16_t *)px;
    uint16_t *y = (uint16_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] & 0x7fffu;
}
OLC_LVL_ATTR static void OLC_FN(olc_abs_bits32)(const void *px, void *py, int64_t n) {
    const uint32_t *x = (const uint32_t *)px;
    uint32_t *y = (uint32_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] & 0x7fffffffu;
}
OLC_LVL_ATTR static void OLC_FN(olc_abs_bits64)(const void *px, void *py, int64_t n) {
    const uint64_t *x = (const uint64_t *)px;
    uint64_t *y = (uint64_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] & 0x7fffffffffffffffull;
}
OLC_LVL_ATTR static void OLC_FN(olc_not_bool)(const void *px, void *py, int64_t n) {
    const uint8_t *x = (const uint8_t *)px;
    uint8_t *y = (uint8_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = (uint8_t)(x[i] == 0);
}

/* Neg of a float type flips the sign bit (NaN payloads survive, as in
 * NumPy); of a signed integer it wraps at the minimum, as NumPy does. */
OLC_LVL_ATTR static void OLC_FN(olc_neg_bits16)(const void *px, void *py, int64_t n) {
    const uint16_t *x = (const uint16_t *)px;
    uint16_t *y = (uint16_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] ^ 0x8000u;
}
OLC_LVL_ATTR static void OLC_FN(olc_neg_bits32)(const void *px, void *py, int64_t n) {
    const uint32_t *x = (const uint32_t *)px;
    uint32_t *y = (uint32_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] ^ 0x80000000u;
}
OLC_LVL_ATTR static void OLC_FN(olc_neg_bits64)(const void *px, void *py, int64_t n) {
    const uint64_t *x = (const uint64_t *)px;
    uint64_t *y = (uint64_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] ^ 0x8000000000000000ull;
}
OLC_LVL_ATTR static void OLC_FN(olc_neg_i8)(const void *px, void *py, int64_t n) {
    const uint8_t *x = (const uint8_t *)px;
    uint8_t *y = (uint8_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = (uint8_t)(0u - x[i]);
}
OLC_LVL_ATTR static void OLC_FN(olc_neg_i16)(const void *px, void *py, int64_t n) {
    const uint16_t *x = (const uint16_t *)px;
    uint16_t *y = (uint16_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = (uint16_t)(0u - x[i]);
}
OLC_LVL_ATTR static void OLC_FN(olc_neg_i32)(const void *px, void *py, int64_t n) {
    const uint32_t *x = (const uint32_t *)px;
    uint32_t *y = (uint32_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = 0u - x[i];
}
OLC_LVL_ATTR static void OLC_FN(olc_neg_i64)(const void *px, void *py, int64_t n) {
    const uint64_t *x = (const uint64_t *)px;
    uint64_t *y = (uint64_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = 0ull - x[i];
}
