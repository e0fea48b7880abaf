"""``python -m onnx_light_cpu``: list the kernels, check or run a model with them.

    python -m onnx_light_cpu kernels [--naive]
    python -m onnx_light_cpu where OP_TYPE
    python -m onnx_light_cpu check MODEL.onnx [--policy optimized|naive] [--no-fold]
    python -m onnx_light_cpu run [MODEL.onnx] [--inputs FILE.npz] [--threads N]
                                 [--compare builtin,ort] [--repeat N]
    python -m onnx_light_cpu generate MODEL_DIR (--prompt TEXT | --input-ids 1,2,3)
                                      --max-new-tokens N [--sample [--temperature T]
                                      [--top-k K] [--top-p P] [--seed S]] [--threads N]
                                      [--max-length N] [--compare ort]

Without a model, ``run`` uses a small default model built in code.
``check`` runs nothing but the constant nodes folded at load: it says, per
operator, whether one of our kernels, onnx.reference or nothing runs it
(exit status 1 if anything cannot run), what folding saves per run and how
many Conv chains run fused.
``generate`` runs :class:`onnx_light_cpu.Generator` over a decoder made by
ONNX Runtime's model builder (a folder with genai_config.json, or an .onnx
file), streams the new tokens, then prints the prefill time, the decode
time per token and the tokens per second; ``--compare ort`` runs the same
greedy loop on ONNX Runtime and reports the first token that differs.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

from . import (
    register_kernels_for_session,
    registered_kernels,
    set_kernel_usage_recording,
    set_num_threads_for_session,
    simd_level,
    used_kernel_names,
    used_kernel_paths,
)
from .registry.check import check_model
from .registry.hook import MissingOperatorsError
from .registry.records import PACKAGE_ROOT

DEFAULT_SHAPE = (64, 4096)


def default_model() -> onnx.ModelProto:
    """A gated activation block: y = Log(Exp(|tanh(x) * sigmoid(x)|)), and
    mask = Not(x > 0)."""
    nodes = [
        oh.make_node("Tanh", ["x"], ["t"]),
        oh.make_node("Sigmoid", ["x"], ["s"]),
        oh.make_node("Mul", ["t", "s"], ["g"]),
        oh.make_node("Abs", ["g"], ["a"]),
        oh.make_node("Exp", ["a"], ["e"]),
        oh.make_node("Log", ["e"], ["y"]),
        oh.make_node("Greater", ["x", "zero"], ["positive"]),
        oh.make_node("Not", ["positive"], ["mask"]),
    ]
    graph = oh.make_graph(
        nodes,
        "gated_activation",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", DEFAULT_SHAPE[1]])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", DEFAULT_SHAPE[1]]),
         oh.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", DEFAULT_SHAPE[1]])],
        [oh.make_tensor("zero", TensorProto.FLOAT, [], [0.0])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random feeds for the graph inputs; a symbolic dimension is taken as
    the default model's batch for 'batch', else 1."""
    rng = np.random.default_rng(seed)
    initializers = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value")
                 else DEFAULT_SHAPE[0] if d.dim_param == "batch" else 1
                 for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if dtype == np.bool_:
            feeds[value.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(0, 8, size=shape).astype(dtype)
        else:
            feeds[value.name] = rng.normal(size=shape).astype(dtype)
    return feeds


def _median_seconds(fn, repeat: int) -> float:
    fn()  # warm-up: first-call allocations and caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _compare_outputs(name: str, ours: list, theirs: list) -> None:
    diffs = []
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype == np.bool_ or b.dtype == np.bool_:
            diffs.append(float(np.count_nonzero(a != b)))
        else:
            diffs.append(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)),
                                      initial=0.0)))
    print(f"  max abs difference vs {name}: {max(diffs, default=0.0):.3g}")


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _expected_inputs(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    initializers = {i.name for i in model.graph.initializer}
    return {v.name: v for v in model.graph.input if v.name not in initializers}


def _describe_input(value: onnx.ValueInfoProto) -> str:
    tensor = value.type.tensor_type
    dtype = TensorProto.DataType.Name(tensor.elem_type).lower()
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in tensor.shape.dim]
    return f"{value.name}[{','.join(dims)}]:{dtype}"


def check_feeds(model: onnx.ModelProto, feeds: dict) -> str | None:
    """None when ``feeds`` has every input of ``model``, nothing else, each
    of the declared element type; else one line saying what is wrong and
    listing the inputs the model expects."""
    expected = _expected_inputs(model)
    problems = []
    missing = [name for name in expected if name not in feeds]
    unknown = [name for name in feeds if name not in expected]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if unknown:
        problems.append(f"unknown {', '.join(unknown)}")
    for name, value in expected.items():
        if name not in feeds:
            continue
        elem_type = value.type.tensor_type.elem_type
        if not elem_type:
            continue
        want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
        got = np.asarray(feeds[name]).dtype
        if got != want:
            problems.append(f"{name} is {got}, expected {want}")
    if not problems:
        return None
    listing = ", ".join(_describe_input(v) for v in expected.values()) or "none"
    return f"inputs do not match the model ({'; '.join(problems)}); it expects: {listing}"


def _unsupported_by_builtin(model: onnx.ModelProto) -> list[str]:
    """Operators of domains onnx.reference has no implementation for."""
    known = {"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"}
    local = {(f.domain, f.name) for f in model.functions}
    return sorted({f"{n.domain}::{n.op_type}" for n in model.graph.node
                   if n.domain not in known and (n.domain, n.op_type) not in local})


def _run_builtin(model: onnx.ModelProto, feeds, threads, repeat):
    unsupported = _unsupported_by_builtin(model)
    if unsupported:
        print(f"  builtin: skipped: onnx.reference cannot run {', '.join(unsupported)}")
        return None
    try:
        builtin = ReferenceEvaluator(model)
        outputs = builtin.run(None, feeds)
    except Exception as e:  # whatever stops a contender is reported, not raised
        print(f"  builtin: skipped: {_one_line(e)}")
        return None
    seconds = _median_seconds(lambda: builtin.run(None, feeds), repeat)
    print(f"  builtin: median {seconds * 1e3:.3f} ms")
    return outputs


def _run_ort(model: onnx.ModelProto, feeds, threads, repeat):
    try:
        import onnxruntime as ort
    except ImportError:
        print("  ort: skipped: onnxruntime is not installed")
        return None
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    try:
        sess = ort.InferenceSession(model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
        outputs = sess.run(None, feeds)
    except Exception as e:  # whatever stops a contender is reported, not raised
        print(f"  ort: skipped: {_one_line(e)}")
        return None
    seconds = _median_seconds(lambda: sess.run(None, feeds), repeat)
    print(f"  ort: median {seconds * 1e3:.3f} ms")
    return outputs


CONTENDERS = {"builtin": _run_builtin, "ort": _run_ort}


def _load_feeds(args, model) -> dict:
    if not args.inputs:
        return random_inputs(model)
    with np.load(args.inputs) as data:
        return dict(data)


def command_run(args) -> int:
    contenders = [c for c in (args.compare or "").split(",") if c]
    for contender in contenders:
        if contender not in CONTENDERS:
            print(f"error: unknown comparison {contender!r}: use builtin and/or ort",
                  file=sys.stderr)
            return 2
    try:
        model = onnx.load(args.model) if args.model else default_model()
        feeds = _load_feeds(args, model)
    except Exception as e:  # an unreadable model or feeds file
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    problem = check_feeds(model, feeds)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    try:
        sess = ReferenceEvaluator(model)
        register_kernels_for_session(sess)
        if args.threads:
            set_num_threads_for_session(sess, args.threads)
        set_kernel_usage_recording(sess, True)
        ours = sess.run(None, feeds)
    except MissingOperatorsError as e:  # one line per missing operator
        print(f"error: onnx_light_cpu could not run the model: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a command-line user gets one line, not a traceback
        print(f"error: onnx_light_cpu could not run the model: {_one_line(e)}", file=sys.stderr)
        return 1
    names, paths = used_kernel_names(sess), used_kernel_paths(sess)
    set_kernel_usage_recording(sess, False)
    seconds = _median_seconds(lambda: sess.run(None, feeds), args.repeat)

    print(f"model: {args.model or 'default (gated activation, built in code)'}")
    print(f"inputs: {', '.join(f'{k}{list(v.shape)}:{v.dtype}' for k, v in feeds.items())}")
    print(f"simd level: {simd_level()}, threads: {args.threads or 'default'}")
    print(f"onnx_light_cpu: median {seconds * 1e3:.3f} ms over {args.repeat} runs")
    print("kernels that ran:")
    for (name, path), count in collections.Counter(zip(names, paths)).items():
        print(f"  {name} [{path}] x{count}")
    if not names:
        print("  none (no node of this model has an onnx_light_cpu kernel)")
    for contender in contenders:
        theirs = CONTENDERS[contender](model, feeds, args.threads, args.repeat)
        if theirs is not None:
            _compare_outputs(contender, ours, theirs)
    return 0


def command_kernels(args) -> int:
    for r in registered_kernels(args.policy):
        until = r.until_version if r.until_version is not None else ""
        print(f"{r.domain:14} {r.op_type:28} {r.name:40} opset {r.since_version}-{until}  "
              f"{','.join(t[7:-1] for t in r.element_types)}")
    return 0


def command_check(args) -> int:
    try:
        model = onnx.load(args.model)
    except Exception as e:  # an unreadable model
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    result = check_model(model, args.policy, fold_constants=args.fold)
    print(f"model: {args.model}")
    print(f"policy: {args.policy.value} (com.microsoft kernels)")
    for line in result.lines():
        print(line)
    return 0 if result.ok else 1


def family_files(record) -> dict[str, str]:
    """The test and benchmark files of a kernel's family, named by the stem
    its adapter module has (relative to the repository root)."""
    stem = pathlib.Path(record.adapter_path).stem
    return {"tests": f"tests/ops/test_{stem}.py",
            "benchmarks": f"benchmarks/test_bench_{stem}.py"}


# Where the files that exercise an operator are looked for, by kind.
EXERCISING = (("tests", "tests/ops", "test_*.py"), ("benchmarks", "benchmarks", "test_bench_*.py"))


def exercising_files(record, repository: pathlib.Path) -> dict[str, list[str]]:
    """The test and benchmark files that exercise an operator: those that
    name it at the start of a string (a node's type, a case's label), so
    "DeformConv" finds tests/ops/test_deform_conv.py although its kernel's
    family (conv) names tests/ops/test_conv.py; the family's own file first."""
    named = re.compile(rf"""["']{re.escape(record.op_type)}\b""")
    own = family_files(record)
    found = {}
    for kind, folder, pattern in EXERCISING:
        paths = [path.relative_to(repository).as_posix()
                 for path in sorted((repository / folder).glob(pattern))
                 if named.search(path.read_text(encoding="utf-8", errors="replace"))]
        found[kind] = sorted(paths, key=lambda path: path != own[kind])
    return found


def gradient_files(record) -> dict[str, str]:
    """Where its gradient rule and their tests would be, by the same stem
    (few operators have one: ``where`` prints those that exist)."""
    stem = pathlib.Path(record.adapter_path).stem
    return {"gradient": f"{PACKAGE_ROOT.name}/onnx_light_cpu/gradients/{stem}.py",
            "grad tests": f"tests/gradients/test_grad_{stem}.py"}


def command_where(args) -> int:
    from . import MicrosoftKernelImplementation

    records = {r.name: r for policy in MicrosoftKernelImplementation
               for r in registered_kernels(policy) if r.op_type == args.op_type}
    if not records:
        print(f"error: no onnx_light_cpu kernel runs {args.op_type!r} "
              "(python -m onnx_light_cpu kernels lists them)", file=sys.stderr)
        return 2
    source = PACKAGE_ROOT.name  # "src" in a checkout
    repository = PACKAGE_ROOT.parent
    for record in records.values():
        print(f"{record.name} ({record.domain}, {record.implementation})")
        print(f"  adapter:    {source}/{record.adapter_path}")
        for path in record.core_paths:
            print(f"  core:       {source}/{path}")
        for path in record.header_paths:
            print(f"  header:     {source}/{path}")
        for kind, paths in exercising_files(record, repository).items():
            for path in paths:
                print(f"  {kind + ':':11} {path}")
        for kind, path in gradient_files(record).items():
            if (repository / path).exists():
                print(f"  {kind + ':':11} {path}")
    return 0

# -- generate -----------------------------------------------------------------

# What Generator raises for a model, a prompt or options it cannot take: a
# usage error (exit status 2), as an unreadable model is for run and check.
GENERATE_ERRORS = (ValueError, TypeError, ImportError)
SAMPLING_OPTIONS = ("temperature", "top_k", "top_p", "seed")


def parse_token_ids(text: str) -> list[int]:
    """``'1,2,3'`` -> [1, 2, 3]; a ValueError naming the item that is not an int."""
    ids = []
    for item in text.split(","):
        try:
            ids.append(int(item.strip()))
        except ValueError:
            raise ValueError(f"--input-ids takes comma-separated integers, got {item.strip()!r} "
                             f"in {text!r}") from None
    return ids


def first_difference(ours: np.ndarray, theirs: np.ndarray) -> int | None:
    """The first index where two token sequences differ (one ending before
    the other counts), None when they are equal."""
    n = min(len(ours), len(theirs))
    unequal = np.flatnonzero(ours[:n] != theirs[:n])
    if unequal.size:
        return int(unequal[0])
    return None if len(ours) == len(theirs) else n


def _timing_lines(stats) -> list[str]:
    """The prefill's time, then the decode steps' (none after one new token)."""
    steps = len(stats.decode_s)
    if not steps:
        return [f"prefill: {stats.prefill_s * 1e3:.3f} ms", "decode: no decode step"]
    return [f"prefill: {stats.prefill_s * 1e3:.3f} ms",
            f"decode: {stats.decode_ms_per_token:.3f} ms per token (median of {steps} steps), "
            f"{stats.tokens_per_second:.1f} tokens per second"]


def _compare_generation(args, model, prompt: np.ndarray, ours: np.ndarray, stats) -> None:
    """The same greedy loop on ONNX Runtime: its times, the first token that differs."""
    from .generation import Generator

    try:
        theirs_gen = Generator(model, num_threads=args.threads, max_length=args.max_length,
                               engine="onnxruntime")
        theirs = theirs_gen.generate(prompt, max_new_tokens=args.max_new_tokens)
    except ImportError:
        print("ort: skipped: onnxruntime is not installed")
        return
    except Exception as e:  # whatever stops a contender is reported, not raised
        print(f"ort: skipped: {_one_line(e)}")
        return
    s = theirs_gen.stats
    line = f"ort: prefill {s.prefill_s * 1e3:.3f} ms"
    if s.decode_s:
        line += (f", decode {s.decode_ms_per_token:.3f} ms per token, "
                 f"{s.tokens_per_second:.1f} tokens per second")
        if stats.decode_s:
            line += f" (ours / ort: {stats.decode_ms_per_token / s.decode_ms_per_token:.2f})"
    print(line)
    start = prompt.shape[1]
    mine, other = ours[0, start:], theirs[0, start:]
    index = first_difference(mine, other)
    if index is None:
        print(f"ort: all {len(mine)} new tokens match")
        return
    show = [str(int(x[index])) if index < len(x) else "end" for x in (mine, other)]
    print(f"ort: first difference at new token {index} (position {start + index}): "
          f"ours {show[0]}, ort {show[1]}")


def command_generate(args) -> int:
    from .generation import Generator, text_streamer

    compare = [c for c in (args.compare or "").split(",") if c]
    problem = None
    if any(c != "ort" for c in compare):
        problem = f"unknown comparison {args.compare!r}: generate compares with ort only"
    elif compare and args.sample:
        problem = "--compare ort compares the greedy loops: drop --sample"
    elif not args.sample:
        given = [f"--{o.replace('_', '-')}" for o in SAMPLING_OPTIONS
                 if getattr(args, o) is not None]
        if given:
            problem = f"{', '.join(given)}: sampling options, give --sample too"
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    try:
        gen = Generator(args.model, num_threads=args.threads, max_length=args.max_length)
        tokenizer = gen.tokenizer() if args.prompt is not None else None
        if tokenizer is not None:
            prompt = np.array([tokenizer.encode(args.prompt).ids], np.int64)
        else:
            prompt = np.array([parse_token_ids(args.input_ids)], np.int64)
    except GENERATE_ERRORS as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    except MissingOperatorsError as e:  # one line per missing operator
        print(f"error: onnx_light_cpu could not run the model: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a command-line user gets one line, not a traceback
        print(f"error: onnx_light_cpu could not load the model: {_one_line(e)}", file=sys.stderr)
        return 1

    options = {}
    if args.sample:
        defaults = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": None}
        options = {name: default if getattr(args, name) is None else getattr(args, name)
                   for name, default in defaults.items()}
        options["do_sample"] = True
    header = [f"model: {args.model} (onnx_light_cpu, threads {args.threads or 'default'}, "
              f"simd {simd_level()})",
              f"prompt: {prompt.shape[1]} tokens"]
    stream = (text_streamer(tokenizer, prompt[0].tolist(),
                            lambda text: print(text, end="", flush=True))
              if tokenizer is not None else
              lambda token: print(f" {int(token[0])}", end="", flush=True))
    started = False

    def start() -> None:  # the first lines once the model has taken the prompt
        nonlocal started
        if not started:
            started = True
            print("\n".join(header))
            print(args.prompt if tokenizer is not None else "new tokens:", end="", flush=True)

    def streamer(token: np.ndarray) -> None:
        start()
        stream(token)

    try:
        out = gen.generate(prompt, max_new_tokens=args.max_new_tokens, streamer=streamer,
                           **options)
    except Exception as e:
        if started:  # end the streamed line
            print()
        if isinstance(e, GENERATE_ERRORS):
            print(f"error: {_one_line(e)}", file=sys.stderr)
            return 2
        # a command-line user gets one line, not a traceback
        print(f"error: onnx_light_cpu could not run the model: {_one_line(e)}", file=sys.stderr)
        return 1
    start()
    print()
    new_tokens = out.shape[1] - prompt.shape[1]
    if new_tokens == 0:
        print("nothing generated (--max-new-tokens 0)")
        return 0
    if new_tokens < args.max_new_tokens:
        print(f"stopped at an end-of-sequence token after {new_tokens} new tokens")
    for line in _timing_lines(gen.stats):
        print(line)
    if compare:
        _compare_generation(args, args.model, prompt, out, gen.stats)
    return 0


def main(argv: list[str] | None = None) -> int:
    from . import MicrosoftKernelImplementation

    parser = argparse.ArgumentParser(prog="python -m onnx_light_cpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    kernels = sub.add_parser("kernels", help="print the kernel inventory")
    kernels.add_argument("--naive", dest="policy", action="store_const",
                         const=MicrosoftKernelImplementation.NAIVE,
                         default=MicrosoftKernelImplementation.OPTIMIZED,
                         help="list the NAIVE com.microsoft family")
    check = sub.add_parser("check", help="who runs each operator of a model, what folding saves")
    check.add_argument("model", help="ONNX file")
    check.add_argument("--policy", type=MicrosoftKernelImplementation,
                       choices=list(MicrosoftKernelImplementation),
                       default=MicrosoftKernelImplementation.OPTIMIZED,
                       metavar="{optimized,naive}",
                       help="com.microsoft implementation family (default: optimized)")
    check.add_argument("--naive", dest="policy", action="store_const",
                       const=MicrosoftKernelImplementation.NAIVE, help="same as --policy naive")
    check.add_argument("--no-fold", dest="fold", action="store_false",
                       help="build without folding constants (runs no node at all)")
    where = sub.add_parser("where", help="the files of an operator's kernels")
    where.add_argument("op_type", help="operator type, such as MatMulNBits")
    run = sub.add_parser("run", help="run a model through ReferenceEvaluator with the kernels")
    run.add_argument("model", nargs="?", help="ONNX file (default: a model built in code)")
    run.add_argument("--inputs", help=".npz file of feeds (default: random)")
    run.add_argument("--threads", type=int, help="threads for our kernels and ORT")
    run.add_argument("--compare", default="builtin,ort",
                     help="comma-separated: builtin, ort (default: both)")
    run.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    generate = sub.add_parser(
        "generate", help="generate tokens with a decoder made by ONNX Runtime's model builder")
    generate.add_argument("model", help="model folder (genai_config.json, or one .onnx file) "
                          "or the decoder's .onnx file")
    prompt = generate.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", metavar="TEXT",
                        help="text (needs tokenizer.json next to the model and the tokenizers "
                        "package)")
    prompt.add_argument("--input-ids", metavar="IDS",
                        help="the prompt's token ids, comma-separated: 1,2,3")
    generate.add_argument("--max-new-tokens", type=int, required=True, metavar="N",
                          help="tokens to generate (fewer if an end-of-sequence id comes)")
    generate.add_argument("--sample", action="store_true",
                          help="sample the next token (default: greedy)")
    generate.add_argument("--temperature", type=float, metavar="T",
                          help="with --sample (default 1)")
    generate.add_argument("--top-k", type=int, metavar="K", help="with --sample (default 0: off)")
    generate.add_argument("--top-p", type=float, metavar="P", help="with --sample (default 1: off)")
    generate.add_argument("--seed", type=int, metavar="S", help="with --sample: the draws' seed")
    generate.add_argument("--threads", type=int, metavar="N",
                          help="threads for our kernels and ORT")
    generate.add_argument("--max-length", type=int, metavar="N",
                          help="cap prompt + new tokens (and static buffers) below the "
                          "model's context length")
    generate.add_argument("--compare", default="", metavar="ort",
                          help="ort: run the same greedy loop on ONNX Runtime, report the "
                          "first token that differs")
    args = parser.parse_args(argv)
    if args.command == "generate":
        return command_generate(args)
    if args.command == "kernels":
        return command_kernels(args)
    if args.command == "where":
        return command_where(args)
    if args.command == "check":
        return command_check(args)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return command_run(args)
