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
        activation="relu", alpha=1.0, beta=0.0, limit=None):
    """Mixture of experts on logical float weights: w1 [E, f*I, H]
    (interleaved gate/linear rows for activation 'swiglu' without w3),
    w2 [E, H, I], optional w3 [E, I, H]; biases [E, rows] or None.
    x is [..., H]; returns float64 of x's shape."""
    shape = x.shape
    x = x.reshape(-1, shape[-1]).astype(np.float64)
    experts, weights = routing(np.asarray(logits, np.float32), k, normalize)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        if not np.isfinite(weights[t]).all():  # NaN or +inf logits: ONNX Runtime
            continue                              # routes such a token nowhere
        for e, w in zip(experts[t], weights[t]):
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


def unpack_codes(w: np.ndarray, bits: int, columns: int, signed8: bool) -> np.ndarray:
    """Signed integer codes [E, R, columns] of stored bytes [E, R, P]:
    INT4 low nibble first minus 8; INT8 two's complement (``signed8``) or
    minus 128."""
    if bits == 4:
        codes = np.stack([w & 15, w >> 4], axis=-1).reshape(*w.shape[:-1], -1)
        return codes[..., :columns].astype(np.int32) - 8
    if signed8:
        return w.view(np.int8)[..., :columns].astype(np.int32)
    return w[..., :columns].astype(np.int32) - 128


def dequantize(w, scales, bits, block_size, columns):
    """Logical float64 matrix [E, R, columns] of stored weights and scales
    ([E, R] per row for block_size 0, else [E, R, ceil(columns/block)])."""
    codes = unpack_codes(w, bits, columns, signed8=block_size > 0).astype(np.float64)
    s = scales.astype(np.float64)
    if block_size == 0:
        return codes * s[..., None]
    return codes * np.repeat(s, block_size, axis=-1)[..., :columns]


def qmoe(x, logits, w1, s1, b1, w2, s2, b2, w3=None, s3=None, b3=None, *, bits=4,
         block_size=0, input_major=False, k=1, normalize=False, activation="relu",
         alpha=1.0, beta=0.0, limit=None):
    """QMoE: dequantize each projection to its logical matrix, bring it to
    output-major, then :func:`moe`.  Output-major stores FC1 [E, f*I, H],
    FC2 [E, H, I], FC3 [E, I, H]; input-major (``input_major``) FC1 and
    FC3 [E, H, I], FC2 [E, I, H]."""
    H = x.shape[-1]
    if input_major:
        inter = w2.shape[1]
        m1 = dequantize(w1, s1, bits, block_size, inter).transpose(0, 2, 1)
        m2 = dequantize(w2, s2, bits, block_size, H).transpose(0, 2, 1)
        m3 = (dequantize(w3, s3, bits, block_size, inter).transpose(0, 2, 1)
              if w3 is not None else None)
    else:
        fused = w3 is None and activation == "swiglu"
        inter = w3.shape[1] if w3 is not None else w1.shape[1] // (2 if fused else 1)
        m1 = dequantize(w1, s1, bits, block_size, H)
        m2 = dequantize(w2, s2, bits, block_size, inter)
        m3 = dequantize(w3, s3, bits, block_size, H) if w3 is not None else None
    return moe(x, logits, m1, b1, m2, b2, m3, b3, k=k, normalize=normalize,
               activation=activation, alpha=alpha, beta=beta, limit=limit)
