/* ReduceMax, ReduceMin and ReduceProd (and ReduceSum's short rows) of one level (a body file: see
 * common/olc_level.h), one function pair per kind and element type from
 * OLC_REDX_DEFS (reduce/olc_reduce.h):
 *   rows  B == 1: out[a] for rows [a0, a1) of R elements: a row shorter
 *         than 32 in one sequence; a longer one: element i goes to lane
 *         i % 16, the lanes fold in a fixed tree
 *   cols  B > 1: out[b0:b1] of one [R, B] slice, row after row
 * so the order depends on neither the thread count (threads take whole
 * rows or column blocks) nor the level (the compiler vectorises across
 * lanes or columns, never reassociating one of them).  float16 and
 * bfloat16 accumulate in float32 (Max and Min return one of the inputs,
 * exactly); integer products wrap, computed unsigned. */

OLC_REDX_DEFS(max, f32, float, float, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, -INFINITY, OLC_REDX_MAX, OLC_REDX_ISNAN, 0)
OLC_REDX_DEFS(min, f32, float, float, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, INFINITY, OLC_REDX_MIN, OLC_REDX_ISNAN, 0)
OLC_REDX_DEFS(prod, f32, float, float, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 1.0f, OLC_REDX_MUL, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(max, f64, double, double, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, -INFINITY, OLC_REDX_MAX, OLC_REDX_ISNAN, 0)
OLC_REDX_DEFS(min, f64, double, double, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, INFINITY, OLC_REDX_MIN, OLC_REDX_ISNAN, 0)
OLC_REDX_DEFS(prod, f64, double, double, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 1.0, OLC_REDX_MUL, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(max, f16, uint16_t, float, olc_h2f, olc_f2h, -INFINITY, OLC_REDX_MAX, OLC_REDX_ISNAN, 0)
OLC_REDX_DEFS(min, f16, uint16_t, float, olc_h2f, olc_f2h, INFINITY, OLC_REDX_MIN, OLC_REDX_ISNAN, 0)
OLC_REDX_DEFS(prod, f16, uint16_t, float, olc_h2f, olc_f2h, 1.0f, OLC_REDX_MUL, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(max, bf16, uint16_t, float, olc_bf2f, olc_f2bf, -INFINITY, OLC_REDX_MAX, OLC_REDX_ISNAN, 0)
OLC_REDX_DEFS(min, bf16, uint16_t, float, olc_bf2f, olc_f2bf, INFINITY, OLC_REDX_MIN, OLC_REDX_ISNAN, 0)
OLC_REDX_DEFS(prod, bf16, uint16_t, float, olc_bf2f, olc_f2bf, 1.0f, OLC_REDX_MUL, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(max, i8, int8_t, int8_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, INT8_MIN, OLC_REDX_MAX, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(min, i8, int8_t, int8_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, INT8_MAX, OLC_REDX_MIN, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(max, u8, uint8_t, uint8_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 0, OLC_REDX_MAX, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(min, u8, uint8_t, uint8_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, UINT8_MAX, OLC_REDX_MIN, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(max, i32, int32_t, int32_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, INT32_MIN, OLC_REDX_MAX, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(min, i32, int32_t, int32_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, INT32_MAX, OLC_REDX_MIN, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(max, u32, uint32_t, uint32_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 0, OLC_REDX_MAX, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(min, u32, uint32_t, uint32_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, UINT32_MAX, OLC_REDX_MIN, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(max, i64, int64_t, int64_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, INT64_MIN, OLC_REDX_MAX, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(min, i64, int64_t, int64_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, INT64_MAX, OLC_REDX_MIN, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(max, u64, uint64_t, uint64_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 0, OLC_REDX_MAX, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(min, u64, uint64_t, uint64_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, UINT64_MAX, OLC_REDX_MIN, OLC_REDX_NONAN, 0)
OLC_REDX_DEFS(prod, u32, uint32_t, uint32_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 1u, OLC_REDX_MUL, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(prod, u64, uint64_t, uint64_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 1u, OLC_REDX_MUL, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(sum, f32, float, float, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 0.0f, OLC_REDX_ADD, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(sum, f64, double, double, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 0.0, OLC_REDX_ADD, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(sum, f16, uint16_t, float, olc_h2f, olc_f2h, 0.0f, OLC_REDX_ADD, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(sum, bf16, uint16_t, float, olc_bf2f, olc_f2bf, 0.0f, OLC_REDX_ADD, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(sum, u32, uint32_t, uint32_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 0u, OLC_REDX_ADD, OLC_REDX_NONAN, 1)
OLC_REDX_DEFS(sum, u64, uint64_t, uint64_t, OLC_REDX_LOAD_SAME, OLC_REDX_STORE_SAME, 0u, OLC_REDX_ADD, OLC_REDX_NONAN, 1)
