"""Differential testing: run one ONNX node with our kernel and with an
oracle on the same inputs, at every SIMD level this machine can run and at
1 and 2 threads (:data:`THREAD_COUNTS`), and compare.

    check_node("Exp", [x], oracle="builtin")

Our kernel must show in ``used_kernel_names``; its outputs must match the
oracle within the tolerance of their dtype (:data:`TOLERANCES`), must be
identical across thread counts, and the inputs must come back unmodified.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

# (rtol, atol) per output dtype, stated once for every differential test.
TOLERANCES = {
    np.dtype(np.float64): (1e-12, 1e-300),
    np.dtype(np.float32): (2e-6, 1e-37),
    np.dtype(np.float16): (1e-3, 1e-7),
    np.dtype(bfloat16): (8e-3, 1e-37),
}

# Every differential run compares these thread counts bit for bit; a machine
# with more cores checks more (OLC_TEST_THREADS=1,3,16).
THREAD_COUNTS = tuple(int(t) for t in os.environ.get("OLC_TEST_THREADS", "1,2").split(","))


def thread_pairs(runs: Sequence[Sequence]) -> list[tuple]:
    """(output k of the first run, output k of another run) for every other
    run and every k: the pairs that must have the same bits when ``runs``
    are one case's outputs at each count of :data:`THREAD_COUNTS`."""
    return [(a, b) for other in runs[1:] for a, b in zip(runs[0], other)]


def same_bits_all(values: Sequence[np.ndarray]) -> bool:
    """Every array of ``values`` has the first one's bits (one case's output
    at each count of :data:`THREAD_COUNTS`)."""
    return all(same_bits(values[0], v) for v in values[1:])


def element_type(dtype) -> int:
    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def node_model(op_type: str, inputs: Sequence[np.ndarray], n_outputs: int = 1,
               opset: int | None = None, domain: str = "", **attrs) -> onnx.ModelProto:
    """A one-node model whose inputs have the dtypes and ranks of ``inputs``."""
    in_names = [f"x{i}" for i in range(len(inputs))]
    out_names = [f"y{i}" for i in range(n_outputs)]
    node = oh.make_node(op_type, in_names, out_names, domain=domain, **attrs)
    graph = oh.make_graph(
        [node],
        "differential",
        [oh.make_tensor_value_info(n, element_type(a.dtype), [None] * a.ndim)
         for n, a in zip(in_names, inputs)],
        [oh.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in out_names],
    )
    opsets = [oh.make_opsetid("", opset or onnx.defs.onnx_opset_version())]
    if domain:
        opsets.append(oh.make_opsetid(domain, 1))
    return oh.make_model(graph, opset_imports=opsets)


def run_ours(model: onnx.ModelProto, inputs: Sequence[np.ndarray], threads: int = 1):
    """Outputs, kernel names and paths of one run with our kernels."""
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    feeds = {f"x{i}": a for i, a in enumerate(inputs)}
    outputs = sess.run(None, feeds)
    return outputs, olc.used_kernel_names(sess), olc.used_kernel_paths(sess)


def run_builtin(model: onnx.ModelProto, inputs: Sequence[np.ndarray]):
    sess = ReferenceEvaluator(model)  # the global table is empty in tests
    return sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str = "",
                 tolerance: tuple[float, float] | None = None) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if actual.dtype.kind in "biu" or actual.dtype == np.bool_:
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    rtol, atol = tolerance or TOLERANCES[actual.dtype]
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(e), err_msg=f"{what}: NaN positions")
    finite = np.isfinite(e)
    np.testing.assert_array_equal(a[~finite & ~np.isnan(e)], e[~finite & ~np.isnan(e)],
                                  err_msg=f"{what}: infinities")
    np.testing.assert_allclose(a[finite], e[finite], rtol=rtol, atol=atol, err_msg=what)


def assert_outputs_close(got: Sequence, want: Sequence, what: str,
                         tolerance: tuple[float, float] | None = None) -> None:
    """Every output of ``got`` close to the one of ``want`` (assert_close)."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, f"{what} output {k}", tolerance)


def check_node(op_type: str, inputs: Sequence[np.ndarray], *,
               oracle: str | Callable = "builtin", kernel: str | None = None,
               tolerance: tuple[float, float] | None = None, **model_kwargs) -> None:
    """Compare our kernel with the oracle at every SIMD level and thread count.

    ``oracle`` is "builtin" (the onnx.reference implementation) or a callable
    taking the inputs and returning the expected outputs.
    """
    model = node_model(op_type, inputs, **model_kwargs)
    originals = [a.copy() for a in inputs]
    expected = (run_builtin(model, inputs) if oracle == "builtin"
                else list(oracle(*inputs)))
    kernel = kernel or f"onnx_light_cpu::{op_type}"
    for level in available_simd_levels():
        with capped_simd_level(level):
            per_thread = {}
            for threads in THREAD_COUNTS:
                outputs, names, paths = run_ours(model, inputs, threads)
                assert kernel in names, f"{op_type} at {level}: {names} misses {kernel}"
                for k, (got, want) in enumerate(zip(outputs, expected)):
                    assert_close(got, want, f"{op_type} output {k} at {level}, {threads} threads",
                                 tolerance)
                per_thread[threads] = outputs
            for a, b in itertools.combinations(per_thread.values(), 2):
                for got1, got2 in zip(a, b):
                    assert same_bits(got1, got2), f"{op_type}: thread count changed the result"
    for a, original in zip(inputs, originals):
        assert same_bits(a, original), f"{op_type} modified its input"


CLEAR_ERRORS = (ValueError, TypeError, NotImplementedError)


def error_message(op_type: str, inputs: Sequence[np.ndarray], *,
                  errors: tuple[type[Exception], ...] = CLEAR_ERRORS, **model_kwargs) -> str:
    """The message of the error our kernel raises on ``inputs``: one of
    ``errors``, naming the operator, with the inputs left as they were."""
    model = node_model(op_type, inputs, **model_kwargs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    originals = [a.copy() for a in inputs]
    with pytest.raises(errors) as info:
        sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})
    for a, o in zip(inputs, originals):
        assert same_bits(a, o)
    assert op_type in str(info.value)
    return str(info.value)


def check_every_level(run: Callable, kernel: str, check: Callable,
                      inputs: Sequence[np.ndarray | None], originals=None) -> None:
    """``run(threads)`` -> (outputs, kernel names) at every SIMD level and
    every count of THREAD_COUNTS: ``kernel`` must be the one kernel that ran
    and ``check(outputs, what)`` checks each result (``what`` says the level
    and thread count).  The outputs must have the same bits at every thread
    count, and ``inputs`` (arrays or None) must equal ``originals`` (copies
    taken before earlier runs; by default, copies taken now)."""
    if originals is None:
        originals = [None if x is None else x.copy() for x in inputs]
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                got, names = run(threads)
                assert names == [kernel], names
                check(got, f"at {level}, {threads} threads")
                results.append(got)
            for a, b in thread_pairs(results):
                assert same_bits(a, b), "thread count changed the result"
    for x, original in zip(inputs, originals):
        assert x is None or same_bits(x, original), "input modified"


def bfloat16_through_float32(oracle: Callable, inputs: Sequence[np.ndarray | None]) -> list:
    """An oracle without bfloat16 kernels (ONNX Runtime's CPU) on bfloat16
    inputs: ``oracle`` runs on their exact float32 values, and its float32
    outputs are rounded to bfloat16 once."""
    wide = [x.astype(np.float32) if x is not None and x.dtype == bfloat16 else x for x in inputs]
    return [y.astype(bfloat16) if y.dtype == np.float32 else y for y in oracle(wide)]


def ort_microsoft_node(op: str, inputs: Sequence[np.ndarray], **attrs) -> list:
    """ONNX Runtime's CPU kernel on one com.microsoft node (1 thread), its
    outputs of the first input's type; bfloat16 through its float32 kernel
    (:func:`bfloat16_through_float32`).  Callers skip without onnxruntime."""
    import onnxruntime as ort

    if inputs[0].dtype == bfloat16:
        return bfloat16_through_float32(lambda wide: ort_microsoft_node(op, wide, **attrs),
                                        inputs)
    model = node_model(op, inputs, domain="com.microsoft", opset=21, **attrs)
    for out in model.graph.output:
        out.type.tensor_type.elem_type = model.graph.input[0].type.tensor_type.elem_type
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {f"x{i}": np.array(a, order="C") for i, a in enumerate(inputs)})


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality (NaN payloads included)."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def random_shapes(rng: np.random.Generator, include_large: bool = True):
    """Shapes with 0, 1, odd sizes, sizes off the vector width, and large ones."""
    shapes = [(), (0,), (1,), (3,), (7,), (15,), (16,), (17,), (31,), (33,), (2, 0, 3),
              (5, 7), (3, 4, 5), tuple(int(s) for s in rng.integers(1, 9, size=3))]
    if include_large:
        shapes += [(1 << 16,), (3, 70001)]
    return shapes


def unaligned(x: np.ndarray) -> np.ndarray:
    """A contiguous copy of ``x`` that starts one element into its buffer,
    so vector loads see an address off their natural alignment."""
    buffer = np.empty(x.size + 1, dtype=x.dtype)
    view = buffer[1:].reshape(x.shape)
    view[...] = x
    return view


def special_values(dtype) -> np.ndarray:
    """NaN, ±inf, ±0, subnormals and extremes of a float dtype."""
    info = np.finfo(dtype) if dtype != bfloat16 else None
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]
    if info is not None:
        values += [float(info.tiny), -float(info.tiny), float(info.smallest_subnormal),
                   float(info.max), -float(info.max), float(info.eps)]
    return np.array(values, dtype=np.float64).astype(dtype)


def layouts(x):
    """(name, array equal to x) in other memory layouts: Fortran order, a
    strided last axis, read-only, off the element alignment (byte offset 1),
    strides that are not whole elements, broadcast (stride 0) over axis 0."""
    yield "fortran", np.asfortranarray(x)
    if x.ndim == 0:
        return
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    wide[..., ::2] = x
    yield "strided", wide[..., ::2]
    ro = x.copy()
    ro.flags.writeable = False
    yield "read-only", ro
    raw = np.zeros(x.nbytes + 1, np.uint8)
    odd = np.ndarray(x.shape, x.dtype, buffer=raw, offset=1)
    odd[...] = x
    yield "byte offset 1", odd
    raw = np.zeros(x.size * (x.itemsize + 1) + 1, np.uint8)
    steps = tuple(st // x.itemsize * (x.itemsize + 1) for st in np.ascontiguousarray(x).strides)
    odd = np.ndarray(x.shape, x.dtype, buffer=raw, strides=steps)
    odd[...] = x
    yield "odd byte strides", odd
    if x.shape[0] and (x == x[:1]).all():
        yield "stride 0", np.broadcast_to(x[:1], x.shape)


@functools.cache
def ort_int8_weight_range() -> tuple[int, int]:
    """The int8 weight values ONNX Runtime's u8 x s8 kernels sum exactly here.

    Without AVX-VNNI (an AVX2-only CPU such as a Zen 3), MLAS adds each pair of
    u8 x s8 products in saturating 16-bit arithmetic, so 255 * 127 * 2
    becomes 32767. Our kernels compute exact int32 sums on every CPU. Where
    ONNX Runtime saturates, its comparisons draw int8 weights from [-64, 64]:
    255 * 64 * 2 = 32640 fits in 16 bits. Probed once, with MatMulInteger.
    """
    import onnxruntime as ort

    a = oh.make_tensor_value_info("a", onnx.TensorProto.UINT8, [1, 2])
    b = oh.make_tensor_value_info("b", onnx.TensorProto.INT8, [2, 1])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.INT32, [1, 1])
    graph = oh.make_graph([oh.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe", [a, b], [y])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)], ir_version=10)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"a": np.full((1, 2), 255, np.uint8), "b": np.full((2, 1), 127, np.int8)})
    return (-128, 127) if int(got[0][0, 0]) == 255 * 127 * 2 else (-64, 64)
