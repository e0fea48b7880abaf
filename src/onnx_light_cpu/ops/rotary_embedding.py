"""RotaryEmbedding: ai.onnx (opset 23) and com.microsoft.

Both rotate the first ``rotary_embedding_dim`` channels of every head with
cos/sin rows chosen by position (the core :mod:`onnx_light_cpu._kernels.engines.rotary`
takes [B, S, N, H] views, so rank-4 (B, N, S, H) inputs go through a
transposed view, never a copy).

- ai.onnx: inputs X, cos_cache, sin_cache, position_ids (optional).  With
  position_ids the caches are [P, rot/2] tables; without, they are
  [B, S, rot/2] and used as they are.
- com.microsoft: inputs input, position_ids, cos_cache, sin_cache; the
  caches are always tables; position_ids of shape [1] (or a scalar) is an
  offset: token s of every batch takes position offset + s.  Rank-3 input
  without ``num_heads`` takes the head size from the caches.  ``scale`` and
  ``is_packed_batching`` have no effect in ONNX Runtime's CPU kernel; values
  other than their defaults are rejected rather than silently ignored.

Positions outside the caches raise ValueError naming the operator and input.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels.engines import rotary as core
from ..memory import check_buffer
from ._base import EVERY_INPUT, Attr, Input, KernelOp
from ._layout import engine_ready

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)


class Plan(NamedTuple):
    """What a run needs that the inputs' shapes decide."""

    n_heads: int
    head_size: int
    rot: int
    threads: int
    #: the [B, S] positions when the shapes decide them (direct caches), else None
    positions: np.ndarray | None


class _Rotary(KernelOp):
    """Shared checks, output planning and the call to the core."""

    strided_inputs = EVERY_INPUT  # engine_ready copies only what the core cannot read

    attributes = (Attr("interleaved", "flag", 0), Attr("rotary_embedding_dim", "int", 0),
                  Attr("num_heads", "int", 0))
    # Rotated elements one thread must have before a second one helps.
    # Measured through the evaluator on 2 cores (AVX-512, float32, 32 heads
    # of 128): 32K elements are a wash (10.6 µs both), 64K win (14.5 -> 11.5
    # µs), 128K more so (25.4 -> 14.9 µs).
    min_work_per_thread = 1 << 15
    # x input index and cache input indices: overridden per domain.
    x_index = 0
    cos_index = 1

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        if self.num_heads < 0 or self.rotary_embedding_dim < 0:
            self._reject_attribute("attributes num_heads and rotary_embedding_dim must be "
                                   f"nonnegative, got {self.num_heads} and "
                                   f"{self.rotary_embedding_dim}")
        self._arange: dict[tuple[int, int, int], np.ndarray] = {}
        self._label = "rotary_interleaved" if self.interleaved else "rotary"

    def _check_output(self, x) -> None:
        # the output has x's shape: a broadcast (stride-0) input can ask a lot
        check_buffer(self.onnx_node.op_type, f"output 0 (shaped like input {self.x_index})",
                     x.shape, x.itemsize)

    def _heads(self, x: np.ndarray, num_heads: int) -> tuple[int, int]:
        """(N, H) of x: rank 4 is (B, N, S, H), rank 3 (B, S, N*H)."""
        if x.ndim == 4:
            return x.shape[1], x.shape[3]
        if num_heads <= 0:
            raise ValueError(self._input_error(
                self.x_index, f"has rank 3 {x.shape}: the num_heads attribute must be given"))
        if x.shape[2] % num_heads:
            raise ValueError(self._input_error(
                self.x_index,
                f"hidden size {x.shape[2]} is not a multiple of num_heads {num_heads}"))
        return num_heads, x.shape[2] // num_heads

    def _rot(self, head_size: int) -> int:
        rot = self.rotary_embedding_dim or head_size
        if rot % 2 or rot > head_size or rot < 0:
            raise ValueError(f"{self.onnx_node.op_type}: rotary_embedding_dim {rot} must be even "
                             f"and at most the head size {head_size}")
        return rot

    def _check_caches(self, cos, sin, rows: tuple | None, half: int):
        """cos and sin of shape (*rows, half); rows=None: a 2-D table of any
        length."""
        for k, c in ((self.cos_index, cos), (self.cos_index + 1, sin)):
            expected = (*(rows or c.shape[:1]), half)
            if c.shape != expected:
                what = ("(P, rotary dim / 2)" if rows is None
                        else "(batch, sequence, rotary dim / 2)")
                raise ValueError(self._input_error(
                    k, f"must have shape {what} = {expected}, got {c.shape}"))
        if cos.shape != sin.shape:
            raise ValueError(self._input_error(
                self.cos_index + 1, f"shape {sin.shape} differs from cos_cache's {cos.shape}"))

    def _check_positions_shape(self, index: int, pos, shape: tuple[int, int]) -> None:
        if pos.shape != shape:
            raise ValueError(self._input_error(index, f"must have shape {shape}, got {pos.shape}"))

    def _check_positions(self, index: int, pos, cache_len: int) -> np.ndarray:
        if pos.size and (pos.min() < 0 or pos.max() >= cache_len):
            raise ValueError(self._input_error(
                index, f"has positions in [{pos.min()}, {pos.max()}], outside the cos/sin "
                       f"caches' [0, {cache_len})"))
        return np.ascontiguousarray(pos)

    def _threads(self, x, n_heads: int, head_size: int, rot: int) -> int:
        rows = x.size // head_size if head_size else 0
        return self._num_threads(rows * rot, self.min_work_per_thread)

    def _rotate(self, plan: Plan, x, cos, sin, positions):
        """The output for x (rank 3 or 4) rotated with table rows ``positions``."""
        self._check_output(x)
        level = simd.state.level
        self._record_path((self._label, x.dtype, level), lambda: (
            f"{self._label}_{x.dtype.name}_{simd.LEVEL_NAMES[core.level_used(level)]}"))
        y = self._new_output(x.shape, x.dtype)
        if y.size == 0:
            return (y,)
        # any layout: a compact copy (broadcast axes stay broadcast) when the
        # last axis is not contiguous or a stride is not whole elements
        x = engine_ready(x)
        if x.ndim == 4:
            xv, yv = x.transpose(0, 2, 1, 3), y.transpose(0, 2, 1, 3)
        else:
            b, s = x.shape[:2]
            xv = x.reshape(b, s, plan.n_heads, plan.head_size)
            yv = y.reshape(b, s, plan.n_heads, plan.head_size)
        cos = np.ascontiguousarray(cos)   # [P, rot / 2] tables (or [B * S, rot / 2])
        sin = np.ascontiguousarray(sin)
        core.rotate(xv, cos, sin, positions, yv, self.interleaved, plan.rot, level,
                    plan.threads)
        return (y,)

    def _arange_positions(self, b: int, s: int, start: int = 0) -> np.ndarray:
        """[b, s] int64 positions start + j (cached per shape)."""
        key = (b, s, start)
        pos = self._arange.get(key)
        if pos is None:
            if len(self._arange) > 16:
                self._arange.clear()
            row = np.arange(start, start + s, dtype=np.int64)
            pos = self._arange[key] = np.ascontiguousarray(np.broadcast_to(row, (b, s)))
        return pos


class RotaryEmbedding(_Rotary):
    """ai.onnx RotaryEmbedding (23): X, cos_cache, sin_cache[, position_ids]."""

    since_version = 23
    inputs = (Input("X", types=FLOATS, ranks=(3, 4)),
              Input("cos_cache", like=0),
              Input("sin_cache", like=0),
              Input("position_ids", types=(T.INT64,), optional=True))

    def _plan(self, x, cos, sin, position_ids=None):
        n_heads, head_size = self._heads(x, self.num_heads)
        rot = self._rot(head_size)
        b, s = x.shape[0], x.shape[2] if x.ndim == 4 else x.shape[1]
        half = rot // 2
        positions = None
        if position_ids is None:
            # Direct caches [B, S, rot/2]: row b*S + s belongs to token (b, s).
            self._check_caches(cos, sin, (b, s), half)
            positions = self._arange_positions(1, b * s).reshape(b, s)
        else:
            self._check_caches(cos, sin, None, half)
            self._check_positions_shape(3, position_ids, (b, s))
        return Plan(n_heads, head_size, rot, self._threads(x, n_heads, head_size, rot),
                    positions)

    def _execute(self, plan, x, cos, sin, position_ids=None):
        if position_ids is None:
            rows = (plan.positions.size, plan.rot // 2)
            cos, sin = cos.reshape(rows), sin.reshape(rows)
            positions = plan.positions
        else:
            positions = self._check_positions(3, position_ids, cos.shape[0])
        return self._rotate(plan, x, cos, sin, positions)


class _MicrosoftRotary(_Rotary):
    """com.microsoft RotaryEmbedding: input, position_ids, cos_cache, sin_cache."""

    op_domain = "com.microsoft"
    cos_index = 2
    inputs = (Input("input", types=FLOATS, ranks=(3, 4)),
              Input("position_ids", types=(T.INT64,)),
              Input("cos_cache", like=0, ranks=(2,)),
              Input("sin_cache", like=0))
    attributes = _Rotary.attributes + (Attr("scale", "float", 1.0),
                                       Attr("is_packed_batching", "int", 0))

    def _plan(self, x, position_ids, cos, sin):
        op = self.onnx_node.op_type
        if self.scale != 1.0:
            raise NotImplementedError(f"{op} (com.microsoft): scale={self.scale} is not supported "
                                      "(ONNX Runtime's CPU kernel ignores it); only 1.0")
        if self.is_packed_batching:
            raise NotImplementedError(
                f"{op} (com.microsoft): is_packed_batching=1 is not supported")
        if self.rotary_embedding_dim and self.num_heads <= 0:
            raise ValueError(
                f"{op} (com.microsoft): num_heads must be given with rotary_embedding_dim")
        num_heads = self.num_heads
        if x.ndim == 3 and num_heads <= 0:
            # The head size comes from the caches (full rotation).
            head = 2 * cos.shape[1]
            if head == 0 or x.shape[2] % head:
                raise ValueError(self._input_error(
                    0, f"hidden size {x.shape[2]} is not a multiple of the head size {head} "
                       "(2 * cos_cache.shape[1]); give num_heads"))
            num_heads = x.shape[2] // head
        n_heads, head_size = self._heads(x, num_heads)
        rot = self._rot(head_size)
        self._check_caches(cos, sin, None, rot // 2)
        b, s = x.shape[0], x.shape[2] if x.ndim == 4 else x.shape[1]
        if not (position_ids.size == 1 and position_ids.ndim <= 1):
            self._check_positions_shape(1, position_ids, (b, s))
        return Plan(n_heads, head_size, rot, self._threads(x, n_heads, head_size, rot), None)

    def _execute(self, plan, x, position_ids, cos, sin):
        pos = position_ids
        if pos.size == 1 and pos.ndim <= 1:  # an offset: token s takes offset + s
            b, s = x.shape[0], x.shape[2] if x.ndim == 4 else x.shape[1]
            offset = int(pos.reshape(()))
            if offset < 0 or offset + s > cos.shape[0]:
                raise ValueError(self._input_error(
                    1, f"offset {offset} with sequence length {s} is outside the cos/sin "
                       f"caches' [0, {cos.shape[0]})"))
            positions = self._arange_positions(b, s, offset)
        else:
            positions = self._check_positions(1, pos, cos.shape[0])
        return self._rotate(plan, x, cos, sin, positions)


class MicrosoftRotaryEmbedding(_MicrosoftRotary):
    """com.microsoft RotaryEmbedding (the ai.onnx one is RotaryEmbedding)."""

    op_type = "RotaryEmbedding"


KERNELS = {
    "RegisterRotaryEmbeddingKernels": (RotaryEmbedding, MicrosoftRotaryEmbedding),
}
