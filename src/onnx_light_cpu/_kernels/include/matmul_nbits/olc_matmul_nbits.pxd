# The C API of olc_matmul_nbits.h that the matmul_nbits core uses.
from libc.stdint cimport int64_t, uint8_t

cdef extern from "matmul_nbits/olc_matmul_nbits.h" nogil:
    ctypedef struct olc_nb_w:
        const uint8_t *b
        const float *scales
        const float *zp
        float zp_default
        int64_t K, N, nb, blob, block
        int bits
        int finite
        int panel_rows
        const uint8_t *rows
        const float *rscales
        const float *roffs
    ctypedef struct olc_q8_w:
        const uint8_t *codes
        const float *scales
        const uint8_t *zp
        int64_t K, N, nb, block, tiles
        int split
        int packed4
    int olc_nb_panel_level(int level)
    int olc_nb_float(const olc_nb_w *w, const float *a, int64_t M, const float *bias, float *y,
                     int level, int nthreads, int *route)
    int64_t olc_nb_scratch(const olc_nb_w *w, int64_t M, int level, int nthreads)
    int olc_nb_route(const olc_nb_w *w, int64_t M, int level)
    int64_t olc_nb_rows_bytes(const olc_nb_w *w)
    int64_t olc_nb_rows_params(const olc_nb_w *w)
    void olc_nb_prepare_rows(const olc_nb_w *w, uint8_t *rows, float *rscales, float *roffs)
    int olc_q8_level(int level)
    int64_t olc_q8_tiles(int64_t N)
    int64_t olc_q8_block_bytes(int64_t block, int packed4)
    void olc_q8_prepare(const olc_nb_w *w, int64_t ablock, uint8_t *codes, float *scales,
                        uint8_t *zp)
    int64_t olc_q8_scratch(int64_t M, int64_t nb, int64_t block)
    int olc_q8_run(const olc_q8_w *w, const float *a, int64_t M, const float *bias, float *y,
                   int level, int nthreads)
