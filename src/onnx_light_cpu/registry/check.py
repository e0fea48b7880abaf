"""Who runs each operator of a model, without running it.

:func:`check_model` builds the evaluator tree as ``python -m onnx_light_cpu
run`` has it (every kernel of the policy registered for the evaluator, the
global table beneath), through the hook, which notes how each node resolves
(``hook.recording``) instead of raising for the nodes nobody runs.  The
resolution is the hook's own, the one behind ``MissingOperatorsError``, so
the two cannot disagree.  Building an evaluator runs no node but the
constant ones it folds (``registry/fold.py``), once: the check says how
many, the bytes they make and the time they no longer take on every run,
and how many Conv chains the run plans fuse (``registry/conv_chains.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx.reference import ReferenceEvaluator

from . import conv_chains, fold, hook
from .api import _collect
from .hook import Provider, Resolution, counted, missing_listing
from .records import DEFAULT_DOMAIN, MicrosoftKernelImplementation, RegisteredKernel

OPTIMIZED = MicrosoftKernelImplementation.OPTIMIZED
#: What leaves a node without an implementation.
NOBODY = (Provider.MISSING, Provider.UNREGISTERED)


@dataclass(frozen=True)
class OperatorCheck:
    """One operator of a model (domain, op_type, opset) and who runs its nodes."""

    domain: str  # 'ai.onnx' for the default domain
    op_type: str
    opset: int | None  # None: the model imports no opset of the domain
    nodes: int
    provider: Provider
    kernel: RegisteredKernel | None

    @property
    def runnable(self) -> bool:
        return self.provider not in NOBODY

    @property
    def runner(self) -> str:
        if self.provider is Provider.KERNEL:
            return f"{self.kernel.name} ({self.kernel.implementation})"
        if self.provider is Provider.UNREGISTERED:
            return "nothing (an onnx_light_cpu kernel outside this policy)"
        return self.provider.value


@dataclass(frozen=True)
class FoldCheck:
    """What constant folding did while the evaluator tree was built."""

    nodes: int
    operators: tuple[tuple[str, int], ...]  # (op_type, nodes folded), by count
    nbytes: int  # of the constants made
    seconds: float  # what the folded nodes took, once: saved on every run

    def line(self) -> str:
        which = ", ".join(f"{op} {n}" for op, n in self.operators)
        return (f"constant folding: {counted(self.nodes, 'node')} folded at load ({which}), "
                f"{_size(self.nbytes)} of constants made, "
                f"{self.seconds * 1e3:.3f} ms once at load instead of on every run")


def _size(nbytes: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


@dataclass(frozen=True)
class ModelCheck:
    """The operators of a model, the nodes nobody runs, and the error that
    stopped the construction for another reason ('' if none)."""

    policy: MicrosoftKernelImplementation
    operators: tuple[OperatorCheck, ...]
    missing: tuple[Resolution, ...]
    error: str = ""
    folding: FoldCheck | None = None  # None: folding was off
    conv_chains: int = 0  # Conv chains the run plans fuse (registry/conv_chains.py)

    @property
    def ok(self) -> bool:
        return not self.error and not self.missing

    def lines(self) -> list[str]:
        """The report ``python -m onnx_light_cpu check`` prints."""
        rows = [("domain", "op_type", "opset", "nodes", "runs it")]
        rows += [(o.domain, o.op_type, "-" if o.opset is None else str(o.opset), str(o.nodes),
                  o.runner) for o in self.operators]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = [f"{d:{widths[0]}}  {t:{widths[1]}}  {v:>{widths[2]}}  {n:>{widths[3]}}  {r}"
                 for d, t, v, n, r in rows]
        nodes = sum(o.nodes for o in self.operators)
        if self.error:
            lines.append(f"error: the evaluator could not be built: {self.error}")
        if self.missing:
            cannot = [o for o in self.operators if not o.runnable]
            lines.append(f"{len(cannot)} of {counted(len(self.operators), 'operator')} "
                         f"({len(self.missing)} of {counted(nodes, 'node')}) cannot run:")
            lines += missing_listing(list(self.missing))
        elif not self.error:
            lines.append(f"all {counted(len(self.operators), 'operator')} "
                         f"({counted(nodes, 'node')}) can run")
        if self.folding is not None and self.folding.nodes:
            lines.append(self.folding.line())
        if self.conv_chains:
            lines.append(f"conv chains: {counted(self.conv_chains, 'chain')} of Conv, Add "
                         "and/or Relu or Clip run as one FusedConv each")
        return lines


def check_model(model: onnx.ModelProto, policy: MicrosoftKernelImplementation = OPTIMIZED,
                fold_constants: bool = True) -> ModelCheck:
    """Resolve every node of ``model`` (subgraphs and model-local functions
    included) with every kernel of ``policy`` registered, and say who runs
    each operator, what constant folding does (unless
    ``fold_constants=False``) and how many Conv chains the plans fuse.  Nodes of the function bodies
    onnx.reference expands are not the model's: they are left out, unless
    nobody runs them."""
    context = hook._new_root_context()
    context.session_kernels.update(
        {key: tuple(group) for key, group in _collect(policy).items()})
    context.fold_constants = fold_constants
    error = ""
    folding = None
    chains = 0
    with hook.recording(context) as report:
        try:
            sess = ReferenceEvaluator(model)
        except Exception as e:  # anything but a missing operator stops the build
            error = f"{type(e).__name__}: {hook.first_line(e)}"
        else:
            if fold.enabled(context):
                folding = _fold_check(fold.folded_of(hook.iter_evaluators(sess)))
            chains = conv_chains.count(hook.iter_evaluators(sess))
    counts: dict[tuple, int] = {}
    shown = [r for r in report.resolutions if not r.internal or r.provider in NOBODY]
    for r in shown:
        key = (r.domain or DEFAULT_DOMAIN, r.op_type, r.opset, r.provider, r.kernel)
        counts[key] = counts.get(key, 0) + 1
    operators = tuple(OperatorCheck(*key[:3], count, *key[3:]) for key, count in sorted(
        counts.items(), key=lambda item: (item[0][0] != DEFAULT_DOMAIN, item[0][0],
                                          item[0][1], item[0][2] or 0)))
    missing = tuple(r for r in shown if r.provider in NOBODY)
    return ModelCheck(policy, operators, missing, error, folding, chains)


def _fold_check(done: fold.Folded) -> FoldCheck:
    counts: dict[str, int] = {}
    for node in done.nodes:
        counts[node.onnx_node.op_type] = counts.get(node.onnx_node.op_type, 0) + 1
    operators = tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return FoldCheck(len(done.nodes), operators, done.nbytes, done.seconds)
