# The C API of olc_block_codes.h that the cores use.
from libc.stdint cimport int64_t, uint8_t

cdef extern from "engines/block_codes/olc_block_codes.h" nogil:
    int olc_bc_zp_default(int bits)
    int64_t olc_bc_zp_bytes(int64_t groups, int bits)
    void olc_bc_unpack_zp(const uint8_t *packed, int64_t rows, int64_t row_bytes,
                          int64_t groups, int bits, uint8_t *out)
