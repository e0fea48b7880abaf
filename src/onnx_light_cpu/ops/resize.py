"""Resize (opsets 10, 11, 13, 18, 19): nearest, linear and cubic, every
coordinate transformation, antialias, axes, keep_aspect_ratio_policy,
scales or sizes, roi with tf_crop_and_resize.

Resize is separable: each resized axis maps an output coordinate to a
source coordinate, then to a few source indices and weights (the taps).
The adapter computes them once per input shape and scales/sizes/roi values
(:func:`axis_taps`, NumPy in float64, the same formulas as the
``onnx.reference`` built-in and ONNX Runtime) and keeps them:

- **nearest**: one tap of weight 1 per output coordinate, so the whole
  resize is one index-map copy (the tensor core's ``map_copy``, as Pad):
  every element type, rows that repeat the previous one copied whole.
- **linear, cubic** (any number of taps: antialias widens them when
  downsampling): one pass per resized axis (``_kernels/resize.pyx``),
  float32 for float32/float16/bfloat16 (converted once before and after),
  float64 for double and the integer types (rounded back as the built-in
  does).  Passes run in the order that costs least (the last axis first
  when upsampling: its gather-dot pass then works on the smaller tensor,
  and the other axes' passes are vectorized row sums).

Opset 10 (inputs X and scales, no attributes but ``mode``) behaves as ONNX
Runtime does: asymmetric coordinates, nearest rounding down when
upsampling and up when downsampling.  tf_half_pixel_for_nearest (opsets
11-18) maps ``(y + 0.5) / scale`` as ONNX Runtime does (the built-in does
not know it).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import onnx.numpy_helper
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels import resize as core
from .._kernels import tensor as tensor_core
from ._base import Attr, Input, KernelOp
from .shape import COMMON_TYPES
from .tensor import MIN_BYTES_PER_THREAD, map_plan

T = TensorProto

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_half_pixel_for_nearest", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MODES = ("nearest", "linear", "cubic")
POLICIES = ("stretch", "not_larger", "not_smaller")

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
# computed in float32 (converted once), the others in float64
_NARROW = (np.dtype(np.float16), np.dtype(bfloat16), _F32)
# Multiply-adds one thread does before a second one is asked to help.
MIN_WORK_PER_THREAD = 1 << 16


# ---------------------------------------------------------------- the taps

def _source_coordinates(mode: str, y: np.ndarray, scale: float, in_len: int, out_len: int,
                        roi: tuple[float, float] | None):
    """Source coordinate of each output coordinate ``y`` and, for
    tf_crop_and_resize, which ones fall outside the input."""
    out_width = scale * in_len
    extrap = None
    if mode == "align_corners":
        x = np.zeros(out_len) if out_width == 1 else y * (in_len - 1) / (out_width - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_half_pixel_for_nearest":
        x = (y + 0.5) / scale
    elif mode == "tf_crop_and_resize":
        r0, r1 = roi if roi is not None else (0.0, 1.0)
        if out_width == 1:
            x = np.full(out_len, (r1 - r0) * (in_len - 1) / 2)
        else:
            x = y * (r1 - r0) * (in_len - 1) / (out_width - 1)
        x = x + r0 * (in_len - 1)
        extrap = (x < 0) | (x > in_len - 1)
    elif mode == "pytorch_half_pixel":
        x = np.full(out_len, -0.5) if out_width == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / out_width)
        x = offset + (y + 0.5) / scale - 0.5
    else:  # half_pixel
        x = (y + 0.5) / scale - 0.5
    return x, extrap


def _nearest_index(x: np.ndarray, rule: str, scale: float) -> np.ndarray:
    fl = np.floor(x)
    frac = x - fl
    if rule == "round_prefer_floor":
        idx = np.where(frac <= 0.5, fl, fl + 1)
    elif rule == "round_prefer_ceil":
        idx = np.where(frac < 0.5, fl, fl + 1)
    elif rule == "floor":
        idx = fl
    elif rule == "ceil":
        idx = np.ceil(x)
    else:  # "simple", opset 10 (ONNX Runtime): down when upsampling, up when downsampling
        idx = np.ceil(x) if scale < 1 else fl
    return idx.astype(np.int64)


def _cubic(ratio: np.ndarray, a: float) -> np.ndarray:
    """The 4 weights at distances ratio + 1, ratio, 1 - ratio, 2 - ratio."""
    r1, q = ratio + 1, 1 - ratio
    return np.stack([
        ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a,
        ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
        ((a + 2) * q - (a + 3)) * q * q + 1,
        ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a,
    ], axis=1)


def _cubic_kernel(d: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(d)
    d2, d3 = d * d, d * d * d
    return np.where(d <= 1, (a + 2) * d3 - (a + 3) * d2 + 1,
                    np.where(d < 2, a * d3 - 5 * a * d2 + 8 * a * d - 4 * a, 0.0))


def axis_taps(in_len: int, out_len: int, scale: float, *, mode: str, coordinate: str,
              nearest: str = "round_prefer_floor", cubic_a: float = -0.75,
              exclude_outside: bool = False, antialias: bool = False,
              roi: tuple[float, float] | None = None):
    """(indices int64 [out_len, taps] clamped into [0, in_len), weights
    float64 [out_len, taps], extrapolated flags or None) of one axis."""
    y = np.arange(out_len, dtype=np.float64)
    x, extrap = _source_coordinates(coordinate, y, scale, in_len, out_len, roi)
    if mode == "nearest":
        idx = np.clip(_nearest_index(x, nearest, scale), 0, max(in_len - 1, 0))
        return idx.reshape(-1, 1), np.ones((out_len, 1)), extrap
    xi = np.floor(x)
    ratio = np.where(x == xi, 1.0, x - xi)
    if mode == "linear" and not antialias:
        coeffs = np.stack([1 - ratio, ratio], axis=1)
    elif mode == "cubic" and not antialias:
        coeffs = _cubic(ratio, cubic_a)
    elif mode == "linear":
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        offsets = np.arange(start, 2 - start, dtype=np.float64)
        coeffs = np.clip(1 - np.abs((offsets[None, :] - ratio[:, None]) * s), 0, 1)
        coeffs /= coeffs.sum(axis=1, keepdims=True)
    else:  # cubic, antialias
        s = min(scale, 1.0)
        start = int(np.floor(-2 / s) + 1)
        offsets = np.arange(start, 2 - start, dtype=np.float64)
        coeffs = _cubic_kernel(s * (offsets[None, :] - ratio[:, None]), cubic_a)
        coeffs /= coeffs.sum(axis=1, keepdims=True)
    n = coeffs.shape[1]
    # The n indices nearest to x, ties to the smaller (the built-in's window).
    pad = (n + 1) // 2
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        coeffs = np.where((idx < 0) | (idx >= in_len), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, max(in_len - 1, 0)), coeffs, extrap


# ---------------------------------------------------------------- the adapter

def _cost(shape, out_shape, order, taps) -> int:
    """Estimated work of the passes over ``order``'s axes in turn."""
    current = list(shape)
    total = 0
    for a in order:
        current[a] = out_shape[a]
        single = math.prod(current[a + 1:]) == 1
        total += math.prod(current) * taps[a][0].shape[1] * (4 if single else 1)
    return total


class _Pass(NamedTuple):
    axis: int
    outer: int
    in_len: int
    out_len: int
    inner: int
    idx: np.ndarray          # int64 [out_len, taps]
    w: np.ndarray            # [out_len, taps], float32 or float64
    extrap: np.ndarray       # uint8 [out_len], or empty


class _Plan(NamedTuple):
    shape: tuple[int, ...]   # of the output
    nearest: object          # MapPlan (nearest), or None
    passes: tuple[_Pass, ...]
    compute: np.dtype | None  # float32 or float64 (linear, cubic)


_EMPTY_U8 = np.zeros(0, dtype=np.uint8)


class Resize(KernelOp):
    """See the module docstring."""

    inputs = (Input("X", types=COMMON_TYPES), Input("roi", types=(T.FLOAT16, T.FLOAT, T.DOUBLE),
                                                    optional=True),
              Input("scales", types=(T.FLOAT,), optional=True),
              Input("sizes", types=(T.INT64,), optional=True))
    attributes = (Attr("mode", "string", "nearest", allowed=MODES),
                  Attr("coordinate_transformation_mode", "string", "half_pixel",
                       allowed=COORDINATE_MODES),
                  Attr("nearest_mode", "string", "round_prefer_floor", allowed=NEAREST_MODES),
                  Attr("cubic_coeff_a", "float", -0.75),
                  Attr("exclude_outside", "flag", False),
                  Attr("extrapolation_value", "float", 0.0),
                  Attr("antialias", "flag", False),
                  Attr("axes", "ints", None),
                  Attr("keep_aspect_ratio_policy", "string", "stretch", allowed=POLICIES))
    since_version = 10
    strided_inputs = frozenset({1, 2, 3})

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        if self.opset < 11:
            self.coordinate_transformation_mode = "asymmetric"
            self.nearest_mode = "simple"
            if self.mode == "cubic":
                self._reject_attribute("attribute mode 'cubic' needs opset 11")
        coordinate = self.coordinate_transformation_mode
        if coordinate == "tf_half_pixel_for_nearest" and self.opset >= 19:
            self._reject_attribute("attribute coordinate_transformation_mode "
                                   "'tf_half_pixel_for_nearest' was removed in opset 19")
        if coordinate == "half_pixel_symmetric" and self.opset < 19:
            self._reject_attribute("attribute coordinate_transformation_mode "
                                   "'half_pixel_symmetric' needs opset 19")
        if self.opset < 18 and (self.axes is not None or self.antialias
                                or self.keep_aspect_ratio_policy != "stretch"):
            self._reject_attribute("attributes axes, antialias and keep_aspect_ratio_policy "
                                   "need opset 18")
        self._plans_by_value: dict = {}

    # -- what the inputs say

    def _inputs(self, args):
        if self.opset < 11:
            x, scales = args[0], args[1] if len(args) > 1 else None
            if scales is None:
                raise ValueError(self._input_error(1, "(scales) is required but missing"))
            return x, None, scales, None
        x = args[0]
        roi = args[1] if len(args) > 1 else None
        scales = args[2] if len(args) > 2 else None
        sizes = args[3] if len(args) > 3 else None
        return x, roi, scales, sizes

    def _axes(self, rank: int) -> list[int]:
        if self.axes is None:
            return list(range(rank))
        out = []
        for a in self.axes:
            if not -rank <= a < rank:
                raise ValueError(f"Resize: attribute axes has axis {a}, out of range "
                                 f"[{-rank}, {rank - 1}] for input 0 of rank {rank}")
            a = a + rank if a < 0 else a
            if a in out:
                raise ValueError(f"Resize: attribute axes repeats axis {a}")
            out.append(a)
        return out

    def _geometry(self, shape, roi, scales, sizes):
        """(output shape, scale per axis, roi pair per axis or None)."""
        rank = len(shape)
        axes = self._axes(rank)
        n = len(axes)
        has_scales = scales is not None and scales.size > 0
        has_sizes = sizes is not None and sizes.size > 0
        if has_scales == has_sizes:
            raise ValueError(self._input_error(
                2, "and sizes (input 3): exactly one must be given (non-empty)"))
        scale_of = [1.0] * rank
        out = list(shape)
        if has_scales:
            values = scales.reshape(-1).astype(np.float64)
            if values.size != n:
                raise ValueError(self._input_error(
                    2 if self.opset >= 11 else 1,
                    f"has {values.size} values, expected {n} (one per resized axis)"))
            if not np.all(values > 0):
                raise ValueError(self._input_error(2 if self.opset >= 11 else 1,
                                                   f"has scales {values.tolist()}, "
                                                   "which must be positive"))
            for a, s in zip(axes, values.tolist()):
                scale_of[a] = s
                out[a] = int(s * shape[a])
        else:
            values = sizes.reshape(-1)
            if values.size != n:
                raise ValueError(self._input_error(
                    3, f"has {values.size} values, expected {n} (one per resized axis)"))
            if np.any(values < 0):
                raise ValueError(self._input_error(3, f"has sizes {values.tolist()}, "
                                                      "which must not be negative"))
            for a, s in zip(axes, values.tolist()):
                if shape[a] == 0 and s:
                    raise ValueError(self._input_error(
                        0, f"has size 0 on axis {a}, which cannot be resized to {s}"))
                scale_of[a] = s / shape[a] if shape[a] else 1.0
                out[a] = int(s)
            if self.keep_aspect_ratio_policy != "stretch":
                pick = min if self.keep_aspect_ratio_policy == "not_larger" else max
                s = pick(scale_of[a] for a in axes)
                for a in axes:
                    scale_of[a] = s
                    out[a] = int(s * shape[a] + 0.5)
        roi_of = [None] * rank
        if self.coordinate_transformation_mode == "tf_crop_and_resize":
            if roi is None or roi.size == 0:
                raise ValueError(self._input_error(
                    1, "(roi) is required with coordinate_transformation_mode "
                       "tf_crop_and_resize"))
            values = roi.reshape(-1).astype(np.float64).tolist()
            if len(values) != 2 * n:
                raise ValueError(self._input_error(
                    1, f"has {len(values)} values, expected {2 * n} (starts and ends of "
                       f"{n} axes)"))
            for i, a in enumerate(axes):
                roi_of[a] = (values[i], values[n + i])
        return tuple(out), scale_of, roi_of

    # -- the plan

    def _make_plan(self, x, roi, scales, sizes) -> _Plan:
        shape = x.shape
        out_shape, scale_of, roi_of = self._geometry(shape, roi, scales, sizes)
        self._check_bytes(f"output 0 of shape {out_shape}",
                          math.prod(out_shape) * x.dtype.itemsize)
        mode = self.mode
        resized = []
        for a, (d, o) in enumerate(zip(shape, out_shape)):
            r = roi_of[a]
            if o == d and math.isclose(scale_of[a], 1.0) and (
                    r is None or (math.isclose(r[0], 0.0) and math.isclose(r[1], 1.0))):
                continue
            if d == 0 or o == 0:
                continue  # nothing to read or nothing to write: the shape says it all
            resized.append(a)
        taps = {a: axis_taps(shape[a], out_shape[a], scale_of[a], mode=mode,
                             coordinate=self.coordinate_transformation_mode,
                             nearest=self.nearest_mode, cubic_a=self.cubic_coeff_a,
                             exclude_outside=self.exclude_outside,
                             antialias=self.antialias and mode != "nearest",
                             roi=roi_of[a])
                for a in resized}
        if mode == "nearest":
            maps = [None] * len(shape)
            for a, (idx, _w, extrap) in taps.items():
                m = idx[:, 0].copy()
                if extrap is not None:
                    m[extrap] = -1
                maps[a] = m
            return _Plan(out_shape, map_plan(shape, x.dtype.itemsize, maps), (), None)
        compute = _F32 if x.dtype in _NARROW else _F64
        # The order of the passes: the one that costs least (a pass whose
        # lines are single elements costs about four times more a tap).
        order = min(itertools.permutations(resized) if len(resized) <= 4 else [resized],
                    key=lambda o: _cost(shape, out_shape, o, taps))
        current = list(shape)
        passes = []
        for a in order:
            idx, w, extrap = taps[a]
            passes.append(_Pass(a, math.prod(current[:a]), current[a], out_shape[a],
                                math.prod(current[a + 1:]), np.ascontiguousarray(idx),
                                np.ascontiguousarray(w, dtype=compute),
                                _EMPTY_U8 if extrap is None else extrap.astype(np.uint8)))
            current[a] = out_shape[a]
        return _Plan(out_shape, None, tuple(passes), compute)

    def _plan_of(self, x, roi, scales, sizes) -> _Plan:
        key = (x.shape, x.dtype,
               None if roi is None else (roi.dtype, roi.tobytes()),
               None if scales is None else scales.tobytes(),
               None if sizes is None else sizes.tobytes())
        plan = self._plans_by_value.get(key)
        if plan is None:
            plan = self._make_plan(x, roi, scales, sizes)
            if len(self._plans_by_value) >= 32:
                self._plans_by_value.clear()
            self._plans_by_value[key] = plan
        return plan

    # -- the run

    def _run(self, *args):
        x, roi, scales, sizes = self._inputs(args)
        if x.ndim == 0:
            raise ValueError(self._input_error(0, "is a scalar, Resize needs rank >= 1"))
        if x.dtype.kind in "OUS":
            raise TypeError(self._input_error(0, "has element type string, which Resize "
                                                 "cannot interpolate"))
        if x.dtype.kind == "b" and self.mode != "nearest":
            raise TypeError(self._input_error(0, f"has element type bool, which {self.mode} "
                                                 "mode cannot interpolate (nearest can)"))
        for index, value, limit in ((1, roi, 2 * x.ndim), (2, scales, x.ndim),
                                    (3, sizes, x.ndim)):
            if value is not None and value.size > limit:  # before reading it
                raise ValueError(self._input_error(
                    index if self.opset >= 11 else 1,
                    f"has {value.size} values, more than the {limit} possible for input 0 "
                    f"of rank {x.ndim}"))
        plan = self._plan_of(x, roi, scales, sizes)
        if plan.nearest is not None:
            return (self._nearest(x, plan),)
        return (self._interpolate(x, plan),)

    def _nearest(self, x, plan: _Plan) -> np.ndarray:
        mp = plan.nearest
        self._record_path(("nearest", x.dtype), lambda: f"resize_nearest_{x.dtype.name}")
        out = self._new_output(plan.shape, x.dtype)
        if mp.maps is None:
            np.copyto(out, x)
            return out
        fill = np.array(self.extrapolation_value).astype(x.dtype).reshape(1)
        tensor_core.map_copy(np.ascontiguousarray(x), out, mp.maps, mp.runs, mp.cols, mp.elem,
                             fill.view(np.uint8),
                             self._num_threads(out.nbytes, MIN_BYTES_PER_THREAD), mp.repeat)
        return out

    def _interpolate(self, x, plan: _Plan) -> np.ndarray:
        level = simd.state.level
        self._record_path((self.mode, x.dtype, level), lambda: (
            f"resize_{self.mode}{'_antialias' if self.antialias else ''}_{x.dtype.name}_"
            f"{simd.LEVEL_NAMES[core.level_used(level)]}"))
        out = self._new_output(plan.shape, x.dtype)
        if not plan.passes or out.size == 0:
            if out.size:
                np.copyto(out, x)
            return out
        compute = plan.compute
        src = np.require(x, dtype=compute, requirements=("C", "A"))
        last = len(plan.passes) - 1
        for k, p in enumerate(plan.passes):
            if k == last and x.dtype == compute:
                dst = out
            else:
                n = p.outer * p.out_len * p.inner
                self._check_bytes("a pass buffer", n * compute.itemsize)
                dst = np.empty(n, dtype=compute)
            work = p.outer * p.out_len * p.inner * p.idx.shape[1]
            core.axis_pass(src, dst, p.outer, p.in_len, p.out_len, p.inner, p.idx, p.w,
                           p.extrap, self.extrapolation_value, level,
                           self._num_threads(work, MIN_WORK_PER_THREAD))
            src = dst
        if src is out:
            return out
        result = src.reshape(plan.shape)
        if x.dtype.kind in "fV" or x.dtype == bfloat16:
            out[...] = result
        else:  # integer types, rounded and saturated as the built-in does
            out[...] = onnx.numpy_helper.saturate_cast(result, x.dtype)
        return out


KERNELS = {"RegisterResizeKernel": (Resize,)}
