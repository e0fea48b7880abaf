"""What every adapter promises about its inputs (``KernelOp.run``): a missing
required input, a value that is not a tensor, a size that cannot fit and a
failure no check foresaw all end in a ValueError, TypeError or MemoryError
naming the operator; NumPy scalars and strided views are accepted."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import node_model, run_builtin, run_ours


def _session(op_type, inputs, domain="", opset=None, **attrs):
    """An evaluator with our kernels for one node whose input names are
    ``inputs`` ('' for an omitted optional input)."""
    names = [n for n in inputs if n]
    node = oh.make_node(op_type, inputs, ["y"], domain=domain, **attrs)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info(n, T.FLOAT, None) for n in names],
                          [oh.make_tensor_value_info("y", T.UNDEFINED, None)])
    opsets = [oh.make_opsetid("", opset or 21)] + ([oh.make_opsetid(domain, 1)] if domain else [])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=opsets))
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    return sess


@pytest.mark.parametrize("op_type, inputs, domain, missing", [
    ("Add", ["a"], "", 1),                                   # too few inputs
    ("Exp", [""], "", 0),                                    # required input left empty
    ("LayerNormalization", ["x", ""], "", 1),
    ("RMSNormalization", ["x"], "", 1),
    ("MoE", ["x", "r", ""], "com.microsoft", 2),
    ("CausalConvWithState", ["x", ""], "com.microsoft", 1),
])
def test_missing_required_input_names_it(op_type, inputs, domain, missing):
    sess = _session(op_type, inputs, domain, opset=23)
    feeds = {n: np.ones((2, 4, 4), np.float32) for n in inputs if n}
    with pytest.raises(ValueError, match=rf"^{op_type}: input {missing}\b.*required but missing"):
        sess.run(None, feeds)


@pytest.mark.parametrize("value", [[1.0, 2.0], 3.0, "x", {"a": 1}])
def test_input_that_is_not_a_tensor_is_a_type_error(value):
    sess = _session("Add", ["a", "b"])
    with pytest.raises(TypeError, match=r"^Add: input 1 \('b'\) must be a tensor, got"):
        sess.run(None, {"a": np.ones(2, np.float32), "b": value})


def test_numpy_scalar_is_a_tensor():
    sess = _session("Add", ["a", "b"])
    (y,) = sess.run(None, {"a": np.ones(2, np.float32), "b": np.float32(2)})
    np.testing.assert_array_equal(y, [3, 3])
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::Add"]


def test_ndarray_subclass_is_a_tensor():
    sess = _session("Add", ["a", "b"])
    (y,) = sess.run(None, {"a": np.ma.masked_array(np.ones(2, np.float32)),
                           "b": np.ones(2, np.float32)})
    assert type(y) is np.ndarray
    np.testing.assert_array_equal(y, [2, 2])


# A read-only view of 2^35 float32 elements (128 GiB dense) that costs nothing.
HUGE = np.broadcast_to(np.float32(1), (1 << 20, 1 << 15))


@pytest.mark.parametrize("op_type", ["Exp", "Softmax", "Tanh", "Sigmoid"])
def test_huge_broadcast_input_is_refused_before_allocating(op_type):
    model = node_model(op_type, [HUGE])
    with pytest.raises(MemoryError, match=rf"^{op_type}: input 0 \('x0'\).*137438953472 bytes"):
        run_ours(model, [HUGE])


def test_matmul_nbits_huge_broadcast_activation_is_refused():
    k, n, block = 32, 8, 32
    a = np.broadcast_to(np.float32(1), (1 << 30, k))   # 128 GiB dense
    b = np.zeros((n, 1, block // 2), np.uint8)
    scales = np.ones(n, np.float32)
    model = node_model("MatMulNBits", [a, b, scales], domain="com.microsoft", K=k, N=n,
                       bits=4, block_size=block)
    with pytest.raises(MemoryError, match=r"^MatMulNBits: .*bytes"):
        run_ours(model, [a, b, scales])


def test_huge_output_is_refused_before_allocating():
    # Concat of a broadcast view with itself: output 256 GiB.
    model = node_model("Concat", [HUGE, HUGE], axis=0)
    with pytest.raises(MemoryError, match=r"^Concat: .*bytes"):
        run_ours(model, [HUGE, HUGE])


def test_gather_reads_a_broadcast_input_in_place():
    """Two rows of a 128 GiB broadcast view: gathered without a dense copy."""
    data = np.broadcast_to(np.arange(1 << 15, dtype=np.float32), (1 << 20, 1 << 15))
    idx = np.array([0, 5], np.int64)
    (y,), names, paths = run_ours(node_model("Gather", [data, idx], axis=0), [data, idx])
    assert names == ["onnx_light_cpu::Gather"] and paths == ["gather_float32_strided_builtin"]
    np.testing.assert_array_equal(y, data[[0, 5]])


def test_gather_scalar_index_of_a_broadcast_input():
    data = np.broadcast_to(np.arange(8, dtype=np.float32)[:, None], (8, 1 << 20))
    idx = np.array(3, np.int64)
    (y,), names, paths = run_ours(node_model("Gather", [data, idx], axis=1), [data, idx])
    assert paths == ["gather_float32_strided_builtin"] and y.shape == (8,)
    np.testing.assert_array_equal(y, np.arange(8, dtype=np.float32))


def test_split_counts_a_huge_split_input_before_reading_it():
    x = np.arange(4, dtype=np.float32)
    split = np.broadcast_to(np.int64(0), ((1 << 32) + 1,))
    model = node_model("Split", [x, split], n_outputs=2)
    with pytest.raises(ValueError, match=r"^Split: input 1 \('x1'\) has 4294967297 sizes"):
        run_ours(model, [x, split])


def test_slice_counts_a_huge_starts_input_before_reading_it():
    x = np.arange(4, dtype=np.float32)
    starts = np.broadcast_to(np.int64(0), ((1 << 32) + 1,))
    model = node_model("Slice", [x, starts, starts])
    with pytest.raises(ValueError, match=r"^Slice: input 1 \('x1'\) has 4294967297 values"):
        run_ours(model, [x, starts, starts])


def test_reduce_sum_counts_a_huge_axes_input_before_reading_it():
    x = np.ones((2, 3), np.float32)
    axes = np.broadcast_to(np.int64(0), ((1 << 32) + 1,))
    with pytest.raises(ValueError, match=r"^ReduceSum: input 1 \('x1'\) has 4294967297 axes"):
        run_ours(node_model("ReduceSum", [x, axes]), [x, axes])


@pytest.mark.parametrize("op_type, inputs, attrs", [
    ("Gemm", [np.ones((2, 3), np.float32)] * 2, {"transB": 1000}),
    ("Gemm", [np.ones((2, 3), np.float32)] * 2, {"transA": -1}),
    ("ReduceSum", [np.ones((2, 3), np.float32), np.array([1])], {"keepdims": -1}),
    ("ReduceSum", [np.ones((2, 3), np.float32)], {"noop_with_empty_axes": 2}),
    ("Attention", [np.ones((1, 1, 2, 4), np.float32)] * 3, {"is_causal": 5}),
])
def test_flag_attributes_must_be_0_or_1(op_type, inputs, attrs):
    """Regression: other values were taken as 1."""
    (name, value), = attrs.items()
    model = node_model(op_type, inputs, opset=23, **attrs)
    # the adapters' own wording, or the declarative contract's
    with pytest.raises(ValueError, match=rf"^{op_type}: attribute {name} must be "
                                         rf"0 or 1, got {value}"):
        run_ours(model, inputs)


@pytest.mark.parametrize("op_type, attrs", [
    ("CausalConvWithState", {"channels_last": 1 << 40}),
    ("MoE", {"normalize_routing_weights": 1000}),
])
def test_microsoft_flag_attributes_must_be_0_or_1(op_type, attrs):
    (name, value), = attrs.items()
    x = np.ones((1, 4, 3), np.float32)
    inputs = [x, np.ones((4, 1, 2), np.float32)] if op_type == "CausalConvWithState" else \
        [x.reshape(4, 3), np.ones((4, 2), np.float32), np.ones((2, 5, 3), np.float32),
         np.ones((2, 5), np.float32), np.ones((2, 3, 5), np.float32)]
    model = node_model(op_type, inputs, domain="com.microsoft", **attrs)
    with pytest.raises(ValueError, match=rf"^{op_type}: attribute {name} must be "
                                         rf"0 or 1"):
        run_ours(model, inputs)


@pytest.mark.parametrize("opset", [1, 11, 13])
def test_softmax_keeps_a_scalar_shape(opset):
    x = np.array(1.5, np.float32)
    axis = 0 if opset < 13 else -1
    model = node_model("Softmax", [x], opset=opset, axis=axis)
    if opset >= 13:  # a scalar has no axis -1
        with pytest.raises(ValueError, match="^Softmax: input 0"):
            run_ours(model, [x])
        return
    (y,), names, _ = run_ours(model, [x])
    assert names == ["onnx_light_cpu::Softmax"]
    assert y.shape == () and y == run_builtin(model, [x])[0]


def test_unforeseen_failure_is_a_value_error_naming_the_node(monkeypatch):
    from onnx_light_cpu.ops import unary

    def broken(self, x):
        return {}["no such key"]

    monkeypatch.setattr(unary.Exp, "_run", broken)
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match=r"^Exp: cannot run on inputs \(float32\[3\]\): KeyError"):
        run_ours(node_model("Exp", [x]), [x])


def test_clear_error_without_the_operator_name_gets_it(monkeypatch):
    """A message from NumPy (say) is prefixed with the operator."""
    from onnx_light_cpu.ops import unary

    def numpy_says(self, x):
        raise ValueError("operands could not be broadcast together")

    monkeypatch.setattr(unary.Exp, "_run", numpy_says)
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match=r"^Exp: operands could not be broadcast"):
        run_ours(node_model("Exp", [x]), [x])
