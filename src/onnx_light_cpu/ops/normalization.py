"""BatchNormalization, GroupNormalization, InstanceNormalization,
LayerNormalization, LpNormalization, MeanVarianceNormalization,
RMSNormalization and the experimental SimplifiedLayerNormalization.

All of them run on one row engine
(``_kernels/include/normalization/olc_normalization.h``): a row's statistics
in one reduction, then one pass writing the output.  Arithmetic is float32
for float, float16 and bfloat16 (one rounding on store) and float64 for
double, except where ``stash_type`` says otherwise
(SimplifiedLayerNormalization and RMSNormalization: 1 = float32,
11 = float64, whatever the input types).

Each adapter plans once per input signature (axes, row counts, the scale's
layout, output shapes, thread count, usage label) and executes the plan.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import numpy as np
from onnx import TensorProto, helper

from .. import simd
from .._kernels import normalization as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
STAT_DTYPES = {T.FLOAT: np.dtype(np.float32), T.DOUBLE: np.dtype(np.float64)}
AXIS = Attr("axis", "int", -1)
EPSILON = Attr("epsilon", "float", 1e-5)

# Elements one thread must have before a second one is asked, measured on
# 2 cores with the second one idle (AVX-512, float32, t1 vs t2 in µs
# through the evaluator): RMSNormalization [32, 1024] 6.4 vs 7.6,
# [128, 896] 15.9 vs 11.3, [128, 4096] 69.7 vs 35.1; LayerNormalization
# alike.  Two threads win from about 64K elements.  (When another process
# holds the second core, the caller runs the tasks of the worker that does
# not wake: no ~0.8 ms wait as under OpenMP.)
MIN_WORK_PER_THREAD = 1 << 15


def _axis(op: KernelOp, axis: int, rank: int, index: int = 0) -> int:
    if not -rank <= axis < rank:
        raise ValueError(op._input_error(
            index, f"of rank {rank} has no axis {axis} (expected [{-rank}, {rank - 1}])"))
    return axis + rank if axis < 0 else axis


def _min_rank(op: KernelOp, a: np.ndarray, rank: int, what: str = "") -> None:
    if a.ndim < rank:
        raise ValueError(op._input_error(
            0, f"must have rank >= {rank}{what}" + (f", got {a.ndim}" if what else "")))


class _Norm(KernelOp):
    """Shared parts: float32 attribute values, the outputs the node wants,
    the usage label."""

    onnx_types: ClassVar[tuple[int, ...]] = FLOATS
    min_work_per_thread = MIN_WORK_PER_THREAD

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        # FLOAT attributes hold float32 values (an INT one is read as ONNX
        # stores a float).
        for name in ("epsilon", "momentum"):
            if name in self.__dict__:
                self.__dict__[name] = float(np.float32(self.__dict__[name]))
        self.outputs_wanted = tuple(bool(name) for name in onnx_node.output)

    def _path(self, tx: int, ts: int, level: int, label: str = "") -> tuple:
        """(key, make) of the usage label: operator, types, label, level."""
        def make():
            used = simd.LEVEL_NAMES[core.level_used(level)]
            names = [type(self).__name__.lower(), helper.tensor_dtype_to_np_dtype(tx).name]
            if ts != tx:
                names.append(helper.tensor_dtype_to_np_dtype(ts).name)
            if label:
                names.append(label)
            names.append(used)
            return "_".join(names)
        return (tx, ts, level, label), make


# -- scale vector per row: LayerNormalization, RMSNormalization, SimplifiedLayerNormalization


class _RowPlan(NamedTuple):
    scale_expand: object        # None, or a callable materialising the broadcast scale
    bias_expand: object
    stride: int                 # elements between the scale rows of consecutive rows
    scale_row: np.ndarray | None  # or the scale row index of each row
    rows: int
    n: int
    tx: int
    ts: int
    acc_double: int
    stat_dtype: np.dtype
    stat_type: int
    stats_shape: tuple
    y_dtype: np.dtype
    threads: int
    level: int
    path: tuple


class _RowNorm(_Norm):
    centered: ClassVar[bool] = False
    # Scale broadcasts over the whole of X (SimplifiedLayerNormalization) or
    # over the normalized dimensions only.
    scale_over_whole_x: ClassVar[bool] = False

    def _scale_layout(self, index: int, scale: np.ndarray, x_shape: tuple, axis: int):
        """(expand or None, stride in elements between the scale rows of
        consecutive rows, scale row index per row or None)."""
        target = x_shape if self.scale_over_whole_x else x_shape[axis:]
        what = "the shape of input 0" if self.scale_over_whole_x else "the normalized shape"
        shape = scale.shape
        extra = len(shape) - len(target)
        # LayerNormalization drops leading 1s; SimplifiedLayerNormalization's
        # scale may not give X a higher rank.
        ok = extra <= 0 or (not self.scale_over_whole_x and all(d == 1 for d in shape[:extra]))
        if ok and extra > 0:
            shape = shape[extra:]
        try:
            ok = ok and np.broadcast_shapes(shape, target) == tuple(target)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(self._input_error(
                index, f"of shape {scale.shape} does not broadcast to {what} {tuple(target)}"))
        rank = len(x_shape)
        padded = (1,) * (rank - len(shape)) + shape
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
        return expand, stride, rows

    def _acc(self, tx: int) -> int:
        """1 for float64 arithmetic."""
        return int(tx == T.DOUBLE)

    def _plan(self, x, scale, b=None):
        _min_rank(self, x, 1)
        axis = _axis(self, self.axis, x.ndim)
        x_shape = x.shape
        tx, ts = ELEMENT_TYPES[x.dtype], ELEMENT_TYPES[scale.dtype]
        expand, stride, scale_row = self._scale_layout(1, scale, x_shape, axis)
        # Only LayerNormalization has a bias, and its scale and bias both
        # broadcast over the normalized shape: one shared vector each.
        bias_expand = None if b is None else self._scale_layout(2, b, x_shape, axis)[0]
        stat_type = T.FLOAT if self.centered else self.stash_type
        level = simd.state.level
        return _RowPlan(
            expand, bias_expand, stride, scale_row, math.prod(x_shape[:axis]),
            math.prod(x_shape[axis:]), tx, ts, self._acc(tx), STAT_DTYPES[stat_type], stat_type,
            x_shape[:axis] + (1,) * (x.ndim - axis), scale.dtype,
            self._num_threads(x.size, self.min_work_per_thread), level,
            self._path(tx, ts, level))

    def _execute(self, plan: _RowPlan, x, scale, b=None):
        scale = np.ascontiguousarray(scale) if plan.scale_expand is None else \
            plan.scale_expand(scale)
        if b is not None:
            b = np.ascontiguousarray(b) if plan.bias_expand is None else plan.bias_expand(b)
        x = np.ascontiguousarray(x)
        self._record_path(*plan.path)
        y = self._new_output(x.shape, plan.y_dtype)
        wanted = self.outputs_wanted
        mean = (self._new_output(plan.stats_shape, plan.stat_dtype, 1)
                if self.centered and len(wanted) > 1 and wanted[1] else None)
        k = 2 if self.centered else 1
        inv = (self._new_output(plan.stats_shape, plan.stat_dtype, k)
               if len(wanted) > k and wanted[k] else None)
        core.rows(x, scale, b, plan.scale_row, y, mean, inv, plan.rows, plan.n, plan.stride,
                  core.CENTERED if self.centered else core.SQUARES, self.epsilon, plan.acc_double,
                  plan.stat_type, plan.ts, plan.tx, plan.level, plan.threads)
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
    inputs = (Input("X", types=FLOATS), Input("Scale", like=0),
              Input("B", like=0, optional=True))
    attributes = (AXIS, EPSILON, Attr("stash_type", "int", 1, allowed=(T.FLOAT,)))


class _StashNorm(_RowNorm):
    """Scale of its own type, output of the scale's type, stash_type 1 or 11
    selecting float32 or float64 arithmetic."""

    inputs = (Input("X", types=FLOATS), Input("scale", types=FLOATS))
    attributes = (AXIS, EPSILON, Attr("stash_type", "int", 1, allowed=(T.FLOAT, T.DOUBLE)))

    def _acc(self, tx: int) -> int:
        return int(self.stash_type == T.DOUBLE)


class RMSNormalization(_StashNorm):
    """Y = X / sqrt(mean(X^2) + epsilon) * scale over axis..rank-1 (opset 23)."""

    since_version = 23

    def _acc(self, tx: int) -> int:
        # float64 inputs keep float64 arithmetic, as the built-in does.
        return 1 if tx == T.DOUBLE else super()._acc(tx)


class SimplifiedLayerNormalization(_StashNorm):
    """The experimental ONNX Runtime operator (domain "", version 1): RMS
    normalization with Scale broadcast over the whole of X and an optional
    inv_std_var of shape X[:axis] + [1] * (rank - axis)."""

    scale_over_whole_x = True

    def _plan(self, x, scale):
        _min_rank(self, x, 1)
        axis = _axis(self, self.axis, x.ndim)
        if math.prod(x.shape[axis:]) == 0:
            raise ValueError(self._input_error(
                0, f"of shape {x.shape} has an empty normalized suffix (axis {axis})"))
        return super()._plan(x, scale)


# -- one multiplier per channel segment: BatchNormalization, InstanceNormalization,
#    GroupNormalization, LpNormalization, MeanVarianceNormalization


def _as_f64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.reshape(-1), dtype=np.float64)


class _AffinePlan(NamedTuple):
    tx: int
    how: int
    mode: int
    eps: float
    rows: int
    segs: int
    seg_len: int
    groups: int
    acc_double: int
    threads: int
    level: int
    path: tuple


class _ChannelNorm(_Norm):
    def _channel_shape(self, index: int, a, channels: int, name: str) -> None:
        if a.size != channels or a.ndim > 1 and a.shape != (channels,):
            raise ValueError(self._input_error(
                index, f"({name}) has shape {a.shape}, expected ({channels},)"))

    def _affine_plan(self, x, how, mode, eps, rows, segs, seg_len, groups, label="",
                     acc_double=None) -> _AffinePlan:
        tx = ELEMENT_TYPES[x.dtype]
        level = simd.state.level
        if acc_double is None:
            acc_double = int(tx == T.DOUBLE)
        return _AffinePlan(tx, how, mode, eps, rows, segs, seg_len, groups, acc_double,
                           self._num_threads(x.size, self.min_work_per_thread), level,
                           self._path(tx, tx, level, label))

    def _affine(self, p: _AffinePlan, x, mul=None, add=None, mean=None, var=None,
                relu: bool = False, parts: list | None = None):
        """y = the affine of x, or with ``parts`` of the C-contiguous arrays
        whose join along axis 1 is x (``x`` then only gives the shape)."""
        self._record_path(*p.path)
        y = self._new_output(x.shape, x.dtype)
        if parts is None:
            x = np.ascontiguousarray(x)
        core.affine(x if parts is None else parts[0], mul, add, mean, var, y, None, None,
                    p.rows, p.segs, p.seg_len, p.groups, p.how, p.mode, p.eps, p.acc_double,
                    p.tx, p.level, p.threads, relu, parts)
        return y


class InstanceNormalization(_ChannelNorm):
    """y = scale * (x - mean) / sqrt(var + epsilon) + B per instance and channel."""

    inputs = (Input("input", types=FLOATS), Input("scale", like=0), Input("B", like=0))
    attributes = (EPSILON,)

    def _plan(self, x, scale, b):
        _min_rank(self, x, 2, " (N, C, ...)")
        c = x.shape[1]
        self._channel_shape(1, scale, c, "scale")
        self._channel_shape(2, b, c, "B")
        return self._affine_plan(x, core.HOW_STD, core.CENTERED, self.epsilon, x.shape[0] * c,
                                 1, math.prod(x.shape[2:]), c)

    def _execute(self, plan, x, scale, b):
        return (self._affine(plan, x, _as_f64(scale), _as_f64(b)),)


class GroupNormalization(_ChannelNorm):
    """Per instance and group of C / num_groups channels; opset 18 has a
    scale and bias per group, opset 21 per channel."""

    since_version = 18
    inputs = (Input("X", types=FLOATS), Input("scale", like=0), Input("bias", like=0))
    attributes = (EPSILON, Attr("num_groups", "int"),
                  Attr("stash_type", "int", 1, allowed=(T.FLOAT, T.DOUBLE)))

    def _plan(self, x, scale, bias):
        _min_rank(self, x, 2, " (N, C, ...)")
        g, c = self.num_groups, x.shape[1]
        if g <= 0 or c % g:
            raise ValueError(self._input_error(
                0, f"has {c} channels, which num_groups {g} does not divide"))
        per = g if self.opset < 21 else c
        self._channel_shape(1, scale, per, "scale")
        self._channel_shape(2, bias, per, "bias")
        # float64 inputs keep float64 arithmetic whatever the stash type.
        acc_double = int(x.dtype == np.float64 or self.stash_type == T.DOUBLE)
        return self._affine_plan(x, core.HOW_STD, core.CENTERED, self.epsilon, x.shape[0] * g,
                                 c // g, math.prod(x.shape[2:]), g, acc_double=acc_double), per

    def _execute(self, plan, x, scale, bias):
        p, per = plan
        mul, add = _as_f64(scale), _as_f64(bias)
        c, g = x.shape[1], self.num_groups
        if per != c:
            mul, add = np.repeat(mul, c // g), np.repeat(add, c // g)
        return (self._affine(p, x, mul, add),)


class BatchNormalization(_ChannelNorm):
    """Inference: y = scale * (x - input_mean) / sqrt(input_var + eps) + B.
    Training (training_mode=1 from opset 14, extra outputs before): batch
    statistics, the running mean and variance as optional outputs (and the
    saved batch mean and variance before opset 14)."""

    inputs = (Input("X", types=FLOATS), Input("scale", types=FLOATS), Input("B", types=FLOATS),
              Input("input_mean", types=FLOATS), Input("input_var", types=FLOATS))
    attributes = (EPSILON, Attr("momentum", "float", 0.9), Attr("training_mode", "flag", 0),
                  Attr("spatial", "int", 1))
    #: Set on the node a run plan makes of a BatchNormalization and the Relu
    #: after it (registry/conv_chains.py, NormRelu): Relu on each channel
    #: right after its normalization, float32 inference only.
    relu = False
    _joined: tuple = (None,) * 10  # run_joined

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        # Before opset 14, asking for more than Y means training (outputs
        # running mean, running var, saved mean, saved var).
        self.training = (self.training_mode if self.opset >= 14
                         else len(self.outputs_wanted) > 1)
        if self.opset < 9 and self.spatial != 1:
            self._reject_attribute(f"attribute spatial must be 1, got {self.spatial}")

    def _plan(self, x, scale, b, mean, var):
        _min_rank(self, x, 2, " (N, C, ...)")
        n, c = x.shape[0], x.shape[1]
        spatial = math.prod(x.shape[2:])
        for i, a, name in ((1, scale, "scale"), (2, b, "B"), (3, mean, "input_mean"),
                           (4, var, "input_var")):
            self._channel_shape(i, a, c, name)
        # The element types: all of X's before opset 14, scale and B of X's
        # at 14, then scale and B of one type, input_mean and input_var of another.
        if self.opset < 14:
            likes = ((1, 0), (2, 0), (3, 0), (4, 0))
        elif self.opset == 14:
            likes = ((1, 0), (2, 0))
        else:
            likes = ((2, 1), (4, 3))
        args = (x, scale, b, mean, var)
        for i, k in likes:
            if args[i].dtype != args[k].dtype:
                raise TypeError(self._input_error(i, f"has element type {args[i].dtype}, "
                                                     f"expected {args[k].dtype} like input {k}"))
        if not self.training:
            return self._affine_plan(x, core.HOW_GIVEN, core.CENTERED, self.epsilon, n * c, 1,
                                     spatial, c)
        # Training: per-row statistics in the engine, combined per channel.
        return (self._affine_plan(x, core.HOW_STATS, core.CENTERED, 0.0, n * c, 1, spatial, c),
                self._affine_plan(x, core.HOW_GIVEN, core.CENTERED, self.epsilon, n * c, 1,
                                  spatial, c, label="training"))

    def run_joined(self, parts: tuple, channels: int, scale, b, mean, var):
        """Inference on the join of ``parts`` along axis 1 (a Concat's
        inputs, float32, C-contiguous, alike but for that axis, ``channels``
        in all), read where they lie: the bits of run(Concat(parts), ...).
        Where the four vectors are the node's constants, their float64
        copies and X's stand-in are kept for the next run of that shape
        (``_joined``): a DenseNet's run has evicted the NumPy code that
        makes them by the time the node runs again (ARCHITECTURE.md, "One
        call")."""
        first = parts[0]
        shape = first.shape[:1] + (channels,) + first.shape[2:]
        kept = self._joined
        if (kept[0] == shape and kept[1] is scale and kept[2] is b and kept[3] is mean
                and kept[4] is var):
            x, mul, add, mean64, var64 = kept[5:]
        else:
            x = np.broadcast_to(np.zeros((), first.dtype), shape)  # shape and type
            mul, add, mean64, var64 = _as_f64(scale), _as_f64(b), _as_f64(mean), _as_f64(var)
            if all(self._constant_input(i) is a for i, a in enumerate((scale, b, mean, var), 1)):
                self._joined = (shape, scale, b, mean, var, x, mul, add, mean64, var64)
        plan = self._plan_for((x, scale, b, mean, var))
        return (self._affine(plan, x, mul, add, mean64, var64, self.relu, list(parts)),)

    def _execute(self, plan, x, scale, b, mean, var):
        mul, add = _as_f64(scale), _as_f64(b)
        mean64, var64 = _as_f64(mean), _as_f64(var)
        if not self.training:
            return (self._affine(plan, x, mul, add, mean64, var64, self.relu),)
        # Equal counts: the batch mean is the mean of the row means, the
        # batch variance the mean of the row variances plus that of the means.
        stats, apply = plan
        n, c = x.shape[0], x.shape[1]
        xc = np.ascontiguousarray(x)
        row_mean = np.empty(n * c, dtype=np.float64)
        row_var = np.empty(n * c, dtype=np.float64)
        core.affine(xc, None, None, None, None, None, row_mean, row_var, stats.rows, stats.segs,
                    stats.seg_len, stats.groups, stats.how, stats.mode, stats.eps,
                    stats.acc_double, stats.tx, stats.level, stats.threads)
        row_mean, row_var = row_mean.reshape(n, c), row_var.reshape(n, c)
        batch_mean = row_mean.mean(axis=0)
        batch_var = (row_var + (row_mean - batch_mean) ** 2).mean(axis=0)
        y = self._affine(apply, x, mul, add, batch_mean, batch_var)
        m = self.momentum
        candidates = [y, (mean64 * m + batch_mean * (1 - m)).astype(mean.dtype),
                      (var64 * m + batch_var * (1 - m)).astype(var.dtype),
                      batch_mean.astype(mean.dtype), batch_var.astype(var.dtype)]
        return tuple(value if wanted else None
                     for value, wanted in zip(candidates, self.outputs_wanted))


class LpNormalization(_ChannelNorm):
    """x / ||x||_p along ``axis`` (p = 1 or 2); rows of norm 0 give 0."""

    inputs = (Input("input", types=FLOATS),)
    attributes = (AXIS, Attr("p", "int", 2, allowed=(1, 2)))

    def _plan(self, x):
        _min_rank(self, x, 1)
        axis = _axis(self, self.axis, x.ndim)
        n = x.shape[axis]
        mode = core.L1 if self.p == 1 else core.L2
        rows = x.size // max(n, 1)
        if axis == x.ndim - 1 or math.prod(x.shape[axis + 1:]) == 1:
            return self._affine_plan(x, core.HOW_LP, mode, 0.0, rows, 1, n, 1), None
        # Another axis: moved last (a copy), rows normalized, moved back.
        return self._affine_plan(x, core.HOW_LP, mode, 0.0, rows, 1, n, 1, label="moved"), axis

    def _execute(self, plan, x):
        p, moved_axis = plan
        if moved_axis is None:
            return (self._affine(p, x),)
        moved = np.ascontiguousarray(np.moveaxis(x, moved_axis, -1))
        out = self._affine(p, moved)
        return (np.ascontiguousarray(np.moveaxis(out, -1, moved_axis)),)


class MeanVarianceNormalization(_ChannelNorm):
    """(X - mean) / (sqrt(var) + 1e-9) over ``axes`` (default [0, 2, 3])."""

    since_version = 9
    epsilon = float(np.float32(1e-9))  # the float constant of its function body
    inputs = (Input("X", types=FLOATS),)
    attributes = (Attr("axes", "ints", (0, 2, 3)),)

    def _plan(self, x):
        rank = x.ndim
        declared = tuple(int(a) for a in self.axes)
        axes = sorted({_axis(self, a, rank) for a in declared})
        if len(axes) != len(declared):
            raise ValueError(self._input_error(
                0, f"of rank {rank}: attribute axes {declared} repeat an axis"))
        kept = [k for k in range(rank) if k not in axes]
        n = math.prod(x.shape[k] for k in axes)
        if axes == list(range(rank - len(axes), rank)):
            rows = math.prod(x.shape[k] for k in kept)
            return self._affine_plan(x, core.HOW_MVN, core.CENTERED, self.epsilon, rows, 1, n,
                                     1), None
        # Reduced axes not trailing: moved last (a copy), then moved back.
        order = kept + axes
        return self._affine_plan(x, core.HOW_MVN, core.CENTERED, self.epsilon,
                                 x.size // max(n, 1), 1, n, 1, label="transposed"), order

    def _execute(self, plan, x):
        p, order = plan
        if order is None:
            return (self._affine(p, x),)
        moved = np.ascontiguousarray(np.transpose(x, order))
        out = self._affine(p, moved)
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
