# The C API of binary/olc_binary.h.

from libc.stdint cimport int64_t

from olc_broadcast cimport olc_bcast

cdef extern from "binary/olc_binary.h" nogil:
    ctypedef struct olc_bin_kernel:
        int level
        int in_size
        int out_size
    int olc_binary_select(int op, int dtype, int level, olc_bin_kernel *k)
    int olc_bin_variant(const olc_bcast *p)
    void olc_binary_run(const olc_bin_kernel *k, const olc_bcast *p, const char *a,
                        const char *b, char *y, int64_t begin, int64_t end)
    int OLC_BIN_ADD, OLC_BIN_SUB, OLC_BIN_MUL, OLC_BIN_DIV, OLC_BIN_MOD, OLC_BIN_FMOD
    int OLC_BIN_POW, OLC_BIN_EQ, OLC_BIN_GT, OLC_BIN_GE, OLC_BIN_LT, OLC_BIN_LE
    int OLC_BIN_AND, OLC_BIN_OR, OLC_BIN_XOR, OLC_BIN_BAND, OLC_BIN_BOR, OLC_BIN_BXOR
    int OLC_BIN_SHL, OLC_BIN_SHR, OLC_BIN_PRELU, OLC_BIN_MIN, OLC_BIN_MAX
    int OLC_VV, OLC_SV, OLC_VS
