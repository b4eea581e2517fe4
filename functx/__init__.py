"""functx: composable function transforms (grad, vjp, make_trace, ...) over plain arrays.

Example:
    >>> import numpy as np, functx as fx, functx.numpy as fnp
    >>> fx.grad(lambda x: fnp.sum(fnp.sin(x)))(np.array([0.0, 1.0]))
    array([1.        , 0.54030231])
"""
from functx import primitives as _primitives  # noqa: F401  (registers every primitive)
from functx import numpy as _numpy  # noqa: F401  (tracer operators use it)
from functx import tree
from functx.backends import Backend, backends, get_backend
from functx.errors import (
    ConcretizationError,
    DeviceError,
    DTypeError,
    FunctxError,
    GradError,
    MissingRuleError,
    ShapeError,
    TracerLeakError,
)
from functx.ir import AbstractArray, Eqn, Literal, ShapeDtype, Trace, Var, typecheck
from functx.primitives.misc import stop_gradient
from functx.registry import REGISTRY as registry
from functx.registry import Primitive
from functx.tracing import Tracer, bind, eval_shape, make_trace
from functx.transforms.grad import grad, value_and_grad, vjp
from functx.transforms.interpret import eval_trace

__version__ = "0.1.0"

__all__ = [
    "AbstractArray", "Backend", "ConcretizationError", "DTypeError", "DeviceError", "Eqn",
    "FunctxError", "GradError", "Literal", "MissingRuleError", "Primitive", "ShapeDtype",
    "ShapeError", "Trace", "Tracer", "TracerLeakError", "Var", "backends", "bind",
    "eval_shape", "eval_trace", "get_backend", "grad", "make_trace", "registry",
    "stop_gradient", "tree", "typecheck", "value_and_grad", "vjp",
]
