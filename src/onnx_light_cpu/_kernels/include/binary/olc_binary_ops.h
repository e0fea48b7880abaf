/* The binary operations of one element type at one level (a body file:
 * see common/olc_level.h).  olc_binary.h includes it once per (level, type)
 * with these set, and the body undefines them at its end:
 *
 *   OLC_T           the element type
 *   OLC_TN          its name in function names (f32, i8, ...): OLC_TFN(name)
 *                   is name_<type>_<level>
 *   OLC_U           the type wrapping integer arithmetic goes through: the
 *                   unsigned type of the same width, at least unsigned int
 *                   (so uint16 products do not promote to a signed int that
 *                   overflows); OLC_T itself for a float type
 *   OLC_BIN_KIND    OLC_BIN_FLOAT, OLC_BIN_SIGNED or OLC_BIN_UNSIGNED
 *   OLC_BIN_GROUPS  the groups of operations to compile (OLC_BIN_G_*)
 *
 * Each operation is an element function OLC_TFN(olc_bin_<op>) and three
 * kernels OLC_TFN(olc_b_<op>_vv), _sv, _vs (olc_bin_fn) running it over a
 * row; OLC_TFN(olc_bin_table) lists them by operation (NULL: not compiled
 * for this type and level).
 */

/* The loop of an operation in variant v, always inlined with a constant
 * op and v: each kernel is its own function holding one loop, the
 * operation inlined.
 *   vv: y[i] = a[i] op b[i]     sv: y[i] = a[0] op b[i]     vs: y[i] = a[i] op b[0]
 * (Three loops in one function let GCC merge their scalar tails, which
 * swaps the operands of a commutative operation and so the NaN payload x86
 * returns when both are NaN; a is loaded before b for the same reason.) */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_TFN(olc_bin_map)(
    OLC_T (*op)(OLC_T, OLC_T), int v, const void *pa, const void *pb, void *py, int64_t n) {
    const OLC_T *a = (const OLC_T *)pa, *b = (const OLC_T *)pb;
    OLC_T *y = (OLC_T *)py;
    if (v == OLC_VV) {
        for (int64_t i = 0; i < n; ++i) {
            const OLC_T x = a[i], z = b[i];
            y[i] = op(x, z);
        }
    } else if (v == OLC_SV) {
        const OLC_T x = a[0];
        for (int64_t i = 0; i < n; ++i) {
            const OLC_T z = b[i];
            y[i] = op(x, z);
        }
    } else {
        const OLC_T z = b[0];
        for (int64_t i = 0; i < n; ++i) {
            const OLC_T x = a[i];
            y[i] = op(x, z);
        }
    }
}
/* The same with a bool (0/1 byte) result: comparisons. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_TFN(olc_bin_test)(
    uint8_t (*op)(OLC_T, OLC_T), int v, const void *pa, const void *pb, void *py, int64_t n) {
    const OLC_T *a = (const OLC_T *)pa, *b = (const OLC_T *)pb;
    uint8_t *y = (uint8_t *)py;
    if (v == OLC_VV) {
        for (int64_t i = 0; i < n; ++i) {
            const OLC_T x = a[i], z = b[i];
            y[i] = op(x, z);
        }
    } else if (v == OLC_SV) {
        const OLC_T x = a[0];
        for (int64_t i = 0; i < n; ++i) {
            const OLC_T z = b[i];
            y[i] = op(x, z);
        }
    } else {
        const OLC_T z = b[0];
        for (int64_t i = 0; i < n; ++i) {
            const OLC_T x = a[i];
            y[i] = op(x, z);
        }
    }
}

#if OLC_BIN_GROUPS & OLC_BIN_G_ARITH
/* Integers wrap (through OLC_U). */
static inline OLC_T OLC_TFN(olc_bin_add)(OLC_T x, OLC_T z) { return (OLC_T)((OLC_U)x + (OLC_U)z); }
static inline OLC_T OLC_TFN(olc_bin_sub)(OLC_T x, OLC_T z) { return (OLC_T)((OLC_U)x - (OLC_U)z); }
static inline OLC_T OLC_TFN(olc_bin_mul)(OLC_T x, OLC_T z) { return (OLC_T)((OLC_U)x * (OLC_U)z); }
static inline uint8_t OLC_TFN(olc_bin_eq)(OLC_T x, OLC_T z) { return (uint8_t)(x == z); }
OLC_LVL_ATTR static void OLC_TFN(olc_b_add_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_add), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_add_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_add), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_add_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_add), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_sub_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_sub), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_sub_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_sub), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_sub_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_sub), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_mul_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_mul), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_mul_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_mul), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_mul_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_mul), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_eq_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_eq), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_eq_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_eq), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_eq_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_eq), OLC_VS, a, b, y, n);
}
#if OLC_BIN_KIND != OLC_BIN_FLOAT
/* Bitwise; on bool (0/1 bytes) also And, Or and Xor. */
static inline OLC_T OLC_TFN(olc_bin_band)(OLC_T x, OLC_T z) { return (OLC_T)(x & z); }
static inline OLC_T OLC_TFN(olc_bin_bor)(OLC_T x, OLC_T z) { return (OLC_T)(x | z); }
static inline OLC_T OLC_TFN(olc_bin_bxor)(OLC_T x, OLC_T z) { return (OLC_T)(x ^ z); }
OLC_LVL_ATTR static void OLC_TFN(olc_b_band_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_band), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_band_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_band), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_band_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_band), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_bor_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_bor), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_bor_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_bor), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_bor_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_bor), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_bxor_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_bxor), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_bxor_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_bxor), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_bxor_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_bxor), OLC_VS, a, b, y, n);
}
#endif
#endif

#if OLC_BIN_GROUPS & OLC_BIN_G_ORDER
#if OLC_BIN_KIND == OLC_BIN_FLOAT
/* NaN propagates through Min/Max as in np.minimum / np.maximum: the first
 * NaN operand is the result. */
static inline OLC_T OLC_TFN(olc_bin_min)(OLC_T x, OLC_T z) {
    return x != x ? x : z != z ? z : x < z ? x : z;
}
static inline OLC_T OLC_TFN(olc_bin_max)(OLC_T x, OLC_T z) {
    return x != x ? x : z != z ? z : x > z ? x : z;
}
#else
static inline OLC_T OLC_TFN(olc_bin_min)(OLC_T x, OLC_T z) { return x < z ? x : z; }
static inline OLC_T OLC_TFN(olc_bin_max)(OLC_T x, OLC_T z) { return x > z ? x : z; }
#endif
static inline uint8_t OLC_TFN(olc_bin_gt)(OLC_T x, OLC_T z) { return (uint8_t)(x > z); }
static inline uint8_t OLC_TFN(olc_bin_ge)(OLC_T x, OLC_T z) { return (uint8_t)(x >= z); }
static inline uint8_t OLC_TFN(olc_bin_lt)(OLC_T x, OLC_T z) { return (uint8_t)(x < z); }
static inline uint8_t OLC_TFN(olc_bin_le)(OLC_T x, OLC_T z) { return (uint8_t)(x <= z); }
OLC_LVL_ATTR static void OLC_TFN(olc_b_min_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_min), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_min_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_min), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_min_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_min), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_max_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_max), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_max_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_max), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_max_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_max), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_gt_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_gt), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_gt_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_gt), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_gt_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_gt), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_ge_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_ge), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_ge_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_ge), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_ge_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_ge), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_lt_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_lt), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_lt_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_lt), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_lt_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_lt), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_le_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_le), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_le_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_le), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_le_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_test)(OLC_TFN(olc_bin_le), OLC_VS, a, b, y, n);
}
#endif

#if OLC_BIN_GROUPS & OLC_BIN_G_PRELU
/* x > 0 ? x : x * slope, the product wrapping for integers. */
static inline OLC_T OLC_TFN(olc_bin_prelu)(OLC_T x, OLC_T z) {
    return x > 0 ? x : (OLC_T)((OLC_U)x * (OLC_U)z);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_prelu_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_prelu), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_prelu_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_prelu), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_prelu_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_prelu), OLC_VS, a, b, y, n);
}
#endif

#if OLC_BIN_GROUPS & OLC_BIN_G_DIV
#if OLC_BIN_KIND == OLC_BIN_FLOAT
static inline OLC_T OLC_TFN(olc_bin_div)(OLC_T x, OLC_T z) { return x / z; }
#elif OLC_BIN_KIND == OLC_BIN_SIGNED
/* Truncates toward zero (as onnx.reference does); x / 0 gives 0 and
 * MIN / -1 wraps to MIN, as NumPy, instead of trapping. */
static inline OLC_T OLC_TFN(olc_bin_div)(OLC_T x, OLC_T z) {
    return z == 0 ? (OLC_T)0 : z == -1 ? (OLC_T)(OLC_U)(0u - (OLC_U)x) : (OLC_T)(x / z);
}
#else
static inline OLC_T OLC_TFN(olc_bin_div)(OLC_T x, OLC_T z) { return z == 0 ? 0 : x / z; }
#endif
OLC_LVL_ATTR static void OLC_TFN(olc_b_div_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_div), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_div_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_div), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_div_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_div), OLC_VS, a, b, y, n);
}
#endif

#if OLC_BIN_GROUPS & OLC_BIN_G_REM
#define OLC_BIN_BITS_ ((OLC_T)(8 * sizeof(OLC_T)))
#if OLC_BIN_KIND == OLC_BIN_FLOAT
/* fmod: C's (sign of the dividend); mod: NumPy's (sign of the divisor). */
static inline OLC_T OLC_TFN(olc_bin_fmod)(OLC_T x, OLC_T z) {
    return _Generic((x), float: fmodf, default: fmod)(x, z);
}
static inline OLC_T OLC_TFN(olc_bin_mod)(OLC_T x, OLC_T z) {
    return _Generic((x), float: olc_pymodf_, default: olc_pymod_)(x, z);
}
#elif OLC_BIN_KIND == OLC_BIN_SIGNED
/* fmod: C's remainder (sign of the dividend), 0 for x % 0 and MIN % -1;
 * mod: Python's (sign of the divisor). */
static inline OLC_T OLC_TFN(olc_bin_fmod)(OLC_T x, OLC_T z) {
    return (OLC_T)(z == 0 || z == -1 ? 0 : x % z);
}
static inline OLC_T OLC_TFN(olc_bin_mod)(OLC_T x, OLC_T z) {
    OLC_T r = OLC_TFN(olc_bin_fmod)(x, z);
    return (OLC_T)(r != 0 && ((r < 0) != (z < 0)) ? r + z : r);
}
/* A count outside [0, bits) shifts everything out (the sign stays for a
 * right shift). */
static inline OLC_T OLC_TFN(olc_bin_shl)(OLC_T x, OLC_T z) {
    return z < 0 || z >= OLC_BIN_BITS_ ? 0 : (OLC_T)(OLC_U)((uint64_t)(OLC_U)x << z);
}
static inline OLC_T OLC_TFN(olc_bin_shr)(OLC_T x, OLC_T z) {
    return z < 0 || z >= OLC_BIN_BITS_ ? (x < 0 ? -1 : 0) : x >> z;
}
#else
static inline OLC_T OLC_TFN(olc_bin_fmod)(OLC_T x, OLC_T z) { return z == 0 ? 0 : x % z; }
static inline OLC_T OLC_TFN(olc_bin_mod)(OLC_T x, OLC_T z) { return z == 0 ? 0 : x % z; }
static inline OLC_T OLC_TFN(olc_bin_shl)(OLC_T x, OLC_T z) {
    return z >= OLC_BIN_BITS_ ? 0 : (OLC_T)((uint64_t)x << z);
}
static inline OLC_T OLC_TFN(olc_bin_shr)(OLC_T x, OLC_T z) { return z >= OLC_BIN_BITS_ ? 0 : x >> z; }
#endif
#undef OLC_BIN_BITS_
OLC_LVL_ATTR static void OLC_TFN(olc_b_fmod_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_fmod), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_fmod_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_fmod), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_fmod_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_fmod), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_mod_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_mod), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_mod_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_mod), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_mod_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_mod), OLC_VS, a, b, y, n);
}
#if OLC_BIN_KIND != OLC_BIN_FLOAT
OLC_LVL_ATTR static void OLC_TFN(olc_b_shl_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_shl), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_shl_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_shl), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_shl_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_shl), OLC_VS, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_shr_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_shr), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_shr_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_shr), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_shr_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_shr), OLC_VS, a, b, y, n);
}
#endif
#endif

#if OLC_BIN_GROUPS & OLC_BIN_G_POW
#if OLC_BIN_KIND == OLC_BIN_FLOAT
static inline OLC_T OLC_TFN(olc_bin_pow)(OLC_T x, OLC_T z) {
    return _Generic((x), float: powf, default: pow)(x, z);
}
#else
/* Power by squaring, wrapping as NumPy's integer power does.  A negative
 * exponent (an error in NumPy) gives the truncated 1 / x**-e: 1 for
 * x = 1, +-1 for x = -1, else 0. */
static inline OLC_T OLC_TFN(olc_bin_pow)(OLC_T x, OLC_T e) {
    if (e < 0) return x == 1 ? 1 : x == -1 ? ((e & 1) ? -1 : 1) : 0;
    OLC_U r = 1, b = (OLC_U)x;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return (OLC_T)r;
}
#endif
OLC_LVL_ATTR static void OLC_TFN(olc_b_pow_vv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_pow), OLC_VV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_pow_sv)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_pow), OLC_SV, a, b, y, n);
}
OLC_LVL_ATTR static void OLC_TFN(olc_b_pow_vs)(const void *a, const void *b, void *y, int64_t n) {
    OLC_TFN(olc_bin_map)(OLC_TFN(olc_bin_pow), OLC_VS, a, b, y, n);
}
#endif

static const olc_bin_fn OLC_TFN(olc_bin_table)[OLC_BIN_NOPS][3] = {
#if OLC_BIN_GROUPS & OLC_BIN_G_ARITH
    [OLC_BIN_ADD] = {OLC_TFN(olc_b_add_vv), OLC_TFN(olc_b_add_sv), OLC_TFN(olc_b_add_vs)},
    [OLC_BIN_SUB] = {OLC_TFN(olc_b_sub_vv), OLC_TFN(olc_b_sub_sv), OLC_TFN(olc_b_sub_vs)},
    [OLC_BIN_MUL] = {OLC_TFN(olc_b_mul_vv), OLC_TFN(olc_b_mul_sv), OLC_TFN(olc_b_mul_vs)},
    [OLC_BIN_EQ] = {OLC_TFN(olc_b_eq_vv), OLC_TFN(olc_b_eq_sv), OLC_TFN(olc_b_eq_vs)},
#if OLC_BIN_KIND != OLC_BIN_FLOAT
    [OLC_BIN_BAND] = {OLC_TFN(olc_b_band_vv), OLC_TFN(olc_b_band_sv), OLC_TFN(olc_b_band_vs)},
    [OLC_BIN_BOR] = {OLC_TFN(olc_b_bor_vv), OLC_TFN(olc_b_bor_sv), OLC_TFN(olc_b_bor_vs)},
    [OLC_BIN_BXOR] = {OLC_TFN(olc_b_bxor_vv), OLC_TFN(olc_b_bxor_sv), OLC_TFN(olc_b_bxor_vs)},
#endif
#endif
#if OLC_BIN_GROUPS & OLC_BIN_G_ORDER
    [OLC_BIN_MIN] = {OLC_TFN(olc_b_min_vv), OLC_TFN(olc_b_min_sv), OLC_TFN(olc_b_min_vs)},
    [OLC_BIN_MAX] = {OLC_TFN(olc_b_max_vv), OLC_TFN(olc_b_max_sv), OLC_TFN(olc_b_max_vs)},
    [OLC_BIN_GT] = {OLC_TFN(olc_b_gt_vv), OLC_TFN(olc_b_gt_sv), OLC_TFN(olc_b_gt_vs)},
    [OLC_BIN_GE] = {OLC_TFN(olc_b_ge_vv), OLC_TFN(olc_b_ge_sv), OLC_TFN(olc_b_ge_vs)},
    [OLC_BIN_LT] = {OLC_TFN(olc_b_lt_vv), OLC_TFN(olc_b_lt_sv), OLC_TFN(olc_b_lt_vs)},
    [OLC_BIN_LE] = {OLC_TFN(olc_b_le_vv), OLC_TFN(olc_b_le_sv), OLC_TFN(olc_b_le_vs)},
#endif
#if OLC_BIN_GROUPS & OLC_BIN_G_PRELU
    [OLC_BIN_PRELU] = {OLC_TFN(olc_b_prelu_vv), OLC_TFN(olc_b_prelu_sv), OLC_TFN(olc_b_prelu_vs)},
#endif
#if OLC_BIN_GROUPS & OLC_BIN_G_DIV
    [OLC_BIN_DIV] = {OLC_TFN(olc_b_div_vv), OLC_TFN(olc_b_div_sv), OLC_TFN(olc_b_div_vs)},
#endif
#if OLC_BIN_GROUPS & OLC_BIN_G_REM
    [OLC_BIN_FMOD] = {OLC_TFN(olc_b_fmod_vv), OLC_TFN(olc_b_fmod_sv), OLC_TFN(olc_b_fmod_vs)},
    [OLC_BIN_MOD] = {OLC_TFN(olc_b_mod_vv), OLC_TFN(olc_b_mod_sv), OLC_TFN(olc_b_mod_vs)},
#if OLC_BIN_KIND != OLC_BIN_FLOAT
    [OLC_BIN_SHL] = {OLC_TFN(olc_b_shl_vv), OLC_TFN(olc_b_shl_sv), OLC_TFN(olc_b_shl_vs)},
    [OLC_BIN_SHR] = {OLC_TFN(olc_b_shr_vv), OLC_TFN(olc_b_shr_sv), OLC_TFN(olc_b_shr_vs)},
#endif
#endif
#if OLC_BIN_GROUPS & OLC_BIN_G_POW
    [OLC_BIN_POW] = {OLC_TFN(olc_b_pow_vv), OLC_TFN(olc_b_pow_sv), OLC_TFN(olc_b_pow_vs)},
#endif
};

#undef OLC_T
#undef OLC_TN
#undef OLC_U
#undef OLC_BIN_KIND
#undef OLC_BIN_GROUPS
