"""Conv, ConvTranspose, Col2Im and com.microsoft FusedConv against ONNX
Runtime (float32, float16; bfloat16 through float32), the onnx.reference
built-in (double; Col2Im) and a float64 NumPy oracle (ConvTranspose with
group > 1, where the built-in fails): 1-D to 3-D, groups and depthwise,
strides, pads, dilations, every auto_pad, output_padding and output_shape,
optional bias, constant and fed weights, odd sizes, every SIMD level, 1 and
2 threads bit for bit, strided and read-only inputs, empty tensors; a
residual block and a depthwise-separable block end to end; bad input."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu import simd
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import (
    THREAD_COUNTS,
    assert_close,
    node_model,
    run_builtin,
    run_ours,
    same_bits,
)

ort = pytest.importorskip("onnxruntime")

# Sums of C*k products in float32 in another order than ORT's: a few ulp
# of the largest partial sum, relative to the output scale.
TOL = {np.dtype(np.float32): (2e-5, 2e-5), np.dtype(np.float16): (2e-3, 2e-3),
       np.dtype(bfloat16): (1.6e-2, 1.6e-2), np.dtype(np.float64): (1e-12, 1e-12)}


def _ort_run(model: onnx.ModelProto, inputs, threads: int = 1) -> list:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for out in m.graph.output:
        out.type.tensor_type.elem_type = m.graph.input[0].type.tensor_type.elem_type
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 4
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in m.graph.input]
    return sess.run(None, {n: np.ascontiguousarray(a) for n, a in zip(names, inputs)})


def ort_oracle(op, inputs, opset=22, domain="", **attrs):
    """ORT's result; bfloat16 runs its float32 kernel on the same values."""
    if inputs[0].dtype == bfloat16:
        wide = [a.astype(np.float32) for a in inputs]
        return [y.astype(bfloat16) for y in ort_oracle(op, wide, opset, domain, **attrs)]
    model = node_model(op, inputs, opset=opset, domain=domain, **attrs)
    return _ort_run(model, inputs)


def _scaled_tol(dtype, expected):
    rtol, atol = TOL[np.dtype(dtype)]
    e = np.abs(np.asarray(expected, dtype=np.float64))
    e = e[np.isfinite(e)]
    scale = float(e.max()) if e.size else 1.0
    return rtol, atol * max(scale, 1.0)


def check(op, inputs, expected, kernel=None, opset=22, domain="", levels=True, **attrs):
    """Ours at every SIMD level and thread count: close to ``expected``, the
    same bits at 1 and 2 threads, inputs untouched, our kernel ran."""
    model = node_model(op, inputs, opset=opset, domain=domain, **attrs)
    originals = [a.copy() for a in inputs]
    kernel = kernel or f"onnx_light_cpu::{op}"
    tol = _scaled_tol(inputs[0].dtype, expected)
    for level in (available_simd_levels() if levels else [None]):
        with capped_simd_level(level) if level else contextlib.nullcontext():
            results = []
            for threads in THREAD_COUNTS:
                got, names, paths = run_ours(model, inputs, threads)
                assert kernel in names, (names, paths)
                assert_close(got[0], expected, f"{op} {attrs} at {level}, {threads} threads",
                             tol)
                results.append(got[0])
            for a, b in itertools.combinations(results, 2):
                assert same_bits(a, b), f"{op}: the thread count changed the result"
    for a, o in zip(inputs, originals):
        assert same_bits(a, o), f"{op} modified an input"
    return paths


def _rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# -- Conv ------------------------------------------------------------------------

CONV_CASES = [
    # x shape, w shape, attributes
    ((2, 3, 17), (4, 3, 5), {}),
    ((1, 4, 23), (6, 2, 3), {"group": 2, "strides": [2], "pads": [2, 1], "dilations": [2]}),
    ((2, 3, 9, 11), (5, 3, 3, 3), {"pads": [1, 0, 2, 1]}),
    ((1, 6, 9, 11), (4, 3, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 5, 13, 7), (7, 5, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 5, 13, 7), (7, 5, 4, 2), {"auto_pad": "SAME_LOWER", "strides": [3, 2]}),
    ((1, 5, 13, 7), (7, 5, 3, 3), {"auto_pad": "VALID", "strides": [2, 1]}),
    ((1, 16, 7, 9), (5, 16, 1, 1), {}),                                  # 1x1: plain GEMM
    ((2, 16, 7, 9), (33, 16, 1, 1), {"strides": [2, 2]}),                 # 1x1 strided
    ((1, 24, 7, 7), (13, 24, 1, 1), {}),        # 49 columns: a panel's last one alone
    ((1, 12, 10, 11), (12, 1, 3, 3), {"group": 12, "pads": [1, 1, 1, 1]}),  # depthwise
    ((2, 8, 12, 13), (8, 1, 5, 5), {"group": 8, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 8, 9, 9), (8, 1, 3, 3), {"group": 8, "dilations": [2, 2], "pads": [2, 1, 2, 2]}),
    ((1, 8, 9, 9), (16, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),    # multiplier 2
    ((1, 3, 5, 6, 7), (2, 3, 3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 1]}),
    ((1, 4, 4, 5, 6), (4, 1, 3, 3, 3), {"group": 4, "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 70, 20, 21), (40, 70, 3, 3), {"pads": [1, 1, 1, 1]}),            # several K blocks
    # depthwise 3-wide rows from padded copies: row blocks, height stride, 1-D
    ((1, 3, 40, 200), (3, 1, 3, 3), {"group": 3, "pads": [1, 2, 0, 1], "strides": [2, 1]}),
    ((2, 5, 31), (5, 1, 3), {"group": 5, "pads": [1, 1], "dilations": [2]}),
    # unit strides, rows laid end to end (row blocks, height dilation);
    # width stride 2, even and odd columns apart (and dilated: neither)
    ((1, 3, 60, 300), (3, 1, 3, 3), {"group": 3, "pads": [2, 1, 2, 1], "dilations": [2, 1]}),
    ((1, 6, 13, 14), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 11, 15), (4, 1, 3, 3), {"group": 4, "strides": [1, 2], "dilations": [1, 2],
                                    "pads": [1, 2, 1, 2]}),
    # small planes and width stride 2: blocks of 8 channels, channel
    # innermost (a last block of 5 and of 4 lanes; 1x3 and 5x3 kernels)
    ((2, 21, 7, 7), (21, 1, 3, 3), {"group": 21, "pads": [1, 1, 1, 1]}),
    # 78 small planes, 4 a task at 2 threads (conv_direct's ppt), the last short
    ((2, 39, 7, 7), (39, 1, 3, 3), {"group": 39, "pads": [1, 1, 1, 1]}),
    ((1, 13, 9, 12), (13, 1, 3, 3), {"group": 13, "strides": [2, 2], "pads": [0, 1, 1, 1]}),
    ((2, 12, 5, 9), (12, 1, 1, 3), {"group": 12, "strides": [1, 2], "dilations": [1, 2],
                                    "pads": [0, 2, 0, 1]}),
    ((1, 16, 11, 8), (16, 1, 5, 3), {"group": 16, "strides": [3, 2], "dilations": [2, 1],
                                     "pads": [3, 1, 2, 1]}),
]


def _conv_inputs(rng, xs, ws, dtype, bias=True):
    x = _rand(rng, xs, dtype)
    w = _rand(rng, ws, dtype, 1 / np.sqrt(np.prod(ws[1:])))
    if not bias:
        return [x, w]
    return [x, w, _rand(rng, (ws[0],), dtype)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16])
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_vs_ort(dtype, case):
    xs, ws, attrs = CONV_CASES[case]
    rng = np.random.default_rng(case)
    inputs = _conv_inputs(rng, xs, ws, dtype, bias=case % 3 != 1)
    expected = ort_oracle("Conv", inputs, **attrs)[0]
    check("Conv", inputs, expected, levels=dtype == np.float32, **attrs)


DEPTHWISE_CASES = [i for i, (xs, ws, attrs) in enumerate(CONV_CASES)
                   if attrs.get("group", 1) == xs[1] == ws[0] and ws[1] == 1]


@pytest.mark.parametrize("case", DEPTHWISE_CASES)
def test_depthwise_channel_blocks_match_the_row_loop(case, monkeypatch):
    """Depthwise planes a block of 8 channels at a time (channel innermost)
    give the bits of the loop over rows of one plane, at every level."""
    from onnx_light_cpu.ops import conv as conv_module
    xs, ws, attrs = CONV_CASES[case]
    rng = np.random.default_rng(case)
    inputs = _conv_inputs(rng, xs, ws, np.float32, bias=case % 3 != 1)
    model = node_model("Conv", inputs, opset=22, **attrs)
    for level in available_simd_levels():
        with capped_simd_level(level):
            got = []
            for block in (conv_module.DEPTHWISE_BLOCK_PLANE, 0):
                monkeypatch.setattr(conv_module, "DEPTHWISE_BLOCK_PLANE", block)
                got.append(run_ours(model, inputs, 2)[0][0])
            assert same_bits(*got), f"depthwise {attrs} at {level}"


# 3x3 depthwise at strides 1 and 2, outputs 14 wide or more: on the planes
# themselves at AVX-512 (olc_conv_dwp): the narrowest plane, pads of 0 to 2
# on either side, rows left over from the 2- and 4-row blocks, 1 to 7
# vectors a row
DEPTHWISE_PLANES_CASES = [
    ((1, 5, 14, 14), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]}),
    ((2, 3, 9, 33), (3, 1, 3, 3), {"group": 3, "pads": [0, 2, 2, 0]}),
    ((1, 4, 17, 64), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((1, 2, 6, 100), (2, 1, 3, 3), {"group": 2, "pads": [2, 1, 2, 1]}),
    ((1, 3, 5, 16), (3, 1, 3, 3), {"group": 3}),
    ((1, 6, 7, 31), (6, 1, 3, 3), {"group": 6, "auto_pad": "SAME_LOWER"}),
    # stride 2: pairs of loads split into even and odd columns
    ((1, 4, 12, 28), (4, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 3, 9, 61), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [0, 2, 2, 0]}),
    ((1, 2, 20, 150), (2, 1, 3, 3), {"group": 2, "strides": [2, 2], "pads": [2, 1, 1, 2]}),
]


# ... and planes narrower than that (OW < 14, as wide as the input) at
# stride 1, each a run of floats (olc_conv_dwf): MobileNet-V2's 7x7, one
# column, pads of 0 to 2 on either side, a plane of exactly 64 positions
# (four vectors) and of more than four vectors, batches
DEPTHWISE_FLAT_CASES = [
    ((2, 6, 7, 7), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
    ((1, 3, 9, 1), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ((1, 4, 5, 13), (4, 1, 3, 3), {"group": 4, "pads": [0, 2, 2, 0]}),
    ((3, 2, 8, 8), (2, 1, 3, 3), {"group": 2, "pads": [2, 0, 0, 2]}),
    ((1, 5, 23, 11), (5, 1, 3, 3), {"group": 5, "auto_pad": "SAME_UPPER"}),
]


# FusedConv after the sums: Z then an activation (applied after the loop),
# or an activation alone (in registers where it is piecewise linear)
PLANES_FUSED = [None, ("LeakyRelu", [0.1], True), ("Clip", [0.0, 6.0], False),
                ("Relu", [], False), ("LeakyRelu", [0.2], False), ("Sigmoid", [], False)]


@pytest.mark.parametrize("fused", range(len(PLANES_FUSED)))
@pytest.mark.parametrize("case", range(len(DEPTHWISE_PLANES_CASES + DEPTHWISE_FLAT_CASES)))
def test_depthwise_planes_vs_ort(case, fused):
    xs, ws, attrs = (DEPTHWISE_PLANES_CASES + DEPTHWISE_FLAT_CASES)[case]
    path = "_depthwise_planes_" if case < len(DEPTHWISE_PLANES_CASES) else "_depthwise_flat_"
    rng = np.random.default_rng(case)
    inputs = _conv_inputs(rng, xs, ws, np.float32, bias=fused or case % 2 == 0)
    op, extra = "Conv", {}
    if PLANES_FUSED[fused]:
        activation, params, with_z = PLANES_FUSED[fused]
        if with_z:
            inputs.append(_rand(rng, ort_oracle("Conv", inputs, **attrs)[0].shape, np.float32))
        op, extra = "FusedConv", {"opset": 21, "domain": "com.microsoft",
                                  "activation": activation}
        if params:
            extra["activation_params"] = params
    expected = ort_oracle(op, inputs, **extra, **attrs)[0]
    check(op, inputs, expected, **extra, **attrs)
    if simd.state.level >= simd.LEVEL_NAMES.index("avx512"):
        paths = run_ours(node_model(op, inputs, **extra, **attrs), inputs, 2)[2]
        assert any(path in p for p in paths), paths


@pytest.mark.parametrize("width, path", [(20, "_depthwise_planes_"), (7, "_depthwise_flat_")])
@pytest.mark.parametrize("activation", ["Relu", "Clip", "LeakyRelu"])
def test_depthwise_planes_activation_keeps_nan_and_signed_zero(activation, width, path):
    """The activation in registers gives the bits of the separate pass (the
    loop of 8 channels, AVX2), NaN and -0 included."""
    # small integers: every sum is exact, whatever its order
    x = np.random.default_rng(3).integers(-3, 4, (1, 2, 6, width)).astype(np.float32)
    x[0, 0, 2, 5] = np.nan
    w = np.zeros((2, 1, 3, 3), np.float32)
    w[1] = -1.0  # channel 1: -(sum of 9 inputs), channel 0: +0 or NaN
    b = np.array([-0.0, 0.0], np.float32)
    params = {"Relu": {}, "Clip": {"activation_params": [-0.5, 0.5]},
              "LeakyRelu": {"activation_params": [0.5]}}[activation]
    model = node_model("FusedConv", [x, w, b], opset=21, domain="com.microsoft", group=2,
                       pads=[1, 1, 1, 1], activation=activation, **params)
    got = {}
    for level in ("avx2", "avx512"):
        if level not in available_simd_levels():
            pytest.skip(f"no {level}")
        with capped_simd_level(level):
            got[level], _, paths = run_ours(model, [x, w, b])
    assert any(path in p for p in paths), paths
    assert np.isnan(got["avx512"][0]).any()
    assert same_bits(got["avx512"][0], got["avx2"][0]), activation


# 3x3 stride-2 Conv of 1 to 4 input channels (the stems): 8 output channels
# a task at AVX-512 (olc_conv_fewc): a last block of fewer channels, pads
# of 0 to 2, 1 or 2 vectors a row, images in a batch
FEW_CHANNELS_CASES = [
    ((1, 3, 32, 32), (32, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 1, 9, 40), (5, 1, 3, 3), {"pads": [0, 2, 2, 0]}),
    ((1, 4, 17, 97), (11, 4, 3, 3), {"pads": [2, 1, 1, 2]}),
    ((1, 2, 6, 33), (16, 2, 3, 3), {"auto_pad": "SAME_UPPER"}),
    # 7x7 (the ResNet and DenseNet stem) and 5x5: four and three pairs a row
    ((1, 3, 40, 64), (64, 3, 7, 7), {"pads": [3, 3, 3, 3]}),
    ((2, 3, 13, 71), (9, 3, 7, 7), {"pads": [1, 3, 2, 0]}),
    ((1, 1, 11, 45), (8, 1, 5, 5), {"pads": [2, 2, 2, 2]}),
    ((1, 4, 9, 36), (12, 4, 5, 5), {"auto_pad": "SAME_LOWER"}),
]


@pytest.mark.parametrize("fused", range(3))
@pytest.mark.parametrize("case", range(len(FEW_CHANNELS_CASES)))
def test_few_channels_vs_ort_and_im2col(case, fused, monkeypatch):
    from onnx_light_cpu.ops import conv as conv_module
    xs, ws, attrs = FEW_CHANNELS_CASES[case]
    attrs = {"strides": [2, 2], **attrs}
    rng = np.random.default_rng(case)
    inputs = _conv_inputs(rng, xs, ws, np.float32, bias=fused > 0 or case % 2 == 0)
    op, extra = "Conv", {}
    if fused:  # Clip in registers, or Z then LeakyRelu after the loop
        op, extra = "FusedConv", {"opset": 21, "domain": "com.microsoft",
                                  "activation": "Clip", "activation_params": [-0.5, 0.5]}
        if fused == 2:
            inputs.append(_rand(rng, ort_oracle("Conv", inputs, **attrs)[0].shape, np.float32))
            extra.update(activation="LeakyRelu", activation_params=[0.1])
    expected = ort_oracle(op, inputs, **extra, **attrs)[0]
    check(op, inputs, expected, **extra, **attrs)
    if simd.state.level >= simd.LEVEL_NAMES.index("avx512"):
        model = node_model(op, inputs, **extra, **attrs)
        got, _, paths = run_ours(model, inputs, 2)
        assert any("_few_channels_" in p for p in paths), paths
        monkeypatch.setattr(conv_module.core, "few_channels_fits", lambda geom, level: False)
        plain, _, paths = run_ours(model, inputs, 1)
        assert any("_im2col_" in p for p in paths), paths
        assert same_bits(got[0], plain[0]), "the im2col path's bits"


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_double_vs_builtin(case):
    xs, ws, attrs = CONV_CASES[case]
    inputs = _conv_inputs(np.random.default_rng(case), xs, ws, np.float64)
    model = node_model("Conv", inputs, opset=22, **attrs)
    check("Conv", inputs, run_builtin(model, inputs)[0], levels=case < 3, **attrs)


@pytest.mark.parametrize("opset", [1, 11, 22])
def test_conv_opsets_and_kernel_shape(opset):
    rng = np.random.default_rng(opset)
    inputs = _conv_inputs(rng, (1, 3, 8, 8), (4, 3, 3, 3), np.float32)
    expected = ort_oracle("Conv", inputs, opset=max(opset, 7), kernel_shape=[3, 3])[0]
    check("Conv", inputs, expected, opset=opset, levels=False, kernel_shape=[3, 3])


def test_conv_bfloat16_needs_opset_22():
    rng = np.random.default_rng(0)
    inputs = _conv_inputs(rng, (1, 3, 8, 8), (4, 3, 3, 3), bfloat16)
    model = node_model("Conv", inputs, opset=21)
    with pytest.raises(TypeError, match="Conv.*bfloat16"):
        run_ours(model, inputs)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_same_with_dilations_vs_builtin(auto_pad):
    """ORT refuses dilations with SAME_*; the built-in pads for the dilated kernel."""
    rng = np.random.default_rng(3)
    inputs = _conv_inputs(rng, (1, 4, 9, 10), (4, 4, 3, 2), np.float32)
    attrs = {"dilations": [2, 3], "auto_pad": auto_pad, "strides": [2, 1]}
    model = node_model("Conv", inputs, opset=22, **attrs)
    check("Conv", inputs, run_builtin(model, inputs)[0], levels=False, **attrs)


def test_conv_special_values_and_layouts():
    rng = np.random.default_rng(5)
    x, w, b = _conv_inputs(rng, (2, 6, 11, 12), (6, 3, 3, 3), np.float32)
    x[0, 1, 3, 4] = np.nan
    x[1, 2, 5, 5] = np.inf
    wide = np.zeros((2, 6, 11, 24), np.float32)
    wide[..., ::2] = x
    strided = wide[..., ::2]                     # not contiguous
    ro = x.copy()
    ro.flags.writeable = False                   # read-only
    for xin in (strided, ro):
        inputs = [xin, w, b]
        expected = ort_oracle("Conv", [np.ascontiguousarray(xin), w, b], group=2)[0]
        check("Conv", inputs, expected, levels=False, group=2)


def test_conv_empty():
    x = np.zeros((0, 3, 5, 5), np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    model = node_model("Conv", [x, w], opset=22)
    got, names, _ = run_ours(model, [x, w])
    assert got[0].shape == (0, 4, 3, 3) and "onnx_light_cpu::Conv" in names
    x = np.zeros((1, 0, 5, 5), np.float32)       # no input channels: the bias alone
    w = np.ones((4, 0, 3, 3), np.float32)
    b = np.arange(4, dtype=np.float32)
    got, names, _ = run_ours(node_model("Conv", [x, w, b], opset=22), [x, w, b])
    np.testing.assert_array_equal(got[0], np.broadcast_to(b[None, :, None, None], (1, 4, 3, 3)))


def _graph_model(nodes, x, inits, opset=22):
    graph = oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape))],
        [oh.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _compare_graph(model, x, kernels):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    for threads in THREAD_COUNTS:
        so.intra_op_num_threads = threads
        want = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
        olc.set_num_threads_for_session(sess, threads)
        olc.set_kernel_usage_recording(sess, True)
        got = sess.run(None, {"X": x})[0]
        got2 = sess.run(None, {"X": x})[0]         # prepared weights, second run
        assert same_bits(got, got2)
        for k in kernels:
            assert k in olc.used_kernel_names(sess)
        assert_close(got, want, f"graph at {threads} threads", (1e-4, 1e-4))


def test_residual_block_end_to_end():
    rng = np.random.default_rng(11)
    C = 16
    inits = {"W1": _rand(rng, (C, C, 3, 3), np.float32, 0.1), "B1": _rand(rng, (C,), np.float32),
             "W2": _rand(rng, (C, C, 3, 3), np.float32, 0.1), "B2": _rand(rng, (C,), np.float32),
             "W3": _rand(rng, (2 * C, C, 1, 1), np.float32, 0.2),
             "B3": _rand(rng, (2 * C,), np.float32)}
    nodes = [oh.make_node("Conv", ["X", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c1"], ["r1"]),
             oh.make_node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1]),
             oh.make_node("Add", ["c2", "X"], ["s"]),
             oh.make_node("Relu", ["s"], ["r2"]),
             oh.make_node("Conv", ["r2", "W3", "B3"], ["Y"], strides=[2, 2])]
    x = _rand(rng, (2, C, 15, 14), np.float32)
    _compare_graph(_graph_model(nodes, x, inits), x, ["onnx_light_cpu::Conv"])


def test_depthwise_separable_block_end_to_end():
    rng = np.random.default_rng(12)
    C = 24
    inits = {"Wd": _rand(rng, (C, 1, 3, 3), np.float32, 0.3), "Bd": _rand(rng, (C,), np.float32),
             "Wp": _rand(rng, (40, C, 1, 1), np.float32, 0.2),
             "Bp": _rand(rng, (40,), np.float32)}
    nodes = [oh.make_node("Conv", ["X", "Wd", "Bd"], ["d"], group=C, pads=[1, 1, 1, 1],
                          strides=[2, 2]),
             oh.make_node("Clip", ["d"], ["r"]),
             oh.make_node("Conv", ["r", "Wp", "Bp"], ["Y"])]
    x = _rand(rng, (1, C, 29, 30), np.float32)
    _compare_graph(_graph_model(nodes, x, inits), x, ["onnx_light_cpu::Conv"])


@pytest.mark.parametrize("attrs,xs,ws,message", [
    ({"group": 2}, (1, 3, 5, 5), (4, 1, 3, 3), "not divisible by group"),
    ({}, (1, 3, 5, 5), (4, 2, 3, 3), "input channels"),
    ({"group": 2}, (1, 4, 5, 5), (3, 2, 3, 3), "not divisible by group"),
    ({}, (1, 3, 2, 2), (4, 3, 3, 3), "smaller than the dilated kernel"),
    ({"pads": [-1, 0, 0, 0]}, (1, 3, 5, 5), (4, 3, 3, 3), "must not be negative"),
    ({"pads": [1, 1]}, (1, 3, 5, 5), (4, 3, 3, 3), "pads has 2 values"),
    ({"strides": [0, 1]}, (1, 3, 5, 5), (4, 3, 3, 3), "strides"),
    ({"kernel_shape": [2, 2]}, (1, 3, 5, 5), (4, 3, 3, 3), "kernel_shape"),
    ({"auto_pad": "WRONG"}, (1, 3, 5, 5), (4, 3, 3, 3), "auto_pad"),
    ({}, (1, 3, 5, 5), (4, 3, 3), "rank"),
])
def test_conv_bad_input(attrs, xs, ws, message):
    x, w = np.ones(xs, np.float32), np.ones(ws, np.float32)
    with pytest.raises((ValueError, TypeError, NotImplementedError), match=f"Conv.*{message}"):
        run_ours(node_model("Conv", [x, w], opset=22, **attrs), [x, w])


def test_conv_bad_bias():
    x, w, b = np.ones((1, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32), \
        np.ones(3, np.float32)
    with pytest.raises(ValueError, match="Conv: input 2"):
        run_ours(node_model("Conv", [x, w, b], opset=22), [x, w, b])


# -- ConvTranspose ---------------------------------------------------------------

def conv_transpose64(x, w, b, group=1, strides=None, pads=None, dilations=None,
                     output_shape_=None):
    """float64 scatter: the definition, with explicit start pads and an
    output shape (the spatial one)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    N, C = x.shape[:2]
    n = x.ndim - 2
    Mg = w.shape[1]
    kernel = w.shape[2:]
    y = np.zeros((N, Mg * group) + tuple(output_shape_))
    for idx in itertools.product(*(range(s) for s in x.shape[2:])):
        for tap in itertools.product(*(range(k) for k in kernel)):
            o = [idx[i] * strides[i] - pads[i] + tap[i] * dilations[i] for i in range(n)]
            if any(o[i] < 0 or o[i] >= output_shape_[i] for i in range(n)):
                continue
            for g in range(group):
                xs = x[(slice(None), slice(g * C // group, (g + 1) * C // group)) + idx]
                ws = w[(slice(g * C // group, (g + 1) * C // group), slice(None)) + tap]
                y[(slice(None), slice(g * Mg, (g + 1) * Mg)) + tuple(o)] += xs @ ws
    if b is not None:
        y += b.astype(np.float64).reshape((1, -1) + (1,) * n)
    return y


CT_CASES = [
    ((1, 3, 5), (3, 2, 3), {}),
    ((2, 2, 4, 5), (2, 3, 3, 3), {"strides": [2, 1], "pads": [1, 0, 0, 1]}),
    ((1, 4, 4, 5), (4, 2, 3, 2), {"group": 2, "strides": [2, 2], "output_padding": [1, 1]}),
    ((1, 6, 3, 4), (6, 1, 3, 3), {"group": 6, "dilations": [2, 1], "pads": [1, 1, 1, 1]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_shape": [9, 10]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [3, 2], "auto_pad": "VALID"}),
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 0, 1, 0, 0]}),
    ((1, 64, 9, 10), (64, 16, 4, 4), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
]


def _ct_expected(inputs, attrs, model):
    """ORT for float types; for double, the built-in (group 1) or the float64
    scatter (the built-in fails for group > 1)."""
    if inputs[0].dtype != np.float64:
        return ort_oracle("ConvTranspose", inputs, **attrs)[0]
    if attrs.get("group", 1) == 1:
        return run_builtin(model, inputs)[0]
    shape = ort_oracle("ConvTranspose", [a.astype(np.float32) for a in inputs], **attrs)[0].shape
    n = inputs[0].ndim - 2
    pads = attrs.get("pads", [0] * 2 * n)
    return conv_transpose64(inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None,
                            attrs.get("group", 1), attrs.get("strides", [1] * n), pads,
                            attrs.get("dilations", [1] * n), shape[2:])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16, np.float64])
@pytest.mark.parametrize("case", range(len(CT_CASES)))
def test_conv_transpose(dtype, case):
    xs, ws, attrs = CT_CASES[case]
    rng = np.random.default_rng(100 + case)
    group = attrs.get("group", 1)
    x = _rand(rng, xs, dtype)
    w = _rand(rng, ws, dtype, 0.5)
    inputs = [x, w] if case % 2 else [x, w, _rand(rng, (ws[1] * group,), dtype)]
    model = node_model("ConvTranspose", inputs, opset=22, **attrs)
    expected = _ct_expected(inputs, attrs, model).astype(dtype)
    check("ConvTranspose", inputs, expected, levels=dtype == np.float32 and case < 4, **attrs)


def test_conv_transpose_group_vs_scatter_oracle():
    """Group > 1 in double: the float64 definition (the built-in fails)."""
    rng = np.random.default_rng(7)
    x, w = _rand(rng, (2, 4, 3, 4), np.float64), _rand(rng, (4, 3, 2, 3), np.float64)
    b = _rand(rng, (6,), np.float64)
    attrs = {"group": 2, "strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]}
    shape = (2 * 2 + 2 - 1 - 0 + 1 - 1, 1 * 3 + 5 - 0 - 1)
    expected = conv_transpose64(x, w, b, 2, [2, 1], [1, 0], [1, 2], shape)
    check("ConvTranspose", [x, w, b], expected, levels=False, **attrs)


@pytest.mark.parametrize("attrs,xs,ws,message", [
    ({"group": 2}, (1, 3, 5, 5), (3, 1, 3, 3), "not divisible by group"),
    ({}, (1, 3, 5, 5), (4, 2, 3, 3), "input channels"),
    ({"pads": [5, 5, 5, 5]}, (1, 3, 2, 2), (3, 2, 3, 3), "would have"),
    ({"output_shape": [3]}, (1, 3, 5, 5), (3, 2, 3, 3), "output_shape"),
    ({"dilations": [1]}, (1, 3, 5, 5), (3, 2, 3, 3), "dilations has 1"),
])
def test_conv_transpose_bad_input(attrs, xs, ws, message):
    x, w = np.ones(xs, np.float32), np.ones(ws, np.float32)
    with pytest.raises((ValueError, TypeError), match=f"ConvTranspose.*{message}"):
        run_ours(node_model("ConvTranspose", [x, w], opset=22, **attrs), [x, w])


# -- Col2Im ----------------------------------------------------------------------

COL2IM_CASES = [
    ((5, 5), (1, 5), {}),
    ((5, 5), (2, 2), {"strides": [2, 2]}),
    ((5, 5), (2, 2), {"pads": [1, 0, 0, 1]}),
    ((6, 6), (2, 2), {"dilations": [2, 2]}),
    ((3, 5, 4), (2, 2, 2), {"strides": [1, 2, 1], "pads": [0, 1, 1, 0, 1, 0]}),
    ((9,), (3,), {"strides": [2], "dilations": [2], "pads": [1, 1]}),
]


def _blocks(image, block, attrs):
    n = len(image)
    s = attrs.get("strides", [1] * n)
    d = attrs.get("dilations", [1] * n)
    p = attrs.get("pads", [0] * 2 * n)
    return int(np.prod([(image[i] + p[i] + p[i + n] - (block[i] - 1) * d[i] - 1) // s[i] + 1
                        for i in range(n)]))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16, np.float64])
@pytest.mark.parametrize("case", range(len(COL2IM_CASES)))
def test_col2im(dtype, case):
    image, block, attrs = COL2IM_CASES[case]
    rng = np.random.default_rng(200 + case)
    C = 3
    col = _rand(rng, (2, C * int(np.prod(block)), _blocks(image, block, attrs)), dtype)
    inputs = [col, np.array(image, np.int64), np.array(block, np.int64)]
    wide = [col.astype(np.float64)] + inputs[1:]
    expected = run_builtin(node_model("Col2Im", wide, opset=18, **attrs), wide)[0].astype(dtype)
    check("Col2Im", inputs, expected, opset=18, levels=case == 0, **attrs)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8, np.bool_])
@pytest.mark.parametrize("case", range(len(COL2IM_CASES)))
def test_col2im_other_types_vs_builtin(dtype, case):
    """The schema allows every type: the others scatter in NumPy."""
    image, block, attrs = COL2IM_CASES[case]
    rng = np.random.default_rng(300 + case)
    col = rng.integers(0, 3, (2, 2 * int(np.prod(block)), _blocks(image, block, attrs)))
    inputs = [col.astype(dtype), np.array(image, np.int64), np.array(block, np.int64)]
    model = node_model("Col2Im", inputs, opset=18, **attrs)
    expected = run_builtin(model, inputs)[0]
    got, names, _ = run_ours(model, inputs)
    assert "onnx_light_cpu::Col2Im" in names
    assert got[0].dtype == expected.dtype
    np.testing.assert_array_equal(got[0], expected)


@pytest.mark.parametrize("image,block,L,message", [
    ((5, 5), (2, 2), 10, "blocks"),
    ((5, 5), (2,), 16, "values"),
    ((1, 1), (2, 2), 1, "smaller"),
])
def test_col2im_bad_input(image, block, L, message):
    col = np.ones((1, 4, L), np.float32)
    inputs = [col, np.array(image, np.int64), np.array(block, np.int64)]
    with pytest.raises(ValueError, match=f"Col2Im.*{message}"):
        run_ours(node_model("Col2Im", inputs, opset=18), inputs)


# -- com.microsoft FusedConv -------------------------------------------------------

FUSED = [("", None), ("Relu", None), ("Tanh", None), ("Sigmoid", None), ("LeakyRelu", [0.2]),
         ("Clip", [-0.5, 0.8]), ("HardSigmoid", [0.3, 0.4])]
FUSED_SHAPES = [((1, 6, 9, 10), (8, 6, 3, 3), {"pads": [1, 1, 1, 1]}),       # im2col
                ((2, 16, 11, 9), (20, 16, 3, 3), {"pads": [1, 1, 1, 1]}),    # Winograd
                ((2, 8, 7, 5), (5, 8, 1, 1), {}),                            # plain GEMM
                ((1, 6, 9, 10), (6, 1, 3, 3), {"group": 6, "strides": [2, 2]}),  # depthwise
                ((1, 6, 9, 10), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
                ((2, 10, 6, 7), (10, 1, 3, 3), {"group": 10, "pads": [1, 1, 1, 1]}),
                # depthwise in bands of rows (a 300-wide plane)
                ((1, 9, 30, 300), (9, 1, 3, 3), {"group": 9, "pads": [1, 1, 1, 1]}),
                # depthwise by the row loops: 5 taps wide; 1-D
                ((1, 6, 9, 10), (6, 1, 5, 5), {"group": 6, "pads": [2, 2, 2, 2]}),
                ((2, 5, 31), (5, 1, 3), {"group": 5, "pads": [1, 1]})]


@pytest.mark.parametrize("with_z", [False, True])
@pytest.mark.parametrize("shape", range(len(FUSED_SHAPES)))
@pytest.mark.parametrize("activation,params", FUSED)
def test_fused_conv_vs_ort(activation, params, shape, with_z):
    xs, ws, attrs = FUSED_SHAPES[shape]
    rng = np.random.default_rng(shape)
    inputs = _conv_inputs(rng, xs, ws, np.float32)
    attrs = dict(attrs)
    if activation:
        attrs["activation"] = activation
    if params:
        attrs["activation_params"] = params
    if with_z:
        out = ort_oracle("Conv", inputs, **{k: v for k, v in attrs.items()
                                             if not k.startswith("activation")})[0]
        inputs.append(_rand(rng, out.shape, np.float32))
    expected = ort_oracle("FusedConv", inputs, opset=21, domain="com.microsoft", **attrs)[0]
    check("FusedConv", inputs, expected, kernel="onnx_light_cpu::FusedConv", opset=21,
          domain="com.microsoft", levels=activation in ("", "Sigmoid"), **attrs)


@pytest.mark.parametrize("activation,params", [("", None), ("Relu", None),
                                               ("Clip", [-0.5, 0.8]), ("LeakyRelu", [0.2])])
@pytest.mark.parametrize("shape", [0, 2])  # im2col, the plain GEMM
def test_fused_conv_epilogue_rounds_each_step(activation, params, shape):
    """FusedConv's bias, Z and activation, one pass an element: the bits of
    the bias-free Conv's sums + bias, rounded, + Z, rounded, then the
    activation, at every level; NaN, infinities and -0 in Z included."""
    xs, ws, attrs = FUSED_SHAPES[shape]
    rng = np.random.default_rng(7)
    x, w, b = _conv_inputs(rng, xs, ws, np.float32)
    plain = node_model("Conv", [x, w], **attrs)
    z = _rand(rng, run_ours(plain, [x, w])[0][0].shape, np.float32)
    z.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    fused = dict(attrs)
    if activation:
        fused["activation"] = activation
    if params:
        fused["activation_params"] = params
    model = node_model("FusedConv", [x, w, b, z], opset=21, domain="com.microsoft", **fused)
    for level in available_simd_levels():
        with capped_simd_level(level):  # the sums are the level's own
            (sums,), _, _ = run_ours(plain, [x, w])
            (got,), names, _ = run_ours(model, [x, w, b, z])
        v = (sums + b.reshape(-1, *[1] * (sums.ndim - 2))) + z
        if activation == "Relu":
            v = np.where(v < 0, np.float32(0), v)
        elif activation == "Clip":
            v = np.where(v < params[0], np.float32(params[0]),
                         np.where(v > params[1], np.float32(params[1]), v))
        elif activation == "LeakyRelu":
            v = np.where(v >= 0, v, np.float32(params[0]) * v)
        assert "onnx_light_cpu::FusedConv" in names
        assert same_bits(got, v), level


# 3x3 kernels at unit strides from 16 channels in and out: Winograd F(2x2,
# 3x3), an image as one block (all threads on each step) or block by block
# (a block a thread); odd output sizes leave half tiles.
WINOGRAD_CASES = [
    ((2, 16, 11, 9), (20, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 70, 20, 21), (40, 70, 3, 3), {"pads": [0, 2, 1, 0]}),
    ((2, 16, 70, 71), (17, 16, 3, 3), {"pads": [1, 0, 2, 1]}),
    ((1, 33, 3, 2), (16, 33, 3, 3), {"auto_pad": "SAME_UPPER"}),
]


@pytest.mark.parametrize("case", range(len(WINOGRAD_CASES)))
def test_conv_winograd_vs_ort(case):
    xs, ws, attrs = WINOGRAD_CASES[case]
    inputs = _conv_inputs(np.random.default_rng(case), xs, ws, np.float32)
    expected = ort_oracle("Conv", inputs, **attrs)[0]
    paths = check("Conv", inputs, expected, **attrs)
    assert any("_winograd_" in p for p in paths), paths


# At least 8 output channels a pixel and constant weights: the pixels are
# the GEMM's rows and W^T its B, packed once (olc_conv_f32_t).  Each output
# is the same sum as on the path of a W that is not constant (im2col or
# the 1x1 GEMM there), so the bits must match it.
PIXEL_ROWS_CASES = [
    ((2, 64, 7, 7), (512, 64, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 320, 4, 4), (256, 320, 1, 1), {}),
    ((2, 8, 5), (64, 8, 3), {"pads": [1, 1]}),
    ((1, 4, 3, 3, 3), (64, 4, 2, 2, 2), {}),
    ((1, 16, 6, 6), (128, 16, 3, 3), {"strides": [2, 2], "dilations": [2, 2],
                                      "pads": [2, 1, 2, 1]}),
    ((1, 300, 3, 3), (80, 300, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    # 1x1 on at most 64 pixels, few output channels: X read in place as X^T
    # (one image), else the images' pixels the rows of one GEMM
    # (olc_conv_t_images); from GEMM_T_MIN_POINTWISE_CHANNELS input channels
    ((2, 320, 7, 7), (24, 320, 1, 1), {}),
    ((1, 321, 8, 8), (70, 321, 1, 1), {}),
    ((11, 320, 7, 7), (24, 320, 1, 1), {}),  # chunks of 10 images and of 1
    ((3, 325, 7, 7), (24, 325, 1, 1), {}),  # 8 x 8 transposes and 5 channels left
    ((3, 32, 20, 20), (800, 32, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    # strided, as many channels as pixels (GEMM_T_IM2COL_CHANNELS_PER_PIXEL)
    ((2, 24, 10, 10), (25, 24, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
]


def _constant(model: onnx.ModelProto, inputs, indices) -> onnx.ModelProto:
    """``model`` with its inputs ``indices`` (x1, x2, ...) as initializers."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    names = {f"x{i}" for i in indices}
    kept = [v for v in m.graph.input if v.name not in names]
    del m.graph.input[:]
    m.graph.input.extend(kept)
    m.graph.initializer.extend(onnx.numpy_helper.from_array(inputs[i], f"x{i}")
                               for i in indices)
    return m


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("case", range(len(PIXEL_ROWS_CASES)))
def test_conv_pixel_rows_vs_ort(case, fused):
    xs, ws, attrs = PIXEL_ROWS_CASES[case]
    rng = np.random.default_rng(case)
    inputs = _conv_inputs(rng, xs, ws, np.float32)
    op, extra = "Conv", {}
    if fused:
        out = ort_oracle("Conv", inputs, **attrs)[0]
        inputs.append(_rand(rng, out.shape, np.float32))
        op, extra = "FusedConv", {"opset": 21, "domain": "com.microsoft", "activation": "Relu"}
    expected = ort_oracle(op, inputs, **extra, **attrs)[0]
    model = node_model(op, inputs, **extra, **attrs)
    constant = _constant(model, inputs, (1, 2))
    feeds = {n.name: inputs[int(n.name[1:])] for n in constant.graph.input}
    originals = [a.copy() for a in inputs]
    for level in available_simd_levels():
        with capped_simd_level(level):
            plain = run_ours(model, inputs)[0][0]
            for threads in THREAD_COUNTS:
                sess = ReferenceEvaluator(constant)
                olc.register_kernels_for_session(sess)
                olc.set_num_threads_for_session(sess, threads)
                olc.set_kernel_usage_recording(sess, True)
                got = sess.run(None, feeds)[0]
                paths = olc.used_kernel_paths(sess)
                assert any("_gemm_t_" in p for p in paths), paths
                assert same_bits(got, plain), f"{op} {attrs} at {level}, {threads} threads"
    assert_close(got, expected, f"{op} {attrs}", _scaled_tol(np.float32, expected))
    for a, o in zip(inputs, originals):
        assert same_bits(a, o), f"{op} modified an input"


@pytest.mark.parametrize("channels, path", [(32, "_winograd_"), (1024, "_gemm_t_")])
def test_conv_winograd_before_pixel_rows(channels, path):
    """A constant-weight 3x3 Conv that fits Winograd, 128 output channels on
    9 pixels: Winograd below GEMM_T_WINOGRAD_MIN_CHANNELS input channels,
    the pixel rows from there."""
    inputs = _conv_inputs(np.random.default_rng(channels), (1, channels, 3, 3),
                          (128, channels, 3, 3), np.float32)
    attrs = {"pads": [1, 1, 1, 1]}
    expected = ort_oracle("Conv", inputs, **attrs)[0]
    constant = _constant(node_model("Conv", inputs, **attrs), inputs, (1, 2))
    sess = ReferenceEvaluator(constant)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    got = sess.run(None, {"x0": inputs[0]})[0]
    paths = olc.used_kernel_paths(sess)
    assert any(path in p for p in paths), paths
    assert_close(got, expected, f"Conv {channels} channels", _scaled_tol(np.float32, expected))


# A constant-weight Conv keeps its prepared run (core.ConvRun) while the
# plan repeats: one case a path, float32 and double
KEPT_RUN_CASES = [
    ((1, 8, 6, 6), (16, 8, 1, 1), {}, np.float32, "_gemm_"),
    ((1, 8, 6, 6), (16, 8, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, np.float32,
     "_im2col_"),
    ((1, 320, 4, 4), (256, 320, 1, 1), {}, np.float32, "_gemm_t_"),
    ((1, 16, 6, 6), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}, np.float32, "_winograd_"),
    ((1, 3, 32, 32), (32, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, np.float32,
     "_few_channels_"),
    ((1, 8, 9, 9), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}, np.float32,
     "_depthwise"),
    ((1, 4, 7, 7), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}, np.float64, "_direct_"),
]


@pytest.mark.parametrize("case", range(len(KEPT_RUN_CASES)))
def test_conv_kept_run_across_runs_and_shapes(case):
    """Runs with the kept run, alternating two input shapes (two plans),
    and strided and unaligned inputs (which the kept run leaves to the
    general path, which copies them): the
    bits of a fresh session on each, our kernel on the expected path."""
    xs, ws, attrs, dtype, path = KEPT_RUN_CASES[case]
    if path == "_few_channels_" and simd.state.level < simd.LEVEL_NAMES.index("avx512"):
        path = "_im2col_"  # olc_conv_fewc is AVX-512's
    rng = np.random.default_rng(case)
    inputs = _conv_inputs(rng, xs, ws, dtype)
    model = _constant(node_model("Conv", inputs, **attrs), inputs, (1, 2))
    model.graph.input[0].type.tensor_type.ClearField("shape")
    bigger = _rand(rng, xs[:2] + tuple(n + 3 for n in xs[2:]), dtype)
    strided = _rand(rng, xs[:3] + (2 * xs[3],), dtype)[..., ::2]
    unaligned = np.empty(inputs[0].nbytes + 1, np.uint8)[1:].view(dtype).reshape(xs)
    unaligned[...] = inputs[0]
    feeds = [inputs[0], bigger, inputs[0], strided, unaligned, bigger, inputs[0]]
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    for x in feeds:
        original = x.copy()
        got = sess.run(None, {"x0": x})[0]
        want = run_ours(node_model("Conv", [np.ascontiguousarray(x)] + inputs[1:], **attrs),
                        [np.ascontiguousarray(x)] + inputs[1:])[0][0]
        assert same_bits(got, want), f"Conv {attrs} on {x.shape}"
        assert same_bits(x, original), "Conv modified its input"
    assert "onnx_light_cpu::Conv" in olc.used_kernel_names(sess)
    paths = olc.used_kernel_paths(sess)
    assert any(path in p for p in paths), paths
    assert sess.rt_nodes_[0]._last_run is not None


def test_conv_run_refuses_arrays_unlike_its_plan():
    """core.ConvRun checks what it is given: a clear ValueError, never a
    read or write past an array."""
    from onnx_light_cpu._kernels import conv as core

    inputs = _conv_inputs(np.random.default_rng(0), (1, 16, 6, 6), (16, 16, 3, 3),
                          np.float32)
    model = _constant(node_model("Conv", inputs, pads=[1, 1, 1, 1]), inputs, (1, 2))
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    y = sess.run(None, {"x0": inputs[0]})[0]
    run = sess.rt_nodes_[0]._last_run
    assert run.kind == "winograd" and run.scratch_floats > 0
    x, scratch = inputs[0], np.empty(run.scratch_floats, np.float32)
    read_only = np.empty_like(y)
    read_only.flags.writeable = False
    bad = [
        ((x[:, :8], None, np.empty_like(y), scratch), "X is not"),
        ((x.astype(np.float64), None, np.empty_like(y), scratch), "X is not"),
        ((x, None, np.empty(y.size - 1, np.float32), scratch), "Y is not"),
        ((x, None, read_only, scratch), "Y is not"),
        ((x, np.empty(3, np.float32), np.empty_like(y), scratch), "Z is not"),
        ((x, None, np.empty_like(y), scratch[:-1]), "scratch"),
        ((x, None, np.empty_like(y), None), "scratch"),
    ]
    for args, message in bad:
        with pytest.raises(ValueError, match=message):
            run.run(*args)
    out = np.empty_like(y)
    run.run(x, None, out, scratch)
    assert same_bits(out, y)
    plan = sess.rt_nodes_[0]._last_plan[1]
    geom = plan[2]
    for kind in ("winograd", "gemm", "gemm_t", "direct"):
        with pytest.raises(ValueError, match="weights are not"):
            core.ConvRun(plan, None, None, kind, np.zeros(7, np.float32), None, geom,
                         y.shape, 1, 1, 16, 0, 0.0, 0.0, simd.state.level, 1, 0)
    with pytest.raises(ValueError, match="bias"):
        core.ConvRun(plan, None, None, "direct", np.zeros(16 * 144, np.float32),
                     np.zeros(15, np.float32), geom, y.shape, 1, 1, 16, 0, 0.0, 0.0,
                     simd.state.level, 1, 0)


@pytest.mark.parametrize("activation", ["LeakyRelu", "Clip", "HardSigmoid"])
def test_fused_conv_needs_its_params(activation):
    x, w = np.ones((1, 2, 4, 4), np.float32), np.ones((3, 2, 3, 3), np.float32)
    model = node_model("FusedConv", [x, w], opset=21, domain="com.microsoft",
                       activation=activation)
    with pytest.raises(ValueError, match="FusedConv.*activation_params"):
        run_ours(model, [x, w])


def test_col2im_huge_output_is_refused_before_allocating():
    col = np.ones((1, 1, 1), np.float32)
    inputs = [col, np.array([1 << 20, 1 << 20], np.int64), np.array([1, 1], np.int64)]
    model = node_model("Col2Im", inputs, opset=18, strides=[1 << 21, 1 << 21])
    with pytest.raises(MemoryError, match="Col2Im"):
        run_ours(model, inputs)


def test_conv_transpose_huge_output_shape_is_refused():
    x, w = np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 1, 1), np.float32)
    model = node_model("ConvTranspose", [x, w], opset=22, output_shape=[1 << 20, 1 << 20])
    with pytest.raises(MemoryError, match="ConvTranspose"):
        run_ours(model, [x, w])


# x, w, attributes, a weight tap some output reads in the padding
NONFINITE_PAD_CASES = [
    # 3-D depthwise, strided, the tap under W's start pad (fuzz seed 11, case 19875)
    ((1, 2, 3, 3, 3), (2, 1, 3, 2, 3), {"group": 2, "strides": [1, 1, 2],
                                        "pads": [0, 1, 1, 0, 0, 0]}, (1, 0, 0, 1, 0)),
    # 2-D depthwise at stride 2, the tap under the end pads
    ((1, 4, 7, 7), (4, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]},
     (2, 0, 2, 2)),
    ((1, 3, 6, 6), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}, (1, 1, 0, 0)),
    ((1, 3, 9), (2, 3, 3), {"pads": [2, 0], "dilations": [2]}, (1, 2, 0)),
]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("case", range(len(NONFINITE_PAD_CASES)))
def test_conv_nonfinite_weight_times_a_pad_is_nan(case, bad):
    """A padded tap is 0 x weight: NaN for an inf or NaN weight, as ORT
    computes it, though the paths never read the padding."""
    xs, ws, attrs, at = NONFINITE_PAD_CASES[case]
    rng = np.random.default_rng(case)
    x, w = _rand(rng, xs, np.float32), _rand(rng, ws, np.float32)
    w[at] = bad
    expected = ort_oracle("Conv", [x, w], **attrs)[0]
    assert np.isnan(expected).any()
    check("Conv", [x, w], expected, **attrs)


def test_conv_nonfinite_initializer_checked_once():
    """The same for a constant W, whose check is kept (and not counted as
    prepared weights), on every run."""
    xs, ws, attrs, at = NONFINITE_PAD_CASES[0]
    rng = np.random.default_rng(5)
    x, w = _rand(rng, xs, np.float32), _rand(rng, ws, np.float32)
    w[at] = np.nan
    expected = ort_oracle("Conv", [x, w], **attrs)[0]
    model = _constant(node_model("Conv", [x, w], opset=22, **attrs), [x, w], (1,))
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    for _ in range(2):
        assert_close(sess.run(None, {"x0": x})[0], expected, "Conv", TOL[np.dtype(np.float32)])
    node = sess.rt_nodes_[0]
    assert node.prepared_bytes() == w.nbytes


def test_conv_dilated_inf_as_ort():
    """Finding F27: the built-in multiplies inf by the zero taps it inserts
    to dilate the kernel (NaN); ours, as ORT, never reads a skipped tap."""
    x = np.zeros((1, 2, 8), np.float32)
    x[0, :, 1] = np.inf
    w = np.ones((2, 1, 3), np.float32)
    expected = ort_oracle("Conv", [x, w], group=2, dilations=[2])[0]
    assert not np.isnan(expected).any()
    check("Conv", [x, w], expected, levels=False, group=2, dilations=[2])
