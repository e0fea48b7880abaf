"""com.microsoft GatherBlockQuantized: differential tests against ONNX
Runtime and a NumPy dequantize oracle over bits x block size x zero points
x scale dtype x index dtype/rank (scalar, negative, out of range), at every
SIMD level and 1/2 threads; typed data (INT4, UINT4, FLOAT8*, FLOAT4E2M1)
over ranks, gather and quantize axes, block sizes and broadcast scales,
bit-identical to ONNX Runtime; bad input gives clear errors."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from ml_dtypes import bfloat16, float8_e4m3fn, int4, uint4
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import check_node, node_model, run_ours

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


def used_path(inputs, **attrs):
    """The one path our kernel recorded running ``inputs``."""
    _, names, paths = run_ours(node_model(OP, inputs, opset=21, domain=MS, **attrs), inputs)
    assert KERNEL in names, names
    (path,) = paths
    return path


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
        path = used_path(inputs, bits=bits, block_size=16)
        assert path.startswith(f"gather_block_quantized_int{bits}_float16_")


# ---- bad input -------------------------------------------------------------

def good():
    rng = np.random.default_rng(1)
    return make_inputs(rng, (4, 16), 4, 16, True, np.float32, np.array([1], np.int64))


BAD = [
    ("float indices", lambda i: [i[0], i[1].astype(np.float32)] + i[2:], {}, TypeError, "input 1"),
    ("int8 data", lambda i: [i[0].astype(np.int8)] + i[1:], {}, TypeError, "input 0"),
    ("bfloat16 scales", lambda i: i[:2] + [i[2].astype(bfloat16), i[3]], {}, TypeError,
     "input 2"),
    ("block 0", lambda i: i, {"block_size": 0}, ValueError, "block_size"),
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


# ---- typed data: INT4, UINT4, FLOAT8*, FLOAT4E2M1 -------------------------

INT_TYPES = [int4, uint4]
FLOAT_TYPES = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
               ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn]
EXACT = (0.0, 0.0)  # one float32 multiply, rounded once: ORT's bits


def typed_oracle(data, indices, scales, zero_points=None, *, gather_axis=0, quantize_axis=1,
                 block_size=128, bits=4):
    """Dequantize the whole table (scales repeated along the quantize axis,
    broadcast elsewhere), then gather with zero slices out of range."""
    r = data.ndim
    g, q = gather_axis % r, quantize_axis % r
    n = data.shape[q]
    block = block_size or max(n, 1)

    def spread(a):
        a = np.repeat(a.astype(np.float32), block, axis=q).take(range(n), axis=q)
        return np.broadcast_to(a, data.shape)

    zp = 0.0 if zero_points is None else spread(zero_points)
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0, overflow: as the kernel
        table = (data.astype(np.float32) - zp) * spread(scales)
    A = data.shape[g]
    flat = indices.reshape(-1).astype(np.int64)
    ok = (flat >= -A) & (flat < A)
    moved = np.moveaxis(table, g, 0)
    if A == 0:  # every index out of range
        moved = np.zeros((1,) + moved.shape[1:], np.float32)
    out = moved[np.where(ok, flat % max(A, 1), 0)]
    out[~ok] = 0
    out = np.moveaxis(out.reshape(indices.shape + out.shape[1:]), range(indices.ndim),
                      range(g, g + indices.ndim))
    with np.errstate(over="ignore"):  # to float16's infinity, as the kernel
        return out.astype(scales.dtype)


def ort_typed(**attrs):
    """ORT on a model whose data, scales and zero points are initializers
    (ORT takes no int4/float8 feeds from NumPy)."""
    def run(data, indices, scales, zero_points=None):
        consts = {"x0": data, "x2": scales}
        if zero_points is not None:
            consts["x3"] = zero_points
        names = ["x0", "x1", "x2"] + (["x3"] if zero_points is not None else [])
        node = oh.make_node(OP, names, ["y0"], domain=MS, **attrs)
        graph = oh.make_graph(
            [node], "typed", [oh.make_tensor_value_info("x1", TensorProto.INT64
                                                        if indices.dtype == np.int64
                                                        else TensorProto.INT32, indices.shape)],
            [oh.make_tensor_value_info("y0", oh.np_dtype_to_tensor_dtype(scales.dtype), None)],
            initializer=[nh.from_array(a, n) for n, a in consts.items()])
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                    oh.make_opsetid(MS, 1)])
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, {"x1": indices})
    return run


def check_typed(inputs, **attrs):
    """Ours against ORT (float32/float16 scales) or against ORT's float32 run
    on the same bfloat16 values, rounded once (ORT has no bfloat16 here);
    and against the NumPy oracle."""
    scales = inputs[2]
    if scales.dtype == bfloat16:
        wide = inputs[:2] + [scales.astype(np.float32)] + inputs[3:]

        def oracle(*_):
            return [ort_typed(**attrs)(*wide)[0].astype(bfloat16)]
    else:
        oracle = ort_typed(**attrs)
    check_node(OP, inputs, oracle=oracle, kernel=KERNEL, tolerance=EXACT, opset=21, domain=MS,
               **attrs)
    want = typed_oracle(*inputs, **attrs)
    got = run_once(inputs, attrs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def typed_inputs(rng, dtype, shape, scale_shape, scale_dtype, idx, zp=False):
    if dtype in INT_TYPES:
        info = ml_dtypes.iinfo(dtype)
        data = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    else:
        data = (rng.standard_normal(shape) * 3).astype(dtype)
    scales = (rng.standard_normal(scale_shape) * 0.1).astype(scale_dtype)
    inputs = [data, idx, scales]
    if zp:
        info = ml_dtypes.iinfo(dtype)
        inputs.append(rng.integers(info.min, info.max + 1, scale_shape).astype(dtype))
    return inputs


# (data shape, gather_axis, quantize_axis, block_size, indices)
INT_LAYOUTS = [
    ((9, 40), 0, 1, 16, np.array([0, 8, -1, -9, 9, 3], np.int64)),
    ((9, 40), 1, 0, 16, np.array([[39, 0], [-40, 40]], np.int64)),
    ((9, 40), 1, 1, 32, np.array([5, 39, -1], np.int32)),
    ((5, 3, 48), 0, 2, 32, np.array([[4, -1], [0, 7]], np.int64)),
    ((5, 3, 48), 2, 0, 16, np.array([47, 0, -48, 48], np.int64)),
    ((33, 4, 6), 1, 0, 16, np.array(-2, np.int64)),
    ((2, 3, 17, 4), 2, 1, 16, np.array([16, -17, 3], np.int32)),
]


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("zp", [False, True])
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda t: np.dtype(t).name)
def test_typed_int4(dtype, zp, scale_dtype):
    rng = np.random.default_rng(11)
    for shape, g, q, block, idx in INT_LAYOUTS:
        scale_shape = tuple(-(-d // block) if k == q else d for k, d in enumerate(shape))
        inputs = typed_inputs(rng, dtype, shape, scale_shape, scale_dtype, idx, zp)
        check_typed(inputs, gather_axis=g, quantize_axis=q, block_size=block)


def test_typed_int4_defaults():
    """Default bits (4), block_size (128) and axes on a table big enough for
    two threads; negative axes."""
    rng = np.random.default_rng(12)
    idx = rng.integers(-300, 300, (40,)).astype(np.int64)
    check_typed(typed_inputs(rng, int4, (256, 1000), (256, 8), np.float32, idx))
    check_typed(typed_inputs(rng, uint4, (256, 1000), (256, 8), np.float16, idx, zp=True),
                gather_axis=-2, quantize_axis=-1, bits=4)


# (data shape, gather_axis, quantize_axis, block_size, scales shape, indices)
FLOAT_LAYOUTS = [
    ((6, 40), 0, 1, 0, (6, 1), np.array([0, 5, -1, 6], np.int64)),
    ((6, 40), 0, 1, 16, (1, 3), np.array([[2, -6], [-7, 1]], np.int64)),
    ((6, 40), 0, 1, 16, (6, 3), np.array([3], np.int32)),
    ((6, 40), 1, 0, 0, (1, 40), np.array([39, 0, 40], np.int64)),
    ((6, 7, 40), 1, 2, 32, (1, 7, 2), np.array([0, 6, -1], np.int64)),
    ((6, 7, 40), 2, 1, 0, (6, 1, 1), np.array([[0, 5], [-1, 61]], np.int64)),
    ((6, 7, 40), 0, 0, 16, (1, 1, 1), np.array([5, -6], np.int64)),
    ((6, 7, 40), 0, 2, 0, (1, 1, 1), np.array(2, np.int64)),
]


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda t: np.dtype(t).name)
def test_typed_float(dtype, scale_dtype):
    rng = np.random.default_rng(13)
    for shape, g, q, block, scale_shape, idx in FLOAT_LAYOUTS:
        inputs = typed_inputs(rng, dtype, shape, scale_shape, scale_dtype, idx)
        check_typed(inputs, gather_axis=g, quantize_axis=q, block_size=block)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda t: np.dtype(t).name)
def test_typed_float_every_code(dtype, scale_dtype):
    """Every code of the type (NaN, infinities, -0, subnormals); FLOAT4E2M1
    repeats its 16 codes (only the low nibble of ml_dtypes' byte is one)."""
    mask = 0x0F if dtype == ml_dtypes.float4_e2m1fn else 0xFF
    codes = (np.arange(256, dtype=np.uint8) & mask).view(dtype).reshape(16, 16)
    scales = np.array([[1.0], [-0.5], [6e4], [3e-5]] * 4, np.float32).astype(scale_dtype)
    idx = np.arange(16, dtype=np.int64)
    check_typed([codes, idx, scales], block_size=0)
    # a vector's worth and a tail (16 + 7 elements) under each scale
    wide = np.concatenate([codes, codes[:, :7]], axis=1)
    check_typed([wide, idx, scales], block_size=0)


def test_typed_float_ignores_bits():
    rng = np.random.default_rng(17)
    inputs = typed_inputs(rng, ml_dtypes.float8_e5m2, (6, 40), (6, 1), np.float32,
                          np.array([1, -1], np.int64))
    for bits in (2, 3, 8):
        check_typed(inputs, block_size=0, bits=bits)


def test_typed_empty_table():
    """A gather axis of length 0: every index is out of range (ORT: zeros)."""
    rng = np.random.default_rng(18)
    inputs = typed_inputs(rng, int4, (0, 32), (0, 2), np.float32, np.array([0, -1], np.int64))
    check_typed(inputs, block_size=16)


def test_typed_rank1():
    """Rank 1 (ONNX Runtime's shape inference asks for rank 2): the NumPy
    oracle."""
    rng = np.random.default_rng(14)
    data, idx, scales, zp = typed_inputs(rng, int4, (40,), (3,), np.float32,
                                         np.array([0, 39, -1, 40, -41], np.int64), zp=True)
    attrs = dict(gather_axis=0, quantize_axis=0, block_size=16)
    got = run_once([data, idx, scales, zp], attrs)
    np.testing.assert_array_equal(got, typed_oracle(data, idx, scales, zp, **attrs))


def test_typed_empty_and_layouts():
    rng = np.random.default_rng(15)
    data, idx, scales = typed_inputs(rng, int4, (7, 32), (7, 2), np.float32,
                                     np.zeros((0, 3), np.int64))
    attrs = dict(block_size=16)
    assert run_once([data, idx, scales], attrs).shape == (0, 3, 32)
    empty = run_once([data[:, :0], np.array([1, 2]), scales[:, :0]], attrs)
    assert empty.shape == (2, 0)
    # Fortran-order, strided and read-only inputs give the same result
    idx = np.array([[6, -2], [0, 3]], np.int64)
    want = typed_oracle(data, idx, scales, **attrs)
    wide = np.zeros((7, 64), int4)
    wide[:, ::2] = data
    ro = scales.copy()
    ro.flags.writeable = False
    for d, s in ((np.asfortranarray(data), np.asfortranarray(scales)), (wide[:, ::2], ro)):
        np.testing.assert_array_equal(run_once([d, idx, s], attrs), want)


def test_typed_used_paths():
    rng = np.random.default_rng(16)
    for dtype in INT_TYPES + FLOAT_TYPES:
        inputs = typed_inputs(rng, dtype, (4, 16), (4, 1), np.float16, np.array([1], np.int64))
        path = used_path(inputs, block_size=16)
        assert path.startswith(f"gather_block_quantized_{np.dtype(dtype).name}_float16_")


def good_int4():
    rng = np.random.default_rng(2)
    return typed_inputs(rng, int4, (4, 32), (4, 2), np.float32, np.array([1], np.int64), zp=True)


def good_float8():
    rng = np.random.default_rng(3)
    return typed_inputs(rng, float8_e4m3fn, (4, 32), (4, 2), np.float32, np.array([1], np.int64))


TYPED_BAD = [
    ("int4 bits 8", good_int4, lambda i: i, {"bits": 8}, ValueError, "bits"),
    ("int4 block 0", good_int4, lambda i: i, {"block_size": 0}, ValueError, "block_size"),
    ("int4 zero points uint8", good_int4, lambda i: i[:3] + [i[3].view(np.uint8)], {},
     TypeError, "input 3"),
    ("int4 zero points float", good_int4, lambda i: i[:3] + [i[2].copy()], {}, TypeError,
     "input 3"),
    ("int4 zero points shape", good_int4, lambda i: i[:3] + [i[3][:, :1]], {}, ValueError,
     "input 3"),
    ("int4 broadcast scales", good_int4, lambda i: [i[0], i[1], i[2][:1], i[3][:1]], {},
     ValueError, "input 2"),
    ("int4 scales for another block", good_int4, lambda i: i, {"block_size": 32}, ValueError,
     "input 2"),
    ("int4 scales rank", good_int4, lambda i: i[:2] + [i[2].reshape(8), i[3].reshape(8)], {},
     ValueError, "input 2"),
    ("int4 gather axis 2", good_int4, lambda i: i, {"gather_axis": 2}, ValueError,
     "gather_axis"),
    ("int4 quantize axis -3", good_int4, lambda i: i, {"quantize_axis": -3}, ValueError,
     "quantize_axis"),
    ("rank 17", good_int4, lambda i: [i[0].reshape((1,) * 15 + (4, 32)), i[1],
                                      i[2].reshape((1,) * 15 + (4, 2))], {}, ValueError,
     "rank"),
    ("float8 zero points", good_float8, lambda i: i + [i[0][:, :2].copy()], {}, ValueError,
     "input 3"),
    ("float8 scale 1 on quantize axis", good_float8, lambda i: i[:2] + [i[2][:, :1]], {},
     ValueError, "input 2"),
    ("float8 block 48", good_float8, lambda i: i, {"block_size": 48}, ValueError,
     "block_size"),
    ("double scales", good_float8, lambda i: i[:2] + [i[2].astype(np.float64)], {}, TypeError,
     "input 2"),
]


@pytest.mark.parametrize("name,make,edit,attrs,error,match", TYPED_BAD,
                         ids=[b[0] for b in TYPED_BAD])
def test_typed_bad_input(name, make, edit, attrs, error, match):
    inputs = edit(make())
    attrs = {"block_size": 16, **attrs}
    with pytest.raises(error, match=match) as info:
        run_once(inputs, attrs)
    assert OP in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_typed_sweep(seed):
    """Random ranks 1-4 (2-4 against ORT), axes, blocks, broadcast scales,
    zero points, index shapes and scale types, against ORT and NumPy."""
    rng = np.random.default_rng(1000 + seed)
    dtype = (INT_TYPES + FLOAT_TYPES)[seed % 7]
    rank = int(rng.integers(2, 5))
    shape = tuple(int(d) for d in rng.integers(1, 6, rank))
    g, q = (int(a) for a in rng.integers(0, rank, 2))
    block = int(rng.choice([16, 32, 64] + ([0] if dtype in FLOAT_TYPES else [])))
    shape = shape[:q] + (int(rng.integers(1, 80)),) + shape[q + 1:]
    n = shape[q]
    eff = block or n
    scale_shape = [-(-n // eff) if k == q else d for k, d in enumerate(shape)]
    if dtype in FLOAT_TYPES:
        scale_shape = [1 if k != q and rng.random() < 0.4 else d
                       for k, d in enumerate(scale_shape)]
    A = shape[g]
    idx = rng.integers(-A - 2, A + 2, tuple(rng.integers(0, 4, int(rng.integers(0, 3)))))
    idx = idx.astype(rng.choice([np.int32, np.int64]))
    scale_dtype = [np.float32, np.float16, bfloat16][seed % 3]
    inputs = typed_inputs(rng, dtype, shape, tuple(scale_shape), scale_dtype, idx,
                          zp=dtype in INT_TYPES and bool(rng.integers(0, 2)))
    check_typed(inputs, gather_axis=g - rank * int(rng.integers(0, 2)), quantize_axis=q,
                block_size=block)
