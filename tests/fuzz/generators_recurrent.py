"""Valid-case generator of RNN, GRU and LSTM, judged by the cells'
equations in float64 NumPy.

Neither ready oracle fits: the built-ins ignore sequence_lens and clip, and
ONNX Runtime, right on finite inputs, loses NaN on the way: a NaN bias of
LSTM's input gate gives it a finite Y, and its first step skips the
product of R with a zero initial state, so a NaN in R does not reach Y
there though NaN x 0 is NaN.  The formula below follows the specification,
and ONNX Runtime's conventions where the specification is silent: zeros in
Y past a row's sequence length, zero states for a row of length 0 when the
others have steps, and clip taking NaN to +clip (F29 in FINDINGS.md:
ONNX Runtime's LSTM and GRU do so with a bias B, min(clip, x) then
max(-clip, x), but keep NaN without B and in RNN; the kernel takes the
first rule everywhere)."""

from __future__ import annotations

import numpy as np

from .cases import Case, Draw, Invalid, elem_type, randn
from .generators import F32, generator

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
N_OUT = {"LSTM": 3, "GRU": 2, "RNN": 2}
ATTRIBUTES = {"hidden_size", "direction", "clip", "linear_before_reset"}


@generator("ai.onnx", "LSTM", "GRU", "RNN")
def gen_recurrent(d: Draw, record) -> Case:
    """float32 (ONNX Runtime's CPU kernels take no other type): every
    direction, sequence_lens, initial states, peepholes, clip."""
    op = record.op_type
    G = GATES[op]
    rng = d.rng()
    T, B, K, H = (d.choice([1, 2, 3, 5]), d.choice([1, 2, 3]), d.choice([1, 2, 5]),
                  d.choice([1, 3, 4, 8]))
    direction = d.choice(["forward", "reverse", "bidirectional"])
    D = 2 if direction == "bidirectional" else 1
    inputs = [randn(rng, (T, B, K), F32), randn(rng, (D, G * H, K), F32) * 0.5,
              randn(rng, (D, G * H, H), F32) * 0.5]
    full = d.chance(0.7)
    if full:
        lens = rng.integers(1, T + 1, size=B).astype(np.int32) if d.chance(0.5) else None
        inputs += [randn(rng, (D, 2 * G * H), F32), lens, randn(rng, (D, B, H), F32)]
        if op == "LSTM":
            inputs += [randn(rng, (D, B, H), F32), randn(rng, (D, 3 * H), F32)]
    attrs = {"hidden_size": H, "direction": direction}
    if d.chance(0.3):
        attrs["clip"] = d.choice([0.5, 2.0])
    if op == "GRU" and d.chance(0.5):
        attrs["linear_before_reset"] = 1
    n_out = N_OUT[op]
    return Case(op, "", d.choice([7, 14, 22]), inputs, attrs, n_outputs=n_out,
                family="recurrent", oracle="numpy", tolerance="loose",
                numpy_oracle=lambda *xs, attrs: recurrent(op, attrs, *xs),
                structural=frozenset({4}), output_types=(elem_type(F32),) * n_out)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _arrays(op, attrs, X, W, R, B, lens, h0, c0, P):
    """The inputs as float64 arrays of the shapes the operator needs (an
    Invalid where a shape breaks the specification)."""
    for name in attrs:
        if name not in ATTRIBUTES or (name == "linear_before_reset" and op != "GRU"):
            raise ValueError(f"{op}: the oracle knows no attribute {name!r}")
    direction = attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise Invalid(f"{op}: direction {direction!r}")
    arrays = [None if a is None else np.asarray(a) for a in (X, W, R, B, lens, h0, c0, P)]
    floats = [a for i, a in enumerate(arrays) if a is not None and i != 4]
    if any(a.dtype != floats[0].dtype or a.dtype.kind != "f" for a in floats):
        raise ValueError(f"{op}: inputs of different or non-float types")
    if arrays[4] is not None and arrays[4].dtype != np.int32:
        raise ValueError(f"{op}: sequence_lens must be int32")
    X, W, R, B, lens, h0, c0, P = arrays
    D, G = 2 if direction == "bidirectional" else 1, GATES[op]
    H = attrs.get("hidden_size", R.shape[-1] if R.ndim else 0)
    if X.ndim != 3:
        raise Invalid(f"{op}: X of rank {X.ndim}")
    T, N, K = X.shape
    wanted = {1: (D, G * H, K), 2: (D, G * H, H), 3: (D, 2 * G * H), 4: (N,), 5: (D, N, H),
              6: (D, N, H), 7: (D, 3 * H)}
    for i, a in enumerate(arrays[1:], start=1):
        if a is not None and a.shape != wanted[i]:
            raise Invalid(f"{op}: input {i} of shape {a.shape}, expected {wanted[i]}")
    if lens is not None and ((lens < 0) | (lens > T)).any():
        raise Invalid(f"{op}: sequence_lens outside [0, {T}]")
    with np.errstate(all="ignore"):
        X, W, R = (a.astype(np.float64) for a in (X, W, R))
        B, h0, c0, P = (np.zeros(wanted[i]) if a is None else a.astype(np.float64)
                        for i, a in ((3, B), (5, h0), (6, c0), (7, P)))
    if lens is None or (lens == T).all():
        lens = np.full(N, T)
    return direction, D, H, X, W, R, B, lens, h0, c0, P


def recurrent(op, attrs, X, W, R, B=None, lens=None, h0=None, c0=None, P=None):
    """Y, Y_h (and Y_c) of RNN, GRU or LSTM, layout 0, default activations."""
    direction, D, H, X, W, R, B, lens, h0, c0, P = _arrays(op, attrs, X, W, R, B, lens, h0,
                                                            c0, P)
    clip = attrs.get("clip")
    if clip is not None and not clip > 0:
        raise ValueError(f"{op}: clip {clip}")
    G, (T, N, _) = GATES[op], X.shape

    def cl(v):  # NaN to +clip (F29)
        return v if clip is None else np.where(np.isnan(v), clip, np.clip(v, -clip, clip))

    Y = np.zeros((T, D, N, H))
    Yh, Yc = np.zeros((D, N, H)), np.zeros((D, N, H))
    with np.errstate(all="ignore"):
        for d in range(D):
            reverse = direction == "reverse" or d == 1
            wb, rb = B[d, :G * H], B[d, G * H:]
            for n in range(N):
                steps = int(lens[n])
                if steps == 0 and T > 0:  # a row of no step: zero states
                    continue
                h, c = h0[d, n], c0[d, n]
                for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
                    x = X[t, n]
                    if op == "RNN":
                        h = np.tanh(cl(W[d] @ x + R[d] @ h + wb + rb))
                    elif op == "GRU":
                        (wz, wr, wh), (rz, rr, rh) = np.split(W[d], 3), np.split(R[d], 3)
                        (bz, br, bh), (cz, cr, ch) = np.split(wb, 3), np.split(rb, 3)
                        z = _sigmoid(cl(wz @ x + rz @ h + bz + cz))
                        r = _sigmoid(cl(wr @ x + rr @ h + br + cr))
                        if attrs.get("linear_before_reset", 0):
                            g = np.tanh(cl(wh @ x + r * (rh @ h + ch) + bh))
                        else:
                            g = np.tanh(cl(wh @ x + rh @ (r * h) + ch + bh))
                        h = (1.0 - z) * g + z * h
                    else:  # LSTM: gates i, o, f, c; peepholes i, o, f
                        gi, go, gf, gc = np.split(W[d] @ x + R[d] @ h + wb + rb, 4)
                        pi, po, pf = np.split(P[d], 3)
                        i = _sigmoid(cl(gi + pi * c))
                        f = _sigmoid(cl(gf + pf * c))
                        c = f * c + i * np.tanh(cl(gc))
                        h = _sigmoid(cl(go + po * c)) * np.tanh(c)
                    Y[t, d, n] = h
                Yh[d, n], Yc[d, n] = h, c
    return [Y, Yh, Yc][:N_OUT[op]]
