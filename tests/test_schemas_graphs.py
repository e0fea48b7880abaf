"""Shape inference through whole decoder and encoder graphs (issue 18, "Measured" 2).

The graphs: the tiny builder decoders of ``benchmarks/decoders.py`` (float32
and int4 weights) and the builder's other features (QMoE experts, int8 and
int4 KV caches, an INT4-typed GatherBlockQuantized embedding); the BERT-like
encoder of ``tests/ops/test_microsoft_attention.py`` and its dynamically
quantized twin (``onnxruntime.quantization.quantize_dynamic``: QAttention,
QEmbedLayerNormalization, DynamicQuantizeLinear + MatMulInteger), that twin
and a quantized tiny-qwen after ONNX Runtime's graph fusions
(DynamicQuantizeMatMul, MatMulIntegerToFloat, QuickGelu); a small GPT-2-like
decoder with Attention past/present built here (the tests have none), with
and without an attention mask.

Each graph loses its value_info and its outputs' shapes, keeps the symbolic
input dims the builders give, and goes through
``onnx.shape_inference.infer_shapes(strict_mode=True, data_prop=True)`` with
our schemas:

(a) every node output gets an element type and a shape of known rank; dims
    onnx leaves unknown (``unk__N``) are listed in ``UNKNOWN_DIMS``;
(b) ONNX Runtime's ``SymbolicShapeInference`` infers the same types and
    shapes, up to a consistent renaming of symbolic dims, except the values
    listed in ``ORT_DIFFERS`` (ORT is wrong on each: see the table);
(c) with the inputs bound to the sizes of a prefill and a decode feed, every
    value's inferred shape is fully static and equals what a real run with our
    kernels gives (``ReferenceEvaluator`` asked for every intermediate).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "tests" / "ops"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from test_microsoft_attention import bert_like_model  # noqa: E402

from benchmarks.decoders import TINY, build_decoder, make_feeds  # noqa: E402

MS = "com.microsoft"


# ------------------------------------------------------------------ helpers

def _dims(tt) -> list | None:
    if not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else
            (d.dim_param if d.HasField("dim_param") else None) for d in tt.shape.dim]


def _values(model) -> dict:
    """name -> (element type, dims) of every value_info and output."""
    g = model.graph
    return {v.name: (v.type.tensor_type.elem_type, _dims(v.type.tensor_type))
            for v in list(g.value_info) + list(g.output)}


def stripped(model) -> onnx.ModelProto:
    """A copy without value_info and with the outputs' shapes removed (their
    element types kept): inference must find every shape."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    del model.graph.value_info[:]
    outputs = [oh.make_tensor_value_info(o.name, o.type.tensor_type.elem_type, None)
               for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    return model


def with_inputs(model, shapes: dict) -> onnx.ModelProto:
    """A copy whose graph inputs named in ``shapes`` get those dims."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for i in model.graph.input:
        if i.name in shapes:
            i.CopyFrom(oh.make_tensor_value_info(i.name, i.type.tensor_type.elem_type,
                                                 list(shapes[i.name])))
    return model


def node_outputs(model) -> list[str]:
    return [o for n in model.graph.node for o in n.output if o]


def ours(model) -> dict:
    """Strict onnx inference with our schemas; the result passes the full checker."""
    out = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True,
                                            data_prop=True)
    onnx.checker.check_model(out, full_check=True)
    return _values(out)


def theirs(model) -> dict:
    """ONNX Runtime's SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    (call from a temporary cwd: it may write sym_shape_infer_temp.onnx)."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    return _values(SymbolicShapeInference.infer_shapes(model, auto_merge=True))


def real_run(model, feeds) -> dict:
    """name -> (element type, shape) of every node output in a run with our kernels."""
    sess = ReferenceEvaluator(model, verbose=0)
    olc.register_kernels_for_session(sess)
    names = node_outputs(model)
    return {name: (oh.np_dtype_to_tensor_dtype(np.asarray(value).dtype), list(np.shape(value)))
            for name, value in zip(names, sess.run(names, feeds))}


def disagreements(mine: dict, other: dict, names, inputs) -> dict:
    """The values whose (type, shape) differ between ``mine`` and ``other``
    once the symbolic dims of ``mine`` are renamed consistently into those of
    ``other``: the graph inputs' dims keep their names; other named dims map
    one to one; an unknown dim of ours (onnx's ``unk__N``) may stand for any
    symbolic dim of theirs (several of ours for one: onnx names each unknown
    afresh) except a graph input's dim, which would be a dim we failed to name."""
    fixed = {d for _, dims in inputs.values() for d in dims or () if isinstance(d, str)}
    forward = {d: d for d in fixed}
    backward = dict(forward)
    out = {}
    for name in names:
        a, b = mine.get(name), other.get(name)
        if a is None or b is None or a[0] != b[0] or a[1] is None or b[1] is None \
                or len(a[1]) != len(b[1]):
            out[name] = (a, b)
            continue
        fwd, bwd, ok = dict(forward), dict(backward), True
        for x, y in zip(a[1], b[1]):
            if not (isinstance(x, str) and isinstance(y, str)):
                ok = x == y
            elif fwd.setdefault(x, y) != y:
                ok = False
            elif x.startswith("unk__"):
                ok = y not in fixed
            else:
                ok = bwd.setdefault(y, x) == x
            if not ok:
                break
        if ok:
            forward, backward = fwd, bwd
        else:
            out[name] = (a, b)
    return out


def _input_dims(model) -> dict:
    return {i.name: (i.type.tensor_type.elem_type, _dims(i.type.tensor_type))
            for i in model.graph.input}


# ------------------------------------------------------------------ graphs

def decoder(config, dtype):
    """A builder decoder: a prefill (batch 2, 5 tokens) and a decode step
    (batch 2, 1 token after 6; GQA's kernel takes more than one new token
    with a past only at batch 1)."""
    def make():
        return build_decoder(config, dtype), [make_feeds(config, 5, 0, batch=2),
                                              make_feeds(config, 1, 6, batch=2, seed=2)]
    return make


FEATURES = {
    "qmoe8": (replace(TINY[0], name="tiny-gpt-oss-8bit", intermediate=64, experts=4,
                      expert_bits=8), "float32"),
    "qmoe4": (replace(TINY[0], name="tiny-gpt-oss-4bit", intermediate=64, experts=4,
                      expert_bits=4), "int4"),
    "typed-embedding": (replace(TINY[0], name="tiny-qwen-int4-embedding",
                                typed_embedding=True), "int4"),
    **{f"kv{bits}-{quant.lower()}": (
        replace(TINY[0], name=f"tiny-qwen-kv{bits}", kv_cache_bits=bits, kv_quant=quant),
        "float32") for bits in (8, 4) for quant in ("PER_TENSOR", "PER_CHANNEL")},
}


def _bert_feeds(rng, b, s, vocab=50):
    return {"input_ids": rng.integers(0, vocab, (b, s)).astype(np.int32),
            "segment_ids": rng.integers(0, 2, (b, s)).astype(np.int32),
            "mask": (np.arange(s)[None, :] < rng.integers(1, s + 1, (b, 1))).astype(np.int32)}


def _symbolic_bert(model):
    return with_inputs(model, {n: ["batch", "sequence"]
                               for n in ("input_ids", "segment_ids", "mask")})


def bert():
    """The BERT-like encoder (position table of 8 rows), inputs (batch, sequence)."""
    model, _ = bert_like_model(np.random.default_rng(21), b=2, s=8)
    rng = np.random.default_rng(3)
    return _symbolic_bert(model), [_bert_feeds(rng, 2, 8), _bert_feeds(rng, 3, 5)]


def bert_quantized():
    """The BERT-like encoder quantized as test_qattention quantizes it:
    QEmbedLayerNormalization, QAttention, DynamicQuantizeLinear + MatMulInteger."""
    model, _ = bert_like_model(np.random.default_rng(21), b=2, s=8)
    rng = np.random.default_rng(4)
    return (_symbolic_bert(_quantized(model)),
            [_bert_feeds(rng, 2, 8), _bert_feeds(rng, 3, 5)])


def _ort_fused(model) -> onnx.ModelProto:
    """``model`` as ONNX Runtime's extended graph optimizations leave it (its
    fusions: DynamicQuantizeMatMul, MatMulIntegerToFloat, QuickGelu, ...),
    back in IR 10 with the default and com.microsoft opsets only."""
    import tempfile

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    with tempfile.TemporaryDirectory() as tmp:
        so.optimized_model_filepath = f"{tmp}/fused.onnx"
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        fused = onnx.load(f"{tmp}/fused.onnx")
    fused.ir_version = 10
    del fused.opset_import[:]
    fused.opset_import.extend([oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)])
    return fused


def _quantized(model) -> onnx.ModelProto:
    """``model`` through ``onnxruntime.quantization.quantize_dynamic`` (int8
    weights) as tests/ops/test_qattention.py quantizes the BERT-like graph."""
    import tempfile

    from onnxruntime import quantization

    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(model, f"{tmp}/float.onnx")
        quantization.quantize_dynamic(
            f"{tmp}/float.onnx", f"{tmp}/quantized.onnx",
            weight_type=quantization.QuantType.QInt8,
            op_types_to_quantize=["Attention", "MatMul", "EmbedLayerNormalization"],
            extra_options={"DefaultTensorType": TP.FLOAT})
        return onnx.load(f"{tmp}/quantized.onnx")


def bert_quantized_fused():
    """The quantized BERT-like encoder after ORT's fusions: QAttention,
    QEmbedLayerNormalization, DynamicQuantizeMatMul."""
    model, feeds = bert_quantized()
    return _ort_fused(model), feeds


def decoder_quantized_fused():
    """tiny-qwen (float32) with its MatMuls dynamically quantized, after ORT's
    fusions: DynamicQuantizeMatMul, MatMulIntegerToFloat (gate and up share
    one DynamicQuantizeLinear), QuickGelu (the SiLU), GroupQueryAttention."""
    model, feeds = decoder(TINY[0], "float32")()
    return _ort_fused(_quantized(model)), feeds


def gpt2_like(layers=2, hidden=32, heads=4, vocab=64, positions=16, mask=True):
    """GPT-2 as ORT's fusions leave it: token + position embeddings, per layer
    LayerNormalization -> Attention (unidirectional, past -> present, a 2-D
    attention mask) -> MatMul -> SkipLayerNormalization (its residual sum
    out) -> MatMul -> FastGelu (bias) -> MatMul -> Add -> Add; a final
    LayerNormalization and a tied LM head.  Without ``mask`` Attention gets
    no mask_index and present's length is the sum past_sequence + sequence."""
    rng = np.random.default_rng(5)
    head = hidden // heads
    inits, nodes = [], []

    def init(name, *shape, scale=0.2, offset=0.0):
        inits.append(numpy_helper.from_array(
            (offset + rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    wte = init("wte", vocab, hidden)
    nodes += [oh.make_node("Gather", [wte, "input_ids"], ["tok"]),
              oh.make_node("Gather", [init("wpe", positions, hidden), "position_ids"], ["pos"]),
              oh.make_node("Add", ["tok", "pos"], ["h0"])]
    x = "h0"
    for i in range(layers):
        nodes += [
            oh.make_node("LayerNormalization", [x, init(f"ln1_g{i}", hidden, offset=1.0),
                                                init(f"ln1_b{i}", hidden)], [f"ln1_{i}"],
                         axis=-1, epsilon=1e-5),
            oh.make_node("Attention", [f"ln1_{i}", init(f"qkv_w{i}", hidden, 3 * hidden),
                                       init(f"qkv_b{i}", 3 * hidden),
                                       "attention_mask" if mask else "",
                                       f"past_{i}"], [f"att{i}", f"present_{i}"],
                         domain=MS, num_heads=heads, unidirectional=1),
            oh.make_node("MatMul", [f"att{i}", init(f"o_w{i}", hidden, hidden)], [f"o{i}"]),
            oh.make_node("SkipLayerNormalization",
                         [f"o{i}", x, init(f"ln2_g{i}", hidden, offset=1.0),
                          init(f"ln2_b{i}", hidden), init(f"o_b{i}", hidden)],
                         [f"ln2_{i}", "", "", f"res{i}"], domain=MS, epsilon=1e-5),
            oh.make_node("MatMul", [f"ln2_{i}", init(f"fc1_w{i}", hidden, 4 * hidden)],
                         [f"fc1_{i}"]),
            oh.make_node("FastGelu", [f"fc1_{i}", init(f"fc1_b{i}", 4 * hidden)], [f"act{i}"],
                         domain=MS),
            oh.make_node("MatMul", [f"act{i}", init(f"fc2_w{i}", 4 * hidden, hidden)],
                         [f"fc2_{i}"]),
            oh.make_node("Add", [f"fc2_{i}", init(f"fc2_b{i}", hidden)], [f"mlp{i}"]),
            oh.make_node("Add", [f"res{i}", f"mlp{i}"], [f"h{i + 1}"])]
        x = f"h{i + 1}"
    nodes += [oh.make_node("LayerNormalization", [x, init("lnf_g", hidden, offset=1.0),
                                                  init("lnf_b", hidden)], ["lnf"], axis=-1),
              oh.make_node("Transpose", [wte], ["wte_t"], perm=[1, 0]),
              oh.make_node("MatMul", ["lnf", "wte_t"], ["logits"])]
    past = [2, "batch", heads, "past_sequence", head]
    inputs = [oh.make_tensor_value_info("input_ids", TP.INT64, ["batch", "sequence"]),
              oh.make_tensor_value_info("position_ids", TP.INT64, ["batch", "sequence"]),
              oh.make_tensor_value_info("attention_mask", TP.INT32, ["batch", "total_sequence"])]
    if not mask:
        del inputs[-1]
    inputs += [oh.make_tensor_value_info(f"past_{i}", TP.FLOAT, past) for i in range(layers)]
    outputs = [oh.make_tensor_value_info("logits", TP.FLOAT, ["batch", "sequence", vocab])]
    outputs += [oh.make_tensor_value_info(f"present_{i}", TP.FLOAT, None)
                for i in range(layers)]
    model = oh.make_model(oh.make_graph(nodes, "gpt2_like", inputs, outputs, inits),
                          opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=10)

    def feeds(b, s, p):
        f = {"input_ids": rng.integers(0, vocab, (b, s)),
             "position_ids": np.tile(np.arange(p, p + s), (b, 1)),
             "attention_mask": np.ones((b, p + s), np.int32)}
        if not mask:
            del f["attention_mask"]
        for i in range(layers):
            f[f"past_{i}"] = rng.standard_normal((2, b, heads, p, head)).astype(np.float32)
        return f

    return model, [feeds(2, 5, 3), feeds(3, 1, 8)]


GRAPHS = {
    **{f"{c.name}-{dtype}": decoder(c, dtype) for c in TINY for dtype in ("float32", "int4")},
    **{name: decoder(c, dtype) for name, (c, dtype) in FEATURES.items()},
    "bert": bert,
    "bert-quantized": bert_quantized,
    "bert-quantized-fused": bert_quantized_fused,
    "tiny-qwen-quantized-fused": decoder_quantized_fused,
    "gpt2-like": gpt2_like,
    "gpt2-like-no-mask": lambda: gpt2_like(mask=False),
}


# ------------------------------------------------- known gaps and differences

def _gqa_presents(model) -> set:
    return {o for n in model.graph.node if n.op_type == "GroupQueryAttention"
            for o in n.output[1:3] if o}


def expected_unknown(model) -> set:
    """The values whose shape keeps an unknown dim (``unk__N``) on symbolic inputs:
    - GroupQueryAttention's present_key/present_value length: the kernel gives
      max(P, total_sequence_length) and total_sequence_length is a value (the
      mask's width through Shape -> Gather -> Cast): onnx's data propagation
      gives it as the symbol "total_sequence_length", whose max with
      "past_sequence_length" has no name (bound to sizes, it is static: (c));
    - QMoE graphs: onnx's own Reshape(x, [-1, H]) names the rows (batch *
      sequence) afresh, and the router MatMul/Add and QMoE keep that dim."""
    unknown = _gqa_presents(model)
    for n in model.graph.node:
        if "/moe/" in n.name and n.op_type in ("MatMul", "Add", "QMoE") or \
                n.name.endswith("/moe/Reshape"):
            unknown.add(n.output[0])
    return unknown


def _packed_gbq(model, values) -> list:
    """GatherBlockQuantized nodes reading packed uint8 codes."""
    return [n for n in model.graph.node if n.op_type == "GatherBlockQuantized"
            and values.get(n.input[0], (None,))[0] == TP.UINT8]


def expected_ort_differences(model, values) -> set:
    """Where ONNX Runtime's SymbolicShapeInference is wrong (our inference
    follows the kernel, which (c) checks on real runs):
    - GroupQueryAttention present_key/present_value: ORT copies past_key's
      shape (length P: 0 on a prefill where the kernel gives S) and the
      query's element type (float where a quantized cache is int8/uint8);
    - GatherBlockQuantized on packed uint8 codes: ORT treats it as a Gather
      and keeps the packed byte count where the kernel gives 8 / bits codes
      a byte (the comparison cuts the graph there: ORT's own MatMulNBits
      handler then fails its K merge, AssertionError, and with our schemas
      registered onnx's inference inside SSI rejects K as well)."""
    return _gqa_presents(model) | {n.output[0] for n in _packed_gbq(model, values)}


def ort_inferred(model, values) -> dict:
    """ORT's SymbolicShapeInference; a graph with packed GatherBlockQuantized
    goes in two parts: the prefix up to each such node (ORT's result for its
    output) and the rest, that output a graph input of our inferred shape."""
    packed = _packed_gbq(model, values)
    if not packed:
        return theirs(model)
    rest = onnx.ModelProto.FromString(model.SerializeToString())
    result = {}
    for node in packed:
        position = list(model.graph.node).index(node)
        prefix = onnx.ModelProto.FromString(model.SerializeToString())
        del prefix.graph.node[position + 1:]
        del prefix.graph.output[:]
        prefix.graph.output.append(oh.make_tensor_value_info(node.output[0], TP.UNDEFINED, None))
        result[node.output[0]] = theirs(prefix)[node.output[0]]
        rest.graph.node.remove(next(n for n in rest.graph.node if n.name == node.name))
        elem, dims = values[node.output[0]]
        rest.graph.input.append(oh.make_tensor_value_info(node.output[0], elem, dims))
    result.update({k: v for k, v in theirs(rest).items() if k not in result})
    return result


# ------------------------------------------------------------------ tests

@pytest.fixture(scope="module")
def graphs():
    cache = {}

    def get(name):
        if name not in cache:
            model, feeds = GRAPHS[name]()
            cache[name] = (stripped(model), feeds)
        return cache[name]
    return get


def _unknown(dims) -> bool:
    return any(d is None or isinstance(d, str) and d.startswith("unk__") for d in dims)


@pytest.mark.parametrize("name", GRAPHS)
def test_every_value_gets_a_type_and_shape(name, graphs):
    """(a) every node output: element type set, rank known; the values left
    with an unknown dim are exactly those ``expected_unknown`` explains."""
    model, _ = graphs(name)
    values = ours(model)
    names = node_outputs(model)
    missing = [n for n in names if n not in values or not values[n][0] or values[n][1] is None]
    assert not missing, f"{name}: no type or shape for {missing}"
    unknown = {n for n in names if _unknown(values[n][1])}
    assert unknown == expected_unknown(model) & set(names), name
    for o in model.graph.output:
        assert values[o.name][0] == o.type.tensor_type.elem_type


@pytest.mark.parametrize("name", GRAPHS)
def test_agrees_with_onnxruntime_symbolic_shape_inference(name, graphs, tmp_path,
                                                           monkeypatch):
    """(b) equal to SymbolicShapeInference up to a one-to-one renaming of the
    symbolic dims, except where ORT is wrong (``expected_ort_differences``),
    and there they still differ."""
    monkeypatch.chdir(tmp_path)
    model, _ = graphs(name)
    values = ours(model)
    names = node_outputs(model)
    differ = disagreements(values, ort_inferred(model, values), names, _input_dims(model))
    assert set(differ) == expected_ort_differences(model, values) & set(names), \
        {k: v for k, v in differ.items() if k not in expected_ort_differences(model, values)}


@pytest.mark.parametrize("name", GRAPHS)
def test_bound_shapes_equal_a_real_run(name, graphs, tmp_path, monkeypatch):
    """(c) the inputs bound to a prefill's and a decode step's sizes: every
    value's inferred type and shape is static and equals a real run's; ORT's
    on the same bound graph equals it too, except where it is wrong."""
    monkeypatch.chdir(tmp_path)
    model, feed_sets = graphs(name)
    names = node_outputs(model)
    for feeds in feed_sets:
        bound = with_inputs(model, {k: v.shape for k, v in feeds.items()})
        values = ours(bound)
        got = real_run(model, feeds)
        wrong = {n: (values.get(n), got[n]) for n in names if values.get(n) != got[n]}
        assert not wrong, f"{name} {sorted((k, v.shape) for k, v in feeds.items())}: {wrong}"
        ort_values = ort_inferred(bound, values)
        ort_wrong = {n for n in names if ort_values.get(n) != got[n]}
        assert ort_wrong == expected_ort_differences(bound, values) & set(names), name


def _gqa_total_from_mask(mask_dims, data_prop):
    """A GroupQueryAttention whose total_sequence_length is the mask's width
    through Shape -> Gather -> Cast, as the builders compute it."""
    f = TP.FLOAT
    nodes = [
        oh.make_node("Shape", ["mask"], ["shape"]),
        oh.make_node("Constant", [], ["one"], value=oh.make_tensor("one", TP.INT64, [], [1])),
        oh.make_node("Gather", ["shape", "one"], ["total64"], axis=0),
        oh.make_node("Cast", ["total64"], ["total"], to=TP.INT32),
        oh.make_node("GroupQueryAttention", ["q", "", "", "pk", "pv", "seqlens", "total"],
                     ["y", "present_key", "present_value"], domain=MS, num_heads=2,
                     kv_num_heads=1)]
    b = mask_dims[0]
    graph = oh.make_graph(nodes, "gqa", [
        oh.make_tensor_value_info("q", f, [b, 1, 32]),
        oh.make_tensor_value_info("pk", f, [b, 1, 6, 8]),
        oh.make_tensor_value_info("pv", f, [b, 1, 6, 8]),
        oh.make_tensor_value_info("seqlens", TP.INT32, [b]),
        oh.make_tensor_value_info("mask", TP.INT64, mask_dims)],
        [oh.make_tensor_value_info(n, TP.UNDEFINED, None)
         for n in ("y", "present_key", "present_value")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                oh.make_opsetid(MS, 1)], ir_version=10)
    out = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=data_prop)
    return _values(out)["present_key"][1]


def test_group_query_attention_reads_a_propagated_total_sequence_length():
    """Schema fix: total_sequence_length computed from shapes (not a constant)
    is read from onnx's data propagation, so a bound graph's present length is
    static (max(P, total)); without data_prop or with a symbolic width it stays
    unknown."""
    assert _gqa_total_from_mask([2, 7], data_prop=True) == [2, 1, 7, 8]
    assert _gqa_total_from_mask([2, 4], data_prop=True) == [2, 1, 6, 8]
    assert _unknown(_gqa_total_from_mask([2, 7], data_prop=False))
    assert _unknown(_gqa_total_from_mask(["b", "t"], data_prop=True))


# The operators outside the standard set each graph must hold (the coverage
# the tests above claim).
COVERS = {
    "tiny-qwen-float32": {"GroupQueryAttention", "SimplifiedLayerNormalization",
                          "SkipSimplifiedLayerNormalization"},
    "tiny-qwen-int4": {"GatherBlockQuantized", "MatMulNBits", "GroupQueryAttention"},
    "qmoe8": {"QMoE"},
    "qmoe4": {"QMoE", "MatMulNBits"},
    "typed-embedding": {"GatherBlockQuantized", "MatMulNBits"},
    "kv4-per_channel": {"GroupQueryAttention"},
    "bert": {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"},
    "bert-quantized": {"QEmbedLayerNormalization", "QAttention", "SkipLayerNormalization",
                       "BiasGelu"},
    "bert-quantized-fused": {"QEmbedLayerNormalization", "QAttention", "DynamicQuantizeMatMul"},
    "tiny-qwen-quantized-fused": {"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QuickGelu",
                                  "GroupQueryAttention"},
    "gpt2-like": {"Attention", "SkipLayerNormalization", "FastGelu"},
}


@pytest.mark.parametrize("name", sorted(COVERS))
def test_graph_holds_the_operators(name, graphs):
    model, _ = graphs(name)
    ops = {n.op_type for n in model.graph.node}
    assert COVERS[name] <= ops, COVERS[name] - ops
    if name == "gpt2-like":  # Attention with past and present
        att = next(n for n in model.graph.node if n.op_type == "Attention")
        assert att.input[4] and att.output[1]
