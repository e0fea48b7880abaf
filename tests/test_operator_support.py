"""The support inventory: operator_support() and register_operator_support()."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu import fusion, schemas, support
from onnx_light_cpu.memory_estimate import PeakMemory
from onnx_light_cpu.registry import api, hook
from onnx_light_cpu.support import OperatorSupport, operator_support, register_operator_support

MS = "com.microsoft"


def custom_kernels() -> set[tuple[str, str]]:
    return {(k.domain, k.op_type) for k in olc.registered_kernels() if k.domain == MS}


def test_one_record_per_custom_and_experimental_operator():
    records = operator_support()
    keys = [(r.domain, r.op_type) for r in records]
    assert keys == sorted(keys) and len(keys) == len(set(keys))
    assert custom_kernels() | {("", "SimplifiedLayerNormalization")} <= set(keys)
    # nothing but com.microsoft and the experimental default-domain operators
    assert {d for d, _ in keys} == {MS, ""}
    assert {op for d, op in keys if d == ""} == {
        r.name for r in schemas.experimental_op_schemas(init_doc=False)}


def test_record_is_an_immutable_named_tuple():
    record = operator_support()[0]
    assert isinstance(record, OperatorSupport) and isinstance(record, tuple)
    assert OperatorSupport._fields == ("domain", "op_type", "shape_inference", "peak_memory",
                                       "fusion_patterns", "gradient")
    with pytest.raises(AttributeError):
        record.gradient = True
    assert isinstance(record.fusion_patterns, tuple)


def test_shape_inference_comes_from_the_schema_records():
    for r in operator_support():
        select = schemas.custom_op_schemas if r.domain == MS else schemas.experimental_op_schemas
        records = [s for s in select(r.op_type, init_doc=False) if s.name == r.op_type]
        if not records:  # no record yet (another helper's family): tolerated
            assert r.shape_inference is None
            continue
        latest = max(records, key=lambda s: s.since_version)
        assert r.shape_inference is latest.infer
    (sln,) = [r for r in operator_support() if r.op_type == "SimplifiedLayerNormalization"]
    assert sln.domain == "" and callable(sln.shape_inference)


def test_peak_memory_functions():
    for r in operator_support():
        assert callable(r.peak_memory), r
    (sln,) = [r for r in operator_support() if r.op_type == "SimplifiedLayerNormalization"]
    node = oh.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"])
    assert sln.peak_memory(node, [(2, 3, 8), (8,)], [TensorProto.FLOAT] * 2) == PeakMemory(0, 0)
    (nbits,) = [r for r in operator_support() if r.op_type == "MatMulNBits"]
    node = oh.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain=MS, K=64, N=32, bits=4,
                        block_size=32, accuracy_level=4)
    got = nbits.peak_memory(node, [(1, 64), (32, 2, 16), (32, 2)],
                            [TensorProto.FLOAT, TensorProto.UINT8, TensorProto.FLOAT],
                            {"b", "s"})
    assert got.prepared > 0


def test_fusion_patterns_and_gradients():
    for r in operator_support():
        assert r.gradient == ((r.domain, r.op_type) in olc.gradients.default_registry())
        known = {p.name: p for p in fusion.PATTERNS}
        for name in r.fusion_patterns:
            assert known[name].produces == (r.domain, r.op_type)
    patterns = {r.op_type: r.fusion_patterns for r in operator_support() if r.fusion_patterns}
    assert patterns == {"BiasGelu": ("bias_gelu",), "CDist": ("cdist",),
                        "FusedConv": ("fused_conv",),
                        "GroupQueryAttention": ("group_query_attention",),
                        "LinearAttention": ("linear_attention",),
                        "MatMulNBits": ("matmul_nbits_bias",), "QuickGelu": ("quick_gelu",)}


def test_operator_support_registers_and_runs_nothing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("operator_support registered something")

    monkeypatch.setattr(onnx.defs, "register_schema", refuse)
    monkeypatch.setattr(schemas, "register_schemas", refuse)
    monkeypatch.setattr(api, "_install", refuse)
    table = dict(hook.GLOBAL_TABLE)
    operator_support()
    assert dict(hook.GLOBAL_TABLE) == table


def test_register_operator_support_is_idempotent():
    first = register_operator_support()
    assert register_operator_support() is first
    assert first == operator_support()
    assert support.registered_operator_support() is first
    for r in first:
        if r.shape_inference is not None:
            assert onnx.defs.has(r.op_type, r.domain)
    assert onnx.defs.has("SimplifiedLayerNormalization", "")


@pytest.fixture
def calls(monkeypatch):
    seen = []
    original = support.register_operator_support

    def counting():
        seen.append(1)
        return original()

    monkeypatch.setattr(support, "register_operator_support", counting)
    return seen


def _session():
    node = oh.make_node("FastGelu", ["x"], ["y"], domain=MS)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                oh.make_opsetid(MS, 1)], ir_version=10)
    return ReferenceEvaluator(model)


@pytest.mark.parametrize("helper", ["register_kernels_global", "register_kernels",
                                    "register_kernel_global", "register_kernels_for_session",
                                    "register_kernel_for_session"])
def test_every_registration_helper_calls_it(calls, helper):
    try:
        if helper in ("register_kernels_global", "register_kernels"):
            getattr(olc, helper)()
        elif helper == "register_kernel_global":
            olc.register_kernel_global(MS, "FastGelu")
        elif helper == "register_kernels_for_session":
            olc.register_kernels_for_session(_session())
        else:
            sess = _session()
            olc.register_kernel_for_session(sess, MS, "FastGelu")
            olc.set_kernel_usage_recording(sess, True)
            sess.run(None, {"x": np.ones(4, np.float32)})
            assert olc.used_kernel_names(sess) == ["onnx_light_cpu::FastGelu"]
    finally:
        if helper in ("register_kernels_global", "register_kernels", "register_kernel_global"):
            olc.unregister_kernels_global()
    assert calls == [1]
