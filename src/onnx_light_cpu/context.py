"""What one evaluator tree shares with the adapters it runs: the kernel
tables the registry resolves its nodes from, the thread count, the usage
log and whether constants are folded.  It sits below the adapters
(``ops``), which read the thread count and the usage log, and below the
registry, which fills the tables."""

from __future__ import annotations

from ._kernels._cpu import read_ahead
from ._kernels._runloop import BufferPool
from .usage import UsageLog

# Bytes of the next product's weights read ahead: what the caches keep of
# them (L2 of 1 MB a core and a share of L3 on the machine measured,
# docs/ARCHITECTURE.md, "Threads").
READ_AHEAD_BYTES = 4 << 20


class EvaluatorContext:
    """What one evaluator tree shares: kernels, threads, usage log, the
    pool of output buffers.

    ``global_kernels`` and ``session_kernels`` map (table domain, op_type)
    to the (record, adapter class) entries of ``registry.hook``'s tables."""

    __slots__ = ("global_kernels", "session_kernels", "num_threads", "usage", "fold_constants",
                 "fuse_conv", "buffers", "share_kv_buffers", "last_product")

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
        #: The adapter whose product with constant weights ran last
        #: (``streamed``).
        self.last_product = None

    def streamed(self, op, weights, threads: int) -> None:
        """Adapter ``op`` has just multiplied by its constant ``weights``
        (a C-contiguous array) on ``threads`` threads.  In a decode step
        each product streams its weights from memory while the serial
        kernels between products leave the memory idle: ``op`` learns
        which weights follow its own (those of the product that ran after
        it the last time), and the pool's idle worker reads their first
        ``READ_AHEAD_BYTES`` into the caches meanwhile
        (``olc_pool_read_ahead``).  A guess, never a result: another
        order of products only costs the bandwidth read."""
        last = self.last_product
        if last is not op:
            if last is not None:
                last.weights_after = weights
            self.last_product = op
        if threads > 1 and op.weights_after is not None:
            read_ahead(op.weights_after, READ_AHEAD_BYTES)
