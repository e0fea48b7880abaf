"""Three contenders on one ONNX node, timed with pytest-benchmark.

Layer measured: steady-state end to end.  A prepared evaluator or session
runs a single-node model; building, registering and the first run are not
timed.  The contenders, on the same model and the same inputs:

* ``ours``: ``ReferenceEvaluator`` + ``olc.register_kernels_for_session``;
  an untimed probe run with usage recording proves our kernel ran;
* ``ort``: an onnxruntime CPU session with the same thread count, whose
  pool does not spin (``session.intra_op.allow_spinning=0``);
* ``builtin``: ``ReferenceEvaluator`` with ``onnx.reference``'s own kernels.

Each contender is its own test in the benchmark group
``<op>-<dtype>-<size>-t<threads>``, so
``pytest benchmarks --benchmark-only --benchmark-group-by=group`` prints
them side by side and ``python -m tools.bench_ratio_table`` reads them back.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu._kernels import _cpu
from onnx_light_cpu.threads import decide_num_threads

CONTENDERS = ("ours", "ort", "builtin")
DEFAULT_OPSET = 21
# IR 10 goes with opset 21; onnx 1.23 would write a newer IR than some ORT read.
DEFAULT_IR_VERSION = 10
# int8 weights of the u8 x s8 benchmarks, high end exclusive. Without VNNI
# (AVX2-only CPUs) ONNX Runtime adds each pair of u8 x s8 products in saturating
# 16-bit arithmetic and so differs from the exact result for |weights| > 64
# (tests/differential.py probes it); the timings do not depend on the values.
INT8_WEIGHTS = (-64, 65)
# The builtin is skipped above this many elements unless a test says otherwise.
DEFAULT_BUILTIN_MAX_SIZE = 10**7
# One timed round lasts about this long: long enough for perf_counter, short
# enough for many rounds.  Each round is a block of back-to-back calls.
ROUND_SECONDS = 0.005
MIN_ROUNDS, MAX_ROUNDS = 5, 1000
ORT_SPINNING = "0"

# Comparison tolerances per dtype for the untimed output check.
_TOLERANCES = {
    np.dtype(np.float64): (1e-12, 1e-14),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (3e-3, 1e-4),  # 3 ulp: ORT computes float16 in float32
    np.dtype(ml_dtypes.bfloat16): (2.4e-2, 1e-3),
}


def size_label(n: int) -> str:
    """'1e6' for powers of ten, the plain number otherwise."""
    exponent = len(str(n)) - 1
    return f"1e{exponent}" if n >= 10 and n == 10**exponent else str(n)


def make_single_node_model(
    op_type: str,
    inputs: Sequence[tuple[str, np.dtype, Sequence[int | None]]],
    outputs: Sequence[tuple[str, np.dtype]] | None = None,
    attrs: dict | None = None,
    opset: int = DEFAULT_OPSET,
    domain: str = "",
) -> onnx.ModelProto:
    """A model with one node; ``inputs`` are (name, dtype, shape).

    ``outputs`` are (name, dtype) with unknown shape; by default one output
    ``Y`` of the first input's dtype (element-wise operators).
    """
    if outputs is None:
        outputs = [("Y", inputs[0][1])]
    node = helper.make_node(
        op_type, [name for name, _, _ in inputs], [name for name, _ in outputs],
        domain=domain, **(attrs or {}),
    )
    graph = helper.make_graph(
        [node],
        f"single_{op_type}",
        [helper.make_tensor_value_info(name, _onnx_type(dtype), list(shape))
         for name, dtype, shape in inputs],
        [helper.make_tensor_value_info(name, _onnx_type(dtype), None) for name, dtype in outputs],
    )
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=opsets, ir_version=DEFAULT_IR_VERSION)


def node_model(node: onnx.NodeProto, feeds: dict[str, np.ndarray],
               initializers: dict[str, np.ndarray], out_types: Sequence[int]) -> onnx.ModelProto:
    """A model of one ready-made ``node`` (com.microsoft or default domain):
    graph inputs ``feeds`` (shapes fixed to theirs), ``initializers``, and
    outputs of ONNX element types ``out_types`` with unknown shapes."""
    graph = helper.make_graph(
        [node], f"single_{node.op_type}",
        [helper.make_tensor_value_info(n, _onnx_type(x.dtype), list(x.shape))
         for n, x in feeds.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in zip(node.output, out_types)],
        [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()])
    opsets = [helper.make_opsetid("", DEFAULT_OPSET), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=DEFAULT_IR_VERSION)


def _onnx_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


@dataclass
class Case:
    """One operator on fixed inputs; shared by every contender and thread count."""

    op_type: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    dtype: str
    size: int
    domain: str = ""
    # Outputs every contender must match; computed by the builtin when None.
    reference: Callable[[dict], list] | None = None
    rtol: float | None = None
    atol: float | None = None
    # Name our probe must see; "onnx_light_cpu::<op>" when None (see
    # olc.registered_kernel_names() for operators present in two domains).
    expected_kernel: str | None = None
    _expected: list | None = field(default=None, repr=False)

    @property
    def kernel_name(self) -> str:
        return self.expected_kernel or f"onnx_light_cpu::{self.op_type}"

    def group(self, threads: int) -> str:
        return f"{self.op_type}-{self.dtype}-{size_label(self.size)}-t{threads}"

    def expected(self) -> list:
        if self._expected is None:
            if self.reference is not None:
                self._expected = list(self.reference(self.feeds))
            else:
                self._expected = _builtin_session(self.model).run(None, self.feeds)
        return self._expected


def make_case(
    op_type: str,
    feeds: dict[str, np.ndarray],
    *,
    attrs: dict | None = None,
    outputs: Sequence[tuple[str, np.dtype]] | None = None,
    opset: int = DEFAULT_OPSET,
    domain: str = "",
    **kwargs,
) -> Case:
    """A Case whose model takes ``feeds`` (shapes fixed to theirs)."""
    first = next(iter(feeds.values()))
    model = make_single_node_model(
        op_type, [(name, a.dtype, a.shape) for name, a in feeds.items()],
        outputs=outputs, attrs=attrs, opset=opset, domain=domain,
    )
    return Case(op_type, model, feeds, dtype=first.dtype.name, size=first.size,
                domain=domain, **kwargs)


# -- contenders: each returns (a zero-argument call, extra_info entries) ------


def _builtin_session(model) -> ReferenceEvaluator:
    # onnx_light_cpu hooks ReferenceEvaluator: an evaluator built while the
    # global table is empty, and never registered, runs onnx.reference's kernels.
    olc.unregister_kernels_global()
    return ReferenceEvaluator(model)


def dtype_params(op: str, cases, threads=(1, 2)):
    """pytest parameters (dtype, threads, contender) of one operator's
    ``cases``, pairs (dtype, contenders)."""
    return [pytest.param(dtype, t, contender, id=f"{op}-{dtype}-t{t}-{contender}")
            for dtype, contenders in cases for t in threads for contender in contenders]


def named_params(names, threads=(1, 2)):
    """pytest parameters (name, threads, contender) of named cases, every
    contender each."""
    return [pytest.param(name, t, contender, id=f"{name.replace(':', '-')}-t{t}-{contender}")
            for name in names for t in threads for contender in CONTENDERS]


def named_case(case: Case, label: str) -> Case:
    """``case`` under its own group label: distinct groups for cases of one
    operator and dtype with equal sizes."""
    case.expected_kernel = f"onnx_light_cpu::{case.op_type}"
    case.op_type = label
    return case


def naive_checked_case(label: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                       kernel: str, tol: float) -> Case:
    """A float32 com.microsoft Case checked against the NAIVE family's
    outputs within ``tol``; ``kernel`` must run."""
    case = Case(label, model, feeds, dtype="float32", size=next(iter(feeds.values())).size,
                domain="com.microsoft", rtol=tol, atol=tol, expected_kernel=kernel)
    case.reference = naive_reference(case)
    return case


def naive_reference(case: Case):
    """The NAIVE family's outputs on a case: the untimed check of every
    contender for the com.microsoft operators."""
    sess = ReferenceEvaluator(case.model)
    olc.register_kernels_for_session(
        sess, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)
    return lambda feeds: sess.run(None, feeds)


def prepare_ours(case: Case, threads: int):
    olc.unregister_kernels_global()  # only the per-session registration acts
    sess = ReferenceEvaluator(case.model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)

    # Untimed probe: prove which kernel and which code path ran.
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, case.feeds)
    names, paths = olc.used_kernel_names(sess), olc.used_kernel_paths(sess)
    # Recording takes a lock per call: off while timing.
    olc.set_kernel_usage_recording(sess, False)
    olc.clear_used_kernel_names(sess)
    assert case.kernel_name in names, f"{case.kernel_name} did not run, got {names}"

    info = {"path": paths[names.index(case.kernel_name)], "kernel": case.kernel_name}
    effective = _effective_threads(sess, case.size, threads)
    if effective is not None:
        info["effective_threads"] = effective
    return (lambda: sess.run(None, case.feeds)), info


def _effective_threads(sess, work: int, threads: int) -> int | None:
    """Threads the node's kernel will use, where the adapter says its threshold."""
    nodes = getattr(sess, "rt_nodes_", ())
    min_work = getattr(nodes[0], "min_work_per_thread", None) if len(nodes) == 1 else None
    if min_work is None:
        return None
    return decide_num_threads(work, min_work, threads)


def prepare_builtin(case: Case, threads: int):
    sess = _builtin_session(case.model)
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, case.feeds)
    used = olc.used_kernel_names(sess)
    olc.set_kernel_usage_recording(sess, False)
    assert not used, f"the builtin evaluator ran onnx_light_cpu kernels: {used}"
    return (lambda: sess.run(None, case.feeds)), {
        "path": "onnx.reference", "note": "single-threaded NumPy whatever the thread count"
    }


def ort_session_options(threads: int, spinning: str = ORT_SPINNING):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Basic keeps the node as it is but lets ORT insert the Casts it needs.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    # A spinning pool holds both cores after each call and slows whoever runs next.
    so.add_session_config_entry("session.intra_op.allow_spinning", spinning)
    so.add_session_config_entry("session.inter_op.allow_spinning", spinning)
    return so


def _ort_missing_kernel(exc: Exception) -> bool:
    text = str(exc)
    return "NOT_IMPLEMENTED" in text or "Could not find an implementation" in text


def prepare_ort(case: Case, threads: int, spinning: str = ORT_SPINNING):
    ort = pytest.importorskip("onnxruntime")
    so = ort_session_options(threads, spinning)
    with tempfile.TemporaryDirectory() as tmp:
        # The graph ORT really runs: it wraps some float16 nodes in Casts.
        so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        try:
            sess = ort.InferenceSession(
                case.model.SerializeToString(), so, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            if _ort_missing_kernel(exc):
                pytest.skip(f"onnxruntime has no CPU kernel for {case.op_type} "
                            f"{case.dtype}: {str(exc).splitlines()[0]}")
            raise
        ran = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
    info = {
        "path": ">".join(ran),
        "ort_version": ort.__version__,
        "ort_intra_op_threads": threads,
        "ort_allow_spinning": spinning,
        "ort_optimization": "basic",
    }
    if ran != [case.op_type]:
        info["note"] = f"ORT runs {'>'.join(ran)} (no {case.dtype} kernel of its own)"
    return (lambda: sess.run(None, case.feeds)), info


PREPARE = {"ours": prepare_ours, "ort": prepare_ort, "builtin": prepare_builtin}


# -- checking and timing -----------------------------------------------------


def check_outputs(case: Case, got: list, contender: str) -> None:
    """Every output matches the reference, within the dtype's tolerance."""
    expected = case.expected()
    assert len(got) == len(expected), f"{contender}: {len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, (
            f"{contender} output {i}: {g.dtype}{g.shape}, expected {e.dtype}{e.shape}")
        rtol, atol = _TOLERANCES.get(e.dtype, (0.0, 0.0))
        rtol = case.rtol if case.rtol is not None else rtol
        atol = case.atol if case.atol is not None else atol
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(g, e, err_msg=f"{contender} output {i}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                       atol=atol, equal_nan=True, err_msg=f"{contender} output {i}")


def seconds_per_call(run: Callable[[], object], min_seconds: float = 0.01) -> float:
    """Rough cost of one call: at least 3 calls and ``min_seconds``."""
    calls, start = 0, time.perf_counter()
    while True:
        run()
        calls += 1
        elapsed = time.perf_counter() - start
        if calls >= 3 and elapsed >= min_seconds or calls >= 10_000:
            return elapsed / calls


def time_in_blocks(benchmark, run: Callable[[], object], budget_s: float) -> None:
    """One warm-up round, then rounds of back-to-back calls for ``budget_s``.

    pytest-benchmark reports per-call statistics (round time / iterations).
    With ``--benchmark-disable`` it calls ``run`` once.
    """
    if benchmark.disabled:
        benchmark.pedantic(run)
        return
    per_call = seconds_per_call(run)
    iterations = max(1, round(ROUND_SECONDS / per_call))
    rounds = int(min(MAX_ROUNDS, max(MIN_ROUNDS, budget_s / (iterations * per_call))))
    benchmark.extra_info.update(rounds=rounds, iterations=iterations)
    with gc_off():
        benchmark.pedantic(run, rounds=rounds, iterations=iterations, warmup_rounds=1)


class gc_off:
    """Collect, then keep the collector out of the timed calls."""

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        gc.collect()
        gc.disable()

    def __exit__(self, *exc):
        if self.was_enabled:
            gc.enable()


def bench_contender(
    benchmark,
    case: Case,
    contender: str,
    threads: int,
    *,
    budget_s: float,
    builtin_max_size: int = DEFAULT_BUILTIN_MAX_SIZE,
) -> None:
    """Prepare one contender, check its outputs, then time it."""
    if contender == "builtin" and case.size > builtin_max_size:
        pytest.skip(f"builtin skipped above {size_label(builtin_max_size)} elements (too slow)")
    run, info = PREPARE[contender](case, threads)
    check_outputs(case, run(), contender)

    benchmark.group = case.group(threads)
    benchmark.extra_info.update(
        contender=contender, op=case.op_type, dtype=case.dtype, size=case.size,
        threads=threads, simd=olc.simd_level(), **info,
    )
    time_in_blocks(benchmark, run, budget_s)
    # Other processes on a shared machine show here (1-minute load average).
    benchmark.extra_info["loadavg_1m"] = round(os.getloadavg()[0], 2)


# -- interleaving engines ------------------------------------------------------


def time_calls(run: Callable[[], object], calls: int, warmup: int) -> list[float]:
    """Seconds of each of ``calls`` back-to-back calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


class Interleaver:
    """pedantic's setup, called before each timed call of ours.

    Every ``calls`` rounds the other engines run their blocks (timed here),
    then ours gets ``warmup`` untimed calls; pytest-benchmark times the
    ``calls`` calls of ours that follow, one per round.
    """

    def __init__(self, others: dict, ours, calls: int, warmup: int):
        self.others, self.ours = others, ours
        self.calls, self.warmup = calls, warmup
        self.rounds = 0
        self.times = {name: [] for name in others}

    def __call__(self):
        if self.rounds % self.calls == 0:
            for name, run in self.others.items():
                self.times[name].extend(time_calls(run, self.calls, self.warmup))
            for _ in range(self.warmup):
                self.ours()
        self.rounds += 1


def model_sessions(ours_model: onnx.ModelProto, ort_model: onnx.ModelProto, threads: int):
    """A whole model's two sessions: ours with every kernel registered, and
    ONNX Runtime with all its graph optimizations, as a user runs it."""
    import onnxruntime as ort

    ours = ReferenceEvaluator(ours_model)
    olc.register_kernels_for_session(ours)
    olc.set_num_threads_for_session(ours, threads)
    so = ort_session_options(threads)
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    theirs = ort.InferenceSession(ort_model.SerializeToString(), so,
                                  providers=["CPUExecutionProvider"])
    return ours, theirs


def interleave_with_ort(benchmark, ours, theirs, feeds: dict, per_call: float, budget_s: float,
                        block_seconds: float = 0.05, min_blocks: int = 5,
                        max_blocks: int = 200) -> None:
    """A whole model, our session against ONNX Runtime's on ``feeds`` in
    alternating blocks of about ``block_seconds``; the medians and their
    ratio go into ``benchmark.extra_info``. ``per_call``: seconds one call
    of ours takes."""
    import statistics

    def run_ours():
        return ours.run(None, feeds)

    def run_ort():
        return theirs.run(None, feeds)

    calls = max(1, round(block_seconds / per_call))
    warmup = 1 if per_call < block_seconds else 0
    blocks = int(min(max_blocks, max(min_blocks, budget_s / (calls * per_call))))
    interleave = Interleaver({"ort": run_ort}, run_ours, calls, warmup)
    if benchmark.disabled:  # CI: one pass through the machinery, no numbers
        benchmark.pedantic(run_ours, setup=interleave)
        return
    with gc_off():
        benchmark.pedantic(run_ours, setup=interleave, rounds=blocks * calls)
    ours_s = benchmark.stats.stats.median
    ort_s = statistics.median(interleave.times["ort"])
    benchmark.extra_info.update(
        blocks=blocks, calls_per_block=calls, warmup_calls=warmup,
        ours_median_s=ours_s, ort_median_s=ort_s, ratio=round(ours_s / ort_s, 3),
        loadavg_1m=round(os.getloadavg()[0], 2))


def alone_times(engines: dict[str, Callable], blocks: int, calls: int, warmup: int) -> dict:
    """Per-call seconds of each engine run in blocks, with nothing else running."""
    result = {}
    for name, run in engines.items():
        with gc_off():
            result[name] = [t for _ in range(blocks) for t in time_calls(run, calls, warmup)]
    return result


def openmp_report() -> dict:
    """Thread pools threadpoolctl sees, the OpenMP settings in effect (for
    the other libraries: our loops run on our own pool) and our pool's."""
    from threadpoolctl import threadpool_info

    pools = [
        f"{p['internal_api']}:{p.get('prefix', '?')}:{p['num_threads']}threads"
        for p in threadpool_info()
    ]
    report = {"threadpools": pools}
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS"):
        report[name] = os.environ.get(name)
    report["olc_pool_spin_us"] = _cpu.pool_spin_us()
    return report


# -- a competing process -------------------------------------------------------

LOADS = ("idle", "busy", "bursty")
# What the competing process runs: a pure-Python loop holds one core.  It
# ends once its parent (argv[1]) is gone: a parent killed by a signal (the
# out-of-memory killer) cannot stop it, and a load left running skews every
# measurement after it.
_LOAD_CODE = {
    "busy": (
        "import os, sys\n"
        "while os.getppid() == int(sys.argv[1]):\n"
        "    for _ in range(100_000):\n"
        "        pass\n"
    ),
    "bursty": (
        "import os, sys, time\n"
        "while os.getppid() == int(sys.argv[1]):\n"
        "    end = time.perf_counter() + 0.002\n"
        "    while time.perf_counter() < end:\n"
        "        pass\n"
        "    time.sleep(0.002)\n"
    ),
}


class competing_load:
    """A second process competing for one core while the block runs.

    ``busy`` spins without pause, ``bursty`` spins 2 ms then sleeps 2 ms,
    ``idle`` starts nothing.  The process is pinned to the last CPU this one
    may use: the core our second thread shares with it, the case a user's
    browser or compiler makes.
    """

    def __init__(self, kind: str):
        if kind not in LOADS:
            raise ValueError(f"competing_load: kind must be one of {LOADS}, got {kind!r}")
        self.kind = kind
        self.proc: subprocess.Popen | None = None
        self.cpu: int | None = None

    def __enter__(self):
        if self.kind == "idle":
            return self
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LOAD_CODE[self.kind], str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(cpus) > 1:
            self.cpu = cpus[-1]
            os.sched_setaffinity(self.proc.pid, {self.cpu})
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def describe(self) -> dict:
        return {"load": self.kind, "load_cpu": self.cpu}
