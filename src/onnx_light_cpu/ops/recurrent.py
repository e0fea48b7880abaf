"""RNN, GRU and LSTM (ai.onnx, opsets 7, 14 and 22) on the recurrent core
(``_kernels/recurrent.pyx``, ``include/recurrent/olc_recurrent.h``).

Per direction, the input projection of every time step is one GEMM
(X[T B, I] W^T, biases added), then each step adds H_{t-1} R^T and runs the
gates fused in C.  float32, float16 and bfloat16 compute in float32 on the
float GEMM engine (W^T and R^T packed once per node and SIMD level when
they are initializers; with batch 1, R^T is kept dense instead and each
step is one GEMV, which streams it once); double runs a plain loop with
libm.  The two
directions of a bidirectional node run in parallel at two threads or more;
the results do not depend on the thread count.

Semantics follow the ONNX specification and ONNX Runtime, which differ
from the built-ins (which ignore ``sequence_lens``, ``clip`` and
``activations``): a batch row takes part in step t only while t is below
its sequence length; past it, its Y rows are zero and its state stays, so
Y_h and Y_c hold the state of its last valid step (for a reverse
direction the sequence starts at its own last valid step).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import recurrent as core
from .._kernels.engines import gemm
from ..memory import prepared_empty
from ._base import Attr, Input, KernelOp

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
ZERO = np.zeros(1, dtype=np.int64)

# Activation name (case-insensitive, as ONNX Runtime reads them) -> (core
# code, default alpha, default beta, takes alpha, takes beta).  The values
# of activation_alpha and activation_beta go, in order, to the activations
# that take them; missing ones default as in ONNX Runtime (LeakyRelu 0.01,
# HardSigmoid 0.2 and 0.5, Elu 1.0, every other 0).
ACTIVATIONS = {
    "relu": (0, 0.0, 0.0, False, False),
    "tanh": (1, 0.0, 0.0, False, False),
    "sigmoid": (2, 0.0, 0.0, False, False),
    "affine": (3, 0.0, 0.0, True, True),
    "leakyrelu": (4, 0.01, 0.0, True, False),
    "thresholdedrelu": (5, 0.0, 0.0, True, False),
    "scaledtanh": (6, 0.0, 0.0, True, True),
    "hardsigmoid": (7, 0.2, 0.5, True, True),
    "elu": (8, 1.0, 0.0, True, False),
    "softsign": (9, 0.0, 0.0, False, False),
    "softplus": (10, 0.0, 0.0, False, False),
}

DIRECTIONS = ("forward", "reverse", "bidirectional")


def _pack_transposed(m: np.ndarray, level: int) -> np.ndarray:
    """``m`` [N, K] (float32, dense) as the packed K x N matrix m^T."""
    n, k = m.shape
    if n == 0 or k == 0:
        return np.zeros(1, dtype=np.float32)
    packed = prepared_empty(gemm.packed_size(k, n, level), np.float32)
    gemm.pack_b(m, ZERO, packed, 1, k, k, n, T.FLOAT, level, 1)
    return packed


class _Recurrent(KernelOp):
    """Shared by RNN, GRU and LSTM: attributes, shapes, weights, the run."""

    cell: ClassVar[int]
    n_gates: ClassVar[int]
    #: activations of one direction when the node sets none
    default_activations: ClassVar[tuple[str, ...]]
    # Multiply-adds of one step's recurrence GEMM before a second thread helps.
    # Measured on the 2-core machine shared with other jobs: below it, the
    # wake-up of a second thread at every step costs more than it saves.
    min_work_per_thread: ClassVar[int] = 1 << 19
    # Multiply-adds of the input projection (all steps) before a second
    # thread helps (MatMul's threshold, the same engine).
    min_projection_per_thread: ClassVar[int] = 1 << 20

    common_inputs = (
        Input("X", types=FLOATS, ranks=(3,)),
        Input("W", like=0, ranks=(3,)),
        Input("R", like=0, ranks=(3,)),
        Input("B", like=0, ranks=(2,), optional=True),
        Input("sequence_lens", types=(T.INT32,), ranks=(1,), optional=True),
        Input("initial_h", like=0, ranks=(3,), optional=True),
    )
    common_attributes = (
        Attr("activation_alpha", "floats", ()),
        Attr("activation_beta", "floats", ()),
        Attr("activations", "strings", ()),
        Attr("clip", "float", None),
        Attr("direction", "string", "forward", allowed=DIRECTIONS),
        Attr("hidden_size", "int", None),
        Attr("layout", "int", 0, allowed=(0, 1)),
    )

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self.num_directions = 2 if self.direction == "bidirectional" else 1
        self._acts = None
        if self._attribute_error is None:
            self._acts = self._parse_activations()
        if self.opset < 14 and self.layout:
            self._reject_attribute(f"layout exists from opset 14, the node has opset {self.opset}")
        if self.clip is not None and not self.clip > 0:
            self._reject_attribute(f"clip must be positive, got {self.clip}")
        if self.hidden_size is not None and self.hidden_size < 0:
            self._reject_attribute(f"hidden_size must not be negative, got {self.hidden_size}")
        names = tuple(self.onnx_node.output)
        self._wanted = tuple(bool(n) for n in names)

    def prepared_bytes(self) -> int:
        """Bytes of the weights prepared once for this node."""
        cache = self.__dict__.get("_prepared_inputs", {})
        return sum(sum(a.nbytes for a in v) for v in cache.values())

    def _parse_activations(self):
        """Per direction, the cell's activations as (code, alpha, beta)."""
        n = len(self.default_activations)
        names = [a.lower() if isinstance(a, str) else a.decode().lower()
                 for a in self.activations]
        if not names:
            names = [a.lower() for a in self.default_activations] * self.num_directions
        if len(names) != n * self.num_directions:
            self._reject_attribute(
                f"activations must list {n * self.num_directions} functions "
                f"({n} a direction), got {len(names)}")
            return None
        alphas, betas = list(self.activation_alpha), list(self.activation_beta)
        acts = []
        for name in names:
            if name not in ACTIVATIONS:
                self._reject_attribute(
                    f"activation {name!r} is not one of {', '.join(ACTIVATIONS)}")
                return None
            code, alpha, beta, takes_alpha, takes_beta = ACTIVATIONS[name]
            if takes_alpha and alphas:
                alpha = alphas.pop(0)
            if takes_beta and betas:
                beta = betas.pop(0)
            acts.append((code, float(alpha), float(beta)))
        acts += [(1, 0.0, 0.0)] * (3 * self.num_directions - len(acts))  # unused slots
        per = []
        for d in range(self.num_directions):
            own = acts[d * n:(d + 1) * n]
            per.append(tuple(own + [(1, 0.0, 0.0)] * (3 - n)))
        return tuple(per)

    # -- shapes ------------------------------------------------------------

    def _plan(self, x, w, r, b=None, lens=None, h0=None, c0=None, p=None):
        if x.dtype == np.dtype("bfloat16") and self.opset < 22:
            raise TypeError(self._input_error(
                0, f"has element type bfloat16, which {self.onnx_node.op_type} takes from "
                f"opset 22 (the node has opset {self.opset})"))
        D, G = self.num_directions, self.n_gates
        if self.layout:
            batch, steps, n_in = x.shape
        else:
            steps, batch, n_in = x.shape
        # hidden_size when the node sets it (R must then agree), else R's
        hidden = r.shape[-1] if self.hidden_size is None else self.hidden_size
        if w.shape != (D, G * hidden, n_in):
            raise ValueError(self._input_error(
                1, f"has shape {w.shape}, expected {(D, G * hidden, n_in)} (num_directions, "
                f"{G} * hidden_size, input_size) for direction={self.direction!r}"))
        if r.shape != (D, G * hidden, hidden):
            raise ValueError(self._input_error(
                2, f"has shape {r.shape}, expected {(D, G * hidden, hidden)} (num_directions, "
                f"{G} * hidden_size, hidden_size)"))
        if b is not None and b.shape != (D, 2 * G * hidden):
            raise ValueError(self._input_error(
                3, f"has shape {b.shape}, expected {(D, 2 * G * hidden)}"))
        if lens is not None and lens.shape != (batch,):
            raise ValueError(self._input_error(
                4, f"has shape {lens.shape}, expected {(batch,)} (batch_size)"))
        state = (batch, D, hidden) if self.layout else (D, batch, hidden)
        for index, s in ((5, h0), (6, c0)):
            if s is not None and s.shape != state:
                raise ValueError(self._input_error(
                    index, f"has shape {s.shape}, expected {state} (layout={self.layout})"))
        if p is not None and p.shape != (D, 3 * hidden):
            raise ValueError(self._input_error(7, f"has shape {p.shape}, expected "
                                                  f"{(D, 3 * hidden)}"))
        y_shape = (batch, steps, D, hidden) if self.layout else (steps, D, batch, hidden)
        real = FLOAT64 if x.dtype == FLOAT64 else FLOAT32
        rows = steps * batch
        self._check_bytes("the gate pre-activations",
                          D * rows * G * hidden * real.itemsize)
        work = batch * G * hidden * hidden
        available = self._num_threads(1 << 62, 1)
        parallel = D == 2 and available >= 2
        threads = 1 if parallel else self._num_threads(work, self.min_work_per_thread)
        # the projection of every step at once: MatMul's threshold
        proj_threads = 1 if parallel else self._num_threads(rows * G * hidden * n_in,
                                                            self.min_projection_per_thread)
        return (steps, batch, hidden, n_in, y_shape, state, real, (threads, proj_threads),
                parallel)

    # -- weights -----------------------------------------------------------

    def _weights(self, index, value, real, level, split, dense=False):
        """Per direction, ``value[d]`` ([N, K] rows) prepared for the core:
        packed transposed (float), or transposed dense (double, or float
        with ``dense``: R of a batch-1 node, one GEMV a step); ``split``
        cuts the rows into (0, split) and (split, N) (GRU's R)."""

        def prepare():
            out = []
            for d in range(value.shape[0]):
                m = np.ascontiguousarray(value[d], dtype=real)
                parts = (m,) if split is None else (m[:split], m[split:])
                for part in parts:
                    if real == FLOAT64 or dense:
                        out.append(np.ascontiguousarray(part.T))
                    else:
                        out.append(_pack_transposed(np.ascontiguousarray(part), level))
            return tuple(out)

        key = (index, level, real.str, split, dense)
        return self._prepared_input(key, index, value, prepare)

    # -- the run -----------------------------------------------------------

    def _execute(self, plan, x, w, r, b=None, lens=None, h0=None, c0=None, p=None):
        steps, batch, hidden, n_in, y_shape, state, real, (threads, proj_threads), parallel = plan
        D, G, H = self.num_directions, self.n_gates, hidden
        level = gemm.level_used(simd.state.level)
        dtype = x.dtype
        if lens is not None:
            bad = (lens < 0) | (lens > steps)
            if bad.any():
                raise ValueError(self._input_error(
                    4, f"has values {lens[bad][:4].tolist()} outside [0, {steps}] "
                    f"(seq_length={steps})"))
            lens = None if (lens == steps).all() else np.ascontiguousarray(lens)
        xr = np.ascontiguousarray(x, dtype=real)
        is_gru = self.cell == 1
        wp = self._weights(1, w, real, level, None)
        # batch 1: R^T dense and one GEMV a step (the packed GEMM's tiling
        # costs more than it saves at one row)
        r_dense = batch == 1 and real == FLOAT32
        rp = self._weights(2, r, real, level, 2 * H if is_gru else None, r_dense)
        n_r = 2 if is_gru else 1
        bias, rbh = [None] * D, [None] * D
        if b is not None:
            bb = b.astype(real)
            for d in range(D):
                wb, rb = bb[d, :G * H], bb[d, G * H:]
                if is_gru and self.linear_before_reset:
                    bias[d] = np.concatenate([wb[:2 * H] + rb[:2 * H], wb[2 * H:]])
                    rbh[d] = np.ascontiguousarray(rb[2 * H:])
                else:
                    bias[d] = wb + rb
        # states [D, B, H]: the initial state in, Y_h / Y_c out
        hs = np.zeros((D, batch, H), dtype=real)
        if h0 is not None:
            hs[...] = h0.transpose(1, 0, 2) if self.layout else h0
        is_lstm = self.cell == 2
        cs = None
        if is_lstm:
            cs = np.zeros((D, batch, H), dtype=real)
            if c0 is not None:
                cs[...] = c0.transpose(1, 0, 2) if self.layout else c0
        # dense rows: the core reads P[d] by its data pointer (a Fortran P
        # of two directions would interleave them)
        pr = None if p is None else np.ascontiguousarray(p, dtype=real)
        want_y = self._wanted[0]
        if want_y:
            y = (self._new_output(y_shape, dtype) if dtype == real
                 else np.empty(y_shape, dtype=real))
        else:
            y = None
        xw = np.empty((D, steps * batch, G * H), dtype=real)
        scratch = np.empty((D, batch, H), dtype=real) if is_gru else None
        if self.layout:
            xs_t, xs_b = 1, steps
            ys_t, ys_b = D * H, steps * D * H
        else:
            xs_t, xs_b = batch, 1
            ys_t, ys_b = D * batch * H, H
        directions = []
        for d in range(D):
            reverse = self.direction == "reverse" or d == 1
            y_offset = d * H if self.layout else d * batch * H
            directions.append((
                xr, xs_t, xs_b, wp[d], bias[d], xw[d], rp[n_r * d],
                rp[n_r * d + 1] if is_gru else None, rbh[d],
                None if pr is None else pr[d], hs[d], None if cs is None else cs[d],
                y, y_offset, ys_t, ys_b, None if scratch is None else scratch[d], lens,
                reverse))
        lbr = bool(is_gru and self.linear_before_reset)
        forget = bool(is_lstm and self.input_forget)
        clip = 0.0 if self.clip is None else float(self.clip)
        core.run(self.cell, real == FLOAT64, steps, batch, H, n_in, directions,
                 self._acts, clip, lbr, forget, r_dense, level, threads, proj_threads, parallel)
        if lens is not None and not lens.all():
            # as ONNX Runtime: a batch row of no step has zero states
            empty = lens == 0
            hs[:, empty] = 0
            if cs is not None:
                cs[:, empty] = 0
        self._record(dtype, level, lens is not None, parallel, r_dense)
        outputs = []
        if want_y:
            outputs.append(y if y.dtype == dtype else y.astype(dtype))
        else:
            outputs.append(None)
        for s in (hs, cs)[:len(self._wanted) - 1]:
            if self.layout:
                s = s.transpose(1, 0, 2)
            outputs.append(np.ascontiguousarray(s, dtype=dtype))
        return tuple(outputs[:len(self._wanted)])

    def _record(self, dtype, level, with_lens, parallel, gemv):
        if not self._usage.enabled:
            return

        def label():
            used = simd.LEVEL_NAMES[level] if dtype != FLOAT64 else "scalar"
            parts = [type(self).__name__.lower(), dtype.name, self.direction]
            if with_lens:
                parts.append("seqlens")
            if parallel:
                parts.append("dirparallel")
            if gemv:
                parts.append("gemv")
            parts.append(used)
            return "_".join(parts)

        self._record_path((dtype, level, with_lens, parallel, gemv, self.direction), label)


class RNN(_Recurrent):
    """H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)."""

    cell = 0
    n_gates = 1
    default_activations = ("Tanh",)
    since_version = 7
    inputs = _Recurrent.common_inputs
    attributes = _Recurrent.common_attributes


class GRU(_Recurrent):
    """Gates z, r, h; ``linear_before_reset`` applies r after R_h."""

    cell = 1
    n_gates = 3
    default_activations = ("Sigmoid", "Tanh")
    since_version = 7
    inputs = _Recurrent.common_inputs
    attributes = _Recurrent.common_attributes + (Attr("linear_before_reset", "int", 0),)


class LSTM(_Recurrent):
    """Gates i, o, f, c; peepholes P (i, o, f), ``input_forget``, Y_c."""

    cell = 2
    n_gates = 4
    default_activations = ("Sigmoid", "Tanh", "Tanh")
    since_version = 7
    inputs = _Recurrent.common_inputs + (
        Input("initial_c", like=0, ranks=(3,), optional=True),
        Input("P", like=0, ranks=(2,), optional=True),
    )
    attributes = _Recurrent.common_attributes + (Attr("input_forget", "int", 0),)


KERNELS = {
    "RegisterRecurrentKernels": (LSTM, GRU, RNN),
}
