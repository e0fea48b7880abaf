"""The fuzz sweep: every registered kernel (both com.microsoft policies),
cases run in a worker subprocess so that a crash or a hang is recorded
against the case that caused it and the sweep goes on.

    python -m tools.fuzz_sweep --cases 50000 --json fuzz.json
    python -m tools.fuzz_sweep --replay 1234 --seed 0     # one case, in-process
    python -m tools.fuzz_sweep --cases 600 --only LSTM,Dropout   # those operators' cases

Case ``i`` of seed ``s`` is drawn from ``numpy.random.default_rng((s, i))``
for the operator ``targets()[i % len(targets())]``, so the list of cases is
the same on every run and any case is replayed from its index; ``only``
(``--only``) runs just the indices of some operators, the same cases a full
sweep gives them.  The worker
runs under an address-space limit (``--memory-gib``, 8 by default) so that
a kernel that allocates what a huge stride-0 input asks for fails instead
of taking the machine down.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent


def targets():
    """(record, policy) for every kernel a registration installs: every
    operator with the OPTIMIZED policy, and the NAIVE twins."""
    import onnx_light_cpu as olc

    optimized = olc.registered_kernels(olc.MicrosoftKernelImplementation.OPTIMIZED)
    naive = olc.registered_kernels(olc.MicrosoftKernelImplementation.NAIVE)
    names = {r.name for r in optimized}
    out = [(r, "optimized") for r in optimized]
    out += [(r, "naive") for r in naive if r.name not in names]
    return out


def target_label(record, policy) -> str:
    return f"{record.domain}::{record.op_type}" + ("[naive]" if policy == "naive" else "")


def make_case(draw, record, policy, mutation_rate=0.4, allowed=None):
    """A case for one target: a valid one, laid out, maybe mutated."""
    from .cases import apply_layouts
    from .generators import GENERATORS
    from .mutations import MUTATIONS, mutate

    case = GENERATORS[(record.domain, record.op_type)](draw, record)
    case.policy = policy
    if case.oracle == "twin" and policy == "naive" and case.ort_ok:
        case.oracle = "ort"
    apply_layouts(draw, case)
    if draw.chance(mutation_rate):
        case = mutate(draw, case, tuple(allowed or MUTATIONS))
    return case


def case_of(seed: int, index: int, mutation_rate: float = 0.4):
    from .cases import RngDraw

    all_targets = targets()
    record, policy = all_targets[index % len(all_targets)]
    return make_case(RngDraw((seed, index)), record, policy, mutation_rate)


# ------------------------------------------------------------------ worker

def limit_memory(gib: float) -> None:
    import resource

    limit = int(gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def worker(seed: int, mutation_rate: float, memory_gib: float) -> None:
    """Read case indices from stdin, write one JSON outcome a line."""
    limit_memory(memory_gib)
    from .runner import run_case

    for line in sys.stdin:
        index = int(line)
        try:
            case = case_of(seed, index, mutation_rate)
            description = case.describe()

            def phase(name: str) -> None:
                sys.stdout.write(json.dumps({"phase": name}) + "\n")
                sys.stdout.flush()

            outcome = run_case(case, phase)
            status, detail = outcome.status, outcome.detail
            label = target_label(*targets()[index % len(targets())])
            mutation = case.mutation
        except Exception as error:  # noqa: BLE001 - a harness bug, reported
            status, detail, description, label, mutation = (
                "harness_error", f"{type(error).__name__}: {error}", "", "?", "")
        sys.stdout.write(json.dumps({"index": index, "target": label, "status": status,
                                     "mutation": mutation, "detail": detail[:600],
                                     "case": description[:600]}) + "\n")
        sys.stdout.flush()


# ------------------------------------------------------------------ driver

class Worker:
    def __init__(self, seed, mutation_rate, memory_gib):
        import onnx_light_cpu

        env = dict(os.environ)
        # the package this process imported (a checkout's src/ or an
        # installed one), and the tests' helpers
        package_root = Path(onnx_light_cpu.__file__).resolve().parents[1]
        env["PYTHONPATH"] = os.pathsep.join(
            [str(package_root), str(TESTS)] + env.get("PYTHONPATH", "").split(os.pathsep))
        env.setdefault("OMP_NUM_THREADS", "2")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fuzz.sweep", "--worker", "--seed", str(seed),
             "--mutation-rate", str(mutation_rate), "--memory-gib", str(memory_gib)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            cwd=str(REPO), text=True, bufsize=1, start_new_session=True)
        self.buffer = ""
        self.phase = ""

    def ask(self, index: int, timeout: float):
        """The worker's JSON answer, or 'crash' or 'hang' (``self.phase``
        then says whether our kernel or the oracle was running)."""
        self.phase = ""
        try:
            self.proc.stdin.write(f"{index}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return "crash"
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while "\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "hang"
                ready, _, _ = select.select([fd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(fd, 1 << 16).decode()
                if not chunk:
                    return "crash"
                self.buffer += chunk
            line, self.buffer = self.buffer.split("\n", 1)
            answer = json.loads(line)
            if "phase" in answer:
                self.phase = answer["phase"]
                continue
            return answer

    def stop(self) -> str:
        """Kill the worker's process group; its stderr tail."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        try:
            return self.proc.stderr.read()[-800:]
        except Exception:  # noqa: BLE001
            return ""

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.stop()


FINDING_STATUSES = ("crash", "hang", "unclear_error", "mismatch", "nondeterministic",
                    "thread_mismatch", "modified_input", "kernel_not_used", "rejects_valid",
                    "accepts_invalid", "harness_error")


# Outcomes that are not findings but worth a look: the oracle disagrees
# with a clear rejection of ours, or fails where we succeed, or crashed.
REVIEW_STATUSES = ("rejects_oracle_accepts", "ok_oracle_rejects", "oracle_crash", "oracle_hang")

# The findings of tests/fuzz/FINDINGS.md: (id, target pattern, status
# pattern, mutation pattern, detail pattern).  A finding of a sweep that
# matches none is reported as NEW.
KNOWN_FINDINGS = (
    ("F1", r"::(Sum|Mean|Min|Max)$", r"mismatch|nondeterministic", r".*", r""),
    ("F2", r"Attention|MultiHeadAttention|GroupQueryAttention", r"mismatch",
     r"nan_inf|nan_row|bad_attribute", r"NaN positions"),
    ("F3", r".*", r"unclear_error", r"missing_input|too_few_inputs",
     r"_run\(\) missing|has no attribute"),
    ("F4", r".*", r"unclear_error", r"huge", r"MemoryError: Unable to allocate"),
    ("F5", r"::(Attention|LayerNormalization|SimplifiedLayerNormalization|GroupNormalization"
           r"|MatMul|CDist)(\[naive\])?$",
     r"hang", r"huge", r""),
    ("F6", r"::Split$", r"hang", r"huge", r""),
    ("F7", r".*", r"unclear_error", r".*", r"^IndexError: "),
    ("F8", r"GroupQueryAttention", r"unclear_error|ok_oracle_rejects", r".*",
     r"contiguous last axis"),
    ("F10", r"::Softmax$", r"mismatch", r".*", r"values off"),
    ("F11", r".*", r"accepts_invalid", r"bad_attribute", r""),
    ("F12", r"::Q?MoE$", r"mismatch", r"nan_inf|nan_row", r"NaN positions"),
    ("F9", r"::QLinearMatMul$", r"mismatch", r"wrong_rank|mismatched_shape", r"shape"),
    ("F14", r"::(Slice|ReduceSum)$", r"unclear_error", r"huge", r"^MemoryError: $"),
    ("F15", r".*", r"unclear_error", r"python_value", r"has no attribute"),
    ("F16", r"::(LayerNormalization|RMSNormalization)$", r"mismatch",
     r"wrong_rank|mismatched_shape", r"shape"),
    ("F17", r"::Split$", r"rejects_valid", r".*", r"do not cut"),
    ("F18", r"::MatMulNBits$", r"mismatch", r"nan_row|nan_inf", r""),
    ("F19", r"::BiasGelu", r"mismatch", r"nan_inf|nan_row", r"NaN positions"),
    ("F20", r"GroupQueryAttention", r"unclear_error", r"bad_index", r"Unable to allocate"),
    ("F21", r"::Q?MoE$", r"unclear_error", r"bad_attribute", r"Unable to allocate"),
    ("F22", r"MultiHeadAttention", r"mismatch", r"bad_attribute", r"values off"),
    ("F24", r"::Softmax$", r"accepts_invalid", r"wrong_rank", r"0-d"),
    ("F25", r"::PRelu$", r"mismatch", r"wrong_rank|mismatched_shape", r"shape"),
    ("F26", r"::Clip$", r"mismatch", r".*", r"shape \(\) != oracle \(1,\)"),
    ("F27", r"::Conv$", r"mismatch", r".*", r"NaN positions"),
    ("F30", r"::(ConvInteger|QLinearConv)$", r"mismatch", r"zero_size", r"^output 0: shape"),
    ("F33", r"::FusedMatMul$", r"mismatch", r"bad_attribute", r"NaN positions"),
)


def known_finding(entry: dict) -> str:
    for fid, target, status, mutation, detail in KNOWN_FINDINGS:
        if (re.search(target, entry["target"]) and re.fullmatch(status, entry["status"])
                and re.fullmatch(mutation, entry.get("mutation") or "valid")
                and re.search(detail, entry.get("detail", ""))):
            return fid
    return "NEW"


def normalized_detail(detail: str) -> str:
    """A finding's message with the case-specific parts (numbers, names,
    shapes) taken out."""
    detail = re.sub(r"Unable to allocate.*", "Unable to allocate ...", detail)
    detail = re.sub(r"'[^']*'", "'_'", detail)
    detail = re.sub(r"\([^()]*\)", "()", detail)
    detail = re.sub(r"\[[^\[\]]*\]", "[]", detail)
    detail = re.sub(r"[-+]?\d[\d.e+-]*", "#", detail)
    return detail[:100]


def _signature(record: dict) -> tuple:
    """Outcomes that are the same finding: target, status, mutation kind,
    normalized message."""
    return (record["target"], record["status"], record.get("mutation", ""),
            normalized_detail(record.get("detail", "")))


def case_indices(start: int, cases: int, only=None):
    """The indices of a sweep: ``cases`` of them from ``start``; with
    ``only`` (operator names), the first ``cases`` from ``start`` whose
    target is one of those operators (both policies)."""
    if not only:
        return range(start, start + cases)
    all_targets = targets()
    chosen = [k for k, (record, _) in enumerate(all_targets) if record.op_type in set(only)]
    if not chosen:
        raise ValueError(f"no registered kernel for {sorted(only)}")
    n = len(all_targets)
    first = start - start % n
    out = []
    while len(out) < cases:
        out += [first + k for k in chosen if first + k >= start][:cases - len(out)]
        first += n
    return out


def sweep(cases: int, seed: int = 0, timeout: float = 20.0, mutation_rate: float = 0.4,
          memory_gib: float = 8.0, start: int = 0, progress: bool = True,
          max_seconds: float | None = None, only=None) -> dict:
    all_targets = targets()
    labels = [target_label(*t) for t in all_targets]
    indices = case_indices(start, cases, only)
    per_target = {label: collections.Counter() for label, (record, _) in zip(labels, all_targets)
                  if not only or record.op_type in only}
    totals = collections.Counter()
    findings: dict[tuple, dict] = {}
    notes: dict[tuple, dict] = {}  # disagreements with the oracles that are not findings
    began = time.monotonic()
    worker_ = Worker(seed, mutation_rate, memory_gib)
    done = 0
    try:
        for index in indices:
            if max_seconds is not None and time.monotonic() - began > max_seconds:
                break
            answer = worker_.ask(index, timeout)
            if isinstance(answer, str):  # crash or hang: the worker is gone
                if worker_.phase == "oracle":  # not ours: the oracle crashed or hung
                    answer = f"oracle_{answer}"
                stderr = worker_.stop()
                label = labels[index % len(labels)]
                description, mutation = _describe_quietly(seed, index, mutation_rate)
                if answer.endswith("hang"):
                    detail = f"no answer within {timeout:g} s"
                else:
                    code = worker_.proc.returncode
                    fatal = [line for line in stderr.splitlines() if "Fatal" in line]
                    detail = (f"worker died ({_signal_name(code)})"
                              + (f": {fatal[-1]}" if fatal else ""))
                record = {"index": index, "target": label, "status": answer,
                          "mutation": mutation, "detail": detail, "case": description}
                worker_ = Worker(seed, mutation_rate, memory_gib)
            else:
                record = answer
            done += 1
            totals[record["status"]] += 1
            per_target.setdefault(record["target"], collections.Counter())[record["status"]] += 1
            table = (findings if record["status"] in FINDING_STATUSES
                     else notes if record["status"] in REVIEW_STATUSES else None)
            if table is not None:
                key = _signature(record)
                entry = table.setdefault(key, {**record, "count": 0, "indices": []})
                entry["count"] += 1
                if len(entry["indices"]) < 5:
                    entry["indices"].append(record["index"])
            if progress and done % 1000 == 0:
                bad = sum(totals[s] for s in FINDING_STATUSES)
                print(f"[fuzz] {done}/{cases} cases, {bad} findings, "
                      f"{time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    finally:
        worker_.close()
    summary = {
        "seed": seed, "cases": done, "first_index": start,
        "seconds": round(time.monotonic() - began, 1),
        "targets": len(per_target),
        "counts": {
            "crashes": totals["crash"], "hangs": totals["hang"],
            "mismatches": totals["mismatch"] + totals["nondeterministic"]
            + totals["thread_mismatch"],
            "modified_inputs": totals["modified_input"],
            "unclear_errors": totals["unclear_error"],
            "clear_rejections": totals["clear_rejection"],
            "kernel_not_used": totals["kernel_not_used"],
            "rejects_valid": totals["rejects_valid"],
            "accepts_invalid": totals["accepts_invalid"],
            "harness_errors": totals["harness_error"],
            "oracle_crashes": totals["oracle_crash"] + totals["oracle_hang"],
        },
        "statuses": dict(totals),
        "per_target": {k: dict(v) for k, v in per_target.items()},
        "findings": sorted(findings.values(), key=lambda f: (f["target"], f["status"])),
        "oracle_disagreements": sorted(notes.values(),
                                       key=lambda f: (f["status"], f["target"]))[:400],
    }
    for entry in summary["findings"]:
        entry["known"] = known_finding(entry)
    return summary


def _signal_name(code) -> str:
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            pass
    return f"exit status {code}"


def _describe_quietly(seed, index, mutation_rate):
    try:
        case = case_of(seed, index, mutation_rate)
        return case.describe()[:600], case.mutation
    except Exception as error:  # noqa: BLE001
        return f"(cannot describe: {error})", ""


def print_summary(summary: dict, file=sys.stdout) -> None:
    c = summary["counts"]
    print(f"fuzz sweep: {summary['cases']} cases over {summary['targets']} kernels in "
          f"{summary['seconds']} s (seed {summary['seed']})", file=file)
    print("  " + ", ".join(f"{k}={v}" for k, v in c.items()), file=file)
    print("  statuses: " + ", ".join(f"{k}={v}" for k, v in sorted(summary["statuses"].items())),
          file=file)
    bad_targets = {t: v for t, v in summary["per_target"].items()
                   if any(s in FINDING_STATUSES for s in v)}
    for target, counts in sorted(bad_targets.items()):
        print(f"  {target}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())),
              file=file)
    print(f"  {len(summary['findings'])} distinct findings "
          f"({sum(f['known'] == 'NEW' for f in summary['findings'])} not in the known list):",
          file=file)
    for f in sorted(summary["findings"], key=lambda f: (f["known"] != "NEW", f["known"],
                                                        f["target"])):
        print(f"   - {f['known']} [{f['status']}] {f['target']} x{f['count']} (e.g. case "
              f"{f['indices'][0]}, {f['mutation'] or 'valid'}): {f['detail'][:160]}", file=file)


def replay(seed: int, index: int, mutation_rate: float) -> None:
    from .runner import run_case

    case = case_of(seed, index, mutation_rate)
    print(case.describe())
    outcome = run_case(case)
    print(outcome.status, outcome.detail)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=int(os.environ.get("FUZZ_CASES", 50000)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first case index")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a case (a hang)")
    parser.add_argument("--mutation-rate", type=float, default=0.4)
    parser.add_argument("--memory-gib", type=float, default=8.0)
    parser.add_argument("--max-seconds", type=float, default=None)
    parser.add_argument("--json", default=os.environ.get("FUZZ_JSON"),
                        help="write the summary here (also $FUZZ_JSON)")
    parser.add_argument("--only", default=None,
                        help="comma-separated operator names: only their cases")
    parser.add_argument("--replay", type=int, default=None, help="run one case in-process")
    parser.add_argument("--summarize", default=None,
                        help="print the summary of a JSON an earlier sweep wrote")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.summarize:
        summary = json.loads(Path(args.summarize).read_text())
        for entry in summary["findings"]:
            entry["known"] = known_finding(entry)
        print_summary(summary)
        return 0
    if args.worker:
        worker(args.seed, args.mutation_rate, args.memory_gib)
        return 0
    if args.replay is not None:
        replay(args.seed, args.replay, args.mutation_rate)
        return 0
    summary = sweep(args.cases, args.seed, args.timeout, args.mutation_rate, args.memory_gib,
                    args.start, max_seconds=args.max_seconds,
                    only=args.only.split(",") if args.only else None)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    print_summary(summary)
    bad = sum(summary["statuses"].get(s, 0) for s in FINDING_STATUSES)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
