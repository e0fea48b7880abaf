# cython: language_level=3
"""Recurrent cores: RNN, GRU and LSTM, one direction a task (see
olc_recurrent.h for the scheme).

The adapter passes, per direction, the arrays the C job reads (dense,
float32 or float64, weights already packed or transposed) and the sizes;
``run`` fills the jobs and releases the GIL for the whole recurrence.
"""

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t

from olc_pool cimport olc_pool_import
from olc_recurrent cimport olc_rnn_dir, olc_rnn_run

cnp.import_array()
olc_pool_import()

DEF MAX_DIRECTIONS = 2


cdef inline const void *_data(object a):
    """The data of array ``a``, NULL for None."""
    if a is None:
        return NULL
    return cnp.PyArray_DATA(<cnp.ndarray>a)


def run(int cell, bint is_double, int64_t T, int64_t B, int64_t H, int64_t I, list directions,
        tuple acts, float clip, bint lbr, bint input_forget, bint r_dense, int level,
        int threads, int proj_threads, bint parallel):
    """Runs every direction of one node.  ``directions``: per direction a
    tuple (x, xs_t, xs_b, w, bias, xw, r0, r1, rbh, p, h, c, y, y_offset,
    ys_t, ys_b, scratch, lens, reverse); ``acts``: per direction three (code, alpha, beta);
    ``r_dense``: the float R^T are dense [H, N] (batch 1: one GEMV a step), not packed.
    ``threads``: of each step's GEMM, ``proj_threads``: of the input
    projection; ``parallel``: the directions run as parallel tasks (each
    on one thread).  Outputs land in the h, c and y arrays given."""
    cdef olc_rnn_dir dirs[MAX_DIRECTIONS]
    cdef int ndir = len(directions), k, j
    if ndir < 1 or ndir > MAX_DIRECTIONS:
        raise ValueError("recurrent core: one or two directions")
    cdef int64_t item = 8 if is_double else 4
    for k in range(ndir):
        (x, xs_t, xs_b, w, bias, xw, r0, r1, rbh, p, h, c, y, y_offset, ys_t, ys_b, scratch,
         lens, reverse) = directions[k]
        dirs[k].cell = cell
        dirs[k].level = level
        dirs[k].threads = threads
        dirs[k].proj_threads = proj_threads
        dirs[k].reverse = reverse
        dirs[k].lbr = lbr
        dirs[k].input_forget = input_forget
        dirs[k].T = T
        dirs[k].B = B
        dirs[k].H = H
        dirs[k].K = I
        dirs[k].lens = <const int32_t *>_data(lens)
        dirs[k].x = _data(x)
        dirs[k].xs_t = xs_t
        dirs[k].xs_b = xs_b
        dirs[k].w = _data(w)
        dirs[k].bias = _data(bias)
        dirs[k].xw = <void *>_data(xw)
        dirs[k].r[0] = _data(r0)
        dirs[k].r[1] = _data(r1)
        dirs[k].r_dense = r_dense
        dirs[k].rbh = _data(rbh)
        dirs[k].p = _data(p)
        dirs[k].h = <void *>_data(h)
        dirs[k].c = <void *>_data(c)
        dirs[k].y = NULL
        if y is not None:
            dirs[k].y = <void *>(<char *>_data(y) + <int64_t>y_offset * item)
        dirs[k].ys_t = ys_t
        dirs[k].ys_b = ys_b
        dirs[k].scratch = <void *>_data(scratch)
        for j in range(3):
            dirs[k].act[j].code = acts[k][j][0]
            dirs[k].act[j].alpha = acts[k][j][1]
            dirs[k].act[j].beta = acts[k][j][2]
        dirs[k].clip = clip
        dirs[k].failed = 0
    cdef int status
    with nogil:
        status = olc_rnn_run(dirs, ndir, is_double, parallel)
    if status != 0:
        raise MemoryError("recurrent core: no memory for the GEMM's scratch")
