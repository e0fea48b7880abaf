"""Property-based fuzzing of every registered kernel.

* Coverage: every (domain, op_type) of both registration policies has a
  generator, and the sweep's targets are exactly the registered kernels.
* Per kernel, Hypothesis draws valid cases (shapes with 0 and 1 and
  broadcasting, dtypes, layouts: Fortran, strided, negative strides,
  stride 0, read-only, unaligned; attributes) and invalid ones (generic
  mutations); each must either match its oracle within its dtype's
  tolerance — same bits on a second run and at 1 and 2 threads, inputs
  unchanged, our kernel used — or raise a clear error naming the operator.
* A short sweep through the subprocess driver (crashes, hangs, huge
  stride-0 inputs under an address-space limit).
* ``--fuzz``: the long sweep (``FUZZ_CASES``, default 50,000 cases).

Findings are named in ``tests/fuzz/FINDINGS.md`` (ids F1...): what the
first sweeps found, how each was fixed, and the harness's decisions where
an oracle is wrong.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import onnx_light_cpu as olc

from . import budget
from .cases import HypothesisDraw
from .generators import GENERATORS
from .mutations import IN_PROCESS_MUTATIONS
from .runner import run_case
from .sweep import (
    known_finding,
    make_case,
    print_summary,
    sweep,
    target_label,
    targets,
)

TARGETS = targets()

def _params():
    return [pytest.param((record, policy), id=target_label(record, policy))
            for record, policy in TARGETS]


def _settings():
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if budget.SHRINK else [])
    return settings(max_examples=budget.EXAMPLES, deadline=None, derandomize=True,
                    database=None, phases=phases, print_blob=False,
                    suppress_health_check=list(HealthCheck))


@contextlib.contextmanager
def address_space_cap(extra_bytes: int = 4 << 30):
    """Limit this process's address space to what it uses plus
    ``extra_bytes`` while a case runs: a kernel that tries to allocate what
    a bad size asks for fails with MemoryError instead of paging."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        yield
        return
    cap = used + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# Findings FINDINGS.md explains (the kernel knowingly differs from the oracle):
# NaN/inf meeting masking, output shapes the built-in broadcasts, ...
EXPLAINED = ("F1", "F2", "F16", "F17", "F22", "F25", "F30", "F33")


def _check(case, target):
    if case.oracle == "ort":
        # ONNX Runtime dies of SIGFPE on some inputs (zero-size heads, and
        # more), which would take this process down: it is asked only in the
        # subprocess sweeps (test_short_sweep_in_subprocesses, --fuzz).
        case.oracle = "none"
    with address_space_cap():
        outcome = run_case(case)
    if outcome.finding:
        entry = {"target": target_label(*target), "status": outcome.status,
                 "mutation": case.mutation, "detail": outcome.detail}
        if known_finding(entry) in EXPLAINED:
            return
    assert not outcome.finding, (f"{outcome.status}: {outcome.detail}\n"
                                 f"case: {case.describe()}")


# ------------------------------------------------------------------ coverage

def test_every_registered_operator_has_a_generator():
    for policy in olc.MicrosoftKernelImplementation:
        for record in olc.registered_kernels(policy):
            assert (record.domain, record.op_type) in GENERATORS, record


def test_sweep_targets_are_the_registered_kernels():
    names = {record.name for record, _ in TARGETS}
    for policy in olc.MicrosoftKernelImplementation:
        assert {r.name for r in olc.registered_kernels(policy)} <= names
    assert len(names) == len(TARGETS)


# ------------------------------------------------------------------ properties

@pytest.mark.parametrize("target", _params())
@_settings()
@given(data=st.data())
def test_valid_inputs(target, data):
    """Valid inputs, any layout: the oracle's result, deterministic, the
    same at 1 and 2 threads, inputs untouched (or a clear error where the
    oracle fails too)."""
    record, policy = target
    _check(make_case(HypothesisDraw(data), record, policy, mutation_rate=0.0), target)


@pytest.mark.parametrize("target", _params())
@_settings()
@given(data=st.data())
def test_invalid_inputs(target, data):
    """Mutated inputs (wrong dtype, rank, shape, zero sizes, NaN/Inf,
    missing inputs, Python values, bad attributes and indices): a clear
    error naming the operator, or a result the oracle agrees with."""
    record, policy = target
    _check(make_case(HypothesisDraw(data), record, policy, mutation_rate=1.0,
                     allowed=IN_PROCESS_MUTATIONS), target)


# ------------------------------------------------------------------ sweeps

def _report(summary: dict, path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(summary, indent=1))
    print_summary(summary, file=sys.stderr)


def _unexplained(summary: dict) -> list[str]:
    """The findings of a sweep that FINDINGS.md does not explain (crashes,
    hangs and unclear errors never are)."""
    return [f"{f['known']} [{f['status']}] {f['target']} x{f['count']}: {f['detail'][:100]}"
            for f in summary["findings"]
            if f["known"] not in EXPLAINED or f["status"] not in ("mismatch", "rejects_valid")]


def test_short_sweep_in_subprocesses():
    """Two cases a kernel through the worker subprocess, huge stride-0
    inputs included: no crash, hang, mismatch, modified input or unclear
    error."""
    summary = sweep(2 * len(TARGETS), seed=12, timeout=10.0, mutation_rate=0.5,
                    progress=False)
    assert summary["cases"] == 2 * len(TARGETS)
    assert all(sum(counts.values()) == 2 for counts in summary["per_target"].values())
    bad = _unexplained(summary)
    if bad:
        _report(summary, None)
    assert not bad, bad


@pytest.mark.fuzz
def test_long_sweep():
    """The long sweep: FUZZ_CASES cases (default 50,000) over every kernel
    in worker subprocesses; summary JSON in FUZZ_JSON."""
    summary = sweep(budget.SWEEP_CASES, seed=budget.SWEEP_SEED, timeout=20.0)
    _report(summary, budget.SWEEP_JSON)
    assert summary["cases"] == budget.SWEEP_CASES
    assert all(sum(counts.values()) > 0 for counts in summary["per_target"].values())
    bad = _unexplained(summary)
    assert not bad, bad
