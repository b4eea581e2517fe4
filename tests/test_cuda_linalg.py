"""The CUDA LU family, triangular solves and Cholesky (functx/primitives/cuda/_lu.py,
decompositions.py) against SciPy and NumPy on the CPU, on a GPU: every path (the one-block
LU kernel in shared and in global memory, cuSOLVER's getrf per matrix, batched and
per-matrix triangular solves), every dtype, singular, non-finite and tied-pivot matrices,
and gradients under ``jit`` captured whole as CUDA graphs (no host read left in the step).
Skips without a GPU (tests/test_cuda.py's ``IS_CUDA``).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg as sl

import functx as fx
import functx.numpy as fnp
import functx.scipy.linalg as fsl
from functx.compiler import cuda_graph
from functx.primitives import decompositions as D
from functx.primitives.cuda import _lu

from tests.test_cuda import IS_CUDA, to_dev

pytestmark = pytest.mark.skipif(not IS_CUDA, reason="needs CuPy on a GPU")

RNG = np.random.default_rng(0)
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
# (batch, n): the LU kernel in shared memory (n <= 64 in float64), in global memory (128),
# cuSOLVER per matrix (129), one matrix
# and one big enough for the blocked triangular solves (_lu.BLOCK)
SQUARE = [((3,), 5), ((2, 3), 4), ((4,), 1), ((256,), 64), ((3,), 128), ((2,), 129),
          ((), 40), ((), 600)]


def host(x):
    import cupy

    assert isinstance(x, cupy.ndarray), type(x)
    return cupy.asnumpy(x)


def rel(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = float(np.max(np.abs(want), initial=0.0)) or 1.0
    return float(np.max(np.abs(got.astype(np.complex128) - want), initial=0.0)) / scale


def tol(dt) -> float:
    return 2e-3 if np.dtype(dt) in (np.float32, np.complex64) else 1e-9


def rand(shape, dt) -> np.ndarray:
    x = RNG.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dt)


def well(batch, n, dt) -> np.ndarray:
    return (rand(batch + (n, n), dt) / np.sqrt(n) + 2 * np.eye(n)).astype(dt)


def names(dt) -> str:
    return np.dtype(dt).name


@pytest.mark.parametrize("dt", DTYPES, ids=names)
@pytest.mark.parametrize("batch,m,n", [(b, n, n) for b, n in SQUARE]
                         + [((3,), 6, 4), ((2,), 4, 6)])
def test_lu_matches_scipy(batch, m, n, dt) -> None:
    a = rand(batch + (m, n), dt) + np.eye(m, n, dtype=dt)
    ag = to_dev(a)
    before = ag.copy()
    lu, piv, perm = (host(x) for x in D.lu(ag))
    assert bool((ag == before).all())
    assert piv.dtype == np.int32 and perm.dtype == np.int32 and lu.dtype == np.dtype(dt)
    assert piv.shape == batch + (min(m, n),) and perm.shape == batch + (m,)
    k, differ = min(m, n), 0
    for i in np.ndindex(*batch):
        want_lu, want_piv = sl.lu_factor(a[i], check_finite=False)
        if np.array_equal(piv[i], want_piv[:k]):
            assert rel(lu[i], want_lu) < tol(dt) * 10, i
        else:  # a near tie rounded the other way (float32): other factors, as valid
            differ += 1
        L = np.tril(lu[i], -1)[:, :k] + np.eye(m, k)
        U = np.triu(lu[i])[:k, :]
        assert rel(L @ U, a[i][perm[i]]) < tol(dt) * 10, i
        assert np.array_equal(D.pivots_to_permutation(np, piv[i][None], m)[0], perm[i])
    exact = dt in (np.float64, np.complex128)
    assert differ <= (0 if exact else max(1, int(np.prod(batch)) // 50))


@pytest.mark.parametrize("dt", DTYPES, ids=names)
@pytest.mark.parametrize("batch,n", SQUARE)
def test_lu_solve_and_inverse_match_numpy(batch, n, dt) -> None:
    a = well(batch, n, dt)
    lu, _, perm = D.lu(to_dev(a))
    for k, trans in itertools.product((1, 3), (0, 1, 2)):
        b = rand(batch + (n, k), dt)
        bg = to_dev(b)
        x = host(D.lu_solve(lu, perm, bg, trans=trans))
        assert np.array_equal(host(bg), b)
        op = a if trans == 0 else np.swapaxes(a, -1, -2)
        op = op.conj() if trans == 2 else op
        assert rel(x, np.linalg.solve(op, b)) < tol(dt) * 10, (k, trans)
        inv = host(D.lu_inverse(lu, perm, trans=trans))
        assert rel(inv, np.linalg.inv(op)) < tol(dt) * 10, trans


def _tri_reference(a, b, left, lower, t, c, unit):
    n = a.shape[-1]
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        tri = tri * (1 - np.eye(n)) + np.eye(n)
    op = np.swapaxes(tri, -1, -2) if t else tri
    op = op.conj() if c else op
    if left:
        return np.linalg.solve(op, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)),
                       -1, -2)


@pytest.mark.parametrize("dt", DTYPES, ids=names)
@pytest.mark.parametrize("batch,n", [((3,), 5), ((256,), 16), ((2,), 129), ((), 40),
                                     ((2,), 700)])
def test_triangular_solve_every_flag_set(batch, n, dt) -> None:
    import cupy

    a = well(batch, n, dt)
    ag = to_dev(a)
    for (left, lower, t, c, unit), k in itertools.product(
            itertools.product((True, False), repeat=5), (1, 3)):  # (one vector: trsv)
        b = rand(batch + ((n, k) if left else (k, n)), dt)
        for view in (False, True):  # a C-contiguous b, and a transposed view of one
            bg = to_dev(b)
            if view:
                bg = cupy.swapaxes(cupy.ascontiguousarray(cupy.swapaxes(bg, -1, -2)), -1, -2)
            x = D.triangular_solve(ag, bg, left_side=left, lower=lower, transpose_a=t,
                                   conjugate_a=c, unit_diagonal=unit)
            assert x.flags.c_contiguous and x.dtype == np.dtype(dt)
            assert np.array_equal(host(bg), b) and np.array_equal(host(ag), a)
            err = rel(host(x), _tri_reference(a, b, left, lower, t, c, unit))
            assert err < tol(dt) * 10, (left, lower, t, c, unit, k, view, err)


@pytest.mark.parametrize("dt", (np.float32, np.float64), ids=names)
def test_blocked_triangular_solves_match_numpy(dt, monkeypatch) -> None:
    # the blocked solves (diagonal blocks inverted by a kernel, GEMMs) run in captured
    # steps; here eagerly, with the switch that picks them
    monkeypatch.setattr(_lu, "CAPTURING", [True])
    n = 2 * _lu.BLOCK + 7 + 4 * _lu.BLOCK  # (a last block of 7 rows)
    a = well((2,), n, dt)
    ag = to_dev(a)
    for left, lower, t, unit in itertools.product((True, False), repeat=4):
        b = rand((2,) + ((n, 5) if left else (5, n)), dt)
        x = D.triangular_solve(ag, to_dev(b), left_side=left, lower=lower, transpose_a=t,
                               conjugate_a=False, unit_diagonal=unit)
        err = rel(host(x), _tri_reference(a, b, left, lower, t, False, unit))
        assert err < tol(dt) * 10, (left, lower, t, unit, err)
    lu, _, perm = D.lu(ag)
    for trans in (0, 1):
        inv = host(D.lu_inverse(lu, perm, trans=trans))
        op = a if trans == 0 else np.swapaxes(a, -1, -2)
        assert rel(inv, np.linalg.inv(op)) < tol(dt) * 10, trans


@pytest.mark.parametrize("dt", (np.float32, np.float64), ids=names)
@pytest.mark.parametrize("n", (6, 100))  # shared and global memory (float64)
def test_lu_of_singular_and_non_finite_matrices_as_lapack(n, dt) -> None:
    a = well((5,), n, dt)
    a[1, :, 2] = 0            # a zero column: a zero pivot, skipped
    a[2] = 0                  # all zeros: U = 0, no pivoting
    a[3, 1, 1] = np.nan       # NaN: confined to its matrix
    a[4, :, 0] = 1.0          # ties for the first pivot: the first row, as idamax
    lu, piv, perm = (host(x) for x in D.lu(to_dev(a)))
    with np.errstate(all="ignore"):
        for i in (0, 1, 2, 4):
            want_lu, want_piv = sl.lu_factor(a[i], check_finite=False)
            assert np.isfinite(lu[i]).all(), i
            assert np.array_equal(piv[i], want_piv), i
            assert rel(lu[i], want_lu) < tol(dt) * 10, i
            L, U = np.tril(lu[i], -1) + np.eye(n), np.triu(lu[i])
            assert rel(L @ U, a[i][perm[i]]) < tol(dt) * 10, i
    assert piv[4, 0] == 0
    assert (np.diagonal(lu[2]) == 0).all() and (np.diagonal(lu[1]) == 0).sum() == 1
    assert np.isnan(lu[3]).any()


@pytest.mark.parametrize("dt", DTYPES, ids=names)
@pytest.mark.parametrize("batch,n", [((), 1), ((), 50), ((4,), 8), ((3,), 70)])
def test_cholesky_matches_numpy_and_is_nan_where_not_positive_definite(batch, n, dt) -> None:
    x = rand(batch + (n, n), dt)
    a = (x @ np.conj(np.swapaxes(x, -1, -2)) / n + np.eye(n)).astype(dt)
    ag = to_dev(a)
    got = host(D.cholesky(ag))
    assert np.array_equal(host(ag), a)
    assert rel(got, np.linalg.cholesky(a)) < tol(dt) * 10
    if batch:  # one matrix of the stack not positive definite: NaN there only
        bad = a.copy()
        bad[1] = -bad[1]
        got = host(D.cholesky(to_dev(bad)))
        assert np.isnan(got[1]).all()
        rest = [i for i in range(batch[0]) if i != 1]
        assert rel(got[rest], np.linalg.cholesky(a[rest])) < tol(dt) * 10
    else:
        assert np.isnan(host(D.cholesky(to_dev(-a)))).all()


def test_unsupported_dtypes_are_refused_with_a_functx_error() -> None:
    from functx.errors import FunctxError

    a = to_dev(np.eye(4, dtype=np.float16))
    for fn in (D.cholesky, D.lu, lambda a: D.triangular_solve(a, a, left_side=True)):
        with pytest.raises(FunctxError, match="float16"):
            fn(a)


def _slogdet_solve(a, b):
    return fnp.sum(fnp.linalg.slogdet(a).logabsdet) + fnp.sum(fnp.linalg.solve(a, b))


def _gp_nll(log_ell, x, y):
    d = x[:, None, :] - x[None, :, :]
    k = fnp.exp(-0.5 * fnp.sum(d * d, axis=-1) / fnp.exp(2 * log_ell))
    k = k + 0.1 * fnp.eye(x.shape[0], dtype=x.dtype)
    c = fsl.cho_factor(k, lower=True)
    alpha = fsl.cho_solve(c, y)
    return 0.5 * fnp.dot(y, alpha) + fnp.sum(fnp.log(fnp.diagonal(c[0])))


@pytest.fixture
def compiler_on():
    import functx.compiler as compiler

    old = compiler.set_jit_compiler("numba")  # (graphs are the compiler's: see conftest.py)
    yield
    compiler.set_jit_compiler(old)


@pytest.mark.usefixtures("compiler_on")
@pytest.mark.parametrize("case", ["stack", "one matrix", "big matrix", "gp"])
def test_jit_grad_of_linear_algebra_is_captured_whole_and_matches_the_cpu(case,
                                                                          monkeypatch) -> None:
    if case == "gp":
        x, y = RNG.standard_normal((200, 2)), RNG.standard_normal(200)
        args, f, argnums = (np.float64(0.3), x, y), _gp_nll, 0
    else:
        batch, n = {"stack": ((64,), 16), "one matrix": ((), 150),
                    "big matrix": ((), 4 * _lu.BLOCK + 40)}[case]  # (blocked solves)
        args, f, argnums = (well(batch, n, np.float64), rand(batch + (n, 3), np.float64)), \
            _slogdet_solve, (0, 1)
    want = fx.grad(f, argnums=argnums)(*args)
    step = fx.jit(fx.grad(f, argnums=argnums))
    before = dict(cuda_graph.STATS)
    factored = []  # the operands _lu.lu factors
    monkeypatch.setattr(_lu, "lu", lambda xp, a, _lu_=_lu.lu: factored.append(a.shape)
                        or _lu_(xp, a))
    got, per_call = [], []
    dev_args = to_dev(args)  # (at the same addresses each call: the graph reads them there)
    with fx.default_device("cuda"):  # (the GP's identity made there)
        for _ in range(4):  # eager, capture, replay, replay
            start = len(factored)
            got.append(step(*dev_args))
            per_call.append(len(factored) - start)
    assert cuda_graph.STATS["captured"] == before["captured"] + 1
    assert cuda_graph.STATS["failed"] == before["failed"]
    if case != "gp":  # slogdet and solve factor a once in the graph (jit's optimiser
        # inlines slogdet's forward pass and shares the LU), and replays factor nothing
        assert 1 <= per_call[0] <= 2 and per_call[1:] == [1, 0, 0], per_call
    for g in got:
        for gi, wi in zip(g if isinstance(g, tuple) else (g,),
                          want if isinstance(want, tuple) else (want,)):
            assert rel(host(gi), np.asarray(wi)) < 1e-9
