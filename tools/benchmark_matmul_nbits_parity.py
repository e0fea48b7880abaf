"""MatMulNBits parity and latency against ONNX Runtime on single-node models.

    python -m tools.benchmark_matmul_nbits_parity                  # Muse-Glimmer, M=1,8,128
    python -m tools.benchmark_matmul_nbits_parity --accuracy-level 4
    python -m tools.benchmark_matmul_nbits_parity --qwen-int8      # six Qwen2 projections, M=128
    python -m tools.benchmark_matmul_nbits_parity --qwen-int8-decode   # M=1,2,4
    python -m tools.benchmark_matmul_nbits_parity --full           # 9 projections x 3 M x 3 types
    python -m tools.benchmark_matmul_nbits_parity --shape 4,64,48 --repeat 2

Each case is one com.microsoft MatMulNBits node whose packed weights and
scales are constant initializers (so both engines may prepare them once);
the activation ``A`` [M, K] is the only feed.  The engines:

* ours: ``onnx.reference.ReferenceEvaluator`` with onnx_light_cpu's kernel
  registered on that evaluator and the same thread count;
* ORT: an onnxruntime CPU session, ``intra_op_num_threads`` = threads, its
  pool not spinning, fed through an IOBinding (native tensors, no NumPy
  conversion per call).  ORT has no CPU bfloat16 kernel: for bfloat16 it
  runs its float32 operator on the bfloat16 values, rounded back.

Preparation (evaluator or session construction plus the first run) is
reported apart from the steady state.  The steady state alternates samples,
ours, ORT, ours, ORT, ... (each sample a block of back-to-back calls lasting
at least ``SAMPLE_SECONDS``), and reports medians per call.  Errors are the
maximum absolute differences against ORT and against a float64
dequantize-then-matmul oracle (computed in column chunks: the dequantized
matrix is never materialised whole).  For M=1 a second table reports the
achieved bandwidth (packed B plus scales bytes per second) against a
streaming-read bandwidth measured here (a NumPy max over 256 MiB, one slice
per thread); small weights that fit in the last-level cache can exceed it.

Random codes stand in for quantized weights; scales are sized so outputs
are about 1.  Cases with the same K and N get the same weights (the
attention gate and Q, for example).  If MatMulNBits is not registered in
onnx_light_cpu the "ours" columns read n/a and ORT and the oracle still run.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import ml_dtypes
import numpy as np
import onnx
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

MS = "com.microsoft"
OP = "MatMulNBits"
OPSET, IR_VERSION = 21, 10
SAMPLE_SECONDS = 0.01
DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
          "bfloat16": np.dtype(ml_dtypes.bfloat16)}

# The spec's synthetic Qwen2 projections (K, N), run at M=128 with 8 bits.
QWEN_PROJECTIONS = (
    ("LM head", 512, 32000),
    ("MLP gate", 512, 1376),
    ("MLP up", 512, 1376),
    ("MLP down", 1376, 512),
    ("Attention QKV", 512, 1024),
    ("Attention output", 512, 512),
)
# Muse-Glimmer: the distinct K -> N families, and the nine projections of --full.
MUSE_FAMILIES = (
    ("Q/attention gate", 6656, 4096),
    ("K/V", 6656, 256),
    ("attention output", 4096, 6656),
    ("MLP gate/up", 6656, 19968),
    ("MLP down", 19968, 6656),
)
MUSE_VOCABULARY = ("vocabulary", 6656, 202048)
MUSE_PROJECTIONS = (
    ("Q", 6656, 4096), ("attention gate", 6656, 4096), ("K", 6656, 256), ("V", 6656, 256),
    ("attention output", 4096, 6656), ("MLP gate", 6656, 19968), ("MLP up", 6656, 19968),
    ("MLP down", 19968, 6656), MUSE_VOCABULARY,
)
MUSE_M = (1, 8, 128)


@dataclass(frozen=True)
class Case:
    name: str
    M: int
    K: int
    N: int
    dtype: str = "float32"
    bits: int = 4
    block: int = 32
    accuracy_level: int = 0
    threads: int = 1

    @property
    def packed_bytes(self) -> int:
        """Bytes of B plus scales: what one pass over the weights reads."""
        blocks = math.ceil(self.K / self.block)
        return self.N * blocks * (self.block * self.bits // 8 + DTYPES[self.dtype].itemsize)


# -- models ----------------------------------------------------------------------


def make_weights(K: int, N: int, bits: int, block: int, dtype: str):
    """Packed random codes [N, blocks, block*bits/8] and scales [N, blocks].

    Seeded by the geometry only, so equal-sized projections share weights
    and every dtype sees the same values (rounded)."""
    rng = np.random.default_rng((K, N, bits, block))
    blocks = math.ceil(K / block)
    packed = rng.integers(0, 256, (N, blocks, block * bits // 8), dtype=np.uint8)
    # Codes are uniform on [0, 2^bits): output std ~ 1 for A uniform on (-1, 1).
    code_std = math.sqrt((4**bits - 1) / 12)
    base = math.sqrt(3) / (math.sqrt(K) * code_std)
    scales = (base * rng.uniform(0.5, 1.5, (N, blocks))).astype(DTYPES[dtype])
    return packed, scales


def make_activation(M: int, K: int, dtype: str) -> np.ndarray:
    return np.random.default_rng((M, K)).uniform(-1, 1, (M, K)).astype(DTYPES[dtype])


def make_model(case: Case, packed: np.ndarray, scales: np.ndarray) -> onnx.ModelProto:
    """One MatMulNBits node, B and scales as initializers, A [M, K] the input."""
    elem = oh.np_dtype_to_tensor_dtype(scales.dtype)
    node = oh.make_node(OP, ["A", "B", "scales"], ["Y"], domain=MS, K=case.K, N=case.N,
                        bits=case.bits, block_size=case.block,
                        accuracy_level=case.accuracy_level)
    graph = oh.make_graph(
        [node], "matmul_nbits",
        [oh.make_tensor_value_info("A", elem, [case.M, case.K])],
        [oh.make_tensor_value_info("Y", elem, [case.M, case.N])],
        [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(scales, "scales")],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET),
                                               oh.make_opsetid(MS, 1)],
                         ir_version=IR_VERSION)


def unpack_codes(packed: np.ndarray, bits: int) -> np.ndarray:
    """[n, blocks, bytes] uint8 -> [n, blocks * block] codes, low bits first."""
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    codes = (packed[..., None] >> shifts) & ((1 << bits) - 1)
    return codes.reshape(packed.shape[0], -1)


def oracle(a: np.ndarray, packed: np.ndarray, scales: np.ndarray, K: int, bits: int,
           block: int, chunk_elements: int = 1 << 22) -> np.ndarray:
    """float64 A @ dequantize(B)^T, dequantizing a few columns at a time."""
    a64 = a.astype(np.float64)
    N = packed.shape[0]
    zero_point = 1 << (bits - 1)
    out = np.empty((a.shape[0], N), dtype=np.float64)
    step = max(1, chunk_elements // max(K, 1))
    for n0 in range(0, N, step):
        codes = unpack_codes(packed[n0:n0 + step], bits).astype(np.float64) - zero_point
        s = np.repeat(scales[n0:n0 + step].astype(np.float64), block, axis=1)
        w = (codes * s)[:, :K]
        out[:, n0:n0 + step] = a64 @ w.T
    return out


# -- engines ---------------------------------------------------------------------


def ours_available() -> bool:
    return OP in olc.registered_kernel_names()


@dataclass
class Engine:
    run: object  # zero-argument callable
    result: np.ndarray
    prep_s: float
    info: dict = field(default_factory=dict)


def prepare_ours(model: onnx.ModelProto, feeds: dict, threads: int) -> Engine:
    start = time.perf_counter()
    sess = ReferenceEvaluator(model)
    olc.register_kernel_for_session(sess, MS, OP)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    result = sess.run(None, feeds)[0]
    prep = time.perf_counter() - start
    names, paths = olc.used_kernel_names(sess), olc.used_kernel_paths(sess)
    olc.set_kernel_usage_recording(sess, False)  # recording locks per call
    olc.clear_used_kernel_names(sess)
    if f"onnx_light_cpu::{OP}" not in names:
        raise RuntimeError(f"our kernel did not run: {names}")
    node = sess.rt_nodes_[0]
    info = {"path": ",".join(sorted(set(paths))),
            "scratch_bytes": getattr(node, "scratch_bytes", None),
            "prepared_bytes": getattr(node, "prepared_bytes", None)}
    return Engine(lambda: sess.run(None, feeds), result, prep, info)


def prepare_ort(model: onnx.ModelProto, feeds: dict, threads: int) -> Engine:
    import onnxruntime as ort

    dtype = feeds["A"].dtype
    if dtype == DTYPES["bfloat16"]:
        # No CPU bfloat16 kernel: its float32 operator on the same values.
        model = _as_float32(model)
        feeds = {"A": feeds["A"].astype(np.float32)}
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # A spinning pool would hold both cores while ours runs, and the reverse.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    start = time.perf_counter()
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    binding.bind_cpu_input("A", feeds["A"])
    binding.bind_output("Y", "cpu")
    sess.run_with_iobinding(binding)
    prep = time.perf_counter() - start
    result = binding.copy_outputs_to_cpu()[0].astype(dtype)
    info = {"ort_version": ort.__version__}
    if dtype == DTYPES["bfloat16"]:
        info["note"] = "ORT float32 on bfloat16 values"
    return Engine(lambda: sess.run_with_iobinding(binding), result, prep, info)


def _as_float32(model: onnx.ModelProto) -> onnx.ModelProto:
    """The bfloat16 model with float32 scales, activation and output."""
    f32 = onnx.TensorProto.FLOAT
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    for i, init in enumerate(graph.initializer):
        if init.data_type == onnx.TensorProto.BFLOAT16:
            array = numpy_helper.to_array(init).astype(np.float32)
            graph.initializer[i].CopyFrom(numpy_helper.from_array(array, init.name))
    for value in list(graph.input) + list(graph.output):
        value.type.tensor_type.elem_type = f32
    return out


def streaming_read_gbps(threads: int, mib: int = 256, repeats: int = 5) -> float:
    """Best read bandwidth of a NumPy max over ``mib`` MiB split over ``threads``
    threads (NumPy releases the GIL in reductions)."""
    data = np.ones(mib * 2**20 // 4, dtype=np.float32)  # written once: pages mapped
    parts = np.array_split(data, threads)
    best = math.inf
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            start = time.perf_counter()
            list(pool.map(np.max, parts))
            best = min(best, time.perf_counter() - start)
    return data.nbytes / best / 1e9


def alternate(runs: dict, repeat: int, warmup: int) -> dict[str, list[float]]:
    """Per-call seconds of ``repeat`` samples per engine, taken in turns."""
    calls = {}
    for name, run in runs.items():
        for _ in range(max(warmup, 1)):
            start = time.perf_counter()
            run()
            once = time.perf_counter() - start
        calls[name] = max(1, math.ceil(SAMPLE_SECONDS / max(once, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in runs}
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for name, run in runs.items():
                n = calls[name]
                start = time.perf_counter()
                for _ in range(n):
                    run()
                samples[name].append((time.perf_counter() - start) / n)
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


# -- one case ----------------------------------------------------------------------


@dataclass
class Result:
    case: Case
    ours_prep_ms: float | None = None
    ort_prep_ms: float | None = None
    ours_ms: float | None = None
    ort_ms: float | None = None
    err_vs_ort: float | None = None
    ours_err_vs_oracle: float | None = None
    ort_err_vs_oracle: float | None = None
    scratch_bytes: int | None = None
    prepared_bytes: int | None = None
    path: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.ours_ms is None or not self.ort_ms:
            return None
        return self.ours_ms / self.ort_ms

    def gbps(self, engine: str) -> float | None:
        ms = self.ours_ms if engine == "ours" else self.ort_ms
        return self.case.packed_bytes / (ms / 1e3) / 1e9 if ms else None


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]


def run_case(case: Case, repeat: int, warmup: int, weights=None) -> Result:
    packed, scales = weights or make_weights(case.K, case.N, case.bits, case.block, case.dtype)
    model = make_model(case, packed, scales)
    feeds = {"A": make_activation(case.M, case.K, case.dtype)}
    result = Result(case)
    engines: dict[str, Engine] = {}
    if ours_available():
        try:
            engines["ours"] = prepare_ours(model, feeds, case.threads)
        except Exception as exc:  # an unsupported combination: report it, go on
            result.notes.append(f"ours: {_error(exc)}")
    else:
        result.notes.append("ours: MatMulNBits not registered in onnx_light_cpu")
    try:
        engines["ort"] = prepare_ort(model, feeds, case.threads)
    except Exception as exc:
        result.notes.append(f"ORT: {_error(exc)}")
    del model  # the engines hold what they need

    expected = oracle(feeds["A"], packed, scales, case.K, case.bits, case.block)
    if "ours" in engines:
        ours = engines["ours"]
        result.ours_prep_ms = ours.prep_s * 1e3
        result.ours_err_vs_oracle = _max_abs(ours.result, expected)
        result.scratch_bytes = ours.info["scratch_bytes"]
        result.prepared_bytes = ours.info["prepared_bytes"]
        result.path = ours.info["path"]
    if "ort" in engines:
        ort = engines["ort"]
        result.ort_prep_ms = ort.prep_s * 1e3
        result.ort_err_vs_oracle = _max_abs(ort.result, expected)
        if "note" in ort.info:
            result.notes.append(ort.info["note"])
    if len(engines) == 2:
        result.err_vs_ort = _max_abs(engines["ours"].result, engines["ort"].result)
    if engines:
        samples = alternate({k: e.run for k, e in engines.items()}, repeat, warmup)
        if "ours" in samples:
            result.ours_ms = statistics.median(samples["ours"]) * 1e3
        if "ort" in samples:
            result.ort_ms = statistics.median(samples["ort"]) * 1e3
    return result


# -- selection and report ----------------------------------------------------------


def select_cases(args) -> list[Case]:
    """The cases the flags ask for, in table order."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    most = min(4, cpus or 1)
    threads = args.threads
    bits, block = args.bits, args.block_size
    if args.qwen_int8 or args.qwen_int8_decode:
        bits = 8 if args.bits is None else bits
        accuracy = 4 if args.accuracy_level is None else args.accuracy_level
        ms = (1, 2, 4) if args.qwen_int8_decode else (128,)
        threads = threads or ([1, most] if args.qwen_int8_decode else [most])
        projections = QWEN_PROJECTIONS
        dtypes = args.dtype or ["float32"]
    else:
        accuracy = args.accuracy_level or 0
        threads = threads or [most]
        ms = MUSE_M
        dtypes = args.dtype or (list(DTYPES) if args.full else ["float32"])
        if args.shape:
            projections = ()
        elif args.full:
            projections = MUSE_PROJECTIONS
        else:
            projections = MUSE_FAMILIES + ((MUSE_VOCABULARY,) if args.vocabulary else ())
    bits = 4 if bits is None else bits
    ms = args.m or ms
    specs = [(name, m, k, n) for name, k, n in projections for m in ms]
    specs += [(f"shape {m}x{k}x{n}", m, k, n) for m, k, n in args.shape or ()]
    return [Case(name, m, k, n, dtype, bits, block, accuracy, t)
            for t in threads for dtype in dtypes for name, m, k, n in specs]


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def markdown(results: list[Result], stream_gbps: dict[int, float]) -> str:
    lines = [
        "| case | M | K | N | type | bits/block | acc | thr | ours prep ms | ORT prep ms "
        "| ours ms | ORT ms | ours/ORT | max err vs ORT | ours vs f64 | ORT vs f64 "
        "| scratch B | prepared B | path |",
        "|" + "---|" * 19,
    ]
    for r in results:
        c = r.case
        lines.append(
            f"| {c.name} | {c.M} | {c.K} | {c.N} | {c.dtype} | {c.bits}/{c.block} "
            f"| {c.accuracy_level} | {c.threads} | {_fmt(r.ours_prep_ms, 3)} "
            f"| {_fmt(r.ort_prep_ms, 3)} | {_fmt(r.ours_ms)} | {_fmt(r.ort_ms)} "
            f"| {_fmt(r.ratio, 3)} | {_fmt(r.err_vs_ort, 2)} | {_fmt(r.ours_err_vs_oracle, 2)} "
            f"| {_fmt(r.ort_err_vs_oracle, 2)} | {_fmt(r.scratch_bytes)} "
            f"| {_fmt(r.prepared_bytes)} | {r.path or 'n/a'} |")
    decode = [r for r in results if r.case.M == 1]
    if decode:
        lines += [
            "",
            "M=1 bandwidth (packed B + scales bytes per second, against the measured "
            "streaming read of the same thread count):",
            "",
            "| case | K | N | type | thr | MB read | ours GB/s | ORT GB/s | stream GB/s "
            "| ours % | ORT % |",
            "|" + "---|" * 11,
        ]
        for r in decode:
            c, stream = r.case, stream_gbps.get(r.case.threads)
            ours, ort = r.gbps("ours"), r.gbps("ort")
            pct = [None if g is None or not stream else 100 * g / stream for g in (ours, ort)]
            lines.append(
                f"| {c.name} | {c.K} | {c.N} | {c.dtype} | {c.threads} "
                f"| {c.packed_bytes / 1e6:.4g} | {_fmt(ours, 3)} | {_fmt(ort, 3)} "
                f"| {_fmt(stream, 3)} | {_fmt(pct[0], 3)} | {_fmt(pct[1], 3)} |")
    notes = [(r.case, note) for r in results for note in r.notes]
    if notes:
        lines += ["", "Notes:"]
        seen = set()
        for c, note in notes:
            text = note if note.startswith("ours: MatMulNBits not") else (
                f"{c.name} M={c.M} {c.dtype} t{c.threads}: {note}")
            if text not in seen:
                seen.add(text)
                lines.append(f"- {text}")
    return "\n".join(lines)


def environment() -> str:
    import onnxruntime

    omp = ", ".join(f"{k}={os.environ.get(k)}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                                                         "OMP_NUM_THREADS"))
    return (f"onnx_light_cpu {olc.__version__} (SIMD {olc.simd_level()}), "
            f"onnxruntime {onnxruntime.__version__} (pool not spinning), {omp}, "
            f"cpus {os.cpu_count()}, loadavg {os.getloadavg()[0]:.2f}")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Without a suite flag: the Muse-Glimmer families at M=1,8,128 "
               "(float32, 4-bit, block 32).")
    suite = parser.add_mutually_exclusive_group()
    suite.add_argument("--qwen-int8", action="store_true",
                       help="the six Qwen2 projections at M=128, 8-bit, accuracy level 4")
    suite.add_argument("--qwen-int8-decode", action="store_true",
                       help="the six Qwen2 projections at M=1,2,4 with 1 and all threads")
    suite.add_argument("--full", action="store_true",
                       help="nine Muse-Glimmer projections (vocabulary included) x M=1,8,128 "
                            "x float32/float16/bfloat16")
    parser.add_argument("--vocabulary", "--vocab", action="store_true",
                        help="add the 6656 -> 202048 vocabulary projection (several GB)")
    parser.add_argument("--shape", action="append", metavar="M,K,N",
                        type=lambda s: tuple(int(v) for v in s.split(",")),
                        help="run this shape instead of the Muse-Glimmer families (repeatable)")
    parser.add_argument("--m", type=int, nargs="+", help="override the M values")
    parser.add_argument("--accuracy-level", type=int, choices=(0, 4), default=None,
                        help="0 (float path, default) or 4 (int8 activations; "
                             "default of the Qwen suites)")
    parser.add_argument("--dtype", nargs="+", choices=list(DTYPES))
    parser.add_argument("--bits", type=int, choices=(2, 4, 8), default=None,
                        help="default 4 (8 for the Qwen suites)")
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--threads", type=int, nargs="+",
                        help="thread counts (default min(4, cpus); the decode suite also 1)")
    parser.add_argument("--repeat", type=int, default=9,
                        help="alternating samples per engine (default 9)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per engine")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if any(len(s) != 3 or min(s) < 1 for s in args.shape or ()):
        parser.error("--shape takes three positive integers M,K,N")
    if args.block_size < 16 or args.block_size & (args.block_size - 1):
        parser.error("--block-size must be a power of two, at least 16")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # The float64 oracle multiplies with NumPy, whose OpenBLAS threads then
    # spin for a while and take the second core from both engines' timings
    # (measured: 2-thread decode 0.03 -> 0.55 ms).  One BLAS thread is plenty.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _run(args)


def _run(args) -> int:
    cases = select_cases(args)
    print(environment(), file=sys.stderr)
    stream = {}
    if any(c.M == 1 for c in cases):
        stream = {t: streaming_read_gbps(t) for t in sorted({c.threads for c in cases})}
    results = []
    weights_key, weights = None, None
    for case in cases:
        key = (case.K, case.N, case.bits, case.block, case.dtype)
        if key != weights_key:  # cases of one projection follow each other
            weights_key, weights = key, None  # free the old ones first
            weights = make_weights(*key)
        print(f"{case.name} M={case.M} K={case.K} N={case.N} {case.dtype} t{case.threads} ...",
              file=sys.stderr, flush=True)
        results.append(run_case(case, args.repeat, args.warmup, weights))
    # Process memory, apart from the kernel's own scratch/prepared accounting.
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"<!-- {environment()}; repeat {args.repeat}, warmup {args.warmup}; "
          f"process peak RSS {peak_rss_mb:.0f} MB -->")
    print(markdown(results, stream))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": environment(), "stream_gbps": stream,
                       "results": [dict(asdict(r), ratio=r.ratio) for r in results]}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
