"""CausalConvWithState, ai.onnx (27) against the onnx.reference built-in and
com.microsoft against ONNX Runtime (float32, float16; bfloat16 against a
float32 run on rounded inputs) and NAIVE against OPTIMIZED: both layouts,
higher-rank channels-last inputs, dilation, optional bias and past state,
activations, empty and short sequences, at every SIMD level and 1/2
threads; bad input."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, element_type, same_bits

MS = "com.microsoft"
OPTIMIZED = olc.MicrosoftKernelImplementation.OPTIMIZED
NAIVE = olc.MicrosoftKernelImplementation.NAIVE
KERNEL = "onnx_light_cpu::CausalConvWithState"
MS_KERNEL = "onnx_light_cpu::MicrosoftCausalConvWithState"
NAIVE_KERNEL = "onnx_light_cpu::NaiveMicrosoftCausalConvWithState"
# Sums of K products in float32 (ours: bias first, taps in order) against
# other orders and float64: relative error a few ulp of the largest term.
TOL = {np.dtype(np.float32): (1e-5, 1e-5), np.dtype(np.float16): (2e-3, 2e-3),
       np.dtype(bfloat16): (1.6e-2, 1.6e-2)}
NAMES = ("x", "w", "b", "s")


def model(inputs: dict, domain: str = "", **attrs) -> onnx.ModelProto:
    """One CausalConvWithState node; ``inputs`` maps NAMES to arrays or None."""
    names = [n if inputs.get(n) is not None else "" for n in NAMES]
    while names and not names[-1]:
        names.pop()
    node = oh.make_node("CausalConvWithState", names, ["y", "present"], domain=domain, **attrs)
    dtype = element_type(inputs["x"].dtype)
    graph = oh.make_graph(
        [node], "causal_conv",
        [oh.make_tensor_value_info(n, element_type(inputs[n].dtype), None) for n in names if n],
        [oh.make_tensor_value_info(n, dtype, None) for n in ("y", "present")])
    opsets = [oh.make_opsetid("", 27 if not domain else 21)]
    if domain:
        opsets.append(oh.make_opsetid(domain, 1))
    return oh.make_model(graph, opset_imports=opsets, ir_version=10 if domain else 13)


def feeds(inputs: dict) -> dict:
    return {n: a for n, a in inputs.items() if a is not None}


def run_ours(m, inputs, threads=1, policy=OPTIMIZED):
    olc.register_kernels_global(microsoft_implementation=policy)
    try:
        sess = ReferenceEvaluator(m)
    finally:
        olc.unregister_kernels_global()
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds(inputs)), olc.used_kernel_names(sess)


def run_builtin(m, inputs):
    return ReferenceEvaluator(m).run(None, feeds(inputs))


def run_ort(m, inputs):
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds(inputs))


def check(m, inputs, expected, kernel, tolerance=None):
    """Ours at every level and thread count against ``expected``; the state
    output is a copy and must match exactly."""
    originals = {n: a.copy() for n, a in feeds(inputs).items()}
    dtype = inputs["x"].dtype
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                got, names = run_ours(m, inputs, threads)
                assert kernel in names, f"{names} misses {kernel}"
                assert_close(got[0], expected[0], f"output at {level}, {threads} threads",
                             tolerance or TOL[dtype])
                assert_close(got[1], expected[1], "present_state", (0.0, 0.0))
                results.append(got)
            for a, b in itertools.combinations(results, 2):
                assert all(same_bits(x, y) for x, y in zip(a, b)), "thread count changed the result"
    for n, a in feeds(inputs).items():
        assert same_bits(a, originals[n]), f"input {n} modified"


def make_inputs(rng, dtype, b, c, length, k, dilation=1, bias=True, past=True, channels_last=False,
                dims=None):
    """Channels-first (b, c, L) or channels-last (b, L, *dims) inputs."""
    sl = (k - 1) * dilation
    dims = dims or (c,)
    if channels_last:
        x, s = rng.standard_normal((b, length, *dims)), rng.standard_normal((b, sl, *dims))
    else:
        x, s = rng.standard_normal((b, c, length)), rng.standard_normal((b, c, sl))
    return {"x": x.astype(dtype), "w": (rng.standard_normal((c, 1, k)) * 0.5).astype(dtype),
            "b": rng.standard_normal(c).astype(dtype) if bias else None,
            "s": s.astype(dtype) if past else None}


# ---------------------------------------------------------------- ai.onnx

SHAPES = [  # b, c, L, k
    (1, 1, 1, 4), (2, 3, 7, 4), (2, 5, 2, 4), (1, 4, 0, 4), (2, 3, 9, 1), (1, 17, 40, 3),
    (3, 8, 33, 4), (1, 2, 3, 6),
]


@pytest.mark.parametrize("b,c,length,k", SHAPES)
@pytest.mark.parametrize("bias,past", [(True, True), (False, True), (True, False), (False, False)])
@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
def test_onnx_float32_matches_builtin(b, c, length, k, bias, past, activation):
    rng = np.random.default_rng(b * 100 + c * 10 + length)
    inputs = make_inputs(rng, np.float32, b, c, length, k, bias=bias, past=past)
    m = model(inputs, activation=activation)
    check(m, inputs, run_builtin(m, inputs), KERNEL)


@pytest.mark.parametrize("dtype", [np.float16, bfloat16])
@pytest.mark.parametrize("activation", ["none", "silu"])
@pytest.mark.parametrize("length", [0, 2, 37])
def test_onnx_narrow_types(dtype, activation, length):
    rng = np.random.default_rng(length)
    inputs = make_inputs(rng, dtype, 2, 19, length, 4)
    m = model(inputs, activation=activation)
    wide = {n: None if a is None else a.astype(np.float32) for n, a in inputs.items()}
    expected = [a.astype(dtype) for a in run_builtin(model(wide, activation=activation), wide)]
    check(m, inputs, expected, KERNEL)
    # The built-in on the narrow type itself.
    check(m, inputs, run_builtin(m, inputs), KERNEL, tolerance=(3e-2, 3e-2))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16])
def test_onnx_prefill_two_threads(dtype):
    rng = np.random.default_rng(9)
    inputs = make_inputs(rng, dtype, 1, 256, 160, 4)
    wide = {n: a.astype(np.float32) for n, a in inputs.items()}
    expected = [a.astype(dtype) for a in run_builtin(model(wide, activation="silu"), wide)]
    check(model(inputs, activation="silu"), inputs, expected, KERNEL)


# ---------------------------------------------------------- com.microsoft

MS_CASES = [  # b, c, L, k, dilation, channels_last, dims
    (1, 1, 1, 4, 1, False, None), (2, 5, 7, 4, 1, False, None), (2, 5, 7, 4, 2, False, None),
    (1, 6, 2, 4, 3, False, None), (2, 5, 0, 4, 1, False, None), (1, 33, 50, 3, 1, False, None),
    (2, 6, 7, 4, 1, True, None), (2, 6, 7, 4, 2, True, (2, 3)), (1, 70, 1, 4, 1, True, None),
    (1, 70, 0, 4, 1, True, None), (2, 24, 2, 5, 1, True, (2, 3, 4)), (1, 130, 19, 4, 1, True, None),
    (2, 4, 5, 1, 1, True, None), (2, 4, 5, 1, 1, False, None),
]


@pytest.mark.parametrize("b,c,length,k,dilation,channels_last,dims", MS_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("bias,past,activation", [(True, True, "silu"), (False, False, "none"),
                                                  (True, False, "swish"), (False, True, "none")])
def test_microsoft_matches_ort(b, c, length, k, dilation, channels_last, dims, dtype, bias, past,
                               activation):
    rng = np.random.default_rng(b + c + length + k)
    inputs = make_inputs(rng, dtype, b, c, length, k, dilation, bias, past, channels_last, dims)
    m = model(inputs, MS, activation=activation, dilation=dilation,
              channels_last=int(channels_last))
    check(m, inputs, run_ort(m, inputs), MS_KERNEL)
    naive, names = run_ours(m, inputs, policy=NAIVE)
    assert names == [NAIVE_KERNEL]
    check(m, inputs, naive, MS_KERNEL)


@pytest.mark.parametrize("channels_last", [False, True])
def test_microsoft_bfloat16_against_float32_ort(channels_last):
    rng = np.random.default_rng(1)
    inputs = make_inputs(rng, bfloat16, 2, 12, 9, 4, 2, channels_last=channels_last)
    attrs = {"activation": "silu", "dilation": 2, "channels_last": int(channels_last)}
    wide = {n: a.astype(np.float32) for n, a in inputs.items()}
    expected = [a.astype(bfloat16) for a in run_ort(model(wide, MS, **attrs), wide)]
    m = model(inputs, MS, **attrs)
    check(m, inputs, expected, MS_KERNEL)
    naive, _ = run_ours(m, inputs, policy=NAIVE)
    check(m, inputs, naive, MS_KERNEL)


@pytest.mark.parametrize("channels_last", [False, True])
def test_microsoft_prefill_two_threads(channels_last):
    rng = np.random.default_rng(2)
    inputs = make_inputs(rng, np.float32, 1, 256, 130, 4, channels_last=channels_last)
    m = model(inputs, MS, activation="silu", channels_last=int(channels_last))
    check(m, inputs, run_ort(m, inputs), MS_KERNEL)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_initializer_weights_and_streaming(channels_last, dtype):
    """Weights and bias as initializers (prepared once, reused); a prefill
    then decode steps fed their own present state equal one long run."""
    rng = np.random.default_rng(4)
    c, k, dilation = 40, 4, 2
    full = make_inputs(rng, dtype, 2, c, 11, k, dilation, past=False, channels_last=channels_last)
    attrs = {"activation": "silu", "dilation": dilation, "channels_last": int(channels_last)}
    axis = 1 if channels_last else 2
    sl = (k - 1) * dilation
    state_shape = (2, sl, c) if channels_last else (2, c, sl)

    def streaming_model():
        node = oh.make_node("CausalConvWithState", ["x", "w", "b", "s"], ["y", "present"],
                            domain=MS, **attrs)
        t = element_type(dtype)
        graph = oh.make_graph(
            [node], "stream",
            [oh.make_tensor_value_info("x", t, None), oh.make_tensor_value_info("s", t, None)],
            [oh.make_tensor_value_info(n, t, None) for n in ("y", "present")],
            initializer=[onnx.numpy_helper.from_array(full["w"], "w"),
                         onnx.numpy_helper.from_array(full["b"], "b")])
        return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)])

    whole, _ = run_ours(model(full, MS, **attrs), full)
    sess = ReferenceEvaluator(streaming_model())
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    state = np.zeros(state_shape, dtype)
    pieces = []
    for start, stop in ((0, 5), (5, 6), (6, 6), (6, 7), (7, 11)):
        x = np.take(full["x"], range(start, stop), axis=axis)
        y, state = sess.run(None, {"x": x, "s": state})
        pieces.append(y)
    assert olc.used_kernel_names(sess)[0] == MS_KERNEL
    assert_close(np.concatenate(pieces, axis=axis), whole[0], "streamed output",
                 TOL[np.dtype(dtype)])
    assert_close(state, whole[1], "final state", (0.0, 0.0))


def test_noncontiguous_inputs():
    rng = np.random.default_rng(3)
    inputs = make_inputs(rng, np.float32, 2, 6, 12, 4)
    inputs["x"] = inputs["x"][:, :, ::2]
    m = model(inputs, activation="silu")
    check(m, inputs, run_builtin(m, inputs), KERNEL)


# ------------------------------------------------------------ bad input

def _expect(error, match, m, inputs):
    before = {n: a.copy() for n, a in feeds(inputs).items()}
    for policy in (OPTIMIZED, NAIVE):
        with pytest.raises(error, match=match) as info:
            run_ours(m, inputs, policy=policy)
        assert "CausalConvWithState" in str(info.value)
    for n, a in feeds(inputs).items():
        assert same_bits(a, before[n])


BAD = [
    # (what, mutate inputs, attrs, domain, error, match)
    ("past too short", lambda i: {**i, "s": i["s"][:, :, :2]}, {}, "", ValueError,
     r"input 3 \('s'\) must have shape"),
    ("past batch", lambda i: {**i, "s": i["s"][:1]}, {}, MS, ValueError, r"input 3 \('s'\)"),
    ("weight channels", lambda i: {**i, "w": i["w"][:3]}, {}, "", ValueError, r"input 1 \('w'\)"),
    ("weight middle", lambda i: {**i, "w": i["w"].reshape(2, 2, 4)}, {}, MS, ValueError,
     r"input 1 \('w'\)"),
    ("weight rank", lambda i: {**i, "w": i["w"][:, 0]}, {}, "", ValueError,
     r"input 1 \('w'\) has rank 2"),
    ("bias shape", lambda i: {**i, "b": i["b"][:2]}, {}, MS, ValueError, r"input 2 \('b'\)"),
    ("input rank", lambda i: {**i, "x": i["x"][0]}, {}, "", ValueError, "rank 3"),
    ("input dtype", lambda i: {**i, "x": i["x"].astype(np.float64)}, {}, "", TypeError,
     "element type"),
    ("mixed dtypes", lambda i: {**i, "b": i["b"].astype(np.float16)}, {}, MS, TypeError,
     r"input 2 \('b'\) has element type float16, expected float32 like input 0"),
    ("activation", lambda i: i, {"activation": "gelu"}, "", ValueError, "activation"),
    ("ms activation", lambda i: i, {"activation": "relu"}, MS, ValueError, "activation"),
    ("dilation 0", lambda i: i, {"dilation": 0}, MS, ValueError, "dilation"),
    ("ndim 2", lambda i: i, {"ndim": 2}, MS, NotImplementedError, "ndim"),
    ("state window", lambda i: i, {"state_window": 2}, MS, NotImplementedError, "state_window"),
    ("state length", lambda i: i, {"channels_last": 1, "state_length": 5}, MS,
     NotImplementedError, "state_length"),
    ("input channels", lambda i: i, {"channels_last": 1, "input_channels": 2}, MS,
     NotImplementedError, "input_channels"),
    ("channels last rank 2", lambda i: {**i, "x": i["x"][:, 0]}, {"channels_last": 1}, MS,
     ValueError, "rank >= 3"),
]


@pytest.mark.parametrize("what,mutate,attrs,domain,error,match", BAD, ids=[c[0] for c in BAD])
def test_bad_input(what, mutate, attrs, domain, error, match):
    rng = np.random.default_rng(0)
    inputs = mutate(make_inputs(rng, np.float32, 2, 4, 5, 4))
    _expect(error, match, model(inputs, domain, **attrs), inputs)
