"""Random-weight ResNet-18 and MobileNet-V2 from ``torchvision``, exported
with ``torch.onnx.export`` as a user would, run with our kernels: every
operator of the exported graph runs our kernel, the result matches ONNX
Runtime and torch at every SIMD level, and is the same at 1 and 2 threads.

torch and torchvision are not dependencies of the package: without them
this file is skipped (``pip install torch torchvision onnxscript`` to run
it; onnxscript for the dynamo exporter).
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, same_bits, same_bits_all

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
ort = pytest.importorskip("onnxruntime")

# 64x64 instead of 224x224: the same graph (the pooling before the classifier
# is adaptive), a tenth of the time at the scalar level.
SHAPE = (2, 3, 64, 64)
# Sums of a few thousand products in another order than ONNX Runtime's or
# torch's, relative to the logits' largest magnitude.
TOLERANCE = 1e-4
MODELS = ("resnet18", "mobilenet_v2")


def _exporters():
    yield "torchscript"
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        yield pytest.param("dynamo", marks=pytest.mark.skipif(
            not _has("onnxscript"), reason="the dynamo exporter needs onnxscript"))


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _export(name: str, exporter: str, x: np.ndarray, path) -> tuple[onnx.ModelProto, np.ndarray]:
    """The exported model and torch's logits on ``x``."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    args = (torch.from_numpy(x),)
    with torch.no_grad():
        expected = model(*args).numpy()
    kwargs = {"dynamo": exporter == "dynamo"} \
        if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    with warnings.catch_warnings():  # the exporters' deprecation and tracing notes
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}}, **kwargs)
    return onnx.load(str(path)), expected


def _run_ours(model, feeds, threads):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    got = sess.run(None, feeds)[0]
    return got, {n.split("::", 1)[1] for n in olc.used_kernel_names(sess)}


def _runtime_op_types(model) -> set[str]:
    """The operators left to run: registration folds the nodes that read
    only initializers (the exporter's Identity of a shared weight) and
    Constant nodes once."""
    constant = {i.name for i in model.graph.initializer}
    return {n.op_type for n in model.graph.node
            if n.op_type != "Constant" and not all(i in constant for i in n.input if i)}


def _scaled_error(got, want) -> float:
    return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


@pytest.mark.parametrize("exporter", list(_exporters()))
@pytest.mark.parametrize("name", MODELS)
def test_torchvision_model_matches(name, exporter, tmp_path):
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    model, from_torch = _export(name, exporter, x, tmp_path / f"{name}.onnx")
    feeds = {model.graph.input[0].name: x}
    original = x.copy()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert _scaled_error(want, from_torch) <= TOLERANCE, "ONNX Runtime vs torch"
    op_types = _runtime_op_types(model)
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                got, used = _run_ours(model, feeds, threads)
                missing = sorted(op_types - used)
                assert not missing, f"{name}: these operators did not run our kernel: {missing}"
                error = _scaled_error(got, want)
                assert error <= TOLERANCE, f"{name} at {level}, {threads} threads: {error:.2e}"
                results.append(got)
            assert same_bits_all(results), f"{name} at {level}: thread count changed the result"
    assert same_bits(x, original), "input modified"
