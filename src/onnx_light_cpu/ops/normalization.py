"""BatchNormalization, GroupNormalization, InstanceNormalization,
LayerNormalization, LpNormalization, MeanVarianceNormalization,
RMSNormalization and the experimental SimplifiedLayerNormalization.

All of them run on one row engine
(``_kernels/include/normalization/olc_normalization.h``): a row's statistics
in one reduction, then one pass writing the output.  Arithmetic
is float32 for float, float16 and bfloat16 (one rounding on store) and
float64 for double, except where ``stash_type`` says otherwise
(SimplifiedLayerNormalization and RMSNormalization: 1 = float32,
11 = float64, whatever the input types).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from onnx import TensorProto, helper

from .. import simd
from .._kernels import normalization as core
from ._base import ELEMENT_TYPES, KernelOp

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
STAT_DTYPES = {T.FLOAT: np.dtype(np.float32), T.DOUBLE: np.dtype(np.float64)}

# Elements one thread must have before a second one is asked, measured on
# 2 cores with the second one idle (AVX-512, float32, t1 vs t2 in µs
# through the evaluator): RMSNormalization [32, 1024] 6.4 vs 7.6,
# [128, 896] 15.9 vs 11.3, [128, 4096] 69.7 vs 35.1; LayerNormalization
# alike.  Two threads win from about 64K elements.  (When another process
# holds the second core, waking our thread can cost ~0.8 ms: true of every
# OpenMP kernel here.)
MIN_WORK_PER_THREAD = 1 << 15


def _attributes(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _float_attr(attrs: dict, name: str, default: float) -> float:
    """A FLOAT attribute or its default, both float32 values as ONNX stores them."""
    return float(np.float32(attrs.get(name, default)))


def _axis(op: KernelOp, axis: int, rank: int, index: int = 0) -> int:
    if not -rank <= axis < rank:
        raise ValueError(op._input_error(
            index, f"of rank {rank} has no axis {axis} (expected [{-rank}, {rank - 1}])"))
    return axis + rank if axis < 0 else axis


class _Norm(KernelOp):
    """Shared checks and usage recording."""

    onnx_types: ClassVar[tuple[int, ...]] = FLOATS
    min_work_per_thread = MIN_WORK_PER_THREAD

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self.attrs = _attributes(onnx_node)
        self.outputs_wanted = tuple(bool(name) for name in onnx_node.output)
        self._prepare()

    def _prepare(self) -> None:
        """Parse the attributes once."""

    def _float_input(self, index: int, a, what: str = "") -> int:
        if not isinstance(a, np.ndarray):
            raise TypeError(self._input_error(index, f"must be a tensor, got {type(a).__name__}"))
        element_type = ELEMENT_TYPES.get(a.dtype)
        if element_type not in self._allowed:
            raise TypeError(self._input_error(
                index, f"has element type {a.dtype}, expected one of "
                f"{', '.join(self.element_types)}"))
        return element_type

    def _same_type(self, index: int, a, dtype: np.dtype) -> None:
        self._float_input(index, a)
        if a.dtype != dtype:
            raise TypeError(self._input_error(
                index, f"has element type {a.dtype}, expected {dtype} (the type of input 0)"))

    def _record(self, tx: int, ts: int, acc_double: int, level: int, label: str = "") -> None:
        if self._usage.enabled:
            key = (tx, ts, acc_double, level, label)
            path = self._paths.get(key)
            if path is None:
                used = simd.LEVEL_NAMES[core.level_used(level)]
                names = [type(self).__name__.lower(), helper.tensor_dtype_to_np_dtype(tx).name]
                if ts != tx:
                    names.append(helper.tensor_dtype_to_np_dtype(ts).name)
                if label:
                    names.append(label)
                names.append(used)
                path = self._paths[key] = "_".join(names)
            self._usage.record(self.kernel_name, path)


# -- scale vector per row: LayerNormalization, RMSNormalization, SimplifiedLayerNormalization


class _RowNorm(_Norm):
    centered: ClassVar[bool] = False
    # Scale broadcasts over the whole of X (SimplifiedLayerNormalization) or
    # over the normalized dimensions only.
    scale_over_whole_x: ClassVar[bool] = False

    def _prepare(self) -> None:
        self.axis = int(self.attrs.get("axis", -1))
        self.epsilon = _float_attr(self.attrs, "epsilon", 1e-5)
        self.stash_type = int(self.attrs.get("stash_type", 1))
        self._layouts: dict = {}

    def _scale_layout(self, index: int, scale: np.ndarray, x_shape: tuple, axis: int):
        """(expand or None, stride in elements between the scale rows of
        consecutive rows, scale row index per row or None), cached per shape."""
        key = (scale.shape, x_shape, axis, scale.dtype)
        layout = self._layouts.get(key)
        if layout is not None:
            return layout
        target = x_shape if self.scale_over_whole_x else x_shape[axis:]
        what = "the shape of input 0" if self.scale_over_whole_x else "the normalized shape"
        shape = scale.shape
        extra = len(shape) - len(target)
        # LayerNormalization drops leading 1s; SimplifiedLayerNormalization's
        # scale may not give X a higher rank.
        ok = extra <= 0 or (not self.scale_over_whole_x and all(d == 1 for d in shape[:extra]))
        if ok and extra > 0:
            scale = scale.reshape(shape[extra:])
        try:
            ok = ok and np.broadcast_shapes(scale.shape, target) == tuple(target)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(self._input_error(
                index, f"of shape {shape} does not broadcast to {what} {tuple(target)}"))
        rank = len(x_shape)
        padded = (1,) * (rank - scale.ndim) + scale.shape
        outer, inner = padded[:axis], padded[axis:]
        n = math.prod(x_shape[axis:])
        # None: use the given scale as it is; else a callable materialising
        # the broadcast inside the normalized suffix (small: outer * n).
        full = outer + tuple(x_shape[axis:])
        expand = None if inner == tuple(x_shape[axis:]) else (
            lambda s: np.ascontiguousarray(np.broadcast_to(s.reshape(padded), full)))
        n_outer = math.prod(outer)
        if n_outer == 1:
            stride, rows = 0, None
        elif outer == tuple(x_shape[:axis]):
            stride, rows = n, None
        else:
            stride = n
            rows = np.ascontiguousarray(np.broadcast_to(
                np.arange(n_outer, dtype=np.int64).reshape(outer), x_shape[:axis]).reshape(-1))
        if len(self._layouts) >= 64:  # shapes that keep changing (sequence lengths)
            self._layouts.clear()
        layout = self._layouts[key] = (expand, stride, rows)
        return layout

    def _arrange(self, index, a, x_shape, axis):
        expand, stride, rows = self._scale_layout(index, a, x_shape, axis)
        a = np.ascontiguousarray(a) if expand is None else expand(a)
        return a, stride, rows

    def _normalize(self, x, scale, bias, tx, ts, acc_double, stat_dtype, stat_type):
        rank = x.ndim
        axis = _axis(self, self.axis, rank)
        x_shape = x.shape
        n = math.prod(x_shape[axis:])
        rows = math.prod(x_shape[:axis])
        scale, stride, scale_row = self._arrange(1, scale, x_shape, axis)
        if bias is not None:
            # Only LayerNormalization has a bias, and its scale and bias both
            # broadcast over the normalized shape: one shared vector each.
            bias = self._arrange(2, bias, x_shape, axis)[0]
        x = np.ascontiguousarray(x)
        level = simd.state.level
        self._record(tx, ts, acc_double, level)
        y = self._new_output(x_shape, scale.dtype)
        stats_shape = x_shape[:axis] + (1,) * (rank - axis)
        wanted = self.outputs_wanted
        mean = self._new_output(stats_shape, stat_dtype, 1) if self.centered and len(wanted) > 1 \
            and wanted[1] else None
        k = 2 if self.centered else 1
        inv = (self._new_output(stats_shape, stat_dtype, k) if len(wanted) > k and wanted[k]
               else None)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        core.rows(x, scale, bias, scale_row, y, mean, inv, rows, n, stride,
                  core.CENTERED if self.centered else core.SQUARES, self.epsilon, acc_double,
                  stat_type, ts, tx, level, threads)
        outputs = [y]
        if self.centered:
            outputs.append(mean)
        outputs.append(inv)
        return tuple(outputs[: len(wanted)])


class LayerNormalization(_RowNorm):
    """Y = (X - mean) / sqrt(var + epsilon) * Scale + B over axis..rank-1;
    optional Mean and InvStdDev (float32, stash_type 1)."""

    since_version = 17
    centered = True

    def _prepare(self) -> None:
        super()._prepare()
        if self.stash_type != 1:
            raise ValueError(f"LayerNormalization: stash_type {self.stash_type} is not supported "
                             "(only 1, float32)")

    def _run(self, x, scale, b=None):
        tx = self._float_input(0, x)
        if x.ndim == 0:
            raise ValueError(self._input_error(0, "must have rank >= 1"))
        self._same_type(1, scale, x.dtype)
        if b is not None:
            self._same_type(2, b, x.dtype)
        acc_double = int(tx == T.DOUBLE)
        return self._normalize(x, scale, b, tx, tx, acc_double, STAT_DTYPES[T.FLOAT], T.FLOAT)


class _StashNorm(_RowNorm):
    """Scale of its own type, output of the scale's type, stash_type 1 or 11
    selecting float32 or float64 arithmetic."""

    def _prepare(self) -> None:
        super()._prepare()
        if self.stash_type not in (T.FLOAT, T.DOUBLE):
            raise ValueError(f"{type(self).__name__}: stash_type {self.stash_type} is not "
                             "supported (1: float32 or 11: float64)")
        self.acc_double = int(self.stash_type == T.DOUBLE)

    def _run(self, x, scale):
        tx = self._float_input(0, x)
        ts = self._float_input(1, scale)
        if x.ndim == 0:
            raise ValueError(self._input_error(0, "must have rank >= 1"))
        return self._normalize(x, scale, None, tx, ts, self._acc(tx), STAT_DTYPES[self.stash_type],
                               self.stash_type)

    def _acc(self, tx: int) -> int:
        return self.acc_double


class RMSNormalization(_StashNorm):
    """Y = X / sqrt(mean(X^2) + epsilon) * scale over axis..rank-1 (opset 23)."""

    since_version = 23

    def _acc(self, tx: int) -> int:
        # float64 inputs keep float64 arithmetic, as the built-in does.
        return 1 if tx == T.DOUBLE else self.acc_double


class SimplifiedLayerNormalization(_StashNorm):
    """The experimental ONNX Runtime operator (domain "", version 1): RMS
    normalization with Scale broadcast over the whole of X and an optional
    inv_std_var of shape X[:axis] + [1] * (rank - axis)."""

    scale_over_whole_x = True

    def _run(self, x, scale):
        self._float_input(0, x)  # validates
        if x.ndim == 0:
            raise ValueError(self._input_error(0, "must have rank >= 1"))
        axis = _axis(self, self.axis, x.ndim)
        if math.prod(x.shape[axis:]) == 0:
            raise ValueError(self._input_error(
                0, f"of shape {x.shape} has an empty normalized suffix (axis {axis})"))
        return super()._run(x, scale)


# -- one multiplier per channel segment: BatchNormalization, InstanceNormalization,
#    GroupNormalization, LpNormalization, MeanVarianceNormalization


def _as_f64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.reshape(-1), dtype=np.float64)


class _ChannelNorm(_Norm):
    def _channel_input(self, index: int, a, channels: int, name: str) -> np.ndarray:
        self._float_input(index, a)
        if a.size != channels or a.ndim > 1 and a.shape != (channels,):
            raise ValueError(self._input_error(
                index, f"({name}) has shape {a.shape}, expected ({channels},)"))
        return _as_f64(a)

    def _affine(self, x, tx, how, mode, eps, rows, segs, seg_len, groups, mul=None, add=None,
                mean=None, var=None, label="", acc_double=None):
        x = np.ascontiguousarray(x)
        level = simd.state.level
        if acc_double is None:
            acc_double = int(tx == T.DOUBLE)
        self._record(tx, tx, acc_double, level, label)
        y = self._new_output(x.shape, x.dtype)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        core.affine(x, mul, add, mean, var, y, None, None, rows, segs, seg_len, groups, how, mode,
                    eps, acc_double, tx, level, threads)
        return y


class InstanceNormalization(_ChannelNorm):
    """y = scale * (x - mean) / sqrt(var + epsilon) + B per instance and channel."""

    def _prepare(self) -> None:
        self.epsilon = _float_attr(self.attrs, "epsilon", 1e-5)

    def _run(self, x, scale, b):
        tx = self._float_input(0, x)
        if x.ndim < 2:
            raise ValueError(self._input_error(0, f"must have rank >= 2 (N, C, ...), got {x.ndim}"))
        c = x.shape[1]
        mul = self._channel_input(1, scale, c, "scale")
        add = self._channel_input(2, b, c, "B")
        self._same_type(1, scale, x.dtype)
        self._same_type(2, b, x.dtype)
        return (self._affine(x, tx, core.HOW_STD, core.CENTERED, self.epsilon, x.shape[0] * c, 1,
                             math.prod(x.shape[2:]), c, mul, add),)


class GroupNormalization(_ChannelNorm):
    """Per instance and group of C / num_groups channels; opset 18 has a
    scale and bias per group, opset 21 per channel."""

    since_version = 18

    def _prepare(self) -> None:
        self.epsilon = _float_attr(self.attrs, "epsilon", 1e-5)
        if "num_groups" not in self.attrs:
            raise ValueError("GroupNormalization: attribute num_groups is required")
        self.num_groups = int(self.attrs["num_groups"])
        stash = int(self.attrs.get("stash_type", 1))
        if stash not in (T.FLOAT, T.DOUBLE):
            raise ValueError(f"GroupNormalization: stash_type {stash} is not supported "
                             "(1: float32 or 11: float64)")
        self.stash_double = stash == T.DOUBLE

    def _run(self, x, scale, bias):
        tx = self._float_input(0, x)
        if x.ndim < 2:
            raise ValueError(self._input_error(0, f"must have rank >= 2 (N, C, ...), got {x.ndim}"))
        g, c = self.num_groups, x.shape[1]
        if g <= 0 or c % g:
            raise ValueError(f"GroupNormalization: num_groups {g} does not divide the "
                             f"{c} channels of input 0 ({self.onnx_node.input[0]!r})")
        self._same_type(1, scale, x.dtype)
        self._same_type(2, bias, x.dtype)
        per = g if self.opset < 21 else c
        mul = self._channel_input(1, scale, per, "scale")
        add = self._channel_input(2, bias, per, "bias")
        if per != c:
            mul, add = np.repeat(mul, c // g), np.repeat(add, c // g)
        # float64 inputs keep float64 arithmetic whatever the stash type.
        acc_double = int(tx == T.DOUBLE or self.stash_double)
        return (self._affine(x, tx, core.HOW_STD, core.CENTERED, self.epsilon, x.shape[0] * g,
                             c // g, math.prod(x.shape[2:]), g, mul, add, acc_double=acc_double),)


class BatchNormalization(_ChannelNorm):
    """Inference: y = scale * (x - input_mean) / sqrt(input_var + eps) + B.
    Training (training_mode=1 from opset 14, extra outputs before): batch
    statistics, the running mean and variance as optional outputs (and the
    saved batch mean and variance before opset 14)."""

    def _prepare(self) -> None:
        self.epsilon = _float_attr(self.attrs, "epsilon", 1e-5)
        self.momentum = _float_attr(self.attrs, "momentum", 0.9)
        # Before opset 14, asking for more than Y means training (outputs
        # running mean, running var, saved mean, saved var).
        self.training = (bool(self.attrs.get("training_mode", 0)) if self.opset >= 14
                         else len(self.outputs_wanted) > 1)
        if self.opset < 9 and int(self.attrs.get("spatial", 1)) != 1:
            raise ValueError("BatchNormalization: spatial=0 is not supported")

    def _run(self, x, scale, b, mean, var):
        tx = self._float_input(0, x)
        if x.ndim < 2:
            raise ValueError(self._input_error(0, f"must have rank >= 2 (N, C, ...), got {x.ndim}"))
        n, c = x.shape[0], x.shape[1]
        spatial = math.prod(x.shape[2:])
        mul = self._channel_input(1, scale, c, "scale")
        add = self._channel_input(2, b, c, "B")
        mean64 = self._channel_input(3, mean, c, "input_mean")
        var64 = self._channel_input(4, var, c, "input_var")
        if self.opset < 14:
            for i, a in ((1, scale), (2, b), (3, mean), (4, var)):
                self._same_type(i, a, x.dtype)
        elif self.opset == 14:
            self._same_type(1, scale, x.dtype)
            self._same_type(2, b, x.dtype)
        elif b.dtype != scale.dtype or var.dtype != mean.dtype:
            bad = 2 if b.dtype != scale.dtype else 4
            raise TypeError(self._input_error(bad, "must have the element type of input "
                                              f"{bad - 1}"))
        if not self.training:
            return (self._affine(x, tx, core.HOW_GIVEN, core.CENTERED, self.epsilon, n * c, 1,
                                 spatial, c, mul, add, mean64, var64),)
        # Training: per-row statistics in the engine, combined per channel
        # (equal counts: the batch mean is the mean of the row means, the
        # batch variance the mean of the row variances plus that of the means).
        xc = np.ascontiguousarray(x)
        level = simd.state.level
        acc_double = int(tx == T.DOUBLE)
        row_mean = np.empty(n * c, dtype=np.float64)
        row_var = np.empty(n * c, dtype=np.float64)
        core.affine(xc, None, None, None, None, None, row_mean, row_var, n * c, 1, spatial, c,
                    core.HOW_STATS, core.CENTERED, 0.0, acc_double, tx, level,
                    self._num_threads(x.size, self.min_work_per_thread))
        row_mean, row_var = row_mean.reshape(n, c), row_var.reshape(n, c)
        batch_mean = row_mean.mean(axis=0)
        batch_var = (row_var + (row_mean - batch_mean) ** 2).mean(axis=0)
        y = self._affine(x, tx, core.HOW_GIVEN, core.CENTERED, self.epsilon, n * c, 1, spatial, c,
                         mul, add, batch_mean, batch_var, label="training")
        m = self.momentum
        candidates = [y, (mean64 * m + batch_mean * (1 - m)).astype(mean.dtype),
                      (var64 * m + batch_var * (1 - m)).astype(var.dtype),
                      batch_mean.astype(mean.dtype), batch_var.astype(var.dtype)]
        return tuple(value if wanted else None
                     for value, wanted in zip(candidates, self.outputs_wanted))


class LpNormalization(_ChannelNorm):
    """x / ||x||_p along ``axis`` (p = 1 or 2); rows of norm 0 give 0."""

    def _prepare(self) -> None:
        self.axis = int(self.attrs.get("axis", -1))
        self.p = int(self.attrs.get("p", 2))
        if self.p not in (1, 2):
            raise ValueError(f"LpNormalization: p must be 1 or 2, got {self.p}")
        self.mode = core.L1 if self.p == 1 else core.L2

    def _run(self, x):
        tx = self._float_input(0, x)
        if x.ndim == 0:
            raise ValueError(self._input_error(0, "must have rank >= 1"))
        axis = _axis(self, self.axis, x.ndim)
        n = x.shape[axis]
        if axis == x.ndim - 1 or math.prod(x.shape[axis + 1:]) == 1:
            return (self._affine(x, tx, core.HOW_LP, self.mode, 0.0, x.size // max(n, 1), 1, n, 1),)
        # Another axis: moved last (a copy), rows normalized, moved back.
        moved = np.ascontiguousarray(np.moveaxis(x, axis, -1))
        out = self._affine(moved, tx, core.HOW_LP, self.mode, 0.0, moved.size // max(n, 1), 1,
                           n, 1, label="moved")
        return (np.ascontiguousarray(np.moveaxis(out, -1, axis)),)


class MeanVarianceNormalization(_ChannelNorm):
    """(X - mean) / (sqrt(var) + 1e-9) over ``axes`` (default [0, 2, 3])."""

    since_version = 9
    epsilon = float(np.float32(1e-9))  # the float constant of its function body

    def _prepare(self) -> None:
        self.axes = tuple(int(a) for a in self.attrs.get("axes", (0, 2, 3)))

    def _run(self, x):
        tx = self._float_input(0, x)
        rank = x.ndim
        axes = sorted({_axis(self, a, rank) for a in self.axes})
        if len(axes) != len(self.axes):
            raise ValueError(f"MeanVarianceNormalization: axes {self.axes} repeat an axis")
        kept = [k for k in range(rank) if k not in axes]
        n = math.prod(x.shape[k] for k in axes)
        if axes == list(range(rank - len(axes), rank)):
            rows = math.prod(x.shape[k] for k in kept)
            return (self._affine(x, tx, core.HOW_MVN, core.CENTERED, self.epsilon, rows, 1, n, 1),)
        # Reduced axes not trailing: moved last (a copy), then moved back.
        order = kept + axes
        moved = np.ascontiguousarray(np.transpose(x, order))
        out = self._affine(moved, tx, core.HOW_MVN, core.CENTERED, self.epsilon,
                           moved.size // max(n, 1), 1, n, 1, label="transposed")
        return (np.ascontiguousarray(np.transpose(out, np.argsort(order))),)


KERNELS = {
    "RegisterNormalizationKernels": (
        BatchNormalization,
        GroupNormalization,
        InstanceNormalization,
        LayerNormalization,
        LpNormalization,
        MeanVarianceNormalization,
    ),
    "RegisterRmsNormalizationKernel": (RMSNormalization,),
    "RegisterSimplifiedLayerNormalizationKernel": (SimplifiedLayerNormalization,),
}
