"""Schemas of the com.microsoft attention family (issue 18): Attention,
MultiHeadAttention, GroupQueryAttention, QAttention, RotaryEmbedding,
LinearAttention and CausalConvWithState.

Each case is one single-node model with symbolic input dims and the same
model with those dims bound.  Both pass the checker and strict shape
inference with every output's type and shape inferred; the symbolic model's
shapes are the expected ones (sums "P+S", products "2*Hv" included); the
bound model's equal what the kernel really returns.  The records agree with
ONNX Runtime's own schemas, ORT's symbolic shape inference agrees where it
handles the operator, and inconsistent static shapes raise naming the
operator and the input.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import onnx
import onnx.defs
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto as T
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

MS = "com.microsoft"
OPS = ("Attention", "MultiHeadAttention", "GroupQueryAttention", "QAttention",
       "RotaryEmbedding", "LinearAttention", "CausalConvWithState")
F, F16, BF16, I32, I64, U8, I8 = T.FLOAT, T.FLOAT16, T.BFLOAT16, T.INT32, T.INT64, T.UINT8, T.INT8

INPUTS = {
    "Attention": ("input", "weights", "bias", "mask_index", "past", "attention_bias",
                  "past_sequence_length"),
    "MultiHeadAttention": ("query", "key", "value", "bias", "key_padding_mask",
                           "attention_bias", "past_key", "past_value", "past_sequence_length",
                           "cache_indirection"),
    "GroupQueryAttention": ("query", "key", "value", "past_key", "past_value", "seqlens_k",
                            "total_sequence_length", "cos_cache", "sin_cache", "position_ids",
                            "attention_bias", "head_sink", "k_scale", "v_scale",
                            "q_norm_weight", "k_norm_weight", "query_seqlens"),
    "QAttention": ("input", "weight", "bias", "input_scale", "weight_scale", "mask_index",
                   "input_zero_point", "weight_zero_point", "past"),
    "RotaryEmbedding": ("input", "position_ids", "cos_cache", "sin_cache"),
    "LinearAttention": ("query", "key", "value", "past_state", "decay", "beta"),
    "CausalConvWithState": ("input", "weight", "bias", "past_state"),
}
OUTPUTS = {
    "Attention": ("output", "present"),
    "MultiHeadAttention": ("output", "present_key", "present_value", "qk"),
    "GroupQueryAttention": ("output", "present_key", "present_value", "output_qk"),
    "QAttention": ("output", "present"),
    "RotaryEmbedding": ("output",),
    "LinearAttention": ("output", "present_state"),
    "CausalConvWithState": ("output", "present_state", "state_update"),
}


class Case(NamedTuple):
    id: str
    op: str
    attrs: dict
    inputs: dict     # name -> (element type, shape with symbolic dims)
    expected: dict   # output name -> (element type, shape; "P+S" etc. evaluated on bind)
    bind: dict       # symbolic dim -> value for the bound model and the run
    values: dict = {}    # name -> array (or callable(bind) -> array) fed instead of random
    constants: tuple = ()  # inputs given as initializers (their value from ``values``)


def _gqa_lens(lens, total):
    return {"seqlens_k": np.array(lens, np.int32) - 1,
            "total_sequence_length": np.array(total, np.int32)}


CASES = [
    # -- Attention -------------------------------------------------------------
    Case("attention-static", "Attention", {"num_heads": 2},
         {"input": (F, [2, 3, 8]), "weights": (F, [8, 24]), "bias": (F, [24])},
         {"output": (F, [2, 3, 8])}, {}),
    Case("attention-past-present", "Attention", {"num_heads": 2},
         {"input": (F, ["B", "S", 8]), "weights": (F, [8, 24]), "bias": (F, [24]),
          "past": (F, [2, "B", 2, "P", 4])},
         {"output": (F, ["B", "S", 8]), "present": (F, [2, "B", 2, "P+S", 4])},
         {"B": 2, "S": 3, "P": 4}),
    Case("attention-present-without-past-causal", "Attention",
         {"num_heads": 2, "unidirectional": 1},
         {"input": (F16, ["B", "S", 8]), "weights": (F16, [8, 24]),
          "mask_index": (I32, ["B", "S"])},
         {"output": (F16, ["B", "S", 8]), "present": (F16, [2, "B", 2, "S", 4])},
         {"B": 2, "S": 5}),
    Case("attention-mask-names-total", "Attention", {"num_heads": 2},
         {"input": (F, ["B", "S", 8]), "weights": (F, [8, 24]), "bias": (F, [24]),
          "mask_index": (I32, ["B", "T"]), "past": (F, [2, "B", 2, "P", 4])},
         {"output": (F, ["B", "S", 8]), "present": (F, [2, "B", 2, "T", 4])},
         {"B": 2, "S": 3, "P": 4, "T": 7}),
    Case("attention-qkv-hidden-sizes-lengths-bias", "Attention",
         {"num_heads": 2, "qkv_hidden_sizes": [8, 8, 12]},
         {"input": (BF16, ["B", "S", 8]), "weights": (BF16, [8, 28]),
          "mask_index": (I32, ["B"]), "attention_bias": (BF16, [1, 2, "S", "S"])},
         {"output": (BF16, ["B", "S", 12])}, {"B": 2, "S": 3},
         {"mask_index": np.array([3, 2], np.int32)}),
    # -- MultiHeadAttention ----------------------------------------------------
    Case("mha-static-all-outputs", "MultiHeadAttention", {"num_heads": 2},
         {"query": (F, [2, 3, 8]), "key": (F, [2, 5, 8]), "value": (F, [2, 5, 12])},
         {"output": (F, [2, 3, 12]), "present_key": (F, [2, 2, 5, 4]),
          "present_value": (F, [2, 2, 5, 6]), "qk": (F, [2, 2, 3, 5])}, {}),
    Case("mha-past-present-symbolic", "MultiHeadAttention", {"num_heads": 2},
         {"query": (F, ["B", "S", 8]), "key": (F, ["B", "L", 8]), "value": (F, ["B", "L", 8]),
          "past_key": (F, ["B", 2, "P", 4]), "past_value": (F, ["B", 2, "P", 4])},
         {"output": (F, ["B", "S", 8]), "present_key": (F, ["B", 2, "P+L", 4]),
          "present_value": (F, ["B", 2, "P+L", 4]), "qk": (F, ["B", 2, "S", "P+L"])},
         {"B": 2, "S": 3, "L": 3, "P": 4}),
    Case("mha-rank4-cross-symbolic-v-head", "MultiHeadAttention", {"num_heads": 2},
         {"query": (F, ["B", "S", 8]), "key": (F, ["B", 2, "L", 4]),
          "value": (F, ["B", 2, "L", "Hv"])},
         {"output": (F, ["B", "S", "2*Hv"]), "present_key": (F, ["B", 2, "L", 4]),
          "present_value": (F, ["B", 2, "L", "Hv"])},
         {"B": 2, "S": 3, "L": 5, "Hv": 6}),
    Case("mha-value-width-symbolic", "MultiHeadAttention", {"num_heads": 2},
         {"query": (F16, ["B", "S", 8]), "key": (F16, ["B", "L", 8]),
          "value": (F16, ["B", "L", "Dv"])},
         {"output": (F16, ["B", "S", "Dv"])}, {"B": 1, "S": 2, "L": 3, "Dv": 10}),
    Case("mha-bias-lengths-causal", "MultiHeadAttention",
         {"num_heads": 2, "unidirectional": 1},
         {"query": (F, ["B", "S", 8]), "key": (F, ["B", "S", 8]), "value": (F, ["B", "S", 8]),
          "bias": (F, [24]), "key_padding_mask": (I32, ["B"])},
         {"output": (F, ["B", "S", 8])}, {"B": 2, "S": 4},
         {"key_padding_mask": np.array([4, 3], np.int32)}),
    Case("mha-mask2d-attention-bias-past", "MultiHeadAttention", {"num_heads": 2},
         {"query": (BF16, [2, 3, 8]), "key": (BF16, [2, 3, 8]), "value": (BF16, [2, 3, 8]),
          "key_padding_mask": (I32, [2, 7]), "attention_bias": (BF16, [1, 1, 3, 7]),
          "past_key": (BF16, [2, 2, 4, 4]), "past_value": (BF16, [2, 2, 4, 4])},
         {"output": (BF16, [2, 3, 8]), "present_key": (BF16, [2, 2, 7, 4]),
          "present_value": (BF16, [2, 2, 7, 4])}, {}),
    # -- GroupQueryAttention ---------------------------------------------------
    Case("gqa-prompt-static", "GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 2},
         {"query": (F, [2, 4, 16]), "key": (F, [2, 4, 8]), "value": (F, [2, 4, 8]),
          "seqlens_k": (I32, [2]), "total_sequence_length": (I32, [])},
         {"output": (F, [2, 4, 16]), "present_key": (F, [2, 2, 4, 4]),
          "present_value": (F, [2, 2, 4, 4])}, {}, _gqa_lens([4, 3], 4)),
    Case("gqa-prompt-symbolic-qk", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2, "qk_output": 1},
         {"query": (F16, ["B", "S", 16]), "key": (F16, ["B", "S", 8]),
          "value": (F16, ["B", "S", 8]), "seqlens_k": (I32, ["B"]),
          "total_sequence_length": (I32, [1])},
         {"output": (F16, ["B", "S", 16]), "present_key": (F16, ["B", 2, "S", 4]),
          "present_value": (F16, ["B", 2, "S", 4]), "output_qk": (F16, ["B", 4, "S", "S"])},
         {"B": 2, "S": 3}, {"seqlens_k": np.array([2, 2], np.int32),
                            "total_sequence_length": np.array([3], np.int32)}),
    Case("gqa-packed-qkv", "GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 2},
         {"query": (BF16, ["B", "S", 32]), "seqlens_k": (I32, ["B"]),
          "total_sequence_length": (I32, [])},
         {"output": (BF16, ["B", "S", 16]), "present_key": (BF16, ["B", 2, "S", 4]),
          "present_value": (BF16, ["B", 2, "S", 4])},
         {"B": 1, "S": 3}, _gqa_lens([3], 3)),
    Case("gqa-decode-growing-constant-total", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2},
         {"query": (F, ["B", 1, 16]), "key": (F, ["B", 1, 8]), "value": (F, ["B", 1, 8]),
          "past_key": (F, ["B", 2, 5, 4]), "past_value": (F, ["B", 2, 5, 4]),
          "seqlens_k": (I32, ["B"]), "total_sequence_length": (I32, [])},
         {"output": (F, ["B", 1, 16]), "present_key": (F, ["B", 2, 6, 4]),
          "present_value": (F, ["B", 2, 6, 4])},
         {"B": 2}, _gqa_lens([6, 4], 6), ("total_sequence_length",)),
    Case("gqa-decode-shared-buffer-constant-total", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2},
         {"query": (F, ["B", 1, 16]), "key": (F, ["B", 1, 8]), "value": (F, ["B", 1, 8]),
          "past_key": (F, ["B", 2, 8, 4]), "past_value": (F, ["B", 2, 8, 4]),
          "seqlens_k": (I32, ["B"]), "total_sequence_length": (I32, [])},
         {"output": (F, ["B", 1, 16]), "present_key": (F, ["B", 2, 8, 4]),
          "present_value": (F, ["B", 2, 8, 4])},
         {"B": 2}, _gqa_lens([6, 4], 6), ("total_sequence_length",)),
    Case("gqa-decode-runtime-total", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2},
         {"query": (F, ["B", 1, 16]), "key": (F, ["B", 1, 8]), "value": (F, ["B", 1, 8]),
          "past_key": (F, ["B", 2, "P", 4]), "past_value": (F, ["B", 2, "P", 4]),
          "seqlens_k": (I32, ["B"]), "total_sequence_length": (I32, [])},
         # P + 1 (a growing cache) or P (a static one): total_sequence_length's value decides
         {"output": (F, ["B", 1, 16]), "present_key": (F, ["B", 2, None, 4]),
          "present_value": (F, ["B", 2, None, 4])},
         {"B": 2, "P": 5}, _gqa_lens([6, 4], 6)),
    Case("gqa-sliding-window-cache", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2, "local_window_size": 3,
          "sliding_window_cache": 1},
         {"query": (F, [1, 1, 16]), "key": (F, [1, 1, 8]), "value": (F, [1, 1, 8]),
          "past_key": (F, [1, 2, "C", 4]), "past_value": (F, [1, 2, "C", 4]),
          "seqlens_k": (I32, [1]), "total_sequence_length": (I32, [])},
         {"output": (F, [1, 1, 16]), "present_key": (F, [1, 2, "C", 4]),
          "present_value": (F, [1, 2, "C", 4])},
         {"C": 4}, _gqa_lens([6], 6)),
    Case("gqa-rotary-sink-bias", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2, "do_rotary": 1, "softcap": 5.0},
         {"query": (F, ["B", "S", 16]), "key": (F, ["B", "S", 8]), "value": (F, ["B", "S", 8]),
          "seqlens_k": (I32, ["B"]), "total_sequence_length": (I32, []),
          "cos_cache": (F, [16, 2]), "sin_cache": (F, [16, 2]),
          "position_ids": (I64, ["B", "S"]), "attention_bias": (F, [1, 1, "S", "S"]),
          "head_sink": (F, [4])},
         {"output": (F, ["B", "S", 16]), "present_key": (F, ["B", 2, "S", 4]),
          "present_value": (F, ["B", 2, "S", 4])},
         {"B": 1, "S": 3}, _gqa_lens([3], 3)),
    Case("gqa-int8-cache", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2, "k_quant_type": "PER_TENSOR",
          "v_quant_type": "PER_TENSOR", "kv_cache_bit_width": 8},
         {"query": (F, [1, 1, 16]), "key": (F, [1, 1, 8]), "value": (F, [1, 1, 8]),
          "past_key": (I8, [1, 2, 5, 4]), "past_value": (I8, [1, 2, 5, 4]),
          "seqlens_k": (I32, [1]), "total_sequence_length": (I32, []),
          "k_scale": (F, [1]), "v_scale": (F, [1])},
         {"output": (F, [1, 1, 16]), "present_key": (I8, [1, 2, 6, 4]),
          "present_value": (I8, [1, 2, 6, 4])},
         {}, {**_gqa_lens([6], 6), "k_scale": np.full(1, 0.05, np.float32),
              "v_scale": np.full(1, 0.05, np.float32)}, ("total_sequence_length",)),
    Case("gqa-uint4-cache", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2, "k_quant_type": "PER_CHANNEL",
          "v_quant_type": "PER_CHANNEL", "kv_cache_bit_width": 4},
         {"query": (F, [1, 1, 16]), "key": (F, [1, 1, 8]), "value": (F, [1, 1, 8]),
          "past_key": (U8, [1, 2, 5, 2]), "past_value": (U8, [1, 2, 5, 2]),
          "seqlens_k": (I32, [1]), "total_sequence_length": (I32, []),
          "k_scale": (F, [1, 2, 1, 4]), "v_scale": (F, [1, 2, 1, 4])},
         {"output": (F, [1, 1, 16]), "present_key": (U8, [1, 2, 6, 2]),
          "present_value": (U8, [1, 2, 6, 2])},
         {}, {**_gqa_lens([6], 6), "k_scale": np.full((1, 2, 1, 4), 0.4, np.float32),
              "v_scale": np.full((1, 2, 1, 4), 0.4, np.float32)}, ("total_sequence_length",)),
    # -- QAttention ------------------------------------------------------------
    Case("qattention-static", "QAttention", {"num_heads": 2},
         {"input": (U8, [2, 3, 8]), "weight": (I8, [8, 24]), "bias": (F, [24]),
          "input_scale": (F, []), "weight_scale": (F, [])},
         {"output": (F, [2, 3, 8])}, {}),
    Case("qattention-past-present-zero-points", "QAttention", {"num_heads": 2},
         {"input": (U8, ["B", "S", 8]), "weight": (U8, [8, 24]), "bias": (F, [24]),
          "input_scale": (F, [1]), "weight_scale": (F, [24]), "mask_index": (I32, ["B"]),
          "input_zero_point": (U8, [1]), "weight_zero_point": (U8, [24]),
          "past": (F, [2, "B", 2, "P", 4])},
         {"output": (F, ["B", "S", 8]), "present": (F, [2, "B", 2, "P+S", 4])},
         {"B": 2, "S": 3, "P": 2}, {"mask_index": np.array([5, 4], np.int32)}),
    # -- RotaryEmbedding ---------------------------------------------------------
    Case("rotary-rank3-num-heads", "RotaryEmbedding", {"num_heads": 4},
         {"input": (F, ["B", "S", 16]), "position_ids": (I64, ["B", "S"]),
          "cos_cache": (F, [32, 2]), "sin_cache": (F, [32, 2])},
         {"output": (F, ["B", "S", 16])}, {"B": 2, "S": 3}),
    Case("rotary-rank4-offset-interleaved", "RotaryEmbedding", {"interleaved": 1},
         {"input": (F16, ["B", 4, "S", 8]), "position_ids": (I64, [1]),
          "cos_cache": (F16, [32, 4]), "sin_cache": (F16, [32, 4])},
         {"output": (F16, ["B", 4, "S", 8])}, {"B": 2, "S": 3},
         {"position_ids": np.array([5], np.int64)}),
    Case("rotary-rank3-heads-from-cache", "RotaryEmbedding", {},
         {"input": (BF16, [2, 3, 16]), "position_ids": (I64, [2, 3]),
          "cos_cache": (BF16, [8, 4]), "sin_cache": (BF16, [8, 4])},
         {"output": (BF16, [2, 3, 16])}, {}),
    Case("rotary-partial", "RotaryEmbedding", {"num_heads": 2, "rotary_embedding_dim": 4},
         {"input": (F, [1, "S", 16]), "position_ids": (I64, [1, "S"]),
          "cos_cache": (F, [16, 2]), "sin_cache": (F, [16, 2])},
         {"output": (F, [1, "S", 16])}, {"S": 5}),
    # -- LinearAttention ---------------------------------------------------------
    Case("linear-gated-delta-past", "LinearAttention", {"q_num_heads": 2, "kv_num_heads": 2},
         {"query": (F, ["B", "T", 8]), "key": (F, ["B", "T", 8]), "value": (F, ["B", "T", 12]),
          "past_state": (F, ["B", 2, 4, 6]), "decay": (F, ["B", "T", 2]),
          "beta": (F, ["B", "T", 2])},
         {"output": (F, ["B", "T", 12]), "present_state": (F, ["B", 2, 4, 6])},
         {"B": 2, "T": 3}, {"decay": lambda bind: -np.ones((bind["B"], bind["T"], 2),
                                                            np.float32)}),
    Case("linear-rule-no-past", "LinearAttention",
         {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear", "chunk_size": 16},
         {"query": (BF16, ["B", "T", 8]), "key": (BF16, ["B", "T", 8]),
          "value": (BF16, ["B", "T", 12])},
         {"output": (BF16, ["B", "T", 12]), "present_state": (BF16, ["B", 2, 4, 6])},
         {"B": 1, "T": 4}),
    Case("linear-inverse-grouping", "LinearAttention",
         {"q_num_heads": 1, "kv_num_heads": 2, "update_rule": "delta"},
         {"query": (F, [2, 3, 4]), "key": (F, [2, 3, 4]), "value": (F, [2, 3, 12]),
          "beta": (F, [2, 3, 1])},
         {"output": (F, [2, 3, 12]), "present_state": (F, [2, 2, 4, 6])}, {}),
    Case("linear-grouped-symbolic-value", "LinearAttention",
         {"q_num_heads": 4, "kv_num_heads": 2, "update_rule": "gated"},
         {"query": (F, ["B", "T", 16]), "key": (F, ["B", "T", 8]), "value": (F, ["B", "T", "V"]),
          "decay": (F, ["B", "T", 8])},
         {"output": (F, ["B", "T", "2*V"]), "present_state": (F, ["B", 2, 4, None])},
         {"B": 1, "T": 2, "V": 12}, {"decay": lambda bind: -np.ones((1, 2, 8), np.float32)}),
    Case("linear-state-window-mixed-types", "LinearAttention",
         {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear", "state_window": 2},
         {"query": (F16, [1, 3, 8]), "key": (F16, [1, 3, 8]), "value": (F16, [1, 3, 8]),
          "past_state": (F, [2, 1, 2, 4, 4])},
         {"output": (F16, [1, 3, 8]), "present_state": (F, [2, 1, 2, 4, 4])}, {}),
    # -- CausalConvWithState -----------------------------------------------------
    Case("conv-channels-first-past", "CausalConvWithState", {},
         {"input": (F, ["B", 6, "L"]), "weight": (F, [6, 1, 4]), "bias": (F, [6]),
          "past_state": (F, ["B", 6, 3])},
         {"output": (F, ["B", 6, "L"]), "present_state": (F, ["B", 6, 3])},
         {"B": 2, "L": 5}),
    Case("conv-dilation-no-past-silu", "CausalConvWithState",
         {"dilation": 2, "activation": "silu"},
         {"input": (F16, ["B", 6, "L"]), "weight": (F16, [6, 1, 4])},
         {"output": (F16, ["B", 6, "L"]), "present_state": (F16, ["B", 6, 6])},
         {"B": 1, "L": 3}),
    Case("conv-channels-last", "CausalConvWithState", {"channels_last": 1},
         {"input": (BF16, ["B", "L", 2, 3]), "weight": (BF16, [6, 1, 3]),
          "past_state": (BF16, ["B", 2, 2, 3])},
         {"output": (BF16, ["B", "L", 2, 3]), "present_state": (BF16, ["B", 2, 2, 3])},
         {"B": 2, "L": 4}),
]


# -- builders ------------------------------------------------------------------


def _bound(dims, bind):
    return [bind[d] if isinstance(d, str) else d for d in dims]


def _expected(dims, bind):
    """Expected dims with the symbols bound ("P+S" and "2*Hv" evaluated)."""
    return [eval(d, {}, dict(bind)) if isinstance(d, str) else d for d in dims]  # noqa: S307


def _array(elem, dims, rng):
    dtype = oh.tensor_dtype_to_np_dtype(elem)
    if elem in (F, F16, BF16):
        return rng.standard_normal(dims).astype(np.float32).astype(dtype)
    if elem in (U8, I8):
        return rng.integers(0, 5, dims).astype(dtype)
    if elem == I64:
        return np.zeros(dims, dtype)
    return np.ones(dims, dtype)


def _value(case, name, bind, rng):
    if name in case.values:
        v = case.values[name]
        return v(bind) if callable(v) else v
    elem, dims = case.inputs[name]
    return _array(elem, _bound(dims, bind), rng)


def build(case: Case, bind: dict | None = None, outputs: dict | None = None):
    """The single-node model (dims bound by ``bind`` when given); outputs
    declared with their element type and no shape."""
    names = INPUTS[case.op]
    last = max(names.index(n) for n in case.inputs)
    ins = [n if n in case.inputs else "" for n in names[: last + 1]]
    outputs = case.expected if outputs is None else outputs
    out_names = OUTPUTS[case.op]
    last_out = max(out_names.index(n) for n in outputs)
    outs = [n if n in outputs else "" for n in out_names[: last_out + 1]]
    node = oh.make_node(case.op, ins, outs, domain=MS, **case.attrs)
    rng = np.random.default_rng(0)
    graph_inputs, inits = [], []
    for n in ins:
        if not n:
            continue
        elem, dims = case.inputs[n]
        dims = _bound(dims, bind) if bind is not None else dims
        if n in case.constants:
            value = _value(case, n, bind or case.bind, rng)
            inits.append(nh.from_array(np.asarray(value), n))
        else:
            graph_inputs.append(oh.make_tensor_value_info(n, elem, dims))
    graph = oh.make_graph([node], case.id, graph_inputs,
                          [oh.make_tensor_value_info(n, outputs[n][0], None) for n in outs if n],
                          inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                         ir_version=10)


def _dims(tt) -> list:
    """Dims of a TensorTypeProto; onnx names an unknown output dim "unk__<n>":
    None here."""
    return [d.dim_value if d.HasField("dim_value") else
            None if d.dim_param.startswith("unk__") or not d.dim_param else d.dim_param
            for d in tt.shape.dim]


def inferred(model) -> dict:
    """{output: (element type, dims)} after strict shape inference."""
    out = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    # the checker wants every graph output's shape: it checks the inferred model
    onnx.checker.check_model(out, full_check=True)
    result = {}
    for v in out.graph.output:
        tt = v.type.tensor_type
        assert tt.HasField("shape"), f"{v.name}: no shape inferred"
        result[v.name] = (tt.elem_type, _dims(tt))
    return result


def run(case: Case, model) -> dict:
    rng = np.random.default_rng(1)
    feeds = {n: _value(case, n, case.bind, rng) for n in case.inputs
             if n not in case.constants}
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    got = sess.run(None, feeds)
    names = [v.name for v in model.graph.output]
    return dict(zip(names, got))


# -- every case: checker, strict inference, expected shapes, a real run --------


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_symbolic_model_infers_expected_shapes(case):
    got = inferred(build(case))
    assert set(got) == set(case.expected)
    for name, (elem, dims) in case.expected.items():
        assert got[name] == (elem, dims), f"{name}: {got[name]} != {(elem, dims)}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bound_model_matches_a_real_run(case):
    model = build(case, case.bind)
    got = inferred(model)
    outputs = run(case, model)
    for name, (elem, dims) in case.expected.items():
        want = _expected(dims, case.bind)
        array = outputs[name]
        # a dim the symbolic model leaves open may be known once bound: the run's
        have = [real if w is None and g is not None else w
                for w, g, real in zip(want, got[name][1], array.shape)]
        assert got[name] == (elem, have), f"{name}: {got[name]} != {(elem, have)}"
        assert oh.np_dtype_to_tensor_dtype(array.dtype) == elem, name
        assert len(array.shape) == len(want), name
        for k, (d, real) in enumerate(zip(want, array.shape)):
            assert d is None or d == real, f"{name} dim {k}: inferred {d}, ran {real}"


def test_every_operator_has_cases_and_is_registered():
    assert {c.op for c in CASES} == set(OPS)
    records = {r.name: r for r in olc.custom_op_schemas() if r.name in OPS}
    assert set(records) == set(OPS)
    for op in OPS:
        assert onnx.defs.has(op, MS)
        assert olc.operator_schema_lookup(op, MS).domain == MS
        assert records[op].doc and olc.custom_op_schemas(op, init_doc=False)[0].doc == ""


def test_unrequested_optional_outputs_are_left_alone():
    case = CASES[[c.id for c in CASES].index("mha-static-all-outputs")]
    model = build(case, outputs={"output": (F, None), "qk": (F, None)})
    got = inferred(model)
    assert got == {"output": (F, [2, 3, 12]), "qk": (F, [2, 2, 3, 5])}


def test_unknown_input_shapes_give_types():
    """Inputs of unknown shape: types are still inferred, shapes where the
    attributes alone decide nothing are left open."""
    node = oh.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "sl", "tot"],
                        ["o", "pk", "pv"], domain=MS, num_heads=4, kv_num_heads=2)
    graph = oh.make_graph(
        [node], "g",
        [oh.make_tensor_value_info("q", F16, None), oh.make_tensor_value_info("k", F16, None),
         oh.make_tensor_value_info("v", F16, None), oh.make_tensor_value_info("sl", I32, None),
         oh.make_tensor_value_info("tot", I32, None)],
        [oh.make_tensor_value_info(n, 0, None) for n in ("o", "pk", "pv")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                oh.make_opsetid(MS, 1)], ir_version=10)
    out = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {v.name: v.type.tensor_type for v in out.graph.output}
    assert types["o"].elem_type == F16 and not types["o"].HasField("shape")
    assert types["pk"].elem_type == F16 and [d.dim_value for d in types["pk"].shape.dim][1] == 2


# -- ONNX Runtime's schemas ------------------------------------------------------


def _ort_schemas():
    C = pytest.importorskip("onnxruntime.capi.onnxruntime_pybind11_state")
    return {s.name: s for s in C.get_all_operator_schema()
            if s.domain == MS and s.name in OPS}


OPTION = {0: "single", 1: "optional", 2: "variadic"}


def _option(p) -> str:
    return OPTION[int(p.option.value)] if hasattr(p.option, "value") else \
        str(p.option).split(".")[-1].lower()


@pytest.mark.parametrize("op", OPS)
def test_record_agrees_with_onnxruntime(op):
    ort = _ort_schemas()[op]
    (ours,) = olc.custom_op_schemas(op)
    theirs = onnx.defs.get_schema(op, 1, MS)
    assert ours.since_version == ort.since_version == theirs.since_version
    for mine, their in ((theirs.inputs, ort.inputs), (theirs.outputs, ort.outputs)):
        assert [(p.name, _option(p)) for p in mine] == [(p.name, _option(p)) for p in their]
        assert [p.type_str for p in mine] == [p.typeStr for p in their]
    assert set(theirs.attributes) == set(ort.attributes)
    for name, a in ort.attributes.items():
        m = theirs.attributes[name]
        assert (int(m.type.value), m.required) == (int(a.type.value), a.required), name
        want = onnx.AttributeProto()
        want.ParseFromString(a._default_value)
        have = m.default_value
        if not want.type:
            assert not have.type, f"{name}: ORT has no default, ours {have}"
        else:
            assert oh.get_attribute_value(have) == pytest.approx(
                oh.get_attribute_value(want)), name
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in theirs.type_constraints}
    for c in ort.type_constraints:
        assert set(c.allowed_type_strs) <= allowed[c.type_param_str], c.type_param_str


# -- ORT's symbolic shape inference ---------------------------------------------

#: Outputs where ORT's symbolic inference says something else, and why.
ORT_SYMBOLIC_DIFFERS = {
    # ORT assumes a shared buffer (present = past); the kernel grows the cache
    # unless total_sequence_length <= P, which only its value says
    ("gqa-decode-runtime-total", "present_key"): "past's length",
    ("gqa-decode-runtime-total", "present_value"): "past's length",
    ("gqa-decode-growing-constant-total", "present_key"): "past's length",
    ("gqa-decode-growing-constant-total", "present_value"): "past's length",
    ("gqa-int8-cache", "present_key"): "past's length, query's type",
    ("gqa-int8-cache", "present_value"): "past's length, query's type",
    ("gqa-uint4-cache", "present_key"): "past's length, query's type",
    ("gqa-uint4-cache", "present_value"): "past's length, query's type",
    # without past inputs ORT sets no present shape
    ("gqa-prompt-static", "present_key"): "not inferred",
    ("gqa-prompt-static", "present_value"): "not inferred",
    ("gqa-prompt-symbolic-qk", "present_key"): "not inferred",
    ("gqa-prompt-symbolic-qk", "present_value"): "not inferred",
    ("gqa-prompt-symbolic-qk", "output_qk"): "not inferred",
    ("gqa-packed-qkv", "present_key"): "not inferred",
    ("gqa-packed-qkv", "present_value"): "not inferred",
    ("gqa-rotary-sink-bias", "present_key"): "not inferred",
    ("gqa-rotary-sink-bias", "present_value"): "not inferred",
    # ORT's rank-4 MultiHeadAttention keeps the query's width (N*H, not N*Hv)
    # and finds no key length
    ("mha-rank4-cross-symbolic-v-head", "output"): "query's width",
    ("mha-rank4-cross-symbolic-v-head", "present_key"): "length unknown",
    ("mha-rank4-cross-symbolic-v-head", "present_value"): "length unknown",
    # ORT writes the value's width into the query's shape list, then reads the
    # key head size from it: present_key gets Hv
    ("mha-static-all-outputs", "present_key"): "v head size",
    # ORT's MultiHeadAttention sets present only when both are requested, never qk
    ("mha-static-all-outputs", "qk"): "not inferred",
    ("mha-past-present-symbolic", "qk"): "not inferred",
}


def _ort_symbolic(model) -> dict:
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    # SymbolicShapeInference.infer_shapes(model, auto_merge=True), without its
    # exception (and the file it saves) when some output stays unknown
    ssi = SymbolicShapeInference(2**31 - 1, True, False, 0)
    ssi._preprocess(model)
    while ssi.run_:
        ssi._infer_impl()
    ssi._update_output_from_vi()
    out = ssi.out_mp_
    result = {}
    for v in list(out.graph.output) + list(out.graph.value_info):
        tt = v.type.tensor_type
        if not tt.HasField("shape"):
            continue
        result[v.name] = (tt.elem_type, _dims(tt))
    return result


ORT_SYMBOLIC_OPS = ("Attention", "MultiHeadAttention", "GroupQueryAttention", "RotaryEmbedding")


@pytest.mark.parametrize("case", [c for c in CASES if c.op in ORT_SYMBOLIC_OPS],
                         ids=[c.id for c in CASES if c.op in ORT_SYMBOLIC_OPS])
def test_agrees_with_ort_symbolic_shape_inference(case):
    pytest.importorskip("onnxruntime")
    model = build(case)
    ours = inferred(model)
    theirs = _ort_symbolic(model)
    for name in case.expected:
        if (case.id, name) in ORT_SYMBOLIC_DIFFERS:
            assert theirs.get(name) != ours[name], f"{name}: ORT now agrees, update the table"
            continue
        assert theirs.get(name) == ours[name], f"{name}: ORT {theirs.get(name)}, ours {ours[name]}"


# -- inconsistent static shapes -----------------------------------------------------

BAD = [
    ("Attention", {"num_heads": 2},
     {"input": (F, [2, 3, 8]), "weights": (F, [6, 24])}, "input 'weights' dimension 0"),
    ("Attention", {"num_heads": 2},
     {"input": (F, [2, 3, 8]), "weights": (F, [8, 24]), "bias": (F, [12])}, "input 'bias'"),
    ("Attention", {"num_heads": 2},
     {"input": (F, [2, 3, 8]), "weights": (F, [8, 24]), "past": (F, [2, 2, 3, 4, 4])},
     "input 'past' dimension 2"),
    ("Attention", {"num_heads": 3},
     {"input": (F, [2, 3, 8]), "weights": (F, [8, 24])}, "input 'weights'.*multiple of 3"),
    ("Attention", {"num_heads": 2},
     {"input": (F, [2, 8]), "weights": (F, [8, 24])}, "input 'input' must have rank 3"),
    ("Attention", {"num_heads": 2, "qkv_hidden_sizes": [8, 8, 4]},
     {"input": (F, [2, 3, 8]), "weights": (F, [8, 24])}, "qkv_hidden_sizes"),
    ("Attention", {"num_heads": 2},
     {"input": (F, [2, 3, 8]), "weights": (F, [8, 24]), "mask_index": (I32, [2, 4])},
     "input 'mask_index' dimension 1"),
    ("MultiHeadAttention", {"num_heads": 2},
     {"query": (F, [2, 3, 8]), "key": (F, [2, 5, 6]), "value": (F, [2, 5, 8])},
     "input 'key' dimension 2"),
    ("MultiHeadAttention", {"num_heads": 2},
     {"query": (F, [2, 3, 8]), "key": (F, [2, 5, 8]), "value": (F, [2, 4, 8])},
     "input 'value' dimension 1"),
    ("MultiHeadAttention", {"num_heads": 2},
     {"query": (F, [2, 3, 8]), "key": (F, [2, 5, 8]), "value": (F, [2, 5, 8]),
      "past_key": (F, [2, 2, 4, 3]), "past_value": (F, [2, 2, 4, 4])},
     "input 'past_key' dimension 3"),
    ("MultiHeadAttention", {"num_heads": 2},
     {"query": (F, [2, 3, 8]), "key": (F, [2, 5, 8]), "value": (F, [2, 5, 8]),
      "bias": (F, [16])}, "input 'bias'"),
    ("MultiHeadAttention", {"num_heads": 2},
     {"query": (F, [2, 3, 4, 2]), "key": (F, [2, 5, 8]), "value": (F, [2, 5, 8])},
     "input 'query' must have rank"),
    ("MultiHeadAttention", {"num_heads": 2},
     {"query": (F, [2, 3, 8]), "key": (F, [2, 5, 8]), "value": (F, [2, 5, 8]),
      "attention_bias": (F, [1, 1, 3, 4])}, "input 'attention_bias' dimension 3"),
    ("GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 2},
     {"query": (F, [2, 4, 16]), "key": (F, [2, 4, 16]), "value": (F, [2, 4, 8]),
      "seqlens_k": (I32, [2]), "total_sequence_length": (I32, [])}, "input 'key' dimension 2"),
    ("GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 2},
     {"query": (F, [2, 4, 18]), "key": (F, [2, 4, 8]), "value": (F, [2, 4, 8]),
      "seqlens_k": (I32, [2]), "total_sequence_length": (I32, [])}, "input 'query'"),
    ("GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 2},
     {"query": (F, [2, 1, 16]), "key": (F, [2, 1, 8]), "value": (F, [2, 1, 8]),
      "past_key": (F, [2, 4, 5, 4]), "past_value": (F, [2, 4, 5, 4]),
      "seqlens_k": (I32, [2]), "total_sequence_length": (I32, [])},
     "input 'past_key' dimension 1"),
    ("GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 2},
     {"query": (F, [2, 4, 16]), "key": (F, [2, 4, 8]), "value": (F, [2, 4, 8]),
      "seqlens_k": (I32, [3]), "total_sequence_length": (I32, [])},
     "input 'seqlens_k' dimension 0"),
    ("GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 3},
     {"query": (F, [2, 4, 16]), "key": (F, [2, 4, 8]), "value": (F, [2, 4, 8]),
      "seqlens_k": (I32, [2]), "total_sequence_length": (I32, [])}, "kv_num_heads"),
    ("QAttention", {"num_heads": 2},
     {"input": (U8, [2, 3, 8]), "weight": (I8, [4, 24]), "bias": (F, [24]),
      "input_scale": (F, []), "weight_scale": (F, [])}, "input 'weight' dimension 0"),
    ("QAttention", {"num_heads": 2},
     {"input": (U8, [2, 3, 8]), "weight": (I8, [8, 24]), "bias": (F, [24]),
      "input_scale": (F, [2]), "weight_scale": (F, [])}, "input 'input_scale'"),
    ("RotaryEmbedding", {"num_heads": 4},
     {"input": (F, [2, 16]), "position_ids": (I64, [2, 3]), "cos_cache": (F, [8, 2]),
      "sin_cache": (F, [8, 2])}, "input 'input' must have rank"),
    ("RotaryEmbedding", {"num_heads": 4},
     {"input": (F, [2, 3, 16]), "position_ids": (I64, [1, 3]), "cos_cache": (F, [8, 2]),
      "sin_cache": (F, [8, 2])}, "input 'position_ids' dimension 0"),
    ("RotaryEmbedding", {"num_heads": 4},
     {"input": (F, [2, 3, 16]), "position_ids": (I64, [2, 3]), "cos_cache": (F, [8, 2]),
      "sin_cache": (F, [8, 3])}, "input 'sin_cache' dimension 1"),
    ("RotaryEmbedding", {"num_heads": 4},
     {"input": (F, [2, 3, 16]), "position_ids": (I64, [3]), "cos_cache": (F, [8, 2]),
      "sin_cache": (F, [8, 2])}, "input 'position_ids' dimension 0"),
    ("GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 2, "k_quant_type": "PER_TENSOR",
                             "v_quant_type": "PER_TENSOR", "kv_cache_bit_width": 4},
     {"query": (F, [1, 1, 16]), "key": (F, [1, 1, 8]), "value": (F, [1, 1, 8]),
      "past_key": (U8, [1, 2, 5, 4]), "past_value": (U8, [1, 2, 5, 4]),
      "seqlens_k": (I32, [1]), "total_sequence_length": (I32, [])},
     "input 'past_key' dimension 3 \\(head size / 2\\)"),
    ("LinearAttention", {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"},
     {"query": (F, [2, 3, 8]), "key": (F, [2, 3, 8]), "value": (F, [2, 3, 12]),
      "past_state": (F, [2, 2, 4, 4])}, "input 'past_state' dimension 3"),
    ("LinearAttention", {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"},
     {"query": (F, [2, 3, 8]), "key": (F, [1, 3, 8]), "value": (F, [2, 3, 12])},
     "input 'key' dimension 0"),
    ("LinearAttention", {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"},
     {"query": (F, [2, 3, 8]), "key": (F, [2, 3, 8]), "value": (F, [2, 3, 11])},
     "input 'value'"),
    ("CausalConvWithState", {},
     {"input": (F, [2, 6, 5]), "weight": (F, [4, 1, 3])}, "input 'weight' dimension 0"),
    ("CausalConvWithState", {"dilation": 2},
     {"input": (F, [2, 6, 5]), "weight": (F, [6, 1, 3]), "past_state": (F, [2, 6, 2])},
     "input 'past_state' dimension 2"),
    ("CausalConvWithState", {},
     {"input": (F, [2, 6, 5, 1]), "weight": (F, [6, 1, 3])}, "input 'input' must have rank 3"),
]


@pytest.mark.parametrize("op,attrs,inputs,match", BAD,
                         ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_inconsistent_static_shapes_raise(op, attrs, inputs, match):
    case = Case("bad", op, attrs, inputs, {OUTPUTS[op][0]: (F, None)}, {})
    model = build(case)
    with pytest.raises(Exception, match=f"{op}: .*{match}"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)


def test_bfloat16_element_type():
    # ml_dtypes' bfloat16 is what the evaluator hands the kernels
    assert oh.np_dtype_to_tensor_dtype(np.dtype(bfloat16)) == BF16


def test_ai_onnx_namesakes_keep_their_schemas():
    """Attention, RotaryEmbedding, LinearAttention and CausalConvWithState
    exist in both domains: onnx's default-domain schemas and the evaluator's
    by-name table (built before ours joined) are unchanged."""
    from onnx.reference import op_run

    for op, version in (("Attention", 23), ("RotaryEmbedding", 23), ("LinearAttention", 27),
                        ("CausalConvWithState", 27)):
        assert onnx.defs.get_schema(op, 28, "").domain == ""
        assert onnx.defs.get_schema(op, 28, "").since_version >= version
        assert op_run._schemas[op].domain == ""
        assert onnx.defs.get_schema(op, 1, MS).domain == MS


#: Variants the kernels do not run (they raise NotImplementedError, as ONNX
#: Runtime's CPU kernels mostly do): the schema still infers them.
NOT_RUN = [
    Case("mha-packed-qkv", "MultiHeadAttention", {"num_heads": 2},
         {"query": (F, ["B", "S", 2, 3, 4])},
         {"output": (F, ["B", "S", 8]), "present_key": (F, ["B", 2, "S", 4]),
          "present_value": (F, ["B", 2, "S", 4])}, {}),
    Case("mha-packed-kv", "MultiHeadAttention", {"num_heads": 2},
         {"query": (F, ["B", "S", 8]), "key": (F, ["B", "L", 2, 2, 4])},
         {"output": (F, ["B", "S", 8])}, {}),
    Case("mha-shared-buffer", "MultiHeadAttention", {"num_heads": 2},
         {"query": (F, ["B", 1, 8]), "key": (F, ["B", 1, 8]), "value": (F, ["B", 1, 8]),
          "past_key": (F, ["B", 2, "M", 4]), "past_value": (F, ["B", 2, "M", 4]),
          "past_sequence_length": (I32, [1])},
         {"output": (F, ["B", 1, 8]), "present_key": (F, ["B", 2, "M", 4]),
          "present_value": (F, ["B", 2, "M", 4])}, {}),
    Case("attention-shared-buffer", "Attention",
         {"num_heads": 2, "past_present_share_buffer": 1},
         {"input": (F, ["B", 1, 8]), "weights": (F, [8, 24]),
          "past": (F, [2, "B", 2, "M", 4]), "past_sequence_length": (I32, [1])},
         {"output": (F, ["B", 1, 8]), "present": (F, [2, "B", 2, "M", 4])}, {}),
    Case("gqa-query-seqlens-runtime-total", "GroupQueryAttention",
         {"num_heads": 4, "kv_num_heads": 2},
         {"query": (F, [2, 4, 16]), "key": (F, [2, 4, 8]), "value": (F, [2, 4, 8]),
          "past_key": (F, [2, 2, 8, 4]), "past_value": (F, [2, 2, 8, 4]),
          "seqlens_k": (I32, [2]), "total_sequence_length": (I32, []),
          "query_seqlens": (I32, [2])},
         {"output": (F, [2, 4, 16]), "present_key": (F, [2, 2, None, 4]),
          "present_value": (F, [2, 2, None, 4])}, {}),
]


@pytest.mark.parametrize("case", NOT_RUN, ids=[c.id for c in NOT_RUN])
def test_variants_not_run_are_inferred(case):
    got = inferred(build(case))
    assert got == dict(case.expected)


def test_state_update_output_gets_its_type():
    case = Case("conv-state-update", "CausalConvWithState", {},
                {"input": (F, ["B", 6, "L"]), "weight": (F, [6, 1, 4])},
                {"output": (F, None), "present_state": (F, None), "state_update": (F, None)},
                {})
    out = onnx.shape_inference.infer_shapes(build(case), strict_mode=True)
    types = {v.name: v.type.tensor_type for v in out.graph.output}
    assert types["state_update"].elem_type == F  # CUDA only in ORT: no shape here
    assert _dims(types["present_state"]) == ["B", 6, 3]


def test_gqa_constant_total_must_be_the_prompt_length_without_past():
    case = Case("bad-total", "GroupQueryAttention", {"num_heads": 4, "kv_num_heads": 2},
                {"query": (F, [2, 4, 16]), "key": (F, [2, 4, 8]), "value": (F, [2, 4, 8]),
                 "seqlens_k": (I32, [2]), "total_sequence_length": (I32, [])},
                {"output": (F, None)}, {}, _gqa_lens([4, 3], 5), ("total_sequence_length",))
    with pytest.raises(Exception, match="GroupQueryAttention: input 'total_sequence_length'"):
        onnx.shape_inference.infer_shapes(build(case), strict_mode=True)
