"""The quantization family (com.microsoft DynamicQuantizeMatMul,
MatMulIntegerToFloat): bit for bit against ONNX Runtime 1.32 across type
pairs, per-tensor / per-column / per-batch scales and zero points, bias,
float16 scales, batch and 1-D shapes, constant B, at every SIMD level and 1
and 2 threads (our kernel must run); a NumPy oracle where ONNX Runtime has no
kernel; bad input, one test per rejection."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.ops import quantization
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, ort_int8_weight_range, same_bits, unaligned

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
U8, S8, F32, F16 = np.uint8, np.int8, np.float32, np.float16


def kernel_name(op: str) -> str:
    """QuantizeLinear and DequantizeLinear are ai.onnx operators too: the
    com.microsoft kernels are named Microsoft<op>."""
    prefix = "Microsoft" if op in ("QuantizeLinear", "DequantizeLinear") else ""
    return f"onnx_light_cpu::{prefix}{op}"


def model(op, inputs, constant=(), **attrs):
    """A one-node model; None inputs are left out (empty names), inputs
    listed in ``constant`` are initializers."""
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    graph = oh.make_graph(
        [oh.make_node(op, names, ["y"], domain=MS, **attrs)], "quantization",
        [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(a.dtype), [None] * a.ndim)
         for i, (n, a) in enumerate(zip(names, inputs)) if a is not None and i not in constant],
        [oh.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)],
        initializer=[numpy_helper.from_array(inputs[i], names[i]) for i in constant])
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)])
    m.ir_version = 10
    return m


def feeds(inputs, constant=()):
    return {f"x{i}": np.array(a, order="C") for i, a in enumerate(inputs)
            if a is not None and i not in constant}


def ort_run(op, inputs, constant=(), **attrs):
    m = model(op, inputs, constant, **attrs)
    m.graph.output[0].ClearField("type")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds(inputs, constant))[0]


def ours(op, inputs, constant=(), threads=1, **attrs):
    sess = ReferenceEvaluator(model(op, inputs, constant, **attrs))
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    y = sess.run(None, {k: v for k, v in zip(
        [f"x{i}" for i in range(len(inputs))], inputs)
        if v is not None and int(k[1:]) not in constant})[0]
    assert kernel_name(op) in olc.used_kernel_names(sess), olc.used_kernel_names(sess)
    return y, olc.used_kernel_paths(sess)


def check(op, inputs, constant=(), expected=None, **attrs):
    """Ours bit for bit equal to ONNX Runtime (or ``expected``) at every SIMD
    level and thread count; inputs unmodified."""
    want = ort_run(op, inputs, constant, **attrs) if expected is None else expected
    originals = [None if a is None else a.copy() for a in inputs]
    for level in available_simd_levels():
        with capped_simd_level(level):
            for threads in THREAD_COUNTS:
                got, _ = ours(op, inputs, constant, threads, **attrs)
                assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
                assert same_bits(got, want), (
                    f"{op} at {level}, {threads} threads: max diff "
                    f"{np.nanmax(np.abs(got.astype(np.float64) - want))}")
    for a, o in zip(inputs, originals):
        assert a is None or same_bits(a, o), f"{op} modified an input"


def ints(rng, shape, dtype):
    """Random integers of dtype; int8 ones in the range ONNX Runtime sums exactly."""
    info = np.iinfo(dtype)
    lo, hi = ort_int8_weight_range() if dtype == S8 else (info.min, info.max)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


# (M, K, N): 1, odd, off the 16-column panel and the 4-deep K group; and
# one whose uint8 A the engine reads in place (rows a multiple of 8, K of 4)
SHAPES = [(1, 1, 1), (3, 7, 17), (9, 13, 31), (17, 64, 33), (40, 257, 47), (16, 64, 33)]


# ------------------------------------------------------ DynamicQuantizeMatMul

@pytest.mark.parametrize("bt", [U8, S8], ids=["u8", "s8"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("form", ["tensor", "column", "column_bias", "no_zp"])
def test_dynamic_quantize_matmul(bt, shape, form):
    rng = np.random.default_rng(sum(shape))
    M, K, N = shape
    a = (rng.standard_normal((M, K)) * 3 + 0.5).astype(F32)
    b = ints(rng, (K, N), bt)
    if form == "tensor":
        rest = [np.array(0.02, F32), ints(rng, (), bt)]
    elif form == "no_zp":
        rest = [np.array([0.02], F32)]
    else:
        rest = [(rng.random(N) * 0.01).astype(F32), ints(rng, (N,), bt)]
        if form == "column_bias":
            rest.append(rng.standard_normal(N).astype(F32))
    check("DynamicQuantizeMatMul", [a, b, *rest])


@pytest.mark.parametrize("values", ["zeros", "positive", "negative", "tiny", "constant"])
def test_dynamic_quantize_matmul_ranges(values):
    """The ranges that pin the zero point at 0 or 255, or the scale at 1."""
    rng = np.random.default_rng(1)
    a = {"zeros": np.zeros((4, 9), F32),
         "positive": np.abs(rng.standard_normal((4, 9))).astype(F32) + 1,
         "negative": -np.abs(rng.standard_normal((4, 9))).astype(F32) - 1,
         "tiny": np.full((4, 9), 1e-40, F32),
         "constant": np.full((4, 9), -3.25, F32)}[values]
    check("DynamicQuantizeMatMul", [a, ints(rng, (9, 5), S8), np.array(0.1, F32)])


def test_dynamic_quantize_matmul_rounding_ties():
    """Quotients exactly halfway between integers round to even."""
    a = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 255.0, -2.5, 3.5]], F32) * 0.5
    rng = np.random.default_rng(2)
    check("DynamicQuantizeMatMul", [a, ints(rng, (8, 3), U8), np.array(1.0, F32)])


@pytest.mark.parametrize("case", ["batched_b_per_batch", "batched_b_1d_scale",
                                  "batched_b_scale_unfused", "broadcast_b", "a_1d", "b_1d",
                                  "a_4d"])
def test_dynamic_quantize_matmul_shapes(case):
    rng = np.random.default_rng(3)
    a3 = rng.standard_normal((2, 3, 4)).astype(F32)
    b3 = ints(rng, (2, 4, 5), S8)
    inputs = {
        "batched_b_per_batch": [a3, b3, rng.random((2, 1, 5)).astype(F32),
                                ints(rng, (2, 1, 5), S8), rng.standard_normal(5).astype(F32)],
        # not ONNX Runtime's per-column forms for a 3-D B: scaled afterwards
        "batched_b_1d_scale": [a3, b3, rng.random(5).astype(F32)],
        "batched_b_scale_unfused": [a3, b3, rng.random((2, 1, 1)).astype(F32)],
        "broadcast_b": [a3, b3[0], rng.random(5).astype(F32)],
        "a_1d": [a3[0, 0], b3[0], rng.random(5).astype(F32)],
        "b_1d": [a3, b3[0, :, 0], rng.random(1).astype(F32)],
        "a_4d": [rng.standard_normal((2, 1, 3, 4)).astype(F32), ints(rng, (3, 4, 6), U8),
                 rng.random((3, 1, 6)).astype(F32), ints(rng, (3, 1, 6), U8)],
    }[case]
    check("DynamicQuantizeMatMul", inputs)


def test_dynamic_quantize_matmul_many_tasks():
    """A of several quantization tasks (16384 elements each) whose min and
    max sit in different tasks, enough of them for two threads
    (QUANTIZE_PER_THREAD): the same bits at 1 and 2 threads."""
    rng = np.random.default_rng(20)
    a = rng.standard_normal((700, 201)).astype(F32)
    assert a.size >= 2 * quantization.QUANTIZE_PER_THREAD
    a[3, 7], a[650, 100] = -9.5, 12.25
    check("DynamicQuantizeMatMul", [a, ints(rng, (201, 19), S8), rng.random(19).astype(F32)])


@pytest.mark.parametrize("bt", [U8, S8], ids=["u8", "s8"])
def test_dynamic_quantize_matmul_constant_b(bt):
    """B an initializer: packed once, the same results on every run."""
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((9, 40)).astype(F32), ints(rng, (40, 21), bt),
              rng.random(21).astype(F32), ints(rng, (21,), bt), rng.random(21).astype(F32)]
    check("DynamicQuantizeMatMul", inputs, constant=(1, 2, 3, 4))
    got, paths = ours("DynamicQuantizeMatMul", inputs, constant=(1, 2, 3, 4))
    assert any(p.endswith("_prepacked") for p in paths), paths


def test_dynamic_quantize_matmul_layouts():
    """A strided, unaligned and read-only: the same bits."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 10)).astype(F32)
    b = ints(rng, (10, 7), S8)
    want = ort_run("DynamicQuantizeMatMul", [a, b, np.array(0.1, F32)])
    wide = np.zeros((6, 20), F32)
    wide[:, ::2] = a
    ro = a.copy()
    ro.flags.writeable = False
    for x in (wide[:, ::2], unaligned(a), ro, np.asfortranarray(a)):
        got, _ = ours("DynamicQuantizeMatMul", [x, unaligned(b), np.array(0.1, F32)])
        assert same_bits(got, want)


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (2, 0, 4)], ids=str)
def test_dynamic_quantize_matmul_empty(shape):
    rng = np.random.default_rng(6)
    a = rng.standard_normal(shape).astype(F32)
    b = ints(rng, (shape[-1], 3), S8)
    bias = np.array([1.0, -2.0, 0.5], F32)
    # ONNX Runtime leaves a K = 0 product uninitialised: ours is the bias.
    want = np.broadcast_to(bias * np.float32(0), shape[:-1] + (3,)) + bias
    check("DynamicQuantizeMatMul", [a, b, np.array(0.5, F32), None, bias],
          expected=np.ascontiguousarray(want, dtype=F32))


# ------------------------------------------------------- MatMulIntegerToFloat

PAIRS_ORT = [(U8, U8), (U8, S8), (S8, S8)]


@pytest.mark.parametrize("pair", PAIRS_ORT, ids=lambda p: "x".join(np.dtype(d).name for d in p))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("form", ["tensor", "column", "row_a_scale", "no_zp"])
def test_matmul_integer_to_float(pair, shape, form):
    at, bt = pair
    rng = np.random.default_rng(sum(shape) + 7)
    M, K, N = shape
    a, b = ints(rng, (M, K), at), ints(rng, (K, N), bt)
    bias = rng.standard_normal(N).astype(F32)
    if form == "tensor":
        inputs = [a, b, np.array(0.05, F32), np.array([0.02], F32), ints(rng, (), at),
                  ints(rng, (1,), bt), bias]
    elif form == "column":
        inputs = [a, b, np.array(0.05, F32), (rng.random(N) * 0.01).astype(F32),
                  ints(rng, (1,), at), ints(rng, (N,), bt), bias]
    elif form == "row_a_scale":  # scaled after the bias, as ONNX Runtime does
        inputs = [a, b, rng.random((M, 1)).astype(F32), (rng.random(N) * 0.01).astype(F32),
                  None, ints(rng, (N,), bt), bias]
    else:
        inputs = [a, b, np.array(0.05, F32), np.array(0.5, F32)]
    check("MatMulIntegerToFloat", inputs)


@pytest.mark.parametrize("case", ["swapped_scales", "full_b_scale", "full_a_scale",
                                  "one_by_one_a_scale", "bias_2d", "batched",
                                  "batched_in_place", "float16", "float16_row_scale"])
def test_matmul_integer_to_float_forms(case):
    rng = np.random.default_rng(8)
    a, b = ints(rng, (3, 4), U8), ints(rng, (4, 5), S8)
    f = F32
    inputs = {
        # a 1-D a_scale of N elements is B's: ONNX Runtime swaps them
        "swapped_scales": [a, b, rng.random(5).astype(f), np.array(0.5, f)],
        "full_b_scale": [a, b, np.array(0.5, f), rng.random((3, 5)).astype(f)],
        "full_a_scale": [a, b, rng.random((3, 5)).astype(f), np.array(0.5, f)],
        "one_by_one_a_scale": [a, b, np.full((1, 1), 0.3, f), np.array(0.5, f)],
        "bias_2d": [a, b, np.array(0.5, f), np.array(0.5, f), None, None,
                    rng.random((1, 5)).astype(f)],
        "batched": [ints(rng, (2, 3, 4), U8), ints(rng, (2, 4, 5), U8), np.array(0.1, f),
                    rng.random((2, 1, 5)).astype(f), np.array(7, U8),
                    ints(rng, (2, 1, 5), U8), rng.random(5).astype(f)],
        "batched_in_place": [ints(rng, (3, 8, 4), U8), ints(rng, (3, 4, 5), S8),
                             np.array(0.1, f), rng.random((3, 1, 5)).astype(f),
                             np.array(7, U8), ints(rng, (3, 1, 5), S8)],
        "float16": [a, b, np.array(0.0123, F16), (rng.random(5) * 0.01).astype(F16),
                    np.array(3, U8), ints(rng, (5,), S8), rng.standard_normal(5).astype(F16)],
        "float16_row_scale": [a, b, rng.random((3, 1)).astype(F16),
                              rng.random(5).astype(F16)],
    }[case]
    check("MatMulIntegerToFloat", inputs)


def test_matmul_integer_to_float_int8_a_uint8_b():
    """ONNX Runtime has no kernel for int8 A with uint8 B: a NumPy oracle."""
    rng = np.random.default_rng(9)
    a, b = ints(rng, (7, 19), S8), ints(rng, (19, 18), U8)
    za, zb = ints(rng, (), S8), ints(rng, (18,), U8)
    a_s, b_s = np.float32(0.03), (rng.random(18) * 0.1).astype(F32)
    bias = rng.standard_normal(18).astype(F32)
    acc = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    want = acc.astype(F32) * (a_s * b_s) + bias
    check("MatMulIntegerToFloat", [a, b, np.array(a_s), b_s, za, zb, bias], expected=want)


def test_matmul_integer_to_float_constant_b():
    rng = np.random.default_rng(10)
    inputs = [ints(rng, (5, 70), U8), ints(rng, (70, 33), S8), np.array(0.1, F32),
              rng.random(33).astype(F32), np.array(4, U8), ints(rng, (33,), S8)]
    check("MatMulIntegerToFloat", inputs, constant=(1, 3, 5))


def test_matmul_integer_to_float_prepares_constants_once():
    """Zero points, b_scale and bias that are initializers are prepared once
    per node; the same inputs fed per run are read afresh on every run."""
    rng = np.random.default_rng(11)
    b, b_scale, zb, bias = (ints(rng, (70, 33), S8), rng.random(33).astype(F32),
                            ints(rng, (33,), S8), rng.standard_normal(33).astype(F32))
    first = [ints(rng, (5, 70), U8), b, np.array(0.1, F32), b_scale, np.array(4, U8), zb, bias]
    for constant in ((1, 3, 4, 5, 6), (1,)):
        sess = ReferenceEvaluator(model("MatMulIntegerToFloat", first, constant))
        olc.register_kernels_for_session(sess)
        olc.set_kernel_usage_recording(sess, True)
        for run in range(3):
            inputs = list(first)
            if run:  # new values for every input that is fed
                inputs[0] = ints(rng, (5, 70), U8)
                if 4 not in constant:
                    inputs[4], inputs[5] = np.array(run + 7, U8), ints(rng, (33,), S8)
                    inputs[3] = rng.random(33).astype(F32)
                    inputs[6] = rng.standard_normal(33).astype(F32)
            got = sess.run(None, feeds(inputs, constant))[0]
            want = ort_run("MatMulIntegerToFloat", inputs, constant)
            assert same_bits(got, want), f"run {run}, constant inputs {constant}"
        assert "onnx_light_cpu::MatMulIntegerToFloat" in olc.used_kernel_names(sess)
        node = sess.rt_nodes_[0]
        prepared = set(getattr(node, "_prepared_inputs", {}))
        shifted = {k for k in prepared if isinstance(k, tuple) and k[0] == "zero point"}
        assert prepared - shifted == ({"b_scale", "bias"} if 6 in constant else set()), prepared
        assert len(shifted) == (2 if 4 in constant else 0), shifted


def test_large_float_outputs_stream_the_same_bits():
    """An output of 8 MB or more is written with streaming stores (whole
    cache lines, olc_gemm_int8.h) into a buffer on a 64-byte boundary: the
    same bits as ONNX Runtime at every level and thread count, and the
    buffer comes back to the pool on the next run."""
    rng = np.random.default_rng(12)
    M, K, N = 2048, 8, 1024  # 8 MB of float32
    inputs = [ints(rng, (M, K), U8), ints(rng, (K, N), S8), np.array(0.05, F32),
              (rng.random(N) * 0.01).astype(F32), np.array(3, U8), ints(rng, (N,), S8),
              rng.standard_normal(N).astype(F32)]
    check("MatMulIntegerToFloat", inputs)
    sess = ReferenceEvaluator(model("MatMulIntegerToFloat", inputs))
    olc.register_kernels_for_session(sess)
    y = sess.run(None, feeds(inputs))[0]
    address = y.ctypes.data
    assert address % 64 == 0
    del y
    assert sess.run(None, feeds(inputs))[0].ctypes.data == address


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_tiles_finished_in_registers(bias):
    """At the VNNI level whole 32-column tiles are finished in the micro-kernel's
    registers (olc_i8_out), the rest by the C epilogue: the same bits as ONNX
    Runtime for both, with a last row block of 3 rows (A packed), negative
    multipliers on zero sums (-0.0 kept without a bias) and rows off the
    64-byte line."""
    rng = np.random.default_rng(13)
    M, K, N = 19, 36, 2 * 32 + 5
    a = ints(rng, (M, K), U8)
    a[::4] = 7  # rows equal to the zero point: sums of 0
    b_scale = -(rng.random(N) * 0.01 + 0.001).astype(F32)
    inputs = [a, ints(rng, (K, N), S8), np.array(0.05, F32), b_scale, np.array(7, U8),
              ints(rng, (N,), S8), rng.standard_normal(N).astype(F32) if bias else None]
    check("MatMulIntegerToFloat", inputs)
    if not bias:
        got, _ = ours("MatMulIntegerToFloat", inputs)
        assert np.signbit(got[::4]).all() and not got[::4].any()


# -------------------------------------------- QuantizeLinear, DequantizeLinear

Q_TYPES = [U8, S8, np.uint16, np.int16]


def float_input(rng, shape, dtype):
    """Wide values with NaN, infinities and exact ties of the quotient."""
    x = (rng.standard_normal(shape) * 300).astype(np.float32)
    flat = x.reshape(-1)
    flat[:9] = [np.nan, np.inf, -np.inf, 0.5, 1.5, -2.5, 1e30, -1e30, 0.0][:flat.size]
    with np.errstate(over="ignore"):  # float16: +-1e30 become infinities
        return x.astype(dtype)


@pytest.mark.parametrize("qt", Q_TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ft", [F32, F16], ids=["float32", "float16"])
@pytest.mark.parametrize("shape", [(1,), (7,), (64, 50), (3, 70001)], ids=str)
def test_quantize_linear_per_tensor(qt, ft, shape):
    rng = np.random.default_rng(21)
    x = float_input(rng, shape, ft)
    check("QuantizeLinear", [x, np.array(0.37, ft), np.array(3, qt)])
    check("QuantizeLinear", [x, np.array([0.5], ft), np.array([0], qt)])


@pytest.mark.parametrize("qt", Q_TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, None])
def test_quantize_linear_per_axis(qt, axis):
    rng = np.random.default_rng(22)
    x = float_input(rng, (3, 5, 4), F32)
    n = x.shape[1 if axis is None else axis]
    attrs = {} if axis is None else {"axis": axis}
    scale = (rng.random(n) + 0.1).astype(F32)
    check("QuantizeLinear", [x, scale, ints(rng, (n,), qt)], **attrs)
    check("QuantizeLinear", [float_input(rng, x.shape, F16), scale.astype(F16),
                             ints(rng, (n,), qt)], **attrs)


def test_quantize_linear_without_zero_point_is_uint8():
    rng = np.random.default_rng(23)
    check("QuantizeLinear", [float_input(rng, (5, 6), F32), np.array(0.25, F32)])
    check("QuantizeLinear", [float_input(rng, (5, 6), F32), rng.random(6).astype(F32)])


def test_quantize_linear_zero_scale_and_empty():
    rng = np.random.default_rng(24)
    check("QuantizeLinear", [float_input(rng, (4, 5), F32), np.array(0.0, F32),
                             np.array(2, S8)])
    check("QuantizeLinear", [np.zeros((0, 5), F32), np.array(0.5, F32), np.array(2, S8)])
    check("DequantizeLinear", [np.zeros((2, 0), S8), np.array(0.5, F32), np.array(2, S8)])


def test_quantize_linear_layouts():
    rng = np.random.default_rng(25)
    x = float_input(rng, (6, 40), F32)
    want = ort_run("QuantizeLinear", [x, np.array(0.3, F32), np.array(-4, S8)])
    wide = np.zeros((6, 80), F32)
    wide[:, ::2] = x
    for v in (wide[:, ::2], unaligned(x), np.asfortranarray(x)):
        got, _ = ours("QuantizeLinear", [v, np.array(0.3, F32), np.array(-4, S8)])
        assert same_bits(got, want)


@pytest.mark.parametrize("qt", Q_TYPES + [np.int32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ft", [F32, F16], ids=["float32", "float16"])
def test_dequantize_linear(qt, ft):
    rng = np.random.default_rng(26)
    x = ints(rng, (64, 50), qt)
    check("DequantizeLinear", [x, np.array(0.37, ft), ints(rng, (), qt)])
    check("DequantizeLinear", [x, np.array([0.37], ft)])
    check("DequantizeLinear", [x, (rng.random(64) + 0.1).astype(ft), ints(rng, (64,), qt)],
          axis=0)
    check("DequantizeLinear", [x, (rng.random(50) + 0.1).astype(ft)])


def composed(op, x, scale, zero_point, element_type):
    """ONNX Runtime's result for a 4-bit type, which its Python API cannot
    pass: QuantizeLinear followed by a Cast to int8, or a Cast from int8
    before DequantizeLinear; scale and zero point are initializers."""
    zp = oh.make_tensor("zp", element_type, list(zero_point.shape),
                        zero_point.astype(np.int64).reshape(-1).tolist())
    if op == "QuantizeLinear":
        nodes = [oh.make_node(op, ["x", "s", "zp"], ["q"], domain=MS),
                 oh.make_node("Cast", ["q"], ["y"], to=onnx.TensorProto.INT8)]
        feed = x
    else:
        nodes = [oh.make_node("Cast", ["x"], ["q"], to=element_type),
                 oh.make_node(op, ["q", "s", "zp"], ["y"], domain=MS)]
        feed = x.astype(np.int8)
    graph = oh.make_graph(
        nodes, "composed",
        [oh.make_tensor_value_info("x", oh.np_dtype_to_tensor_dtype(feed.dtype), feed.shape)],
        [oh.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)],
        initializer=[numpy_helper.from_array(scale, "s"), zp])
    graph.output[0].ClearField("type")
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)])
    m.ir_version = 10
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": feed})[0]


@pytest.mark.parametrize("qt,element_type", [(ml_dtypes.int4, onnx.TensorProto.INT4),
                                             (ml_dtypes.uint4, onnx.TensorProto.UINT4)],
                         ids=["int4", "uint4"])
@pytest.mark.parametrize("per_axis", [False, True])
def test_4_bit_types(qt, element_type, per_axis):
    rng = np.random.default_rng(27)
    x = float_input(rng, (5, 6), F32) / 40
    lo, hi = int(ml_dtypes.iinfo(qt).min), int(ml_dtypes.iinfo(qt).max)
    if per_axis:
        scale = (rng.random(6) + 0.2).astype(F32)
        zp = rng.integers(lo, hi, 6, endpoint=True).astype(qt)
    else:
        scale, zp = np.array(0.7, F32), np.array(1, qt)
    want = composed("QuantizeLinear", x, scale, zp, element_type)
    got, _ = ours("QuantizeLinear", [x, scale, zp])
    assert got.dtype == np.dtype(qt)
    np.testing.assert_array_equal(got.astype(np.int8), want)
    q = rng.integers(lo, hi, (5, 6), endpoint=True).astype(qt)
    want = composed("DequantizeLinear", q, scale, zp, element_type)
    check("DequantizeLinear", [q, scale, zp], expected=want)


# ------------------------------------------------------- QLinear element-wise

BROADCASTS = [((40, 30), (40, 30)), ((40, 30), (40, 1)), ((40, 1), (40, 30)), ((1,), (40, 30)),
              ((40, 30), ()), ((40, 30), (30,)), ((30,), (40, 30)), ((1, 1), (1,)), ((), ()),
              ((5, 1, 3), (4, 1)), ((40, 1), (1,)), ((3, 1), (3, 1)), ((300, 257), (257,))]


def scales(rng, n=3):
    return [np.array(F32(rng.random() * 0.1 + 0.001)) for _ in range(n)]


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("qt", [U8, S8], ids=["uint8", "int8"])
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_qlinear_binary(op, qt, shapes):
    """Bit for bit with MLAS, whichever operand ONNX Runtime's broadcast
    loop hands it first."""
    rng = np.random.default_rng(40)
    for _ in range(3):
        sa, sb, sc = scales(rng)
        za, zb, zc = (ints(rng, (), qt) for _ in range(3))
        check(op, [ints(rng, shapes[0], qt), sa, za, ints(rng, shapes[1], qt), sb, zb, sc, zc])


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_without_zero_points(op):
    rng = np.random.default_rng(41)
    sa, sb, sc = scales(rng)
    # ONNX Runtime's type inference rejects absent zero points: its kernel
    # reads them as 0, so the oracle runs with explicit zeros.
    for shape, qt in (((7, 9), U8), ((0, 9), S8)):
        a, b = ints(rng, shape, qt), ints(rng, (9,), qt)
        zero = np.array(0, qt)
        want = ort_run(op, [a, sa, zero, b, sb, zero, sc, zero])
        check(op, [a, sa, None, b, sb, None, sc], expected=want)


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
@pytest.mark.parametrize("qt", [U8, S8], ids=["uint8", "int8"])
def test_qlinear_lookup(op, qt):
    """Every one of the 256 codes, for many scales and zero points: ONNX
    Runtime's table exactly (its logistic is MLAS' approximation, ours the
    float64 one rounded: no code differed in 153,600 measured)."""
    rng = np.random.default_rng(42)
    codes = np.arange(256, dtype=np.uint8).view(qt).reshape(16, 16)
    for _ in range(25):
        sx = np.array(F32(rng.random() * 0.2 + 0.001))
        sy = np.array(F32(rng.random() * 0.05 + 1 / 256))
        attrs = {"alpha": float(rng.random())} if op == "QLinearLeakyRelu" else {}
        check(op, [codes, sx, ints(rng, (), qt), sy, ints(rng, (), qt)], **attrs)


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_qlinear_lookup_defaults_and_layouts(op):
    rng = np.random.default_rng(43)
    x = ints(rng, (33, 65), S8)
    zero = np.array(0, S8)
    check(op, [x, np.array(0.05, F32), None, np.array(0.01, F32), zero])
    check(op, [x[:, ::2], np.array(0.05, F32), None, np.array(0.01, F32), zero])
    check(op, [np.zeros((0, 3), U8), np.array(0.05, F32), None, np.array(0.01, F32),
               np.array(0, U8)])
    # ONNX Runtime 1.32 aborts (an assertion) on a node that stops before
    # Y_zero_point; ours reads it as 0.
    want = ort_run(op, [x, np.array(0.05, F32), None, np.array(0.01, F32), zero])
    check(op, [x, np.array(0.05, F32), None, np.array(0.01, F32)], expected=want)


@pytest.mark.parametrize("qt", [U8, S8], ids=["uint8", "int8"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_qlinear_concat(qt, axis):
    """Requantized through tables, or copied where the scale and zero point
    are the output's."""
    rng = np.random.default_rng(50)
    sy, zy = np.array(F32(0.05)), ints(rng, (), qt)
    shapes = [[3, 4, 5], [3, 4, 5], [3, 4, 5]]
    for k, n in enumerate((2, 1, 3)):
        shapes[k][axis] = n
    inputs = [sy, zy]
    for k, shape in enumerate(shapes):
        same = k == 1
        inputs += [ints(rng, tuple(shape), qt), sy.copy() if same else np.array(F32(0.02 + k)),
                   zy.copy() if same else ints(rng, (), qt)]
    check("QLinearConcat", inputs, axis=axis)


def test_qlinear_concat_empty_part():
    rng = np.random.default_rng(51)
    sy, zy = np.array(F32(0.05)), np.array(3, U8)
    check("QLinearConcat", [sy, zy, ints(rng, (2, 0), U8), np.array(F32(0.1)), np.array(1, U8),
                            ints(rng, (2, 3), U8), np.array(F32(0.2)), np.array(9, U8)], axis=1)


@pytest.mark.parametrize("qt", [U8, S8], ids=["uint8", "int8"])
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5), (4, 5)), ((3, 1, 5), (4, 5), (1,)),
                                    ((), (2, 3), (3,)), ((2, 3), (), ())], ids=str)
def test_qlinear_where(qt, shapes):
    rng = np.random.default_rng(52)
    cond = rng.random(shapes[0]) > 0.5
    check("QLinearWhere", [np.asarray(cond), ints(rng, shapes[1], qt), np.array(F32(0.04)),
                           ints(rng, (), qt), ints(rng, shapes[2], qt), np.array(F32(0.1)),
                           ints(rng, (), qt), np.array(F32(0.07)), ints(rng, (), qt)])


@pytest.mark.parametrize("qt", [U8, S8], ids=["uint8", "int8"])
@pytest.mark.parametrize("channels_last,shape", [(0, (2, 3, 5, 7)), (1, (2, 5, 7, 3)),
                                                 (0, (1, 4, 9)), (1, (2, 3, 4, 5, 6)),
                                                 (0, (1, 2, 64, 64)), (1, (1, 1, 1, 8))],
                         ids=str)
def test_qlinear_global_average_pool(qt, channels_last, shape):
    rng = np.random.default_rng(53)
    for _ in range(5):
        sx, sy = np.array(F32(rng.random() * 0.1 + 0.01)), np.array(F32(rng.random() * 0.1 + 0.01))
        check("QLinearGlobalAveragePool", [ints(rng, shape, qt), sx, ints(rng, (), qt), sy,
                                           ints(rng, (), qt)], channels_last=channels_last)


POOL_CASES = [
    ((1, 3, 7, 9), dict(kernel_shape=[3, 3])),
    ((2, 2, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((1, 3, 7, 9), dict(kernel_shape=[3, 2], pads=[1, 0, 1, 1], count_include_pad=1)),
    ((1, 3, 7, 9), dict(kernel_shape=[3, 2], pads=[1, 0, 1, 1], count_include_pad=0)),
    ((1, 2, 7, 9), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ((1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, pads=[1, 1, 1, 1])),
    ((1, 2, 7, 9), dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 2, 7, 9), dict(kernel_shape=[2, 4], auto_pad="SAME_LOWER")),
    ((1, 2, 7, 9), dict(kernel_shape=[3, 3], auto_pad="VALID", strides=[2, 1])),
    ((1, 4, 10), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 2, 4, 5, 6), dict(kernel_shape=[2, 3, 2], pads=[0, 1, 1, 1, 0, 0])),
    ((2, 3, 5, 7), dict(kernel_shape=[5, 7])),  # ONNX Runtime's global-average path
    ((1, 7, 9, 3), dict(kernel_shape=[3, 3], channels_last=1, pads=[1, 1, 1, 1])),
    ((1, 10, 3), dict(kernel_shape=[4], channels_last=1)),
    ((1, 5, 7, 3), dict(kernel_shape=[5, 7], channels_last=1)),
    # ONNX Runtime applies ceil_mode to VALID too (found by the fuzzer)
    ((1, 3, 7, 4), dict(kernel_shape=[2, 3], strides=[1, 3], auto_pad="VALID", ceil_mode=1,
                        count_include_pad=1)),
    ((1, 2, 9, 9), dict(kernel_shape=[3, 4], strides=[2, 3], auto_pad="SAME_UPPER",
                        ceil_mode=1)),
]


@pytest.mark.parametrize("qt", [U8, S8], ids=["uint8", "int8"])
@pytest.mark.parametrize("case", range(len(POOL_CASES)),
                         ids=lambda i: f"{POOL_CASES[i][0]}-{POOL_CASES[i][1]}")
def test_qlinear_average_pool(qt, case):
    shape, attrs = POOL_CASES[case]
    rng = np.random.default_rng(70 + case)
    for _ in range(3):
        sx, sy = np.array(F32(rng.random() * 0.1 + 0.01)), np.array(F32(rng.random() * 0.1 + 0.01))
        check("QLinearAveragePool", [ints(rng, shape, qt), sx, ints(rng, (), qt), sy,
                                     ints(rng, (), qt)], **attrs)


@pytest.mark.parametrize("qt", [U8, S8], ids=["uint8", "int8"])
@pytest.mark.parametrize("shape,attrs", [
    ((3, 10), dict(opset=13)), ((2, 3, 7), dict(opset=13, axis=1)),
    ((2, 3, 7), dict(opset=12, axis=1)), ((2, 3, 7), dict(opset=12)),
    ((4, 300), dict(opset=13, axis=-1)), ((2, 5), dict(opset=13, axis=0)),
    ((1, 1), dict(opset=13)), ((5, 1), dict(opset=13))], ids=str)
def test_qlinear_softmax(qt, shape, attrs):
    """Including rows of one element (where e * floor(1 / y_scale) would
    overflow) and outputs past the type's range (saturated)."""
    rng = np.random.default_rng(80)
    for t, sy in enumerate((1 / 256, 0.004, 0.01, rng.random() * 0.01 + 0.002)):
        zy = np.array(-128 if qt == S8 else 0, qt) if t < 2 else ints(rng, (), qt)
        check("QLinearSoftmax", [ints(rng, shape, qt), np.array(F32(rng.random() * 0.2 + 0.001)),
                                 ints(rng, (), qt), np.array(F32(sy)), zy], **attrs)


def test_qlinear_softmax_empty():
    check("QLinearSoftmax", [np.zeros((0, 4), U8), np.array(F32(0.1)), np.array(0, U8),
                             np.array(F32(1 / 256)), np.array(0, U8)], opset=13)


# ---------------------------------------------------------------------- QGemm

QGEMM_PAIRS = [(U8, U8), (U8, S8), (S8, S8)]


@pytest.mark.parametrize("pair", QGEMM_PAIRS, ids=lambda p: "x".join(np.dtype(d).name for d in p))
@pytest.mark.parametrize("shape", [(3, 5, 7), (17, 64, 33), (1, 1, 1)], ids=str)
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)], ids=str)
@pytest.mark.parametrize("output", ["quantized", "float", "float_no_y_scale"])
@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm(pair, shape, trans, output, per_column):
    at, bt = pair
    M, K, N = shape
    rng = np.random.default_rng(sum(shape) + 60)
    a = ints(rng, (K, M) if trans[0] else (M, K), at)
    b = ints(rng, (N, K) if trans[1] else (K, N), bt)
    sb = (rng.random(N) * 0.01 + 0.001).astype(F32) if per_column else np.array(F32(0.01))
    inputs = [a, np.array(F32(0.02)), ints(rng, (), at), b, sb, ints(rng, sb.shape, bt)]
    for c_shape in [None, (N,), (M, 1), (M, N), ()]:
        c = None if c_shape is None else rng.integers(-5000, 5000, c_shape).astype(np.int32)
        rest = {"quantized": [c, np.array(F32(0.3)), ints(rng, (), at)],
                "float": [c, np.array(F32(0.3))], "float_no_y_scale": [c]}[output]
        full = inputs + rest
        while full[-1] is None:
            full.pop()
        check("QGemm", full, transA=trans[0], transB=trans[1], alpha=0.75)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_qgemm_constant_b(trans_b):
    rng = np.random.default_rng(61)
    b = ints(rng, (40, 70) if trans_b else (70, 40), S8)
    inputs = [ints(rng, (9, 70), U8), np.array(F32(0.02)), np.array(128, U8), b,
              (rng.random(40) * 0.01).astype(F32), ints(rng, (40,), S8),
              rng.integers(-99, 99, 40).astype(np.int32), np.array(F32(0.2)), np.array(5, U8)]
    check("QGemm", inputs, constant=(3, 4, 5, 6), transB=trans_b)


# ------------------------------------------------------------------ bad input

def rejects(op, inputs, error, match, **attrs):
    sess = ReferenceEvaluator(model(op, inputs, **attrs))
    olc.register_kernels_for_session(sess)
    with pytest.raises(error, match=match):
        sess.run(None, feeds(inputs))


def test_reject_zero_point_of_another_type():
    rng = np.random.default_rng(11)
    rejects("DynamicQuantizeMatMul",
            [rng.random((2, 3)).astype(F32), ints(rng, (3, 4), S8), np.array(1.0, F32),
             np.array(0, U8)],
            TypeError, r"DynamicQuantizeMatMul: input 3 \('x3'\) has element type uint8, "
                       "expected int8 like input 1")


def test_reject_a_zero_point_per_row():
    rng = np.random.default_rng(12)
    rejects("MatMulIntegerToFloat",
            [ints(rng, (2, 3), U8), ints(rng, (3, 4), S8), np.array(1.0, F32),
             np.array(1.0, F32), np.zeros(2, U8)],
            ValueError, r"MatMulIntegerToFloat: input 4 \('x4'\) has shape \(2,\): the zero "
                        "point of A must be a scalar")


def test_reject_b_zero_point_shape():
    rng = np.random.default_rng(13)
    rejects("DynamicQuantizeMatMul",
            [rng.random((2, 3)).astype(F32), ints(rng, (3, 4), S8), np.array(1.0, F32),
             np.zeros((4, 1), S8)],
            ValueError, r"DynamicQuantizeMatMul: input 3 \('x3'\) has shape \(4, 1\): a zero "
                        "point of B must have one element")


def test_reject_scale_shape():
    rng = np.random.default_rng(14)
    rejects("DynamicQuantizeMatMul",
            [rng.random((2, 3)).astype(F32), ints(rng, (3, 4), S8), np.ones(3, F32)],
            ValueError, r"DynamicQuantizeMatMul: input 2 \('x2'\) has shape \(3,\): a scale "
                        "must have one element")


def test_reject_empty_scale():
    rng = np.random.default_rng(15)
    rejects("MatMulIntegerToFloat",
            [ints(rng, (2, 3), U8), ints(rng, (3, 4), U8), np.array(1.0, F32),
             np.ones(0, F32)],
            ValueError, r"MatMulIntegerToFloat: input 3 \('x3'\) has shape \(0,\)")


def test_reject_bias_size():
    rng = np.random.default_rng(16)
    rejects("MatMulIntegerToFloat",
            [ints(rng, (2, 3), U8), ints(rng, (3, 4), U8), np.array(1.0, F32),
             np.array(1.0, F32), None, None, np.ones(3, F32)],
            ValueError, r"MatMulIntegerToFloat: input 6 \('x6'\) has shape \(3,\): it must "
                        "have B's last dimension N = 4 elements")


def test_reject_inner_dimension():
    rng = np.random.default_rng(17)
    rejects("DynamicQuantizeMatMul",
            [rng.random((2, 3)).astype(F32), ints(rng, (4, 4), S8), np.array(1.0, F32)],
            ValueError, r"DynamicQuantizeMatMul: input 1 \('x1'\) has shape \(4, 4\): its "
                        "inner dimension")


def test_reject_float16_a():
    rng = np.random.default_rng(18)
    rejects("DynamicQuantizeMatMul",
            [rng.random((2, 3)).astype(F16), ints(rng, (3, 4), S8), np.array(1.0, F32)],
            TypeError, r"DynamicQuantizeMatMul: input 0 \('x0'\) has element type float16")


def test_reject_scales_of_two_types():
    rng = np.random.default_rng(19)
    rejects("MatMulIntegerToFloat",
            [ints(rng, (2, 3), U8), ints(rng, (3, 4), U8), np.array(1.0, F32),
             np.array(1.0, F16)],
            TypeError, r"MatMulIntegerToFloat: input 3 \('x3'\) has element type float16")


def test_reject_per_axis_scale_length():
    rng = np.random.default_rng(30)
    rejects("QuantizeLinear", [rng.random((2, 3)).astype(F32), np.ones(2, F32)],
            ValueError, r"QuantizeLinear: input 1 \('x1'\) has shape \(2,\): a per-axis scale "
                        r"must be 1-D of input 0's dimension 1 \(3\)")


def test_reject_per_axis_zero_point_shape():
    rng = np.random.default_rng(31)
    rejects("DequantizeLinear", [ints(rng, (2, 3), S8), np.ones(3, F32), np.zeros(1, S8)],
            ValueError, r"DequantizeLinear: input 2 \('x2'\) has shape \(1,\): with a "
                        "per-axis scale the zero point must be 1-D of length 3")


def test_reject_per_tensor_zero_point_shape():
    rng = np.random.default_rng(32)
    rejects("QuantizeLinear", [rng.random((2, 3)).astype(F32), np.ones((), F32),
                               np.zeros(2, U8)],
            ValueError, r"QuantizeLinear: input 2 \('x2'\) has shape \(2,\): with a "
                        "per-tensor scale the zero point must be a scalar")


def test_reject_axis_out_of_range():
    rng = np.random.default_rng(33)
    rejects("QuantizeLinear", [rng.random((2, 3)).astype(F32), np.ones(3, F32)],
            ValueError, "QuantizeLinear: attribute axis 2 is out of range for input 0 of rank 2",
            axis=2)


def test_reject_quantize_to_int32():
    rng = np.random.default_rng(34)
    rejects("QuantizeLinear", [rng.random((2, 3)).astype(F32), np.ones((), F32),
                               np.zeros((), np.int32)],
            TypeError, r"QuantizeLinear: input 2 \('x2'\) has element type int32")


def test_reject_scale_of_another_type():
    rng = np.random.default_rng(35)
    rejects("QuantizeLinear", [rng.random((2, 3)).astype(F32), np.ones((), F16)],
            TypeError, r"QuantizeLinear: input 1 \('x1'\) has element type float16")


def test_reject_qlinear_per_axis_scale():
    rng = np.random.default_rng(44)
    rejects("QLinearAdd", [ints(rng, (2, 3), U8), np.ones(3, F32), None, ints(rng, (2, 3), U8),
                           np.ones((), F32), None, np.ones((), F32)],
            ValueError, r"QLinearAdd: input 1 \('x1'\) has shape \(3,\): A_scale must be a "
                        "scalar or a one-element vector")


def test_reject_qlinear_shapes_that_do_not_broadcast():
    rng = np.random.default_rng(45)
    rejects("QLinearMul", [ints(rng, (2, 3), U8), np.ones((), F32), None, ints(rng, (4,), U8),
                           np.ones((), F32), None, np.ones((), F32)],
            ValueError, r"QLinearMul: input 3 \('x3'\) has shape \(4,\), which does not "
                        "broadcast")


def test_reject_qlinear_zero_point_type():
    rng = np.random.default_rng(46)
    rejects("QLinearSigmoid", [ints(rng, (2, 3), U8), np.ones((), F32), np.zeros((), S8),
                               np.ones((), F32)],
            TypeError, r"QLinearSigmoid: input 2 \('x2'\) has element type int8, expected "
                       "uint8 like input 0")


def test_reject_global_average_pool_scale_range():
    rng = np.random.default_rng(54)
    rejects("QLinearGlobalAveragePool", [ints(rng, (1, 2, 2, 2), U8), np.array(100.0, F32),
                                         np.array(0, U8), np.array(0.01, F32), np.array(0, U8)],
            ValueError, r"QLinearGlobalAveragePool: x_scale / \(y_scale \* image size\)")


def test_reject_concat_zero_point_type():
    rng = np.random.default_rng(55)
    rejects("QLinearConcat", [np.array(0.1, F32), np.array(0, U8), ints(rng, (2, 2), S8),
                              np.array(0.1, F32), np.array(0, S8)],
            TypeError, r"QLinearConcat: input 2 \('x2'\) has element type int8, expected "
                       "uint8 like Y_zero_point", axis=0)


def test_reject_concat_shapes():
    rng = np.random.default_rng(56)
    rejects("QLinearConcat", [np.array(0.1, F32), np.array(0, U8), ints(rng, (2, 2), U8),
                              np.array(0.1, F32), np.array(0, U8), ints(rng, (3, 3), U8),
                              np.array(0.1, F32), np.array(0, U8)],
            ValueError, r"QLinearConcat: input 5 \('x5'\) has shape \(3, 3\), which differs",
            axis=0)


def test_reject_qgemm_b_scale_and_zero_point_shapes():
    rng = np.random.default_rng(62)
    rejects("QGemm", [ints(rng, (2, 3), U8), np.array(0.1, F32), np.array(0, U8),
                      ints(rng, (3, 4), U8), np.ones(4, F32), np.zeros((), U8)],
            ValueError, r"QGemm: input 5 \('x5'\) has shape \(\): b_scale and b_zero_point "
                        "must have the same shape")


def test_reject_qgemm_bias_shape():
    rng = np.random.default_rng(63)
    rejects("QGemm", [ints(rng, (2, 3), U8), np.array(0.1, F32), np.array(0, U8),
                      ints(rng, (3, 4), U8), np.array(0.1, F32), np.zeros((), U8),
                      np.zeros(3, np.int32)],
            ValueError, r"QGemm: input 6 \('x6'\) has shape \(3,\): it must broadcast")


def test_reject_average_pool_kernel_rank():
    rng = np.random.default_rng(71)
    rejects("QLinearAveragePool", [ints(rng, (1, 2, 4, 4), U8), np.array(0.1, F32),
                                   np.array(0, U8), np.array(0.1, F32), np.array(0, U8)],
            ValueError, r"QLinearAveragePool: attribute kernel_shape \[3\] must have 2 "
                        "positive values", kernel_shape=[3])
