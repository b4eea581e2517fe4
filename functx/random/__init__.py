"""Random numbers from explicit keys: a counter-based generator (Threefry-2x32, 20 rounds).

There is no hidden state. A *key* is an ordinary ``uint32`` array of shape ``(2,)`` (JAX's
raw key, ``jax.random.PRNGKey(seed)``): :func:`key` makes one from a seed, :func:`split`
turns one key into several independent ones and :func:`fold_in` derives a key from a key
and an integer (a step number, a layer index). A sampler given the same key and arguments
returns the same values every time; use a key for one purpose only and split it to get
more. Because keys are plain arrays, they trace, ``vmap`` (a batch of keys is an ``(n, 2)``
array) and ``checkpoint`` like any other value: recomputation under ``checkpoint`` draws
exactly the same numbers, so dropout masks are reproduced.

Example:
    >>> import functx.random as fxr
    >>> k = fxr.key(0)
    >>> k_init, k_drop = fxr.split(k)
    >>> w = fxr.normal(k_init, (3, 4))
    >>> mask = fxr.bernoulli(fxr.fold_in(k_drop, 7), 0.9, (4,))

The bits. Everything is built from uint32 primitives whose results are defined for every
input (``functx.primitives.bits``: the Threefry block function ``threefry2x32``, shifts and
bit casts; wrapping ``add``, ``xor``, ``or``), so every backend produces the same bits.
They are JAX's bits for the ``threefry2x32`` implementation with
``jax_threefry_partitionable=True`` (JAX's default since 0.5): element ``i`` (C order) of
an array of shape ``S`` drawn with key ``(k1, k2)`` comes from
``threefry2x32((k1, k2), (hi(i), lo(i)))``, ``i`` read as a 64-bit counter; 32-bit draws
xor the two output words, 64-bit draws concatenate them (first word high). So element
``i`` does not depend on the shape requested, and ``split(k, n)[i]`` equals
``fold_in(k, i)``. :func:`key`, :func:`split`, :func:`fold_in`, :func:`bits`,
:func:`bernoulli`, :func:`randint`, :func:`permutation`, :func:`categorical` and
:func:`uniform` on ``[0, 1)`` reproduce ``jax.random`` bit for bit. With other bounds
``uniform`` rounds ``f * (maxval - minval)`` and ``+ minval`` separately, where XLA fuses
them into one multiply-add: the last bit may differ from JAX's (functx's rounding is the
same on every backend). :func:`normal` and :func:`truncated_normal` use JAX's algorithms
and XLA's ``erf_inv`` polynomials (Giles), with ``w = -log(1 - u*u)`` evaluated accurately
near ``|u| = 1``: they agree with JAX to rounding.

More distributions, with ``jax.random``'s names, signatures and algorithms (the same uniforms
and normals from the same key, the same formula, so the values agree with JAX's to the
rounding of the transcendental functions): ``exponential``, ``laplace``, ``logistic``,
``cauchy``, ``pareto``, ``lognormal``, ``rayleigh``, ``wald``, ``weibull_min``, ``maxwell``,
``double_sided_maxwell``, ``triangular``, ``rademacher``, ``geometric``; and on Gamma variates
(Marsaglia and Tsang's method with JAX's per-element key splits, the ``random_gamma``
primitive) ``gamma``, ``loggamma``, ``beta``, ``dirichlet``, ``chisquare``, ``t``, ``f``,
``generalized_normal`` and ``ball``. Samples are differentiable in their float parameters;
Gamma-based ones by implicit reparameterization (Figurnov et al. 2018), as in JAX.

Speed: the bits come from the ``random_bits`` primitive (counters implicit), and
``bits_to_uniform``/``bits_to_normal`` map them to floats in one pass; on the CPU all three
are compiled loops when Numba is installed (``pip install 'functx[jit]'``; all cores from
2**18 values), else NumPy operations with the same results (``FUNCTX_NUMBA=0`` forces
those). ``benchmarks/bench_random.py`` compares them with ``numpy.random``.

Dtypes: the defaults are NumPy's (float64, int64; JAX's with ``jax_enable_x64``). Pass
``dtype=np.float32`` for single precision. An integer seed is read as a 64-bit integer (JAX
with ``jax_enable_x64``): ``key(-1)`` is ``[2**32 - 1, 2**32 - 1]``.

Differences from ``jax.random``: no typed (``jax.random.key``) keys, no ``out_sharding``;
``categorical`` samples with replacement only and ``permutation`` sorts with a stable
radix sort built from primitives (32 passes of about fifteen operations each per round:
0.3 s for 60000 elements on one CPU core; a sort primitive would be faster, with the same
result).
"""
from __future__ import annotations

# The package's API comes from _prng (keys and bits) and _distributions (the samplers). The
# other names below are what the single-module functx.random had at its top level (its own
# imports); they are kept so that the module's namespace is unchanged.
import math  # noqa: F401
import operator  # noqa: F401
from typing import Any, Sequence  # noqa: F401

import numpy as np  # noqa: F401

from functx import numpy as fnp  # noqa: F401
from functx.errors import DTypeError, ShapeError  # noqa: F401
from functx.primitives.misc import stop_gradient  # noqa: F401
from functx.random._distributions import (
    bernoulli,
    categorical,
    gumbel,
    normal,
    permutation,
    randint,
    truncated_normal,
    uniform,
)
from functx.random._continuous import (
    cauchy,
    double_sided_maxwell,
    exponential,
    geometric,
    laplace,
    logistic,
    lognormal,
    maxwell,
    pareto,
    rademacher,
    rayleigh,
    triangular,
    wald,
    weibull_min,
)
from functx.random._discrete import binomial, choice, multinomial, poisson
from functx.random._multivariate import multivariate_normal, orthogonal
from functx.random._gamma import (
    ball,
    beta,
    chisquare,
    dirichlet,
    f,
    gamma,
    generalized_normal,
    loggamma,
    t,
)
from functx.random._prng import Array, bits, fold_in, key, split  # noqa: F401
from functx.tracing import Tracer  # noqa: F401

__all__ = [
    "key", "split", "fold_in", "bits", "uniform", "normal", "truncated_normal", "bernoulli",
    "randint", "categorical", "permutation", "gumbel",
    # by transforming uniforms and normals
    "exponential", "laplace", "logistic", "cauchy", "pareto", "lognormal", "rayleigh", "wald",
    "weibull_min", "maxwell", "double_sided_maxwell", "triangular", "rademacher", "geometric",
    # counts and draws from a population
    "poisson", "binomial", "multinomial", "choice",
    # on linear algebra
    "multivariate_normal", "orthogonal",
    # built on Gamma variates
    "gamma", "loggamma", "beta", "dirichlet", "chisquare", "t", "f", "generalized_normal",
    "ball",
]
