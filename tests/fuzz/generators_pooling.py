"""Valid-case generators of the pooling family (ops/pooling.py), judged by a
float64 NumPy oracle of the specification with ONNX Runtime's geometry
(the built-ins drop no ceil_mode window, index MaxPool's 1x1 kernels per
plane and normalise only some LRN channels).

The oracle raises a plain ValueError (the kernel may refuse too) for
geometry a mutation breaks: attribute lengths, strides below 1, pads
negative or not below the dilated kernel, a kernel larger than the padded
input."""

from __future__ import annotations

import itertools
import math

import numpy as np

from .cases import Case, Draw, randn, random_shape
from .generators import _opset, _record_dtypes, _values, generator

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
I8, U8 = np.dtype(np.int8), np.dtype(np.uint8)
FLOATS = (F32, np.dtype(np.float16), F64)
AUTO = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _list(attrs, name, n, default):
    v = attrs.get(name)
    if v is None or (isinstance(v, list) and not v):
        return [default] * n
    if not isinstance(v, list) or len(v) != n or not all(isinstance(e, int) for e in v):
        raise ValueError(f"{name} {v!r}")
    return v


def geometry(shape, attrs):
    """(output sizes, pads begin, pads end, kernel, strides, dilations)."""
    n = len(shape) - 2
    if n < 1 or n > 3:
        raise ValueError("rank")
    kernel = _list(attrs, "kernel_shape", n, None)
    strides = _list(attrs, "strides", n, 1)
    dilations = _list(attrs, "dilations", n, 1)
    pads = _list(attrs, "pads", 2 * n, 0)
    auto = attrs.get("auto_pad", "NOTSET")
    ceil = attrs.get("ceil_mode", 0)
    if auto not in AUTO or ceil not in (0, 1) or min(kernel + strides + dilations) < 1 \
            or min(pads) < 0:
        raise ValueError("attributes")
    out, pb, pe = [], [], []
    for i in range(n):
        size, k, s, d = shape[2 + i], kernel[i], strides[i], dilations[i]
        extent = d * (k - 1) + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            need = max(0, ((size + s - 1) // s - 1) * s + k - size)
            b = (need + 1) // 2 if auto == "SAME_LOWER" else need // 2
            e = need - b
        elif auto == "VALID":
            b = e = 0
        else:
            b, e = pads[i], pads[n + i]
            if b >= extent or e >= extent:
                raise ValueError("pads")
        span = size + b + e - extent
        if span < 0:
            raise ValueError("kernel larger than the padded input")
        if ceil and auto == "NOTSET":
            o = -(-span // s) + 1
            if (o - 1) * s >= size + b:
                o -= 1
        else:
            o = span // s + 1
        out.append(o)
        pb.append(b)
        pe.append(e)
    return out, pb, pe, kernel, strides, dilations


def pool_oracle(mode):
    """NumPy oracle of MaxPool ("max", Y and Indices), AveragePool, LpPool."""
    def oracle(x, *, attrs):
        if x.ndim < 3 or x.ndim > 5:
            raise ValueError("rank")
        out, pb, pe, kernel, strides, dilations = geometry(x.shape, attrs)
        n = x.ndim - 2
        spatial = x.shape[2:]
        xd = x.astype(np.float64)
        N, C = x.shape[:2]
        y = np.zeros((N, C, *out))
        idx = np.zeros((N, C, *out), np.int64)
        order = attrs.get("storage_order", 0)
        if order not in (0, 1):
            raise ValueError("storage_order")
        mult = [math.prod(spatial[:i]) if order else math.prod(spatial[i + 1:]) for i in range(n)]
        base = (np.arange(N * C, dtype=np.int64) * math.prod(spatial)).reshape(N, C)
        cip = attrs.get("count_include_pad", 0)
        p = attrs.get("p", 2)
        for o in itertools.product(*[range(v) for v in out]):
            taps, counted = [], 1
            for i in range(n):
                pos = [o[i] * strides[i] - pb[i] + k * dilations[i] for k in range(kernel[i])]
                taps.append([q for q in pos if 0 <= q < spatial[i]])
                lo, hi = (-pb[i], spatial[i] + pe[i]) if cip else (0, spatial[i])
                counted *= sum(lo <= q < hi for q in pos)
            at = (slice(None), slice(None)) + o
            vals = [(xd[(slice(None), slice(None)) + t], sum(a * m for a, m in zip(t, mult)))
                    for t in itertools.product(*taps)]
            if mode == "max":
                best = np.full((N, C), -np.inf)
                where = np.zeros((N, C), np.int64)
                for j, (v, flat) in enumerate(vals):
                    better = (v > best) | (j == 0)
                    best = np.where(better, v, best)
                    where = np.where(better, flat, where)
                y[at] = best
                idx[at] = base + where
            elif mode == "avg":
                y[at] = sum(v for v, _ in vals) / counted
            else:
                y[at] = sum(np.abs(v) ** p for v, _ in vals) ** (1.0 / p)
        y = y.astype(x.dtype) if x.dtype.kind in "iu" else y
        return [y, idx] if mode == "max" else [y]
    return oracle


def _pool_case(d: Draw, record, op: str, mode: str) -> Case:
    types = _record_dtypes(record, FLOATS + ((I8, U8) if op == "MaxPool" else ()))
    dtype = d.choice(types)
    rng = d.rng()
    n = d.int(1, 3)
    sizes = (1, 2, 3, 5, 7, 8, 16, 17) if n < 3 else (1, 2, 3, 5)
    shape = (d.choice((0, 1, 2, 3)), d.choice((1, 2, 3, 5))) + \
        random_shape(d, rank=n, sizes=sizes, large=0.0)
    kernel = [d.int(1, min(3, s)) for s in shape[2:]]
    attrs = {"kernel_shape": kernel}
    if d.chance(0.6):
        attrs["strides"] = [d.int(1, 3) for _ in range(n)]
    opset = _opset(d, record, {"MaxPool": (8, 10, 11, 12, 22), "AveragePool": (11, 19, 22),
                               "LpPool": (11, 18, 22)}[op])
    if opset >= 10 and (op != "LpPool" or opset >= 18) and d.chance(0.4) \
            and (op != "AveragePool" or opset >= 19):
        attrs["dilations"] = [d.int(1, 2) for _ in range(n)]
    if d.chance(0.25):
        attrs["auto_pad"] = d.choice(AUTO[1:])
    else:
        if d.chance(0.6):
            attrs["pads"] = [d.int(0, k - 1) for k in kernel + kernel]
        if opset >= 10 and d.chance(0.4) and (op != "LpPool" or opset >= 18):
            attrs["ceil_mode"] = 1
    if op == "AveragePool" and d.chance(0.5):
        attrs["count_include_pad"] = 1
    n_out = 1
    if op == "MaxPool" and d.chance(0.5):
        n_out = 2
        if d.chance(0.4) and n < 3:
            attrs["storage_order"] = 1
    x = _values(d, rng, shape, dtype, 1.0, specials=0.05) if dtype.kind == "f" \
        else randn(rng, shape, dtype)
    return Case(op, "", opset, [x], attrs, n_outputs=n_out, family="pool",
                oracle="numpy", numpy_oracle=pool_oracle(mode),
                tolerance="exact" if mode == "max" else "accumulate")


@generator("ai.onnx", "MaxPool")
def gen_maxpool(d: Draw, record) -> Case:
    return _pool_case(d, record, "MaxPool", "max")


@generator("ai.onnx", "AveragePool")
def gen_averagepool(d: Draw, record) -> Case:
    return _pool_case(d, record, "AveragePool", "avg")


@generator("ai.onnx", "LpPool")
def gen_lppool(d: Draw, record) -> Case:
    return _pool_case(d, record, "LpPool", "lp")


def _global_oracle(op):
    def oracle(x, *, attrs):
        if x.ndim < 2:
            raise ValueError("rank")
        axes = tuple(range(2, x.ndim))
        xd = x.astype(np.float64)
        if op == "GlobalAveragePool":
            y = xd.mean(axis=axes, keepdims=True)
        elif op == "GlobalMaxPool":
            # the first element seeds the max: a NaN there stays, later ones never win
            flat = xd.reshape(xd.shape[:2] + (-1,))
            first = flat[:, :, :1]
            rest = np.where(np.isnan(flat), -np.inf, flat).max(axis=2, keepdims=True)
            y = np.where(np.isnan(first), np.nan, np.maximum(first, rest))
            y = y.reshape(xd.shape[:2] + (1,) * len(axes))
        else:
            p = attrs.get("p", 2)
            y = (np.abs(xd) ** p).sum(axis=axes, keepdims=True) ** (1.0 / p)
        return [y]
    return oracle


@generator("ai.onnx", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def gen_global_pool(d: Draw, record) -> Case:
    op = record.op_type
    dtype = d.choice(_record_dtypes(record, FLOATS))
    rng = d.rng()
    shape = (d.choice((1, 2, 3)), d.choice((1, 2, 5, 16))) + \
        random_shape(d, rank=d.int(1, 3), sizes=(1, 2, 3, 5, 7, 17))
    x = _values(d, rng, shape, dtype, 1.0, specials=0.05)
    return Case(op, "", _opset(d, record, (2, 22)), [x], family="pool", oracle="numpy",
                numpy_oracle=_global_oracle(op),
                tolerance="exact" if op == "GlobalMaxPool" else "accumulate")


def _lrn_oracle(x, *, attrs):
    size = attrs.get("size")
    if not isinstance(size, int) or size < 1 or x.ndim < 2:
        raise ValueError("size")
    alpha, beta, bias = (float(np.float32(attrs.get(k, v)))
                         for k, v in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    xd = x.astype(np.float64)
    C = x.shape[1]
    sq = np.zeros_like(xd)
    for c in range(C):
        lo, hi = max(0, c - (size - 1) // 2), min(C - 1, c + size // 2)
        sq[:, c] = (xd[:, lo:hi + 1] ** 2).sum(axis=1)
    return [xd / (bias + alpha / size * sq) ** beta]


@generator("ai.onnx", "LRN")
def gen_lrn(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record, FLOATS))
    rng = d.rng()
    shape = (d.choice((0, 1, 2)), d.choice((1, 2, 3, 5, 8))) + \
        random_shape(d, rank=d.int(1, 2), sizes=(1, 2, 3, 5, 17))
    x = _values(d, rng, shape, dtype, 1.0, specials=0.0)
    attrs = {"size": d.choice([1, 2, 3, 5])}
    if d.chance(0.5):
        attrs.update(alpha=d.choice([1e-4, 0.01]), beta=d.choice([0.5, 0.75]),
                     bias=d.choice([1.0, 2.0]))
    return Case("LRN", "", _opset(d, record, (13,)), [x], attrs, family="pool",
                oracle="numpy", numpy_oracle=_lrn_oracle, tolerance="accumulate")


def _unpool_oracle(x, i, *shape, attrs):
    n = x.ndim - 2
    kernel = _list(attrs, "kernel_shape", n, None)
    strides = _list(attrs, "strides", n, 1)
    pads = _list(attrs, "pads", 2 * n, 0)
    if i.shape != x.shape:
        raise ValueError("indices")
    inferred = x.shape[:2] + tuple((x.shape[2 + j] - 1) * strides[j] + kernel[j] - pads[j]
                                   - pads[n + j] for j in range(n))
    y = np.zeros(inferred, x.dtype)
    y.reshape(-1)[i.reshape(-1)] = x.reshape(-1)
    if shape and shape[0] is not None:
        out = np.zeros(tuple(int(v) for v in shape[0]), x.dtype)
        out[tuple(slice(0, s) for s in inferred)] = y
        y = out
    return [y]


@generator("ai.onnx", "MaxUnpool")
def gen_maxunpool(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record, FLOATS))
    rng = d.rng()
    n = d.int(1, 2)
    k = d.int(1, 3)
    shape = (d.choice((1, 2)), d.choice((1, 3))) + tuple(d.int(1, 4) for _ in range(n))
    x = randn(rng, shape, dtype)
    out = shape[:2] + tuple((s - 1) * k + k for s in shape[2:])
    # each value to a distinct cell of its own window (as MaxPool gives)
    planes = shape[0] * shape[1]
    cells = []
    for pos in itertools.product(*[range(s) for s in shape[2:]]):
        off = [p * k + d.int(0, k - 1) for p in pos]
        cells.append(sum(o * math.prod(out[3 + j:]) for j, o in enumerate(off)))
    plane = math.prod(out[2:])
    idx = (np.arange(planes)[:, None] * plane + np.array(cells)[None, :]).reshape(shape)
    inputs = [x, idx.astype(np.int64)]
    if d.chance(0.4):
        inputs.append(np.array(out[:2] + tuple(s + d.int(0, 2) for s in out[2:]), np.int64))
    return Case("MaxUnpool", "", _opset(d, record, (11, 22)), inputs,
                {"kernel_shape": [k] * n, "strides": [k] * n}, family="pool", oracle="numpy",
                numpy_oracle=_unpool_oracle, tolerance="exact", structural=frozenset({1, 2}))


def _roi_oracle(x, rois, *, attrs):
    ph, pw = attrs["pooled_shape"]
    scale = np.float32(attrs.get("spatial_scale", 1.0))
    N, C, H, W = x.shape
    y = np.zeros((rois.shape[0], C, ph, pw))
    for r, roi in enumerate(rois.astype(np.float32)):
        b = int(roi[0])
        ws, hs, we, he = (int(np.round(np.float32(v) * scale)) for v in roi[1:])
        rh, rw = max(he - hs + 1, 1), max(we - ws + 1, 1)
        bh, bw = np.float32(rh) / np.float32(ph), np.float32(rw) / np.float32(pw)
        for i in range(ph):
            h0 = min(max(int(np.floor(np.float32(i) * bh)) + hs, 0), H)
            h1 = min(max(int(np.ceil(np.float32(i + 1) * bh)) + hs, 0), H)
            for j in range(pw):
                w0 = min(max(int(np.floor(np.float32(j) * bw)) + ws, 0), W)
                w1 = min(max(int(np.ceil(np.float32(j + 1) * bw)) + ws, 0), W)
                if h1 > h0 and w1 > w0:
                    y[r, :, i, j] = x[b, :, h0:h1, w0:w1].astype(np.float64).max(axis=(1, 2))
    return [y]


@generator("ai.onnx", "MaxRoiPool")
def gen_maxroipool(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record, (F32, F64)))
    rng = d.rng()
    N, C, H, W = d.int(1, 2), d.int(1, 3), d.int(1, 9), d.int(1, 9)
    x = randn(rng, (N, C, H, W), dtype)
    R = d.int(0, 3)
    rois = np.zeros((R, 5), dtype)
    for r in range(R):
        x1, y1 = d.int(0, W - 1), d.int(0, H - 1)
        # integer corners: no rounding tie between float32 and the oracle
        rois[r] = [d.int(0, N - 1), x1, y1, d.int(x1, W - 1), d.int(y1, H - 1)]
    attrs = {"pooled_shape": [d.int(1, 3), d.int(1, 3)], "spatial_scale": 1.0}
    return Case("MaxRoiPool", "", _opset(d, record, (1, 22)), [x, rois], attrs, family="pool",
                oracle="numpy", numpy_oracle=_roi_oracle, tolerance="exact",
                structural=frozenset({1}))
