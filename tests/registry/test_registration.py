"""Registration scopes, precedence, replacement and reach."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

import onnx_light_cpu as olc
from onnx_light_cpu import MicrosoftKernelImplementation as Policy

import models
from models import X

N_KERNELS = len(olc.registered_kernels())


def recorded(sess, feeds):
    """Outputs and kernel names of one recorded run."""
    olc.set_kernel_usage_recording(sess, True)
    olc.clear_used_kernel_names(sess)
    outputs = sess.run(None, feeds)
    return outputs, olc.used_kernel_names(sess)


def test_global_registration_reaches_later_evaluators_only():
    before = ReferenceEvaluator(models.chain("Abs", "Exp"))
    assert olc.register_kernels_global() == N_KERNELS
    after = ReferenceEvaluator(models.chain("Abs", "Exp"))
    _, names = recorded(after, {"x": X})
    assert names == ["onnx_light_cpu::Abs", "onnx_light_cpu::Exp"]
    (y,), names = recorded(before, {"x": X})
    assert names == []  # it keeps the built-ins it resolved
    np.testing.assert_allclose(y, np.exp(np.abs(X)), rtol=1e-6)


def test_register_kernels_is_the_global_alias():
    assert olc.register_kernels() == N_KERNELS
    _, names = recorded(ReferenceEvaluator(models.chain("Tanh")), {"x": X})
    assert names == ["onnx_light_cpu::Tanh"]


def test_single_operator_global_registration():
    assert olc.register_kernel_global("", "Abs") == 1
    assert olc.register_kernel_global("ai.onnx", "Abs") == 1  # same domain
    _, names = recorded(ReferenceEvaluator(models.chain("Abs", "Exp")), {"x": X})
    assert names == ["onnx_light_cpu::Abs"]


def test_unknown_operator_is_rejected():
    with pytest.raises(ValueError, match="no kernel for ai.onnx::NoSuchOp"):
        olc.register_kernel_global("", "NoSuchOp")
    with pytest.raises(ValueError, match="com.microsoft::Abs"):
        olc.register_kernel_global("com.microsoft", "Abs")


def test_unregister_restores_builtins_for_later_evaluators():
    olc.register_kernels_global()
    kept = ReferenceEvaluator(models.chain("Exp"))
    assert olc.unregister_kernels_global() == N_KERNELS
    assert olc.unregister_kernels_global() == 0
    _, names = recorded(ReferenceEvaluator(models.chain("Exp")), {"x": X})
    assert names == []
    _, names = recorded(kept, {"x": X})
    assert names == ["onnx_light_cpu::Exp"]


def test_replace_counts_and_idempotent_state():
    from onnx_light_cpu.registry import hook

    assert olc.register_kernels_global() == N_KERNELS
    first = dict(hook.GLOBAL_TABLE)
    assert olc.register_kernels_global(replace=True) == N_KERNELS
    assert olc.register_kernels_global(replace=False) == 0
    assert olc.register_kernel_global("", "Exp", replace=False) == 0
    assert hook.GLOBAL_TABLE == first

    sess = ReferenceEvaluator(models.chain("Exp"))
    assert olc.register_kernel_for_session(sess, "", "Exp") == 1
    assert olc.register_kernel_for_session(sess, "", "Exp", replace=False) == 0
    assert olc.register_kernels_for_session(sess, replace=False) == N_KERNELS - 1


def test_session_registration_after_construction_is_local():
    sess = ReferenceEvaluator(models.chain("Abs", "Exp"))
    other = ReferenceEvaluator(models.chain("Abs", "Exp"))
    assert olc.register_kernel_for_session(sess, "", "Exp") == 1
    (y,), names = recorded(sess, {"x": X})
    assert names == ["onnx_light_cpu::Exp"]
    np.testing.assert_allclose(y, np.exp(np.abs(X)), rtol=1e-6)
    assert olc.register_kernels_for_session(sess) == N_KERNELS
    _, names = recorded(sess, {"x": X})
    assert names == ["onnx_light_cpu::Abs", "onnx_light_cpu::Exp"]
    _, names = recorded(other, {"x": X})
    assert names == []


class Exp(OpRun):
    """A user's own Exp (through new_ops): returns a marker value."""

    op_domain = ""

    def _run(self, x):
        return (np.full_like(x, 7.0),)


def test_precedence_session_over_new_ops_over_global_over_builtin():
    model = models.chain("Exp")
    (y,), names = recorded(ReferenceEvaluator(model), {"x": X})
    assert names == [] and np.allclose(y, np.exp(X))  # built-in

    olc.register_kernels_global()
    _, names = recorded(ReferenceEvaluator(model), {"x": X})
    assert names == ["onnx_light_cpu::Exp"]  # global > built-in

    sess = ReferenceEvaluator(model, new_ops=[Exp])
    (y,), names = recorded(sess, {"x": X})
    assert names == [] and np.all(y == 7.0)  # new_ops > global

    olc.register_kernels_for_session(sess)
    (y,), names = recorded(sess, {"x": X})
    assert names == ["onnx_light_cpu::Exp"]  # per-evaluator > new_ops
    np.testing.assert_allclose(y, np.exp(X), rtol=1e-6)


REACH = [
    ("if", models.if_model, {"cond": np.array(True), "x": X}, ["onnx_light_cpu::Exp"]),
    ("loop", models.loop_model,
     {"trips": np.array(2, dtype=np.int64), "cond": np.array(True), "x": X},
     ["onnx_light_cpu::Exp"] * 2),
    ("scan", models.scan_model, {"s": X[:2], "x": np.stack([X[:2]] * 3)},
     ["onnx_light_cpu::Tanh"] * 3),
    ("local_function", models.local_function_model, {"x": X},
     ["onnx_light_cpu::Sigmoid", "onnx_light_cpu::Log"]),
    ("expanded_function", models.mish_model, {"x": X}, ["onnx_light_cpu::Tanh"]),
]


@pytest.mark.parametrize("how", ["global", "session"])
@pytest.mark.parametrize("name, build, feeds, expected", REACH, ids=[r[0] for r in REACH])
def test_registration_reaches_nested_graphs(how, name, build, feeds, expected):
    with models.without_mish_kernel():  # Mish's function body, not our Mish kernel
        _reaches_nested_graphs(how, build, feeds, expected)


def _reaches_nested_graphs(how, build, feeds, expected):
    model = build()
    want = ReferenceEvaluator(model).run(None, feeds)
    if how == "global":
        olc.register_kernels_global()
        sess = ReferenceEvaluator(model)
    else:
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
    got, names = recorded(sess, feeds)
    # Other nodes of these graphs may have kernels too: look at these ones.
    assert [n for n in names if n in expected] == expected
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_evaluator_built_before_import_hook_gets_a_context():
    from onnx_light_cpu.registry import hook

    sess = ReferenceEvaluator(models.if_model())
    for evaluator in hook.iter_evaluators(sess):
        del evaluator.__dict__["_olc_context"]
    olc.register_kernels_for_session(sess)
    _, names = recorded(sess, {"cond": np.array(False), "x": X})
    assert names == ["onnx_light_cpu::If", "onnx_light_cpu::Abs"]


def test_one_implementation_family_per_pass():
    for policy in Policy:
        records = olc.registered_kernels(microsoft_implementation=policy)
        keys = [(r.domain, r.op_type, r.since_version) for r in records]
        assert len(keys) == len(set(keys)), f"{policy}: an operator installed twice"
        assert olc.register_kernels_global(microsoft_implementation=policy) == len(records)
    with pytest.raises(TypeError, match="MicrosoftKernelImplementation"):
        olc.register_kernels_global(microsoft_implementation="naive")


def test_inventory_records_are_immutable_and_complete():
    records = olc.registered_kernels()
    first = records[0]
    with pytest.raises(AttributeError):
        first.op_type = "Other"
    assert {r.op_type for r in records} >= {"Abs", "Exp", "Log", "Sigmoid", "Tanh", "Not"}
    by_name = {}
    for r in records:
        # An operator defined in two domains gets the domain in its name
        # (onnx_light_cpu::MicrosoftRotaryEmbedding).
        prefix = "Microsoft" if r.domain == "com.microsoft" else ""
        assert r.device == "CPU"
        assert r.name in (f"onnx_light_cpu::{r.op_type}", f"onnx_light_cpu::{prefix}{r.op_type}")
        assert r.element_types and all(t.startswith("tensor(") for t in r.element_types)
        by_name.setdefault(r.name, set()).add((r.domain, r.op_type))
    assert all(len(ops) == 1 for ops in by_name.values())  # one name, one operator
    names = olc.registered_kernel_names()
    assert names["Abs"] == "onnx_light_cpu::Abs"
    # Listing the inventory installs nothing.
    _, used = recorded(ReferenceEvaluator(models.chain("Exp")), {"x": X})
    assert used == []


def test_opset_outside_kernel_range_uses_builtin(monkeypatch):
    from onnx_light_cpu.ops.unary import Exp as OurExp

    monkeypatch.setattr(OurExp, "since_version", 19)  # the model uses opset 18
    olc.register_kernels_global()
    _, names = recorded(ReferenceEvaluator(models.chain("Exp")), {"x": X})
    assert names == []


def test_lean_run_matches_the_original_run():
    from onnx_light_cpu.registry import hook

    model = models.chain("Abs", "Exp", "Tanh")
    sess = ReferenceEvaluator(model)
    assert sess._olc_plan is None  # no kernels: the evaluator is untouched
    olc.register_kernels_for_session(sess)
    assert sess._olc_plan is not None
    lean = sess.run(None, {"x": X})
    original = hook._original_run(sess, None, {"x": X})
    np.testing.assert_array_equal(lean[0], original[0])
    assert sess.run(["t0"], {"x": X})[0].tolist() == np.abs(X).tolist()
    assert sess.run([], {"x": X}) == []
    everything = sess.run(None, {"x": X}, intermediate=True)  # the original's extra
    assert set(everything) >= {"x", "t0", "t1", "y"}
    with pytest.raises(RuntimeError, match="Unable to find input 'x'"):
        sess.run(None, {"z": X})
    with pytest.raises(RuntimeError, match="Unable to find output name 'nope'"):
        sess.run(["nope"], {"x": X})


def test_graphs_reading_the_outer_scope_keep_the_lean_run_with_our_if_only():
    olc.register_kernel_global("", "Exp")
    sess = ReferenceEvaluator(models.if_model())
    assert sess._olc_plan is None  # the built-in If needs the whole outer scope
    _, names = recorded(sess, {"cond": np.array(True), "x": X})
    assert names == ["onnx_light_cpu::Exp"]
    olc.register_kernels_global()
    sess = ReferenceEvaluator(models.if_model())
    # ours names what its branches read there (x): the lean loop passes it
    (_, inputs, *_), = sess._olc_plan
    assert inputs({"cond": 1, "x": 2}) == (1, 2)
    _, names = recorded(sess, {"cond": np.array(True), "x": X})
    assert names == ["onnx_light_cpu::If", "onnx_light_cpu::Exp"]


def test_function_body_node_with_linked_attribute():
    """A node whose attribute refers to its function's attribute gets an
    instance per value set, and still runs our kernel."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    body_node = oh.make_node("Exp", ["a"], ["b"])
    linked = oh.make_attribute_ref("consumed_inputs", onnx.AttributeProto.INTS)
    linked.ref_attr_name = "ci"  # the function's attribute it takes its value from
    body_node.attribute.append(linked)
    fn = oh.make_function("custom", "LinkedExp", ["a"], ["b"], [body_node],
                          [models.OPSET], attributes=["ci"])
    call = oh.make_node("LinkedExp", ["x"], ["y"], domain="custom", ci=[0])
    graph = oh.make_graph([call], "g", [oh.make_tensor_value_info("x", T.FLOAT, [None])],
                          [oh.make_tensor_value_info("y", T.FLOAT, [None])])
    model = oh.make_model(graph, functions=[fn],
                          opset_imports=[models.OPSET, oh.make_opsetid("custom", 1)])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    for _ in range(2):
        (y,), names = recorded(sess, {"x": X})
        assert names == ["onnx_light_cpu::Exp"]
        np.testing.assert_allclose(y, np.exp(X), rtol=1e-6)
    body = sess.functions_[("custom", "LinkedExp")]
    (kernel,) = body.rt_nodes_
    assert kernel.has_linked_attribute and len(kernel._linked_instances) == 1
    assert list(next(iter(kernel._linked_instances.values())).consumed_inputs) == [0]


def test_adapters_see_which_inputs_are_initializers():
    from onnx import TensorProto as T
    from onnx import helper as oh
    from onnx import numpy_helper

    weight = np.array([0.5, -1.0], dtype=np.float32)
    graph = oh.make_graph(
        [oh.make_node("Exp", ["w"], ["a"]), oh.make_node("Exp", ["x"], ["y"])], "g",
        [oh.make_tensor_value_info("x", T.FLOAT, [None])],
        [oh.make_tensor_value_info("a", T.FLOAT, [None]),
         oh.make_tensor_value_info("y", T.FLOAT, [None])],
        [numpy_helper.from_array(weight, "w")],
    )
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[models.OPSET]))
    olc.register_kernels_for_session(sess, fold_constants=False)  # Exp(w) would fold
    constant, variable = sess.rt_nodes_
    np.testing.assert_array_equal(constant._constant_input(0), weight)
    assert variable._constant_input(0) is None
    assert constant._constant_input(1) is None


def test_operators_only_we_run_can_be_registered_after_construction():
    """onnx.reference has no SimplifiedLayerNormalization: the evaluator is
    built all the same, says what to do if run, and runs once registered."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    def model(op_type):
        node = oh.make_node(op_type, ["x", "scale"], ["y"], axis=-1, epsilon=1e-5)
        graph = oh.make_graph(
            [node], "g",
            [oh.make_tensor_value_info("x", T.FLOAT, [None, 4]),
             oh.make_tensor_value_info("scale", T.FLOAT, [4])],
            [oh.make_tensor_value_info("y", T.FLOAT, [None, 4])])
        return oh.make_model(graph, opset_imports=[models.OPSET])

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    feeds = {"x": x, "scale": np.ones(4, np.float32)}
    sess = ReferenceEvaluator(model("SimplifiedLayerNormalization"))
    with pytest.raises(NotImplementedError, match="register_kernels_for_session"):
        sess.run(None, feeds)
    olc.register_kernels_for_session(sess)
    (y,), names = recorded(sess, feeds)
    assert names == ["onnx_light_cpu::SimplifiedLayerNormalization"]
    rms = np.sqrt((x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, x / rms, rtol=1e-6)
    with pytest.raises(NotImplementedError):  # no kernel of ours: as before
        ReferenceEvaluator(model("NoSuchNormalization"))
