"""GroupQueryAttention's backward model (query, key and value; first prompt
without caches): finite differences of our float32 kernel over grouped and
ungrouped heads, causal, windowed and full attention, right-padded entries,
the scale attribute, softcap and the present outputs; run by our kernels
(ai.onnx Attention included) and by ONNX Runtime; float16 against the
float32 backward; the unsupported forms rejected."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T

import onnx_light_cpu as olc

from gradcheck import check_gradients, one_node_model, ours, run_ort

# (rtol, atol) against central differences of the float32 forward kernel,
# h = 1e-2 on inputs of unit scale: the truncation error h^2 |f'''| / 6 and
# the rounding error of L (about 1e-7 |L| / h, |L| ~ 10) stay near 1e-4.
# Measured: a seventh of these bounds.
TOL, STEP = (1e-3, 2e-4), 1e-2
# ours against ONNX Runtime: the same float32 graph, other summation orders
ORT_TOL = (2e-5, 2e-6)

CASES = {
    # name: (B, S, num_heads, kv_num_heads, head_size, seqlens_k or None (full), attributes)
    "grouped_causal": (2, 4, 4, 2, 3, None, {}),
    "ungrouped_causal": (1, 5, 2, 2, 4, None, {}),
    "grouped_full": (2, 3, 6, 2, 2, None, {"causal": 0}),
    "windowed": (1, 6, 2, 1, 3, None, {"local_window_size": 2}),
    "padded_causal": (2, 5, 2, 1, 3, [2, 4], {}),
    "padded_full": (2, 4, 2, 2, 2, [1, 3], {"causal": 0}),
    "padded_windowed": (2, 5, 4, 2, 2, [2, 4], {"local_window_size": 3}),
    "scale_softcap": (1, 4, 4, 1, 4, None, {"scale": 0.7, "softcap": 1.5}),
    # rotary: (rotary dimension, position_ids[0, 0] or None)
    "rotary_half": (2, 4, 4, 2, 4, None, {"do_rotary": 1, "rotary": (4, None)}),
    "rotary_partial_interleaved": (2, 4, 2, 1, 6, [3, 4],
                                   {"do_rotary": 1, "rotary_interleaved": 1, "rotary": (4, 3)}),
    # packed QKV: query [B, S, (N + 2 Nkv) H]
    "packed": (2, 4, 4, 2, 3, [4, 2], {"packed": True}),
    "packed_rotary_windowed": (1, 5, 2, 1, 4, None, {"packed": True, "do_rotary": 1,
                                                      "rotary": (4, None),
                                                      "local_window_size": 2}),
}
POSITIONS = 12   # rows of the cos/sin caches


def gqa_model(b, s, heads, kv_heads, head_size, dtype=np.float32, presents=True, rotary=None,
              packed=False, **attrs):
    t = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    if packed:
        inputs = {"query": (t, [b, s, (heads + 2 * kv_heads) * head_size])}
        node_inputs = ["query", "", ""]
    else:
        inputs = {"query": (t, [b, s, heads * head_size]),
                  "key": (t, [b, s, kv_heads * head_size]),
                  "value": (t, [b, s, kv_heads * head_size])}
        node_inputs = ["query", "key", "value"]
    inputs.update({"seqlens_k": (T.INT32, [b]), "total_sequence_length": (T.INT32, [])})
    node_inputs += ["", "", "seqlens_k", "total_sequence_length"]
    if rotary:
        dim, start = rotary
        inputs.update({"cos_cache": (t, [POSITIONS, dim // 2]),
                       "sin_cache": (t, [POSITIONS, dim // 2])})
        node_inputs += ["cos_cache", "sin_cache"]
        if start is not None:
            inputs["position_ids"] = (T.INT64, [b, s])
            node_inputs.append("position_ids")
    outputs = {"output": (t, [b, s, heads * head_size])}
    if presents:
        outputs.update({"present_key": (t, [b, kv_heads, s, head_size]),
                        "present_value": (t, [b, kv_heads, s, head_size])})
    return one_node_model("GroupQueryAttention", inputs, outputs, node_inputs=node_inputs,
                          num_heads=heads, kv_num_heads=kv_heads, **attrs)


def gqa_feeds(rng, b, s, heads, kv_heads, head_size, seqlens=None, dtype=np.float32,
              rotary=None, packed=False):
    def draw(width):
        return rng.standard_normal((b, s, width)).astype(dtype)

    if packed:
        feeds = {"query": draw((heads + 2 * kv_heads) * head_size)}
    else:
        feeds = {"query": draw(heads * head_size), "key": draw(kv_heads * head_size),
                 "value": draw(kv_heads * head_size)}
    lengths = [s] * b if seqlens is None else seqlens
    feeds.update(seqlens_k=np.array(lengths, np.int32) - 1,
                 total_sequence_length=np.array(s, np.int32))
    if rotary:
        dim, start = rotary
        angles = rng.uniform(0, 2 * np.pi, (POSITIONS, dim // 2))
        feeds.update(cos_cache=np.cos(angles).astype(dtype), sin_cache=np.sin(angles).astype(dtype))
        if start is not None:
            # the first prompt reads position_ids[0, 0] only: the rest is noise
            feeds["position_ids"] = rng.integers(0, POSITIONS, (b, s))
            feeds["position_ids"][0, 0] = start
    return feeds


@pytest.mark.parametrize("name", list(CASES))
def test_group_query_attention_gradient(name):
    b, s, heads, kv_heads, head_size, seqlens, attrs = CASES[name]
    rng = np.random.default_rng(len(name))
    model = gqa_model(b, s, heads, kv_heads, head_size, **attrs)
    feeds = gqa_feeds(rng, b, s, heads, kv_heads, head_size, seqlens, rotary=attrs.get("rotary"),
                      packed=attrs.get("packed", False))
    kernels = ("Attention", "RotaryEmbedding") if "rotary" in attrs else ("Attention",)
    backward = check_gradients(model, feeds, tol=TOL, step=STEP, kernels=kernels,
                               ort_tol=ORT_TOL)
    assert [o.name for o in backward.graph.output] == (
        ["grad_query"] if "packed" in attrs else ["grad_query", "grad_key", "grad_value"])
    assert {"Attention", "MatMul"} <= {n.op_type for n in backward.graph.node}


def test_group_query_attention_without_presents():
    """Only output exposed: the backward model takes grad_output alone."""
    rng = np.random.default_rng(5)
    model = gqa_model(1, 4, 4, 2, 2, presents=False)
    feeds = gqa_feeds(rng, 1, 4, 4, 2, 2)
    backward = check_gradients(model, feeds, tol=TOL, step=STEP, ort_tol=ORT_TOL)
    assert [i.name for i in backward.graph.input][-1] == "grad_output"


def test_group_query_attention_float16_matches_float32():
    """FLOAT16 inputs are cast to FLOAT: the float32 backward of the same
    values, rounded once."""
    b, s, heads, kv_heads, head_size = 2, 4, 4, 2, 4
    rng = np.random.default_rng(11)
    feeds = gqa_feeds(rng, b, s, heads, kv_heads, head_size, seqlens=[3, 4], dtype=np.float16)
    model = gqa_model(b, s, heads, kv_heads, head_size, dtype=np.float16)
    grads = {f"grad_{o.name}": rng.standard_normal([d.dim_value for d in
                                                    o.type.tensor_type.shape.dim])
             .astype(np.float16) for o in model.graph.output}
    backward = olc.gradient_model(model)
    onnx.checker.check_model(backward, full_check=True)
    got = ours(backward).run(None, {**feeds, **grads})
    wide = {k: v.astype(np.float32) if v.dtype == np.float16 else v
            for k, v in {**feeds, **grads}.items()}
    want = ours(olc.gradient_model(gqa_model(b, s, heads, kv_heads, head_size))).run(None, wide)
    from_ort = run_ort(backward, {**feeds, **grads})
    for g, o, w in zip(got, from_ort, want):
        assert g.dtype == o.dtype == np.float16
        # one float16 rounding of values up to about 4: 2 ulps
        np.testing.assert_allclose(g.astype(np.float32), w, rtol=2e-3, atol=2e-3)
        np.testing.assert_allclose(o.astype(np.float32), w, rtol=2e-3, atol=2e-3)


def test_group_query_attention_default_scale_is_computed_from_the_shape():
    """Without the scale attribute the graph computes 1/sqrt(head size) from
    Shape(query): no constant scale, and the result equals scale=1/sqrt(H)."""
    rng = np.random.default_rng(2)
    feeds = gqa_feeds(rng, 1, 3, 2, 1, 4)
    default = olc.gradient_model(gqa_model(1, 3, 2, 1, 4))
    explicit = olc.gradient_model(gqa_model(1, 3, 2, 1, 4, scale=0.5))
    assert any(n.op_type == "Sqrt" for n in default.graph.node)
    assert not any(n.op_type == "Sqrt" for n in explicit.graph.node)
    grads = {"grad_output": rng.standard_normal((1, 3, 8)).astype(np.float32),
             "grad_present_key": rng.standard_normal((1, 1, 3, 4)).astype(np.float32),
             "grad_present_value": rng.standard_normal((1, 1, 3, 4)).astype(np.float32)}
    for g, e in zip(ours(default).run(None, {**feeds, **grads}),
                    ours(explicit).run(None, {**feeds, **grads})):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)


UNSUPPORTED = [
    ({"do_rotary": 1, "rotary": (4, None)}, None, "cos_cache whose second dimension"),
    ({"smooth_softmax": 1}, None, "smooth_softmax"),
    ({"qk_output": 1}, None, "qk_output"),
    ({"sliding_window_cache": 1}, None, "sliding_window_cache"),
    ({"k_quant_type": "PER_TENSOR", "v_quant_type": "PER_TENSOR"}, None, "k_quant_type"),
    ({}, (3, "past_key"), "past_key"),
    ({}, (10, "attention_bias"), "attention_bias"),
    ({}, (11, "head_sink"), "head_sink"),
    ({}, (16, "query_seqlens"), "query_seqlens"),
]


@pytest.mark.parametrize("attrs, slot, match", UNSUPPORTED, ids=[u[2] for u in UNSUPPORTED])
def test_group_query_attention_unsupported_forms_are_rejected(attrs, slot, match):
    model = gqa_model(1, 3, 2, 1, 4, **attrs)
    if "rotary" in attrs:   # a cos cache of unknown shape
        model.graph.input[5].type.tensor_type.shape.dim[1].dim_param = "rotary_half"
    if slot is not None:
        position, name = slot
        node = model.graph.node[0]
        node.input.extend([""] * (position + 1 - len(node.input)))
        node.input[position] = name
    with pytest.raises(NotImplementedError, match=f"GroupQueryAttention.*{match}"):
        olc.gradient_model(model)


def test_group_query_attention_key_without_value_is_refused():
    model = gqa_model(1, 3, 2, 1, 4)
    model.graph.node[0].input[2] = ""
    with pytest.raises(ValueError, match="GroupQueryAttention: key and value must be both"):
        olc.gradient_model(model)


def test_group_query_attention_symbolic_dimensions():
    """Symbolic batch and sequence dimensions, as exported models have: the
    backward model passes the checker's full check (shape inference) too."""
    model = gqa_model(2, 4, 4, 2, 3)
    for value in list(model.graph.input)[:3] + list(model.graph.output):
        dims = value.type.tensor_type.shape.dim
        dims[0].dim_param = "batch"
        dims[1 if value.name in ("query", "key", "value", "output") else 2].dim_param = "seq"
    feeds = gqa_feeds(np.random.default_rng(4), 2, 4, 4, 2, 3)
    check_gradients(model, feeds, tol=TOL, step=STEP, ort_tol=ORT_TOL)
