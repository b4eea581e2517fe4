"""Collectives over named axes (functx.lax.psum, all_gather, ...) under vmap(axis_name=).

Checked against explicit NumPy sums and gathers, against ``jax.vmap(axis_name=)`` with
``jax.lax``'s collectives, and against themselves: a gradient taken *inside* the map (the
collectives' own VJP rules) equals the gradient of the members' summed loss taken
*outside* it (their batching rules only), and likewise for forward mode.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.named_axes import AxisNameError

RNG = np.random.default_rng(0)
N = 4


@pytest.fixture(scope="module")
def jax():
    return pytest.importorskip("jax")


@contextlib.contextmanager
def x64(jax):
    ctx = jax.enable_x64(True) if hasattr(jax, "enable_x64") else \
        pytest.importorskip("jax.experimental").enable_x64()
    with ctx:
        yield


# Each case: (name, body of one member written against a lax module L, member shape).
# The bodies use only operators and methods, so they run on functx and JAX values alike.
CASES = [
    ("psum", lambda L: lambda x: L.psum(x, "i") * x, (3,)),
    ("psum_scalar", lambda L: lambda x: x * L.psum(1, "i"), (3,)),
    ("pmean", lambda L: lambda x: (x - L.pmean(x, "i")) ** 2, (2, 3)),
    ("pmax", lambda L: lambda x: L.pmax(x, "i") * x, (3,)),
    ("pmin", lambda L: lambda x: L.pmin(x, "i") + x, (3,)),
    ("all_gather", lambda L: lambda x: L.all_gather(x, "i") * 2.0, (3,)),
    ("all_gather_axis1", lambda L: lambda x: L.all_gather(x, "i", axis=1) ** 2, (2, 3)),
    ("all_gather_tiled", lambda L: lambda x: L.all_gather(x, "i", axis=1, tiled=True) ** 2,
     (2, 3)),
    ("psum_scatter", lambda L: lambda x: L.psum_scatter(x, "i") ** 2, (N, 3)),
    ("psum_scatter_dim1", lambda L: lambda x: L.psum_scatter(x, "i", scatter_dimension=1)
     ** 2, (2, N)),
    ("psum_scatter_tiled", lambda L: lambda x: L.psum_scatter(x, "i", tiled=True) ** 2,
     (2 * N, 3)),
    ("all_to_all", lambda L: lambda x: L.all_to_all(x, "i", 0, 1) ** 2, (N, 3)),
    ("all_to_all_1_0", lambda L: lambda x: L.all_to_all(x, "i", 1, 0) ** 2, (3, N)),
    ("all_to_all_tiled", lambda L: lambda x: L.all_to_all(x, "i", 0, 1, tiled=True) ** 2,
     (2 * N, 3)),
    ("ppermute", lambda L: lambda x: L.ppermute(x, "i", [(0, 1), (1, 2), (2, 3), (3, 0)])
     * x, (3,)),
    ("ppermute_partial", lambda L: lambda x: L.ppermute(x, "i", [(0, 2), (3, 1)]) ** 2,
     (3,)),
    ("axis_index", lambda L: lambda x: x * L.axis_index("i"), (3,)),
]
IDS = [c[0] for c in CASES]


def _jax_lax(jax):
    import jax.lax as jl

    return jl


@pytest.mark.parametrize("name,body,shape", CASES, ids=IDS)
def test_forward_matches_jax(jax, name, body, shape):
    x = RNG.normal(size=(N,) + shape)
    got = fx.vmap(body(fx.lax), axis_name="i")(x)
    if name == "ppermute_partial":  # JAX's vmap takes full permutations only
        want = np.zeros_like(x)
        want[2], want[1] = x[0], x[3]
        np.testing.assert_allclose(got, want ** 2)
        return
    with x64(jax):
        want = np.asarray(jax.vmap(body(_jax_lax(jax)), axis_name="i")(x))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,body,shape", CASES, ids=IDS)
def test_grad_inside_map_matches_jax_and_outside(jax, name, body, shape):
    """vmap(grad(member loss)) runs the collectives' VJP rules; JAX's SPMD semantics make it
    the gradient of the summed loss, which grad outside the map computes from batching."""
    if name in ("pmax", "pmin"):
        pytest.skip("JAX has no derivative for pmax/pmin (checked against outside below)")
    x = RNG.normal(size=(N,) + shape)
    f = body(fx.lax)
    inside = fx.vmap(fx.grad(lambda x: fnp.sum(f(x))), axis_name="i")(x)
    outside = fx.grad(lambda xs: fnp.sum(fx.vmap(f, axis_name="i")(xs)))(x)
    np.testing.assert_allclose(inside, outside, rtol=1e-10, atol=1e-12)
    if name in ("all_to_all", "all_to_all_1_0", "ppermute_partial"):
        return  # JAX 0.10 cannot transpose its vmapped all_to_all; partial perms: above
    with x64(jax):
        jf = body(_jax_lax(jax))
        want = np.asarray(jax.vmap(jax.grad(lambda x: jf(x).sum()), axis_name="i")(x))
    np.testing.assert_allclose(inside, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["pmax", "pmin"])
def test_extremum_grad_inside_equals_outside_with_ties(name):
    x = RNG.normal(size=(N, 3))
    x[1, 0] = x[2, 0] = (x[:, 0].max() + 1.0) if name == "pmax" else (x[:, 0].min() - 1.0)
    op = getattr(fx.lax, name)
    f = lambda x: op(x, "i") * fnp.arange(1.0, 4.0)  # noqa: E731
    inside = fx.vmap(fx.grad(lambda x: fnp.sum(f(x))), axis_name="i")(x)
    outside = fx.grad(lambda xs: fnp.sum(fx.vmap(f, axis_name="i")(xs)))(x)
    np.testing.assert_allclose(inside, outside, rtol=1e-12)
    assert inside[1, 0] == inside[2, 0] == 0.5 * N  # the tie splits the summed cotangent


@pytest.mark.parametrize("name,body,shape", CASES, ids=IDS)
def test_jvp_inside_map_equals_outside(name, body, shape):
    x = RNG.normal(size=(N,) + shape)
    t = RNG.normal(size=x.shape)
    f = body(fx.lax)
    inside = fx.vmap(lambda x, t: fx.jvp(f, (x,), (t,))[1], axis_name="i")(x, t)
    outside = fx.jvp(fx.vmap(f, axis_name="i"), (x,), (t,))[1]
    np.testing.assert_allclose(inside, outside, rtol=1e-10, atol=1e-12)


def test_against_explicit_sums_and_gathers():
    x = RNG.normal(size=(N, 2, 3))
    L = fx.lax
    m = lambda f: fx.vmap(f, axis_name="i")(x)  # noqa: E731
    np.testing.assert_allclose(m(lambda v: L.psum(v, "i")), np.broadcast_to(x.sum(0), x.shape))
    np.testing.assert_allclose(m(lambda v: L.pmax(v, "i")), np.broadcast_to(x.max(0), x.shape))
    np.testing.assert_allclose(m(lambda v: L.all_gather(v, "i", axis=2)),
                               np.broadcast_to(np.moveaxis(x, 0, 2), (N, 2, 3, N)))
    np.testing.assert_array_equal(m(lambda v: L.axis_index("i")), np.arange(N, dtype=np.int32))
    assert m(lambda v: L.axis_index("i")).dtype == np.int32
    y = RNG.normal(size=(N, N, 3))
    got = fx.vmap(lambda v: L.psum_scatter(v, "i"), axis_name="i")(y)
    np.testing.assert_allclose(got, y.sum(0))
    assert fx.vmap(lambda v: v * L.axis_size("i"), axis_name="i")(x).shape == x.shape


def test_nested_maps_with_two_axis_names(jax):
    x = RNG.normal(size=(3, N, 2))

    def body(L):
        def f(v):
            inner = L.psum(v, "j")
            outer = L.psum(v, "i")
            both = L.psum(v, ("i", "j"))
            g = L.all_gather(v, "i")  # passes through the inner map
            return inner * outer + both * L.axis_index("i") - L.axis_index("j") + g.sum(0) \
                + L.pmax(v, "i") * L.pmean(v, ("i", "j"))
        return f

    def nested(vmap, f, **kw):
        return vmap(vmap(f, axis_name="j", **kw), axis_name="i", **kw)

    got = nested(fx.vmap, body(fx.lax))(x)
    with x64(jax):
        want = np.asarray(nested(jax.vmap, body(_jax_lax(jax)))(x))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the inner map's name shadows an outer map of the same name, as in JAX
    got2 = fx.vmap(fx.vmap(lambda v: fx.lax.psum(v, "i"), axis_name="i"), axis_name="i")(x)
    np.testing.assert_allclose(got2, np.broadcast_to(x.sum(1, keepdims=True), x.shape))
    # grad through both maps, inside and outside
    f = body(fx.lax)
    inside = nested(fx.vmap, fx.grad(lambda v: fnp.sum(f(v))))(x)
    outside = fx.grad(lambda xs: fnp.sum(nested(fx.vmap, f)(xs)))(x)
    np.testing.assert_allclose(inside, outside, rtol=1e-10, atol=1e-12)


def test_anonymous_inner_map_passes_collectives_through():
    x = RNG.normal(size=(N, 3, 2))
    got = fx.vmap(fx.vmap(lambda v: fx.lax.psum(v, "i")), axis_name="i")(x)
    np.testing.assert_allclose(got, np.broadcast_to(x.sum(0), x.shape))
    got = fx.vmap(fx.vmap(lambda v: fx.lax.all_gather(v, "i"), in_axes=1, out_axes=1),
                  axis_name="i")(x)
    # got[i, j, l, k] = x[j, k, l] for every member i
    np.testing.assert_allclose(got, np.broadcast_to(np.transpose(x, (0, 2, 1)), (N, N, 2, 3)))


def test_collectives_of_constants_and_under_jit():
    c = np.arange(3.0)
    x = RNG.normal(size=(N, 3))
    got = fx.vmap(lambda v: v + fx.lax.psum(c, "i") + fx.lax.all_gather(c, "i")[1],
                  axis_name="i")(x)
    np.testing.assert_allclose(got, x + N * c + c)
    jitted = fx.jit(fx.vmap(lambda v: fx.lax.psum(v, "i") - fx.lax.axis_index("i"),
                            axis_name="i"))
    np.testing.assert_allclose(jitted(x), x.sum(0) - np.arange(N)[:, None])
    inner_jit = fx.vmap(fx.jit(lambda v: fx.lax.pmean(v, "i")), axis_name="i")
    np.testing.assert_allclose(inner_jit(x), np.broadcast_to(x.mean(0), x.shape))


def test_collectives_under_checkpoint_inside_the_map():
    x = RNG.normal(size=(N, 3))
    f = fx.checkpoint(lambda v: fnp.sin(fx.lax.psum(v, "i")) * v)
    got = fx.vmap(f, axis_name="i")(x)
    np.testing.assert_allclose(got, np.sin(x.sum(0)) * x)
    g = fx.grad(lambda xs: fnp.sum(fx.vmap(f, axis_name="i")(xs)))(x)
    g_plain = fx.grad(lambda xs: fnp.sum(
        fx.vmap(lambda v: fnp.sin(fx.lax.psum(v, "i")) * v, axis_name="i")(xs)))(x)
    np.testing.assert_allclose(g, g_plain, rtol=1e-12)


# -- errors ------------------------------------------------------------------------------------

def test_unbound_axis_names_are_errors():
    x = np.ones(3)
    with pytest.raises(AxisNameError, match="unbound axis name 'i'"):
        fx.lax.psum(x, "i")
    with pytest.raises(AxisNameError, match=r"unbound axis name 'j'.*\['i'\]"):
        fx.vmap(lambda v: fx.lax.psum(v, "j"), axis_name="i")(x)
    with pytest.raises(AxisNameError, match="unbound axis name 'i'"):
        fx.vmap(lambda v: fx.lax.axis_index("i"))(x)
    with pytest.raises(AxisNameError, match="unbound"):
        fx.jit(lambda v: fx.lax.all_gather(v, "i"))(x)
    with pytest.raises(AxisNameError):
        fx.lax.axis_size("batch")
    with pytest.raises(AxisNameError, match="tuple"):
        fx.vmap(lambda v: v, axis_name=("a", "b"))(x)


def test_the_implementation_outside_a_map_raises():
    """A trace holding a collective, evaluated with no map around it, names the axis."""
    from functx.primitives import collectives as c

    with pytest.raises(AxisNameError, match="psum: unbound axis name 'i'"):
        fx.bind(c.psum_p, np.ones(3), axis_name=("i",))


def test_argument_errors():
    x = RNG.normal(size=(N, 3))
    with pytest.raises(fx.ArgumentError, match="partial permutation"):
        fx.vmap(lambda v: fx.lax.ppermute(v, "i", [(0, 1), (2, 1)]), axis_name="i")(x)
    with pytest.raises(fx.ArgumentError, match="partial permutation"):
        fx.vmap(lambda v: fx.lax.ppermute(v, "i", [(0, N)]), axis_name="i")(x)
    with pytest.raises(fx.ShapeError, match="must equal the axis size 4"):
        fx.vmap(lambda v: fx.lax.psum_scatter(v, "i"), axis_name="i")(x)
    with pytest.raises(fx.ShapeError, match="divisible"):
        fx.vmap(lambda v: fx.lax.all_to_all(v, "i", 0, 0, tiled=True), axis_name="i")(x)
    with pytest.raises(fx.ArgumentError, match="out of range"):
        fx.vmap(lambda v: fx.lax.all_gather(v, "i", axis=3), axis_name="i")(x)
    with pytest.raises(fx.ArgumentError, match="axis_index_groups"):
        fx.vmap(lambda v: fx.lax.psum(v, "i", axis_index_groups=[[0, 1]]), axis_name="i")(x)


def test_collectives_in_a_custom_vjp_inside_the_map():
    @fx.custom_vjp
    def f(v):
        return fx.lax.psum(v, "i") * v

    def fwd(v):
        s = fx.lax.psum(v, "i")
        return s * v, (v, s)

    def bwd(res, ct):  # d/dv_j sum_i ct_i s v_i = ct_j s + psum(ct v)
        v, s = res
        return (ct * s + fx.lax.psum(ct * v, "i"),)

    f.defvjp(fwd, bwd)
    x = RNG.normal(size=(N, 3))
    plain = lambda v: fx.lax.psum(v, "i") * v  # noqa: E731
    np.testing.assert_allclose(fx.vmap(f, axis_name="i")(x), fx.vmap(plain, axis_name="i")(x))
    u = RNG.normal(size=x.shape)
    got = fx.grad(lambda xs: fnp.sum(fx.vmap(f, axis_name="i")(xs) * u))(x)
    want = fx.grad(lambda xs: fnp.sum(fx.vmap(plain, axis_name="i")(xs) * u))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
