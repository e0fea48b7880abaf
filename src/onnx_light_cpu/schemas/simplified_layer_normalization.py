"""Schema of the experimental SimplifiedLayerNormalization (domain "", version 1).

ONNX Runtime's model builder emits it in every LLaMA/Qwen/Phi export; the
``onnx`` package does not define it.  See the kernel in
``onnx_light_cpu/ops/normalization.py``.
"""

from __future__ import annotations

import onnx

from ._record import LightAttribute, LightOpSchema, LightParameter, LightTypeConstraint

DOC = """\
Y = X / sqrt(mean(X^2 over axis..rank-1) + epsilon) * Scale.

X and Scale independently take float, float16, double or bfloat16; Y has the
shape of X and the type of Scale.  Scale broadcasts (right-aligned) over the
whole shape of X and cannot expand it.  stash_type 1 computes in float32 and
saves inv_std_var as float, 11 computes in float64 and saves it as double.
inv_std_var has shape X[:axis] + [1] * (rank - axis).
"""


def schemas() -> tuple:
    """The one record of this family."""
    float_types = ("tensor(float)", "tensor(float16)", "tensor(double)", "tensor(bfloat16)")
    return (LightOpSchema(
        "", "SimplifiedLayerNormalization", 1, DOC,
        inputs=(
            LightParameter("X", "T", "Input tensor (rank >= 1)."),
            LightParameter("scale", "V", "Scale, broadcast to the shape of X."),
        ),
        outputs=(
            LightParameter("Y", "V", "Normalized tensor, shape of X."),
            LightParameter("inv_std_var", "U", "1 / sqrt(mean square + epsilon).", optional=True),
        ),
        attributes=(
            LightAttribute("axis", "INT",
                           "First normalized dimension (negative counts from the end).", -1),
            LightAttribute("epsilon", "FLOAT", "Added to the mean square.", 1e-5),
            LightAttribute("stash_type", "INT",
                           "1: float32 arithmetic and statistics, 11: float64.", 1),
        ),
        type_constraints=(
            LightTypeConstraint("T", float_types, "Type of X."),
            LightTypeConstraint("V", float_types, "Type of scale and Y."),
            LightTypeConstraint("U", ("tensor(float)", "tensor(double)"),
                                "Type of inv_std_var (stash_type)."),
        ),
        infer=_infer,
    ),)


def _infer(ctx) -> None:
    """Y: shape of X, type of scale; inv_std_var: X[:axis] + [1] * (rank - axis),
    float (stash_type 1) or double (11)."""
    x_type = ctx.get_input_type(0)
    scale_type = ctx.get_input_type(1)
    if x_type is None or scale_type is None:
        return
    y = onnx.TypeProto()
    y.tensor_type.elem_type = scale_type.tensor_type.elem_type
    if x_type.tensor_type.HasField("shape"):
        y.tensor_type.shape.CopyFrom(x_type.tensor_type.shape)
    ctx.set_output_type(0, y)
    if ctx.get_num_outputs() < 2 or not ctx.has_output(1):
        return
    stash = ctx.get_attribute("stash_type")
    stash = stash.i if stash is not None else 1
    inv = onnx.TypeProto()
    inv.tensor_type.elem_type = onnx.TensorProto.DOUBLE if stash == 11 else onnx.TensorProto.FLOAT
    if x_type.tensor_type.HasField("shape"):
        dims = x_type.tensor_type.shape.dim
        rank = len(dims)
        axis = ctx.get_attribute("axis")
        axis = axis.i if axis is not None else -1
        if -rank <= axis < rank:
            axis = axis + rank if axis < 0 else axis
            for k, d in enumerate(dims):
                nd = inv.tensor_type.shape.dim.add()
                if k < axis:
                    nd.CopyFrom(d)
                else:
                    nd.dim_value = 1
    ctx.set_output_type(1, inv)
