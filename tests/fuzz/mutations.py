"""Generic invalid-input mutations, applied to a valid case.

Each mutation returns a new case (or None where it does not apply) and says
what the operator owes it: ``invalid`` (a clear error is the only right
answer), ``either`` (valid or not, the oracle decides).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from .cases import ATTRIBUTE_DOMAINS, BOOL, FLOATS, SAFE_SPECIALS, Case, Draw, sprinkle_specials

HUGE_ELEMENTS = (1 << 33) + 1


def _arrays(case: Case, structural: bool | None = None) -> list[int]:
    out = []
    for i, x in enumerate(case.inputs):
        if isinstance(x, np.ndarray) and (structural is None
                                          or (i in case.structural) == structural):
            out.append(i)
    return [i for i in out if i not in case.constant]


def wrong_dtype(d: Draw, case: Case):
    idx = _arrays(case)
    if not idx:
        return None
    i = d.choice(idx)
    x = case.inputs[i]
    choices = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_]
    target = np.dtype(d.choice([t for t in choices if np.dtype(t) != x.dtype]))
    if x.dtype.kind == "O":
        return None
    c = case.clone()
    with np.errstate(all="ignore"):
        c.inputs[i] = np.ascontiguousarray(x).astype(target)
    return c, "either"


def wrong_rank(d: Draw, case: Case):
    idx = _arrays(case)
    if not idx:
        return None
    i = d.choice(idx)
    x = case.inputs[i]
    c = case.clone()
    if x.ndim and x.size and d.chance(0.2):
        c.inputs[i] = np.ascontiguousarray(x.reshape(-1)[0])  # a 0-d tensor
    elif x.ndim and d.chance(0.5):
        c.inputs[i] = np.ascontiguousarray(x.reshape(-1) if x.ndim > 1 else x.reshape(()) if
                                           x.size == 1 else x[None])
    else:
        c.inputs[i] = np.ascontiguousarray(x)[None] if d.chance(0.5) else \
            np.ascontiguousarray(x)[None, None]
    return c, "either"


def mismatched_shape(d: Draw, case: Case):
    idx = [i for i in _arrays(case) if case.inputs[i].ndim]
    if not idx:
        return None
    i = d.choice(idx)
    x = case.inputs[i]
    axis = d.int(0, x.ndim - 1)
    c = case.clone()
    if x.shape[axis] > 1 and d.chance(0.5):
        c.inputs[i] = np.ascontiguousarray(np.take(x, range(x.shape[axis] - 1), axis=axis))
    else:
        c.inputs[i] = np.concatenate([x, np.take(x, [0] if x.shape[axis] else [], axis=axis)
                                      if x.shape[axis] else
                                      np.zeros(x.shape[:axis] + (1,) + x.shape[axis + 1:],
                                               x.dtype)], axis=axis)
    return c, "either"


def zero_size(d: Draw, case: Case):
    idx = [i for i in _arrays(case, structural=False) if case.inputs[i].ndim]
    if not idx:
        return None
    i = d.choice(idx)
    x = case.inputs[i]
    axis = d.int(0, x.ndim - 1)
    c = case.clone()
    c.inputs[i] = np.ascontiguousarray(np.take(x, [], axis=axis))
    return c, "either"


def _float_results(case: Case) -> bool:
    """NaN and infinities have a defined result (not a Cast to integers)."""
    if case.op_type == "Cast":
        to = case.attrs.get("to")
        return to in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                      onnx.TensorProto.BFLOAT16)
    return True


def nan_inf(d: Draw, case: Case):
    if not _float_results(case):
        return None
    idx = [i for i in _arrays(case, structural=False) if case.inputs[i].dtype in FLOATS
           and case.inputs[i].size]
    if not idx:
        return None
    c = case.clone()
    rng = d.rng()
    for i in idx:
        if d.chance(0.6):
            c.inputs[i] = sprinkle_specials(rng, np.ascontiguousarray(case.inputs[i]), 0.3,
                                            SAFE_SPECIALS)
    return c, "valid"


def nan_row(d: Draw, case: Case):
    """One whole float input NaN (a NaN query row, a NaN weight...)."""
    if not _float_results(case):
        return None
    idx = [i for i in _arrays(case, structural=False) if case.inputs[i].dtype in FLOATS
           and case.inputs[i].size]
    if not idx:
        return None
    i = d.choice(idx)
    c = case.clone()
    x = np.array(case.inputs[i], copy=True)
    if x.ndim >= 2:
        x[(0,) * (x.ndim - 1)] = np.nan
    else:
        x.reshape(-1)[0] = np.nan
    c.inputs[i] = x
    return c, "valid"


def missing_input(d: Draw, case: Case):
    present = [i for i, x in enumerate(case.inputs) if x is not None]
    if not present:  # an operator without inputs (Constant)
        return None
    c = case.clone()
    i = 0 if d.chance(0.6) else d.choice(present)
    c.inputs[i] = None
    return c, "invalid" if i == 0 and not _first_input_optional(case) else "either"


def _first_input_optional(case: Case) -> bool:
    """Whether the schema lets the node leave out its first input (Loop's M)."""
    try:
        schema = onnx.defs.get_schema(case.op_type, case.opset, case.domain)
    except Exception:  # noqa: BLE001 - no schema (an extension)
        return False
    return bool(schema.inputs) and \
        schema.inputs[0].option == onnx.defs.OpSchema.FormalParameterOption.Optional


def too_few_inputs(d: Draw, case: Case):
    present = [i for i, x in enumerate(case.inputs) if x is not None]
    if len(present) < 1:
        return None
    c = case.clone()
    keep = d.int(0, len(present) - 1)
    c.inputs = c.inputs[:present[keep]] if keep else []
    c.constant = frozenset(i for i in c.constant if i < len(c.inputs))
    if not c.inputs:
        return c, "invalid"
    return c, "either"


def python_value(d: Draw, case: Case):
    idx = _arrays(case)
    if not idx:
        return None
    i = d.choice(idx)
    x = case.inputs[i]
    c = case.clone()
    if x.dtype.kind in "fiub" and x.dtype in FLOATS + (BOOL,) or x.dtype.kind in "iu":
        c.inputs[i] = (x.tolist() if d.chance(0.6) or x.size != 1
                       else (float(x.reshape(-1)[0]) if x.dtype.kind == "f" else
                             int(x.reshape(-1)[0])))
    else:
        c.inputs[i] = x.astype(np.float32).tolist() if x.dtype.kind != "O" else x.tolist()
    return c, "either"


BAD_INTS = (-1, -2, 0, 1000, -1000, 2**31, 2**40, -(2**40))
BAD_FLOATS = (float("nan"), float("inf"), -1.0, 0.0, -1e30)


def bad_attribute(d: Draw, case: Case):
    c = case.clone()
    keys = [k for k, v in case.attrs.items() if isinstance(v, (int, float, str, bytes, list))]
    if not keys or d.chance(0.2):
        # an attribute the operator does not define, or a known one unset
        name = d.choice(["axis", "num_heads", "block_size", "bits", "k", "to", "epsilon",
                         "keepdims", "unidirectional", "interleaved", "is_causal"])
        c.attrs[name] = d.choice(BAD_INTS + (5,))
        defined = name in case.attrs or _defines(case, name)
        if defined and name in ATTRIBUTE_DOMAINS and c.attrs[name] not in ATTRIBUTE_DOMAINS[name]:
            return c, "invalid"
        return c, "either"
    k = d.choice(keys)
    v = case.attrs[k]
    if isinstance(v, bool) or isinstance(v, int):
        c.attrs[k] = d.choice(BAD_INTS + (5,))
        if k in ATTRIBUTE_DOMAINS and c.attrs[k] not in ATTRIBUTE_DOMAINS[k]:
            return c, "invalid"
    elif isinstance(v, float):
        c.attrs[k] = d.choice(BAD_FLOATS)
    elif isinstance(v, (str, bytes)):
        c.attrs[k] = d.choice(["bogus", "", "RELU"])
    elif isinstance(v, list) and v and all(isinstance(e, int) for e in v):
        w = list(v)
        w[d.int(0, len(w) - 1)] = d.choice(BAD_INTS)
        if d.chance(0.3):
            w = w + w[:1]
        c.attrs[k] = w
    elif isinstance(v, list) and v:
        c.attrs[k] = v[:-1]
    else:
        return None
    return c, "either"


def _defines(case: Case, name: str) -> bool:
    """Whether the operator's schema has the attribute ``name``."""
    try:
        schema = onnx.defs.get_schema(case.op_type, case.opset, case.domain)
    except Exception:  # noqa: BLE001 - no schema (an extension)
        return False
    return name in schema.attributes


def bad_index(d: Draw, case: Case):
    idx = [i for i in _arrays(case, structural=True) if case.inputs[i].dtype.kind in "iu"]
    if not idx:
        return None
    i = d.choice(idx)
    x = np.array(case.inputs[i], copy=True)
    c = case.clone()
    if x.size == 0:
        x = np.zeros((1,) * max(x.ndim, 1), x.dtype)
    info = np.iinfo(x.dtype)
    value = d.choice([int(info.max), int(info.min), 1000, -1000, 2**31 - 1, -(2**31), 7, -7])
    value = int(np.clip(value, info.min, info.max))
    x.reshape(-1)[d.int(0, x.size - 1)] = value
    c.inputs[i] = x
    return c, "either"


def huge(d: Draw, case: Case):
    """An input as a stride-0 view of more than 2**33 elements: it must be
    refused (ValueError/MemoryError naming the operator), never densified."""
    idx = [i for i in _arrays(case) if case.inputs[i].dtype.kind != "O"]
    if not idx:
        return None
    i = d.choice(idx)
    x = case.inputs[i]
    shape = [max(s, 1) for s in x.shape] or [1]
    axis = d.int(0, len(shape) - 1)
    others = math.prod(shape) // shape[axis]
    shape[axis] = -(-HUGE_ELEMENTS // others)
    c = case.clone()
    c.inputs[i] = np.broadcast_to(np.zeros((1,) * len(shape), x.dtype), tuple(shape))
    c.huge = True
    return c, "invalid"


MUTATIONS = {
    "wrong_dtype": wrong_dtype,
    "wrong_rank": wrong_rank,
    "mismatched_shape": mismatched_shape,
    "zero_size": zero_size,
    "nan_inf": nan_inf,
    "nan_row": nan_row,
    "missing_input": missing_input,
    "too_few_inputs": too_few_inputs,
    "python_value": python_value,
    "bad_attribute": bad_attribute,
    "bad_index": bad_index,
    "huge": huge,
}
IN_PROCESS_MUTATIONS = tuple(m for m in MUTATIONS if m != "huge")


def mutate(d: Draw, case: Case, allowed=tuple(MUTATIONS)) -> Case:
    """``case`` under one applicable mutation drawn from ``allowed``."""
    order = list(allowed)
    start = d.int(0, len(order) - 1)
    for k in range(len(order)):
        name = order[(start + k) % len(order)]
        result = MUTATIONS[name](d, case)
        if result is not None:
            mutated, expect = result
            mutated.mutation, mutated.expect = name, expect
            mutated.layouts = list(case.layouts) + ["c"] * (len(mutated.inputs)
                                                            - len(case.layouts))
            return mutated
    return case
