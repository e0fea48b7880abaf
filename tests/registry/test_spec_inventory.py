"""``registered_kernels()`` covers the specification's complete inventory
(registering_kernels.txt, "Complete RegisterAllKernels inventory") for both
policies: every (registrar, domain, operator) row is installed."""

from __future__ import annotations

import pytest

import onnx_light_cpu as olc

# Registrar -> (domain, operators), as the specification's table lists them.
SPEC_INVENTORY = {
    "RegisterAbsKernel": ("ai.onnx", "Abs"),
    "RegisterAttentionKernel": ("ai.onnx", "Attention"),
    "RegisterLinearAttentionKernel": ("ai.onnx", "LinearAttention"),
    "RegisterBinaryKernels": ("ai.onnx", "Add, Sub, Mul, Div, Mod, Pow, Equal, Greater, "
                              "GreaterOrEqual, Less, LessOrEqual, And, Or, Xor, BitwiseAnd, "
                              "BitwiseOr, BitwiseXor, BitShift, PRelu"),
    "RegisterExpKernel": ("ai.onnx", "Exp"),
    "RegisterLogKernel": ("ai.onnx", "Log"),
    "RegisterGemmKernel": ("ai.onnx", "Gemm"),
    "RegisterCastKernel": ("ai.onnx", "Cast"),
    "RegisterConcatKernel": ("ai.onnx", "Concat"),
    "RegisterGatherKernel": ("ai.onnx", "Gather"),
    "RegisterNonZeroKernel": ("ai.onnx", "NonZero"),
    "RegisterReduceSumKernel": ("ai.onnx", "ReduceSum"),
    "RegisterScatterNDKernel": ("ai.onnx", "ScatterND"),
    "RegisterSliceKernel": ("ai.onnx", "Slice"),
    "RegisterSplitKernel": ("ai.onnx", "Split"),
    "RegisterMatMulKernel": ("ai.onnx", "MatMul"),
    "RegisterIntegerMatMulKernels": ("ai.onnx", "MatMulInteger, QLinearMatMul"),
    "RegisterNotKernel": ("ai.onnx", "Not"),
    "RegisterNormalizationKernels": ("ai.onnx", "BatchNormalization, GroupNormalization, "
                                     "InstanceNormalization, LayerNormalization, "
                                     "LpNormalization, MeanVarianceNormalization"),
    "RegisterRmsNormalizationKernel": ("ai.onnx", "RMSNormalization"),
    "RegisterSigmoidKernel": ("ai.onnx", "Sigmoid"),
    "RegisterTanhKernel": ("ai.onnx", "Tanh"),
    "RegisterSimplifiedLayerNormalizationKernel": ("ai.onnx", "SimplifiedLayerNormalization"),
    "RegisterSoftmaxKernel": ("ai.onnx", "Softmax"),
    "RegisterSwiGLUKernel": ("ai.onnx", "SwiGLU"),
    "RegisterTreeEnsembleKernel": ("ai.onnx.ml", "TreeEnsemble"),
    "RegisterVariadicElementwiseKernels": ("ai.onnx", "Sum, Mean, Min, Max"),
    "RegisterMicrosoftKernels": ("com.microsoft", "BiasGelu, CDist, CausalConvWithState, "
                                 "GroupQueryAttention, MultiHeadAttention, LinearAttention, "
                                 "SkipLayerNormalization, SkipSimplifiedLayerNormalization"),
    "RegisterMatMulNBitsKernel": ("com.microsoft", "MatMulNBits"),
    "RegisterGatherBlockQuantizedKernel": ("com.microsoft", "GatherBlockQuantized"),
    "RegisterMoEKernel": ("com.microsoft", "MoE"),
    "RegisterQMoEKernel": ("com.microsoft", "QMoE"),
}
# One registrar installs RotaryEmbedding in two domains.
ROTARY = {("RegisterRotaryEmbeddingKernels", domain, "RotaryEmbedding")
          for domain in ("ai.onnx", "com.microsoft")}


def _spec_rows() -> set[tuple[str, str, str]]:
    rows = set(ROTARY)
    for registrar, (domain, operators) in SPEC_INVENTORY.items():
        rows.update((registrar, domain, op.strip()) for op in operators.split(","))
    return rows


@pytest.mark.parametrize("policy", list(olc.MicrosoftKernelImplementation))
def test_every_specified_registration_is_shipped(policy):
    live = {(r.registrar, r.domain, r.op_type)
            for r in olc.registered_kernels(microsoft_implementation=policy)}
    assert sorted(_spec_rows() - live) == []
