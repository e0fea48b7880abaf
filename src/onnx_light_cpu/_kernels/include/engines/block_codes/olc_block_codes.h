/* Block-quantized integer codes: how they are packed and what their zero
 * points are (MatMulNBits, GatherBlockQuantized).
 *
 * Codes of 2, 4 or 8 bits are packed 8 / bits a byte, low bits first:
 * code p of a byte string is bits [bits * (p % per), ...) of byte p / per.
 * Codes of 3 bits are one little-endian bit stream: code p is bits
 * [3p, 3p + 3).  Zero points are one unsigned code a block: absent, the
 * default 2^(bits - 1); packed like the codes for 2 and 4 bits (each row
 * starting a byte), one byte a block for 3 and 8 bits.
 *
 * API (every level):
 *   olc_bc_code(codes, bits, p)          code p (2, 3, 4 or 8 bits)
 *   olc_bc_zp_default(bits)              2^(bits - 1)
 *   olc_bc_zp_bytes(groups, bits)        bytes of one row's packed zero points
 *   olc_bc_zp(zp_row, bits, g)           zero point of block g of a row
 *   olc_bc_unpack_zp(packed, rows, row_bytes, groups, bits, out)
 *                                        out[rows][groups], one byte each
 * x86:
 *   olc_bc_codes16(codes, bits, p)       16 codes of 4 or 8 bits from code p
 *                                        (a multiple of 16) as bytes (SSE2)
 *   olc_bc_codes2x16_avx2(codes, p, &lo, &hi)   16 2-bit codes as 2 x 8 int32
 *   olc_bc_codes16_avx512(codes, bits, p)       16 2/4/8-bit codes as int32
 */
#ifndef OLC_BLOCK_CODES_H
#define OLC_BLOCK_CODES_H
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"

static inline unsigned olc_bc_code(const uint8_t *codes, int bits, int64_t p) {
    switch (bits) {
    case 8: return codes[p];
    case 4: return (codes[p >> 1] >> ((p & 1) << 2)) & 15u;
    case 2: return (codes[p >> 2] >> ((p & 3) << 1)) & 3u;
    default: { /* 3 bits: a code may straddle two bytes */
        int64_t bit = 3 * p;
        unsigned v = codes[bit >> 3];
        if ((bit & 7) > 5) v |= (unsigned)codes[(bit >> 3) + 1] << 8;
        return (v >> (bit & 7)) & 7u;
    }
    }
}

static inline int olc_bc_zp_default(int bits) { return 1 << (bits - 1); }

/* 2 and 4 bits: packed like the codes; 3 and 8 bits: one byte a block. */
static inline int64_t olc_bc_zp_bytes(int64_t groups, int bits) {
    return bits == 2 || bits == 4 ? (groups * bits + 7) / 8 : groups;
}

static inline unsigned olc_bc_zp(const uint8_t *zp_row, int bits, int64_t g) {
    return bits == 3 ? zp_row[g] : olc_bc_code(zp_row, bits, g);
}

static void olc_bc_unpack_zp(const uint8_t *packed, int64_t rows, int64_t row_bytes,
                             int64_t groups, int bits, uint8_t *out) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < groups; ++g)
            out[r * groups + g] = (uint8_t)olc_bc_zp(packed + r * row_bytes, bits, g);
}

#if OLC_X86
/* Baseline SSE2, so that every level's functions inline it. */
static inline __m128i olc_bc_codes16(const uint8_t *codes, int bits, int64_t p) {
    if (bits == 8) return _mm_loadu_si128((const __m128i *)(codes + p));
    __m128i x = _mm_loadl_epi64((const __m128i *)(codes + (p >> 1)));
    __m128i m = _mm_set1_epi8(15);
    /* code 2i is byte i's low nibble, 2i + 1 its high one */
    return _mm_unpacklo_epi8(_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16(x, 4), m));
}

/* 2-bit codes p..p+7 and p+8..p+15: the 32 bits of the 16 codes shifted
 * per lane. */
static inline OLC_TARGET_AVX2 void olc_bc_codes2x16_avx2(const uint8_t *codes, int64_t p,
                                                         __m256i *lo, __m256i *hi) {
    uint32_t u;
    memcpy(&u, codes + (p >> 2), 4);
    __m256i v = _mm256_set1_epi32((int)u), m3 = _mm256_set1_epi32(3);
    *lo = _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), m3);
    *hi = _mm256_and_si256(
        _mm256_srlv_epi32(v, _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30)), m3);
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512i olc_bc_codes16_avx512(const uint8_t *codes, int bits,
                                                             int64_t p) {
    if (bits == 2) {
        uint32_t u;
        memcpy(&u, codes + (p >> 2), 4);
        const __m512i sh = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                             28, 30);
        return _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)u), sh),
                                _mm512_set1_epi32(3));
    }
    return _mm512_cvtepu8_epi32(olc_bc_codes16(codes, bits, p));
}
#endif

#endif
