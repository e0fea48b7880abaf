"""Schemas registered with onnx.defs at import: SimplifiedLayerNormalization."""

from __future__ import annotations

import importlib

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu import schemas


def _model(x_type=TensorProto.FLOAT16, s_type=TensorProto.FLOAT, stash=1, axis=-1,
           with_inv=True):
    outputs = ["Y", "inv"] if with_inv else ["Y"]
    node = oh.make_node("SimplifiedLayerNormalization", ["X", "S"], outputs, axis=axis,
                        epsilon=1e-6, stash_type=stash)
    graph = oh.make_graph(
        [node], "g",
        [oh.make_tensor_value_info("X", x_type, [2, "seq", 8]),
         oh.make_tensor_value_info("S", s_type, [8])],
        [oh.make_tensor_value_info("Y", s_type, [2, "seq", 8])]
        + ([oh.make_tensor_value_info("inv", TensorProto.DOUBLE if stash == 11 else
                                      TensorProto.FLOAT, [2, "seq", 1])] if with_inv else []))
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)], ir_version=10)


def test_schema_is_registered_in_the_default_domain():
    schema = onnx.defs.get_schema("SimplifiedLayerNormalization", 21, "")
    assert schema.since_version == 1 and schema.domain == ""
    assert set(schema.attributes) == {"axis", "epsilon", "stash_type"}
    assert [p.name for p in schema.inputs] == ["X", "scale"]
    assert [p.name for p in schema.outputs] == ["Y", "inv_std_var"]
    assert schema in schemas.registered_schemas() or any(
        s.name == schema.name for s in schemas.registered_schemas())


@pytest.mark.parametrize("stash", [1, 11])
def test_checker_full_check_accepts_a_model(stash):
    onnx.checker.check_model(_model(stash=stash), full_check=True)
    onnx.checker.check_model(_model(with_inv=False), full_check=True)


def test_shape_inference_types_and_statistics_shape():
    model = _model(stash=11, axis=1)
    del model.graph.output[:]
    model.graph.output.extend([oh.make_tensor_value_info("Y", 0, None),
                               oh.make_tensor_value_info("inv", 0, None)])
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type for v in inferred.graph.output}
    assert types["Y"].elem_type == TensorProto.FLOAT
    assert [d.dim_value or d.dim_param for d in types["Y"].shape.dim] == [2, "seq", 8]
    assert types["inv"].elem_type == TensorProto.DOUBLE
    # Every normalized dimension is one (the runtime-compatible shape).
    assert [d.dim_value or d.dim_param for d in types["inv"].shape.dim] == [2, 1, 1]


def test_registration_is_idempotent():
    before = schemas.registered_schemas()
    assert schemas.register_schemas() == before
    importlib.reload(schemas)  # a second import does not register twice
    assert onnx.defs.has("SimplifiedLayerNormalization", "")


def test_no_clash_with_standard_operators():
    standard = {s.name for s in onnx.defs.get_all_schemas_with_history()
                if s.domain == "" and s not in schemas.registered_schemas()
                and s.name != "SimplifiedLayerNormalization"}
    assert "SimplifiedLayerNormalization" not in standard


def test_builtin_fails_clearly_ours_runs():
    model = _model(x_type=TensorProto.FLOAT, s_type=TensorProto.FLOAT)
    x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    s = np.ones(8, np.float32)
    builtin = ReferenceEvaluator(model)  # built; running it says what to do
    with pytest.raises(NotImplementedError, match="SimplifiedLayerNormalization.*register"):
        builtin.run(None, {"X": x, "S": s})
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    y, inv = sess.run(None, {"X": x, "S": s})
    want = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + np.float32(1e-6))
    np.testing.assert_allclose(inv, want, rtol=1e-5)
    np.testing.assert_allclose(y, x * want, rtol=1e-5, atol=1e-6)


def test_every_custom_kernel_has_a_registered_schema_with_inference():
    kernels = {k.op_type for k in olc.registered_kernels() if k.domain == "com.microsoft"}
    records = {r.name: r for r in olc.custom_op_schemas()}
    assert set(records) == kernels
    for name, record in records.items():
        assert record.infer is not None, name
        assert onnx.defs.has(name, "com.microsoft"), name
        assert olc.operator_schema_lookup(name, "com.microsoft").since_version == \
            record.since_version
    assert [r.name for r in olc.experimental_op_schemas()] == ["SimplifiedLayerNormalization"]
    assert all(r.doc == "" for r in olc.custom_op_schemas(init_doc=False))
