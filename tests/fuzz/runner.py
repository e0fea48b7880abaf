"""Run one fuzz case in this process and classify what happened.

Per case: our kernel (the case's policy) runs twice at one thread and once
at two; the inputs must come back byte-identical; the runs must agree bit
for bit; a successful run must have used our kernel and match the oracle
within the tolerance of its dtype; a failed run must raise a clear error:
ValueError, TypeError, NotImplementedError (MemoryError for sizes) naming
the operator.
"""

from __future__ import annotations

import copy
import traceback
import warnings
from dataclasses import dataclass

import numpy as np
from ml_dtypes import bfloat16
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from .cases import FLOATS, Case, Invalid, build_model, feeds_of

POLICIES = {"optimized": olc.MicrosoftKernelImplementation.OPTIMIZED,
            "naive": olc.MicrosoftKernelImplementation.NAIVE}
CLEAR_TYPES = (ValueError, TypeError, NotImplementedError, MemoryError)

# Statuses that are findings; the others are fine.
FINDINGS = ("crash", "hang", "unclear_error", "mismatch", "nondeterministic", "thread_mismatch",
            "modified_input", "kernel_not_used", "rejects_valid", "accepts_invalid",
            "harness_error")
FINE = ("ok", "ok_unchecked", "ok_oracle_rejects", "clear_rejection", "rejected_by_onnx",
        "rejects_oracle_accepts")

# Relative tolerance per dtype and kind of computation.  'elementwise': one
# rounding (the differential tests' bounds); 'accumulate': sums in another
# order, atol scaled by the largest expected magnitude; 'loose': several
# roundings in narrow types (attention, MoE), same scaling.
RTOL = {
    "elementwise": {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-6,
                    np.dtype(np.float16): 1e-3, np.dtype(bfloat16): 8e-3},
    "accumulate": {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 2e-5,
                   np.dtype(np.float16): 4e-3, np.dtype(bfloat16): 1.6e-2},
    "loose": {np.dtype(np.float64): 1e-8, np.dtype(np.float32): 1e-4,
              np.dtype(np.float16): 1e-2, np.dtype(bfloat16): 4e-2},
}
ATOL_FLOOR = {np.dtype(np.float64): 1e-300, np.dtype(np.float32): 1e-37,
              np.dtype(np.float16): 1e-7, np.dtype(bfloat16): 1e-37}


@dataclass
class Outcome:
    status: str
    detail: str = ""

    @property
    def finding(self) -> bool:
        return self.status in FINDINGS


class OracleUnavailable(Exception):
    """The oracle cannot run this case (not a verdict on our kernel)."""


# ------------------------------------------------------------------ helpers

def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == np.dtype(bfloat16) or dtype.name.startswith("float")


def snapshot(x):
    """What must stay the same about an input."""
    if isinstance(x, np.ndarray):
        if x.size * x.dtype.itemsize > (1 << 26):  # a huge stride-0 view
            return ("huge", x.shape, x.strides, x.reshape(-1)[:1].tobytes() if x.size else b"")
        if x.dtype.kind == "O":
            return ("object", x.shape, list(x.ravel()))
        return ("array", x.shape, x.dtype.str, x.flags.writeable, x.tobytes())
    return ("value", copy.deepcopy(x))


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "O":
        return list(a.ravel()) == list(b.ravel())
    return a.tobytes() == b.tobytes()


def root_cause(error: BaseException) -> BaseException:
    seen = set()
    while error.__cause__ is not None and id(error) not in seen:
        seen.add(id(error))
        error = error.__cause__
    return error


def raised_in_our_code(error: BaseException) -> bool:
    """Whether a frame of the kernels (adapters, naive modules, extensions)
    is on the traceback: the hook's frames alone do not count."""
    for err in (error, root_cause(error)):
        for frame in traceback.extract_tb(err.__traceback__):
            name = frame.filename.replace("\\", "/")
            if "onnx_light_cpu" in name and "/registry/" not in name:
                return True
    return False


def error_text(error: BaseException) -> str:
    root = root_cause(error)
    return f"{type(root).__name__}: {str(root)[:300]}"


def is_clear(error: BaseException, op_type: str) -> bool:
    root = root_cause(error)
    return isinstance(root, CLEAR_TYPES) and op_type in str(root)


# ------------------------------------------------------------------ runs

class OurRun:
    """One evaluator with our kernels for a case."""

    def __init__(self, case: Case, policy: str | None = None) -> None:
        policy = POLICIES[policy or case.policy]
        model = build_model(case)
        # Built while registered so that operators onnx.reference lacks
        # resolve; the per-evaluator registration is what stays.  No
        # folding: the case is the kernel, which folding would run at load.
        olc.register_kernels_global(microsoft_implementation=policy, fold_constants=False)
        try:
            self.sess = ReferenceEvaluator(model)
        finally:
            olc.unregister_kernels_global()
        olc.register_kernels_for_session(self.sess, microsoft_implementation=policy,
                                         fold_constants=False)
        olc.set_kernel_usage_recording(self.sess, True)
        self.feeds = feeds_of(case)

    def run(self, threads: int):
        olc.set_num_threads_for_session(self.sess, threads)
        olc.clear_used_kernel_names(self.sess)
        outputs = self.sess.run(None, self.feeds)
        return [None if o is None else np.array(o, copy=True) for o in outputs]

    def used(self) -> list[str]:
        return olc.used_kernel_names(self.sess)


def expected_kernel(case: Case) -> str:
    for record in olc.registered_kernels(POLICIES[case.policy]):
        if (record.op_type == case.op_type
                and (record.domain == (case.domain or "ai.onnx"))):
            return record.name
    raise KeyError(case.op_type)


WIDENED = (np.dtype(np.float16), np.dtype(bfloat16), np.dtype(np.float32))


def _oracle_inputs(case: Case, widen_to=np.float64):
    out = []
    for x in case.inputs:
        if isinstance(x, np.ndarray):
            x = np.array(x, copy=True)  # contiguous, writeable
            if case.widen and x.dtype in WIDENED:
                x = x.astype(widen_to)
        elif isinstance(x, list):
            x = np.asarray(x)
        out.append(x)
    return out


def run_oracle(case: Case):
    """The oracle's outputs, or an exception it raised."""
    if case.oracle == "none" or case.huge:
        raise OracleUnavailable(case.oracle)
    if case.oracle == "builtin":
        inputs = _oracle_inputs(case)
        widened = case.clone()
        widened.inputs = inputs
        sess = ReferenceEvaluator(build_model(widened))
        return sess.run(None, feeds_of(widened))
    if case.oracle == "twin":
        other = "naive" if case.policy == "optimized" else "optimized"
        return OurRun(case, other).run(1)
    if case.oracle == "numpy":
        inputs = _oracle_inputs(case)
        while inputs and inputs[-1] is None:  # as the node's input list
            inputs.pop()
        return list(case.numpy_oracle(*inputs, attrs=case.attrs))
    if case.oracle == "ort":
        import onnxruntime as ort

        if any(isinstance(x, np.ndarray) and 0 in x.shape for x in case.inputs):
            # ONNX Runtime 1.32 dies of SIGFPE on some zero-size inputs
            # (MultiHeadAttention, RotaryEmbedding heads of size 0), which
            # would take the in-process Hypothesis tests down with it.
            raise OracleUnavailable("ONNX Runtime is not asked about zero-size inputs")
        inputs = []
        for x in case.inputs:
            if isinstance(x, np.ndarray):
                x = np.array(x, copy=True)
                if x.dtype == np.dtype(bfloat16):
                    x = x.astype(np.float32)
            elif isinstance(x, list):
                x = np.asarray(x)
            inputs.append(x)
        if case.ort_transform is not None:
            inputs = case.ort_transform(inputs)
        converted = case.clone()
        converted.inputs = inputs
        model = build_model(converted, for_ort=True)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, feeds_of(converted))
    raise ValueError(f"unknown oracle {case.oracle}")


def _non_finite(inputs) -> tuple[bool, bool]:
    """Whether the float inputs hold (an infinity, a NaN)."""
    inf = nan = False
    for x in inputs:
        if isinstance(x, np.ndarray) and x.dtype in FLOATS and x.size and x.size < (1 << 26):
            wide = x.astype(np.float64)
            inf, nan = inf or bool(np.isinf(wide).any()), nan or bool(np.isnan(wide).any())
    return inf, nan


def compare(got, want, case: Case, non_finite: tuple[bool, bool] = (False, False)) -> str | None:
    """None when ``got`` matches ``want``, else what differs.  Where the
    inputs hold infinities, a sum of products may give NaN (inf - inf) or
    ±inf depending on its order: outside the elementwise families, NaN in
    one result against an infinity in the other is accepted."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != oracle {want.shape}"
    if got.dtype.kind in "OUS" or want.dtype.kind in "OUS":
        same = [str(v) for v in got.ravel()] == [str(v) for v in want.ravel()]
        return None if same else "string values differ"
    if got.dtype != want.dtype:
        narrow_oracle = case.oracle in ("builtin", "ort", "numpy") and _is_float(got.dtype) \
            and _is_float(want.dtype) and want.dtype.itemsize >= got.dtype.itemsize
        if not narrow_oracle:
            return f"dtype {got.dtype} != oracle {want.dtype}"
        want = want.astype(got.dtype)
    if not _is_float(got.dtype) or case.tolerance == "exact":
        if _is_float(got.dtype):
            a, e = got.astype(np.float64), want.astype(np.float64)
            if np.array_equal(a, e, equal_nan=True):
                return None
        elif got.dtype.kind in "biuc" and np.array_equal(got, want):
            return None
        elif got.dtype.kind not in "biuc" and np.array_equal(got.astype(np.int64),
                                                             want.astype(np.int64)):
            return None
        bad = np.argwhere(~((got == want) | ((got != got) & (want != want))))
        where = tuple(bad[0]) if len(bad) else ()
        return (f"exact values differ at {len(bad)} positions, first {where}: "
                f"{got[where] if where else got} != {want[where] if where else want}")
    a, e = got.astype(np.float64), want.astype(np.float64)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    inputs_inf, inputs_nan = non_finite
    if (inputs_inf or inputs_nan) and case.tolerance != "elementwise":
        either = np.zeros(a.shape, bool)
        if inputs_inf:
            either |= (nan_a & np.isinf(e)) | (nan_e & np.isinf(a))
        if case.family in ("moe", "quantized") and inputs_nan:
            # Top-k routing over NaN logits is implementation-defined, and
            # ONNX Runtime's int8 paths (MatMulNBits accuracy level 4)
            # quantize NaN to a finite code: a NaN of ours where the oracle
            # has a number is accepted (the reverse, a NaN swallowed, is not).
            either |= nan_a
        a, e = np.where(either, 0.0, a), np.where(either, 0.0, e)
        nan_a, nan_e = np.isnan(a), np.isnan(e)
    if not np.array_equal(nan_a, nan_e):
        where = tuple(np.argwhere(nan_a != nan_e)[0])
        return f"NaN positions differ, first at {where}: ours {a[where]} oracle {e[where]}"
    inf = np.isinf(e)
    if not np.array_equal(a[inf], e[inf]):
        return "infinities differ"
    finite = np.isfinite(e) & ~nan_a
    if not finite.any():
        return None
    dtype = got.dtype if got.dtype in RTOL["loose"] else np.dtype(np.float32)
    kind = case.tolerance if case.tolerance in RTOL else "elementwise"
    if case.family == "norm" and dtype == np.dtype(np.float64):
        # stash_type (default float32) makes a double normalization compute
        # in float32; the built-in computes in double
        dtype = np.dtype(np.float32)
    rtol = RTOL[kind][dtype]
    atol = ATOL_FLOOR[dtype]
    if kind != "elementwise":
        atol = max(atol, rtol * max(1.0, float(np.abs(e[finite]).max())))
    diff = np.abs(a[finite] - e[finite])
    limit = atol + rtol * np.abs(e[finite])
    if np.all(diff <= limit) and np.isfinite(a[finite]).all():
        return None
    worst = int(np.argmax(np.where(np.isfinite(diff), diff - limit, np.inf)))
    return (f"{int((~(diff <= limit)).sum())} of {diff.size} values off (rtol {rtol:g}, "
            f"atol {atol:g}); worst: ours {a[finite][worst]!r} oracle {e[finite][worst]!r}")


# ------------------------------------------------------------------ one case

def _no_phase(name: str) -> None:
    pass


def run_case(case: Case, phase=_no_phase) -> Outcome:
    """Run and classify ``case``; ``phase("ours")``/``phase("oracle")`` is
    called before each part (the sweep's worker reports it, so that a crash
    of the oracle is not taken for one of ours)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return _run_case(case, phase)
        except Exception as error:  # a bug of the harness, not of a kernel
            return Outcome("harness_error", f"{type(error).__name__}: {error}\n"
                           + "".join(traceback.format_exc(limit=-4)))


def _run_case(case: Case, phase) -> Outcome:
    op = case.op_type
    phase("ours")
    before = [snapshot(x) for x in case.inputs]

    def inputs_changed() -> str | None:
        for i, (x, s) in enumerate(zip(case.inputs, before)):
            if snapshot(x) != s:
                return f"input {i} modified"
        return None

    first = error = None
    run = None
    try:
        run = OurRun(case)
        first = run.run(1)
    except Exception as exc:  # noqa: BLE001 - classified below
        error = exc
    changed = inputs_changed()
    if changed:
        return Outcome("modified_input", changed)

    if error is not None:
        if not raised_in_our_code(error):
            return Outcome("rejected_by_onnx", error_text(error))
        if not is_clear(error, op):
            return Outcome("unclear_error", error_text(error))
        if case.huge:
            return Outcome("clear_rejection", error_text(error))
        phase("oracle")
        try:
            run_oracle(case)
        except Exception:  # noqa: BLE001 - the oracle rejects too
            return Outcome("clear_rejection", error_text(error))
        if case.expect == "valid":
            return Outcome("rejects_valid", error_text(error))
        return Outcome("rejects_oracle_accepts", error_text(error))

    wanted = expected_kernel(case)
    if wanted not in run.used():
        return Outcome("kernel_not_used", f"{run.used()} misses {wanted}")
    try:
        second = run.run(1)
        two = run.run(2)
    except Exception as exc:  # noqa: BLE001
        return Outcome("nondeterministic", f"second run raised {error_text(exc)}")
    changed = inputs_changed()
    if changed:
        return Outcome("modified_input", changed)
    for k, (a, b, c) in enumerate(zip(first, second, two)):
        if a is None:
            continue
        if not same_bits(a, b):
            return Outcome("nondeterministic", f"output {k} differs on a second run")
        if not same_bits(a, c):
            return Outcome("thread_mismatch", f"output {k} differs between 1 and 2 threads")
    if case.huge:
        return Outcome("ok_unchecked", "huge input accepted")
    if case.expect == "invalid":
        return Outcome("accepts_invalid", f"{case.mutation}: accepted, expected a clear error")
    phase("oracle")
    try:
        expected = run_oracle(case)
    except OracleUnavailable:
        return Outcome("ok_unchecked")
    except Invalid as exc:
        return Outcome("accepts_invalid", f"the specification forbids it: {exc}")
    except Exception as exc:  # noqa: BLE001
        return Outcome("ok_oracle_rejects", error_text(exc))
    indices = case.compare if case.compare is not None else range(len(first))
    for k in indices:
        if k >= len(first) or first[k] is None:
            continue
        if k >= len(expected) or expected[k] is None:
            return Outcome("ok_oracle_rejects", f"oracle gave no output {k}")
        problem = compare(first[k], expected[k], case, _non_finite(case.inputs))
        if problem:
            return Outcome("mismatch", f"output {k}: {problem}")
    return Outcome("ok")
