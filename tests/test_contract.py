"""The declarative adapter contract: declared inputs and attributes are
parsed and checked by KernelOp with one message format; plans are made
once per input signature."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnx_light_cpu.ops._base import Attr, Input, KernelOp
from onnx_light_cpu.ops._contract import REQUIRED


class Toy(KernelOp):
    """A made-up operator: Y = A + B (B optional), scaled."""

    op_domain = "test"
    inputs = (Input("A", types=(T.FLOAT, T.DOUBLE), ranks=(1, 2)),
              Input("B", like=0, optional=True))
    attributes = (Attr("scale", "float", 1.0),
                  Attr("mode", "string", "add", allowed=("add", "sub")),
                  Attr("fast", "flag", 0),
                  Attr("count", "int", REQUIRED))
    plans = 0

    def _plan(self, a, b=None):
        type(self).plans += 1
        return a.shape

    def _execute(self, plan, a, b=None):
        y = a * self.scale
        if b is not None:
            y = y + b if self.mode == "add" else y - b
        return (y,)


def _node(**attrs):
    return helper.make_node("Toy", ["A", "B"], ["Y"], domain="test", **attrs)


def _toy(**attrs):
    run_params = {"opsets": {"test": 1, "": 21}, "log": lambda *a: None, "verbose": 0,
                  "new_ops": None, "existing_functions": {}, "evaluator_cls": None}
    return Toy(_node(**attrs), run_params)


def test_attributes_parsed_with_defaults():
    op = _toy(count=3, scale=2)
    assert (op.scale, op.mode, op.fast, op.count) == (2.0, "add", False, 3)
    (y,) = op.run(np.ones(3, np.float32), np.ones(3, np.float32))
    np.testing.assert_array_equal(y, np.full(3, 3, np.float32))


@pytest.mark.parametrize("attrs, message", [
    ({}, "Toy: attribute count is required"),
    ({"count": 1, "mode": "mul"}, "Toy: attribute mode must be one of add, sub, got 'mul'"),
    ({"count": 1, "fast": 2}, "Toy: attribute fast must be 0 or 1, got 2"),
    ({"count": 1.5}, "Toy: attribute count must be of kind int, got float"),
])
def test_bad_attribute_raised_by_every_run(attrs, message):
    op = _toy(**attrs)  # the constructor never raises
    for _ in range(2):
        with pytest.raises(ValueError, match=message):
            op.run(np.ones(3, np.float32))


@pytest.mark.parametrize("args, error, message", [
    ((np.ones(3, np.int32),), TypeError,
     r"Toy: input 0 \('A'\) has element type int32, expected one of float32, float64"),
    ((np.ones(3, np.float32), np.ones(3, np.float64)), TypeError,
     r"Toy: input 1 \('B'\) has element type float64, expected float32 like input 0"),
    ((np.ones((1, 2, 3), np.float32),), ValueError,
     r"Toy: input 0 \('A'\) has rank 3 \(shape \(1, 2, 3\)\), expected one of ranks 1, 2"),
    ((None,), ValueError, r"Toy: input 0 \('A'\) is required but missing"),
    ((np.ones(3, np.float32), None, np.ones(3, np.float32)), ValueError,
     r"Toy: input 2 is one input too many: the operator takes at most 2"),
    (([1.0],), TypeError, r"Toy: input 0 \('A'\) must be a tensor, got list"),
])
def test_inputs_checked_with_one_message_format(args, error, message):
    with pytest.raises(error, match=message):
        _toy(count=1).run(*args)


def test_plan_made_once_per_signature():
    op = _toy(count=1)
    Toy.plans = 0
    for _ in range(3):
        op.run(np.ones(3, np.float32))
    op.run(np.ones(4, np.float32))
    op.run(np.ones(3, np.float32), np.ones(3, np.float32))
    assert Toy.plans == 3


def test_element_types_derived_from_the_first_input():
    assert Toy.element_types == ("tensor(float)", "tensor(double)")
