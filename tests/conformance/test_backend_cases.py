"""Every ONNX backend node case that uses a registered operator runs with
our kernels, matches the expected outputs with the case's tolerances, and
shows our kernel in ``used_kernel_names``.

Later operator families join by registering kernels: the case list is
derived from the live inventory.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

# Cases whose outputs are random draws.
RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike",
              "RandomUniform", "RandomUniformLike"}

# Cases the onnx.reference built-ins fail for reasons that none of our
# kernels touch: case name -> why.
BUILTIN_FAILURES: dict[str, str] = {}


def _graph_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for att in node.attribute:
            if att.type == onnx.AttributeProto.GRAPH:
                yield from _graph_nodes(att.g)
            for g in att.graphs:
                yield from _graph_nodes(g)


def _model_nodes(model: onnx.ModelProto):
    yield from _graph_nodes(model.graph)
    for fn in model.functions:
        yield from fn.node


def _our_kernels() -> dict[tuple[str, str], str]:
    """(domain, op_type) -> kernel name, standard domains only."""
    kernels = {}
    for record in olc.registered_kernels():
        if record.domain in ("ai.onnx", "ai.onnx.ml"):
            domain = "" if record.domain == "ai.onnx" else record.domain
            kernels[(domain, record.op_type)] = record.name
    return kernels


@functools.lru_cache(maxsize=1)
def _cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    kernels = _our_kernels()
    selected = []
    for case in cases:
        nodes = list(_model_nodes(case.model))
        if any(n.op_type in RANDOM_OPS for n in nodes):
            continue
        ours = {kernels[(n.domain, n.op_type)] for n in nodes if (n.domain, n.op_type) in kernels}
        if ours:
            # Nodes of the main graph always run; those of a subgraph or a
            # function may not (an If branch not taken): for them, one of
            # our kernels running is enough.
            required = {kernels[(n.domain, n.op_type)] for n in case.model.graph.node
                        if (n.domain, n.op_type) in kernels}
            selected.append((case, sorted(required), sorted(ours)))
    return selected


def _params():
    params = []
    for case, required, ours in _cases():
        marks = ()
        if case.name in BUILTIN_FAILURES:
            marks = pytest.mark.xfail(reason=BUILTIN_FAILURES[case.name], strict=True)
        params.append(pytest.param(case, required, ours, id=case.name, marks=marks))
    return params


def _assert_matches(got, want, rtol, atol, what):
    if isinstance(want, np.ndarray) and isinstance(got, np.ndarray):
        assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
        if want.dtype.kind in "OUS":
            np.testing.assert_array_equal(got, want, err_msg=what)
        else:
            np.testing.assert_allclose(got.astype(np.float64) if want.dtype.kind == "V" else got,
                                       want.astype(np.float64) if want.dtype.kind == "V" else want,
                                       rtol=rtol, atol=atol, err_msg=what)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{what}: {len(got)} != {len(want)} items"
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_matches(g, w, rtol, atol, f"{what}[{i}]")
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def _as_array(value):
    """Backend cases keep some tensors (float 8, 4-bit types...) as
    TensorProto; the backend runner turns them into arrays first."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, list):
        return [_as_array(v) for v in value]
    return value


def _run_case(case, fold: bool):
    """Run every data set of the case with our kernels; the kernels run
    (folding ran some nodes once, while the evaluator was built) and the
    kernels of the nodes folding left."""
    sess = ReferenceEvaluator(case.model)
    olc.register_kernels_for_session(sess, fold_constants=fold)
    olc.set_kernel_usage_recording(sess, True)
    for inputs, outputs in case.data_sets:
        feeds = dict(zip(sess.input_names, _as_array(inputs)))
        with np.errstate(all="ignore"):
            got = sess.run(None, feeds)
        for name, g, w in zip(sess.output_names, got, _as_array(outputs)):
            _assert_matches(g, w, case.rtol, case.atol, f"{case.name} output {name!r}")
    kernels = _our_kernels()
    left = {kernels.get((n.onnx_node.domain, n.onnx_node.op_type)) for n in sess.rt_nodes_}
    return set(olc.used_kernel_names(sess)), left


@pytest.mark.parametrize("case, required, ours", _params())
def test_backend_case(case, required, ours):
    ran, left = _run_case(case, fold=True)
    missing = set(required) & left - ran
    assert not missing, f"our kernels {sorted(missing)} did not run"
    if not ran & set(ours):  # folding ran them all at load: once more, unfolded
        ran, _ = _run_case(case, fold=False)
        assert set(required) <= ran, f"our kernels {sorted(set(required) - ran)} did not run"
    assert ran & set(ours), f"none of our kernels {ours} ran"
