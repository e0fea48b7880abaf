/* The float32, float16 and bfloat16 loops of one activation at one level
 * (a body file, see common/olc_level.h): olc_uact_<op>_f32_<level>,
 * olc_uact_<op>_f16_<level>, olc_uact_<op>_bf16_<level>, each the map of
 * unary/olc_unary_act.h over olc_uact_<op>_<level>.  olc_unary_act.h
 * includes it once per operator with OLC_UACT_OP (relu, ..., sqrt) set.
 * No include guard. */

OLC_LVL_ATTR static void OLC_FN(OLC_CAT(OLC_CAT(olc_uact, OLC_UACT_OP), f32))(const void *x, void *y, int64_t n,
                                                                           const double *p) {
    OLC_FN(olc_uact_map_f32)(OLC_FN(OLC_CAT(olc_uact, OLC_UACT_OP)), (const float *)x, (float *)y, n, p);
}
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(OLC_CAT(olc_uact, OLC_UACT_OP), f16))(const void *x, void *y, int64_t n,
                                                                           const double *p) {
    OLC_FN(olc_uact_map_f16)(OLC_FN(OLC_CAT(olc_uact, OLC_UACT_OP)), (const uint16_t *)x, (uint16_t *)y, n, p);
}
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(OLC_CAT(olc_uact, OLC_UACT_OP), bf16))(const void *x, void *y, int64_t n,
                                                                            const double *p) {
    OLC_FN(olc_uact_map_bf16)(OLC_FN(OLC_CAT(olc_uact, OLC_UACT_OP)), (const uint16_t *)x, (uint16_t *)y, n, p);
}
