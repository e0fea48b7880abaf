/* One level's conversions (a body file: see common/olc_level.h): the
 * native loops from every source type (cast/olc_cast_from.h), the table of
 * them by (source, destination), and float <-> float16 / bfloat16 with
 * explicit vector conversions (the scalar converters have branches the
 * compiler cannot vectorise). */

#define OLC_S uint8_t
#define OLC_SN bool
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S uint8_t
#define OLC_SN u8
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S int8_t
#define OLC_SN i8
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S uint16_t
#define OLC_SN u16
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S int16_t
#define OLC_SN i16
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S uint32_t
#define OLC_SN u32
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S int32_t
#define OLC_SN i32
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S uint64_t
#define OLC_SN u64
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S int64_t
#define OLC_SN i64
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S uint16_t
#define OLC_SN f16
#define OLC_LD(v) olc_h2f(v)
#include "cast/olc_cast_from.h"

#define OLC_S uint16_t
#define OLC_SN bf16
#define OLC_LD(v) olc_bf2f(v)
#include "cast/olc_cast_from.h"

#define OLC_S float
#define OLC_SN f32
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

#define OLC_S double
#define OLC_SN f64
#define OLC_LD(v) (v)
#include "cast/olc_cast_from.h"

/* By source, then destination, in olc_cast_index order. */
static const olc_cast_fn *const OLC_FN(olc_cast_table)[13] = {
    OLC_FN(olc_cast_bool_row), OLC_FN(olc_cast_u8_row), OLC_FN(olc_cast_i8_row),
    OLC_FN(olc_cast_u16_row), OLC_FN(olc_cast_i16_row), OLC_FN(olc_cast_u32_row),
    OLC_FN(olc_cast_i32_row), OLC_FN(olc_cast_u64_row), OLC_FN(olc_cast_i64_row),
    OLC_FN(olc_cast_f16_row), OLC_FN(olc_cast_bf16_row), OLC_FN(olc_cast_f32_row),
    OLC_FN(olc_cast_f64_row),
};

/* float <-> float16 / bfloat16: pairs of whole vectors, then the tail as
 * part vectors (common/olc_math.h), so that every element goes through the
 * level's vector conversion. */
OLC_LVL_ATTR static void OLC_FN(olc_cast_f16_f32v)(const void *px, void *py, int64_t n, const void *aux) {
    const uint16_t *x = (const uint16_t *)px;
    float *y = (float *)py;
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    int64_t i = 0;
    (void)aux;
    for (; i + 2 * w <= n; i += 2 * w) {
        OLC_FN(olc_vf) a = OLC_FN(olc_ld_f16_part)(x + i, w), b = OLC_FN(olc_ld_f16_part)(x + i + w, w);
        OLC_FN(olc_st_f32_part)(y + i, w, a);
        OLC_FN(olc_st_f32_part)(y + i + w, w, b);
    }
    for (; i + w <= n; i += w) OLC_FN(olc_st_f32_part)(y + i, w, OLC_FN(olc_ld_f16_part)(x + i, w));
    if (i < n) OLC_FN(olc_st_f32_part)(y + i, n - i, OLC_FN(olc_ld_f16_part)(x + i, n - i));
}
OLC_LVL_ATTR static void OLC_FN(olc_cast_f32_f16v)(const void *px, void *py, int64_t n, const void *aux) {
    const float *x = (const float *)px;
    uint16_t *y = (uint16_t *)py;
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    int64_t i = 0;
    (void)aux;
    for (; i + 2 * w <= n; i += 2 * w) {
        OLC_FN(olc_vf) a = OLC_FN(olc_ld_f32_part)(x + i, w), b = OLC_FN(olc_ld_f32_part)(x + i + w, w);
        OLC_FN(olc_st_f16_part)(y + i, w, a);
        OLC_FN(olc_st_f16_part)(y + i + w, w, b);
    }
    for (; i + w <= n; i += w) OLC_FN(olc_st_f16_part)(y + i, w, OLC_FN(olc_ld_f32_part)(x + i, w));
    if (i < n) OLC_FN(olc_st_f16_part)(y + i, n - i, OLC_FN(olc_ld_f32_part)(x + i, n - i));
}
OLC_LVL_ATTR static void OLC_FN(olc_cast_bf16_f32v)(const void *px, void *py, int64_t n, const void *aux) {
    const uint16_t *x = (const uint16_t *)px;
    float *y = (float *)py;
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    int64_t i = 0;
    (void)aux;
    for (; i + 2 * w <= n; i += 2 * w) {
        OLC_FN(olc_vf) a = OLC_FN(olc_ld_bf16_part)(x + i, w), b = OLC_FN(olc_ld_bf16_part)(x + i + w, w);
        OLC_FN(olc_st_f32_part)(y + i, w, a);
        OLC_FN(olc_st_f32_part)(y + i + w, w, b);
    }
    for (; i + w <= n; i += w) OLC_FN(olc_st_f32_part)(y + i, w, OLC_FN(olc_ld_bf16_part)(x + i, w));
    if (i < n) OLC_FN(olc_st_f32_part)(y + i, n - i, OLC_FN(olc_ld_bf16_part)(x + i, n - i));
}
OLC_LVL_ATTR static void OLC_FN(olc_cast_f32_bf16v)(const void *px, void *py, int64_t n, const void *aux) {
    const float *x = (const float *)px;
    uint16_t *y = (uint16_t *)py;
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    int64_t i = 0;
    (void)aux;
    for (; i + 2 * w <= n; i += 2 * w) {
        OLC_FN(olc_vf) a = OLC_FN(olc_ld_f32_part)(x + i, w), b = OLC_FN(olc_ld_f32_part)(x + i + w, w);
        OLC_FN(olc_st_bf16_part)(y + i, w, a);
        OLC_FN(olc_st_bf16_part)(y + i + w, w, b);
    }
    for (; i + w <= n; i += w) OLC_FN(olc_st_bf16_part)(y + i, w, OLC_FN(olc_ld_f32_part)(x + i, w));
    if (i < n) OLC_FN(olc_st_bf16_part)(y + i, n - i, OLC_FN(olc_ld_f32_part)(x + i, n - i));
}
