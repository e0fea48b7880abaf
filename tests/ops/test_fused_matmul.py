"""com.microsoft FusedMatMul and FusedGemm: differential tests against ONNX
Runtime 1.32 (float32, float16, double where it has it), bfloat16 against
ONNX Runtime's float32 on the rounded inputs; every transpose attribute
(transBatchA/B on rank 3 and 4, broadcast batch dimensions), every FusedGemm
activation with C absent, a row, a column, a scalar and a matrix; at every
SIMD level and 1/2 threads (our kernel must run); 1-D, empty, strided,
transposed-view, negative-stride, read-only inputs and a constant B; bad
input, one test per rejection, with the message."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import assert_close, check_node, layouts, node_model, ort_microsoft_node, run_ours

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
# Sums of K products in another order than ONNX Runtime's: the error grows
# with K and the magnitude of the terms (values ~1, K <= 300 here).
TOL = {
    np.dtype(np.float32): (2e-5, 2e-5),
    np.dtype(np.float16): (2e-3, 4e-3),
    np.dtype(bfloat16): (1.6e-2, 3e-2),
    np.dtype(np.float64): (1e-12, 1e-12),
}
ACTIVATIONS = {  # activation -> its activation_* attributes
    "Relu": {}, "Tanh": {}, "Sigmoid": {}, "Softplus": {}, "Softsign": {},
    "LeakyRelu": {"activation_alpha": 0.1}, "Elu": {"activation_alpha": 0.7},
    "ThresholdedRelu": {"activation_alpha": 0.3}, "Celu": {"activation_alpha": 1.3},
    "HardSigmoid": {"activation_alpha": 0.2, "activation_beta": 0.4},
    "Selu": {"activation_alpha": 1.67, "activation_gamma": 1.05},
    "ScaledTanh": {"activation_alpha": 1.5, "activation_beta": 0.6},
    "ParametricSoftplus": {"activation_alpha": 0.8, "activation_beta": 1.4},
}


def check(op, inputs, **attrs):
    want = ort_microsoft_node(op, inputs, **attrs)
    check_node(op, inputs, oracle=lambda *_: want, domain=MS, kernel=f"onnx_light_cpu::{op}",
               tolerance=TOL[inputs[0].dtype], **attrs)


def ours(op, inputs, **attrs):
    outputs, names, _ = run_ours(node_model(op, inputs, domain=MS, **attrs), inputs)
    assert names == [f"onnx_light_cpu::{op}"], names
    return outputs


def read_order(rank, batch_trans, trans):
    order = list(range(rank))
    if batch_trans and rank > 2:
        order = order[1:-1] + [0, rank - 1]
    if trans and rank >= 2:
        order[-1], order[-2] = order[-2], order[-1]
    return order


def stored(rng, read_shape, order, dtype):
    """An input whose axes, read in ``order``, have ``read_shape``."""
    shape = [0] * len(order)
    for position, axis in enumerate(order):
        shape[axis] = read_shape[position]
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def operands(rng, batch_a, batch_b, M, K, N, dtype, tba=0, tbb=0, ta=0, tb=0):
    a = stored(rng, batch_a + (M, K), read_order(len(batch_a) + 2, tba, ta), dtype)
    b = stored(rng, batch_b + (K, N), read_order(len(batch_b) + 2, tbb, tb), dtype)
    return a, b


# ------------------------------------------------------------------ FusedMatMul

BATCHES = [((), ()), ((3,), ()), ((), (2,)), ((2,), (2,)), ((2, 3), (2, 3)), ((1,), (3,)),
           ((3,), (1,)), ((2, 1), (1, 3)), ((4,), (2, 4))]
FLAGS = list(itertools.product([0, 1], repeat=4))


# transBatchA/B need inputs of one rank >= 3 (the rejection is tested below)
ATTRIBUTE_CASES = [(batches, flags) for batches in BATCHES for flags in FLAGS
                   if not (flags[0] or flags[1]) or len(batches[0]) == len(batches[1]) >= 1]


ATTRIBUTE_IDS = [f"{b}-tbA{f[0]}tbB{f[1]}tA{f[2]}tB{f[3]}" for b, f in ATTRIBUTE_CASES]


@pytest.mark.parametrize("batches,flags", ATTRIBUTE_CASES, ids=ATTRIBUTE_IDS)
def test_fused_matmul_attributes(batches, flags):
    tba, tbb, ta, tb = flags
    batch_a, batch_b = batches
    rng = np.random.default_rng(sum(flags) * 7 + len(batch_a))
    a, b = operands(rng, batch_a, batch_b, 5, 7, 6, np.float32, *flags)
    check("FusedMatMul", [a, b], alpha=0.75, transA=ta, transB=tb, transBatchA=tba,
          transBatchB=tbb)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("flags", [(0, 0, 0, 0), (1, 0, 1, 0), (0, 1, 0, 1), (1, 1, 1, 1)],
                         ids=str)
@pytest.mark.parametrize("batches", [((2, 3), (2, 3)), ((3,), (3,)), ((3, 2), (1, 2))], ids=str)
def test_fused_matmul_dtypes(dtype, flags, batches):
    rng = np.random.default_rng(11)
    a, b = operands(rng, *batches, 9, 33, 17, dtype, *flags)
    tba, tbb, ta, tb = flags
    check("FusedMatMul", [a, b], alpha=-1.25, transA=ta, transB=tb, transBatchA=tba,
          transBatchB=tbb)


@pytest.mark.parametrize("shapes", [((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)),
                                    ((2, 3, 4), (4,)), ((4,), (2, 4, 3))], ids=str)
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)], ids=str)
def test_fused_matmul_vectors(shapes, trans):
    """A 1-D operand: transA/transB apply only to operands of rank >= 2."""
    rng = np.random.default_rng(12)
    sa, sb = shapes
    ta, tb = trans
    a = rng.standard_normal(sa[:-2] + sa[-2:][::-1] if ta and len(sa) > 1 else sa)
    b = rng.standard_normal(sb[:-2] + sb[-2:][::-1] if tb and len(sb) > 1 else sb)
    check("FusedMatMul", [a.astype(np.float32), b.astype(np.float32)], alpha=2.0, transA=ta,
          transB=tb)


@pytest.mark.parametrize("shapes", [((0, 3), (3, 4)), ((2, 3), (3, 0)), ((2, 0), (0, 4)),
                                    ((2, 0, 3), (3, 4)), ((0, 2, 3), (0, 3, 4))], ids=str)
def test_fused_matmul_empty(shapes):
    a, b = (np.ones(s, np.float32) for s in shapes)
    check("FusedMatMul", [a, b], alpha=3.0)


@pytest.mark.parametrize("alpha", [float("inf"), float("nan")])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_fused_matmul_empty_k_non_finite_alpha(alpha, dtype):
    # no products: zeros, as ONNX Runtime gives, not alpha x 0 = NaN as
    # onnx.reference's FusedMatMul (fuzz finding F33)
    a, b = np.ones((1, 0), dtype), np.ones((0, 19), dtype)
    check("FusedMatMul", [a, b], alpha=alpha)
    assert not ours("FusedMatMul", [a, b], alpha=alpha)[0].any()


def test_fused_matmul_empty_trans_batch():
    a, b = np.ones((4, 0, 3), np.float32), np.ones((0, 3, 5), np.float32)
    check("FusedMatMul", [a, b], transBatchA=1)


@pytest.mark.parametrize("shape", [(1, 128, 3072, 768), (12, 128, 128, 64), (12, 128, 64, 128)],
                         ids=str)
def test_fused_matmul_large(shape):
    """Shapes of BERT (QK^T with transB, a projection): several threads' work."""
    batch, M, N, K = shape
    rng = np.random.default_rng(13)
    if batch == 1:
        a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N)) * 0.05
        check("FusedMatMul", [a.astype(np.float32), b.astype(np.float32)])
    else:
        a, b = rng.standard_normal((1, batch, M, K)), rng.standard_normal((1, batch, N, K))
        check("FusedMatMul", [a.astype(np.float32), b.astype(np.float32)], alpha=0.125,
              transB=1)


@pytest.mark.parametrize("name", ["fortran", "strided", "read-only", "byte offset 1",
                                  "odd byte strides"])
@pytest.mark.parametrize("flags", [(0, 0, 0, 0), (1, 1, 0, 1), (1, 0, 1, 1)], ids=str)
def test_fused_matmul_layouts(name, flags):
    rng = np.random.default_rng(14)
    a, b = operands(rng, (3, 2), (3, 2), 5, 9, 4, np.float32, *flags)
    tba, tbb, ta, tb = flags
    check("FusedMatMul", [dict(layouts(a))[name], dict(layouts(b))[name]], alpha=0.5,
          transA=ta, transB=tb, transBatchA=tba, transBatchB=tbb)


def test_fused_matmul_views():
    """Transposed views, negative strides and broadcast (stride 0) inputs,
    read as they lie (or copied where the engine cannot read them)."""
    rng = np.random.default_rng(15)
    a = rng.standard_normal((4, 6, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5, 3)).astype(np.float32)
    v6 = rng.standard_normal(6).astype(np.float32)
    cases = [
        (a.transpose(0, 2, 1), b, dict(transA=1)),
        (a, b[:, ::-1, :], {}),
        (a[::-1], b, {}),
        (a, np.broadcast_to(b[:1], b.shape), {}),
        (a[:, ::2, :], b, {}),
        (a[:, :1, :], b, {}),  # one row, strided: the one-row path
        (a[:1, :1, :], b[:1], {}),
        (a.transpose(1, 0, 2), b, dict(transBatchA=1)),
        # transA with a 1-D B: ONNX Runtime reads A reshaped, not transposed
        (a[:, :, ::-1], v6, dict(transA=1)),
        (a[:, ::2, :], b[0, :3, 0].copy(), dict(transA=1)),
        (a[0], v6[::-1], dict(transA=1)),
    ]
    for x, y, attrs in cases:
        check("FusedMatMul", [x, y], **attrs)


def test_fused_matmul_constant_b():
    """A constant B (an initializer): packed once per node, same results."""
    rng = np.random.default_rng(16)
    a = rng.standard_normal((2, 3, 7, 40)).astype(np.float32)
    for b, attrs in [(rng.standard_normal((40, 24)), {}), (rng.standard_normal((24, 40)),
                                                          dict(transB=1)),
                     (rng.standard_normal((40,)), {})]:
        b = b.astype(np.float32)
        want = ort_microsoft_node("FusedMatMul", [a, b], alpha=0.5, **attrs)[0]
        node = oh.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, alpha=0.5, **attrs)
        graph = oh.make_graph(
            [node], "g", [oh.make_tensor_value_info("a", onnx.TensorProto.FLOAT, None)],
            [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
            [onnx.numpy_helper.from_array(b, "b")])
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                    oh.make_opsetid(MS, 1)])
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
        olc.set_kernel_usage_recording(sess, True)
        for _ in range(2):
            got = sess.run(None, {"a": a})[0]
            assert_close(got, want, f"constant B {attrs}", TOL[np.dtype(np.float32)])
        assert "onnx_light_cpu::FusedMatMul" in olc.used_kernel_names(sess)


def test_fused_matmul_k_mismatch():
    with pytest.raises(ValueError, match=r"FusedMatMul: input 1 .*inner dimension 5 differs "
                                         r"from A's 4"):
        ours("FusedMatMul", [np.ones((3, 4), np.float32), np.ones((5, 2), np.float32)])


def test_fused_matmul_batch_mismatch():
    with pytest.raises(ValueError, match=r"FusedMatMul: input 1 .*do not broadcast"):
        ours("FusedMatMul", [np.ones((2, 3, 4), np.float32), np.ones((3, 4, 2), np.float32)])


@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((2, 3, 4), (4, 2)),
                                    ((2, 3, 4), (1, 2, 4, 2))], ids=str)
def test_fused_matmul_trans_batch_rank(shapes):
    a, b = (np.ones(s, np.float32) for s in shapes)
    with pytest.raises(ValueError, match=r"FusedMatMul: input 1 .*same rank >= 3"):
        ours("FusedMatMul", [a, b], transBatchB=1)


def test_fused_matmul_scalar_input():
    with pytest.raises(ValueError, match=r"FusedMatMul: input 0 .*at least one dimension"):
        ours("FusedMatMul", [np.array(1.0, np.float32), np.ones(3, np.float32)])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_fused_matmul_integer(dtype):
    with pytest.raises(TypeError, match=r"FusedMatMul: input 0 .*has element type"):
        ours("FusedMatMul", [np.ones((2, 3), dtype), np.ones((3, 2), dtype)])


def test_fused_matmul_type_mismatch():
    with pytest.raises(TypeError, match=r"FusedMatMul: input 1 .*expected float32 like input"):
        ours("FusedMatMul", [np.ones((2, 3), np.float32), np.ones((3, 2), np.float16)])


# ------------------------------------------------------------------ FusedGemm

C_SHAPES = [None, (6,), (5, 1), (1, 1), (5, 6), ()]


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("c_shape", C_SHAPES, ids=str)
def test_fused_gemm_activations(activation, c_shape):
    rng = np.random.default_rng(len(activation) + (len(c_shape) if c_shape else 9))
    a = (rng.standard_normal((5, 7)) * 1.5).astype(np.float32)
    b = rng.standard_normal((7, 6)).astype(np.float32)
    inputs = [a, b]
    if c_shape is not None:
        inputs.append(rng.standard_normal(c_shape).astype(np.float32))
    check("FusedGemm", inputs, activation=activation, alpha=0.9, beta=0.5,
          **ACTIVATIONS[activation])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)], ids=str)
@pytest.mark.parametrize("activation", ["Relu", "Tanh", "LeakyRelu", "Selu", "Softplus"])
def test_fused_gemm_dtypes(dtype, trans, activation):
    rng = np.random.default_rng(17)
    ta, tb = trans
    M, K, N = 33, 70, 19
    a = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32).astype(dtype)
    b = (rng.standard_normal((N, K) if tb else (K, N)) * 0.3).astype(np.float32).astype(dtype)
    c = rng.standard_normal((N,)).astype(np.float32).astype(dtype)
    check("FusedGemm", [a, b, c], activation=activation, transA=ta, transB=tb, alpha=1.0,
          beta=1.0, **ACTIVATIONS[activation])


@pytest.mark.parametrize("activation", ["Relu", "Sigmoid", "Elu"])
def test_fused_gemm_large(activation):
    """A BERT-sized Gemm: several threads' work, the activation parallel."""
    rng = np.random.default_rng(18)
    a = rng.standard_normal((256, 384)).astype(np.float32)
    b = (rng.standard_normal((384, 512)) * 0.05).astype(np.float32)
    c = rng.standard_normal((512,)).astype(np.float32)
    check("FusedGemm", [a, b, c], activation=activation, **ACTIVATIONS[activation])


@pytest.mark.parametrize("shapes", [((0, 3), (3, 4), None), ((2, 3), (3, 0), None),
                                    ((2, 0), (0, 4), (4,)), ((2, 0), (0, 4), None)], ids=str)
def test_fused_gemm_empty(shapes):
    a, b = np.ones(shapes[0], np.float32), np.ones(shapes[1], np.float32)
    inputs = [a, b] + ([np.full(shapes[2], -0.5, np.float32)] if shapes[2] else [])
    check("FusedGemm", inputs, activation="Sigmoid", beta=2.0)


@pytest.mark.parametrize("name", ["fortran", "strided", "read-only", "byte offset 1"])
def test_fused_gemm_layouts(name):
    rng = np.random.default_rng(19)
    a = rng.standard_normal((6, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    c = rng.standard_normal((6, 5)).astype(np.float32)
    laid = [dict(layouts(x))[name] for x in (a, b, c)]
    check("FusedGemm", laid, activation="LeakyRelu", activation_alpha=0.2, transA=0)


def test_fused_gemm_special_values():
    a = np.array([[1.0, np.inf], [np.nan, 1.0], [-1e30, 1.0]], np.float32)
    b = np.array([[1.0, -1.0], [0.0, 1.0]], np.float32)
    for activation in ["Tanh", "Sigmoid", "Softsign", "Softplus", "Elu"]:
        check("FusedGemm", [a, b], activation=activation, **ACTIVATIONS[activation])


def test_fused_gemm_requires_activation():
    with pytest.raises(ValueError, match=r"FusedGemm: attribute activation is required"):
        ours("FusedGemm", [np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)])


def test_fused_gemm_unknown_activation():
    with pytest.raises(ValueError, match=r"FusedGemm: attribute activation must be one of .*"
                                         r"got 'Gelu'"):
        ours("FusedGemm", [np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)],
             activation="Gelu")


@pytest.mark.parametrize("activation,missing", [("LeakyRelu", "alpha"), ("Selu", "gamma"),
                                                ("HardSigmoid", "beta")])
def test_fused_gemm_requires_activation_parameters(activation, missing):
    attrs = {k: v for k, v in ACTIVATIONS[activation].items() if not k.endswith(missing)}
    with pytest.raises(ValueError, match=rf"FusedGemm: attribute activation_{missing} is "
                                         rf"required by activation {activation}"):
        ours("FusedGemm", [np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)],
             activation=activation, **attrs)


def test_fused_gemm_k_mismatch():
    with pytest.raises(ValueError, match=r"FusedGemm: input 1 .*inner dimension 4 differs"):
        ours("FusedGemm", [np.ones((2, 3), np.float32), np.ones((4, 2), np.float32)],
             activation="Relu")


def test_fused_gemm_c_shape():
    with pytest.raises(ValueError, match=r"FusedGemm: input 2 .*not broadcastable"):
        ours("FusedGemm", [np.ones((2, 3), np.float32), np.ones((3, 4), np.float32),
                           np.ones((3,), np.float32)], activation="Relu")


@pytest.mark.parametrize("shape", [(3,), (2, 2, 3)], ids=str)
def test_fused_gemm_rank(shape):
    with pytest.raises(ValueError, match=r"FusedGemm: input 0 .*expected rank 2"):
        ours("FusedGemm", [np.ones(shape, np.float32), np.ones((3, 2), np.float32)],
             activation="Relu")


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_fused_gemm_types(dtype):
    with pytest.raises(TypeError, match=r"FusedGemm: input 0 .*has element type"):
        ours("FusedGemm", [np.ones((2, 3), dtype), np.ones((3, 2), dtype)], activation="Relu")


# ------------------------------------------------------------------ a BERT-like block

def test_bert_like_block_matches_ort():
    """Self-attention and FFN of one BERT layer as ONNX Runtime's optimizer
    leaves them without its Attention fusion: FusedMatMul for the scaled
    scores (transB) and the context, FusedGemm for a projection, FastGelu
    with bias, QuickGelu and com.microsoft Gelu; every node ours."""
    S, H, heads, ffn = 16, 64, 4, 128
    d = H // heads
    rng = np.random.default_rng(20)
    x = rng.standard_normal((1, S, H)).astype(np.float32)
    weights = {
        "wq": rng.standard_normal((H, H)) * 0.2, "wk": rng.standard_normal((H, H)) * 0.2,
        "wv": rng.standard_normal((H, H)) * 0.2, "w1": rng.standard_normal((H, ffn)) * 0.2,
        "b1": rng.standard_normal(ffn) * 0.1, "w2": rng.standard_normal((ffn, H)) * 0.2,
        "wp": rng.standard_normal((H, H)) * 0.2, "bp": rng.standard_normal(H) * 0.1,
        "shape": np.array([1, S, heads, d]), "back": np.array([1, S, H]),
        "flat": np.array([S, H]),
    }
    inits = [onnx.numpy_helper.from_array(
        v.astype(np.int64 if k in ("shape", "back", "flat") else np.float32), k)
        for k, v in weights.items()]
    nodes = []
    for name in "qkv":
        nodes += [oh.make_node("MatMul", ["x", f"w{name}"], [f"{name}0"]),
                  oh.make_node("Reshape", [f"{name}0", "shape"], [f"{name}1"]),
                  oh.make_node("Transpose", [f"{name}1"], [name], perm=[0, 2, 1, 3])]
    nodes += [
        oh.make_node("FusedMatMul", ["q", "k"], ["scores"], domain=MS, transB=1,
                     alpha=1.0 / np.sqrt(d)),
        oh.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        oh.make_node("FusedMatMul", ["probs", "v"], ["ctx0"], domain=MS),
        oh.make_node("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        oh.make_node("Reshape", ["ctx1", "flat"], ["ctx"]),
        oh.make_node("FusedGemm", ["ctx", "wp", "bp"], ["proj"], domain=MS,
                     activation="LeakyRelu", activation_alpha=0.01),
        oh.make_node("Reshape", ["proj", "back"], ["h"]),
        oh.make_node("MatMul", ["h", "w1"], ["f0"]),
        oh.make_node("FastGelu", ["f0", "b1"], ["f1"], domain=MS),
        oh.make_node("QuickGelu", ["f1"], ["f2"], domain=MS, alpha=1.5),
        oh.make_node("Gelu", ["f2"], ["f3"], domain=MS),
        oh.make_node("MatMul", ["f3", "w2"], ["y"]),
    ]
    graph = oh.make_graph(nodes, "bert_block",
                          [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, S, H])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                oh.make_opsetid(MS, 1)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    got = sess.run(None, {"x": x})[0]
    assert_close(got, want, "BERT-like block", (1e-4, 1e-5))
    used = set(olc.used_kernel_names(sess))
    for name in ("FusedMatMul", "FusedGemm", "FastGelu", "QuickGelu", "MicrosoftGelu"):
        assert f"onnx_light_cpu::{name}" in used, (name, used)
