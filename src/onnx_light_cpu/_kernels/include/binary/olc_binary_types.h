/* One level's binary kernels, a type at a time (a body file: see
 * common/olc_level.h).  olc_binary.h includes it once per level with
 * OLC_BIN_PORTABLE set to 1 for the portable level: there every type has
 * all of its operations; at the vector levels only the operations that
 * vectorise, on the types the fast paths cover.  The wrapping operations
 * (add, sub, mul, eq, bitwise) of a signed type are its unsigned twin's. */

#define OLC_T float
#define OLC_TN f32
#define OLC_U float
#define OLC_BIN_KIND OLC_BIN_FLOAT
#define OLC_BIN_GROUPS (OLC_BIN_PORTABLE ? OLC_BIN_G_ALL : OLC_BIN_G_ALL & ~OLC_BIN_G_REM & ~OLC_BIN_G_POW)
#include "binary/olc_binary_ops.h"

#define OLC_T int8_t
#define OLC_TN i8
#define OLC_U unsigned
#define OLC_BIN_KIND OLC_BIN_SIGNED
#define OLC_BIN_GROUPS (OLC_BIN_PORTABLE ? OLC_BIN_G_ORDER | OLC_BIN_G_DIV | OLC_BIN_G_REM : OLC_BIN_G_ORDER)
#include "binary/olc_binary_ops.h"

#define OLC_T uint8_t
#define OLC_TN u8
#define OLC_U unsigned
#define OLC_BIN_KIND OLC_BIN_UNSIGNED
#define OLC_BIN_GROUPS (OLC_BIN_PORTABLE ? OLC_BIN_G_ALL & ~OLC_BIN_G_PRELU & ~OLC_BIN_G_POW : OLC_BIN_G_ARITH | OLC_BIN_G_ORDER)
#include "binary/olc_binary_ops.h"

#define OLC_T int32_t
#define OLC_TN i32
#define OLC_U uint32_t
#define OLC_BIN_KIND OLC_BIN_SIGNED
#define OLC_BIN_GROUPS (OLC_BIN_PORTABLE ? OLC_BIN_G_ALL & ~OLC_BIN_G_ARITH : OLC_BIN_G_ORDER | OLC_BIN_G_PRELU)
#include "binary/olc_binary_ops.h"

#define OLC_T uint32_t
#define OLC_TN u32
#define OLC_U uint32_t
#define OLC_BIN_KIND OLC_BIN_UNSIGNED
#define OLC_BIN_GROUPS (OLC_BIN_PORTABLE ? OLC_BIN_G_ALL & ~OLC_BIN_G_POW : OLC_BIN_G_ARITH)
#include "binary/olc_binary_ops.h"

#define OLC_T int64_t
#define OLC_TN i64
#define OLC_U uint64_t
#define OLC_BIN_KIND OLC_BIN_SIGNED
#define OLC_BIN_GROUPS (OLC_BIN_PORTABLE ? OLC_BIN_G_ALL & ~OLC_BIN_G_ARITH : OLC_BIN_G_ORDER | OLC_BIN_G_PRELU)
#include "binary/olc_binary_ops.h"

#define OLC_T uint64_t
#define OLC_TN u64
#define OLC_U uint64_t
#define OLC_BIN_KIND OLC_BIN_UNSIGNED
#define OLC_BIN_GROUPS (OLC_BIN_PORTABLE ? OLC_BIN_G_ALL & ~OLC_BIN_G_POW : OLC_BIN_G_ARITH)
#include "binary/olc_binary_ops.h"

#if OLC_BIN_PORTABLE
/* Portable only: float64 and the 16-bit integers (the baseline build
 * still vectorises them with SSE2). */
#define OLC_T double
#define OLC_TN f64
#define OLC_U double
#define OLC_BIN_KIND OLC_BIN_FLOAT
#define OLC_BIN_GROUPS OLC_BIN_G_ALL
#include "binary/olc_binary_ops.h"

#define OLC_T int16_t
#define OLC_TN i16
#define OLC_U unsigned
#define OLC_BIN_KIND OLC_BIN_SIGNED
#define OLC_BIN_GROUPS (OLC_BIN_G_ORDER | OLC_BIN_G_DIV | OLC_BIN_G_REM)
#include "binary/olc_binary_ops.h"

#define OLC_T uint16_t
#define OLC_TN u16
#define OLC_U unsigned
#define OLC_BIN_KIND OLC_BIN_UNSIGNED
#define OLC_BIN_GROUPS (OLC_BIN_G_ALL & ~OLC_BIN_G_PRELU & ~OLC_BIN_G_POW)
#include "binary/olc_binary_ops.h"
#endif
