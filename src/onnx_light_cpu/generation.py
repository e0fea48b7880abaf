"""Text generation over decoders made by ONNX Runtime's model builder, token
by token, as onnxruntime-genai runs them.

    gen = onnx_light_cpu.Generator("qwen2-int4/")          # a model folder
    tokens = gen.generate(np.array([[1, 2, 3]]), max_new_tokens=32)

What the loop needs to know about a decoder (its :class:`DecoderSpec`) comes
from ``genai_config.json`` when the folder has one, else from the graph:

* the token input (``input_ids``, or ``inputs_embeds`` fed by a separate
  embedding model), ``attention_mask``, ``position_ids`` when the graph
  takes them, and the ``logits`` output;
* every other input is a cache: a past input whose present output has the
  same name with ``past_key_values`` (or ``past``) read as ``present``.  A
  past with a symbolic sequence axis grows by the step's tokens (a KV cache;
  static buffers of ``max_length`` when ``past_present_share_buffer`` is
  set); one whose non-batch axes are all static keeps its size (a
  sliding-window KV cache, LFM2's convolution states) and starts as zeros.

Padding follows the attention operator.  GroupQueryAttention reads each
entry's length from the mask (``seqlens_k`` = ones - 1) and keeps entry b's
tokens at cache rows [0, length): the prompt's left padding moves to the
right for it and the mask counts ones.  Other graphs (MultiHeadAttention
with a mask) get the prompt as given, left padding and all, and position
ids counting the mask's ones.

Our engine runs the decoder after :func:`onnx_light_cpu.fusion.fuse`
(MatMulNBits + bias, SiLU gates as QuickGelu, ...), as ONNX Runtime's
optimizer rewrites it at load.  With a shared static buffer,
GroupQueryAttention writes the new rows into the past buffers in place
(``EvaluatorContext.share_kv_buffers``, set on this generator's evaluator
only): a step copies no cache.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

from .memory import check_buffer
from .registry import hook
from .registry.api import register_kernels_for_session, set_num_threads_for_session

CONFIG_FILE = "genai_config.json"
TOKENIZER_FILE = "tokenizer.json"
MAIN_INPUTS = ("input_ids", "inputs_embeds", "attention_mask", "position_ids")


@dataclass(frozen=True)
class CacheSlot:
    """One past input and the present output fed back into it."""

    past: str
    present: str
    dtype: np.dtype
    shape: tuple          # the past's shape with 0 for the batch axis
    axis: int | None      # the axis that grows; None: a buffer of fixed size
    static: bool = False  # a buffer of max_length rows shared with the present


@dataclass(frozen=True)
class DecoderSpec:
    """What the generation loop needs to know about a decoder graph."""

    input_ids: str | None
    inputs_embeds: str | None
    attention_mask: str | None
    position_ids: str | None
    logits: str
    caches: tuple[CacheSlot, ...]
    vocab_size: int | None
    max_length: int | None          # prompt + new tokens may not exceed it
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    share_buffer: bool = False
    right_padded: bool = False      # GroupQueryAttention: lengths, not positions


@dataclass
class GenerationStats:
    """Times of the last :meth:`Generator.generate` call, in seconds."""

    prefill_s: float = 0.0
    decode_s: list = field(default_factory=list)   # per decode step
    run_s: float = 0.0                             # inside the evaluators

    @property
    def decode_ms_per_token(self) -> float:
        return 1e3 * float(np.median(self.decode_s)) if self.decode_s else float("nan")

    @property
    def tokens_per_second(self) -> float:
        return len(self.decode_s) / sum(self.decode_s) if self.decode_s else float("nan")


def _error(message: str) -> ValueError:
    return ValueError(f"Generator: {message}")


def _load(model) -> tuple[onnx.ModelProto, Path | None]:
    """(model, its folder) from a ModelProto or the path of an .onnx file."""
    if isinstance(model, onnx.ModelProto):
        return model, None
    path = Path(model)
    if not path.is_file():
        raise _error(f"{str(path)!r} is not a model file")
    try:
        return onnx.load(str(path)), path.parent
    except Exception as exc:  # a protobuf DecodeError, an unreadable file
        raise _error(f"{str(path)!r} is not a readable ONNX model: {exc}") from exc


def _read_folder(folder: Path) -> tuple[Path, dict, Path | None]:
    """(decoder file, genai config or {}, embedding file or None)."""
    config_path = folder / CONFIG_FILE
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text())
            decoder = config["model"]["decoder"]
            filename = decoder["filename"]
        except ValueError as exc:   # json.JSONDecodeError
            raise _error(f"{config_path} is not valid JSON: {exc}") from exc
        except (KeyError, TypeError) as exc:
            raise _error(f"{config_path} has no model.decoder.filename: {exc!r}") from exc
        embedding = config["model"].get("embedding", {}).get("filename")
        return folder / filename, config, folder / embedding if embedding else None
    models = sorted(p for p in folder.glob("*.onnx"))
    if len(models) != 1:
        raise _error(f"{str(folder)!r} has no {CONFIG_FILE} and {len(models)} .onnx files; "
                     "pass the decoder's file")
    return models[0], {}, None


def _dims(value: onnx.ValueInfoProto) -> tuple:
    """Static sizes as ints, symbolic ones as their names (or None)."""
    shape = value.type.tensor_type.shape
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in shape.dim)


def _pattern(template: str | None) -> re.Pattern | None:
    """A regex of a genai name template ('past_key_values.%d.key')."""
    if not template:
        return None
    return re.compile(re.escape(template).replace("%d", r"(\d+)") + "$")


def _present_name(past: str, outputs: set, config_io: tuple[dict, dict]) -> str | None:
    inputs, outs = config_io
    for kind in ("key", "value"):
        match = _pattern(inputs.get(f"past_{kind}_names"))
        template = outs.get(f"present_{kind}_names")
        if match and template and (m := match.match(past)):
            return template.replace("%d", m.group(1))
    for name in (past.replace("past_key_values", "present"), past.replace("past", "present")):
        if name != past and name in outputs:
            return name
    return None


def _windowed_pasts(graph: onnx.GraphProto) -> dict[str, int]:
    """Past inputs of GroupQueryAttention nodes with sliding_window_cache=1:
    their local_window_size."""
    pasts = {}
    for node in graph.node:
        if node.op_type == "GroupQueryAttention" and node.domain == "com.microsoft":
            attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
            if attrs.get("sliding_window_cache", 0):
                for name in list(node.input)[3:5]:
                    pasts[name] = int(attrs.get("local_window_size", -1))
    return pasts


def _rotary_positions(graph: onnx.GraphProto) -> int | None:
    """Rows of the cos cache GroupQueryAttention's rotary reads (positions
    beyond it are an error), when it is an initializer."""
    shapes = {i.name: tuple(i.dims) for i in graph.initializer}
    rows = [shapes[node.input[7]][0] for node in graph.node
            if node.op_type == "GroupQueryAttention" and len(node.input) > 7
            and node.input[7] in shapes]
    return min(rows) if rows else None


def decoder_spec(model: onnx.ModelProto, config: dict | None = None, *,
                 max_length: int | None = None) -> DecoderSpec:
    """The :class:`DecoderSpec` of a decoder graph, from ``config`` (a parsed
    genai_config.json) where it says, else from the graph."""
    config = config or {}
    mcfg = config.get("model", {})
    dcfg = mcfg.get("decoder", {})
    search = config.get("search", {})
    cin, cout = dcfg.get("inputs", {}), dcfg.get("outputs", {})
    graph = model.graph
    initializers = {i.name for i in graph.initializer}
    inputs = {v.name: v for v in graph.input if v.name not in initializers}
    outputs = {v.name: v for v in graph.output}

    def named(key: str) -> str | None:
        name = cin.get(key, key)
        return name if name in inputs else None

    main = {key: named(key) for key in MAIN_INPUTS}
    if main["input_ids"] is None and main["inputs_embeds"] is None:
        raise _error(f"the graph has neither input_ids nor inputs_embeds among its inputs "
                     f"{sorted(inputs)}: not a decoder")
    logits = cout.get("logits", "logits")
    if logits not in outputs:
        raise _error(f"the graph has no output {logits!r} (outputs {sorted(outputs)})")
    logits_dims = _dims(outputs[logits])
    vocab = mcfg.get("vocab_size") or (logits_dims[-1] if logits_dims
                                       and isinstance(logits_dims[-1], int) else None)

    share = bool(search.get("past_present_share_buffer", False))
    right_padded = any(n.op_type == "GroupQueryAttention" for n in graph.node)
    if share and not right_padded:
        raise _error("past_present_share_buffer needs GroupQueryAttention (no node of the "
                     "graph writes into a static buffer)")
    limits = [x for x in (mcfg.get("context_length"), search.get("max_length"), max_length,
                          _rotary_positions(graph)) if x]
    limit = min(limits) if limits else None
    if share and limit is None:
        raise _error("past_present_share_buffer needs a context length (genai_config's "
                     "context_length or max_length)")

    windowed = _windowed_pasts(graph)
    window_cfg = dcfg.get("sliding_window", {}) or {}
    caches = []
    used = {name for name in main.values() if name}
    for name, value in inputs.items():
        if name in used:
            continue
        present = _present_name(name, set(outputs), (cin, cout))
        if present is None or present not in outputs:
            raise _error(f"input {name!r} is not a decoder input this loop knows "
                         f"({', '.join(MAIN_INPUTS)}) and has no present output to feed it "
                         "from")
        dims = _dims(value)
        dtype = oh.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        if not dims:
            raise _error(f"cache input {name!r} has no declared shape")
        rest = list(dims[1:])
        symbolic = [i + 1 for i, d in enumerate(rest) if not isinstance(d, int)]
        if len(rest) == 3 and len(symbolic) > 1:   # [B, kv_heads, S, head_size] by config
            for axis, key in ((1, "num_key_value_heads"), (3, "head_size")):
                if not isinstance(dims[axis], int) and dcfg.get(key):
                    rest[axis - 1] = int(dcfg[key])
            symbolic = [i + 1 for i, d in enumerate(rest) if not isinstance(d, int)]
        if name in windowed:
            capacity = rest[1] if isinstance(rest[1], int) else (
                window_cfg.get("window_size") or windowed[name])
            rest[1] = int(capacity)
            caches.append(CacheSlot(name, present, dtype, (0, *rest), None))
            continue
        if not symbolic:
            caches.append(CacheSlot(name, present, dtype, (0, *rest), None))
            continue
        if len(symbolic) > 1:
            raise _error(f"cache input {name!r} of shape {dims}: more than one symbolic axis "
                         "besides the batch, and no genai_config.json says their sizes")
        axis = symbolic[0]
        rest[axis - 1] = limit if share else 0
        caches.append(CacheSlot(name, present, dtype, (0, *rest), axis, static=share))
    eos = mcfg.get("eos_token_id", ())
    eos = tuple(eos) if isinstance(eos, list) else (eos,) if isinstance(eos, int) else ()
    pad = mcfg.get("pad_token_id")
    return DecoderSpec(main["input_ids"], main["inputs_embeds"], main["attention_mask"],
                       main["position_ids"], logits, tuple(caches), vocab, limit, eos,
                       pad if isinstance(pad, int) else None, share, right_padded)


ENGINES = ("onnx_light_cpu", "onnxruntime")


def _session(model: onnx.ModelProto, num_threads: int | None, engine: str,
             share_buffer: bool = False):
    """An evaluator with our kernels, or an ONNX Runtime session (to
    compare); both ``run(output_names, feeds)``."""
    if engine == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        if num_threads:
            options.intra_op_num_threads = num_threads
        return ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
    sess = ReferenceEvaluator(model)
    register_kernels_for_session(sess)
    set_num_threads_for_session(sess, num_threads)
    hook.context_of(sess).share_kv_buffers = share_buffer
    return sess


class Generator:
    """Generates tokens from a decoder made by ONNX Runtime's model builder.

    ``model``: a model folder (with ``genai_config.json``, or holding one
    .onnx file), the path of the decoder's .onnx file, or a ModelProto.
    ``embedding``: a separate embedding model (path or ModelProto) whose
    output feeds the decoder's ``inputs_embeds``; from the config when it
    names one.  ``config``: a genai config as a dict, in place of the
    folder's file.  ``max_length`` caps prompt + new tokens (and sizes
    static buffers) below the config's context length.  ``engine=
    "onnxruntime"`` runs the same loop on ONNX Runtime (to compare).
    """

    def __init__(self, model, *, embedding=None, num_threads: int | None = None,
                 config: dict | None = None, max_length: int | None = None,
                 engine: str = "onnx_light_cpu") -> None:
        if engine not in ENGINES:
            raise _error(f"engine must be one of {ENGINES}, got {engine!r}")
        folder = None
        embedding_path = None
        if not isinstance(model, onnx.ModelProto) and Path(model).is_dir():
            folder = Path(model)
            model, file_config, embedding_path = _read_folder(folder)
            config = file_config if config is None else config
        decoder, model_folder = _load(model)
        self.folder = folder or model_folder
        self.config = config or {}
        self.spec = decoder_spec(decoder, self.config, max_length=max_length)
        if embedding is None and embedding_path is not None:
            embedding = embedding_path
        self._embedding_names = None
        if self.spec.inputs_embeds and embedding is None:
            raise _error(f"the decoder takes {self.spec.inputs_embeds!r}: pass embedding= (the "
                         "model that makes them from token ids)")
        if embedding is not None:
            if not self.spec.inputs_embeds:
                raise _error("embedding= given but the decoder has no inputs_embeds input")
            embedding_model, _ = _load(embedding)
            ecfg = self.config.get("model", {}).get("embedding", {})
            graph = embedding_model.graph
            ids = ecfg.get("inputs", {}).get("input_ids", graph.input[0].name)
            out = ecfg.get("outputs", {}).get("inputs_embeds", graph.output[0].name)
            self._embedding_names = (ids, out)
        # the sessions last: every error above needs none
        self.engine = engine
        if engine == "onnx_light_cpu":
            # prepared once, as ONNX Runtime's optimizer does at load: the
            # bias Adds into MatMulNBits, the SwiGLU gates into QuickGelu
            from .fusion import fuse

            decoder = fuse(decoder).model
        self.session = _session(decoder, num_threads, engine, self.spec.share_buffer)
        self.embedding_session = (_session(embedding_model, num_threads, engine)
                                  if embedding is not None else None)
        self._output_names = [o.name for o in decoder.graph.output]
        self.stats = GenerationStats()

    # -- one step ---------------------------------------------------------

    def _run(self, feeds: dict) -> dict:
        """The decoder's outputs by name."""
        return dict(zip(self._output_names, self.session.run(None, feeds)))

    def _embed(self, ids: np.ndarray) -> np.ndarray:
        name, out = self._embedding_names
        return self.embedding_session.run([out], {name: ids})[0]

    # -- the loop -----------------------------------------------------------

    def _check(self, input_ids, attention_mask, max_new_tokens) -> tuple:
        ids = np.asarray(input_ids)
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
            raise _error(f"input_ids must be integer ids of shape [batch, prompt], got "
                         f"{ids.dtype}{ids.shape}")
        if ids.size == 0:
            raise _error(f"input_ids is empty (shape {ids.shape}): a prompt needs a token")
        ids = ids.astype(np.int64)
        if attention_mask is None:
            mask = np.ones(ids.shape, np.int64)
        else:
            mask = np.asarray(attention_mask)
            if mask.ndim == 1:
                mask = mask[None]
            if mask.shape != ids.shape:
                raise _error(f"attention_mask has shape {np.shape(attention_mask)}, "
                             f"expected input_ids' {ids.shape}")
            if not np.isin(mask, (0, 1)).all():
                raise _error("attention_mask must hold only 0 and 1")
            mask = mask.astype(np.int64)
            # left padding: no 1 before a 0 in a row
            if (np.diff(mask, axis=1) < 0).any():
                raise _error("attention_mask must pad on the left (zeros, then ones, per row)")
        lengths = mask.sum(axis=1)
        if (lengths == 0).any():
            raise _error(f"rows {np.flatnonzero(lengths == 0).tolist()} of attention_mask have "
                         "no token")
        real = ids[mask == 1]
        vocab = self.spec.vocab_size
        if real.min() < 0 or (vocab is not None and real.max() >= vocab):
            raise _error(f"input_ids must lie in [0, {vocab}), got ids from {real.min()} to "
                         f"{real.max()}")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int,
                                                                                np.integer)):
            raise TypeError(f"Generator: max_new_tokens must be an int, got "
                            f"{type(max_new_tokens).__name__}")
        if max_new_tokens < 0:
            raise _error(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        limit = self.spec.max_length
        needed = ids.shape[1] + max_new_tokens
        if limit is not None and needed > limit:
            raise _error(f"prompt ({ids.shape[1]}) + max_new_tokens ({max_new_tokens}) = "
                         f"{needed} exceeds the context length {limit}")
        return ids, mask, lengths

    def _initial_caches(self, batch: int) -> dict:
        feeds = {}
        for slot in self.spec.caches:
            shape = (batch, *slot.shape[1:])
            check_buffer("Generator", f"cache {slot.past!r}", shape, slot.dtype.itemsize)
            feeds[slot.past] = np.zeros(shape, slot.dtype)
        return feeds

    def _feeds(self, tokens: np.ndarray, mask: np.ndarray, positions: np.ndarray | None,
               caches: dict) -> dict:
        spec = self.spec
        feeds = dict(caches)
        if spec.inputs_embeds:
            feeds[spec.inputs_embeds] = self._embed(tokens)
        else:
            feeds[spec.input_ids] = tokens
        if spec.attention_mask:
            feeds[spec.attention_mask] = mask
        if spec.position_ids:
            feeds[spec.position_ids] = positions
        return feeds

    def generate(self, input_ids, *, max_new_tokens: int, attention_mask=None,
                 do_sample: bool = False, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int | None = None,
                 eos_token_id: int | Sequence[int] | None = None,
                 streamer: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
        """The prompts followed by their new tokens, int64 [batch, prompt + new].

        ``attention_mask`` marks left padding (zeros first).  Greedy unless
        ``do_sample``: then temperature, top-k (0: off), top-p (1: off), from
        a generator seeded with ``seed``.  A sequence stops at an EOS id
        (``eos_token_id``, else the config's) and is padded afterwards with
        the pad id (else its EOS id); generation stops when every sequence
        has or after ``max_new_tokens``.  ``streamer(tokens)`` gets each
        step's new ids [batch].
        """
        ids, mask, lengths = self._check(input_ids, attention_mask, max_new_tokens)
        pick = _sampler(do_sample, temperature, top_k, top_p, seed)
        eos = self.spec.eos_token_ids if eos_token_id is None else (
            (eos_token_id,) if isinstance(eos_token_id, (int, np.integer))
            else tuple(eos_token_id))
        pad = self.spec.pad_token_id if self.spec.pad_token_id is not None else (
            eos[0] if eos else 0)
        B, S = ids.shape
        spec = self.spec
        caches = self._initial_caches(B)
        self.stats = stats = GenerationStats()
        lengths = lengths.astype(np.int64)
        # the padding's ids are not checked (any value may stand under a
        # mask's zero) but still reach the embedding's Gather: feed id 0
        fed = np.where(mask == 1, ids, 0)
        if spec.right_padded:
            # every entry's tokens first, the padding after (GQA's layout)
            order = np.argsort(1 - mask, axis=1, kind="stable")
            tokens = np.take_along_axis(fed, order, axis=1)
            step_mask = (np.arange(S) < lengths[:, None]).astype(np.int64)
            positions = np.broadcast_to(np.arange(S, dtype=np.int64), (B, S))
            last = lengths - 1
        else:
            tokens, step_mask = fed, mask
            positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
            last = np.full(B, S - 1)
        # masks of equal rows are views of one array of ones, dense (a
        # decode step's glue must stay far below a tiny decoder's step)
        ones = np.ones(B * (S + max_new_tokens), np.int64)
        uniform = bool((lengths == lengths[0]).all())
        rows = np.arange(B)
        new = np.empty((B, max_new_tokens), np.int64)
        done = np.zeros(B, bool)
        steps = 0
        for step in range(max_new_tokens):
            start = time.perf_counter()
            feeds = self._feeds(tokens, step_mask, positions, caches)
            run_start = time.perf_counter()
            out = self._run(feeds)
            run_end = time.perf_counter()
            logits = out[spec.logits]
            token = pick(logits[rows, last] if logits.shape[1] > 1 else logits[:, 0])
            if eos:
                token[done] = pad
                for e in eos:
                    done |= token == e
            new[:, step] = token
            steps += 1
            if streamer is not None:
                streamer(token.copy())
            # the next step's feeds
            caches = {slot.past: out[slot.present] for slot in spec.caches}
            tokens = token[:, None]
            lengths += 1
            if spec.right_padded:
                width = int(lengths.max())
                step_mask = (ones[:B * width].reshape(B, width) if uniform else
                             (np.arange(width) < lengths[:, None]).astype(np.int64))
                positions = (lengths - 1)[:, None]
            else:
                width = step_mask.shape[1] + 1
                step_mask = ones[:B * width].reshape(B, width) if uniform else np.concatenate(
                    [step_mask, ones[:B, None]], axis=1)
                positions = (step_mask.sum(axis=1) - 1)[:, None]
            last = 0
            elapsed = time.perf_counter() - start
            stats.run_s += run_end - run_start
            if step == 0:
                stats.prefill_s = elapsed
            else:
                stats.decode_s.append(elapsed)
            if eos and done.all():
                break
        return np.concatenate([ids, new[:, :steps]], axis=1)

    # -- text -------------------------------------------------------------

    def tokenizer(self):
        """The folder's ``tokenizer.json`` through the ``tokenizers`` package."""
        path = self.folder / TOKENIZER_FILE if self.folder else None
        if path is None or not path.is_file():
            raise _error(f"no {TOKENIZER_FILE} next to the model; generate from token ids")
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError("Generator.generate_text needs the 'tokenizers' package: "
                              "pip install 'onnx_light_cpu[text]'") from exc
        return Tokenizer.from_file(str(path))

    def generate_text(self, prompt: str, *, max_new_tokens: int,
                      streamer: Callable[[str], None] | None = None, **options) -> str:
        """The text generated after ``prompt`` (batch 1); ``streamer`` gets
        each new piece of text.  ``options`` are :meth:`generate`'s."""
        tokenizer = self.tokenizer()
        ids = np.array([tokenizer.encode(prompt).ids], np.int64)
        on_token = text_streamer(tokenizer, ids[0].tolist(), streamer) if streamer else None
        out = self.generate(ids, max_new_tokens=max_new_tokens, streamer=on_token, **options)
        return tokenizer.decode(out[0, ids.shape[1]:].tolist(), skip_special_tokens=True)


def text_streamer(tokenizer, prompt_ids: list[int],
                  emit: Callable[[str], None]) -> Callable[[np.ndarray], None]:
    """A streamer of token ids (batch 1) that passes ``emit`` the text each
    new id adds.  The text is decoded after the prompt's last ids, so that
    the space a tokenizer puts between words (WordPiece, WordLevel) comes
    out."""
    context = list(prompt_ids[-4:])
    shown = tokenizer.decode(context, skip_special_tokens=True)

    def on_token(token: np.ndarray) -> None:
        nonlocal shown
        context.append(int(token[0]))
        text = tokenizer.decode(context, skip_special_tokens=True)
        if text.startswith(shown) and len(text) > len(shown):
            emit(text[len(shown):])
            shown = text

    return on_token


def _sampler(do_sample: bool, temperature: float, top_k: int, top_p: float,
             seed: int | None) -> Callable[[np.ndarray], np.ndarray]:
    """The next token per row of logits [batch, vocab]: argmax (the first
    of equal maxima), or a draw after temperature, top-k and top-p."""
    if not do_sample:
        return lambda rows: np.argmax(rows, axis=1).astype(np.int64)
    if not temperature > 0:
        raise _error(f"temperature must be > 0 when sampling, got {temperature}")
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
        raise _error(f"top_k must be an int >= 0 (0: off), got {top_k!r}")
    if not 0 < top_p <= 1:
        raise _error(f"top_p must be in (0, 1], got {top_p}")
    rng = np.random.default_rng(seed)

    def draw(rows: np.ndarray) -> np.ndarray:
        x = rows.astype(np.float64) / temperature
        if 0 < top_k < x.shape[1]:
            kth = np.partition(x, -top_k, axis=1)[:, -top_k][:, None]
            x = np.where(x < kth, -np.inf, x)
        p = np.exp(x - x.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        if top_p < 1:
            # keep the most likely tokens until their mass reaches top_p
            order = np.argsort(-p, axis=1, kind="stable")
            sorted_p = np.take_along_axis(p, order, axis=1)
            drop = np.cumsum(sorted_p, axis=1) - sorted_p >= top_p
            p = np.zeros_like(p)
            np.put_along_axis(p, order, np.where(drop, 0.0, sorted_p), axis=1)
            p /= p.sum(axis=1, keepdims=True)
        cumulative = np.cumsum(p, axis=1)
        u = rng.random(p.shape[0]) * cumulative[:, -1]
        return np.array([np.searchsorted(c, v, side="right") for c, v in zip(cumulative, u)],
                        np.int64).clip(0, p.shape[1] - 1)

    return draw
