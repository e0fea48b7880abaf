"""Generator (issue 17) over tiny builder-shaped decoders
(benchmarks/decoders.py): greedy tokens equal a plain ONNX Runtime greedy
loop written here, token for token (and the logits of every step close), for
float32 and int4 weights, a growing cache and a static buffer shared between
past and present, sliding-window caches, int8/int4 KV caches, a left-padded
batch of 2, a separate embedding model and convolution states; seeded sampling reproducible
across runs and thread counts; EOS per sequence, the streamer, a model folder
with genai_config.json and tokenizer.json; bad input rejected before any
evaluator is built; onnxruntime-genai's tokens where it is installed."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

import onnx_light_cpu as olc
from onnx_light_cpu import generation

ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.decoders import (  # noqa: E402
    DTYPES,
    TINY,
    build_decoder,
    build_embedding,
    genai_config,
)

QWEN, LLAMA = TINY[:2]
PROMPT = [5, 17, 200, 3, 44, 9]
SHORT = [31, 8, 250]
NEW = 8
CAPACITY = 24          # static buffers: prompt + new tokens fit
# Weight seeds whose greedy tokens vary: the tiny int4 decoders often repeat
# one token (tiny-mha's whatever the seed), which would check little; the
# logits of every step are compared as well.
SEEDS = {("tiny-qwen", "int4"): 8, ("tiny-llama", "int4"): 5}
# Logits, ours against ORT's (tests/test_decoders.py): int4 quantizes
# activation blocks to int8, where a sum in another order may move one code.
TOLERANCE = {"float32": dict(rtol=1e-4, atol=1e-4), "int4": dict(rtol=1e-4, atol=5e-2)}
SHARED = {"search": {"past_present_share_buffer": True, "max_length": CAPACITY}}
CACHES = {"growing": None, "shared": SHARED}


def _decoder(config, dtype, **kw):
    return build_decoder(config, dtype, SEEDS.get((config.name, dtype), 0), **kw)


def _embedding_model(config, dtype):
    return build_embedding(config, dtype, SEEDS.get((config.name, dtype), 0))


def _ort(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


NP_TYPES = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8}


def ort_greedy(model, prompts, max_new_tokens, *, capacity=None, embedding=None):
    """A plain ONNX Runtime greedy loop, written apart from Generator: the
    prompts (token lists) as GroupQueryAttention's right-padded batch (entry
    b's tokens at [0, len_b), the mask's ones counting them), empty pasts that
    grow, or with ``capacity`` static buffers of that many rows (a windowed
    layer's keep their declared size); every present fed back as the next
    past.  Returns the new tokens [batch, new] and each step's logits rows."""
    sess = _ort(model)
    emb = _ort(embedding) if embedding is not None else None
    names = [o.name for o in sess.get_outputs()]
    B, lens = len(prompts), np.array([len(p) for p in prompts])
    ids = np.zeros((B, lens.max()), np.int64)
    for b, p in enumerate(prompts):
        ids[b, :len(p)] = p
    feeds = {}
    for i in sess.get_inputs():
        if i.name.startswith("past_key_values."):
            rows = i.shape[2] if isinstance(i.shape[2], int) else capacity or 0
            feeds[i.name] = np.zeros((B, i.shape[1], rows, i.shape[3]), NP_TYPES[i.type])
    last = lens - 1
    tokens, rows = [], []
    for _ in range(max_new_tokens):
        feeds["attention_mask"] = (np.arange(lens.max()) < lens[:, None]).astype(np.int64)
        if emb is None:
            feeds["input_ids"] = ids
        else:
            feeds["inputs_embeds"] = emb.run(None, {"input_ids": ids})[0]
        out = dict(zip(names, sess.run(None, feeds)))
        row = out["logits"][np.arange(B), last]
        token = np.argmax(row, axis=1)
        rows.append(row)
        tokens.append(token)
        for name in feeds:
            if name.startswith("past_key_values."):
                feeds[name] = out[name.replace("past_key_values", "present")]
        ids, lens, last = token[:, None].astype(np.int64), lens + 1, np.zeros(B, np.int64)
    return np.stack(tokens, axis=1), rows


def _recording(gen):
    """Records the logits rows Generator picks from, per step (its _run)."""
    rows = []
    run = gen._run

    def recorded(feeds):
        out = run(feeds)
        rows.append(out["logits"].copy())
        return out

    gen._run = recorded
    return rows


def _picked(logits, mask):
    """The rows of recorded logits a step reads: the last real token at
    prefill (right-padded: row length - 1), then the single row."""
    picked = [logits[0][np.arange(len(mask)), mask.sum(axis=1) - 1]]
    return picked + [x[:, 0] for x in logits[1:]]


def _left_padded(prompts):
    width = max(map(len, prompts))
    ids = np.zeros((len(prompts), width), np.int64)
    mask = np.zeros_like(ids)
    for b, p in enumerate(prompts):
        ids[b, width - len(p):] = p
        mask[b, width - len(p):] = 1
    return ids, mask


def _check_against_ort(model, prompts, tolerance, *, search=None, embedding=None):
    """Generator's greedy tokens are ORT's, its logits close (TOLERANCE's
    ``tolerance``); returns the new tokens."""
    gen = olc.Generator(model, config=search, embedding=embedding)
    logits = _recording(gen)
    ids, mask = _left_padded(prompts)
    out = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW)
    capacity = search["search"]["max_length"] if search else None
    want, want_rows = ort_greedy(model, prompts, NEW, capacity=capacity, embedding=embedding)
    assert out.shape == (len(prompts), ids.shape[1] + NEW)
    np.testing.assert_array_equal(out[:, :ids.shape[1]], ids)
    np.testing.assert_array_equal(out[:, ids.shape[1]:], want,
                                  err_msg=f"{model.graph.name}: tokens differ from ORT's")
    for step, (got, row) in enumerate(zip(_picked(logits, mask), want_rows)):
        np.testing.assert_allclose(got, row, **TOLERANCE[tolerance],
                                   err_msg=f"{model.graph.name} step {step}: logits")
    return out[:, ids.shape[1]:]


# -- greedy against a plain ONNX Runtime loop ------------------------------


@pytest.mark.parametrize("cache", sorted(CACHES))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", TINY, ids=[c.name for c in TINY])
def test_greedy_matches_onnxruntime(config, dtype, cache):
    tokens = _check_against_ort(_decoder(config, dtype), [PROMPT], dtype, search=CACHES[cache])
    assert tokens.shape == (1, NEW)


def test_greedy_cache_layouts():
    """The spec read from the graph: growing caches on the sequence axis, or
    static buffers of max_length rows; both loops give the same tokens."""
    model = _decoder(QWEN, "float32")
    growing, shared = olc.Generator(model), olc.Generator(model, config=SHARED)
    assert not growing.spec.share_buffer and shared.spec.share_buffer
    assert {(s.axis, s.static, s.shape) for s in growing.spec.caches} == {
        (2, False, (0, QWEN.kv_heads, 0, QWEN.head_size))}
    assert {(s.axis, s.static, s.shape) for s in shared.spec.caches} == {
        (2, True, (0, QWEN.kv_heads, CAPACITY, QWEN.head_size))}
    assert len(shared.spec.caches) == 2 * QWEN.layers
    lengths = []
    run = growing._run

    def recorded(feeds):   # the growing past's rows at each step
        lengths.append(feeds["past_key_values.1.value"].shape[2])
        return run(feeds)

    growing._run = recorded
    prompt = np.array([PROMPT])
    np.testing.assert_array_equal(growing.generate(prompt, max_new_tokens=NEW),
                                  shared.generate(prompt, max_new_tokens=NEW))
    assert lengths == [0] + list(range(len(PROMPT), len(PROMPT) + NEW - 1))


WINDOWED = {
    "all": replace(QWEN, name="tiny-qwen-window4", window=4),
    "alternate": replace(LLAMA, name="tiny-llama-window3", window=3, window_alternate=True),
}


@pytest.mark.parametrize("cache", sorted(CACHES))
@pytest.mark.parametrize("layers", sorted(WINDOWED))
def test_windowed_cache_matches_onnxruntime(layers, cache):
    """sliding_window_cache=1 layers keep window-sized buffers; the prompt
    (6) and the generated tokens run past the window."""
    config = WINDOWED[layers]
    model = _decoder(config, "float32")
    gen = olc.Generator(model, config=CACHES[cache])
    for i in range(config.layers):
        slot = next(s for s in gen.spec.caches if s.past == f"past_key_values.{i}.key")
        if config.windowed(i):
            assert (slot.axis, slot.static, slot.shape[2]) == (None, False, config.window)
        else:
            assert slot.axis == 2 and slot.static == (cache == "shared")
    tokens = _check_against_ort(model, [PROMPT], "float32", search=CACHES[cache])
    # the window changes what the model says (same weights without it)
    full = olc.Generator(_decoder(replace(config, window=0), "float32"))
    assert not np.array_equal(full.generate([PROMPT], max_new_tokens=NEW)[:, 6:], tokens)


@pytest.mark.parametrize("cache", sorted(CACHES))
@pytest.mark.parametrize("bits,quant", [(8, "PER_TENSOR"), (4, "PER_CHANNEL")])
def test_quantized_kv_cache_matches_onnxruntime(bits, quant, cache):
    config = replace(QWEN, name=f"tiny-qwen-kv{bits}", kv_cache_bits=bits, kv_quant=quant)
    model = _decoder(config, "float32")
    gen = olc.Generator(model, config=CACHES[cache])
    assert {s.dtype for s in gen.spec.caches} == {np.dtype(np.int8 if bits == 8 else np.uint8)}
    # quantized caches: one code may move with a sum in another order
    _check_against_ort(model, [PROMPT], "int4", search=CACHES[cache])


# -- batches --------------------------------------------------------------

KV8 = replace(QWEN, name="tiny-qwen-kv8", kv_cache_bits=8)
# (config, weights, logits tolerance)
BATCHES = [(QWEN, "float32", "float32"), (LLAMA, "int4", "int4"), (KV8, "float32", "int4"),
           (WINDOWED["alternate"], "float32", "float32")]


@pytest.mark.parametrize("cache", sorted(CACHES))
@pytest.mark.parametrize("config,dtype,tolerance", BATCHES,
                         ids=[f"{c.name}-{d}" for c, d, _ in BATCHES])
def test_left_padded_batch(config, dtype, tolerance, cache):
    """Batch 2, the shorter prompt left-padded: each row is what its prompt
    gives alone, and ORT's loop with GroupQueryAttention's right padding
    (not for windowed caches: ONNX Runtime 1.32 rejects a right-padded first
    prompt with sliding_window_cache=1, "seqlens_k[1] = 2 is too small for
    sequence_length 6", where our kernel runs each entry's own length)."""
    model = _decoder(config, dtype)
    gen = olc.Generator(model, config=CACHES[cache])
    ids, mask = _left_padded([PROMPT, SHORT])
    out = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW)
    for b, prompt in enumerate([PROMPT, SHORT]):
        alone = gen.generate(np.array([prompt]), max_new_tokens=NEW)
        np.testing.assert_array_equal(out[b, ids.shape[1]:], alone[0, len(prompt):],
                                      err_msg=f"row {b} differs from its prompt alone")
    if not config.window:
        np.testing.assert_array_equal(out, np.concatenate([ids, _check_against_ort(
            model, [PROMPT, SHORT], tolerance, search=CACHES[cache])], axis=1))


def test_batch_without_mask_and_one_token_prompts():
    gen = olc.Generator(_decoder(QWEN, "float32"))
    ids = np.array([[7], [300]])
    out = gen.generate(ids, max_new_tokens=3)
    for b in range(2):
        np.testing.assert_array_equal(out[b], gen.generate(ids[b], max_new_tokens=3)[0])
    assert gen.generate(ids, max_new_tokens=0).tolist() == ids.tolist()


def test_padding_ids_are_not_fed():
    """Ids under the mask's zeros may be anything (checked are the real
    ones): they never reach the embedding's Gather."""
    gen = olc.Generator(_decoder(QWEN, "float32"), config=SHARED)
    ids = np.array([[100000, -7] + SHORT, [0, 1, 2, 3, 4]])
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    out = gen.generate(ids, attention_mask=mask, max_new_tokens=4)
    np.testing.assert_array_equal(out[:, :5], ids)
    alone = gen.generate([SHORT], max_new_tokens=4)
    np.testing.assert_array_equal(out[0, 5:], alone[0, 3:])


# -- sampling, EOS, the streamer --------------------------------------------


def test_sampling_is_reproducible():
    model = _decoder(QWEN, "float32")
    ids, mask = _left_padded([PROMPT, SHORT])
    options = dict(attention_mask=mask, max_new_tokens=12, do_sample=True, temperature=1.5,
                   top_k=50, top_p=0.95)
    runs = [olc.Generator(model, num_threads=n).generate(ids, seed=5, **options)
            for n in (1, 1, 2)]
    np.testing.assert_array_equal(runs[0], runs[1], err_msg="same seed, another run")
    np.testing.assert_array_equal(runs[0], runs[2], err_msg="same seed, 2 threads")
    gen = olc.Generator(model)
    again = gen.generate(ids, seed=5, **options)
    np.testing.assert_array_equal(runs[0], again, err_msg="same generator, second call")
    other = gen.generate(ids, seed=6, **options)
    assert not np.array_equal(runs[0], other), "another seed drew the same tokens"
    greedy = gen.generate(ids, attention_mask=mask, max_new_tokens=12)
    assert not np.array_equal(runs[0], greedy)
    # top_k=1 leaves the argmax only
    options.update(top_k=1)
    np.testing.assert_array_equal(gen.generate(ids, seed=9, **options), greedy)
    assert (runs[0] >= 0).all() and (runs[0] < QWEN.vocab).all()


def test_eos_stops_each_sequence():
    """A row stops at its first EOS and is padded after it (the config's
    pad id, else the EOS id); the loop ends when every row has stopped."""
    model = _decoder(QWEN, "float32")
    gen = olc.Generator(model)
    ids, mask = _left_padded([PROMPT, SHORT])
    S = ids.shape[1]
    greedy = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW)[:, S:]
    eos = int(greedy[0, 2])
    stop = [list(row).index(eos) if eos in row else None for row in greedy.tolist()]

    def expected(pad):
        width = NEW if None in stop else max(stop) + 1
        rows = np.full((2, width), pad, np.int64)
        for b, s in enumerate(stop):
            n = width if s is None else s + 1
            rows[b, :n] = greedy[b, :n]
        return rows

    calls = []
    out = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW, eos_token_id=eos,
                       streamer=calls.append)
    np.testing.assert_array_equal(out[:, S:], expected(eos))
    assert len(calls) == out.shape[1] - S
    # the config's EOS ids and pad id
    config = {"model": {"eos_token_id": [1000, eos], "pad_token_id": 0}}
    out = olc.Generator(model, config=config).generate(ids, attention_mask=mask,
                                                       max_new_tokens=NEW)
    np.testing.assert_array_equal(out[:, S:], expected(0))
    # batch 1 stops at once
    out = gen.generate([PROMPT], max_new_tokens=NEW, eos_token_id=[int(greedy[0, 0])])
    assert out.shape == (1, len(PROMPT) + 1)


def test_streamer_gets_every_step():
    gen = olc.Generator(_decoder(LLAMA, "int4"), config=SHARED)
    ids, mask = _left_padded([PROMPT, SHORT])
    calls = []
    out = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW, streamer=calls.append)
    assert len(calls) == NEW
    assert all(c.shape == (2,) and c.dtype == np.int64 for c in calls)
    np.testing.assert_array_equal(np.stack(calls, axis=1), out[:, ids.shape[1]:])
    assert gen.stats.prefill_s > 0 and len(gen.stats.decode_s) == NEW - 1


# -- a separate embedding model ----------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_model(dtype):
    """A decoder fed inputs_embeds by its embedding model generates what the
    decoder with the same (tied) embedding inside does, and what ORT's loop
    over the two models does."""
    config = replace(QWEN, typed_embedding=True) if dtype == "int4" else QWEN
    decoder = _decoder(config, dtype, inputs_embeds=True)
    embedding = _embedding_model(config, dtype)
    assert [i.name for i in decoder.graph.input][:2] == ["inputs_embeds", "attention_mask"]
    ops = {n.op_type for n in embedding.graph.node}
    assert ("GatherBlockQuantized" if dtype == "int4" else "Gather") in ops
    gen = olc.Generator(decoder, embedding=embedding, config=SHARED)
    assert gen.spec.inputs_embeds == "inputs_embeds" and gen.spec.input_ids is None
    olc.set_kernel_usage_recording(gen.embedding_session, True)
    ids, mask = _left_padded([PROMPT, SHORT])
    out = gen.generate(ids, attention_mask=mask, max_new_tokens=NEW)
    inside = olc.Generator(_decoder(config, dtype)).generate(ids, attention_mask=mask,
                                                              max_new_tokens=NEW)
    np.testing.assert_array_equal(out, inside)
    used = olc.used_kernel_names(gen.embedding_session)
    want = "GatherBlockQuantized" if dtype == "int4" else "Gather"
    assert f"onnx_light_cpu::{want}" in used, used
    tokens = _check_against_ort(decoder, [PROMPT, SHORT], dtype, search=SHARED,
                                embedding=embedding)
    np.testing.assert_array_equal(out[:, ids.shape[1]:], tokens)


def test_embedding_model_from_the_folder(tmp_path):
    onnx.save(_decoder(QWEN, "int4", inputs_embeds=True), str(tmp_path / "model.onnx"))
    onnx.save(_embedding_model(QWEN, "int4"), str(tmp_path / "embedding.onnx"))
    config = {"model": {"decoder": {"filename": "model.onnx"},
                        "embedding": {"filename": "embedding.onnx",
                                      "inputs": {"input_ids": "input_ids"},
                                      "outputs": {"inputs_embeds": "inputs_embeds"}}}}
    (tmp_path / "genai_config.json").write_text(json.dumps(config))
    gen = olc.Generator(tmp_path)
    assert gen.embedding_session is not None
    want = olc.Generator(_decoder(QWEN, "int4")).generate([PROMPT], max_new_tokens=NEW)
    np.testing.assert_array_equal(gen.generate([PROMPT], max_new_tokens=NEW), want)


# -- a model folder ----------------------------------------------------------


def _folder(tmp_path, dtype="float32", **model):
    onnx.save(_decoder(QWEN, dtype), str(tmp_path / "model.onnx"))
    (tmp_path / "genai_config.json").write_text(json.dumps(genai_config(QWEN, **model)))
    return tmp_path


def test_model_folder_with_genai_config(tmp_path):
    folder = _folder(tmp_path, "int4")
    gen = olc.Generator(folder)
    spec = gen.spec
    assert (spec.share_buffer, spec.max_length, spec.vocab_size) == (True, 64, QWEN.vocab)
    assert (spec.eos_token_ids, spec.pad_token_id) == ((2,), 0)
    assert all(s.static and s.shape[2] == 64 for s in spec.caches)
    want, _ = ort_greedy(_decoder(QWEN, "int4"), [PROMPT], NEW, capacity=64)
    out = gen.generate([PROMPT], max_new_tokens=NEW, eos_token_id=[])
    np.testing.assert_array_equal(out[0, 6:], want[0])
    # the config's EOS stops the loop
    (folder / "genai_config.json").write_text(json.dumps(genai_config(
        QWEN, eos_token_id=[int(want[0, 3])])))
    out = olc.Generator(folder).generate([PROMPT], max_new_tokens=NEW)
    first = list(want[0]).index(want[0, 3])
    np.testing.assert_array_equal(out[0, 6:], want[0, :first + 1])
    # the folder's one .onnx file without a config: the graph says
    (folder / "genai_config.json").unlink()
    gen = olc.Generator(folder)
    assert not gen.spec.share_buffer and gen.spec.max_length == QWEN.max_positions
    np.testing.assert_array_equal(gen.generate([PROMPT], max_new_tokens=NEW)[0, 6:], want[0])


def test_shared_buffer_is_written_in_place():
    """With a shared static buffer one decoder run returns the past arrays
    themselves as presents, the new rows written into them; a whole
    generation feeds the same buffers at every step."""
    model = _decoder(LLAMA, "int4")
    gen = olc.Generator(model, config=SHARED)
    feeds = {"input_ids": np.array([PROMPT]), "attention_mask": np.ones((1, 6), np.int64)}
    for slot in gen.spec.caches:
        feeds[slot.past] = np.zeros((1, *slot.shape[1:]), slot.dtype)
    pasts = {slot.past: feeds[slot.past] for slot in gen.spec.caches}
    out = gen._run(feeds)
    want = dict(zip([o.name for o in model.graph.output],
                    _ort(model).run(None, {**feeds, **{n: a.copy() for n, a in pasts.items()}})))
    for slot in gen.spec.caches:
        assert out[slot.present] is pasts[slot.past], slot.present
        np.testing.assert_allclose(out[slot.present][:, :, :6], want[slot.present][:, :, :6],
                                   rtol=1e-4, atol=5e-2)
        assert np.abs(out[slot.present][:, :, :6]).max() > 0
        assert not out[slot.present][:, :, 6:].any()
    seen = []
    run = gen._run

    def recorded(feeds):
        out = run(feeds)
        seen.append({id(feeds[s.past]) for s in gen.spec.caches}
                    | {id(out[s.present]) for s in gen.spec.caches})
        return out

    gen._run = recorded
    gen.generate([PROMPT], max_new_tokens=4)
    assert len(seen) == 4 and all(ids == seen[0] for ids in seen)
    assert len(seen[0]) == len(gen.spec.caches)
    # a growing cache gets new presents
    gen = olc.Generator(model)
    out = gen._run({**feeds, **{s.past: np.zeros((1, *s.shape[1:]), s.dtype)
                                for s in gen.spec.caches}})
    assert out["present.0.key"].shape[2] == 6


@pytest.mark.parametrize("dtype", DTYPES)
def test_our_kernels_run(dtype):
    gen = olc.Generator(_decoder(QWEN, dtype), config=SHARED, num_threads=1)
    olc.set_kernel_usage_recording(gen.session, True)
    gen.generate([PROMPT], max_new_tokens=3)
    used = {name.split("::", 1)[1] for name in olc.used_kernel_names(gen.session)}
    want = {"GroupQueryAttention", "SimplifiedLayerNormalization"} | (
        {"MatMulNBits", "GatherBlockQuantized"} if dtype == "int4" else {"MatMul", "Gather"})
    assert want <= used, sorted(want - used)


def test_onnxruntime_engine_gives_the_same_tokens():
    model = _decoder(LLAMA, "float32")
    ids, mask = _left_padded([PROMPT, SHORT])
    ours = olc.Generator(model, config=SHARED).generate(ids, attention_mask=mask,
                                                        max_new_tokens=NEW)
    theirs = olc.Generator(model, config=SHARED, engine="onnxruntime")
    assert isinstance(theirs.session, ort.InferenceSession)
    np.testing.assert_array_equal(theirs.generate(ids, attention_mask=mask,
                                                  max_new_tokens=NEW), ours)


# -- bad input -----------------------------------------------------------------


class _NoRun:
    """Stands for an evaluator that must not run."""

    def run(self, *args, **kwargs):
        raise AssertionError("the decoder ran on bad input")


@pytest.fixture
def no_evaluator(monkeypatch):
    """Generator builds no evaluator: its sessions are stand-ins that fail
    when run; ``no_evaluator.forbid()`` makes building one fail too."""
    def stand_in(*args, **kwargs):
        return _NoRun()

    def forbidden(*args, **kwargs):
        raise AssertionError("an evaluator was built before the error")

    monkeypatch.setattr(generation, "_session", stand_in)

    class Control:
        def forbid(self):
            monkeypatch.setattr(generation, "_session", forbidden)

    return Control()


def _add_model():
    x = oh.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = oh.make_graph([oh.make_node("Add", ["x", "x"], ["y"])], "add", [x],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])


FOLDERS = {
    "empty": ({}, "no genai_config.json and 0 .onnx files"),
    "two models": ({"a.onnx": "add", "b.onnx": "add"}, "2 .onnx files"),
    "not a decoder": ({"model.onnx": "add"}, "neither input_ids nor inputs_embeds"),
    "config without decoder": ({"genai_config.json": {"model": {}}},
                               "no model.decoder.filename"),
    "config naming a missing file": (
        {"genai_config.json": {"model": {"decoder": {"filename": "gone.onnx"}}}},
        "is not a model file"),
    "unreadable model": ({"model.onnx": b"not a protobuf"}, "not a readable ONNX model"),
    "broken json": ({"genai_config.json": "{", "model.onnx": "add"},
                    "is not valid JSON"),
}


@pytest.mark.parametrize("case", sorted(FOLDERS))
def test_folder_without_usable_decoder(tmp_path, no_evaluator, case):
    no_evaluator.forbid()
    files, message = FOLDERS[case]
    for name, content in files.items():
        path = tmp_path / name
        if content == "add":
            onnx.save(_add_model(), str(path))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ValueError, match=message):
        olc.Generator(tmp_path)


def _rotary_caches_as_inputs(model):
    """The decoder with its cos/sin caches as inputs: no length from the graph."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = [i for i in model.graph.initializer if i.name not in ("cos_cache", "sin_cache")]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)
    for name in ("cos_cache", "sin_cache"):
        model.graph.input.append(oh.make_tensor_value_info(name, TensorProto.FLOAT, None))
    return model


def test_bad_decoder_arguments(no_evaluator):
    no_evaluator.forbid()
    model = _decoder(QWEN, "float32")
    with pytest.raises(ValueError, match="pass embedding="):
        olc.Generator(_decoder(QWEN, "float32", inputs_embeds=True))
    with pytest.raises(ValueError, match="no inputs_embeds input"):
        olc.Generator(model, embedding=_embedding_model(QWEN, "float32"))
    with pytest.raises(ValueError, match="engine must be one of"):
        olc.Generator(model, engine="torch")
    with pytest.raises(ValueError, match="past_present_share_buffer needs a context length"):
        olc.Generator(_rotary_caches_as_inputs(model), config={"search": {
            "past_present_share_buffer": True}})


BAD_GENERATE = {
    "id beyond the vocabulary": (dict(input_ids=[[1, QWEN.vocab]]), ValueError,
                                 r"input_ids must lie in \[0, 512\)"),
    "negative id": (dict(input_ids=[[-1, 3]]), ValueError, "input_ids must lie in"),
    "float ids": (dict(input_ids=[[1.0, 2.0]]), ValueError, "integer ids"),
    "empty prompt": (dict(input_ids=np.zeros((1, 0), np.int64)), ValueError, "is empty"),
    "3-d ids": (dict(input_ids=np.ones((1, 2, 3), np.int64)), ValueError, "shape"),
    "beyond the context": (dict(max_new_tokens=11), ValueError,
                           r"prompt \(6\) \+ max_new_tokens \(11\) = 17 exceeds the context "
                           "length 16"),
    "mask of another shape": (dict(attention_mask=np.ones((1, 5), np.int64)), ValueError,
                              r"attention_mask has shape \(1, 5\), expected"),
    "mask of another batch": (dict(attention_mask=np.ones((2, 6), np.int64)), ValueError,
                              "attention_mask has shape"),
    "mask padding on the right": (dict(attention_mask=[[1, 1, 1, 1, 0, 0]]), ValueError,
                                  "pad on the left"),
    "mask of 2s": (dict(attention_mask=[[1, 1, 1, 1, 2, 1]]), ValueError, "only 0 and 1"),
    "row without a token": (dict(input_ids=[PROMPT, PROMPT],
                                 attention_mask=[[0] * 6, [1] * 6]), ValueError, "no token"),
    "max_new_tokens not an int": (dict(max_new_tokens=2.0), TypeError, "must be an int"),
    "negative max_new_tokens": (dict(max_new_tokens=-1), ValueError, ">= 0"),
    "temperature 0": (dict(do_sample=True, temperature=0.0), ValueError, "temperature"),
    "top_p 0": (dict(do_sample=True, top_p=0.0), ValueError, "top_p"),
    "negative top_k": (dict(do_sample=True, top_k=-1), ValueError, "top_k"),
}


@pytest.mark.parametrize("case", sorted(BAD_GENERATE))
def test_bad_generate_arguments(no_evaluator, case):
    """Rejected before the decoder runs (its evaluator is a stand-in)."""
    gen = olc.Generator(_decoder(QWEN, "float32"), max_length=16)
    assert isinstance(gen.session, _NoRun)
    args, error, message = BAD_GENERATE[case]
    kwargs = dict(input_ids=[PROMPT], max_new_tokens=4) | args
    with pytest.raises(error, match=message):
        gen.generate(kwargs.pop("input_ids"), **kwargs)


def test_context_length_from_the_config_and_the_rotary_cache(no_evaluator):
    model = _decoder(QWEN, "float32")
    gen = olc.Generator(model, config={"model": {"context_length": 12}})
    with pytest.raises(ValueError, match="exceeds the context length 12"):
        gen.generate([PROMPT], max_new_tokens=7)
    gen = olc.Generator(model)   # the cos/sin caches' rows
    with pytest.raises(ValueError, match=f"exceeds the context length {QWEN.max_positions}"):
        gen.generate([PROMPT], max_new_tokens=QWEN.max_positions)


# -- text ----------------------------------------------------------------------


def test_generate_text(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    folder = _folder(tmp_path)
    vocab = {f"w{i}": i for i in range(QWEN.vocab)}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w0"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(folder / "tokenizer.json"))
    gen = olc.Generator(folder)
    pieces = []
    text = gen.generate_text(" ".join(f"w{t}" for t in PROMPT), max_new_tokens=NEW,
                             eos_token_id=[], streamer=pieces.append)
    want, _ = ort_greedy(_decoder(QWEN, "float32"), [PROMPT], NEW, capacity=64)
    assert text == " ".join(f"w{t}" for t in want[0])
    assert "".join(pieces).strip() == text and len(pieces) == NEW


def test_generate_text_needs_a_tokenizer(tmp_path):
    gen = olc.Generator(_folder(tmp_path))
    with pytest.raises(ValueError, match="no tokenizer.json"):
        gen.generate_text("w1 w2", max_new_tokens=2)


# -- onnxruntime-genai ---------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_onnxruntime_genai_gives_the_same_tokens(tmp_path, dtype):
    og = pytest.importorskip("onnxruntime_genai")
    prompts = np.array([PROMPT, PROMPT[::-1]])
    want, _ = ort_greedy(_decoder(QWEN, dtype), prompts.tolist(), NEW, capacity=64)
    # an EOS id (it must lie in the vocabulary) that none of the tokens is
    eos = min(set(range(QWEN.vocab)) - set(PROMPT) - set(want.ravel().tolist()))
    folder = _folder(tmp_path, dtype, eos_token_id=[eos])
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(PROMPT) + NEW, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([PROMPT], np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    theirs = np.asarray(generator.get_sequence(0), np.int64)
    ours = olc.Generator(folder).generate([PROMPT], max_new_tokens=NEW)[0]
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours[len(PROMPT):], want[0])
    # a batch of 2 prompts of one length (onnxruntime-genai takes no mask:
    # it reads a left-padded prompt's pad ids as tokens)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(PROMPT) + NEW, do_sample=False, batch_size=2)
    generator = og.Generator(model, params)
    generator.append_tokens(prompts.astype(np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    theirs = np.stack([np.asarray(generator.get_sequence(b), np.int64) for b in range(2)])
    ours = olc.Generator(folder).generate(prompts, max_new_tokens=NEW)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours[:, len(PROMPT):], want)


# -- convolution states (LFM2's short convolutions) --------------------------


def _conv_decoder(vocab=64, channels=16, taps=4, layers=2, seed=3):
    """LFM2's convolution blocks reduced to the loop's concern: per layer a
    com.microsoft CausalConvWithState whose state [batch, channels, taps - 1]
    (static besides the batch) goes in as ``past_conv.i`` and out as
    ``present_conv.i``; an attention_mask the graph does not read."""
    rng = np.random.default_rng(seed)
    init = [onnx.numpy_helper.from_array(
        rng.standard_normal((vocab, channels)).astype(np.float32), "embed"),
        onnx.numpy_helper.from_array(
        (rng.standard_normal((channels, vocab)) / 4).astype(np.float32), "head")]
    nodes = [oh.make_node("Gather", ["embed", "input_ids"], ["x0"]),
             oh.make_node("Transpose", ["x0"], ["h0"], perm=[0, 2, 1])]
    inputs = [oh.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              oh.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"])]
    outputs = [oh.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])]
    for i in range(layers):
        init += [onnx.numpy_helper.from_array(
            rng.standard_normal((channels, 1, taps)).astype(np.float32), f"w{i}"),
            onnx.numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32),
                                         f"b{i}")]
        nodes.append(oh.make_node("CausalConvWithState", [f"h{i}", f"w{i}", f"b{i}",
                                                          f"past_conv.{i}"],
                                  [f"h{i + 1}", f"present_conv.{i}"], domain="com.microsoft",
                                  activation="silu"))
        shape = ["batch", channels, taps - 1]
        inputs.append(oh.make_tensor_value_info(f"past_conv.{i}", TensorProto.FLOAT, shape))
        outputs.append(oh.make_tensor_value_info(f"present_conv.{i}", TensorProto.FLOAT, shape))
    nodes += [oh.make_node("Transpose", [f"h{layers}"], ["y"], perm=[0, 2, 1]),
              oh.make_node("MatMul", ["y", "head"], ["logits"])]
    graph = oh.make_graph(nodes, "conv-states", inputs, outputs, init)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                               oh.make_opsetid("com.microsoft", 1)],
                         ir_version=10)


def test_convolution_states_are_carried():
    """Fixed-size states start as zeros and each present comes back as the
    next past: tokens equal a plain ONNX Runtime loop doing that."""
    model = _conv_decoder()
    gen = olc.Generator(model)
    assert [(s.past, s.present, s.axis, s.shape) for s in gen.spec.caches] == [
        (f"past_conv.{i}", f"present_conv.{i}", None, (0, 16, 3)) for i in range(2)]
    olc.set_kernel_usage_recording(gen.session, True)
    got = gen.generate(np.array([[5, 17, 20, 3]]), max_new_tokens=NEW)[0, 4:]
    assert "onnx_light_cpu::MicrosoftCausalConvWithState" in olc.used_kernel_names(gen.session)

    sess = _ort(model)
    names = [o.name for o in sess.get_outputs()]
    feeds = {f"past_conv.{i}": np.zeros((1, 16, 3), np.float32) for i in range(2)}
    ids, want = np.array([[5, 17, 20, 3]]), []
    for _ in range(NEW):
        feeds.update(input_ids=ids, attention_mask=np.ones((1, 1), np.int64))
        out = dict(zip(names, sess.run(None, feeds)))
        want.append(int(np.argmax(out["logits"][0, -1])))
        ids = np.array([[want[-1]]])
        feeds.update({f"past_conv.{i}": out[f"present_conv.{i}"] for i in range(2)})
    np.testing.assert_array_equal(got, want)
    assert len(set(want)) > 1, "a constant sequence would not show the states matter"
