"""Schemas of the com.microsoft quantization family (issue 18).

For every operator: the record agrees with ONNX Runtime 1.32's schema (names,
order, optionality, attributes, defaults, types); single-node models of each
variant pass ``onnx.checker.check_model(full_check=True)`` and strict shape
inference with every output's type and shape inferred, equal to what the
kernel produces in a real run; symbolic dimensions are kept (and agree with
ONNX Runtime's SymbolicShapeInference where it has a handler); inconsistent
static shapes are inference errors naming the operator.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.schemas import custom_op_schemas, microsoft_quantization

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
U8, S8, F32, F16 = np.uint8, np.int8, np.float32, np.float16
BF16 = ml_dtypes.bfloat16
OPS = ("MatMulNBits", "GatherBlockQuantized", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
       "QGemm", "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu",
       "QLinearSoftmax", "QLinearConcat", "QLinearAveragePool", "QLinearGlobalAveragePool",
       "QLinearWhere", "QuantizeLinear", "DequantizeLinear")


# ------------------------------------------------------------------ builders

def elem(dtype) -> int:
    return oh.np_dtype_to_tensor_dtype(np.dtype(dtype))


def model_of(op, specs, attrs, name="y"):
    """One node; ``specs`` are (element type, shape) or None (left out)."""
    names = [f"x{i}" if s is not None else "" for i, s in enumerate(specs)]
    while names and not names[-1]:
        names.pop()
    graph = oh.make_graph(
        [oh.make_node(op, names, [name], domain=MS, **attrs)], op,
        [oh.make_tensor_value_info(n, s[0], s[1]) for n, s in zip(names, specs) if n],
        [oh.make_tensor_value_info(name, TP.UNDEFINED, None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                         ir_version=10)


def inferred(model):
    """(element type, dims) of the output after strict inference; the
    inferred model passes the full checker."""
    out = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    onnx.checker.check_model(out, full_check=True)
    t = out.graph.output[0].type.tensor_type
    dims = None
    if t.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else
                (d.dim_param if d.HasField("dim_param") else None) for d in t.shape.dim]
    return t.elem_type, dims


def real_run(op, arrays, attrs):
    model = model_of(op, [None if a is None else (elem(a.dtype), a.shape) for a in arrays], attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    feeds = {f"x{i}": a for i, a in enumerate(arrays) if a is not None}
    (y,) = sess.run(None, feeds)
    return y


def ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)


def scalar(v, dtype=F32):
    return np.array(v, dtype)


RNG = np.random.default_rng(18)


# --------------------------------------------------------------- static cases
# Each builder returns (inputs, attributes); the kernel must run them.

def nbits(M=(2, 3), K=64, N=8, bits=4, block=32, zp=None, g_idx=False, bias=False,
          dtype=F32, flat=False, empty=False, **extra):
    blocks = -(-K // block)
    blob = 12 if bits == 3 else block * bits // 8
    a = RNG.standard_normal(M + (K,)).astype(dtype)
    b = np.zeros((0 if empty else N, blocks, blob), U8)
    scales = np.full((0,) if empty else (N * blocks,) if flat else (N, blocks), 0.5, dtype)
    inputs = [a, b, scales, None, None, None]
    if zp == "uint8":
        width = blocks if bits in (3, 8) else -(-blocks * bits // 8)
        inputs[3] = np.zeros((N, width), U8)
    elif zp == "float":
        inputs[3] = np.zeros((N, blocks), dtype)
    if g_idx:
        inputs[4] = (np.arange(K) // block).astype(np.int32)
    if bias:
        inputs[5] = np.ones(N, dtype)
    return inputs, dict(K=K, N=N, bits=bits, block_size=block, **extra)


def gbq(data_shape=(10, 16), idx=(2, 3), bits=4, block=16, zp=False, scale=F32, **extra):
    data = RNG.integers(0, 256, data_shape, dtype=U8)
    D = data_shape[-1] * (8 // bits)
    groups = -(-D // block)
    inputs = [data, RNG.integers(0, data_shape[0], idx).astype(np.int64),
              np.ones(data_shape[:-1] + (groups,), scale)]
    if zp:
        inputs.append(np.zeros(data_shape[:-1] + (-(-groups * bits // 8),), U8))
    return inputs, dict(bits=bits, block_size=block, **extra)


def gbq_typed(dtype, data_shape, scale_shape, idx, g=0, q=1, block=16, zp=False, **extra):
    data = np.zeros(data_shape, dtype)
    inputs = [data, np.zeros(idx, np.int32), np.ones(scale_shape, F32)]
    if zp:
        inputs.append(np.zeros(scale_shape, dtype))
    return inputs, dict(gather_axis=g, quantize_axis=q, block_size=block, **extra)


def dqmm(a=(2, 3, 4), b=(4, 5), zp=False, bias=False, b_scale=()):
    inputs = [RNG.standard_normal(a).astype(F32), ints(RNG, b, U8),
              np.full(b_scale, 0.1, F32), ints(RNG, b_scale, U8) if zp else None,
              np.ones(b[-1], F32) if bias else None]
    return inputs, {}


def mitf(a=(2, 3, 4), b=(4, 5), at=U8, bt=S8, st=F32, zp=False, bias=False, b_scale=()):
    inputs = [ints(RNG, a, at), ints(RNG, b, bt), scalar(0.1, st), np.full(b_scale, 0.2, st),
              ints(RNG, (), at) if zp else None, ints(RNG, b_scale, bt) if zp else None,
              np.ones(b[-1], st) if bias else None]
    return inputs, {}


def qgemm(M=3, K=4, N=5, trans=(0, 0), c=None, out="quantized", per_column=False,
          at=U8, bt=S8):
    a = ints(RNG, (K, M) if trans[0] else (M, K), at)
    b = ints(RNG, (N, K) if trans[1] else (K, N), bt)
    sb = np.full(N, 0.01, F32) if per_column else scalar(0.01)
    inputs = [a, scalar(0.02), ints(RNG, (), at), b, sb, ints(RNG, sb.shape, bt),
              None if c is None else ints(RNG, c, np.int32)]
    if out == "quantized":
        inputs += [scalar(0.5), ints(RNG, (), U8)]
    elif out == "float":
        inputs += [scalar(0.5)]
    return inputs, dict(transA=trans[0], transB=trans[1])


def qbinary(a, b, qt=U8, zps=True):
    z = (lambda: ints(RNG, (), qt)) if zps else (lambda: None)
    return [ints(RNG, a, qt), scalar(0.05), z(), ints(RNG, b, qt), scalar(0.02), z(),
            scalar(0.1), z()], {}


def qlookup(x, qt=U8, zps=True, **attrs):
    return [ints(RNG, x, qt), scalar(0.05), ints(RNG, (), qt) if zps else None, scalar(0.01),
            ints(RNG, (), qt) if zps else None], attrs


def qsoftmax(x, qt=U8, **attrs):
    return [ints(RNG, x, qt), scalar(0.05), ints(RNG, (), qt), scalar(1 / 256),
            np.array(0, qt)], attrs


def qconcat(shapes, axis, qt=U8):
    inputs = [scalar(0.05), ints(RNG, (), qt)]
    for s in shapes:
        inputs += [ints(RNG, s, qt), scalar(0.1), ints(RNG, (), qt)]
    return inputs, dict(axis=axis)


def qpool(x, qt=U8, zps=True, **attrs):
    return [ints(RNG, x, qt), scalar(0.05), ints(RNG, (), qt) if zps else None, scalar(0.04),
            ints(RNG, (), qt) if zps else None], attrs


def qglobal(x, qt=U8, **attrs):
    return [ints(RNG, x, qt), scalar(0.05), ints(RNG, (), qt), scalar(0.04),
            ints(RNG, (), qt)], attrs


def qwhere(c, x, y, qt=U8):
    return [RNG.random(c) > 0.5, ints(RNG, x, qt), scalar(0.04), ints(RNG, (), qt),
            ints(RNG, y, qt), scalar(0.1), ints(RNG, (), qt), scalar(0.07),
            ints(RNG, (), qt)], {}


def quantize(x=(2, 3, 4), scale=(), zp=U8, ft=F32, **attrs):
    zero = None if zp is None else np.zeros(scale, zp)
    return [RNG.standard_normal(x).astype(ft), np.full(scale, 0.1, ft), zero], attrs


def dequantize(x=(2, 3, 4), xt=U8, scale=(), zp=True, st=F32, **attrs):
    return [np.zeros(x, xt), np.full(scale, 0.1, st), np.zeros(scale, xt) if zp else None], attrs


STATIC = {
    # MatMulNBits: every leading dimension of A kept, the last replaced by N
    "nbits-4bit": ("MatMulNBits", lambda: nbits()),
    "nbits-rank1": ("MatMulNBits", lambda: nbits(M=())),
    "nbits-rank4": ("MatMulNBits", lambda: nbits(M=(2, 1, 3), K=40, N=3)),
    "nbits-uint8-zp-bias": ("MatMulNBits", lambda: nbits(zp="uint8", bias=True, K=100)),
    "nbits-float-zp-flat": ("MatMulNBits", lambda: nbits(zp="float", flat=True)),
    "nbits-g_idx": ("MatMulNBits", lambda: nbits(g_idx=True)),
    "nbits-2bit": ("MatMulNBits", lambda: nbits(bits=2, block=16, zp="uint8")),
    "nbits-8bit": ("MatMulNBits", lambda: nbits(bits=8, block=64, zp="uint8")),
    "nbits-3bit": ("MatMulNBits", lambda: nbits(bits=3, zp="uint8", K=70)),
    "nbits-float16": ("MatMulNBits", lambda: nbits(dtype=F16, bias=True)),
    "nbits-bfloat16": ("MatMulNBits", lambda: nbits(dtype=BF16)),
    "nbits-omitted-B": ("MatMulNBits", lambda: nbits(empty=True, bias=True)),
    "nbits-int8-engine": ("MatMulNBits", lambda: nbits(zp="uint8", accuracy_level=4)),
    # GatherBlockQuantized, packed uint8
    "gbq-4bit": ("GatherBlockQuantized", lambda: gbq()),
    "gbq-2bit-zp": ("GatherBlockQuantized", lambda: gbq(bits=2, zp=True)),
    "gbq-8bit-f16": ("GatherBlockQuantized", lambda: gbq(bits=8, scale=F16, block=32)),
    "gbq-rank3": ("GatherBlockQuantized", lambda: gbq((6, 3, 16), idx=(4,), zp=True,
                                                                  quantize_axis=-1)),
    "gbq-scalar-index": ("GatherBlockQuantized", lambda: gbq(idx=())),
    # typed data
    "gbq-int4": ("GatherBlockQuantized",
                 lambda: gbq_typed(ml_dtypes.int4, (8, 32), (8, 2), (3,), zp=True, bits=4)),
    "gbq-uint4-gather1": ("GatherBlockQuantized",
                          lambda: gbq_typed(ml_dtypes.uint4, (8, 32), (8, 2), (2, 2), g=1)),
    "gbq-int4-q0": ("GatherBlockQuantized",
                    lambda: gbq_typed(ml_dtypes.int4, (40, 6), (3, 6), (2,), g=1, q=0)),
    "gbq-float8-block0": ("GatherBlockQuantized",
                          lambda: gbq_typed(ml_dtypes.float8_e4m3fn, (5, 4, 20), (5, 1, 1),
                                            (2,), q=-1, block=0)),
    "gbq-float4-rank1": ("GatherBlockQuantized",
                         lambda: gbq_typed(ml_dtypes.float4_e2m1fn, (40,), (3,), (2, 2), q=0)),
    # DynamicQuantizeMatMul, MatMulIntegerToFloat: numpy.matmul shapes
    "dqmm-3d": ("DynamicQuantizeMatMul", lambda: dqmm(zp=True, bias=True)),
    "dqmm-1d-a": ("DynamicQuantizeMatMul", lambda: dqmm(a=(4,))),
    "dqmm-1d-b": ("DynamicQuantizeMatMul", lambda: dqmm(b=(4,))),
    "dqmm-batch-b": ("DynamicQuantizeMatMul", lambda: dqmm(a=(3, 4), b=(2, 4, 5), bias=True)),
    "dqmm-column": ("DynamicQuantizeMatMul", lambda: dqmm(b_scale=(5,), zp=True)),
    "mitf-u8s8": ("MatMulIntegerToFloat", lambda: mitf(zp=True, bias=True)),
    "mitf-f16": ("MatMulIntegerToFloat", lambda: mitf(st=F16, bias=True)),
    "mitf-column": ("MatMulIntegerToFloat", lambda: mitf(b_scale=(5,), zp=True)),
    "mitf-batch-column": ("MatMulIntegerToFloat", lambda: mitf(a=(3, 4), b=(2, 4, 5),
                                                                b_scale=(2, 1, 5), zp=True)),
    "mitf-s8u8-batch": ("MatMulIntegerToFloat", lambda: mitf(a=(2, 1, 3, 4), b=(5, 4, 6),
                                                              at=S8, bt=U8)),
    # QGemm
    "qgemm-quantized": ("QGemm", lambda: qgemm()),
    "qgemm-transA-C": ("QGemm", lambda: qgemm(trans=(1, 0), c=(5,))),
    "qgemm-transB-float": ("QGemm", lambda: qgemm(trans=(0, 1), out="float", c=(3, 1))),
    "qgemm-both-no-y": ("QGemm", lambda: qgemm(trans=(1, 1), out=None, per_column=True)),
    "qgemm-int8-out": ("QGemm", lambda: qgemm(at=S8, c=(3, 5))),
    # element-wise
    "qadd-broadcast": ("QLinearAdd", lambda: qbinary((5, 1, 3), (4, 1))),
    "qadd-scalar-int8": ("QLinearAdd", lambda: qbinary((4, 3), (), S8)),
    "qadd-no-zp": ("QLinearAdd", lambda: qbinary((2, 3), (3,), zps=False)),
    "qmul-broadcast": ("QLinearMul", lambda: qbinary((1, 3), (4, 1), S8)),
    "qmul-no-zp": ("QLinearMul", lambda: qbinary((7,), (2, 1, 7), zps=False)),
    "qsigmoid": ("QLinearSigmoid", lambda: qlookup((3, 4, 5))),
    "qsigmoid-no-zp": ("QLinearSigmoid", lambda: qlookup((6,), S8, zps=False)),
    "qleakyrelu": ("QLinearLeakyRelu", lambda: qlookup((2, 7), S8, alpha=0.2)),
    "qleakyrelu-default": ("QLinearLeakyRelu", lambda: qlookup((2, 7), zps=False)),
    "qsoftmax-13": ("QLinearSoftmax", lambda: qsoftmax((2, 3, 7), opset=13, axis=1)),
    "qsoftmax-12": ("QLinearSoftmax", lambda: qsoftmax((2, 3, 7), S8, opset=12)),
    "qconcat-axis1": ("QLinearConcat", lambda: qconcat([(3, 2, 5), (3, 1, 5), (3, 4, 5)], 1)),
    "qconcat-axis-neg": ("QLinearConcat", lambda: qconcat([(2, 3), (2, 5)], -1, S8)),
    "qconcat-one": ("QLinearConcat", lambda: qconcat([(4,)], 0)),
    "qwhere": ("QLinearWhere", lambda: qwhere((3, 1, 5), (4, 5), (1,))),
    "qwhere-scalar": ("QLinearWhere", lambda: qwhere((), (2, 3), (3,), S8)),
    # pooling
    "qglobal": ("QLinearGlobalAveragePool", lambda: qglobal((2, 3, 5, 7))),
    "qglobal-last": ("QLinearGlobalAveragePool", lambda: qglobal((2, 5, 7, 3), S8,
                                                                  channels_last=1)),
    "qglobal-1d": ("QLinearGlobalAveragePool", lambda: qglobal((1, 4, 9))),
    "qpool-3x3": ("QLinearAveragePool", lambda: qpool((1, 3, 7, 9), kernel_shape=[3, 3])),
    "qpool-strides": ("QLinearAveragePool", lambda: qpool((2, 2, 8, 8), kernel_shape=[2, 2],
                                                          strides=[2, 2])),
    "qpool-pads": ("QLinearAveragePool", lambda: qpool((1, 3, 7, 9), S8, kernel_shape=[3, 2],
                                                       pads=[1, 0, 1, 1], count_include_pad=1)),
    "qpool-ceil": ("QLinearAveragePool", lambda: qpool((1, 2, 7, 9), kernel_shape=[3, 3],
                                                       strides=[2, 2], ceil_mode=1)),
    "qpool-ceil-pads": ("QLinearAveragePool",
                        lambda: qpool((1, 2, 6, 6), kernel_shape=[3, 3], strides=[2, 2],
                                      ceil_mode=1, pads=[1, 1, 1, 1])),
    "qpool-same-upper": ("QLinearAveragePool",
                         lambda: qpool((1, 2, 7, 9), kernel_shape=[3, 3], strides=[2, 2],
                                       auto_pad="SAME_UPPER")),
    "qpool-same-lower": ("QLinearAveragePool",
                         lambda: qpool((1, 2, 7, 9), kernel_shape=[2, 4], auto_pad="SAME_LOWER")),
    "qpool-valid": ("QLinearAveragePool", lambda: qpool((1, 2, 7, 9), kernel_shape=[3, 3],
                                                        auto_pad="VALID", strides=[2, 1])),
    "qpool-valid-ceil": ("QLinearAveragePool",
                         lambda: qpool((1, 3, 7, 4), kernel_shape=[2, 3], strides=[1, 3],
                                       auto_pad="VALID", ceil_mode=1)),
    "qpool-1d": ("QLinearAveragePool", lambda: qpool((1, 4, 10), kernel_shape=[3],
                                                     strides=[2], pads=[1, 1])),
    "qpool-3d": ("QLinearAveragePool", lambda: qpool((1, 2, 4, 5, 6), kernel_shape=[2, 3, 2],
                                                     pads=[0, 1, 1, 1, 0, 0])),
    "qpool-last": ("QLinearAveragePool", lambda: qpool((1, 7, 9, 3), kernel_shape=[3, 3],
                                                       channels_last=1, pads=[1, 1, 1, 1])),
    "qpool-no-zp": ("QLinearAveragePool", lambda: qpool((1, 10, 3), kernel_shape=[4],
                                                        channels_last=1, zps=False)),
    # QuantizeLinear, DequantizeLinear (com.microsoft)
    "quantize-tensor": ("QuantizeLinear", lambda: quantize()),
    "quantize-no-zp": ("QuantizeLinear", lambda: quantize(zp=None)),
    "quantize-axis": ("QuantizeLinear", lambda: quantize(scale=(3,), zp=S8)),
    "quantize-axis-neg-f16": ("QuantizeLinear", lambda: quantize(scale=(4,), ft=F16,
                                                                 zp=np.int16, axis=-1)),
    "quantize-int4": ("QuantizeLinear", lambda: quantize(scale=(1,), zp=ml_dtypes.int4)),
    "quantize-uint16": ("QuantizeLinear", lambda: quantize(zp=np.uint16, axis=0)),
    "dequantize-tensor": ("DequantizeLinear", lambda: dequantize()),
    "dequantize-axis": ("DequantizeLinear", lambda: dequantize(scale=(3,), xt=S8)),
    "dequantize-int32-f16": ("DequantizeLinear", lambda: dequantize(xt=np.int32, st=F16,
                                                                    zp=False)),
    "dequantize-uint4-axis0": ("DequantizeLinear",
                               lambda: dequantize(xt=ml_dtypes.uint4, scale=(2,), axis=0)),
}


@pytest.mark.parametrize("case", list(STATIC))
def test_static_shapes_equal_a_real_run(case):
    op, build = STATIC[case]
    arrays, attrs = build()
    model = model_of(op, [None if a is None else (elem(a.dtype), a.shape) for a in arrays],
                     attrs)
    got_type, got_dims = inferred(model)
    y = real_run(op, arrays, attrs)
    assert got_type == elem(y.dtype), (TP.DataType.Name(got_type), y.dtype)
    assert got_dims == list(y.shape)


def test_every_operator_has_a_static_case():
    assert {op for op, _ in STATIC.values()} == set(OPS)


# ------------------------------------------------------------- symbolic shapes

F, U, I8, I4 = TP.FLOAT, TP.UINT8, TP.INT8, TP.INT4


def _nbits_specs(a, dtype=F):
    return [(dtype, a), (U, [8, 2, 16]), (dtype, [8, 2])]


def _pool(x, qt=U):
    return [(qt, x), (F, []), (qt, []), (F, []), (qt, [])]


def _binary(a, b, qt=U):
    return [(qt, a), (F, []), (qt, []), (qt, b), (F, []), (qt, []), (F, []), (qt, [])]


def _concat(*shapes):
    specs = [(F, []), (I8, [])]
    for s in shapes:
        specs += [(I8, s), (F, []), (I8, [])]
    return specs


SYMBOLIC = {
    "nbits": ("MatMulNBits", _nbits_specs(["batch", "seq", 64]), dict(K=64, N=8, block_size=32),
              (F, ["batch", "seq", 8])),
    "nbits-symbolic-K": ("MatMulNBits", _nbits_specs(["b", "k"], TP.FLOAT16),
                         dict(K=64, N=8, block_size=32), (TP.FLOAT16, ["b", 8])),
    "nbits-rank1": ("MatMulNBits", _nbits_specs([64]), dict(K=64, N=8, block_size=32),
                    (F, [8])),
    "gbq-packed": ("GatherBlockQuantized", [(U, ["vocab", 16]), (TP.INT64, ["batch", "seq"]),
                                            (TP.FLOAT16, ["vocab", 1])],
                   dict(block_size=32), (TP.FLOAT16, ["batch", "seq", 32])),
    "gbq-packed-symbolic-width": ("GatherBlockQuantized",
                                  [(U, ["V", "P"]), (TP.INT32, ["n"]), (F, ["V", "G"])],
                                  dict(bits=2), (F, ["n", "P*4"])),
    "gbq-int4": ("GatherBlockQuantized",
                 [(I4, ["rows", 64]), (TP.INT32, ["b", "s"]), (F, ["rows", 4]), (I4, ["rows", 4])],
                 dict(block_size=16), (F, ["b", "s", 64])),
    "gbq-int4-gather1": ("GatherBlockQuantized",
                         [(I4, ["rows", 64]), (TP.INT64, ["n"]), (TP.BFLOAT16, ["rows", 4])],
                         dict(gather_axis=1, block_size=16),
                         (TP.BFLOAT16, ["rows", "n"])),
    "dqmm": ("DynamicQuantizeMatMul", [(F, ["b", "s", 4]), (U, [4, 5]), (F, [])], {},
             (F, ["b", "s", 5])),
    "dqmm-batch": ("DynamicQuantizeMatMul", [(F, ["b", 1, "s", 4]), (I8, ["h", 4, "n"]),
                                             (F, [])], {}, (F, ["b", "h", "s", "n"])),
    "mitf": ("MatMulIntegerToFloat", [(U, ["b", "s", "k"]), (I8, ["k", "n"]),
                                      (TP.FLOAT16, []), (TP.FLOAT16, [])], {},
             (TP.FLOAT16, ["b", "s", "n"])),
    "qgemm": ("QGemm", [(U, ["m", 4]), (F, []), (U, []), (I8, [4, "n"]), (F, []), (I8, [])],
              {}, (F, ["m", "n"])),
    "qgemm-trans": ("QGemm", [(U, [4, "m"]), (F, []), (U, []), (I8, ["n", 4]), (F, []),
                              (I8, []), None, (F, []), (I8, [])],
                    dict(transA=1, transB=1), (I8, ["m", "n"])),
    "qadd": ("QLinearAdd", _binary(["b", "s", 8], [8]), {}, (U, ["b", "s", 8])),
    "qadd-symbolic-broadcast": ("QLinearAdd", _binary(["b", 1], [1, "n"]), {},
                                (U, ["b", "n"])),
    "qmul": ("QLinearMul", _binary(["b", 1, "s"], [3, 1], TP.INT8), {},
             (TP.INT8, ["b", 3, "s"])),
    "qsigmoid": ("QLinearSigmoid", _pool(["b", "s"]), {}, (U, ["b", "s"])),
    "qleakyrelu": ("QLinearLeakyRelu", _pool(["b", 7], I8), {}, (I8, ["b", 7])),
    "qsoftmax": ("QLinearSoftmax", _pool(["b", "s", "t"]), dict(opset=13),
                 (U, ["b", "s", "t"])),
    "qconcat": ("QLinearConcat", _concat(["b", "s1", 4], ["b", "s2", 4], ["b", 3, 4]),
                dict(axis=1), (I8, ["b", "s1+s2+3", 4])),
    "qwhere": ("QLinearWhere", [(TP.BOOL, ["b", 1, "s"]), (U, [1, 4, 1]), (F, []), (U, []),
                                (U, ["s"]), (F, []), (U, []), (F, []), (U, [])], {},
               (U, ["b", 4, "s"])),
    "qglobal": ("QLinearGlobalAveragePool", _pool(["N", "C", "H", "W"]), {},
                (U, ["N", "C", 1, 1])),
    "qglobal-last": ("QLinearGlobalAveragePool", _pool(["N", "H", "W", "C"]),
                     dict(channels_last=1), (U, ["N", 1, 1, "C"])),
    "qpool-same-size": ("QLinearAveragePool", _pool(["N", 3, "H", "W"]),
                        dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), (U, ["N", 3, "H", "W"])),
    "qpool-same-upper": ("QLinearAveragePool", _pool(["N", "H", 9, 4], I8),
                         dict(kernel_shape=[2, 2], auto_pad="SAME_UPPER", strides=[1, 2],
                              channels_last=1),
                         (I8, ["N", "H", 5, 4])),
    "quantize": ("QuantizeLinear", [(F, ["b", "s", 8]), (F, [8]), (I8, [8])], dict(axis=-1),
                 (I8, ["b", "s", 8])),
    "quantize-no-zp": ("QuantizeLinear", [(TP.FLOAT16, ["b", "s"]), (TP.FLOAT16, [])], {},
                       (U, ["b", "s"])),
    "dequantize": ("DequantizeLinear", [(TP.INT32, ["b", 3]), (TP.FLOAT16, [3])], {},
                   (TP.FLOAT16, ["b", 3])),
}


@pytest.mark.parametrize("case", list(SYMBOLIC))
def test_symbolic_dims_are_kept(case):
    op, specs, attrs, want = SYMBOLIC[case]
    assert inferred(model_of(op, specs, attrs)) == (want[0], want[1])


def test_symbolic_dims_without_a_name_stay_unknown():
    """Two different symbolic dims broadcast, a strided pool over a symbolic
    size: the rank and element type are inferred, the dim left unknown (onnx
    names an unknown output dim "unk__<n>")."""
    def unknown(d):
        return d is None or d.startswith("unk__")

    elem_type, dims = inferred(model_of("QLinearAdd", _binary(["a"], ["b"]), {}))
    assert elem_type == U and len(dims) == 1 and unknown(dims[0])
    elem_type, dims = inferred(model_of("QLinearAveragePool", _pool(["N", 3, "H", 8]),
                                        dict(kernel_shape=[2, 2], strides=[2, 2])))
    assert elem_type == U and dims[:2] == ["N", 3] and unknown(dims[2]) and dims[3] == 4


def test_every_operator_has_a_symbolic_case():
    assert {SYMBOLIC[c][0] for c in SYMBOLIC} == set(OPS)


# ONNX Runtime's symbolic shape inference has its own handlers for these;
# on the others it falls back to onnx (that is, to our schemas).
SSI_CASES = ["nbits", "nbits-symbolic-K", "nbits-rank1", "gbq-int4", "qadd",
             "qadd-symbolic-broadcast", "qmul", "quantize", "quantize-no-zp", "dequantize"]


@pytest.mark.parametrize("case", SSI_CASES)
def test_agrees_with_onnxruntime_symbolic_shape_inference(case):
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    op, specs, attrs, want = SYMBOLIC[case]
    model = model_of(op, specs, attrs)
    theirs = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    t = theirs.graph.output[0].type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
    assert (t.elem_type, dims) == inferred(model)


def _ssi_dims(model):
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    theirs = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    return [d.dim_value or d.dim_param for d in theirs.graph.output[0].type.tensor_type.shape.dim]


def test_where_onnxruntime_symbolic_inference_differs_on_gather_block_quantized():
    """ONNX Runtime's SymbolicShapeInference treats GatherBlockQuantized as a
    Gather: for packed uint8 data it keeps the last dimension P (the packed
    bytes) where the kernel gives D = P * 8 / bits codes, and it reads an
    ``axis`` attribute, not ``gather_axis``.  Ours follows the kernel."""
    op, specs, attrs, want = SYMBOLIC["gbq-packed"]
    model = model_of(op, specs, attrs)
    assert _ssi_dims(model) == ["batch", "seq", 16]
    assert inferred(model)[1] == want[1] == ["batch", "seq", 32]
    op, specs, attrs, want = SYMBOLIC["gbq-int4-gather1"]
    model = model_of(op, specs, attrs)
    assert _ssi_dims(model) == ["n", 64]
    assert inferred(model)[1] == want[1] == ["rows", "n"]
    # what the kernel gives in both cases
    arrays, attrs = gbq_typed(ml_dtypes.int4, (3, 64), (3, 4), (5,), g=1)
    assert real_run(op, arrays, attrs).shape == (3, 5)
    arrays, attrs = gbq((4, 16), idx=(2, 3), block=32)
    assert real_run(op, arrays, attrs).shape == (2, 3, 32)


# ------------------------------------------------------- bad static shapes

BAD = {
    "nbits-A-last": ("MatMulNBits", [(F, [2, 60]), (U, [8, 2, 16]), (F, [8, 2])],
                     dict(K=64, N=8, block_size=32), "input 'A'"),
    "nbits-A-scalar": ("MatMulNBits", [(F, []), (U, [8, 2, 16]), (F, [8, 2])],
                       dict(K=64, N=8, block_size=32), "input 'A'"),
    "nbits-B": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 8]), (F, [8, 2])],
                dict(K=64, N=8, block_size=32), "input 'B'"),
    "nbits-B-rank": ("MatMulNBits", [(F, [2, 64]), (U, [8, 32]), (F, [8, 2])],
                     dict(K=64, N=8, block_size=32), "input 'B'"),
    "nbits-scales": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 16]), (F, [8, 3])],
                     dict(K=64, N=8, block_size=32), "input 'scales'"),
    "nbits-zp-uint8": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 16]), (F, [8, 2]), (U, [8, 2])],
                       dict(K=64, N=8, block_size=32), "input 'zero_points'"),
    "nbits-zp-float": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 16]), (F, [8, 2]), (F, [8, 1])],
                       dict(K=64, N=8, block_size=32), "input 'zero_points'"),
    "nbits-zp-type": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 16]), (F, [8, 2]),
                                      (TP.FLOAT16, [8, 2])],
                      dict(K=64, N=8, block_size=32), "input 'zero_points'"),
    "nbits-g_idx": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 16]), (F, [8, 2]), None,
                                    (TP.INT32, [63])],
                    dict(K=64, N=8, block_size=32), "input 'g_idx'"),
    "nbits-bias": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 16]), (F, [8, 2]), None, None,
                                   (F, [9])], dict(K=64, N=8, block_size=32), "input 'bias'"),
    "nbits-bits": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 16]), (F, [8, 2])],
                   dict(K=64, N=8, block_size=32, bits=5), "bits"),
    "nbits-block": ("MatMulNBits", [(F, [2, 64]), (U, [8, 2, 16]), (F, [8, 2])],
                    dict(K=64, N=8, block_size=24), "block_size"),
    "gbq-scales": ("GatherBlockQuantized", [(U, [10, 16]), (TP.INT64, [3]), (F, [10, 2])], {},
                   "input 'scales'"),
    "gbq-zp": ("GatherBlockQuantized", [(U, [10, 16]), (TP.INT64, [3]), (F, [10, 1]),
                                        (U, [10, 2])], {}, "input 'zero_points'"),
    "gbq-rank1": ("GatherBlockQuantized", [(U, [16]), (TP.INT64, [3]), (F, [1])], {},
                  "input 'data'"),
    "gbq-gather-axis": ("GatherBlockQuantized", [(U, [10, 16]), (TP.INT64, [3]), (F, [10, 1])],
                        dict(gather_axis=1), "gather_axis"),
    "gbq-bits": ("GatherBlockQuantized", [(U, [10, 16]), (TP.INT64, [3]), (F, [10, 1])],
                 dict(bits=3), "bits"),
    "gbq-int4-scales": ("GatherBlockQuantized", [(I4, [8, 32]), (TP.INT64, [3]), (F, [8, 3])],
                        dict(block_size=16), "input 'scales'"),
    "gbq-int4-scales-rows": ("GatherBlockQuantized",
                             [(I4, [8, 32]), (TP.INT64, [3]), (F, [1, 2])],
                             dict(block_size=16), "input 'scales'"),
    "gbq-int4-zp": ("GatherBlockQuantized", [(I4, [8, 32]), (TP.INT64, [3]), (F, [8, 2]),
                                             (I4, [8, 1])], dict(block_size=16),
                    "input 'zero_points'"),
    "gbq-float8-zp": ("GatherBlockQuantized",
                      [(TP.FLOAT8E4M3FN, [8, 32]), (TP.INT64, [3]), (F, [8, 2]),
                       (TP.FLOAT8E4M3FN, [8, 2])], dict(block_size=16), "input 'zero_points'"),
    "gbq-int4-axis": ("GatherBlockQuantized", [(I4, [8, 32]), (TP.INT64, [3]), (F, [8, 2])],
                      dict(block_size=16, quantize_axis=2), "quantize_axis"),
    "dqmm-K": ("DynamicQuantizeMatMul", [(F, [2, 3, 4]), (U, [5, 6]), (F, [])], {}, "input 'B'"),
    "dqmm-batch": ("DynamicQuantizeMatMul", [(F, [2, 3, 4]), (U, [3, 4, 6]), (F, [])], {},
                   "input 'B'"),
    "dqmm-bias": ("DynamicQuantizeMatMul", [(F, [3, 4]), (U, [4, 6]), (F, []), None, (F, [5])],
                  {}, "input 'bias'"),
    "dqmm-scalar": ("DynamicQuantizeMatMul", [(F, []), (U, [4, 6]), (F, [])], {}, "input 'A'"),
    "mitf-K": ("MatMulIntegerToFloat", [(U, [3, 4]), (I8, [5, 6]), (F, []), (F, [])], {},
               "input 'B'"),
    "mitf-a-zp": ("MatMulIntegerToFloat", [(U, [3, 4]), (I8, [4, 6]), (F, []), (F, []),
                                           (U, [3])], {}, "input 'a_zero_point'"),
    "qgemm-rank": ("QGemm", [(U, [2, 3, 4]), (F, []), (U, []), (I8, [4, 5]), (F, []), (I8, [])],
                   {}, "input 'A'"),
    "qgemm-K": ("QGemm", [(U, [3, 4]), (F, []), (U, []), (I8, [4, 5]), (F, []), (I8, [])],
                dict(transA=1), "input 'B'"),
    "qgemm-C": ("QGemm", [(U, [3, 4]), (F, []), (U, []), (I8, [4, 5]), (F, []), (I8, []),
                          (TP.INT32, [3, 4])], {}, "input 'C'"),
    "qgemm-b-scale": ("QGemm", [(U, [3, 4]), (F, []), (U, []), (I8, [4, 5]), (F, [3]),
                                (I8, [])], {}, "input 'b_scale'"),
    "qgemm-b-zp": ("QGemm", [(U, [3, 4]), (F, []), (U, []), (I8, [4, 5]), (F, [5]),
                             (I8, [])], {}, "input 'b_zero_point'"),
    "qgemm-a-scale": ("QGemm", [(U, [3, 4]), (F, [3]), (U, []), (I8, [4, 5]), (F, []),
                                (I8, [])], {}, "input 'a_scale'"),
    "qadd-broadcast": ("QLinearAdd", _binary([3, 4], [5]), {}, "does not broadcast"),
    "qadd-scale": ("QLinearAdd", [(U, [3]), (F, [2]), None, (U, [3]), (F, []), None, (F, [])],
                   {}, "input 'A_scale'"),
    "qmul-zp": ("QLinearMul", [(U, [3]), (F, []), (U, [1, 1]), (U, [3]), (F, []), None,
                               (F, [])], {}, "input 'A_zero_point'"),
    "qsigmoid-zp": ("QLinearSigmoid", [(U, [3]), (F, []), (U, [2]), (F, [])], {},
                    "input 'X_zero_point'"),
    "qleakyrelu-scale": ("QLinearLeakyRelu", [(U, [3]), (F, []), None, (F, [4])], {},
                         "input 'Y_scale'"),
    "qsoftmax-axis": ("QLinearSoftmax", _pool([2, 3]), dict(opset=13, axis=2), "axis"),
    "qconcat-dims": ("QLinearConcat", _concat([2, 3, 4], [2, 5, 5]), dict(axis=1),
                     "outside axis"),
    "qconcat-rank": ("QLinearConcat", _concat([2, 3], [2, 3, 1]), dict(axis=0), "rank"),
    "qconcat-axis": ("QLinearConcat", _concat([2, 3], [2, 3]), dict(axis=2), "axis"),
    "qconcat-triples": ("QLinearConcat", _concat([2, 3])[:4], dict(axis=0), "triples"),
    "qconcat-type": ("QLinearConcat", [(F, []), (U, []), (I8, [2]), (F, []), (I8, [])],
                     dict(axis=0), "element type"),
    "qwhere": ("QLinearWhere", [(TP.BOOL, [3]), (U, [4]), (F, []), (U, []), (U, [4]),
                                (F, []), (U, []), (F, []), (U, [])], {}, "does not broadcast"),
    "qglobal-rank": ("QLinearGlobalAveragePool", _pool([2, 3]), {}, "input 'X'"),
    "qglobal-empty": ("QLinearGlobalAveragePool", _pool([2, 3, 0, 4]), {}, "empty"),
    "qglobal-large": ("QLinearGlobalAveragePool", _pool(["N", 3, 4096, 4096]), {}, "2^24"),
    "qpool-rank": ("QLinearAveragePool", _pool([2, 3, 4, 5, 6, 7]),
                   dict(kernel_shape=[1, 1, 1, 1]), "input 'X'"),
    "qpool-kernel-length": ("QLinearAveragePool", _pool([1, 2, 7, 9]), dict(kernel_shape=[3]),
                            "kernel_shape"),
    "qpool-fit": ("QLinearAveragePool", _pool([1, 2, 3, 9]), dict(kernel_shape=[4, 3]),
                  "does not fit"),
    "qpool-pads": ("QLinearAveragePool", _pool([1, 2, 7, 9]),
                   dict(kernel_shape=[2, 2], pads=[2, 0, 0, 0]), "pads"),
    "qpool-auto-pad": ("QLinearAveragePool", _pool([1, 2, 7, 9]),
                       dict(kernel_shape=[2, 2], auto_pad="SAME"), "auto_pad"),
    "quantize-axis-length": ("QuantizeLinear", [(F, [2, 3, 4]), (F, [4]), (U, [4])], {},
                             "input 'y_scale'"),
    "quantize-zp": ("QuantizeLinear", [(F, [2, 3, 4]), (F, [3]), (U, [2])], {},
                    "input 'y_zero_point'"),
    "quantize-zp-tensor": ("QuantizeLinear", [(F, [2, 3]), (F, []), (U, [3])], {},
                           "input 'y_zero_point'"),
    "quantize-scale-rank": ("QuantizeLinear", [(F, [2, 3]), (F, [2, 3])], {},
                            "input 'y_scale'"),
    "dequantize-axis": ("DequantizeLinear", [(U, [2, 3]), (F, [3])], dict(axis=2), "axis"),
    "dequantize-axis-length": ("DequantizeLinear", [(U, [2, 3]), (F, [2])], dict(axis=-1),
                               "input 'x_scale'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_static_shapes_raise(case):
    op, specs, attrs, match = BAD[case]
    with pytest.raises((ValueError, onnx.shape_inference.InferenceError), match=op) as info:
        onnx.shape_inference.infer_shapes(model_of(op, specs, attrs), strict_mode=True)
    assert match in str(info.value)


def test_every_operator_rejects_a_bad_shape():
    assert {BAD[c][0] for c in BAD} == set(OPS)


# ----------------------------------------------- schemas against ONNX Runtime's

@functools.lru_cache(maxsize=1)
def _ort_schemas() -> dict:
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    return {s.name: s for s in C.get_all_operator_schema()
            if s.domain == MS and s.name in OPS}


def _default(a):
    """An ORT attribute's default as a Python value (None when it has none)."""
    raw = a._default_value
    if not raw:
        return None
    proto = onnx.AttributeProto()
    proto.ParseFromString(raw)
    if proto.type == onnx.AttributeProto.UNDEFINED:
        return None
    return oh.get_attribute_value(proto)


@pytest.mark.parametrize("op", OPS)
def test_schema_agrees_with_onnxruntime(op):
    theirs = _ort_schemas()[op]
    (ours,) = custom_op_schemas(op)
    registered = onnx.defs.get_schema(op, 1, MS)
    assert (ours.domain, ours.since_version) == (MS, theirs.since_version)
    assert registered.since_version == theirs.since_version
    option = {"Single": (False, False), "Optional": (True, False), "Variadic": (False, True)}
    for mine, other, onnx_side in ((ours.inputs, theirs.inputs, registered.inputs),
                                   (ours.outputs, theirs.outputs, registered.outputs)):
        assert [p.name for p in mine] == [p.name for p in other]
        assert [(p.optional, p.variadic) for p in mine] == [
            option[p.option.name] for p in other]
        assert [p.is_homogeneous for p in onnx_side] == [p.isHomogeneous for p in other]
    attrs = {a.name: a for a in ours.attributes}
    assert set(attrs) == set(theirs.attributes)
    for name, a in theirs.attributes.items():
        mine = attrs[name]
        assert mine.type == a.type.name, name
        assert mine.required == a.required, name
        want, got = _default(a), mine.default
        if isinstance(want, bytes):
            want = want.decode()
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-6), name
        else:
            assert got == want, name
    # our constraints allow at least ORT's types, parameter by parameter
    ours_allowed = {c.name: set(c.allowed) for c in ours.type_constraints}
    theirs_allowed = {c.type_param_str: set(c.allowed_type_strs)
                      for c in theirs.type_constraints}

    for mine, other in ((ours.inputs, theirs.inputs), (ours.outputs, theirs.outputs)):
        for p, q in zip(mine, other):
            want = theirs_allowed.get(q.typeStr, {q.typeStr})
            assert want <= ours_allowed.get(p.type_str, {p.type_str}), p.name
    # and every type our kernel's adapter takes is a type the schema allows
    kernel = next(k for k in olc.registered_kernels() if k.op_type == op and k.domain == MS)
    every = set().union(*ours_allowed.values(), *(
        {p.type_str} for p in ours.inputs + ours.outputs if p.type_str.startswith("tensor(")))
    assert set(kernel.element_types) <= every, set(kernel.element_types) - every


def test_docs_are_written_and_can_be_left_out():
    records = {r.name: r for r in microsoft_quantization.schemas()}
    assert set(records) == set(OPS)
    theirs = _ort_schemas()
    for name, r in records.items():
        assert len(r.doc) > 200 and r.doc != theirs[name].doc, name
        assert all(p.description for p in r.inputs + r.outputs), name
        assert all(a.description for a in r.attributes), name
    assert all(r.doc == "" for r in custom_op_schemas("QGemm", init_doc=False))


def test_registered_with_onnx_defs():
    for op in OPS:
        assert onnx.defs.has(op, MS), op
        assert onnx.defs.get_schema(op, MS).has_type_and_shape_inference_function, op


def test_onnx_reference_imports_after_the_package():
    """onnx.reference refuses an operator name two domains define
    (QuantizeLinear, DequantizeLinear) when it is first imported after they
    are registered: a fresh process importing the package alone must work."""
    import subprocess
    import sys

    code = ("import onnx_light_cpu, onnx.defs, onnx.reference; "
            "assert onnx.defs.has('QuantizeLinear', 'com.microsoft')")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
