"""Smoke tests: the build imports, picks a SIMD level and computes correctly.

This is the subset ``.ci/run`` also runs under ``qemu-x86_64-static`` on a
CPU model without AVX2, so it must stay fast and must not import
onnxruntime (whose wheel may need a newer instruction set than qemu offers).

``ONNX_LIGHT_CPU_EXPECT_SIMD=scalar|avx2|avx512|avx512vnni``, when set, is the level
:func:`onnx_light_cpu.simd_level` must report (the qemu run sets ``scalar``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import capped_simd_level

from differential import THREAD_COUNTS, thread_pairs

pytestmark = pytest.mark.smoke

EXPECT_ENV = "ONNX_LIGHT_CPU_EXPECT_SIMD"

FLOAT_OPS = ("Abs", "Exp", "Log", "Sigmoid", "Tanh")

# float64 references; the kernels' error is measured against them.
REFERENCES = {
    "Abs": np.abs,
    "Exp": np.exp,
    "Log": np.log,
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "Tanh": np.tanh,
}

# (rtol, atol) per dtype.  float16 results are compared with the float64
# reference rounded to float16: one or two units in the last place.
TOLERANCES = {
    np.float32: (1e-6, 1e-7),
    np.float16: (2e-3, 1e-4),
}

ONNX_TYPES = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16}


def _input(dtype) -> np.ndarray:
    """Values on both sides of 0, tiny to large, an odd count (tail paths).

    The model feeds Log with ``abs(x) + 0.01``, so every value here is
    usable by every operator.
    """
    rng = np.random.default_rng(1234)
    x = np.concatenate(
        [
            np.linspace(-9.0, 9.0, 131),
            rng.standard_normal(98) * 3.0,
            [0.0, -0.0, 1e-3, -1e-3, 0.5, -0.5, 20.0, -20.0],
        ]
    )
    return x.astype(dtype)  # 237 elements: not a multiple of any vector width


def _model(dtype):
    """One graph: each float operator on X, Log on |X| + c, and Not on B."""
    et = ONNX_TYPES[dtype]
    c = helper.make_tensor("c", et, [], [0.01])
    nodes = [helper.make_node(op, ["X"], [f"Y_{op}"]) for op in FLOAT_OPS if op != "Log"]
    nodes += [
        helper.make_node("Abs", ["X"], ["absX"]),
        helper.make_node("Add", ["absX", "c"], ["posX"]),
        helper.make_node("Log", ["posX"], ["Y_Log"]),
        helper.make_node("Not", ["B"], ["Y_Not"]),
    ]
    graph = helper.make_graph(
        nodes,
        "smoke",
        [
            helper.make_tensor_value_info("X", et, [None]),
            helper.make_tensor_value_info("B", TensorProto.BOOL, [None]),
        ],
        [helper.make_tensor_value_info(f"Y_{op}", et, [None]) for op in FLOAT_OPS]
        + [helper.make_tensor_value_info("Y_Not", TensorProto.BOOL, [None])],
        initializer=[c],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_import_and_simd_level():
    level = olc.simd_level()
    available = olc.available_simd_levels()
    print(f"onnx_light_cpu {olc.__version__}: simd_level={level}, available={available}, "
          f"openmp={olc.BUILT_WITH_OPENMP}")
    assert level in ("scalar", "avx2", "avx512", "avx512vnni")
    assert available[0] == "scalar" and available[-1] == level
    expected = os.environ.get(EXPECT_ENV)
    if expected:
        assert level == expected.strip().lower(), (
            f"{EXPECT_ENV}={expected} but simd_level() is {level!r}"
        )


LEVEL_ORDER = ("scalar", "avx2", "avx512", "avx512vnni")


@pytest.mark.parametrize("level", olc.available_simd_levels())
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_unary_model_matches_numpy(dtype, level):
    x = _input(dtype)
    b = np.arange(x.size) % 3 == 0
    sess = ReferenceEvaluator(_model(dtype))
    installed = olc.register_kernels_for_session(sess)
    assert installed > 0
    olc.set_kernel_usage_recording(sess, True)

    with capped_simd_level(level) as active:
        assert active == level
        outputs = sess.run(None, {"X": x, "B": b})
    names = [f"Y_{op}" for op in FLOAT_OPS] + ["Y_Not"]
    results = dict(zip(names, outputs))

    rtol, atol = TOLERANCES[dtype]
    x64 = x.astype(np.float64)
    for op in FLOAT_OPS:
        got = results[f"Y_{op}"]
        assert got.dtype == dtype and got.shape == x.shape, op
        # The model computes Log's argument in ``dtype``: round it the same way.
        arg = (np.abs(x) + dtype(0.01)).astype(np.float64) if op == "Log" else x64
        with np.errstate(over="ignore"):  # exp(20) is inf in float16, as it must be
            expected = REFERENCES[op](arg)
            if dtype is np.float16:
                expected = expected.astype(np.float16).astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=rtol, atol=atol,
                                   err_msg=f"{op} {np.dtype(dtype).name}")
    assert results["Y_Not"].dtype == np.bool_
    np.testing.assert_array_equal(results["Y_Not"], ~b)

    used = set(olc.used_kernel_names(sess))
    for op in (*FLOAT_OPS, "Not"):
        assert f"onnx_light_cpu::{op}" in used, (op, sorted(used))
    # Labels such as 'exp_float32_avx2': no kernel took a path above the cap.
    paths = olc.used_kernel_paths(sess)
    assert len(paths) == len(olc.used_kernel_names(sess))
    for path in paths:
        assert LEVEL_ORDER.index(path.rsplit("_", 1)[1]) <= LEVEL_ORDER.index(level), path


def test_parallel_path_matches_serial():
    """Enough elements for two OpenMP threads (when built with OpenMP): the
    split must not change a single value."""
    n = 100_003
    x = np.linspace(-8.0, 8.0, n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Exp", ["X"], ["E"]), helper.make_node("Tanh", ["X"], ["T"])],
        "parallel",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [None]) for name in "ET"],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    results = {}
    for threads in THREAD_COUNTS:
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
        olc.set_num_threads_for_session(sess, threads)
        olc.set_kernel_usage_recording(sess, True)
        results[threads] = sess.run(None, {"X": x})
        assert olc.used_kernel_names(sess) == ["onnx_light_cpu::Exp", "onnx_light_cpu::Tanh"]
    for first, other in thread_pairs([results[n] for n in THREAD_COUNTS]):
        np.testing.assert_array_equal(first, other)
    x64 = x.astype(np.float64)
    last = results[THREAD_COUNTS[-1]]
    np.testing.assert_allclose(last[0], np.exp(x64), rtol=1e-6)
    np.testing.assert_allclose(last[1], np.tanh(x64), rtol=1e-6, atol=1e-7)
