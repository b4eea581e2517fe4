"""The compiled LU loops over stacks of small matrices (functx/primitives/_lu_kernels.py)
against SciPy's LAPACK, matrix by matrix.

``lu`` of a stack of matrices up to 128 is one compiled loop (``getrf_stack``) that must
give LAPACK's factors: the same packed layout, the same row swaps (the first row of the
largest ``|re| + |im|``, as ``i?amax``) and the permutation they make. Exact cases (ties,
singular matrices, Hadamard matrices, whose elimination stays in small integers) are
compared bit for bit, random ones to rounding. Also the solves and inverses from those
factors (four rows a pass) and the LU memo's snapshot taken by the loop.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.linalg

import functx as fx
import functx.numpy as fnp
from functx.primitives import _lu_kernels
from functx.primitives import decompositions as dec

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
RNG = np.random.default_rng(7)


def rand(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def lapack(a: np.ndarray) -> tuple:
    """SciPy's ``lu_factor`` of every matrix of the stack ``a``: (lu, pivots)."""
    flat = a.reshape((-1,) + a.shape[-2:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # singular matrices: LinAlgWarning
        out = [scipy.linalg.lu_factor(x, check_finite=False) for x in flat]
    k = min(a.shape[-2:])
    return (np.stack([o[0] for o in out]).reshape(a.shape),
            np.stack([o[1][:k] for o in out]).reshape(a.shape[:-2] + (k,)))


def permutation_of(piv: np.ndarray, m: int) -> np.ndarray:
    """The rows ``perm`` with ``a[perm] = L U`` from LAPACK's swaps, in plain Python."""
    flat = piv.reshape(-1, piv.shape[-1])
    out = np.empty((flat.shape[0], m), np.int32)
    for i, row in enumerate(flat):
        p = list(range(m))
        for r, s in enumerate(row):
            p[r], p[s] = p[s], p[r]
        out[i] = p
    return out.reshape(piv.shape[:-1] + (m,))


def factor(a: np.ndarray) -> tuple:
    out = dec.lu(a)
    return tuple(np.asarray(o) for o in out)


def check_against_lapack(a: np.ndarray, tol: float) -> None:
    lu, piv, perm = factor(a)
    want_lu, want_piv = lapack(a)
    assert lu.dtype == a.dtype and lu.shape == a.shape and lu.flags.c_contiguous
    assert piv.dtype == np.int32 and perm.dtype == np.int32
    np.testing.assert_array_equal(piv, want_piv)
    np.testing.assert_array_equal(perm, permutation_of(want_piv, a.shape[-2]))
    if tol == 0:
        np.testing.assert_array_equal(lu, want_lu)
    else:
        np.testing.assert_allclose(lu, want_lu, rtol=tol, atol=tol)


@pytest.fixture(autouse=True)
def _numba() -> None:
    if _lu_kernels.compiled("getrf_stack", parallel=False) is None:
        pytest.skip("Numba is not installed")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7, 5, 5), (3, 6, 4), (3, 4, 6), (4, 1, 1), (2, 9, 1),
                                   (2, 1, 9), (2, 3, 2, 2), (40, 64, 64), (2, 128, 128)])
def test_random_stacks_match_lapack(dtype: Any, shape: tuple) -> None:
    # Random matrices have no near-ties: the same pivots, factors equal to rounding.
    single = np.dtype(dtype) in (np.float32, np.complex64)
    n = shape[-1]
    check_against_lapack(rand(*shape, dtype=dtype), (2e-4 if single else 1e-11) * max(n, 8))


def hadamard_stack(order: int, count: int) -> np.ndarray:
    """Hadamard matrices with their rows shuffled and signs flipped: every step of the
    elimination ties (all entries of equal magnitude) and stays exact."""
    h = scipy.linalg.hadamard(order).astype(np.float64)
    out = []
    for _ in range(count):
        rows = RNG.permutation(order)
        signs = RNG.choice([-1.0, 1.0], size=(order, 1))
        out.append(signs * h[rows])
    return np.stack(out)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_pick_the_first_row_as_lapack(dtype: Any) -> None:
    a = hadamard_stack(8, 6)
    b = hadamard_stack(16, 3)
    c = np.stack([np.eye(5)[RNG.permutation(5)] for _ in range(4)])  # permutations
    d = np.array([[[1.0, 2.0, 0.0], [-1.0, 0.0, 3.0], [1.0, 1.0, 1.0]],  # column 0: 3 ties
                  [[0.5, 1.0, 1.0], [-2.0, 1.0, 0.0], [2.0, 4.0, 1.0]]])
    # Real: exact, bit for bit. Complex: the same pivots, factors to rounding (a complex
    # reciprocal is not exact: 1 / (2 + 2j) came out with an imaginary part of 7e-18).
    tol = 0 if np.dtype(dtype).kind == "f" else 1e-6
    for x in (a, b, c, d):
        check_against_lapack(x.astype(dtype), tol)
        if np.dtype(dtype).kind == "c":  # |re| + |im| ties: all entries times 1 + 1j
            check_against_lapack((x * (1 + 1j)).astype(dtype), tol)


def test_complex_pivots_by_re_plus_im_as_izamax() -> None:
    # |3 + 3j| = 4.24 > |5| = 5? No: |re| + |im| = 6 > 5 picks row 1, true |.| would pick
    # row 0 (5 > 4.24). LAPACK's izamax uses |re| + |im|.
    a = np.array([[[5.0, 1.0], [3.0 + 3.0j, 2.0]]], np.complex128)
    lu, piv, perm = factor(np.concatenate([a, a]))
    np.testing.assert_array_equal(piv[:, 0], [1, 1])
    np.testing.assert_array_equal(piv, lapack(np.concatenate([a, a]))[1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_singular_matrices_match_lapack(dtype: Any) -> None:
    zero = np.zeros((6, 6))
    col = np.array(RNG.integers(-3, 4, (6, 6)), float)
    col[:, 2] = 0  # a zero column: no swap, no scaling at step 2
    rows = np.array(RNG.integers(-3, 4, (6, 6)), float)
    rows[4] = rows[1]  # two equal rows
    last = np.triu(np.array(RNG.integers(1, 4, (6, 6)), float))
    last[5, 5] = 0  # U's last diagonal entry zero
    a = np.stack([zero, col, rows, last, np.ones((6, 6))]).astype(dtype)
    lu, piv, perm = factor(a)
    want_lu, want_piv = lapack(a)
    np.testing.assert_array_equal(piv, want_piv)
    np.testing.assert_array_equal(perm, permutation_of(want_piv, 6))
    np.testing.assert_allclose(lu, want_lu, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(lu[0], 0)
    np.testing.assert_array_equal(piv[0], np.arange(6))
    for i in range(len(a)):  # a[perm] = L U, zero pivots and all
        L = np.tril(lu[i], -1) + np.eye(6)
        np.testing.assert_allclose(L @ np.triu(lu[i]), a[i][perm[i]], rtol=1e-5, atol=1e-5)


def test_the_compiled_loop_equals_the_lapack_path(monkeypatch: Any) -> None:
    # The stack path with Numba and without (LAPACK's getrf per matrix, FUNCTX_NUMBA=0).
    a = np.concatenate([rand(20, 8, 8), hadamard_stack(8, 3)])
    with_numba = factor(a)
    monkeypatch.setenv("FUNCTX_NUMBA", "0")
    without = factor(a)
    np.testing.assert_array_equal(with_numba[1], without[1])
    np.testing.assert_array_equal(with_numba[2], without[2])
    np.testing.assert_allclose(with_numba[0], without[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k", [(1, 1), (2, 3), (4, 1), (5, 8), (9, 2), (64, 8), (64, 64)])
def test_solves_and_inverses_of_the_compiled_factors(dtype: Any, n: int, k: int) -> None:
    single = np.dtype(dtype) in (np.float32, np.complex64)
    tol = 2e-4 if single else 1e-10
    a = (rand(6, n, n, dtype=dtype) / np.sqrt(n) + 3 * np.eye(n)).astype(dtype)
    b = rand(6, n, k, dtype=dtype)
    lu, _, perm = factor(a)
    for trans in (0, 1, 2):
        op = a if trans == 0 else np.swapaxes(a, -1, -2)
        op = np.conj(op) if trans == 2 else op
        x = np.asarray(dec.lu_solve(lu, perm, b, trans=trans))
        np.testing.assert_allclose(x, np.linalg.solve(op, b), rtol=tol, atol=tol)
        inv = np.asarray(dec.lu_inverse(lu, perm, trans=trans))
        np.testing.assert_allclose(inv, np.linalg.inv(op), rtol=tol, atol=tol)


def test_singular_stack_inverse_is_not_finite_only_where_singular() -> None:
    a = np.stack([np.eye(6) * 2.0, np.diag([1.0, 1.0, 0.0, 1.0, 1.0, 1.0]), np.eye(6)])
    lu, _, perm = factor(a)
    inv = np.asarray(dec.lu_inverse(lu, perm, trans=1))
    np.testing.assert_allclose(inv[0], np.eye(6) / 2.0)
    np.testing.assert_allclose(inv[2], np.eye(6))
    assert not np.isfinite(inv[1]).all()


def test_the_memo_keeps_the_loops_snapshot_and_sees_mutation(monkeypatch: Any) -> None:
    calls = []
    real = _lu_kernels.factor_stack
    monkeypatch.setattr(_lu_kernels, "factor_stack",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    a = rand(8, 24, 24) + 4 * np.eye(24)
    b = rand(8, 24, 3)
    f = lambda x, y: fnp.sum(fnp.linalg.slogdet(x).logabsdet) + fnp.sum(fnp.linalg.solve(x, y))
    ga, gb = fx.grad(f, argnums=(0, 1))(a, b)
    assert len(calls) == 1  # one factorisation for slogdet, solve and both VJPs
    inv_t = np.swapaxes(np.linalg.inv(a), -1, -2)
    want = inv_t - np.linalg.solve(np.swapaxes(a, -1, -2), np.ones((8, 24, 3))) @ \
        np.swapaxes(np.linalg.solve(a, b), -1, -2)
    np.testing.assert_allclose(np.asarray(ga), want, rtol=1e-9, atol=1e-9)
    calls.clear()
    dec.lu(a)  # stores
    a[3, 5, 7] += 1.0  # a writeable input changed in place: not reused
    lu = np.asarray(dec.lu(a)[0])
    assert len(calls) == 2
    np.testing.assert_allclose(lu, lapack(a)[0], rtol=1e-11, atol=1e-11)
