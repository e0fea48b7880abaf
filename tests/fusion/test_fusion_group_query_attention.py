"""group_query_attention: ai.onnx Attention-23/24 with grouped heads ->
com.microsoft GroupQueryAttention and its seqlens_k/total_sequence_length."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

from fusion_cases import (
    MS,
    assert_fused_same,
    assert_left_alone,
    branches,
    if_model,
    make_model,
    op_types,
    run_ours,
)

F, D, BOOL = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.BOOL
B, S, HQ, HKV, H, P = 2, 3, 4, 2, 8, 5


def _inputs(*, past=True, batch="batch", seq="seq", mask=None, dtype=F, rank=3, nonpad=False):
    """(name, type, shape) of Q, K, V, the mask, the past and nonpad_kv_seqlen."""
    if rank == 3:
        shapes = [[batch, seq, HQ * H], [batch, seq, HKV * H], [batch, seq, HKV * H]]
    else:
        shapes = [[batch, HQ, seq, H], [batch, HKV, seq, H], [batch, HKV, seq, H]]
    inputs = [(n, dtype, s) for n, s in zip("QKV", shapes)]
    if mask is not None:
        mask_type, mask_shape = mask
        inputs.append(("mask", mask_type, mask_shape))
    if past:
        inputs += [(n, dtype, [batch, HKV, "past", H]) for n in ("past_key", "past_value")]
    if nonpad:
        inputs.append(("nonpad", TensorProto.INT64, [batch]))
    return inputs


def _model(*, past=True, outputs=3, opset=23, is_causal=1, mask=None, batch="batch",
           seq="seq", dtype=F, rank=3, nonpad=False, extra=(), graph_outputs=None, **attrs):
    inputs = _inputs(past=past, batch=batch, seq=seq, mask=mask, dtype=dtype, rank=rank,
                     nonpad=nonpad)
    slots = ["Q", "K", "V", "mask" if mask else "", "past_key" if past else "",
             "past_value" if past else "", "nonpad" if nonpad else ""]
    while not slots[-1]:
        slots.pop()
    names = ["Y", "present_key", "present_value", "qk"][:outputs]
    if rank == 3:
        attrs = {"q_num_heads": HQ, "kv_num_heads": HKV, **attrs}
    node = oh.make_node("Attention", slots, names, name="attention", is_causal=is_causal,
                        **attrs)
    shapes = {"Y": [None] * rank, "present_key": [None] * 4, "present_value": [None] * 4,
              "qk": [None] * 4}
    graph_outputs = graph_outputs or [(n, dtype, shapes[n]) for n in names]
    return make_model([node, *extra], inputs, graph_outputs, opset=opset)


def _feeds(model, *, batch=B, seq=S, past_len=P, dtype=np.float32):
    """Random feeds for the graph inputs of ``model`` at the given sizes."""
    rng = np.random.default_rng(0)
    sizes = {"batch": batch, "seq": seq, "past": past_len, "total": past_len + seq}
    feeds = {}
    for value in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else sizes[d.dim_param]
                for d in value.type.tensor_type.shape.dim]
        elem = value.type.tensor_type.elem_type
        if elem == BOOL:
            feeds[value.name] = rng.random(dims) < 0.8
        else:
            feeds[value.name] = rng.standard_normal(dims).astype(
                onnx.helper.tensor_dtype_to_np_dtype(elem))
    return feeds


def _fused_node(fused):
    (node,) = [n for n in fused.graph.node if n.op_type == "GroupQueryAttention"]
    return node, {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize("case,sizes", [
    pytest.param({"past": False}, {}, id="prefill"),
    pytest.param({"past": False, "outputs": 1}, {}, id="prefill-y-only"),
    pytest.param({}, {}, id="past-batch-2-rows-3"),
    pytest.param({"seq": 1}, {"seq": 1}, id="decode"),
    pytest.param({"seq": 1, "is_causal": 0}, {"seq": 1}, id="decode-not-causal"),
    pytest.param({"batch": 1}, {"batch": 1}, id="past-batch-1"),
    pytest.param({}, {"past_len": 0}, id="empty-past"),
    pytest.param({"opset": 24, "scale": 0.2, "softcap": 3.0}, {}, id="opset24-scale-softcap"),
    # ONNX Runtime's Attention wants present_value with past_value
    pytest.param({"past": False, "outputs": 2}, {}, id="present-key-only"),
])
def test_fused_matches_unfused(case, sizes):
    model = _model(**case)
    feeds = _feeds(model, **sizes)
    fused = assert_fused_same(model, feeds, "GroupQueryAttention",
                              counts={"group_query_attention": 1})
    node, attrs = _fused_node(fused)
    assert node.domain == MS and node.name == "attention"
    wanted = ["Y", "present_key", "present_value"][:case.get("outputs", 3)]
    assert list(node.output[:len(wanted)]) == wanted
    # ONNX Runtime wants both presents or neither: an unread one gets a name
    assert len(node.output) == (1 if wanted == ["Y"] else 3)
    assert attrs["num_heads"] == HQ and attrs["kv_num_heads"] == HKV
    assert attrs.get("scale") == pytest.approx(case.get("scale")) if "scale" in case else True
    assert attrs.get("softcap", 0.0) == pytest.approx(case.get("softcap", 0.0))
    helpers = {"Shape", "Gather", "Add", "Sub", "Expand", "Cast", "Constant"}
    assert set(op_types(fused.graph)) == helpers - ({"Add"} if not case.get("past", True)
                                                    else set()) | {"GroupQueryAttention"}
    # query_seqlens only where several entries append several rows to a past
    several = case.get("past", True) and "seq" not in case and "batch" not in case
    assert (len(node.input) == 17) == several


@pytest.mark.parametrize("shape", [
    pytest.param(["seq", "seq"], id="rank2"),
    pytest.param([HQ, "seq", "seq"], id="rank3-heads"),
    pytest.param(["batch", 1, "seq", "seq"], id="rank4-batch"),
])
def test_float_mask_without_past(shape):
    model = _model(past=False, mask=(F, shape))
    fused = assert_fused_same(model, _feeds(model), "GroupQueryAttention")
    node, _ = _fused_node(fused)
    bias = node.input[10]
    producer = [n for n in fused.graph.node if bias in n.output]
    assert (producer[0].op_type if producer else None) == (
        "Unsqueeze" if len(shape) < 4 else None)


def test_row_masked_whole_gives_zeros():
    model = _model(past=False, mask=(F, ["seq", "seq"]))
    feeds = _feeds(model)
    feeds["mask"][1, :] = -np.inf
    fused = assert_fused_same(model, feeds, "GroupQueryAttention")
    got, _ = run_ours(fused, feeds)
    assert not got[0][:, 1].any()


def test_float_mask_with_static_past():
    model = _model(mask=(F, [1, HQ, S, P + S]), seq=S, batch=B)
    model.graph.input[-1].type.tensor_type.shape.dim[2].dim_value = P
    model.graph.input[-2].type.tensor_type.shape.dim[2].dim_value = P
    assert_fused_same(model, _feeds(model), "GroupQueryAttention")


def test_float16():
    model = _model(dtype=TensorProto.FLOAT16)
    assert_fused_same(model, _feeds(model), "GroupQueryAttention", tol=2e-3)


def test_present_read_by_other_nodes():
    model = _model(extra=[oh.make_node("Neg", ["present_key"], ["N"])],
                   graph_outputs=[("Y", F, [None] * 3), ("N", F, [None] * 4)])
    fused = assert_fused_same(model, _feeds(model), "GroupQueryAttention")
    assert op_types(fused.graph)[-2:] == ["GroupQueryAttention", "Neg"]


# -- left alone -------------------------------------------------------------------


def _broken_models():
    yield "same-head-counts", _model(q_num_heads=HKV)
    yield "rank-4", _model(rank=4)
    yield "double", _model(dtype=D)
    yield "not-causal", _model(is_causal=0)
    yield "boolean-mask", _model(past=False, mask=(BOOL, ["seq", "seq"]))
    yield "mask-length-unknown", _model(mask=(F, ["seq", "total"]))
    yield "mask-query-axis-broadcast", _model(past=False, mask=(F, ["batch", 1, 1, "seq"]))
    yield "qk-output-read", _model(outputs=4)
    yield "nonpad-kv-seqlen", _model(past=False, opset=24, nonpad=True)
    yield "scale-zero", _model(scale=0.0)
    yield "softcap-negative", _model(softcap=-1.0)
    yield "softmax-precision-double", _model(softmax_precision=TensorProto.DOUBLE)
    yield "attention-25", _model(opset=25)
    model = _model()
    model.graph.input[1].type.tensor_type.shape.dim[1].dim_param = "kv_seq"  # cross attention
    model.graph.input[2].type.tensor_type.shape.dim[1].dim_param = "kv_seq"
    yield "keys-other-length", model
    model = _model()
    model.graph.input[2].type.tensor_type.shape.dim[2].dim_value = HKV * 2 * H  # value heads
    yield "value-head-size", model
    model = _model()
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "hidden"
    yield "hidden-not-static", model


@pytest.mark.parametrize("name,model", list(_broken_models()),
                         ids=[name for name, _ in _broken_models()])
def test_broken_patterns_left_alone(name, model):
    assert_left_alone(model)


# -- subgraphs and functions -------------------------------------------------------


def test_inside_if_branches():
    inputs = _inputs(past=False)
    node = oh.make_node("Attention", ["Q", "K", "V"], ["Y"], q_num_heads=HQ, kv_num_heads=HKV,
                        is_causal=1)
    model = if_model([node], ("Y", F, [None] * 3), inputs, opset=23)
    feeds = {**_feeds(model), "cond": np.array(True)}
    fused = assert_fused_same(model, feeds, "GroupQueryAttention",
                              counts={"group_query_attention": 2})
    for graph in branches(fused):
        assert "GroupQueryAttention" in op_types(graph) and "Attention" not in op_types(graph)


def test_inside_model_local_function():
    inputs = _inputs(past=False)
    node = oh.make_node("Attention", ["Q", "K", "V"], ["Y"], q_num_heads=HQ, kv_num_heads=HKV,
                        is_causal=1)
    value_info = [oh.make_tensor_value_info(*i) for i in inputs]
    function = oh.make_function("local", "Attend", ["Q", "K", "V"], ["Y"], [node],
                                [oh.make_opsetid("", 23)], value_info=value_info)
    model = make_model([oh.make_node("Attend", ["Q", "K", "V"], ["Y"], domain="local")],
                       inputs, [("Y", F, [None] * 3)], opset=23, functions=[function])
    fused = assert_fused_same(model, _feeds(model), "GroupQueryAttention",
                              counts={"group_query_attention": 1})
    assert "GroupQueryAttention" in op_types(fused.functions[0])
    assert {o.domain for o in fused.functions[0].opset_import} == {"", MS}
