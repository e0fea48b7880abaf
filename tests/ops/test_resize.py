"""Resize: nearest (every coordinate transformation and rounding), linear
(bilinear, trilinear), cubic, antialias, axes, keep_aspect_ratio_policy,
scales or sizes, tf_crop_and_resize; opsets 10, 11, 13, 18, 19.

Oracles: ONNX Runtime (at 1 thread: it rounds in float32 and sums the taps
in its own order, hence the float32 tolerance below) and the onnx.reference
built-in (float64, where it is right: it does not know opset 10's
semantics or tf_half_pixel_for_nearest).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from tests.differential import check_node, error_message, layouts, node_model, run_ours

ort = pytest.importorskip("onnxruntime")

KERNEL = "onnx_light_cpu::Resize"
# ours (float32 taps, our pass order) against ORT's float32 arithmetic
F32 = (2e-5, 2e-5)
# the built-in computes cubic weights and roi arithmetic in float32 (NumPy 2
# keeps float32 scalars float32): float64 results agree to about 1e-7
CUBIC64 = (1e-5, 1e-5)
EMPTY = np.zeros(0, np.float32)


def ort_outputs(model, inputs, threads=1):
    model = onnx.ModelProto.FromString(model.SerializeToString())
    node = model.graph.node[0]
    opset = model.opset_import[0].version
    if len(node.input) == 4 and inputs[2].size == 0 and opset >= 13:
        node.input[2] = ""  # sizes given: no scales for ORT's shape inference
    for value in model.graph.input:
        value.type.tensor_type.ClearField("shape")
    for out in model.graph.output:
        out.type.tensor_type.elem_type = model.graph.input[0].type.tensor_type.elem_type
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    feeds = {f"x{i}": np.ascontiguousarray(a) for i, a in enumerate(inputs)}
    return sess.run(None, {k: v for k, v in feeds.items()
                           if k in {i.name for i in sess.get_inputs()}})


def ort_oracle(opset, **attrs):
    def oracle(*inputs):
        return ort_outputs(node_model("Resize", inputs, opset=opset, **attrs), inputs)
    return oracle


def scales_inputs(x, scales, roi=None):
    return [x, EMPTY if roi is None else np.array(roi, np.float32),
            np.array(scales, np.float32)]


def sizes_inputs(x, sizes, roi=None):
    return [x, EMPTY if roi is None else np.array(roi, np.float32), EMPTY,
            np.array(sizes, np.int64)]


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@pytest.mark.parametrize("coordinate", COORDS + ("half_pixel_symmetric",))
@pytest.mark.parametrize("nearest", NEAREST)
@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 0.6, 1.7), (1, 1, 3, 0.5)])
def test_nearest_against_builtin(coordinate, nearest, scales):
    x = rand((2, 3, 7, 9))
    if coordinate == "half_pixel_symmetric" and scales[3] == 0.5:
        # the built-in's float32 arithmetic puts x_original at 0.99999997
        # where it is 1 exactly (and ORT says 1): ORT is the oracle
        if nearest in ("round_prefer_floor", "floor"):
            attrs = dict(mode="nearest", coordinate_transformation_mode=coordinate,
                         nearest_mode=nearest)
            check_node("Resize", scales_inputs(x, scales), oracle=ort_oracle(19, **attrs),
                       opset=19, **attrs)
        return
    check_node("Resize", scales_inputs(x, scales), opset=19, mode="nearest",
               coordinate_transformation_mode=coordinate, nearest_mode=nearest)


@pytest.mark.parametrize("coordinate", COORDS)
@pytest.mark.parametrize("nearest", NEAREST)
@pytest.mark.parametrize("sizes", [(2, 3, 14, 18), (2, 3, 5, 4), (2, 3, 21, 3)])
def test_nearest_against_ort(coordinate, nearest, sizes):
    """ORT computes source coordinates in float32: sizes whose coordinates
    fall on no rounding tie in either precision."""
    x = rand((2, 3, 7, 9))
    attrs = dict(mode="nearest", coordinate_transformation_mode=coordinate,
                 nearest_mode=nearest)
    check_node("Resize", sizes_inputs(x, sizes), oracle=ort_oracle(19, **attrs), opset=19,
               **attrs)


@pytest.mark.parametrize("nearest", NEAREST)
def test_nearest_tf_half_pixel_for_nearest(nearest):
    """Opsets 11-18; neither ORT (1.2x) nor the built-in run it any more:
    the specification's x_original = (x_resized + 0.5) / scale."""
    x = rand((1, 2, 5, 7))
    scales = (1, 1, 1.5, 2.3)

    def spec(x, *_):
        index = []
        for d, s in zip(x.shape, scales):
            o = int(d * np.float64(np.float32(s)))
            if s == 1:  # an axis not resized (as the built-in skips them)
                index.append(np.arange(d))
                continue
            c = (np.arange(o) + 0.5) / np.float64(np.float32(s))
            fl = np.floor(c)
            rounded = {"round_prefer_floor": np.where(c - fl <= 0.5, fl, fl + 1),
                       "round_prefer_ceil": np.where(c - fl < 0.5, fl, fl + 1),
                       "floor": fl, "ceil": np.ceil(c)}[nearest]
            index.append(np.clip(rounded.astype(np.int64), 0, d - 1))
        return [x[np.ix_(*index)]]

    check_node("Resize", scales_inputs(x, scales), oracle=spec, opset=13, mode="nearest",
               coordinate_transformation_mode="tf_half_pixel_for_nearest", nearest_mode=nearest)


@pytest.mark.parametrize("coordinate", COORDS)
@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 0.5, 0.7), (1, 1, 1.3, 3)])
def test_bilinear_against_ort(coordinate, scales):
    """align_corners divides by the output length: the built-in (and the
    backend cases it made) take scale * length, ORT the integer length;
    they agree where scale * length is whole, as with sizes."""
    x = rand((2, 3, 7, 9))
    attrs = dict(mode="linear", coordinate_transformation_mode=coordinate)
    if coordinate == "align_corners":
        sizes = tuple(int(s * d) for s, d in zip(scales, x.shape))
        check_node("Resize", sizes_inputs(x, sizes), oracle=ort_oracle(19, **attrs), opset=19,
                   tolerance=F32, **attrs)
        check_node("Resize", scales_inputs(x.astype(np.float64), scales), opset=19, **attrs)
        return
    check_node("Resize", scales_inputs(x, scales), oracle=ort_oracle(19, **attrs), opset=19,
               tolerance=F32, **attrs)


@pytest.mark.parametrize("coordinate", COORDS)
def test_bilinear_sizes_against_builtin(coordinate):
    x = rand((1, 2, 9, 5), np.float64)
    check_node("Resize", sizes_inputs(x, (1, 2, 4, 11)), opset=19, mode="linear",
               coordinate_transformation_mode=coordinate)


def test_trilinear():
    x = rand((1, 2, 3, 4, 5))
    attrs = dict(mode="linear", coordinate_transformation_mode="half_pixel")
    check_node("Resize", scales_inputs(x, (1, 1, 2, 1.5, 2)), oracle=ort_oracle(19, **attrs),
               opset=19, tolerance=F32, **attrs)
    check_node("Resize", scales_inputs(x.astype(np.float64), (1, 1, 2, 1.5, 2)), opset=19,
               **attrs)


@pytest.mark.parametrize("a,exclude", [(-0.75, 0), (-0.5, 1), (-0.5, 0)])
@pytest.mark.parametrize("coordinate", ("half_pixel", "align_corners", "asymmetric"))
def test_cubic_against_ort(a, exclude, coordinate):
    x = rand((1, 2, 6, 7))
    attrs = dict(mode="cubic", cubic_coeff_a=a, exclude_outside=exclude,
                 coordinate_transformation_mode=coordinate)
    check_node("Resize", sizes_inputs(x, (1, 2, 10, 4)), oracle=ort_oracle(19, **attrs),
               opset=19, tolerance=(1e-4, 1e-4), **attrs)
    check_node("Resize", scales_inputs(x.astype(np.float64), (1, 1, 1.7, 0.6)), opset=19,
               tolerance=CUBIC64, **attrs)


@pytest.mark.parametrize("mode", ("linear", "cubic"))
@pytest.mark.parametrize("scales", [(1, 1, 0.5, 0.35), (1, 1, 0.8, 2)])
def test_antialias_against_builtin(mode, scales):
    x = rand((1, 2, 11, 13), np.float64)
    check_node("Resize", scales_inputs(x, scales), opset=19, mode=mode, antialias=1,
               tolerance=CUBIC64)
    x32 = x.astype(np.float32)
    check_node("Resize", scales_inputs(x32, scales), opset=18, mode=mode, antialias=1,
               oracle=ort_oracle(18, mode=mode, antialias=1), tolerance=(1e-4, 1e-4))


@pytest.mark.parametrize("policy", ("stretch", "not_larger", "not_smaller"))
@pytest.mark.parametrize("axes", [(2, 3), (3, 2), (-1,), (1, -2)])
def test_axes_and_policy(policy, axes):
    """The built-in refuses negative axes: it runs the same axes made
    positive."""
    x = rand((1, 2, 6, 9), np.float64)
    positive = [a % 4 for a in axes]

    def builtin(*inputs, **attrs):
        model = node_model("Resize", inputs, opset=19, axes=positive, **attrs)
        return ReferenceEvaluator(model).run(None, {f"x{i}": a for i, a in enumerate(inputs)})

    sizes = (5, 13)[:len(axes)]
    for mode in ("linear", "nearest"):
        check_node("Resize", sizes_inputs(x, sizes), opset=19, mode=mode, axes=list(axes),
                   keep_aspect_ratio_policy=policy,
                   oracle=lambda *a, m=mode: builtin(*a, mode=m, keep_aspect_ratio_policy=policy))
    check_node("Resize", scales_inputs(x, (1.5, 0.5)[:len(axes)]), opset=19, mode="nearest",
               axes=list(axes), oracle=lambda *a: builtin(*a, mode="nearest"))


@pytest.mark.parametrize("mode", ("nearest", "linear", "cubic"))
def test_tf_crop_and_resize(mode):
    x = rand((1, 2, 7, 8), np.float64)
    roi = (0, 0, 0.2, -0.3, 1, 1, 0.9, 1.4)
    attrs = dict(mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
                 extrapolation_value=-3.0)
    check_node("Resize", sizes_inputs(x, (1, 2, 5, 9), roi=roi), opset=19, tolerance=CUBIC64,
               **attrs)
    x32 = x.astype(np.float32)
    check_node("Resize", sizes_inputs(x32, (1, 2, 5, 9), roi=roi), opset=19, tolerance=F32,
               oracle=ort_oracle(19, **attrs), **attrs)


@pytest.mark.parametrize("mode", ("nearest", "linear"))
def test_opset10(mode):
    x = rand((1, 2, 5, 7))
    for scales in [(1, 1, 2, 3), (1, 1, 0.6, 0.5)]:
        check_node("Resize", [x, np.array(scales, np.float32)], opset=10, mode=mode,
                   oracle=ort_oracle(10, mode=mode), tolerance=F32)


@pytest.mark.parametrize("opset", (11, 13))
def test_opsets_11_13(opset):
    x = rand((1, 2, 5, 7))
    for mode in ("nearest", "linear", "cubic"):
        scales = (1, 1, 2, 0.6) if mode == "nearest" else (1, 1, 1.6, 0.7)
        check_node("Resize", scales_inputs(x, scales), opset=opset, mode=mode,
                   oracle=ort_oracle(opset, mode=mode), tolerance=(1e-4, 1e-4))
        check_node("Resize", sizes_inputs(x, (1, 2, 3, 11)), opset=opset, mode=mode,
                   oracle=ort_oracle(opset, mode=mode), tolerance=(1e-4, 1e-4))


@pytest.mark.parametrize("dtype", [np.float16, bfloat16, np.float64, np.uint8, np.int8,
                                   np.int32, np.int64])
@pytest.mark.parametrize("mode", ("nearest", "linear", "cubic"))
def test_types(dtype, mode):
    x = (rand((1, 3, 5, 6)) * 20).astype(dtype)
    if mode == "cubic" and np.dtype(dtype).kind in "iu":
        # the built-in's float32 cubic weights move a few sums across a
        # rounding boundary: within one unit of it
        model = node_model("Resize", scales_inputs(x, (1, 1, 2, 1.5)), opset=19, mode=mode)
        (want,) = ReferenceEvaluator(model).run(
            None, {f"x{i}": a for i, a in enumerate(scales_inputs(x, (1, 1, 2, 1.5)))})
        (got,), names, _ = run_ours(model, scales_inputs(x, (1, 1, 2, 1.5)))
        assert KERNEL in names and got.dtype == want.dtype
        assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
        return
    tolerance = (1e-5, 1e-4) if mode == "cubic" and dtype == np.float64 else None
    check_node("Resize", scales_inputs(x, (1, 1, 2, 1.5)), opset=19, mode=mode,
               coordinate_transformation_mode="align_corners", tolerance=tolerance)


def test_nearest_every_element_type():
    x = rand((2, 3, 4)) * 10
    for dtype in (np.bool_, np.uint16, np.uint32, np.uint64, np.int16, np.complex64,
                  np.complex128):
        xt = x.astype(dtype)
        expected = [xt.repeat(2, axis=1).repeat(3, axis=2)]
        check_node("Resize", scales_inputs(xt, (1, 2, 3)), opset=19, mode="nearest",
                   oracle=lambda *a, e=expected: e,
                   tolerance=(0.0, 0.0) if np.dtype(dtype).kind == "c" else None)


def test_odd_and_edge_sizes():
    for shape, sizes in [((1, 1, 1, 1), (1, 1, 3, 2)), ((1, 1, 3, 1), (1, 1, 1, 1)),
                         ((2, 3), (5, 1)), ((7,), (15,)), ((1, 1, 2, 2), (1, 1, 0, 3)),
                         ((0, 3, 2), (0, 3, 5))]:
        x = rand(shape, np.float64)
        for mode in ("nearest", "linear", "cubic"):
            check_node("Resize", sizes_inputs(x, sizes), opset=19, mode=mode, tolerance=CUBIC64)


def test_large_threads_and_levels():
    """Sizes that run on two threads: bit-identical results, every level."""
    x = rand((1, 64, 40, 40))
    for mode in ("nearest", "linear"):
        attrs = dict(mode=mode, coordinate_transformation_mode="half_pixel")
        check_node("Resize", scales_inputs(x, (1, 1, 2, 2)), oracle=ort_oracle(19, **attrs),
                   opset=19, tolerance=F32, **attrs)


def test_layouts():
    x = rand((1, 2, 4, 6))
    (expected,) = ort_outputs(node_model("Resize", scales_inputs(x, (1, 1, 2, 2)), opset=19,
                                         mode="linear"), scales_inputs(x, (1, 1, 2, 2)))
    for _name, view in layouts(x):
        check_node("Resize", scales_inputs(view, (1, 1, 2, 2)), oracle=lambda *a: [expected],
                   opset=19, mode="linear", tolerance=F32)


def test_values_change_between_runs():
    x = rand((1, 2, 5, 6))
    model = node_model("Resize", scales_inputs(x, (1, 1, 2, 2)), opset=19, mode="linear")
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    for scales in [(1, 1, 2, 2), (1, 1, 0.5, 3), (1, 1, 2, 2)]:
        inputs = scales_inputs(x, scales)
        (got,) = sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})
        (want,) = ort_outputs(model, inputs)
        np.testing.assert_allclose(got, want, rtol=F32[0], atol=F32[1])
    assert set(olc.used_kernel_names(sess)) == {KERNEL}


def _error(inputs, opset=19, **attrs):
    return error_message("Resize", inputs, opset=opset,
                         errors=(ValueError, TypeError, NotImplementedError, MemoryError), **attrs)


def test_bad_input():
    x = rand((1, 2, 3, 4))
    both = [x, EMPTY, np.ones(4, np.float32), np.array([1, 2, 3, 4], np.int64)]
    assert "exactly one" in _error(both)
    assert "exactly one" in _error([x, EMPTY, EMPTY])
    assert "values" in _error(scales_inputs(x, (1, 2)))
    assert "positive" in _error(scales_inputs(x, (1, 1, -2, 2)))
    assert "values" in _error(sizes_inputs(x, (1, 2, 3)))
    assert "negative" in _error(sizes_inputs(x, (1, 2, -3, 4)))
    assert "axes" in _error(scales_inputs(x, (2,)), axes=[4])
    assert "repeats" in _error(scales_inputs(x, (2, 2)), axes=[3, -1])
    assert "roi" in _error(scales_inputs(x, (1, 1, 2, 2)),
                           coordinate_transformation_mode="tf_crop_and_resize")
    assert "mode" in _error(scales_inputs(x, (1, 1, 2, 2)), mode="bicubic")
    assert "cubic" in _error([x, np.ones(4, np.float32)], opset=10, mode="cubic")
    assert "removed" in _error(scales_inputs(x, (1, 1, 2, 2)),
                               coordinate_transformation_mode="tf_half_pixel_for_nearest")
    assert "opset 18" in _error(scales_inputs(x, (1, 1, 2, 2)), opset=13, antialias=1)
    assert "scalar" in _error([np.float32(1.0).reshape(()), EMPTY, np.ones(0, np.float32),
                               np.ones(0, np.int64)])
    flags = scales_inputs(np.ones((1, 1, 2, 2), np.bool_), (1, 1, 2, 2))
    assert "bool" in _error(flags, mode="linear")
    words = scales_inputs(np.array([["a", "b"]], dtype=object), (1, 2))
    model = node_model("Resize", words, opset=19)
    model.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.STRING
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    with pytest.raises(TypeError, match="Resize.*string"):
        sess.run(None, {f"x{i}": a for i, a in enumerate(words)})
    huge = sizes_inputs(x, (1, 2, 1 << 40, 1 << 20))
    assert "bytes" in _error(huge) or "memory" in _error(huge).lower()
