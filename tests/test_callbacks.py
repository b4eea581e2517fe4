"""Host callbacks: functx.pure_callback and functx.debug (print, callback) under eager
evaluation, jit, vmap, grad, jvp, checkpoint and custom_vjp, their errors, and that jit's
dead-code elimination keeps effects."""
from __future__ import annotations

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp


def sds(x):
    return fx.ShapeDtype(np.shape(x), np.asarray(x).dtype if not hasattr(x, "dtype")
                         else x.dtype)


class Recorder:
    """A host function that records the arguments it gets and returns ``sin`` of the first."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return np.sin(args[0])


# -- pure_callback ---------------------------------------------------------------------------

def test_pure_callback_eager_and_jit_run_the_host_function_every_call():
    rec = Recorder()
    x = np.linspace(-1, 1, 4)
    f = fx.jit(lambda x: fx.pure_callback(rec, sds(x), x) * 2)
    np.testing.assert_allclose(f(x), 2 * np.sin(x))
    np.testing.assert_allclose(f(x + 1), 2 * np.sin(x + 1))
    assert len(rec.calls) == 2
    (a,), _ = rec.calls[0]
    assert type(a) is np.ndarray and not a.flags.writeable
    np.testing.assert_array_equal(a, x)
    assert f.cache_size() == 1  # traced once


def test_pure_callback_pytrees_kwargs_and_static_leaves():
    def host(xs, scale, *, name, offset):
        assert name == "tag" and isinstance(scale, np.ndarray)
        return {"sum": np.asarray(xs[0] + xs[1]) * scale, "n": np.int32(len(xs) + offset)}

    shapes = {"sum": fx.ShapeDtype((3,), np.float64), "n": fx.ShapeDtype((), np.int32)}
    f = fx.jit(lambda a, b: fx.pure_callback(host, shapes, (a, b), 2.0, name="tag",
                                             offset=np.int32(1)))
    out = f(np.ones(3), np.arange(3.0))
    np.testing.assert_allclose(out["sum"], 2 * (1 + np.arange(3.0)))
    assert out["n"] == 3 and out["n"].dtype == np.int32


def test_pure_callback_result_is_read_only_and_the_hosts_array_is_left_alone():
    kept = np.arange(3.0)
    out = fx.pure_callback(lambda: kept, fx.ShapeDtype((3,), np.float64))
    assert not out.flags.writeable
    kept[0] = 10.0  # the host's array stays writeable and the result does not change
    assert out[0] == 0.0


def test_pure_callback_python_scalar_result_is_converted():
    out = fx.pure_callback(lambda x: float(np.sum(x)), fx.ShapeDtype((), np.float32),
                           np.ones(3, np.float32))
    assert out.dtype == np.float32 and out == 3.0


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_pure_callback_vmap_methods(method):
    seen = []

    def host(x, y):
        seen.append((x.shape, y.shape))
        return x * 10 + y

    x, y = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    f = lambda x, y: fx.pure_callback(host, sds(y), x, y, vmap_method=method)
    got = fx.vmap(f, in_axes=(0, None))(x, y)
    np.testing.assert_allclose(got, x * 10 + y)
    expected_shapes = {"sequential": [((3,), (3,))] * 2,
                       "expand_dims": [((2, 3), (1, 3))],
                       "broadcast_all": [((2, 3), (2, 3))]}[method]
    assert seen == expected_shapes
    # batch axis elsewhere, under jit, and nested
    seen.clear()
    got = fx.jit(fx.vmap(f, in_axes=(1, None), out_axes=1))(x.T, y)
    np.testing.assert_allclose(got, (x * 10 + y).T)
    xs = np.arange(24.0).reshape(2, 4, 3)
    got = fx.vmap(fx.vmap(f, in_axes=(0, None)), in_axes=(0, None))(xs, y)
    np.testing.assert_allclose(got, xs * 10 + y)


def test_pure_callback_vmap_needs_a_method():
    f = lambda x: fx.pure_callback(np.sin, sds(x), x)
    with pytest.raises(fx.VmapError, match="vmap_method"):
        fx.vmap(f)(np.ones((2, 3)))
    with pytest.raises(fx.ArgumentTypeError, match="vmap_method"):
        fx.pure_callback(np.sin, fx.ShapeDtype((), np.float64), 1.0, vmap_method="loop")


def test_pure_callback_grad_raises_unless_wrapped_in_custom_vjp():
    f = lambda x: fnp.sum(fx.pure_callback(np.sin, sds(x), x))
    x = np.linspace(0, 1, 3)
    with pytest.raises(fx.GradError, match="custom_vjp"):
        fx.grad(f)(x)
    with pytest.raises(fx.GradError, match="custom_vjp"):
        fx.jvp(f, (x,), (np.ones(3),))
    # no gradient needed through it: fine
    g = fx.grad(lambda x: fnp.sum(fx.pure_callback(np.sin, sds(x), fx.stop_gradient(x)) * x))(x)
    np.testing.assert_allclose(g, np.sin(x))

    @fx.custom_vjp
    def host_sin(x):
        return fx.pure_callback(np.sin, sds(x), x, vmap_method="expand_dims")

    def fwd(x):
        return host_sin(x), x

    def bwd(x, ct):
        return (ct * fx.pure_callback(np.cos, sds(x), x, vmap_method="expand_dims"),)

    host_sin.defvjp(fwd, bwd)
    loss = lambda x: fnp.sum(host_sin(x) ** 2)
    want = 2 * np.sin(x) * np.cos(x)
    np.testing.assert_allclose(fx.grad(loss)(x), want)
    np.testing.assert_allclose(fx.jit(fx.grad(loss))(x), want)
    xs = np.stack([x, x + 1])
    np.testing.assert_allclose(fx.vmap(fx.grad(loss))(xs),
                               2 * np.sin(xs) * np.cos(xs))


def test_pure_callback_result_mismatch_errors():
    x = np.ones(3)
    with pytest.raises(fx.ShapeError, match=r"shape \(2,\)"):
        fx.pure_callback(lambda x: x[:2], sds(x), x)
    with pytest.raises(fx.DTypeError, match="float32"):
        fx.pure_callback(lambda x: x.astype(np.float32), sds(x), x)
    with pytest.raises(fx.ShapeError, match="structured"):
        fx.pure_callback(lambda x: (x, x), sds(x), x)
    with pytest.raises(fx.ShapeError, match="structured|returned"):
        fx.jit(lambda x: fx.pure_callback(lambda x: [x], [sds(x), sds(x)], x))(x)
    with pytest.raises(fx.ArgumentTypeError, match="callable"):
        fx.pure_callback(3, sds(x), x)
    with pytest.raises(fx.ArgumentTypeError, match="shape"):
        fx.pure_callback(np.sin, "float64", x)


def test_unused_pure_callback_is_pruned_by_jit_but_debug_callback_is_not():
    rec, seen = Recorder(), []

    def f(x):
        fx.pure_callback(rec, sds(x), x)  # pure and unused: dead code, as in JAX
        fx.debug.callback(seen.append, x)  # an effect: kept
        return x + 1

    fx.jit(f)(np.ones(2))
    assert rec.calls == [] and len(seen) == 1


# -- debug.print and debug.callback ----------------------------------------------------------

def test_debug_print_under_jit_prints_actual_values_every_call(capsys):
    @fx.jit
    def f(x):
        fx.debug.print("x = {x}, total = {}", fnp.sum(x), x=x)
        return x * 2

    f(np.arange(3.0))
    f(np.arange(3.0) + 1)
    assert capsys.readouterr().out == "x = [0. 1. 2.], total = 3.0\nx = [1. 2. 3.], total = 6.0\n"
    assert "Tracer" not in str(fx.make_trace(f)(np.ones(2)))


def test_debug_print_eager_and_format_specs(capsys):
    fx.debug.print("{:.2f} and {name}", np.float64(1.0 / 3), name="n")
    assert capsys.readouterr().out == "0.33 and n\n"


def test_debug_print_under_vmap_prints_each_batch_member(capsys):
    fx.vmap(lambda x, y: fx.debug.print("{} {}", x, y), in_axes=(1, None))(
        np.arange(4.0).reshape(2, 2), 7.0)
    assert capsys.readouterr().out == "[0. 2.] 7.0\n[1. 3.] 7.0\n"
    fx.jit(fx.vmap(fx.vmap(lambda x: fx.debug.print("{}", x))))(np.arange(4.0).reshape(2, 2))
    assert capsys.readouterr().out == "0.0\n1.0\n2.0\n3.0\n"


def test_debug_print_under_grad_prints_once_in_the_forward_pass(capsys):
    def f(x):
        fx.debug.print("x = {}", x)
        y = fnp.sin(x)
        fx.debug.print("y = {y:.3f}", y=y)
        return y * y

    g = fx.grad(f)(0.5)
    np.testing.assert_allclose(g, 2 * np.sin(0.5) * np.cos(0.5))
    assert capsys.readouterr().out == f"x = 0.5\ny = {np.sin(0.5):.3f}\n"
    fx.jit(fx.grad(f))(0.5)
    assert capsys.readouterr().out == f"x = 0.5\ny = {np.sin(0.5):.3f}\n"
    fx.jvp(f, (0.5,), (1.0,))
    assert capsys.readouterr().out == f"x = 0.5\ny = {np.sin(0.5):.3f}\n"
    fx.vmap(fx.grad(f))(np.array([0.5, 0.5]))
    assert capsys.readouterr().out == f"x = 0.5\nx = 0.5\ny = {np.sin(0.5):.3f}\n" \
                                      f"y = {np.sin(0.5):.3f}\n"
    fx.grad(fx.checkpoint(f))(0.5)  # the recomputation does not print again
    assert capsys.readouterr().out == f"x = 0.5\ny = {np.sin(0.5):.3f}\n"
    fx.grad(fx.grad(f))(0.5)
    assert capsys.readouterr().out == f"x = 0.5\ny = {np.sin(0.5):.3f}\n"


def test_debug_print_in_python_loops_under_jit(capsys):
    @fx.jit
    def f(x):
        for k in range(3):
            x = x * 2
            fx.debug.print("step {k}: {x}", k=k, x=x)
        return x

    f(np.float64(1.0))
    assert capsys.readouterr().out == "step 0: 2.0\nstep 1: 4.0\nstep 2: 8.0\n"


def test_debug_callback_gets_numpy_arrays_and_pytrees():
    seen = []
    fx.jit(lambda x: fx.debug.callback(lambda d, tag: seen.append((d, tag)),
                                       {"a": x, "b": x + 1}, tag="t"))(np.ones(2))
    (d, tag), = seen
    assert tag == "t" and set(d) == {"a", "b"}
    assert type(d["b"]) is np.ndarray and not d["b"].flags.writeable
    np.testing.assert_array_equal(d["b"], [2.0, 2.0])


def test_debug_callback_in_the_trace_listing_and_errors():
    trace = fx.make_trace(lambda x: (fx.debug.print("v {}", x), x + 1)[1])(np.ones(2))
    line = next(l for l in str(trace).splitlines() if "debug_callback" in l)
    assert line.strip().startswith("debug_callback[")
    with pytest.raises(fx.ArgumentTypeError, match="format string"):
        fx.debug.print(np.ones(2))
    with pytest.raises(fx.ArgumentTypeError, match="callable"):
        fx.debug.callback("print", np.ones(2))


def test_effects_survive_dead_code_elimination_generically():
    from functx.transforms.interpret import prune

    trace = fx.make_trace(lambda x: (fx.debug.print("{}", x * 2), x)[1])(np.ones(2))
    kept = [e.prim.name for e in prune(trace).eqns]
    assert "debug_callback" in kept and "mul" in kept
    assert fx.registry["debug_callback"].has_effects
    assert not fx.registry["pure_callback"].has_effects


def test_a_higher_order_primitive_declares_effects_through_its_sub_trace():
    """``has_effects`` may be a function of the params: an equation holding a sub-trace
    with a debug print is kept by dead-code elimination, one without is dropped."""
    from functx.ir import Eqn, Trace, Var
    from functx.registry import Primitive, Registry
    from functx.transforms.interpret import has_effects, prune, trace_has_effects

    call_p = Primitive("probe_call", registry=Registry())
    call_p.has_effects = lambda params: trace_has_effects(params["trace"])
    noisy = fx.make_trace(lambda x: (fx.debug.print("{}", x), x)[1])(np.ones(2))
    quiet = fx.make_trace(lambda x: x * 2)(np.ones(2))
    x = Var(fx.AbstractArray((2,), np.dtype(np.float64)))
    eqns = tuple(Eqn(call_p, (x,), {"trace": t}, (Var(x.aval),), None) for t in (noisy, quiet))
    trace = Trace((x,), (), (), eqns, (x,))
    assert [has_effects(e) for e in eqns] == [True, False]
    assert [e.params["trace"] for e in prune(trace).eqns] == [noisy]


def test_callbacks_of_constants_only_run_at_every_jitted_call(capsys):
    rec = Recorder()

    @fx.jit
    def f(x):
        fx.debug.print("called")
        c = fx.pure_callback(rec, fx.ShapeDtype((), np.float64), 0.5)
        return x + c

    for _ in range(2):
        np.testing.assert_allclose(f(np.ones(2)), 1 + np.sin(0.5))
    assert capsys.readouterr().out == "called\ncalled\n"
    assert len(rec.calls) == 2


def test_jax_compatible_keywords_are_accepted(capsys):
    x = np.arange(3.0)
    out = fx.vmap(lambda x: fx.pure_callback(np.sin, sds(x), x, sharding=None,
                                             vmap_method="sequential_unrolled"))(x)
    np.testing.assert_allclose(out, np.sin(x))
    fx.debug.print("{}", 1, ordered=True, partitioned=False)
    assert capsys.readouterr().out == "1\n"
