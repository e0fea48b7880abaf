# cython: language_level=3
"""Pooling core: spatial max, average and Lp pools, the global pools, LRN
and MaxRoiPool (``include/pooling/olc_pooling.h``).

The adapter passes C-contiguous float32, float64 (and int8/uint8 for max)
arrays, the spatial sizes padded in front with 1s to three dimensions, and
the window parameters; the level's function is chosen once and whole planes
go to the worker pool in blocks (each plane's result does not depend on
the block it falls in).
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_pooling cimport (
    OLC_POOLING_AVG,
    OLC_POOLING_LP,
    OLC_POOLING_MAX,
    olc_pooling_args,
    olc_pooling_fn,
    olc_pooling_level,
    olc_pooling_select,
)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

MAX = OLC_POOLING_MAX
AVG = OLC_POOLING_AVG
LP = OLC_POOLING_LP
# olc_pooling_select's first argument
SPATIAL_MAX, SPATIAL_MAX_INDICES, SPATIAL_SUM, GLOBAL, LRN, ROI = 0, 1, 2, 3, 4, 5


def level_used(int level):
    """The instruction-set level the pooling loops run at."""
    return olc_pooling_level(level)


cdef struct _PoolJob:
    olc_pooling_fn fn
    olc_pooling_args *p
    int64_t planes, nblocks


cdef void _pool_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _PoolJob *job = <_PoolJob *>arg
    job.fn(job.p, job.planes * t // job.nblocks, job.planes * (t + 1) // job.nblocks)


cdef int _run(int what, olc_pooling_args *p, int64_t planes, int dtype, int level,
              int threads) except -1:
    cdef olc_pooling_fn fn = olc_pooling_select(what, dtype, level)
    if fn == NULL:
        raise TypeError(f"pooling core: no function {what} for element type {dtype}")
    cdef _PoolJob job
    if planes <= 0:
        return 0
    if threads <= 1 or planes < 2:
        with nogil:
            fn(p, 0, planes)
        return 0
    # a few blocks a thread, so the caller can take over a late worker's share
    job.fn, job.p, job.planes = fn, p, planes
    job.nblocks = min(planes, 4 * threads)
    with nogil:
        olc_parallel_for(job.nblocks, _pool_task, &job, threads)
    return 0


def spatial(cnp.ndarray x, cnp.ndarray y, indices, int mode, tuple in_dims, tuple out_dims,
            tuple kernel, tuple strides, tuple pads_begin, tuple dilations, counts,
            int storage_order, double p, int64_t planes, int dtype, int level, int threads):
    """MaxPool (with indices when ``indices`` is an int64 array), AveragePool
    (``counts``: three int64 arrays, window positions counted per output
    coordinate) or LpPool over ``planes`` planes of 3-D (padded) shape."""
    cdef olc_pooling_args a
    cdef int i
    cdef cnp.ndarray c0, c1, c2
    a.x = cnp.PyArray_DATA(x)
    a.y = cnp.PyArray_DATA(y)
    a.idx = NULL
    for i in range(3):
        a.in_[i] = in_dims[i]
        a.out[i] = out_dims[i]
        a.k[i] = kernel[i]
        a.s[i] = strides[i]
        a.pb[i] = pads_begin[i]
        a.d[i] = dilations[i]
        a.cnt[i] = NULL
    a.mode = mode
    a.storage_order = storage_order
    a.p = p
    cdef int what = SPATIAL_SUM
    if mode == OLC_POOLING_MAX:
        what = SPATIAL_MAX
        if indices is not None:
            what = SPATIAL_MAX_INDICES
            a.idx = <int64_t *>cnp.PyArray_DATA(indices)
    elif mode == OLC_POOLING_AVG:
        c0, c1, c2 = counts
        a.cnt[0] = cnp.PyArray_DATA(c0)
        a.cnt[1] = cnp.PyArray_DATA(c1)
        a.cnt[2] = cnp.PyArray_DATA(c2)
    _run(what, &a, planes, dtype, level, threads)


def global_pool(cnp.ndarray x, cnp.ndarray y, int mode, double p, int64_t planes, int64_t n,
                int dtype, int level, int threads):
    """GlobalMaxPool, GlobalAveragePool, GlobalLpPool over ``planes`` planes of
    ``n`` elements."""
    cdef olc_pooling_args a
    a.x = cnp.PyArray_DATA(x)
    a.y = cnp.PyArray_DATA(y)
    a.mode = mode
    a.p = p
    a.HW = n
    _run(GLOBAL, &a, planes, dtype, level, threads)


def lrn(cnp.ndarray x, cnp.ndarray y, int64_t N, int64_t C, int64_t HW, int64_t lo, int64_t hi,
        double alpha_over_size, double beta, double bias, int dtype, int level, int threads):
    """LRN of x [N, C, HW]: channel window c - lo .. c + hi."""
    cdef olc_pooling_args a
    a.x = cnp.PyArray_DATA(x)
    a.y = cnp.PyArray_DATA(y)
    a.C, a.HW, a.lo, a.hi = C, HW, lo, hi
    a.alpha_over_size, a.beta, a.bias = alpha_over_size, beta, bias
    _run(LRN, &a, N * C, dtype, level, threads)


def roi(cnp.ndarray x, cnp.ndarray rois, cnp.ndarray y, int64_t C, int64_t H, int64_t W,
        int64_t ph, int64_t pw, float spatial_scale, int dtype, int level, int threads):
    """MaxRoiPool: y [R, C, ph, pw] from x [N, C, H, W] and rois [R, 5]."""
    cdef olc_pooling_args a
    a.x = cnp.PyArray_DATA(x)
    a.y = cnp.PyArray_DATA(y)
    a.rois = cnp.PyArray_DATA(rois)
    a.C = C
    a.in_[0], a.in_[1], a.in_[2] = 1, H, W
    a.ph, a.pw, a.spatial_scale = ph, pw, spatial_scale
    _run(ROI, &a, cnp.PyArray_DIM(rois, 0) * C, dtype, level, threads)
