"""Public registration, usage-recording and per-evaluator thread functions."""

from __future__ import annotations

from ..threads import _check_count
from . import conv_chains, fold, hook
from .inventory import registration_pass
from .records import MicrosoftKernelImplementation, RegisteredKernel, table_domain

OPTIMIZED = MicrosoftKernelImplementation.OPTIMIZED


def _register_support() -> None:
    """Schemas, memory estimates and fusion patterns of the operators
    (support.register_operator_support: once, then a no-op)."""
    from ..support import register_operator_support

    register_operator_support()


def _collect(policy, domain: str | None = None, op_type: str | None = None):
    """Entries of one registration pass, grouped by table key."""
    entries: dict[tuple[str, str], list[tuple[RegisteredKernel, type]]] = {}

    def install(record: RegisteredKernel, adapter: type) -> None:
        key = (table_domain(record.domain), record.op_type)
        if domain is None or key == (table_domain(domain), op_type):
            entries.setdefault(key, []).append((record, adapter))

    registration_pass(policy, install)
    if domain is not None and not entries:
        raise ValueError(f"onnx_light_cpu has no kernel for {domain or 'ai.onnx'}::{op_type}")
    return entries


def _install(table: hook.Table, entries, replace: bool) -> int:
    """Put entries in a table; the number of kernels installed."""
    count = 0
    for key, group in entries.items():
        if key in table and not replace:
            continue
        table[key] = tuple(group)
        count += len(group)
    return count


def register_kernels_global(
    *, microsoft_implementation: MicrosoftKernelImplementation = OPTIMIZED, replace: bool = True,
    fold_constants: bool = True, fuse_conv: bool = True,
) -> int:
    """Install every kernel for the evaluators constructed from now on.

    Evaluators that already exist keep what they resolved.  Returns the
    number of kernels installed (0 for entries kept with ``replace=False``).
    ``fold_constants=False``: evaluators constructed from now on compute
    their constant subgraphs on every run instead of once (registry/fold.py).
    ``fuse_conv=False``: their Conv chains (Conv, residual Add, Relu or
    Clip) run node by node instead of as one FusedConv, and the other plan
    fusions of registry/conv_chains.py (BatchNormalization + Relu, the
    SiLU gate) too.
    """
    _register_support()
    entries = _collect(microsoft_implementation)
    fold.GLOBAL_SETTING["fold_constants"] = bool(fold_constants)
    conv_chains.GLOBAL_SETTING["fuse_conv"] = bool(fuse_conv)
    with hook.GLOBAL_LOCK:
        return _install(hook.GLOBAL_TABLE, entries, replace)


def register_kernels(**kwargs) -> int:
    """Alias of :func:`register_kernels_global`."""
    return register_kernels_global(**kwargs)


def register_kernel_global(
    domain: str,
    op_type: str,
    *,
    microsoft_implementation: MicrosoftKernelImplementation = OPTIMIZED,
    replace: bool = True,
) -> int:
    """Install the kernel of one operator for evaluators constructed from now on."""
    _register_support()
    entries = _collect(microsoft_implementation, domain, op_type)
    with hook.GLOBAL_LOCK:
        return _install(hook.GLOBAL_TABLE, entries, replace)


def unregister_kernels_global() -> int:
    """Evaluators constructed from now on use the built-ins again.

    Returns the number of kernels removed."""
    fold.GLOBAL_SETTING["fold_constants"] = True  # back to the defaults
    conv_chains.GLOBAL_SETTING["fuse_conv"] = True
    with hook.GLOBAL_LOCK:
        count = sum(len(group) for group in hook.GLOBAL_TABLE.values())
        hook.GLOBAL_TABLE.clear()
    return count


def _register_for_session(sess, entries, replace: bool) -> int:
    context = hook.context_of(sess)
    count = _install(context.session_kernels, entries, replace)
    hook.reresolve(sess, set(entries))
    return count


def register_kernels_for_session(
    sess,
    *,
    microsoft_implementation: MicrosoftKernelImplementation = OPTIMIZED,
    replace: bool = True,
    fold_constants: bool = True,
    fuse_conv: bool = True,
) -> int:
    """Install every kernel into one evaluator, also after its construction.

    Its matching nodes (subgraphs and function bodies included) are
    re-resolved, its constant subgraphs folded unless
    ``fold_constants=False`` and its Conv chains (and the other plan
    fusions) fused in the run plan unless ``fuse_conv=False``; the
    registration lives and dies with the evaluator.  ``replace=False``
    keeps only the evaluator's own earlier entries.
    """
    _register_support()
    entries = _collect(microsoft_implementation)
    hook.context_of(sess).fold_constants = bool(fold_constants)
    hook.context_of(sess).fuse_conv = bool(fuse_conv)
    return _register_for_session(sess, entries, replace)


def register_kernel_for_session(
    sess,
    domain: str,
    op_type: str,
    *,
    microsoft_implementation: MicrosoftKernelImplementation = OPTIMIZED,
    replace: bool = True,
) -> int:
    """Install the kernel of one operator into one evaluator."""
    _register_support()
    entries = _collect(microsoft_implementation, domain, op_type)
    return _register_for_session(sess, entries, replace)


def set_kernel_usage_recording(sess, enabled: bool) -> None:
    """Start or stop recording which kernels the evaluator runs."""
    hook.context_of(sess).usage.set_enabled(enabled)


def clear_used_kernel_names(sess) -> None:
    """Forget what was recorded (recording stays on or off)."""
    hook.context_of(sess).usage.clear()


def used_kernel_names(sess) -> list[str]:
    """Names of the kernels run since the last clear (first 1024), a copy."""
    return hook.context_of(sess).usage.names()


def used_kernel_paths(sess) -> list[str]:
    """Implementation labels (``exp_float32_avx512``...) in the same order."""
    return hook.context_of(sess).usage.paths()


def set_num_threads_for_session(sess, n: int | None) -> None:
    """Thread count of one evaluator's kernels; None follows the process default."""
    hook.context_of(sess).num_threads = _check_count(n, "set_num_threads_for_session")


def get_num_threads_for_session(sess) -> int | None:
    """The evaluator's thread override, or None."""
    return hook.context_of(sess).num_threads
