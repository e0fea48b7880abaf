"""com.microsoft QAttention, the dynamically quantized BERT self-attention
that ``onnxruntime.quantization`` makes of Attention (the OPTIMIZED family;
the NAIVE one is in :mod:`onnx_light_cpu.naive.qattention`).

    acc = (input - input_zero_point) @ (weight - weight_zero_point)    int32
    q, k, v = float32(acc) * (weight_scale * input_scale) + bias       float32
    out = Attention's softmax(scale * Q Kᵀ + masks) V                  (B, S, H)

As ONNX Runtime 1.32's CPU kernel does (probed on single-node models; this
is the contract): ``input`` uint8 (int8 is this package's extension, ORT
has no kernel for it), ``weight`` (Hin, 3H) uint8 or int8, three equal
parts (no ``qkv_hidden_sizes``); ``bias`` (3H,) float32, required;
``input_scale`` and ``input_zero_point`` one element; ``weight_scale`` and
``weight_zero_point`` one element or (3H,) (per column), each on its own.
The scale of a column is float32(weight_scale * input_scale); the int32
product is converted to float32, multiplied by it, then the bias is added
(two float32 roundings, no fused multiply-add: bit-identical to ORT's
projection).  FLOAT only, as ORT's CPU (its schema lists float16, no CPU
kernel runs it).

The attention that follows is Attention's, the same code
(:class:`onnx_light_cpu.ops.microsoft_attention.MicrosoftAttentionBase`):
mask_index (B,), (2B,), (3B + 2,), (B, T), (B, S, T), (B|1, 1); ``scale``,
``mask_filter_value``, ``unidirectional``; ``past`` (2, B, N, P, H) and the
``present`` output.

The projection runs on the 8-bit engine MatMulInteger uses (the weight
packed once when it is an initializer) with MatMulIntegerToFloat's float
epilogue fused per tile (the quantization core's ``gemm_float``), the
attention on the shared attention engine.

Where this package differs from ONNX Runtime's CPU kernel:
- ``do_rotary=1`` and ``past_present_share_buffer=1`` raise
  NotImplementedError, as for Attention (ORT's QAttention ignores them);
- a batch of 0 gives empty outputs (ORT's process dies of a division by
  zero); an input hidden size of 0 gives q, k, v = bias (ORT: zeros).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import quantization as qcore
from .._kernels.engines import gemm_int8
from ._base import Attr, Input
from ._contract import REQUIRED
from .microsoft_attention import MicrosoftAttention, MicrosoftAttentionBase, Plan

T = TensorProto
QTYPES = (T.UINT8, T.INT8)
F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
ZERO = np.zeros(1, dtype=np.int64)


class QPlan(NamedTuple):
    """Attention's plan and the quantization parameters' forms."""

    attention: Plan
    per_column_scale: bool
    per_column_zero_point: bool


class QAttentionBase(MicrosoftAttentionBase):
    """Inputs, quantization checks and dequantization scales, shared by both
    families; subclasses implement ``_quantized_project``."""

    inputs = (Input("input", types=QTYPES, ranks=(3,)),
              Input("weight", types=QTYPES, ranks=(2,)),
              Input("bias", types=(T.FLOAT,), ranks=(1,)),
              Input("input_scale", like=2),
              Input("weight_scale", like=2),
              Input("mask_index", types=(T.INT32,), optional=True),
              Input("input_zero_point", like=0, optional=True),
              Input("weight_zero_point", like=1, optional=True),
              Input("past", like=2, ranks=(5,), optional=True))
    attributes = (Attr("num_heads", "int", REQUIRED),
                  Attr("scale", "float", 0.0),
                  Attr("mask_filter_value", "float", -10000.0),
                  Attr("unidirectional", "flag", 0),
                  Attr("past_present_share_buffer", "flag", 0),
                  Attr("do_rotary", "flag", 0))
    # Attention's input, weights, bias, mask_index, past in this node
    input_positions: ClassVar[tuple] = (0, 1, 2, 5, 8, None, None)
    qkv_hidden_sizes = ()  # three equal parts always

    def _plan(self, x, weight, bias, input_scale, weight_scale, mask_index=None,
              input_zero_point=None, weight_zero_point=None, past=None):
        total = weight.shape[1]
        for index, value in ((3, input_scale), (6, input_zero_point)):
            if value is not None and not self._one_element(value):
                raise ValueError(self._input_error(
                    index, f"has shape {value.shape}, expected a scalar or a 1-element vector "
                           "(per tensor)"))
        per_column = []
        for index, value in ((4, weight_scale), (7, weight_zero_point)):
            if value is None or self._one_element(value):
                per_column.append(False)
            elif value.shape == (total,):
                per_column.append(True)
            else:
                raise ValueError(self._input_error(
                    index, f"has shape {value.shape}, expected a scalar, a 1-element vector "
                           f"(per tensor) or ({total},) (per column of weight)"))
        plan = MicrosoftAttentionBase._plan(self, x, weight, bias, mask_index, past)
        return QPlan(plan._replace(element_type=T.FLOAT), *per_column)

    @staticmethod
    def _one_element(value) -> bool:
        return value.ndim == 0 or value.shape == (1,)

    def _execute(self, qplan, x, weight, bias, input_scale, weight_scale, mask_index=None,
                 input_zero_point=None, weight_zero_point=None, past=None):
        plan = qplan.attention
        self._check_sizes(plan, weight.shape[1], F32, past is not None)
        ranges = self._key_ranges(plan, mask_index)
        # ORT's dequantization scales: float32 products, one per column or one
        scales = weight_scale.reshape(-1) * input_scale.reshape(())
        za = 0 if input_zero_point is None else int(input_zero_point.reshape(()))
        if weight_zero_point is None:
            zb = np.zeros(1, I32)
        else:
            zb = weight_zero_point.reshape(-1).astype(I32)
        qkv = self._quantized_project(plan, x, weight, bias, scales, za, zb)
        return self._attention(plan, qkv, ranges, mask_index, past, None, F32)

    def _quantized_project(self, plan, x, weight, bias, scales, za, zb) -> np.ndarray:
        """float32 (B, S, 3H): the dequantized product plus the bias."""
        raise NotImplementedError


class QAttention(QAttentionBase, MicrosoftAttention):

    def _quantized_project(self, plan, x, weight, bias, scales, za, zb):
        b, s, k = plan.b, plan.s, plan.hin
        total = weight.shape[1]
        m = b * s
        used = gemm_int8.level_used(plan.level)
        self._record_path(("projection", x.dtype, weight.dtype, used), lambda: (
            f"qattention_projection_{x.dtype.name}_{weight.dtype.name}_"
            f"{simd.LEVEL_NAMES[used]}"))
        qkv = self._new_output((b, s, total), F32, 2)  # a kept scratch slot
        if not (m and total):
            return qkv
        flat = qkv.reshape(m, total)
        bias = np.ascontiguousarray(bias)
        scales = np.ascontiguousarray(scales)
        if not k:  # no products: float(0) * scale + bias, as the epilogue would
            np.add(np.float32(0) * scales, bias, out=flat)
            return qkv
        b_signed = weight.dtype == np.int8
        a_signed = x.dtype == np.int8
        packed, sums = self._prepared_input(
            ("qpacked", used), 1, weight,
            lambda: self._pack(np.ascontiguousarray(weight), b_signed, used, plan.proj_threads))
        # the engine's shifted zero points (see olc_gemm_int8.h): signed A
        # +128, unsigned B -128
        za_s = np.full(1, za + (128 if a_signed else 0), dtype=I32)
        zb_s = zb if b_signed else zb - 128
        a = np.ascontiguousarray(x).view(np.uint8)
        # float(acc) * scale + bias rewritten tile by tile while in cache
        # (MatMulIntegerToFloat's epilogue: multiply, then add, no FMA)
        qcore.gemm_float(a, ZERO, packed, sums, ZERO, za_s, zb_s, flat, 0, 0, 0,
                         1 if zb.size > 1 else 0, m, total, k, a_signed, used,
                         plan.proj_threads, scales, 0, 1 if scales.size > 1 else 0, bias)
        return qkv

    @staticmethod
    def _pack(weight, b_signed, used, threads):
        k, total = weight.shape
        packed = np.empty(gemm_int8.packed_size(k, total), dtype=np.int8)
        sums = np.empty(gemm_int8.colsum_size(total), dtype=np.int32)
        gemm_int8.pack_b(weight.view(np.uint8), ZERO, packed, sums, k, total, b_signed, used,
                         threads)
        return packed, sums


KERNELS = {
    "RegisterMicrosoftKernels": (QAttention,),
}
