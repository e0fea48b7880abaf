/* ReduceMax, ReduceMin and ReduceProd (and ReduceSum's short rows) of one level (a body file: see
 * common/olc_level.h), one function pair per kind and element type
 * (reduce/olc_reduce_redx.h, through reduce/olc_reduce_kinds.h):
 *   rows  B == 1: out[a] for rows [a0, a1) of R elements: a row shorter
 *         than 32 in one sequence; a longer one: element i goes to lane
 *         i % 16, the lanes fold in a fixed tree
 *   cols  B > 1: out[b0:b1] of one [R, B] slice, row after row
 * so the order depends on neither the thread count (threads take whole
 * rows or column blocks) nor the level (the compiler vectorises across
 * lanes or columns, never reassociating one of them).  float16 and
 * bfloat16 accumulate in float32 (Max and Min return one of the inputs,
 * exactly); integer products wrap, computed unsigned.
 *
 * Per type (reduce/olc_reduce_kinds.h reads them, then #undefs them):
 * OLC_REDX_TN (name), OLC_REDX_T (element), OLC_REDX_LO/HI (the identities
 * of Max and Min), OLC_REDX_NANS (Max and Min flag NaN), OLC_REDX_ARITH
 * (Prod and Sum too); for float16 and bfloat16 also OLC_REDX_A (the
 * accumulator, else the element) and OLC_REDX_LOAD/STORE (element to
 * accumulator and back, else as is). */

#define OLC_REDX_TN f32
#define OLC_REDX_T float
#define OLC_REDX_LO (-INFINITY)
#define OLC_REDX_HI INFINITY
#define OLC_REDX_NANS 1
#define OLC_REDX_ARITH 1
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN f64
#define OLC_REDX_T double
#define OLC_REDX_LO (-INFINITY)
#define OLC_REDX_HI INFINITY
#define OLC_REDX_NANS 1
#define OLC_REDX_ARITH 1
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN f16
#define OLC_REDX_T uint16_t
#define OLC_REDX_A float
#define OLC_REDX_LOAD olc_h2f
#define OLC_REDX_STORE olc_f2h
#define OLC_REDX_LO (-INFINITY)
#define OLC_REDX_HI INFINITY
#define OLC_REDX_NANS 1
#define OLC_REDX_ARITH 1
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN bf16
#define OLC_REDX_T uint16_t
#define OLC_REDX_A float
#define OLC_REDX_LOAD olc_bf2f
#define OLC_REDX_STORE olc_f2bf
#define OLC_REDX_LO (-INFINITY)
#define OLC_REDX_HI INFINITY
#define OLC_REDX_NANS 1
#define OLC_REDX_ARITH 1
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN i8
#define OLC_REDX_T int8_t
#define OLC_REDX_LO INT8_MIN
#define OLC_REDX_HI INT8_MAX
#define OLC_REDX_NANS 0
#define OLC_REDX_ARITH 0
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN u8
#define OLC_REDX_T uint8_t
#define OLC_REDX_LO 0
#define OLC_REDX_HI UINT8_MAX
#define OLC_REDX_NANS 0
#define OLC_REDX_ARITH 0
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN i32
#define OLC_REDX_T int32_t
#define OLC_REDX_LO INT32_MIN
#define OLC_REDX_HI INT32_MAX
#define OLC_REDX_NANS 0
#define OLC_REDX_ARITH 0
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN u32
#define OLC_REDX_T uint32_t
#define OLC_REDX_LO 0
#define OLC_REDX_HI UINT32_MAX
#define OLC_REDX_NANS 0
#define OLC_REDX_ARITH 1
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN i64
#define OLC_REDX_T int64_t
#define OLC_REDX_LO INT64_MIN
#define OLC_REDX_HI INT64_MAX
#define OLC_REDX_NANS 0
#define OLC_REDX_ARITH 0
#include "reduce/olc_reduce_kinds.h"

#define OLC_REDX_TN u64
#define OLC_REDX_T uint64_t
#define OLC_REDX_LO 0
#define OLC_REDX_HI UINT64_MAX
#define OLC_REDX_NANS 0
#define OLC_REDX_ARITH 1
#include "reduce/olc_reduce_kinds.h"

/* The level's table, [type] then [kind] (OLC_REDX_KIND_MAX, _MIN, _PROD,
 * _SUM), types as olc_redx_type_index numbers them: int32 and int64 products
 * and sums are their unsigned ones (they wrap alike), int8 and uint8 have
 * none. */
static const olc_redx_fns OLC_FN(olc_redx_fns)[10] = {
    {{OLC_FN(olc_redx_rows_max_f32), OLC_FN(olc_redx_rows_min_f32),
      OLC_FN(olc_redx_rows_prod_f32), OLC_FN(olc_redx_rows_sum_f32)},
     {OLC_FN(olc_redx_cols_max_f32), OLC_FN(olc_redx_cols_min_f32),
      OLC_FN(olc_redx_cols_prod_f32), OLC_FN(olc_redx_cols_sum_f32)}},
    {{OLC_FN(olc_redx_rows_max_f64), OLC_FN(olc_redx_rows_min_f64),
      OLC_FN(olc_redx_rows_prod_f64), OLC_FN(olc_redx_rows_sum_f64)},
     {OLC_FN(olc_redx_cols_max_f64), OLC_FN(olc_redx_cols_min_f64),
      OLC_FN(olc_redx_cols_prod_f64), OLC_FN(olc_redx_cols_sum_f64)}},
    {{OLC_FN(olc_redx_rows_max_f16), OLC_FN(olc_redx_rows_min_f16),
      OLC_FN(olc_redx_rows_prod_f16), OLC_FN(olc_redx_rows_sum_f16)},
     {OLC_FN(olc_redx_cols_max_f16), OLC_FN(olc_redx_cols_min_f16),
      OLC_FN(olc_redx_cols_prod_f16), OLC_FN(olc_redx_cols_sum_f16)}},
    {{OLC_FN(olc_redx_rows_max_bf16), OLC_FN(olc_redx_rows_min_bf16),
      OLC_FN(olc_redx_rows_prod_bf16), OLC_FN(olc_redx_rows_sum_bf16)},
     {OLC_FN(olc_redx_cols_max_bf16), OLC_FN(olc_redx_cols_min_bf16),
      OLC_FN(olc_redx_cols_prod_bf16), OLC_FN(olc_redx_cols_sum_bf16)}},
    {{OLC_FN(olc_redx_rows_max_i8), OLC_FN(olc_redx_rows_min_i8),
      NULL, NULL},
     {OLC_FN(olc_redx_cols_max_i8), OLC_FN(olc_redx_cols_min_i8),
      NULL, NULL}},
    {{OLC_FN(olc_redx_rows_max_u8), OLC_FN(olc_redx_rows_min_u8),
      NULL, NULL},
     {OLC_FN(olc_redx_cols_max_u8), OLC_FN(olc_redx_cols_min_u8),
      NULL, NULL}},
    {{OLC_FN(olc_redx_rows_max_i32), OLC_FN(olc_redx_rows_min_i32),
      OLC_FN(olc_redx_rows_prod_u32), OLC_FN(olc_redx_rows_sum_u32)},
     {OLC_FN(olc_redx_cols_max_i32), OLC_FN(olc_redx_cols_min_i32),
      OLC_FN(olc_redx_cols_prod_u32), OLC_FN(olc_redx_cols_sum_u32)}},
    {{OLC_FN(olc_redx_rows_max_u32), OLC_FN(olc_redx_rows_min_u32),
      OLC_FN(olc_redx_rows_prod_u32), OLC_FN(olc_redx_rows_sum_u32)},
     {OLC_FN(olc_redx_cols_max_u32), OLC_FN(olc_redx_cols_min_u32),
      OLC_FN(olc_redx_cols_prod_u32), OLC_FN(olc_redx_cols_sum_u32)}},
    {{OLC_FN(olc_redx_rows_max_i64), OLC_FN(olc_redx_rows_min_i64),
      OLC_FN(olc_redx_rows_prod_u64), OLC_FN(olc_redx_rows_sum_u64)},
     {OLC_FN(olc_redx_cols_max_i64), OLC_FN(olc_redx_cols_min_i64),
      OLC_FN(olc_redx_cols_prod_u64), OLC_FN(olc_redx_cols_sum_u64)}},
    {{OLC_FN(olc_redx_rows_max_u64), OLC_FN(olc_redx_rows_min_u64),
      OLC_FN(olc_redx_rows_prod_u64), OLC_FN(olc_redx_rows_sum_u64)},
     {OLC_FN(olc_redx_cols_max_u64), OLC_FN(olc_redx_cols_min_u64),
      OLC_FN(olc_redx_cols_prod_u64), OLC_FN(olc_redx_cols_sum_u64)}}};
