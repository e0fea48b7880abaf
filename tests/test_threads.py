"""Thread-count decisions and the OpenMP runtime."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.threads import decide_num_threads, product_threads

from differential import node_model, run_ours


def test_small_work_runs_serially():
    assert decide_num_threads(10, 1000, 8) == 1
    assert decide_num_threads(1999, 1000, 8) == 1


@pytest.mark.skipif(not olc.BUILT_WITH_OPENMP, reason="built without OpenMP")
def test_large_work_uses_requested_threads_but_not_more_than_work_allows():
    assert decide_num_threads(10_000, 1000, 2) == 2
    assert decide_num_threads(3_000, 1000, 8) == 3
    olc.set_default_num_threads(3)
    try:
        assert olc.get_default_num_threads() == 3
        assert decide_num_threads(10_000, 1000, None) == 3
    finally:
        olc.set_default_num_threads(None)


@pytest.mark.skipif(not olc.BUILT_WITH_OPENMP, reason="built without OpenMP")
def test_products_of_few_rows_go_wide():
    """A decode step's 896 x 896 product (0.8M multiply-adds): one thread at
    the compute threshold (2^20), six at the decode one (2^17) when 16 are
    asked for, two when 2 are."""
    work = 896 * 896
    assert product_threads(work, 1 << 20, 1 << 17, True, 16) == 6
    assert product_threads(work, 1 << 20, 1 << 17, True, 2) == 2
    assert product_threads(1 << 17, 1 << 20, 1 << 17, True, 2) == 1
    assert product_threads(work, 1 << 20, 1 << 17, False, 16) == 1
    assert product_threads(896 * 4864, 1 << 20, 1 << 17, True, 16) == 16
    assert product_threads(128 * work, 1 << 20, 1 << 17, False, 2) == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_thread_counts_are_validated(bad):
    with pytest.raises(ValueError, match="positive integer"):
        olc.set_default_num_threads(bad)
    sess = ReferenceEvaluator(node_model("Exp", [np.zeros(1, np.float32)]))
    with pytest.raises(ValueError, match="positive integer"):
        olc.set_num_threads_for_session(sess, bad)


def test_session_override_is_per_evaluator():
    a = ReferenceEvaluator(node_model("Exp", [np.zeros(1, np.float32)]))
    b = ReferenceEvaluator(node_model("Exp", [np.zeros(1, np.float32)]))
    olc.set_num_threads_for_session(a, 1)
    assert olc.get_num_threads_for_session(a) == 1
    assert olc.get_num_threads_for_session(b) is None


def _python(code: str, **env) -> str:
    """stdout of ``code`` in a fresh interpreter, without inherited OpenMP
    and pool settings, plus ``env``."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS",
                          "ONNX_LIGHT_CPU_SPIN_US")}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_default_honours_omp_num_threads():
    code = "import onnx_light_cpu as o; print(o.get_default_num_threads())"
    assert _python(code, OMP_NUM_THREADS="1") == "1"
    assert _python(code, OMP_NUM_THREADS="3") == "3"


@pytest.mark.skipif(not olc.BUILT_WITH_OPENMP, reason="built without OpenMP")
def test_openmp_runtime_is_visible_to_threadpoolctl_and_limits_apply():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    apis = {info["user_api"] for info in threadpoolctl.threadpool_info()}
    assert "openmp" in apis
    with threadpoolctl.threadpool_limits(limits=1, user_api="openmp"):
        assert olc.get_default_num_threads() == 1


def test_openmp_settings_are_left_to_the_user():
    """The loops run on the package's pool: it sets no OpenMP variable."""
    code = "import os, onnx_light_cpu; print(os.environ.get('GOMP_SPINCOUNT'))"
    assert _python(code) == "None"


def test_pool_spin_time_from_the_environment():
    code = "from onnx_light_cpu._kernels import _cpu; print(_cpu.pool_spin_us())"
    assert _python(code) == "200.0"
    assert _python(code, ONNX_LIGHT_CPU_SPIN_US="0") == "0.0"


def test_results_do_not_depend_on_thread_count():
    x = np.random.default_rng(0).normal(size=300_001).astype(np.float32)
    model = node_model("Sigmoid", [x])
    (one,), _, _ = run_ours(model, [x], threads=1)
    (two,), _, _ = run_ours(model, [x], threads=2)
    assert one.tobytes() == two.tobytes()
