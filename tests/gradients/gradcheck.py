"""Checks a backward model against central finite differences of the
forward model, both run by this package's kernels; the backward model is
also run by ONNX Runtime.

    check_gradients(model, feeds, tol=(rtol, atol), step=h)

The loss is L = sum over outputs of sum(grad_out * out), accumulated in
float64, with one random grad_out per output; dL/dx[i] is estimated as
(L(x + h e_i) - L(x - h e_i)) / 2h for every element of every
differentiable input and compared with the backward model's grad_x.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

MS = "com.microsoft"


def one_node_model(op_type: str, inputs: dict, outputs: dict, domain: str = MS,
                   initializers: dict | None = None, node_inputs: list[str] | None = None,
                   node_outputs: list[str] | None = None, opset: int = 21,
                   **attrs) -> onnx.ModelProto:
    """``inputs``/``outputs``: name -> (element type, shape) of the graph;
    ``node_inputs``/``node_outputs``: the node's slots ('' skips one;
    default: the graph's names); ``initializers``: name -> array (inputs
    that are constants)."""
    initializers = initializers or {}
    node = oh.make_node(op_type, node_inputs or list(inputs), node_outputs or list(outputs),
                        domain=domain, **attrs)
    graph = oh.make_graph(
        [node], "forward",
        [oh.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()
         if n not in initializers],
        [oh.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()],
        initializer=[onnx.numpy_helper.from_array(a, n) for n, a in initializers.items()])
    opsets = [oh.make_opsetid("", opset)] + ([oh.make_opsetid(MS, 1)] if domain == MS else [])
    return oh.make_model(graph, opset_imports=opsets)


def ours(model: onnx.ModelProto) -> ReferenceEvaluator:
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    return sess


def run_ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def output_gradients(model: onnx.ModelProto, feeds: dict, rng) -> dict[str, np.ndarray]:
    """A random gradient per output, of the output's shape and type."""
    outputs = ours(model).run(None, feeds)
    return {f"grad_{o.name}": rng.standard_normal(y.shape).astype(y.dtype)
            for o, y in zip(model.graph.output, outputs)}


def numeric_gradients(model: onnx.ModelProto, feeds: dict, grads: dict, names, step: float
                      ) -> dict[str, np.ndarray]:
    """Central differences of the loss for every element of ``names``."""
    sess = ours(model)
    weights = [grads[f"grad_{o.name}"].astype(np.float64) for o in model.graph.output]

    def loss(values):
        return sum(float(np.sum(w * np.asarray(y, dtype=np.float64)))
                   for w, y in zip(weights, sess.run(None, values)))

    result = {}
    for name in names:
        x = feeds[name]
        d = np.zeros(x.shape, dtype=np.float64)
        for i in np.ndindex(x.shape):
            values = dict(feeds)
            for sign in (1, -1):
                moved = x.copy()
                moved[i] = x[i] + sign * step
                values[name] = moved
                d[i] += sign * loss(values)
        result[name] = d / (2 * step)
    return result


def check_gradients(model: onnx.ModelProto, feeds: dict, *, tol: tuple[float, float],
                    step: float, seed: int = 0, kernels: tuple[str, ...] = (),
                    ort_tol: tuple[float, float] | None = None) -> onnx.ModelProto:
    """Builds the backward model, checks it with onnx.checker, runs it with
    our kernels (``kernels`` must show in used_kernel_names) and with ONNX
    Runtime, and compares both with finite differences at ``tol`` (rtol,
    atol); ``ort_tol``: ours against ONNX Runtime (default ``tol``)."""
    rng = np.random.default_rng(seed)
    backward = olc.gradient_model(model)
    onnx.checker.check_model(backward, full_check=True)
    grads = output_gradients(model, feeds, rng)
    values = {**feeds, **grads}
    sess = ours(backward)
    got = dict(zip([o.name for o in backward.graph.output], sess.run(None, values)))
    used = olc.used_kernel_names(sess)
    for kernel in kernels:
        assert f"onnx_light_cpu::{kernel}" in used, (kernel, used)
    from_ort = dict(zip(got, run_ort(backward, values)))
    names = [n[len("grad_"):] for n in got]
    want = numeric_gradients(model, feeds, grads, [n for n in names if n in feeds], step)
    for name in names:
        g, o = got[f"grad_{name}"], from_ort[f"grad_{name}"]
        expected_type = feeds[name].dtype if name in feeds else g.dtype
        assert g.dtype == o.dtype == expected_type, (name, g.dtype, o.dtype)
        assert g.shape == o.shape == feeds.get(name, g).shape, (name, g.shape, o.shape)
        np.testing.assert_allclose(g.astype(np.float64), o.astype(np.float64),
                                   *(ort_tol or tol), err_msg=f"ours vs ORT: grad_{name}")
        if name in want:
            np.testing.assert_allclose(g.astype(np.float64), want[name], *tol,
                                       err_msg=f"finite differences: grad_{name}")
    return backward
