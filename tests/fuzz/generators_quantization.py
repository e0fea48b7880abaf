"""Valid-case generators of the com.microsoft quantization family
(ops/quantization.py), judged by ONNX Runtime 1.32 bit for bit.

Scales and zero points are initializers, as the quantization tools write
them (``constant``: the mutations leave them alone; ONNX Runtime 1.32 also
crashes on some malformed ones, a MatMulIntegerToFloat scale of the wrong
length among them).  DynamicQuantizeMatMul's
A is structural too: ONNX Runtime's min/max meets a NaN in its vector lanes,
so its result for a NaN depends on where the NaN sits (documented, not
matched)."""

from __future__ import annotations

import numpy as np

from .cases import MS, Case, Draw, elem_type, quantized_weights, random_shape
from .generators import generator

U8, I8 = np.dtype(np.uint8), np.dtype(np.int8)
F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
SIZES = (0, 1, 2, 3, 5, 16, 17, 33)


def _ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)


def _scale(d: Draw, rng, shape=(), lo=0.002, hi=0.1, dtype=F32):
    return (lo + (hi - lo) * rng.random(shape)).astype(dtype).reshape(shape)


class _Guard:
    """ONNX Runtime 1.32 crashes (SIGSEGV, an assertion) on some of these
    nodes when a required input is absent (QLinearConcat without a scale):
    such cases are not put to it (a ValueError: the oracle declines)."""

    def __init__(self, n_inputs: int, optional: frozenset, then=None):
        self.n_inputs, self.optional, self.then = n_inputs, optional, then

    def __call__(self, inputs):
        inputs = self.then(inputs) if self.then is not None else inputs
        for i in range(self.n_inputs):
            if i not in self.optional and (i >= len(inputs) or inputs[i] is None):
                raise ValueError(f"input {i} is required: not asked of ONNX Runtime")
        return inputs


def _case(op, inputs, structural, attrs=None, out=None, optional=(), transform=None,
          data=frozenset({0}), initializers=True) -> Case:
    """``structural`` but ``data``: the scales and zero points (initializers);
    ``out``: the output's dtype (default the first input's), which ONNX
    Runtime's model must declare; ``optional``: the inputs the operator may
    go without; ``initializers``: False where ONNX Runtime's type inference
    wants rank-0 scales, which the harness writes as (1,) initializers."""
    out = inputs[0].dtype if out is None else out
    guard = _Guard(len(inputs), frozenset(optional) | {i for i, x in enumerate(inputs)
                                                       if x is None}, transform)
    params = frozenset(i for i in structural if initializers and i not in data
                       and i < len(inputs) and inputs[i] is not None)
    return Case(op, MS, 1, inputs, attrs or {}, family="quantization", oracle="ort",
                tolerance="exact", structural=frozenset(structural), constant=params,
                output_types=(elem_type(out),), ort_transform=guard)


@generator(MS, "DynamicQuantizeMatMul")
def gen_dynamic_quantize_matmul(d: Draw, record) -> Case:
    rng = d.rng()
    tb = d.choice([U8, I8])
    M, K, N = d.choice(SIZES), d.choice(SIZES), d.choice(SIZES)
    batch = random_shape(d, max_rank=1, sizes=(1, 2, 3)) if d.chance(0.3) else ()
    a = (rng.standard_normal(batch + (M, K)) * d.choice([0.1, 1.0, 30.0])).astype(F32)
    per_column = d.chance(0.5)
    shape = (N,) if per_column else d.choice([(), (1,)])
    inputs = [a, quantized_weights(rng, (K, N), tb, U8), _scale(d, rng, shape)]
    if d.chance(0.7):
        inputs.append(_ints(rng, shape, tb))
    if d.chance(0.5):
        inputs += [None] * (4 - len(inputs)) + [rng.standard_normal(N).astype(F32)]
    return _case("DynamicQuantizeMatMul", inputs, {0, 2, 3}, optional={3, 4})


@generator(MS, "MatMulIntegerToFloat")
def gen_matmul_integer_to_float(d: Draw, record) -> Case:
    rng = d.rng()
    ta, tb = d.choice([U8, I8]), d.choice([U8, I8])
    ft = d.choice([F32, F32, F16])
    M, K, N = d.choice(SIZES), d.choice(SIZES), d.choice(SIZES)
    a_shape = d.choice([(), (1,), (M, 1)])
    b_shape = d.choice([(), (1,), (N,)])
    inputs = [_ints(rng, (M, K), ta), quantized_weights(rng, (K, N), tb, ta),
              _scale(d, rng, a_shape, dtype=ft),
              _scale(d, rng, b_shape, dtype=ft)]
    if d.chance(0.7):
        inputs += [_ints(rng, d.choice([(), (1,)]), ta), _ints(rng, b_shape, tb)]
        if d.chance(0.5):
            inputs.append(rng.standard_normal(N).astype(ft))
    return _case("MatMulIntegerToFloat", inputs, {2, 3, 4, 5}, out=ft, optional={4, 5, 6})


@generator(MS, "QuantizeLinear")
def gen_ms_quantize_linear(d: Draw, record) -> Case:
    rng = d.rng()
    ft, qt = d.choice([F32, F16]), d.choice([U8, I8, np.dtype(np.uint16), np.dtype(np.int16)])
    shape = random_shape(d, max_rank=3)
    x = (rng.standard_normal(shape) * 50).astype(ft)
    attrs = {}
    if shape and d.chance(0.5):
        axis = d.int(-len(shape), len(shape) - 1)
        attrs["axis"] = axis
        n = shape[axis]
    elif len(shape) > 1 and d.chance(0.5):
        n = shape[1]
    else:
        n = None
    pshape = (n,) if n is not None else d.choice([(), (1,)])
    inputs = [x, _scale(d, rng, pshape, 0.01, 2.0, ft)]
    zero = d.chance(0.8)
    if zero:
        inputs.append(_ints(rng, pshape, qt))
    return _case("QuantizeLinear", inputs, {1, 2}, attrs, out=qt if zero else U8, optional={2})


@generator(MS, "DequantizeLinear")
def gen_ms_dequantize_linear(d: Draw, record) -> Case:
    rng = d.rng()
    ft = d.choice([F32, F16])
    qt = d.choice([U8, I8, np.dtype(np.uint16), np.dtype(np.int16), np.dtype(np.int32)])
    shape = random_shape(d, max_rank=3)
    attrs = {}
    if shape and d.chance(0.5):
        axis = d.int(-len(shape), len(shape) - 1)
        attrs["axis"] = axis
        pshape = (shape[axis],)
    else:
        pshape = d.choice([(), (1,)])
    inputs = [_ints(rng, shape, qt), _scale(d, rng, pshape, 0.001, 0.5, ft)]
    if d.chance(0.8):
        inputs.append(_ints(rng, pshape, qt))
    return _case("DequantizeLinear", inputs, {1, 2}, attrs, out=ft, optional={2})


@generator(MS, "QLinearAdd", "QLinearMul")
def gen_qlinear_binary(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    out = random_shape(d, max_rank=3)
    a_shape = tuple(s if d.chance(0.7) else 1 for s in out[d.int(0, len(out)):])
    b_shape = tuple(s if d.chance(0.7) else 1 for s in out[d.int(0, len(out)):])
    if d.chance(0.5):
        a_shape, b_shape = out, b_shape
    inputs = [_ints(rng, a_shape, qt), _scale(d, rng), _ints(rng, (), qt),
              _ints(rng, b_shape, qt), _scale(d, rng), _ints(rng, (), qt), _scale(d, rng),
              _ints(rng, (), qt)]
    return _case(record.op_type, inputs, {1, 2, 4, 5, 6, 7}, optional={2, 5, 7},
                 initializers=False)


def _with_y_zero_point(inputs):
    """ONNX Runtime 1.32 aborts on a QLinearSigmoid/LeakyRelu node that
    stops before Y_zero_point: its kernel reads an absent one as 0."""
    inputs = list(inputs) + [None] * (5 - len(inputs))
    if inputs[4] is None and isinstance(inputs[0], np.ndarray):
        inputs[4] = np.zeros((), inputs[0].dtype)
    return inputs


@generator(MS, "QLinearSigmoid", "QLinearLeakyRelu")
def gen_qlinear_lookup(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    inputs = [_ints(rng, random_shape(d, max_rank=3), qt), _scale(d, rng, (), 0.001, 0.2),
              _ints(rng, (), qt) if d.chance(0.8) else None, _scale(d, rng, (), 1 / 256, 0.05),
              _ints(rng, (), qt)]
    attrs = {"alpha": d.choice([0.01, 0.1, 0.5])} if record.op_type == "QLinearLeakyRelu" \
        and d.chance(0.5) else {}
    return _case(record.op_type, inputs, {1, 2, 3, 4}, attrs, optional={2, 4},
                 transform=_with_y_zero_point)


@generator(MS, "QLinearConcat")
def gen_qlinear_concat(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    base = list(random_shape(d, rank=d.int(1, 3)))
    axis = d.int(-len(base), len(base) - 1)
    sy, zy = _scale(d, rng), _ints(rng, (), qt)
    inputs, structural = [sy, zy], {0, 1}
    for _ in range(d.int(1, 3)):
        shape = list(base)
        shape[axis] = d.choice((0, 1, 2, 5))
        same = d.chance(0.3)
        inputs += [_ints(rng, tuple(shape), qt), sy.copy() if same else _scale(d, rng),
                   zy.copy() if same else _ints(rng, (), qt)]
        structural |= {len(inputs) - 2, len(inputs) - 1}
    return _case("QLinearConcat", inputs, structural, {"axis": axis}, out=qt, data=frozenset())


@generator(MS, "QLinearWhere")
def gen_qlinear_where(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    out = random_shape(d, max_rank=3)
    shapes = [tuple(s if d.chance(0.7) else 1 for s in out[d.int(0, len(out)):])
              for _ in range(3)]
    inputs = [rng.random(shapes[0]) < 0.5, _ints(rng, shapes[1], qt), _scale(d, rng),
              _ints(rng, (), qt), _ints(rng, shapes[2], qt), _scale(d, rng), _ints(rng, (), qt),
              _scale(d, rng), _ints(rng, (), qt)]
    return _case("QLinearWhere", inputs, {0, 2, 3, 5, 6, 7, 8}, out=qt)  # (0: data)


@generator(MS, "QLinearGlobalAveragePool")
def gen_qlinear_global_average_pool(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    shape = tuple(d.choice((1, 2, 3, 5, 8)) for _ in range(d.int(3, 4)))
    inputs = [_ints(rng, shape, qt), _scale(d, rng, (), 0.01, 0.1), _ints(rng, (), qt),
              _scale(d, rng, (), 0.01, 0.1), _ints(rng, (), qt)]
    attrs = {"channels_last": d.choice([0, 1])} if d.chance(0.6) else {}
    return _case("QLinearGlobalAveragePool", inputs, {1, 2, 3, 4}, attrs)


@generator(MS, "QLinearAveragePool")
def gen_qlinear_average_pool(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    n = d.int(1, 2)
    spatial = tuple(d.choice((3, 4, 5, 7, 9)) for _ in range(n))
    kernel = [d.int(1, s) for s in spatial]
    attrs = {"kernel_shape": kernel}
    if d.chance(0.5):
        attrs["strides"] = [d.int(1, 3) for _ in range(n)]
    if d.chance(0.4):
        attrs["pads"] = [d.int(0, k - 1) for k in kernel] * 2
    elif d.chance(0.3):
        attrs["auto_pad"] = d.choice(["VALID", "SAME_UPPER", "SAME_LOWER"])
    if d.chance(0.3):
        attrs["ceil_mode"] = 1
    if d.chance(0.5):
        attrs["count_include_pad"] = 1
    last = d.chance(0.3)
    if last:
        attrs["channels_last"] = 1
    lead = (d.choice((1, 2)), d.choice((1, 3)))
    shape = (lead[0],) + spatial + (lead[1],) if last else lead + spatial
    inputs = [_ints(rng, shape, qt), _scale(d, rng, (), 0.01, 0.1), _ints(rng, (), qt),
              _scale(d, rng, (), 0.01, 0.1), _ints(rng, (), qt)]
    return _case("QLinearAveragePool", inputs, {1, 2, 3, 4}, attrs, optional={2, 4},
                 initializers=False)


@generator(MS, "QLinearSoftmax")
def gen_qlinear_softmax(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    shape = random_shape(d, rank=d.int(1, 3))
    attrs = {"opset": d.choice([12, 13])}
    if d.chance(0.5):
        attrs["axis"] = d.int(-len(shape), len(shape) - 1)
    inputs = [_ints(rng, shape, qt), _scale(d, rng, (), 0.001, 0.2), _ints(rng, (), qt),
              np.array(d.choice([1 / 256, 0.004, 0.01]), F32), _ints(rng, (), qt)]
    return _case("QLinearSoftmax", inputs, {1, 2, 3, 4}, attrs, optional={2})


@generator(MS, "QGemm")
def gen_qgemm(d: Draw, record) -> Case:
    rng = d.rng()
    ta, tb = d.choice([(U8, U8), (U8, I8), (I8, I8)])
    M, K, N = d.choice(SIZES[1:]), d.choice(SIZES[1:]), d.choice(SIZES[1:])
    attrs = {}
    if d.chance(0.4):
        attrs["transA"] = d.choice([0, 1])
    if d.chance(0.4):
        attrs["transB"] = d.choice([0, 1])
    if d.chance(0.3):
        attrs["alpha"] = d.choice([0.5, 1.0, 2.0])
    a_shape = (K, M) if attrs.get("transA") else (M, K)
    b_shape = (N, K) if attrs.get("transB") else (K, N)
    pshape = (N,) if d.chance(0.5) else d.choice([(), (1,)])
    inputs = [_ints(rng, a_shape, ta), _scale(d, rng), _ints(rng, (), ta),
              quantized_weights(rng, b_shape, tb, ta), _scale(d, rng, pshape),
              _ints(rng, pshape, tb)]
    if d.chance(0.5):
        inputs.append(rng.integers(-5000, 5000, d.choice([(N,), (M, N), (M, 1), ()]))
                      .astype(np.int32))
    out = F32
    if d.chance(0.7):
        inputs += [None] * (7 - len(inputs)) + [_scale(d, rng, (), 0.05, 1.0)]
        if d.chance(0.7):
            inputs.append(_ints(rng, (), ta))
            out = ta
    return _case("QGemm", inputs, {1, 2, 4, 5, 7, 8}, attrs, out=out, optional={6, 7, 8})
