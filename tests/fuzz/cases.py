"""Fuzz cases: what one case is, where its random choices come from, the
layouts its arrays take, and the single-node model it runs.

A generator receives a :class:`Draw`.  :class:`RngDraw` takes its choices
from a seeded NumPy generator (the long sweep: case ``i`` of seed ``s`` is
reproducible from ``(s, i)`` alone); :class:`HypothesisDraw` takes them from
Hypothesis, so the structural choices (shapes, dtypes, layouts, mutations)
shrink, while array contents come from a NumPy generator seeded by one
drawn integer.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx import helper as oh

MS = "com.microsoft"
ML = "ai.onnx.ml"

FLOATS = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(bfloat16), np.dtype(np.float64))
SIGNED = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UNSIGNED = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
INTEGERS = SIGNED + UNSIGNED
BOOL = np.dtype(np.bool_)


class Invalid(ValueError):
    """Raised by a NumPy oracle for input the specification forbids: a
    kernel that accepts it has a finding (accepts_invalid)."""


# Attributes whose valid values are a small set: a mutation that sets one
# outside it makes the case invalid (the kernel must refuse it).
ATTRIBUTE_DOMAINS = {
    "unidirectional": {0, 1}, "is_causal": {0, 1}, "interleaved": {0, 1},
    "rotary_interleaved": {0, 1}, "do_rotary": {0, 1}, "smooth_softmax": {0, 1},
    "keepdims": {0, 1}, "noop_with_empty_axes": {0, 1}, "transA": {0, 1}, "transB": {0, 1},
    "fmod": {0, 1}, "channels_last": {0, 1}, "normalize_routing_weights": {0, 1},
    "swiglu_fusion": {0, 1, 2}, "saturate": {0, 1}, "training_mode": {0, 1},
    "is_packed_batching": {0, 1}, "causal": {0, 1}, "p": {1, 2},
    "expert_weight_bits": {4, 8}, "bits": {2, 3, 4, 8},
}
# Not here: MatMulNBits accuracy_level, which ONNX Runtime takes whatever its
# value (only 4 selects the int8 engine; tests/ops/test_matmul_nbits.py).


# ------------------------------------------------------------------ draws

class Draw:
    """The source of a case's random choices."""

    def int(self, lo: int, hi: int) -> int:  # inclusive bounds
        raise NotImplementedError

    def choice(self, options: Sequence):
        return options[self.int(0, len(options) - 1)]

    def chance(self, p: float) -> bool:
        """True with probability ``p`` (shrinks towards False)."""
        return self.int(0, 999) >= round((1.0 - p) * 1000)

    def float(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * self.int(0, 1 << 20) / (1 << 20)

    def rng(self) -> np.random.Generator:
        """A NumPy generator for array contents."""
        return np.random.default_rng(self.int(0, 2**32 - 1))


class RngDraw(Draw):
    def __init__(self, seed) -> None:
        self._rng = np.random.default_rng(seed)

    def int(self, lo: int, hi: int) -> int:
        return int(self._rng.integers(lo, hi + 1))


class HypothesisDraw(Draw):
    def __init__(self, data) -> None:
        from hypothesis import strategies as st

        self._data, self._st = data, st

    def int(self, lo: int, hi: int) -> int:
        return self._data.draw(self._st.integers(lo, hi))


# ------------------------------------------------------------------ cases

@dataclass
class Case:
    """One node to run: inputs (arrays, None for an absent input, or a raw
    Python value as a mutation), attributes, and how to judge the result."""

    op_type: str
    domain: str
    opset: int                       # of the node's domain
    inputs: list
    attrs: dict = field(default_factory=dict)
    n_outputs: int = 1
    policy: str = "optimized"        # or "naive"
    family: str = ""
    oracle: str = "builtin"          # builtin | ort | twin | numpy | none
    tolerance: str = "elementwise"   # exact | elementwise | accumulate | loose
    widen: bool = False              # run the built-in oracle on float inputs as float64
    structural: frozenset = frozenset()   # inputs whose values carry structure
    constant: frozenset = frozenset()     # inputs given as initializers
    output_types: tuple | None = None     # ONNX element types (ORT wants them)
    compare: tuple | None = None          # outputs to compare with the oracle (None: all)
    numpy_oracle: Any = None              # callable(*inputs) -> outputs, oracle="numpy"
    ort_transform: Any = None             # callable(inputs) -> inputs for ORT
    default_opset: int = 21               # the ai.onnx opset beside a custom domain
    ort_ok: bool = False                  # ONNX Runtime can judge it (NAIVE-policy twins)
    mutation: str = ""
    layouts: list = field(default_factory=list)
    expect: str = "valid"            # valid | invalid | either
    huge: bool = False

    def __post_init__(self) -> None:
        # NumPy reductions hand back scalars for 0-d arrays: feed arrays
        self.inputs = [np.asarray(x) if isinstance(x, np.generic) else x for x in self.inputs]

    def clone(self) -> Case:
        other = copy.copy(self)
        other.inputs = list(self.inputs)
        other.attrs = dict(self.attrs)
        other.layouts = list(self.layouts)
        return other

    def describe(self) -> str:
        parts = []
        for i, x in enumerate(self.inputs):
            if x is None:
                parts.append(f"in{i}=None")
            elif isinstance(x, np.ndarray):
                layout = self.layouts[i] if i < len(self.layouts) else "c"
                parts.append(f"in{i}={x.dtype}{list(x.shape)}"
                             + (f"/{layout}" if layout != "c" else ""))
            else:
                parts.append(f"in{i}={type(x).__name__}")
        attrs = {k: (v if not isinstance(v, (onnx.TensorProto, np.ndarray)) else "<tensor>")
                 for k, v in self.attrs.items()}
        return (f"{self.domain or 'ai.onnx'}::{self.op_type} opset={self.opset} "
                f"policy={self.policy} mutation={self.mutation or '-'} "
                f"{' '.join(parts)} attrs={attrs}")


# ------------------------------------------------------------------ arrays

def elem_type(dtype) -> int:
    return oh.np_dtype_to_tensor_dtype(np.dtype(dtype))


def quantized_weights(rng: np.random.Generator, shape, dtype, lhs_dtype) -> np.ndarray:
    """Integer weights of the full range of ``dtype``, but int8 ones against
    a uint8 left-hand side from [-64, 64]: without AVX-VNNI, ONNX Runtime
    adds pairs of u8 x s8 products in saturating 16-bit arithmetic
    (tests/differential.py, ort_int8_weight_range), and the sweep judges
    these operators by it."""
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if dtype == np.int8 and np.dtype(lhs_dtype) == np.uint8:
        lo, hi = -64, 64
    return rng.integers(lo, hi + 1, shape).astype(dtype)


def randn(rng: np.random.Generator, shape, dtype, scale: float = 1.0) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -100), min(int(info.max), 100)
        return rng.integers(lo, hi + 1, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "O":
        return np.array(rng.choice(["a", "bc", "", "xyz"], size=shape), dtype=object)
    return np.asarray(rng.standard_normal(shape) * scale).astype(dtype)


SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 1e-8, 3.0e38)
# Without the large finite values: products and sums of those overflow in
# the kernel's accumulator type but not in the float64 oracle's.
SAFE_SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-8)


def sprinkle_specials(rng: np.random.Generator, x: np.ndarray, fraction: float = 0.2,
                      values=SPECIALS):
    """Some elements of a float array replaced by NaN, infinities, zeros..."""
    if x.dtype not in FLOATS or x.size == 0:
        return x
    x = x.copy()
    flat = x.reshape(-1)
    mask = rng.random(flat.size) < fraction
    with np.errstate(over="ignore"):
        flat[mask] = np.array(rng.choice(values, size=int(mask.sum()))).astype(x.dtype)
    return x


LARGE_SIZES = (255, 1000, 4099, 65537)


def random_shape(d: Draw, rank: int | None = None, max_rank: int = 4,
                 sizes=(0, 1, 1, 2, 3, 4, 5, 7, 8, 16, 17, 33),
                 large: float = 0.06) -> tuple[int, ...]:
    """A shape of small sizes (0, 1, odd, off the vector width); with
    probability ``large`` one axis long enough for the vector loops and
    the two-thread split (at most 2**18 elements in all)."""
    rank = d.int(0, max_rank) if rank is None else rank
    shape = [d.choice(sizes) for _ in range(rank)]
    if rank and d.chance(large):
        axis = d.int(0, rank - 1)
        shape[axis] = d.choice(LARGE_SIZES)
        budget = (1 << 18) // shape[axis]
        for i in range(rank):
            if i != axis and shape[i] > 1:
                shape[i] = max(1, min(shape[i], budget))
                budget //= max(shape[i], 1)
    return tuple(shape)


def broadcast_operand(d: Draw, out: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``out``: leading dims dropped, others 1."""
    drop = d.int(0, len(out))
    return tuple(1 if (s != 0 and d.chance(0.3)) else s for s in out[drop:]) if out else ()


LAYOUTS = ("c", "fortran", "strided", "negative", "stride0", "readonly", "unaligned")


def with_layout(x, layout: str, rng: np.random.Generator):
    """``x`` in another memory layout; the values stay the same except for
    'stride0', which repeats one slice along a broadcast axis."""
    if not isinstance(x, np.ndarray) or x.ndim == 0 and layout != "readonly":
        return x
    if x.dtype.kind == "O" and layout == "unaligned":
        return x
    if layout == "fortran":
        return np.asfortranarray(x)
    if layout == "strided":
        # every other element of a twice-as-long last axis
        buf = np.empty(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype)
        view = buf[..., ::2]
        view[...] = x
        return view
    if layout == "negative":
        buf = np.ascontiguousarray(x[..., ::-1])
        return buf[..., ::-1]
    if layout == "stride0":
        axes = [i for i, s in enumerate(x.shape) if s > 1]
        if not axes:
            return x
        axis = axes[int(rng.integers(len(axes)))]
        one = np.take(x, [0], axis=axis)
        return np.broadcast_to(one, x.shape)
    if layout == "readonly":
        y = np.array(x, copy=True)
        y.flags.writeable = False
        return y
    if layout == "unaligned":
        if x.dtype.itemsize == 1:
            return x
        raw = np.empty(x.nbytes + 1, dtype=np.uint8)
        view = raw[1:].view(x.dtype).reshape(x.shape)
        view[...] = x
        return view
    return x


def apply_layouts(d: Draw, case: Case, p: float = 0.35) -> None:
    rng = d.rng()
    layouts = []
    for i, x in enumerate(case.inputs):
        layout = "c"
        if isinstance(x, np.ndarray) and d.chance(p):
            layout = d.choice(LAYOUTS[1:])
            if layout == "stride0" and i in case.structural:
                layout = "readonly"
            case.inputs[i] = with_layout(x, layout, rng)
        layouts.append(layout)
    case.layouts = layouts


# ------------------------------------------------------------------ models

def input_names(case: Case) -> list[str]:
    return ["" if x is None else f"in{i}" for i, x in enumerate(case.inputs)]


def feeds_of(case: Case, inputs=None) -> dict:
    inputs = case.inputs if inputs is None else inputs
    return {f"in{i}": x for i, x in enumerate(inputs)
            if x is not None and i not in case.constant}


def _value_type(x) -> int:
    if isinstance(x, np.ndarray):
        return elem_type(x.dtype) if x.dtype.kind != "O" else TensorProto.STRING
    if isinstance(x, list):
        return _value_type(np.asarray(x))
    if isinstance(x, bool):
        return TensorProto.BOOL
    if isinstance(x, int):
        return TensorProto.INT64
    return TensorProto.FLOAT


def build_model(case: Case, inputs=None, for_ort: bool = False) -> onnx.ModelProto:
    """The one-node model of ``case`` (``inputs`` overrides the arrays, for
    an oracle that runs on converted ones)."""
    inputs = case.inputs if inputs is None else inputs
    names = input_names(case)
    while names and names[-1] == "":
        names.pop()
    outs = [f"out{i}" for i in range(case.n_outputs)]
    node = oh.make_node(case.op_type, names, outs, domain=case.domain or None, **case.attrs)
    graph_inputs, inits = [], []
    for i, name in enumerate(names):
        if not name:
            continue
        x = inputs[i]
        if i in case.constant and isinstance(x, np.ndarray):
            inits.append(onnx.numpy_helper.from_array(np.ascontiguousarray(x), name))
            continue
        shape = list(np.shape(x)) if for_ort else [None] * np.ndim(x)
        graph_inputs.append(oh.make_tensor_value_info(name, _value_type(x), shape))
    if case.output_types is not None:
        out_types = list(case.output_types)
    elif for_ort:
        first = _value_type(inputs[0])
        out_types = [first] * len(outs)
    else:
        out_types = [TensorProto.UNDEFINED] * len(outs)
    if for_ort:  # ORT reads bfloat16 results of the float32 run
        out_types = [TensorProto.FLOAT if t == TensorProto.BFLOAT16 else t for t in out_types]
    graph = oh.make_graph([node], "fuzz", graph_inputs,
                          [oh.make_tensor_value_info(n, t, None) for n, t in zip(outs, out_types)],
                          initializer=inits)
    if case.domain:
        opsets = [oh.make_opsetid("", case.default_opset), oh.make_opsetid(case.domain, case.opset)]
    else:
        opsets = [oh.make_opsetid("", case.opset)]
    model = oh.make_model(graph, opset_imports=opsets)
    model.ir_version = 10 if for_ort else max(model.ir_version, 10)
    return model


def nbytes_logical(x: np.ndarray) -> int:
    return int(math.prod(x.shape)) * x.dtype.itemsize
