# The instruction-set levels and their detection, and olc_line_head (see olc_cpu.h).

from libc.stdint cimport int64_t


cdef extern from "common/olc_cpu.h" nogil:
    int OLC_SCALAR
    int OLC_AVX2
    int OLC_AVX512
    int OLC_AVX512_VNNI
    int OLC_HAVE_AVX512
    int olc_detect_simd_level()
    int olc_build_level(int level)
    int olc_int8_level(int level)
    int64_t olc_line_head(const void *y, int64_t size, int64_t n)
