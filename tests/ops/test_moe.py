"""com.microsoft MoE: differential tests against ONNX Runtime and the NumPy
reference (onnx_light_cpu/reference/moe.py) over activations, SwiGLU
parameters, k, renormalisation, biases, input rank, token counts, weights
as inputs or initializers, float32/float16 (bfloat16 against a float32
oracle on rounded inputs), at every SIMD level and 1/2 threads; bad input
gives clear errors.

The helpers here (a model with optional inputs and initializers, the
level/thread sweep, the ORT oracle) serve test_qmoe.py too.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.reference import moe as naive
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, same_bits, same_bits_all

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
# float32: ONNX Runtime sums in another order (and its sigmoid/tanh differ
# in the last bits); float16: one final rounding each, which can fall on
# either side of a tie (2^-11 relative) plus the float32 differences.
TOL = {np.dtype(np.float32): (2e-5, 2e-5), np.dtype(np.float16): (4e-3, 4e-3),
       np.dtype(bfloat16): (1.6e-2, 1.6e-2)}


def element_type(a: np.ndarray) -> int:
    return oh.np_dtype_to_tensor_dtype(a.dtype)


def moe_model(op: str, inputs, *, constant=(), **attrs):
    """A one-node model; None inputs are omitted (empty names), indices in
    ``constant`` become initializers.  Returns (model, feeds)."""
    names, values, feeds, inits = [], [], {}, []
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
            continue
        name = f"x{i}"
        names.append(name)
        if i in constant:
            inits.append(onnx.numpy_helper.from_array(a, name))
        else:
            values.append(oh.make_tensor_value_info(name, element_type(a), a.shape))
            feeds[name] = a
    while names and not names[-1]:
        names.pop()
    node = oh.make_node(op, names, ["y"], domain=MS, **attrs)
    graph = oh.make_graph([node], "moe", values,
                          [oh.make_tensor_value_info("y", element_type(inputs[0]), None)],
                          initializer=inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                oh.make_opsetid(MS, 1)])
    return model, feeds


def run_ort(op: str, inputs, *, constant=(), **attrs):
    model, feeds = moe_model(op, inputs, constant=constant, **attrs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def run_ours(op: str, inputs, *, constant=(), threads=1, **attrs):
    """Output, kernel names and paths of one run with our kernels."""
    model, feeds = moe_model(op, inputs, constant=constant, **attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    out = sess.run(None, feeds)[0]
    return out, olc.used_kernel_names(sess), olc.used_kernel_paths(sess)


def check(op: str, inputs, expected, *, constant=(), tolerance=None, **attrs):
    """Ours at every SIMD level and 1/2 threads: our kernel ran, the output
    matches ``expected`` (relative to its largest magnitude), is the same
    at both thread counts, and the inputs are unchanged."""
    originals = [None if a is None else a.copy() for a in inputs]
    expected = np.asarray(expected)
    rtol, atol = tolerance or TOL[inputs[0].dtype]
    scale = max(1.0, float(np.abs(expected.astype(np.float64)).max(initial=0.0)))
    for level in available_simd_levels():
        with capped_simd_level(level):
            outputs = []
            for threads in THREAD_COUNTS:
                got, names, _ = run_ours(op, inputs, constant=constant, threads=threads, **attrs)
                assert f"onnx_light_cpu::{op}" in names, names
                assert_close(got, expected.astype(inputs[0].dtype),
                             f"{op} at {level}, {threads} threads", (rtol, atol * scale))
                outputs.append(got)
            assert same_bits_all(outputs), f"{op} at {level}: thread count changed the result"
    for a, original in zip(inputs, originals):
        assert a is None or same_bits(a, original), f"{op} modified an input"


def make_inputs(rng, T, H, inter, E, *, fused=False, bias=True, dtype=np.float32, rank=2):
    f = 2 if fused else 1
    shape = (T, H) if rank == 2 else (1, T, H) if T else (0, 3, H)
    x = rng.standard_normal(shape).astype(np.float32)
    tokens = int(np.prod(shape[:-1]))
    router = rng.standard_normal((tokens, E)).astype(np.float32)
    w1 = (rng.standard_normal((E, f * inter, H)) / np.sqrt(H)).astype(np.float32)
    w2 = (rng.standard_normal((E, H, inter)) / np.sqrt(inter)).astype(np.float32)
    b1 = rng.standard_normal((E, f * inter)).astype(np.float32) * 0.5 if bias else None
    b2 = rng.standard_normal((E, H)).astype(np.float32) * 0.5 if bias else None
    return [None if a is None else a.astype(dtype) for a in (x, router, w1, b1, w2, b2)]


def reference(inputs, *, k=1, normalize_routing_weights=0, activation_type="relu",
              activation_alpha=1.0, activation_beta=0.0, swiglu_limit=None, **_):
    x, router, w1, b1, w2, b2 = [None if a is None else a.astype(np.float32) for a in inputs]
    return naive.moe(x, router, w1, b1, w2, b2, k=k, normalize=bool(normalize_routing_weights),
                     activation=activation_type, alpha=activation_alpha,
                     beta=activation_beta, limit=swiglu_limit)


def check_both(inputs, **attrs):
    """Against ONNX Runtime, and ORT against the NumPy reference."""
    want = run_ort("MoE", inputs, **attrs)
    ref = reference(inputs, **attrs)
    np.testing.assert_allclose(want.astype(np.float64), ref, rtol=1e-4, atol=1e-4)
    check("MoE", inputs, want, **attrs)


@pytest.mark.parametrize("activation", ["relu", "gelu", "silu", "identity", "swiglu"])
@pytest.mark.parametrize("k,normalize", [(1, 0), (2, 0), (2, 1), (4, 1)])
def test_activations_and_routing(activation, k, normalize):
    rng = np.random.default_rng(k * 10 + normalize)
    fused = activation == "swiglu"
    attrs = dict(k=k, normalize_routing_weights=normalize, activation_type=activation)
    if fused:
        attrs["swiglu_fusion"] = 1
    check_both(make_inputs(rng, 7, 40, 24, 4, fused=fused), **attrs)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("activation", ["relu", "swiglu"])
def test_biases(bias, activation):
    rng = np.random.default_rng(3)
    fused = activation == "swiglu"
    attrs = dict(k=2, activation_type=activation, **({"swiglu_fusion": 1} if fused else {}))
    check_both(make_inputs(rng, 5, 33, 17, 3, fused=fused, bias=bias), **attrs)


def test_bias_on_one_projection_only():
    rng = np.random.default_rng(4)
    x, router, w1, b1, w2, b2 = make_inputs(rng, 6, 24, 16, 4)
    check_both([x, router, w1, None, w2, b2], k=2)
    check_both([x, router, w1, b1, w2, None], k=2)


@pytest.mark.parametrize("params", [
    dict(activation_alpha=1.702, activation_beta=1.0, swiglu_limit=7.0),
    dict(activation_alpha=1.5, activation_beta=0.5, swiglu_limit=0.5),
    dict(activation_alpha=0.5),
    dict(swiglu_limit=1.0),
])
def test_swiglu_parameters(params):
    rng = np.random.default_rng(5)
    inputs = make_inputs(rng, 9, 32, 20, 4, fused=True)
    inputs[2] = inputs[2] * 4  # values beyond the limits
    check_both(inputs, k=2, activation_type="swiglu", swiglu_fusion=1, **params)


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_alpha_and_beta_only_shape_swiglu(activation):
    rng = np.random.default_rng(18)
    check_both(make_inputs(rng, 6, 24, 16, 4), k=2, activation_type=activation,
               activation_alpha=2.0, activation_beta=0.5)


@pytest.mark.parametrize("T,H,inter,E,k", [(1, 64, 48, 8, 2), (2, 17, 9, 3, 3),
                                           (300, 24, 40, 2, 2), (37, 48, 33, 6, 1)])
def test_shapes(T, H, inter, E, k):
    """One token (decode), odd sizes off the vector width, more rows per
    expert than one tile (300 > 256)."""
    rng = np.random.default_rng(T + H)
    check_both(make_inputs(rng, T, H, inter, E, fused=True), k=k, activation_type="swiglu",
               swiglu_fusion=1, normalize_routing_weights=1)


@pytest.mark.parametrize("activation", ["relu", "gelu", "silu", "identity", "swiglu"])
def test_one_token(activation):
    """Decode: the token's experts run as one batch (its own code path)."""
    rng = np.random.default_rng(20)
    fused = activation == "swiglu"
    attrs = dict(k=3, activation_type=activation, **({"swiglu_fusion": 1} if fused else {}))
    check_both(make_inputs(rng, 1, 40, 24, 6, fused=fused), **attrs)
    check_both(make_inputs(rng, 1, 40, 24, 6, fused=fused, rank=3), **attrs)


def test_rank3_input():
    rng = np.random.default_rng(6)
    inputs = make_inputs(rng, 5, 16, 8, 4, rank=3)
    inputs[0] = inputs[0].reshape(1, 5, 16)
    x = rng.standard_normal((2, 3, 16)).astype(np.float32)
    router = rng.standard_normal((6, 4)).astype(np.float32)
    check_both([x, router] + inputs[2:], k=2, activation_type="gelu")


def test_empty_tokens():
    rng = np.random.default_rng(7)
    x, router, w1, b1, w2, b2 = make_inputs(rng, 1, 8, 4, 2)
    x, router = x[:0], router[:0]
    check("MoE", [x, router, w1, b1, w2, b2], np.zeros((0, 8), np.float32), k=1)
    x3 = np.zeros((2, 0, 8), np.float32)
    got, _, _ = run_ours("MoE", [x3, router, w1, b1, w2, b2])
    assert got.shape == (2, 0, 8) and got.dtype == np.float32


def test_ties_pick_the_higher_expert():
    """Equal router probabilities: the higher expert index first (ORT)."""
    rng = np.random.default_rng(8)
    inputs = make_inputs(rng, 4, 16, 8, 4)
    inputs[1] = np.array([[0, 0, 0, 0], [1, 0, 1, 0], [0, 2, 2, 2], [3, 3, 1, 1]], np.float32)
    for k in (1, 2, 3):
        check_both(inputs, k=k)


def test_nan_router_logits():
    """A token with a NaN logit gets a row of zeros (as ONNX Runtime)."""
    rng = np.random.default_rng(19)
    inputs = make_inputs(rng, 5, 16, 8, 4)
    inputs[1][2] = np.nan
    inputs[1][3, 1] = np.nan
    want = run_ort("MoE", inputs, k=2)
    assert not want[2:4].any()
    check("MoE", inputs, want, k=2)


@pytest.mark.parametrize("limit", [None, 7.0])
def test_swiglu_nan_weight_gives_nan(limit):
    """Regression: the SwiGLU clamps turned a NaN gate into the limit (inf
    without one), so a NaN weight gave +-inf; ONNX Runtime gives NaN."""
    rng = np.random.default_rng(23)
    inputs = make_inputs(rng, 6, 32, 16, 4, fused=True)
    inputs[2][:, 0] = np.nan  # gate row 0 of every expert
    inputs[2][:, 3] = np.nan  # linear row 1
    attrs = dict(k=2, activation_type="swiglu", swiglu_fusion=1)
    if limit is not None:
        attrs["swiglu_limit"] = limit
    want = run_ort("MoE", inputs, **attrs)
    assert np.isnan(want).all()
    check("MoE", inputs, want, **attrs)


def test_constant_weights_are_prepared_once():
    rng = np.random.default_rng(9)
    inputs = make_inputs(rng, 12, 40, 24, 4, fused=True)
    attrs = dict(k=2, activation_type="swiglu", swiglu_fusion=1)
    want = run_ort("MoE", inputs, **attrs)
    check("MoE", inputs, want, constant=(2, 3, 4, 5), **attrs)
    model, feeds = moe_model("MoE", inputs, constant=(2, 3, 4, 5), **attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    first = sess.run(None, feeds)[0]
    node = sess.rt_nodes_[0]
    prepared = dict(node._prepared_inputs)
    again = sess.run(None, feeds)[0]
    assert same_bits(first, again)
    assert node.prepared_bytes() >= inputs[2].nbytes + inputs[4].nbytes
    assert all(node._prepared_inputs[key] is value for key, value in prepared.items())


@pytest.mark.parametrize("activation", ["silu", "swiglu"])
def test_float16(activation):
    rng = np.random.default_rng(10)
    fused = activation == "swiglu"
    attrs = dict(k=2, activation_type=activation, **({"swiglu_fusion": 1} if fused else {}))
    inputs = make_inputs(rng, 11, 40, 24, 4, fused=fused, dtype=np.float16)
    check("MoE", inputs, run_ort("MoE", inputs, **attrs), **attrs)
    check("MoE", inputs, run_ort("MoE", inputs, **attrs), constant=(2, 4), **attrs)


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_bfloat16_against_float32(activation):
    """ONNX Runtime has no bfloat16 MoE: compare with float32 ORT on the
    bfloat16 values."""
    rng = np.random.default_rng(11)
    fused = activation == "swiglu"
    attrs = dict(k=2, activation_type=activation, **({"swiglu_fusion": 1} if fused else {}))
    inputs = make_inputs(rng, 11, 40, 24, 4, fused=fused, dtype=bfloat16)
    want = run_ort("MoE", [a.astype(np.float32) for a in inputs], **attrs)
    check("MoE", inputs, want, **attrs)
    check("MoE", inputs, want, constant=(2, 3, 4, 5), **attrs)


# -- bad input ---------------------------------------------------------------


def run_once(inputs, **attrs):
    return run_ours("MoE", inputs, **attrs)[0]


def test_router_disagreeing_with_experts():
    rng = np.random.default_rng(12)
    x, router, w1, b1, w2, b2 = make_inputs(rng, 4, 8, 4, 4)
    with pytest.raises(ValueError, match=r"MoE: input 1 .*3 experts"):
        run_once([x, router[:, :3], w1, b1, w2, b2])
    with pytest.raises(ValueError, match=r"MoE: input 1 .*one row per token"):
        run_once([x, router[:3], w1, b1, w2, b2])
    with pytest.raises(ValueError, match=r"MoE: input 1 "):
        run_once([x, router.reshape(1, 4, 4), w1, b1, w2, b2])


def test_k_larger_than_experts():
    rng = np.random.default_rng(13)
    inputs = make_inputs(rng, 4, 8, 4, 3)
    with pytest.raises(ValueError, match=r"MoE: attribute k=4 exceeds the number of experts 3"):
        run_once(inputs, k=4)
    with pytest.raises(ValueError, match=r"MoE: attribute k must be >= 1"):
        run_once(inputs, k=0)


@pytest.mark.parametrize("attrs,message", [
    (dict(activation_type="tanh"), r"MoE: attribute activation_type='tanh' is not supported"),
    (dict(activation_type="geglu", swiglu_fusion=1), r"activation_type='geglu'"),
    (dict(activation_type="swiglu", swiglu_fusion=2), r"MoE: attribute swiglu_fusion=2"),
    (dict(activation_type="swiglu"), r"MoE: activation_type='swiglu' needs swiglu_fusion=1"),
])
def test_unsupported_attributes(attrs, message):
    rng = np.random.default_rng(14)
    inputs = make_inputs(rng, 4, 8, 4, 2, fused=attrs.get("activation_type") in
                         ("swiglu", "geglu"))
    with pytest.raises(NotImplementedError, match=message):
        run_once(inputs, **attrs)


def test_sparse_mixer_top2():
    """use_sparse_mixer=1: ONNX Runtime's CPU accepts it for k=2 and routes
    as without it; any other k is an error."""
    rng = np.random.default_rng(21)
    inputs = make_inputs(rng, 6, 16, 8, 4)
    for normalize in (0, 1):
        check_both(inputs, k=2, use_sparse_mixer=1, normalize_routing_weights=normalize)
    for k in (1, 3):
        with pytest.raises(ValueError, match=r"MoE: attribute use_sparse_mixer=1 needs k=2"):
            run_once(inputs, k=k, use_sparse_mixer=1)


def test_separate_fc3_rejected():
    rng = np.random.default_rng(15)
    inputs = make_inputs(rng, 4, 8, 4, 2)
    w3 = rng.standard_normal((2, 4, 8)).astype(np.float32)
    with pytest.raises(NotImplementedError, match=r"MoE: input 6 .*FC3"):
        run_once(inputs + [w3], activation_type="silu")


def test_bad_shapes_and_types():
    rng = np.random.default_rng(16)
    x, router, w1, b1, w2, b2 = make_inputs(rng, 4, 8, 4, 2)
    with pytest.raises(ValueError, match=r"MoE: input 4 .*expected \(2, 8, 4\)"):
        run_once([x, router, w1, b1, w2[:, :, :3], b2])
    with pytest.raises(ValueError, match=r"MoE: input 2 .*expected \(2, 4, 8\)"):
        run_once([x, router, w1[:, :, :7], b1, w2, b2])
    with pytest.raises(ValueError, match=r"MoE: input 3 .*expected \(2, 4\)"):
        run_once([x, router, w1, b1[:, :3], w2, b2])
    with pytest.raises(ValueError, match=r"MoE: input 5 "):
        run_once([x, router, w1, b1, w2, b2[:1]])
    with pytest.raises(ValueError, match=r"MoE: input 0 "):
        run_once([x.reshape(-1), router, w1, b1, w2, b2])
    with pytest.raises(TypeError, match=r"MoE: input 2 .*float16"):
        run_once([x, router, w1.astype(np.float16), b1, w2, b2])
    with pytest.raises(TypeError, match=r"MoE: input 0 .*element type float64"):
        run_once([x.astype(np.float64), router, w1, b1, w2, b2])


@pytest.mark.slow
@pytest.mark.parametrize("activation,k,normalize,bias,dtype", itertools.product(
    ["relu", "gelu", "silu", "identity", "swiglu"], [1, 2, 3], [0, 1], [False, True],
    [np.float32, np.float16]))
def test_sweep(activation, k, normalize, bias, dtype):
    rng = np.random.default_rng(17)
    fused = activation == "swiglu"
    attrs = dict(k=k, normalize_routing_weights=normalize, activation_type=activation,
                 **({"swiglu_fusion": 1} if fused else {}))
    inputs = make_inputs(rng, 29, 72, 40, 5, fused=fused, bias=bias, dtype=dtype)
    check("MoE", inputs, run_ort("MoE", inputs, **attrs), **attrs)
