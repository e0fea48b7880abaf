"""The worker pool every core's parallel loop runs on (olc_pool_impl.h):
each task runs exactly once whoever claims it (also as the task numbers of
the threads' ranges wrap), nested loops run serially inside their task,
concurrent callers and a forked child still finish, a worker that holds
its task for milliseconds leaves the rest to the others and the next jobs
still use the workers; workers stop spinning for the next job once one
loses its CPU to another thread."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from onnx_light_cpu._kernels import _cpu


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("ntasks", [0, 1, 7, 1000, 100_000])
def test_every_task_runs_once(ntasks, threads):
    runs, slots, _ = _cpu.pool_check(ntasks, threads)
    assert runs == [1] * ntasks
    assert all(0 <= s < max(threads, 1) for s in slots)


@pytest.mark.parametrize("threads", [2, 3])
def test_every_task_runs_once_as_task_numbers_wrap(threads):
    """Each thread's range is a pair of task numbers counted across jobs;
    they wrap past 2**32 in a long-running process."""
    _cpu.pool_skip_task_numbers(2**32 - 5000)
    for ntasks in [1, 2, 3, 7, 64, 1000, 333] * 10:
        runs, slots, _ = _cpu.pool_check(ntasks, threads, task_us=1)
        assert runs == [1] * ntasks
        assert all(0 <= s < threads for s in slots)


def test_nested_loops_run_in_their_task():
    runs, _, nested = _cpu.pool_check(500, 2, inner=4)
    assert runs == [1] * 500
    assert nested == [1] * 2000


def test_concurrent_callers():
    """A second caller while a job runs runs its loop serially; both finish."""
    results = []

    def call():
        for _ in range(50):
            results.append(_cpu.pool_check(20_000, 2)[0] == [1] * 20_000)

    callers = [threading.Thread(target=call) for _ in range(3)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    assert results == [True] * 150


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_forked_child_runs_loops():
    _cpu.pool_check(100_000, 2)  # workers exist in the parent
    pid = os.fork()
    if pid == 0:  # the child: no workers were inherited, the loop still ends
        ok = _cpu.pool_check(100_000, 2)[0] == [1] * 100_000
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_spin_setting():
    before = _cpu.pool_spin_us()
    try:
        _cpu.set_pool_spin_us(0)
        assert _cpu.pool_check(10_000, 2)[0] == [1] * 10_000
        with pytest.raises(ValueError, match="set_pool_spin_us"):
            _cpu.set_pool_spin_us(-1)
    finally:
        _cpu.set_pool_spin_us(before)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs thread affinity")
def test_workers_stop_spinning_when_they_lose_their_cpu():
    """In a process pinned to one CPU the spinning worker shares it with the
    caller and loses it for scheduler slices: within seconds the pool cuts
    the spinning short (workers then sleep soon after a job); every task
    still runs once.  A fresh process: the pool's state is per process."""
    code = textwrap.dedent("""
        import os, time
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # before any worker
        from onnx_light_cpu._kernels import _cpu
        assert _cpu.pool_spin_us() > 0 and _cpu.pool_spin_stopped_us() == 0
        end = time.monotonic() + 10
        while _cpu.pool_spin_stopped_us() == 0 and time.monotonic() < end:
            assert _cpu.pool_check(64, 2, task_us=20)[0] == [1] * 64
        print(_cpu.pool_spin_stopped_us() > 0)
    """)
    env = {k: v for k, v in os.environ.items() if k != "ONNX_LIGHT_CPU_SPIN_US"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_jobs_after_a_stalled_worker_still_use_the_workers():
    """The first task a worker takes holds it 20 ms (as a preempted worker
    would): the others, the caller among them, run every task it had not
    claimed, each task runs once, and the jobs after it run on the workers
    again (no serial period after a stall)."""
    for threads in (2, 4):
        for _ in range(5):
            # 200 tasks of 20 µs: 4 ms of work, a worker surely joins
            runs, slots, _ = _cpu.pool_check(200, threads, task_us=20, stall_us=20_000)
            assert runs == [1] * 200
            if set(slots) != {0}:
                break
        else:
            pytest.skip("no worker woke during the job (machine too busy)")
        # the held worker ran its first task only
        assert any(slots.count(s) == 1 for s in set(slots) - {0})
        for _ in range(5):
            runs, slots, _ = _cpu.pool_check(200, threads, task_us=20)
            assert runs == [1] * 200
            if set(slots) != {0}:
                break
        else:
            pytest.fail("the jobs after a stall ran on the caller alone")


def _thread_masks():
    """Each thread of this process (its id) and the CPUs it may run on, once
    two reads 20 ms apart agree: a worker restores its affinity just after
    the caller saw the job's last task done, so one read may catch it moved."""
    def read():
        return {tid: os.sched_getaffinity(int(tid)) for tid in os.listdir("/proc/self/task")}
    masks = read()
    for _ in range(50):
        time.sleep(0.02)
        masks, last = read(), masks
        if masks == last:
            break
    return masks


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs and thread affinity")
def test_a_worker_woken_on_its_callers_cpu_gives_it_back():
    """A worker that wakes on the CPU its caller runs on moves off it for the
    job (olc_pool_leave_caller_cpu) and restores its affinity afterwards:
    with the caller pinned to one CPU, every task still runs once and every
    thread ends with the affinity it had."""
    allowed = os.sched_getaffinity(0)

    _cpu.pool_check(64, 2)  # the worker exists
    before = _thread_masks()
    try:
        os.sched_setaffinity(0, {min(allowed)})  # this thread only
        for _ in range(50):
            runs, slots, _ = _cpu.pool_check(64, 2, task_us=5)
            assert runs == [1] * 64
    finally:
        os.sched_setaffinity(0, allowed)
    after = _thread_masks()
    assert {t: m for t, m in after.items() if t in before} == before


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs and thread affinity")
def test_a_worker_preempted_mid_task_is_moved_to_the_callers_cpu():
    """A worker whose CPU time stands still in the middle of a task (here it
    sleeps 20 ms, as one preempted by another process waits) is moved to the
    caller's CPU before the caller sleeps (olc_pool_pull), goes back to its
    own CPUs after the task, and every task runs once."""
    _cpu.pool_check(64, 2)  # the worker exists
    before = _thread_masks()
    pulls = _cpu.pool_pulls()
    for _ in range(5):
        runs, slots, _ = _cpu.pool_check(200, 2, task_us=20, stall_us=20_000,
                                         stall_sleeps=True)
        assert runs == [1] * 200
        if set(slots) != {0}:
            break
    else:
        pytest.skip("no worker woke during the job (machine too busy)")
    assert _cpu.pool_pulls() > pulls
    after = _thread_masks()
    assert {t: m for t, m in after.items() if t in before} == before


def test_products_read_the_next_weights_ahead():
    """A decode-shaped chain of products with constant weights at 2 threads:
    each product learns the weights of the product that ran after it
    (EvaluatorContext.streamed; the last one the first's, from the next
    run), the pool's idle worker prefetches them while the serial kernels
    between run, and the results are the bits of one thread."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    import onnx_light_cpu as olc

    rng = np.random.default_rng(5)
    sizes = [1024, 1024, 768, 1024]
    weights = [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), f"w{i}")
               for i, (k, n) in enumerate(zip(sizes, sizes[1:]))]
    nodes = []
    for i in range(3):
        nodes += [helper.make_node("MatMul", [f"r{i}" if i else "x", f"w{i}"], [f"m{i}"]),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i + 1}"])]
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                              [helper.make_tensor_value_info("r3", TensorProto.FLOAT, [1, 1024])],
                              weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sessions = []
    for threads in (2, 1):
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
        olc.set_num_threads_for_session(sess, threads)
        olc.set_kernel_usage_recording(sess, True)
        sessions.append(sess)
    x = {"x": rng.standard_normal((1, 1024)).astype(np.float32)}
    want = sessions[1].run(None, x)[0]
    lines = _cpu.read_ahead_lines()
    for _ in range(50):
        np.testing.assert_array_equal(sessions[0].run(None, x)[0], want)
        if _cpu.read_ahead_lines() > lines:
            break
    else:
        if _cpu.pool_spin_stopped_us() == 0:  # the worker spins between jobs
            pytest.fail("the idle worker prefetched nothing")
    assert "onnx_light_cpu::MatMul" in olc.used_kernel_names(sessions[0])
    products = [n for n in sessions[0].rt_nodes_ if n.onnx_node.op_type == "MatMul"]
    for i, op in enumerate(products):
        following = products[(i + 1) % 3]
        assert any(op.weights_after is p for p in following._prepacked.values())
