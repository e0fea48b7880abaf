/* The kinds of one element type at one level: reduce/olc_reduce_redx.h for
 * Max and Min, and for Prod and Sum where OLC_REDX_ARITH is 1.  The type
 * gives OLC_REDX_LO and OLC_REDX_HI (the identities of Max and Min) and
 * OLC_REDX_NANS (1: Max and Min flag a NaN; integers and the products and
 * sums, where NaN propagates by itself, do not); its other names are in
 * reduce/olc_reduce_ext.h.  Included once per type, it #undefs the type's
 * names at its end (as common/olc_each_level.h does OLC_BODY); no include
 * guard. */

#ifndef OLC_REDX_A
#define OLC_REDX_A OLC_REDX_T
#define OLC_REDX_LOAD OLC_REDX_LOAD_SAME
#define OLC_REDX_STORE OLC_REDX_STORE_SAME
#endif

#define OLC_REDX_KIND max
#define OLC_REDX_INIT OLC_REDX_LO
#define OLC_REDX_JOIN OLC_REDX_MAX
#if OLC_REDX_NANS
#define OLC_REDX_NANCHK OLC_REDX_ISNAN
#else
#define OLC_REDX_NANCHK OLC_REDX_NONAN
#endif
#define OLC_REDX_PAD 0
#include "reduce/olc_reduce_redx.h"
#undef OLC_REDX_KIND
#undef OLC_REDX_INIT
#undef OLC_REDX_JOIN

#define OLC_REDX_KIND min
#define OLC_REDX_INIT OLC_REDX_HI
#define OLC_REDX_JOIN OLC_REDX_MIN
#include "reduce/olc_reduce_redx.h"
#undef OLC_REDX_KIND
#undef OLC_REDX_INIT
#undef OLC_REDX_JOIN
#undef OLC_REDX_NANCHK
#undef OLC_REDX_PAD

#if OLC_REDX_ARITH
#define OLC_REDX_NANCHK OLC_REDX_NONAN
#define OLC_REDX_PAD 1
#define OLC_REDX_KIND prod
#define OLC_REDX_INIT 1
#define OLC_REDX_JOIN OLC_REDX_MUL
#include "reduce/olc_reduce_redx.h"
#undef OLC_REDX_KIND
#undef OLC_REDX_INIT
#undef OLC_REDX_JOIN

#define OLC_REDX_KIND sum
#define OLC_REDX_INIT 0
#define OLC_REDX_JOIN OLC_REDX_ADD
#include "reduce/olc_reduce_redx.h"
#undef OLC_REDX_KIND
#undef OLC_REDX_INIT
#undef OLC_REDX_JOIN
#undef OLC_REDX_NANCHK
#undef OLC_REDX_PAD
#endif

#undef OLC_REDX_TN
#undef OLC_REDX_T
#undef OLC_REDX_A
#undef OLC_REDX_LOAD
#undef OLC_REDX_STORE
#undef OLC_REDX_LO
#undef OLC_REDX_HI
#undef OLC_REDX_NANS
#undef OLC_REDX_ARITH
