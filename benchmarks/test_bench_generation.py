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
same, its default optimization level, as a Generator builds it).  Both must
generate the same tokens before timing (float32; int4 records where they
first differ: at accuracy level 4 each quantizes activations its own way).
pytest-benchmark times our generate calls; ORT's blocks run between ours'
(``Interleaver``).  ``extra_info`` holds, from ``Generator.stats``:

* ``ours_decode_ms_per_token`` / ``ort_decode_ms_per_token``: the median
  decode step over every timed call, and ``ratio`` = ours / ORT;
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
import os

import numpy as np
import onnx
import pytest

import onnx_light_cpu as olc
from onnx_light_cpu.cli import first_difference

from ._harness import Interleaver, gc_off
from .decoders import DTYPES, QWEN2_0_5B, TINY, DecoderConfig, build_decoder

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

    # untimed: both loops generate the same tokens (the first calls prepare)
    got = ours.generate(prompt, max_new_tokens=new_tokens)[0, prompt_tokens:]
    want = theirs.generate(prompt, max_new_tokens=new_tokens)[0, prompt_tokens:]
    difference = first_difference(got, want)
    assert dtype != "float32" or difference is None, (
        f"{config.name} {dtype}: new token {difference} differs from ORT's "
        f"({got[difference]} vs {want[difference]})")
    ours.generate(prompt, max_new_tokens=new_tokens)
    per_call = ours.stats.prefill_s + sum(ours.stats.decode_s)

    recorded: dict = {"ours": [], "ort": []}

    def run_ours():
        ours.generate(prompt, max_new_tokens=new_tokens)
        recorded["ours"].append(ours.stats)

    def run_ort():
        theirs.generate(prompt, max_new_tokens=new_tokens)
        recorded["ort"].append(theirs.stats)

    calls = max(1, round(BLOCK_SECONDS / per_call))
    blocks = int(min(MAX_BLOCKS, max(MIN_BLOCKS, bench_options.budget_s / (calls * per_call))))
    # no warm-up calls: every generate call starts from empty caches, and
    # the calls above warmed both engines
    interleave = Interleaver({"ort": run_ort}, run_ours, calls, 0)

    benchmark.group = f"generation-{config.name}-{dtype}-{buffer}-t{threads}"
    benchmark.extra_info.update(
        contender="ours-vs-ort", model=config.name, layers=config.layers, dtype=dtype,
        buffer=buffer, threads=threads, prompt_tokens=prompt_tokens, new_tokens=new_tokens,
        simd=olc.simd_level(), first_token_difference=difference,
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
    if real and not benchmark.disabled:
        assert mine["overhead_fraction"] < OVERHEAD_LIMIT, (
            f"{config.name} {dtype}: the loop takes {mine['overhead_fraction']:.1%} of the "
            f"steps' time ({mine['loop_us_per_step']:.0f} us a step)")
