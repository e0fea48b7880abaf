"""Schemas of the com.microsoft quantization operators (ONNX Runtime 1.32 contract).

MatMulNBits, GatherBlockQuantized, DynamicQuantizeMatMul, MatMulIntegerToFloat,
QGemm, QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool, QLinearWhere and the
com.microsoft QuantizeLinear and DequantizeLinear.  Names, order, optionality,
attributes and type constraints follow ONNX Runtime's schemas; the docs and the
inference functions describe what the kernels of ``onnx_light_cpu/ops``
(``matmul_nbits.py``, ``gather_block_quantized.py``, ``quantization.py``) accept
and produce.

Shapes keep symbolic dimensions: a dim_param in gives the same dim_param out,
broadcasting resolves symbolic dimensions against static ones, and derived sizes
that cannot be written as a known dimension are left unknown.  Inconsistent
static shapes, wrong ranks and attribute values the kernels reject raise
``ValueError`` naming the operator and the input.
"""

from __future__ import annotations

from onnx import TensorProto

from . import _infer
from ._infer import attr, elem_type, merge_dim, set_output, shape
from ._record import (
    MS_DOMAIN,
    LightAttribute,
    LightOpSchema,
    LightParameter,
    LightTypeConstraint,
)

T = TensorProto
Q8 = ("tensor(uint8)", "tensor(int8)")
F32 = "tensor(float)"
_FLOAT8_4 = (T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ, T.FLOAT4E2M1)
_INT4 = (T.INT4, T.UINT4)
# GatherBlockQuantized: typed data keeps at most this rank (the core's limit).
_MAX_TYPED_RANK = 16
_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


# ------------------------------------------------------------------ helpers

def _fail(op: str, message: str):
    raise ValueError(f"{op}: {message}")


def _fmt(dims) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _static(d) -> bool:
    return isinstance(d, int)


def _broadcast_dim(op: str, named: list, k: int):
    """The broadcast of the dims at position ``k`` from the right (named is
    [(input name, shape), ...]); static dims other than 1 must agree."""
    dims = [(n, s[len(s) - k]) for n, s in named if len(s) >= k]
    fixed = {d for _, d in dims if _static(d) and d != 1}
    if len(fixed) > 1:
        shapes = ", ".join(f"'{n}' {_fmt(s)}" for n, s in named)
        _fail(op, f"input '{named[-1][0]}' does not broadcast with the others: "
                  f"shapes {shapes}")
    if fixed:
        return fixed.pop()
    rest = [d for _, d in dims if d != 1]
    if not rest:
        return 1
    if len(rest) == 1 or (None not in rest and len(set(rest)) == 1):
        return rest[0]
    return None


def _broadcast(op: str, named: list) -> list | None:
    """NumPy broadcasting of the shapes of [(input name, shape or None)]."""
    if any(s is None for _, s in named):
        return None
    rank = max((len(s) for _, s in named), default=0)
    return [_broadcast_dim(op, named, k) for k in range(rank, 0, -1)]


def _matmul_shape(op: str, a: list | None, b: list | None, a_name: str,
                  b_name: str) -> list | None:
    """numpy.matmul's output shape of A and B (B's batch dims broadcast)."""
    for name, s in ((a_name, a), (b_name, b)):
        if s is not None and len(s) == 0:
            _fail(op, f"input '{name}' must have rank >= 1, got a scalar")
    if a is None or b is None:
        return None
    a2 = [1] + a if len(a) == 1 else a
    b2 = b + [1] if len(b) == 1 else b
    if _static(a2[-1]) and _static(b2[-2]) and a2[-1] != b2[-2]:
        _fail(op, f"input '{b_name}' of shape {_fmt(b)} has inner dimension {b2[-2]}, "
                  f"input '{a_name}' of shape {_fmt(a)} has K = {a2[-1]}")
    batch = _broadcast(op, [(a_name, a2[:-2]), (b_name, b2[:-2])])
    return (batch + (a2[-2:-1] if len(a) > 1 else [])
            + (b2[-1:] if len(b) > 1 else []))


def _one_element(op: str, ctx, i: int, name: str) -> None:
    """Input ``i`` (when present with a known shape) is a scalar or a
    one-element vector (per-tensor quantization)."""
    s = shape(ctx, i)
    if s is None:
        return
    if len(s) > 1 or (len(s) == 1 and _static(s[0]) and s[0] != 1):
        _fail(op, f"input '{name}' (input {i}) must be a scalar or a one-element vector "
                  f"(per tensor), got shape {_fmt(s)}")


def _same_type(op: str, ctx, i: int, j: int, name_i: str, name_j: str) -> None:
    a, b = elem_type(ctx, i), elem_type(ctx, j)
    if a and b and a != b:
        _fail(op, f"input '{name_j}' has element type {T.DataType.Name(b)}, input "
                  f"'{name_i}' {T.DataType.Name(a)}: they must be equal")


def _check_shape(op: str, name: str, got: list | None, forms: list) -> None:
    """``got`` must match one of ``forms`` (lists of ints, None = any dim):
    equal rank, static dims equal."""
    if got is None:
        return
    for form in forms:
        if len(form) == len(got) and all(
                w is None or not _static(g) or g == w for g, w in zip(got, form)):
            return
    wanted = " or ".join(_fmt(f) for f in forms)
    _fail(op, f"input '{name}' must have shape {wanted}, got {_fmt(got)}")


def _norm_axis(op: str, what: str, axis: int, rank: int, upper: int | None = None) -> int:
    upper = rank if upper is None else upper
    if not -rank <= axis < upper:
        _fail(op, f"attribute {what}={axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _zp_bytes(groups: int, bits: int) -> int:
    """Bytes of one row's packed UINT8 zero points for ``groups`` blocks."""
    return groups if bits in (3, 8) else _ceil_div(groups * bits, 8)


# --------------------------------------------------------------- MatMulNBits

MATMUL_NBITS_DOC = """\
Y = A @ dequantize(B) + bias, with B a [K, N] matrix of block-quantized integer
codes: weight[k, n] = (code[k, n] - zero_point) * scale for the block of
block_size consecutive k of column n.

A (float, float16 or bfloat16) has any rank >= 1 and last dimension K; Y keeps
every leading dimension of A and replaces the last with N, in A's type.
B (uint8) is [N, ceil(K / block_size), block_size * bits / 8]: each column's
codes along K, block after block, low bits of a byte first, the last block
padded.  bits is 2, 4 or 8 (default 4), or 3 (this package's extension:
block_size 32, 12 bytes a block, code p in bits [3p, 3p + 3)).  block_size is a
power of two >= 16.  scales ([N, ceil(K / block_size)] or flat) have A's type.
zero_points are optional: uint8 packed like the codes, each column starting a
byte ([N, ceil(blocks * bits / 8)], one byte a block for 3 and 8 bits), or A's
float type with the scales' shape; flat shapes are accepted; the default is
2^(bits - 1).  g_idx (int32 [K], or [blocks * block_size] whose entries past K
are ignored) maps each k to the block whose scale it takes; uint8 zero points
are then replaced by the default.  bias is [N], A's type.  A B with a zero
dimension (the others as above) is an omitted projection: Y is the bias, or
zeros.  accuracy_level 4 with integer zero points quantizes A's blocks to int8
and accumulates in int32; any other value dequantizes in float32.
weight_prepacked must be 0 (a provider's prepacked layout is rejected).
float16 and bfloat16 activations are computed in float32 and rounded once.
"""


def _infer_matmul_nbits(ctx) -> None:
    op = "MatMulNBits"
    a = shape(ctx, 0)
    K, N = attr(ctx, "K"), attr(ctx, "N")
    bits, block = attr(ctx, "bits", 4), attr(ctx, "block_size")
    if a is not None and len(a) == 0:
        _fail(op, "input 'A' must have rank >= 1, got a scalar")
    if K is not None and N is not None:
        if K < 1 or N < 1:
            _fail(op, f"attributes K and N must be positive, got K={K}, N={N}")
        if a is not None and _static(a[-1]) and a[-1] != K:
            _fail(op, f"input 'A' of shape {_fmt(a)} must have last dimension K={K}")
    if bits not in (2, 3, 4, 8):
        _fail(op, f"attribute bits must be 2, 3, 4 or 8, got {bits}")
    if block is not None and not (block >= 16 and block & (block - 1) == 0):
        _fail(op, f"attribute block_size must be a power of two >= 16, got {block}")
    if bits == 3 and block not in (None, 32):
        _fail(op, f"bits=3 takes block_size 32, got {block}")
    if None not in (K, N, block) and attr(ctx, "weight_prepacked", 0) == 0:
        _check_matmul_nbits_weights(ctx, op, K, N, bits, block)
    set_output(ctx, 0, elem_type(ctx, 0),
               None if a is None or N is None else a[:-1] + [N])


def _check_matmul_nbits_weights(ctx, op: str, K: int, N: int, bits: int, block: int) -> None:
    blocks = _ceil_div(K, block)
    blob = 12 if bits == 3 else block * bits // 8
    b = shape(ctx, 1)
    # a zero dimension in B (the others as stated) is an omitted projection:
    # Y is the bias or zeros, and the scales and zero points are not read
    empty = b is not None and len(b) == 3 and 0 in b
    if b is not None:
        want = [N, blocks, blob]
        if len(b) != 3 or any(_static(d) and d != w and not (empty and d == 0)
                              for d, w in zip(b, want)):
            _fail(op, f"input 'B' must have shape {_fmt(want)} (K={K}, N={N}, bits={bits}, "
                      f"block_size={block}), got {_fmt(b)}")
    _check_shape(op, "g_idx", shape(ctx, 4), [[K], [blocks * block]])
    _check_shape(op, "bias", shape(ctx, 5), [[N]])
    if empty:
        return
    _check_shape(op, "scales", shape(ctx, 2), [[N, blocks], [N * blocks]])
    zp_type = elem_type(ctx, 3)
    if zp_type == T.UINT8:
        width = _zp_bytes(blocks, bits)
        _check_shape(op, "zero_points", shape(ctx, 3), [[N, width], [N * width]])
    elif zp_type:
        if bits == 3:
            _fail(op, "input 'zero_points' must be uint8 for bits=3")
        _same_type(op, ctx, 0, 3, "A", "zero_points")
        _check_shape(op, "zero_points", shape(ctx, 3), [[N, blocks], [N * blocks]])


def _matmul_nbits() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "MatMulNBits", 1, MATMUL_NBITS_DOC,
        inputs=(
            LightParameter("A", "T1", "Activations, rank >= 1, last dimension K."),
            LightParameter("B", "T2", "Packed codes [N, ceil(K / block_size), block bytes]."),
            LightParameter("scales", "T1", "One scale a block: [N, blocks] or flat."),
            LightParameter("zero_points", "T3", "Packed uint8 or float zero points a block "
                           "(default 2^(bits - 1)).", optional=True),
            LightParameter("g_idx", "T4", "Block index of each k (int32 [K]).", optional=True),
            LightParameter("bias", "T1", "Added to each row of Y ([N]).", optional=True),
        ),
        outputs=(LightParameter("Y", "T1", "A's leading dimensions + [N], A's type."),),
        attributes=(
            LightAttribute("K", "INT", "Reduction length (A's last dimension).", required=True),
            LightAttribute("N", "INT", "Output columns.", required=True),
            LightAttribute("bits", "INT", "Code width: 2, 3, 4 or 8.", 4),
            LightAttribute("block_size", "INT", "Codes sharing a scale: a power of two >= 16.",
                           required=True),
            LightAttribute("accuracy_level", "INT",
                           "4: int8 activations, int32 accumulation; else float32.", 0),
            LightAttribute("weight_prepacked", "INT", "Must be 0.", 0),
        ),
        type_constraints=(
            LightTypeConstraint("T1", ("tensor(float)", "tensor(float16)", "tensor(bfloat16)"),
                                "Activations, scales, bias and output."),
            LightTypeConstraint("T2", ("tensor(uint8)",), "Packed codes."),
            LightTypeConstraint("T3", ("tensor(uint8)", "tensor(float)", "tensor(float16)",
                                       "tensor(bfloat16)"),
                                "Packed uint8 zero points, or A's float type."),
            LightTypeConstraint("T4", ("tensor(int32)",), "g_idx."),
        ),
        infer=_infer_matmul_nbits,
    )


# ------------------------------------------------------ GatherBlockQuantized

GATHER_BLOCK_QUANTIZED_DOC = """\
Gathers slices of a block-quantized table and dequantizes only them:
output = (code(data[indices]) - zero_point) * scale, in the scales' type.

Packed uint8 data [V, ..., P] holds 8 / bits codes a byte, low bits first, so a
row has D = P * 8 / bits codes (bits 2, 4 or 8, default 4); gather_axis is 0 and
quantize_axis the last axis.  scales (float or float16) are [V, ...,
ceil(D / block_size)]; zero_points (uint8, optional, default 2^(bits - 1)) are
packed like the codes, ceil(blocks * bits / 8) bytes a row.  The output is
indices.shape + data.shape[1:-1] + [D].

Typed data holds one element per code.  int4 and uint4: value = (data -
zero_point) * scale, zero_points optional of data's type and the scales'
shape (default 0), bits must be 4.  float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz)
and float4e2m1: value = float(data) * scale, no zero_points, bits ignored,
block_size 0 means one block over the whole quantize axis, and a scales
dimension of 1 on another axis broadcasts.  Any gather_axis and quantize_axis
(negative from the end) are allowed, data has rank 1 to 16, scales have data's
rank with ceil(n / block_size) on quantize_axis, and the output is
data.shape[:gather_axis] + indices.shape + data.shape[gather_axis + 1:].
Scales are float, float16 or bfloat16 (bfloat16 with typed data only).

block_size is a power of two >= 16 (default 128).  indices are int32 or int64
of any rank; negative ones count from the end and out-of-range ones give
slices of zeros.  One float32 multiply per element, rounded once.
"""


def _infer_gather_block_quantized(ctx) -> None:
    op = "GatherBlockQuantized"
    data_type, out_type = elem_type(ctx, 0), elem_type(ctx, 2)
    data, indices, scales = shape(ctx, 0), shape(ctx, 1), shape(ctx, 2)
    bits, block = attr(ctx, "bits", 4), attr(ctx, "block_size", 128)
    if not (block == 0 or (block >= 16 and block & (block - 1) == 0)):
        _fail(op, f"attribute block_size must be a power of two >= 16 (or 0 for float8 and "
                  f"float4 data), got {block}")
    out = None
    if data_type == T.UINT8:
        out = _gather_packed(ctx, op, data, indices, scales, bits, block)
    elif data_type in _INT4 + _FLOAT8_4:
        out = _gather_typed(ctx, op, data_type, data, indices, scales, bits, block)
    set_output(ctx, 0, out_type, out)


def _gather_packed(ctx, op, data, indices, scales, bits, block):
    if bits not in (2, 4, 8):
        _fail(op, f"attribute bits must be 2, 4 or 8 for uint8 data, got {bits}")
    if block == 0:
        _fail(op, "attribute block_size 0 is for float8 and float4 data only")
    if elem_type(ctx, 2) == T.BFLOAT16:
        _fail(op, "input 'scales' must be float or float16 with uint8 data, got bfloat16")
    if data is None:
        return None
    rank = len(data)
    if rank < 2:
        _fail(op, f"input 'data' must have rank >= 2 for uint8 data, got {_fmt(data)}")
    if attr(ctx, "gather_axis", 0) not in (0, -rank):
        _fail(op, f"attribute gather_axis must be 0 for uint8 data, got "
                  f"{attr(ctx, 'gather_axis')}")
    if attr(ctx, "quantize_axis", 1) not in (rank - 1, -1):
        _fail(op, f"attribute quantize_axis must be the last axis ({rank - 1}) for uint8 "
                  f"data, got {attr(ctx, 'quantize_axis', 1)}")
    per = 8 // bits
    D = _infer.product(op, data[-1], per)
    if _static(D):
        groups = _ceil_div(D, block)
        _check_shape(op, "scales", scales, [data[:-1] + [groups]])
        _check_shape(op, "zero_points", shape(ctx, 3),
                     [data[:-1] + [_zp_bytes(groups, bits)]])
    else:
        _check_shape(op, "scales", scales, [data[:-1] + [None]])
        _check_shape(op, "zero_points", shape(ctx, 3), [data[:-1] + [None]])
    _same_rows(op, ctx, data, scales)
    if indices is None:
        return None
    return indices + data[1:-1] + [D]


def _same_rows(op, ctx, data, scales) -> None:
    """Symbolic leading dims of scales / zero points agree with data's
    (static ones were checked already)."""
    for name, s in (("scales", scales), ("zero_points", shape(ctx, 3))):
        if s is not None and len(s) == len(data):
            for d, w in zip(s[:-1], data[:-1]):
                merge_dim(op, f"input '{name}' against input 'data'", d, w)


def _gather_typed(ctx, op, data_type, data, indices, scales, bits, block):
    with_zp = data_type in _INT4
    name = T.DataType.Name(data_type).lower()
    if with_zp:
        if bits != 4:
            _fail(op, f"attribute bits must be 4 for {name} data, got {bits}")
        if block == 0:
            _fail(op, f"attribute block_size 0 is for float8 and float4 data only, not {name}")
    elif ctx.get_num_inputs() > 3 and ctx.has_input(3):
        _fail(op, f"input 'zero_points' must be omitted for {name} data")
    if with_zp:
        _same_type(op, ctx, 0, 3, "data", "zero_points")
    if data is None:
        return None
    rank = len(data)
    if not 1 <= rank <= _MAX_TYPED_RANK:
        _fail(op, f"input 'data' must have rank 1 to {_MAX_TYPED_RANK}, got {_fmt(data)}")
    g = _norm_axis(op, "gather_axis", attr(ctx, "gather_axis", 0), rank)
    q = _norm_axis(op, "quantize_axis", attr(ctx, "quantize_axis", 1), rank)
    if scales is not None:
        if len(scales) != rank:
            _fail(op, f"input 'scales' must have data's rank {rank}, got {_fmt(scales)}")
        for k, (s, d) in enumerate(zip(scales, data)):
            if k == q:
                if _static(d) and _static(s):
                    want = _ceil_div(d, block or max(d, 1))
                    if s != want:
                        _fail(op, f"input 'scales' must have {want} blocks on quantize_axis "
                                  f"{q} (data {_fmt(data)}, block_size {block}), got "
                                  f"{_fmt(scales)}")
            elif not (not with_zp and s == 1):
                if _static(s) and _static(d) and s != d:
                    extra = "" if with_zp else " (or 1)"
                    _fail(op, f"input 'scales' must have data's dimension {d}{extra} on axis "
                              f"{k}, got {_fmt(scales)}")
        zp = shape(ctx, 3)
        if with_zp and zp is not None:
            if len(zp) != rank:
                _fail(op, f"input 'zero_points' must have the scales' shape {_fmt(scales)}, "
                          f"got {_fmt(zp)}")
            for s, z in zip(scales, zp):
                merge_dim(op, "input 'zero_points' must have the scales' shape", s, z)
    if indices is None:
        return None
    return data[:g] + indices + data[g + 1:]


def _gather_block_quantized() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "GatherBlockQuantized", 1, GATHER_BLOCK_QUANTIZED_DOC,
        inputs=(
            LightParameter("data", "T1", "Quantized table: packed uint8 codes or typed data."),
            LightParameter("indices", "Tind", "Positions to gather, any rank."),
            LightParameter("scales", "T2", "One scale a block; the output's type."),
            LightParameter("zero_points", "T1", "Zero points (uint8 packed, int4 or uint4).",
                           optional=True),
        ),
        outputs=(LightParameter("output", "T2", "The gathered, dequantized slices."),),
        attributes=(
            LightAttribute("gather_axis", "INT", "Axis of data gathered (0 for uint8 data).",
                           0),
            LightAttribute("quantize_axis", "INT",
                           "Axis the blocks run along (the last for uint8 data).", 1),
            LightAttribute("block_size", "INT", "Codes a scale covers: a power of two >= 16 "
                           "(0: the whole axis, float8/float4 data).", 128),
            LightAttribute("bits", "INT", "Code width of uint8 data: 2, 4 or 8.", 4),
        ),
        type_constraints=(
            LightTypeConstraint("T1", ("tensor(uint8)", "tensor(int4)", "tensor(uint4)",
                                       "tensor(float8e4m3fn)", "tensor(float8e4m3fnuz)",
                                       "tensor(float8e5m2)", "tensor(float8e5m2fnuz)",
                                       "tensor(float4e2m1)"),
                                "Quantized data and zero points."),
            LightTypeConstraint("T2", ("tensor(float)", "tensor(float16)", "tensor(bfloat16)"),
                                "Scales and output."),
            LightTypeConstraint("Tind", ("tensor(int32)", "tensor(int64)"), "Indices."),
        ),
        infer=_infer_gather_block_quantized,
    )


# ---------------------------------------- DynamicQuantizeMatMul, MatMulIntegerToFloat

DYNAMIC_QUANTIZE_MATMUL_DOC = """\
Y = MatMulIntegerToFloat(DynamicQuantizeLinear(A), B, ...): A (float) is
quantized to uint8 with its own range (widened to include 0, scale = (max -
min) / 255, zero point rounded half to even), multiplied by the 8-bit B with
exact int32 accumulation, and Y = float(acc) * a_scale * b_scale + bias.

Shapes follow numpy.matmul: A and B have rank >= 1, A's last dimension equals
B's second-to-last (its only one when 1-D), batch dimensions broadcast.  Y is
float.  b_scale and b_zero_point (B's type) have one element, are per column
([N] for a matrix B, or B's shape with 1 in the second-to-last dimension), or
(b_scale only) broadcast to Y's shape.  bias has N elements.
"""

MATMUL_INTEGER_TO_FLOAT_DOC = """\
Y = (A - a_zero_point)(B - b_zero_point) * a_scale * b_scale + bias, the
product accumulated exactly in int32 and the scaling done in float32 (float16
scales are widened and the result rounded once).

A and B are uint8 or int8 in any pairing; shapes follow numpy.matmul (rank >=
1, batch dimensions broadcast).  Y has the scales' type (float or float16).
a_zero_point has one element; b_zero_point and b_scale are one element or per
column ([N] for a matrix B, or B's shape with 1 in the second-to-last
dimension); a scale may also broadcast to Y's shape.  A 1-D a_scale, or one
whose last dimension is not 1, is read as B's (the two scales swap, as ONNX
Runtime does).  bias has N elements, the scales' type.
"""


def _matmul_to_float(op: str, out_index: int, zp_indices: tuple, bias_index: int):
    def infer(ctx) -> None:
        a, b = shape(ctx, 0), shape(ctx, 1)
        out = _matmul_shape(op, a, b, "A", "B")
        if zp_indices[0] is not None:
            _one_element(op, ctx, zp_indices[0], "a_zero_point")
        bias = shape(ctx, bias_index)
        if out is not None and b is not None and len(b) > 1 and bias is not None:
            n = b[-1]
            size = _infer.product(op, *bias) if bias else 1
            if _static(n) and _static(size) and size != n:
                _fail(op, f"input 'bias' of shape {_fmt(bias)} must have N = {n} elements")
        set_output(ctx, 0, T.FLOAT if out_index is None else elem_type(ctx, out_index), out)
    return infer


def _dynamic_quantize_matmul() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "DynamicQuantizeMatMul", 1, DYNAMIC_QUANTIZE_MATMUL_DOC,
        inputs=(
            LightParameter("A", "T1", "Float activations, rank >= 1."),
            LightParameter("B", "T2", "8-bit matrix (or batch of matrices)."),
            LightParameter("b_scale", "T1", "B's scale: one element or per column."),
            LightParameter("b_zero_point", "T2", "B's zero point (default 0).", optional=True),
            LightParameter("bias", "T1", "N elements added to each row.", optional=True),
        ),
        outputs=(LightParameter("Y", "T1", "numpy.matmul shape, float."),),
        type_constraints=(
            LightTypeConstraint("T1", (F32,), "A, b_scale, bias and Y."),
            LightTypeConstraint("T2", ("tensor(int8)", "tensor(uint8)"), "B and its zero point."),
        ),
        infer=_matmul_to_float("DynamicQuantizeMatMul", None, (None,), 4),
    )


def _matmul_integer_to_float() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "MatMulIntegerToFloat", 1, MATMUL_INTEGER_TO_FLOAT_DOC,
        inputs=(
            LightParameter("A", "T1", "8-bit left operand, rank >= 1."),
            LightParameter("B", "T2", "8-bit right operand, rank >= 1."),
            LightParameter("a_scale", "T3", "A's scale."),
            LightParameter("b_scale", "T3", "B's scale: one element or per column."),
            LightParameter("a_zero_point", "T1", "A's zero point, one element (default 0).",
                           optional=True),
            LightParameter("b_zero_point", "T2", "B's zero point (default 0).", optional=True),
            LightParameter("bias", "T3", "N elements added to each row.", optional=True),
        ),
        outputs=(LightParameter("Y", "T3", "numpy.matmul shape, the scales' type."),),
        type_constraints=(
            LightTypeConstraint("T1", ("tensor(int8)", "tensor(uint8)"), "A and a_zero_point."),
            LightTypeConstraint("T2", ("tensor(int8)", "tensor(uint8)"), "B and b_zero_point."),
            LightTypeConstraint("T3", (F32, "tensor(float16)"), "Scales, bias and Y."),
        ),
        infer=_matmul_to_float("MatMulIntegerToFloat", 2, (4,), 6),
    )


# ---------------------------------------------------------------------- QGemm

QGEMM_DOC = """\
acc = C + (A' - a_zero_point)(B' - b_zero_point) in int32, with A' = A or A^T
(transA) and B' = B or B^T (transB); s = alpha * a_scale * b_scale (per
column), divided by y_scale when given.  With y_zero_point: Y =
saturate(round_half_even(float(acc) * s) + y_zero_point) in y_zero_point's
type; without: Y = float(acc) * s, float.

A and B are uint8 or int8 matrices (rank 2), A' is [M, K] and B' [K, N], Y is
[M, N].  a_scale and a_zero_point have one element; b_scale and b_zero_point
are both one element or both [N].  C (int32) is (), [N], [1, N], [M, 1] or
[M, N].  y_scale and y_zero_point have one element.
"""


def _infer_qgemm(ctx) -> None:
    op = "QGemm"
    a, b = shape(ctx, 0), shape(ctx, 3)
    for name, s in (("A", a), ("B", b)):
        if s is not None and len(s) != 2:
            _fail(op, f"input '{name}' must be a matrix (rank 2), got {_fmt(s)}")
    for i, name in ((1, "a_scale"), (2, "a_zero_point"), (7, "y_scale"),
                    (8, "y_zero_point")):
        _one_element(op, ctx, i, name)
    M = K = N = None
    if a is not None:
        M, K = (a[1], a[0]) if attr(ctx, "transA", 0) else (a[0], a[1])
    if b is not None:
        K2, N = (b[1], b[0]) if attr(ctx, "transB", 0) else (b[0], b[1])
        if _static(K) and _static(K2) and K != K2:
            _fail(op, f"input 'B' of shape {_fmt(b)} has inner dimension {K2}, input 'A' "
                      f"{_fmt(a)} has K = {K}")
    for name, i in (("b_scale", 4), ("b_zero_point", 5)):
        s = shape(ctx, i)
        if s is not None and not (len(s) == 0 or (len(s) == 1 and (
                not _static(s[0]) or s[0] == 1 or not _static(N) or s[0] == N))):
            _fail(op, f"input '{name}' must be a scalar or 1-D of 1 or N = {N} elements, "
                      f"got {_fmt(s)}")
    b_scale, b_zero_point = shape(ctx, 4), shape(ctx, 5)
    if b_scale is not None and b_zero_point is not None and (
            len(b_scale) != len(b_zero_point) or any(
                _static(s) and _static(z) and s != z for s, z in zip(b_scale, b_zero_point))):
        _fail(op, f"input 'b_zero_point' of shape {_fmt(b_zero_point)} must have b_scale's "
                  f"shape {_fmt(b_scale)}")
    c = shape(ctx, 6)
    if c is not None:
        forms = [[], [N], [1, N], [M, 1], [M, N], [1], [1, 1]]
        if len(c) > 2 or not any(len(f) == len(c) and all(
                not _static(d) or not _static(w) or d == w for d, w in zip(c, f))
                for f in forms):
            _fail(op, f"input 'C' of shape {_fmt(c)} must broadcast to [M, N] = "
                      f"{_fmt([M, N])} as [], [N], [1, N], [M, 1] or [M, N]")
    has_zp = ctx.get_num_inputs() > 8 and ctx.has_input(8)
    out_type = elem_type(ctx, 8) if has_zp else T.FLOAT
    set_output(ctx, 0, out_type, None if a is None or b is None else [M, N])


def _qgemm() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "QGemm", 1, QGEMM_DOC,
        inputs=(
            LightParameter("A", "TA", "8-bit matrix, [M, K] (or [K, M] with transA)."),
            LightParameter("a_scale", "T", "A's scale, one element."),
            LightParameter("a_zero_point", "TA", "A's zero point, one element."),
            LightParameter("B", "TB", "8-bit matrix, [K, N] (or [N, K] with transB)."),
            LightParameter("b_scale", "T", "B's scale: one element or [N]."),
            LightParameter("b_zero_point", "TB", "B's zero point, b_scale's shape."),
            LightParameter("C", "TC", "int32 addend broadcast to [M, N].", optional=True),
            LightParameter("y_scale", "T", "Output scale, one element.", optional=True),
            LightParameter("y_zero_point", "TYZ", "Output zero point: a quantized output.",
                           optional=True),
        ),
        outputs=(LightParameter("Y", "TY", "[M, N]: y_zero_point's type, else float."),),
        attributes=(
            LightAttribute("transA", "INT", "1: use A transposed.", 0),
            LightAttribute("transB", "INT", "1: use B transposed.", 0),
            LightAttribute("alpha", "FLOAT", "Multiplier of the product.", 1.0),
        ),
        type_constraints=(
            LightTypeConstraint("T", (F32,), "Scales."),
            LightTypeConstraint("TA", Q8, "A and a_zero_point."),
            LightTypeConstraint("TB", Q8, "B and b_zero_point."),
            LightTypeConstraint("TC", ("tensor(int32)",), "C."),
            LightTypeConstraint("TYZ", Q8, "y_zero_point."),
            LightTypeConstraint("TY", (F32,) + Q8, "Y."),
        ),
        infer=_infer_qgemm,
    )


# ------------------------------------------------------- QLinear element-wise

QLINEAR_ADD_DOC = """\
C = saturate(round((A - A_zero_point) * A_scale + (B - B_zero_point) * B_scale)
/ C_scale) + C_zero_point), element-wise on uint8 or int8 with NumPy
broadcasting of A and B (C has the broadcast shape and A's type).  Scales are
float and zero points of A's type, each one element (a scalar or a
one-element vector); absent zero points are 0.  The ratios A_scale / C_scale
and B_scale / C_scale are formed in float32 and applied with fused
multiply-adds, rounded half to even, as MLAS does.
"""

QLINEAR_MUL_DOC = """\
C = saturate(round((A - A_zero_point)(B - B_zero_point) * (A_scale * B_scale /
C_scale)) + C_zero_point), element-wise on uint8 or int8 with NumPy
broadcasting of A and B (C has the broadcast shape and A's type).  Scales are
float and zero points of A's type, each one element; absent zero points are 0.
The product is rounded to float32 and scaled in float32, rounded half to even.
"""


def _infer_qlinear_binary(op: str):
    def infer(ctx) -> None:
        for i, name in ((1, "A_scale"), (2, "A_zero_point"), (4, "B_scale"),
                        (5, "B_zero_point"), (6, "C_scale"), (7, "C_zero_point")):
            _one_element(op, ctx, i, name)
        out = _broadcast(op, [("A", shape(ctx, 0)), ("B", shape(ctx, 3))])
        set_output(ctx, 0, elem_type(ctx, 0), out)
    return infer


def _qlinear_binary(op: str, doc: str) -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, op, 1, doc,
        inputs=(
            LightParameter("A", "T", "First operand."),
            LightParameter("A_scale", F32, "A's scale, one element."),
            LightParameter("A_zero_point", "T", "A's zero point, one element (default 0).",
                           optional=True),
            LightParameter("B", "T", "Second operand, broadcast with A."),
            LightParameter("B_scale", F32, "B's scale, one element."),
            LightParameter("B_zero_point", "T", "B's zero point, one element (default 0).",
                           optional=True),
            LightParameter("C_scale", F32, "Output scale, one element."),
            LightParameter("C_zero_point", "T", "Output zero point, one element (default 0).",
                           optional=True),
        ),
        outputs=(LightParameter("C", "T", "The broadcast shape of A and B, A's type."),),
        type_constraints=(LightTypeConstraint("T", Q8, "8-bit operands and result."),),
        infer=_infer_qlinear_binary(op),
    )


QLINEAR_SIGMOID_DOC = """\
Y = quantize(1 / (1 + exp(-dequantize(X)))), element-wise on uint8 or int8:
dequantize(x) = (x - X_zero_point) * X_scale in float32, quantize(v) =
saturate(round_half_even(v / Y_scale) + Y_zero_point).  The 256 results are
tabulated once per (scales, zero points) and looked up; the logistic is
computed in float64 and rounded to float32.  Scales are float, zero points of
X's type, each one element; absent zero points are 0.  Y has X's shape and
type.
"""

QLINEAR_LEAKY_RELU_DOC = """\
Y = quantize(v >= 0 ? v : alpha * v), v = dequantize(X), element-wise on uint8
or int8: dequantize(x) = (x - X_zero_point) * X_scale and the activation in
float32, quantize(v) = saturate(round_half_even(v / Y_scale) + Y_zero_point),
through a table of the 256 results.  Scales are float, zero points of X's
type, each one element; absent zero points are 0.  Y has X's shape and type.
"""


def _infer_qlinear_lookup(op: str):
    def infer(ctx) -> None:
        for i, name in ((1, "X_scale"), (2, "X_zero_point"), (3, "Y_scale"),
                        (4, "Y_zero_point")):
            _one_element(op, ctx, i, name)
        set_output(ctx, 0, elem_type(ctx, 0), shape(ctx, 0))
    return infer


def _qlinear_lookup(op: str, doc: str, attributes: tuple) -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, op, 1, doc,
        inputs=(
            LightParameter("X", "T", "8-bit input."),
            LightParameter("X_scale", F32, "X's scale, one element."),
            LightParameter("X_zero_point", "T", "X's zero point, one element (default 0).",
                           optional=True),
            LightParameter("Y_scale", F32, "Output scale, one element."),
            LightParameter("Y_zero_point", "T", "Output zero point, one element (default 0).",
                           optional=True),
        ),
        outputs=(LightParameter("Y", "T", "X's shape and type."),),
        attributes=attributes,
        type_constraints=(LightTypeConstraint("T", Q8, "8-bit input and output."),),
        infer=_infer_qlinear_lookup(op),
    )


QLINEAR_SOFTMAX_DOC = """\
Softmax of uint8 or int8 codes: a table e[i] = exp((i - 255 + shift) *
X_scale) (computed in float64, stored in float32; the shift keeps sums of the
reduced length finite), each row shifted so that its maximum reads e[255], the
float32 sum taken in order, and Y = saturate(round_half_even(e / sum *
floor(1 / y_scale)) + y_zero_point).  opset (required) below 13 flattens X from
axis into rows (Softmax-1 semantics); 13 and above reduce along axis alone.
axis defaults to -1 for both.  X_scale, y_scale (float) and the zero points
(X's type) have one element; x_zero_point is checked and cancels out.  Y has
X's shape and type.
"""


def _infer_qlinear_softmax(ctx) -> None:
    op = "QLinearSoftmax"
    for i, name in ((1, "X_scale"), (2, "x_zero_point"), (3, "y_scale"),
                    (4, "y_zero_point")):
        _one_element(op, ctx, i, name)
    x = shape(ctx, 0)
    if x is not None:
        _norm_axis(op, "axis", attr(ctx, "axis", -1), len(x), max(len(x), 1))
    set_output(ctx, 0, elem_type(ctx, 0), x)


def _qlinear_softmax() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "QLinearSoftmax", 1, QLINEAR_SOFTMAX_DOC,
        inputs=(
            LightParameter("X", "T", "8-bit input."),
            LightParameter("X_scale", F32, "X's scale, one element."),
            LightParameter("x_zero_point", "T", "X's zero point, one element (unused).",
                           optional=True),
            LightParameter("y_scale", F32, "Output scale, one element."),
            LightParameter("y_zero_point", "T", "Output zero point, one element."),
        ),
        outputs=(LightParameter("Y", "T", "X's shape and type."),),
        attributes=(
            LightAttribute("opset", "INT", "Softmax semantics: below 13 rows are flattened "
                           "from axis, else along axis.", required=True),
            LightAttribute("axis", "INT", "Reduced axis (negative from the end).", -1),
        ),
        type_constraints=(LightTypeConstraint("T", Q8, "8-bit input and output."),),
        infer=_infer_qlinear_softmax,
    )


# ---------------------------------------------------------------- QLinearConcat

QLINEAR_CONCAT_DOC = """\
Concatenates 8-bit tensors along axis, each moved from its own (scale, zero
point) to (Y_scale, Y_zero_point): a table of the 256 requantized codes
(dequantize in float32, round half to even, saturate), a plain copy where the
scale and zero point are the output's.

Inputs after Y_scale and Y_zero_point come in (X, X_scale, X_zero_point)
triples, all present; every X and X_zero_point has Y_zero_point's type (uint8
or int8), every scale is float, scales and zero points have one element.  The
tensors share one rank >= 1 and every dimension but axis (required, negative
from the end); Y's dimension on axis is the sum of theirs.
"""


def _infer_qlinear_concat(ctx) -> None:
    op = "QLinearConcat"
    n = ctx.get_num_inputs()
    if n < 5 or (n - 2) % 3:
        _fail(op, f"the inputs after Y_scale and Y_zero_point must be (X, X_scale, "
                  f"X_zero_point) triples, got {n - 2} inputs")
    _one_element(op, ctx, 0, "Y_scale")
    _one_element(op, ctx, 1, "Y_zero_point")
    out_type = elem_type(ctx, 1)
    shapes = []
    for k in range(2, n, 3):
        for i, what in ((k, "X"), (k + 1, "X_scale"), (k + 2, "X_zero_point")):
            if not ctx.has_input(i):
                _fail(op, f"input {i} ({what} of a triple) is required")
        for i, what in ((k, "X"), (k + 2, "X_zero_point")):
            t = elem_type(ctx, i)
            if t and out_type and t != out_type:
                _fail(op, f"input {i} ({what}) has element type {T.DataType.Name(t)}, "
                          f"expected {T.DataType.Name(out_type)} like Y_zero_point")
        if elem_type(ctx, k + 1) not in (0, T.FLOAT):
            _fail(op, f"input {k + 1} (X_scale) must be float")
        _one_element(op, ctx, k + 1, "X_scale")
        _one_element(op, ctx, k + 2, "X_zero_point")
        shapes.append((k, shape(ctx, k)))
    known = [(i, s) for i, s in shapes if s is not None]
    out = None
    if known:
        rank = len(known[0][1])
        if rank == 0:
            _fail(op, f"input {known[0][0]} (X) must have rank >= 1, got a scalar")
        axis = _norm_axis(op, "axis", attr(ctx, "axis", 0), rank)
        out = list(known[0][1])
        for i, s in known[1:]:
            if len(s) != rank:
                _fail(op, f"input {i} (X) has rank {len(s)}, input {known[0][0]} rank {rank}")
            for d in range(rank):
                if d != axis:
                    out[d] = merge_dim(op, f"input {i} (X) of shape {_fmt(s)} differs from "
                                           f"input {known[0][0]} outside axis {axis}",
                                       out[d], s[d])
        total = 0
        for _, s in shapes:
            total = _infer.add(total, None if s is None else s[axis])
        out[axis] = total
    set_output(ctx, 0, out_type, out)


def _qlinear_concat() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "QLinearConcat", 1, QLINEAR_CONCAT_DOC,
        inputs=(
            LightParameter("Y_scale", "TF", "Output scale, one element."),
            LightParameter("Y_zero_point", "T8", "Output zero point, one element."),
            LightParameter("inputs", "TV", "(X, X_scale, X_zero_point) triples.",
                           variadic=True, homogeneous=False),
        ),
        outputs=(LightParameter("Y", "T8", "The concatenation, Y_zero_point's type."),),
        attributes=(LightAttribute("axis", "INT", "Concatenation axis (negative from the "
                                   "end).", required=True),),
        type_constraints=(
            LightTypeConstraint("T8", Q8, "Output and its zero point."),
            LightTypeConstraint("TF", (F32,), "Output scale."),
            LightTypeConstraint("TV", Q8 + (F32,), "Tensors, scales and zero points."),
        ),
        infer=_infer_qlinear_concat,
    )


# ---------------------------------------------------------------- QLinearWhere

QLINEAR_WHERE_DOC = """\
Z = where(condition, X', Y'), X and Y (uint8 or int8, one type) moved to
(z_scale, z_zero_point) through tables of the 256 requantized codes
(dequantize in float32, round half to even, saturate).  condition (bool), X
and Y broadcast NumPy style; Z has the broadcast shape and X's type.  Scales
(float) and zero points (X's type) have one element.
"""


def _infer_qlinear_where(ctx) -> None:
    op = "QLinearWhere"
    for i, name in ((2, "x_scale"), (3, "x_zero_point"), (5, "y_scale"),
                    (6, "y_zero_point"), (7, "z_scale"), (8, "z_zero_point")):
        _one_element(op, ctx, i, name)
    out = _broadcast(op, [("condition", shape(ctx, 0)), ("X", shape(ctx, 1)),
                          ("Y", shape(ctx, 4))])
    set_output(ctx, 0, elem_type(ctx, 1), out)


def _qlinear_where() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "QLinearWhere", 1, QLINEAR_WHERE_DOC,
        inputs=(
            LightParameter("condition", "B", "Where true, X' is taken; else Y'."),
            LightParameter("X", "T", "8-bit values where condition holds."),
            LightParameter("x_scale", "TF", "X's scale, one element."),
            LightParameter("x_zero_point", "T", "X's zero point, one element."),
            LightParameter("Y", "T", "8-bit values elsewhere."),
            LightParameter("y_scale", "TF", "Y's scale, one element."),
            LightParameter("y_zero_point", "T", "Y's zero point, one element."),
            LightParameter("z_scale", "TF", "Output scale, one element."),
            LightParameter("z_zero_point", "T", "Output zero point, one element."),
        ),
        outputs=(LightParameter("Z", "T", "Broadcast shape of the three, X's type."),),
        type_constraints=(
            LightTypeConstraint("B", ("tensor(bool)",), "condition."),
            LightTypeConstraint("TF", (F32,), "Scales."),
            LightTypeConstraint("T", Q8, "Values and zero points."),
        ),
        infer=_infer_qlinear_where,
    )


# ------------------------------------------------------------------- pooling

QLINEAR_GLOBAL_AVERAGE_POOL_DOC = """\
Per image and channel, Y = saturate(round_half_even(float32(sum(X) -
x_zero_point * size) * s) + y_zero_point), s = x_scale / (y_scale * size) in
float32, the sum exact in integers.  X (uint8 or int8) is [N, C, spatial...]
(channels_last 0) or [N, spatial..., C] (1), rank >= 3; Y keeps X's rank and
type with every spatial dimension 1.  Scales (float) and zero points (X's
type) have one element.  Images of 2^24 elements or more, and s outside
[2^-32, 256), are rejected, as in ONNX Runtime.
"""

QLINEAR_AVERAGE_POOL_DOC = """\
AveragePool of uint8 or int8 data: X dequantized to float32 ((x -
x_zero_point) * x_scale), each window summed in float32 (padding skipped),
divided by its count (the kernel's size with count_include_pad, else the
elements inside X), then Y = saturate(round_half_even(v / y_scale +
y_zero_point)).  X is [N, C, spatial...] (channels_last 0) or [N, spatial...,
C] (1) with 1 to 3 spatial dimensions.

Output sizes, per spatial dimension of size n, kernel k, stride s (default
1): SAME_UPPER and SAME_LOWER give ceil(n / s), the padding split with the
extra element at the end (UPPER) or the start (LOWER); VALID gives (n - k) / s
+ 1 and NOTSET (n + pad_begin + pad_end - k) / s + 1, both rounded down, or up
with ceil_mode (a last window starting in the end padding is dropped).  pads
must be smaller than the kernel.  A kernel covering the whole unpadded image is
a global average.  Scales (float) and zero points (X's type) have one element.
"""


def _pool_layout(ctx, op: str, x: list, low: int, high: int | None):
    if len(x) < low or (high is not None and len(x) > high):
        ranks = f"{low} to {high}" if high is not None else f">= {low}"
        _fail(op, f"input 'X' must have rank {ranks} (N, C and spatial dimensions), got "
                  f"{_fmt(x)}")
    if attr(ctx, "channels_last", 0):
        return list(range(1, len(x) - 1))
    return list(range(2, len(x)))


def _infer_qlinear_global_average_pool(ctx) -> None:
    op = "QLinearGlobalAveragePool"
    for i, name in ((1, "x_scale"), (2, "x_zero_point"), (3, "y_scale"),
                    (4, "y_zero_point")):
        _one_element(op, ctx, i, name)
    x = shape(ctx, 0)
    out = None
    if x is not None:
        spatial = _pool_layout(ctx, op, x, 3, None)
        if 0 in x:
            _fail(op, f"input 'X' of shape {_fmt(x)} is empty: empty images have no average")
        size = _infer.product(op, *(x[d] for d in spatial))
        if _static(size) and size >= 1 << 24:
            _fail(op, f"input 'X' of shape {_fmt(x)} has images of {size} elements: 2^24 or "
                      "more cannot be averaged exactly")
        out = [1 if d in spatial else n for d, n in enumerate(x)]
    set_output(ctx, 0, elem_type(ctx, 0), out)


def _pool_size(n, k: int, st: int, p0: int, p1: int, auto_pad: str, ceil_mode: int, op: str):
    """One spatial output size, as the kernel sizes it (None when unknown)."""
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if _static(n):
            return _ceil_div(n, st)
        return n if st == 1 else None
    valid = auto_pad == "VALID"
    head = 0 if valid else p0
    extra = -k if valid else p0 + p1 - k
    if not _static(n):
        # stride 1 and a window that keeps the size: the dim passes through
        return n if st == 1 and extra == -1 else None
    span = n + extra
    out = (-(-span // st) if ceil_mode else span // st) + 1
    if ceil_mode and (out - 1) * st >= n + head:
        out -= 1
    if out < 1:
        _fail(op, f"the kernel {k} does not fit in the padded input dimension {n}")
    return out


def _infer_qlinear_average_pool(ctx) -> None:
    op = "QLinearAveragePool"
    for i, name in ((1, "x_scale"), (2, "x_zero_point"), (3, "y_scale"),
                    (4, "y_zero_point")):
        _one_element(op, ctx, i, name)
    auto_pad = attr(ctx, "auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad not in _AUTO_PADS:
        _fail(op, f"attribute auto_pad must be one of {', '.join(_AUTO_PADS)}, got "
                  f"{auto_pad!r}")
    x = shape(ctx, 0)
    out = None
    if x is not None:
        spatial = _pool_layout(ctx, op, x, 3, 5)
        n = len(spatial)
        kernel = list(attr(ctx, "kernel_shape", []) or [])
        if len(kernel) != n or any(k < 1 for k in kernel):
            _fail(op, f"attribute kernel_shape {kernel} must have {n} positive values (input "
                      f"'X' {_fmt(x)} has {n} spatial dimensions)")
        strides = list(attr(ctx, "strides", None) or [1] * n)
        pads = list(attr(ctx, "pads", None) or [0] * (2 * n))
        if len(strides) != n or any(st < 1 for st in strides):
            _fail(op, f"attribute strides {strides} must have {n} positive values")
        if len(pads) != 2 * n:
            _fail(op, f"attribute pads {pads} must have {2 * n} values")
        if any(not 0 <= p < kernel[d % n] for d, p in enumerate(pads)):
            _fail(op, f"attribute pads {pads} must be >= 0 and smaller than the kernel "
                      f"{kernel}")
        ceil_mode = attr(ctx, "ceil_mode", 0)
        out = list(x)
        for j, d in enumerate(spatial):
            out[d] = _pool_size(x[d], kernel[j], strides[j], pads[j], pads[j + n], auto_pad,
                                ceil_mode, op)
    set_output(ctx, 0, elem_type(ctx, 0), out)


def _pool_inputs(zero_points_optional: bool) -> tuple:
    return (
        LightParameter("X", "T", "8-bit input, [N, C, spatial...] or [N, spatial..., C]."),
        LightParameter("x_scale", F32, "X's scale, one element."),
        LightParameter("x_zero_point", "T", "X's zero point, one element.",
                       optional=zero_points_optional),
        LightParameter("y_scale", F32, "Output scale, one element."),
        LightParameter("y_zero_point", "T", "Output zero point, one element.",
                       optional=zero_points_optional),
    )


def _qlinear_global_average_pool() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "QLinearGlobalAveragePool", 1, QLINEAR_GLOBAL_AVERAGE_POOL_DOC,
        inputs=_pool_inputs(False),
        outputs=(LightParameter("Y", "T", "X's rank and type, spatial dimensions 1."),),
        attributes=(LightAttribute("channels_last", "INT", "1: channels are the last "
                                   "dimension.", 0),),
        type_constraints=(LightTypeConstraint("T", Q8, "8-bit input and output."),),
        infer=_infer_qlinear_global_average_pool,
    )


def _qlinear_average_pool() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "QLinearAveragePool", 1, QLINEAR_AVERAGE_POOL_DOC,
        inputs=_pool_inputs(True),
        outputs=(LightParameter("Y", "T", "Pooled, X's layout and type."),),
        attributes=(
            LightAttribute("auto_pad", "STRING",
                           "NOTSET (pads), VALID, SAME_UPPER or SAME_LOWER.", "NOTSET"),
            LightAttribute("ceil_mode", "INT", "1: output sizes rounded up.", 0),
            LightAttribute("channels_last", "INT", "1: channels are the last dimension.", 0),
            LightAttribute("count_include_pad", "INT",
                           "1: padding counts in each window's divisor.", 0),
            LightAttribute("kernel_shape", "INTS", "Window size per spatial dimension.",
                           required=True),
            LightAttribute("pads", "INTS", "Begin then end padding per spatial dimension "
                           "(default 0)."),
            LightAttribute("strides", "INTS", "Stride per spatial dimension (default 1)."),
        ),
        type_constraints=(LightTypeConstraint("T", Q8, "8-bit input and output."),),
        infer=_infer_qlinear_average_pool,
    )


# ------------------------------------------------ QuantizeLinear, DequantizeLinear

QUANTIZE_LINEAR_DOC = """\
y = saturate(round_half_even(x / y_scale) + y_zero_point), com.microsoft
domain: x float or float16 (divided in float32, the quotient rounded once),
y_scale x's type, y_zero_point uint8, int8, uint16, int16, int4 or uint4 (y's
type; absent: uint8 with zero point 0).  A NaN quotient gives the type's
minimum.  Per tensor (y_scale and y_zero_point of one element), or per axis: a
1-D y_scale (and y_zero_point) of x's dimension axis (default 1 when absent,
negative from the end).  y has x's shape.
"""

DEQUANTIZE_LINEAR_DOC = """\
y = (x - x_zero_point) * x_scale, com.microsoft domain: x uint8, int8, uint16,
int16, int32, int4 or uint4; x_scale float or float16 (y's type, computed in
float32 and rounded once); the difference taken in int32 (wrapping for int32
x).  Per tensor (x_scale and x_zero_point of one element), or per axis: a 1-D
x_scale (and x_zero_point) of x's dimension axis (default 1 when absent,
negative from the end).  y has x's shape.
"""


def _linear_params(op: str, ctx, scale_name: str, zp_name: str) -> None:
    """Per-tensor or per-axis scale and zero point, as the kernels read them."""
    x, scale, zp = shape(ctx, 0), shape(ctx, 1), shape(ctx, 2)
    if scale is None:
        return
    if len(scale) > 1:
        _fail(op, f"input '{scale_name}' must be a scalar or 1-D (per axis), got "
                  f"{_fmt(scale)}")
    if len(scale) == 0 or scale[0] == 1:
        _one_element(op, ctx, 2, zp_name)
        return
    if not _static(scale[0]):
        return
    length = scale[0]
    if x is not None:
        axis = _norm_axis(op, "axis", attr(ctx, "axis", 1), len(x))
        if _static(x[axis]) and x[axis] != length:
            _fail(op, f"input '{scale_name}' of shape {_fmt(scale)} must be 1-D of input "
                      f"'x''s dimension {axis} ({x[axis]})")
    if zp is not None and (len(zp) != 1 or (_static(zp[0]) and zp[0] != length)):
        _fail(op, f"input '{zp_name}' must have the per-axis scale's shape {_fmt(scale)}, "
                  f"got {_fmt(zp)}")


def _infer_quantize_linear(ctx) -> None:
    op = "QuantizeLinear"
    _linear_params(op, ctx, "y_scale", "y_zero_point")
    has_zp = ctx.get_num_inputs() > 2 and ctx.has_input(2)
    set_output(ctx, 0, elem_type(ctx, 2) if has_zp else T.UINT8, shape(ctx, 0))


def _infer_dequantize_linear(ctx) -> None:
    op = "DequantizeLinear"
    _linear_params(op, ctx, "x_scale", "x_zero_point")
    set_output(ctx, 0, elem_type(ctx, 1), shape(ctx, 0))


_AXIS_DOC = "Per-axis quantization axis (negative from the end); 1 when absent."


def _quantize_linear() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "QuantizeLinear", 1, QUANTIZE_LINEAR_DOC,
        inputs=(
            LightParameter("x", "T1", "Float input."),
            LightParameter("y_scale", "T1", "One element, or 1-D of x's dimension axis."),
            LightParameter("y_zero_point", "T2", "y_scale's shape; y's type (default uint8 "
                           "0).", optional=True),
        ),
        outputs=(LightParameter("y", "T2", "x's shape, y_zero_point's type."),),
        attributes=(LightAttribute("axis", "INT", _AXIS_DOC),),
        type_constraints=(
            LightTypeConstraint("T1", ("tensor(float16)", F32), "x and y_scale."),
            LightTypeConstraint("T2", ("tensor(int8)", "tensor(uint8)", "tensor(int16)",
                                       "tensor(uint16)", "tensor(int4)", "tensor(uint4)"),
                                "y_zero_point and y."),
        ),
        infer=_infer_quantize_linear,
    )


def _dequantize_linear() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "DequantizeLinear", 1, DEQUANTIZE_LINEAR_DOC,
        inputs=(
            LightParameter("x", "T1", "Quantized input."),
            LightParameter("x_scale", "T2", "One element, or 1-D of x's dimension axis; "
                           "y's type."),
            LightParameter("x_zero_point", "T1", "x_scale's shape (default 0).",
                           optional=True),
        ),
        outputs=(LightParameter("y", "T2", "x's shape, x_scale's type."),),
        attributes=(LightAttribute("axis", "INT", _AXIS_DOC),),
        type_constraints=(
            LightTypeConstraint("T1", ("tensor(int8)", "tensor(uint8)", "tensor(int16)",
                                       "tensor(uint16)", "tensor(int32)", "tensor(int4)",
                                       "tensor(uint4)"), "x and x_zero_point."),
            LightTypeConstraint("T2", ("tensor(float16)", F32), "x_scale and y."),
        ),
        infer=_infer_dequantize_linear,
    )


def schemas() -> tuple:
    """The LightOpSchema records of this family."""
    return (
        _matmul_nbits(),
        _gather_block_quantized(),
        _dynamic_quantize_matmul(),
        _matmul_integer_to_float(),
        _qgemm(),
        _qlinear_binary("QLinearAdd", QLINEAR_ADD_DOC),
        _qlinear_binary("QLinearMul", QLINEAR_MUL_DOC),
        _qlinear_lookup("QLinearSigmoid", QLINEAR_SIGMOID_DOC, ()),
        _qlinear_lookup("QLinearLeakyRelu", QLINEAR_LEAKY_RELU_DOC, (
            LightAttribute("alpha", "FLOAT", "Slope for negative values.", 0.01),)),
        _qlinear_softmax(),
        _qlinear_concat(),
        _qlinear_average_pool(),
        _qlinear_global_average_pool(),
        _qlinear_where(),
        _quantize_linear(),
        _dequantize_linear(),
    )
