"""RNN, GRU and LSTM against ONNX Runtime (the oracle for sequence_lens,
clip, activations and their alpha/beta, where the built-ins ignore them),
the built-ins where they are right, and layout 1 against layout 0."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, same_bits, thread_pairs

ort = pytest.importorskip("onnxruntime")

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_OUT = {"RNN": 2, "GRU": 2, "LSTM": 3}
NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
F32_TOL = (2e-5, 2e-6)


def _inputs(op, rng, T, B, K, H, D, dtype=np.float32, layout=0, lens=None, full=True):
    """X, W, R, B, sequence_lens, initial_h (+ initial_c, P) of one node."""
    G = GATES[op]
    xs = (B, T, K) if layout else (T, B, K)
    st = (B, D, H) if layout else (D, B, H)

    def r(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(dtype)

    ins = [r(*xs), r(D, G * H, K, scale=0.5), r(D, G * H, H, scale=0.5)]
    if full:
        ins += [r(D, 2 * G * H), lens, r(*st)]
        if op == "LSTM":
            ins += [r(*st), r(D, 3 * H)]
    return ins


def _model(op, inputs, opset=22, n_out=None, constants=(), outputs=None, **attrs):
    """A one-node model; inputs listed in ``constants`` become initializers."""
    names = [NAMES[i] if a is not None else "" for i, a in enumerate(inputs)]
    n_out = n_out or N_OUT[op]
    outs = outputs or ["Y", "Y_h", "Y_c"][:n_out]
    node = oh.make_node(op, names, outs, **attrs)
    graph_inputs, inits = [], []
    for i, (n, a) in enumerate(zip(names, inputs)):
        if a is None:
            continue
        if i in constants:
            inits.append(numpy_helper.from_array(a, n))
        else:
            graph_inputs.append(oh.make_tensor_value_info(
                n, oh.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    etype = oh.np_dtype_to_tensor_dtype(inputs[0].dtype)
    graph = oh.make_graph([node], "g", graph_inputs,
                          [oh.make_tensor_value_info(o, etype, None) for o in outs if o],
                          initializer=inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=10)


def _feeds(inputs, constants=()):
    return {NAMES[i]: a for i, a in enumerate(inputs) if a is not None and i not in constants}


def _ours(model, feeds, threads=1):
    # registered before the evaluator is built: the built-ins reject in
    # their constructor activations they do not know (Relu, ...)
    olc.register_kernels_global()
    sess = ReferenceEvaluator(model)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    out = sess.run(None, feeds)
    return out, olc.used_kernel_names(sess), sess


def _ort(model, feeds, threads=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check_everywhere(op, model, feeds, expected, tolerance=F32_TOL):
    """Ours at every SIMD level, 1 and 2 threads: close to ``expected``,
    bit-identical across threads, inputs untouched, our kernel ran."""
    originals = {k: v.copy() for k, v in feeds.items()}
    for level in available_simd_levels():
        with capped_simd_level(level):
            runs = []
            for threads in THREAD_COUNTS:
                got, names, _ = _ours(model, feeds, threads)
                assert f"onnx_light_cpu::{op}" in names, names
                for k, (g, e) in enumerate(zip(got, expected)):
                    assert_close(g, e, f"{op} output {k} at {level}, {threads} threads",
                                 tolerance)
                runs.append(got)
            for a, b in thread_pairs(runs):
                assert same_bits(a, b), f"{op} at {level}: thread count changed the result"
    for k, v in feeds.items():
        assert same_bits(v, originals[k]), f"{op} modified input {k}"


# -- against ONNX Runtime ----------------------------------------------------------


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("with_lens", [False, True])
@pytest.mark.parametrize("B", [1, 3])
def test_against_ort(op, direction, with_lens, B):
    rng = np.random.default_rng(len(op) * 7 + len(direction) + with_lens)
    T, K, H = 7, 5, 9
    D = 2 if direction == "bidirectional" else 1
    lens = np.array([7, 3, 5][:B], np.int32) if with_lens else None
    inputs = _inputs(op, rng, T, B, K, H, D, lens=lens)
    attrs = {"hidden_size": H, "direction": direction}
    for lbr in ((0, 1) if op == "GRU" else (None,)):
        if lbr is not None:
            attrs["linear_before_reset"] = lbr
        model = _model(op, inputs, **attrs)
        feeds = _feeds(inputs)
        _check_everywhere(op, model, feeds, _ort(model, feeds))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 2])
def test_against_ort_threads_larger(op, threads, batch):
    """Sizes past a vector width and a GEMM tile, ORT at the same threads;
    batch 1 takes the GEMV path (dense R^T)."""
    rng = np.random.default_rng(3)
    T, B, K, H = 6, batch, 37, 70
    inputs = _inputs(op, rng, T, B, K, H, 2, lens=np.array([6, 4][:batch], np.int32))
    model = _model(op, inputs, hidden_size=H, direction="bidirectional")
    feeds = _feeds(inputs)
    got, names, _ = _ours(model, feeds, threads)
    assert f"onnx_light_cpu::{op}" in names
    for g, e in zip(got, _ort(model, feeds, threads)):
        assert_close(g, e, op, (1e-4, 1e-5))


ACTIVATION_CASES = [
    (["Relu", "Tanh", "Sigmoid"], [], []),
    (["LeakyRelu", "ScaledTanh", "HardSigmoid"], [0.1, 0.8, 0.3], [1.3, 0.4]),
    (["Affine", "Elu", "Softsign"], [0.7, 0.9], [0.2]),
    (["ThresholdedRelu", "Softplus", "Elu"], [0.3, 0.5], []),
    (["HardSigmoid", "Affine", "ScaledTanh"], [], []),  # ORT's defaults
    (["LeakyRelu", "ThresholdedRelu", "Elu"], [], []),
    # Softplus last: LSTM's h of a bounded C.  ONNX Runtime's Softplus is
    # log(1 + exp(x)), infinite past x = 88; ours is x + log1p(exp(-x)) there.
    (["Sigmoid", "Softsign", "Softplus"], [], []),
]


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("case", range(len(ACTIVATION_CASES)))
def test_activations(op, case):
    acts, alpha, beta = ACTIVATION_CASES[case]
    n = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    rng = np.random.default_rng(case)
    T, B, K, H = 4, 2, 3, 5
    inputs = _inputs(op, rng, T, B, K, H, 2, lens=np.array([4, 2], np.int32))
    attrs = {"hidden_size": H, "direction": "bidirectional",
             "activations": acts[:n] + acts[-n:]}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    model = _model(op, inputs, **attrs)
    feeds = _feeds(inputs)
    expected = _ort(model, feeds)
    got, names, _ = _ours(model, feeds)
    assert f"onnx_light_cpu::{op}" in names
    for g, e in zip(got, expected):
        assert_close(g, e, f"{op} {acts[:n]}", (1e-4, 1e-5))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_clip(op):
    rng = np.random.default_rng(11)
    inputs = _inputs(op, rng, 5, 3, 4, 6, 1, lens=np.array([5, 1, 3], np.int32))
    model = _model(op, inputs, hidden_size=6, clip=0.4)
    feeds = _feeds(inputs)
    _check_everywhere(op, model, feeds, _ort(model, feeds))


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_clip_takes_nan_to_the_bound_as_ort_with_a_bias(op):
    """clip is min(clip, x) then max(-clip, x), so a NaN pre-activation
    becomes +clip: ONNX Runtime's LSTM and GRU with a bias B (without B, and
    in RNN, it keeps NaN; tests/fuzz/FINDINGS.md F29)."""
    rng = np.random.default_rng(24)
    inputs = _inputs(op, rng, 3, 2, 3, 4, 1)
    inputs[0][0, 0, 1] = np.nan
    model = _model(op, inputs, hidden_size=4, clip=0.5)
    feeds = _feeds(inputs)
    expected = _ort(model, feeds)
    assert not np.isnan(expected[0]).any()
    _check_everywhere(op, model, feeds, expected)


def test_lstm_input_forget_no_peepholes():
    rng = np.random.default_rng(12)
    inputs = _inputs("LSTM", rng, 5, 2, 4, 6, 2)
    inputs[7] = None  # no P
    inputs[4] = np.array([5, 0], np.int32)  # a batch row of no step: zero states
    model = _model("LSTM", inputs, hidden_size=6, input_forget=1, direction="bidirectional")
    feeds = _feeds(inputs)
    _check_everywhere("LSTM", model, feeds, _ort(model, feeds))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_minimal_inputs(op):
    """X, W, R only; no hidden_size attribute (taken from R)."""
    rng = np.random.default_rng(13)
    inputs = _inputs(op, rng, 3, 1, 2, 4, 1, full=False)
    model = _model(op, inputs)
    expected = _ort(_model(op, inputs, hidden_size=4), _feeds(inputs))
    _check_everywhere(op, model, _feeds(inputs), expected)


# -- against the built-ins ---------------------------------------------------------


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_against_builtin(op, dtype):
    """The built-ins are right without sequence_lens, clip or activations."""
    rng = np.random.default_rng(14)
    inputs = _inputs(op, rng, 4, 3, 5, 6, 1, dtype=dtype)
    model = _model(op, inputs, hidden_size=6)
    feeds = _feeds(inputs)
    expected = ReferenceEvaluator(model).run(None, feeds)
    tol = F32_TOL if dtype == np.float32 else (1e-12, 1e-13)
    _check_everywhere(op, model, feeds, expected, tol)


# -- element types -----------------------------------------------------------------


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("dtype", [np.float16, bfloat16, np.float64])
def test_dtypes(op, dtype):
    """float16 and bfloat16 compute in float32, double in double: against
    ORT's float32 on the same (rounded) values."""
    rng = np.random.default_rng(15)
    inputs = _inputs(op, rng, 5, 2, 3, 4, 2, dtype=dtype, lens=np.array([5, 3], np.int32))
    model = _model(op, inputs, hidden_size=4, direction="bidirectional")
    wide = [None if a is None else a.astype(np.float32) if a.dtype != np.int32 else a
            for a in inputs]
    expected = _ort(_model(op, wide, hidden_size=4, direction="bidirectional"), _feeds(wide))
    got, names, _ = _ours(model, _feeds(inputs), 2)
    assert f"onnx_light_cpu::{op}" in names
    tol = {np.dtype(np.float16): (4e-3, 4e-3), np.dtype(bfloat16): (3e-2, 3e-2),
           np.dtype(np.float64): (1e-5, 1e-6)}[np.dtype(dtype)]
    for g, e in zip(got, expected):
        assert g.dtype == np.dtype(dtype)
        assert_close(g.astype(np.float32), e, f"{op} {np.dtype(dtype)}", tol)


def test_bfloat16_needs_opset_22():
    rng = np.random.default_rng(16)
    inputs = _inputs("GRU", rng, 2, 1, 2, 3, 1, dtype=bfloat16, full=False)
    with pytest.raises(TypeError, match="GRU.*opset 22"):
        _ours(_model("GRU", inputs, opset=14), _feeds(inputs))


# -- layouts, outputs, opsets ------------------------------------------------------


def _batch_major(inputs):
    """The inputs of layout 0 for layout 1: X, initial_h, initial_c with
    their first two axes swapped."""
    return [a.transpose(1, 0, 2).copy() if a is not None and i in (0, 5, 6) else a
            for i, a in enumerate(inputs)]


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("opset", [14, 22])
def test_layout_1_is_layout_0_transposed(op, opset):
    rng = np.random.default_rng(17)
    T, B, K, H, D = 5, 3, 4, 6, 2
    lens = np.array([5, 2, 4], np.int32)
    ins0 = _inputs(op, rng, T, B, K, H, D, lens=lens)
    ins1 = _batch_major(ins0)
    attrs = {"hidden_size": H, "direction": "bidirectional"}
    m0 = _model(op, ins0, opset=opset, **attrs)
    m1 = _model(op, ins1, opset=opset, layout=1, **attrs)
    want = _ort(m0, _feeds(ins0))
    expected = [want[0].transpose(2, 0, 1, 3)] + [w.transpose(1, 0, 2) for w in want[1:]]
    _check_everywhere(op, m1, _feeds(ins1), expected)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_opset_7(op):
    rng = np.random.default_rng(18)
    inputs = _inputs(op, rng, 3, 2, 3, 4, 1, lens=np.array([3, 2], np.int32))
    model = _model(op, inputs, opset=7, hidden_size=4)
    feeds = _feeds(inputs)
    _check_everywhere(op, model, feeds, _ort(model, feeds))


@pytest.mark.parametrize("outputs", [["", "Y_h"], ["Y"], ["", "", "Y_c"], ["", "Y_h", "Y_c"]])
def test_optional_outputs(outputs):
    rng = np.random.default_rng(19)
    inputs = _inputs("LSTM", rng, 4, 2, 3, 5, 1)
    full = _model("LSTM", inputs, hidden_size=5)
    feeds = _feeds(inputs)
    expected = dict(zip(["Y", "Y_h", "Y_c"], _ort(full, feeds)))
    model = _model("LSTM", inputs, hidden_size=5, outputs=outputs)
    got, names, _ = _ours(model, feeds)
    assert "onnx_light_cpu::LSTM" in names
    for name, g in zip([o for o in outputs if o], got):
        assert_close(g, expected[name], name, F32_TOL)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("sizes", [(0, 2, 3, 4), (3, 0, 3, 4), (3, 2, 0, 4), (3, 2, 3, 0)])
def test_empty(op, sizes):
    T, B, K, H = sizes
    rng = np.random.default_rng(20)
    inputs = _inputs(op, rng, T, B, K, H, 2)
    model = _model(op, inputs, direction="bidirectional")
    feeds = _feeds(inputs)
    got, names, _ = _ours(model, feeds)
    assert f"onnx_light_cpu::{op}" in names
    assert got[0].shape == (T, 2, B, H)
    if T == 0:  # no step: the initial states come back
        assert_close(got[1], inputs[5], "Y_h")
    if H and B and T and K == 0:
        expected = ReferenceEvaluator(model).run(None, feeds)
        for g, e in zip(got, expected):
            assert_close(g, e, "K=0", F32_TOL)


def test_strided_and_readonly_inputs():
    rng = np.random.default_rng(21)
    inputs = _inputs("LSTM", rng, 4, 3, 5, 6, 1, lens=np.array([4, 1, 3], np.int32))
    model = _model("LSTM", inputs, hidden_size=6)
    expected = _ort(model, _feeds(inputs))
    strided = []
    for a in inputs:
        if a is not None and a.dtype == np.float32:
            big = np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
            big[..., ::2] = a
            a = big[..., ::2]
            a.flags.writeable = False
        strided.append(a)
    got, names, _ = _ours(model, _feeds(strided))
    for g, e in zip(got, expected):
        assert_close(g, e, "strided", F32_TOL)


def _layouts(a):
    """``a`` (same values) C-ordered, Fortran-ordered, with negative
    strides, and broadcast along its first axis where that repeats a row."""
    out = {"c": a, "fortran": np.asfortranarray(a), "negative": np.ascontiguousarray(
        a[..., ::-1])[..., ::-1]}
    if a.ndim >= 2 and a.shape[0] > 1:
        out["stride0"] = np.broadcast_to(a[:1], a.shape)
    return out


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_bidirectional_clip_every_input_layout(op):
    """Opset 7, bidirectional, clip 2, peepholes, sequence_lens: each
    input in turn Fortran-ordered, with negative strides or broadcast
    (stride 0) gives ONNX Runtime's result on the same values (a Fortran
    P of two directions was read as C-ordered: fuzz seed 12, case 263)."""
    rng = np.random.default_rng(23)
    T, B, K, H, D = 3, 2, 2, 4, 2
    inputs = _inputs(op, rng, T, B, K, H, D, lens=np.array([3, 2], np.int32))
    attrs = {"hidden_size": H, "direction": "bidirectional", "clip": 2.0}
    for i, a in enumerate(inputs):
        if a is None or a.dtype != np.float32:
            continue
        for name, laid in _layouts(a).items():
            if name == "c":
                continue
            ins = list(inputs)
            ins[i] = np.ascontiguousarray(laid) if name == "stride0" else ins[i]
            model = _model(op, ins, opset=7, **attrs)
            expected = _ort(model, _feeds(ins))
            ins[i] = laid
            got, names, _ = _ours(model, _feeds(ins))
            assert f"onnx_light_cpu::{op}" in names
            for k, (g, e) in enumerate(zip(got, expected)):
                assert_close(g, e, f"{op} {NAMES[i]} {name} output {k}", F32_TOL)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_constant_weights_prepared_once(op):
    rng = np.random.default_rng(22)
    inputs = _inputs(op, rng, 4, 2, 5, 6, 2, lens=np.array([4, 3], np.int32))
    constants = (1, 2, 3)
    model = _model(op, inputs, constants=constants, hidden_size=6, direction="bidirectional")
    feeds = _feeds(inputs, constants)
    expected = _ort(model, feeds)
    got, names, sess = _ours(model, feeds, 2)
    got2 = sess.run(None, feeds)
    assert f"onnx_light_cpu::{op}" in names
    for g, g2, e in zip(got, got2, expected):
        assert_close(g, e, op, F32_TOL)
        assert same_bits(g, g2)
    node = sess.rt_nodes_[0]
    assert node.prepared_bytes() > 0


# -- bad input ---------------------------------------------------------------------


def _expect_error(op, inputs, error, match, **attrs):
    with pytest.raises(error, match=match):
        _ours(_model(op, inputs, **attrs), _feeds(inputs))


def test_bad_inputs():
    rng = np.random.default_rng(23)
    ins = _inputs("LSTM", rng, 3, 2, 4, 5, 1, lens=np.array([3, 2], np.int32))
    bad = list(ins)
    bad[1] = bad[1][:, :-1]
    _expect_error("LSTM", bad, ValueError, r"LSTM: input 1 \('W'\) has shape")
    bad = list(ins)
    bad[2] = np.zeros((1, 20, 6), np.float32)
    _expect_error("LSTM", bad, ValueError, r"LSTM: input 2 \('R'\)", hidden_size=5)
    bad = list(ins)
    bad[4] = np.array([4, 2], np.int32)
    _expect_error("LSTM", bad, ValueError, r"LSTM: input 4 \('sequence_lens'\) has values \[4\]")
    bad = list(ins)
    bad[4] = np.array([-1, 2], np.int32)
    _expect_error("LSTM", bad, ValueError, "sequence_lens")
    bad = list(ins)
    bad[5] = np.zeros((1, 3, 5), np.float32)
    _expect_error("LSTM", bad, ValueError, r"input 5 \('initial_h'\)")
    bad = list(ins)
    bad[7] = np.zeros((1, 10), np.float32)
    _expect_error("LSTM", bad, ValueError, r"input 7 \('P'\)")
    _expect_error("LSTM", ins, ValueError, "hidden_size", hidden_size=4)
    _expect_error("LSTM", ins, ValueError, "direction", direction="sideways")
    _expect_error("LSTM", ins, ValueError, "activation 'gelu'",
                  activations=["Gelu", "Tanh", "Tanh"])
    _expect_error("LSTM", ins, ValueError, "activations must list 3",
                  activations=["Tanh"])
    _expect_error("LSTM", ins, ValueError, r"W.*bidirectional", direction="bidirectional")
    _expect_error("LSTM", ins, ValueError, "clip must be positive", clip=-1.0)
    bad = list(ins)
    bad[0] = ins[0].astype(np.float64)
    _expect_error("LSTM", bad, TypeError, "LSTM: input 1")
    bad = list(ins)
    bad[0] = ins[0][0]
    _expect_error("LSTM", bad, ValueError, "rank")


# -- an LSTM encoder end to end ----------------------------------------------------


def _encoder(rng, K, H, T, B):
    """Two bidirectional LSTM layers; layer 2 reads layer 1's Y as
    [T, B, 2 H] (Transpose + Reshape), weights as initializers."""
    inits, nodes = [], []
    x_in = "X"
    for layer, size in enumerate((K, 2 * H)):
        w = (rng.standard_normal((2, 4 * H, size)) * 0.3).astype(np.float32)
        r = (rng.standard_normal((2, 4 * H, H)) * 0.3).astype(np.float32)
        b = (rng.standard_normal((2, 8 * H)) * 0.1).astype(np.float32)
        names = [f"W{layer}", f"R{layer}", f"B{layer}"]
        inits += [numpy_helper.from_array(a, n) for a, n in zip((w, r, b), names)]
        y, yh, yc = f"Y{layer}", f"Yh{layer}", f"Yc{layer}"
        nodes.append(oh.make_node("LSTM", [x_in] + names + ["lens"], [y, yh, yc],
                                  hidden_size=H, direction="bidirectional"))
        nodes.append(oh.make_node("Transpose", [y], [f"T{layer}"], perm=[0, 2, 1, 3]))
        nodes.append(oh.make_node("Reshape", [f"T{layer}", "shape"], [f"S{layer}"]))
        x_in = f"S{layer}"
    inits.append(numpy_helper.from_array(np.array([T, B, 2 * H], np.int64), "shape"))
    graph = oh.make_graph(
        nodes, "encoder",
        [oh.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, K]),
         oh.make_tensor_value_info("lens", TensorProto.INT32, [B])],
        [oh.make_tensor_value_info("S1", TensorProto.FLOAT, None),
         oh.make_tensor_value_info("Yh1", TensorProto.FLOAT, None),
         oh.make_tensor_value_info("Yc1", TensorProto.FLOAT, None)],
        initializer=inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 22)], ir_version=10)


@pytest.mark.parametrize("threads", [1, 2])
def test_lstm_encoder_end_to_end(threads):
    rng = np.random.default_rng(24)
    T, B, K, H = 9, 3, 16, 24
    model = _encoder(rng, K, H, T, B)
    feeds = {"X": rng.standard_normal((T, B, K)).astype(np.float32),
             "lens": np.array([9, 4, 7], np.int32)}
    expected = _ort(model, feeds, threads)
    got, names, _ = _ours(model, feeds, threads)
    assert "onnx_light_cpu::LSTM" in names
    for g, e in zip(got, expected):
        assert_close(g, e, "encoder", (1e-4, 1e-5))


def test_usage_paths():
    rng = np.random.default_rng(25)
    inputs = _inputs("GRU", rng, 3, 2, 3, 4, 2, lens=np.array([3, 1], np.int32))
    model = _model("GRU", inputs, direction="bidirectional")
    olc.register_kernels_global()
    sess = ReferenceEvaluator(model)
    olc.set_num_threads_for_session(sess, 2)
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, _feeds(inputs))
    paths = [p for ps in olc.used_kernel_paths(sess).values() for p in ps] \
        if isinstance(olc.used_kernel_paths(sess), dict) else list(olc.used_kernel_paths(sess))
    assert any("gru_float32_bidirectional_seqlens_dirparallel" in str(p) for p in paths), paths


def test_every_combination_small():
    """Directions x layouts x lens x outputs on tiny sizes (layout 1 via
    layout 0's ORT result)."""
    rng = np.random.default_rng(26)
    for op, direction, layout in itertools.product(
            ["LSTM", "GRU", "RNN"], ["forward", "reverse"], [0, 1]):
        D = 1
        ins0 = _inputs(op, rng, 3, 2, 2, 3, D, lens=np.array([2, 3], np.int32))
        want = _ort(_model(op, ins0, hidden_size=3, direction=direction), _feeds(ins0))
        if layout:
            ins = _batch_major(ins0)
            want = [want[0].transpose(2, 0, 1, 3)] + [w.transpose(1, 0, 2) for w in want[1:]]
        else:
            ins = ins0
        model = _model(op, ins, hidden_size=3, direction=direction, layout=layout)
        got, names, _ = _ours(model, _feeds(ins))
        assert f"onnx_light_cpu::{op}" in names
        for g, e in zip(got, want):
            assert_close(g, e, f"{op} {direction} layout {layout}", F32_TOL)


@pytest.mark.parametrize("op, hidden", [("LSTM", 256), ("GRU", 370), ("RNN", 512),
                                        ("LSTM", 512), ("LSTM", 1), ("GRU", 40)])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gemv_halves_by_step(op, hidden, direction):
    """Batch 1 on one thread a direction, R^T of 1 MB or more (hidden 256
    and more): each step's GEMV takes the columns in two halves, the second
    first on odd steps (olc_rnn_mm_f); split over two threads (forward LSTM
    512, enough work for two) it does not.  Close to ONNX Runtime, the same
    bits at 1 and 2 threads, and where K fits one packed block (256) the
    bits of the same sequence as row 0 of a batch of 2 (the packed GEMM,
    whole columns in k order)."""
    rng = np.random.default_rng(31)
    T, K = 5, 8
    inputs = _inputs(op, rng, T, 1, K, hidden, 2 if direction == "bidirectional" else 1)
    inputs[2] *= 0.2  # R: keep the state off the saturated ends
    model = _model(op, inputs, hidden_size=hidden, direction=direction)
    feeds = _feeds(inputs)
    _check_everywhere(op, model, feeds, _ort(model, feeds), (1e-4, 1e-5))
    if hidden > 256:
        return
    pair = [np.concatenate([a, a], axis=1) if a is not None and a.ndim == 3 and i in (0, 5, 6)
            else a for i, a in enumerate(inputs)]
    batch2 = _model(op, pair, hidden_size=hidden, direction=direction)
    for threads in (1, 2):
        one, _, _ = _ours(model, feeds, threads)
        two, _, _ = _ours(batch2, _feeds(pair), threads)
        assert same_bits(one[0][:, :, :1], two[0][:, :, :1]), (op, hidden, threads)


@pytest.mark.parametrize("sizes", [(16, 4, 64, 128), (3, 4, 8, 256), (3, 1, 8, 512)])
def test_threads_split_unidirectional(sizes):
    """Work above the thresholds: the projection and the steps (packed
    GEMM at batch 4, GEMV at batch 1) on two threads, bit-identical to one."""
    T, B, K, H = sizes
    rng = np.random.default_rng(27)
    inputs = _inputs("LSTM", rng, T, B, K, H, 1, lens=np.array([T, 2, 1, T][:B], np.int32))
    inputs[1] *= 0.2
    inputs[2] *= 0.2
    model = _model("LSTM", inputs, hidden_size=H)
    feeds = _feeds(inputs)
    _check_everywhere("LSTM", model, feeds, _ort(model, feeds), (1e-4, 1e-5))
