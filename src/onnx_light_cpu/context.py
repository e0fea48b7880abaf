"""What one evaluator tree shares with the adapters it runs: the kernel
tables the registry resolves its nodes from, the thread count, the usage
log and whether constants are folded.  It sits below the adapters
(``ops``), which read the thread count and the usage log, and below the
registry, which fills the tables."""

from __future__ import annotations

from ._kernels._runloop import BufferPool
from .usage import UsageLog


class EvaluatorContext:
    """What one evaluator tree shares: kernels, threads, usage log, the
    pool of output buffers.

    ``global_kernels`` and ``session_kernels`` map (table domain, op_type)
    to the (record, adapter class) entries of ``registry.hook``'s tables."""

    __slots__ = ("global_kernels", "session_kernels", "num_threads", "usage", "fold_constants",
                 "fuse_conv", "buffers", "share_kv_buffers")

    def __init__(self, global_kernels: dict) -> None:
        self.global_kernels = global_kernels
        self.session_kernels: dict = {}
        self.num_threads: int | None = None
        self.usage = UsageLog()
        #: Whether constant subgraphs are folded at construction; None
        #: follows the global setting (registry/fold.py).
        self.fold_constants: bool | None = None
        #: Whether Conv chains run fused in the run plan; None follows the
        #: global setting (registry/conv_chains.py).
        self.fuse_conv: bool | None = None
        #: The output buffers its nodes share (_kernels/_runloop.pyx).
        self.buffers = BufferPool()
        #: GroupQueryAttention writes the new rows of a static cache into
        #: the past buffers themselves and returns them as the presents
        #: (ONNX Runtime's past_present_share_buffer).  It modifies those
        #: inputs, so only the generation loop, which owns them, sets it.
        self.share_kv_buffers = False
