"""Kernel-usage recording per evaluator."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.usage import USAGE_LIMIT

import models
from models import X

USAGE_FUNCTIONS = [
    lambda s: olc.set_kernel_usage_recording(s, True),
    olc.clear_used_kernel_names,
    olc.used_kernel_names,
    olc.used_kernel_paths,
    lambda s: olc.register_kernels_for_session(s),
    lambda s: olc.set_num_threads_for_session(s, 1),
]


@pytest.mark.parametrize("call", USAGE_FUNCTIONS)
@pytest.mark.parametrize("not_an_evaluator", [None, "sess", object(), models.chain("Exp")])
def test_anything_but_an_evaluator_is_a_type_error(call, not_an_evaluator):
    with pytest.raises(TypeError, match="ReferenceEvaluator"):
        call(not_an_evaluator)


def _session(*ops):
    sess = ReferenceEvaluator(models.chain(*ops))
    olc.register_kernels_for_session(sess)
    return sess


def test_recording_is_off_by_default_and_clear_keeps_the_switch():
    sess = _session("Exp")
    sess.run(None, {"x": X})
    assert olc.used_kernel_names(sess) == []
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, {"x": X})
    olc.clear_used_kernel_names(sess)
    assert olc.used_kernel_names(sess) == []
    sess.run(None, {"x": X})
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::Exp"]
    olc.set_kernel_usage_recording(sess, False)
    sess.run(None, {"x": X})
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::Exp"]  # kept, not extended


def test_first_1024_invocations_are_kept_and_snapshots_are_copies():
    sess = _session("Abs", "Exp")
    olc.set_kernel_usage_recording(sess, True)
    for _ in range(USAGE_LIMIT // 2 + 10):
        sess.run(None, {"x": X})
    names = olc.used_kernel_names(sess)
    paths = olc.used_kernel_paths(sess)
    assert len(names) == len(paths) == USAGE_LIMIT == 1024
    assert names[:2] == ["onnx_light_cpu::Abs", "onnx_light_cpu::Exp"]
    assert paths[1].startswith("exp_float32_")
    names.clear()
    assert len(olc.used_kernel_names(sess)) == USAGE_LIMIT
    olc.clear_used_kernel_names(sess)
    sess.run(None, {"x": X})
    assert len(olc.used_kernel_names(sess)) == 2


def test_sessions_have_independent_logs_and_nested_graphs_share_their_parent():
    a, b = ReferenceEvaluator(models.if_model()), _session("Exp")
    olc.register_kernels_for_session(a)
    olc.set_kernel_usage_recording(a, True)
    a.run(None, {"cond": np.array(True), "x": X})
    a.run(None, {"cond": np.array(False), "x": X})
    b.run(None, {"x": X})
    assert olc.used_kernel_names(a) == ["onnx_light_cpu::If", "onnx_light_cpu::Exp",
                                        "onnx_light_cpu::If", "onnx_light_cpu::Abs"]
    assert olc.used_kernel_names(b) == []


def test_recording_is_thread_safe():
    sess = _session("Abs")
    olc.set_kernel_usage_recording(sess, True)
    runs_per_thread, threads = 100, 4

    def work():
        for _ in range(runs_per_thread):
            sess.run(None, {"x": X})

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::Abs"] * (runs_per_thread * threads)
