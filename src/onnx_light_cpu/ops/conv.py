"""Conv, ConvTranspose, Col2Im, DeformConv and com.microsoft FusedConv
(``_kernels/conv``).

Every shape is run as 3-D (1-D and 2-D get leading unit axes).  float32
Conv writes im2col tiles straight into the GEMM engine's packed layout and
multiplies them by the weights read in place (a 1x1, stride-1, unpadded
Conv is a plain GEMM on X; a 2-D 3x3 Conv at unit strides and dilations
from 16 channels in and out is Winograd F(2x2, 3x3): 16 GEMMs of the
transformed tiles by the transformed weights, packed once; a Conv of one
group with constant weights and at least 8 output channels a pixel, as
late layers have (a 1x1 one from 320 input channels), runs the pixels as
the GEMM's rows against W^T packed once, the same sums as im2col's);
depthwise Conv (group == C == M) and double run a direct loop vectorised
over the output width, except 2-D depthwise planes 3 taps wide, which run
8 channels at a time from a channel-innermost padded copy, a vector per
output position (at AVX-512, 3x3 ones run on the planes themselves: from
14 wide at strides 1 and 2 a vector of 16 columns, narrower ones at
stride 1 as one run of positions).
Bias, FusedConv's Z and activation go on each output tile right
after the GEMM computed it.  ConvTranspose in float32 is
W_g^T X_g by the GEMM engine into column tiles, then a scatter-add per
output channel; in double a direct scatter.  Col2Im is the scatter-add.
DeformConv (2-D) samples its moved taps bilinearly into the same packed
columns (float32) or plain ones (double, then a direct loop).
float16 and bfloat16 are widened to float32, computed as float32 and
rounded once.  Constant weights (initializers) are laid out once per node,
and the path with its prepared weights and geometry (``core.ConvRun``) is
kept while the plan repeats, so that such a run is one call into Cython.

ConvInteger and QLinearConv (opset 10) sum (x - x_zero_point)(w -
w_zero_point) exactly in int32 on the 8-bit GEMM engine
(``_kernels/engines/gemm_int8``), per image and group: W_g (Mg x K) times
the columns (K x P), packed for the engine on every run; a 1x1, stride-1,
unpadded convolution packs X itself, any other im2col's the columns first,
with the taps in the padding holding the input's zero point so that the
engine's zero-point algebra stays exact.  Depthwise (group == C == M) runs
a direct int32 loop.  w_zero_point and w_scale are per tensor or per
output channel ([M]); uint8 and int8 in any pair.  QLinearConv requantises
as ONNX Runtime 1.32's CPU kernel does, measured bit for bit: a float32
scale per channel, (x_scale * w_scale[m]) / y_scale, times float32(acc +
B), clamped to [qmin - y_zp, qmax - y_zp], rounded half to even, plus
y_zp.  The onnx.reference built-in multiplies in float64 instead, so where
a product lies within a float32 rounding of a half the two differ by one
(rarely: a few outputs in ten thousand); we follow ONNX Runtime.  ONNX
Runtime has no QLinearConv for int8 x with uint8 w and refuses a
per-channel w_zero_point in ConvInteger: there the specification holds.
"""

from __future__ import annotations

import math
import types
from typing import ClassVar, NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import conv as core
from .._kernels.engines import gemm as gemm_core
from .._kernels.engines import gemm_int8 as i8core
from ..memory import prepared_empty
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp, type_string

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
# multiply-adds one thread must have before a second one helps (as MatMul)
MIN_WORK_PER_THREAD = 1 << 20
# the same for a depthwise Conv: each multiply-add reads its own input, so
# it is memory-bound and a second thread gains at a fraction of a GEMM's
# work (ARCHITECTURE.md, Convolution)
DEPTHWISE_MIN_WORK_PER_THREAD = 1 << 15
# depthwise 2-D planes 3 taps wide of at most this many output positions
# run a block of 8 channels at a time, channel innermost (olc_conv_dwc):
# the per-plane costs shared and a vector per position however narrow the
# plane; it won at every MobileNet-V2 size, 7x7 to 112x112 (ARCHITECTURE.md,
# Convolution), so the bound is only the buffers' (conv.pyx); 0 turns it off
DEPTHWISE_BLOCK_PLANE = 1 << 40
# 3x3 Conv at unit strides runs Winograd F(2x2, 3x3) from this many input
# and output channels (fewer: the transforms cost more than they save)
WINOGRAD_MIN_CHANNELS = 16
# A constant-weight Conv of one group with at least this many output
# channels a pixel (ResNet-50's last stage: 512-2048 channels, 49 pixels)
# is W^T packed once as the GEMM's B and the pixels as its rows
# (olc_conv_f32_t): the weights are the large operand there.  At 196
# pixels with 256-1024 channels it was slower than the other paths.
GEMM_T_CHANNELS_PER_PIXEL = 8
# ... except a Conv that fits Winograd with fewer input channels than this.
# The best bound depends on the machine's memory (ARCHITECTURE.md,
# Convolution): on a Zen 4, 1024 (Winograd won 512 -> 512 at 7x7 in
# ResNet-50 by 2-3 %); on an Intel Xeon with AMX, 512 (the pixel rows won
# it inside ResNet-50 by 5.2 % at batch 1 and 4.1 % at batch 8: Winograd's
# transformed weights are 16 MB against 9.4, and a run streams them in)
GEMM_T_WINOGRAD_MIN_CHANNELS = 512
# A 1x1 Conv on an image of at most this many pixels takes that path too,
# whatever its channels: with the pixels as the GEMM's columns, 49 of them
# fill 64 (two panels of 32), with them as rows no work is wasted; X is
# then read in place as X^T.  At 7x7, 576-960 -> 128-320 channels, 1 thread:
# 1.20-1.24 -> 1.03-1.06 of ONNX Runtime's time; at 14x14 no change.
GEMM_T_MAX_POINTWISE_PIXELS = 64
# ... but a 1x1 Conv with fewer input channels than this keeps W as the
# GEMM's A: with so short a K the pixel rows' fixed costs (X^T written, the
# product transposed back, the epilogue a pass of its own) outweigh the
# panel they save.  At 7x7, 2 threads, one process alternating, the pixel
# rows against W as A (Intel Xeon, batch 1 / 8): 96 -> 576 0.72 / 0.75,
# 160 -> 960 (MobileNet-V2's last stage) 0.86 / 0.88, 256 -> 1024 0.92 /
# 1.01, 320 -> 1280 1.06 / 1.12 (ms of W as A over ms of the pixel rows)
GEMM_T_MIN_POINTWISE_CHANNELS = 320
# A Conv that would write im2col's columns (strided or padded, not
# Winograd's) takes that path from this many output channels a pixel:
# ResNet-50's 3x3/2 256 -> 256 at 28x28 and 1x1/2 512 -> 1024 (196
# pixels) lost 10 % and 5 % on im2col's (ARCHITECTURE.md, Convolution)
GEMM_T_IM2COL_CHANNELS_PER_PIXEL = 1

ACTIVATIONS = {"": 0, "Relu": 1, "Tanh": 2, "Sigmoid": 3, "LeakyRelu": 4, "Clip": 5,
               "HardSigmoid": 6}


def _geometry(C, spatial_in, kernel, strides, begins, dilations, spatial_out) -> np.ndarray:
    """The core's 19 int64: C, input D H W, kernel, strides, start pads,
    dilations, output D H W, each padded to 3 axes at the front."""
    def three(values, fill):
        values = tuple(int(v) for v in values)
        return (fill,) * (3 - len(values)) + values
    return np.array((C,) + three(spatial_in, 1) + three(kernel, 1) + three(strides, 1)
                    + three(begins, 0) + three(dilations, 1) + three(spatial_out, 1),
                    dtype=np.int64)


class _ConvAttributes(KernelOp):
    """The attributes every convolution shares and their checks."""

    def _opset_type(self, x: np.ndarray) -> int:
        element_type = ELEMENT_TYPES[x.dtype]
        allowed = (T.FLOAT, T.FLOAT16, T.DOUBLE) + ((T.BFLOAT16,) if self.opset >= 22 else ())
        if element_type not in allowed:
            names = ", ".join(type_string(t) for t in allowed)
            raise TypeError(self._input_error(
                0, f"has element type {x.dtype}, expected one of {names} (opset {self.opset})"))
        return element_type

    def prepared_bytes(self) -> int:
        """Bytes of the weights laid out once for this node."""
        return sum(v.nbytes for v in self.__dict__.get("_prepared_inputs", {}).values())

    def _ranks_and_groups(self, x, w, w_index: int = 1) -> tuple[int, int, int, int]:
        """(spatial axes, N, C, group) once X and W (input ``w_index``) have
        the same rank and the group divides X's channels."""
        op = self.onnx_node.op_type
        if x.ndim != w.ndim:
            raise ValueError(self._input_error(
                w_index, f"has rank {w.ndim}, expected the rank of X ({x.ndim}, shape {x.shape})"))
        N, C = x.shape[:2]
        G = self.group
        if G < 1:
            raise ValueError(f"{op}: attribute group {G} must be positive")
        if C % G:
            raise ValueError(self._input_error(
                0, f"has {C} channels (shape {x.shape}), not divisible by group {G}"))
        return x.ndim - 2, N, C, G

    def _output_groups(self, x, w, C: int, G: int, w_index: int = 1) -> tuple[int, int]:
        """(M, C / group) of weights shaped (M, C / group, *kernel) once M
        divides into the groups (Conv, FusedConv, DeformConv, the 8-bit
        convolutions)."""
        M, Cg = w.shape[:2]
        if C // G != Cg:
            raise ValueError(self._input_error(
                w_index, f"has shape {w.shape}: {Cg} input channels, expected C / group = "
                f"{C // G} (input 0 has shape {x.shape}, group {G})"))
        if M % G:
            raise ValueError(self._input_error(
                w_index, f"has {M} output channels (shape {w.shape}), not divisible by group "
                f"{G}"))
        return M, Cg

    def _spatial(self, name: str, default: int, n: int, factor: int = 1) -> tuple[int, ...]:
        values = tuple(int(v) for v in getattr(self, name))
        if not values:
            return (default,) * (n * factor)
        if len(values) != n * factor:
            raise ValueError(f"{self.onnx_node.op_type}: attribute {name} has {len(values)} "
                             f"values, expected {n * factor} for {n} spatial axes")
        return values

    def _common(self, n: int, kernel: tuple[int, ...], w_index: int = 1):
        """(kernel, strides, dilations, pads) checked for n spatial axes."""
        op = self.onnx_node.op_type
        given = tuple(int(v) for v in self.kernel_shape)
        if given and given != tuple(kernel):
            raise ValueError(self._input_error(
                w_index,
                f"has kernel shape {tuple(kernel)}, but attribute kernel_shape is {given}"))
        strides = self._spatial("strides", 1, n)
        dilations = self._spatial("dilations", 1, n)
        pads = self._spatial("pads", 0, n, 2)
        if any(s < 1 for s in strides):
            raise ValueError(f"{op}: attribute strides {strides} must be positive")
        if any(d < 1 for d in dilations):
            raise ValueError(f"{op}: attribute dilations {dilations} must be positive")
        if any(p < 0 for p in pads):
            raise ValueError(f"{op}: attribute pads {pads} must not be negative")
        if n > 3:
            raise NotImplementedError(f"{op}: {n} spatial axes (at most 3 are supported)")
        return strides, dilations, pads

    def _output_axes(self, spatial, kernel, strides, dilations, pads, index: int = 0,
                     what: str = "kernel"):
        """(start pads, output sizes) of a convolution along each spatial
        axis, auto_pad applied (Conv, FusedConv, the 8-bit convolutions;
        DeformConv and Col2Im, which have no auto_pad: "NOTSET").  A dilated
        kernel larger than its padded axis is an error on input ``index``:
        X (its spatial shape), or Col2Im's image_shape, whose kernel is the
        block (``what``)."""
        n = len(spatial)
        begins, out = [], []
        for i in range(n):
            size, k, s, d = spatial[i], kernel[i], strides[i], dilations[i]
            ek = (k - 1) * d + 1
            if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                o = -(-size // s)
                total = max(0, (o - 1) * s + ek - size)
                lo = total // 2 if self.auto_pad == "SAME_UPPER" else total - total // 2
            else:
                lo, hi = (0, 0) if self.auto_pad == "VALID" else (pads[i], pads[i + n])
                if size + lo + hi < ek:
                    shape = f"has spatial shape {tuple(spatial)}" if index == 0 else str(
                        tuple(spatial))
                    raise ValueError(self._input_error(
                        index, f"{shape}: axis {i} padded to {size + lo + hi} is smaller than "
                        f"the dilated {what} {ek}"))
                o = (size + lo + hi - ek) // s + 1
            begins.append(lo)
            out.append(o)
        return begins, out

    def _record(self, dtype: np.dtype, kind: str, level: int) -> None:
        if not self._usage.enabled:
            return
        op = type(self).__name__.lower()
        self._record_path((dtype, kind, level), lambda: (
            f"{op}_{dtype.name}_{kind}_{simd.LEVEL_NAMES[core.level_used(level)]}"))


def _pointwise(kernel, strides, begins, spatial, out) -> bool:
    """Whether a convolution is a 1x1 kernel at unit strides without pads:
    its columns are X itself."""
    return (math.prod(kernel) == 1 and all(s == 1 for s in strides) and not any(begins)
            and tuple(out) == tuple(spatial))


def _winograd_fits(G, kernel, strides, dilations, Cg, M) -> bool:
    """Whether a float32 Conv runs Winograd F(2x2, 3x3)."""
    return (G == 1 and tuple(kernel) == (3, 3) and all(s == 1 for s in strides)
            and all(d == 1 for d in dilations) and Cg >= WINOGRAD_MIN_CHANNELS
            and M >= WINOGRAD_MIN_CHANNELS)


def _pixel_rows_fits(G, K, M, P, pointwise, winograd) -> bool:
    """Whether a float32 Conv with constant weights takes the pixels as the
    GEMM's rows (kind gemm_t, olc_conv_f32_t): K multiply-adds an output,
    P pixels an image, M output channels."""
    if G != 1 or K == 0 or P == 0:
        return False
    if pointwise:
        return K >= GEMM_T_MIN_POINTWISE_CHANNELS and (
            P * GEMM_T_CHANNELS_PER_PIXEL <= M or P <= GEMM_T_MAX_POINTWISE_PIXELS)
    if winograd:  # a 3x3 kernel: K is 9 times the input channels
        return K >= 9 * GEMM_T_WINOGRAD_MIN_CHANNELS and P * GEMM_T_CHANNELS_PER_PIXEL <= M
    return P * GEMM_T_IM2COL_CHANNELS_PER_PIXEL <= M


def _widened(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``a`` as C-contiguous, aligned ``dtype`` (a copy where it is not)."""
    return np.require(a, dtype, "CA")


def _spread_rows(w: np.ndarray, M: int) -> np.ndarray:
    """float32 W as M rows of K, core.weight_ld(K) floats apart (the gemm and
    im2col paths)."""
    rows = _widened(w, FLOAT32).reshape(M, -1)
    K, ld = rows.shape[1], core.weight_ld(rows.shape[1])
    out = prepared_empty(M * ld, np.float32).reshape(M, ld)
    out[:, :K] = rows
    out[:, K:] = 0.0
    return out


def _packed_t(w: np.ndarray, level: int, threads: int) -> np.ndarray:
    """float32 W (M, C, k...) as W^T (C*k... x M) packed as the GEMM
    engine's B at ``level``, for the gemm_t path."""
    M, K = w.shape[0], w.size // w.shape[0]
    packed = prepared_empty(gemm_core.packed_size(K, M, level), np.float32)
    # B[k][m] = W[m][k]: row stride 1, column stride K
    gemm_core.pack_b(w, np.zeros(1, np.int64), packed, 1, K, K, M, T.FLOAT, level, threads)
    return packed


class Conv(_ConvAttributes):
    """Y = conv(X, W) + B, 1-D to 3-D, groups, strides, pads, dilations, auto_pad."""

    inputs = (Input("X", types=FLOATS, ranks=(3, 4, 5)), Input("W", like=0, ranks=(3, 4, 5)),
              Input("B", like=0, ranks=(1,), optional=True))
    attributes = (Attr("auto_pad", "string", "NOTSET", allowed=AUTO_PADS),
                  Attr("dilations", "ints", ()), Attr("group", "int", 1),
                  Attr("kernel_shape", "ints", ()), Attr("pads", "ints", ()),
                  Attr("strides", "ints", ()))
    #: the activation applied to the output (FusedConv), its two parameters
    activation_code: ClassVar[int] = 0

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._last_run = None  # _conv_run
        self.act_a = self.act_b = 0.0

    def _plan(self, x, w, b=None, z=None):
        element_type = self._opset_type(x)
        n, N, C, G = self._ranks_and_groups(x, w)
        M, Cg = self._output_groups(x, w, C, G)
        if b is not None and b.shape != (M,):
            raise ValueError(self._input_error(2, f"has shape {b.shape}, expected ({M},)"))
        if z is not None and z.dtype != x.dtype:
            raise TypeError(self._input_error(3, f"has element type {z.dtype}, expected "
                                              f"{x.dtype} like input 0"))
        kernel = w.shape[2:]
        strides, dilations, pads = self._common(n, kernel)
        spatial = x.shape[2:]
        begins, out = self._output_axes(spatial, kernel, strides, dilations, pads)
        out_shape = (N, M) + tuple(out)
        if z is not None and z.shape != out_shape:
            raise ValueError(self._input_error(
                3, f"has shape {z.shape}, expected the output's {out_shape}"))
        P = math.prod(out)
        kk = math.prod(kernel)
        Mg = M // G
        geom = _geometry(Cg, spatial, kernel, strides, begins, dilations, out)
        pointwise = _pointwise(kernel, strides, begins, spatial, out)
        winograd = _winograd_fits(G, kernel, strides, dilations, Cg, M)
        if element_type == T.DOUBLE:
            kind = "direct"
        elif G > 1 and Cg == 1 and Mg == 1:
            kind = "depthwise"
        elif (self._constant_input(1) is w
              and _pixel_rows_fits(G, Cg * kk, M, P, pointwise, winograd)):
            kind = "gemm_t"
        elif winograd:
            kind = "winograd"
        elif G == 1 and core.few_channels_fits(geom, simd.state.level):
            kind = "few_channels"  # a stride-2 stem (olc_conv_fewc)
        else:
            kind = "gemm" if pointwise else "im2col"
        level = simd.state.level
        if element_type in (T.FLOAT16, T.BFLOAT16):
            self._check_bytes("the inputs widened to float32 and the float32 output",
                              4 * (x.size + w.size + math.prod(out_shape)))
        min_work = DEPTHWISE_MIN_WORK_PER_THREAD if kind == "depthwise" else MIN_WORK_PER_THREAD
        threads = self._num_threads(N * M * P * Cg * kk, min_work)
        if kind == "im2col":
            self._check_bytes("the column tiles",
                              4 * core.scratch_floats(level, Cg * kk, P, Mg, False, threads))
        empty = math.prod(out_shape) == 0
        # the zeros around X as real elements, for weights that are not all
        # finite (_execute)
        ends = [max(0, (o - 1) * s + (k - 1) * d + 1 - lo - size) for o, s, k, d, lo, size
                in zip(out, strides, kernel, dilations, begins, spatial)]
        padded = None
        if any(begins) or any(ends):
            grown = [lo + size + hi for lo, size, hi in zip(begins, spatial, ends)]
            padded = (tuple(zip(begins, ends)),
                      _geometry(Cg, grown, kernel, strides, [0] * n, dilations, out))
        return (element_type, out_shape, geom, N, G, Mg, kind, threads, empty, padded)

    def _execute(self, plan, x, w, b=None, z=None):
        run = self._last_run
        if run is not None and run.plan is plan and run.w is w and run.b is b:
            # constant weights seen with this plan: no conversion, no
            # padding and no allocation to decide, so the run's Cython
            # method does it all
            y = run.pooled(x, z, self._context.buffers)
            if y is not None:
                self._record(x.dtype, run.kind, run.level)
                return (y,)
        element_type, out_shape, geom, N, G, Mg, kind, threads, empty, padded = plan
        level = simd.state.level
        work = FLOAT64 if element_type == T.DOUBLE else FLOAT32
        if empty:
            self._record(x.dtype, "empty", level)
            return (np.zeros(out_shape, dtype=x.dtype),)
        xs = _widened(x, work)
        if padded is not None and not self._finite_weights(w):
            # a padded tap is 0 x weight, NaN for an inf or NaN weight (as in
            # ONNX Runtime), but the paths skip padded taps: run them on X
            # with its zeros written out
            widths, geom = padded
            grown = xs.shape[:2] + tuple(lo + size + hi
                                         for (lo, hi), size in zip(widths, xs.shape[2:]))
            self._check_bytes("input 0 with its pads written out",
                              math.prod(grown) * xs.dtype.itemsize)
            xs = np.pad(xs, ((0, 0), (0, 0)) + widths)
        run = self._conv_run(plan, level, w, b, work, geom)
        zs = None if z is None else _widened(z, FLOAT32)
        y = self._new_output(out_shape, x.dtype) if x.dtype == work else \
            np.empty(out_shape, dtype=work)
        scratch = None
        if run.scratch_floats:
            # from the evaluator's pool (checked there before it allocates):
            # the same pages on every run
            scratch = self._new_output((run.scratch_floats,), FLOAT32, slot=1)
        run.run(xs, zs, y, scratch)
        del scratch  # back to the pool
        self._record(x.dtype, run.kind, level)
        if y.dtype != x.dtype:
            y = y.astype(x.dtype)
        return (y,)

    def _conv_run(self, plan, level, w, b, work, geom) -> core.ConvRun:
        """The plan's path with W and B prepared for it (a ``core.ConvRun``)
        on the geometry ``geom`` (the plan's, or X's with its pads written
        out).  Where W and B are the node's constants and the geometry the
        plan's, it is kept (``_last_run``) for the next run to reuse while
        the plan, W and B repeat: one attribute read instead of the
        prepared inputs' dictionaries, whose lines a CNN's run has evicted
        by the time the node runs again (ARCHITECTURE.md, "One call").  The
        kept run serves again where it fits (an X that ``pooled`` left to
        this path: strided, unaligned)."""
        last = self._last_run
        if (last is not None and last.plan is plan and last.w is w and last.b is b
                and geom is plan[2]):
            return last
        _, out_shape, _, N, G, Mg, kind, threads, _, _ = plan
        M = G * Mg
        bs = None if b is None else self._prepared_input(("b", work), 2, b,
                                                         lambda: _widened(b, work))
        if kind == "gemm_t":
            ws = self._prepared_input(("gemm_t", level), 1, w,
                                      lambda: _packed_t(_widened(w, FLOAT32), level, threads))
        elif kind == "winograd":
            # the filters' 16 transformed matrices, packed for this level
            ws = self._prepared_input(
                ("winograd", level), 1, w,
                lambda: core.winograd_weights(_widened(w, FLOAT32), level, threads))
        elif kind in ("direct", "depthwise") or (
                kind == "few_channels" and core.few_channels_fits(geom, level)):
            ws = self._prepared_input(("w", work), 1, w,
                                      lambda: _widened(w, work).reshape(M, -1))
        else:  # also a few_channels plan made at a higher SIMD level
            kind = "gemm" if kind == "gemm" else "im2col"
            ws = self._prepared_input(("w_ld", work), 1, w, lambda: _spread_rows(w, M))
        run = core.ConvRun(plan, w, b, kind, ws, bs, geom, out_shape, N, G, Mg,
                           self.activation_code, self.act_a, self.act_b, level, threads,
                           DEPTHWISE_BLOCK_PLANE)
        if (geom is plan[2] and self._constant_input(1) is w
                and (b is None or self._constant_input(2) is b)):
            self._last_run = run
        return run

    def _finite_weights(self, w: np.ndarray) -> bool:
        """Whether W has no inf or NaN: checked once for an initializer (kept
        apart from the prepared weights, which prepared_bytes counts)."""
        known = self.__dict__.get("_finite")
        if known is not None and known[0] is w:
            return known[1]
        finite = bool(np.isfinite(w).all())
        if self._constant_input(1) is w:
            self._finite = (w, finite)
        return finite


class FusedConv(Conv):
    """com.microsoft FusedConv: act(Conv(X, W) + B + Z), float32."""

    op_domain = "com.microsoft"
    inputs = (Input("X", types=(T.FLOAT,), ranks=(3, 4, 5)),
              Input("W", like=0, ranks=(3, 4, 5)),
              Input("B", like=0, ranks=(1,), optional=True),
              Input("Z", like=0, optional=True))
    attributes = Conv.attributes + (
        Attr("activation", "string", "", allowed=tuple(ACTIVATIONS)),
        Attr("activation_params", "floats", ()))

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        if self._attribute_error is not None:
            return
        name = self.activation
        params = tuple(float(p) for p in self.activation_params)
        need = {"LeakyRelu": 1, "Clip": 2, "HardSigmoid": 2}.get(name, 0)
        if len(params) < need:
            # as ONNX Runtime, which refuses the node
            self._reject_attribute(f"activation {name} needs {need} activation_params, "
                                   f"got {len(params)}")
            return
        self.activation_code = ACTIVATIONS[name]
        if need:
            self.act_a = params[0]
            self.act_b = params[1] if need > 1 else 0.0

    def _opset_type(self, x):
        return T.FLOAT


class ConvTranspose(_ConvAttributes):
    """Y = conv_transpose(X, W) + B: groups, strides, pads, dilations,
    output_padding, output_shape, auto_pad."""

    inputs = (Input("X", types=FLOATS, ranks=(3, 4, 5)), Input("W", like=0, ranks=(3, 4, 5)),
              Input("B", like=0, ranks=(1,), optional=True))
    attributes = (Attr("auto_pad", "string", "NOTSET", allowed=AUTO_PADS),
                  Attr("dilations", "ints", ()), Attr("group", "int", 1),
                  Attr("kernel_shape", "ints", ()), Attr("output_padding", "ints", ()),
                  Attr("output_shape", "ints", ()), Attr("pads", "ints", ()),
                  Attr("strides", "ints", ()))

    def _plan(self, x, w, b=None):
        element_type = self._opset_type(x)
        op = self.onnx_node.op_type
        n, N, C, G = self._ranks_and_groups(x, w)
        if w.shape[0] != C:
            raise ValueError(self._input_error(
                1, f"has shape {w.shape}: {w.shape[0]} input channels, expected X's {C}"))
        Mg = w.shape[1]
        M = Mg * G
        if b is not None and b.shape != (M,):
            raise ValueError(self._input_error(2, f"has shape {b.shape}, expected ({M},)"))
        kernel = w.shape[2:]
        strides, dilations, pads = self._common(n, kernel)
        output_padding = self._spatial("output_padding", 0, n)
        given_out = tuple(int(v) for v in self.output_shape)
        if given_out and len(given_out) not in (n, n + 2):
            raise ValueError(f"{op}: attribute output_shape {given_out} has {len(given_out)} "
                             f"values, expected {n}")
        given_out = given_out[-n:] if given_out else ()
        spatial = x.shape[2:]
        begins, out = [], []
        for i in range(n):
            size, k, s, d = spatial[i], kernel[i], strides[i], dilations[i]
            ek = (k - 1) * d + 1
            natural = s * (size - 1) + output_padding[i] + ek
            if given_out or self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                o = given_out[i] if given_out else size * s
                total = max(0, natural - o)
                lo = total // 2 if self.auto_pad == "SAME_UPPER" else total - total // 2
            else:
                lo, hi = (0, 0) if self.auto_pad == "VALID" else (pads[i], pads[i + n])
                o = natural - lo - hi
            if o < 0:
                raise ValueError(self._input_error(
                    0, f"has spatial shape {tuple(spatial)}: output axis {i} would have "
                    f"{o} elements"))
            begins.append(lo)
            out.append(o)
        out_shape = (N, M) + tuple(out)
        geom = _geometry(C // G, spatial, kernel, strides, begins, dilations, out)
        kind = "direct" if element_type == T.DOUBLE else "gemm"
        if element_type != T.DOUBLE:
            self._check_bytes("the weights laid out for the GEMM and the column tile",
                              4 * w.size + 4 * (256 * 1024 + 16 * Mg * math.prod(kernel)))
        if element_type in (T.FLOAT16, T.BFLOAT16):
            self._check_bytes("the inputs widened to float32 and the float32 output",
                              4 * (x.size + math.prod(out_shape)))
        threads = self._num_threads(N * C * math.prod(spatial) * Mg * math.prod(kernel),
                                    MIN_WORK_PER_THREAD)
        return element_type, out_shape, geom, N, G, Mg, kind, threads

    def _execute(self, plan, x, w, b=None):
        element_type, out_shape, geom, N, G, Mg, kind, threads = plan
        level = simd.state.level
        if math.prod(out_shape) == 0:
            self._record(x.dtype, "empty", level)
            return (np.zeros(out_shape, dtype=x.dtype),)
        M = G * Mg
        if kind == "direct":
            xs = np.ascontiguousarray(x)
            ws = np.ascontiguousarray(w)
            bs = None if b is None else np.ascontiguousarray(b)
            y = self._new_output(out_shape, x.dtype)
            core.conv_transpose_direct(xs, ws, bs, y, geom, N, G, Mg, level, threads)
        else:
            C = x.shape[1]
            xs = _widened(x, FLOAT32)
            kk = int(np.prod(w.shape[2:]))
            wt = self._prepared_input(("wt",), 1, w, lambda: np.ascontiguousarray(
                _widened(w, FLOAT32).reshape(G, C // G, Mg * kk).transpose(0, 2, 1)))
            y = self._new_output(out_shape, x.dtype) if x.dtype == FLOAT32 else \
                np.empty(out_shape, dtype=FLOAT32)
            planes = y.reshape(N, M, -1)
            if b is None:
                planes.fill(0)
            else:
                planes[...] = b.astype(FLOAT32)[None, :, None]
            core.conv_transpose_gemm(xs, wt, y, geom, N, G, Mg, level, threads)
            if y.dtype != x.dtype:
                y = y.astype(x.dtype)
        self._record(x.dtype, kind, level)
        return (y,)


# Col2Im's other element types (the schema allows every one): a NumPy
# scatter, a strided slice of the image a tap.
OTHER_COL2IM = (T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.INT8, T.INT16, T.INT32, T.INT64,
                T.BOOL)


def _col2im_numpy(col, out_shape, block, strides, begins, dilations) -> np.ndarray:
    """The image (out_shape) of columns col (N, C, kk, *grid): for every tap
    in order, the grid positions that land inside the image are added to a
    strided slice of it."""
    y = np.zeros(out_shape, dtype=col.dtype)
    grid = col.shape[3:]
    for tap, offsets in enumerate(np.ndindex(*block)):
        src, dst = [slice(None), slice(None), tap], [slice(None), slice(None)]
        for i, t in enumerate(offsets):
            s, start = strides[i], t * dilations[i] - begins[i]
            lo = 0 if start >= 0 else (s - 1 - start) // s  # ceil(-start / s)
            hi = min(grid[i], -(-(out_shape[2 + i] - start) // s)) if out_shape[2 + i] > start \
                else 0
            hi = max(hi, lo)
            src.append(slice(lo, hi))
            dst.append(slice(start + lo * s, start + (hi - 1) * s + 1 if hi > lo else 0, s))
        if all(sl.stop > sl.start for sl in src[3:]):
            y[tuple(dst)] += col[tuple(src)]
    return y


class Col2Im(_ConvAttributes):
    """Rearranges column blocks (N, C * prod(block_shape), L) into images
    (N, C, *image_shape), summing overlaps."""

    since_version = 18
    inputs = (Input("input", types=FLOATS + OTHER_COL2IM, ranks=(3,)),
              Input("image_shape", types=(T.INT64,), ranks=(1,)),
              Input("block_shape", types=(T.INT64,), ranks=(1,)))
    attributes = (Attr("dilations", "ints", ()), Attr("pads", "ints", ()),
                  Attr("strides", "ints", ()))
    kernel_shape = ()
    auto_pad = "NOTSET"

    def _run(self, col, image_shape, block_shape):
        image = tuple(int(v) for v in image_shape)
        block = tuple(int(v) for v in block_shape)
        n = len(image)
        if len(block) != n:
            raise ValueError(self._input_error(
                2, f"has {len(block)} values, expected {n} like image_shape"))
        if n == 0:
            raise ValueError(self._input_error(1, "is empty"))
        if any(v < 0 for v in image) or any(v < 1 for v in block):
            raise ValueError(self._input_error(
                1, f"{image} and block_shape {block} must be non-negative and positive"))
        strides, dilations, pads = self._common(n, block)
        N, CK, L = col.shape
        kk = math.prod(block)
        if CK % kk:
            raise ValueError(self._input_error(
                0, f"has shape {col.shape}: {CK} rows, not divisible by the block size {kk}"))
        C = CK // kk
        _, grid = self._output_axes(image, block, strides, dilations, pads, 1, "block")
        if math.prod(grid) != L:
            raise ValueError(self._input_error(
                0, f"has shape {col.shape}: {L} blocks, expected {math.prod(grid)} for image "
                f"{image}, block {block}, strides {strides}, pads {pads}, dilations {dilations}"))
        out_shape = (N, C) + image
        level = simd.state.level
        if math.prod(out_shape) == 0:
            self._record(col.dtype, "empty", level)
            return (np.zeros(out_shape, dtype=col.dtype),)
        if ELEMENT_TYPES.get(col.dtype) not in FLOATS:
            self._check_bytes(f"the output of shape {out_shape}",
                              col.dtype.itemsize * math.prod(out_shape))
            y = _col2im_numpy(col.reshape((N, C, kk) + tuple(grid)), out_shape, block, strides,
                              pads[:n], dilations)
            self._record(col.dtype, "numpy", level)
            return (y,)
        work = FLOAT64 if col.dtype == FLOAT64 else FLOAT32
        self._check_bytes(f"the output of shape {out_shape}",
                          work.itemsize * (math.prod(out_shape)
                                           + (col.size if col.dtype != work else 0)))
        cs = _widened(col, work)
        y = np.zeros(out_shape, dtype=work)
        geom = _geometry(C, grid, block, strides, pads[:n], dilations, image)
        threads = self._num_threads(col.size, MIN_WORK_PER_THREAD // 4)
        core.col2im(cs, y, geom, N * C, threads)
        self._record(col.dtype, "scatter", level)
        return (y if y.dtype == col.dtype else y.astype(col.dtype),)


# ---- ConvInteger and QLinearConv ----

INT8_TYPES = (T.UINT8, T.INT8)
INT32 = np.dtype(np.int32)
UINT8 = np.dtype(np.uint8)
# Multiply-adds one thread must have before a second one helps, for the
# 8-bit GEMM and the depthwise loop: the value MatMulInteger measured for
# the same engine (64^3 1.21x at 2 threads).  Here, on a 2-core machine
# shared with other jobs, the 3x3 64 -> 64 at 56x56 GEMM took 1.71 ms at
# 1 thread and 0.91 at 2 (best of 100; the medians showed no gain while
# the other core was busy), and the whole node from 2^17 multiply-adds
# on could not be measured apart from that noise.
QCONV_MIN_WORK_PER_THREAD = 1 << 17
# Bytes of columns and packed columns one pass holds, about: the images of
# a batch go through in passes of at most this (at least one image each).
QCONV_PASS_BYTES = 32 << 20


class _QPlan(NamedTuple):
    """The shape-only part of an 8-bit convolution."""

    out_shape: tuple
    geom: np.ndarray
    N: int
    G: int
    Mg: int
    K: int      # rows of one group's columns: C/group * kernel size
    P: int      # output positions
    kind: str   # "gemm" (1x1), "im2col", "depthwise", "empty"
    per_pass: int  # images per pass (gemm, im2col)
    used: int   # the level the engine or loop runs at
    threads: int
    mats: np.ndarray | None = None   # 0 .. per_pass * G - 1: the matrices of a pass
    a_off: np.ndarray | None = None  # W_g's offset per matrix
    direct: bool = False  # the geometry qconv_direct takes (an im2col plan's alternative)


class _QuantizedConv(_ConvAttributes):
    """Shared by ConvInteger and QLinearConv: the int32 accumulation
    (X - x_zero_point) * (W - w_zero_point) over every tap."""

    attributes = Conv.attributes
    X_INDEX: ClassVar[int]
    W_INDEX: ClassVar[int]
    XZP_INDEX: ClassVar[int]
    WZP_INDEX: ClassVar[int]

    def _scalar(self, index: int, value, what: str) -> None:
        if value is not None and (value.size != 1 or value.ndim > 1):
            raise ValueError(self._input_error(
                index, f"has shape {value.shape}: {what} must be a scalar (per tensor)"))

    def _per_channel(self, index: int, value, M: int, what: str) -> None:
        if value is not None and not ((value.size == 1 and value.ndim <= 1)
                                      or value.shape == (M,)):
            raise ValueError(self._input_error(
                index, f"has shape {value.shape}: {what} must be a scalar or have shape "
                f"({M},) (per output channel)"))

    def _qplan(self, x, w, x_zero_point, w_zero_point) -> _QPlan:
        n, N, C, G = self._ranks_and_groups(x, w, self.W_INDEX)
        M, Cg = self._output_groups(x, w, C, G, self.W_INDEX)
        self._scalar(self.XZP_INDEX, x_zero_point, "the input's zero point")
        self._per_channel(self.WZP_INDEX, w_zero_point, M, "the weights' zero point")
        kernel = w.shape[2:]
        strides, dilations, pads = self._common(n, kernel, self.W_INDEX)
        spatial = x.shape[2:]
        begins, out = self._output_axes(spatial, kernel, strides, dilations, pads)
        out_shape = (N, M) + tuple(out)
        P, kk, Mg = math.prod(out), math.prod(kernel), M // G
        K = Cg * kk
        geom = _geometry(Cg, spatial, kernel, strides, begins, dilations, out)
        level = simd.state.level
        if math.prod(out_shape) == 0:
            return _QPlan(out_shape, geom, N, G, Mg, K, P, "empty", 0, 0, 1)
        pointwise = _pointwise(kernel, strides, begins, spatial, out)
        if G > 1 and Cg == 1 and Mg == 1:
            kind, per_pass, used = "depthwise", 0, core.level_used(level)
        else:
            kind = "gemm" if pointwise else "im2col"
            used = i8core.level_used(level)
            packed = i8core.packed_size(K, P) + 4 * i8core.colsum_size(P)
            per_image = G * (packed + (0 if pointwise else K * P))
            per_pass = max(1, min(N, QCONV_PASS_BYTES // max(1, per_image)))
            self._check_bytes("the columns and their packed copy", per_pass * per_image)
        threads = self._num_threads(N * M * P * K, QCONV_MIN_WORK_PER_THREAD)
        mats = np.arange(per_pass * G, dtype=np.int64)
        direct = kind == "im2col" and G == 1 and w.dtype == np.int8 \
            and core.qconv_direct_fits(geom, used)
        if direct:
            self._check_bytes("the input's padded copy",
                              core.qconv_direct_scratch(geom, per_pass))
        return _QPlan(out_shape, geom, N, G, Mg, K, P, kind, per_pass, used, threads, mats,
                      np.ascontiguousarray((mats % G) * (Mg * K)), direct)

    def _accumulate(self, plan: _QPlan, x, w, x_zero_point, w_zero_point, acc,
                    requantise: tuple | None = None) -> str:
        """acc (N, M, P) int32 = the convolution of (x - x_zp) by (w - w_zp);
        returns the kind of loop that ran.  With ``requantise`` (bias, scale,
        zp; the direct and depthwise loops only) acc is the 8-bit output,
        requantised in the loop."""
        if self._direct(plan, w_zero_point):
            self._accumulate_direct(plan, x, x_zero_point, w, acc, requantise)
            return "direct"
        N, G, Mg, K, P = plan.N, plan.G, plan.Mg, plan.K, plan.P
        M = G * Mg
        x_signed, w_signed = x.dtype == np.int8, w.dtype == np.int8
        xzp = 0 if x_zero_point is None else int(x_zero_point.reshape(-1)[0])
        xs = np.ascontiguousarray(x).view(UINT8)
        if K == 0:
            acc.fill(0)
            return plan.kind
        wzp_constant = w_zero_point is None or \
            self._constant_input(self.WZP_INDEX) is w_zero_point
        if plan.kind == "depthwise":
            def centred():
                wi = w.reshape(M, -1).astype(np.int32)
                if w_zero_point is not None:
                    wi -= w_zero_point.astype(np.int32).reshape(-1, 1)
                return np.ascontiguousarray(wi)
            wc = self._prepared_input(("dw",), self.W_INDEX, w, centred) if wzp_constant \
                else centred()
            core.qconv_depthwise(xs, x_signed, xzp, wc, acc, plan.geom, N * M, M,
                                 simd.state.level, plan.threads, *(requantise or ()))
            return plan.kind
        # the engine: A = W_g (Mg x K), B = the columns of group g (K x P)
        wa = self._prepared_input(("w",), self.W_INDEX, w,
                                  lambda: np.ascontiguousarray(w).reshape(M, K).view(UINT8))
        shift_w = 128 if w_signed else 0       # see olc_gemm_int8.h
        per_channel = w_zero_point is not None and w_zero_point.size > 1

        def shifted_w_zero_points():
            """w's zero points shifted as the engine reads them, per channel
            repeated for the images of a pass."""
            if w_zero_point is None:
                return np.full(1, shift_w, np.int32)
            if not per_channel:
                return np.full(1, int(w_zero_point.reshape(-1)[0]) + shift_w, np.int32)
            return np.tile(w_zero_point.astype(np.int32) + shift_w, plan.per_pass)
        za = self._prepared_input(("za", plan.per_pass), self.WZP_INDEX, w_zero_point,
                                  shifted_w_zero_points) if w_zero_point is not None \
            else shifted_w_zero_points()
        za_bs, za_rs = (Mg, 1) if per_channel else (0, 0)
        zb = np.full(1, xzp + (0 if x_signed else -128), dtype=np.int32)
        used, threads, per_pass = plan.used, plan.threads, plan.per_pass
        pointwise = plan.kind == "gemm"
        for n0 in range(0, N, per_pass):
            nimg = min(per_pass, N - n0)
            nmat = nimg * G
            q, a_off = plan.mats[:nmat], plan.a_off[:nmat]
            if pointwise:
                b = xs[n0:n0 + nimg].reshape(-1)   # image stride C*P = G*K*P
            else:
                b = self._new_output((nmat * K * P,), UINT8, slot=2)
                core.qconv_im2col(xs[n0:n0 + nimg], math.prod(x.shape[1:]), nimg, G,
                                  xzp & 0xFF, b, plan.geom, threads)
            packed = self._new_output((nmat * i8core.packed_size(K, P),), np.int8, slot=3)
            sums = self._new_output((nmat * i8core.colsum_size(P),), INT32, slot=4)
            i8core.pack_b(b, q * (K * P), packed, sums, K, P, x_signed, used, threads)
            y = acc[n0:n0 + nimg].reshape(-1)
            i8core.gemm(wa, a_off, packed, sums, q, za, zb, y, za_bs, za_rs, 0, 0, Mg, P, K,
                        w_signed, used, threads)
            del b, packed, sums
        return plan.kind

    @staticmethod
    def _direct(plan: _QPlan, w_zero_point) -> bool:
        """Whether qconv_direct runs: its geometry, a sum over taps (K > 0),
        and a zero point of 0."""
        return plan.direct and plan.K > 0 and (w_zero_point is None or not w_zero_point.any())

    def _accumulate_direct(self, plan: _QPlan, x, x_zero_point, w, out,
                           requantise: tuple | None = None) -> None:
        """out (N, M, P) = _accumulate's int32 sums by qconv_direct (int8
        weights, zero point 0): no columns; or with ``requantise`` (bias or
        None, scale per channel, the output's zero point) QLinearConv's
        8-bit output, requantised as qconv_requantize does."""
        xs, x_signed = np.ascontiguousarray(x).view(UINT8), x.dtype == np.int8
        xzp = 0 if x_zero_point is None else int(x_zero_point.reshape(-1)[0])
        M = plan.Mg
        bias, scale, zp = requantise if requantise is not None else (None, None, 0)

        def packed():
            """W as [M/16][taps][C/4][16][4], zeros past M and C."""
            m, c, kk = w.shape[0], w.shape[1], math.prod(w.shape[2:])
            g4, m16 = (c + 3) // 4, (m + 15) // 16 * 16
            wp = np.zeros((m16, g4 * 4, kk), np.int8)
            wp[:m, :c] = w.reshape(m, c, kk)
            return np.ascontiguousarray(
                wp.reshape(m16 // 16, 16, g4, 4, kk).transpose(0, 4, 2, 1, 3))

        def sums():
            """W's sums per output channel (modulo 2^32, as int32 sums wrap)."""
            return w.reshape(w.shape[0], -1).sum(axis=1, dtype=np.int64).astype(np.int32)
        wp = self._prepared_input(("direct",), self.W_INDEX, w, packed)
        wsum = self._prepared_input(("direct_sums",), self.W_INDEX, w, sums)
        img = math.prod(xs.shape[1:])
        for n0 in range(0, plan.N, plan.per_pass):
            nimg = min(plan.per_pass, plan.N - n0)
            scratch = self._new_output((core.qconv_direct_scratch(plan.geom, nimg),), UINT8,
                                       slot=2)
            core.qconv_direct(xs[n0:n0 + nimg], img, nimg, x_signed, xzp, wp, wsum, M, scratch,
                              out[n0:n0 + nimg], plan.geom, plan.used, plan.threads, bias,
                              scale, zp)
            del scratch

    def _qrecord(self, x, w, kind: str, used: int) -> None:
        if not self._usage.enabled:
            return
        op = type(self).__name__.lower()
        self._record_path((x.dtype, w.dtype, kind, used), lambda: (
            f"{op}_{x.dtype.name}_{w.dtype.name}_{kind}"
            + ("" if kind == "empty" else "_" + simd.LEVEL_NAMES[used])))


class ConvInteger(_QuantizedConv):
    """Y (int32) = conv(x - x_zero_point, w - w_zero_point), exact."""

    since_version = 10
    element_types = ("tensor(int8)", "tensor(uint8)", "tensor(int32)")
    inputs = (Input("x", types=INT8_TYPES, ranks=(3, 4, 5)),
              Input("w", types=INT8_TYPES, ranks=(3, 4, 5)),
              Input("x_zero_point", like=0, optional=True),
              Input("w_zero_point", like=1, optional=True))
    X_INDEX, W_INDEX, XZP_INDEX, WZP_INDEX = 0, 1, 2, 3

    def _plan(self, x, w, x_zero_point=None, w_zero_point=None):
        return self._qplan(x, w, x_zero_point, w_zero_point)

    def _execute(self, plan, x, w, x_zero_point=None, w_zero_point=None):
        if plan.kind == "empty":
            self._qrecord(x, w, "empty", 0)
            return (np.zeros(plan.out_shape, dtype=INT32),)
        y = self._new_output(plan.out_shape, INT32)
        kind = self._accumulate(plan, x, w, x_zero_point, w_zero_point,
                                y.reshape(plan.N, -1, plan.P))
        self._qrecord(x, w, kind, plan.used)
        return (y,)


class QLinearConv(_QuantizedConv):
    """y = saturate(round((conv(x - x_zp, w - w_zp) + B) * x_scale w_scale / y_scale)
    + y_zp), rounded as ONNX Runtime's CPU kernel rounds."""

    since_version = 10
    element_types = ("tensor(int8)", "tensor(uint8)", "tensor(float)", "tensor(int32)")
    inputs = (Input("x", types=INT8_TYPES, ranks=(3, 4, 5)),
              Input("x_scale", types=(T.FLOAT,)),
              Input("x_zero_point", like=0),
              Input("w", types=INT8_TYPES, ranks=(3, 4, 5)),
              Input("w_scale", types=(T.FLOAT,)),
              Input("w_zero_point", like=3),
              Input("y_scale", types=(T.FLOAT,)),
              Input("y_zero_point", types=INT8_TYPES),
              Input("B", types=(T.INT32,), ranks=(1,), optional=True))
    X_INDEX, W_INDEX, XZP_INDEX, WZP_INDEX = 0, 3, 2, 5

    def _plan(self, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
              b=None):
        plan = self._qplan(x, w, x_zero_point, w_zero_point)
        M = plan.G * plan.Mg
        self._scalar(1, x_scale, "the input's scale")
        self._per_channel(4, w_scale, M, "the weights' scale")
        self._scalar(6, y_scale, "the output's scale")
        self._scalar(7, y_zero_point, "the output's zero point")
        if b is not None and b.shape != (M,):
            raise ValueError(self._input_error(8, f"has shape {b.shape}, expected ({M},)"))
        return plan

    def _execute(self, plan, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                 y_zero_point, b=None):
        out_dtype = y_zero_point.dtype
        if plan.kind == "empty":
            self._qrecord(x, w, "empty", 0)
            return (np.zeros(plan.out_shape, dtype=out_dtype),)
        M = plan.G * plan.Mg
        # the float32 scale per output channel, as ONNX Runtime forms it
        def channel_scales():
            one = (x_scale.reshape(-1)[0] * w_scale.reshape(-1)) / y_scale.reshape(-1)[0]
            return np.ascontiguousarray(np.broadcast_to(one, (M,)), dtype=np.float32)
        constant = self._constant_input(1) is x_scale and self._constant_input(6) is y_scale
        scale = self._prepared_input(("scale",), 4, w_scale, channel_scales) if constant \
            else channel_scales()
        bias = None if b is None else np.ascontiguousarray(b)
        zp = int(y_zero_point.reshape(-1)[0])
        y = self._new_output(plan.out_shape, out_dtype)
        # requantised in the loop: the direct loop's epilogue, depthwise
        # plane by plane
        if self._direct(plan, w_zero_point) or (plan.kind == "depthwise" and plan.K > 0):
            kind = self._accumulate(plan, x, w, x_zero_point, w_zero_point,
                                    y.reshape(plan.N, M, plan.P), (bias, scale, zp))
            self._qrecord(x, w, kind, plan.used)
            return (y,)
        acc = self._new_output((plan.N, M, plan.P), INT32, slot=1)
        kind = self._accumulate(plan, x, w, x_zero_point, w_zero_point, acc)
        core.qconv_requantize(acc, bias, scale, y, plan.N * M, M, plan.P, zp,
                              out_dtype == np.int8, simd.state.level, plan.threads)
        del acc
        self._qrecord(x, w, kind, plan.used)
        return (y,)
class DeformConv(_ConvAttributes):
    """Y = deformable conv(X, W, offset, mask) + B, 2-D: every tap of every
    output position is moved by its offset and sampled bilinearly (zero
    outside the image), then scaled by the mask; groups, offset groups,
    strides, pads, dilations.  float32 (float16 and bfloat16 widened to it)
    runs the deformable im2col into the GEMM engine, double the same
    columns times a direct loop."""

    since_version = 19
    inputs = (Input("X", types=FLOATS), Input("W", like=0), Input("offset", like=0),
              Input("B", like=0, ranks=(1,), optional=True),
              Input("mask", like=0, optional=True))
    attributes = (Attr("dilations", "ints", ()), Attr("group", "int", 1),
                  Attr("kernel_shape", "ints", ()), Attr("offset_group", "int", 1),
                  Attr("pads", "ints", ()), Attr("strides", "ints", ()))
    auto_pad = "NOTSET"

    def _plan(self, x, w, offset, b=None, mask=None):
        element_type = self._opset_type(x)
        op = self.onnx_node.op_type
        if x.ndim != 4:
            # as the onnx.reference built-in: the 2-D operator only
            raise NotImplementedError(self._input_error(
                0, f"has shape {x.shape}: only 2-D DeformConv (X of rank 4) is supported"))
        n, N, C, G = self._ranks_and_groups(x, w)
        M, Cg = self._output_groups(x, w, C, G)
        if b is not None and b.shape != (M,):
            raise ValueError(self._input_error(3, f"has shape {b.shape}, expected ({M},)"))
        OG = self.offset_group
        if OG < 1:
            raise ValueError(f"{op}: attribute offset_group {OG} must be positive")
        if C % OG:
            raise ValueError(self._input_error(
                0, f"has {C} channels (shape {x.shape}), not divisible by offset_group {OG}"))
        kernel = w.shape[2:]
        strides, dilations, pads = self._common(n, kernel)
        spatial = x.shape[2:]
        _, out = self._output_axes(spatial, kernel, strides, dilations, pads)
        kk = math.prod(kernel)
        want = (N, OG * 2 * kk) + tuple(out)
        if offset.shape != want:
            raise ValueError(self._input_error(
                2, f"has shape {offset.shape}, expected {want} (offset_group {OG} x 2 x "
                f"kernel {tuple(kernel)}, output {tuple(out)})"))
        if mask is not None and mask.shape != (N, OG * kk) + tuple(out):
            raise ValueError(self._input_error(
                4, f"has shape {mask.shape}, expected {(N, OG * kk) + tuple(out)} "
                f"(offset_group {OG} x kernel {tuple(kernel)}, output {tuple(out)})"))
        if spatial[0] * spatial[1] >= 2 ** 31:
            raise NotImplementedError(self._input_error(
                0, f"has shape {x.shape}: planes of 2**31 elements and more"))
        out_shape = (N, M) + tuple(out)
        P = math.prod(out)
        f64 = element_type == T.DOUBLE
        geom = np.array((C, OG) + tuple(spatial) + tuple(kernel) + tuple(strides)
                        + tuple(pads[:n]) + tuple(dilations) + tuple(out), dtype=np.int64)
        level = simd.state.level
        self._check_bytes("the column tile",
                          (8 if f64 else 4) * core.deform_scratch(level, Cg * kk, P, f64))
        if element_type in (T.FLOAT16, T.BFLOAT16):
            self._check_bytes("the inputs widened to float32 and the float32 output",
                              4 * (x.size + w.size + offset.size
                                   + (0 if mask is None else mask.size)
                                   + math.prod(out_shape)))
        # the sampling adds about 8 operations a column element to the GEMM
        threads = self._num_threads(N * M * P * Cg * kk + 8 * N * C * kk * P,
                                    MIN_WORK_PER_THREAD)
        empty = math.prod(out_shape) == 0
        return element_type, out_shape, geom, N, G, M // G, f64, threads, empty

    def _execute(self, plan, x, w, offset, b=None, mask=None):
        element_type, out_shape, geom, N, G, Mg, f64, threads, empty = plan
        level = simd.state.level
        kind = "columns" if f64 else "gemm"
        if empty:
            self._record_deform(x.dtype, "empty", level)
            return (np.zeros(out_shape, dtype=x.dtype),)
        work = FLOAT64 if f64 else FLOAT32
        M = G * Mg
        xs = _widened(x, work)
        ws = self._prepared_input(("w", work), 1, w, lambda: _widened(w, work).reshape(M, -1))
        bs = None if b is None else self._prepared_input(("b", work), 3, b,
                                                         lambda: _widened(b, work))
        os_ = _widened(offset, work)
        ms = None if mask is None else _widened(mask, work)
        y = self._new_output(out_shape, x.dtype) if x.dtype == work else \
            np.empty(out_shape, dtype=work)
        core.deform_conv(xs, ws, os_, ms, bs, y, geom, N, G, Mg, level, threads)
        self._record_deform(x.dtype, kind, level)
        if y.dtype != x.dtype:
            y = y.astype(x.dtype)
        return (y,)

    def _record_deform(self, dtype: np.dtype, kind: str, level: int) -> None:
        if not self._usage.enabled:
            return
        self._record_path((dtype, kind, level), lambda: (
            f"deformconv_{dtype.name}_{kind}_{simd.LEVEL_NAMES[core.deform_level_used(level)]}"))


KERNELS = {
    "RegisterConvKernel": (Conv,),
    "RegisterConvTransposeKernel": (ConvTranspose,),
    "RegisterCol2ImKernel": (Col2Im,),
    "RegisterConvIntegerKernel": (ConvInteger,),
    "RegisterQLinearConvKernel": (QLinearConv,),
    "RegisterDeformConvKernel": (DeformConv,),
}

#: The com.microsoft kernel (one implementation whatever the policy).
microsoft_family = types.SimpleNamespace(KERNELS={
    "RegisterMicrosoftKernels": (FusedConv,),
})
