"""com.microsoft MoE and QMoE: top-k mixture of experts.

Tokens ([T, H] or [B, S, H]) are routed by a softmax over their router
logits ([T, E]) to the k most probable experts (equal probabilities: the
higher expert index first, as ONNX Runtime), optionally renormalised; each
expert computes FC2(activation(FC1 x + b1)) + b2 on the rows routed to it
only, and the output row is the weighted sum of its experts, summed in
expert order (the same result at every thread count).  float16 and
bfloat16 run in float32 and are rounded once at the end.

MoE's projections run on the float32 GEMM engine (olc_gemm.h), its constant
expert matrices packed once per node and SIMD level.  QMoE's experts are
converted once per node (never dequantized whole) for one of two engines:
- the MatMulNBits core (``_kernels/matmul_nbits``), one prepared matrix per
  expert and projection, run on the rows routed to that expert: few rows
  per expert (decode), and every call where ONNX Runtime quantizes the
  activations to int8 (constant block-quantized experts at accuracy level
  4, or with 8-bit codes), so that the results agree with it;
- the core's own decoder (olc_moe.h): signed codes in the GEMM engine's
  panel order, decoded a bounded panel at a time into the micro-kernels'
  input, for many rows per expert (prefill) and for the input-major layout
  (whose scales vary along the outputs, which MatMulNBits cannot express).

Activations: relu (default), gelu (the tanh form, as ONNX Runtime's CPU
MoE), silu, identity and interleaved SwiGLU (``swiglu_fusion=1``: FC1 rows
alternate gate and linear) with ``activation_alpha`` (1), ``activation_beta``
(0) and ``swiglu_limit`` (none): G * sigmoid(alpha G) * (L + beta), G =
min(gate, limit), L = clamp(linear, -limit, limit).  QMoE's separate FC3
(the split builder) gates the activation: FC2(act(FC1 x + b1) * (FC3 x +
b3)), or SwiGLU of (FC1 x + b1, FC3 x + b3) for 'swiglu' with
``swiglu_fusion=0``.

Not supported (NotImplementedError): MoE's separate FC3, sparse mixer
routing, non-interleaved SwiGLU, other activations; QMoE's non-integer
quantization, prepacked weights, nonempty zero points, router weights and
the FP4/FP8 scale inputs.

QMoE follows the spec where ONNX Runtime 1.32 differs: block-quantized INT8
codes are two's complement (ORT reads offset codes), and
``normalize_routing_weights=0`` is honoured (ORT's QMoE always
renormalises).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import onnx
from onnx import TensorProto

from .. import simd
from .._kernels import matmul_nbits as nbits_core
from .._kernels import moe as core
from ._base import ELEMENT_TYPES, KernelOp, type_string

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
FLOAT32 = np.dtype(np.float32)
UINT8 = np.dtype(np.uint8)
# Rows of one expert run together (bounds the scratch of a projection).
TILE = 256
# QMoE rows per expert (on average) from which the core's own panel decoder
# (float GEMM micro-kernels on panels decoded once a call) beats the
# MatMulNBits engine (which decodes per tile of rows): measured on 2 busy
# cores (AVX-512, 1 thread, hidden 1024, inter 2816, 8 experts, 4-bit
# blocks of 32, best of 5): 16 rows 21 vs 17.5 ms, 32 rows 31 vs 53 ms; at
# 1 row the MatMulNBits engine is 3x faster.
PANEL_MIN_ROWS = 24
ACTIVATIONS = {"relu": core.RELU, "gelu": core.GELU, "silu": core.SILU,
               "identity": core.IDENTITY, "swiglu": core.SWIGLU}


class _MoEBase(KernelOp):
    """Attributes, routing checks and the core call shared by MoE and QMoE."""

    op_domain = "com.microsoft"
    onnx_types = FLOATS
    # Multiply-adds one thread must have before a second one helps (as the
    # GEMM engine's MatMul: two threads from 64^3).
    min_work_per_thread: ClassVar[int] = 1 << 17

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        attrs = {att.name: onnx.helper.get_attribute_value(att) for att in onnx_node.attribute}
        self._attrs = attrs
        self.k = attrs.get("k", 1)
        self.normalize = self._flag("normalize_routing_weights")
        activation = attrs.get("activation_type", b"relu")
        self.activation = activation.decode() if isinstance(activation, bytes) else activation
        self.swiglu_fusion = attrs.get("swiglu_fusion", 0)
        limit = attrs.get("swiglu_limit")
        self.limit = math.inf if limit is None else float(np.float32(limit))
        self.alpha = float(np.float32(attrs.get("activation_alpha", 1.0)))
        self.beta = float(np.float32(attrs.get("activation_beta", 0.0)))
        self.fused = self.activation == "swiglu" and self.swiglu_fusion == 1
        self._plans: dict = {}
        # Attributes are checked at run time: a constructor error would
        # break building the whole evaluator.
        self._attr_error: Exception | None = self._check_attributes(attrs)

    def _check_attributes(self, attrs) -> Exception | None:
        op = self.onnx_node.op_type
        if not isinstance(self.k, int) or self.k < 1:
            return ValueError(f"{op}: attribute k must be >= 1, got {self.k!r}")
        if attrs.get("use_sparse_mixer", 0):
            return NotImplementedError(f"{op}: attribute use_sparse_mixer=1 (sparse mixer "
                                       "routing) is not supported")
        if self.activation not in ACTIVATIONS:
            return NotImplementedError(
                f"{op}: attribute activation_type={self.activation!r} is not supported "
                f"(expected one of {', '.join(ACTIVATIONS)})")
        if self.swiglu_fusion not in (0, 1, 2):
            return ValueError(f"{op}: attribute swiglu_fusion must be 0, 1 or 2, "
                              f"got {self.swiglu_fusion!r}")
        if self.swiglu_fusion == 2:
            return NotImplementedError(f"{op}: attribute swiglu_fusion=2 (non-interleaved "
                                       "SwiGLU) is not supported; use swiglu_fusion=1")
        if attrs.get("swiglu_limit_after_activation", 0):
            return NotImplementedError(f"{op}: attribute swiglu_limit_after_activation=1 is "
                                       "not supported")
        return None

    # -- checks -------------------------------------------------------------

    def _tensor(self, index: int, v, allowed=FLOATS) -> int:
        if not isinstance(v, np.ndarray):
            raise TypeError(self._input_error(index, f"must be a tensor, got {type(v).__name__}"))
        element_type = ELEMENT_TYPES.get(v.dtype)
        if element_type not in allowed:
            names = ", ".join(type_string(t) for t in allowed)
            raise TypeError(self._input_error(
                index, f"has element type {v.dtype}, expected one of {names}"))
        return element_type

    def _same_dtype(self, index: int, v: np.ndarray, like: np.ndarray) -> None:
        self._tensor(index, v)
        if v.dtype != like.dtype:
            raise TypeError(self._input_error(
                index, f"has element type {v.dtype}, expected {like.dtype} like input 0"))

    def _shape(self, index: int, v: np.ndarray, shape: tuple, what: str) -> None:
        if v.shape != shape:
            raise ValueError(self._input_error(index, f"has shape {v.shape}, expected {shape} "
                                               f"({what})"))

    def _check_tokens(self, x, router, E: int) -> tuple[int, int]:
        """Token count and hidden size; the router must have [T, E]."""
        self._tensor(0, x)
        if x.ndim not in (2, 3):
            raise ValueError(self._input_error(
                0, f"must be [tokens, hidden] or [batch, sequence, hidden], got shape {x.shape}"))
        self._same_dtype(1, router, x)
        tokens = math.prod(x.shape[:-1])
        if router.ndim != 2 or router.shape[0] != tokens:
            raise ValueError(self._input_error(
                1, f"has shape {router.shape}, expected [{tokens}, experts] (one row per token "
                f"of input 0, shape {x.shape})"))
        if router.shape[1] != E:
            raise ValueError(self._input_error(
                1, f"has {router.shape[1]} experts (shape {router.shape}) but the expert "
                f"weights have {E}"))
        if self.k > E:
            raise ValueError(f"{self.onnx_node.op_type}: attribute k={self.k} exceeds the "
                             f"number of experts {E}")
        return tokens, x.shape[-1]

    # -- run ----------------------------------------------------------------

    def _bias(self, index: int, b):
        if b is None:
            return None
        return self._prepared_input(("bias", index), index, b,
                                    lambda: np.ascontiguousarray(b, dtype=np.float32))

    def _forward(self, level, x, router, tokens, H, inter, fc1, b1, fc2, b2, fc3, b3, op):
        x32 = np.ascontiguousarray(x.reshape(tokens, H), dtype=np.float32)
        logits = np.ascontiguousarray(router, dtype=np.float32)
        f = 2 if self.fused else 1
        work = tokens * self.k * H * inter * (f + 1 + (fc3 is not None))
        threads = self._num_threads(work, self.min_work_per_thread)
        if x.dtype == FLOAT32:
            y = self._new_output(x.shape, FLOAT32)
            out = y.reshape(tokens, H)
        else:
            out = np.empty((tokens, H), dtype=np.float32)
        core.forward(level, x32, logits, self.k, self.normalize, op, self.fused, self.alpha,
                     self.beta, self.limit, fc1, b1, fc2, b2, fc3, b3, inter, out, threads)
        if x.dtype != FLOAT32:
            y = out.astype(x.dtype).reshape(x.shape)
        return (y,)

    def _record(self, label: str) -> None:
        self._usage.record(self.kernel_name, label)

    def prepared_bytes(self) -> int:
        """Bytes of the constant weights and biases prepared once for this
        node (0 when none)."""
        total = 0
        for value in self.__dict__.get("_prepared_inputs", {}).values():
            if isinstance(value, np.ndarray):
                total += value.nbytes
            elif isinstance(value, _PreparedExperts):
                total += value.nbytes
            else:  # ("float" | "quant", arrays..., sizes...)
                total += sum(a.nbytes for a in value if isinstance(a, np.ndarray))
        return total


class MoE(_MoEBase):
    """Float experts: FC1 [E, f*I, H] (f = 2 for interleaved SwiGLU),
    optional bias [E, f*I], FC2 [E, H, I], optional bias [E, H]."""

    def _check_attributes(self, attrs):
        error = super()._check_attributes(attrs)
        if error is None and self.activation == "swiglu" and self.swiglu_fusion != 1:
            error = NotImplementedError(
                "MoE: activation_type='swiglu' needs swiglu_fusion=1 (interleaved gate and "
                "linear rows in FC1); separate FC3 weights are not supported")
        return error

    def _run(self, x, router, w1, b1=None, w2=None, b2=None, w3=None, b3=None):
        if self._attr_error is not None:
            raise self._attr_error
        if w3 is not None or b3 is not None:
            which = 6 if w3 is not None else 7
            raise NotImplementedError(self._input_error(
                which, "is given: separate FC3 weights are not supported (use interleaved "
                "SwiGLU, swiglu_fusion=1)"))
        if w2 is None:
            raise ValueError("MoE: input 4 (fc2_experts_weights) is required")
        E, tokens, H, inter = self._check(x, router, w1, b1, w2, b2)
        level = simd.state.level
        if self._usage.enabled:
            self._record(f"moe_{x.dtype.name}_{self.activation}_"
                         f"{simd.LEVEL_NAMES[core.level_used(level)]}")
        rows1 = w1.shape[1]
        fc1 = self._prepared_input(("fc1", level), 2, w1,
                                   lambda: self._pack(level, w1, E, rows1, H))
        fc2 = self._prepared_input(("fc2", level), 4, w2,
                                   lambda: self._pack(level, w2, E, H, inter))
        return self._forward(level, x, router, tokens, H, inter, fc1, self._bias(3, b1), fc2,
                             self._bias(5, b2), None, None, ACTIVATIONS[self.activation])

    def _check(self, x, router, w1, b1, w2, b2):
        key = (x.shape, x.dtype, router.shape, router.dtype, w1.shape, w1.dtype, w2.shape,
               w2.dtype, None if b1 is None else (b1.shape, b1.dtype),
               None if b2 is None else (b2.shape, b2.dtype))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        self._tensor(0, x)
        for index, w in ((2, w1), (4, w2)):
            self._same_dtype(index, w, x)
            if w.ndim != 3:
                raise ValueError(self._input_error(index, f"must be 3-D, got shape {w.shape}"))
        E = w1.shape[0]
        tokens, H = self._check_tokens(x, router, E)
        f = 2 if self.fused else 1
        rows1 = w1.shape[1]
        if rows1 % f:
            raise ValueError(self._input_error(
                2, f"has {rows1} rows, not 2 * inter_size (interleaved SwiGLU)"))
        inter = rows1 // f
        self._shape(2, w1, (E, rows1, H), "[experts, fusion * inter_size, hidden_size]")
        self._shape(4, w2, (E, H, inter), "[experts, hidden_size, inter_size]")
        for index, b, rows in ((3, b1, rows1), (5, b2, H)):
            if b is not None:
                self._same_dtype(index, b, x)
                self._shape(index, b, (E, rows), "[experts, rows of its projection]")
        plan = self._plans[key] = (E, tokens, H, inter)
        return plan

    def _pack(self, level, w, E, N, K):
        w = np.ascontiguousarray(w)
        threads = self._num_threads(w.size, 1 << 20)
        packed = core.pack_float(level, ELEMENT_TYPES[w.dtype], w, E, N, K, threads)
        return ("float", packed, N, K, E)


def _is_power_of_two(n) -> bool:
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


class QMoE(_MoEBase):
    """Quantized experts (UINT8 codes, float scales), in ONNX Runtime's raw
    output-major layout or, for block quantization, the split builder's
    input-major one (see the spec's "Microsoft QMoE")."""

    element_types = tuple(type_string(t) for t in FLOATS + (T.UINT8,))
    SCALE_TYPES = FLOATS

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        attrs = self._attrs
        self.bits = attrs.get("expert_weight_bits", 4)
        self.block_size = attrs.get("block_size", 0)
        self.accuracy_level = attrs.get("accuracy_level", 0)
        self.proj_bits = tuple(attrs.get(f"fc{i}_expert_weight_bits", self.bits)
                               for i in (1, 2, 3))
        if self._attr_error is None:
            self._attr_error = self._check_quant_attributes(attrs)

    def _check_quant_attributes(self, attrs):
        quant_type = attrs.get("quant_type", b"int")
        quant_type = quant_type.decode() if isinstance(quant_type, bytes) else quant_type
        if quant_type != "int":
            return NotImplementedError(f"QMoE: attribute quant_type={quant_type!r} is not "
                                       "supported (only 'int')")
        if attrs.get("weights_prepacked", 0) == 1:
            return NotImplementedError("QMoE: attribute weights_prepacked=1 (prepacked CUDA "
                                       "layouts) is not supported; give raw weights")
        for name, bits in zip(("fc1", "fc2", "fc3"), self.proj_bits):
            if bits not in (4, 8):
                return NotImplementedError(
                    f"QMoE: {name} weight bits {bits} (expert_weight_bits or "
                    f"{name}_expert_weight_bits) is not supported (4 or 8)")
        if not (self.block_size == 0 or (_is_power_of_two(self.block_size)
                                         and self.block_size >= 16)):
            return ValueError(f"QMoE: attribute block_size must be 0 or a power of two >= 16, "
                              f"got {self.block_size!r}")
        return None  # swiglu_fusion=0 needs FC3: checked with the inputs

    def _run(self, x, router, w1, s1=None, b1=None, w2=None, s2=None, b2=None, w3=None,
             s3=None, b3=None, z1=None, z2=None, z3=None, *extra):
        if self._attr_error is not None:
            raise self._attr_error
        plan = self._check(x, router, w1, s1, b1, w2, s2, b2, w3, s3, b3, (z1, z2, z3), extra)
        E, tokens, H, inter, input_major = plan
        level = simd.state.level
        if not input_major and (tokens * self.k < PANEL_MIN_ROWS * E
                                or self._int8_engine(self._constant_input(2) is w1)):
            return self._run_nbits(level, x, router, E, tokens, H, inter, w1, s1, b1, w2, s2,
                                   b2, w3, s3, b3)
        if self._usage.enabled:
            block = f"block{self.block_size}" if self.block_size else "per_row"
            layout = "input_major" if input_major else "output_major"
            self._record(f"qmoe_int{self.bits}_{block}_{layout}_panels_{x.dtype.name}_"
                         f"{simd.LEVEL_NAMES[core.level_used(level)]}")
        nr = core.panel_width(level)
        # (input index, stored weights, scales, bits, outputs N, inputs K)
        f = 2 if self.fused else 1
        specs = [(2, w1, s1, self.proj_bits[0], f * inter, H),
                 (5, w2, s2, self.proj_bits[1], H, inter)]
        if w3 is not None:
            specs.append((8, w3, s3, self.proj_bits[2], inter, H))
        projs = [self._prepared_input(
                     ("panels", index, nr), index, w,
                     lambda: self._prepare_panels(w, s, bits, E, N, K, nr, input_major))
                 for index, w, s, bits, N, K in specs]
        fc3 = projs[2] if w3 is not None else None
        op = ACTIVATIONS[self.activation]
        return self._forward(level, x, router, tokens, H, inter, projs[0], self._bias(4, b1),
                             projs[1], self._bias(7, b2), fc3, self._bias(10, b3), op)

    def _run_nbits(self, level, x, router, E, tokens, H, inter, w1, s1, b1, w2, s2, b2, w3, s3,
                   b3):
        """Output-major experts on the MatMulNBits core, one expert at a time
        on the rows routed to it."""
        f = 2 if self.fused else 1
        rows1 = f * inter

        def prepared(key, index, w, s, proj, N, K):
            constant = self._constant_input(index) is w  # ORT's int8 path needs it
            return self._prepared_input(
                key, index, w, lambda: self._prepare_nbits(w, s, proj, N, K, constant))

        p1 = prepared("nbits1", 2, w1, s1, 0, rows1, H)
        p2 = prepared("nbits2", 5, w2, s2, 1, H, inter)
        p3 = prepared("nbits3", 8, w3, s3, 2, inter, H) if w3 is not None else None
        b1, b2, b3 = self._bias(4, b1), self._bias(7, b2), self._bias(10, b3)
        x32 = np.ascontiguousarray(x.reshape(tokens, H), dtype=np.float32)
        logits = np.ascontiguousarray(router, dtype=np.float32)
        work = tokens * self.k * H * inter * (f + 1 + (w3 is not None))
        threads = self._num_threads(work, self.min_work_per_thread)
        if x.dtype == FLOAT32:
            y = self._new_output(x.shape, FLOAT32)
            out = y.reshape(tokens, H)
            out.fill(0.0)
        else:
            out = np.zeros((tokens, H), dtype=np.float32)
        count, rows, weights = core.group(logits, self.k, self.normalize)
        op = ACTIVATIONS[self.activation]
        matmul = nbits_core.matmul
        path = None
        for e in range(E):
            for s0 in range(int(count[e]), int(count[e + 1]), TILE):
                s1_ = min(s0 + TILE, int(count[e + 1]))
                m = s1_ - s0
                a = x32.take(rows[s0:s1_], axis=0)
                h = np.empty((m, rows1), dtype=np.float32)
                path = matmul(p1[e], a, None if b1 is None else b1[e], h, level, threads)
                u = None
                if p3 is not None:
                    u = np.empty((m, inter), dtype=np.float32)
                    matmul(p3[e], a, None if b3 is None else b3[e], u, level, threads)
                g = np.empty((m, inter), dtype=np.float32)
                core.activate(level, op, self.fused, h, None, u, None, g, self.alpha, self.beta,
                              self.limit, threads)
                yy = np.empty((m, H), dtype=np.float32)
                matmul(p2[e], g, None if b2 is None else b2[e], yy, level, threads)
                core.scatter(level, out, rows[s0:s1_], weights[s0:s1_], yy, None, threads)
        if self._usage.enabled:
            self._record(f"qmoe_{path or 'empty'}_{x.dtype.name}")
        if x.dtype != FLOAT32:
            y = out.astype(x.dtype).reshape(x.shape)
        return (y,)

    # -- validation -----------------------------------------------------------

    def _check(self, x, router, w1, s1, b1, w2, s2, b2, w3, s3, b3, zero_points, extra):
        arrays = (x, router, w1, s1, b1, w2, s2, b2, w3, s3, b3)
        key = tuple(None if a is None else (a.shape, a.dtype) if isinstance(a, np.ndarray)
                    else type(a) for a in arrays)
        if not extra and all(z is None for z in zero_points):
            plan = self._plans.get(key)
            if plan is not None:
                return plan
        op = "QMoE"
        for offset, z in enumerate(zero_points):
            if z is not None and (not isinstance(z, np.ndarray) or z.size):
                raise NotImplementedError(self._input_error(
                    11 + offset, "is given: zero points are not supported (the codes have "
                    "implicit zero points)"))
        for offset, v in enumerate(extra):
            if v is not None:
                raise NotImplementedError(self._input_error(
                    14 + offset, "is given: router weights, global and activation scales are "
                    "not supported"))
        self._tensor(0, x)
        if w2 is None or s1 is None or s2 is None:
            missing = 5 if w2 is None else 3 if s1 is None else 6
            raise ValueError(self._input_error(missing, "is required"))
        if (w3 is None) != (s3 is None):
            raise ValueError(self._input_error(
                8 if w3 is None else 9, "is missing: FC3 weights and scales come together"))
        if w3 is None and b3 is not None:
            raise ValueError(self._input_error(10, "is given without FC3 weights"))
        has_fc3 = w3 is not None
        if has_fc3 and self.fused:
            raise NotImplementedError(self._input_error(
                8, "is given with fused SwiGLU (swiglu_fusion=1): separate FC3 weights and "
                "interleaved SwiGLU cannot be combined"))
        if self.activation == "swiglu" and not self.fused and not has_fc3:
            raise NotImplementedError(
                f"{op}: activation_type='swiglu' needs swiglu_fusion=1 (interleaved rows in "
                "FC1) or separate FC3 weights")
        weights = [(2, w1), (5, w2)] + ([(8, w3)] if has_fc3 else [])
        scales = [(3, s1), (6, s2)] + ([(9, s3)] if has_fc3 else [])
        for index, w in weights:
            self._tensor(index, w, (T.UINT8,))
            if w.ndim != 3:
                raise ValueError(self._input_error(index, f"must be 3-D, got shape {w.shape}"))
        for index, s in scales:
            self._tensor(index, s, self.SCALE_TYPES)
        E = w1.shape[0]
        tokens, H = self._check_tokens(x, router, E)
        orientations = ("input", "output") if has_fc3 else ("output", "input")
        if self.block_size == 0 or self.fused:
            # per-row scales and fused SwiGLU exist in the output-major layout only
            orientations = ("output",)
        errors = []
        for orientation in orientations:
            inter, error = self._fits(orientation, E, H, w1, s1, w2, s2, w3, s3)
            if error is None:
                break
            errors.append((orientation, error))
        else:
            index, message = errors[0][1]
            if len(errors) > 1:
                message += (f" (the {errors[0][0]}-major layout; the weights and scales fit "
                            f"neither the output-major nor the input-major layout)")
            else:
                message += f" (the {errors[0][0]}-major layout)"
            raise ValueError(self._input_error(index, message))
        f = 2 if self.fused else 1
        for index, b, rows in ((4, b1, f * inter), (7, b2, H), (10, b3, inter)):
            if b is not None:
                self._same_dtype(index, b, x)
                self._shape(index, b, (E, rows), "[experts, rows of its projection]")
        plan = (E, tokens, H, inter, orientation == "input")
        self._plans[key] = plan
        return plan

    def _fits(self, orientation, E, H, w1, s1, w2, s2, w3, s3):
        """(inter_size, None) when every projection and scale fits the
        orientation, else (None, (input index, message))."""
        f = 2 if self.fused else 1
        if orientation == "output":
            if w1.shape[1] % f:
                return None, (2, f"has {w1.shape[1]} rows, not 2 * inter_size")
            inter = w1.shape[1] // f
            logical = [(2, w1, 3, s1, f * inter, H), (5, w2, 6, s2, H, inter),
                       (8, w3, 9, s3, inter, H)]
        else:
            inter = w2.shape[1]
            logical = [(2, w1, 3, s1, H, inter), (5, w2, 6, s2, inter, H),
                       (8, w3, 9, s3, H, inter)]
        for (index, w, sindex, s, rows, columns), bits in zip(logical, self.proj_bits):
            if w is None:
                continue
            stored = (E, rows, -(-columns // 2) if bits == 4 else columns)
            if w.shape != stored:
                return None, (index, f"has shape {w.shape}, expected {stored}")
            scale_shape = ((E, rows) if self.block_size == 0
                           else (E, rows, -(-columns // self.block_size)))
            if s.shape != scale_shape:
                return None, (sindex, f"has shape {s.shape}, expected {scale_shape}")
        return inter, None

    # -- preparation ------------------------------------------------------------

    def _int8_engine(self, constant: bool) -> bool:
        """Whether ONNX Runtime would quantize the activations to int8: for
        constant block-quantized experts, at accuracy level 4 or with 8-bit
        codes (see _prepare_nbits)."""
        if not constant or not self.block_size:
            return False
        return self.accuracy_level == 4 or 8 in self.proj_bits[:2]

    def _prepare_panels(self, w, s, bits, E, N, K, nr, input_major):
        """Experts for the core's own decoder: signed codes in the GEMM
        engine's panel order (panels of nr outputs) and float32 scale tables,
        [E, panels, groups of inputs, nr] for output-major experts (stored
        [E, N, P]), [E, K, groups of outputs] for input-major ones (stored
        [E, K, P])."""
        block = self.block_size
        npad = -(-N // nr) * nr
        codes = np.empty((E, K * npad), dtype=np.int8)
        for e in range(E):
            if input_major:
                q = self._codes(w[e], bits, N, signed8=True).T
            else:
                q = self._codes(w[e], bits, K, signed8=block > 0)
            codes[e] = _panel_order(q, npad, nr)
        s32 = np.asarray(s, dtype=np.float32)
        if input_major:
            shift = block.bit_length() - 1
            groups = -(-npad // block)
            table = np.zeros((E, K, groups), dtype=np.float32)
            table[:, :, :s32.shape[2]] = s32
            return ("quant", codes, table.reshape(E, -1), N, K, core.SCALE_IN, shift, groups, E)
        if block == 0:
            s32, shift = s32[:, :, None], 62  # one group: all of K
        else:
            shift = block.bit_length() - 1
        groups = s32.shape[2]
        table = np.zeros((E, npad, groups), dtype=np.float32)
        table[:, :N] = s32
        table = table.reshape(E, npad // nr, nr, groups).transpose(0, 1, 3, 2)
        return ("quant", codes, np.ascontiguousarray(table).reshape(E, -1), N, K,
                core.SCALE_OUT, shift, groups, E)

    def _prepare_nbits(self, w, s, which, N, K, constant):
        """Output-major experts (stored [E, N, P]) in MatMulNBits's layout
        [N, blocks, block bytes] (offset codes, implicit zero point), one
        prepared matrix each: the final block padded with zero codes,
        signed INT8 moved to offset codes, per-row scales repeated over
        blocks of 128."""
        bits = self.proj_bits[which]
        block = self.block_size or 128
        if block > K:  # one block either way: the smallest that covers K
            block = max(16, 1 << (K - 1).bit_length())  # (not 2^31 bytes a row)
        nb = -(-K // block)
        blob = block * bits // 8
        zero = 0x88 if bits == 4 else 0x80
        # As ONNX Runtime: constant block-quantized experts take the int8
        # engine at accuracy level 4, and always for 8 bits; per-row experts,
        # and experts that are not initializers, stay in float32.
        if self.block_size == 0 or not constant:
            accuracy = 0
        elif bits == 8:
            accuracy = 4
        else:
            accuracy = 4 if self.accuracy_level == 4 else 0
        s32 = np.asarray(s, dtype=np.float32)
        prepared = _PreparedExperts()
        for e in range(w.shape[0]):
            packed = np.full((N, nb * blob), zero, dtype=np.uint8)
            stored = w[e]
            if bits == 8 and self.block_size:
                stored = stored ^ np.uint8(0x80)  # two's complement -> offset codes
            packed[:, :stored.shape[1]] = stored
            if bits == 4 and K % 2:
                packed[:, K // 2] = (packed[:, K // 2] & 0x0F) | 0x80
            scales = (np.repeat(s32[e][:, None], nb, axis=1) if self.block_size == 0
                      else np.ascontiguousarray(s32[e]))
            matrix = nbits_core.prepare(packed.reshape(N, nb, blob), scales, None, bits, block,
                                        K, N, accuracy)
            prepared.append(matrix)
            prepared.nbytes += packed.nbytes + scales.nbytes + matrix.prepared_bytes
        return prepared

    @staticmethod
    def _codes(w, bits, columns, signed8):
        """Signed int8 codes [R, columns] of one expert's stored bytes."""
        if bits == 4:
            q = np.empty((w.shape[0], 2 * w.shape[1]), dtype=np.uint8)
            q[:, 0::2] = w & 15
            q[:, 1::2] = w >> 4
            return (q[:, :columns].view(np.int8) - np.int8(8))
        if signed8:
            return w[:, :columns].view(np.int8)
        return (w[:, :columns] ^ np.uint8(128)).view(np.int8)


class _PreparedExperts(list):
    """One MatMulNBits prepared matrix per expert, and their bytes."""

    nbytes = 0


def _panel_order(q, npad, nr):
    """An [N, K] code matrix in the engine's packed-B order: blocks of KC
    inputs, each a row of panels of nr outputs, each panel kc x nr."""
    N, K = q.shape
    padded = np.zeros((npad, K), dtype=np.int8)
    padded[:N] = q
    panels = padded.reshape(npad // nr, nr, K)
    parts = [panels[:, :, pc:pc + core.KC].transpose(0, 2, 1).reshape(-1)
             for pc in range(0, K, core.KC)]
    return np.concatenate(parts) if parts else np.empty(0, np.int8)


KERNELS = {
    "RegisterMoEKernel": (MoE,),
    "RegisterQMoEKernel": (QMoE,),
}
