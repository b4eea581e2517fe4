"""NumPy-compatible functions that work on arrays and on traced values.

Names, argument names, broadcasting, dtype promotion (NumPy 2 rules, with Python scalars
weakly typed) and axis/keepdims conventions follow NumPy, so NumPy code ports by changing
``np.`` to ``fnp.``. Every function is built from functx primitives, so every transform
works on it. Outside any transform the results are plain (read-only) NumPy arrays.

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

from functx.numpy import (  # noqa: E402
    _complex, _creation, _indexing, _linalg, _promotion, _reductions, _shape, _ufuncs,
    _ufuncs_math,
)

__all__ = sorted({name for m in (_promotion, _ufuncs, _ufuncs_math, _reductions, _creation,
                                 _shape, _indexing, _linalg, _complex) for name in m.__all__})

# Complex parts (their primitives live with the FFT's) and the functx.numpy.fft submodule.
from functx.primitives.complex import conj, conjugate, imag, real  # noqa: E402,F401
from functx.numpy import fft  # noqa: E402,F401

__all__ = sorted(set(__all__) | {"conj", "conjugate", "imag", "real"})

import sys as _sys  # noqa: E402

from functx.registry.hooks import register_hook as _register_hook  # noqa: E402

# Tracer operators and methods (functx.tracing), and the few primitive rules that need
# NumPy-style functions, call this module through the registry's "numpy" hook.
_register_hook("numpy", _sys.modules[__name__])
