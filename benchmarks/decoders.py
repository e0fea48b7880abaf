"""Decoder graphs with the structure onnxruntime-genai's model builder emits
for Qwen2 and Llama on CPU, built in code with random weights.

The graph, as the builder writes it for ``execution_provider=cpu``:

* inputs ``input_ids`` (int64 [B, S]), ``attention_mask`` (int64 [B, T]),
  ``past_key_values.{i}.key/value`` ([B, kv_heads, P, head_size]);
  outputs ``logits`` ([B, S, vocab]), ``present.{i}.key/value``;
* ``seqlens_k`` and ``total_sequence_length`` of GroupQueryAttention come
  from the mask: ReduceSum -> Sub -> Cast and Shape -> Gather -> Cast;
* tied embeddings: float32 gathers from a ``Transpose`` of the LM head's
  [hidden, vocab] weight, int4 from a ``Reshape`` of the LM head's packed
  codes through GatherBlockQuantized;
* per layer: (Skip)SimplifiedLayerNormalization, one packed QKV projection
  (MatMul or MatMulNBits, plus Add where the model has biases: Qwen2),
  GroupQueryAttention with ``do_rotary=1`` and cos/sin caches, the output
  projection, SkipSimplifiedLayerNormalization, the SwiGLU MLP
  (gate, up, Sigmoid, Mul, Mul, down);
* a final SkipSimplifiedLayerNormalization and the LM head (MatMul or
  MatMulNBits) writing ``logits``;
* small constants are ``Constant`` nodes named ``/model/constants/...``.

int4 is what the builder's default quantization writes: symmetric 4-bit
blocks of 32 (no zero points), ``accuracy_level=4``; here the packed codes
and scales are drawn directly.  Differences from a real export, none of which
changes the work done per step: ``local_window_size=-1`` (Qwen2's config says
32768 but the window is off), a cos/sin cache of ``max_positions`` rows
instead of the model's context length, and Llama 3's rope scaling left out.

Options for the generation loop's tests: sliding-window layers
(``DecoderConfig.window``: GPT-OSS's window-sized caches) and a decoder fed
``inputs_embeds`` by a separate embedding model (``build_decoder(...,
inputs_embeds=True)`` with :func:`build_embedding`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
OPSET = 21
IR_VERSION = 10  # goes with opset 21; some ORT builds do not read newer IRs
BLOCK_SIZE = 32
ACCURACY_LEVEL = 4
DTYPES = ("float32", "int4")


@dataclass(frozen=True)
class DecoderConfig:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    qkv_bias: bool = False
    rope_theta: float = 10000.0
    epsilon: float = 1e-6
    max_positions: int = 4096
    # GPT-OSS's mixture of experts in place of the SwiGLU MLP when > 0: a
    # router MatMul + Add and one QMoE of ``expert_bits`` blocks of 32
    # (fused, clamped SwiGLU), ``experts_per_token`` experts a token.
    experts: int = 0
    experts_per_token: int = 2
    expert_bits: int = 8
    # GroupQueryAttention's quantized KV cache when 8 or 4: int8 caches, or
    # uint8 ones of two 4-bit codes a byte, with float32 dequantization
    # scales (``kv_quant``: PER_TENSOR or PER_CHANNEL) as initializers.
    kv_cache_bits: int = 0
    kv_quant: str = "PER_TENSOR"
    # int4 only: the embedding's GatherBlockQuantized reads an INT4-typed
    # [vocab, hidden] table (the LM head's codes as signed values) instead of
    # a Reshape of the LM head's packed uint8 codes.
    typed_embedding: bool = False
    # Sliding-window attention when > 0, as GPT-OSS's: the windowed layers'
    # GroupQueryAttention sees the last ``window`` keys (local_window_size)
    # and keeps window-sized caches (sliding_window_cache=1), their past and
    # present declared with the static capacity ``window``.  Every layer, or
    # with ``window_alternate`` the even ones (GPT-OSS alternates sliding
    # and full attention, the first layer sliding).
    window: int = 0
    window_alternate: bool = False

    def windowed(self, layer: int) -> bool:
        """Whether ``layer`` attends over a sliding-window cache."""
        return self.window > 0 and not (self.window_alternate and layer % 2)

    @property
    def cache_type(self) -> int:
        """The element type of the KV cache inputs and outputs."""
        return {0: TensorProto.FLOAT, 8: TensorProto.INT8, 4: TensorProto.UINT8}[
            self.kv_cache_bits]

    @property
    def cache_width(self) -> int:
        """Elements of a cached head vector: two 4-bit codes a byte."""
        return self.head_size // 2 if self.kv_cache_bits == 4 else self.head_size

    @property
    def head_size(self) -> int:
        return self.hidden // self.heads

    def with_layers(self, layers: int) -> DecoderConfig:
        return replace(self, name=f"{self.name}-{layers}l", layers=layers)


QWEN2_0_5B = DecoderConfig("qwen2-0.5b", layers=24, hidden=896, heads=14, kv_heads=2,
                           intermediate=4864, vocab=151936, qkv_bias=True,
                           rope_theta=1e6, epsilon=1e-6)
LLAMA_3_2_1B = DecoderConfig("llama3.2-1b", layers=16, hidden=2048, heads=32, kv_heads=8,
                             intermediate=8192, vocab=128256, rope_theta=5e5, epsilon=1e-5)
# Two layers each, as small as the builder's structure allows (head sizes
# 16, 32 and 64; one with biases, one with a single KV head, one without GQA).
TINY = (
    DecoderConfig("tiny-qwen", layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128,
                  vocab=512, qkv_bias=True, rope_theta=1e6),
    DecoderConfig("tiny-llama", layers=2, hidden=128, heads=4, kv_heads=1, intermediate=352,
                  vocab=1024, rope_theta=5e5, epsilon=1e-5),
    DecoderConfig("tiny-mha", layers=2, hidden=256, heads=4, kv_heads=4, intermediate=512,
                  vocab=2048),
)


class _Graph:
    """Nodes, initializers and shared constants of the graph being built."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.constants: set[str] = set()

    def node(self, op_type, inputs, name, outputs=None, domain="", **attrs) -> str:
        """Adds a node; its single output is ``{name}/output_0`` by default."""
        outputs = outputs or [f"{name}/output_0"]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=name, domain=domain,
                                           **attrs))
        return outputs[0]

    def const(self, value, dtype=np.int64) -> str:
        """A ``Constant`` node named after its value, made once."""
        array = np.array(value, dtype=dtype)
        onnx_type = TensorProto.DataType.Name(helper.np_dtype_to_tensor_dtype(array.dtype))
        name = f"/model/constants/{onnx_type}/{value}"
        if name not in self.constants:
            self.constants.add(name)
            self.nodes.append(helper.make_node(
                "Constant", [], [name], name=name.replace("constants", "constant_nodes"),
                value=numpy_helper.from_array(array, name)))
        return name

    def init(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def normal(self, shape, std: float) -> np.ndarray:
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def norm_weight(self, name: str, hidden: int) -> str:
        return self.init(name, 1.0 + self.normal((hidden,), 0.1))


def _linear(g: _Graph, dtype: str, name: str, x: str, k: int, n: int,
            weight: str | None = None, output: str | None = None) -> str:
    """A projection x[..., k] @ W[k, n], named as the builder names it."""
    if dtype == "float32":
        if weight is None:
            weight = g.init(name[1:].replace("/", ".") + ".weight",
                            g.normal((k, n), 1.0 / np.sqrt(k)))
        return g.node("MatMul", [x, weight], name, outputs=[output] if output else None)
    name += "NBits"
    if weight is None:
        weight, scales = _int4_weight(g, name[1:].replace("/", "."), k, n)
    else:
        weight, scales = weight
    return g.node("MatMulNBits", [x, weight, scales], name, domain=MS,
                  outputs=[output] if output else None, K=k, N=n, bits=4,
                  block_size=BLOCK_SIZE, accuracy_level=ACCURACY_LEVEL)


def _int4_weight(g: _Graph, base: str, k: int, n: int) -> tuple[str, str]:
    """Random packed codes [n, k/32, 16] and scales [n, k/32]: symmetric
    4-bit blocks (code - 8) * scale whose values have a std near 1/sqrt(k)."""
    if k % BLOCK_SIZE:
        raise ValueError(f"int4 decoder: K={k} is not a multiple of {BLOCK_SIZE}")
    blocks = k // BLOCK_SIZE
    codes = g.rng.integers(0, 256, size=(n, blocks, BLOCK_SIZE // 2), dtype=np.uint8)
    scales = g.rng.uniform(0.5, 1.5, size=(n, blocks)).astype(np.float32)
    scales *= np.float32(1.0 / (4.6 * np.sqrt(k)))
    return g.init(f"{base}.weight_Q4", codes), g.init(f"{base}.weight_scales", scales)


def _mask_subgraph(g: _Graph) -> tuple[str, str]:
    """seqlens_k (int32 [B]) and total_sequence_length (int32 scalar) from
    attention_mask, as the builder's GQA mask reformatting computes them."""
    base = "/model/attn_mask_reformat/attn_mask_subgraph"
    reduced = g.node("ReduceSum", ["attention_mask", g.const([1])], f"{base}/ReduceSum",
                     keepdims=0)
    sub = g.node("Sub", [reduced, g.const([1])], f"{base}/Sub")
    seqlens_k = g.node("Cast", [sub], f"{base}/Sub/Cast", to=TensorProto.INT32)
    shape = g.node("Shape", ["attention_mask"], f"{base}/Shape")
    total = g.node("Gather", [shape, g.const(1)], f"{base}/Gather", axis=0)
    total_len = g.node("Cast", [total], f"{base}/Gather/Cast", to=TensorProto.INT32)
    return seqlens_k, total_len


def _rotary_caches(g: _Graph, c: DecoderConfig) -> tuple[str, str]:
    """cos/sin caches [max_positions, head_size/2], the halves GQA reads."""
    half = c.head_size // 2
    inv_freq = 1.0 / c.rope_theta ** (np.arange(0, c.head_size, 2, dtype=np.float64)
                                      / c.head_size)
    angles = np.outer(np.arange(c.max_positions, dtype=np.float64), inv_freq)[:, :half]
    return (g.init("cos_cache", np.cos(angles).astype(np.float32)),
            g.init("sin_cache", np.sin(angles).astype(np.float32)))


def _embedding(g: _Graph, c: DecoderConfig, dtype: str, gather: bool = True):
    """The tied embedding: its output and the LM head's weight (without
    ``gather``, only the weight: drawn all the same, so that the rest of the
    decoder's weights stay those of the decoder with its embedding)."""
    base = "/model/embed_tokens"
    if dtype == "float32":
        weight = g.init("lm_head.MatMul.weight", g.normal((c.hidden, c.vocab), 0.05))
        if not gather:
            return None, weight
        table = g.node("Transpose", [weight], f"{base}/Transpose", perm=[1, 0])
        return g.node("Gather", [table, "input_ids"], f"{base}/Gather"), weight
    weight = _int4_weight(g, "lm_head.MatMul", c.hidden, c.vocab)
    if not gather:
        return None, weight
    if c.typed_embedding:
        # code c of the LM head is the value c - 8; the low nibble comes first
        codes = numpy_helper.to_array(g.initializers[-2]).reshape(c.vocab, c.hidden // 2)
        values = np.stack([codes & 15, codes >> 4], axis=-1).reshape(-1).astype(np.int64) - 8
        flat = "model.embed_tokens.qweight"
        g.initializers.append(helper.make_tensor(flat, TensorProto.INT4, [c.vocab, c.hidden],
                                                 values.tolist()))
    else:
        flat = g.node("Reshape", [weight[0], g.const([c.vocab, c.hidden // 2])],
                      f"{base}/Reshape")
    out = g.node("GatherBlockQuantized", [flat, "input_ids", weight[1]],
                 f"{base}/GatherBlockQuantized", domain=MS, bits=4, block_size=BLOCK_SIZE,
                 gather_axis=0, quantize_axis=1)
    return out, weight


def _layernorm(g: _Graph, c: DecoderConfig, layer: int, location: str, root: str,
               skip: str | None, last: bool = False) -> tuple[str, str]:
    """(normalized, residual sum): the residual stays ``root`` without skip."""
    base = f"/model/layers.{layer}/{location}_layernorm"
    weight = g.norm_weight(f"model.layers.{layer}.{location}_layernorm.weight", c.hidden)
    if skip is None:
        out = g.node("SimplifiedLayerNormalization", [root, weight], f"{base}/LayerNorm",
                     axis=-1, epsilon=c.epsilon, stash_type=1)
        return out, root
    outputs = [f"{base}/output_0"] if last else [f"{base}/output_0", "", "", f"{base}/output_3"]
    g.node("SkipSimplifiedLayerNormalization", [root, skip, weight], f"{base}/SkipLayerNorm",
           outputs=outputs, domain=MS, epsilon=c.epsilon)
    return outputs[0], outputs[-1]


def _attention(g: _Graph, c: DecoderConfig, dtype: str, layer: int, x: str,
               mask: tuple[str, str], caches: tuple[str, str]) -> str:
    base = f"/model/layers.{layer}/attn"
    q_size, kv_size = c.heads * c.head_size, c.kv_heads * c.head_size
    qkv = _linear(g, dtype, f"{base}/qkv_proj/MatMul", x, c.hidden, q_size + 2 * kv_size)
    if c.qkv_bias:
        bias = g.init(f"model.layers.{layer}.attn.qkv_proj.bias",
                      g.normal((q_size + 2 * kv_size,), 0.1))
        qkv = g.node("Add", [qkv, bias], f"{base}/qkv_proj/Add")
    inputs = [qkv, "", "", f"past_key_values.{layer}.key", f"past_key_values.{layer}.value",
              *mask, *caches]
    attrs = dict(local_window_size=-1)
    if c.windowed(layer):
        attrs.update(local_window_size=c.window, sliding_window_cache=1)
    if c.kv_cache_bits:
        shape = (1,) if c.kv_quant == "PER_TENSOR" else (1, c.kv_heads, 1, c.head_size)
        # a scale per code unit that covers a value range of about +-4
        unit = 4.0 / (127 if c.kv_cache_bits == 8 else 7)
        inputs += ["", "", ""] + [
            g.init(f"model.layers.{layer}.attn.{kind}_scale",
                   (g.rng.uniform(0.8, 1.2, size=shape) * unit).astype(np.float32))
            for kind in ("k", "v")]
        attrs.update(k_quant_type=c.kv_quant, v_quant_type=c.kv_quant,
                     kv_cache_bit_width=c.kv_cache_bits)
    gqa = g.node(
        "GroupQueryAttention", inputs, f"{base}/GroupQueryAttention",
        outputs=[f"{base}/GroupQueryAttention/output_0", f"present.{layer}.key",
                 f"present.{layer}.value"],
        domain=MS, num_heads=c.heads, kv_num_heads=c.kv_heads,
        scale=float(1.0 / np.sqrt(c.head_size)), softcap=0.0, do_rotary=1,
        rotary_interleaved=0, **attrs)
    return _linear(g, dtype, f"{base}/o_proj/MatMul", gqa, q_size, c.hidden)


def _mlp(g: _Graph, c: DecoderConfig, dtype: str, layer: int, x: str) -> str:
    base = f"/model/layers.{layer}/mlp"
    gate = _linear(g, dtype, f"{base}/gate_proj/MatMul", x, c.hidden, c.intermediate)
    up = _linear(g, dtype, f"{base}/up_proj/MatMul", x, c.hidden, c.intermediate)
    sigmoid = g.node("Sigmoid", [gate], f"{base}/act_fn/Sigmoid")
    silu = g.node("Mul", [gate, sigmoid], f"{base}/act_fn/Mul")
    product = g.node("Mul", [silu, up], f"{base}/Mul")
    return _linear(g, dtype, f"{base}/down_proj/MatMul", product, c.intermediate, c.hidden)


def _moe(g: _Graph, c: DecoderConfig, layer: int, x: str) -> str:
    """GPT-OSS's MLP as the builder writes it for CPU: the tokens as rows,
    router logits from a MatMul with bias, one QMoE over quantized experts
    (gate and up interleaved in FC1, SwiGLU clamped at 7 with alpha 1.702),
    the rows back in the input's shape."""
    base = f"/model/layers.{layer}/moe"
    name = f"model.layers.{layer}.moe"
    E, H, inter, bits = c.experts, c.hidden, c.intermediate, c.expert_bits
    rows = g.node("Reshape", [x, g.const([-1, H])], f"{base}/Reshape")
    router = g.init(f"{name}.router.weight", g.normal((H, E), 1.0 / np.sqrt(H)))
    logits = g.node("MatMul", [rows, router], f"{base}/router/MatMul")
    logits = g.node("Add", [logits, g.init(f"{name}.router.bias", g.normal((E,), 0.1))],
                    f"{base}/router/Add")

    def experts(kind: str, n: int, k: int) -> tuple[str, str]:
        codes = g.rng.integers(0, 256, size=(E, n, k * bits // 8), dtype=np.uint8)
        unit = 1.0 / (np.sqrt(k) * (1 << (bits - 2)))
        scales = (g.rng.uniform(0.5, 1.5, size=(E, n, k // BLOCK_SIZE)) * unit)
        return (g.init(f"{name}.experts.{kind}.qweight", codes),
                g.init(f"{name}.experts.{kind}.scales", scales.astype(np.float32)))

    w1, s1 = experts("gate_up_proj", 2 * inter, H)
    w2, s2 = experts("down_proj", H, inter)
    b1 = g.init(f"{name}.experts.gate_up_proj.bias", g.normal((E, 2 * inter), 0.1))
    b2 = g.init(f"{name}.experts.down_proj.bias", g.normal((E, H), 0.1))
    out = g.node("QMoE", [rows, logits, w1, s1, b1, w2, s2, b2], f"{base}/QMoE", domain=MS,
                 k=c.experts_per_token, activation_type="swiglu", swiglu_fusion=1,
                 activation_alpha=1.702, activation_beta=1.0, swiglu_limit=7.0,
                 normalize_routing_weights=1, expert_weight_bits=bits,
                 block_size=BLOCK_SIZE)
    shape = g.node("Shape", [x], f"{base}/Shape")
    return g.node("Reshape", [out, shape], f"{base}/Reshape_1")


def _check(config: DecoderConfig, dtype: str, what: str) -> None:
    """Rejects a dtype or head layout the builders cannot make."""
    c = config
    if dtype not in DTYPES:
        raise ValueError(f"{what}: dtype must be one of {DTYPES}, got {dtype!r}")
    if c.hidden % c.heads or c.heads % c.kv_heads or c.head_size % 2:
        raise ValueError(f"{what}: {c.name}: inconsistent heads {c.heads}/{c.kv_heads} "
                         f"for hidden {c.hidden}")


def _model(g: _Graph, name: str, inputs: list, outputs: list) -> onnx.ModelProto:
    """The model of the nodes and initializers of ``g``."""
    graph = helper.make_graph(g.nodes, name, inputs, outputs, g.initializers)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
        ir_version=IR_VERSION, producer_name="benchmarks.decoders")


def build_embedding(config: DecoderConfig, dtype: str = "float32", seed: int = 0
                    ) -> onnx.ModelProto:
    """The embedding of ``build_decoder(config, dtype, seed)`` as a model of
    its own, ``input_ids`` (int64 [B, S]) -> ``inputs_embeds`` (float32 [B,
    S, hidden]): the same table (drawn first from ``seed``), a Gather or, for
    int4, a GatherBlockQuantized over the packed codes.  It feeds the decoder
    of ``build_decoder(config, dtype, seed, inputs_embeds=True)``: together
    they compute what the decoder with its embedding does."""
    _check(config, dtype, "build_embedding")
    g = _Graph(np.random.default_rng(seed))
    _embedding(g, config, dtype)
    g.nodes[-1].output[0] = "inputs_embeds"     # the gather's
    # the typed table leaves the LM head's packed codes unused
    used = {name for node in g.nodes for name in node.input}
    g.initializers = [i for i in g.initializers if i.name in used]
    return _model(g, f"{config.name}-{dtype}-embedding", [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                      ["batch_size", "sequence_length"])], [
        helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT,
                                      ["batch_size", "sequence_length", config.hidden])])


def build_decoder(config: DecoderConfig, dtype: str = "float32", seed: int = 0, *,
                  inputs_embeds: bool = False) -> onnx.ModelProto:
    """The builder-shaped decoder of ``config`` in ``dtype`` (float32 or int4:
    float32 activations, 4-bit weights), random weights drawn from ``seed``.
    ``inputs_embeds``: the decoder takes float32 ``inputs_embeds`` [B, S,
    hidden] (from :func:`build_embedding`) in place of ``input_ids`` and its
    embedding, as the builder's ``exclude_embeds`` writes it."""
    _check(config, dtype, "build_decoder")
    c = config
    g = _Graph(np.random.default_rng(seed))
    mask = _mask_subgraph(g)
    hidden, lm_weight = _embedding(g, c, dtype, gather=not inputs_embeds)
    hidden = "inputs_embeds" if inputs_embeds else hidden
    caches = _rotary_caches(g, c)

    residual, skip = hidden, None
    for layer in range(c.layers):
        x, residual = _layernorm(g, c, layer, "input", residual, skip)
        skip = _attention(g, c, dtype, layer, x, mask, caches)
        x, residual = _layernorm(g, c, layer, "post_attention", residual, skip)
        skip = _moe(g, c, layer, x) if c.experts else _mlp(g, c, dtype, layer, x)
    x, _ = _layernorm(g, c, c.layers, "final_norm", residual, skip, last=True)
    _linear(g, dtype, "/lm_head/MatMul", x, c.hidden, c.vocab, weight=lm_weight,
            output="logits")

    tokens = (helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT,
                                            ["batch_size", "sequence_length", c.hidden])
              if inputs_embeds else
              helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                            ["batch_size", "sequence_length"]))
    inputs = [tokens, helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                                    ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch_size", "sequence_length", c.vocab])]
    for i in range(c.layers):
        # a windowed layer's cache keeps its capacity: a static sequence axis
        past, total = ((c.window, c.window) if c.windowed(i) else
                       ("past_sequence_length", "total_sequence_length"))
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{kind}", c.cache_type,
                ["batch_size", c.kv_heads, past, c.cache_width]))
            outputs.append(helper.make_tensor_value_info(
                f"present.{i}.{kind}", c.cache_type,
                ["batch_size", c.kv_heads, total, c.cache_width]))
    return _model(g, f"{c.name}-{dtype}", inputs, outputs)


def make_feeds(config: DecoderConfig, seq: int, past: int, batch: int = 1, seed: int = 1
               ) -> dict[str, np.ndarray]:
    """Inputs of one step: ``seq`` new tokens after ``past`` cached positions
    (a random cache; a windowed layer's holds ``window`` rows), no padding."""
    rng = np.random.default_rng(seed)
    feeds = {
        "input_ids": rng.integers(0, config.vocab, size=(batch, seq), dtype=np.int64),
        "attention_mask": np.ones((batch, past + seq), dtype=np.int64),
    }
    for i in range(config.layers):
        rows = config.window if config.windowed(i) else past
        shape = (batch, config.kv_heads, rows, config.cache_width)
        for kind in ("key", "value"):
            if config.kv_cache_bits == 8:
                cache = rng.integers(-127, 128, size=shape, dtype=np.int8)
            elif config.kv_cache_bits == 4:  # codes q + 8 of q in [-7, 7], two a byte
                low, high = rng.integers(1, 16, size=(2,) + shape, dtype=np.uint8)
                cache = low | (high << 4)
            else:
                cache = rng.standard_normal(shape, dtype=np.float32)
            feeds[f"past_key_values.{i}.{kind}"] = cache
    return feeds


def next_step_feeds(config: DecoderConfig, feeds: dict, outputs: dict, token: int
                    ) -> dict[str, np.ndarray]:
    """The decode step after ``feeds``: one token, the present cache fed back."""
    batch, total = feeds["attention_mask"].shape
    step = {
        "input_ids": np.full((batch, 1), token, dtype=np.int64),
        "attention_mask": np.ones((batch, total + 1), dtype=np.int64),
    }
    for i in range(config.layers):
        for kind in ("key", "value"):
            step[f"past_key_values.{i}.{kind}"] = outputs[f"present.{i}.{kind}"]
    return step


def genai_config(c: DecoderConfig, *, context_length: int = 128, eos_token_id=(2,),
                 max_length: int = 64, share_buffer: bool = True, threads: int | None = None,
                 **model) -> dict:
    """genai_config.json for a decoder of ``c`` in model.onnx: the fields
    onnxruntime-genai requires and our Generator reads; ``threads`` its
    session's intra-op threads; ``model`` overrides fields of the "model"
    section."""
    options = {"log_id": "onnxruntime-genai", "provider_options": []}
    if threads is not None:
        options["intra_op_num_threads"] = threads
    return {
        "model": {
            "bos_token_id": 1, "context_length": context_length,
            "eos_token_id": list(eos_token_id), "pad_token_id": 0, "type": "qwen2",
            "vocab_size": c.vocab,
            "decoder": {
                "session_options": options,
                "filename": "model.onnx", "head_size": c.head_size, "hidden_size": c.hidden,
                "num_attention_heads": c.heads, "num_hidden_layers": c.layers,
                "num_key_value_heads": c.kv_heads,
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "past_key_names": "past_key_values.%d.key",
                           "past_value_names": "past_key_values.%d.value"},
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
            },
            **model,
        },
        "search": {"do_sample": False, "num_beams": 1, "max_length": max_length,
                   "past_present_share_buffer": share_buffer, "top_k": 1, "top_p": 1.0,
                   "temperature": 1.0},
    }
