"""NumPy-compatible functions that work on arrays and on traced values.

Names, argument names, broadcasting, dtype promotion (NumPy 2 rules, with Python scalars
weakly typed) and axis/keepdims conventions follow NumPy, so NumPy code ports by changing
``np.`` to ``fnp.``. Every function is built from functx primitives, so every transform
works on it. Outside any transform the results are plain (read-only) NumPy arrays.

Aliasing: **results never share memory with a writeable argument.** Where NumPy returns a
view (``reshape``, ``transpose``, ``ravel``, ``broadcast_to``, ``squeeze``, ``swapaxes``,
slicing, ``real``...), functx returns a read-only view when the argument is read-only
(functx's own results, which nothing can write to: no copy) and a read-only copy when it
is a writeable NumPy array of the caller's, so writing into that array later never changes
a result. The same holds for the transforms' results, and whatever a transform's closure
keeps for later (``vjp``'s residuals, ``linearize``'s constants, ``jit``'s captured
constants) is a snapshot. CuPy arrays have no read-only flag: on CUDA, shape operations
return views as CuPy does and nothing is copied (copies would cost device memory), so by
convention the caller does not write into an array passed to functx while a result or a
closure may still use it.

Inside an abstract trace (``jit``, ``make_trace``, ``eval_shape``, ``vmap``, ``checkpoint``),
``zeros``, ``ones``, ``full``, ``empty`` and their ``*_like`` record a broadcast of a 0-d fill
value instead of allocating the constant (``eye``, ``tri``, ``arange`` and ``linspace`` still
make theirs).

Example:
    >>> import functx.numpy as fnp
    >>> fnp.mean(fnp.tanh(np.ones((2, 3))) ** 2, axis=0)
"""
from functx.numpy._promotion import *  # noqa: F401,F403
from functx.numpy._ufuncs import *  # noqa: F401,F403
from functx.numpy._ufuncs_math import *  # noqa: F401,F403
from functx.numpy._reductions import *  # noqa: F401,F403
from functx.numpy._creation import *  # noqa: F401,F403
from functx.numpy._shape import *  # noqa: F401,F403
from functx.numpy._indexing import *  # noqa: F401,F403
from functx.numpy._linalg import *  # noqa: F401,F403
from functx.numpy._complex import *  # noqa: F401,F403
from functx.numpy._aliases import *  # noqa: F401,F403
from functx.numpy._nanreductions import *  # noqa: F401,F403
from functx.numpy._polynomial import *  # noqa: F401,F403
from functx.numpy._extras import *  # noqa: F401,F403
from functx.numpy._histograms import *  # noqa: F401,F403
from functx.numpy._structural import *  # noqa: F401,F403
from functx.numpy._indices import *  # noqa: F401,F403
from functx.numpy._functional import *  # noqa: F401,F403
from functx.numpy._floatbits import *  # noqa: F401,F403
from functx.numpy._sorting import *  # noqa: F401,F403

from functx.numpy import (  # noqa: E402
    _aliases, _complex, _creation, _extras, _floatbits, _functional, _histograms, _indexing,
    _indices, _linalg, _nanreductions, _polynomial, _promotion, _reductions, _shape,
    _sorting, _structural, _ufuncs, _ufuncs_math,
)

__all__ = sorted({name for m in (_promotion, _ufuncs, _ufuncs_math, _reductions, _creation,
                                 _shape, _indexing, _linalg, _complex, _aliases, _nanreductions,
                                 _polynomial, _extras, _histograms, _structural, _indices,
                                 _functional, _floatbits, _sorting)
                  for name in m.__all__})

# Complex parts (their primitives live with the FFT's) and the functx.numpy.fft submodule.
from functx.primitives.complex import conj, conjugate, imag, real  # noqa: E402,F401
from functx.numpy import fft  # noqa: E402,F401
from functx.numpy import linalg  # noqa: E402,F401
from functx.numpy.linalg import (  # noqa: E402,F401
    cross, matrix_transpose, matvec, vecdot, vecmat)

__all__ = sorted(set(__all__) | {"conj", "conjugate", "imag", "real", "cross", "vecdot",
                                "matrix_transpose", "matvec", "vecmat"})

import sys as _sys  # noqa: E402

from functx.registry.hooks import register_hook as _register_hook  # noqa: E402

# Tracer operators and methods (functx.tracing), and the few primitive rules that need
# NumPy-style functions, call this module through the registry's "numpy" hook.
_register_hook("numpy", _sys.modules[__name__])
