"""com.microsoft MatMulNBits against ONNX Runtime (its contrib operator), the
NAIVE NumPy implementation and a dequantize-then-matmul oracle, at every
SIMD level and 1 and 2 threads.

Tolerances (float32): both sides accumulate in float32 in different
orders, so the difference grows with the output's magnitude and with K:
over the format sweep at most 1.1e-6 * max|y| (after the K scaling below),
2.2e-6 * max|y| at K=4096, accuracy level 0.  At level 4 the activations
are quantized exactly as ORT does (blocks of min(block_size, 256),
rint(a * 127 / max|a|)), so the int8 dot products agree and only the float
accumulation differs: the same bound holds.  Hence ``_F32_REL`` = 4e-6 *
max|y| * max(1, sqrt(K / 1024)).  FLOAT16 compares with ORT's float16
operator, BFLOAT16 with ORT's float32 operator on bfloat16-rounded inputs,
rounded back; both allow one unit in the last place of max|y| (plus the
float32 tolerance).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu import simd
from onnx_light_cpu._kernels import matmul_nbits as core
from onnx_light_cpu.reference.matmul_nbits import codes_matrix, dequantize, matmul_nbits
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level
from tests.differential import THREAD_COUNTS, assert_close, same_bits, same_bits_all

ort = pytest.importorskip("onnxruntime")

_F32_REL = 4e-6
M_VALUES = (1, 2, 3, 4, 5, 8, 33, 128)


# ---- building cases ----

def pack_codes(q: np.ndarray, bits: int, block: int, K: int) -> np.ndarray:
    """[N, K] codes -> B [N, nb, blob], low bits first (bits=3: 3 bits a code
    in one little-endian 96-bit block)."""
    N = q.shape[0]
    nb = -(-K // block)
    qq = np.zeros((N, nb * block), np.uint8)
    qq[:, :K] = q
    if bits == 3:
        bitplanes = ((qq.reshape(N, nb, block)[..., None] >> np.arange(3)) & 1).astype(np.uint8)
        return np.packbits(bitplanes.reshape(N, nb, block * 3), axis=-1, bitorder="little")
    per = 8 // bits
    qq = qq.reshape(N, nb, block // per, per)
    out = np.zeros(qq.shape[:3], np.uint8)
    for i in range(per):
        out |= (qq[..., i] << (bits * i)).astype(np.uint8)
    return out


def pack_zero_points(z: np.ndarray, bits: int) -> np.ndarray:
    """[N, nb] integer zero points -> packed uint8, each column from a byte."""
    if bits in (3, 8):
        return z.astype(np.uint8)
    N, nb = z.shape
    per = 8 // bits
    zz = np.zeros((N, -(-nb // per) * per), np.uint8)
    zz[:, :nb] = z
    return pack_codes(zz, bits, zz.shape[1], zz.shape[1]).reshape(N, -1)


def make_case(rng, *, M=3, K=100, N=7, bits=4, block=32, zp="none", bias=False,
              dtype=np.float32, lead=None):
    """Inputs (a, B, scales, zero_points, bias) and attributes of one case."""
    nb = -(-K // block)
    q = rng.integers(0, 1 << bits, (N, K)).astype(np.uint8)
    scales = (rng.random((N, nb)) * 0.1 + 0.01).astype(dtype)
    zero_points = None
    if zp == "uint8":
        zero_points = pack_zero_points(rng.integers(0, 1 << bits, (N, nb)), bits)
    elif zp == "float":
        zero_points = (rng.random((N, nb)) * ((1 << bits) - 1)).astype(dtype)
    shape = (lead if lead is not None else (M,)) + (K,)
    a = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(N).astype(dtype) if bias else None
    attrs = dict(K=K, N=N, bits=bits, block_size=block)
    return [a, pack_codes(q, bits, block, K), scales, zero_points, b], attrs


def nbits_model(inputs, constant=True, **attrs):
    """A one-node model; B, scales, zero points and bias are initializers
    when ``constant`` (what ORT needs to prepack, and we to prepare once)."""
    names = ["A", "B", "scales", "zp", "g_idx", "bias"]
    if len(inputs) == 5:  # (a, B, scales, zero_points, bias): no g_idx
        inputs = list(inputs[:4]) + [None, inputs[4]]
    used = [n if v is not None else "" for n, v in zip(names, inputs)]
    while used and not used[-1]:
        used.pop()
    node = oh.make_node("MatMulNBits", used, ["Y"], domain="com.microsoft", **attrs)
    graph_inputs, inits, feeds = [], [], {}
    for name, value in zip(used, inputs):
        if not name:
            continue
        if constant and name != "A":
            inits.append(numpy_helper.from_array(value, name))
        else:
            elem = oh.np_dtype_to_tensor_dtype(value.dtype)
            graph_inputs.append(oh.make_tensor_value_info(name, elem, value.shape))
            feeds[name] = value
    out = oh.make_tensor_value_info("Y", oh.np_dtype_to_tensor_dtype(inputs[0].dtype), None)
    graph = oh.make_graph([node], "nbits", graph_inputs, [out], initializer=inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                oh.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model, feeds


def run_ort(inputs, constant=True, **attrs):
    model, feeds = nbits_model(inputs, constant, **attrs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def run_ours(inputs, threads=1, constant=True, **attrs):
    model, feeds = nbits_model(inputs, constant, **attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    y = sess.run(None, feeds)[0]
    assert "onnx_light_cpu::MatMulNBits" in olc.used_kernel_names(sess)
    return y, olc.used_kernel_paths(sess)


def tolerance(expected: np.ndarray, K: int) -> float:
    peak = float(np.abs(expected.astype(np.float64)).max()) if expected.size else 1.0
    return _F32_REL * max(1.0, peak) * max(1.0, math.sqrt(K / 1024))


def check(inputs, oracle, *, constant=True, low_precision_ulp=None, expect_path=None, **attrs):
    """Ours at every SIMD level and 1/2 threads: close to ``oracle``, the same
    bits at both thread counts, inputs untouched."""
    originals = [None if v is None else v.copy() for v in inputs]
    atol = tolerance(oracle, attrs["K"])
    if low_precision_ulp is not None:
        peak = float(np.abs(oracle.astype(np.float64)).max()) if oracle.size else 1.0
        atol += low_precision_ulp * max(1.0, peak)
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                y, paths = run_ours(inputs, threads, constant, **attrs)
                assert y.dtype == oracle.dtype and y.shape == oracle.shape
                what = f"{attrs} at {level}, {threads} threads, {paths}"
                np.testing.assert_allclose(y.astype(np.float64), oracle.astype(np.float64),
                                           rtol=0, atol=atol, err_msg=what)
                if expect_path:
                    assert any(expect_path in p for p in paths), paths
                results.append(y)
            assert same_bits_all(results), f"thread count changed the result at {level}"
    for v, original in zip(inputs, originals):
        if v is not None:
            assert same_bits(v, original), "MatMulNBits modified an input"


# ---- ONNX Runtime, float32 ----

FORMATS = list(itertools.product((2, 4, 8), (16, 32, 64, 128, 256), ("none", "uint8", "float"),
                                 (0, 4)))


@pytest.mark.parametrize("bits,block,zp,level", FORMATS)
def test_formats_vs_ort(bits, block, zp, level):
    if bits == 8 and zp == "float":
        pytest.skip("ONNX Runtime's CPU kernel rejects float zero points with 8 bits")
    index = FORMATS.index((bits, block, zp, level))
    rng = np.random.default_rng(index)
    M = M_VALUES[index % len(M_VALUES)]
    K = block * int(rng.integers(1, 5)) + int(rng.integers(1, block))  # not a multiple
    N = 2 * int(rng.integers(0, 12)) + 1  # odd
    inputs, attrs = make_case(rng, M=M, K=K, N=N, bits=bits, block=block, zp=zp,
                              bias=index % 2 == 0)
    attrs["accuracy_level"] = level
    expected = run_ort(inputs, **attrs)
    int8 = level == 4 and zp != "float" and core.int8_format(bits, block)
    check(inputs, expected, expect_path="int8_prepared" if int8 else f"int{bits}_", **attrs)


@pytest.mark.parametrize("M", M_VALUES)
@pytest.mark.parametrize("level", (0, 4))
def test_rows_vs_ort(M, level):
    """Every row count of the issue on the 4-bit block-32 format."""
    rng = np.random.default_rng(100 + M)
    inputs, attrs = make_case(rng, M=M, K=333, N=21, bits=4, block=32, zp="uint8", bias=True)
    attrs["accuracy_level"] = level
    check(inputs, run_ort(inputs, **attrs), **attrs)


@pytest.mark.parametrize("M", (1, 3, 4, 9, 128))
@pytest.mark.parametrize("level", (0, 4))
def test_projection_sized_vs_ort(M, level):
    """A larger reduction (every route of the float engine on constant
    weights: direct, panels from the interleaved copy)."""
    rng = np.random.default_rng(200 + M)
    inputs, attrs = make_case(rng, M=M, K=4096, N=96, zp="none", bias=True)
    attrs["accuracy_level"] = level
    check(inputs, run_ort(inputs, **attrs), **attrs)


@pytest.mark.parametrize("K,N,block", [(1, 1, 16), (5, 3, 16), (31, 2, 32), (200, 1, 256)])
@pytest.mark.parametrize("level", (0, 4))
def test_small_sizes_vs_ort(K, N, block, level):
    rng = np.random.default_rng(K + N)
    for M in (1, 6, 20):
        inputs, attrs = make_case(rng, M=M, K=K, N=N, block=block, zp="uint8", bias=True)
        attrs["accuracy_level"] = level
        check(inputs, run_ort(inputs, **attrs), **attrs)


@pytest.mark.parametrize("bits,block", [(4, 512), (8, 1024), (4, 4096), (2, 128)])
@pytest.mark.parametrize("level", (0, 4))
def test_large_blocks_vs_ort(bits, block, level):
    """Blocks past 256: ORT's int8 path quantizes activations 256 at a time."""
    rng = np.random.default_rng(block + bits)
    inputs, attrs = make_case(rng, M=5, K=5000, N=7, bits=bits, block=block, zp="uint8",
                              bias=True)
    attrs["accuracy_level"] = level
    check(inputs, run_ort(inputs, **attrs), **attrs)


@pytest.mark.parametrize("lead", [(), (2, 3), (1, 4, 5)])
def test_activation_ranks(lead):
    rng = np.random.default_rng(7)
    inputs, attrs = make_case(rng, K=70, N=9, lead=lead, bias=True)
    check(inputs, run_ort(inputs, **attrs), **attrs)


@pytest.mark.parametrize("bits", (4, 8))
@pytest.mark.parametrize("M", (5, 40))
@pytest.mark.parametrize("level", (0, 4))
def test_weights_not_constant(level, M, bits):
    """Weights fed at run time: the float engine, as ORT (which only prepacks
    initializers), decoding B as it lies."""
    rng = np.random.default_rng(8)
    inputs, attrs = make_case(rng, M=M, K=200, N=37, bits=bits, zp="uint8", bias=True)
    attrs["accuracy_level"] = level
    expected = run_ort(inputs, constant=False, **attrs)
    check(inputs, expected, constant=False, expect_path=f"int{bits}_", **attrs)


@pytest.mark.parametrize("level", (1, 2, 3, 5))
def test_other_accuracy_levels_are_float(level):
    rng = np.random.default_rng(9)
    inputs, attrs = make_case(rng, M=4, K=96, N=5)
    attrs["accuracy_level"] = level
    check(inputs, run_ort(inputs, **attrs), expect_path="int4_", **attrs)


# ---- low precision ----

@pytest.mark.parametrize("level", (0, 4))
@pytest.mark.parametrize("zp", ("none", "uint8", "float"))
def test_float16_vs_ort(level, zp):
    rng = np.random.default_rng(10)
    inputs, attrs = make_case(rng, M=6, K=150, N=13, zp=zp, bias=True, dtype=np.float16)
    attrs["accuracy_level"] = level
    check(inputs, run_ort(inputs, **attrs), low_precision_ulp=2 ** -10, **attrs)


@pytest.mark.parametrize("level", (0, 4))
@pytest.mark.parametrize("zp", ("none", "uint8", "float"))
def test_bfloat16_vs_ort_float32(level, zp):
    rng = np.random.default_rng(11)
    inputs, attrs = make_case(rng, M=5, K=130, N=9, zp=zp, bias=True, dtype=bfloat16)
    attrs["accuracy_level"] = level
    widened = [None if v is None or v.dtype == np.uint8 else v.astype(np.float32)
               for v in inputs]
    widened[1] = inputs[1]
    if zp == "uint8":
        widened[3] = inputs[3]
    expected = run_ort(widened, **attrs).astype(bfloat16)
    check(inputs, expected, low_precision_ulp=2 ** -7, **attrs)


# ---- NAIVE, three bits ----

@pytest.mark.parametrize("bits,zp,level", list(itertools.product((2, 3, 4, 8),
                                                                  ("none", "uint8", "float"),
                                                                  (0, 4))))
def test_naive_agrees(bits, zp, level):
    if bits == 3 and zp == "float":
        pytest.skip("3-bit zero points are uint8")
    rng = np.random.default_rng(bits * 10 + level)
    block = 32 if bits == 3 else 64
    inputs, attrs = make_case(rng, M=7, K=150, N=10, bits=bits, block=block, zp=zp, bias=True)
    if bits == 3 and zp == "uint8":
        inputs[3] = rng.integers(0, 8, (10, 5)).astype(np.uint8)
    attrs["accuracy_level"] = level
    a, b, scales, zero_points, bias = inputs
    expected = matmul_nbits(a, b, scales, zero_points, bias, **attrs)
    check(inputs, expected, **attrs)


def test_three_bit_worked_example():
    """The spec's example: codes [1, 2, 5] begin with bytes 51 01."""
    q = np.zeros((1, 32), np.uint8)
    q[0, :3] = (1, 2, 5)
    b = pack_codes(q, 3, 32, 32)
    assert b.shape == (1, 1, 12)
    assert list(b[0, 0]) == [0x51, 0x01] + [0] * 10
    assert list(codes_matrix(b, 32, 1, 3, 32)[0, :4]) == [1, 2, 5, 0]


@pytest.mark.parametrize("zp", ("none", "uint8"))
@pytest.mark.parametrize("M", (1, 4, 9))
def test_three_bit_vs_dequantize_oracle(zp, M):
    rng = np.random.default_rng(20 + M)
    K, N = 100, 11  # four blocks, the last one padded
    q = rng.integers(0, 8, (N, K)).astype(np.uint8)
    z = rng.integers(0, 8, (N, 4)).astype(np.uint8) if zp == "uint8" else None
    scales = (rng.random((N, 4)) * 0.1).astype(np.float32)
    a = rng.standard_normal((M, K)).astype(np.float32)
    zz = np.full((N, 4), 4.0) if z is None else z.astype(np.float64)
    cols = np.arange(K) // 32
    w = (q - zz[:, cols]) * scales[:, cols].astype(np.float64)
    expected = (a.astype(np.float64) @ w.T).astype(np.float32)
    inputs = [a, pack_codes(q, 3, 32, K), scales, z, None]
    np.testing.assert_allclose(dequantize(inputs[1], scales, z, K, N, 3, 32),
                               w.T.astype(np.float32), rtol=1e-6)
    check(inputs, expected, K=K, N=N, bits=3, block_size=32, expect_path="int3_")


def test_int8_kinds_agree():
    """The int8 engine at every level (AVX-512 without VNNI included, under
    capped_simd_level("avx512")) gives the same result as the portable one,
    to float rounding."""
    rng = np.random.default_rng(30)
    for bits in (2, 4, 8):
        K, N, M = 200, 37, 6
        inputs, attrs = make_case(rng, M=M, K=K, N=N, bits=bits, block=32, zp="uint8")
        a, b, scales, zero_points = inputs[:4]
        from onnx_light_cpu.ops.matmul_nbits import MatMulNBits
        node = oh.make_node("MatMulNBits", ["A", "B", "S", "Z"], ["Y"],
                            domain="com.microsoft", accuracy_level=4, **attrs)
        op = MatMulNBits(node, {"opsets": {"com.microsoft": 1}, "log": None, "new_ops": None})
        prepared = core.prepare(b, scales, op._zero_points(zero_points), bits, 32, K, N, 4)
        results = {}
        for name in available_simd_levels():
            with capped_simd_level(name):
                y = np.empty((M, N), np.float32)
                results[core.matmul(prepared, a, None, y, simd.state.level, 1)] = y
        expected = matmul_nbits(*inputs, **attrs, accuracy_level=4)
        for label, y in results.items():
            np.testing.assert_allclose(y, expected, rtol=0, atol=tolerance(expected, K),
                                       err_msg=label)


@pytest.mark.parametrize("bits", (2, 4, 8))
def test_thread_count_invariance(bits):
    """Every route of the core (direct, panels, dot panels, int8) gives the
    same bits at 1, 2 and 3 threads, on sizes that do split."""
    rng = np.random.default_rng(35 + bits)
    K, N = 700, 301
    for M, level, panel_layout in ((1, 0, False), (3, 0, False), (40, 0, True), (40, 0, False),
                                   (2, 4, False), (40, 4, False)):
        inputs, attrs = make_case(rng, M=M, K=K, N=N, bits=bits, block=64, zp="uint8")
        a, b, scales, zero_points = inputs[:4]
        z = codes_matrix(zero_points, 11, N, bits, 11).astype(np.uint8) \
            if bits != 8 else zero_points
        prepared = core.prepare(b, scales, z, bits, 64, K, N, level, panel_layout)
        for simd_level in range(len(available_simd_levels())):
            results = []
            for threads in (1, 2, 3):
                y = np.empty((M, N), np.float32)
                label = core.matmul(prepared, a, None, y, simd_level, threads)
                results.append(y)
            for y in results[1:]:
                assert same_bits(results[0], y), (M, level, label)
            expected = matmul_nbits(*inputs[:4], None, **attrs, accuracy_level=level)
            np.testing.assert_allclose(results[0], expected, rtol=0,
                                       atol=tolerance(expected, K), err_msg=label)


def test_nonfinite_activations_keep_float_semantics():
    rng = np.random.default_rng(31)
    inputs, attrs = make_case(rng, M=4, K=64, N=5)
    inputs[0][1, 3] = np.inf
    inputs[0][2, 40] = np.nan
    for level in (0, 4):
        y, paths = run_ours(inputs, accuracy_level=level, **attrs)
        assert all(p.startswith("int4_panel" if level == 0 else "int8") for p in paths), paths
        assert np.isnan(y[2]).all() and np.isfinite(y[0]).all() and np.isfinite(y[3]).all()
        assert not np.isfinite(y[1]).any()
        # Regression: at level 4 the finite rows fell back to the float
        # path when another row was not finite (an int8-sized change).
        for row in (0, 3):
            alone, _ = run_ours([inputs[0][row:row + 1]] + inputs[1:], accuracy_level=level,
                                **attrs)
            np.testing.assert_allclose(y[row:row + 1], alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("M", (1, 20))
@pytest.mark.parametrize("level", (0, 4))
def test_nonfinite_scales_keep_float_semantics(M, level):
    rng = np.random.default_rng(36)
    inputs, attrs = make_case(rng, M=M, K=100, N=9, zp="uint8", bias=True)
    inputs[2][2, 0] = np.inf
    inputs[2][4, 1] = np.nan
    inputs[2][6, 3] = -np.inf
    attrs["accuracy_level"] = level
    a, b, scales, zero_points, bias = inputs
    expected = matmul_nbits(a, b, scales, zero_points, bias, **attrs)
    for threads in THREAD_COUNTS:
        y, paths = run_ours(inputs, threads, **attrs)
        assert all(p.startswith("int4_panel") for p in paths), paths
        assert_close(y, expected, "non-finite scales", (0, tolerance(
            expected[np.isfinite(expected)], 100)))


def test_prepared_once_and_reported():
    rng = np.random.default_rng(32)
    inputs, attrs = make_case(rng, M=3, K=256, N=40)
    model, feeds = nbits_model(inputs, accuracy_level=4, **attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    sess.run(None, feeds)
    op = next(n for n in sess.rt_nodes_ if type(n).__name__ == "MatMulNBits")
    prepared = op._prepared
    assert prepared is not None and op.prepared_bytes > 0 and op.scratch_bytes > 0
    sess.run(None, feeds)
    assert op._prepared is prepared


def test_omitted_projection():
    rng = np.random.default_rng(33)
    inputs, attrs = make_case(rng, M=3, K=64, N=5, bias=True)
    inputs[1] = np.zeros((5, 0, 16), np.uint8)
    inputs[2] = np.zeros((0,), np.float32)
    y, paths = run_ours(inputs, constant=False, **attrs)
    np.testing.assert_array_equal(y, np.broadcast_to(inputs[4], (3, 5)))
    expected = run_ort(inputs, constant=False, **attrs)
    np.testing.assert_array_equal(y, expected)


def test_empty_rows():
    rng = np.random.default_rng(34)
    inputs, attrs = make_case(rng, lead=(0, 2), K=40, N=6)
    y, _ = run_ours(inputs, **attrs)
    assert y.shape == (0, 2, 6)


# ---- bad input ----

def _bad(inputs, exc, match, **attrs):
    with pytest.raises(exc, match=match):
        run_ours(inputs, constant=False, **attrs)


def test_bad_attributes():
    rng = np.random.default_rng(40)
    inputs, attrs = make_case(rng, K=64, N=4)
    _bad(inputs, ValueError, "bits", **{**attrs, "bits": 5})
    _bad(inputs, ValueError, "block_size", **{**attrs, "block_size": 24})
    _bad(inputs, ValueError, "block_size", **{**attrs, "block_size": 8})
    _bad(inputs, ValueError, "bits=3 takes block_size 32", **{**attrs, "bits": 3, "block_size": 64})
    _bad(inputs, ValueError, "weight_prepacked", **attrs, weight_prepacked=1)
    _bad(inputs, ValueError, "overflow", **{**attrs, "K": 1 << 40, "N": 1 << 40})


def test_bad_inputs():
    rng = np.random.default_rng(41)
    inputs, attrs = make_case(rng, K=64, N=4, zp="uint8", bias=True)
    a, b, scales, zp, bias = inputs
    _bad([a.astype(np.float64), b, scales.astype(np.float64), None, None], TypeError,
         "input 0", **attrs)
    _bad([a, b, scales.astype(np.float16), None, None], TypeError, "input 2", **attrs)
    _bad([a[:, :10], b, scales, None, None], ValueError, "last dimension K", **attrs)
    _bad([a, b[:, :1], scales, None, None], ValueError, "input 1", **attrs)
    _bad([a, b.astype(np.int8), scales, None, None], TypeError, "input 1", **attrs)
    _bad([a, b, scales[:, :1], None, None], ValueError, "input 2", **attrs)
    _bad([a, b, scales, zp[:, :0], None], ValueError, "input 3", **attrs)
    _bad([a, b, scales, zp.astype(np.int32), None], TypeError, "input 3", **attrs)
    _bad([a, b, scales, zp, bias[:2]], ValueError, "input 5", **attrs)
    _bad([a, b, scales, zp, bias.astype(np.float16)], TypeError, "input 5", **attrs)
    g_idx = np.zeros(64, np.int32)
    for bad, exc, match in ((g_idx[:63], ValueError, r"input 4 .*shape \(64,\)"),
                            (g_idx.reshape(8, 8), ValueError, "input 4"),
                            (g_idx.astype(np.int64), TypeError, "input 4"),
                            (g_idx - 1, ValueError, r"input 4 .*\[0, 2\)"),
                            (g_idx + 2, ValueError, r"input 4 .*\[0, 2\)")):
        for constant in (False, True):
            with pytest.raises(exc, match=match) as info:
                run_ours([a, b, scales, zp, bad, bias], constant=constant, **attrs)
            assert "MatMulNBits" in str(info.value)


def test_bad_three_bit_zero_points():
    rng = np.random.default_rng(42)
    inputs, attrs = make_case(rng, K=64, N=4, bits=3, block=32)
    inputs[3] = np.full((4, 2), 8, np.uint8)
    _bad(inputs, ValueError, r"\[0, 7\]", **attrs)


# ---- the exhaustive sweep ----

@pytest.mark.slow
@pytest.mark.parametrize("bits,block,zp,level", FORMATS)
@pytest.mark.parametrize("M", M_VALUES)
def test_sweep_vs_ort(bits, block, zp, level, M):
    if bits == 8 and zp == "float":
        pytest.skip("ONNX Runtime's CPU kernel rejects float zero points with 8 bits")
    rng = np.random.default_rng(M * 1000 + FORMATS.index((bits, block, zp, level)))
    K = block * int(rng.integers(1, 8)) + int(rng.integers(1, block))
    N = 2 * int(rng.integers(0, 40)) + 1
    inputs, attrs = make_case(rng, M=M, K=K, N=N, bits=bits, block=block, zp=zp, bias=True)
    attrs["accuracy_level"] = level
    check(inputs, run_ort(inputs, **attrs), **attrs)


# ---- g_idx ----

def g_idx_oracle(a, b, scales, zero_points, g_idx, bias, *, K, N, bits, block_size, **_):
    """(q - zp) * scales[n, g_idx[k]] in float64: packed zero points ignored
    (the implicit 2^(bits-1)), floating ones read at g_idx."""
    groups = g_idx[:K]
    nb = -(-K // block_size)
    q = codes_matrix(b, K, N, bits, block_size).astype(np.float64)
    s = scales.reshape(N, nb).astype(np.float64)[:, groups]
    z = (2.0 ** (bits - 1) if zero_points is None or zero_points.dtype == np.uint8
         else zero_points.reshape(N, nb).astype(np.float64)[:, groups])
    y = a.reshape(-1, K).astype(np.float64) @ ((q - z) * s).T
    if bias is not None:
        y += bias.astype(np.float64)
    return y.reshape(a.shape[:-1] + (N,)).astype(a.dtype)


def g_idx_case(rng, *, bits=4, block=32, zp="none", dtype=np.float32, M=5, K=100, N=9,
               padded=False):
    inputs, attrs = make_case(rng, M=M, K=K, N=N, bits=bits, block=block, zp=zp, bias=True,
                              dtype=dtype)
    if bits == 3 and zp == "uint8":
        inputs[3] = rng.integers(0, 8, inputs[2].shape).astype(np.uint8)
    nb = -(-K // block)
    g_idx = rng.integers(0, nb, nb * block if padded else K).astype(np.int32)
    a, b, scales, zero_points, bias = inputs
    return [a, b, scales, zero_points, g_idx, bias], attrs


@pytest.mark.parametrize("zp", ("none", "uint8", "float"))
@pytest.mark.parametrize("block,padded", ((16, False), (32, True), (128, False)))
@pytest.mark.parametrize("constant", (True, False))
def test_g_idx_vs_ort(zp, block, padded, constant):
    """4 bits (what ONNX Runtime's CPU kernel computes right): float32 and
    float16 against ORT."""
    rng = np.random.default_rng(block + padded)
    for dtype, ulp in ((np.float32, None), (np.float16, 2 ** -10)):
        inputs, attrs = g_idx_case(rng, block=block, zp=zp, dtype=dtype, padded=padded)
        expected = run_ort(inputs, constant, **attrs)
        check(inputs, expected, constant=constant, low_precision_ulp=ulp,
              expect_path="g_idx", **attrs)
        np.testing.assert_allclose(expected.astype(np.float64),
                                   g_idx_oracle(*inputs, **attrs).astype(np.float64),
                                   rtol=0, atol=tolerance(expected, attrs["K"]) + (ulp or 0) * 64)


@pytest.mark.parametrize("zp", ("none", "uint8", "float"))
def test_g_idx_bfloat16_vs_ort_float32(zp):
    rng = np.random.default_rng(50)
    inputs, attrs = g_idx_case(rng, zp=zp, dtype=bfloat16)
    widened = [v if v is None or v.dtype in (np.uint8, np.int32) else v.astype(np.float32)
               for v in inputs]
    expected = run_ort(widened, **attrs).astype(bfloat16)
    check(inputs, expected, low_precision_ulp=2 ** -7, expect_path="g_idx", **attrs)


@pytest.mark.parametrize("bits,zp", [(2, "none"), (2, "uint8"), (2, "float"), (3, "none"),
                                     (3, "uint8"), (8, "none"), (8, "uint8"), (8, "float")])
def test_g_idx_other_bits_vs_oracle(bits, zp):
    """ONNX Runtime 1.32 rejects 8 bits with g_idx and reads 2-bit codes as
    nibbles: these follow the documented dequantization (float64 oracle)."""
    rng = np.random.default_rng(60 + bits)
    block = 32 if bits == 3 else 64
    inputs, attrs = g_idx_case(rng, bits=bits, block=block, zp=zp, K=150)
    check(inputs, g_idx_oracle(*inputs, **attrs), expect_path="g_idx", **attrs)


def test_g_idx_prepared_once():
    """Constant weights are dequantized and packed for the GEMM engine once
    (K * N * 4 bytes kept, N rounded up to the engine's panel width)."""
    rng = np.random.default_rng(70)
    inputs, attrs = g_idx_case(rng, K=64, N=8)
    model, feeds = nbits_model(inputs, True, **attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    first = sess.run(None, feeds)[0]
    (node,) = [n for n in sess.rt_nodes_ if hasattr(n, "prepared_bytes")]
    kept = node._g_idx_packed
    assert 64 * 8 * 4 <= node.prepared_bytes <= 64 * 32 * 4
    np.testing.assert_array_equal(sess.run(None, feeds)[0], first)
    assert node._g_idx_packed is kept


# ---- three-bit padding ----

def test_three_bit_nonzero_padding_rejected():
    """Bits after the last K element of a column (K=40: bits [24, 96) of the
    last block) must be zero; bit 23 (code 7's top bit) is data."""
    rng = np.random.default_rng(80)
    q = rng.integers(0, 8, (3, 40)).astype(np.uint8)
    b = pack_codes(q, 3, 32, 40)
    a = rng.standard_normal((2, 40)).astype(np.float32)
    scales = (rng.random((3, 2)) * 0.1).astype(np.float32)
    attrs = dict(K=40, N=3, bits=3, block_size=32)
    fine = b.copy()
    fine[2, 1, 2] |= 0x80 if not fine[2, 1, 2] & 0x80 else 0
    for constant in (True, False):
        run_ours([a, fine, scales, None, None], constant=constant, **attrs)
        for column, byte, bit in ((0, 3, 0x01), (1, 11, 0x80), (2, 7, 0x10)):
            bad = b.copy()
            bad[column, 1, byte] |= bit
            with pytest.raises(ValueError, match=rf"MatMulNBits: input 1 .*padding.*column "
                                                 rf"{column}"):
                run_ours([a, bad, scales, None, None], constant=constant, **attrs)
            with pytest.raises(ValueError, match="padding"):  # the g_idx path too
                run_ours([a, bad, scales, None, np.zeros(40, np.int32), None],
                         constant=constant, **attrs)
