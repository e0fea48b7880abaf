# The C API of olc_conv_deform.h that conv.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "conv/olc_conv_deform.h" nogil:
    ctypedef struct olc_conv_deform_geom:
        int64_t C, OG, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW
    int64_t olc_conv_deform_scratch(int level, int64_t K, int64_t P, int f64)
    int olc_conv_deform_level(int level)
    int olc_conv_deform(int level, const olc_conv_deform_geom *d, int f64, const void *x,
                        const void *w, const void *off, const void *mask, const void *bias,
                        void *y, int64_t N, int64_t G, int64_t Mg, int nthreads)
