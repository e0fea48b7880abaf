"""com.microsoft QEmbedLayerNormalization, EmbedLayerNormalization with
quantized tables (the OPTIMIZED family; the NAIVE one is in
:mod:`onnx_light_cpu.naive.qembed_layer_norm`).

    dq(t) = float32(t - t_zero_point) * t_scale                   (float32)
    v = dq(word)[input_ids] + dq(position)[s] (+ dq(segment)[segment_ids])
    output = LayerNorm(v; dq(gamma), dq(beta), epsilon)            (B, S, H)

As ONNX Runtime 1.32's CPU kernel does (probed on single-node models; this
is the contract): tables, gamma and beta all uint8 or all int8, each with
its own float32 scale and zero point of one element (per tensor); the
position of a token is its index s (no ``position_ids`` input); the
segment inputs (segment_ids, segment_embedding, its scale and zero point)
come all together or not at all; output 1, ``mask_index_out`` (int32 (B,)),
counts the mask values equal to 1, zeros without a mask; an id, segment id
or position outside its table is an error.  FLOAT only (ORT's CPU has no
other).

Both families dequantize the word rows a run reads (gathered first: a run
of B x S tokens never converts the whole vocabulary) and the other tables
whole (once per node where they, their scales and zero points are
initializers), then run
EmbedLayerNormalization's own row code on them (the OPTIMIZED family its
SIMD row function, the NAIVE one NumPy).  The statistics are summed in
another order than ORT's sequential loop: about 1e-6 apart.  Where this
package differs: the node may leave out output 1 (ORT's schema requires
it).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ._base import Input
from .embed_layer_norm import EmbedLayerNormalization, EmbedLayerNormalizationBase

T = TensorProto
QTYPES = (T.UINT8, T.INT8)
IDS = {"types": (T.INT32,), "ranks": (2,)}
SCALE = {"types": (T.FLOAT,)}
F32 = np.dtype(np.float32)
#: (table, scale, zero point) input indices: word, position, segment, gamma, beta
QUANTIZED = ((2, 8, 13), (3, 9, 14), (4, 10, 15), (5, 11, 16), (6, 12, 17))


def _dequantized(q: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """float32(q - zero) * scale, as ONNX Runtime dequantizes."""
    v = q.astype(np.int32)
    v -= int(zero.reshape(()))
    out = v.astype(F32)
    out *= scale.reshape(())
    return out


class QEmbedLayerNormalizationBase(EmbedLayerNormalizationBase):
    """Quantization checks and the dequantized rows, shared by both
    families; the LayerNorm is EmbedLayerNormalization's ``_compute``."""

    onnx_types = QTYPES  # the inventory lists the tables' types
    inputs = (Input("input_ids", **IDS),
              Input("segment_ids", optional=True, **IDS),
              Input("word_embedding_quant", types=QTYPES, ranks=(2,)),
              Input("position_embedding_quant", like=2, ranks=(2,)),
              Input("segment_embedding", like=2, ranks=(2,), optional=True),
              Input("gamma_quant", like=2, ranks=(1,)),
              Input("beta_quant", like=2, ranks=(1,)),
              Input("mask", optional=True, **IDS),
              Input("word_embedding_scale", **SCALE),
              Input("position_embedding_scale", **SCALE),
              Input("segment_embedding_scale", optional=True, **SCALE),
              Input("gamma_scale", **SCALE),
              Input("beta_scale", **SCALE),
              Input("word_embedding_zero_point", like=2),
              Input("position_embedding_zero_point", like=2),
              Input("segment_embedding_zero_point", like=2, optional=True),
              Input("gamma_zero_point", like=2),
              Input("beta_zero_point", like=2))

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        if self.n_outputs > 2:
            self._reject_attribute(f"has at most 2 outputs (output, mask_index_out), got "
                                   f"{self.n_outputs}")

    def _plan(self, *args):
        args = args + (None,) * (18 - len(args))
        segment = [args[i] is not None for i in (1, 4, 10, 15)]
        if any(segment) and not all(segment):
            missing = [i for i, given in zip((1, 4, 10, 15), segment) if not given]
            raise ValueError(
                f"{self.onnx_node.op_type}: input {missing[0]} ({self.inputs[missing[0]].name}) "
                "is missing: segment_ids, segment_embedding and its scale and zero point "
                "(inputs 1, 4, 10, 15) come all together or not at all")
        for table, *params in QUANTIZED:
            for i in params:
                x = args[i]
                if x is not None and not (x.ndim == 0 or x.shape == (1,)):
                    raise ValueError(self._input_error(
                        i, f"has shape {x.shape}, expected a scalar or a 1-element vector (per "
                           f"tensor, for input {table})"))
        _, level, threads = EmbedLayerNormalizationBase._plan(self, *args[:8], None)
        return T.FLOAT, level, threads

    def _dequantized_table(self, which: int, args, rows: int | None = None
                           ) -> np.ndarray | None:
        """Table ``which`` of QUANTIZED dequantized (None when absent):
        whole and once when it, its scale and zero point are initializers,
        else on each run, its first ``rows`` rows (all by default)."""
        indices = QUANTIZED[which]
        table, scale, zero = (args[i] for i in indices)
        if table is None:
            return None
        if any(self._constant_input(i) is not args[i] for i in indices):
            return _dequantized(table[:rows], scale, zero)
        return self._prepared_input(("dequantized", which), indices[0], table,
                                    lambda: _dequantized(table, scale, zero))

    def _execute(self, plan, *args):
        args = args + (None,) * (18 - len(args))
        ids, sids, word, pos, seg = args[:5]
        mask = args[7]
        b, s = ids.shape
        self._check_ids(0, ids, word.shape[0])
        if sids is not None:
            self._check_ids(1, sids, seg.shape[0])
        flat = np.arange(b * s, dtype=np.int32).reshape(b, s)
        _, scale_index, zero_index = QUANTIZED[0]
        word_rows = _dequantized(word[ids].reshape(b * s, word.shape[1]), args[scale_index],
                                 args[zero_index])
        # a position table fed at run time: only the s rows the tokens read
        pos_table = self._dequantized_table(1, args, rows=s)
        seg_table, gamma_dq, beta_dq = (self._dequantized_table(i, args) for i in (2, 3, 4))
        y, _ = self._compute(plan, flat, sids, word_rows, pos_table, seg_table, gamma_dq,
                             beta_dq, None)
        if self.wants[1]:
            count = (mask == 1).sum(axis=1, dtype=np.int32) if mask is not None else \
                np.zeros(b, np.int32)
        else:
            count = None
        return (y, count)[: max(self.n_outputs, 1)]


class QEmbedLayerNormalization(QEmbedLayerNormalizationBase, EmbedLayerNormalization):
    pass


KERNELS = {
    "RegisterMicrosoftKernels": (QEmbedLayerNormalization,),
}
