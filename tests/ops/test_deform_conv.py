"""DeformConv (opset 19 and 22, 2-D) against the onnx.reference built-in
(small cases: it calls GridSample once per output element and input
channel), a float64 NumPy oracle checked against it, and ONNX Runtime:
float32, float64, float16 and bfloat16 (through float32), groups and
offset groups, strides, pads, dilations, with and without mask and bias,
offsets pushing samples outside the image, onto its border and onto grid
points, batch 2 and empty, every SIMD level, 1 and 2 threads bit for bit,
strided and read-only inputs, constant weights, bad input.  Zero offsets
with a unit mask are our Conv.

The built-in rounds the sampling coordinates to float32 (GridSample's
denormalised coordinates), so even double agrees with it to about 1e-6
of the coordinate; the oracle and our kernel keep them exact."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, element_type, same_bits

ort = pytest.importorskip("onnxruntime")

KERNEL = "onnx_light_cpu::DeformConv"
NAMES = ("X", "W", "offset", "B", "mask")
# (rtol, atol relative to the largest |expected|): float32 sums of C*k*k
# products in another order; the built-in's float32 coordinates
TOL = {np.dtype(np.float32): (1e-5, 1e-5), np.dtype(np.float64): (1e-12, 1e-12),
       np.dtype(np.float16): (2e-3, 2e-3), np.dtype(bfloat16): (1.6e-2, 1.6e-2)}
BUILTIN_TOL = (1e-5, 1e-5)


def _model(inputs, opset=22, initializers=(), **attrs) -> onnx.ModelProto:
    """One DeformConv node; inputs is (X, W, offset, B or None, mask or None)."""
    names = [n if a is not None else "" for n, a in zip(NAMES, inputs)]
    while names and not names[-1]:
        names.pop()
    node = oh.make_node("DeformConv", names, ["Y"], **attrs)
    dtype = onnx.helper.np_dtype_to_tensor_dtype(inputs[0].dtype)
    graph_inputs = [oh.make_tensor_value_info(n, element_type(a.dtype), [None] * a.ndim)
                    for n, a in zip(NAMES, inputs) if a is not None and n not in initializers]
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in zip(NAMES, inputs)
             if a is not None and n in initializers]
    graph = oh.make_graph([node], "deform", graph_inputs,
                          [oh.make_tensor_value_info("Y", dtype, None)], initializer=inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _feeds(inputs, initializers=()):
    return {n: a for n, a in zip(NAMES, inputs) if a is not None and n not in initializers}


def run_ours(model, inputs, threads=1, initializers=(), runs=1):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    for _ in range(runs):
        out = sess.run(None, _feeds(inputs, initializers))[0]
    return out, olc.used_kernel_names(sess), olc.used_kernel_paths(sess)


def run_builtin(inputs, **attrs):
    return ReferenceEvaluator(_model(inputs, **attrs)).run(None, _feeds(inputs))[0]


def run_ort(inputs, opset=22, **attrs):
    """ORT's result; half types run its float32 kernel on the same values."""
    wide = [None if a is None else a.astype(np.float32) if a.dtype != np.float64 else a
            for a in inputs]
    sess = ort.InferenceSession(_model(wide, opset, **attrs).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    return sess.run(None, _feeds(wide))[0]


def deform_conv64(x, w, offset, b=None, mask=None, group=1, offset_group=1, strides=(1, 1),
                  pads=(0, 0, 0, 0), dilations=(1, 1)):
    """The definition in float64: every tap moved by its offset, sampled
    bilinearly with zero outside the image, times the mask."""
    x, w, offset = (a.astype(np.float64) for a in (x, w, offset))
    N, C, H, W = x.shape
    M, Cg, kh, kw = w.shape
    kk = kh * kw
    OH, OW = offset.shape[2:]
    offset = offset.reshape(N, offset_group, kk, 2, OH, OW)
    mask = np.ones((N, offset_group, kk, OH, OW)) if mask is None else \
        mask.astype(np.float64).reshape(N, offset_group, kk, OH, OW)
    Co = C // offset_group
    cols = np.zeros((N, C, kk, OH, OW))
    oh_ = np.arange(OH)[:, None] * strides[0] - pads[0]
    ow_ = np.arange(OW)[None, :] * strides[1] - pads[1]
    nn = np.arange(N)[:, None, None]
    for og, tap in itertools.product(range(offset_group), range(kk)):
        h = oh_ + (tap // kw) * dilations[0] + offset[:, og, tap, 0]
        v = ow_ + (tap % kw) * dilations[1] + offset[:, og, tap, 1]
        y0, x0 = np.floor(h), np.floor(v)
        ly, lx = h - y0, v - x0
        acc = 0.0
        for dy, wy in ((0, 1 - ly), (1, ly)):
            for dx, wx in ((0, 1 - lx), (1, lx)):
                yy, xx = y0 + dy, x0 + dx
                ok = (yy >= 0) & (yy < H) & (xx >= 0) & (xx < W)
                yc = np.clip(yy, 0, H - 1).astype(np.int64)
                xc = np.clip(xx, 0, W - 1).astype(np.int64)
                px = x[:, og * Co:(og + 1) * Co][nn, :, yc, xc]        # N, OH, OW, Co
                px = np.where(ok[..., None], px, 0.0)
                acc = acc + np.where(ok, wy * wx, 0.0)[..., None] * px
        cols[:, og * Co:(og + 1) * Co, tap] = np.moveaxis(acc, -1, 1) * mask[:, og, tap][:, None]
    Mg = M // group
    y = np.zeros((N, M, OH, OW))
    for g in range(group):
        cg = cols[:, g * Cg:(g + 1) * Cg].reshape(N, Cg * kk, OH * OW)
        wg = w[g * Mg:(g + 1) * Mg].reshape(Mg, Cg * kk)
        y[:, g * Mg:(g + 1) * Mg] = np.einsum("mk,nkp->nmp", wg, cg).reshape(N, Mg, OH, OW)
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def _out(size, k, s, p0, p1, d):
    return (size + p0 + p1 - (k - 1) * d - 1) // s + 1


def make_inputs(rng, xs, ws, dtype, attrs, bias=True, mask=True, spread=2.0, grid=False):
    """X, W, offset, B, mask; offsets uniform in +-spread, a third of them
    whole numbers (samples on grid points) when grid."""
    N, C, H, W = xs
    kh, kw = ws[2:]
    s = attrs.get("strides", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    d = attrs.get("dilations", [1, 1])
    OG = attrs.get("offset_group", 1)
    OH, OW = _out(H, kh, s[0], p[0], p[2], d[0]), _out(W, kw, s[1], p[1], p[3], d[1])
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))
    off = rng.uniform(-spread, spread, (N, OG * 2 * kh * kw, OH, OW))
    if grid:
        off.reshape(-1)[::3] = np.round(off.reshape(-1)[::3])
    b = rng.standard_normal(ws[0]) if bias else None
    m = rng.uniform(0, 1.5, (N, OG * kh * kw, OH, OW)) if mask else None
    return [None if a is None else a.astype(dtype) for a in (x, w, off, b, m)]


def _oracle(inputs, **attrs):
    return deform_conv64(*inputs, group=attrs.get("group", 1),
                         offset_group=attrs.get("offset_group", 1),
                         strides=attrs.get("strides", (1, 1)),
                         pads=attrs.get("pads", (0, 0, 0, 0)),
                         dilations=attrs.get("dilations", (1, 1)))


def _tol(dtype, expected, tol=None):
    rtol, atol = tol or TOL[np.dtype(dtype)]
    e = np.abs(np.asarray(expected, dtype=np.float64))
    e = e[np.isfinite(e)]
    return rtol, atol * max(float(e.max()) if e.size else 1.0, 1.0)


def check(inputs, expected, levels=True, opset=22, tol=None, initializers=(), **attrs):
    """Ours at every SIMD level (or the default one) and thread count: close
    to expected, the same bits at 1 and 2 threads, inputs untouched, our
    kernel ran.  Returns the usage paths."""
    model = _model(inputs, opset, initializers, **attrs)
    originals = [None if a is None else a.copy() for a in inputs]
    dtype = inputs[0].dtype
    tolerance = _tol(dtype, expected, tol)
    expected = np.asarray(expected).astype(dtype)
    paths = []
    for level in (available_simd_levels() if levels else [None]):
        with capped_simd_level(level) if level else contextlib.nullcontext():
            results = []
            for threads in THREAD_COUNTS:
                got, names, p = run_ours(model, inputs, threads, initializers, runs=2)
                assert KERNEL in names, (names, p)
                assert_close(got, expected, f"DeformConv {attrs} at {level}, {threads} threads",
                             tolerance)
                results.append(got)
                paths += p
            for a, b in itertools.combinations(results, 2):
                assert same_bits(a, b), "DeformConv: the thread count changed the result"
    for a, o in zip(inputs, originals):
        assert a is None or same_bits(a, o), "DeformConv modified an input"
    return paths


# -- against the built-in (small: it is slow) ----------------------------------------

BUILTIN_CASES = [
    # x shape, w shape, attributes, bias, mask
    ((1, 2, 5, 6), (3, 2, 3, 3), {"pads": [1, 1, 1, 1]}, True, True),
    ((2, 2, 4, 5), (2, 2, 2, 2), {}, False, False),
    ((1, 4, 5, 4), (2, 2, 3, 2), {"group": 2, "offset_group": 2, "strides": [2, 1],
                                  "dilations": [1, 2], "pads": [1, 0, 2, 1]}, True, False),
    ((1, 4, 4, 4), (4, 2, 2, 2), {"group": 2, "offset_group": 4}, False, True),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(BUILTIN_CASES)))
def test_deform_conv_vs_builtin(dtype, case):
    xs, ws, attrs, bias, mask = BUILTIN_CASES[case]
    inputs = make_inputs(np.random.default_rng(case), xs, ws, dtype, attrs, bias, mask,
                         grid=True)
    expected = run_builtin(inputs, **attrs)
    # the oracle is the definition the built-in computes
    np.testing.assert_allclose(_oracle(inputs, **attrs), expected, rtol=1e-5, atol=1e-5)
    check(inputs, expected, levels=case == 0, tol=BUILTIN_TOL, **attrs)


# -- against the float64 oracle and ONNX Runtime --------------------------------------

CASES = [
    ((2, 3, 9, 11), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True, True),
    ((1, 6, 13, 7), (4, 3, 3, 3), {"group": 2, "offset_group": 3, "strides": [2, 1],
                                   "pads": [2, 1, 0, 1], "dilations": [2, 1]}, False, True),
    ((2, 8, 10, 12), (6, 8, 1, 1), {"offset_group": 2}, True, False),       # 1x1 taps
    ((1, 4, 7, 9), (6, 2, 2, 3), {"group": 2, "strides": [1, 2]}, False, False),
    # 2 threads, several column tiles, two blocks of K rows (360 > 256)
    ((1, 40, 30, 30), (8, 40, 3, 3), {"pads": [1, 1, 1, 1]}, True, True),
    ((2, 16, 20, 20), (16, 16, 3, 3), {"pads": [1, 1, 1, 1], "offset_group": 4}, True, False),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_deform_conv_float32_vs_oracle_and_ort(case):
    xs, ws, attrs, bias, mask = CASES[case]
    inputs = make_inputs(np.random.default_rng(10 + case), xs, ws, np.float32, attrs, bias,
                         mask, spread=3.0, grid=True)
    expected = _oracle(inputs, **attrs)
    np.testing.assert_allclose(run_ort(inputs, **attrs), expected,
                               *_tol(np.float32, expected))
    paths = check(inputs, expected, levels=case in (0, 4), **attrs)
    assert all(p.startswith("deformconv_float32_gemm_") for p in paths), paths


@pytest.mark.parametrize("case", [0, 1, 4])
def test_deform_conv_double_vs_oracle(case):
    xs, ws, attrs, bias, mask = CASES[case]
    inputs = make_inputs(np.random.default_rng(20 + case), xs, ws, np.float64, attrs, bias,
                         mask, spread=3.0, grid=True)
    paths = check(inputs, _oracle(inputs, **attrs), levels=case == 0, **attrs)
    assert all(p.startswith("deformconv_float64_columns_") for p in paths), paths


@pytest.mark.parametrize("dtype", [np.float16, bfloat16])
@pytest.mark.parametrize("case", [0, 1])
def test_deform_conv_half_types(dtype, case):
    """Widened to float32, computed, rounded once: the float64 oracle on the
    same values."""
    xs, ws, attrs, bias, mask = CASES[case]
    inputs = make_inputs(np.random.default_rng(30 + case), xs, ws, dtype, attrs, bias, mask)
    check(inputs, _oracle(inputs, **attrs), levels=False, **attrs)


def test_deform_conv_opset_19_and_bfloat16_needs_22():
    xs, ws, attrs, bias, mask = CASES[0]
    inputs = make_inputs(np.random.default_rng(1), xs, ws, np.float32, attrs, bias, mask)
    check(inputs, _oracle(inputs, **attrs), levels=False, opset=19, **attrs)
    half = [None if a is None else a.astype(bfloat16) for a in inputs]
    with pytest.raises(TypeError, match="DeformConv.*bfloat16"):
        run_ours(_model(half, 19, **attrs), half)


# -- boundary of the image, grid points --------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_deform_conv_samples_on_the_border_and_outside(dtype):
    """Whole offsets (one pixel each), samples exactly on the first and last
    row and column, on -1 and H (zero), half a pixel outside (half the
    border pixel) and far away (zero); infinities in the image outside
    the taps never reach the sums."""
    rng = np.random.default_rng(7)
    N, C, H, W = 2, 3, 6, 7
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((4, C, 3, 3)).astype(dtype)
    OH, OW = H - 2, W - 2
    choices = np.array([0, 1, -1, 2, -2, 5, -5, 0.5, -0.5, 1e6, -1e6, 3, -3, 4.5, -4.5, 6])
    off = rng.choice(choices, (N, 18, OH, OW)).astype(dtype)
    inputs = [x, w, off, None, None]
    expected = _oracle(inputs)
    check(inputs, expected, levels=True)
    builtin_inputs = [x[:1, :2], w[:2, :2], off[:1], None, None]
    np.testing.assert_allclose(run_builtin(builtin_inputs), _oracle(builtin_inputs),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_deform_conv_nan_mask_outside_the_image(dtype):
    """A sample outside the image is 0 times its mask: a NaN mask makes the
    output NaN there, as in ONNX Runtime and the built-in
    (it once gave 0); a NaN offset samples nothing (0), as in ORT."""
    rng = np.random.default_rng(9)
    x, w, off, b, mask = make_inputs(rng, (1, 3, 5, 6), (2, 3, 3, 3), dtype, {"pads": [1, 1, 1, 1]})
    off.reshape(-1)[::4] = 1e6           # far outside
    off.reshape(-1)[1::9] = np.nan
    mask.reshape(-1)[::5] = np.nan
    inputs = [x, w, off, b, mask]
    expected = run_ort(inputs, pads=[1, 1, 1, 1])
    assert 0 < np.isnan(expected).sum() < expected.size
    check(inputs, expected, pads=[1, 1, 1, 1])


def test_deform_conv_whole_offsets_shift_the_image():
    """An offset of (1, -2) on every tap is the convolution of the image
    moved by (-1, 2), zero where it moved in."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 3, 8, 9)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    off = np.zeros((1, 18, 6, 7), np.float32)
    off[:, 0::2] = 1
    off[:, 1::2] = -2
    moved = np.zeros_like(x)
    moved[..., :-1, 2:] = x[..., 1:, :-2]
    y, names, _ = run_ours(_model([x, w, off, None, None]), [x, w, off, None, None])
    assert KERNEL in names
    conv = _conv(moved, w, None)
    np.testing.assert_allclose(y, conv, rtol=1e-5, atol=1e-5)


def _conv(x, w, b, **attrs):
    inputs = [x, w] + ([] if b is None else [b])
    names = ["X", "W", "B"][:len(inputs)]
    node = oh.make_node("Conv", names, ["Y"], **attrs)
    graph = oh.make_graph([node], "conv", [oh.make_tensor_value_info(
        n, TensorProto.FLOAT, a.shape) for n, a in zip(names, inputs)],
        [oh.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 22)]))
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    y = sess.run(None, dict(zip(names, inputs)))[0]
    assert "onnx_light_cpu::Conv" in olc.used_kernel_names(sess)
    return y


@pytest.mark.parametrize("xs,ws,attrs", [
    ((2, 16, 12, 11), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 6, 9, 10), (4, 3, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2],
                                   "pads": [0, 1, 1, 0]}),
])
@pytest.mark.parametrize("unit_mask", [False, True])
def test_deform_conv_zero_offsets_is_conv(xs, ws, attrs, unit_mask):
    rng = np.random.default_rng(9)
    x, w, off, b, m = make_inputs(rng, xs, ws, np.float32, attrs, True, unit_mask)
    off[...] = 0
    if m is not None:
        m[...] = 1
    y, names, _ = run_ours(_model([x, w, off, b, m], **attrs), [x, w, off, b, m])
    assert KERNEL in names
    np.testing.assert_allclose(y, _conv(x, w, b, **attrs), rtol=1e-5, atol=1e-5)


# -- layouts, constants, empty tensors -------------------------------------------------

def test_deform_conv_strided_read_only_and_constant_inputs():
    xs, ws, attrs, bias, mask = CASES[0]
    inputs = make_inputs(np.random.default_rng(3), xs, ws, np.float32, attrs, bias, mask)
    expected = _oracle(inputs, **attrs)
    x, w, off, b, m = inputs
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), np.float32)
    wide[..., ::2] = x
    strided_x = wide[..., ::2]
    strided_off = np.ascontiguousarray(np.swapaxes(off, 2, 3)).swapaxes(2, 3)
    ro = [a.copy() for a in inputs]
    for a in ro:
        a.flags.writeable = False
    check([strided_x, w, strided_off, b, m], expected, levels=False, **attrs)
    check(ro, expected, levels=False, **attrs)
    # W and B as initializers: laid out once, the same result on every run
    check(inputs, expected, levels=False, initializers=("W", "B"), **attrs)


def test_deform_conv_empty():
    x = np.zeros((0, 2, 5, 5), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    off = np.zeros((0, 18, 3, 3), np.float32)
    y, names, _ = run_ours(_model([x, w, off, None, None]), [x, w, off, None, None])
    assert y.shape == (0, 3, 3, 3) and KERNEL in names
    # no input channels: the bias alone
    x = np.zeros((1, 0, 5, 5), np.float32)
    w = np.ones((3, 0, 3, 3), np.float32)
    off = np.zeros((1, 18, 3, 3), np.float32)
    b = np.arange(3, dtype=np.float32)
    y, names, _ = run_ours(_model([x, w, off, b, None]), [x, w, off, b, None])
    np.testing.assert_array_equal(y, np.broadcast_to(b[None, :, None, None], (1, 3, 3, 3)))


# -- bad input ---------------------------------------------------------------------------

def _bad(xs=(1, 4, 5, 5), ws=(2, 4, 3, 3), offs=(1, 18, 3, 3), b=None, ms=None, **attrs):
    x, w = np.ones(xs, np.float32), np.ones(ws, np.float32)
    off = np.zeros(offs, np.float32)
    bias = None if b is None else np.ones(b, np.float32)
    mask = None if ms is None else np.ones(ms, np.float32)
    inputs = [x, w, off, bias, mask]
    return _model(inputs, **attrs), inputs


@pytest.mark.parametrize("kwargs,error,message", [
    ({"offs": (1, 16, 3, 3)}, ValueError, r"input 2 \('offset'\) has shape"),
    ({"offs": (1, 18, 3, 4)}, ValueError, r"input 2 \('offset'\) has shape"),
    ({"offs": (2, 18, 3, 3)}, ValueError, r"input 2 \('offset'\) has shape"),
    ({"offs": (1, 18, 3, 3), "offset_group": 2}, ValueError, r"input 2 \('offset'\)"),
    ({"ms": (1, 18, 3, 3)}, ValueError, r"input 4 \('mask'\) has shape"),
    ({"ms": (1, 9, 2, 3)}, ValueError, r"input 4 \('mask'\) has shape"),
    ({"offset_group": 3, "offs": (1, 54, 3, 3)}, ValueError, "not divisible by offset_group"),
    ({"offset_group": 0}, ValueError, "offset_group 0"),
    ({"group": 3}, ValueError, "not divisible by group"),
    ({"ws": (2, 3, 3, 3)}, ValueError, r"input 1 \('W'\).*input channels"),
    ({"ws": (3, 2, 3, 3), "group": 2}, ValueError, "not divisible by group"),
    ({"kernel_shape": [2, 2]}, ValueError, "kernel_shape"),
    ({"b": (3,)}, ValueError, r"input 3 \('B'\) has shape"),
    ({"ws": (2, 4, 3)}, ValueError, "rank"),
    ({"xs": (1, 4, 2, 2), "offs": (1, 18, 1, 1)}, ValueError, "smaller than the dilated"),
    ({"xs": (1, 4, 5), "ws": (2, 4, 3), "offs": (1, 6, 3)}, NotImplementedError, "2-D"),
    ({"strides": [0, 1]}, ValueError, "strides"),
    ({"pads": [1, 1]}, ValueError, "pads has 2 values"),
])
def test_deform_conv_bad_input(kwargs, error, message):
    model, inputs = _bad(**kwargs)
    with pytest.raises(error, match=f"DeformConv.*{message}"):
        run_ours(model, inputs)


def test_deform_conv_bad_type():
    x = np.ones((1, 2, 4, 4), np.int32)
    inputs = [x, x[:, :, :3, :3].copy(), np.zeros((1, 18, 2, 2), np.int32), None, None]
    with pytest.raises(TypeError, match="DeformConv"):
        run_ours(_model(inputs), inputs)
