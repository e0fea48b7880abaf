/* The olc_norm_fns table of the float32 intrinsics of one vector level,
 * olc_norm_v32_<level> (no double functions).  Included by
 * olc_normalization.h after the level's bodies; no include guard. */

static const olc_norm_fns OLC_FN(olc_norm_v32) = {
    {OLC_FN(olc_norm_stats_v32_f32), OLC_FN(olc_norm_stats_v32_f16), NULL,
     OLC_FN(olc_norm_stats_v32_bf16)},
    {OLC_FN(olc_norm_affine_v32_f32), OLC_FN(olc_norm_affine_v32_f16), NULL,
     OLC_FN(olc_norm_affine_v32_bf16)},
    {{OLC_FN(olc_norm_apply_v32_f32_f32), OLC_FN(olc_norm_apply_v32_f32_f16), NULL,
      OLC_FN(olc_norm_apply_v32_f32_bf16)},
     {OLC_FN(olc_norm_apply_v32_f16_f32), OLC_FN(olc_norm_apply_v32_f16_f16), NULL,
      OLC_FN(olc_norm_apply_v32_f16_bf16)},
     {NULL, NULL, NULL, NULL},
     {OLC_FN(olc_norm_apply_v32_bf16_f32), OLC_FN(olc_norm_apply_v32_bf16_f16), NULL,
      OLC_FN(olc_norm_apply_v32_bf16_bf16)}},
};
