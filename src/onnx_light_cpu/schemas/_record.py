"""``LightOpSchema``: the package's own record of one operator version.

A record is plain immutable data (what the docs pages and ``operator_support``
read) plus the shape-inference function; :meth:`LightOpSchema.to_onnx` turns it
into the ``onnx.defs.OpSchema`` registered with onnx.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from onnx import AttributeProto, helper
from onnx.defs import OpSchema

MS_DOMAIN = "com.microsoft"

FLOAT_TYPES = ("tensor(float)", "tensor(float16)", "tensor(bfloat16)")


class LightParameter(NamedTuple):
    """One input or output: ``type_str`` is a type-constraint name such as
    ``"T"`` or a concrete type such as ``"tensor(int32)"``."""

    name: str
    type_str: str
    description: str = ""
    optional: bool = False
    variadic: bool = False
    #: False for a variadic input whose tensors differ in type (QLinearConcat).
    homogeneous: bool = True


class LightAttribute(NamedTuple):
    """One attribute. ``type`` is an ``OpSchema.AttrType`` name ("INT",
    "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS", "TENSOR", "GRAPH").
    ``default`` is None when the attribute has no default."""

    name: str
    type: str
    description: str = ""
    default: Any = None
    required: bool = False


class LightTypeConstraint(NamedTuple):
    name: str
    allowed: tuple
    description: str = ""


class LightOpSchema(NamedTuple):
    """One operator version: what ``onnx.defs`` needs, as plain data.

    ``infer`` is ``infer(ctx)`` on onnx's ``InferenceContext``; it raises
    ``ValueError`` naming the operator for inconsistent static shapes.
    """

    domain: str
    name: str
    since_version: int
    doc: str
    inputs: tuple
    outputs: tuple
    attributes: tuple = ()
    type_constraints: tuple = ()
    infer: Callable | None = None

    def to_onnx(self) -> OpSchema:
        """The ``onnx.defs.OpSchema`` this record describes."""
        schema = OpSchema(
            self.name,
            self.domain,
            self.since_version,
            self.doc,
            inputs=[_formal(p) for p in self.inputs],
            outputs=[_formal(p) for p in self.outputs],
            type_constraints=[(c.name, list(c.allowed), c.description)
                              for c in self.type_constraints],
            attributes=[_attribute(a) for a in self.attributes],
        )
        if self.infer is not None:
            schema.set_type_and_shape_inference_function(self.infer)
        return schema

    def without_doc(self) -> LightOpSchema:
        return self._replace(doc="")


def _formal(p: LightParameter) -> OpSchema.FormalParameter:
    if p.variadic:
        option = OpSchema.FormalParameterOption.Variadic
    elif p.optional:
        option = OpSchema.FormalParameterOption.Optional
    else:
        option = OpSchema.FormalParameterOption.Single
    return OpSchema.FormalParameter(p.name, p.type_str, p.description, param_option=option,
                                    is_homogeneous=p.homogeneous)


def _attribute(a: LightAttribute) -> OpSchema.Attribute:
    if a.default is not None:
        # onnx takes a default as the AttributeProto holding it.
        proto = helper.make_attribute(a.name, a.default,
                                      attr_type=getattr(AttributeProto, a.type))
        return OpSchema.Attribute(a.name, proto, a.description)
    return OpSchema.Attribute(a.name, getattr(OpSchema.AttrType, a.type), a.description,
                              required=a.required)
