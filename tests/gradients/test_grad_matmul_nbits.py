"""MatMulNBits' backward model (A and bias; B and scales constant): finite
differences of our float32 kernel, bits 2, 3, 4 and 8, K off the block,
ranks 2 and 3, bias present and absent, weights as initializers or inputs;
the dequantized W^T against the package's NumPy reference; half types
against the float32 backward; unsupported forms rejected."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto as T

import onnx_light_cpu as olc
from onnx_light_cpu.reference.matmul_nbits import dequantize

from gradcheck import check_gradients, one_node_model, ours, run_ort

# Y is linear in A and bias, so central differences with h = 0.5 have no
# truncation error: what remains is float32 rounding of Y (1e-7 |Y| over K
# terms) divided by 2h, below 1e-4 on these sizes (measured: a third).
TOL, STEP = (1e-4, 1e-4), 0.5
# ours against ONNX Runtime: the same float32 graph, its MatMul summed in
# another order at some SIMD levels (the scalar twin's: 5.6e-7 on a
# gradient of 0.12, terms up to 15 over K <= 64)
ORT_TOL = (1e-5, 1e-6)
BLOCK = 32


def pack(q: np.ndarray, bits: int) -> np.ndarray:
    """[N, K] codes -> B [N, ceil(K / 32), 4 * bits]: each block's codes as
    one little-endian bit string, code p at bits [bits p, bits (p + 1))."""
    n, k = q.shape
    blocks = -(-k // BLOCK)
    padded = np.zeros((n, blocks * BLOCK), np.int64)
    padded[:, :k] = q
    bit_planes = (padded.reshape(n, blocks, BLOCK, 1) >> np.arange(bits)) & 1
    return np.packbits(bit_planes.reshape(n, blocks, BLOCK * bits).astype(np.uint8),
                       axis=-1, bitorder="little")


def case(rng, *, bits, k, n, lead, bias, dtype=np.float32, constant=True, **attrs):
    t = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    blocks = -(-k // BLOCK)
    q = rng.integers(0, 2**bits, (n, k))
    b = pack(q, bits)
    scales = (rng.uniform(0.05, 0.2, (n, blocks))).astype(dtype)
    feeds = {"A": rng.standard_normal((*lead, k)).astype(dtype)}
    inputs = {"A": (t, [*lead, k]), "B": (T.UINT8, list(b.shape)),
              "scales": (t, list(scales.shape))}
    weights = {"B": b, "scales": scales}
    if bias:
        inputs["bias"] = (t, [n])
        feeds["bias"] = rng.standard_normal(n).astype(dtype)
    # zero_points and g_idx absent: bias is input 5
    node_inputs = ["A", "B", "scales"] + (["", "", "bias"] if bias else [])
    model = one_node_model("MatMulNBits", inputs, {"Y": (t, [*lead, n])},
                           initializers=weights if constant else None, node_inputs=node_inputs,
                           K=k, N=n, bits=bits, block_size=BLOCK, **attrs)
    if not constant:
        feeds.update(weights)
    return model, feeds, weights


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("k, lead, bias, constant", [(40, (3,), True, True),
                                                     (64, (2, 2), False, False)])
def test_matmul_nbits_gradient(bits, k, lead, bias, constant):
    rng = np.random.default_rng(bits * k)
    model, feeds, _ = case(rng, bits=bits, k=k, n=5, lead=lead, bias=bias, constant=constant)
    backward = check_gradients(model, feeds, tol=TOL, step=STEP, ort_tol=ORT_TOL)
    outputs = [o.name for o in backward.graph.output]
    assert outputs == (["grad_A", "grad_bias"] if bias else ["grad_A"])


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_matmul_nbits_dequantized_weights_match_reference(bits):
    """dY = identity gives dA = W^T exactly: the graph's dequantization is
    the package's NumPy reference, bit for bit."""
    rng = np.random.default_rng(bits)
    k, n = 70, 6
    model, feeds, weights = case(rng, bits=bits, k=k, n=n, lead=(n,), bias=False)
    backward = olc.gradient_model(model)
    dy = np.eye(n, dtype=np.float32)
    (got,) = ours(backward).run(None, {**feeds, "grad_Y": dy})
    want = dequantize(weights["B"], weights["scales"], None, k, n, bits, BLOCK).T
    np.testing.assert_array_equal(got, want)
    (from_ort,) = run_ort(backward, {**feeds, "grad_Y": dy})
    np.testing.assert_array_equal(from_ort, want)


@pytest.mark.parametrize("dtype", [np.float16, bfloat16])
def test_matmul_nbits_half_types_match_float32(dtype):
    rng = np.random.default_rng(7)
    model, feeds, weights = case(rng, bits=4, k=40, n=5, lead=(3,), bias=True, dtype=dtype)
    dy = rng.standard_normal((3, 5)).astype(dtype)
    backward = olc.gradient_model(model)
    onnx.checker.check_model(backward, full_check=True)
    got = ours(backward).run(None, {**feeds, "grad_Y": dy})
    # the float32 rule on the same values, rounded once
    model32, _, _ = case(np.random.default_rng(7), bits=4, k=40, n=5, lead=(3,), bias=True)
    model32.graph.initializer[1].CopyFrom(
        onnx.numpy_helper.from_array(weights["scales"].astype(np.float32), "scales"))
    want = ours(olc.gradient_model(model32)).run(
        None, {**{k: v.astype(np.float32) for k, v in feeds.items()},
               "grad_Y": dy.astype(np.float32)})
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, w.astype(dtype))


@pytest.mark.parametrize("attrs, extra, match", [
    ({"block_size": 64}, None, "block_size=64"),
    ({"weight_prepacked": 1}, None, "weight_prepacked"),
    ({}, "zero_points", "zero_points"),
    ({}, "g_idx", "g_idx"),
])
def test_matmul_nbits_unsupported_forms_are_rejected(attrs, extra, match):
    model, _, _ = case(np.random.default_rng(0), bits=4, k=64, n=4, lead=(2,), bias=False)
    node = model.graph.node[0]
    kept = [a for a in node.attribute if a.name not in attrs]
    del node.attribute[:]
    node.attribute.extend(kept + [onnx.helper.make_attribute(k, v) for k, v in attrs.items()])
    if extra:
        node.input.extend(["", ""][: (3 if extra == "zero_points" else 4) - len(node.input)])
        node.input.append(extra)
    with pytest.raises(NotImplementedError, match=f"MatMulNBits.*{match}"):
        olc.gradient_model(model)


def test_matmul_nbits_without_scales_is_rejected():
    model, _, _ = case(np.random.default_rng(0), bits=4, k=64, n=4, lead=(2,), bias=False)
    del model.graph.node[0].input[2]
    with pytest.raises(NotImplementedError, match="MatMulNBits.*scales"):
        olc.gradient_model(model)
