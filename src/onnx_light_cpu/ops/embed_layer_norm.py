"""com.microsoft EmbedLayerNormalization, BERT's fused embedding layer (the
OPTIMIZED family; the NAIVE one is in
:mod:`onnx_light_cpu.naive.embed_layer_norm`).

    v = word_embedding[input_ids] + position_embedding[p] (+ segment_embedding[segment_ids])
    output = (v - mean(v)) / sqrt(var(v) + epsilon) * gamma + beta      (last axis)

p is the position s, or ``position_ids`` ((B, S) or (1, S), broadcast over
the batch).  As ONNX Runtime 1.32's CPU kernel does (probed): output 1,
``mask_index`` (int32 (B,)), counts the ones of each mask row (a mask
[1, 1, 0, 1, 0] gives 3, a value 2 is not counted), zeros without a mask;
output 2, ``embedding_sum``, is v in the input type; a segment_embedding
without segment_ids adds its row 0; an id, segment id or position (given or
implied by S) outside its table is an error.  Sums and statistics in float32,
rounded once.  FLOAT and FLOAT16 as ORT's CPU, BFLOAT16 as this package's
extension.

The OPTIMIZED family runs each row on SkipLayerNormalization's row function
(x = the word row, skip = the position row, bias = the segment row): one
pass, no gathered copy.  Where this package differs: a segment_ids without a
segment_embedding (ORT fails in shape inference) is a ValueError; a rank-1
position_ids (ORT's process aborts) is rejected; the node may leave out the
mask_index output (ORT's shape inference wants it).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import embed_layer_norm as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp
from .skip_norm import checked_epsilon

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
IDS = {"types": (T.INT32,), "ranks": (2,)}
TABLE = {"like": 2, "ranks": (2,)}
VECTOR = {"like": 2, "ranks": (1,)}


class EmbedLayerNormalizationBase(KernelOp):
    """Attributes, validation, index checks and the mask count, shared by
    both families; subclasses implement ``_compute``."""

    op_domain = "com.microsoft"
    onnx_types = FLOATS  # the inventory lists the tables' types, not the ids'
    inputs = (Input("input_ids", **IDS),
              Input("segment_ids", optional=True, **IDS),
              Input("word_embedding", types=FLOATS, ranks=(2,)),
              Input("position_embedding", **TABLE),
              Input("segment_embedding", optional=True, **TABLE),
              Input("gamma", **VECTOR),
              Input("beta", **VECTOR),
              Input("mask", optional=True, **IDS),
              Input("position_ids", optional=True, **IDS))
    attributes = (Attr("epsilon", "float", 1e-12),
                  # shape inference only (ORT's CPU computes mask_index either way)
                  Attr("mask_index_type", "int", 1))

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        self.epsilon = checked_epsilon(self)
        outputs = list(onnx_node.output)
        if len(outputs) > 3:
            self._reject_attribute(f"has at most 3 outputs, got {len(outputs)}")
        self.n_outputs = len(outputs)
        self.wants = [i < len(outputs) and bool(outputs[i]) for i in range(3)]

    def _plan(self, ids, sids, word, pos, seg, gamma, beta, mask=None, pids=None):
        b, s = ids.shape
        h = word.shape[1]
        for i, name in ((1, "segment_ids"), (7, "mask")):
            x = (sids, mask)[i == 7]
            if x is not None and x.shape != ids.shape:
                raise ValueError(self._input_error(
                    i, f"has shape {x.shape}, expected input_ids' {ids.shape} ({name})"))
        if sids is not None and seg is None:
            raise ValueError(self._input_error(
                1, "is given without input 4 (segment_embedding)"))
        for i, x in ((3, pos), (4, seg)):
            if x is not None and x.shape[1] != h:
                raise ValueError(self._input_error(
                    i, f"has shape {x.shape}, expected (rows, {h}) like word_embedding"))
        for i, x in ((5, gamma), (6, beta)):
            if x.shape != (h,):
                raise ValueError(self._input_error(
                    i, f"has shape {x.shape}, expected ({h},) (word_embedding's hidden size)"))
        if pids is not None and (pids.shape[1] != s or pids.shape[0] not in (1, b)):
            raise ValueError(self._input_error(
                8, f"has shape {pids.shape}, expected ({b}, {s}) or (1, {s})"))
        if pids is None and s > pos.shape[0]:
            raise ValueError(self._input_error(
                3, f"has {pos.shape[0]} rows, fewer than the sequence length {s} (the "
                   "positions of input_ids)"))
        return (ELEMENT_TYPES[word.dtype], simd.state.level,
                self._num_threads(b * s * h, self.min_work_per_thread))

    # Elements a thread must have before a second one helps: the row
    # function is SkipLayerNormalization's (measured there: 2^14).
    min_work_per_thread = 1 << 14

    def _check_ids(self, index: int, ids: np.ndarray, rows: int) -> None:
        if ids.size and (ids.min() < 0 or ids.max() >= rows):
            bad = ids[(ids < 0) | (ids >= rows)].flat[0]
            raise ValueError(self._input_error(
                index, f"holds {bad}, outside the table's rows [0, {rows})"))

    def _execute(self, plan, ids, sids, word, pos, seg, gamma, beta, mask=None, pids=None):
        b, s = ids.shape
        self._check_ids(0, ids, word.shape[0])
        if sids is not None:
            self._check_ids(1, sids, seg.shape[0])
        elif seg is not None and ids.size and seg.shape[0] == 0:
            raise ValueError(self._input_error(4, "has no row 0 (used without segment_ids)"))
        if pids is not None:
            self._check_ids(8, pids, pos.shape[0])
        y, total = self._compute(plan, ids, sids, word, pos, seg, gamma, beta, pids)
        if self.wants[1]:
            count = (mask == 1).sum(axis=1, dtype=np.int32) if mask is not None else \
                np.zeros(b, np.int32)
        else:
            count = None
        return (y, count, total)[: max(self.n_outputs, 1)]

    def positions(self, ids, pids) -> np.ndarray:
        """The (B, S) position of every token."""
        b, s = ids.shape
        if pids is None:
            return np.broadcast_to(np.arange(s, dtype=np.int64), (b, s))
        return np.broadcast_to(pids, (b, s))


class EmbedLayerNormalization(EmbedLayerNormalizationBase):

    def _compute(self, plan, ids, sids, word, pos, seg, gamma, beta, pids):
        element_type, level, threads = plan
        self._record_path((element_type, level), lambda: (
            f"embed_layer_norm_{word.dtype.name}_"
            f"{simd.LEVEL_NAMES[core.level_used(element_type, level)]}"))
        b, s = ids.shape
        h = word.shape[1]
        y = self._new_output((b, s, h), word.dtype, 0)
        total = self._new_output((b, s, h), word.dtype, 2) if self.wants[2] else None
        rows = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        places = np.ascontiguousarray(self.positions(ids, pids), dtype=np.int64).reshape(-1)
        segments = None
        if seg is not None:
            segments = (np.zeros(b * s, np.int64) if sids is None
                        else np.ascontiguousarray(sids, dtype=np.int64).reshape(-1))
        core.embed(rows, places, segments, np.ascontiguousarray(word), np.ascontiguousarray(pos),
                   None if seg is None else np.ascontiguousarray(seg),
                   np.ascontiguousarray(gamma), np.ascontiguousarray(beta), y, total,
                   self.epsilon, element_type, level, threads)
        return y, total


KERNELS = {
    "RegisterMicrosoftKernels": (EmbedLayerNormalization,),
}
