"""Generation loops, ours vs ONNX Runtime, in alternating blocks.

    pytest benchmarks/test_bench_generation.py --benchmark-only [--decoders] [--load busy]

Layer measured: ``onnx_light_cpu.Generator.generate`` end to end, greedy,
batch 1: a prompt's prefill, then one decode step per new token, the
present caches fed back, over builder-shaped decoders (benchmarks/decoders.py)
with random weights and no genai_config.json (the graph says the rest).
Building the decoder and the generators, and the first calls, are not timed.

* tiny: the 2-layer decoders of ``decoders.TINY``, float32 and int4, a
  16-token prompt and 32 new tokens, run by default;
* real (``--decoders``): Qwen2-0.5B (all 24 layers, vocabulary 151936),
  float32 and int4 (MatMulNBits, accuracy level 4), a 32-token prompt and
  16 new tokens;
* shared buffer: the first decoder of each set in int4 with
  ``{"search": {"past_present_share_buffer": True, "max_length": N}}``:
  static caches of N rows that GroupQueryAttention writes in place.

Each test is one case at one thread count: our Generator and the same loop
on ONNX Runtime (``engine="onnxruntime"``, ``intra_op_num_threads`` the
same, its default optimization level, as a Generator builds it), and,
where ``onnxruntime-genai`` is installed, its generator over the same model
written to a folder with a ``genai_config.json`` (the same thread count,
``past_present_share_buffer`` as the case's buffer).  All must generate the
same tokens before timing (float32; int4 records where they first differ:
at accuracy level 4 each quantizes activations its own way).
pytest-benchmark times our generate calls; the others' blocks run between
ours' (``Interleaver``), in one process: the memory bandwidth a float32
step streams at varies with the machine's other tenants, and processes
run minutes apart measured that, not the engines.  ``extra_info`` holds,
from ``Generator.stats`` (onnxruntime-genai: each ``generate_next_token``
timed, the first one, which samples from the prompt's logits, left out):

* ``ours_decode_ms_per_token`` / ``ort_decode_ms_per_token`` /
  ``genai_decode_ms_per_token``: the median decode step over every timed
  call, ``ratio`` = ours / ORT and ``ratio_genai`` = ours / genai;
* ``ours_tokens_per_second`` / ``ort_tokens_per_second``: decode steps per
  second of decode time;
* ``overhead_fraction``: the loop's own share, 1 - ``run_s`` / (prefill +
  decode steps), over our timed calls (``ort_overhead_fraction`` the same
  for ORT's), and ``ours_loop_us_per_step``: that time per step.  The loop's
  NumPy bookkeeping costs some tens of microseconds a step whatever the
  model, so the share must stay under ``OVERHEAD_LIMIT`` at real sizes
  (asserted there) and is only reported on the tiny decoders, whose steps
  take a few hundred microseconds.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

import onnx_light_cpu as olc
from onnx_light_cpu.cli import first_difference

from ._harness import Interleaver, gc_off
from .decoders import DTYPES, QWEN2_0_5B, TINY, DecoderConfig, build_decoder, genai_config

THREADS = (1, 2)
# (prompt tokens, new tokens, max_length of the shared static buffer)
TINY_STEPS = (16, 32, 64)
REAL_STEPS = (32, 16, 64)
# A block of back-to-back generate calls of one engine lasts about this long.
BLOCK_SECONDS = 0.05
MIN_BLOCKS, MAX_BLOCKS = 3, 100
# The loop's own share of a generate call's steps, at real sizes.
OVERHEAD_LIMIT = 0.05


def _params():
    for configs, real in ((TINY, False), ((QWEN2_0_5B,), True)):
        for config in configs:
            for dtype in DTYPES:
                buffers = ("grow", "shared") if config is configs[0] and dtype == "int4" else (
                    "grow",)
                for buffer in buffers:
                    for threads in THREADS:
                        marks = [pytest.mark.decoders] if real else []
                        yield pytest.param(config, dtype, buffer, threads, real, marks=marks,
                                           id=f"{config.name}-{dtype}-{buffer}-t{threads}")


@functools.lru_cache(maxsize=1)  # the cases of a model follow each other
def _model(config: DecoderConfig, dtype: str) -> onnx.ModelProto:
    return build_decoder(config, dtype)


_held: dict = {}  # the generators of the current case: a real model holds gigabytes


def _generators(config: DecoderConfig, dtype: str, buffer: str, threads: int, real: bool):
    """(our Generator, the ORT one), kept while the next test needs them."""
    key = (config, dtype, buffer, threads)
    if key in _held:
        return _held[key]
    _held.clear()
    gc.collect()
    model = _model(config, dtype)
    max_length = (REAL_STEPS if real else TINY_STEPS)[2]
    search = {"past_present_share_buffer": True, "max_length": max_length}
    genai = {"search": search} if buffer == "shared" else None
    _held[key] = (olc.Generator(model, num_threads=threads, config=genai),
                  olc.Generator(model, num_threads=threads, config=genai,
                                engine="onnxruntime"))
    return _held[key]


def _genai_loop(config: DecoderConfig, dtype: str, buffer: str, threads: int, real: bool,
                eos: int):
    """onnxruntime-genai's loop for the current case (``eos``: an end
    token ours never generates), None where it is not installed."""
    try:
        import onnxruntime_genai as og
    except ImportError:
        return None
    key = ("genai", config, dtype, buffer, threads)
    if key not in _held:
        max_length = (REAL_STEPS if real else TINY_STEPS)[2]
        _held[key] = _GenaiLoop(og, _model(config, dtype), config, threads, buffer == "shared",
                                max_length, eos)
    return _held[key]


class _GenaiLoop:
    """onnxruntime-genai's greedy loop over ``model`` (its folder in a
    temporary directory, removed with this object); ``stats`` after each
    call: the decode steps' seconds, as ``Generator.stats.decode_s``."""

    def __init__(self, og, model: onnx.ModelProto, config: DecoderConfig, threads: int,
                 shared: bool, max_length: int, eos: int):
        self._og = og
        self._dir = tempfile.TemporaryDirectory(prefix="olc-genai-")
        folder = Path(self._dir.name)
        written = onnx.ModelProto()
        written.CopyFrom(model)  # saving moves the weights out of the proto it saves
        onnx.save(written, str(folder / "model.onnx"), save_as_external_data=True,
                  location="model.onnx.data")
        (folder / "genai_config.json").write_text(
            json.dumps(genai_config(config, context_length=config.max_positions,
                                    eos_token_id=[eos], max_length=max_length,
                                    share_buffer=shared, threads=threads)))
        self.model = og.Model(str(folder))
        self.stats = None

    def generate(self, prompt: np.ndarray, max_new_tokens: int) -> np.ndarray:
        params = self._og.GeneratorParams(self.model)
        params.set_search_options(max_length=prompt.shape[1] + max_new_tokens, do_sample=False)
        generator = self._og.Generator(self.model, params)
        generator.append_tokens(prompt.astype(np.int32))
        steps = []
        while not generator.is_done():
            start = time.perf_counter()
            generator.generate_next_token()
            steps.append(time.perf_counter() - start)
        self.stats = steps[1:]
        return np.asarray(generator.get_sequence(0), np.int64)[None]


def _prompt(config: DecoderConfig, tokens: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.integers(0, config.vocab, size=(1, tokens), dtype=np.int64)


def _summary(stats: list) -> dict:
    """Decode ms per token (the median step), tokens per second, the loop's
    overhead over the calls of one engine."""
    steps = [s for st in stats for s in st.decode_s]
    total = sum(st.prefill_s + sum(st.decode_s) for st in stats)
    inside = sum(st.run_s for st in stats)
    calls_steps = sum(1 + len(st.decode_s) for st in stats)
    return {"decode_ms_per_token": 1e3 * float(np.median(steps)),
            "tokens_per_second": len(steps) / sum(steps),
            "prefill_ms": 1e3 * float(np.median([st.prefill_s for st in stats])),
            "overhead_fraction": 1.0 - inside / total,
            "loop_us_per_step": 1e6 * (total - inside) / calls_steps}


@pytest.mark.parametrize("config,dtype,buffer,threads,real", list(_params()))
def test_generation(benchmark, bench_options, competing_load, config, dtype, buffer, threads,
                    real):
    if real and not bench_options.decoders:
        pytest.skip("real-size decoder: give --decoders or OLC_BENCH_DECODERS=1")
    pytest.importorskip("onnxruntime")
    prompt_tokens, new_tokens, _ = REAL_STEPS if real else TINY_STEPS
    prompt = _prompt(config, prompt_tokens)
    ours, theirs = _generators(config, dtype, buffer, threads, real)

    # untimed: the loops generate the same tokens (the first calls prepare)
    got = ours.generate(prompt, max_new_tokens=new_tokens)[0, prompt_tokens:]
    # onnxruntime-genai stops at its end token, which must be in the
    # vocabulary: one neither the prompt nor our tokens hold
    eos = min(set(range(config.vocab)) - set(prompt[0].tolist()) - set(got.tolist()))
    genai = _genai_loop(config, dtype, buffer, threads, real, eos)

    def differs_at(name, engine):
        want = engine.generate(prompt, max_new_tokens=new_tokens)[0, prompt_tokens:]
        found = first_difference(got, want)
        assert dtype != "float32" or found is None, (
            f"{config.name} {dtype}: new token {found} differs from {name}'s "
            f"({got[found]} vs {want[found]})")
        return found

    difference = differs_at("ORT", theirs)
    genai_difference = None if genai is None else differs_at("onnxruntime-genai", genai)
    ours.generate(prompt, max_new_tokens=new_tokens)
    per_call = ours.stats.prefill_s + sum(ours.stats.decode_s)

    recorded: dict = {"ours": [], "ort": [], "genai": []}

    def run_ours():
        ours.generate(prompt, max_new_tokens=new_tokens)
        recorded["ours"].append(ours.stats)

    def run_ort():
        theirs.generate(prompt, max_new_tokens=new_tokens)
        recorded["ort"].append(theirs.stats)

    def run_genai():
        genai.generate(prompt, max_new_tokens=new_tokens)
        recorded["genai"].append(genai.stats)

    calls = max(1, round(BLOCK_SECONDS / per_call))
    blocks = int(min(MAX_BLOCKS, max(MIN_BLOCKS, bench_options.budget_s / (calls * per_call))))
    # no warm-up calls: every generate call starts from empty caches, and
    # the calls above warmed both engines
    others = {"ort": run_ort} if genai is None else {"ort": run_ort, "genai": run_genai}
    interleave = Interleaver(others, run_ours, calls, 0)

    benchmark.group = f"generation-{config.name}-{dtype}-{buffer}-t{threads}"
    benchmark.extra_info.update(
        contender="ours-vs-ort", model=config.name, layers=config.layers, dtype=dtype,
        buffer=buffer, threads=threads, prompt_tokens=prompt_tokens, new_tokens=new_tokens,
        simd=olc.simd_level(), first_token_difference=difference,
        genai_first_token_difference=genai_difference,
        **competing_load.describe())
    if benchmark.disabled:  # CI: one pass through the machinery
        benchmark.pedantic(run_ours, setup=interleave)
    else:
        with gc_off():
            benchmark.pedantic(run_ours, setup=interleave, rounds=blocks * calls)
        benchmark.extra_info.update(blocks=blocks, calls_per_block=calls,
                                    loadavg_1m=round(os.getloadavg()[0], 2))
    mine, other = _summary(recorded["ours"]), _summary(recorded["ort"])
    benchmark.extra_info.update(
        {f"ours_{k}": round(v, 4) for k, v in mine.items() if k != "overhead_fraction"},
        **{f"ort_{k}": round(v, 4) for k, v in other.items()},
        overhead_fraction=round(mine["overhead_fraction"], 4),
        ratio=round(mine["decode_ms_per_token"] / other["decode_ms_per_token"], 3))
    if recorded["genai"]:
        steps = [s for call in recorded["genai"] for s in call]
        theirs_ms = 1e3 * float(np.median(steps))
        benchmark.extra_info.update(
            genai_decode_ms_per_token=round(theirs_ms, 4),
            genai_tokens_per_second=round(len(steps) / sum(steps), 4),
            ratio_genai=round(mine["decode_ms_per_token"] / theirs_ms, 3))
    if real and not benchmark.disabled:
        assert mine["overhead_fraction"] < OVERHEAD_LIMIT, (
            f"{config.name} {dtype}: the loop takes {mine['overhead_fraction']:.1%} of the "
            f"steps' time ({mine['loop_us_per_step']:.0f} us a step)")
