# The C API of olc_conv.h that conv.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "conv/olc_conv.h" nogil:
    ctypedef struct olc_conv_geom:
        int64_t C, D, H, W, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, OD, OH, OW
    int OLC_CONV_TILE_FLOATS
    int64_t olc_conv_tile_cols(int level, int64_t K, int64_t P, int64_t Mg, int nthreads)
    int64_t olc_conv_scratch(int level, int64_t K, int64_t P, int64_t Mg, int pointwise,
                             int nthreads)
    int olc_conv_tasked(int64_t P, int64_t Mg, int64_t nr, int pointwise, int nthreads)
    int64_t olc_conv_task_floats(int level, int64_t K, int64_t pt)
    void olc_conv_epilogue(int level, float *y, const float *z, int64_t ld, int64_t rows,
                           int64_t cols, const float *bias, int act, float a, float b)
    int olc_conv_f32(int level, const olc_conv_geom *g, const float *x, const float *w,
                     int64_t ldw, const float *bias, const float *z, float *y, int64_t N,
                     int64_t G, int64_t Mg, int pointwise, int act, float a, float b,
                     int nthreads)
    int64_t olc_conv_t_images(const olc_conv_geom *g, int64_t N)
    int64_t olc_conv_t_scratch(const olc_conv_geom *g, int64_t M, int64_t N)
    int olc_conv_f32_t(int level, const olc_conv_geom *g, const float *x, const float *wt,
                       const float *bias, const float *z, float *y, int64_t N, int64_t M,
                       int act, float a, float b, float *scratch, int nthreads)
    void olc_conv_col2im_f32(const olc_conv_geom *g, const float *col, int64_t ld, int64_t l0,
                             int64_t lt, float *plane)
    void olc_conv_col2im_f64(const olc_conv_geom *g, const double *col, int64_t ld, int64_t l0,
                             int64_t lt, double *plane)
    ctypedef void (*olc_conv_direct_f32_fn)(const olc_conv_geom *g, const float *x,
                                            const float *w, float bias, float *y, int64_t r0,
                                            int64_t r1)
    ctypedef void (*olc_conv_direct_f64_fn)(const olc_conv_geom *g, const double *x,
                                            const double *w, double bias, double *y, int64_t r0,
                                            int64_t r1)
    ctypedef void (*olc_conv_tdirect_f64_fn)(const olc_conv_geom *g, const double *x,
                                             const double *w, int64_t Mg, int64_t m,
                                             double bias, double *y)
    olc_conv_direct_f32_fn olc_conv_pick_direct_f32(int level)
    ctypedef void (*olc_conv_dwp_f32_fn)(const olc_conv_geom *g, const float *x,
                                         const float *w, float bias, int act, float a,
                                         float b, float *y, int64_t r0, int64_t r1)
    olc_conv_dwp_f32_fn olc_conv_pick_dwp_f32(int level, const olc_conv_geom *g)
    ctypedef void (*olc_conv_dwf_f32_fn)(const olc_conv_geom *g, const float *x,
                                         const float *w, const float *bias, int64_t planes,
                                         int act, float a, float b, float *y)
    olc_conv_dwf_f32_fn olc_conv_pick_dwf_f32(int level, const olc_conv_geom *g)
    int olc_conv_act_fusable(int act)
    int olc_conv_fewc_fits(const olc_conv_geom *g, int level)
    void olc_conv_fewc_f32(const olc_conv_geom *g, const float *x, const float *w,
                           const float *bias, const float *z, float *y, int64_t N, int64_t M,
                           int act, float a, float b, int nthreads)
    olc_conv_direct_f64_fn olc_conv_pick_direct_f64(int level)
    olc_conv_tdirect_f64_fn olc_conv_pick_tdirect_f64(int level)
    int olc_conv_level(int level)
    ctypedef void (*olc_conv_dw3_f32_fn)(const olc_conv_geom *g, const float *xp, int64_t Wp,
                                         const float *w, float bias, float *t, float *y,
                                         int64_t r0, int64_t r1)
    olc_conv_dw3_f32_fn olc_conv_pick_dw3_f32(int level)
    int olc_conv_dw3_fits(const olc_conv_geom *g)
    int64_t olc_conv_dw3_width(const olc_conv_geom *g)
    ctypedef void (*olc_conv_dwc_f32_fn)(const olc_conv_geom *g, const float *x,
                                         const float *w, const float *bias, int64_t nc,
                                         float *buf, float *y, int64_t r0, int64_t r1)
    olc_conv_dwc_f32_fn olc_conv_pick_dwc_f32(int level)
    int olc_conv_dwc_fits(const olc_conv_geom *g, int64_t max_plane)
    int64_t olc_conv_dwc_floats(const olc_conv_geom *g, int64_t rb)
    int64_t olc_conv_dwc_band(const olc_conv_geom *g, int64_t floats)
    enum: OLC_CONV_DWC
    void olc_conv_pad_rows(const olc_conv_geom *g, const float *x, int64_t r0, int64_t r1,
                           float *xp, float *t)
    void olc_conv_wino_filter(const float *w, int64_t M, int64_t C, float *u)
    int64_t olc_conv_wino_scratch(const olc_conv_geom *g, int64_t M, int nthreads)
    int olc_conv_wino_f32(int level, const olc_conv_geom *g, const float *x, const float *up,
                          const float *bias, const float *z, float *y, float *scratch,
                          int64_t N, int64_t M, int act, float a, float b, int nthreads)
