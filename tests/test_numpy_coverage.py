"""functx.numpy's public callables against jax.numpy's, by name (issue 15, item 6).

The comparison counts every public callable of ``jax.numpy`` (functions, classes, dtype
objects) except the EXCLUDED ones below, and asserts that functx.numpy has at least 90% of
them, with the names other branches are adding (PENDING_OTHER_BRANCHES) counted as
missing. It skips where JAX is not installed.
"""
from __future__ import annotations

import pytest

import functx.numpy as fnp

jnp = pytest.importorskip("jax.numpy")

# Out of scope, each for the reason given.
EXCLUDED = {
    # file I/O
    "load", "save", "savez", "fromfile",
    # printing
    "array_repr", "array_str", "get_printoptions", "set_printoptions", "printoptions",
    # narrow floating-point and integer types of ml_dtypes that functx does not compute in
    "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4", "float8_e4m3",
    "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "float8_e8m0fnu", "int1", "int2", "int4", "uint1", "uint2", "uint4",
    # JAX's own types: its Array class (functx values are NumPy/CuPy arrays) and its ufunc
    # class (functx's ufuncs are plain functions; frompyfunc returns its own object)
    "ndarray", "ufunc",
}

# Names the other helpers of issue 15 are adding on their branches (sorting and order
# statistics; linear algebra; special functions). The lead empties this set at the merge.
PENDING_OTHER_BRANCHES: set[str] = set()


def _public_callables(module) -> set[str]:
    return {n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))}


def test_exclusions_and_pending_name_real_jax_callables():
    jax_names = _public_callables(jnp)
    assert EXCLUDED <= jax_names, sorted(EXCLUDED - jax_names)
    assert PENDING_OTHER_BRANCHES <= jax_names, sorted(PENDING_OTHER_BRANCHES - jax_names)
    assert not EXCLUDED & PENDING_OTHER_BRANCHES


def test_coverage_of_jax_numpy_is_at_least_90_percent():
    wanted = _public_callables(jnp) - EXCLUDED
    have = _public_callables(fnp) & wanted
    counted = have - PENDING_OTHER_BRANCHES
    coverage = len(counted) / len(wanted)
    missing = sorted(wanted - have - PENDING_OTHER_BRANCHES)
    assert coverage >= 0.90, (f"{coverage:.1%} of {len(wanted)} names; missing: {missing}")


def test_pending_names_are_not_defined_here():
    # If one appears, the branch that owns it merged: remove it from PENDING_OTHER_BRANCHES.
    defined = sorted(PENDING_OTHER_BRANCHES & _public_callables(fnp))
    assert not defined, f"merged: drop {defined} from PENDING_OTHER_BRANCHES"


def test_every_shared_name_is_in_all():
    # functx.numpy's names that jax.numpy also has (functions, dtypes, constants, r_...)
    # are all in __all__, so ``from functx.numpy import *`` gets them; submodules aside.
    shared = {n for n in dir(jnp) if not n.startswith("_") and hasattr(fnp, n)
              and not isinstance(getattr(fnp, n), type(fnp))}
    assert not sorted(shared - set(fnp.__all__)), sorted(shared - set(fnp.__all__))
