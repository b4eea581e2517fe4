"""functx: composable function transforms (grad, vjp, make_trace, ...) over plain arrays.

Example:
    >>> import numpy as np, functx as fx, functx.numpy as fnp
    >>> fx.grad(lambda x: fnp.sum(fnp.sin(x)))(np.array([0.0, 1.0]))
    array([1.        , 0.54030231])
"""
from functx import primitives as _primitives  # noqa: F401  (registers every primitive)
from functx import numpy as _numpy  # noqa: F401  (tracer operators use it)
from functx import (checkpoint_policies, debug, distributed, flatten_util, lax, nn, optim, random,
                    scipy, tree)
# functx.backends is the module and is callable: fx.backends() lists the backends (see the
# end of functx/backends/__init__.py).
from functx import backends, config
from functx.config import default_matmul_precision
from functx.backends import (
    Backend,
    Device,
    block_until_ready,
    default_device,
    device_of,
    device_put,
    devices,
    from_dlpack,
    get_backend,
    get_default_device,
    memory_stats,
    reset_peak_memory_stats,
    to_numpy,
)
from functx.errors import (
    ArgumentError,
    ArgumentTypeError,
    ConcretizationError,
    DeviceError,
    DTypeError,
    FunctxError,
    GradError,
    MissingRuleError,
    ShapeError,
    TracerLeakError,
    VmapError,
)
from functx.lax import pure_callback
from functx.ir import AbstractArray, Eqn, Literal, ShapeDtype, Trace, Var, typecheck
from functx.primitives.checkpoint import checkpoint_name
from functx.primitives.misc import stop_gradient
from functx.registry import REGISTRY as registry
from functx.registry import Primitive
from functx.serialization import load, save
from functx.tracing import Tracer, bind, eval_shape, make_trace
from functx.transforms.checkpoint import (checkpoint, checkpoint_sequential, is_recomputing,
                                          print_saved_residuals, remat, saved_residuals)
from functx.transforms.custom import custom_jvp, custom_vjp
from functx.transforms.grad import grad, value_and_grad, vjp
from functx.transforms.interpret import eval_trace
from functx.transforms.jacobian import hessian, jacfwd, jacrev
from functx.transforms.jit import jit
from functx.transforms.jvp import jvp, linearize
from functx.transforms.pmap import Sharded, device_put_replicated, device_put_sharded, pmap
from functx.transforms.vmap import vmap

__version__ = "0.1.0"

__all__ = [
    # transforms
    "grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev", "hessian",
    "vmap", "pmap", "jit", "custom_vjp", "custom_jvp", "stop_gradient",
    # host code
    "pure_callback", "debug",
    # memory
    "checkpoint", "remat", "checkpoint_sequential", "checkpoint_name", "checkpoint_policies",
    "is_recomputing", "print_saved_residuals", "saved_residuals",
    # devices
    "Backend", "Device", "backends", "get_backend", "devices", "device_put", "device_of",
    "default_device", "get_default_device", "to_numpy", "from_dlpack", "memory_stats",
    "reset_peak_memory_stats", "block_until_ready", "Sharded", "device_put_sharded",
    "device_put_replicated",
    # traces, primitives and the registry
    "make_trace", "eval_shape", "eval_trace", "bind", "Primitive", "registry", "typecheck",
    "Trace", "Eqn", "Var", "Literal", "Tracer", "AbstractArray", "ShapeDtype",
    # configuration (matmul precision)
    "config", "default_matmul_precision",
    # saving and loading pytrees
    "save", "load",
    # modules
    "nn", "optim", "random", "tree", "flatten_util", "lax", "scipy", "distributed",
    # errors
    "FunctxError", "ShapeError", "DTypeError", "ConcretizationError", "TracerLeakError",
    "MissingRuleError", "DeviceError", "GradError", "VmapError", "ArgumentError",
    "ArgumentTypeError",
]
