"""Tiny random BERT and GPT-2 from ``transformers``, exported with
``torch.onnx.export`` and fused by ``onnxruntime.transformers.optimizer`` as
a user would, run with our kernels and match ONNX Runtime on the same fused
graph, at every SIMD level and 1 and 2 threads; every ``com.microsoft``
operator the optimizer emitted must have run our kernel.

torch and transformers are not dependencies of the package: without them
this file is skipped.
"""

from __future__ import annotations

import inspect
import itertools
import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, same_bits

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")
optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
fusion_options = pytest.importorskip("onnxruntime.transformers.fusion_options")

HEADS, HIDDEN, VOCAB, BATCH, SEQ = 4, 32, 99, 2, 7
# Float32 sums taken in another order than ONNX Runtime's; the largest
# difference seen on these models is below 1e-6.
RTOL, ATOL = 1e-5, 1e-5
# The exported graph must still compute the torch model (ONNX Runtime's
# fusions and ours both sum in other orders than torch).
TORCH_ATOL = 1e-4


@dataclass(frozen=True)
class Case:
    name: str
    model_type: str  # transformers architecture and optimizer model_type
    inputs: tuple[str, ...]
    # com.microsoft operators the fused graph must contain: the fusions this
    # export is known to get from ONNX Runtime 1.32's optimizer.
    fused: frozenset[str]
    embed_layer_norm: bool = True  # FusionOptions.enable_embed_layer_norm
    # opt_level 1 (the default for BERT and GPT-2): ONNX Runtime's basic
    # optimizations, then the Python fusions; opt_level 2 with
    # only_onnxruntime: ONNX Runtime's own fusions alone.
    opt_level: int = 1
    only_onnxruntime: bool = False


BERT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
BERT_FUSED = frozenset({"EmbedLayerNormalization", "Attention", "SkipLayerNormalization",
                        "BiasGelu"})
# Not here: BERT without an attention_mask input and GPT-2's attention. The
# optimizer's attention fusions do not match transformers 5's graphs there
# (Softmax of Mul(MatMul, scale) without a mask; GPT-2's additive causal
# mask, where its GPT-2 fusions expect a Where or Sub of the causal bias), so
# those stay standard operators.
CASES = [
    Case("bert", "bert", BERT_INPUTS, BERT_FUSED),
    Case("bert-unfused-embedding", "bert", BERT_INPUTS, BERT_FUSED - {"EmbedLayerNormalization"},
         embed_layer_norm=False),
    Case("bert-no-token-types", "bert", ("input_ids", "attention_mask"), BERT_FUSED),
    Case("bert-onnxruntime-fusions", "bert", BERT_INPUTS,
         frozenset({"FusedMatMul", "FusedGemm", "BiasGelu"}), opt_level=2, only_onnxruntime=True),
    Case("gpt2", "gpt2", ("input_ids", "attention_mask"),
         frozenset({"SkipLayerNormalization", "FastGelu"})),
    Case("gpt2-onnxruntime-fusions", "gpt2", ("input_ids", "attention_mask"),
         frozenset({"FusedMatMul", "FastGelu"}), opt_level=2, only_onnxruntime=True),
]


def _torch_model(case: Case):
    torch.manual_seed(0)
    if case.model_type == "bert":
        config = transformers.BertConfig(
            hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS,
            intermediate_size=37, vocab_size=VOCAB, max_position_embeddings=64,
            attn_implementation="eager")
        model = transformers.BertModel(config)
    else:
        config = transformers.GPT2Config(
            n_embd=HIDDEN, n_layer=2, n_head=HEADS, vocab_size=VOCAB, n_positions=64,
            bos_token_id=0, eos_token_id=0, use_cache=False, attn_implementation="eager")
        model = transformers.GPT2Model(config)
    return model.eval()


class _Positional(torch.nn.Module):
    """The model with its inputs named, called positionally by the exporter
    (transformers 5 models take their other arguments by keyword)."""

    def __init__(self, model, names):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)), return_dict=False)


def _feeds(case: Case) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1, 5:] = 0  # the second sequence is padded
    all_feeds = {
        "input_ids": rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64),
        "attention_mask": mask,
        "token_type_ids": rng.integers(0, 2, (BATCH, SEQ)).astype(np.int64),
    }
    return {name: all_feeds[name] for name in case.inputs}


def _export_and_fuse(case: Case, tmp_path, feeds):
    """Returns the fused model and the torch model's outputs on ``feeds``."""
    model = _Positional(_torch_model(case), case.inputs)
    args = tuple(torch.from_numpy(feeds[name]) for name in case.inputs)
    with torch.no_grad():
        expected = [t.numpy() for t in model(*args)]
    n_outputs = len(expected)
    outputs = ["last_hidden_state", "pooler_output"][:n_outputs]
    path = tmp_path / f"{case.name}.onnx"
    # The TorchScript exporter (the only one before torch 2.5): the dynamo
    # one's graphs are not those the optimizer's fusions match (no Attention,
    # no EmbedLayerNormalization, and its GPT-2 graph fails the optimizer's
    # checker).  Its deprecation and tracing warnings are about the export.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters \
        else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, args, str(path), input_names=list(case.inputs), output_names=outputs,
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in case.inputs},
            opset_version=17, **legacy)
    options = fusion_options.FusionOptions(case.model_type)
    options.enable_embed_layer_norm = case.embed_layer_norm
    fused = optimizer.optimize_model(
        str(path), model_type=case.model_type, num_heads=HEADS, hidden_size=HIDDEN,
        optimization_options=options, opt_level=case.opt_level,
        only_onnxruntime=case.only_onnxruntime)
    # saving adds the com.microsoft opset import the fused operators need
    fused_path = tmp_path / f"{case.name}-fused.onnx"
    fused.save_model_to_file(str(fused_path))
    return onnx.load(fused_path), expected


def _run_ours(model, feeds, threads):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds), set(olc.used_kernel_names(sess))


def _run_onnxruntime(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    # the graph as the optimizer left it, node for node
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _our_kernel_names(op_types) -> dict[str, str]:
    names = {(k.domain, k.op_type): k.name for k in olc.registered_kernels()}
    missing = sorted(op for op in op_types if ("com.microsoft", op) not in names)
    assert not missing, f"the optimizer emitted operators we have no kernel for: {missing}"
    return {op: names["com.microsoft", op] for op in op_types}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fused_transformer_matches_onnxruntime(case, tmp_path):
    feeds = _feeds(case)
    model, from_torch = _export_and_fuse(case, tmp_path, feeds)
    microsoft = Counter(n.op_type for n in model.graph.node if n.domain == "com.microsoft")
    assert case.fused <= set(microsoft), f"{case.name}: the optimizer fused only {microsoft}"
    if not case.embed_layer_norm:
        assert "EmbedLayerNormalization" not in microsoft
    kernels = _our_kernel_names(microsoft)
    originals = {name: x.copy() for name, x in feeds.items()}

    want = _run_onnxruntime(model, feeds)
    assert len(want) == len(from_torch)
    for k, (a, b) in enumerate(zip(want, from_torch)):
        np.testing.assert_allclose(a, b, rtol=0, atol=TORCH_ATOL,
                                   err_msg=f"{case.name}: ONNX Runtime vs torch, output {k}")
    for level in available_simd_levels():
        with capped_simd_level(level):
            per_thread = []
            for threads in THREAD_COUNTS:
                got, used = _run_ours(model, feeds, threads)
                not_ours = sorted(op for op, name in kernels.items() if name not in used)
                assert not not_ours, f"{case.name} at {level}: not our kernel: {not_ours}"
                assert len(got) == len(want)
                for k, (a, b) in enumerate(zip(got, want)):
                    assert a.shape == b.shape and a.dtype == b.dtype, (k, a.shape, b.shape)
                    np.testing.assert_allclose(
                        a, b, rtol=RTOL, atol=ATOL,
                        err_msg=f"{case.name} output {k} at {level}, {threads} threads")
                per_thread.append(got)
            for a, b in itertools.combinations(per_thread, 2):
                assert all(same_bits(x, y) for x, y in zip(a, b)), \
                    f"{case.name} at {level}: the thread count changed the result"
    for name, x in feeds.items():
        assert same_bits(x, originals[name]), f"{case.name}: input {name} modified"

