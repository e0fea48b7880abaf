"""If, Loop, Scan (and Optional): every opset of their schemas, their bodies
run by our kernels through the lean loop, outer-scope reads at two levels,
sequence and optional values, the two built-in bugs fixed (Loop's (n, 1)
scan outputs, opset-8 Scan's state), against NumPy and ONNX Runtime 1.32;
bad input, one test per rejection, with the message.  Every test checks
that our control-flow kernel ran and a kernel inside its body too."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.registry import hook

ADD, MUL = "onnx_light_cpu::Add", "onnx_light_cpu::Mul"
IF, LOOP, SCAN = "onnx_light_cpu::If", "onnx_light_cpu::Loop", "onnx_light_cpu::Scan"
OPTIONAL = "onnx_light_cpu::Optional"

IF_OPSETS = (1, 11, 13, 16, 19, 21, 23, 24, 25)
LOOP_OPSETS = IF_OPSETS
SCAN_OPSETS = (9, 11, 16, 19, 21, 23, 24, 25)


def vi(name, elem=T.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset, initializers=()):
    graph = oh.make_graph(nodes, "g", inputs, outputs,
                          initializer=[numpy_helper.from_array(v, k) for k, v in initializers])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=8)


def session(m):
    """An evaluator built with our kernels (the built-in Scan's constructor
    refuses axes and directions other than 0)."""
    olc.register_kernels_global()
    sess = ReferenceEvaluator(m)
    olc.unregister_kernels_global()
    olc.set_kernel_usage_recording(sess, True)
    return sess


def run(m, feeds, expect_kernels):
    """Our outputs; checks the kernels that ran, that every evaluator of the
    tree takes the lean loop, and that the original loop (which hands the
    control-flow nodes the whole scope) agrees."""
    sess = session(m)
    got = sess.run(None, feeds)
    ran = set(olc.used_kernel_names(sess))
    assert set(expect_kernels) <= ran, sorted(ran)
    for evaluator in hook.iter_evaluators(sess):
        assert evaluator._olc_plan is not None, evaluator.proto_.name
    original = hook._original_run(sess, None, feeds)
    for g, o in zip(got, original):
        _same(g, o)
    return got


def _same(a, b):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif a is None:
        assert b is None
    else:
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def ort_run(m, feeds):
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


X = np.arange(6, dtype=np.float32).reshape(2, 3)


# ---------------------------------------------------------------- If

def if_model(opset, then_out=1.0, else_out=-1.0, shape=(2, 3)):
    """y = x + (cond ? then_out : else_out); the branches read x and c from
    the outer scope."""
    def branch(value, name):
        return oh.make_graph([oh.make_node("Add", ["x", f"k_{name}"], [name])], name, [],
                             [vi(name, shape=list(shape))],
                             initializer=[numpy_helper.from_array(
                                 np.full(shape, value, np.float32), f"k_{name}")])
    node = oh.make_node("If", ["c"], ["y"], then_branch=branch(then_out, "t"),
                        else_branch=branch(else_out, "e"))
    return model([node], [vi("c", T.BOOL, []), vi("x", shape=list(shape))],
                 [vi("y", shape=list(shape))], opset)


@pytest.mark.parametrize("opset", IF_OPSETS)
@pytest.mark.parametrize("cond", [True, False])
def test_if_runs_the_branch_with_our_kernels(opset, cond):
    (y,) = run(if_model(opset), {"c": np.array(cond), "x": X}, [IF, ADD])
    np.testing.assert_array_equal(y, X + (1 if cond else -1))


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_if_takes_any_one_element_condition(shape):
    (y,) = run(if_model(13), {"c": np.zeros(shape, bool), "x": X}, [IF, ADD])
    np.testing.assert_array_equal(y, X - 1)


def test_if_reads_a_strided_read_only_input_and_leaves_it_unchanged():
    x = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]
    x.flags.writeable = False
    before = x.copy()
    (y,) = run(if_model(13), {"c": np.array(True), "x": x}, [IF, ADD])
    np.testing.assert_array_equal(y, before + 1)
    np.testing.assert_array_equal(x, before)


def test_if_with_sequence_outputs():
    def branch(name, op):
        return oh.make_graph(
            [oh.make_node(op, ["x", "x"], [f"{name}_a"]),
             oh.make_node("SequenceConstruct", ["x", f"{name}_a"], [name])], name, [],
            [oh.make_tensor_sequence_value_info(name, T.FLOAT, None)])
    node = oh.make_node("If", ["c"], ["s"], then_branch=branch("t", "Add"),
                        else_branch=branch("e", "Mul"))
    m = model([node], [vi("c", T.BOOL, []), vi("x")],
              [oh.make_tensor_sequence_value_info("s", T.FLOAT, None)], 13)
    (s,) = run(m, {"c": np.array(False), "x": X}, [IF, MUL])
    assert isinstance(s, list) and len(s) == 2
    np.testing.assert_array_equal(s[1], X * X)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_optional_outputs(cond):
    """The then branch returns an empty optional, the else branch Add's
    result wrapped (our Optional: the value itself, or None)."""
    then = oh.make_graph([oh.make_node("Optional", [], ["t"],
                                       type=oh.make_tensor_type_proto(T.FLOAT, None))],
                         "t", [], [oh.make_value_info("t", oh.make_optional_type_proto(
                             oh.make_tensor_type_proto(T.FLOAT, None)))])
    other = oh.make_graph([oh.make_node("Add", ["x", "x"], ["a"]),
                           oh.make_node("Optional", ["a"], ["e"])],
                          "e", [], [oh.make_value_info("e", oh.make_optional_type_proto(
                              oh.make_tensor_type_proto(T.FLOAT, None)))])
    node = oh.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other)
    has = oh.make_node("OptionalHasElement", ["o"], ["has"])
    m = model([node, has], [vi("c", T.BOOL, []), vi("x")],
              [oh.make_value_info("o", oh.make_optional_type_proto(
                  oh.make_tensor_type_proto(T.FLOAT, None))), vi("has", T.BOOL, [])], 18)
    sess = session(m)
    o, has = sess.run(None, {"c": np.array(cond), "x": X})
    names = set(olc.used_kernel_names(sess))
    assert {IF, OPTIONAL} <= names and (ADD in names) == (not cond)
    assert bool(has) == (not cond)
    if cond:
        assert o is None
    else:
        np.testing.assert_array_equal(o, X + X)


# ---------------------------------------------------------------- Loop

def loop_model(opset, per_iteration=(3,), with_m=True, with_cond=True, stop_at=None):
    """v += 1 on each iteration, the scan output v * i (shape
    ``per_iteration``); with ``stop_at`` the body's condition is
    i + 1 < stop_at.  ``one`` comes from the outer scope."""
    nodes = [oh.make_node("Add", ["v_in", "one"], ["v_out"]),
             oh.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
             oh.make_node("Mul", ["v_out", "fi"], ["scan"])]
    if stop_at is None:
        nodes.append(oh.make_node("Identity", ["c_in"], ["c_out"]))
    else:
        nodes += [oh.make_node("Add", ["i", "step"], ["next"]),
                  oh.make_node("Less", ["next", "stop"], ["c_out"])]
    inits = [numpy_helper.from_array(np.array(1, np.int64), "step"),
             numpy_helper.from_array(np.array(stop_at or 0, np.int64), "stop")]
    body = oh.make_graph(nodes, "body",
                         [vi("i", T.INT64, []), vi("c_in", T.BOOL, []),
                          vi("v_in", shape=list(per_iteration))],
                         [vi("c_out", T.BOOL, []), vi("v_out", shape=list(per_iteration)),
                          vi("scan", shape=list(per_iteration))], initializer=inits)
    node = oh.make_node("Loop", ["M" if with_m else "", "c" if with_cond else "", "v0"],
                        ["v", "scans"], body=body)
    inputs = [vi("v0", shape=list(per_iteration))]
    if with_m:
        inputs.insert(0, vi("M", T.INT64, []))
    if with_cond:
        inputs.insert(1 if with_m else 0, vi("c", T.BOOL, []))
    return model([node], inputs, [vi("v"), vi("scans")], opset,
                 [("one", np.ones(per_iteration, np.float32))])


def loop_expected(n, v0):
    v, scans = v0.copy(), []
    for i in range(n):
        v = v + 1
        scans.append(v * i)
    return v, np.stack(scans) if scans else None


@pytest.mark.parametrize("opset", LOOP_OPSETS)
def test_loop_stacks_scan_outputs_to_iterations_times_their_shape(opset):
    v0 = np.array([0, 1, 2], np.float32)
    v, scans = run(loop_model(opset), {"M": np.array(4, np.int64), "c": np.array(True),
                                       "v0": v0}, [LOOP, ADD, MUL])
    want_v, want_scans = loop_expected(4, v0)
    np.testing.assert_array_equal(v, want_v)
    assert scans.shape == (4, 3)
    np.testing.assert_array_equal(scans, want_scans)


@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_loop_scalar_and_matrix_scan_outputs(shape):
    """The built-in made (n, 1) of scalars (np.vstack)."""
    v0 = np.zeros(shape, np.float32)
    m = loop_model(13, per_iteration=shape)
    v, scans = run(m, {"M": np.array(5, np.int64), "c": np.array(True), "v0": v0},
                   [LOOP, ADD, MUL])
    assert scans.shape == (5, *shape)
    np.testing.assert_array_equal(scans, loop_expected(5, v0)[1])
    ort_v, ort_scans = ort_run(m, {"M": np.array(5, np.int64), "c": np.array(True), "v0": v0})
    np.testing.assert_array_equal(scans, ort_scans)
    np.testing.assert_array_equal(v, ort_v)


def test_loop_without_cond_ignores_the_body_condition():
    """A for loop: the body's condition (false after 2 iterations) is ignored."""
    m = loop_model(13, with_cond=False, stop_at=2)
    v0 = np.zeros(3, np.float32)
    v, scans = run(m, {"M": np.array(4, np.int64), "v0": v0}, [LOOP, ADD, MUL])
    assert scans.shape == (4, 3)
    np.testing.assert_array_equal(v, v0 + 4)


def test_loop_without_m_is_a_while_loop():
    m = loop_model(13, with_m=False, stop_at=3)
    v0 = np.zeros(3, np.float32)
    v, scans = run(m, {"c": np.array(True), "v0": v0}, [LOOP, ADD, MUL])
    np.testing.assert_array_equal(v, v0 + 3)
    np.testing.assert_array_equal(scans, loop_expected(3, v0)[1])
    ort_v, ort_scans = ort_run(m, {"c": np.array(True), "v0": v0})
    np.testing.assert_array_equal(scans, ort_scans)


def test_loop_with_both_stops_at_the_first():
    m = loop_model(13, stop_at=2)
    v, scans = run(m, {"M": np.array(5, np.int64), "c": np.array(True),
                       "v0": np.zeros(3, np.float32)}, [LOOP, ADD])
    assert scans.shape == (2, 3)


@pytest.mark.parametrize("feeds", [{"M": np.array(0, np.int64), "c": np.array(True)},
                                   {"M": np.array(3, np.int64), "c": np.array(False)}])
def test_loop_of_no_iteration_returns_the_initial_values_and_declared_empty_scans(feeds):
    v0 = np.arange(3, dtype=np.float32)
    m = loop_model(13)
    sess = session(m)
    v, scans = sess.run(None, {**feeds, "v0": v0})
    assert LOOP in olc.used_kernel_names(sess)
    np.testing.assert_array_equal(v, v0)
    assert scans.shape == (0, 3) and scans.dtype == np.float32
    # and a body kernel runs once the loop iterates
    sess.run(None, {"M": np.array(1, np.int64), "c": np.array(True), "v0": v0})
    assert ADD in olc.used_kernel_names(sess)


def test_loop_carries_a_sequence():
    body = oh.make_graph(
        [oh.make_node("Identity", ["c_in"], ["c_out"]),
         oh.make_node("Add", ["x", "x"], ["twice"]),
         oh.make_node("SequenceInsert", ["s_in", "twice"], ["s_out"])],
        "body", [vi("i", T.INT64, []), vi("c_in", T.BOOL, []),
                 oh.make_tensor_sequence_value_info("s_in", T.FLOAT, None)],
        [vi("c_out", T.BOOL, []), oh.make_tensor_sequence_value_info("s_out", T.FLOAT, None)])
    nodes = [oh.make_node("SequenceEmpty", [], ["s0"], dtype=T.FLOAT),
             oh.make_node("Loop", ["M", "", "s0"], ["s"], body=body)]
    m = model(nodes, [vi("M", T.INT64, []), vi("x")],
              [oh.make_tensor_sequence_value_info("s", T.FLOAT, None)], 13)
    (s,) = run(m, {"M": np.array(3, np.int64), "x": X}, [LOOP, ADD])
    assert len(s) == 3
    for item in s:
        np.testing.assert_array_equal(item, X + X)


def test_loop_carries_an_empty_optional():
    """Loop 16: the carried optional starts empty (None) and stays so."""
    opt = oh.make_optional_type_proto(oh.make_tensor_type_proto(T.FLOAT, None))
    body = oh.make_graph(
        [oh.make_node("Identity", ["c_in"], ["c_out"]),
         oh.make_node("Add", ["acc_in", "x"], ["acc_out"])],
        "body", [vi("i", T.INT64, []), vi("c_in", T.BOOL, []), oh.make_value_info("o_in", opt),
                 vi("acc_in")],  # o_in goes straight out (the built-in Identity refuses None)
        [vi("c_out", T.BOOL, []), oh.make_value_info("o_in", opt), vi("acc_out")])
    nodes = [oh.make_node("Optional", [], ["o0"], type=oh.make_tensor_type_proto(T.FLOAT, None)),
             oh.make_node("Loop", ["M", "", "o0", "x"], ["o", "acc"], body=body)]
    m = model(nodes, [vi("M", T.INT64, []), vi("x")], [oh.make_value_info("o", opt), vi("acc")],
              16)
    o, acc = run(m, {"M": np.array(2, np.int64), "x": X}, [LOOP, ADD, OPTIONAL])
    assert o is None
    np.testing.assert_array_equal(acc, 3 * X)


def test_nested_if_in_a_loop_reads_both_scopes():
    """The If inside the body reads the body's carried value and the outer
    graph's x: both levels keep the lean loop."""
    branch_then = oh.make_graph([oh.make_node("Add", ["v_in", "x"], ["t"])], "t", [], [vi("t")])
    branch_else = oh.make_graph([oh.make_node("Mul", ["v_in", "x"], ["e"])], "e", [], [vi("e")])
    body = oh.make_graph(
        [oh.make_node("Identity", ["c_in"], ["c_out"]),
         oh.make_node("Cast", ["i"], ["parity_i"], to=T.BOOL),
         oh.make_node("If", ["parity_i"], ["v_out"], then_branch=branch_then,
                      else_branch=branch_else)],
        "body", [vi("i", T.INT64, []), vi("c_in", T.BOOL, []), vi("v_in")],
        [vi("c_out", T.BOOL, []), vi("v_out")])
    m = model([oh.make_node("Loop", ["M", "", "v0"], ["v"], body=body)],
              [vi("M", T.INT64, []), vi("v0"), vi("x")], [vi("v")], 13)
    x, v0 = np.array([2, 3], np.float32), np.array([1, 1], np.float32)
    (v,) = run(m, {"M": np.array(3, np.int64), "v0": v0, "x": x}, [LOOP, IF, ADD, MUL])
    want = v0
    for i in range(3):
        want = want + x if i else want * x
    np.testing.assert_array_equal(v, want)
    # what the Loop reads outside: the If's outer names less the body's own
    assert session(m).rt_nodes_[0].outer_inputs == ("x",)


def test_registration_after_construction_reaches_the_rebuilt_bodies():
    sess = ReferenceEvaluator(loop_model(13))
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, {"M": np.array(2, np.int64), "c": np.array(True),
                    "v0": np.zeros(3, np.float32)})
    assert {LOOP, ADD, MUL} <= set(olc.used_kernel_names(sess))


def test_loop_checks_shape_annotations_of_its_body():
    m = loop_model(13)
    sess = session(m)
    feeds = {"M": np.array(2, np.int64), "c": np.array(True), "v0": np.zeros(3, np.float32)}
    got = sess.run(None, feeds, check_shape_annotations=True)
    assert {LOOP, ADD} <= set(olc.used_kernel_names(sess))
    np.testing.assert_array_equal(got[0], np.full(3, 2, np.float32))
    with pytest.raises(Exception, match="v_in|v0"):  # a 4-vector where [3] is declared
        sess.run(None, {**feeds, "v0": np.zeros(4, np.float32)}, check_shape_annotations=True)


# ---------------------------------------------------------------- Scan

def scan_model(opset, n_scans=1, in_axes=None, in_dirs=None, out_axes=None, out_dirs=None):
    """state += row (the scan inputs summed), scan output = state * w (w
    from the outer scope)."""
    names = [f"r{j}" for j in range(n_scans)]
    nodes = [oh.make_node("Sum", names, ["rows"]) if n_scans > 1 else
             oh.make_node("Identity", names, ["rows"]),
             oh.make_node("Add", ["s_in", "rows"], ["s_out"]),
             oh.make_node("Mul", ["s_out", "w"], ["y"])]
    row = [3]  # ONNX Runtime wants the body's shapes
    body = oh.make_graph(nodes, "body", [vi("s_in", shape=row)] + [vi(n, shape=row) for n in names],
                         [vi("s_out", shape=row), vi("y", shape=row)])
    attrs = {"num_scan_inputs": n_scans}
    for key, value in (("scan_input_axes", in_axes), ("scan_input_directions", in_dirs),
                       ("scan_output_axes", out_axes), ("scan_output_directions", out_dirs)):
        if value is not None:
            attrs[key] = value
    inputs = ["s0"] + [f"x{j}" for j in range(n_scans)]
    if opset < 9:
        inputs.insert(0, "")
    node = oh.make_node("Scan", inputs, ["s", "ys"], body=body, **attrs)
    return model([node], [vi(n) for n in inputs if n] + [vi("w")], [vi("s"), vi("ys")], opset)


def scan_expected(s0, xs, w, in_axes, in_dirs, out_axis, out_dir):
    length = xs[0].shape[in_axes[0]]
    s, ys = s0, []
    for t in range(length):
        rows = [np.take(x, length - 1 - t if d else t, axis=a) for x, a, d in
                zip(xs, in_axes, in_dirs)]
        s = s + sum(rows)
        ys.append(s * w)
    if out_dir:
        ys.reverse()
    return s, np.stack(ys, axis=out_axis)


@pytest.mark.parametrize("opset", SCAN_OPSETS)
def test_scan_runs_the_body_over_axis_0(opset):
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    s0, w = np.zeros(3, np.float32), np.array([1, 2, 3], np.float32)
    s, ys = run(scan_model(opset), {"s0": s0, "x0": xs, "w": w}, [SCAN, ADD, MUL])
    want_s, want_ys = scan_expected(s0, [xs], w, [0], [0], 0, 0)
    np.testing.assert_array_equal(s, want_s)
    np.testing.assert_array_equal(ys, want_ys)


@pytest.mark.parametrize("in_axes, in_dirs, out_axis, out_dir", [
    ([1, 0], [0, 1], 0, 0), ([-1, 0], [1, 0], 1, 1), ([1, -2], [1, 1], -1, 0),
    ([0, 0], [0, 0], -2, 1)])
def test_scan_axes_and_directions_match_onnx_runtime(in_axes, in_dirs, out_axis, out_dir):
    rng = np.random.default_rng(0)
    length = 4
    x0 = rng.standard_normal((3, 4) if in_axes[0] % 2 else (4, 3)).astype(np.float32)
    x1 = rng.standard_normal((3, 4) if in_axes[1] % 2 else (4, 3)).astype(np.float32)
    s0 = np.zeros(3, np.float32)
    w = np.array([1, 2, 3], np.float32)
    m = scan_model(16, 2, in_axes, in_dirs, [out_axis], [out_dir])
    feeds = {"s0": s0, "x0": x0, "x1": x1, "w": w}
    s, ys = run(m, feeds, [SCAN, ADD, MUL])
    want_s, want_ys = scan_expected(s0, [x0, x1], w, [a % 2 for a in in_axes], in_dirs,
                                    out_axis, out_dir)
    assert x0.shape[in_axes[0] % 2] == length
    np.testing.assert_allclose(s, want_s, rtol=1e-6)
    np.testing.assert_allclose(ys, want_ys, rtol=1e-6)
    for g, o in zip((s, ys), ort_run(m, feeds)):
        np.testing.assert_allclose(g, o, rtol=1e-6)


def test_scan_over_an_empty_sequence_keeps_the_state():
    m = scan_model(16)  # its body declares one iteration's shape: the empty output takes it
    sess = session(m)
    s0 = np.ones(3, np.float32)
    s, ys = sess.run(None, {"s0": s0, "x0": np.zeros((0, 3), np.float32),
                            "w": np.ones(3, np.float32)})
    np.testing.assert_array_equal(s, s0)
    assert ys.shape == (0, 3) and ys.dtype == np.float32
    sess.run(None, {"s0": s0, "x0": np.zeros((1, 3), np.float32), "w": np.ones(3, np.float32)})
    assert {SCAN, ADD} <= set(olc.used_kernel_names(sess))


def test_scan8_batches_and_feeds_the_state():
    """Opset 8: (sequence_lens, states..., scans...), batch axis 0,
    sequence axis 1.  The built-in fed the absent sequence_lens as the state."""
    xs = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    s0 = np.stack([np.zeros(3, np.float32), np.ones(3, np.float32)])
    w = np.array([1, 2, 3], np.float32)
    m = scan_model(8)
    s, ys = run(m, {"s0": s0, "x0": xs, "w": w}, [SCAN, ADD, MUL])
    for b in range(2):
        want_s, want_ys = scan_expected(s0[b], [xs[b]], w, [0], [0], 0, 0)
        np.testing.assert_array_equal(s[b], want_s)
        np.testing.assert_array_equal(ys[b], want_ys)
    for g, o in zip((s, ys), ort_run(m, {"s0": s0, "x0": xs, "w": w})):
        np.testing.assert_array_equal(g, o)


@pytest.mark.parametrize("directions", [[0], [1]])
def test_scan8_sequence_lens_pads_shorter_sequences_like_onnx_runtime(directions):
    xs = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    s0 = np.zeros((2, 3), np.float32)
    w = np.array([1, 2, 3], np.float32)
    m = scan_model(8)
    node = m.graph.node[0]
    node.input[0] = "lens"
    node.attribute.append(oh.make_attribute("directions", directions))
    m.graph.input.insert(0, vi("lens", T.INT64, [2]))
    feeds = {"lens": np.array([2, 4], np.int64), "s0": s0, "x0": xs, "w": w}
    s, ys = run(m, feeds, [SCAN, ADD, MUL])
    want_s, want_ys = scan_expected(s0[0], [xs[0, :2]], w, [0], directions, 0, 0)
    np.testing.assert_array_equal(s[0], want_s)
    np.testing.assert_array_equal(ys[0, :2], want_ys)
    np.testing.assert_array_equal(ys[0, 2:], 0)
    for g, o in zip((s, ys), ort_run(m, feeds)):
        np.testing.assert_array_equal(g, o)


@pytest.mark.parametrize("threads", [1, 2])
def test_results_do_not_depend_on_the_thread_count(threads):
    xs = np.random.default_rng(1).standard_normal((64, 1000)).astype(np.float32)
    m = scan_model(16)
    sess = session(m)
    olc.set_num_threads_for_session(sess, threads)
    feeds = {"s0": np.zeros(1000, np.float32), "x0": xs, "w": np.ones(1000, np.float32)}
    s, ys = sess.run(None, feeds)
    assert {SCAN, ADD, MUL} <= set(olc.used_kernel_names(sess))
    np.testing.assert_array_equal(ys[-1], s)
    np.testing.assert_array_equal(s, np.cumsum(xs, axis=0, dtype=np.float32)[-1])


# ---------------------------------------------------------------- rejections

def rejected(m, feeds, error, match, ran=()):
    sess = session(m)
    with pytest.raises(error, match=match):
        sess.run(None, feeds)
    names = set(olc.used_kernel_names(sess))
    assert set(ran) <= names, sorted(names)


def test_if_rejects_a_condition_that_is_not_bool():
    rejected(if_model(13), {"c": np.array(1, np.int64), "x": X}, TypeError,
             r"If: input 0 \('c'\) \(cond\) has element type int64, expected bool")


def test_if_rejects_a_condition_of_several_elements():
    rejected(if_model(13), {"c": np.array([True, False]), "x": X}, ValueError,
             r"If: input 0 \('c'\) \(cond\) must have exactly one element, got shape \(2,\)")


def test_if_rejects_branches_with_another_output_count():
    m = if_model(13)
    m.graph.node[0].output.append("z")
    rejected(m, {"c": np.array(True), "x": X}, ValueError,
             "If: the then_branch returns 1 outputs, the node has 2")


def test_loop_rejects_a_negative_trip_count():
    rejected(loop_model(13), {"M": np.array(-1, np.int64), "c": np.array(True),
                              "v0": np.zeros(3, np.float32)},
             ValueError, r"Loop: input 0 \('M'\) \(M\) must not be negative, got -1")


def test_loop_rejects_a_trip_count_that_is_not_int64():
    rejected(loop_model(13), {"M": np.array(2, np.int32), "c": np.array(True),
                              "v0": np.zeros(3, np.float32)},
             TypeError, r"Loop: input 0 \('M'\) \(M\) has element type int32, expected int64")


def test_loop_rejects_a_condition_that_is_not_bool():
    rejected(loop_model(13), {"M": np.array(2, np.int64), "c": np.array(1.0, np.float32),
                              "v0": np.zeros(3, np.float32)},
             TypeError, r"Loop: input 1 \('c'\) \(cond\) has element type float32")


def test_loop_rejects_a_loop_that_would_never_end():
    m = loop_model(13, with_m=False, with_cond=False)
    rejected(m, {"v0": np.zeros(3, np.float32)}, ValueError,
             "Loop: neither the trip count M nor the condition cond is given")


def test_loop_rejects_a_body_condition_that_is_not_bool():
    m = loop_model(13)
    body = m.graph.node[0].attribute[0].g
    body.node[3].CopyFrom(oh.make_node("Cast", ["c_in"], ["c_out"], to=T.FLOAT))
    rejected(m, {"M": np.array(2, np.int64), "c": np.array(True),
                 "v0": np.zeros(3, np.float32)},
             ValueError, r"Loop: the body's condition output must be one bool element, got "
                         r"float32\[\] at iteration 0", ran=[LOOP, ADD])


def test_loop_rejects_a_node_with_more_carried_values_than_its_body():
    m = loop_model(13)
    m.graph.node[0].input.append("v0")
    rejected(m, {"M": np.array(2, np.int64), "c": np.array(True),
                 "v0": np.zeros(3, np.float32)},
             ValueError, "Loop: the body takes 1 loop-carried values, the node gives 2")


def test_loop_rejects_a_node_with_more_outputs_than_its_body():
    m = loop_model(13)
    m.graph.node[0].output.append("extra")
    rejected(m, {"M": np.array(2, np.int64), "c": np.array(True),
                 "v0": np.zeros(3, np.float32)},
             ValueError, "Loop: the node has 3 outputs, the body returns 1 loop-carried "
                         "values and 1 scan outputs")


def test_loop_rejects_scan_outputs_whose_shape_changes():
    body = oh.make_graph(
        [oh.make_node("Identity", ["c_in"], ["c_out"]),
         oh.make_node("Concat", ["v_in", "one"], ["v_out"], axis=0),
         oh.make_node("Add", ["v_out", "v_out"], ["scan"])],
        "body", [vi("i", T.INT64, []), vi("c_in", T.BOOL, []), vi("v_in")],
        [vi("c_out", T.BOOL, []), vi("v_out"), vi("scan")])
    m = model([oh.make_node("Loop", ["M", "", "v0"], ["v", "scans"], body=body)],
              [vi("M", T.INT64, []), vi("v0")], [vi("v"), vi("scans")], 13,
              [("one", np.ones(1, np.float32))])
    rejected(m, {"M": np.array(3, np.int64), "v0": np.zeros(1, np.float32)}, ValueError,
             r"Loop: scan output 0 changes between iterations: float32\[2\] at iteration 0, "
             r"float32\[3\] at iteration 1", ran=[LOOP, ADD])


def test_scan_rejects_scan_inputs_of_different_lengths():
    rejected(scan_model(16, 2), {"s0": np.zeros(3, np.float32),
                                 "x0": np.zeros((4, 3), np.float32),
                                 "x1": np.zeros((5, 3), np.float32), "w": X[0]},
             ValueError, r"Scan: input 2 \('x1'\) has 5 elements on its scan axis 0, scan "
                         r"input 0 has 4")


def test_scan_rejects_an_axis_out_of_range():
    rejected(scan_model(16, in_axes=[2]), {"s0": np.zeros(3, np.float32),
                                           "x0": np.zeros((4, 3), np.float32), "w": X[0]},
             ValueError, r"Scan: input 1 \('x0'\) has rank 2 \(shape \(4, 3\)\): scan axis 2 is "
                         "out of range")


def test_scan_rejects_attributes_of_the_wrong_length():
    rejected(scan_model(16, in_dirs=[0, 1]), {"s0": np.zeros(3, np.float32),
                                              "x0": np.zeros((4, 3), np.float32), "w": X[0]},
             ValueError, "Scan: attribute scan_input_directions has 2 values, expected 1")


def test_scan_rejects_a_direction_other_than_0_or_1():
    rejected(scan_model(16, out_dirs=[2]), {"s0": np.zeros(3, np.float32),
                                            "x0": np.zeros((4, 3), np.float32), "w": X[0]},
             ValueError, r"Scan: attribute scan_output_directions must hold 0 \(forward\) or 1")


def test_scan_rejects_more_scan_inputs_than_the_body_takes():
    m = scan_model(16)
    m.graph.node[0].attribute[1].CopyFrom(oh.make_attribute("num_scan_inputs", 3))
    rejected(m, {"s0": np.zeros(3, np.float32), "x0": np.zeros((4, 3), np.float32), "w": X[0]},
             ValueError, "Scan: the node has 2 inputs, fewer than num_scan_inputs = 3")


def test_scan_rejects_a_body_of_another_input_count():
    m = scan_model(16)
    m.graph.node[0].input.append("x0")
    rejected(m, {"s0": np.zeros(3, np.float32), "x0": np.zeros((4, 3), np.float32), "w": X[0]},
             ValueError, "Scan: the body takes 2 inputs, expected 2 states . 1 scan inputs")


def test_scan8_rejects_sequence_lens_out_of_range():
    m = scan_model(8)
    m.graph.node[0].input[0] = "lens"
    m.graph.input.insert(0, vi("lens", T.INT64, [2]))
    rejected(m, {"lens": np.array([5, 1], np.int64), "s0": np.zeros((2, 3), np.float32),
                 "x0": np.zeros((2, 4, 3), np.float32), "w": X[0]},
             ValueError, r"Scan: input 0 \('lens'\) \(sequence_lens\) must lie in \[0, 4\]")


def test_scan8_rejects_a_state_without_the_batch_axis():
    rejected(scan_model(8), {"s0": np.zeros((3, 3), np.float32),
                             "x0": np.zeros((2, 4, 3), np.float32), "w": X[0]},
             ValueError, r"Scan: input 1 \('s0'\) \(a state\) must have the batch size 2")


def test_body_errors_name_the_node_the_iteration_and_the_body_kernel():
    rejected(scan_model(16), {"s0": np.zeros(3, np.float32),
                              "x0": np.zeros((4, 3), np.int64), "w": X[0]},
             TypeError, r"Scan: body, iteration 0: Add: input 1 \('rows'\) has element type "
                        "int64, expected float32", ran=[SCAN])
    rejected(if_model(13), {"c": np.array(False), "x": np.zeros((2, 4), np.float32)},
             ValueError, r"If: else_branch: Add: ", ran=[IF])


def test_scan_outputs_too_large_for_memory_are_refused_after_one_iteration():
    rows = np.broadcast_to(np.zeros((1, 3), np.float32), (1 << 40, 3))
    rejected(scan_model(16), {"s0": np.zeros(3, np.float32), "x0": rows,
                              "w": np.ones(3, np.float32)},
             MemoryError, "Scan: the scan outputs of 1099511627776 iterations need",
             ran=[SCAN, ADD])


def test_optional_without_input_needs_its_type():
    m = model([oh.make_node("Optional", [], ["o"]),
               oh.make_node("If", ["c"], ["y"], then_branch=oh.make_graph(
                   [oh.make_node("Add", ["x", "x"], ["t"])], "t", [], [vi("t")]),
                   else_branch=oh.make_graph([oh.make_node("Add", ["x", "x"], ["e"])], "e",
                                             [], [vi("e")]))],
              [vi("c", T.BOOL, []), vi("x")], [vi("y")], 18)
    rejected(m, {"c": np.array(True), "x": X}, ValueError,
             "Optional: a node without input must have the attribute type")


def test_the_inventory_lists_every_opset():
    records = {r.op_type: r for r in olc.registered_kernels()
               if r.name in (IF, LOOP, SCAN, OPTIONAL)}
    assert {op: (r.since_version, r.until_version) for op, r in records.items()} == {
        "If": (1, None), "Loop": (1, None), "Scan": (8, None), "Optional": (15, None)}
    assert onnx.defs.get_schema("Scan", 8).since_version == 8
