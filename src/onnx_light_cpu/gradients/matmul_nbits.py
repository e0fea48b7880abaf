"""Gradient of com.microsoft MatMulNBits: Y = A @ W + bias, W [K, N] the
block-quantized weights, differentiated in A and bias only (the packed B
and the scales are constants).

    W^T[n, k] = (q[n, k] - 2^(bits-1)) * scales[n, k // 32]
    dA = dY @ W^T,  dbias = dY summed over every axis but the last

W^T is dequantized by standard operators: the codes of each column are
unpacked from B [N, ceil(K / 32), 4 * bits] (low bits first; 3-bit codes
cross bytes, so three bytes are read as one 24-bit word), offset by the
implicit zero point, scaled per block of 32 and cut to K.  Everything is
computed in FLOAT and cast back to A's type.

Supported, as the spec restricts the gradient: B and scales as separate
inputs, block_size 32, implicit zero points (no zero_points input), no
g_idx, weight_prepacked 0; bits 2, 3, 4 or 8.  accuracy_level is accepted:
the gradient is that of the exact product (level 4 rounds the activations
to int8 in the forward pass only).
"""

from __future__ import annotations

from onnx import TensorProto

from .builder import MS_DOMAIN, GradContext

DOMAIN, OP_TYPE = MS_DOMAIN, "MatMulNBits"
T = TensorProto
BLOCK = 32
BITS = (2, 3, 4, 8)


def gradient(ctx: GradContext) -> dict[int, str]:
    ctx.only_attributes(("K", "N", "bits", "block_size", "accuracy_level", "weight_prepacked"))
    k, n, bits = ctx.attr("K"), ctx.attr("N"), ctx.attr("bits", 4)
    if k is None or n is None:
        raise ValueError(f"{ctx.label}: attributes K and N are required")
    if bits not in BITS:
        ctx.unsupported(f"bits={bits} (supported: {BITS})")
    if ctx.attr("block_size") != BLOCK:
        ctx.unsupported(f"block_size={ctx.attr('block_size')} (only {BLOCK})")
    if ctx.attr("weight_prepacked", 0):
        ctx.unsupported("weight_prepacked=1")
    if not ctx.input(2):
        ctx.unsupported("B without a scales input (encoded weights)")
    for position, what in ((3, "zero_points"), (4, "g_idx")):
        if ctx.input(position):
            ctx.unsupported(f"input {position} ({what}): only implicit zero points "
                            "and no g_idx")
    a, b, scales, bias = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(5)
    dy = ctx.grad(0)
    if dy is None:
        ctx.unsupported("the model does not output Y, the one output to differentiate")

    w_t = _dequantized_transpose(ctx, b, scales, k, n, bits)
    dy_f = ctx.cast(dy, T.FLOAT)
    grads = {0: ctx.cast_like(ctx.add("MatMul", [dy_f, w_t], hint="da"), a)}
    if bias:
        d_bias = ctx.sum_rows(dy_f, ctx.ints([n], "n"))
        grads[5] = ctx.cast_like(d_bias, bias)
    return grads


def _dequantized_transpose(ctx: GradContext, b: str, scales: str, k: int, n: int,
                           bits: int) -> str:
    """W^T as FLOAT [N, K]."""
    codes = ctx.add("BitwiseAnd", [_shifted(ctx, b, n, bits),
                                   ctx.const(2**bits - 1, _word_type(bits), "mask")])
    values = ctx.add("Sub", [ctx.cast(codes, T.FLOAT),
                             ctx.const(2.0 ** (bits - 1), "float32", "zero_point")])
    blocks = ctx.add("Reshape", [values, ctx.ints([n, -1, BLOCK])])
    block_scales = ctx.add("Reshape", [ctx.cast(scales, T.FLOAT), ctx.ints([n, -1, 1])])
    padded = ctx.add("Reshape", [ctx.add("Mul", [blocks, block_scales]), ctx.ints([n, -1])])
    return ctx.add("Slice", [padded, ctx.ints([0]), ctx.ints([k]), ctx.ints([1])], hint="w_t")


def _word_type(bits: int) -> int:
    return T.UINT32 if bits == 3 else T.UINT8


def _shifted(ctx: GradContext, b: str, n: int, bits: int) -> str:
    """[N, words, codes per word]: each word of B shifted right so that its
    code p sits in the low bits of entry p."""
    if bits == 3:
        # eight codes in three little-endian bytes
        triples = ctx.cast(ctx.add("Reshape", [b, ctx.ints([n, -1, 3])]), T.INT32)
        word = ctx.reduce_sum(ctx.add("Mul", [triples, ctx.const([1, 256, 65536], "int32")]),
                              [2], keepdims=1)
        words, per_word = ctx.cast(word, T.UINT32), 8
    else:
        words, per_word = ctx.add("Reshape", [b, ctx.ints([n, -1, 1])]), 8 // bits
    shifts = ctx.const([bits * p for p in range(per_word)], _word_type(bits), "shifts")
    shifted = ctx.add("BitShift", [words, shifts], direction="RIGHT")
    return ctx.add("Reshape", [shifted, ctx.ints([n, -1])])
