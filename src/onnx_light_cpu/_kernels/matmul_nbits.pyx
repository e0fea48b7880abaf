# cython: language_level=3
"""Block-quantized matrix product core (com.microsoft MatMulNBits; see
olc_matmul_nbits.h for the two engines).

The API works on one weight matrix and knows nothing of ONNX, so other
operators (QMoE's experts) can reuse it.  Keep these signatures stable:

``prepare(b, scales, zero_points, bits, block_size, K, N, accuracy_level,
panel_layout=False)``
    -> :class:`PreparedWeights`.  ``b``: uint8 [N, ceil(K/block_size), blob]
    codes packed low bits first (blob = block_size * bits / 8; for bits=3,
    blob 12, block 32, code p in bits [3p, 3p+3)); ``scales``: float32
    [N, nb]; ``zero_points``: None (the default 2^(bits-1)), uint8 [N, nb]
    (one unpacked integer code a block) or float32 [N, nb].
    accuracy_level 4 with integer zero points (not 2-bit blocks of 16 or
    above 128, which ONNX Runtime keeps in float; see :func:`int8_format`)
    prepares the int8 layout (activations are quantized in blocks of
    min(block_size, 256)); anything else runs the float engine, which with
    ``panel_layout=True`` and 4 or 8 bits makes, on the first call with
    M > 3, a column-interleaved copy of the codes for its GEMM panels (as
    many bytes as b; worth it for weights used many times).  The arrays are referenced, not
    copied: the caller keeps them unchanged while the result lives.

``matmul(prepared, a, bias, y, level, threads)`` -> path label.  ``a``:
    float32 [M, K] C-contiguous; ``bias``: float32 [N] or None; ``y``:
    float32 [M, N] C-contiguous, fully written; ``level``: the SIMD level
    (``simd.state.level``; the int8 engine keeps AVX-512 VNNI, every other
    path runs its AVX-512 code there); ``threads``: pool threads (work is
    split over rows and columns, never K).  Returns the label of the code
    that ran: ``int{bits}_direct_{level}`` (small M, codes read in place),
    ``int{bits}_panel_{level}`` (decoded panels) or ``int8_prepared_{kind}``
    (kind scalar, avx2, avx512 or vnni).

``unpack_zero_points(packed, out, bits)`` unpacks MatMulNBits' packed
    uint8 zero points into the one-byte-a-block form ``prepare`` takes
    (olc_block_codes.h's rules); ``zero_point_bytes(groups, bits)`` is the
    bytes of one row of them.

``PreparedWeights.prepared_bytes`` counts the arrays preparation made;
``PreparedWeights.scratch_bytes(M, threads)`` the temporary bytes of one
call (after a call at the SIMD level in question).
"""

cimport numpy as cnp
import numpy as np
from libc.stdint cimport int64_t, uint8_t
from olc_block_codes cimport olc_bc_unpack_zp, olc_bc_zp_bytes, olc_bc_zp_default
from olc_matmul_nbits cimport (olc_nb_float, olc_nb_panel_level, olc_nb_prepare_rows,
                               olc_nb_route, olc_nb_rows_bytes, olc_nb_rows_params,
                               olc_nb_scratch, olc_nb_w, olc_q8_block_bytes, olc_q8_level,
                               olc_q8_prepare, olc_q8_run, olc_q8_scratch, olc_q8_tiles,
                               olc_q8_w)
from olc_pool cimport olc_pool_import

from onnx_light_cpu.memory import prepared_empty

cnp.import_array()
olc_pool_import()

#: Level names in the float engines' labels (``int4_panel_avx512``).
LEVEL_NAMES = ("scalar", "avx2", "avx512")
#: Labels of the int8 engine at each of its levels (olc_q8_level); QMoE's too.
INT8_LABELS = tuple("int8_prepared_" + name for name in ("scalar", "avx2", "avx512", "vnni"))


def zero_point_bytes(int64_t groups, int bits):
    """Bytes of one row's packed zero points for ``groups`` blocks."""
    return olc_bc_zp_bytes(groups, bits)


def unpack_zero_points(cnp.ndarray packed, cnp.ndarray out, int bits):
    """out (uint8 [rows, groups]) = the zero points of packed (uint8
    [rows, zero_point_bytes(groups, bits)]), both C-contiguous."""
    cdef int64_t rows = cnp.PyArray_DIM(out, 0), groups = cnp.PyArray_DIM(out, 1)
    cdef int64_t row_bytes = olc_bc_zp_bytes(groups, bits)
    if (cnp.PyArray_NDIM(out) != 2 or cnp.PyArray_SIZE(packed) != rows * row_bytes
            or packed.dtype != np.uint8 or out.dtype != np.uint8
            or not cnp.PyArray_IS_C_CONTIGUOUS(packed) or not cnp.PyArray_IS_C_CONTIGUOUS(out)):
        raise ValueError("matmul_nbits core: zero points must be uint8 [rows, "
                         f"{row_bytes}] and out uint8 [rows, {groups}], C-contiguous")
    cdef const uint8_t *pp = <const uint8_t *>cnp.PyArray_DATA(packed)
    cdef uint8_t *po = <uint8_t *>cnp.PyArray_DATA(out)
    with nogil:
        olc_bc_unpack_zp(pp, rows, row_bytes, groups, bits, po)


cdef class PreparedWeights:
    """One weight matrix ready for :func:`matmul` (see the module doc)."""

    cdef olc_nb_w w
    cdef olc_q8_w q8
    cdef readonly bint int8
    cdef readonly int bits
    cdef readonly int64_t K, N, block_size, nblocks
    # the int8 engine's blocks: the weight block, at most 256 elements
    cdef readonly int64_t ablock, anblocks
    cdef readonly int64_t prepared_bytes
    # the SIMD level of the last call (scratch depends on the route)
    cdef int simd_level
    cdef object _keep
    cdef bint _want_rows
    cdef tuple _labels

    def scratch_bytes(self, int64_t M, int threads):
        """Temporary bytes one call with M rows uses (activations quantized
        once, shared by the threads; or one float panel a thread)."""
        if self.int8:
            return olc_q8_scratch(M, self.anblocks, self.ablock)
        return olc_nb_scratch(&self.w, M, self.simd_level, max(1, threads))


def prepare(b, scales, zero_points, int bits, int64_t block_size, int64_t K, int64_t N,
            int accuracy_level, bint panel_layout=False):
    """See the module docstring."""
    cdef int64_t nb = (K + block_size - 1) // block_size
    cdef int64_t blob = block_size * bits // 8
    cdef PreparedWeights p = PreparedWeights()
    cdef cnp.ndarray ab = np.ascontiguousarray(b, dtype=np.uint8)
    cdef cnp.ndarray asc = np.ascontiguousarray(scales, dtype=np.float32)
    cdef cnp.ndarray azp = None
    if cnp.PyArray_SIZE(ab) != N * nb * blob or cnp.PyArray_SIZE(asc) != N * nb:
        raise ValueError(f"matmul_nbits core: b must hold {N * nb * blob} bytes and scales "
                         f"{N * nb} values")
    integer_zp = zero_points is None or zero_points.dtype == np.uint8
    if zero_points is not None:
        azp = np.ascontiguousarray(zero_points, dtype=np.float32)
        if cnp.PyArray_SIZE(azp) != N * nb:
            raise ValueError(f"matmul_nbits core: zero_points must hold {N * nb} values")
    p.bits, p.K, p.N, p.block_size, p.nblocks = bits, K, N, block_size, nb
    p._labels = tuple(tuple(f"int{bits}_{route}_{name}" for name in LEVEL_NAMES)
                      for route in ("panel", "direct"))
    p.w.b = <const uint8_t *>cnp.PyArray_DATA(ab)
    p.w.scales = <const float *>cnp.PyArray_DATA(asc)
    p.w.zp = NULL
    if azp is not None:
        p.w.zp = <const float *>cnp.PyArray_DATA(azp)
    p.w.zp_default = olc_bc_zp_default(bits)
    p.w.K, p.w.N, p.w.nb, p.w.blob, p.w.block, p.w.bits = K, N, nb, blob, block_size, bits
    keep = [ab, asc, azp]
    p.prepared_bytes = 0
    if asc is not scales:
        p.prepared_bytes += cnp.PyArray_NBYTES(asc)
    if azp is not None and azp is not zero_points:
        p.prepared_bytes += cnp.PyArray_NBYTES(azp)
    p.w.rows = NULL
    p.w.rscales = NULL
    p.w.roffs = NULL
    # weights that are not finite keep per-element float semantics
    p.w.finite = bool(np.isfinite(asc).all()) and (azp is None or bool(np.isfinite(azp).all()))
    p.int8 = (accuracy_level == 4 and integer_zp and int8_format(bits, block_size)
              and p.w.finite)
    # made on the first call that takes the GEMM panels
    p._want_rows = panel_layout and bits in (4, 8) and not p.int8 and p.w.finite
    p.w.panel_rows = p._want_rows
    p.ablock = min(block_size, 256)
    p.anblocks = nb * (block_size // p.ablock)
    cdef int64_t tiles
    cdef cnp.ndarray codes, qs, qz
    if p.int8:
        tiles = olc_q8_tiles(N)
        # read in full on every call: huge pages from 2 MiB (see prepared_empty)
        codes = prepared_empty(tiles * p.anblocks * olc_q8_block_bytes(p.ablock, bits == 4),
                               np.uint8)
        qs = np.empty(tiles * p.anblocks * 16, dtype=np.float32)
        qz = np.empty(tiles * p.anblocks * 16, dtype=np.uint8)
        with nogil:
            olc_q8_prepare(&p.w, p.ablock, <uint8_t *>cnp.PyArray_DATA(codes),
                           <float *>cnp.PyArray_DATA(qs), <uint8_t *>cnp.PyArray_DATA(qz))
        p.q8.codes = <const uint8_t *>cnp.PyArray_DATA(codes)
        p.q8.scales = <const float *>cnp.PyArray_DATA(qs)
        p.q8.zp = <const uint8_t *>cnp.PyArray_DATA(qz)
        p.q8.K, p.q8.N, p.q8.nb, p.q8.block, p.q8.tiles = K, N, p.anblocks, p.ablock, tiles
        p.q8.split = bits == 8
        p.q8.packed4 = bits == 4
        keep += [codes, qs, qz]
        p.prepared_bytes += (cnp.PyArray_NBYTES(codes) + cnp.PyArray_NBYTES(qs)
                             + cnp.PyArray_NBYTES(qz))
    p._keep = keep
    return p


cdef _prepare_rows(PreparedWeights p):
    """The column-interleaved codes of the GEMM panels (see prepare)."""
    cdef cnp.ndarray rows = np.empty(olc_nb_rows_bytes(&p.w), dtype=np.uint8)
    cdef cnp.ndarray rscales = np.empty(olc_nb_rows_params(&p.w), dtype=np.float32)
    cdef cnp.ndarray roffs = np.empty(olc_nb_rows_params(&p.w), dtype=np.float32)
    with nogil:
        olc_nb_prepare_rows(&p.w, <uint8_t *>cnp.PyArray_DATA(rows),
                            <float *>cnp.PyArray_DATA(rscales), <float *>cnp.PyArray_DATA(roffs))
    p._keep = p._keep + [rows, rscales, roffs]
    # rows last: a call running meanwhile sees either no copy or all of it
    p.w.rscales = <const float *>cnp.PyArray_DATA(rscales)
    p.w.roffs = <const float *>cnp.PyArray_DATA(roffs)
    p.w.rows = <const uint8_t *>cnp.PyArray_DATA(rows)
    p.prepared_bytes += (cnp.PyArray_NBYTES(rows) + cnp.PyArray_NBYTES(rscales)
                         + cnp.PyArray_NBYTES(roffs))


def int8_format(int bits, int64_t block_size):
    """Whether accuracy level 4 takes the int8 engine for these codes (as
    ONNX Runtime 1.32 does: not for 2-bit blocks of 16 or above 128)."""
    return bits != 2 or 32 <= block_size <= 128


def matmul(PreparedWeights p, cnp.ndarray a, bias, cnp.ndarray y, int level, int threads):
    """See the module docstring."""
    cdef int64_t M = cnp.PyArray_DIM(a, 0) if cnp.PyArray_NDIM(a) == 2 else -1
    if (M < 0 or cnp.PyArray_DIM(a, 1) != p.K or cnp.PyArray_TYPE(a) != cnp.NPY_FLOAT32
            or not cnp.PyArray_IS_C_CONTIGUOUS(a) or cnp.PyArray_NDIM(y) != 2
            or cnp.PyArray_DIM(y, 0) != M or cnp.PyArray_DIM(y, 1) != p.N
            or cnp.PyArray_TYPE(y) != cnp.NPY_FLOAT32 or not cnp.PyArray_IS_C_CONTIGUOUS(y)):
        raise ValueError("matmul_nbits core: a must be float32 [M, K] and y float32 [M, N], "
                         "C-contiguous")
    cdef const float *pb = NULL
    if bias is not None:
        if (bias.dtype != np.float32 or bias.size != p.N
                or not bias.flags.c_contiguous):
            raise ValueError("matmul_nbits core: bias must be float32 [N], C-contiguous")
        pb = <const float *>cnp.PyArray_DATA(<cnp.ndarray>bias)
    cdef const float *pa = <const float *>cnp.PyArray_DATA(a)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    cdef int status = 0, used, route = 0
    p.simd_level = level
    if M == 0 or p.N == 0:
        return _panel_label(p, level)
    if p.int8:
        used = olc_q8_level(level)
        with nogil:
            status = olc_q8_run(&p.q8, pa, M, pb, py, level, threads)
        if status < 0:
            raise MemoryError("matmul_nbits core: no memory for the quantized activations")
        if status == 0:
            return INT8_LABELS[used]
        # A row holding a value that is not finite keeps float semantics
        # (the panel engine below); the other rows keep the int8 engine's
        # result, so that no row depends on the rows batched with it.
        finite = np.isfinite(a).all(axis=1)
        if finite.any():
            rest = ~finite
            y_finite = np.empty((int(finite.sum()), p.N), np.float32)
            y_rest = np.empty((M - y_finite.shape[0], p.N), np.float32)
            matmul(p, np.ascontiguousarray(a[finite]), bias, y_finite, level, threads)
            matmul(p, np.ascontiguousarray(a[rest]), bias, y_rest, level, threads)
            y[finite] = y_finite
            y[rest] = y_rest
            return INT8_LABELS[used]
    if p._want_rows and p.w.rows == NULL and olc_nb_route(&p.w, M, level) == 2:
        _prepare_rows(p)
    with nogil:
        status = olc_nb_float(&p.w, pa, M, pb, py, level, threads, &route)
    if status != 0:
        raise MemoryError("matmul_nbits core: no memory for the decode panels")
    return _panel_label(p, level, route)


def _panel_label(PreparedWeights p, int level, int route=0):
    return p._labels[route == 1][olc_nb_panel_level(level)]

