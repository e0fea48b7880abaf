"""Readable NumPy references of com.microsoft MoE and QMoE, the test
oracle of the optimized kernels (MoE and QMoE are standalone registrations:
no NAIVE family registers them).

Everything is computed in float64 from float32 views of the inputs, token
by token, expert by expert.
"""

from __future__ import annotations

import numpy as np


def routing(logits: np.ndarray, k: int, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Experts (T x k) and their weights: softmax over all experts, the k
    largest probabilities (equal ones: the higher expert index first, as
    ONNX Runtime), renormalised to sum to one when ``normalize``."""
    logits = logits.astype(np.float64)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    # Stable sort of the reversed columns: among equals, higher index first.
    order = p.shape[1] - 1 - np.argsort(-p[:, ::-1], axis=1, kind="stable")
    experts = order[:, :k]
    weights = np.take_along_axis(p, experts, axis=1)
    if normalize:
        weights = weights / weights.sum(axis=1, keepdims=True)
    return experts, weights


def gelu_tanh(v):
    return 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v ** 3)))


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


ACTIVATIONS = {
    "relu": lambda v: np.where(v > 0.0, v, 0.0),  # NaN -> 0, as ONNX Runtime's max(0, v)
    "gelu": gelu_tanh,
    "silu": lambda v: v * sigmoid(v),
    "identity": lambda v: v,
}


def swiglu(gate, linear, alpha=1.0, beta=0.0, limit=None):
    """G * sigmoid(alpha G) * (L + beta), G clamped from above and L on
    both sides by the limit when there is one."""
    if limit is not None:
        gate = np.minimum(gate, limit)
        linear = np.clip(linear, -limit, limit)
    return gate * sigmoid(alpha * gate) * (linear + beta)


def moe(x, logits, w1, b1, w2, b2, w3=None, b3=None, *, k=1, normalize=False,
        activation="relu", alpha=1.0, beta=0.0, limit=None, routes=None):
    """Mixture of experts on logical float weights: w1 [E, f*I, H]
    (interleaved gate/linear rows for activation 'swiglu' without w3),
    w2 [E, H, I], optional w3 [E, I, H]; biases [E, rows] or None.
    x is [..., H]; returns float64 of x's shape.  ``routes``: (experts,
    weights) of QMoE's routing (:func:`qmoe_routing`), whose routes of
    weight <= 1e-8 (or NaN) are skipped; else MoE's :func:`routing`."""
    shape = x.shape
    x = x.reshape(-1, shape[-1]).astype(np.float64)
    qmoe_routes = routes is not None
    experts, weights = routes if qmoe_routes else routing(np.asarray(logits, np.float32), k,
                                                          normalize)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        if not qmoe_routes and not np.isfinite(weights[t]).all():  # NaN or +inf logits:
            continue                                # ONNX Runtime routes such a token nowhere
        for e, w in zip(experts[t], weights[t]):
            if qmoe_routes and not w > 1e-8:
                continue
            h = w1[e].astype(np.float64) @ x[t]
            if b1 is not None:
                h = h + b1[e]
            if w3 is not None:
                u = w3[e].astype(np.float64) @ x[t] + (b3[e] if b3 is not None else 0.0)
                if activation == "swiglu":
                    a = swiglu(h, u, alpha, beta, limit)
                else:
                    a = ACTIVATIONS[activation](h) * u
            elif activation == "swiglu":
                a = swiglu(h[0::2], h[1::2], alpha, beta, limit)
            else:
                a = ACTIVATIONS[activation](h)
            y = w2[e].astype(np.float64) @ a
            if b2 is not None:
                y = y + b2[e]
            out[t] += w * y
    return out.reshape(shape)


def qmoe_routing(logits: np.ndarray, k: int, normalize: bool,
                 router_weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """QMoE's routing (ONNX Runtime 1.32's CPU kernel): the k largest raw
    logits (equal ones: the higher expert index first); their weights are
    the softmax over those k logits only, or, with ``router_weights``
    [T, E], the router weights at the selected experts, renormalised to sum
    to one when ``normalize`` (a sum of 0 gives weights 0).  Routes of
    weight <= 1e-8 are skipped by :func:`moe`."""
    logits = logits.astype(np.float64)
    order = logits.shape[1] - 1 - np.argsort(-logits[:, ::-1], axis=1, kind="stable")
    experts = order[:, :k]
    if router_weights is None:
        top = np.take_along_axis(logits, experts, axis=1)
        e = np.exp(top - top[:, :1])
        return experts, e / e.sum(axis=1, keepdims=True)
    weights = np.take_along_axis(router_weights.astype(np.float64), experts, axis=1)
    if normalize:
        total = weights.sum(axis=1, keepdims=True)
        weights = np.where(total == 0.0, 0.0, weights / np.where(total == 0.0, 1.0, total))
    return experts, weights


def unpack_codes(w: np.ndarray, bits: int, columns: int) -> np.ndarray:
    """Unsigned integer codes [..., columns] of stored bytes [..., P]: 8 //
    bits codes a byte, least significant first; 3 bits: a bit stream, code
    p in bits [3p, 3p + 3) of the row."""
    if bits == 3:
        stream = np.unpackbits(w, axis=-1, bitorder="little")[..., :3 * columns]
        return (stream.reshape(*w.shape[:-1], columns, 3).astype(np.int32)
                * np.array([1, 2, 4])).sum(axis=-1)
    per = 8 // bits
    shifts = np.arange(per, dtype=np.uint8) * bits
    codes = (w[..., None] >> shifts) & ((1 << bits) - 1)
    return codes.reshape(*w.shape[:-1], -1)[..., :columns].astype(np.int32)


def zero_points(zp, bits: int, E: int, rows: int, nblocks: int, block_size: int) -> np.ndarray:
    """Float64 zero points [E, rows, nblocks]: implicit 2^(bits-1) when
    ``zp`` is None; else ONNX Runtime's layouts, codes least significant
    first: per block [E, rows, ceil(nblocks * bits / 8)] packed along the
    blocks; per row (block_size 0) [E, ceil(rows * bits / 8)] packed along
    the rows."""
    if zp is None:
        return np.full((E, rows, nblocks), float(1 << (bits - 1)))
    if block_size:
        return unpack_codes(zp.reshape(E, rows, -1), bits, nblocks).astype(np.float64)
    return unpack_codes(zp.reshape(E, -1), bits, rows).reshape(E, rows, 1).astype(np.float64)


def dequantize(w, scales, bits, block_size, columns, zp=None):
    """Logical float64 matrix [E, R, columns] of stored weights and scales
    ([E, R] per row for block_size 0, else [E, R, ceil(columns/block)]):
    (code - zero point) * scale, codes unsigned (8 // bits a byte)."""
    codes = unpack_codes(w, bits, columns).astype(np.float64)
    s = scales.astype(np.float64)
    E, R = codes.shape[:2]
    s = s.reshape(E, R, -1)
    z = zero_points(zp, bits, E, R, s.shape[2], block_size)
    step = block_size or columns
    expand = lambda a: np.repeat(a, step, axis=-1)[..., :columns]  # noqa: E731
    return (codes - expand(z)) * expand(s)


def qmoe(x, logits, w1, s1, b1, w2, s2, b2, w3=None, s3=None, b3=None, *, bits=4,
         block_size=0, input_major=False, k=1, normalize=False, activation="relu",
         alpha=1.0, beta=0.0, limit=None, zps=(None, None, None),
         router_weights=None, proj_bits=None):
    """QMoE: dequantize each projection to its logical matrix, bring it to
    output-major, then :func:`moe` with :func:`qmoe_routing`.  Output-major
    stores FC1 [E, f*I, H], FC2 [E, H, I], FC3 [E, I, H]; input-major
    (``input_major``) FC1 and FC3 [E, H, I], FC2 [E, I, H].  ``proj_bits``:
    bits of FC1, FC2, FC3 when they differ."""
    H = x.shape[-1]
    b = proj_bits or (bits, bits, bits)
    z1, z2, z3 = zps
    if input_major:
        inter = w2.shape[1]
        m1 = dequantize(w1, s1, b[0], block_size, inter).transpose(0, 2, 1)
        m2 = dequantize(w2, s2, b[1], block_size, H).transpose(0, 2, 1)
        m3 = (dequantize(w3, s3, b[2], block_size, inter).transpose(0, 2, 1)
              if w3 is not None else None)
    else:
        fused = w3 is None and activation == "swiglu"
        inter = w3.shape[1] if w3 is not None else w1.shape[1] // (2 if fused else 1)
        m1 = dequantize(w1, s1, b[0], block_size, H, z1)
        m2 = dequantize(w2, s2, b[1], block_size, inter, z2)
        m3 = dequantize(w3, s3, b[2], block_size, H, z3) if w3 is not None else None
    routes = qmoe_routing(np.asarray(logits, np.float32), k, normalize, router_weights)
    return moe(x, logits, m1, b1, m2, b2, m3, b3, k=k, normalize=normalize,
               activation=activation, alpha=alpha, beta=beta, limit=limit, routes=routes)
