"""com.microsoft MoE and QMoE: top-k mixture of experts.

Tokens ([T, H] or [B, S, H]) are routed by their router logits ([T, E]) to
k experts; each expert computes FC2(activation(FC1 x + b1)) + b2 on the
rows routed to it only, and the output row is the weighted sum of its
experts, summed in expert order (the same result at every thread count).
float16 and bfloat16 run in float32 and are rounded once at the end.

Routing (equal values: the higher expert index first, as ONNX Runtime):
- MoE: softmax over all E logits, the k most probable experts, optionally
  renormalised (``normalize_routing_weights``);
- QMoE, as ONNX Runtime 1.32's CPU kernel (where the spec says MoE's
  routing, ONNX Runtime wins): the k largest raw logits, weighted by the
  softmax over those k logits only (always normalised); with router
  weights (input 14, [T, E]) the same experts weighted by their router
  weights, renormalised only when ``normalize_routing_weights``=1; routes
  of weight <= 1e-8 (or NaN) are skipped.  A NaN logit never beats a number
  (ONNX Runtime's order there is unspecified).
``use_sparse_mixer``=1 is accepted with k=2 and routes as without it
(ONNX Runtime's CPU kernels parse it and never read it); any other k is an
error, as there.

One call of the core (``_kernels/moe``, olc_moe.h) runs the routing and
every expert.  MoE's projections run on the float32 GEMM engine
(olc_gemm.h), its constant expert matrices packed once per node and level
of code.  QMoE's experts are converted once per node (never dequantized
whole) for one of two engines:
- the MatMulNBits engines (olc_matmul_nbits.h), one matrix per expert and
  projection, run on the rows routed to that expert: few rows per expert
  (decode), zero points, and every projection where ONNX Runtime quantizes
  the activations to int8 (constant block-quantized weights, scales and
  zero points with K a multiple of the block: 8-bit codes at every
  accuracy level, 4-bit ones at accuracy level 4), so that the results
  agree with it;
- the core's own decoder: signed codes in the GEMM engine's panel order,
  decoded a bounded panel at a time into the micro-kernels' input, for
  many rows per expert (prefill) and for the input-major layout (whose
  scales vary along the outputs, which MatMulNBits cannot express).

QMoE codes (ONNX Runtime 1.32 is the contract where the spec differs):
2, 4 or 8 bits (``expert_weight_bits``, per projection
``fc*_expert_weight_bits``), 8 // bits a byte least significant first,
unsigned, value = (code - zero point) * scale.  The implicit zero point is
2^(bits-1) -- 128 for 8-bit codes with per-row and block scales alike (the
spec's two's complement INT8 blocks are not what ONNX Runtime or its
exports use).  Zero points (inputs 11-13, UINT8, output-major layout only):
per block [E, N, ceil(blocks * bits / 8)] packed along the blocks of a row,
per row (block_size 0) [E, ceil(N * bits / 8)] packed along the rows.
bits=2 is computed exactly; ONNX Runtime's block-wise 2-bit path (blocks
>= 32, large enough matrices) is an approximate lookup-table GEMM, measured
0.4-0.8 % of the largest output away (tests/ops/test_qmoe.py::test_two_bits).
With zero points on only some 4-bit projections, ONNX Runtime runs the
others through its re-quantizing Q4 GEMM (not reproduced).

Activations: relu (default), gelu (the tanh form, as ONNX Runtime's CPU
MoE), silu, identity and interleaved SwiGLU (``swiglu_fusion=1``: FC1 rows
alternate gate and linear) with ``activation_alpha`` (1), ``activation_beta``
(0) and ``swiglu_limit`` (none): G * sigmoid(alpha G) * (L + beta), G =
min(gate, limit), L = clamp(linear, -limit, limit).  QMoE's separate FC3
(the split builder; ONNX Runtime's CPU QMoE has none) gates the activation:
FC2(act(FC1 x + b1) * (FC3 x + b3)), or SwiGLU of (FC1 x + b1, FC3 x + b3)
for 'swiglu' with ``swiglu_fusion=0``.

bits=3 is ONNX Runtime 1.32's INT3 profile (its only BFLOAT16 QMoE):
FLOAT16/BFLOAT16 activations, fused SwiGLU, block 32/64/128, weights
[E, N, ceil(K * 3 / 8)] as a row-local 3-bit stream least significant bit
first (code p in bits [3p, 3p + 3)), value = (code - 4) * scale, scales
finite and >= 0, zero points (optional) all 4; routing there is MoE's
(softmax over all experts, renormalised when normalize_routing_weights).

Not supported (NotImplementedError): MoE's separate FC3, non-interleaved
SwiGLU, other activations; QMoE's non-integer quantization,
prepacked weights, zero points with input-major weights and the FP4/FP8
scale inputs (15 on).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import moe as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp, type_string

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
FLOAT32 = np.dtype(np.float32)
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
    attributes = (Attr("k", "int", 1), Attr("normalize_routing_weights", "flag", 0),
                  Attr("activation_type", "string", "relu"),
                  Attr("swiglu_fusion", "int", 0, allowed=(0, 1, 2)),
                  Attr("swiglu_limit", "float", None), Attr("activation_alpha", "float", 1.0),
                  Attr("activation_beta", "float", 0.0), Attr("use_sparse_mixer", "int", 0),
                  Attr("swiglu_limit_after_activation", "int", 0))
    # Multiply-adds one thread must have before a second one helps (as the
    # GEMM engine's MatMul: two threads from 64^3).
    min_work_per_thread: ClassVar[int] = 1 << 17

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        self._derive_attributes()
        # Valid values the kernel does not implement, raised by every run
        # (NotImplementedError, where KernelOp keeps ValueErrors).
        self._unsupported: str | None = self._unsupported_attribute()

    def _derive_attributes(self) -> None:
        """What the kernel reads of the parsed attributes."""
        self.normalize = self.normalize_routing_weights
        self.activation = self.activation_type
        limit = self.swiglu_limit
        self.limit = math.inf if limit is None else float(np.float32(limit))
        self.alpha = float(np.float32(self.activation_alpha))
        self.beta = float(np.float32(self.activation_beta))
        self.fused = self.activation == "swiglu" and self.swiglu_fusion == 1
        if self.k < 1:
            self._reject_attribute(f"attribute k must be >= 1, got {self.k!r}")
        # ONNX Runtime's CPU kernels accept the sparse mixer for top-2 only,
        # and then route exactly as without it
        if self.use_sparse_mixer and self.k != 2:
            self._reject_attribute(f"attribute use_sparse_mixer=1 needs k=2, got k={self.k}")

    def _unsupported_attribute(self) -> str | None:
        if self.activation not in ACTIVATIONS:
            return (f"attribute activation_type={self.activation!r} is not supported "
                    f"(expected one of {', '.join(ACTIVATIONS)})")
        if self.swiglu_fusion == 2:
            return ("attribute swiglu_fusion=2 (non-interleaved SwiGLU) is not supported; "
                    "use swiglu_fusion=1")
        if self.swiglu_limit_after_activation:
            return "attribute swiglu_limit_after_activation=1 is not supported"
        return None

    def _run(self, *args):
        if self._unsupported is not None:
            raise NotImplementedError(f"{self.onnx_node.op_type}: {self._unsupported}")
        return super()._run(*args)

    # -- checks -------------------------------------------------------------

    def _shape(self, index: int, v: np.ndarray, shape: tuple, what: str) -> None:
        if v.shape != shape:
            raise ValueError(self._input_error(index, f"has shape {v.shape}, expected {shape} "
                                               f"({what})"))

    def _check_tokens(self, x, router, E: int) -> tuple[int, int]:
        """Token count and hidden size; the router must have [T, E]."""
        tokens = math.prod(x.shape[:-1])
        if router.shape[0] != tokens:
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

    def _forward(self, level, x, router, tokens, H, inter, fc1, b1, fc2, b2, fc3, b3,
                 routing=core.ROUTE_SOFTMAX, router_weights=None):
        """(output, path label of the MatMulNBits engine or None): the
        operator on the prepared projections (core.Projection)."""
        x32 = np.ascontiguousarray(x.reshape(tokens, H), dtype=np.float32)
        logits = np.ascontiguousarray(router, dtype=np.float32)
        if router_weights is not None:
            router_weights = np.ascontiguousarray(router_weights, dtype=np.float32)
        f = 2 if self.fused else 1
        work = tokens * self.k * H * inter * (f + 1 + (fc3 is not None))
        threads = self._num_threads(work, self.min_work_per_thread)
        if x.dtype == FLOAT32:
            y = self._new_output(x.shape, FLOAT32)
            out = y.reshape(tokens, H)
        else:
            out = np.empty((tokens, H), dtype=np.float32)
        path = core.forward(x32, logits, router_weights, fc1, b1, fc2, b2, fc3, b3, out, self.k,
                            routing, self.normalize, ACTIVATIONS[self.activation], self.fused,
                            self.alpha, self.beta, self.limit, level, threads)
        if x.dtype != FLOAT32:
            y = out.astype(x.dtype).reshape(x.shape)
        return y, path

    def prepared_bytes(self) -> int:
        """Bytes of the constant weights and biases prepared once for this
        node (0 when none)."""
        # arrays (biases) and core.Projection objects
        return sum(value.nbytes for value in self.__dict__.get("_prepared_inputs", {}).values())


class MoE(_MoEBase):
    """Float experts: FC1 [E, f*I, H] (f = 2 for interleaved SwiGLU),
    optional bias [E, f*I], FC2 [E, H, I], optional bias [E, H]."""

    inputs = (Input("input", types=FLOATS, ranks=(2, 3)),
              Input("router_probs", like=0, ranks=(2,)),
              Input("fc1_experts_weights", like=0, ranks=(3,)),
              Input("fc1_experts_bias", like=0, optional=True),
              Input("fc2_experts_weights", like=0, ranks=(3,)),
              Input("fc2_experts_bias", like=0, optional=True),
              # not supported: rejected whatever their type
              Input("fc3_experts_weights", optional=True),
              Input("fc3_experts_bias", optional=True))

    def _unsupported_attribute(self):
        error = super()._unsupported_attribute()
        if error is None and self.activation == "swiglu" and self.swiglu_fusion != 1:
            error = ("activation_type='swiglu' needs swiglu_fusion=1 (interleaved gate and "
                     "linear rows in FC1); separate FC3 weights are not supported")
        return error

    def _plan(self, x, router, w1, b1=None, w2=None, b2=None, w3=None, b3=None):
        """(E, tokens, H, inter) after the checks of the shapes."""
        if w3 is not None or b3 is not None:
            which = 6 if w3 is not None else 7
            raise NotImplementedError(self._input_error(
                which, "is given: separate FC3 weights are not supported (use interleaved "
                "SwiGLU, swiglu_fusion=1)"))
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
                self._shape(index, b, (E, rows), "[experts, rows of its projection]")
        return E, tokens, H, inter

    def _execute(self, plan, x, router, w1, b1=None, w2=None, b2=None, w3=None, b3=None):
        E, tokens, H, inter = plan
        level = simd.state.level
        # one packing per level of code (AVX-512 VNNI runs the AVX-512 code)
        used = core.level_used(level)
        self._record_path((x.dtype, self.activation, used), lambda: (
            f"moe_{x.dtype.name}_{self.activation}_{simd.LEVEL_NAMES[used]}"))
        fc1 = self._prepared_input(("fc1", used), 2, w1, lambda: self._pack(used, w1))
        fc2 = self._prepared_input(("fc2", used), 4, w2, lambda: self._pack(used, w2))
        y, _ = self._forward(level, x, router, tokens, H, inter, fc1, self._bias(3, b1), fc2,
                             self._bias(5, b2), None, None)
        return (y,)

    def _pack(self, level, w):
        w = np.ascontiguousarray(w)
        threads = self._num_threads(w.size, 1 << 20)
        return core.pack_float(w, ELEMENT_TYPES[w.dtype], level, threads)


def _is_power_of_two(n) -> bool:
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


def _packed(count: int, bits: int) -> int:
    """Bytes of ``count`` codes of ``bits`` bits (8 // bits a byte)."""
    return -(-count * bits // 8)


def _unpack(b: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` unsigned codes (uint8) along the last axis of
    bytes ``b``, 8 // bits a byte, least significant first."""
    if bits == 8:
        return b[..., :count]
    if bits == 3:  # a bit stream, code p in bits [3p, 3p + 3)
        stream = np.unpackbits(b, axis=-1, bitorder="little")[..., :3 * count]
        triples = stream.reshape(*b.shape[:-1], count, 3)
        return triples[..., 0] | (triples[..., 1] << 1) | (triples[..., 2] << 2)
    per = 8 // bits
    shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
    codes = (b[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return codes.reshape(*b.shape[:-1], -1)[..., :count]


def _pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Codes (uint8, last axis a multiple of 8 // bits) packed 8 // bits a
    byte, least significant first."""
    if bits == 8:
        return np.ascontiguousarray(codes)
    if bits == 3:
        stream = np.stack([codes & 1, (codes >> 1) & 1, codes >> 2], axis=-1)
        return np.packbits(stream.reshape(*codes.shape[:-1], -1), axis=-1, bitorder="little")
    per = 8 // bits
    c = codes.reshape(*codes.shape[:-1], -1, per)
    out = np.zeros(c.shape[:-1], dtype=np.uint8)
    for i in range(per):
        out |= c[..., i] << np.uint8(i * bits)
    return out


class QMoE(_MoEBase):
    """Quantized experts (UINT8 codes, float scales), in ONNX Runtime's raw
    output-major layout or, for block quantization, the split builder's
    input-major one (see the spec's "Microsoft QMoE")."""

    element_types = tuple(type_string(t) for t in FLOATS + (T.UINT8,))
    inputs = (Input("input", types=FLOATS, ranks=(2, 3)),
              Input("router_probs", like=0, ranks=(2,)),
              Input("fc1_experts_weights", types=(T.UINT8,), ranks=(3,)),
              Input("fc1_scales", types=FLOATS),
              Input("fc1_experts_bias", like=0, optional=True),
              Input("fc2_experts_weights", types=(T.UINT8,), ranks=(3,)),
              Input("fc2_scales", types=FLOATS),
              Input("fc2_experts_bias", like=0, optional=True),
              Input("fc3_experts_weights", types=(T.UINT8,), ranks=(3,), optional=True),
              Input("fc3_scales", types=FLOATS, optional=True),
              Input("fc3_experts_bias", like=0, optional=True),
              Input("fc1_zero_points", types=(T.UINT8,), optional=True),
              Input("fc2_zero_points", types=(T.UINT8,), optional=True),
              Input("fc3_zero_points", types=(T.UINT8,), optional=True),
              Input("router_weights", like=0, ranks=(2,), optional=True),
              # the FP4/FP8 global and activation scales: not supported
              Input("scales", optional=True, variadic=True))
    attributes = _MoEBase.attributes + (
        Attr("expert_weight_bits", "int", 4), Attr("block_size", "int", 0),
        Attr("accuracy_level", "int", 0), Attr("fc1_expert_weight_bits", "int", None),
        Attr("fc2_expert_weight_bits", "int", None), Attr("fc3_expert_weight_bits", "int", None),
        Attr("quant_type", "string", "int"), Attr("weights_prepacked", "int", 0))

    def _derive_attributes(self):
        super()._derive_attributes()
        self.bits = self.expert_weight_bits
        self.proj_bits = tuple(self.bits if b is None else b for b in (
            self.fc1_expert_weight_bits, self.fc2_expert_weight_bits,
            self.fc3_expert_weight_bits))
        if not (self.block_size == 0 or (_is_power_of_two(self.block_size)
                                         and self.block_size >= 16)):
            self._reject_attribute(f"attribute block_size must be 0 or a power of two >= 16, "
                                   f"got {self.block_size!r}")

    def _unsupported_attribute(self):
        error = super()._unsupported_attribute()
        if error is not None:
            return error
        if self.quant_type != "int":
            return f"attribute quant_type={self.quant_type!r} is not supported (only 'int')"
        if self.weights_prepacked == 1:
            return ("attribute weights_prepacked=1 (prepacked CUDA layouts) is not supported; "
                    "give raw weights")
        for name, bits in zip(("fc1", "fc2", "fc3"), self.proj_bits):
            if bits not in (2, 3, 4, 8):
                return (f"{name} weight bits {bits} (expert_weight_bits or "
                        f"{name}_expert_weight_bits) is not supported (2, 3, 4 or 8)")
        if 3 in self.proj_bits and (set(self.proj_bits) != {3} or not self.fused
                                    or self.block_size not in (32, 64, 128)):
            return ("3-bit weights (ONNX Runtime's INT3 profile) need expert_weight_bits=3 for "
                    "every projection, activation_type='swiglu' with swiglu_fusion=1 and "
                    "block_size 32, 64 or 128")
        return None  # swiglu_fusion=0 needs FC3: checked with the inputs

    def _execute(self, plan, x, router, w1, s1, b1=None, w2=None, s2=None, b2=None, w3=None,
                 s3=None, b3=None, *rest):
        E, tokens, H, inter, input_major, zps, router_weights = plan
        level = simd.state.level
        f = 2 if self.fused else 1
        # (projection, weights index, stored weights, scales, zero points, outputs N, inputs K)
        specs = [(0, 2, w1, s1, zps[0], f * inter, H), (1, 5, w2, s2, zps[1], H, inter)]
        if w3 is not None:
            specs.append((2, 8, w3, s3, zps[2], inter, H))
        routing = core.ROUTE_TOPK if router_weights is None else core.ROUTE_WEIGHTS
        if self.bits == 3:  # ONNX Runtime's INT3 profile routes as MoE
            routing = core.ROUTE_SOFTMAX
        biases = [self._bias(4, b1), self._bias(7, b2), self._bias(10, b3)]
        int8 = [self._int8_projection(*spec) for spec in specs]
        if not input_major and (tokens * self.k < PANEL_MIN_ROWS * E or any(int8)
                                or any(z is not None for z in zps)):
            projs = [self._prepared(("nbits", which, use), (index, index + 1, 11 + which),
                                    (w, s, z),
                                    lambda: self._prepare_nbits(w, s, z, which, N, K, use))
                     for (which, index, w, s, z, N, K), use in zip(specs, int8)]
            fc3 = projs[2] if w3 is not None else None
            y, path = self._forward(level, x, router, tokens, H, inter, projs[0], biases[0],
                                    projs[1], biases[1], fc3, biases[2], routing,
                                    router_weights)
            self._record_path(("nbits", path, x.dtype),
                              lambda: f"qmoe_{path or 'empty'}_{x.dtype.name}")
            return (y,)
        # one packing per level of code (AVX-512 VNNI runs the AVX-512 code)
        used = core.level_used(level)
        self._record_path(("panels", self.proj_bits, self.block_size, input_major, x.dtype, used),
                          lambda: self._panels_label(x.dtype, input_major, used))
        projs = [self._prepared(("panels", which, used), (index, index + 1), (w, s),
                                lambda: self._prepare_panels(w, s, self.proj_bits[which], N, K,
                                                             used, input_major))
                 for which, index, w, s, _, N, K in specs]
        fc3 = projs[2] if w3 is not None else None
        y, _ = self._forward(level, x, router, tokens, H, inter, projs[0], biases[0], projs[1],
                             biases[1], fc3, biases[2], routing, router_weights)
        return (y,)

    def _prepared(self, key, indices, values, prepare):
        """``prepare()`` kept for the node while every given input of
        ``indices`` (weights first) is an initializer, else run afresh."""
        if all(v is None or self._constant_input(i) is v for i, v in zip(indices, values)):
            return self._prepared_input(key, indices[0], values[0], prepare)
        return prepare()

    def _panels_label(self, dtype, input_major, used):
        block = f"block{self.block_size}" if self.block_size else "per_row"
        layout = "input_major" if input_major else "output_major"
        return (f"qmoe_int{self.bits}_{block}_{layout}_panels_{dtype.name}_"
                f"{simd.LEVEL_NAMES[used]}")

    # -- validation -----------------------------------------------------------

    def _plan(self, x, router, w1, s1, b1=None, w2=None, s2=None, b2=None, w3=None, s3=None,
              b3=None, *rest):
        """(E, tokens, H, inter, input_major, zero points, router weights)
        after the checks the declarations cannot make."""
        op = "QMoE"
        rest = list(rest) + [None] * (4 - len(rest))
        for index, v in enumerate(rest[4:], 15):
            if v is not None:
                raise NotImplementedError(self._input_error(
                    index, "is given: the FP4/FP8 global and activation scales are not "
                    "supported"))
        # empty zero points: the implicit ones
        zps = [None if v is None or v.size == 0 else v for v in rest[:3]]
        router_weights = rest[3]
        if (w3 is None) != (s3 is None):
            raise ValueError(self._input_error(
                8 if w3 is None else 9, "is missing: FC3 weights and scales come together"))
        if w3 is None and b3 is not None:
            raise ValueError(self._input_error(10, "is given without FC3 weights"))
        if w3 is None and zps[2] is not None:
            raise ValueError(self._input_error(13, "is given without FC3 weights"))
        has_fc3 = w3 is not None
        if has_fc3 and self.fused:
            raise NotImplementedError(self._input_error(
                8, "is given with fused SwiGLU (swiglu_fusion=1): separate FC3 weights and "
                "interleaved SwiGLU cannot be combined"))
        if self.activation == "swiglu" and not self.fused and not has_fc3:
            raise NotImplementedError(
                f"{op}: activation_type='swiglu' needs swiglu_fusion=1 (interleaved rows in "
                "FC1) or separate FC3 weights")
        if self.bits == 3:
            zps = self._int3_checks(x, s1, s2, zps, router_weights)
        E = w1.shape[0]
        tokens, H = self._check_tokens(x, router, E)
        if router_weights is not None and router_weights.shape != (tokens, E):
            raise ValueError(self._input_error(
                14, f"has shape {router_weights.shape}, expected {(tokens, E)} (tokens, "
                "experts)"))
        orientations = ("input", "output") if has_fc3 else ("output", "input")
        if self.block_size == 0 or self.fused or any(z is not None for z in zps):
            # per-row scales, fused SwiGLU and zero points exist in the
            # output-major layout only
            orientations = ("output",)
        errors = []
        for orientation in orientations:
            inter, error = self._fits(orientation, E, H, w1, s1, w2, s2, w3, s3, zps)
            if error is None:
                break
            errors.append((orientation, error))
        else:
            zp_index = next((11 + i for i, z in enumerate(zps) if z is not None), None)
            if (zp_index is not None and self.block_size and not self.fused
                    and self._fits("input", E, H, w1, s1, w2, s2, w3, s3, (None,) * 3)[1] is None):
                raise NotImplementedError(self._input_error(
                    zp_index, "is given with input-major (split builder) weights: zero points "
                    "are supported in the output-major layout only"))
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
                self._shape(index, b, (E, rows), "[experts, rows of its projection]")
        return E, tokens, H, inter, orientation == "input", zps, router_weights

    def _int3_checks(self, x, s1, s2, zps, router_weights):
        """ONNX Runtime's INT3 profile: FLOAT16/BFLOAT16, scales finite and
        >= 0, zero points (if any) all 4; returns the zero points as
        implicit ones."""
        if x.dtype == FLOAT32:
            raise NotImplementedError(self._input_error(
                0, "is float32: 3-bit weights (ONNX Runtime's INT3 profile) take float16 or "
                "bfloat16"))
        if router_weights is not None:
            raise NotImplementedError(self._input_error(
                14, "is given with 3-bit weights: the INT3 profile has no router weights"))
        for index, s in ((3, s1), (6, s2)):
            s32 = np.asarray(s, dtype=np.float32)
            if not (np.isfinite(s32).all() and (s32 >= 0).all()):
                raise ValueError(self._input_error(
                    index, "holds a negative or non-finite scale (3-bit weights need finite "
                    "scales >= 0)"))
        for which, z in enumerate(zps):
            if z is not None and (z != 4).any():
                raise ValueError(self._input_error(
                    11 + which, "holds a zero point other than 4 (3-bit weights: the zero "
                    "point is 4)"))
        return [None, None, None]

    def _fits(self, orientation, E, H, w1, s1, w2, s2, w3, s3, zps):
        """(inter_size, None) when every projection, scale and zero point
        fits the orientation, else (None, (input index, message))."""
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
        for which, ((index, w, sindex, s, rows, columns), bits) in enumerate(
                zip(logical, self.proj_bits)):
            if w is None:
                continue
            stored = (E, rows, _packed(columns, bits))
            if w.shape != stored:
                return None, (index, f"has shape {w.shape}, expected {stored}")
            nb = -(-columns // self.block_size) if self.block_size else 1
            scale_shape = (E, rows, nb) if self.block_size else (E, rows)
            if s.shape != scale_shape:
                return None, (sindex, f"has shape {s.shape}, expected {scale_shape}")
            zp = zps[which]
            if zp is not None:
                # ONNX Runtime's layouts: packed along the blocks of a row,
                # or (per-row scales) along the rows
                want = ((E, rows, _packed(nb, bits)) if self.block_size
                        else (E, _packed(rows, bits)))
                if zp.shape != want:
                    return None, (11 + which, f"has shape {zp.shape}, expected {want} (zero "
                                              f"points of {bits}-bit codes, "
                                              f"{8 // bits} a byte)")
        return inter, None

    # -- preparation ------------------------------------------------------------

    def _int8_projection(self, which, index, w, s, zp, N, K) -> bool:
        """Whether ONNX Runtime quantizes the activations of this projection
        to int8 (its MatMulNBits kernels): constant block-quantized weights,
        scales and zero points, K a multiple of the block, and 8-bit codes
        or 4-bit ones at accuracy level 4."""
        bits, block = self.proj_bits[which], self.block_size
        if not block or K % block:
            return False
        if not (bits == 8 or (bits == 4 and self.accuracy_level == 4)):
            return False
        return all(v is None or self._constant_input(i) is v
                   for i, v in ((index, w), (index + 1, s), (11 + which, zp)))

    def _prepare_panels(self, w, s, bits, N, K, level, input_major):
        """Experts for the core's own decoder: their signed codes (code -
        2^(bits-1)) [E, N, K] (output-major experts are stored [E, N, P],
        input-major ones [E, K, P]) and scales, laid out by the core for
        ``level``."""
        if input_major:
            codes = self._codes(w, bits, N).transpose(0, 2, 1)
        else:
            codes = self._codes(w, bits, K)
        return core.pack_codes(codes, s, self.block_size, input_major, level)

    def _prepare_nbits(self, w, s, zp, which, N, K, int8):
        """Output-major experts (stored [E, N, P]) in MatMulNBits's layout
        [E, N, blocks, block bytes] (unsigned codes, the final block padded
        with the zero point's code), with float32 scales and zero points
        [E, N, blocks] (per-row ones repeated over blocks of 128), for the
        int8 engine (``int8``) or the float one."""
        bits = self.proj_bits[which]
        block = self.block_size or 128
        if block > K:  # one block either way: the smallest that covers K
            block = max(16, 1 << (K - 1).bit_length())  # (not 2^31 bytes a row)
        nb = -(-K // block)
        E = w.shape[0]
        s32 = np.asarray(s, dtype=np.float32)
        if zp is None:
            z = None
            pad = np.full((E, N), 1 << (bits - 1), dtype=np.uint8)
        elif self.block_size:
            zq = _unpack(zp, bits, s32.shape[2])
            z = np.ascontiguousarray(zq, dtype=np.float32)
            pad = zq[:, :, -1]
        else:
            zq = _unpack(zp, bits, N)
            z = np.ascontiguousarray(np.repeat(zq[:, :, None], nb, axis=2), dtype=np.float32)
            pad = zq
        codes = np.empty((E, N, nb * block), dtype=np.uint8)
        codes[:, :, :K] = _unpack(w, bits, K)
        codes[:, :, K:] = pad[:, :, None]
        packed = _pack(codes, bits).reshape(E, N, nb, block * bits // 8)
        scales = (np.repeat(s32[:, :, None], nb, axis=2) if self.block_size == 0
                  else np.ascontiguousarray(s32))
        return core.prepare_nbits(packed, scales, z, bits, block, K, int8)

    @staticmethod
    def _codes(w, bits, columns):
        """Signed int8 codes (code - 2^(bits-1)) [..., R, columns] of stored
        bytes [..., R, P]."""
        if bits == 8:
            return (w[..., :columns] ^ np.uint8(128)).view(np.int8)
        return (_unpack(w, bits, columns).view(np.int8) - np.int8(1 << (bits - 1)))


KERNELS = {
    "RegisterMoEKernel": (MoE,),
    "RegisterQMoEKernel": (QMoE,),
}
