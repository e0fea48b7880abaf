"""A valid-case generator for every registered operator.

``GENERATORS[(domain, op_type)](d, record)`` returns a :class:`Case` whose
inputs the operator's specification accepts; mutations then break them.
``domain`` is the inventory's ("ai.onnx", "com.microsoft", "ai.onnx.ml").
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from .cases import (
    BOOL,
    FLOATS,
    INTEGERS,
    SAFE_SPECIALS,
    UNSIGNED,
    Case,
    Draw,
    Invalid,
    broadcast_operand,
    elem_type,
    randn,
    random_shape,
    sprinkle_specials,
)
from .cases import SPECIALS as SPECIALS_ALL

GENERATORS: dict = {}

F32, F16, F64, BF16 = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64),
                       np.dtype(bfloat16))
I32, I64, U8, I8 = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint8), np.dtype(np.int8)
NUMERIC = FLOATS + INTEGERS
STRING = np.dtype(object)
ANY = NUMERIC + (BOOL, np.dtype(np.complex64), np.dtype(np.complex128), STRING)


def generator(domain, *ops):
    def register(fn):
        for op in ops:
            GENERATORS[(domain, op)] = fn
        return fn
    return register


def _opset(d: Draw, record, choices=(13, 18, 21, 25)) -> int:
    ok = [o for o in choices if record.accepts_opset(o)]
    return d.choice(ok) if ok else record.since_version


def _record_dtypes(record, among=ANY) -> tuple:
    names = set(record.element_types)
    out = []
    for dt in among:
        name = "string" if dt == STRING else ("float" if dt == F32 else dt.name)
        if f"tensor({name})" in names:
            out.append(dt)
    return tuple(out)


def _values(d: Draw, rng, shape, dtype, scale=1.0, specials=0.15):
    """Random values; with probability ``specials`` some NaN, infinities,
    zeros (only the elementwise families, scale != 1, get huge finite ones)."""
    x = randn(rng, shape, dtype, scale)
    if dtype in FLOATS and d.chance(specials):
        x = sprinkle_specials(rng, x, values=SPECIALS_ALL if scale != 1.0 else SAFE_SPECIALS)
    return x


# ------------------------------------------------------------------ unary

@generator("ai.onnx", "Abs", "Exp", "Log", "Sigmoid", "Tanh", "Not")
def gen_unary(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    rng = d.rng()
    x = _values(d, rng, random_shape(d), dtype, scale=3.0, specials=0.3)
    if record.op_type == "Log" and dtype in FLOATS and d.chance(0.8):
        x = np.abs(x)
    return Case(record.op_type, "", _opset(d, record), [x], family="unary",
                tolerance="elementwise", widen=True)


@generator("ai.onnx", "Neg", "Reciprocal")
def gen_neg_reciprocal(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    x = _values(d, d.rng(), random_shape(d), dtype, scale=3.0, specials=0.3)
    return Case(record.op_type, "", _opset(d, record), [x], family="unary",
                tolerance="exact" if record.op_type == "Neg" else "elementwise")


@generator("ai.onnx", "Clip")
def gen_clip(d: Draw, record) -> Case:
    rng = d.rng()
    opset = _opset(d, record, (6, 11, 13, 21))
    dtypes = _record_dtypes(record)
    if opset < 13:
        dtypes = tuple(t for t in dtypes if t in (F16, F32, F64) or opset == 12 and t != BF16)
    dtype = d.choice(dtypes)
    x = _values(d, rng, random_shape(d), dtype, scale=3.0, specials=0.3)
    lo, hi = sorted(randn(rng, (2,), dtype).tolist()) if d.chance(0.9) else \
        randn(rng, (2,), dtype).tolist()
    if opset < 11:
        attrs = {k: float(v) for k, v in (("min", lo), ("max", hi)) if d.chance(0.7)}
        return Case("Clip", "", opset, [x], attrs, family="unary", tolerance="exact")
    bounds = [np.array(lo, dtype) if d.chance(0.8) else None,
              np.array(hi, dtype) if d.chance(0.8) else None]
    while bounds and bounds[-1] is None:
        bounds.pop()
    return Case("Clip", "", opset, [x, *bounds], family="unary", tolerance="exact")


# Activations: attribute -> (low, high) of the value drawn when it is set.
_ACT_ATTRS = {"LeakyRelu": {"alpha": (-1.0, 1.0)},
              "HardSigmoid": {"alpha": (-1.0, 1.0), "beta": (-1.0, 1.0)},
              "Elu": {"alpha": (0.1, 3.0)}, "Selu": {"alpha": (0.1, 3.0), "gamma": (0.1, 3.0)},
              "Celu": {"alpha": (0.2, 3.0)}, "ThresholdedRelu": {"alpha": (-2.0, 2.0)}}
_ACT_OPSETS = {"Celu": (12, 13, 21), "Mish": (18, 21, 22), "HardSwish": (14, 21, 22),
               "Relu": (13, 14, 21), "LeakyRelu": (13, 16, 21)}


@generator("ai.onnx", "Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Celu",
           "Mish", "Sign", "Erf", "Softplus", "Softsign", "ThresholdedRelu", "Sqrt")
def gen_activation(d: Draw, record) -> Case:
    op = record.op_type
    opset = _opset(d, record, _ACT_OPSETS.get(op, (13, 21, 22)))
    dtypes = _record_dtypes(record)
    if op == "Relu" and opset < 14:  # integers from Relu-14
        dtypes = tuple(t for t in dtypes if t in FLOATS)
    dtype = d.choice(dtypes)
    x = _values(d, d.rng(), random_shape(d), dtype, scale=3.0, specials=0.3)
    if op == "Sqrt" and dtype in FLOATS and d.chance(0.8):
        x = np.abs(x)
    attrs = {k: float(np.float32(d.rng().uniform(lo, hi)))
             for k, (lo, hi) in _ACT_ATTRS.get(op, {}).items() if d.chance(0.7)}
    exact = op in ("Relu", "Sign", "ThresholdedRelu") or dtype not in FLOATS
    # alpha x + beta cancels: an absolute error of an ulp of beta
    tolerance = "exact" if exact else "accumulate" if op in ("HardSigmoid", "HardSwish") \
        else "elementwise"
    if op == "Erf":  # the built-in's Erf computes in float32, double too
        return Case(op, "", opset, [x], attrs, family="unary", tolerance=tolerance,
                    oracle="numpy", numpy_oracle=_erf)
    return Case(op, "", opset, [x], attrs, family="unary", tolerance=tolerance, widen=not exact)


def _erf(x, attrs):
    x = np.asarray(x)
    if x.dtype not in FLOATS:
        raise TypeError(f"Erf of {x.dtype}")
    y = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)) if x.size else x
    return [np.asarray(y).astype(x.dtype)]


@generator("ai.onnx", "Gelu")
def gen_gelu(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    x = _values(d, d.rng(), random_shape(d), dtype, scale=3.0, specials=0.3)
    attrs = {"approximate": d.choice(["none", "tanh"])} if d.chance(0.8) else {}
    # the built-in's float64 Gelu rounds its constants to float32: float64 NumPy
    return Case("Gelu", "", _opset(d, record, (20, 21, 25)), [x], attrs, family="unary",
                tolerance="accumulate", oracle="numpy", numpy_oracle=_gelu)


def _gelu(x, attrs):
    x = np.asarray(x)
    w = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if attrs.get("approximate", "none") == "tanh":
            y = 0.5 * w * (1 + np.tanh(math.sqrt(2 / math.pi) * (w + 0.044715 * w**3)))
        else:
            y = w * 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(w / math.sqrt(2)))
    return [y.astype(x.dtype)]


# ------------------------------------------------------------------ binary

BINARY_FLOAT_ONLY_FMOD = ("Mod",)


@generator("ai.onnx", "Add", "Sub", "Mul", "Div", "Mod", "Pow", "Equal", "Greater",
           "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor", "BitwiseAnd",
           "BitwiseOr", "BitwiseXor", "BitShift", "PRelu")
def gen_binary(d: Draw, record) -> Case:
    op = record.op_type
    dtypes = _record_dtypes(record)
    if op == "BitShift":
        dtypes = UNSIGNED
    if op == "Equal":
        dtypes = tuple(t for t in dtypes if t != STRING) + ((STRING,) if d.chance(0.1) else ())
    dtype = d.choice(dtypes)
    rng = d.rng()
    out = random_shape(d)
    if op == "PRelu":
        sa, sb = out, broadcast_operand(d, out)
    else:
        sa = broadcast_operand(d, out) if d.chance(0.5) else out
        sb = broadcast_operand(d, out) if d.chance(0.5) else out
        if d.chance(0.5):
            sa, sb = sb, sa
    a = _values(d, rng, sa, dtype, 3.0)
    b = _values(d, rng, sb, dtype, 3.0)
    attrs = {}
    if op in ("Div", "Mod") and dtype in INTEGERS:
        b = np.where(b == 0, np.ones_like(b), b)
    if op == "Mod":
        attrs["fmod"] = 1 if dtype in FLOATS else d.choice([0, 1])
        if dtype in FLOATS:
            b = np.where(b == 0, np.ones_like(b), b)
    if op == "Pow":
        if dtype in INTEGERS:
            a = (np.asarray(a) % 7).astype(dtype)
            b = (np.abs(np.asarray(b)) % 4).astype(dtype)
        elif d.chance(0.7):
            a = np.abs(a)
    if op == "BitShift":
        bits = dtype.itemsize * 8
        b = (np.abs(b.astype(np.int64)) % bits).astype(dtype)
        a = rng.integers(0, 1 << min(bits, 62), size=sa, dtype=np.uint64).astype(dtype)
        attrs["direction"] = d.choice(["LEFT", "RIGHT"])
    kind = "exact" if dtype not in FLOATS or op in ("Equal", "Greater", "GreaterOrEqual", "Less",
                                                     "LessOrEqual") else "elementwise"
    return Case(op, "", _opset(d, record), [a, b], attrs, family="binary", tolerance=kind,
                widen=op != "Pow")


@generator("ai.onnx", "Sum", "Mean", "Min", "Max")
def gen_variadic(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    rng = d.rng()
    out = random_shape(d)
    n = d.int(1, 4)
    inputs = [_values(d, rng, broadcast_operand(d, out) if d.chance(0.5) else out, dtype, 3.0)
              for _ in range(n)]
    # Oracle bug: onnx.reference's Sum/Mean/Min/Max accumulate into the first
    # input's shape (they fail when a later input broadcasts it larger): the
    # NumPy formula, in float64 for the float types.
    return Case(record.op_type, "", _opset(d, record), inputs, family="variadic",
                tolerance="elementwise" if record.op_type in ("Min", "Max") else "accumulate",
                widen=True, oracle="numpy",
                numpy_oracle=lambda *xs, attrs: [_variadic(record.op_type, xs)])


def _variadic(op, xs):
    if not xs or any(x is None for x in xs):
        raise Invalid(f"{op}: every input of the variadic list is required")
    dtype = xs[0].dtype
    wide = [np.asarray(x, np.float64) if dtype in FLOATS else np.asarray(x) for x in xs]
    wide = np.broadcast_arrays(*wide)
    if op in ("Sum", "Mean"):
        out = np.sum(wide, axis=0)
        if op == "Mean":
            out = out / len(xs)
    else:
        out = (np.minimum if op == "Min" else np.maximum).reduce(wide, axis=0)
    return np.asarray(out).astype(dtype)


# ------------------------------------------------------------------ reduce

@generator("ai.onnx", "ReduceSum")
def gen_reduce_sum(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    rng = d.rng()
    shape = random_shape(d, max_rank=4)
    x = _values(d, rng, shape, dtype, 1.0, specials=0.05)
    r = len(shape)
    axes = sorted({d.int(-r, r - 1) % r for _ in range(d.int(0, r))}) if r else []
    axes = [a - r if d.chance(0.3) else a for a in axes]
    keepdims = d.choice([0, 1])
    opset = _opset(d, record, (11, 13, 18, 21))
    attrs = {"keepdims": keepdims}
    inputs = [x]
    if opset < 13:
        if axes:
            attrs["axes"] = axes
    else:
        if axes or d.chance(0.3):
            inputs.append(np.array(axes, np.int64))
        if d.chance(0.3):
            attrs["noop_with_empty_axes"] = 1
    return Case("ReduceSum", "", opset, inputs, attrs, family="reduce",
                tolerance="accumulate" if dtype in FLOATS else "exact", widen=True,
                structural=frozenset({1}))


@generator("ai.onnx", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp")
def gen_reduce_other(d: Draw, record) -> Case:
    op = record.op_type
    dtypes = _record_dtypes(record)
    if op == "ReduceSumSquare":  # the built-in widens 32-bit integers' sums of squares
        dtypes = tuple(t for t in dtypes if t.itemsize != 4 or t in FLOATS)
    dtype = d.choice(dtypes)
    rng = d.rng()
    shape = random_shape(d, max_rank=4)
    if dtype in FLOATS:
        scale = 0.5 if op == "ReduceProd" else 1.0
        x = _values(d, rng, shape, dtype, 1.0, specials=0.05) * dtype.type(scale)
        if op == "ReduceProd":  # products near 1, not underflowing to 0
            x = (x + dtype.type(1)).astype(dtype)
    elif dtype == BOOL:
        x = rng.integers(0, 2, size=shape).astype(bool)
    else:
        x = rng.integers(0, 4, size=shape).astype(dtype)
    r = len(shape)
    axes = sorted({d.int(-r, r - 1) % r for _ in range(d.int(0, r))}) if r else []
    axes = [a - r if d.chance(0.3) else a for a in axes]
    keepdims = d.choice([0, 1])
    choices = (20, 21) if dtype == BOOL else (11, 13, 18, 21)
    opset = _opset(d, record, choices)
    attrs = {"keepdims": keepdims}
    inputs = [x]
    if opset < 18:
        if axes:
            attrs["axes"] = axes
    else:
        if axes or d.chance(0.3):
            inputs.append(np.array(axes, np.int64))
        if d.chance(0.3):
            attrs["noop_with_empty_axes"] = 1
    exact = dtype not in FLOATS or op in ("ReduceMax", "ReduceMin")
    return Case(op, "", opset, inputs, attrs, family="reduce",
                tolerance="exact" if exact else "accumulate", widen=not exact,
                structural=frozenset({1}))


@generator("ai.onnx", "Softmax")
def gen_softmax(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4))
    x = _values(d, rng, shape, dtype, 3.0, specials=0.1)
    r = len(shape)
    attrs = {}
    if d.chance(0.8):
        attrs["axis"] = d.int(-r, r - 1)
    opset = _opset(d, record, (11, 13, 21))
    # bfloat16: the ONNX backend cases (rtol 1e-3) expect onnx.reference's
    # bfloat16 steps, its sum rounded after every addition (20-30% off on
    # rows of thousands); the kernel reproduces them, so the oracle is the
    # built-in in bfloat16, not widened (tests/fuzz/FINDINGS.md, F10).
    narrow = np.dtype(dtype) == np.dtype(bfloat16)
    case = Case("Softmax", "", opset, [x], attrs, family="reduce", tolerance="accumulate",
                widen=not narrow)
    if opset < 13:
        # Oracle bug: onnx.reference's Softmax before opset 13 does not
        # coerce the input to 2-D at the axis: the formula in float64, or
        # the built-in's last-axis softmax of the 2-D view for bfloat16.
        case.oracle = "numpy"
        case.numpy_oracle = _softmax_2d_builtin if narrow else _softmax_2d
    return case


def _softmax_2d_builtin(x, attrs):
    """Softmax-1/11 of a bfloat16 input: the built-in's opset-13 softmax of
    the 2-D view, in bfloat16."""
    _softmax_2d(np.zeros(x.shape, np.float32), attrs)  # the same Invalid checks
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    flat = x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))
    if flat.size == 0:
        return [x]
    node = onnx.helper.make_node("Softmax", ["x"], ["y"], axis=-1)
    graph = onnx.helper.make_graph(
        [node], "softmax", [onnx.helper.make_tensor_value_info("x", TensorProto.BFLOAT16, None)],
        [onnx.helper.make_tensor_value_info("y", TensorProto.BFLOAT16, None)])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    (y,) = ReferenceEvaluator(model).run(None, {"x": np.ascontiguousarray(flat)})
    return [y.reshape(x.shape)]


def _softmax_2d(x, attrs):
    x = np.asarray(x, np.float64)
    axis = attrs.get("axis", 1)
    if x.ndim == 0:
        raise Invalid("Softmax-1/11 coerces its input to 2-D: a 0-d input has no axis")
    axis = axis + x.ndim if axis < 0 else axis
    if not 0 <= axis < x.ndim:
        raise Invalid(f"axis {attrs.get('axis', 1)} out of range for rank {x.ndim}")
    rows = int(np.prod(x.shape[:axis]))
    flat = x.reshape(rows, int(np.prod(x.shape[axis:])))
    e = np.exp(flat - flat.max(axis=1, keepdims=True)) if flat.size else flat
    return [(e / e.sum(axis=1, keepdims=True)).reshape(x.shape) if flat.size else x]


# ------------------------------------------------------------------ cast

CAST_PLAIN = (F32, F16, F64, BF16, BOOL) + INTEGERS
CAST_EXOTIC = tuple(np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                          ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz,
                                          ml_dtypes.int4, ml_dtypes.uint4))


@generator("ai.onnx", "Cast")
def gen_cast(d: Draw, record) -> Case:
    src = d.choice(CAST_PLAIN + (CAST_EXOTIC if d.chance(0.15) else ()))
    dst = d.choice(CAST_PLAIN + (CAST_EXOTIC if d.chance(0.2) else ()))
    rng = d.rng()
    shape = random_shape(d)
    to_int = dst.kind in "iub" or dst in CAST_EXOTIC[4:]
    if src in FLOATS and to_int:
        # float -> integer is undefined for NaN and out-of-range values
        info = (-8, 7) if dst in CAST_EXOTIC[4:] else (0, 200) if dst.kind == "u" else (-100, 100)
        x = rng.uniform(info[0], info[1], shape).astype(src)
    elif src in CAST_EXOTIC:
        x = rng.uniform(-6, 6, shape).astype(np.float32).astype(src)
        if src in CAST_EXOTIC[4:]:
            x = rng.integers(0 if src.name == "uint4" else -8, 8, shape).astype(src)
    else:
        x = _values(d, rng, shape, src, 3.0, specials=0.0 if dst.kind in "iu" else 0.3)
    if dst.kind in "iu" and src.kind in "iu":
        info = np.iinfo(dst)
        lo, hi = max(int(info.min), -100), min(int(info.max), 100)
        x = np.clip(x.astype(np.int64), lo, hi).astype(src)
    attrs = {"to": elem_type(dst)}
    opset = 21 if (src in CAST_EXOTIC or dst in CAST_EXOTIC) else _opset(d, record, (13, 19, 21))
    if opset >= 19 and dst in CAST_EXOTIC[:4] and d.chance(0.5):
        attrs["saturate"] = d.choice([0, 1])
    return Case("Cast", "", opset, [x], attrs, family="cast", tolerance="exact")


# ------------------------------------------------------------------ tensor ops

def _movement_dtype(d: Draw, record):
    return d.choice(_record_dtypes(record, NUMERIC + (BOOL, np.dtype(np.complex64),
                                                      np.dtype(np.complex128), STRING)))


@generator("ai.onnx", "Concat")
def gen_concat(d: Draw, record) -> Case:
    dtype = _movement_dtype(d, record)
    rng = d.rng()
    base = random_shape(d, rank=d.int(1, 4))
    r = len(base)
    axis = d.int(-r, r - 1)
    inputs = []
    for _ in range(d.int(1, 4)):
        shape = list(base)
        shape[axis] = d.choice([0, 1, 2, 3, 5])
        inputs.append(randn(rng, tuple(shape), dtype))
    return Case("Concat", "", _opset(d, record, (11, 13, 21)), inputs, {"axis": axis},
                family="tensor", tolerance="exact")


@generator("ai.onnx", "Gather")
def gen_gather(d: Draw, record) -> Case:
    dtype = _movement_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4))
    r = len(shape)
    axis = d.int(-r, r - 1)
    n = shape[axis]
    ishape = random_shape(d, max_rank=3, sizes=(0, 1, 2, 3, 5)) if n else (0,)
    idx = rng.integers(-n, max(n, 1), size=ishape) if n else np.zeros(ishape, np.int64)
    idx = idx.astype(d.choice([I32, I64]))
    return Case("Gather", "", _opset(d, record, (11, 13, 21)), [randn(rng, shape, dtype), idx],
                {"axis": axis}, family="tensor", tolerance="exact", structural=frozenset({1}))


@generator("ai.onnx", "NonZero")
def gen_nonzero(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record, NUMERIC + (BOOL,)))
    rng = d.rng()
    shape = random_shape(d)
    x = randn(rng, shape, dtype)
    x = np.where(rng.random(shape) < 0.5, np.zeros_like(x), x)
    # A 0-d input: ONNX Runtime (and numpy.nonzero) give shape (1, n),
    # onnx.reference (0, n); the harness follows ONNX Runtime.
    return Case("NonZero", "", _opset(d, record, (13, 21)), [x], family="tensor",
                tolerance="exact", oracle="numpy", numpy_oracle=_nonzero)


def _nonzero(x, attrs):
    x = np.asarray(x)
    if x.dtype.kind == "O":
        x = x.astype(bool)
    return [np.array(np.nonzero(x.reshape(1) if x.ndim == 0 else x), dtype=np.int64)
            .reshape(max(x.ndim, 1), -1)]


@generator("ai.onnx", "ScatterND")
def gen_scatter_nd(d: Draw, record) -> Case:
    dtype = _movement_dtype(d, record)
    if dtype == STRING:
        dtype = F32
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4), sizes=(1, 2, 3, 4, 5))
    r = len(shape)
    k = d.int(1, r)
    opset = _opset(d, record, (13, 16, 18))
    reduction = "none"
    if opset >= 16 and d.chance(0.5):
        reduction = d.choice(["add", "mul"] + (["max", "min"] if opset >= 18 else []))
    if (dtype == BOOL or dtype.kind == "c") and reduction != "none":
        reduction = "none"  # no order on bool/complex: not a meaningful reduction
    cells = math.prod(shape[:k])
    m = d.int(0, min(cells, 6))
    flat = rng.choice(cells, size=m, replace=reduction != "none" and d.chance(0.5))
    idx = np.stack(np.unravel_index(flat, shape[:k]), -1) if m else np.zeros((0, k), np.int64)
    idx = idx.astype(np.int64)
    if d.chance(0.3):
        idx = np.where(rng.random(idx.shape) < 0.5, idx - np.array(shape[:k]), idx)
    updates = randn(rng, (m,) + shape[k:], dtype)
    attrs = {"reduction": reduction} if reduction != "none" or d.chance(0.3) and opset >= 16 else {}
    return Case("ScatterND", "", opset, [randn(rng, shape, dtype), idx, updates], attrs,
                family="tensor", tolerance="exact" if dtype not in FLOATS else "accumulate",
                structural=frozenset({1}))


@generator("ai.onnx", "TopK")
def gen_topk(d: Draw, record) -> Case:
    opset = _opset(d, record, (11, 13, 21, 24))
    dtypes = _record_dtypes(record, NUMERIC)
    if opset < 24:
        dtypes = tuple(t for t in dtypes if t != BF16)
    dtype = d.choice(dtypes)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4))
    r = len(shape)
    axis = d.int(-r, r - 1)
    x = randn(rng, shape, dtype)
    if d.chance(0.5):  # ties
        x = np.asarray(np.round(np.asarray(x).astype(np.float64))).astype(dtype)
    k = np.array([d.int(0, shape[axis])], np.int64)
    attrs = {"axis": axis, "largest": d.choice([0, 1]), "sorted": 1}
    return Case("TopK", "", opset, [x, k], attrs, n_outputs=2, family="indexing",
                tolerance="exact", structural=frozenset({1}))


def _axis_indices(d: Draw, rng, shape, axis, extent):
    n = shape[axis]
    ishape = list(shape)
    ishape[axis] = extent
    return rng.integers(-n, n, size=ishape).astype(d.choice([I32, I64])) if n else \
        np.zeros(ishape, np.int64)


@generator("ai.onnx", "GatherElements")
def gen_gather_elements(d: Draw, record) -> Case:
    dtype = _movement_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4), sizes=(1, 2, 3, 4, 5))
    r = len(shape)
    axis = d.int(-r, r - 1)
    idx = _axis_indices(d, rng, shape, axis, d.choice([0, 1, 2, 3, 6]))
    # the built-in fails on a negative axis: NumPy
    return Case("GatherElements", "", _opset(d, record, (11, 13, 21)),
                [randn(rng, shape, dtype), idx], {"axis": axis}, family="indexing",
                tolerance="exact", structural=frozenset({1}), oracle="numpy",
                numpy_oracle=_gather_elements)


def _gather_elements(data, idx, attrs):
    data, idx = np.asarray(data), np.asarray(idx)
    axis = attrs["axis"] % data.ndim
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    # indices shorter than data on another axis read its leading block (ORT)
    if any(i > n for d, (i, n) in enumerate(zip(idx.shape, data.shape)) if d != axis):
        raise ValueError("indices longer than data on an axis other than axis")
    data = data[tuple(slice(None) if d == axis else slice(0, i) for d, i in enumerate(idx.shape))]
    return [np.take_along_axis(data, idx.astype(np.int64), axis=axis)]


@generator("ai.onnx", "ScatterElements")
def gen_scatter_elements(d: Draw, record) -> Case:
    dtype = _movement_dtype(d, record)
    if dtype == STRING:
        dtype = F32
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4), sizes=(1, 2, 3, 4, 5))
    r = len(shape)
    axis = d.int(-r, r - 1)
    opset = _opset(d, record, (13, 16, 18))
    reduction = "none"
    if opset >= 16 and d.chance(0.5) and dtype != BOOL and dtype.kind != "c":
        reduction = d.choice(["add", "mul"] + (["max", "min"] if opset >= 18 else []))
    if reduction == "none":
        # distinct positions along the axis (repeats leave the result free)
        perm = np.argsort(rng.random(size=shape), axis=axis)
        idx = np.take(perm, np.arange(d.int(0, shape[axis])), axis=axis)
        idx = (idx - shape[axis] * (rng.random(idx.shape) < 0.3)).astype(d.choice([I32, I64]))
    else:
        idx = _axis_indices(d, rng, shape, axis, d.choice([0, 1, 2, 3, 6]))
    updates = randn(rng, idx.shape, dtype)
    attrs = {"axis": axis}
    if reduction != "none" or d.chance(0.3) and opset >= 16:
        attrs["reduction"] = reduction
    return Case("ScatterElements", "", opset, [randn(rng, shape, dtype), idx, updates], attrs,
                family="indexing", tolerance="exact" if dtype not in FLOATS else "accumulate",
                structural=frozenset({1}))


@generator("ai.onnx", "Slice")
def gen_slice(d: Draw, record) -> Case:
    dtype = _movement_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4))
    r = len(shape)
    axes = list(dict.fromkeys(d.int(-r, r - 1) % r for _ in range(d.int(1, r))))
    big = np.iinfo(np.int64).max

    def bound(n):
        return d.choice([0, 1, n, n - 1, -1, -n, n + 3, -n - 3, big, -big, d.int(-n - 2, n + 2)])

    starts = [bound(shape[a]) for a in axes]
    ends = [bound(shape[a]) for a in axes]
    steps = [d.choice([1, 1, 2, 3, -1, -2]) for _ in axes]
    axes = [a - r if d.chance(0.3) else a for a in axes]
    x = randn(rng, shape, dtype)
    opset = _opset(d, record, (1, 10, 13, 21))
    if opset < 10:
        steps = [1] * len(axes)
        return Case("Slice", "", opset, [x],
                    {"starts": starts, "ends": ends, "axes": axes}, family="tensor",
                    tolerance="exact", oracle="numpy", numpy_oracle=_slice)
    it = d.choice([I32, I64])
    clip = (lambda v: [int(np.clip(e, -2**31, 2**31 - 1)) for e in v]) if it == I32 else list
    inputs = [x, np.array(clip(starts), it), np.array(clip(ends), it)]
    if d.chance(0.8):
        inputs.append(np.array(axes, it))
        if d.chance(0.7):
            inputs.append(np.array(steps, it))
    # Oracle bug: onnx.reference slices with Python's rules, not the
    # specification's clamping for negative steps: the spec in NumPy.
    return Case("Slice", "", opset, inputs, family="tensor", tolerance="exact",
                structural=frozenset({1, 2, 3, 4}), oracle="numpy", numpy_oracle=_slice)


def _slice(data, starts=None, ends=None, axes=None, steps=None, attrs=None):
    attrs = attrs or {}
    if starts is None:
        starts, ends, axes = attrs["starts"], attrs["ends"], attrs.get("axes")
    starts, ends = [int(v) for v in np.asarray(starts).reshape(-1)], \
        [int(v) for v in np.asarray(ends).reshape(-1)]
    r = data.ndim
    axes = list(range(len(starts))) if axes is None else [int(v) for v in np.asarray(axes)]
    steps = [1] * len(starts) if steps is None else [int(v) for v in np.asarray(steps)]
    if not (len(starts) == len(ends) == len(axes) == len(steps)):
        raise Invalid("starts, ends, axes and steps of different lengths")
    axes = [a + r if a < 0 else a for a in axes]
    if len(set(axes)) != len(axes) or any(not 0 <= a < r for a in axes) or 0 in steps:
        raise Invalid("repeated or out-of-range axes, or a zero step")
    index = [slice(None)] * r
    for s, e, a, st in zip(starts, ends, axes, steps):
        n = data.shape[a]
        s, e = s + n if s < 0 else s, e + n if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), n), min(max(e, 0), n)
            index[a] = slice(s, e, st)
        else:
            s, e = min(max(s, 0), n - 1), min(max(e, -1), n - 1)
            index[a] = slice(s, None if e < 0 else e, st) if n else slice(0, 0)
    return [np.ascontiguousarray(data[tuple(index)])]


@generator("ai.onnx", "Split")
def gen_split(d: Draw, record) -> Case:
    dtype = _movement_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4))
    r = len(shape)
    axis = d.int(-r, r - 1)
    n = shape[axis]
    opset = _opset(d, record, (11, 13, 18, 21))
    x = randn(rng, shape, dtype)
    parts = d.int(1, 4)
    cuts = sorted(d.int(0, n) for _ in range(parts - 1))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    attrs, inputs = {"axis": axis}, [x]
    if opset < 13:
        if d.chance(0.6):
            attrs["split"] = sizes
        else:
            parts = parts if n % parts == 0 else 1
    elif opset >= 18 and d.chance(0.4):
        parts = d.int(1, max(1, min(4, n))) if n else 1
        attrs["num_outputs"] = parts
    elif d.chance(0.7):
        inputs.append(np.array(sizes, np.int64))
    else:
        parts = parts if n % parts == 0 else 1
    return Case("Split", "", opset, inputs, attrs, n_outputs=parts, family="tensor",
                tolerance="exact", structural=frozenset({1}))


# ------------------------------------------------------------------ shape glue

def _glue_dtype(d: Draw, record):
    return d.choice(_record_dtypes(record, NUMERIC + (BOOL, np.dtype(np.complex64), STRING)))


def _glue(op, opset, inputs, attrs=None, structural=frozenset(), **kwargs) -> Case:
    return Case(op, "", opset, inputs, attrs or {}, family="shape", tolerance="exact",
                structural=structural, **kwargs)


@generator("ai.onnx", "Identity")
def gen_identity(d: Draw, record) -> Case:
    x = randn(d.rng(), random_shape(d), _glue_dtype(d, record))
    return _glue("Identity", _opset(d, record, (13, 16, 21)), [x])


@generator("ai.onnx", "Dropout")
def gen_dropout(d: Draw, record) -> Case:
    """Inference (the input itself, the mask all true), or training mode
    with a ratio of 0 (training with a ratio draws at random)."""
    dtype = d.choice(_record_dtypes(record, FLOATS))
    x = _values(d, d.rng(), random_shape(d), dtype, scale=3.0, specials=0.3)
    opset = _opset(d, record, (7, 10, 12, 13, 22))
    # the built-in's mask is bool at every opset; Dropout-7's schema says T
    n_outputs = d.choice([1, 2]) if opset >= 10 else 1
    if opset < 12:
        attrs = {"ratio": float(np.float32(d.rng().uniform(0, 0.9)))} if d.chance(0.5) else {}
        return _glue("Dropout", opset, [x], attrs, n_outputs=n_outputs)
    inputs = [x]
    if d.chance(0.7):
        inputs.append(np.array(d.rng().uniform(0, 0.9), np.float32))
        if d.chance(0.6):
            training = d.chance(0.5)
            if training:
                inputs[1] = np.array(0.0, np.float32)
            inputs.append(np.array(training))
    attrs = {"seed": d.int(0, 100)} if d.chance(0.3) else {}
    return _glue("Dropout", opset, inputs, attrs, n_outputs=n_outputs, oracle="numpy",
                 numpy_oracle=_dropout_oracle(opset, n_outputs))


def _dropout_oracle(opset: int, n_outputs: int):
    """Dropout as the built-in computes it (the input itself and a mask all
    true; in training mode with a ratio above 0 its ``RandomState(seed)``
    draw), but with ONNX Runtime's check of the ratio input (opset 12 on):
    outside [0, 1) (NaN included) it refuses the node whatever the mode,
    as the schema's range says; the built-in ignores a bad ratio in
    inference and computes with it in training."""

    def run(x, ratio=None, training_mode=None, *, attrs):
        p, training = attrs.get("ratio", 0.5), False
        if opset >= 12:
            if ratio is not None:
                if np.size(ratio) != 1:
                    raise ValueError("Dropout: ratio holds one value")
                p = float(np.asarray(ratio).reshape(-1)[0])
            if not 0.0 <= p < 1.0:
                raise Invalid(f"Dropout: ratio {p} outside [0, 1)")
            if training_mode is not None:
                training = bool(np.asarray(training_mode).reshape(-1)[0])
        if training and p > 0:
            keep = np.random.RandomState(attrs.get("seed")).uniform(0, 1.0, x.shape) >= p
            return [keep * x * (1.0 / (1.0 - p)), keep][:n_outputs]
        return [x, np.ones(x.shape, bool)][:n_outputs]

    return run


def _shape(x, attrs):
    """onnx.reference counts a negative start/end from the back twice (end
    -5 of a rank-3 shape is its slice [:-2]); the schema and ONNX Runtime
    add the rank once and clamp to [0, rank]."""
    r = x.ndim
    start, end = (min(max(v + r if v < 0 else v, 0), r)
                  for v in (attrs.get("start", 0), attrs.get("end", r)))
    return [np.array(x.shape[start:end], np.int64)]


@generator("ai.onnx", "Shape")
def gen_shape(d: Draw, record) -> Case:
    x = randn(d.rng(), random_shape(d), _glue_dtype(d, record))
    opset, attrs = _opset(d, record, (13, 15, 21)), {}
    if opset >= 15:
        r = x.ndim + 2
        if d.chance(0.5):
            attrs["start"] = d.int(-r, r)
        if d.chance(0.5):
            attrs["end"] = d.int(-r, r)
    return _glue("Shape", opset, [x], attrs, oracle="numpy", numpy_oracle=_shape)


@generator("ai.onnx", "Reshape")
def gen_reshape(d: Draw, record) -> Case:
    shape = random_shape(d, max_rank=4)
    x = randn(d.rng(), shape, _glue_dtype(d, record))
    dims = [shape[i] for i in sorted(range(len(shape)), key=lambda _: d.int(0, 9))]
    if len(dims) >= 2 and d.chance(0.5):  # merge two neighbours
        k = d.int(0, len(dims) - 2)
        dims[k:k + 2] = [dims[k] * dims[k + 1]]
    if d.chance(0.3):
        dims.insert(d.int(0, len(dims)), 1)
    opset = _opset(d, record, (13, 14, 21))
    allowzero = opset >= 14 and d.chance(0.3)
    if dims and d.chance(0.5) and math.prod(dims[:0] + dims[1:]) != 0:
        k = d.int(0, len(dims) - 1)
        if math.prod(dims[:k] + dims[k + 1:]):
            dims[k] = -1
    if not allowzero:
        dims = [0 if i < len(shape) and v == shape[i] and d.chance(0.3) else v
                for i, v in enumerate(dims)]
    attrs = {"allowzero": 1} if allowzero else {}
    return _glue("Reshape", opset, [x, np.array(dims, np.int64)], attrs, frozenset({1}))


@generator("ai.onnx", "Squeeze", "Unsqueeze")
def gen_squeeze(d: Draw, record) -> Case:
    op = record.op_type
    shape = list(random_shape(d, max_rank=4))
    if op == "Squeeze":
        for _ in range(d.int(0, 2)):
            shape.insert(d.int(0, len(shape)), 1)
        ones = [i for i, v in enumerate(shape) if v == 1]
        axes = [i - len(shape) if d.chance(0.3) else i for i in ones if d.chance(0.6)]
    else:
        out_rank = len(shape) + d.int(1, 3)
        axes = sorted({d.int(0, out_rank - 1) for _ in range(out_rank - len(shape))})
        axes = [a - (len(shape) + len(axes)) if d.chance(0.3) else a for a in axes]
    x = randn(d.rng(), tuple(shape), _glue_dtype(d, record))
    opset = _opset(d, record, (11, 13, 21))
    if opset < 13:
        case = _glue(op, opset, [x], {"axes": axes} if axes or op == "Unsqueeze" else {})
        if op == "Unsqueeze":
            # Oracle bug: onnx.reference's Unsqueeze-1/11 inserts the axes
            # one at a time (a negative axis then counts from the end of a
            # shorter shape): NumPy's expand_dims, the specification's rule.
            case.oracle = "numpy"
            case.numpy_oracle = lambda x, attrs: [np.expand_dims(x, tuple(attrs["axes"]))]
        return case
    inputs = [x] + ([np.array(axes, np.int64)] if axes or op == "Unsqueeze" else [])
    return _glue(op, opset, inputs, structural=frozenset({1}))


@generator("ai.onnx", "Flatten")
def gen_flatten(d: Draw, record) -> Case:
    x = randn(d.rng(), random_shape(d), _glue_dtype(d, record))
    r = x.ndim
    # the default axis 1 needs rank >= 1 (the built-in also flattens a scalar)
    attrs = {"axis": d.int(-r, r)} if d.chance(0.8) or r == 0 else {}
    return _glue("Flatten", _opset(d, record, (11, 13, 21)), [x], attrs)


@generator("ai.onnx", "Constant")
def gen_constant(d: Draw, record) -> Case:
    rng = d.rng()
    kind = d.choice(["value", "value", "value_float", "value_floats", "value_int",
                     "value_ints", "value_string", "value_strings"])
    if kind == "value":
        x = randn(rng, random_shape(d), _glue_dtype(d, record))
        value = onnx.numpy_helper.from_array(x)
    elif kind in ("value_float", "value_int"):
        value = float(rng.normal()) if kind == "value_float" else int(rng.integers(-9, 9))
    elif kind in ("value_floats", "value_ints"):
        n = d.int(0, 5)
        value = ([float(v) for v in rng.normal(size=n)] if kind == "value_floats"
                 else [int(v) for v in rng.integers(-9, 9, n)])
    else:
        value = "abc" if kind == "value_string" else ["a", "", "xyz"][:d.int(1, 3)]
    return _glue("Constant", _opset(d, record, (13, 19, 21)), [], {kind: value})


@generator("ai.onnx", "ConstantOfShape")
def gen_constant_of_shape(d: Draw, record) -> Case:
    dims = np.array(random_shape(d, max_rank=4), np.int64)
    attrs = {}
    if d.chance(0.8):
        dtype = d.choice(_record_dtypes(record, NUMERIC + (BOOL,)))
        attrs["value"] = onnx.numpy_helper.from_array(randn(d.rng(), (1,), dtype))
    return _glue("ConstantOfShape", _opset(d, record, (9, 20, 21)), [dims], attrs,
                 frozenset({0}))


@generator("ai.onnx", "Range")
def gen_range(d: Draw, record) -> Case:
    dtype = d.choice((F32, F64, np.dtype(np.int16), I32, I64))
    start = d.int(-20, 20)
    delta = d.choice([1, 2, 3, -1, -4]) if dtype.kind == "i" else d.choice([0.5, 1.5, -0.25, 2.0])
    limit = start + int(d.int(-3, 12) * delta)
    inputs = [np.array(v, dtype) for v in (start, limit, delta)]
    # start + i * delta, computed in float64 as the built-in does: one rounding
    return Case("Range", "", 11, inputs, family="shape", tolerance="elementwise",
                structural=frozenset({0, 1, 2}))


@generator("ai.onnx", "Expand")
def gen_expand(d: Draw, record) -> Case:
    out = random_shape(d, max_rank=4)
    x = randn(d.rng(), broadcast_operand(d, out), _glue_dtype(d, record))
    target = [1 if d.chance(0.3) else v for v in out] if d.chance(0.3) else list(out)
    return _glue("Expand", _opset(d, record, (8, 13)), [x, np.array(target, np.int64)],
                 structural=frozenset({1}))


@generator("ai.onnx", "Tile")
def gen_tile(d: Draw, record) -> Case:
    x = randn(d.rng(), random_shape(d, max_rank=4), _glue_dtype(d, record))
    repeats = np.array([d.int(0, 3) for _ in range(x.ndim)], np.int64)
    return _glue("Tile", _opset(d, record, (6, 13)), [x, repeats], structural=frozenset({1}))


@generator("ai.onnx", "Transpose")
def gen_transpose(d: Draw, record) -> Case:
    x = randn(d.rng(), random_shape(d, max_rank=5), _glue_dtype(d, record))
    attrs = {}
    if d.chance(0.8):
        attrs["perm"] = sorted(range(x.ndim), key=lambda _: d.int(0, 99))
    return _glue("Transpose", _opset(d, record, (13, 21)), [x], attrs)


@generator("ai.onnx", "Where")
def gen_where(d: Draw, record) -> Case:
    dtype = _glue_dtype(d, record)
    rng = d.rng()
    out = random_shape(d)
    shapes = [broadcast_operand(d, out) if d.chance(0.5) else out for _ in range(3)]
    condition = rng.random(shapes[0]) < 0.5
    return _glue("Where", _opset(d, record, (9, 16)),
                 [np.asarray(condition), randn(rng, shapes[1], dtype),
                  randn(rng, shapes[2], dtype)])


# ------------------------------------------------------------------ matmul

MATMUL_TYPES = FLOATS + (I32, I64, np.dtype(np.uint32), np.dtype(np.uint64))


def _float_or_int(d: Draw, record, among=MATMUL_TYPES):
    return d.choice(_record_dtypes(record, among))


@generator("ai.onnx", "MatMul")
def gen_matmul(d: Draw, record) -> Case:
    dtype = _float_or_int(d, record)
    rng = d.rng()
    sizes = (0, 1, 2, 3, 5, 8, 17, 33, 64)
    M, K, N = d.choice(sizes), d.choice(sizes), d.choice(sizes)
    batch = random_shape(d, max_rank=2, sizes=(1, 2, 3))
    a_shape = broadcast_operand(d, batch) + (M, K) if d.chance(0.6) else (K,) if d.chance(0.2) \
        else (M, K)
    b_shape = broadcast_operand(d, batch) + (K, N) if d.chance(0.6) else (K,) if d.chance(0.2) \
        else (K, N)
    if len(a_shape) == 1 and len(b_shape) == 1:
        b_shape = (K, N)
    a = _values(d, rng, a_shape, dtype, 1.0, 0.05)
    b = _values(d, rng, b_shape, dtype, 1.0, 0.05)
    if dtype.kind in "iu":
        a, b = (np.abs(a) % 5).astype(dtype), (np.abs(b) % 5).astype(dtype)
    opset = _opset(d, record, (13, 18, 21, 25) if dtype != BF16 else (13, 21))
    return Case("MatMul", "", opset, [a, b], family="matmul",
                tolerance="accumulate" if dtype in FLOATS else "exact", widen=True)


@generator("ai.onnx", "Gemm")
def gen_gemm(d: Draw, record) -> Case:
    dtype = _float_or_int(d, record)
    rng = d.rng()
    sizes = (0, 1, 2, 3, 5, 8, 17, 33)
    M, K, N = d.choice(sizes), d.choice(sizes), d.choice(sizes)
    ta, tb = d.choice([0, 1]), d.choice([0, 1])
    a = _values(d, rng, (K, M) if ta else (M, K), dtype, 1.0, 0.05)
    b = _values(d, rng, (N, K) if tb else (K, N), dtype, 1.0, 0.05)
    if dtype.kind in "iu":
        a, b = (np.abs(a) % 5).astype(dtype), (np.abs(b) % 5).astype(dtype)
    attrs = {}
    if ta:
        attrs["transA"] = 1
    if tb:
        attrs["transB"] = 1
    if dtype in FLOATS:
        if d.chance(0.4):
            attrs["alpha"] = d.choice([0.0, 0.5, 2.0, -1.0])
        if d.chance(0.4):
            attrs["beta"] = d.choice([0.0, 0.5, 2.0])
    opset = _opset(d, record, (9, 11, 13, 21) if dtype != BF16 else (13, 21))
    inputs = [a, b]
    if opset < 11 or d.chance(0.7):
        c_shape = d.choice([(), (N,), (1, N), (M, 1), (M, N), (1, 1)])
        c = _values(d, rng, c_shape, dtype, 1.0, 0.05)
        if dtype.kind in "iu":
            c = (np.abs(c) % 5).astype(dtype)
        inputs.append(c)
    return Case("Gemm", "", opset, inputs, attrs, family="matmul",
                tolerance="accumulate" if dtype in FLOATS else "exact", widen=True)


@generator("ai.onnx", "MatMulInteger")
def gen_matmul_integer(d: Draw, record) -> Case:
    rng = d.rng()
    ta, tb = d.choice([U8, I8]), d.choice([U8, I8])
    sizes = (0, 1, 2, 3, 5, 16, 17, 33)
    M, K, N = d.choice(sizes), d.choice(sizes), d.choice(sizes)
    batch = random_shape(d, max_rank=2, sizes=(1, 2, 3)) if d.chance(0.3) else ()
    a = randn(rng, batch + (M, K), ta)
    b = randn(rng, (K, N), tb)
    a = rng.integers(np.iinfo(ta).min, int(np.iinfo(ta).max) + 1, a.shape).astype(ta)
    b = rng.integers(np.iinfo(tb).min, int(np.iinfo(tb).max) + 1, b.shape).astype(tb)
    inputs = [a, b]
    if d.chance(0.6):
        za = rng.integers(np.iinfo(ta).min, int(np.iinfo(ta).max) + 1,
                          d.choice([(), (1,), (M,)])).astype(ta)
        zb = rng.integers(np.iinfo(tb).min, int(np.iinfo(tb).max) + 1,
                          d.choice([(), (1,), (N,)])).astype(tb)
        inputs += [za, zb] if d.chance(0.7) else [None, zb]
    # Oracle bug: onnx.reference subtracts a per-row a_zero_point along the
    # last axis: the formula in int64 instead.
    return Case("MatMulInteger", "", _opset(d, record, (10, 13, 21)), inputs, family="matmul",
                tolerance="exact", oracle="numpy", numpy_oracle=_matmul_integer)


def _matmul_integer(a, b, za=None, zb=None, attrs=None):
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if za is not None:
        za = np.asarray(za, np.int64)
        a = a - (za.reshape(-1, 1) if za.ndim == 1 and za.size != 1 else za.reshape(()))
    if zb is not None:
        zb = np.asarray(zb, np.int64)
        b = b - (zb.reshape(-1) if zb.ndim == 1 and zb.size != 1 else zb.reshape(()))
    return [np.matmul(a, b).astype(np.int32)]


@generator("ai.onnx", "QLinearMatMul")
def gen_qlinear_matmul(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    opset = _opset(d, record, (10, 13, 21))
    st = d.choice([F32, F16]) if opset >= 21 else F32
    sizes = (0, 1, 2, 3, 5, 16, 17)
    M, K, N = d.choice(sizes), d.choice(sizes), d.choice(sizes)
    lo, hi = int(np.iinfo(qt).min), int(np.iinfo(qt).max) + 1
    a = rng.integers(lo, hi, (M, K)).astype(qt)
    b = rng.integers(lo, hi, (K, N)).astype(qt)

    def scale():
        return np.array(rng.uniform(0.01, 0.2), st)

    def zp():
        return np.array(rng.integers(lo, hi), qt)

    yt = d.choice([U8, I8])
    y_zp = np.array(rng.integers(int(np.iinfo(yt).min), int(np.iinfo(yt).max) + 1), yt)
    inputs = [a, scale(), zp(), b, scale(), zp(), np.array(rng.uniform(0.5, 5.0), st), y_zp]
    return Case("QLinearMatMul", "", opset, inputs, family="matmul", tolerance="exact",
                structural=frozenset({1, 2, 4, 5, 6, 7}))


# ------------------------------------------------------------------ normalization

def _norm_dtype(d: Draw, record):
    return d.choice(_record_dtypes(record, FLOATS))


@generator("ai.onnx", "BatchNormalization")
def gen_batch_norm(d: Draw, record) -> Case:
    dtype = _norm_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(2, 4), sizes=(0, 1, 2, 3, 5, 8))
    C = shape[1]
    x = _values(d, rng, shape, dtype, 1.0, 0.05)
    params = [randn(rng, (C,), dtype), randn(rng, (C,), dtype), randn(rng, (C,), dtype),
              np.abs(randn(rng, (C,), dtype)) + dtype.type(0.1)]
    attrs = {"epsilon": d.choice([1e-5, 1e-3, 0.5])}
    opset = _opset(d, record, (9, 14, 15))
    # Oracle bug: onnx.reference's BatchNormalization before opset 14 is off
    # (errors of 0.2 on O(1) outputs): the formula in float64 instead.
    return Case("BatchNormalization", "", opset, [x] + params, attrs, family="norm",
                tolerance="accumulate", widen=True, oracle="numpy",
                numpy_oracle=lambda *a, attrs: [_batch_norm(*a, attrs.get("epsilon", 1e-5))])


def _batch_norm(x, scale, b, mean, var, epsilon):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    x = x.astype(np.float64)
    f = [np.asarray(p, np.float64).reshape(shape) for p in (scale, b, mean, var)]
    return (x - f[2]) / np.sqrt(f[3] + epsilon) * f[0] + f[1]


@generator("ai.onnx", "InstanceNormalization")
def gen_instance_norm(d: Draw, record) -> Case:
    dtype = _norm_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(3, 4), sizes=(1, 2, 3, 5, 8))
    C = shape[1]
    x = _values(d, rng, shape, dtype, 1.0, 0.05)
    return Case("InstanceNormalization", "", _opset(d, record, (6, 13, 21)),
                [x, randn(rng, (C,), dtype), randn(rng, (C,), dtype)],
                {"epsilon": d.choice([1e-5, 1e-2])}, family="norm", tolerance="loose",
                widen=True)


@generator("ai.onnx", "GroupNormalization")
def gen_group_norm(d: Draw, record) -> Case:
    dtype = _norm_dtype(d, record)
    rng = d.rng()
    G = d.choice([1, 2, 3])
    C = G * d.choice([1, 2, 3])
    shape = (d.choice([1, 2, 3]), C) + random_shape(d, rank=d.int(1, 2), sizes=(1, 2, 3, 5, 8))
    x = _values(d, rng, shape, dtype, 1.0, 0.05)
    opset = _opset(d, record, (18, 21))
    pshape = (G,) if opset < 21 else (C,)
    return Case("GroupNormalization", "", opset,
                [x, randn(rng, pshape, dtype), randn(rng, pshape, dtype)],
                {"num_groups": G, "epsilon": d.choice([1e-5, 1e-2])}, family="norm",
                tolerance="loose", widen=True)


@generator("ai.onnx", "LayerNormalization", "RMSNormalization")
def gen_layer_norm(d: Draw, record) -> Case:
    dtype = _norm_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4), sizes=(0, 1, 2, 3, 5, 8, 17, 33))
    r = len(shape)
    axis = d.int(-r, r - 1)
    x = _values(d, rng, shape, dtype, 1.0, 0.05)
    tail = shape[axis:]
    scale = randn(rng, broadcast_operand(d, tail) if d.chance(0.2) else tail, dtype)
    inputs = [x, scale]
    attrs = {"axis": axis}
    if d.chance(0.5):
        attrs["epsilon"] = d.choice([1e-5, 1e-2, 0.5])
    if d.chance(0.2):
        attrs["stash_type"] = 1
    n_out = 1
    if record.op_type == "LayerNormalization":
        if d.chance(0.6):
            inputs.append(randn(rng, tail, dtype))
        n_out = d.choice([1, 1, 3])
    return Case(record.op_type, "", _opset(d, record, (17, 18, 21, 23, 24)), inputs, attrs,
                n_outputs=n_out, family="norm", tolerance="loose", widen=True)


@generator("ai.onnx", "LpNormalization")
def gen_lp_norm(d: Draw, record) -> Case:
    dtype = _norm_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4), sizes=(0, 1, 2, 3, 5, 8, 17))
    r = len(shape)
    x = _values(d, rng, shape, dtype, 1.0, 0.05)
    attrs = {"axis": d.int(-r, r - 1), "p": d.choice([1, 2])}
    # Oracle bug: onnx.reference's LpNormalization divides by the L2 norm
    # whatever p is: the formula in float64 instead.
    return Case("LpNormalization", "", _opset(d, record, (1, 13, 21)), [x], attrs,
                family="norm", tolerance="accumulate", widen=True, oracle="numpy",
                numpy_oracle=lambda x, attrs: [_lp_norm(x, attrs.get("axis", -1),
                                                        attrs.get("p", 2))])


def _lp_norm(x, axis, p):
    x = np.asarray(x, np.float64)
    norm = (np.abs(x).sum(axis, keepdims=True) if p == 1
            else np.sqrt((x * x).sum(axis, keepdims=True)))
    with np.errstate(all="ignore"):
        return np.where(norm == 0, 0.0, x / norm)


@generator("ai.onnx", "MeanVarianceNormalization")
def gen_mvn(d: Draw, record) -> Case:
    dtype = _norm_dtype(d, record)
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4), sizes=(1, 2, 3, 5, 8))
    r = len(shape)
    x = _values(d, rng, shape, dtype, 1.0, 0.05)
    attrs = {}
    if r != 4 or d.chance(0.5):
        attrs["axes"] = sorted({d.int(0, r - 1) for _ in range(d.int(1, r))})
    # Oracle: onnx.reference computes E[x^2] - E[x]^2 in the input type
    # (cancellation) and fails on float64; the formula in float64 instead.
    return Case("MeanVarianceNormalization", "", _opset(d, record, (9, 13, 21)), [x], attrs,
                family="norm", tolerance="loose", oracle="numpy",
                numpy_oracle=lambda x, attrs: [_mvn(x, tuple(attrs.get("axes", (0, 2, 3))))])


def _mvn(x, axes):
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    # the function body of the specification: (X - mean) / (sqrt(var) + 1e-9)
    return (x - mean) / (np.sqrt(var) + 1e-9)


@generator("ai.onnx", "SimplifiedLayerNormalization")
def gen_simplified_ln(d: Draw, record) -> Case:
    dtype = d.choice((F32, F16))
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1, 4), sizes=(1, 2, 3, 5, 8, 17, 33))
    r = len(shape)
    axis = d.choice([-1, r - 1, d.int(-r, r - 1)])
    x = _values(d, rng, shape, dtype, 1.0, 0.05)
    attrs = {"axis": axis}
    if d.chance(0.5):
        attrs["epsilon"] = d.choice([1e-5, 1e-2])
    return Case("SimplifiedLayerNormalization", "", 21, [x, randn(rng, shape[axis:], dtype)],
                attrs, family="norm", oracle="ort", tolerance="loose",
                output_types=(elem_type(dtype),))



# ------------------------------------------------------------------ control flow
# One small body each, reading an input of the node from the outer scope
# (in1 or in2); the bodies declare element types, not shapes, so an empty
# scan output is (0,) of the declared type, as the NumPy oracles say too.

CONTROL_TYPES = (F32, F64, F16, I32, I64)


def _body(nodes, inputs, outputs, dtype):
    def value(name, t):
        return onnx.helper.make_tensor_value_info(name, t, None)
    t = elem_type(dtype)
    return onnx.helper.make_graph(
        nodes, "body", [value(n, t if k is None else k) for n, k in inputs],
        [value(n, t if k is None else k) for n, k in outputs])


def _declared_type(graph, index):
    return onnx.helper.tensor_dtype_to_np_dtype(graph.output[index].type.tensor_type.elem_type)


def _one(x, dtype):
    """The single element of a condition or trip count, as the
    specification wants it (else the case is invalid)."""
    x = np.asarray(x)
    if x.dtype != dtype or x.size != 1:
        raise Invalid(f"expected one {np.dtype(dtype)} element, got {x.dtype}{list(x.shape)}")
    return x.reshape(-1)[0]


@generator("ai.onnx", "If")
def gen_if(d: Draw, record) -> Case:
    dtype = d.choice(CONTROL_TYPES)
    x = _values(d, d.rng(), random_shape(d), dtype)
    node = onnx.helper.make_node
    then = _body([node("Add", ["in1", "in1"], ["t"])], [], [("t", None)], dtype)
    other = _body([node("Mul", ["in1", "in1"], ["e"])], [], [("e", None)], dtype)
    return Case("If", "", _opset(d, record), [np.array(d.chance(0.5)), x],
                {"then_branch": then, "else_branch": other}, family="control_flow",
                oracle="numpy", numpy_oracle=_if)


def _if(cond, x, attrs):
    return [x + x if _one(cond, np.bool_) else x * x]


@generator("ai.onnx", "Loop")
def gen_loop(d: Draw, record) -> Case:
    """v += x (x read from the outer scope) M times or until i + 1 == stop,
    scanning v * v."""
    dtype = d.choice(CONTROL_TYPES)
    x = _values(d, d.rng(), random_shape(d, max_rank=3), dtype)
    node = onnx.helper.make_node
    stop = onnx.numpy_helper.from_array(np.array(d.int(1, 4), np.int64), "stop")
    one = onnx.numpy_helper.from_array(np.array(1, np.int64), "one")
    body = _body([node("Add", ["v_in", "in2"], ["v_out"]),
                  node("Mul", ["v_out", "v_out"], ["scan"]),
                  node("Add", ["i", "one"], ["next"]),
                  node("Less", ["next", "stop"], ["c_out"])],
                 [("i", TensorProto.INT64), ("c_in", TensorProto.BOOL), ("v_in", None)],
                 [("c_out", TensorProto.BOOL), ("v_out", None), ("scan", None)], dtype)
    body.initializer.extend([stop, one])
    trips = np.array(d.int(0, 4), np.int64)
    cond = np.array(d.chance(0.8)) if d.chance(0.8) else None
    return Case("Loop", "", _opset(d, record), [trips, cond, x], {"body": body},
                n_outputs=2, family="control_flow", oracle="numpy", numpy_oracle=_loop)


def _loop(trips=None, cond=None, x=None, attrs=None):
    body = attrs["body"]
    stop = int(onnx.numpy_helper.to_array(body.initializer[0]))
    limit = None if trips is None else int(_one(trips, np.int64))
    going = True if cond is None else bool(_one(cond, np.bool_))
    if limit is None and cond is None:
        raise Invalid("a loop without M and cond never ends")
    if limit is not None and limit < 0:
        raise Invalid("a negative trip count")
    v, scans, i = x, [], 0
    while going and (limit is None or i < limit):
        v = v + x
        scans.append(v * v)
        if cond is not None:
            going = i + 1 < stop
        i += 1
    return [v, np.stack(scans) if scans else np.empty((0,), _declared_type(body, 2))]


@generator("ai.onnx", "Scan")
def gen_scan(d: Draw, record) -> Case:
    """s += row, scanning s * row, over axis 0 or 1 of rows, either way."""
    dtype = d.choice(CONTROL_TYPES)
    rng = d.rng()
    row = random_shape(d, max_rank=2)
    axis = d.int(0, len(row))
    length = d.int(0, 4)
    rows = _values(d, rng, (*row[:axis], length, *row[axis:]), dtype)
    s0 = _values(d, rng, row, dtype)
    node = onnx.helper.make_node
    body = _body([node("Add", ["s_in", "r"], ["s_out"]), node("Mul", ["s_out", "r"], ["y"])],
                 [("s_in", None), ("r", None)], [("s_out", None), ("y", None)], dtype)
    attrs = {"body": body, "num_scan_inputs": 1,
             "scan_input_axes": [d.choice([axis, axis - len(row) - 1])],
             "scan_input_directions": [d.int(0, 1)], "scan_output_directions": [d.int(0, 1)]}
    return Case("Scan", "", _opset(d, record), [s0, rows], attrs, n_outputs=2,
                family="control_flow", oracle="numpy", numpy_oracle=_scan)


def _scan(s, rows, attrs):
    if attrs["num_scan_inputs"] != 1 or np.ndim(rows) < 1:
        raise Invalid("one scan input of rank >= 1")
    axis = attrs["scan_input_axes"][0]
    if not -rows.ndim <= axis < rows.ndim:
        raise Invalid("scan axis out of range")
    length = rows.shape[axis]
    ys = []
    for t in range(length):
        r = np.take(rows, length - 1 - t if attrs["scan_input_directions"][0] else t, axis)
        s = s + r
        ys.append(s * r)
    if attrs["scan_output_directions"][0]:
        ys.reverse()
    return [s, np.stack(ys) if ys else np.empty((0,), _declared_type(attrs["body"], 1))]


@generator("ai.onnx", "Optional")
def gen_optional(d: Draw, record) -> Case:
    dtype = d.choice(CONTROL_TYPES)
    x = _values(d, d.rng(), random_shape(d), dtype)
    return Case("Optional", "", _opset(d, record, (15, 18, 21, 25)), [x],
                family="control_flow", oracle="numpy", numpy_oracle=lambda x, attrs: [x])

# ------------------------------------------------------------------ convolution

def _conv_dtype(d: Draw, record, opset: int):
    among = (F32, F16, F64) + ((BF16,) if opset >= 22 else ())
    return d.choice(_record_dtypes(record, among) or (F32,))


def _conv_spatial(d: Draw, n: int):
    kernel = tuple(d.choice((1, 2, 3)) for _ in range(n))
    strides = [d.choice((1, 1, 2, 3)) for _ in range(n)]
    dilations = [d.choice((1, 1, 2)) for _ in range(n)]
    return kernel, strides, dilations


def _conv_geometry(d: Draw):
    """(x shape, w shape, attributes) of a convolution (Conv, the 8-bit ones)."""
    n = d.int(1, 3)
    group = d.choice((1, 1, 2, 3))
    depthwise = group > 1 and d.chance(0.4)
    cg = 1 if depthwise else d.choice((1, 2, 3))
    mg = 1 if depthwise else d.choice((1, 2, 4))
    kernel, strides, dilations = _conv_spatial(d, n)
    auto_pad = d.choice(("NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    attrs = {"group": group, "strides": strides, "auto_pad": auto_pad}
    if auto_pad == "NOTSET":
        attrs["pads"] = [d.choice((0, 0, 1, 2)) for _ in range(2 * n)]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER") or d.chance(0.5):
        attrs["dilations"] = dilations
    else:
        dilations = [1] * n
    pads = attrs.get("pads", [0] * 2 * n)
    spatial = tuple(max(d.choice((1, 2, 3, 5, 8, 13)), (kernel[i] - 1) * dilations[i] + 1
                        - pads[i] - pads[i + n]) for i in range(n))
    return ((d.choice((0, 1, 2)), group * cg) + spatial, (group * mg, cg) + kernel, attrs)


@generator("ai.onnx", "Conv")
def gen_conv(d: Draw, record) -> Case:
    opset = _opset(d, record, (11, 22))
    dtype = _conv_dtype(d, record, opset)
    rng = d.rng()
    xshape, wshape, attrs = _conv_geometry(d)
    x = _values(d, rng, xshape, dtype, 1.0, 0.05)
    w = randn(rng, wshape, dtype)
    inputs = [x, w]
    if d.chance(0.6):
        inputs.append(randn(rng, wshape[:1], dtype))
    if d.chance(0.3):
        attrs["kernel_shape"] = list(wshape[2:])
    return Case("Conv", "", opset, inputs, attrs, family="conv", tolerance="accumulate",
                widen=True, constant=frozenset({1, 2}) if d.chance(0.4) else frozenset())


@generator("ai.onnx", "ConvTranspose")
def gen_conv_transpose(d: Draw, record) -> Case:
    opset = _opset(d, record, (11, 22))
    dtype = _conv_dtype(d, record, opset)
    rng = d.rng()
    n = d.int(1, 3)
    cg, mg = d.choice((1, 2, 3)), d.choice((1, 2, 3))
    kernel, strides, dilations = _conv_spatial(d, n)
    spatial = tuple(d.choice((1, 2, 3, 5)) for _ in range(n))
    attrs = {"strides": strides, "dilations": dilations}
    how = d.choice(("pads", "output_shape", "output_padding", "none"))
    if how == "pads":
        attrs["pads"] = [d.choice((0, 1)) for _ in range(2 * n)]
    elif how == "output_shape":
        attrs["output_shape"] = [strides[i] * (spatial[i] - 1) + (kernel[i] - 1) * dilations[i]
                                 + 1 for i in range(n)]
    elif how == "output_padding":
        attrs["output_padding"] = [d.int(0, strides[i] - 1) for i in range(n)]
    x = _values(d, rng, (d.choice((0, 1, 2)), cg) + spatial, dtype, 1.0, 0.05)
    inputs = [x, randn(rng, (cg, mg) + kernel, dtype)]
    if d.chance(0.5):
        inputs.append(randn(rng, (mg,), dtype))
    # group 1: the built-in fails for group > 1 (tests/ops/test_conv.py covers it)
    return Case("ConvTranspose", "", opset, inputs, attrs, family="conv",
                tolerance="accumulate", widen=True)


@generator("ai.onnx", "Col2Im")
def gen_col2im(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record, (F32, F16, F64, BF16, I32, I64, U8, I8)) or (F32,))
    rng = d.rng()
    n = d.int(1, 3)
    block = [d.choice((1, 2, 3)) for _ in range(n)]
    strides = [d.choice((1, 2)) for _ in range(n)]
    dilations = [d.choice((1, 2)) for _ in range(n)]
    pads = [d.choice((0, 1)) for _ in range(2 * n)]
    image = [max(d.choice((1, 2, 4, 5)), (block[i] - 1) * dilations[i] + 1 - pads[i] - pads[i + n])
             for i in range(n)]
    L = math.prod((image[i] + pads[i] + pads[i + n] - (block[i] - 1) * dilations[i] - 1)
                  // strides[i] + 1 for i in range(n))
    C = d.choice((1, 2, 3))
    col = _values(d, rng, (d.choice((0, 1, 2)), C * math.prod(block), L), dtype, 1.0, 0.05)
    inputs = [col, np.array(image, np.int64), np.array(block, np.int64)]
    return Case("Col2Im", "", 18, inputs, {"strides": strides, "dilations": dilations,
                                            "pads": pads}, family="conv", tolerance="accumulate",
                widen=True, structural=frozenset({1, 2}))


def _qconv_ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)


def _conv_integer(x, w, xz=None, wz=None, attrs=None):
    """Exact: the built-in float64 Conv of the centred values (its
    ConvInteger broadcasts zero points of shape [1] or [M] in 2-D only)."""
    xc = np.asarray(x, np.float64) - (0 if xz is None else float(np.asarray(xz).reshape(-1)[0]))
    wc = np.asarray(w, np.float64)
    if wz is not None:
        wc = wc - np.asarray(wz, np.float64).reshape((-1,) + (1,) * (wc.ndim - 1))
    batch = xc.shape[0]
    if batch == 0:
        xc = np.zeros((1,) + xc.shape[1:])
    node = onnx.helper.make_node("Conv", ["x", "w"], ["y"], **(attrs or {}))
    graph = onnx.helper.make_graph(
        [node], "oracle", [onnx.helper.make_tensor_value_info(k, TensorProto.DOUBLE, None)
                           for k in ("x", "w")],
        [onnx.helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    y = ReferenceEvaluator(model).run(None, {"x": xc, "w": wc})[0][:batch]
    return [y.astype(np.int64).astype(np.int32)]


def _qlinear_conv(x, xs, xz, w, ws, wz, ys, yz, b=None, attrs=None):
    """ONNX Runtime's arithmetic (see ops/conv.py): float32 scale per
    channel, float32(acc + B) times it, clamped, rounded half to even."""
    acc = _conv_integer(x, w, xz, wz, attrs)[0].astype(np.int64)
    shape = (1, -1) + (1,) * (acc.ndim - 2)
    if b is not None:
        acc = acc + np.asarray(b, np.int64).reshape(shape)
    acc = acc.astype(np.int32)
    scale = (np.asarray(xs).reshape(-1)[0] * np.asarray(ws).reshape(-1)) / np.asarray(
        ys).reshape(-1)[0]
    scale = np.broadcast_to(scale.astype(np.float32), acc.shape[1:2]).reshape(shape)
    info = np.iinfo(yz.dtype)
    zp = int(np.asarray(yz).reshape(-1)[0])
    v = np.clip(acc.astype(np.float32) * scale, np.float32(info.min - zp),
                np.float32(info.max - zp))
    return [(np.rint(v).astype(np.int32) + zp).astype(yz.dtype)]


@generator("ai.onnx", "ConvInteger")
def gen_conv_integer(d: Draw, record) -> Case:
    rng = d.rng()
    tx, tw = d.choice([U8, I8]), d.choice([U8, I8])
    xshape, wshape, attrs = _conv_geometry(d)
    inputs = [_qconv_ints(rng, xshape, tx), _qconv_ints(rng, wshape, tw)]
    if d.chance(0.7):
        inputs.append(_qconv_ints(rng, d.choice([(), (1,)]), tx))
        if d.chance(0.7):
            inputs.append(_qconv_ints(rng, d.choice([(), (1,), (wshape[0],)]), tw))
    if d.chance(0.3):
        attrs["kernel_shape"] = list(wshape[2:])
    return Case("ConvInteger", "", _opset(d, record, (10, 13, 21)), inputs, attrs, family="conv",
                tolerance="exact", oracle="numpy", numpy_oracle=_conv_integer,
                constant=frozenset({1, 3}) if d.chance(0.4) else frozenset())


@generator("ai.onnx", "QLinearConv")
def gen_qlinear_conv(d: Draw, record) -> Case:
    rng = d.rng()
    tx, tw = d.choice([U8, I8]), d.choice([U8, I8])
    xshape, wshape, attrs = _conv_geometry(d)
    M = wshape[0]
    per = d.choice([(), (1,), (M,)])
    k = math.prod(wshape[1:])
    inputs = [_qconv_ints(rng, xshape, tx), np.array(rng.uniform(0.01, 0.05), F32),
              _qconv_ints(rng, (), tx), _qconv_ints(rng, wshape, tw),
              rng.uniform(0.002, 0.02, per).astype(F32), _qconv_ints(rng, per, tw),
              np.array(rng.uniform(0.05, 0.5) * math.sqrt(k), F32),
              _qconv_ints(rng, (), d.choice([U8, I8]))]
    if d.chance(0.6):
        inputs.append(rng.integers(-5000, 5000, M).astype(I32))
    return Case("QLinearConv", "", _opset(d, record, (10, 13, 21)), inputs, attrs,
                family="conv", tolerance="exact", oracle="numpy", numpy_oracle=_qlinear_conv,
                structural=frozenset({1, 2, 4, 5, 6, 7}),
                constant=frozenset({3, 4, 5, 8}) if d.chance(0.4) else frozenset())


def _deform_conv_numpy(x, w, offset, b=None, mask=None, attrs=None):
    """DeformConv in float64: each tap moved by its offset, sampled
    bilinearly (zero outside the image), times the mask, then the grouped
    products."""
    x, w, offset = (np.asarray(a, np.float64) for a in (x, w, offset))
    N, C, H, W = x.shape
    M, Cg, kh, kw = w.shape
    G, OG = attrs.get("group", 1), attrs.get("offset_group", 1)
    s, p, dl = attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4), \
        attrs.get("dilations", [1, 1])
    kk, (OH, OW) = kh * kw, offset.shape[2:]
    if C != Cg * G or M % G or C % OG or offset.shape[:2] != (N, OG * 2 * kk):
        raise ValueError("DeformConv oracle: inconsistent shapes")
    offset = offset.reshape(N, OG, kk, 2, OH, OW)
    mask = np.ones((N, OG, kk, OH, OW)) if mask is None else \
        np.asarray(mask, np.float64).reshape(N, OG, kk, OH, OW)
    Co, nn = C // OG, np.arange(N)[:, None, None]
    cols = np.zeros((N, C, kk, OH, OW))
    for og in range(OG):
        for tap in range(kk):
            h = (np.arange(OH)[:, None] * s[0] - p[0] + (tap // kw) * dl[0]
                 + offset[:, og, tap, 0])
            v = (np.arange(OW)[None, :] * s[1] - p[1] + (tap % kw) * dl[1]
                 + offset[:, og, tap, 1])
            y0, x0 = np.floor(h), np.floor(v)
            acc = 0.0
            for yy, wy in ((y0, 1 - (h - y0)), (y0 + 1, h - y0)):
                for xx, wx in ((x0, 1 - (v - x0)), (x0 + 1, v - x0)):
                    ok = (yy >= 0) & (yy < H) & (xx >= 0) & (xx < W)
                    yc = np.where(ok, yy, 0).astype(np.int64)
                    xc = np.where(ok, xx, 0).astype(np.int64)
                    px = np.where(ok[..., None], x[:, og * Co:(og + 1) * Co][nn, :, yc, xc],
                                  0.0)
                    acc = acc + np.where(ok, wy * wx, 0.0)[..., None] * px
            cols[:, og * Co:(og + 1) * Co, tap] = np.moveaxis(acc, -1, 1) \
                * mask[:, og, tap][:, None]
    Mg = M // G
    y = np.zeros((N, M, OH * OW))
    for g in range(G):
        y[:, g * Mg:(g + 1) * Mg] = np.einsum(
            "mk,nkp->nmp", w[g * Mg:(g + 1) * Mg].reshape(Mg, -1),
            cols[:, g * Cg:(g + 1) * Cg].reshape(N, Cg * kk, OH * OW))
    if b is not None:
        y += np.asarray(b, np.float64)[None, :, None]
    return [y.reshape(N, M, OH, OW)]


@generator("ai.onnx", "DeformConv")
def gen_deform_conv(d: Draw, record) -> Case:
    """2-D; offsets up to 2.5 pixels, a third of them whole (samples on
    grid points)."""
    opset = _opset(d, record, (19, 22))
    dtype = _conv_dtype(d, record, opset)
    rng = d.rng()
    group, og = d.choice((1, 1, 2)), d.choice((1, 1, 2))
    cg, mg = d.choice((1, 2)), d.choice((1, 2))
    C = group * cg * (og if cg % og else 1)
    cg = C // group
    kernel, strides, dilations = _conv_spatial(d, 2)
    pads = [d.choice((0, 0, 1)) for _ in range(4)]
    spatial = tuple(max(d.choice((1, 2, 3, 5)), (kernel[i] - 1) * dilations[i] + 1 - pads[i]
                        - pads[i + 2]) for i in range(2))
    out = [(spatial[i] + pads[i] + pads[i + 2] - (kernel[i] - 1) * dilations[i] - 1)
           // strides[i] + 1 for i in range(2)]
    N, kk = d.choice((0, 1, 2)), kernel[0] * kernel[1]
    x = _values(d, rng, (N, C) + spatial, dtype, 1.0, 0.05)
    w = randn(rng, (group * mg, cg) + kernel, dtype)
    offset = rng.uniform(-2.5, 2.5, (N, og * 2 * kk) + tuple(out))
    offset.reshape(-1)[::3] = np.round(offset.reshape(-1)[::3])
    inputs = [x, w, offset.astype(dtype)]
    with_mask = d.chance(0.5)
    if d.chance(0.5) or with_mask:
        inputs.append(randn(rng, (group * mg,), dtype) if d.chance(0.7) else None)
    if with_mask:
        inputs.append(rng.uniform(0, 1.5, (N, og * kk) + tuple(out)).astype(dtype))
    attrs = {"group": group, "offset_group": og, "strides": strides, "pads": pads,
             "dilations": dilations}
    if d.chance(0.3):
        attrs["kernel_shape"] = list(kernel)
    # a float64 NumPy definition: the built-in rounds the sampling
    # coordinates to float32, which double would not match
    return Case("DeformConv", "", opset, inputs, attrs, family="conv", tolerance="accumulate",
                widen=True, structural=frozenset({2, 4}), oracle="numpy",
                numpy_oracle=_deform_conv_numpy,
                constant=frozenset({1, 3}) if d.chance(0.4) else frozenset())

# (imported for the generators they register)
from . import (  # noqa: E402
    generators_contrib,  # noqa: F401
    generators_pooling,  # noqa: F401
    generators_quantization,  # noqa: F401
    generators_recurrent,  # noqa: F401
    generators_resize,  # noqa: F401
)

