"""ConvInteger and QLinearConv: bit for bit against ONNX Runtime where it runs
the type pair, and against the onnx.reference built-in: 1-D to 3-D, groups
and depthwise, strides, pads, dilations, every auto_pad, 1x1, per-tensor and
per-channel scales and zero points, uint8 and int8, with and without bias,
empty batch, every SIMD level, 1 and 2 threads bit for bit (check_node),
strided and read-only inputs, constant weights; a small quantized CNN in
ONNX Runtime's QOperator form end to end; bad input.

Where the two oracles disagree we follow ONNX Runtime: QLinearConv's
requantisation is float32 (float32(acc + B) times the float32 scale
x_scale * w_scale / y_scale), the built-in multiplies in float64, so a
product within a float32 rounding of a half lands on the other side
(test_qlinear_conv_float32_requantisation_follows_ort).  ORT 1.32 refuses
QLinearConv with int8 x and uint8 w and ConvInteger with per-channel
w_zero_point: those follow the specification, checked against the built-in
(in 1-D and 3-D, and for QLinearConv, through the built-in float64 Conv of
the centred values, exact, then ORT's float32 requantisation in NumPy: the
built-in ConvInteger and QLinearConv broadcast per-channel parameters in
2-D only).  Without VNNI, ORT saturates pairs of u8 x s8 products
in 16 bits: its comparisons draw the signed operand from
ort_int8_weight_range().
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import (
    THREAD_COUNTS,
    check_node,
    element_type,
    node_model,
    ort_int8_weight_range,
    run_ours,
)

ort = pytest.importorskip("onnxruntime")

U8, S8 = np.uint8, np.int8
PAIRS = list(itertools.product((U8, S8), repeat=2))

# (x shape, w shape, attributes): odd sizes, 1-D to 3-D, groups, depthwise,
# strides, pads, dilations, auto_pad, 1x1.
CASES = [
    ((1, 3, 11), (4, 3, 3), {"pads": [1, 2]}),
    ((2, 4, 9), (6, 2, 2), {"group": 2, "strides": [2], "dilations": [2]}),
    ((1, 5, 7, 9), (3, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 6, 9, 7), (4, 3, 3, 2), {"group": 2, "strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ((1, 4, 8, 10), (6, 4, 1, 1), {}),                                         # 1x1: a GEMM
    ((2, 8, 5, 6), (3, 8, 1, 1), {"strides": [2, 2]}),                         # 1x1, strided
    ((1, 6, 9, 8), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),          # depthwise
    ((2, 5, 10, 11), (5, 1, 3, 3), {"group": 5, "strides": [2, 2],
                                    "dilations": [1, 2], "pads": [1, 0, 2, 1]}),
    ((1, 3, 8, 7), (5, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 8, 7), (5, 3, 2, 3), {"auto_pad": "SAME_LOWER"}),
    ((1, 3, 8, 7), (5, 3, 3, 2), {"auto_pad": "VALID", "dilations": [2, 1]}),
    ((1, 2, 5, 6, 7), (4, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),         # 3-D
    ((1, 4, 4, 5, 6), (4, 1, 3, 3, 3), {"group": 4, "pads": [1] * 6}),        # 3-D depthwise
    ((1, 3, 7, 12), (3, 1, 2, 3), {"group": 3, "dilations": [2, 2],
                                   "pads": [0, 1, 2, 1]}),                  # depthwise, dilated
    ((2, 4, 13), (4, 1, 5), {"group": 4, "pads": [3, 1]}),                  # 1-D depthwise
    ((1, 16, 19, 21), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),                # two threads
    ((1, 32, 31, 33), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),    # two threads
    ((1, 64, 20, 21), (32, 64, 1, 1), {}),                                     # two threads
]


def _ids(pair):
    return "x".join(np.dtype(d).name for d in pair)


def _rand(rng, shape, dtype, bounds=None):
    lo, hi = bounds or (np.iinfo(dtype).min, np.iinfo(dtype).max)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


def _ort_bounds(tx, tw):
    """Bounds of x and w that ONNX Runtime sums exactly (see the docstring)."""
    if tx == U8 and tw == S8:
        return None, ort_int8_weight_range()
    if tx == S8 and tw == U8:
        return ort_int8_weight_range(), None
    return None, None


def _ort(op, inputs, out_dtype, threads=1, **attrs):
    """ORT's result of one node (inputs None are left out)."""
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    node = oh.make_node(op, names, ["y"], **attrs)
    graph = oh.make_graph(
        [node], "ort",
        [oh.make_tensor_value_info(n, element_type(a.dtype), a.shape)
         for n, a in zip(names, inputs) if a is not None],
        [oh.make_tensor_value_info("y", element_type(out_dtype), None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {n: np.ascontiguousarray(a)
                           for n, a in zip(names, inputs) if a is not None})


def _requantise(acc, x_scale, w_scale, y_scale, y_zp):
    """ONNX Runtime's requantisation in NumPy: float32 throughout."""
    scale = (x_scale.reshape(-1)[0] * w_scale.reshape(-1)) / y_scale.reshape(-1)[0]
    shape = (1, -1) + (1,) * (acc.ndim - 2)
    v = acc.astype(np.float32) * np.broadcast_to(scale.astype(np.float32), acc.shape[1:2]
                                                 ).reshape(shape)
    info = np.iinfo(y_zp.dtype)
    zp = int(y_zp.reshape(-1)[0])
    v = np.clip(v, np.float32(info.min - zp), np.float32(info.max - zp))
    return (np.rint(v).astype(np.int32) + zp).astype(y_zp.dtype)


def _integer_oracle(attrs):
    """ConvInteger as the built-in float64 Conv of the centred values (exact:
    the sums stay far below 2**53); the built-in ConvInteger broadcasts a
    zero point of shape [1] or [M] in 2-D only."""
    def oracle(x, w, xz=None, wz=None):
        xc = x.astype(np.float64) - (0 if xz is None else float(xz.reshape(-1)[0]))
        wc = w.astype(np.float64)
        if wz is not None:
            wc = wc - wz.astype(np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
        model = node_model("Conv", [xc, wc], opset=13, **attrs)
        y = ReferenceEvaluator(model).run(None, {"x0": xc, "x1": wc})[0]
        return [y.astype(np.int64).astype(np.int32)]
    return oracle


def _qlinear_oracle(attrs):
    """QLinearConv from the exact accumulation and ORT's float32
    requantisation."""
    def oracle(x, xs, xz, w, ws, wz, ys, yz, b=None):
        acc = _integer_oracle(attrs)(x, w, xz, wz)[0]
        if b is not None:
            acc = (acc.astype(np.int64) + b.reshape((1, -1) + (1,) * (x.ndim - 2))
                   ).astype(np.int32)
        return [_requantise(acc, xs, ws, ys, yz)]
    return oracle


# ---- ConvInteger ----

@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_conv_integer_against_builtin_and_ort(pair):
    tx, tw = pair
    rng = np.random.default_rng(0)
    for case, (xs, ws, attrs) in enumerate(CASES):
        bx, bw = _ort_bounds(tx, tw)
        x, w = _rand(rng, xs, tx, bx), _rand(rng, ws, tw, bw)
        xz, wz = _rand(rng, (), tx, bx), _rand(rng, (1,) if case % 2 else (), tw, bw)
        inputs = [x, w, xz, wz]
        oracle = "builtin" if len(xs) == 4 else _integer_oracle(attrs)
        check_node("ConvInteger", inputs, oracle=oracle, opset=13, **attrs)
        got = run_ours(node_model("ConvInteger", inputs, opset=13, **attrs), inputs)[0][0]
        np.testing.assert_array_equal(got, _ort("ConvInteger", inputs, np.int32, **attrs)[0],
                                      err_msg=f"{pair} {case}")
        if case in (0, 4, 6):
            check_node("ConvInteger", [x, w], oracle="builtin", opset=13, **attrs)


# "Same" padding at unit strides: im2col copies each tap's valid rows as
# one stretch and then sets the columns in the padding (olc_qconv.h).
SAME_CASES = [
    ((1, 3, 10, 9), (2, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 3, 6, 8), (2, 3, 3, 3), {"pads": [0, 2, 2, 0]}),
    ((1, 2, 3, 4), (2, 2, 5, 5), {"pads": [2, 2, 2, 2]}),
    ((1, 2, 4, 5, 6), (3, 2, 3, 3, 3), {"pads": [1] * 6}),                   # 3-D
    ((2, 3, 10), (4, 3, 3), {"pads": [1, 1]}),                               # 1-D
    # depthwise at unit strides: taps of two columns summed as pairs
    ((1, 5, 9, 70), (5, 1, 2, 4), {"group": 5, "pads": [1, 1, 0, 2]}),      # even kw
    ((1, 3, 12, 40), (3, 1, 3, 5), {"group": 3, "pads": [1, 2, 1, 2],
                                    "dilations": [2, 1]}),                 # odd kw, dh 2
]


@pytest.mark.parametrize("xs, ws, attrs", SAME_CASES, ids=str)
def test_same_padding_columns(xs, ws, attrs):
    """Exact against ONNX Runtime, every level and thread count (ConvInteger;
    QLinearConv on the same columns, or the same depthwise rows)."""
    rng = np.random.default_rng(7)
    bx, bw = _ort_bounds(U8, S8)
    x, w = _rand(rng, xs, U8, bx), _rand(rng, ws, S8, bw)
    inputs = [x, w, _rand(rng, (), U8, bx), np.zeros((), S8)]
    expected = _ort("ConvInteger", inputs, np.int32, **attrs)
    check_node("ConvInteger", inputs, oracle=lambda *a: expected, opset=13, **attrs)
    q = _qinputs(rng, U8, S8, xs, ws, per_channel=True, bias=True, bounds=(bx, bw))
    expected = _ort("QLinearConv", q, U8, **attrs)
    check_node("QLinearConv", q, oracle=lambda *a: expected, opset=13, **attrs)


# Unit strides, int8 weights of zero point 0, 16 input channels or more:
# at VNNI the product reads a padded copy of X in groups of 4 channels, no
# columns (olc_qconv_direct): odd channel and output counts, rows under 16
# wide, dilations, asymmetric pads, 1-D, two images.
DIRECT_CASES = [
    ((1, 16, 19, 21), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 19, 9, 7), (21, 19, 3, 3), {"pads": [0, 2, 1, 0]}),
    ((1, 18, 11, 23), (5, 18, 5, 3), {"dilations": [2, 1], "pads": [2, 1, 3, 1]}),
    ((1, 33, 17), (40, 33, 4), {"pads": [2, 1]}),                              # 1-D
    ((1, 64, 12, 40), (32, 64, 3, 3), {"auto_pad": "SAME_UPPER"}),           # two threads
]


@pytest.mark.parametrize("tx", [U8, S8], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("xs, ws, attrs", DIRECT_CASES, ids=str)
def test_direct_unit_stride(xs, ws, attrs, tx, monkeypatch):
    """Exact against ONNX Runtime at every level and thread count, and at
    VNNI on the direct path with im2col's int32 sums (ConvInteger) and
    bytes (QLinearConv, per-channel and per-tensor; ConvInteger against the
    exact oracle, as ORT refuses its per-channel zero point)."""
    from onnx_light_cpu.ops import conv as conv_module
    rng = np.random.default_rng(len(xs) + ws[0])
    bx, bw = _ort_bounds(tx, S8)
    x, w = _rand(rng, xs, tx, bx), _rand(rng, ws, S8, bw)
    integer = [x, w, _rand(rng, (), tx, bx), np.zeros((ws[0],), S8)]
    for op, inputs, out in (
            ("ConvInteger", integer, np.int32),
            ("QLinearConv", _qinputs(rng, tx, S8, xs, ws, per_channel=True, bias=True,
                                     bounds=(bx, bw)), tx),
            ("QLinearConv", _qinputs(rng, tx, S8, xs, ws, per_channel=False, bias=False,
                                     bounds=(bx, bw)), tx)):
        # ORT refuses ConvInteger's per-channel zero point: the exact oracle
        expected = (_integer_oracle(attrs)(*inputs) if op == "ConvInteger"
                    else _ort(op, inputs, out, **attrs))
        check_node(op, inputs, oracle=lambda *a, e=expected: e, opset=13, **attrs)
        if "avx512vnni" not in available_simd_levels():
            continue
        model = node_model(op, inputs, opset=13, **attrs)
        got, _, paths = run_ours(model, inputs, 2)
        assert any("_direct_" in p for p in paths), paths
        with monkeypatch.context() as m:
            m.setattr(conv_module.core, "qconv_direct_fits", lambda geom, level: False)
            plain, _, paths = run_ours(model, inputs, 1)
        assert any("_im2col_" in p for p in paths), paths
        np.testing.assert_array_equal(got[0], plain[0])


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_conv_integer_per_channel_zero_point(pair):
    # ORT refuses a per-channel w_zero_point: the built-in is the oracle (in
    # 2-D, where it broadcasts one; the centred float64 Conv elsewhere)
    tx, tw = pair
    rng = np.random.default_rng(1)
    for xs, ws, attrs in (CASES[3], CASES[4], CASES[6], CASES[11]):
        x, w = _rand(rng, xs, tx), _rand(rng, ws, tw)
        inputs = [x, w, _rand(rng, (), tx), _rand(rng, (ws[0],), tw)]
        oracle = "builtin" if len(xs) == 4 else _integer_oracle(attrs)
        check_node("ConvInteger", inputs, oracle=oracle, opset=13, **attrs)


def test_conv_integer_extremes_exact():
    """Only the types' bounds: the sums a 16-bit pair would saturate."""
    rng = np.random.default_rng(2)
    for tx, tw in PAIRS:
        ix, iw = np.iinfo(tx), np.iinfo(tw)
        x = rng.choice(np.array([ix.min, ix.max], tx), size=(1, 7, 6, 5))
        w = rng.choice(np.array([iw.min, iw.max], tw), size=(5, 7, 3, 3))
        check_node("ConvInteger", [x, w], oracle="builtin", opset=13, pads=[1, 1, 1, 1])


# ---- QLinearConv ----

def _qinputs(rng, tx, tw, xs, ws, per_channel, bias, bounds=(None, None)):
    M = ws[0]
    x, w = _rand(rng, xs, tx, bounds[0]), _rand(rng, ws, tw, bounds[1])
    n = M if per_channel else 1
    shape = (M,) if per_channel else ()
    x_scale = np.array(rng.uniform(0.01, 0.05), np.float32)
    w_scale = rng.uniform(0.002, 0.02, size=n).astype(np.float32).reshape(shape)
    # about four output steps per standard deviation of the accumulator
    k = int(np.prod(ws[1:]))
    y_scale = np.array(float(x_scale) * float(w_scale.mean()) * 40 * np.sqrt(k) / 4,
                       np.float32)
    wz = (np.zeros(shape, tw) if tw == S8
          else _rand(rng, shape, tw, (100, 150)))
    inputs = [x, x_scale, _rand(rng, (), tx, bounds[0]), w, w_scale, wz, y_scale,
              _rand(rng, (), tx, (-20, 20) if tx == S8 else (100, 150))]
    if bias:
        inputs.append(rng.integers(-3000, 3000, size=M).astype(np.int32))
    return inputs


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_qlinear_conv_against_ort(pair):
    tx, tw = pair
    rng = np.random.default_rng(3)
    ort_runs = not (tx == S8 and tw == U8)  # ORT has no kernel for that pair
    for case, (xs, ws, attrs) in enumerate(CASES):
        inputs = _qinputs(rng, tx, tw, xs, ws, per_channel=case % 2 == 0, bias=case % 3 != 1,
                          bounds=_ort_bounds(tx, tw))
        if ort_runs:
            expected = _ort("QLinearConv", inputs, tx, **attrs)
            # per-channel scales broadcast in the built-in in 2-D only
            if len(xs) == 4 or case % 2:
                builtin = ReferenceEvaluator(node_model("QLinearConv", inputs, opset=13,
                                                        **attrs)).run(
                    None, {f"x{i}": a for i, a in enumerate(inputs)})[0]
                # float64 in the built-in, float32 in ORT: rare steps of one
                differ = builtin.astype(np.int32) - expected[0]
                assert np.abs(differ).max() <= 1 and np.mean(differ != 0) < 2e-3
        else:
            expected = _qlinear_oracle(attrs)(*inputs)
        check_node("QLinearConv", inputs, oracle=lambda *a, e=expected: e, opset=13, **attrs)


def test_qlinear_conv_per_channel_zero_points_and_no_bias_against_ort():
    rng = np.random.default_rng(4)
    for xs, ws, attrs in (CASES[2], CASES[6], CASES[4]):
        inputs = _qinputs(rng, U8, U8, xs, ws, per_channel=True, bias=False)
        inputs[5] = _rand(rng, (ws[0],), U8, (90, 160))   # distinct zero points
        expected = _ort("QLinearConv", inputs, U8, **attrs)
        check_node("QLinearConv", inputs, oracle=lambda *a, e=expected: e, opset=13, **attrs)


def test_qlinear_conv_float32_requantisation_follows_ort():
    """A product float32 rounds onto the other side of a half: ORT's float32
    arithmetic and ours give one value, the built-in's float64 another."""
    scale, bias = np.float32(0.003784169), -11398
    x = np.arange(256, dtype=U8).reshape(1, 1, 16, 16)
    inputs = [x, np.array(scale, np.float32), np.array(0, U8), np.ones((1, 1, 1, 1), S8),
              np.array([1.0], np.float32), np.zeros(1, S8), np.array(1.0, np.float32),
              np.array(128, U8), np.array([bias], np.int32)]
    expected = _ort("QLinearConv", inputs, U8)[0]
    builtin = ReferenceEvaluator(node_model("QLinearConv", inputs, opset=13)).run(
        None, {f"x{i}": a for i, a in enumerate(inputs)})[0]
    assert np.sum(builtin != expected) >= 1
    check_node("QLinearConv", inputs, oracle=lambda *a: [expected], opset=13)


def test_qlinear_conv_saturation_and_int8_output():
    rng = np.random.default_rng(5)
    for tx, tw in ((U8, S8), (S8, S8)):
        inputs = _qinputs(rng, tx, tw, (1, 4, 9, 9), (5, 4, 3, 3), True, True,
                          _ort_bounds(tx, tw))
        inputs[6] = inputs[6] / np.float32(8)   # most outputs saturate
        expected = _ort("QLinearConv", inputs, tx, pads=[1, 1, 1, 1])
        assert np.mean((expected[0] == np.iinfo(tx).min) | (expected[0] == np.iinfo(tx).max)
                       ) > 0.3
        check_node("QLinearConv", inputs, oracle=lambda *a, e=expected: e, opset=13,
                   pads=[1, 1, 1, 1])


@pytest.mark.parametrize("group", [1, 3])
def test_qlinear_conv_nan_scale_clamps_as_ort(group):
    """A NaN scale (here y_scale) gives the output's minimum everywhere, as
    ORT's max-then-min clamp does: the plain C loop (the tail past the last
    16 values, and the scalar level) once let NaN through to the zero point."""
    rng = np.random.default_rng(11)
    for tx, tw in ((U8, S8), (S8, S8)):
        inputs = _qinputs(rng, tx, tw, (1, 3, 5, 5), (3, 3 // group, 3, 3), True, True,
                          _ort_bounds(tx, tw))
        inputs[6] = np.array(np.nan, np.float32)
        expected = _ort("QLinearConv", inputs, tx, group=group, pads=[1, 1, 1, 1])
        assert np.all(expected[0] == np.iinfo(tx).min)
        with np.errstate(invalid="ignore"):
            check_node("QLinearConv", inputs, oracle=lambda *a, e=expected: e, opset=13,
                       group=group, pads=[1, 1, 1, 1])


# ---- both: empty, layouts, constants, thread count, paths ----

@pytest.mark.parametrize("op", ["ConvInteger", "QLinearConv"])
def test_empty_batch(op):
    rng = np.random.default_rng(6)
    x, w = np.zeros((0, 3, 5, 5), U8), _rand(rng, (4, 3, 3, 3), S8)
    if op == "ConvInteger":
        inputs, dtype = [x, w], np.int32
    else:
        inputs, dtype = _qinputs(rng, U8, S8, (0, 3, 5, 5), (4, 3, 3, 3), True, True), U8
    (y,), names, paths = run_ours(node_model(op, inputs, opset=13), inputs)
    assert y.shape == (0, 4, 3, 3) and y.dtype == dtype
    assert names == [f"onnx_light_cpu::{op}"] and paths[0].endswith("empty")


def test_strided_and_read_only_inputs():
    rng = np.random.default_rng(7)
    base = _rand(rng, (2, 3, 9, 14), U8)
    x = base[:, :, :, ::2]            # strided
    w = _rand(rng, (4, 3, 3, 3), S8, (-64, 64))
    w.setflags(write=False)          # read-only
    z = np.array(7, U8)
    for op, inputs, out in (
            ("ConvInteger", [x, w, z], np.int32),
            ("QLinearConv", [x, np.array(0.02, np.float32), z, w,
                             np.array(0.01, np.float32), np.array(0, S8),
                             np.array(0.3, np.float32), np.array(120, U8)], U8)):
        expected = _ort(op, inputs, out, pads=[1, 1, 1, 1])
        check_node(op, inputs, oracle=lambda *a, e=expected: e, opset=13, pads=[1, 1, 1, 1])


def test_batch_in_passes(monkeypatch):
    """Columns of one image at a time (the pass budget forced to a byte):
    the same result as one pass, per-channel zero points included."""
    from onnx_light_cpu.ops import conv as conv_ops

    rng = np.random.default_rng(12)
    for xs, ws, attrs in (CASES[3], CASES[4]):
        xs = (3,) + xs[1:]
        inputs = _qinputs(rng, U8, U8, xs, ws, True, True)
        inputs[5] = _rand(rng, (ws[0],), U8, (90, 160))
        expected = run_ours(node_model("QLinearConv", inputs, opset=13, **attrs), inputs)[0]
        monkeypatch.setattr(conv_ops, "QCONV_PASS_BYTES", 1)
        check_node("QLinearConv", inputs, oracle=lambda *a, e=expected: e, opset=13, **attrs)
        monkeypatch.undo()


def _initializer_model(op, inputs, constant, **attrs):
    """A one-node model with the inputs at ``constant`` as initializers."""
    model = node_model(op, inputs, opset=13, **attrs)
    graph = model.graph
    keep = [i for i in range(len(inputs)) if i not in constant]
    inits = [numpy_helper.from_array(inputs[i], f"x{i}") for i in constant]
    new_inputs = [graph.input[i] for i in keep]
    del graph.input[:]
    graph.input.extend(new_inputs)
    graph.initializer.extend(inits)
    return model, keep


@pytest.mark.parametrize("kind", ["im2col", "gemm", "depthwise", "direct"])
def test_constant_weights_prepared_once(kind):
    if kind == "direct" and "avx512vnni" not in available_simd_levels():
        pytest.skip("the direct loop runs at VNNI")
    rng = np.random.default_rng(8)
    xs, ws, attrs = {"im2col": CASES[2], "gemm": CASES[4], "depthwise": CASES[6],
                     "direct": DIRECT_CASES[1]}[kind]
    inputs = _qinputs(rng, U8, S8, xs, ws, True, True, _ort_bounds(U8, S8))
    expected = _ort("QLinearConv", inputs, U8, **attrs)[0]
    model, keep = _initializer_model("QLinearConv", inputs, (1, 3, 4, 5, 6, 7, 8), **attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    for level in available_simd_levels():
        with capped_simd_level(level):
            for _ in range(2):
                y = sess.run(None, {f"x{i}": inputs[i] for i in keep})[0]
                np.testing.assert_array_equal(y, expected)
    assert set(olc.used_kernel_names(sess)) == {"onnx_light_cpu::QLinearConv"}
    assert any(kind in p for p in olc.used_kernel_paths(sess))


# ---- a small quantized CNN (ONNX Runtime's QOperator form) ----

def test_quantized_cnn_end_to_end():
    """QuantizeLinear -> QLinearConv 3x3 -> QLinearConv depthwise ->
    QLinearConv 1x1 -> DequantizeLinear, weights u8 x s8 per channel as
    initializers: every integer tensor equal to ORT's."""
    rng = np.random.default_rng(9)
    lo, hi = ort_int8_weight_range()
    C0, C1 = 3, 8

    def conv_inits(name, M, shape, xs):
        w = rng.integers(lo, hi, size=(M,) + shape, endpoint=True).astype(S8)
        ws = rng.uniform(0.002, 0.01, size=M).astype(np.float32)
        return [numpy_helper.from_array(w, f"{name}_w"),
                numpy_helper.from_array(ws, f"{name}_ws"),
                numpy_helper.from_array(np.zeros(M, S8), f"{name}_wz"),
                numpy_helper.from_array(np.array(xs, np.float32), f"{name}_ys"),
                numpy_helper.from_array(np.array(128, U8), f"{name}_yz"),
                numpy_helper.from_array(rng.integers(-500, 500, size=M).astype(np.int32),
                                        f"{name}_b")]

    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "in_s"),
             numpy_helper.from_array(np.array(128, U8), "in_z")]
    inits += conv_inits("c1", C1, (C0, 3, 3), 0.05)
    inits += conv_inits("c2", C1, (1, 3, 3), 0.04)
    inits += conv_inits("c3", C0, (C1, 1, 1), 0.03)

    def qconv(name, x, xs, xz, **attrs):
        return oh.make_node(
            "QLinearConv", [x, xs, xz, f"{name}_w", f"{name}_ws", f"{name}_wz", f"{name}_ys",
                            f"{name}_yz", f"{name}_b"], [f"{name}_q"], **attrs)

    nodes = [oh.make_node("QuantizeLinear", ["x", "in_s", "in_z"], ["xq"]),
             qconv("c1", "xq", "in_s", "in_z", pads=[1, 1, 1, 1], strides=[2, 2]),
             qconv("c2", "c1_q", "c1_ys", "c1_yz", pads=[1, 1, 1, 1], group=C1),
             qconv("c3", "c2_q", "c2_ys", "c2_yz"),
             oh.make_node("DequantizeLinear", ["c3_q", "c3_ys", "c3_yz"], ["y"])]
    outs = ["xq", "c1_q", "c2_q", "c3_q", "y"]
    graph = oh.make_graph(
        nodes, "qcnn", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, C0, 17, 15])],
        [oh.make_tensor_value_info(n, TensorProto.UINT8 if n != "y" else TensorProto.FLOAT,
                                   None) for n in outs], initializer=inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)], ir_version=10)
    x = rng.normal(0, 1, size=(2, C0, 17, 15)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for threads in THREAD_COUNTS:
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
        olc.set_num_threads_for_session(sess, threads)
        olc.set_kernel_usage_recording(sess, True)
        got = sess.run(None, {"x": x})
        for name, g, e in zip(outs, got, expected):
            np.testing.assert_array_equal(g, e, err_msg=name)
        assert "onnx_light_cpu::QLinearConv" in olc.used_kernel_names(sess)
    assert len(np.unique(expected[3])) > 10   # not all saturated


# ---- bad input ----

def _qlinear_base(rng):
    return _qinputs(rng, U8, S8, (1, 4, 6, 6), (6, 4, 3, 3), True, True)


@pytest.mark.parametrize("change, error, words", [
    (lambda a: a.__setitem__(0, a[0][0]), ValueError, "input 3"),               # rank 3 vs 4
    (lambda a: a.__setitem__(3, a[3][:, :2]), ValueError, "input 3"),           # channels
    (lambda a: a.__setitem__(2, a[2].astype(S8)), TypeError, "input 2"),        # x_zp type
    (lambda a: a.__setitem__(5, a[5][:4]), ValueError, "input 5"),              # w_zp length
    (lambda a: a.__setitem__(4, a[4][:5]), ValueError, "input 4"),              # w_scale length
    (lambda a: a.__setitem__(1, a[1].astype(np.float64)), TypeError, "input 1"),  # scale type
    (lambda a: a.__setitem__(1, np.full(2, 0.1, np.float32)), ValueError, "input 1"),
    (lambda a: a.__setitem__(7, np.zeros(2, U8)), ValueError, "input 7"),       # y_zp shape
    (lambda a: a.__setitem__(8, a[8].astype(np.int64)), TypeError, "input 8"),  # bias type
    (lambda a: a.__setitem__(8, a[8][:3]), ValueError, "input 8"),              # bias shape
])
def test_qlinear_conv_bad_input(change, error, words):
    rng = np.random.default_rng(10)
    inputs = _qlinear_base(rng)
    change(inputs)
    with pytest.raises(error, match=f"QLinearConv.*{words}"):
        run_ours(node_model("QLinearConv", inputs, opset=13), inputs)


def test_conv_integer_bad_input():
    rng = np.random.default_rng(11)
    x, w = _rand(rng, (1, 4, 6, 6), U8), _rand(rng, (6, 4, 3, 3), U8)
    cases = [
        ([x, w[0]], ValueError, "input 1"),                         # rank
        ([x[:, :3], w], ValueError, "input 1"),                     # channels
        ([x, _rand(rng, (6, 2, 3, 3), U8)], ValueError, "group"),   # C % group
        ([x, w, np.zeros(2, U8)], ValueError, "input 2"),           # x_zp a vector
        ([x, w, np.array(0, S8)], TypeError, "input 2"),            # x_zp type
        ([x, w, np.array(0, U8), np.zeros(5, U8)], ValueError, "input 3"),
        ([x.astype(np.int32), w], TypeError, "input 0"),
    ]
    for inputs, error, words in cases:
        attrs = {"group": 3} if words == "group" else {}
        with pytest.raises(error, match=f"ConvInteger.*{words}"):
            run_ours(node_model("ConvInteger", inputs, opset=13, **attrs), inputs)
