"""MaxPool, AveragePool, LpPool, GlobalMaxPool, GlobalAveragePool,
GlobalLpPool, LRN, MaxUnpool and MaxRoiPool.

The spatial pools (1-D, 2-D, 3-D) share one geometry (output sizes and pads
from ``kernel_shape``, ``strides``, ``pads``, ``dilations``, ``auto_pad`` and
``ceil_mode``, as ONNX Runtime computes them) and one core
(``_kernels/include/pooling/olc_pooling.h``): planes of three spatial
dimensions, lower ranks padded in front with 1s.  Where the ``onnx.reference``
built-ins are wrong, these follow ONNX Runtime and the specification:

- ``ceil_mode``: the last window must start inside the input or its left
  padding (the built-in keeps one more output, 30x30 where 28x28 is right).
- MaxPool's ``Indices`` are flattened over the whole tensor (batch and
  channel included), the spatial part row-major or, with
  ``storage_order=1``, column-major; the first maximum of the window in
  row-major order wins.
- NaN in MaxPool: the window's first tap seeds the max and a later tap
  replaces it only when greater, as ONNX Runtime's loops (Indices,
  dilations, double): a NaN first tap gives NaN, later NaN are skipped.
  ONNX Runtime's float32 path without Indices (MLAS) returns NaN when the
  window's last tap is NaN instead; its GlobalMaxPool too.  Ours is one
  rule for every path and type (GlobalMaxPool: the plane's first element).
- MaxUnpool with ``output_shape``: the indices address the shape inferred
  from the attributes, placed at the start of the requested one (the
  specification's reference and its backend case; ONNX Runtime scatters
  over the requested shape).
- LRN normalises every channel (the built-in only those below the batch
  size).

float16 and bfloat16 are computed in float32 (widened copies, one rounding
on the way back); MaxPool also takes int8 and uint8 (opset 12).  MaxUnpool
scatters with NumPy (one ``put`` over the flat output).
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import numpy as np
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels import pooling as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16, T.DOUBLE)
F32 = np.dtype(np.float32)
NARROW = (np.dtype(np.float16), np.dtype(bfloat16))  # computed in float32
AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")

# Work (output elements times window size; input elements for the global
# pools; input elements times size for LRN) one thread must have before a
# second one is asked.  Measured through the evaluator on 2 cores shared
# with other processes (load average about 3; AVX2, float32, median us,
# t1 vs t2, two passes): MaxPool 3x3 on 1x16x32x32 (147K) 39 vs 39-52,
# 1x32x64x64 (1.2M) 228 vs 127-236; GlobalAveragePool 1x2048x7x7 (100K)
# 20 vs 21-28; LRN size 5 on 1x64x28x28 (250K) 144 vs 153-159.  Below
# about 512K a second thread never won.
MIN_WORK_PER_THREAD = 1 << 19


class Geometry(NamedTuple):
    """One spatial pool's sizes, each padded in front to three dimensions."""
    out_shape: tuple          # the output's full shape
    in_dims: tuple
    out_dims: tuple
    kernel: tuple
    strides: tuple
    pads_begin: tuple
    pads_end: tuple
    dilations: tuple
    planes: int


def _narrow(dtype: np.dtype) -> bool:
    """Whether X is float16 or bfloat16.  float32 first: comparing a dtype
    with ml_dtypes' bfloat16, once in a model's run, costs 9 µs there."""
    return dtype is not F32 and dtype in NARROW


def _dense(x: np.ndarray) -> np.ndarray:
    """x C-contiguous and aligned to its element (a copy only when it is not).
    Two flags rather than np.require, whose Python code, run once in a
    model's run, is out of cache by then: 17 µs inside MobileNet-V2."""
    flags = x.flags
    return x if flags.c_contiguous and flags.aligned else np.array(x, order="C")


def _pad3(values, fill) -> tuple:
    values = tuple(int(v) for v in values)
    return (fill,) * (3 - len(values)) + values


class _Spatial(KernelOp):
    """Shared parts of MaxPool, AveragePool and LpPool: attributes, geometry,
    the dtype route and the call of the core."""

    mode: ClassVar[int]
    inputs = (Input("X", types=FLOATS, ranks=(3, 4, 5)),)
    attributes = (
        Attr("kernel_shape", "ints"),
        Attr("strides", "ints", None),
        Attr("pads", "ints", None),
        Attr("dilations", "ints", None),
        Attr("auto_pad", "string", "NOTSET", allowed=AUTO_PADS),
        Attr("ceil_mode", "flag", 0),
    )
    min_work_per_thread = MIN_WORK_PER_THREAD

    def _ints(self, name: str, values, n: int, default: int, minimum: int) -> tuple:
        if values is None or len(values) == 0:
            return (default,) * n
        if len(values) != n:
            dims = n // 2 if name == "pads" else n
            raise ValueError(f"{self.onnx_node.op_type}: attribute {name} has {len(values)} "
                             f"values, expected {n} for input 0 ('X') with {dims} "
                             f"spatial dimension(s)")
        if min(values) < minimum:
            raise ValueError(f"{self.onnx_node.op_type}: attribute {name} must be >= {minimum}, "
                             f"got {list(values)}")
        return tuple(int(v) for v in values)

    def _geometry(self, x: np.ndarray) -> Geometry:
        op = self.onnx_node.op_type
        shape = x.shape
        n = x.ndim - 2
        spatial = shape[2:]
        kernel = self._ints("kernel_shape", self.kernel_shape, n, 1, 1)
        strides = self._ints("strides", self.strides, n, 1, 1)
        dilations = self._ints("dilations", self.dilations, n, 1, 1)
        pads = self._ints("pads", self.pads, 2 * n, 0, 0)
        begin, end, out = [], [], []
        for i in range(n):
            size, k, s, d = spatial[i], kernel[i], strides[i], dilations[i]
            extent = d * (k - 1) + 1
            if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                target = (size + s - 1) // s
                needed = max(0, (target - 1) * s + k - size)
                head = (needed + 1) // 2 if self.auto_pad == "SAME_LOWER" else needed // 2
                pb, pe = head, needed - head
            elif self.auto_pad == "VALID":
                pb = pe = 0
            else:
                pb, pe = pads[i], pads[n + i]
                if pb >= extent or pe >= extent:
                    raise ValueError(
                        f"{op}: attribute pads {list(pads)} must be smaller than the kernel "
                        f"{list(kernel)} (dilated) in each dimension")
            span = size + pb + pe - extent
            if span < 0:
                raise ValueError(
                    f"{op}: input 0 ('X') of shape {shape}: the kernel {list(kernel)} "
                    f"(dilations {list(dilations)}) is larger than the padded input")
            if self.ceil_mode and self.auto_pad == "NOTSET":
                o = -(-span // s) + 1
                # the last window must start inside the input or the left padding
                if (o - 1) * s >= size + pb:
                    o -= 1
            else:
                o = span // s + 1
            begin.append(pb)
            end.append(pe)
            out.append(o)
        planes = shape[0] * shape[1]
        return Geometry(tuple(shape[:2]) + tuple(out), _pad3(spatial, 1), _pad3(out, 1),
                        _pad3(kernel, 1), _pad3(strides, 1), _pad3(begin, 0), _pad3(end, 0),
                        _pad3(dilations, 1), planes)

    def _label_key(self, x: np.ndarray, level: int, extra: str = "") -> tuple:
        name = type(self).__name__.lower()
        dims = x.ndim - 2

        def label():
            used = simd.LEVEL_NAMES[core.level_used(level)]
            parts = [name, x.dtype.name, f"{dims}d"] + ([extra] if extra else []) + [used]
            return "_".join(parts)

        return ((x.dtype, dims, extra, level), label)

    def _plan(self, x, *rest):
        g = self._geometry(x)
        level = simd.state.level
        out_size = math.prod(g.out_shape)
        work = out_size * math.prod(g.kernel)
        threads = self._num_threads(work, self.min_work_per_thread)
        return g, level, threads, self._label_key(x, level, self._label_extra()), \
            self._counts(g)

    def _label_extra(self) -> str:
        return ""

    def _counts(self, g: Geometry):
        return None

    def _compute(self, plan, x, indices=None, p=0.0, storage_order=0):
        g, level, threads, path, counts = plan
        self._record_path(*path)
        narrow = _narrow(x.dtype)
        work_dtype = F32 if narrow else x.dtype
        y = self._new_output(g.out_shape, work_dtype) if not narrow else None
        if y is None:
            self._check_bytes("output 0 in float32", math.prod(g.out_shape) * 4)
            y = np.empty(g.out_shape, F32)
        if y.size == 0:
            return y.astype(x.dtype, copy=False) if narrow else y
        if narrow:
            self._check_bytes("input 0 in float32", x.size * 4)
            xw = np.ascontiguousarray(x, dtype=F32)
        else:
            xw = _dense(x)
        core.spatial(xw, y, indices, self.mode, g.in_dims, g.out_dims, g.kernel, g.strides,
                     g.pads_begin, g.dilations, counts and counts[work_dtype], storage_order,
                     p, g.planes, ELEMENT_TYPES[work_dtype], level, threads)
        if narrow:
            out = self._new_output(g.out_shape, x.dtype)
            out[...] = y
            return out
        return y


class MaxPool(_Spatial):
    """Max over each window; optional ``Indices`` (opset 8)."""

    mode = core.MAX
    inputs = (Input("X", types=FLOATS + (T.INT8, T.UINT8), ranks=(3, 4, 5)),)
    attributes = _Spatial.attributes + (Attr("storage_order", "int", 0, allowed=(0, 1)),)

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        outs = list(onnx_node.output)
        self.want_indices = len(outs) > 1 and bool(outs[1])

    def _label_extra(self) -> str:
        return "indices" if self.want_indices else ""

    def _execute(self, plan, x):
        if not self.want_indices:
            return (self._compute(plan, x),)
        g = plan[0]
        indices = self._new_output(g.out_shape, np.dtype(np.int64), slot=1)
        y = self._compute(plan, x, indices, storage_order=self.storage_order)
        return (y, indices)


class AveragePool(_Spatial):
    """Mean over each window: the positions inside the input
    (``count_include_pad=0``) or inside the padded input (1)."""

    mode = core.AVG
    attributes = _Spatial.attributes + (Attr("count_include_pad", "flag", 0),)

    def _label_extra(self) -> str:
        return "include_pad" if self.count_include_pad else ""

    def _counts(self, g: Geometry):
        """Per dimension, the window positions each output coordinate divides by."""
        counts = []
        for i in range(3):
            o = np.arange(g.out_dims[i], dtype=np.int64)[:, None]
            pos = o * g.strides[i] - g.pads_begin[i] + \
                np.arange(g.kernel[i], dtype=np.int64)[None, :] * g.dilations[i]
            lo = -g.pads_begin[i] if self.count_include_pad else 0
            hi = g.in_dims[i] + (g.pads_end[i] if self.count_include_pad else 0)
            counts.append(((pos >= lo) & (pos < hi)).sum(axis=1))
        # in the element type the core computes in (exact small integers)
        return {dtype: tuple(np.ascontiguousarray(c, dtype=dtype) for c in counts)
                for dtype in (F32, np.dtype(np.float64))}

    def _execute(self, plan, x):
        return (self._compute(plan, x),)


class LpPool(_Spatial):
    """(sum |x|^p)^(1/p) over each window; padding adds nothing."""

    mode = core.LP
    attributes = _Spatial.attributes + (Attr("p", "float", 2.0),)

    def _execute(self, plan, x):
        if not self.p > 0:
            raise ValueError(f"LpPool: attribute p must be positive, got {self.p}")
        return (self._compute(plan, x, p=self.p),)


# -- global pools


class _Global(KernelOp):
    mode: ClassVar[int]
    inputs = (Input("X", types=FLOATS),)
    min_work_per_thread = MIN_WORK_PER_THREAD
    p = 0.0

    def _plan(self, x):
        if x.ndim < 2:
            raise ValueError(self._input_error(0, f"must have rank >= 2 (N, C, ...), got {x.ndim}"))
        level = simd.state.level
        name, dtype = type(self).__name__.lower(), x.dtype.name

        def label():
            return f"{name}_{dtype}_{simd.LEVEL_NAMES[core.level_used(level)]}"

        shape = x.shape[:2] + (1,) * (x.ndim - 2)
        planes = x.shape[0] * x.shape[1]
        n = math.prod(x.shape[2:])
        return (shape, planes, n, level, self._num_threads(x.size, self.min_work_per_thread),
                ((x.dtype, level), label))

    def _execute(self, plan, x):
        shape, planes, n, level, threads, path = plan
        self._record_path(*path)
        if not self.p > 0:
            raise ValueError(
                f"{self.onnx_node.op_type}: attribute p must be positive, got {self.p}")
        narrow = _narrow(x.dtype)
        y = np.empty(shape, F32) if narrow else self._new_output(shape, x.dtype)
        if y.size:
            if narrow:
                self._check_bytes("input 0 in float32", x.size * 4)
                xw = np.ascontiguousarray(x, dtype=F32)
            else:
                xw = _dense(x)
            core.global_pool(xw, y, self.mode, self.p, planes, n, ELEMENT_TYPES[y.dtype],
                             level, threads)
        if narrow:
            return (y.astype(x.dtype),)
        return (y,)


class GlobalMaxPool(_Global):
    mode = core.MAX
    p = 1.0


class GlobalAveragePool(_Global):
    mode = core.AVG
    p = 1.0


class GlobalLpPool(_Global):
    mode = core.LP
    attributes = (Attr("p", "float", 2.0),)


# -- LRN


class LRN(KernelOp):
    """Y = X / (bias + alpha / size * sum of squares over the channel window
    [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]) ** beta."""

    inputs = (Input("X", types=FLOATS),)
    attributes = (Attr("size", "int"), Attr("alpha", "float", 1e-4), Attr("beta", "float", 0.75),
                  Attr("bias", "float", 1.0))
    min_work_per_thread = MIN_WORK_PER_THREAD

    def _plan(self, x):
        if x.ndim < 2:
            raise ValueError(self._input_error(0, f"must have rank >= 2 (N, C, ...), got {x.ndim}"))
        if self.size is None or self.size < 1:
            raise ValueError(f"LRN: attribute size must be a positive integer, got {self.size}")
        level = simd.state.level
        dtype = x.dtype.name

        def label():
            return f"lrn_{dtype}_{simd.LEVEL_NAMES[core.level_used(level)]}"

        work = x.size * self.size
        return (level, self._num_threads(work, self.min_work_per_thread), ((x.dtype, level), label))

    def _execute(self, plan, x):
        level, threads, path = plan
        self._record_path(*path)
        narrow = _narrow(x.dtype)
        y = np.empty(x.shape, F32) if narrow else self._new_output(x.shape, x.dtype)
        if y.size:
            if narrow:
                self._check_bytes("input 0 in float32", x.size * 4)
                xw = np.ascontiguousarray(x, dtype=F32)
            else:
                xw = _dense(x)
            N, C = x.shape[0], x.shape[1]
            size = self.size
            # float32 attributes, as ONNX stores them
            alpha, beta, bias = (float(np.float32(v)) for v in (self.alpha, self.beta, self.bias))
            core.lrn(xw, y, N, C, x.size // (N * C), (size - 1) // 2, size // 2,
                     float(np.float32(alpha / size)) if y.dtype == F32 else alpha / size,
                     beta, bias, ELEMENT_TYPES[y.dtype], level, threads)
        if narrow:
            return (y.astype(x.dtype),)
        return (y,)


# -- MaxUnpool


class MaxUnpool(KernelOp):
    """Scatters X into zeros at the flat positions ``I`` (MaxPool's Indices);
    the output shape from ``output_shape`` when given, else
    (in - 1) * stride + kernel - pads."""

    inputs = (Input("X", types=FLOATS, ranks=(3, 4, 5)),
              Input("I", types=(T.INT64,)),
              Input("output_shape", types=(T.INT64,), ranks=(1,), optional=True))
    attributes = (Attr("kernel_shape", "ints"), Attr("strides", "ints", None),
                  Attr("pads", "ints", None))
    strided_inputs = frozenset({2})

    def _run(self, x, indices, output_shape=None):
        op = "MaxUnpool"
        n = x.ndim - 2
        if indices.shape != x.shape:
            raise ValueError(self._input_error(
                1, f"has shape {indices.shape}, expected input 0's {x.shape}"))
        kernel = _Spatial._ints(self, "kernel_shape", self.kernel_shape, n, 1, 1)
        strides = _Spatial._ints(self, "strides", self.strides, n, 1, 1)
        pads = _Spatial._ints(self, "pads", self.pads, 2 * n, 0, 0)
        inferred = x.shape[:2] + tuple(
            (x.shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[n + i]
            for i in range(n))
        if min(inferred) < 0:
            raise ValueError(f"{op}: the output shape {list(inferred)} from kernel_shape, "
                             f"strides and pads is negative")
        shape = inferred
        if output_shape is not None:
            # ONNX: the indices address the inferred shape, which sits at the
            # start of each dimension of the requested one (zeros after it).
            shape = tuple(int(v) for v in output_shape)
            if len(shape) != x.ndim or any(s < i for s, i in zip(shape, inferred)):
                raise ValueError(self._input_error(
                    2, f"is {list(shape)}: expected {x.ndim} sizes, each at least the "
                       f"inferred {list(inferred)}"))
        level = simd.state.level
        self._record_path((x.dtype, level), lambda: f"maxunpool_{x.dtype.name}_numpy")
        y = self._new_output(shape, x.dtype)
        y.fill(0)
        if x.size:
            flat = indices.reshape(-1)
            total = math.prod(inferred)
            if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= total):
                raise ValueError(self._input_error(
                    1, f"has values outside [0, {total}) (the output {list(inferred)} "
                       f"flattened)"))
            if shape == inferred:
                y.reshape(-1)[flat] = x.reshape(-1)
            else:
                self._check_bytes("the inferred output", total * x.dtype.itemsize)
                inner = np.zeros(inferred, x.dtype)
                inner.reshape(-1)[flat] = x.reshape(-1)
                y[tuple(slice(0, i) for i in inferred)] = inner
        return (y,)


# -- MaxRoiPool


class MaxRoiPool(KernelOp):
    """Max over the pooled_shape bins of each region of interest
    [batch, x1, y1, x2, y2] (scaled by spatial_scale, rounded to cells)."""

    inputs = (Input("X", types=FLOATS, ranks=(4,)), Input("rois", like=0, ranks=(2,)))
    attributes = (Attr("pooled_shape", "ints"), Attr("spatial_scale", "float", 1.0))
    min_work_per_thread = MIN_WORK_PER_THREAD

    def _run(self, x, rois):
        if rois.shape[1] != 5:
            raise ValueError(self._input_error(
                1, f"has shape {rois.shape}, expected [num_rois, 5]"))
        ps = self.pooled_shape
        if ps is None or len(ps) != 2 or min(ps) < 1:
            raise ValueError(f"MaxRoiPool: attribute pooled_shape must be two positive sizes, "
                             f"got {ps}")
        N, C, H, W = x.shape
        R = rois.shape[0]
        narrow = _narrow(x.dtype)
        wd = F32 if narrow else x.dtype
        r = np.ascontiguousarray(rois, dtype=wd)
        if not math.isfinite(self.spatial_scale):
            raise ValueError(f"MaxRoiPool: attribute spatial_scale must be finite, got "
                             f"{self.spatial_scale}")
        if R and not np.isfinite(r).all():
            raise ValueError(self._input_error(1, "has values that are not finite"))
        if R and float(np.abs(r[:, 1:]).max()) * abs(self.spatial_scale) >= 2.0 ** 31:
            raise ValueError(self._input_error(
                1, "has coordinates beyond 2**31 cells once scaled by spatial_scale"))
        if R and (r[:, 0].min() < 0 or r[:, 0].max() >= N):
            raise ValueError(self._input_error(
                1, f"has batch indices outside [0, {N}) (input 0 has {N} images)"))
        level = simd.state.level
        self._record_path((x.dtype, level), lambda: (
            f"maxroipool_{x.dtype.name}_{simd.LEVEL_NAMES[core.level_used(level)]}"))
        shape = (R, C, int(ps[0]), int(ps[1]))
        y = np.empty(shape, wd) if narrow else self._new_output(shape, wd)
        if y.size:
            xw = np.ascontiguousarray(x, dtype=F32) if narrow else _dense(x)
            threads = self._num_threads(R * C * H * W, self.min_work_per_thread)
            core.roi(xw, r, y, C, H, W, shape[2], shape[3], np.float32(self.spatial_scale),
                     ELEMENT_TYPES[wd], level, threads)
        return (y.astype(x.dtype),) if narrow else (y,)


KERNELS = {
    "RegisterPoolingKernels": (
        MaxPool,
        AveragePool,
        LpPool,
        GlobalMaxPool,
        GlobalAveragePool,
        GlobalLpPool,
        LRN,
        MaxUnpool,
        MaxRoiPool,
    ),
}
