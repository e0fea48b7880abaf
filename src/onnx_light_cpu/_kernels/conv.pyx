# cython: language_level=3
"""Convolution cores (see conv/olc_conv.h for the scheme).

Shapes are 3-D (the adapter gives 1-D and 2-D leading unit axes) and the
geometry comes as an int64 array of 19 values (olc_conv_geom: C, D, H, W,
kd, kh, kw, strides, start pads, dilations, OD, OH, OW).  Arrays are
C-contiguous float32 or float64 (the adapter widens half types); every
function releases the GIL and splits its work into tasks with fixed
boundaries, so results do not depend on the thread count.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from olc_conv cimport (OLC_CONV_DWC, olc_conv_dw3_f32_fn, olc_conv_dw3_fits, olc_conv_dw3_width,
                       olc_conv_dwc_band, olc_conv_dwc_f32_fn, olc_conv_dwc_fits,
                       olc_conv_dwc_floats,
                       olc_conv_pad_rows, olc_conv_pick_dw3_f32, olc_conv_pick_dwc_f32,
                       olc_conv_dwp_f32_fn, olc_conv_act_fusable, olc_conv_pick_dwp_f32,
                       olc_conv_dwf_f32_fn, olc_conv_pick_dwf_f32,
                       olc_conv_fewc_f32, olc_conv_fewc_fits)
from olc_conv cimport olc_conv_wino_f32, olc_conv_wino_filter, olc_conv_wino_scratch
from olc_conv cimport (olc_conv_col2im_f32, olc_conv_col2im_f64, olc_conv_direct_f32_fn,
                       olc_conv_direct_f64_fn, olc_conv_epilogue, olc_conv_f32, olc_conv_geom,
                       olc_conv_level, olc_conv_pick_direct_f32, olc_conv_pick_direct_f64,
                       olc_conv_pick_tdirect_f64, olc_conv_scratch, olc_conv_tdirect_f64_fn,
                       olc_conv_tile_cols, olc_conv_f32_t, olc_conv_t_images, olc_conv_t_scratch,
                       olc_conv_tasked, olc_conv_task_floats)
from olc_gemm cimport (olc_gemm_level, olc_gemm_spread_ld, olc_sgemm, olc_sgemm_nr,
                       olc_sgemm_pack_b, olc_sgemm_packed_size)
from olc_cpu cimport olc_build_level
from olc_pool cimport olc_parallel_for, olc_pool_import
from olc_qconv cimport (olc_qconv_depthwise, olc_qconv_direct, olc_qconv_direct_fits,
                        olc_qconv_direct_rq, olc_qconv_direct_scratch, olc_qconv_im2col,
                        olc_qconv_requantize, olc_qconv_rq_job)

cnp.import_array()
olc_pool_import()

# Output rows' multiply-adds a direct task holds, about.
DEF DIRECT_TASK_WORK = 32768
# olc_conv_dwc's buffer (a task's padded rows and output), at most: 96 KB
DEF DWC_BUFFER_FLOATS = 24576


cdef int _geom(cnp.ndarray geom, olc_conv_geom *g) except -1:
    if cnp.PyArray_SIZE(geom) != 19 or geom.dtype.num != cnp.NPY_INT64:
        raise ValueError("conv core: the geometry is 19 int64")
    cdef const int64_t *v = <const int64_t *>cnp.PyArray_DATA(geom)
    g.C, g.D, g.H, g.W = v[0], v[1], v[2], v[3]
    g.kd, g.kh, g.kw = v[4], v[5], v[6]
    g.sd, g.sh, g.sw = v[7], v[8], v[9]
    g.pd, g.ph, g.pw = v[10], v[11], v[12]
    g.dd, g.dh, g.dw = v[13], v[14], v[15]
    g.OD, g.OH, g.OW = v[16], v[17], v[18]
    return 0


cdef inline const void *_data(object a):
    if a is None:
        return NULL
    return cnp.PyArray_DATA(<cnp.ndarray>a)


def level_used(int level):
    """The instruction-set level the direct loops and the GEMM run at."""
    return olc_conv_level(level)


def tile_cols(int level, int64_t K, int64_t P, int64_t Mg, int threads):
    """Output columns of one im2col tile for K rows (Mg output channels a group)."""
    return olc_conv_tile_cols(level, K, P, Mg, threads)


def tiles_as_tasks(int level, int64_t P, int64_t Mg, bint pointwise, int threads):
    """Whether the gemm and im2col paths pack and multiply each column tile
    on one thread."""
    return bool(olc_conv_tasked(P, Mg, olc_sgemm_nr(olc_gemm_level(level)), pointwise, threads))


def task_floats(int level, int64_t K, int64_t pt):
    """float32 elements of a thread's buffer when tiles are tasks."""
    return olc_conv_task_floats(level, K, pt)


def scratch_floats(int level, int64_t K, int64_t P, int64_t Mg, bint pointwise, int threads):
    """float32 elements of the column scratch the im2col path allocates."""
    return olc_conv_scratch(level, K, P, Mg, pointwise, threads)


def weight_ld(int64_t K):
    """Floats between the rows of the gemm and im2col paths' W for K =
    C*kd*kh*kw."""
    return olc_gemm_spread_ld(K)


def few_channels_fits(cnp.ndarray geom, int level):
    """Whether the few_channels path takes this geometry (one group) at level."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    return bool(olc_conv_fewc_fits(&g, level))


def t_images(cnp.ndarray geom, int64_t N):
    """Images of the N whose pixels the gemm_t path multiplies in one GEMM."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    return olc_conv_t_images(&g, N)


def t_scratch(cnp.ndarray geom, int64_t M, int64_t N):
    """float32 elements of the scratch the gemm_t path takes for N images."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    return olc_conv_t_scratch(&g, M, N)


def winograd_scratch(cnp.ndarray geom, int64_t M, int threads):
    """float32 elements of the scratch the winograd path takes at ``threads``."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    return olc_conv_wino_scratch(&g, M, threads)


def dwc_buffer_floats(cnp.ndarray geom, int64_t block_plane):
    """float32 elements of the buffer a slot of the direct path's depthwise
    channel blocks (olc_conv_dwc, a band of rows a task) takes, or 0 where
    the planes do not take that path (for the memory estimate)."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    if not olc_conv_dwc_fits(&g, block_plane):
        return 0
    return olc_conv_dwc_floats(&g, olc_conv_dwc_band(&g, DWC_BUFFER_FLOATS))


def winograd_weights(cnp.ndarray w, int level, int threads):
    """The 16 Winograd F(2x2, 3x3) matrices of float32 weights w (M, C, 3,
    3), packed as the GEMM engine's B at ``level`` (a float32 array)."""
    cdef int64_t M = w.shape[0], C = w.shape[1], q
    cdef cnp.ndarray u = np.empty((16, C, M), dtype=np.float32)
    cdef cnp.ndarray offsets = np.arange(16, dtype=np.int64) * C * M
    cdef int lvl = olc_gemm_level(level)
    cdef cnp.ndarray packed = np.empty(16 * olc_sgemm_packed_size(lvl, C, M), dtype=np.float32)
    with nogil:
        olc_conv_wino_filter(<const float *>cnp.PyArray_DATA(w), M, C,
                             <float *>cnp.PyArray_DATA(u))
        olc_sgemm_pack_b(lvl, 1, 16, cnp.PyArray_DATA(u),
                         <const int64_t *>cnp.PyArray_DATA(offsets), M, 1, C, M,
                         <float *>cnp.PyArray_DATA(packed), threads)
    return packed


cdef struct _DirectJob:
    olc_conv_geom g
    int level
    olc_conv_direct_f32_fn f32
    olc_conv_direct_f64_fn f64
    olc_conv_dw3_f32_fn dw3
    olc_conv_dwc_f32_fn dwc
    olc_conv_dwp_f32_fn dwp
    olc_conv_dwf_f32_fn dwf
    int dwp_act  # the activation olc_conv_dwp or dwf applies (0: none, or the epilogue's after Z)
    float *pad
    int64_t pad_floats, in_floats, Wp
    const void *x
    const void *w
    const void *bias
    const float *z
    void *y
    int64_t G, Mg, R, rb, nrb, P, xplane, kk
    int64_t nband  # olc_conv_dwc: bands of rb rows a block of channels
    int64_t ppt, nplanes  # planes a task (whole planes, nrb == 1), planes in all
    int act
    float a, b


cdef void _direct_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _DirectJob *j = <_DirectJob *>arg
    cdef int64_t plane
    if j.dwc != NULL:
        _dwc_band(j, t, slot)
        return
    if j.dwf != NULL:
        _dwf_planes(j, t * j.ppt, min((t + 1) * j.ppt, j.nplanes))
        return
    for plane in range(t // j.nrb * j.ppt, min((t // j.nrb + 1) * j.ppt, j.nplanes)):
        _direct_rows(j, plane, t % j.nrb, slot)


cdef void _dwc_band(_DirectJob *j, int64_t t, int slot) noexcept nogil:
    """Task t of olc_conv_dwc: a band of rows of a block of OLC_CONV_DWC
    planes of one image (t: image, block, band)."""
    cdef int64_t M = j.G * j.Mg
    cdef int64_t n = t // (j.nrb * j.nband), c0 = (t // j.nband % j.nrb) * OLC_CONV_DWC
    cdef int64_t r0 = t % j.nband * j.rb
    cdef int64_t r1 = r0 + j.rb if r0 + j.rb < j.R else j.R
    cdef int64_t nc = min(<int64_t>OLC_CONV_DWC, M - c0)
    cdef int64_t yoff = (n * M + c0) * j.P
    cdef int64_t c
    j.dwc(&j.g, <const float *>j.x + (n * M + c0) * j.xplane, <const float *>j.w + c0 * j.kk,
          <const float *>j.bias + c0 if j.bias != NULL else NULL, nc,
          j.pad + slot * j.pad_floats, <float *>j.y + yoff, r0, r1)
    if j.z != NULL or j.act != 0:
        # Z and the activation over the band as one run of floats a
        # plane (the block's planes as one when the band is all rows):
        # row by row, a 7-wide plane's loops cost as much as the sums
        if r0 == 0 and r1 == j.R:
            olc_conv_epilogue(j.level, <float *>j.y + yoff,
                              j.z + yoff if j.z != NULL else NULL, nc * j.P, 1, nc * j.P,
                              NULL, j.act, j.a, j.b)
        else:
            for c in range(nc):
                olc_conv_epilogue(j.level, <float *>j.y + yoff + c * j.P + r0 * j.g.OW,
                                  j.z + yoff + c * j.P + r0 * j.g.OW
                                  if j.z != NULL else NULL,
                                  (r1 - r0) * j.g.OW, 1, (r1 - r0) * j.g.OW, NULL, j.act,
                                  j.a, j.b)


cdef void _dwf_planes(_DirectJob *j, int64_t p0, int64_t p1) noexcept nogil:
    """Whole planes p0..p1 (image, channel) by olc_conv_dwf, a run of
    channels of one image a call, then Z and the activation where it left
    them."""
    cdef int64_t M = j.G, m, n, p = p0, q
    while p < p1:
        n, m = p // M, p % M
        q = min(p1, (n + 1) * M)  # the rest of this image's channels
        j.dwf(&j.g, <const float *>j.x + p * j.xplane, <const float *>j.w + m * j.kk,
              <const float *>j.bias + m if j.bias != NULL else NULL, q - p, j.dwp_act, j.a,
              j.b, <float *>j.y + p * j.P)
        if j.dwp_act == 0 and (j.z != NULL or j.act != 0):
            olc_conv_epilogue(j.level, <float *>j.y + p * j.P,
                              j.z + p * j.P if j.z != NULL else NULL, (q - p) * j.P, 1,
                              (q - p) * j.P, NULL, j.act, j.a, j.b)
        p = q


cdef void _direct_rows(_DirectJob *j, int64_t plane, int64_t blk, int slot) noexcept nogil:
    """Row block blk of output plane ``plane`` (image, output channel)."""
    cdef int64_t M = j.G * j.Mg
    cdef int64_t n = plane // M, m = plane % M, gi = m // j.Mg
    cdef int64_t r0 = blk * j.rb
    cdef int64_t r1 = r0 + j.rb if r0 + j.rb < j.R else j.R
    cdef int64_t xoff = (n * j.G + gi) * j.xplane, woff = m * j.g.C * j.kk
    cdef int64_t yoff = plane * j.P + r0 * j.g.OW
    cdef float *xp
    if j.dwp != NULL:
        j.dwp(&j.g, <const float *>j.x + xoff, <const float *>j.w + woff,
              (<const float *>j.bias)[m] if j.bias != NULL else 0.0, j.dwp_act, j.a, j.b,
              <float *>j.y + plane * j.P, r0, r1)
    elif j.dw3 != NULL:
        xp = j.pad + slot * j.pad_floats
        olc_conv_pad_rows(&j.g, <const float *>j.x + xoff, r0, r1, xp, xp + j.in_floats)
        j.dw3(&j.g, xp, j.Wp, <const float *>j.w + woff,
              (<const float *>j.bias)[m] if j.bias != NULL else 0.0,
              xp + j.in_floats, <float *>j.y + plane * j.P, r0, r1)
    elif j.f32 != NULL:
        j.f32(&j.g, <const float *>j.x + xoff, <const float *>j.w + woff,
              (<const float *>j.bias)[m] if j.bias != NULL else 0.0,
              <float *>j.y + plane * j.P, r0, r1)
    if j.f32 != NULL:
        if j.dwp_act == 0 and (j.z != NULL or j.act != 0):  # the rows are one run of floats
            olc_conv_epilogue(j.level, <float *>j.y + yoff,
                              j.z + yoff if j.z != NULL else NULL, (r1 - r0) * j.g.OW, 1,
                              (r1 - r0) * j.g.OW, NULL, j.act, j.a, j.b)
    else:
        j.f64(&j.g, <const double *>j.x + xoff, <const double *>j.w + woff,
              (<const double *>j.bias)[m] if j.bias != NULL else 0.0,
              <double *>j.y + plane * j.P, r0, r1)


cdef int _conv_direct(const olc_conv_geom *g, const void *x, const void *w, const void *bias,
                      const float *z, void *y, bint f32, int64_t N, int64_t G, int64_t Mg,
                      int act, float alpha, float beta, int level, int threads,
                      int64_t block_plane) except -1:
    """y (N, G*Mg, P) = act(conv(x, w) + bias + z) by the direct loop, float32
    (``f32``) or float64 (act and z: float32 only); tasks are (plane, block
    of rows), or, for depthwise planes that olc_conv_dwc takes of at most
    block_plane output positions, (image, block of OLC_CONV_DWC channels);
    3x3 depthwise planes go to olc_conv_dwf (narrow, stride 1: runs of
    whole planes) or olc_conv_dwp (strides 1 or 2) where the level has it
    (ConvRun names those paths depthwise_flat and depthwise_planes)."""
    cdef _DirectJob j
    j.g = g[0]
    j.level = level
    j.f32 = NULL
    j.f64 = NULL
    if f32:
        j.f32 = olc_conv_pick_direct_f32(level)
    else:
        j.f64 = olc_conv_pick_direct_f64(level)
    j.x, j.w, j.bias, j.y, j.z = x, w, bias, y, z
    j.G, j.Mg = G, Mg
    j.kk = j.g.kd * j.g.kh * j.g.kw
    j.R = j.g.OD * j.g.OH
    j.P = j.R * j.g.OW
    j.xplane = j.g.C * j.g.D * j.g.H * j.g.W
    j.act, j.a, j.b = act, alpha, beta
    cdef int64_t row_work = j.g.OW * j.g.C * j.kk
    j.rb = DIRECT_TASK_WORK // row_work if row_work > 0 else j.R
    if j.rb < 1:
        j.rb = 1
    if j.R == 0 or N * G * Mg == 0:
        return 0
    j.nrb = (j.R + j.rb - 1) // j.rb
    # small whole planes go several a task: a 7x7 depthwise plane is 441
    # multiply-adds, less than claiming its task costs two threads
    j.nplanes = N * G * Mg
    j.ppt = 1
    if j.nrb == 1 and j.P * j.g.C * j.kk > 0:
        j.ppt = max(1, min(DIRECT_TASK_WORK // (j.P * j.g.C * j.kk),
                           j.nplanes // (8 * threads if threads > 1 else 1)))
    cdef int64_t ntasks = (j.nplanes + j.ppt - 1) // j.ppt * j.nrb
    j.dw3 = NULL
    j.dwc = NULL
    j.dwp_act = 0
    j.pad = NULL
    cdef int slots = threads if threads > 1 else 1
    cdef int64_t band = olc_conv_dwc_band(&j.g, DWC_BUFFER_FLOATS)
    j.dwp = olc_conv_pick_dwp_f32(level, &j.g) if j.f32 != NULL and Mg == 1 else NULL
    j.dwf = olc_conv_pick_dwf_f32(level, &j.g) if j.f32 != NULL and Mg == 1 else NULL
    if j.dwf != NULL or j.dwp != NULL:
        # 3x3 depthwise on the planes themselves, the activation in
        # registers where nothing (Z) comes before it: olc_conv_dwp at
        # strides 1 and 2 from 14 wide, olc_conv_dwf at stride 1 below that
        # (each plane a run of floats, whole planes ppt a task: a plane it
        # takes has at most 1024 positions, under a task's work, so nrb is 1)
        j.dwp_act = act if z == NULL and olc_conv_act_fusable(act) else 0
        with nogil:
            olc_parallel_for(ntasks, _direct_task, &j, threads)
        return 0
    if (j.f32 != NULL and Mg == 1
            and olc_conv_dwc_fits(&j.g, block_plane)
            and olc_conv_dwc_floats(&j.g, band) * slots <= (1 << 22)):
        # a band of rows a task, its buffer within L2
        j.rb = band
        j.nband = (j.R + band - 1) // band
        j.pad_floats = olc_conv_dwc_floats(&j.g, band)
        j.pad = <float *>malloc(j.pad_floats * slots * sizeof(float))
        if j.pad == NULL:
            raise MemoryError("conv core: no memory for the channel blocks")
        j.dwc = olc_conv_pick_dwc_f32(level)
        j.nrb = (G + OLC_CONV_DWC - 1) // OLC_CONV_DWC
        with nogil:
            olc_parallel_for(N * j.nrb * j.nband, _direct_task, &j, threads)
        free(j.pad)
        return 0
    if j.f32 != NULL and olc_conv_dw3_fits(&j.g):
        # a zero-padded copy of the rows a task reads and room for its
        # output rows at that width, one buffer a slot
        j.Wp = olc_conv_dw3_width(&j.g)
        j.in_floats = ((min(j.rb, j.R) - 1) * j.g.sh + (j.g.kh - 1) * j.g.dh + 1) * j.Wp
        j.pad_floats = j.in_floats + min(j.rb, j.R) * j.Wp
        if j.pad_floats * slots <= (1 << 22):
            j.pad = <float *>malloc(j.pad_floats * slots * sizeof(float))
            if j.pad == NULL:
                raise MemoryError("conv core: no memory for the padded rows")
            j.dw3 = olc_conv_pick_dw3_f32(level)
    with nogil:
        olc_parallel_for(ntasks, _direct_task, &j, threads)
    free(j.pad)
    return 0


# ConvRun's paths (its kind, as usage records name it)
cdef enum:
    _GEMM = 0, _IM2COL, _GEMM_T, _WINOGRAD, _FEW_CHANNELS, _DIRECT
_PATHS = {"gemm": _GEMM, "im2col": _IM2COL, "gemm_t": _GEMM_T, "winograd": _WINOGRAD,
          "few_channels": _FEW_CHANNELS, "direct": _DIRECT, "depthwise": _DIRECT}
FLOAT32 = np.dtype(np.float32)


cdef class ConvRun:
    """A Conv plan with its weights prepared for its path: runs it on X (and
    FusedConv's Z) into Y.  The adapter makes one per plan and weights and
    keeps it while they repeat (ops/conv.py), so a run reads no geometry
    array and no attributes.  Paths (``kind``): gemm (1x1 on X in place) and
    im2col, W (M, weight_ld(K)) float32; gemm_t, W^T packed as the GEMM's B
    (pack_b); winograd, winograd_weights(W); few_channels, W (M, K) and
    few_channels_fits; direct and depthwise, W (M, K) float32 or float64.
    ``scratch_floats``: the float32 scratch run takes (gemm_t, winograd),
    else 0."""
    cdef readonly object plan, w, b   # what it was made for, compared by identity
    cdef readonly str kind
    cdef readonly int level
    cdef readonly int64_t scratch_floats
    cdef readonly tuple out_shape
    cdef readonly object dtype
    cdef cnp.ndarray ws
    cdef object bs
    cdef olc_conv_geom g
    cdef int path, act, threads, type_num
    cdef float alpha, beta
    cdef int64_t N, G, Mg, block_plane, x_size, y_size

    def __init__(self, plan, w, b, str kind, cnp.ndarray ws, object bs, cnp.ndarray geom,
                 tuple out_shape, int64_t N, int64_t G, int64_t Mg, int act, float alpha,
                 float beta, int level, int threads, int64_t block_plane):
        _geom(geom, &self.g)
        self.plan, self.w, self.b = plan, w, b
        self.kind, self.path = kind, _PATHS[kind]
        self.ws, self.bs, self.out_shape = ws, bs, out_shape
        self.N, self.G, self.Mg, self.block_plane = N, G, Mg, block_plane
        self.act, self.alpha, self.beta = act, alpha, beta
        self.level, self.threads = level, threads
        self.dtype = ws.dtype
        self.type_num = ws.dtype.num
        cdef olc_conv_geom *g = &self.g
        cdef int64_t M = G * Mg, K = g.C * g.kd * g.kh * g.kw
        self.x_size = N * G * g.C * g.D * g.H * g.W
        self.y_size = N * M * g.OD * g.OH * g.OW
        if len(out_shape) < 3 or out_shape[0] * out_shape[1] != N * M:
            raise ValueError("ConvRun: the output shape is not N x M planes")
        cdef int lvl = olc_gemm_level(level)
        cdef int64_t want
        if self.path == _GEMM_T:
            want = olc_sgemm_packed_size(level, K, M)
            self.scratch_floats = olc_conv_t_scratch(g, M, N)
        elif self.path == _WINOGRAD:
            want = 16 * olc_sgemm_packed_size(lvl, g.C, M)
            self.scratch_floats = olc_conv_wino_scratch(g, M, threads)
        elif self.path in (_GEMM, _IM2COL):
            want = M * olc_gemm_spread_ld(K)
        else:
            if self.path == _FEW_CHANNELS and not olc_conv_fewc_fits(g, level):
                raise ValueError("ConvRun: few_channels does not take this geometry")
            want = M * K
        if self.path != _DIRECT and self.type_num != cnp.NPY_FLOAT32:
            raise TypeError(f"ConvRun: {kind} takes float32 weights")
        if self.type_num not in (cnp.NPY_FLOAT32, cnp.NPY_FLOAT64) or (
                cnp.PyArray_SIZE(ws) != want or not cnp.PyArray_IS_C_CONTIGUOUS(ws)):
            raise ValueError(f"ConvRun: the {kind} weights are not {want} dense elements")
        if bs is not None and not self._plain(bs, M):
            raise ValueError(f"ConvRun: the bias is not {M} dense elements like the weights")
        if self.path == _DIRECT and self.type_num == cnp.NPY_FLOAT32 and Mg == 1:
            if olc_conv_pick_dwf_f32(level, g) != NULL:
                self.kind = "depthwise_flat"  # 3x3 at stride 1, narrow (olc_conv_dwf)
            elif olc_conv_pick_dwp_f32(level, g) != NULL:
                self.kind = "depthwise_planes"  # 3x3 at strides 1 or 2 (olc_conv_dwp)

    cdef bint _plain(self, object a, int64_t size):
        """Whether a is a C-contiguous, aligned array of the run's dtype and
        size elements."""
        return (cnp.PyArray_Check(a) and cnp.PyArray_TYPE(<cnp.ndarray>a) == self.type_num
                and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
                and cnp.PyArray_ISALIGNED(<cnp.ndarray>a)
                and cnp.PyArray_SIZE(<cnp.ndarray>a) == size)

    cdef str _input_problem(self, object x, object z):
        """What is wrong with x or z for run (x dense in the run's dtype at
        the plan's size, z None or so in float32), or None."""
        if not self._plain(x, self.x_size):
            return f"ConvRun: X is not {self.x_size} dense {self.dtype} elements"
        if z is not None and (self.type_num != cnp.NPY_FLOAT32 or not self._plain(z, self.y_size)):
            return f"ConvRun: Z is not {self.y_size} dense float32 elements"
        return None

    cdef str _output_problem(self, object y, object scratch):
        """What is wrong with y or scratch for run (y dense and writable in
        the run's dtype at the plan's size, scratch float32 of at least
        scratch_floats elements where that is not 0), or None."""
        if not self._plain(y, self.y_size) or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>y):
            return f"ConvRun: Y is not {self.y_size} writable {self.dtype} elements"
        if self.scratch_floats and (
                not cnp.PyArray_Check(scratch)
                or cnp.PyArray_TYPE(<cnp.ndarray>scratch) != cnp.NPY_FLOAT32
                or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>scratch)
                or cnp.PyArray_SIZE(<cnp.ndarray>scratch) < self.scratch_floats):
            return f"ConvRun: the scratch is not {self.scratch_floats} float32"
        return None

    def run(self, x, z, y, scratch):
        """y = act(conv(x, W) + B + z); ValueError where an array is not as
        _input_problem and _output_problem say."""
        problem = self._input_problem(x, z) or self._output_problem(y, scratch)
        if problem is not None:
            raise ValueError(problem)
        self._run_on(x, z, y, scratch)

    def pooled(self, x, z, pool):
        """run's y in a buffer of the evaluator's pool (BufferPool), the
        scratch too; None, having run nothing, where x or z is not as run
        takes it or the pool has no free buffer (the adapter's general path
        then converts and allocates)."""
        if self._input_problem(x, z) is not None:
            return None
        y = pool.take(self.out_shape, self.dtype)  # before the scratch, as _new_output
        if y is None:
            return None
        scratch = None
        if self.scratch_floats:
            scratch = pool.take((self.scratch_floats,), FLOAT32)
            if scratch is None:
                return None
        problem = self._output_problem(y, scratch)
        if problem is not None:
            raise ValueError(problem)
        self._run_on(x, z, y, scratch)
        return y

    cdef int _run_on(self, object x, object z, object y, object scratch) except -1:
        return self._run(cnp.PyArray_DATA(<cnp.ndarray>x), <const float *>_data(z),
                         cnp.PyArray_DATA(<cnp.ndarray>y),
                         <float *>_data(scratch) if self.scratch_floats else NULL)

    cdef int _run(self, const void *x, const float *z, void *y, float *scratch) except -1:
        cdef const void *w = cnp.PyArray_DATA(self.ws)
        cdef const void *bias = _data(self.bs)
        cdef const olc_conv_geom *g = &self.g
        cdef int64_t M = self.G * self.Mg
        cdef int status = 0
        if self.path == _DIRECT:
            return _conv_direct(g, x, w, bias, z, y, self.type_num == cnp.NPY_FLOAT32, self.N,
                                self.G, self.Mg, self.act, self.alpha, self.beta, self.level,
                                self.threads, self.block_plane)
        with nogil:
            if self.path == _GEMM_T:
                status = olc_conv_f32_t(self.level, g, <const float *>x, <const float *>w,
                                        <const float *>bias, z, <float *>y, self.N, M, self.act,
                                        self.alpha, self.beta, scratch, self.threads)
            elif self.path == _WINOGRAD:
                status = olc_conv_wino_f32(self.level, g, <const float *>x, <const float *>w,
                                           <const float *>bias, z, <float *>y, scratch, self.N,
                                           M, self.act, self.alpha, self.beta, self.threads)
            elif self.path == _FEW_CHANNELS:
                olc_conv_fewc_f32(g, <const float *>x, <const float *>w, <const float *>bias, z,
                                  <float *>y, self.N, M, self.act, self.alpha, self.beta,
                                  self.threads)
            else:
                status = olc_conv_f32(self.level, g, <const float *>x, <const float *>w,
                                      olc_gemm_spread_ld(g.C * g.kd * g.kh * g.kw),
                                      <const float *>bias, z, <float *>y, self.N, self.G,
                                      self.Mg, self.path == _GEMM, self.act, self.alpha,
                                      self.beta, self.threads)
        if status != 0:
            raise MemoryError(f"conv core: no memory for the {self.kind} path's buffers")
        return 0


cdef struct _TransJob:
    olc_conv_geom g
    int level, failed
    const float *x
    const float *wt
    float *y
    float *col
    int64_t G, Mg, K, L, lt, n, gi, l0, n1
    int64_t ncols


cdef void _col2im_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _TransJob *j = <_TransJob *>arg
    cdef int64_t kk = j.g.kd * j.g.kh * j.g.kw
    cdef int64_t plane = j.g.OD * j.g.OH * j.g.OW
    cdef int64_t m = j.gi * j.Mg + t
    olc_conv_col2im_f32(&j.g, j.col + t * kk * j.n1, j.n1, j.l0, j.n1,
                        j.y + (j.n * j.G * j.Mg + m) * plane)


def conv_transpose_gemm(cnp.ndarray x, cnp.ndarray wt, cnp.ndarray y, cnp.ndarray geom,
                        int64_t N, int64_t G, int64_t Mg, int level, int threads):
    """float32 y (N, G*Mg, OD*OH*OW) += the transposed convolution of x
    (N, G*C, L) with wt (G, Mg*kk, C): per image, group and tile of input
    positions, columns = wt[g] x[n, g][:, tile] by the GEMM engine, then a
    scatter-add per output channel (the adapter fills y with the bias)."""
    cdef _TransJob j
    _geom(geom, &j.g)
    j.level = level
    j.x = <const float *>cnp.PyArray_DATA(x)
    j.wt = <const float *>cnp.PyArray_DATA(wt)
    j.y = <float *>cnp.PyArray_DATA(y)
    j.G, j.Mg = G, Mg
    cdef int64_t kk = j.g.kd * j.g.kh * j.g.kw, rows = Mg * kk
    j.K = j.g.C
    j.L = j.g.D * j.g.H * j.g.W
    if j.L == 0 or rows == 0 or N == 0:
        return
    # columns of a tile: at most 256K floats of columns, whole multiples of 16
    j.lt = (256 * 1024) // rows // 16 * 16
    if j.lt < 16:
        j.lt = 16
    if j.lt > j.L:
        j.lt = j.L
    cdef int64_t zero = 0, boff, n, gi
    cdef int status = 0
    j.col = <float *>malloc(rows * j.lt * sizeof(float))
    if j.col == NULL:
        raise MemoryError("conv core: no memory for the column tile")
    with nogil:
        for n in range(N):
            j.n = n
            for gi in range(G):
                j.gi = gi
                j.l0 = 0
                while j.l0 < j.L and status == 0:
                    j.n1 = j.L - j.l0 if j.L - j.l0 < j.lt else j.lt
                    if j.K == 0:
                        memset(j.col, 0, rows * j.n1 * sizeof(float))
                    else:
                        boff = (n * G + gi) * j.K * j.L + j.l0
                        status = olc_sgemm(level, 1, 1, j.wt + gi * rows * j.K, &zero, j.K, 1,
                                           NULL, &zero, j.x, &boff, j.L, 1, rows, j.n1, j.K,
                                           j.col, j.n1, 0, 1.0, 0, threads)
                    if status == 0:
                        olc_parallel_for(Mg, _col2im_task, &j, threads)
                    j.l0 += j.n1
    free(j.col)
    if status != 0:
        raise MemoryError("conv core: no memory for packing buffers")


cdef struct _TDirectJob:
    olc_conv_geom g
    olc_conv_tdirect_f64_fn fn
    const double *x
    const double *w
    const double *bias
    double *y
    int64_t G, Mg, xplane, plane


cdef void _tdirect_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _TDirectJob *j = <_TDirectJob *>arg
    cdef int64_t M = j.G * j.Mg
    cdef int64_t n = t // M, m = t % M, gi = m // j.Mg
    j.fn(&j.g, j.x + (n * j.G + gi) * j.xplane, j.w + gi * j.g.C * j.Mg * j.g.kd * j.g.kh * j.g.kw,
         j.Mg, m % j.Mg, j.bias[m] if j.bias != NULL else 0.0, j.y + t * j.plane)


def conv_transpose_direct(cnp.ndarray x, cnp.ndarray w, object bias, cnp.ndarray y,
                          cnp.ndarray geom, int64_t N, int64_t G, int64_t Mg, int level,
                          int threads):
    """float64 y (N, G*Mg, plane) = the transposed convolution of x with w
    (G*C, Mg, kk), one task an output plane."""
    cdef _TDirectJob j
    _geom(geom, &j.g)
    j.fn = olc_conv_pick_tdirect_f64(level)
    j.x = <const double *>cnp.PyArray_DATA(x)
    j.w = <const double *>cnp.PyArray_DATA(w)
    j.bias = <const double *>_data(bias)
    j.y = <double *>cnp.PyArray_DATA(y)
    j.G, j.Mg = G, Mg
    j.xplane = j.g.C * j.g.D * j.g.H * j.g.W
    j.plane = j.g.OD * j.g.OH * j.g.OW
    with nogil:
        olc_parallel_for(N * G * Mg, _tdirect_task, &j, threads)


cdef struct _Col2ImJob:
    olc_conv_geom g
    const void *col
    void *y
    int64_t L, kk, plane
    bint f64


cdef void _col2im_plane_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _Col2ImJob *j = <_Col2ImJob *>arg
    if j.f64:
        olc_conv_col2im_f64(&j.g, <const double *>j.col + t * j.kk * j.L, j.L, 0, j.L,
                            <double *>j.y + t * j.plane)
    else:
        olc_conv_col2im_f32(&j.g, <const float *>j.col + t * j.kk * j.L, j.L, 0, j.L,
                            <float *>j.y + t * j.plane)


def col2im(cnp.ndarray col, cnp.ndarray y, cnp.ndarray geom, int64_t planes, int threads):
    """y (planes, image) += the columns col (planes, kk, L), float32 or
    float64 (the adapter zeroes y); one task a plane."""
    cdef _Col2ImJob j
    _geom(geom, &j.g)
    j.col = cnp.PyArray_DATA(col)
    j.y = cnp.PyArray_DATA(y)
    j.kk = j.g.kd * j.g.kh * j.g.kw
    j.L = j.g.D * j.g.H * j.g.W
    j.plane = j.g.OD * j.g.OH * j.g.OW
    j.f64 = col.dtype.num == cnp.NPY_FLOAT64
    with nogil:
        olc_parallel_for(planes, _col2im_plane_task, &j, threads)


# ---- 8-bit convolutions (ConvInteger, QLinearConv; see conv/olc_qconv.h) ----


def qconv_im2col(cnp.ndarray x, int64_t img_stride, int64_t nimg, int64_t G, int pad,
                 cnp.ndarray col, cnp.ndarray geom, int threads):
    """Columns (nimg * G matrices of C*kd*kh*kw x P bytes) of the images of
    ``x`` (uint8/int8 bytes, image i at i * img_stride), padding = ``pad``."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    cdef int64_t need = nimg * G * g.C * g.kd * g.kh * g.kw * g.OD * g.OH * g.OW
    if cnp.PyArray_NBYTES(col) < need:
        raise ValueError("conv core: the column buffer is too small")
    cdef const uint8_t *px = <const uint8_t *>cnp.PyArray_DATA(x)
    cdef uint8_t *pc = <uint8_t *>cnp.PyArray_DATA(col)
    with nogil:
        olc_qconv_im2col(&g, px, img_stride, nimg, G, <uint8_t>pad, pc, threads)


def qconv_direct_fits(cnp.ndarray geom, int level):
    """Whether qconv_direct takes this geometry (one group) at level."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    return bool(olc_qconv_direct_fits(&g, level))


def qconv_direct_scratch(cnp.ndarray geom, int64_t nimg):
    """Bytes of the padded copy qconv_direct takes for nimg images."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    return olc_qconv_direct_scratch(&g, nimg)


def qconv_direct(cnp.ndarray x, int64_t img_stride, int64_t nimg, bint x_signed, int xzp,
                 cnp.ndarray w, cnp.ndarray wsum, int64_t M, cnp.ndarray xp, cnp.ndarray y,
                 cnp.ndarray geom, int level, int threads, object bias=None, object scale=None,
                 int zp=0):
    """y (nimg, M, P) = sum (x - xzp) w of nimg images of x (bytes, image i
    at i * img_stride) for qconv_direct_fits geometries: w int8 packed
    [M/16][kh*kw][C/4][16][4] with wsum its sums per channel (the weights'
    zero point 0), xp the scratch.  y int32, or uint8/int8 with ``scale``
    (float32 per channel; ``bias`` int32 or None; ``zp`` the output's zero
    point): those sums requantised as qconv_requantize does."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    cdef int64_t kk = g.kh * g.kw, g4 = (g.C + 3) // 4, mb = (M + 15) // 16
    cdef int64_t item = 1 if scale is not None else 4
    if (not olc_qconv_direct_fits(&g, level)
            or cnp.PyArray_NBYTES(w) < mb * kk * g4 * 64 or cnp.PyArray_SIZE(wsum) < M
            or cnp.PyArray_NBYTES(xp) < olc_qconv_direct_scratch(&g, nimg)
            or cnp.PyArray_NBYTES(y) < nimg * M * g.OH * g.OW * item
            or cnp.PyArray_ITEMSIZE(y) != item
            or (scale is not None and cnp.PyArray_SIZE(scale) < M)
            or (bias is not None and cnp.PyArray_SIZE(bias) < M)):
        raise ValueError("qconv_direct: a geometry or buffer it does not take")
    cdef olc_qconv_direct_rq rq
    cdef const olc_qconv_direct_rq *prq = NULL
    if scale is not None:
        rq.bias = <const int32_t *>_data(bias)
        rq.scale = <const float *>cnp.PyArray_DATA(scale)
        rq.zp = zp
        rq.out_signed = y.dtype.num == cnp.NPY_INT8
        prq = &rq
    cdef const uint8_t *px = <const uint8_t *>cnp.PyArray_DATA(x)
    cdef const int8_t *pw = <const int8_t *>cnp.PyArray_DATA(w)
    cdef const int32_t *ps = <const int32_t *>cnp.PyArray_DATA(wsum)
    cdef uint8_t *pxp = <uint8_t *>cnp.PyArray_DATA(xp)
    cdef void *py = cnp.PyArray_DATA(y)
    with nogil:
        olc_qconv_direct(&g, px, img_stride, nimg, x_signed, xzp, pw, ps, M, pxp, py, prq,
                         threads)


def qconv_depthwise(cnp.ndarray x, bint x_signed, int xzp, cnp.ndarray w, cnp.ndarray y,
                    cnp.ndarray geom, int64_t planes, int64_t channels, int level, int threads,
                    object bias=None, object scale=None, int zp=0):
    """int32 y (planes, P) of a depthwise convolution: x (planes images of
    one channel, uint8/int8 bytes), w (channels, kk) int32 minus its zero
    point, xzp x's zero point.  With ``scale`` (float32 per channel; ``bias``
    int32 or None; ``zp`` the output's zero point) y is uint8/int8: each
    plane's sums requantised as qconv_requantize does, while in cache."""
    cdef olc_conv_geom g
    _geom(geom, &g)
    cdef int64_t P = g.OD * g.OH * g.OW
    cdef int64_t item = 1 if scale is not None else 4
    if (cnp.PyArray_NBYTES(y) < planes * P * item or cnp.PyArray_ITEMSIZE(y) != item
            or cnp.PyArray_SIZE(w) < channels * g.kd * g.kh * g.kw
            or (scale is not None and cnp.PyArray_SIZE(scale) < channels)
            or (bias is not None and cnp.PyArray_SIZE(bias) < channels)):
        raise ValueError("conv core: depthwise buffers too small")
    cdef olc_qconv_rq_job rq
    cdef const olc_qconv_rq_job *prq = NULL
    if scale is not None:
        rq.acc = NULL
        rq.bias = <const int32_t *>_data(bias)
        rq.scale = <const float *>cnp.PyArray_DATA(scale)
        rq.M = channels
        rq.P = P
        rq.zp = zp
        rq.out_signed = y.dtype.num == cnp.NPY_INT8
        rq.level = olc_build_level(level)
        rq.y = cnp.PyArray_DATA(y)
        prq = &rq
    cdef const uint8_t *px = <const uint8_t *>cnp.PyArray_DATA(x)
    cdef const int32_t *pw = <const int32_t *>cnp.PyArray_DATA(w)
    cdef int32_t *py = <int32_t *>cnp.PyArray_DATA(y) if prq == NULL else NULL
    cdef int status
    with nogil:
        status = olc_qconv_depthwise(&g, px, x_signed, xzp, pw, planes, channels, py, prq,
                                     level, threads)
    if status != 0:
        raise MemoryError("conv core: no memory for the depthwise planes' sums")


def qconv_requantize(cnp.ndarray acc, object bias, cnp.ndarray scale, cnp.ndarray y,
                     int64_t rows, int64_t M, int64_t P, int zp, bint out_signed, int level,
                     int threads):
    """y (rows x P, uint8/int8) = saturate(rint(float32(acc + bias[m]) *
    scale[m]) + zp) for row r of channel m = r % M; bias int32 or None,
    scale M float32."""
    if (cnp.PyArray_SIZE(acc) < rows * P or cnp.PyArray_NBYTES(y) < rows * P
            or cnp.PyArray_SIZE(scale) < M
            or (bias is not None and cnp.PyArray_SIZE(<cnp.ndarray>bias) < M)):
        raise ValueError("conv core: requantization buffers too small")
    cdef const int32_t *pa = <const int32_t *>cnp.PyArray_DATA(acc)
    cdef const int32_t *pb = <const int32_t *>_data(bias)
    cdef const float *ps = <const float *>cnp.PyArray_DATA(scale)
    cdef void *py = cnp.PyArray_DATA(y)
    with nogil:
        olc_qconv_requantize(pa, pb, ps, rows, M, P, zp, out_signed, py, level, threads)
# -- DeformConv --------------------------------------------------------------

from olc_conv_deform cimport (olc_conv_deform, olc_conv_deform_geom, olc_conv_deform_level,
                              olc_conv_deform_scratch)


def deform_level_used(int level):
    """The instruction-set level DeformConv's sampling and GEMM run at."""
    return olc_conv_deform_level(level)


def deform_scratch(int level, int64_t K, int64_t P, bint f64):
    """Elements of the column tile deform_conv allocates (float32 or double)."""
    return olc_conv_deform_scratch(level, K, P, f64)


def deform_conv(cnp.ndarray x, cnp.ndarray w, cnp.ndarray offset, object mask, object bias,
                cnp.ndarray y, cnp.ndarray geom, int64_t N, int64_t G, int64_t Mg, int level,
                int threads):
    """y (N, G*Mg, OH, OW) = deform_conv(x, w, offset, mask) + bias, 2-D,
    float32 or float64, every array C-contiguous of x's type; w is (G*Mg,
    C/G*kh*kw); geom the 14 int64 of olc_conv_deform_geom (C, OG, H, W,
    kh, kw, strides, start pads, dilations, OH, OW)."""
    if cnp.PyArray_SIZE(geom) != 14 or geom.dtype.num != cnp.NPY_INT64:
        raise ValueError("conv core: the DeformConv geometry is 14 int64")
    cdef const int64_t *v = <const int64_t *>cnp.PyArray_DATA(geom)
    cdef olc_conv_deform_geom d
    d.C, d.OG, d.H, d.W, d.kh, d.kw = v[0], v[1], v[2], v[3], v[4], v[5]
    d.sh, d.sw, d.ph, d.pw, d.dh, d.dw, d.OH, d.OW = v[6], v[7], v[8], v[9], v[10], v[11], \
        v[12], v[13]
    cdef int f64 = x.dtype.num == cnp.NPY_FLOAT64
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef const void *pw = cnp.PyArray_DATA(w)
    cdef const void *po = cnp.PyArray_DATA(offset)
    cdef const void *pm = _data(mask)
    cdef const void *pb = _data(bias)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef int status
    with nogil:
        status = olc_conv_deform(level, &d, f64, px, pw, po, pm, pb, py, N, G, Mg, threads)
    if status != 0:
        raise MemoryError("conv core: no memory for the column tile")
