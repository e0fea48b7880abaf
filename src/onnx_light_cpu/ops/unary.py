"""Abs, Exp, Log, Sigmoid, Tanh, Not, Neg, Reciprocal, Gelu, Clip, and the
activations CNN exports use: Relu, LeakyRelu, HardSigmoid, HardSwish, Elu,
Selu, Celu, Mish, Sign, Erf, Softplus, Softsign, ThresholdedRelu, Sqrt."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import unary as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
SIGNED = (T.INT8, T.INT16, T.INT32, T.INT64) + FLOATS
NUMERIC = (T.UINT8, T.UINT16, T.UINT32, T.UINT64) + SIGNED


class _Unary(KernelOp):
    """y = f(x), element-wise, same shape and type."""

    core_op: ClassVar[int]
    # Elements one thread must have before a second one helps.  Measured
    # on 2 cores (AVX-512): two threads win from 32K elements for the
    # transcendental ones, 64K for Abs and 256K for Not (memory-bound).
    min_work_per_thread: ClassVar[int]

    def _run(self, x):
        element_type = ELEMENT_TYPES[x.dtype]
        level = simd.state.level
        if self._usage.enabled:
            self._record_path((self.core_op, element_type, level),
                              lambda: self._label(x.dtype, element_type, level))
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = self._new_output(x.shape, x.dtype)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        self._apply(x, y, element_type, level, threads)
        return (y,)

    def _apply(self, x, y, element_type: int, level: int, threads: int) -> None:
        core.apply(x, y, self.core_op, element_type, level, threads)

    def _level_used(self, element_type: int, level: int) -> int:
        return core.level_used(self.core_op, element_type, level)

    def _label(self, dtype: np.dtype, element_type: int, level: int) -> str:
        """Label of the code that runs, e.g. 'exp_float32_avx512'."""
        used = self._level_used(element_type, level)
        return f"{self._path_name()}_{dtype.name}_{simd.LEVEL_NAMES[used]}"

    def _path_name(self) -> str:
        return type(self).__name__.lower()


def _kernel(name: str, base: type, core_op: int, types: tuple[int, ...], min_work: int, *,
            doc: str | None = None, since: int | None = None, input_name: str = "X",
            attributes: tuple[Attr, ...] = (), params: tuple | None = None) -> type:
    """The adapter class of one operator of the core, from what tells the
    operators apart: the core's op code, the input's types and name, the
    elements a thread must have before a second one helps, the opset the
    operator starts at, its attributes and (activations) how they fill the
    core's alpha, beta and gamma (``_Activation.core_params``)."""
    namespace = {"__module__": __name__, "__qualname__": name, "__doc__": doc,
                 "core_op": core_op, "inputs": (Input(input_name, types=types),),
                 "min_work_per_thread": min_work}
    if since is not None:
        namespace["since_version"] = since
    if attributes:
        namespace["attributes"] = attributes
    if params is not None:
        namespace["core_params"] = params
    return type(name, (base,), namespace)


Abs = _kernel("Abs", _Unary, core.ABS, NUMERIC, 1 << 15)
Exp = _kernel("Exp", _Unary, core.EXP, FLOATS, 1 << 14)
Log = _kernel("Log", _Unary, core.LOG, FLOATS, 1 << 14)
Sigmoid = _kernel("Sigmoid", _Unary, core.SIGMOID, FLOATS, 1 << 14)
Tanh = _kernel("Tanh", _Unary, core.TANH, FLOATS, 1 << 14)
Not = _kernel("Not", _Unary, core.NOT, (T.BOOL,), 1 << 17)
Neg = _kernel("Neg", _Unary, core.NEG, SIGNED, 1 << 15)
Reciprocal = _kernel("Reciprocal", _Unary, core.RECIPROCAL, FLOATS, 1 << 15)


class Gelu(_Unary):
    """Gelu (opset 20): the exact form x Phi(x) or, with approximate="tanh",
    its tanh estimate."""

    since_version = 20
    inputs = (Input("X", types=FLOATS),)
    attributes = (Attr("approximate", "string", "none", allowed=("none", "tanh")),)
    min_work_per_thread = 1 << 14

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.core_op = core.GELU_TANH if self.approximate == "tanh" else core.GELU

    def _path_name(self) -> str:
        return "gelu_tanh" if self.core_op == core.GELU_TANH else "gelu"


def _f32(v: float) -> float:
    """``v`` rounded to float32, as a float attribute (the schemas' defaults)
    holds it: the float64 kernels see the value the built-ins see."""
    return float(np.float32(v))


class _Activation(_Unary):
    """y = f(x; alpha, beta, gamma), element-wise (the activation core of
    unary/olc_unary.h): float types computed in float32 for float16 and
    bfloat16, float64 on libm; the parameters an operator lacks are 0."""

    #: alpha, beta, gamma: a number, or the name of the attribute holding it.
    core_params: ClassVar[tuple[float | str, float | str, float | str]] = (0.0, 0.0, 0.0)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # once per node: an adapter's attributes do not change (linked ones
        # make another adapter)
        self._core_values = tuple(getattr(self, p, None) if isinstance(p, str) else p
                                  for p in self.core_params)

    def _apply(self, x, y, element_type: int, level: int, threads: int) -> None:
        core.activate(x, y, self.core_op, element_type, level, threads, *self._core_values)

    def _level_used(self, element_type: int, level: int) -> int:
        return core.act_level_used(self.core_op, element_type, level)


# The activations; min_work is 1 << 14 for the transcendental ones, 1 << 15
# for the exact ones.
Relu = _kernel("Relu", _Activation, core.RELU, (T.INT8, T.INT16, T.INT32, T.INT64) + FLOATS,
               1 << 15)
LeakyRelu = _kernel("LeakyRelu", _Activation, core.LEAKY_RELU, FLOATS, 1 << 15,
                    since=6,  # LeakyRelu-1 had consumed_inputs
                    attributes=(Attr("alpha", "float", _f32(0.01)),), params=("alpha", 0.0, 0.0))
HardSigmoid = _kernel("HardSigmoid", _Activation, core.HARD_SIGMOID, FLOATS, 1 << 15, since=6,
                      attributes=(Attr("alpha", "float", _f32(0.2)), Attr("beta", "float", 0.5)),
                      params=("alpha", "beta", 0.0))
HardSwish = _kernel(
    "HardSwish", _Activation, core.HARD_SWISH, FLOATS, 1 << 15, since=14,
    params=(_f32(1.0 / 6.0), 0.5, 0.0),
    doc="""x HardSigmoid(x) with alpha 1/6 and beta 1/2, as ONNX's function body
    defines it (a float attribute: 1/6 rounded to float32, double too).""")
Elu = _kernel("Elu", _Activation, core.ELU, FLOATS, 1 << 14, since=6,
              attributes=(Attr("alpha", "float", 1.0),), params=("alpha", 0.0, 0.0))
Selu = _kernel("Selu", _Activation, core.SELU, FLOATS, 1 << 14, since=6,
               attributes=(Attr("alpha", "float", 1.67326319217681884765625),
                           Attr("gamma", "float", 1.05070102214813232421875)),
               params=("alpha", 0.0, "gamma"))
Celu = _kernel("Celu", _Activation, core.CELU, FLOATS, 1 << 14, since=12,
               attributes=(Attr("alpha", "float", 1.0),), params=("alpha", 0.0, 0.0))
Softplus = _kernel(
    "Softplus", _Activation, core.SOFTPLUS, FLOATS, 1 << 14,
    doc="""log(1 + exp(x)) computed as max(x, 0) + log1p(exp(-|x|)): no overflow
    for large x and no loss for large negative x (as the built-in's
    np.logaddexp(0, x)).""")
Mish = _kernel("Mish", _Activation, core.MISH, FLOATS, 1 << 14, since=18)
Sign = _kernel("Sign", _Activation, core.SIGN, NUMERIC, 1 << 15, since=9, input_name="input")
Erf = _kernel("Erf", _Activation, core.ERF, FLOATS, 1 << 14, since=9, input_name="input")
Softsign = _kernel("Softsign", _Activation, core.SOFTSIGN, FLOATS, 1 << 15, input_name="input")
ThresholdedRelu = _kernel("ThresholdedRelu", _Activation, core.THRESHOLDED_RELU, FLOATS, 1 << 15,
                          since=10, attributes=(Attr("alpha", "float", 1.0),),
                          params=("alpha", 0.0, 0.0))
Sqrt = _kernel("Sqrt", _Activation, core.SQRT, FLOATS, 1 << 15)


# Clip's bounds before opset 11 are float attributes, defaulting to the
# float range (opset 6).
_FLOAT_MAX = float(np.finfo(np.float32).max)


class Clip(KernelOp):
    """y = min(max(x, min), max), the bounds attributes before opset 11 and
    optional one-element inputs from it; a missing bound does not clip."""

    inputs = (Input("input", types=NUMERIC), Input("min", like=0, optional=True),
              Input("max", like=0, optional=True))
    attributes = (Attr("min", "float", -_FLOAT_MAX), Attr("max", "float", _FLOAT_MAX))
    min_work_per_thread = 1 << 15

    def _run(self, x, lo=None, hi=None):
        if self.opset < 11:
            if lo is not None or hi is not None:
                raise ValueError(self._input_error(1, f"is not an input of Clip-{self.opset} "
                                                      "(min and max are attributes)"))
            with np.errstate(over="ignore"):  # float16: the float range is +-inf
                lo, hi = np.array(self.min, x.dtype), np.array(self.max, x.dtype)
        else:
            lo, hi = self._bound(1, lo, x.dtype, low=True), self._bound(2, hi, x.dtype, low=False)
        element_type = ELEMENT_TYPES[x.dtype]
        level = simd.state.level
        y = self._new_output(x.shape, x.dtype)
        if x.dtype.kind not in "iu" and (np.isnan(lo) or np.isnan(hi)):  # floats, bfloat16
            # A NaN bound makes every element NaN, as NumPy's clip does.
            self._record_path((element_type, "nan"), lambda: f"clip_{x.dtype.name}_numpy")
            np.clip(x, lo, hi, out=y)
            return (y,)
        if self._usage.enabled:
            self._record_path((element_type, level), lambda: self._label(x.dtype, element_type,
                                                                         level))
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        core.clip(x, y, lo, hi, element_type, level, threads)
        return (y,)

    def _bound(self, index: int, b, dtype: np.dtype, low: bool) -> np.ndarray:
        """Input ``index`` as a 0-d array, or the type's extreme when absent."""
        if b is None:
            if dtype.kind in "iu":
                info = np.iinfo(dtype)
                return np.array(info.min if low else info.max, dtype)
            return np.array(-np.inf if low else np.inf, dtype)
        if b.shape not in ((), (1,)):  # a scalar, or one value as ONNX Runtime takes
            raise ValueError(self._input_error(
                index, f"must hold one value (shape () or (1,)), got shape {b.shape}"))
        return b.reshape(()).copy()  # (np.ascontiguousarray makes a 0-d array 1-d)

    def _label(self, dtype: np.dtype, element_type: int, level: int) -> str:
        used = core.clip_level_used(element_type, level)
        return f"clip_{dtype.name}_{simd.LEVEL_NAMES[used]}"


KERNELS = {
    "RegisterAbsKernel": (Abs,),
    "RegisterExpKernel": (Exp,),
    "RegisterLogKernel": (Log,),
    "RegisterSigmoidKernel": (Sigmoid,),
    "RegisterTanhKernel": (Tanh,),
    "RegisterNotKernel": (Not,),
    "RegisterNegKernel": (Neg,),
    "RegisterReciprocalKernel": (Reciprocal,),
    "RegisterGeluKernel": (Gelu,),
    "RegisterClipKernel": (Clip,),
    "RegisterReluKernel": (Relu,),
    "RegisterLeakyReluKernel": (LeakyRelu,),
    "RegisterHardSigmoidKernel": (HardSigmoid,),
    "RegisterHardSwishKernel": (HardSwish,),
    "RegisterEluKernel": (Elu,),
    "RegisterSeluKernel": (Selu,),
    "RegisterCeluKernel": (Celu,),
    "RegisterSoftplusKernel": (Softplus,),
    "RegisterMishKernel": (Mish,),
    "RegisterSignKernel": (Sign,),
    "RegisterErfKernel": (Erf,),
    "RegisterSoftsignKernel": (Softsign,),
    "RegisterThresholdedReluKernel": (ThresholdedRelu,),
    "RegisterSqrtKernel": (Sqrt,),
}
