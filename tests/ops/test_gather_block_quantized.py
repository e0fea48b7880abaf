"""com.microsoft GatherBlockQuantized: differential tests against ONNX
Runtime and a NumPy dequantize oracle over bits x block size x zero points
x scale dtype x index dtype/rank (scalar, negative, out of range), at every
SIMD level and 1/2 threads; bad input gives clear errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ml_dtypes import float8_e4m3fn, int4
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import check_node, node_model

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
OP = "GatherBlockQuantized"
KERNEL = f"onnx_light_cpu::{OP}"
# float32: one exact multiply, as ORT; float16: ORT may round differently
# (one output rounding, 2^-11 relative, plus the float16 scale product).
TOL = {np.dtype(np.float32): (1e-6, 1e-6), np.dtype(np.float16): (2e-3, 2e-3)}


def unpack(packed: np.ndarray, bits: int) -> np.ndarray:
    """Codes of packed bytes along the last axis, low bits first."""
    per = 8 // bits
    fields = [(packed >> (bits * k)) & ((1 << bits) - 1) for k in range(per)]
    return np.stack(fields, -1).reshape(*packed.shape[:-1], packed.shape[-1] * per)


def numpy_oracle(data, indices, scales, zero_points=None, *, bits=4, block_size=128):
    """Dequantize the whole table, then gather (zero rows out of range)."""
    codes = unpack(data, bits).astype(np.float32)
    D, G = codes.shape[-1], scales.shape[-1]
    if zero_points is None:
        zp = np.full(scales.shape, 2 ** (bits - 1), np.float32)
    else:
        zp = unpack(zero_points, bits)[..., :G].astype(np.float32)
    scale = np.repeat(scales.astype(np.float32), block_size, -1)[..., :D]
    table = (codes - np.repeat(zp, block_size, -1)[..., :D]) * scale
    V = data.shape[0]
    out = np.zeros(indices.shape + table.shape[1:], np.float32)
    for pos, i in np.ndenumerate(indices):
        i = int(i) + V if i < 0 else int(i)
        if 0 <= i < V:
            out[pos] = table[i]
    return out.astype(scales.dtype)


def ort_oracle(**attrs):
    def run(*inputs):
        model = node_model(OP, inputs, opset=21, domain=MS, **attrs)
        # ORT's shape inference wants concrete dimensions to match the
        # zero points with the scales.
        for value, a in zip(model.graph.input, inputs):
            value.CopyFrom(oh.make_tensor_value_info(value.name, value.type.tensor_type.elem_type,
                                                     a.shape))
        out_type = (TensorProto.FLOAT if inputs[2].dtype == np.float32 else TensorProto.FLOAT16)
        model.graph.output[0].type.tensor_type.elem_type = out_type
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})
    return run


def make_inputs(rng, shape, bits, block, zp, scale_dtype, idx):
    """data [V, ..., P], scales, optional zero points, indices."""
    data = rng.integers(0, 256, shape, dtype=np.uint8)
    D = shape[-1] * (8 // bits)
    G = -(-D // block)
    scales = (rng.standard_normal(shape[:-1] + (G,)) * 0.1).astype(scale_dtype)
    inputs = [data, idx, scales]
    if zp:
        per = 8 // bits
        inputs.append(rng.integers(0, 256, shape[:-1] + (-(-G // per),), dtype=np.uint8))
    return inputs


def check(inputs, *, bits, block, **extra):
    attrs = dict(bits=bits, block_size=block, **extra)
    tol = TOL[inputs[2].dtype]
    check_node(OP, inputs, oracle=ort_oracle(**attrs), kernel=KERNEL, tolerance=tol,
               opset=21, domain=MS, **attrs)
    want = numpy_oracle(*inputs, bits=bits, block_size=block)
    got = run_once(inputs, attrs)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=tol[0], atol=tol[1])


def run_once(inputs, attrs):
    model = node_model(OP, inputs, opset=21, domain=MS, **attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    return sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})[0]


INDEX_CASES = {
    "vector": lambda V: np.array([0, V - 1, 3 % V, -1, -V], np.int64),
    "scalar": lambda V: np.array(-2 % V),
    "matrix_out_of_range": lambda V: np.array([[V, -V - 1, 1], [2, 10 * V, -3]], np.int64),
    "empty": lambda V: np.zeros((0, 2), np.int64),
    "extremes": lambda V: np.array([2**31 - 1, -2**31, 0], np.int64),
}


def test_extreme_int64_indices():
    rng = np.random.default_rng(8)
    idx = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1], np.int64)
    check(make_inputs(rng, (5, 16), 8, 16, False, np.float32, idx), bits=8, block=16)


def test_zero_points_named_empty():
    """An empty input name omits the zero points."""
    rng = np.random.default_rng(9)
    data, idx, scales = make_inputs(rng, (5, 16), 4, 16, False, np.float32,
                                    np.array([3, 0], np.int64))
    model = node_model(OP, [data, idx, scales], opset=21, domain=MS, block_size=16)
    model.graph.node[0].input.append("")
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    got = sess.run(None, {"x0": data, "x1": idx, "x2": scales})[0]
    np.testing.assert_array_equal(got, numpy_oracle(data, idx, scales, bits=4, block_size=16))


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("block", [16, 32, 128])
@pytest.mark.parametrize("zp", [False, True])
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16])
def test_formats(bits, block, zp, scale_dtype):
    rng = np.random.default_rng(bits * 1000 + block + zp)
    # P chosen so the last group is short for the larger blocks.
    shape = (9, 40)
    for name, index_dtype in (("vector", np.int64), ("matrix_out_of_range", np.int32)):
        idx = INDEX_CASES[name](shape[0]).astype(index_dtype)
        check(make_inputs(rng, shape, bits, block, zp, scale_dtype, idx), bits=bits, block=block)


@pytest.mark.parametrize("case", sorted(INDEX_CASES))
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_index_ranks(case, index_dtype):
    rng = np.random.default_rng(7)
    idx = INDEX_CASES[case](6).astype(index_dtype)
    check(make_inputs(rng, (6, 24), 4, 16, True, np.float32, idx), bits=4, block=16)


@pytest.mark.parametrize("quantize_axis", [2, -1])
@pytest.mark.parametrize("gather_axis", [0, -3])
def test_rank3_axes(quantize_axis, gather_axis):
    rng = np.random.default_rng(3)
    idx = np.array([[4, -1], [0, 2]], np.int64)
    inputs = make_inputs(rng, (5, 3, 48), 4, 32, True, np.float16, idx)
    check(inputs, bits=4, block=32, quantize_axis=quantize_axis, gather_axis=gather_axis)


def test_defaults_and_large_rows():
    """Default bits=4, block_size=128 on rows big enough for two threads."""
    rng = np.random.default_rng(5)
    idx = rng.integers(-300, 300, (40,)).astype(np.int64)
    data, _, scales = make_inputs(rng, (256, 1024), 4, 128, False, np.float32, idx)
    check_node(OP, [data, idx, scales], oracle=ort_oracle(), kernel=KERNEL,
               tolerance=TOL[np.dtype(np.float32)], opset=21, domain=MS)


def test_special_scales():
    """Zero, negative, infinite and NaN scales pass through the one multiply."""
    data = np.arange(64, dtype=np.uint8).reshape(2, 32)
    scales = np.array([[0.0, -1.5], [np.inf, np.nan]], np.float32)
    idx = np.array([0, 1], np.int64)
    check([data, idx, scales], bits=8, block=16)


def test_empty_table_gives_zero_rows():
    data = np.zeros((0, 8), np.uint8)
    scales = np.zeros((0, 1), np.float32)
    y = run_once([data, np.array([0, -1], np.int64), scales], dict(block_size=16))
    assert y.shape == (2, 16) and not y.any()


def test_used_paths():
    rng = np.random.default_rng(0)
    for bits in (2, 4, 8):
        inputs = make_inputs(rng, (4, 16), bits, 16, False, np.float16, np.array([1], np.int64))
        sess = ReferenceEvaluator(node_model(OP, inputs, opset=21, domain=MS, bits=bits,
                                             block_size=16))
        olc.register_kernels_for_session(sess)
        olc.set_kernel_usage_recording(sess, True)
        sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})
        assert KERNEL in olc.used_kernel_names(sess)
        (path,) = olc.used_kernel_paths(sess)
        assert path.startswith(f"gather_block_quantized_int{bits}_float16_")


# ---- bad input -------------------------------------------------------------

def good():
    rng = np.random.default_rng(1)
    return make_inputs(rng, (4, 16), 4, 16, True, np.float32, np.array([1], np.int64))


BAD = [
    ("float indices", lambda i: [i[0], i[1].astype(np.float32)] + i[2:], {}, TypeError, "input 1"),
    ("int8 data", lambda i: [i[0].astype(np.int8)] + i[1:], {}, TypeError, "input 0"),
    ("int4 data", lambda i: [i[0].astype(int4)] + i[1:], {}, NotImplementedError, "input 0"),
    ("float8 data", lambda i: [i[0].astype(float8_e4m3fn)] + i[1:], {}, NotImplementedError,
     "input 0"),
    ("rank 1 data", lambda i: [i[0][0]] + i[1:], {}, ValueError, "rank"),
    ("double scales", lambda i: i[:2] + [i[2].astype(np.float64), i[3]], {}, TypeError,
     "input 2"),
    ("scale shape", lambda i: i[:2] + [i[2][:, :1], i[3]], {}, ValueError, "input 2"),
    ("scales for another block", lambda i: i, {"block_size": 32}, ValueError, "input 2"),
    ("zero points dtype", lambda i: i[:3] + [i[3].astype(np.int8)], {}, TypeError, "input 3"),
    ("zero points packing", lambda i: i[:3] + [np.zeros((4, 2), np.uint8)], {}, ValueError,
     "input 3"),
    ("bits 3", lambda i: i, {"bits": 3}, ValueError, "bits"),
    ("block 8", lambda i: i, {"block_size": 8}, ValueError, "block_size"),
    ("block 48", lambda i: i, {"block_size": 48}, ValueError, "block_size"),
    ("gather axis 1", lambda i: i, {"gather_axis": 1}, ValueError, "gather_axis"),
    ("quantize axis 0", lambda i: i, {"quantize_axis": 0}, ValueError, "quantize_axis"),
]


@pytest.mark.parametrize("name,edit,attrs,error,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, edit, attrs, error, match):
    inputs = edit(good())
    attrs = {"block_size": 16, **attrs}
    with pytest.raises(error, match=match) as info:
        run_once(inputs, attrs)
    assert OP in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("bits,block", list(itertools.product([2, 4, 8], [16, 64, 256])))
def test_sweep(bits, block):
    rng = np.random.default_rng(bits + block)
    for shape in [(17, 3, 72), (33, 130)]:
        for zp, dt in itertools.product([False, True], [np.float32, np.float16]):
            idx = rng.integers(-2 * shape[0], 2 * shape[0], (3, 5)).astype(np.int64)
            check(make_inputs(rng, shape, bits, block, zp, dt, idx), bits=bits, block=block,
                  quantize_axis=-1)
