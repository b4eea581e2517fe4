"""functx.numpy.linalg and functx.scipy.linalg against jax.numpy.linalg / jax.scipy.linalg.

Values and gradients (of a fixed random weighting of the outputs, so every output entry
matters; gauge-invariant combinations for eigenvectors and singular vectors) on
well-conditioned inputs, in float64 and complex128; batched inputs; errors. The primitives'
own rules are checked by the spec table (tests/specs/decompositions.py).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
import functx.scipy.linalg as fsl
from functx.errors import FunctxError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jsl = pytest.importorskip("jax.scipy.linalg")
jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)


def rand(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def spd(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    x = rand(*shape, dtype=dtype)
    n = shape[-1]
    return x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)


def well(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    """A matrix with well-separated singular values / eigenvalues, far from zero."""
    m, n = shape[-2:]
    k = min(m, n)
    d = np.zeros((m, n))
    d[np.arange(k), np.arange(k)] = 2.0 * np.arange(k, 0, -1) + 1
    return 0.3 * rand(*shape, dtype=dtype) + d


def herm(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    x = rand(*shape, dtype=dtype) * 0.3
    return (x + np.conj(np.swapaxes(x, -1, -2))) / 2 + np.diag(3.0 * np.arange(shape[-1]))


def close(a: Any, b: Any, tol: float = 1e-8) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def weighted(f: Callable, xp: Any, project: Callable = lambda o, xp: o) -> Callable:
    """``sum(Re(W * out))`` over the outputs of ``f`` (W fixed per output shape)."""
    weights: dict = {}

    def g(*args: Any) -> Any:
        out = project(f(*args), xp)
        outs = out if isinstance(out, tuple) else (out,)
        total = 0.0
        for i, o in enumerate(outs):
            key = (i, tuple(o.shape))
            if key not in weights:
                weights[key] = np.random.default_rng(len(weights) + 7).standard_normal(o.shape)
            total = total + xp.sum(xp.real(o * weights[key]))
        return total
    return g


def check(f_fx: Callable, f_jax: Callable, *args: Any, argnums: Any = 0, tol: float = 1e-8,
          project: Callable = lambda o, xp: o, grad: bool = True) -> None:
    """Values and gradients of ``f_fx`` match ``f_jax``'s."""
    want = project(f_jax(*args), jnp)
    got = project(f_fx(*args), fnp)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        close(g, w, tol)
    if grad:
        gf = fx.grad(weighted(f_fx, fnp, project), argnums=argnums)(*args)
        gj = jax.grad(weighted(f_jax, jnp, project), argnums=argnums)(*args)
        for g, w in zip(gf if isinstance(gf, tuple) else (gf,),
                        gj if isinstance(gj, tuple) else (gj,)):
            close(g, w, tol)


def gauge(o: Any, xp: Any) -> Any:
    """eigh/svd results with the vectors replaced by gauge-invariant products."""
    if len(o) == 2:  # (w, v)
        w, v = o
        k = v.shape[-1]
        return w, xp.matmul(v * np.arange(1, k + 1), xp.conj(xp.swapaxes(v, -1, -2)))
    u, s, vh = o
    return s, xp.matmul(u * np.arange(1, s.shape[-1] + 1), vh)


DTYPES = [np.float64, np.complex128]


# -- jax.numpy.linalg ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky(dtype: Any) -> None:
    check(fnp.linalg.cholesky, jnp.linalg.cholesky, spd(2, 4, 4, dtype=dtype))
    check(lambda a: fnp.linalg.cholesky(a, upper=True),
          lambda a: jnp.linalg.cholesky(a, upper=True), spd(3, 3, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_inv_det_slogdet(dtype: Any) -> None:
    a, b = well(2, 4, 4, dtype=dtype), rand(2, 4, 3, dtype=dtype)
    check(fnp.linalg.solve, jnp.linalg.solve, a, b, argnums=(0, 1))
    check(fnp.linalg.solve, jnp.linalg.solve, a[0], b[0, :, 0], argnums=(0, 1))
    check(fnp.linalg.solve, jnp.linalg.solve, a, b[0], argnums=(0, 1))  # broadcast b
    check(fnp.linalg.inv, jnp.linalg.inv, a)
    check(fnp.linalg.det, jnp.linalg.det, a)
    check(lambda x: tuple(fnp.linalg.slogdet(x)), lambda x: tuple(jnp.linalg.slogdet(x)), a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_slogdet_big_and_stacked_match_jax(dtype: Any) -> None:
    # Sizes past the LU memo's threshold (one factorisation shared by slogdet and solve)
    # and stacks solved by the compiled loop over the stack.
    for a, b in [(well(80, 80, dtype=dtype), rand(80, 5, dtype=dtype)),
                 (well(70, 10, 10, dtype=dtype), rand(70, 10, 2, dtype=dtype))]:
        f = (lambda fn, ns: lambda x, y: (ns.linalg.slogdet(x).logabsdet,
                                          fn(x, y), ns.linalg.inv(x), ns.linalg.det(x)))
        check(f(fnp.linalg.solve, fnp), f(jnp.linalg.solve, jnp), a, b, argnums=(0, 1))


def test_lu_memo_shares_one_factorisation_and_sees_mutation(monkeypatch: Any) -> None:
    import scipy.linalg

    from functx.primitives import _lu_lapack

    calls = []
    for module, name in ((scipy.linalg, "lu_factor"), (_lu_lapack, "getrf")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name,
                            lambda *a, real=real, **k: calls.append(1) or real(*a, **k))
    a, b = well(80, 80), rand(80, 3)
    f = lambda x, y: fnp.linalg.slogdet(x).logabsdet + fnp.sum(fnp.linalg.solve(x, y))
    ga, gb = fx.grad(f, argnums=(0, 1))(a, b)
    assert len(calls) == 1  # slogdet's LU serves solve's forward and both VJPs
    close(ga, np.linalg.inv(a).T - np.linalg.solve(a.T, np.ones((80, 3))) @
          np.linalg.solve(a, b).T)
    calls.clear()
    for _ in range(3):  # an entry serves one more call only: a loop still factors
        fnp.linalg.det(a)
    assert len(calls) == 3
    a[0, 0] += 1.0  # a writeable input changed in place: its old factors are not reused
    lu1 = fsl.lu_factor(a)[0]
    lu2 = fsl.lu_factor(a)[0]
    close(lu1, scipy.linalg.lu_factor(a)[0], 1e-12), close(lu2, lu1, 0)
    a[1, 1] -= 2.0
    fsl.lu_factor(a)  # stores
    close(fsl.lu_factor(a)[0], scipy.linalg.lu_factor(a)[0], 1e-12)


@pytest.mark.parametrize("numba", ["1", "0"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_primitive_lu_solve_paths_match_numpy(numba: str, dtype: Any,
                                             monkeypatch: Any) -> None:
    from functx.primitives import decompositions as dec

    monkeypatch.setenv("FUNCTX_NUMBA", numba)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10
    for shape, n, k in [((), 6, 3), ((), 200, 4), ((5, 3), 7, 2), ((2,), 150, 3)]:
        a = (rand(*shape, n, n, dtype=dtype) / np.sqrt(n) + 3 * np.eye(n)).astype(dtype)
        b = rand(*shape, n, k, dtype=dtype)
        lu, _, perm = dec.lu(a)
        for trans in (0, 1, 2):
            x = np.asarray(dec.lu_solve(lu, perm, b, trans=trans))
            op = a if trans == 0 else np.swapaxes(a, -1, -2)
            want = np.linalg.solve(np.conj(op) if trans == 2 else op, b)
            assert x.dtype == np.dtype(dtype)
            close(x, want, tol)
            inv = np.asarray(dec.lu_inverse(lu, perm, trans=trans))
            want = np.linalg.inv(np.conj(op) if trans == 2 else op)
            assert inv.dtype == np.dtype(dtype) and inv.shape == a.shape
            close(inv, want, tol)


@pytest.mark.parametrize("numba", ["1", "0"])
def test_slogdet_gradient_of_a_stack_with_a_singular_matrix(numba: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("FUNCTX_NUMBA", numba)
    a = np.stack([np.eye(3) * 2.0, np.diag([1.0, 0.0, 1.0])])
    g = np.asarray(fx.grad(lambda x: fnp.sum(fnp.linalg.slogdet(x).logabsdet))(a))
    close(g[0], np.eye(3) / 2.0, 1e-12)
    assert not np.isfinite(g[1]).all()


def test_slogdet_sign_and_singular() -> None:
    a = np.diag([-2.0, 3.0, 1.0])[[1, 0, 2]]
    s, ld = fnp.linalg.slogdet(a)
    js, jld = jnp.linalg.slogdet(a)
    close(s, js), close(ld, jld)
    s, ld = fnp.linalg.slogdet(np.zeros((2, 2)))
    assert float(s) == 0.0 and float(ld) == -np.inf


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_eigvalsh(dtype: Any) -> None:
    a = herm(2, 4, 4, dtype=dtype)
    check(lambda x: tuple(fnp.linalg.eigh(x)), lambda x: tuple(jnp.linalg.eigh(x)), a,
          project=gauge)
    check(fnp.linalg.eigvalsh, jnp.linalg.eigvalsh, a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_svd(dtype: Any, shape: tuple) -> None:
    a = well(*shape, dtype=dtype)
    check(lambda x: tuple(fnp.linalg.svd(x, full_matrices=False)),
          lambda x: tuple(jnp.linalg.svd(x, full_matrices=False)), a, project=gauge)
    check(lambda x: fnp.linalg.svd(x, compute_uv=False),
          lambda x: jnp.linalg.svd(x, compute_uv=False), a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_qr(dtype: Any) -> None:
    for shape in [(4, 4), (5, 3), (2, 4, 2)]:
        a = well(*shape, dtype=dtype)
        check(lambda x: tuple(fnp.linalg.qr(x)), lambda x: tuple(jnp.linalg.qr(x)), a)
        check(lambda x: fnp.linalg.qr(x, mode="r"), lambda x: jnp.linalg.qr(x, mode="r"), a)
    a = well(5, 3, dtype=dtype)
    check(lambda x: tuple(fnp.linalg.qr(x, mode="complete")),
          lambda x: tuple(jnp.linalg.qr(x, mode="complete")), a, grad=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigvals(dtype: Any) -> None:
    a = well(2, 4, 4, dtype=dtype)
    # same order (LAPACK's geev on both sides), gradients of the eigenvalues
    check(fnp.linalg.eigvals, jnp.linalg.eigvals, a, tol=1e-7)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eig_eigenvector_gradients_match_jax_opt_in(dtype: Any) -> None:
    a = well(2, 4, 4, dtype=dtype)
    check(lambda x: fnp.linalg.eig(x),
          lambda x: tuple(jax.lax.linalg.eig(x, enable_eigvec_derivs=True,
                                             compute_left_eigenvectors=False)), a, tol=1e-7)


def test_pinv_lstsq_rank_cond() -> None:
    a = well(5, 3)
    check(fnp.linalg.pinv, jnp.linalg.pinv, a)
    b = rand(5, 2)
    check(lambda x, y: fnp.linalg.lstsq(x, y)[0], lambda x, y: jnp.linalg.lstsq(x, y)[0],
          a, b, argnums=(0, 1))
    x, resid, rank, s = fnp.linalg.lstsq(a, b)
    jx, jresid, jrank, js = jnp.linalg.lstsq(a, b)
    close(resid, jresid), close(s, js)
    assert int(rank) == int(jrank) == 3
    low = rand(4, 2) @ rand(2, 5)
    assert int(fnp.linalg.matrix_rank(low)) == int(jnp.linalg.matrix_rank(low)) == 2
    for p in (None, 2, -2, 1, np.inf, "fro"):
        check(lambda x: fnp.linalg.cond(x, p), lambda x: jnp.linalg.cond(x, p), well(3, 3))


@pytest.mark.parametrize("ord", [None, 1, -1, 2, -2, np.inf, -np.inf, 0, 3, 0.5])
def test_vector_norms(ord: Any) -> None:
    x = rand(3, 5) + 0.1
    grad = ord != 0
    check(lambda v: fnp.linalg.norm(v, ord, axis=1), lambda v: jnp.linalg.norm(v, ord, axis=1),
          x, grad=grad)
    check(lambda v: fnp.linalg.vector_norm(v, ord=2 if ord is None else ord, axis=0,
                                           keepdims=True),
          lambda v: jnp.linalg.vector_norm(v, ord=2 if ord is None else ord, axis=0,
                                           keepdims=True), x, grad=grad)


@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norms(ord: Any) -> None:
    x = well(2, 4, 3)
    check(lambda v: fnp.linalg.norm(v, ord, axis=(1, 2)),
          lambda v: jnp.linalg.norm(v, ord, axis=(1, 2)), x)
    check(lambda v: fnp.linalg.norm(v, ord, axis=(2, 1), keepdims=True),
          lambda v: jnp.linalg.norm(v, ord, axis=(2, 1), keepdims=True), x)
    check(lambda v: fnp.linalg.matrix_norm(v, ord="fro" if ord is None else ord),
          lambda v: jnp.linalg.matrix_norm(v, ord="fro" if ord is None else ord), x)


def test_products_and_the_rest() -> None:
    a = well(4, 4)
    for n in (0, 1, 3, -2):
        check(lambda x: fnp.linalg.matrix_power(x, n), lambda x: jnp.linalg.matrix_power(x, n), a)
    ms = [rand(3, 5), rand(5, 2), rand(2, 4), rand(4)]
    check(lambda *m: fnp.linalg.multi_dot(m), lambda *m: jnp.linalg.multi_dot(m), *ms,
          argnums=(0, 1, 2, 3))
    t = well(6, 6).reshape(2, 3, 6)
    check(lambda x, y: fnp.linalg.tensorsolve(x, y), lambda x, y: jnp.linalg.tensorsolve(x, y),
          t, rand(2, 3), argnums=(0, 1))
    check(lambda x: fnp.linalg.tensorinv(x, ind=1), lambda x: jnp.linalg.tensorinv(x, ind=1),
          well(6, 6).reshape(6, 2, 3))
    u, v = rand(4, 3), rand(3)
    check(fnp.linalg.cross, jnp.linalg.cross, u, v, argnums=(0, 1))
    check(fnp.cross, jnp.cross, u, v, argnums=(0, 1))
    check(fnp.linalg.outer, jnp.linalg.outer, rand(3), rand(4), argnums=(0, 1))
    check(lambda x: fnp.linalg.trace(x, offset=1), lambda x: jnp.linalg.trace(x, offset=1),
          rand(2, 3, 4))
    check(lambda x: fnp.linalg.diagonal(x, offset=-1), lambda x: jnp.linalg.diagonal(x, offset=-1),
          rand(2, 3, 4))
    check(fnp.linalg.matmul, jnp.linalg.matmul, rand(2, 3, 4), rand(4, 2), argnums=(0, 1))
    z1, z2 = rand(3, 4, dtype=np.complex128), rand(4, dtype=np.complex128)
    check(fnp.linalg.vecdot, jnp.linalg.vecdot, z1, z2, argnums=(0, 1))
    check(fnp.vecdot, jnp.vecdot, z1, z2, argnums=(0, 1))


def test_transforms_compose() -> None:
    a, b = well(3, 4, 4), rand(3, 4, 2)
    f = lambda x, y: fnp.linalg.slogdet(x)[1] + fnp.sum(fnp.linalg.solve(x, y))
    jf = lambda x, y: jnp.linalg.slogdet(x)[1] + jnp.sum(jnp.linalg.solve(x, y))
    close(fx.vmap(f)(a, b), jax.vmap(jf)(a, b))
    close(fx.jit(fx.grad(f))(a[0], b[0]), jax.grad(jf)(a[0], b[0]))
    close(fx.vmap(fx.grad(f))(a, b), jax.vmap(jax.grad(jf))(a, b))
    close(fx.hessian(lambda x: f(x, b[0]))(a[0]), jax.hessian(lambda x: jf(x, b[0]))(a[0]),
          1e-7)
    g = lambda x: fnp.sum(fnp.linalg.cholesky(x) ** 3)
    jg = lambda x: jnp.sum(jnp.linalg.cholesky(x) ** 3)
    s = spd(3, 3)
    close(fx.hessian(g)(s), jax.hessian(jg)(s), 1e-7)
    t = rand(4, 4)
    close(fx.jvp(fnp.linalg.inv, (a[0],), (t,))[1], jax.jvp(jnp.linalg.inv, (a[0],), (t,))[1])


# -- jax.scipy.linalg ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_scipy_triangular_and_cholesky(dtype: Any) -> None:
    a, b = well(4, 4, dtype=dtype), rand(4, 3, dtype=dtype)
    for trans in (0, 1, 2, "T"):
        for lower in (False, True):
            check(lambda x, y: fsl.solve_triangular(x, y, trans=trans, lower=lower),
                  lambda x, y: jsl.solve_triangular(x, y, trans=trans, lower=lower), a, b,
                  argnums=(0, 1))
    check(lambda x, y: fsl.solve_triangular(x, y, unit_diagonal=True),
          lambda x, y: jsl.solve_triangular(x, y, unit_diagonal=True), a, b[:, 0], argnums=(0, 1))
    s = spd(4, 4, dtype=dtype)
    for lower in (False, True):
        check(lambda x: fsl.cholesky(x, lower=lower), lambda x: jsl.cholesky(x, lower=lower), s)
        check(lambda x, y: fsl.cho_solve(fsl.cho_factor(x, lower=lower), y),
              lambda x, y: jsl.cho_solve(jsl.cho_factor(x, lower=lower), y), s, b,
              argnums=(0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scipy_lu(dtype: Any) -> None:
    for shape in [(4, 4), (5, 3), (3, 5)]:
        a = rand(*shape, dtype=dtype)
        check(lambda x: fsl.lu(x), lambda x: jsl.lu(x), a)
        check(lambda x: fsl.lu(x, permute_l=True), lambda x: jsl.lu(x, permute_l=True), a)
        check(lambda x: fsl.lu_factor(x)[0], lambda x: jsl.lu_factor(x)[0], a)
        np.testing.assert_array_equal(fsl.lu_factor(a)[1], jsl.lu_factor(a)[1])
    a, b = rand(4, 4, dtype=dtype), rand(4, 2, dtype=dtype)
    for trans in (0, 1, 2):
        check(lambda x, y: fsl.lu_solve(fsl.lu_factor(x), y, trans=trans),
              lambda x, y: jsl.lu_solve(jsl.lu_factor(x), y, trans=trans), a, b, argnums=(0, 1))


def test_primitive_lu_permutation_matches_jax() -> None:
    from functx.primitives import decompositions as dec
    a = rand(3, 5, 5)
    lu, piv, perm = dec.lu(a)
    jlu, jpiv, jperm = jax.lax.linalg.lu(a)
    close(lu, jlu)
    np.testing.assert_array_equal(piv, jpiv)
    np.testing.assert_array_equal(perm, jperm)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scipy_decompositions(dtype: Any) -> None:
    a = well(5, 3, dtype=dtype)
    check(lambda x: fsl.qr(x, mode="economic"), lambda x: jsl.qr(x, mode="economic"), a)
    check(lambda x: fsl.svd(x, full_matrices=False), lambda x: jsl.svd(x, full_matrices=False),
          a, project=gauge)
    h = herm(4, 4, dtype=dtype)
    check(lambda x: fsl.eigh(x), lambda x: jsl.eigh(x), h, project=gauge)
    check(lambda x: fsl.eigh(x, lower=False, eigvals_only=True),
          lambda x: jsl.eigh(x, lower=False, eigvals_only=True), h)


@pytest.mark.parametrize("dtype", DTYPES)
def test_expm_and_frechet(dtype: Any) -> None:
    a, e = rand(2, 4, 4, dtype=dtype) * 0.5, rand(2, 4, 4, dtype=dtype)
    check(fsl.expm, jsl.expm, a, tol=1e-7)
    got = fsl.expm_frechet(a[0], e[0])
    want = jsl.expm_frechet(a[0], e[0])
    close(got[0], want[0], 1e-7), close(got[1], want[1], 1e-7)
    check(lambda x, y: fsl.expm_frechet(x, y, compute_expm=False),
          lambda x, y: jsl.expm_frechet(x, y, compute_expm=False), a[0], e[0],
          argnums=(0, 1), tol=1e-6)
    # second order: the Hessian of a function of expm
    f = lambda x: fnp.sum(fnp.real(fsl.expm(x)) ** 2)
    jf = lambda x: jnp.sum(jnp.real(jsl.expm(x)) ** 2)
    close(fx.hessian(f)(a[0].real), jax.hessian(jf)(a[0].real), 1e-6)


def test_scipy_matrix_functions_and_constructors() -> None:
    a = rand(4, 4)
    check(fsl.sqrtm, jsl.sqrtm, a, grad=False)
    check(lambda x: fsl.schur(x)[0], lambda x: jsl.schur(x)[0], a, grad=False)
    check(lambda *m: fsl.block_diag(*m), lambda *m: jsl.block_diag(*m), rand(2, 2), rand(1, 3),
          rand(2), argnums=(0, 1, 2))
    check(fsl.toeplitz, jsl.toeplitz, rand(3), rand(4), argnums=(0, 1))
    check(fsl.toeplitz, jsl.toeplitz, rand(3, dtype=np.complex128))


def test_schur_refuses_derivatives() -> None:
    with pytest.raises(FunctxError, match="schur has no derivative"):
        fx.grad(lambda a: fnp.sum(fsl.schur(a)[0]))(rand(3, 3))


# -- errors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [fnp.linalg.cholesky, fnp.linalg.inv, fnp.linalg.det,
                                fnp.linalg.slogdet, fnp.linalg.eigh, fnp.linalg.eigvals,
                                fsl.expm, fsl.cholesky, fsl.schur],
                         ids=lambda f: f.__name__)
def test_non_square_and_low_rank_raise(fn: Callable) -> None:
    for bad in (np.ones((2, 3)), np.ones(3)):
        with pytest.raises(FunctxError) as info:
            fn(bad)
        msg = str(info.value).splitlines()[0]  # (then the user's source line)
        assert msg.endswith(".") and ("square" in msg or "dimensions" in msg), msg


def test_solve_shape_errors() -> None:
    with pytest.raises(FunctxError, match=r"needs b of shape \(3,\)"):
        fnp.linalg.solve(np.eye(3), np.ones(4))
    with pytest.raises(FunctxError, match="2 or more|at least 2"):
        fnp.linalg.svd(np.ones(3))
    with pytest.raises(FunctxError, match="full_matrices"):
        fx.grad(lambda a: fnp.sum(fnp.linalg.svd(a)[0]))(np.ones((3, 2)))


def test_primitives_refuse_integer_and_half_dtypes() -> None:
    from functx.primitives import decompositions as dec
    with pytest.raises(fx.DTypeError, match="float16"):
        dec.cholesky(np.eye(2, dtype=np.float16))
    with pytest.raises(fx.DTypeError, match="int64"):
        dec.lu(np.eye(2, dtype=np.int64))
    # functx.numpy.linalg promotes integers (as NumPy and JAX)
    close(fnp.linalg.inv(np.eye(2, dtype=np.int64) * 2), np.eye(2) / 2)


def test_cholesky_of_indefinite_is_nan_per_matrix() -> None:
    a = np.stack([np.eye(2), -np.eye(2)])
    L = fnp.linalg.cholesky(a)
    close(L[0], np.eye(2))
    assert np.isnan(np.asarray(L[1])).all()


def test_matvec_vecmat_matrix_transpose_match_jax() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4)) + 1j * rng.standard_normal((2, 3, 4))
    v = rng.standard_normal(4) + 1j
    w = rng.standard_normal(3) - 2j
    np.testing.assert_allclose(fnp.matvec(a, v), jnp.matvec(a, v), rtol=1e-12)
    np.testing.assert_allclose(fnp.vecmat(w, a), jnp.vecmat(w, a), rtol=1e-12)
    np.testing.assert_array_equal(fnp.matrix_transpose(a), jnp.matrix_transpose(a))
    with pytest.raises(fx.ShapeError, match="matvec"):
        fnp.matvec(a, np.ones(3))
