"""Valid-case generators of Pad (tensor family) and Resize (resize family).

Pad: every mode, pads that crop (negative) or pad, axes; judged by a NumPy
oracle with ONNX Runtime's semantics (negative pads crop first; reflect
needs pads below the cropped size), since the built-in refuses negative
pads.  Resize: nearest and linear with scales or sizes, judged by the
built-in (float64, so float inputs are compared at the loose tolerance)."""

from __future__ import annotations

import numpy as np

from .cases import Case, Draw, Invalid, randn, random_shape
from .generators import _movement_dtype, _opset, generator

I64 = np.dtype(np.int64)
FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16))


def _pad(data, pads=None, constant_value=None, axes=None, attrs=None):
    attrs = attrs or {}
    mode = attrs.get("mode", "constant")
    r = np.ndim(data)
    if pads is None:
        raise Invalid("pads missing")
    pads = [int(v) for v in np.asarray(pads).reshape(-1)]
    if axes is None:
        axes = list(range(r))
    else:
        axes = [int(a) for a in np.asarray(axes).reshape(-1)]
        if any(not -r <= a < r for a in axes):
            raise Invalid("axis out of range")
        axes = [a % r for a in axes]
        if len(set(axes)) != len(axes):
            raise Invalid("repeated axis")
    if len(pads) != 2 * len(axes):
        raise Invalid("pads of the wrong length")
    begin, end = [0] * r, [0] * r
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[len(axes) + i]
    index = []
    for d, b, e in zip(data.shape, begin, end):
        lo, hi = max(0, -b), d - max(0, -e)
        if hi < lo:
            raise Invalid("pads crop more than the axis")
        index.append(slice(lo, hi))
    cropped = data[tuple(index)]
    width = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    for n, (b, e) in zip(cropped.shape, width):
        if (b or e) and mode != "constant" and n == 0:
            raise Invalid("nothing to pad from")
        if (b or e) and mode == "reflect" and (n < 2 or max(b, e) > n - 1):
            raise Invalid("reflect pads too large")
    if mode == "constant":
        value = 0 if constant_value is None or np.size(constant_value) == 0 \
            else np.asarray(constant_value).reshape(-1)[0]
        return [np.pad(cropped, width, mode="constant", constant_values=value)]
    return [np.pad(cropped, width, mode=mode)]


@generator("ai.onnx", "Pad")
def gen_pad(d: Draw, record) -> Case:
    dtype = _movement_dtype(d, record)
    if dtype.kind in "OUS":
        dtype = np.dtype(np.float32)
    shape = random_shape(d, rank=d.int(1, 4))
    r = len(shape)
    opset = _opset(d, record, (11, 13, 18, 19, 21))
    mode = d.choice(("constant", "reflect", "edge", "wrap") if opset >= 19
                    else ("constant", "reflect", "edge"))
    x = randn(d.rng(), shape, dtype)
    axes = None
    if opset >= 18 and d.chance(0.4):
        axes = list(dict.fromkeys(d.int(-r, r - 1) for _ in range(d.int(1, r))))
    n = r if axes is None else len(axes)
    pads = [d.choice([0, 0, 1, 2, 3, -1]) for _ in range(2 * n)]
    inputs = [x, np.array(pads, I64)]
    if mode == "constant" and d.chance(0.6):
        inputs.append(np.array(d.choice([0, 1, 7])).astype(dtype))
    if axes is not None:
        if len(inputs) == 2:
            inputs.append(None)
        inputs.append(np.array(axes, I64))
    return Case("Pad", "", opset, inputs, {"mode": mode}, family="tensor", tolerance="exact",
                structural=frozenset({1, 3}), oracle="numpy", numpy_oracle=_pad)


@generator("ai.onnx", "Resize")
def gen_resize(d: Draw, record) -> Case:
    dtype = d.choice(FLOAT_TYPES)
    shape = tuple(max(s, 1) for s in random_shape(d, rank=d.int(3, 4), large=0.02))
    x = randn(d.rng(), shape, dtype)
    mode = d.choice(("nearest", "linear"))
    coordinate = d.choice(("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"))
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinate}
    if mode == "nearest":
        attrs["nearest_mode"] = d.choice(("round_prefer_floor", "floor", "ceil"))
    roi = np.zeros(0, np.float32)
    resized = (1,) * (len(shape) - 2)
    if d.chance(0.5):
        scales = [1.0, 1.0] + [d.choice([0.5, 1.0, 2.0, 3.0]) for _ in resized]
        inputs = [x, roi, np.array(scales, np.float32)]
    else:
        sizes = list(shape[:2]) + [max(1, s * d.choice([1, 2]) // d.choice([1, 2]))
                                   for s in shape[2:]]
        inputs = [x, roi, np.zeros(0, np.float32), np.array(sizes, I64)]
    return Case("Resize", "", _opset(d, record, (13, 18, 19)), inputs, attrs, family="resize",
                tolerance="loose", structural=frozenset({1, 2, 3}), oracle="builtin")
