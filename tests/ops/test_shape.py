"""Identity, Shape, Reshape, Squeeze, Unsqueeze, Flatten, Constant,
ConstantOfShape, Range, Expand, Tile, Where: against the
onnx.reference built-ins (bit for bit) over the element types, opsets and
attributes; views where the operator allows one, fresh contiguous outputs
where it does not; read-only constants; every downstream kernel takes the
read-only and strided arrays they pass on; bad input, with the message."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import layouts, node_model, run_builtin, same_bits

I64 = np.int64
DTYPES = [np.float32, np.float64, np.float16, bfloat16, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128, object]
EXOTIC = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4, ml_dtypes.uint4]


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "O":
        return np.array(rng.choice(["a", "bc", "", "xyz"], size=shape), dtype=object)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "iu" or dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        return rng.integers(0, 7, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def evaluator(model):
    """Our kernels, not folded: a node without inputs (Constant) would
    otherwise run once at load, where usage is not recorded."""
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess, fold_constants=False)
    olc.set_kernel_usage_recording(sess, True)
    return sess


def ours(op, inputs, opset=None, n_outputs=1, **attrs):
    """Our outputs on one node; our kernel must have run."""
    sess = evaluator(node_model(op, inputs, n_outputs, opset=opset, **attrs))
    outputs = sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})
    assert f"onnx_light_cpu::{op}" in olc.used_kernel_names(sess), olc.used_kernel_names(sess)
    return outputs


def check(op, inputs, opset=None, **attrs):
    """Ours equal the built-in's bit for bit; inputs unchanged.  Returns ours."""
    originals = [np.array(a, copy=True) for a in inputs]
    want = run_builtin(node_model(op, inputs, opset=opset, **attrs), inputs)
    got = ours(op, inputs, opset, **attrs)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype == object:
            assert g.tolist() == w.tolist()
        else:
            assert same_bits(np.ascontiguousarray(g), np.ascontiguousarray(w)), (g, w)
    for a, o in zip(inputs, originals):
        assert a.tolist() == o.tolist() if a.dtype == object else same_bits(a, o)
    return got


def is_view_of(y, x) -> bool:
    return y.size == 0 or np.shares_memory(y, x)


def fresh(y, x) -> bool:
    """A contiguous array of its own."""
    return y.flags.c_contiguous and y.flags.writeable and not np.shares_memory(y, x)


def error(op, inputs, match, opset=None, kind=ValueError, **attrs):
    with pytest.raises(kind, match=match):
        ours(op, inputs, opset, **attrs)


# ------------------------------------------------------------------ Identity

@pytest.mark.parametrize("dtype", DTYPES + EXOTIC, ids=lambda d: np.dtype(d).name)
def test_identity_returns_its_input(dtype):
    x = values((2, 3), dtype)
    (y,) = ours("Identity", [x])
    assert y is x


def test_identity_sequences_and_optionals():
    seq = [np.arange(3, dtype=np.float32), np.ones(2, np.float32)]
    graph = oh.make_graph(
        [oh.make_node("Identity", ["s"], ["t"])], "g",
        [oh.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)],
        [oh.make_tensor_sequence_value_info("t", TensorProto.FLOAT, None)])
    sess = evaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]))
    (out,) = sess.run(None, {"s": seq})
    assert out is seq
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::Identity"]


# ------------------------------------------------------------------ Shape

@pytest.mark.parametrize("shape", [(), (0,), (2, 3, 4), (1, 14, 128, 64)], ids=str)
@pytest.mark.parametrize("opset", [13, 15, 21, 25])
def test_shape(shape, opset):
    x = values(shape, np.float32)
    (y,) = check("Shape", [x], opset)
    (z,) = ours("Shape", [x], opset)
    assert y.dtype == I64 and z is not y and y.flags.writeable


@pytest.mark.parametrize("start,end", [(0, None), (1, None), (-1, None), (0, -1), (1, 3),
                                       (-10, 10), (3, 1), (5, None), (None, 2)], ids=str)
def test_shape_start_end(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    x = values((2, 3, 4, 5), np.int8)
    (y,) = check("Shape", [x], 21, **attrs)
    assert y.tolist() == list(x.shape[slice(start, end)])


def test_shape_ignores_start_before_opset_15():
    (y,) = ours("Shape", [values((2, 3), np.float32)], 13)
    assert y.tolist() == [2, 3]


# ------------------------------------------------------------------ Reshape

RESHAPES = [((2, 3, 4), [4, 6]), ((2, 3, 4), [-1]), ((2, 3, 4), [0, -1]), ((2, 3, 4), [0, 0, 4]),
            ((2, 3, 4), [2, -1, 2]), ((1, 128, 896), [1, 128, 14, 64]), ((), [1, 1]),
            ((1,), []), ((0, 3), [-1, 3]), ((2, 0, 3), [0, 0, 3])]


@pytest.mark.parametrize("case", RESHAPES, ids=str)
@pytest.mark.parametrize("opset", [5, 13, 14, 21])
def test_reshape(case, opset):
    shape, dims = case
    x = values(shape, np.float32)
    (y,) = check("Reshape", [x, np.array(dims, I64)], opset)
    assert is_view_of(y, x)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reshape_types_and_layouts(dtype):
    x = values((4, 6), dtype)
    for name, lx in layouts(x):
        (y,) = check("Reshape", [lx, np.array([2, 0, -1], I64)], 21)
        if lx.flags.c_contiguous:
            assert is_view_of(y, lx), name


@pytest.mark.parametrize("dims", [[0, 4], [3, 0], [0]], ids=str)
def test_reshape_allowzero(dims):
    x = values((0, 4) if dims != [0] else (0,), np.float32)
    if dims == [3, 0]:
        x = values((0, 3, 5), np.float32)
    check("Reshape", [x, np.array(dims, I64)], 14, allowzero=1)


def test_reshape_opset_1_shape_attribute():
    x = values((2, 6), np.float32)
    (y,) = ours("Reshape", [x], 1, shape=[3, -1])
    assert y.shape == (3, 4) and is_view_of(y, x)


@pytest.mark.parametrize("dims,match", [
    ([5, -1], r"\[5, -1\] cannot reshape data of shape \(2, 6\)"),
    ([-1, -1], "more than one -1"),
    ([-2, 6], "negative dimension"),
    ([5, 5], "gives 25 elements"),
    ([0, 0, 0], "copies dimension 2"),
])
def test_reshape_errors(dims, match):
    error("Reshape", [values((2, 6), np.float32), np.array(dims, I64)],
          r"Reshape: input 1 \('x1'\) .*" + match)


def test_reshape_allowzero_with_minus_one():
    error("Reshape", [values((0, 3), np.float32), np.array([0, -1], I64)],
          "both 0 and -1 with allowzero=1", 14, allowzero=1)


# ------------------------------------------------------------------ Squeeze, Unsqueeze

@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 2), None), ((1, 3, 1, 2), [0]),
                                        ((1, 3, 1, 2), [-2, 0]), ((1,), [0]), ((1, 1), None),
                                        ((0, 1), [1]), ((2, 3), None), ((), None)], ids=str)
@pytest.mark.parametrize("opset", [11, 13, 21])
def test_squeeze(shape, axes, opset):
    x = values(shape, np.float32)
    if opset < 13:
        (y,) = check("Squeeze", [x], opset, **({"axes": axes} if axes is not None else {}))
    else:
        inputs = [x] + ([np.array(axes, I64)] if axes is not None else [])
        (y,) = check("Squeeze", inputs, opset)
    assert is_view_of(y, x)


@pytest.mark.parametrize("shape,axes", [((3, 2), [0]), ((3, 2), [-1]), ((3, 2), [0, 3]),
                                        ((3, 2), [1, -1]), ((), [0]), ((0,), [0, 2]),
                                        ((128,), [0, 1])], ids=str)
@pytest.mark.parametrize("opset", [11, 13, 21])
def test_unsqueeze(shape, axes, opset):
    x = values(shape, np.int64)
    if opset < 13:
        (y,) = check("Unsqueeze", [x], opset, axes=axes)
    else:
        (y,) = check("Unsqueeze", [x, np.array(axes, I64)], opset)
    assert is_view_of(y, x)


@pytest.mark.parametrize("op", ["Squeeze", "Unsqueeze"])
def test_squeeze_unsqueeze_strided_input_stays_a_view(op):
    x = values((1, 3, 8), np.float32)[..., ::2]
    axes = np.array([0], I64)
    (y,) = check(op, [x, axes], 21)
    assert is_view_of(y, x)


def test_unsqueeze_scalar_axes():
    # a 0-d axes tensor, as ONNX's own function bodies (AffineGrid) write it
    (y,) = ours("Unsqueeze", [values((3,), np.float32), np.array(-1, I64)], 21)
    assert y.shape == (3, 1)


@pytest.mark.parametrize("op,shape,axes,match", [
    ("Squeeze", (1, 3), [1], r"squeezes axis 1 of size 3"),
    ("Squeeze", (1, 3), [2], r"has axis 2, out of range \[-2, 1\]"),
    ("Squeeze", (1, 1), [0, -2], "repeats axis 0"),
    ("Unsqueeze", (3,), [2], r"has axis 2, out of range \[-2, 1\]"),
    ("Unsqueeze", (3,), [0, 0], "repeats axis 0"),
])
def test_squeeze_unsqueeze_errors(op, shape, axes, match):
    error(op, [values(shape, np.float32), np.array(axes, I64)],
          rf"{op}: input 1 \('x1'\) \(axes\) " + match, 21)


# ------------------------------------------------------------------ Flatten

@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 14, 128, 64), (5,)], ids=str)
@pytest.mark.parametrize("opset", [9, 11, 13, 21])
def test_flatten(shape, opset):
    x = values(shape, np.float16)
    r = len(shape)
    for axis in range(-r if opset >= 11 else 0, r + 1):
        (y,) = check("Flatten", [x], opset, axis=axis)
        assert is_view_of(y, x)


@pytest.mark.parametrize("axis,want", [(0, (1, 0)), (1, (0, 3)), (2, (0, 1)), (-1, (0, 3))])
def test_flatten_empty(axis, want):
    # the built-in fails here (NumPy cannot infer -1 next to a 0)
    (y,) = ours("Flatten", [values((0, 3), np.float32)], 21, axis=axis)
    assert y.shape == want


def test_flatten_axis_error():
    error("Flatten", [values((2, 3), np.float32)], r"Flatten: input 0 \('x0'\) of rank 2 "
          r"cannot be flattened at axis 3", 21, axis=3)


# ------------------------------------------------------------------ Constant

def constant_model(opset=21, **attrs):
    graph = oh.make_graph([oh.make_node("Constant", [], ["y"], **attrs)], "g", [],
                          [oh.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def run_constant(opset=21, **attrs):
    model = constant_model(opset, **attrs)
    sess = evaluator(model)
    first = sess.run(None, {})[0]
    second = sess.run(None, {})[0]
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::Constant"] * 2
    assert first is second and not first.flags.writeable  # made once, shared read-only
    (want,) = ReferenceEvaluator(model).run(None, {})
    return first, np.asarray(want)


@pytest.mark.parametrize("dtype", DTYPES + EXOTIC, ids=lambda d: np.dtype(d).name)
def test_constant_value(dtype):
    x = values((2, 3), dtype)
    got, want = run_constant(value=nh.from_array(x))
    assert got.dtype == x.dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize("attr,value,dtype", [
    ("value_float", 1.5, np.float32), ("value_floats", [1.0, -2.5], np.float32),
    ("value_int", -3, np.int64), ("value_ints", [1, 2, 3], np.int64),
    ("value_string", "abc", object),
    ("value_strings", ["a", "", "xyz"], object)])
@pytest.mark.parametrize("opset", [12, 13, 21])
def test_constant_value_attributes(attr, value, dtype, opset):
    got, want = run_constant(opset, **{attr: value})
    assert got.dtype == dtype and got.tolist() == want.tolist()
    assert got.shape == np.asarray(value).shape


def test_constant_sparse_value():
    sparse = oh.make_sparse_tensor(nh.from_array(np.array([5.0, 7.0], np.float32)),
                                   nh.from_array(np.array([1, 4], I64)), [2, 3])
    model = constant_model(sparse_value=sparse)
    sess = evaluator(model)
    (y,) = sess.run(None, {})
    assert y.tolist() == [[0, 5, 0], [0, 7, 0]] and not y.flags.writeable


def test_constant_empty_ints():
    model = constant_model(value_int=1)
    model.graph.node[0].ClearField("attribute")
    model.graph.node[0].attribute.append(
        oh.make_attribute("value_ints", [], attr_type=onnx.AttributeProto.INTS))
    (y,) = evaluator(model).run(None, {})
    assert y.dtype == I64 and y.shape == (0,)


def test_constant_without_value():
    model = constant_model(value_int=1)
    model.graph.node[0].ClearField("attribute")
    olc.register_kernels_global()  # the built-in refuses to be built
    try:
        sess = ReferenceEvaluator(model)
    finally:
        olc.unregister_kernels_global()
    with pytest.raises(ValueError, match="Constant: exactly one of the attributes"):
        sess.run(None, {})


# ------------------------------------------------------------------ ConstantOfShape

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, bfloat16, np.int8,
                                   np.int32, np.int64, np.uint8, np.uint64, np.bool_]
                         + EXOTIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [[2, 3], [], [0, 4], [1, 1, 128]], ids=str)
def test_constant_of_shape(dtype, shape):
    value = nh.from_array(values((1,), dtype, seed=3))
    (y,) = check("ConstantOfShape", [np.array(shape, I64)], 21, value=value)
    assert y.flags.c_contiguous and y.flags.writeable


def test_constant_of_shape_default_value():
    (y,) = check("ConstantOfShape", [np.array([2, 2], I64)], 9)
    assert y.dtype == np.float32 and not y.any()


def test_constant_of_shape_errors():
    error("ConstantOfShape", [np.array([2, -1], I64)],
          r"ConstantOfShape: input 0 \('x0'\) has a negative dimension")
    error("ConstantOfShape", [np.array([2, 2], I64)], "attribute value must hold one element",
          value=nh.from_array(np.zeros(2, np.float32)))


def test_absurd_sizes_are_refused_before_allocating():
    # more than 2**63 bytes: not a size at all
    for op, inputs in [("ConstantOfShape", [np.array([2**40, 2**40], I64)]),
                       ("Expand", [values((1,), np.float32), np.array([2**40, 2**40], I64)]),
                       ("Tile", [values((2, 2), np.float32), np.array([2**40, 2**40], I64)])]:
        error(op, inputs, rf"{op}: output 0 of shape .* more than 2\*\*63")
    error("Range", [np.array(-2**62, I64), np.array(2**62, I64), np.array(1, I64)],
          r"Range: .* more than 2\*\*63")
    # a real size that no memory holds
    for op, inputs in [("ConstantOfShape", [np.array([2**25, 2**25], I64)]),
                       ("Expand", [values((1,), np.float32), np.array([2**25, 2**25], I64)]),
                       ("Tile", [values((2, 2), np.float32), np.array([2**24, 2**24], I64)]),
                       ("Range", [np.array(0, I64), np.array(2**55, I64), np.array(1, I64)])]:
        error(op, inputs, rf"{op}: output 0 .* bytes available", kind=MemoryError)


# ------------------------------------------------------------------ Range

RANGES = [(1, 5, 1), (0, 10, 3), (10, 0, -3), (5, 1, 1), (3, 3, 1), (-7, 20, 4), (0, 1, 5)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", RANGES, ids=str)
def test_range(dtype, case):
    check("Range", [np.array(v, dtype) for v in case], 11)


@pytest.mark.parametrize("case", [(0.1, 1.0, 0.1), (1e-3, 100.0, 7e-3), (1.0, -1.0, -1e-4)],
                         ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_range_float_steps(case, dtype):
    (y,) = ours("Range", [np.array(v, dtype) for v in case], 11)
    start, limit, delta = (float(np.dtype(dtype).type(v)) for v in case)
    want = (start + np.arange(y.size) * delta).astype(dtype)  # the specification's formula
    assert y.size == max(int(np.ceil((limit - start) / delta)), 0)
    assert same_bits(y, want)


@pytest.mark.parametrize("dtype", [np.float16, bfloat16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("stash", [None, TensorProto.FLOAT, TensorProto.DOUBLE])
def test_range_low_precision_opset_27(dtype, stash):
    attrs = {} if stash is None else {"stash_type": stash}
    check("Range", [np.array(v, dtype) for v in (0.5, 300, 1.5)], 27, **attrs)


def test_range_errors():
    error("Range", [np.array(0, I64), np.array(5, I64), np.array(0, I64)],
          r"Range: input 2 \('x2'\) \(delta\) must not be zero", 11)
    error("Range", [np.array([0, 1], I64), np.array(5, I64), np.array(1, I64)],
          r"Range: input 0 \('x0'\) \(start\) must be a scalar", 11)
    error("Range", [np.array(0, np.float32), np.array(np.inf, np.float32),
                    np.array(1, np.float32)], "Range: the number of elements .* not finite", 11)
    error("Range", [np.array(v, np.float16) for v in (0, 5, 1)],
          "Range: input 0 .* takes from opset 27", 21, kind=TypeError)


# ------------------------------------------------------------------ Expand, Tile

@pytest.mark.parametrize("shape,dims", [((1, 1, 1, 128), [1, 1, 128, 128]), ((3, 1), [2, 1, 6]),
                                        ((3, 1), [3, 4]), ((2, 3), [1, 1]), ((), [2, 2]),
                                        ((1,), [0]), ((4, 1), [1, 1, 1])], ids=str)
@pytest.mark.parametrize("opset", [8, 13])
def test_expand(shape, dims, opset):
    x = values(shape, np.float32)
    (y,) = check("Expand", [x, np.array(dims, I64)], opset)
    assert fresh(y, x)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_expand_types_and_layouts(dtype):
    x = values((3, 1), dtype)
    for _, lx in layouts(x):
        (y,) = check("Expand", [lx, np.array([2, 3, 4], I64)], 13)
        assert fresh(y, lx)


def test_expand_error():
    error("Expand", [values((3, 2), np.float32), np.array([4, 4], I64)],
          r"Expand: input 1 \('x1'\) shape \(4, 4\) does not broadcast with input 0's \(3, 2\)")


@pytest.mark.parametrize("shape,repeats", [
    ((2, 3), [2, 1]), ((2, 3), [1, 3]), ((1, 2, 128, 64), [1, 7, 1, 1]), ((2, 3), [0, 2]),
    ((), []), ((0, 2), [3, 2])], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, bfloat16, np.bool_, object],
                         ids=lambda d: np.dtype(d).name)
def test_tile(shape, repeats, dtype):
    x = values(shape, dtype)
    (y,) = check("Tile", [x, np.array(repeats, I64)], 13)
    assert fresh(y, x)


def test_tile_layouts():
    x = values((3, 4), np.float32)
    for _, lx in layouts(x):
        check("Tile", [lx, np.array([2, 3], I64)], 13)


def test_tile_opset_1_tiles_and_axis():
    x = values((2, 3), np.float32)
    (y,) = ours("Tile", [x, np.array(3, I64), np.array(-1, I64)], 1)
    assert same_bits(y, np.tile(x, (1, 3)))


def test_tile_errors():
    error("Tile", [values((2, 3), np.float32), np.array([2], I64)],
          r"Tile: input 1 \('x1'\) has 1 values for input 0 of rank 2", 13)
    error("Tile", [values((2, 3), np.float32), np.array([2, -1], I64)],
          "negative repeat count", 13)


# ------------------------------------------------------------------ Where

@pytest.mark.parametrize("shapes", [((1, 1, 128, 128), (1, 1, 128, 128), ()),
                                    ((3, 1), (1, 4), (3, 4)), ((), (), ()), ((0, 2), (2,), ())],
                         ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_where(shapes, dtype):
    c = values(shapes[0], np.bool_, 1)
    x, y = values(shapes[1], dtype, 2), values(shapes[2], dtype, 3)
    (out,) = check("Where", [c, x, y], 16)
    assert out.flags.c_contiguous


def test_where_layouts():
    c, x, y = values((3, 4), np.bool_, 1), values((3, 4), np.float32, 2), values((4,), np.float32)
    for _, lx in layouts(x):
        for _, lc in layouts(c):
            check("Where", [lc, lx, y], 16)


def test_where_errors():
    c, x = values((3, 4), np.bool_), values((3, 4), np.float32)
    error("Where", [c, x, values((2,), np.float32)],
          r"Where: input 2 \('x2'\) shape \(2,\) does not broadcast", 16)
    error("Where", [c, x, values((4,), np.float64)],
          r"Where: input 2 \('x2'\) has element type float64, expected float32", 16,
          kind=TypeError)
    error("Where", [x, x, x], r"Where: input 0 \('x0'\) has element type float32", 16,
          kind=TypeError)


# ------------------------------------------------------------------ downstream

def test_downstream_kernels_take_read_only_and_strided_glue_outputs():
    """A read-only Constant, a Squeeze of a strided input and a Reshape view
    flow into our kernels (elementwise, MatMul, Softmax, Gather, Concat,
    Slice, Cast, ReduceSum, LayerNormalization): the built-ins' results."""
    w = values((8, 8), np.float32, 5)
    nodes = [
        oh.make_node("Constant", [], ["w"], value=nh.from_array(w)),
        oh.make_node("Constant", [], ["idx"], value=nh.from_array(np.array([2, 0], I64))),
        oh.make_node("Constant", [], ["ax"], value=nh.from_array(np.array([0], I64))),
        oh.make_node("Squeeze", ["x", "ax"], ["xs"]),  # strided view of the strided input
        oh.make_node("Reshape", ["w", "shape"], ["wr"]),  # read-only view
        oh.make_node("Add", ["xs", "w"], ["a"]),
        oh.make_node("Mul", ["wr", "xs"], ["m"]),
        oh.make_node("MatMul", ["xs", "w"], ["mm"]),
        oh.make_node("Softmax", ["xs"], ["sm"], axis=-1),
        oh.make_node("Gather", ["w", "idx"], ["g"], axis=0),
        oh.make_node("Gather", ["xs", "idx"], ["g2"], axis=1),
        oh.make_node("Concat", ["w", "xs"], ["c"], axis=0),
        oh.make_node("Abs", ["wr"], ["ab"]),
        oh.make_node("Cast", ["xs"], ["ca"], to=TensorProto.DOUBLE),
        oh.make_node("ReduceSum", ["w", "ax"], ["rs"], keepdims=0),
        oh.make_node("LayerNormalization", ["xs", "w"], ["ln"], axis=0),
        oh.make_node("Slice", ["w", "idx", "shape"], ["sl"]),
        oh.make_node("Transpose", ["xs"], ["t"], perm=[1, 0]),
        oh.make_node("Where", ["cond", "w", "xs"], ["wh"]),
        oh.make_node("Expand", ["xs", "shape"], ["e"]),
        oh.make_node("Tile", ["wr", "shape2"], ["ti"]),
    ]
    outs = ["a", "m", "mm", "sm", "g", "g2", "c", "ab", "ca", "rs", "ln", "sl", "t", "wh", "e",
            "ti"]
    graph = oh.make_graph(
        nodes, "g",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, None),
         oh.make_tensor_value_info("shape", TensorProto.INT64, None),
         oh.make_tensor_value_info("shape2", TensorProto.INT64, None),
         oh.make_tensor_value_info("cond", TensorProto.BOOL, None)],
        [oh.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    x = values((1, 8, 16), np.float32, 6)[..., ::2]  # strided
    feeds = {"x": x, "shape": np.array([8, 8], I64), "shape2": np.array([1, 2], I64),
             "cond": values((8, 8), np.bool_, 7)}
    want = ReferenceEvaluator(model).run(None, feeds)
    sess = evaluator(model)
    got = sess.run(None, feeds)
    for name, g, w_ in zip(outs, got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-6, err_msg=name)
    used = set(olc.used_kernel_names(sess))
    for op in ("Constant", "Squeeze", "Reshape", "Add", "Mul", "MatMul", "Softmax", "Gather",
               "Concat", "Abs", "Cast", "ReduceSum", "LayerNormalization", "Slice",
               "Transpose", "Where", "Expand", "Tile"):
        assert f"onnx_light_cpu::{op}" in used, op


def test_every_glue_operator_is_registered():
    names = olc.registered_kernel_names()
    for op in ("Identity", "Shape", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Constant",
               "ConstantOfShape", "Range", "Expand", "Tile", "Transpose", "Where"):
        assert names[op] == f"onnx_light_cpu::{op}"
    assert onnx.defs.has("Range")
