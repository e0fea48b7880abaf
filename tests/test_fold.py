"""Constant folding at evaluator construction (registry/fold.py): what it
folds, what it leaves, and that no result changes by one bit."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.registry import fold, hook
from onnx_light_cpu.registry.check import check_model

RNG = np.random.default_rng(0)
V, H = 61, 300  # vocabulary, hidden: tiny, odd, K past one packed block (256)
EMBEDDING = RNG.standard_normal((V, H)).astype(np.float32)
IDS = np.array([[3, 60, 0]], dtype=np.int64)


@pytest.fixture(autouse=True)
def _global_setting():
    """Each test starts and ends with folding on by default."""
    fold.GLOBAL_SETTING["fold_constants"] = True
    yield
    fold.GLOBAL_SETTING["fold_constants"] = True


def _model(nodes, inputs, outputs, initializers=(), opset=21):
    graph = oh.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _tied_head():
    """The tied-embedding LM head: Gather(E, ids) -> MatMul(h, Transpose(E))."""
    return _model(
        [oh.make_node("Gather", ["E", "ids"], ["h"]),
         oh.make_node("Transpose", ["E"], ["Et"], perm=[1, 0], name="tied"),
         oh.make_node("MatMul", ["h", "Et"], ["logits"])],
        [oh.make_tensor_value_info("ids", T.INT64, [1, None])],
        [oh.make_tensor_value_info("logits", T.FLOAT, None)],
        [nh.from_array(EMBEDDING, "E")])


def _session(model, fold_constants=True):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess, fold_constants=fold_constants)
    olc.set_kernel_usage_recording(sess, True)
    return sess


def _plan_ops(sess):
    return [entry[0].__self__.onnx_node.op_type for entry in sess._olc_plan]


def _same(got, want) -> bool:
    """Bit for bit: type, dtype, shape and bytes (NaNs included)."""
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            _same(g, w) for g, w in zip(got, want))
    if want is None or got is None:
        return got is want
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype.kind in "OUS":
        return got.tolist() == want.tolist()
    return got.tobytes() == want.tobytes()


def test_tied_head_folds_the_transpose_bit_for_bit():
    folded, plain = _session(_tied_head()), _session(_tied_head(), fold_constants=False)
    assert _plan_ops(folded) == ["Gather", "MatMul"]
    assert _plan_ops(plain) == ["Gather", "Transpose", "MatMul"]
    for _ in range(2):
        (got,), (want,) = folded.run(None, {"ids": IDS}), plain.run(None, {"ids": IDS})
        assert _same(got, want)
    np.testing.assert_allclose(got, EMBEDDING[IDS] @ EMBEDDING.T, rtol=1e-5, atol=1e-5)
    assert "onnx_light_cpu::MatMul" in olc.used_kernel_names(folded)
    # the folded value is a dense, read-only constant of the evaluator
    value = folded.rt_inits_["Et"]
    assert value.flags.c_contiguous and not value.flags.writeable
    assert _same(value, EMBEDDING.T)


def test_matmul_prepares_the_folded_constant_once():
    sess = _session(_tied_head())
    matmul = next(n for n in sess.rt_nodes_ if n.onnx_node.op_type == "MatMul")
    sess.run(None, {"ids": IDS})
    packed = dict(matmul._prepacked)
    assert len(packed) == 1
    sess.run(None, {"ids": IDS[:, :1]})
    assert {k: id(v) for k, v in matmul._prepacked.items()} == {
        k: id(v) for k, v in packed.items()}
    assert all("prepacked" in path for path in olc.used_kernel_paths(sess)
               if path.startswith("matmul"))


def test_folding_at_construction_with_global_kernels():
    olc.register_kernels_global()
    sess = ReferenceEvaluator(_tied_head())
    assert _plan_ops(sess) == ["Gather", "MatMul"]
    assert sess._olc_folded.names == ["Et"]


def test_built_in_evaluator_is_left_alone():
    sess = ReferenceEvaluator(_tied_head())
    assert "_olc_folded" not in sess.__dict__
    assert [n.onnx_node.op_type for n in sess.rt_nodes_] == ["Gather", "Transpose", "MatMul"]


@pytest.mark.parametrize("how", ["session", "global", "env"])
def test_opt_out(how, monkeypatch):
    if how == "session":
        sess = _session(_tied_head(), fold_constants=False)
    else:
        if how == "global":
            olc.register_kernels_global(fold_constants=False)
        else:
            monkeypatch.setenv(fold.ENV_VAR, "0")
            olc.register_kernels_global()
        sess = ReferenceEvaluator(_tied_head())
    assert _plan_ops(sess) == ["Gather", "Transpose", "MatMul"]
    assert "Et" not in sess.rt_inits_


def test_global_setting_follows_the_latest_registration():
    olc.register_kernels_global(fold_constants=False)
    olc.register_kernels_global()
    assert _plan_ops(ReferenceEvaluator(_tied_head())) == ["Gather", "MatMul"]


def test_registration_after_construction_folds_and_refolds():
    sess = ReferenceEvaluator(_tied_head())
    want = sess.run(None, {"ids": IDS})  # the built-ins, unfolded
    olc.register_kernels_for_session(sess)
    assert _plan_ops(sess) == ["Gather", "MatMul"]
    first = sess.run(None, {"ids": IDS})
    np.testing.assert_allclose(first[0], want[0], rtol=1e-5, atol=1e-5)
    # registering again re-resolves, unfolds and folds again: the MatMul
    # reading the new constant is a fresh instance, nothing stale is packed
    olc.register_kernels_for_session(sess)
    assert _plan_ops(sess) == ["Gather", "MatMul"] and len(sess.rt_inits_) == 2
    assert _same(sess.run(None, {"ids": IDS}), first)
    olc.register_kernels_for_session(sess, fold_constants=False)
    assert _plan_ops(sess) == ["Gather", "Transpose", "MatMul"] and list(sess.rt_inits_) == ["E"]
    assert _same(sess.run(None, {"ids": IDS}), first)


def test_chains_and_constants_fold_graph_outputs_are_returned():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = _model(
        [oh.make_node("Constant", [], ["c"], value=nh.from_array(x)),
         oh.make_node("Transpose", ["c"], ["ct"]),
         oh.make_node("Neg", ["ct"], ["k"]),  # a graph output made of constants only
         oh.make_node("Add", ["k", "v"], ["y"])],
        [oh.make_tensor_value_info("v", T.FLOAT, [3, 2])],
        [oh.make_tensor_value_info("y", T.FLOAT, None),
         oh.make_tensor_value_info("k", T.FLOAT, None),
         oh.make_tensor_value_info("ct", T.FLOAT, None)])
    folded, plain = _session(model), _session(model, fold_constants=False)
    assert _plan_ops(folded) == ["Add"]
    assert [n.onnx_node.op_type for n in folded._olc_folded.nodes] == [
        "Constant", "Transpose", "Neg"]
    v = np.ones((3, 2), dtype=np.float32)
    got = folded.run(None, {"v": v})
    assert _same(got, plain.run(None, {"v": v}))
    assert _same(got[1], -x.T)
    # one output asked for, and the original run loop (intermediate results)
    assert _same(folded.run(["k"], {"v": v}), [-x.T])
    assert _same(folded.run(None, {"v": v}, intermediate=True)["k"], -x.T)


def test_nondeterministic_nodes_are_not_folded():
    model = _model(
        [oh.make_node("RandomUniform", [], ["r"], shape=[4], seed=1.0),
         oh.make_node("Constant", [], ["shape"], value=nh.from_array(np.array([4]))),
         oh.make_node("RandomNormalLike", ["r"], ["n"]),
         oh.make_node("Bernoulli", ["r"], ["b"]),
         oh.make_node("Abs", ["r"], ["a"]),
         oh.make_node("Add", ["a", "x"], ["y"])],
        [oh.make_tensor_value_info("x", T.FLOAT, [4])],
        [oh.make_tensor_value_info(n, T.FLOAT, None) for n in ("y", "n", "b")])
    sess = _session(model)
    assert [n.onnx_node.op_type for n in sess._olc_folded.nodes] == ["Constant"]
    assert _plan_ops(sess) == ["RandomUniform", "RandomNormalLike", "Bernoulli", "Abs", "Add"]


def test_dropout_is_not_folded():
    model = _model(
        [oh.make_node("Dropout", ["w", "ratio", "training"], ["d"])],
        [], [oh.make_tensor_value_info("d", T.FLOAT, None)],
        [nh.from_array(np.ones(8, dtype=np.float32), "w"),
         nh.from_array(np.array(0.5, dtype=np.float32), "ratio"),
         nh.from_array(np.array(True), "training")])
    assert _plan_ops(_session(model)) == ["Dropout"]


def _shape_made(op: str, size: int):
    """``op`` making a float tensor of ``size`` elements from a small input."""
    shape = nh.from_array(np.array([size], dtype=np.int64), "shape")
    one = nh.from_array(np.ones(1, dtype=np.float32), "one")
    node = {"ConstantOfShape": oh.make_node("ConstantOfShape", ["shape"], ["big"]),
            "Expand": oh.make_node("Expand", ["one", "shape"], ["big"]),
            "Tile": oh.make_node("Tile", ["one", "shape"], ["big"])}[op]
    return _model([node, oh.make_node("Add", ["big", "x"], ["y"])],
                  [oh.make_tensor_value_info("x", T.FLOAT, [1])],
                  [oh.make_tensor_value_info("y", T.FLOAT, None)], [shape, one])


@pytest.mark.parametrize("op", ["ConstantOfShape", "Expand", "Tile"])
def test_huge_outputs_are_not_folded(op):
    limit = fold.GROWTH * fold.FLOOR_BYTES // 4  # float32 elements allowed
    assert _plan_ops(_session(_shape_made(op, 1000))) == ["Add"]
    sess = _session(_shape_made(op, 4 * limit))
    assert _plan_ops(sess) == [op, "Add"]
    assert sess.run(None, {"x": np.ones(1, np.float32)})[0].shape == (4 * limit,)


def test_huge_range_is_not_folded():
    inits = [nh.from_array(np.array(v, dtype=np.int64), n)
             for v, n in ((0, "start"), (1 << 24, "limit"), (1, "delta"))]
    model = _model([oh.make_node("Range", ["start", "limit", "delta"], ["r"]),
                    oh.make_node("Add", ["r", "x"], ["y"])],
                   [oh.make_tensor_value_info("x", T.INT64, [1])],
                   [oh.make_tensor_value_info("y", T.INT64, None)], inits)
    assert _plan_ops(_session(model)) == ["Range", "Add"]


def test_a_node_that_raises_stays_and_raises_at_run_time():
    model = _model(
        [oh.make_node("Reshape", ["w", "shape"], ["r"]),  # 6 elements into 4: an error
         oh.make_node("Add", ["r", "x"], ["y"])],
        [oh.make_tensor_value_info("x", T.FLOAT, [4])],
        [oh.make_tensor_value_info("y", T.FLOAT, None)],
        [nh.from_array(np.ones(6, np.float32), "w"), nh.from_array(np.array([4]), "shape")])
    sess = _session(model)
    assert _plan_ops(sess) == ["Reshape", "Add"]
    with pytest.raises(ValueError):
        sess.run(None, {"x": np.ones(4, np.float32)})


def test_an_initializer_that_is_also_an_input_is_not_a_constant():
    # IR 3: initializers listed as graph inputs are defaults the feeds override
    model = _model([oh.make_node("Neg", ["w"], ["y"])],
                   [oh.make_tensor_value_info("w", T.FLOAT, [2])],
                   [oh.make_tensor_value_info("y", T.FLOAT, None)],
                   [nh.from_array(np.ones(2, np.float32), "w")], opset=8)
    model.ir_version = 3
    sess = _session(model)
    assert _plan_ops(sess) == ["Neg"]
    assert _same(sess.run(None, {"w": np.full(2, 3, np.float32)})[0], np.full(2, -3, np.float32))


def _branch(name, value):
    """A subgraph: Transpose of its own Constant, plus the outer ``x``."""
    return oh.make_graph(
        [oh.make_node("Constant", [], [f"{name}_c"], value=nh.from_array(value)),
         oh.make_node("Transpose", [f"{name}_c"], [f"{name}_t"]),
         oh.make_node("Add", [f"{name}_t", "x"], [f"{name}_y"])],
        name, [], [oh.make_tensor_value_info(f"{name}_y", T.FLOAT, None)])


def test_if_branches_fold_their_own_constants():
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    model = _model(
        [oh.make_node("If", ["cond"], ["y"], then_branch=_branch("then", a),
                      else_branch=_branch("else", -a))],
        [oh.make_tensor_value_info("cond", T.BOOL, []),
         oh.make_tensor_value_info("x", T.FLOAT, [2, 3])],
        [oh.make_tensor_value_info("y", T.FLOAT, None)])
    folded, plain = _session(model), _session(model, fold_constants=False)
    # the If holds subgraphs: never folded itself
    assert [n.onnx_node.op_type for n in folded.rt_nodes_] == ["If"]
    branches = [e for e in hook.iter_evaluators(folded) if e is not folded]
    assert len(branches) == 2
    for branch in branches:
        assert [n.onnx_node.op_type for n in branch.rt_nodes_] == ["Add"]
    x = np.ones((2, 3), np.float32)
    for cond in (True, False):
        feeds = {"cond": np.array(cond), "x": x}
        assert _same(folded.run(None, feeds), plain.run(None, feeds))


def test_loop_body_folds_what_does_not_depend_on_the_iteration():
    body = oh.make_graph(
        [oh.make_node("Transpose", ["w"], ["wt"]),
         oh.make_node("Add", ["acc", "wt"], ["acc_out"]),
         oh.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [oh.make_tensor_value_info("i", T.INT64, []),
         oh.make_tensor_value_info("cond_in", T.BOOL, []),
         oh.make_tensor_value_info("acc", T.FLOAT, [2, 3])],
        [oh.make_tensor_value_info("cond_out", T.BOOL, []),
         oh.make_tensor_value_info("acc_out", T.FLOAT, [2, 3])],
        [nh.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "w")])
    model = _model(
        [oh.make_node("Loop", ["n", "", "acc0"], ["acc"], body=body)],
        [oh.make_tensor_value_info("n", T.INT64, []),
         oh.make_tensor_value_info("acc0", T.FLOAT, [2, 3])],
        [oh.make_tensor_value_info("acc", T.FLOAT, None)])
    folded, plain = _session(model), _session(model, fold_constants=False)
    (inner,) = [e for e in hook.iter_evaluators(folded) if e is not folded]
    assert [n.onnx_node.op_type for n in inner.rt_nodes_] == ["Add", "Identity"]
    feeds = {"n": np.array(3), "acc0": np.zeros((2, 3), np.float32)}
    assert _same(folded.run(None, feeds), plain.run(None, feeds))


def test_check_reports_what_folding_saves():
    result = check_model(_tied_head())
    assert result.folding.nodes == 1 and result.folding.operators == (("Transpose", 1),)
    assert result.folding.nbytes == EMBEDDING.nbytes and result.folding.seconds > 0
    line = result.lines()[-1]
    assert line.startswith("constant folding: 1 node folded at load (Transpose 1), 71.5 kB")
    assert line.endswith(" ms once at load instead of on every run")
    assert check_model(_tied_head(), fold_constants=False).folding is None


@functools.lru_cache(maxsize=1)
def _folding_cases():
    """The ONNX backend node cases in which something folds (Constant
    nodes, mostly, and the shape arithmetic of expanded functions)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    selected = []
    for case in cases:
        try:
            sess = _session(case.model)
        except Exception:  # noqa: BLE001 - cases nobody builds are not ours to check
            continue
        if fold.folded_of(hook.iter_evaluators(sess)).nodes:
            selected.append(case)
    return selected


def _as_array(value):
    if isinstance(value, onnx.TensorProto):
        return nh.to_array(value)
    if isinstance(value, list):
        return [_as_array(v) for v in value]
    return value


def test_backend_cases_are_unchanged_by_folding():
    cases = _folding_cases()
    assert len(cases) > 100
    changed = []
    for case in cases:
        folded, plain = _session(case.model), _session(case.model, fold_constants=False)
        for inputs, _ in case.data_sets:
            feeds = dict(zip(plain.input_names, _as_array(inputs)))
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    want = plain.run(None, feeds)
                except Exception as e:  # noqa: BLE001 - then folding must raise alike
                    with pytest.raises(type(e)):
                        folded.run(None, feeds)
                    continue
                got = folded.run(None, feeds)
            if not _same(got, want):
                changed.append(case.name)
    assert not changed


def test_check_command_prints_the_saving(tmp_path, capsys):
    from onnx_light_cpu.cli import main

    path = tmp_path / "tied.onnx"
    onnx.save(_tied_head(), path)
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "constant folding: 1 node folded at load (Transpose 1)")
    assert main(["check", str(path), "--no-fold"]) == 0
    assert "constant folding" not in capsys.readouterr().out


def test_folded_nodes_are_not_recorded_as_used():
    sess = ReferenceEvaluator(_tied_head())
    olc.set_kernel_usage_recording(sess, True)
    olc.register_kernels_for_session(sess)  # folds, recording on
    assert olc.used_kernel_names(sess) == []
    sess.run(None, {"ids": IDS})
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::Gather", "onnx_light_cpu::MatMul"]


@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (0, 2, 1), (2, 1, 0)])
def test_folded_transposes_are_dense_copies(perm):
    w = RNG.standard_normal((3, 5, 600)).astype(np.float32)
    model = _model([oh.make_node("Transpose", ["w"], ["t"], perm=list(perm))], [],
                   [oh.make_tensor_value_info("t", T.FLOAT, None)], [nh.from_array(w, "w")])
    (got,) = _session(model).run(None, {})
    assert got.flags.c_contiguous and _same(got, np.ascontiguousarray(w.transpose(perm)))


def test_unfolding_runs_a_folded_kernel_into_fresh_buffers(monkeypatch):
    """A kernel keeps its large outputs for reuse: once folded, they are
    read-only constants, which it must not write into after an unfold."""
    w = RNG.standard_normal((300, 300)).astype(np.float32)  # above the reuse size
    model = _model([oh.make_node("Abs", ["w"], ["a"]), oh.make_node("Add", ["a", "x"], ["y"])],
                   [oh.make_tensor_value_info("x", T.FLOAT, None)],
                   [oh.make_tensor_value_info("y", T.FLOAT, None),
                    oh.make_tensor_value_info("a", T.FLOAT, None)],
                   [nh.from_array(w, "w")])
    sess = _session(model)
    x = np.ones_like(w)
    assert not sess.run(None, {"x": x})[1].flags.writeable  # the folded constant itself
    want = [np.abs(w) + x, np.abs(w)]  # copies: the evaluator's arrays stay unreferenced
    # a registration of Add alone unfolds, keeps the Abs instance, folds nothing
    monkeypatch.setenv(fold.ENV_VAR, "0")
    olc.register_kernel_for_session(sess, "", "Add")
    assert _plan_ops(sess) == ["Abs", "Add"]
    for _ in range(2):
        got = sess.run(None, {"x": x})
        assert _same(got, want) and got[1].flags.writeable
        del got
