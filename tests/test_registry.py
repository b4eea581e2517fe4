"""The primitive registry: the coverage table, user-defined primitives, rule errors.

Test primitives are registered in their own ``Registry()`` instances so the global registry
(whose coverage the rule tests check) is not polluted.
"""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import functx
from functx.errors import FunctxError, MissingRuleError
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.registry import REGISTRY, RULE_KINDS, Registry

REPO_ROOT = Path(__file__).resolve().parents[1]
_counter = itertools.count()


def unique(name: str) -> str:
    """A fresh primitive name: test primitives never collide, whatever registry they land in."""
    return f"{name}_{next(_counter)}"


def total(x):
    """The sum of all elements of ``x`` (a scalar), with the primitive wrapper."""
    return _red.reduce_sum(x, tuple(range(np.ndim(x))))


def make_cube(registry: Registry) -> functx.Primitive:
    """A user primitive ``x ** 3`` defined with the public API; its VJP uses functx ops."""
    cube_p = functx.Primitive(unique("cube"), registry=registry)
    cube_p.def_abstract_eval(lambda x: x)
    cube_p.def_impl(lambda xp, x: xp.multiply(xp.multiply(x, x), x))

    @cube_p.def_vjp(save_inputs=(0,))
    def _cube_vjp(ct, ins, out):
        x = ins[0]
        three = np.asarray(3.0, dtype=x.dtype)
        return (_ew.mul(ct, _ew.mul(three, _ew.mul(x, x))),)

    return cube_p


def make_no_vjp(registry: Registry) -> functx.Primitive:
    """A user primitive (``2 x``) with shape rule and implementation but no VJP rule."""
    p = functx.Primitive(unique("twice_no_vjp"), registry=registry)
    p.def_abstract_eval(lambda x: x)
    p.def_impl(lambda xp, x: xp.add(x, x))
    return p


# -- the coverage table ------------------------------------------------------------------------

def test_coverage_table_prints_every_primitive() -> None:
    """``python -m functx.registry`` exits 0 and has a row for every registered primitive."""
    proc = subprocess.run([sys.executable, "-m", "functx.registry"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0].split()
    assert header == ["primitive", *RULE_KINDS]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:] if line.strip()
            and len(line.split()) == 1 + len(RULE_KINDS)}
    names = [p.name for p in REGISTRY]
    assert names, "no primitive is registered"
    assert sorted(n for n in names if n not in rows) == []
    for name in names:
        cells = dict(zip(RULE_KINDS, rows[name]))
        assert cells["abstract_eval"] == "yes", name
        assert cells["impl[cpu]"] in ("yes", "generic"), name
        assert cells["vjp"] in ("yes", "zero"), name
    assert f"{len(names)} primitives" in proc.stdout


def test_primitive_goes_into_the_registry_it_is_given() -> None:
    """Primitive(..., registry=Registry()) registers there, even while that registry is empty."""
    reg = Registry()
    p = functx.Primitive(unique("local_only"), registry=reg)
    assert list(reg) == [p]
    assert p.name not in REGISTRY.primitives


def test_coverage_of_a_local_registry() -> None:
    """coverage()/missing() report each rule kind, "generic" and "zero" included."""
    reg = Registry()
    full = make_cube(reg)
    partial = functx.Primitive(unique("only_shape"), registry=reg)
    partial.def_abstract_eval(lambda x: x)
    zero = functx.Primitive(unique("zero_grad"), registry=reg)
    zero.def_abstract_eval(lambda x: x)
    zero.def_impl(lambda xp, x: x, backend="cpu")
    zero.def_zero_vjp()

    cov = reg.coverage()
    assert set(cov) == {full.name, partial.name, zero.name}
    assert cov[full.name] == {"abstract_eval": "yes", "impl[cpu]": "generic",
                              "impl[cuda]": "generic", "vjp": "yes", "jvp": "", "batch": ""}
    assert cov[zero.name]["impl[cpu]"] == "yes" and cov[zero.name]["impl[cuda]"] == ""
    assert cov[zero.name]["vjp"] == "zero" and zero.has_zero_vjp and not full.has_zero_vjp
    assert reg.missing() == [f"{partial.name}: impl[cpu]", f"{partial.name}: vjp"]
    table = reg.coverage_table()
    assert [line.split()[0] for line in table.splitlines()[2:]] == sorted(cov)
    assert len(reg) == 3 and reg[full.name] is full and set(reg) == {full, partial, zero}


# -- a user-defined primitive --------------------------------------------------------------------

def test_user_primitive_runs_eagerly() -> None:
    """bind on NumPy arrays runs the impl and returns a read-only array."""
    cube = make_cube(Registry()).bind
    x = np.array([1.0, 2.0, -3.0])
    out = cube(x)
    np.testing.assert_array_equal(out, x ** 3)
    assert type(out) is np.ndarray and not out.flags.writeable
    assert x.flags.writeable  # the input is left alone


def test_user_primitive_returning_its_input_leaves_the_input_alone() -> None:
    """An identity impl returns the very array it got: the caller's array keeps its
    writeable flag and the result is still read-only."""
    ident_p = functx.Primitive(unique("identity"), registry=Registry())
    ident_p.def_abstract_eval(lambda x: x)
    ident_p.def_impl(lambda xp, x: x)
    ident_p.def_vjp(lambda ct, ins, out: (ct,))
    for x in (np.array(2.0), np.arange(6.0).reshape(2, 3)):
        out = ident_p.bind(x)
        assert x.flags.writeable, "the impl's output alias made the user's array read-only"
        assert type(out) is np.ndarray and not out.flags.writeable
        np.testing.assert_array_equal(out, x)


def test_user_primitive_under_make_trace() -> None:
    """The primitive is recorded by name, the trace typechecks and re-evaluates."""
    cube_p = make_cube(Registry())
    cube = cube_p.bind
    trace = functx.make_trace(lambda x: _ew.sin(cube(x)))(np.ones((2, 3), np.float32))
    functx.typecheck(trace)
    assert [e.prim for e in trace.eqns] == [cube_p, _ew.sin_p]
    assert f"b:f32[2,3] = {cube_p.name} a" in str(trace)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(functx.eval_trace(trace, x)[0], np.sin(x ** 3), rtol=1e-6)


def test_user_primitive_under_grad() -> None:
    """grad uses the user's VJP rule: d/dx sum(x^3) = 3 x^2."""
    cube = make_cube(Registry()).bind
    x = np.array([0.5, -1.5, 2.0])
    np.testing.assert_allclose(functx.grad(lambda x: total(cube(x)))(x), 3 * x ** 2)


def test_user_primitive_grad_of_grad() -> None:
    """The VJP rule is written with functx ops, so it is differentiable: d2/dx2 x^3 = 6x."""
    cube = make_cube(Registry()).bind
    d1 = functx.grad(lambda x: cube(x))
    d2 = functx.grad(d1)
    d3 = functx.grad(d2)
    for x in (-1.5, 0.25, 2.0):
        np.testing.assert_allclose(d1(x), 3 * x ** 2)
        np.testing.assert_allclose(d2(x), 6 * x)
        np.testing.assert_allclose(d3(x), 6.0)


def test_user_primitive_from_the_registry_docstring() -> None:
    """The module docstring's example (square) works as written, eagerly and under grad."""
    square_p = functx.Primitive(unique("square"), registry=Registry())
    square_p.def_abstract_eval(lambda x: x)
    square_p.def_impl(lambda xp, x: x * x)
    square_p.def_vjp(lambda ct, ins, out: (2 * ins[0] * ct,), save_inputs=(0,))
    square = square_p.bind
    np.testing.assert_array_equal(square(np.array([3.0])), [9.0])
    np.testing.assert_allclose(functx.grad(lambda x: total(square(x)))(np.array([3.0, -1.0])),
                               [6.0, -2.0])


# -- registration errors ---------------------------------------------------------------------------

def _define_elsewhere(source: str, module: str, filename: str, **names) -> dict:
    """Run ``source`` as if it were module ``module`` in file ``filename``."""
    namespace = {"__name__": module, "functx": functx, **names}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def test_duplicate_name_from_another_place_is_rejected() -> None:
    """A primitive of a registered name defined elsewhere raises, naming both places; the
    first one stays."""
    reg = Registry()
    first = make_cube(reg)
    with pytest.raises(FunctxError, match=rf"'{first.name}' is already registered.*another name"
                       ) as e:
        _define_elsewhere("p = functx.Primitive(name, registry=reg)", "other_module",
                          "other_module.py", name=first.name, reg=reg)
    msg = str(e.value)
    assert f"defined at {__file__}:" in msg and f"(module {__name__})" in msg
    assert "other_module.py:1 (module other_module)" in msg
    assert reg[first.name] is first and len(reg) == 1


def test_redefinition_at_the_same_line_replaces_with_a_warning() -> None:
    """Re-running the same Primitive(...) call (a loop, a re-imported definition) replaces the
    registered primitive and warns at the caller's line."""
    reg = Registry()
    name = unique("rerun")

    def define() -> functx.Primitive:
        return functx.Primitive(name, registry=reg)  # the definition's line

    first = define()
    line = define.__code__.co_firstlineno + 1
    with pytest.warns(UserWarning, match=rf"Primitive '{name}' is defined again .first at "
                                         rf".*:{line} .*replaces the old one") as w:
        second = define()
    assert second is not first and reg[name] is second and len(reg) == 1
    assert [(r.filename, r.lineno) for r in w] == [(__file__, line)]


def test_notebook_cell_rerun_replaces_with_a_warning() -> None:
    """Notebook cells run in __main__ with a new file name each time: same module, so a
    re-run cell (even edited, at another line) replaces the primitive."""
    reg = Registry()
    name = unique("cell")
    cell_1 = "p = functx.Primitive(name, registry=reg)\np.def_abstract_eval(lambda x: x)"
    first = _define_elsewhere(cell_1, "__main__", "<ipython-input-1>", name=name, reg=reg)["p"]
    with pytest.warns(UserWarning, match=rf"'{name}' is defined again .first at "
                                         r"<ipython-input-1>:1 \(module __main__\)"):
        second = _define_elsewhere("\n\n" + cell_1, "__main__", "<ipython-input-2>",
                                   name=name, reg=reg)["p"]
    assert reg[name] is second and second is not first and len(reg) == 1
    # A third definition from another module still clashes.
    with pytest.raises(FunctxError, match=r"<ipython-input-2>:3 \(module __main__\).*"
                                          r"another name"):
        _define_elsewhere(cell_1, "lib", "lib.py", name=name, reg=reg)
    assert reg[name] is second


def test_duplicate_of_a_builtin_is_rejected() -> None:
    """Built-in names are taken in the global registry, which is left unchanged."""
    before = dict(REGISTRY.primitives)
    with pytest.raises(FunctxError, match="'sin' is already registered"):
        functx.Primitive("sin")
    assert REGISTRY.primitives == before


# -- missing rules ---------------------------------------------------------------------------------

def test_missing_vjp_is_an_error_only_when_a_gradient_reaches_it() -> None:
    """MissingRuleError names the primitive and is raised by the backward pass."""
    twice_p = make_no_vjp(Registry())
    twice = twice_p.bind
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(twice(x), [2.0, 4.0])          # eager: fine
    functx.make_trace(lambda x: twice(x))(x)                    # tracing: fine
    out, f_vjp = functx.vjp(lambda x: twice(x), x)              # forward pass: fine
    np.testing.assert_array_equal(out, [2.0, 4.0])
    with pytest.raises(MissingRuleError, match=twice_p.name) as e:
        f_vjp(np.ones(2))
    assert "def_vjp" in str(e.value) and "stop_gradient" in str(e.value)
    with pytest.raises(MissingRuleError, match=twice_p.name):
        functx.grad(lambda x: total(twice(x)))(x)


def test_missing_vjp_error_names_the_user_source_line() -> None:
    """The error says where in the user's code the primitive was applied."""
    twice = make_no_vjp(Registry()).bind
    with pytest.raises(MissingRuleError) as e:
        functx.grad(lambda x: total(twice(x)))(np.ones(2))
    assert Path(__file__).name in str(e.value)


def test_stop_gradient_on_the_output_avoids_the_missing_vjp() -> None:
    """No cotangent reaches the primitive: no error, and the other path's gradient is right."""
    twice = make_no_vjp(Registry()).bind
    x = np.array([1.0, 2.0])
    g = functx.grad(lambda x: _ew.add(total(functx.stop_gradient(twice(x))), total(_ew.sin(x))))
    np.testing.assert_allclose(g(x), np.cos(x))


def test_stop_gradient_on_the_inputs_avoids_the_missing_vjp() -> None:
    """The MissingRuleError message advises wrapping the inputs in stop_gradient: that works.

    Nothing differentiable flows into the primitive, so (as in JAX) its derivative is never
    needed and only the other path contributes to the gradient.
    """
    twice = make_no_vjp(Registry()).bind
    x = np.array([1.0, 2.0])
    g = functx.grad(lambda x: _ew.add(total(twice(functx.stop_gradient(x))), total(_ew.sin(x))))
    np.testing.assert_allclose(g(x), np.cos(x))


def test_primitive_on_constants_needs_no_vjp() -> None:
    """Applied only to closed-over constants inside grad, the primitive is not differentiated."""
    twice = make_no_vjp(Registry()).bind
    c = np.array([3.0, 4.0])
    g = functx.grad(lambda x: total(_ew.mul(x, twice(c))))
    np.testing.assert_allclose(g(np.ones(2)), 2 * c)


def test_missing_impl_and_shape_rule_errors() -> None:
    """A primitive without an impl (eager) or without a shape rule (tracing) says so."""
    reg = Registry()
    no_impl = functx.Primitive(unique("no_impl"), registry=reg)
    no_impl.def_abstract_eval(lambda x: x)
    with pytest.raises(MissingRuleError, match=r"no_impl.*no implementation.*cpu"):
        no_impl.bind(np.ones(2))
    no_shape = functx.Primitive(unique("no_shape_rule"), registry=reg)
    no_shape.def_impl(lambda xp, x: x)
    with pytest.raises(MissingRuleError, match=r"no_shape_rule.*abstract-eval"):
        functx.make_trace(lambda x: no_shape.bind(x))(np.ones(2))


# -- hooks (functx.registry.hooks) -----------------------------------------------------------------

def test_registered_hooks_are_the_upper_layers_operations() -> None:
    """import functx registers functx.numpy and the transforms as the hooks."""
    import functx.numpy as fnp
    from functx.registry.hooks import HOOKS, HOOK_PROVIDERS

    assert set(HOOK_PROVIDERS) == {"numpy", "vjp", "jvp", "grad"}
    assert HOOKS.numpy is fnp
    assert (HOOKS.vjp, HOOKS.jvp, HOOKS.grad) == (functx.vjp, functx.jvp, functx.grad)
    assert all(HOOKS.is_registered(name) for name in HOOK_PROVIDERS)


def test_a_missing_hook_raises_a_functx_error_naming_it() -> None:
    """A hook nobody registered fails on use with MissingHookError, which names the hook and
    the package that registers it."""
    from functx.registry.hooks import Hooks, MissingHookError

    fresh = Hooks()
    assert not fresh.is_registered("numpy")
    with pytest.raises(MissingHookError, match=r"'numpy' hook.*functx\.numpy.*import functx"):
        fresh.numpy.add(1, 2)
    with pytest.raises(MissingHookError, match=r"'vjp' hook.*functx\.transforms"):
        fresh.vjp(lambda x: x, 1.0)
    assert issubclass(MissingHookError, FunctxError)


def test_hooks_are_registered_not_assigned() -> None:
    """Assigning a hook directly, or registering an unknown one, raises FunctxError."""
    from functx.registry.hooks import HOOKS, register_hook

    with pytest.raises(FunctxError, match="register_hook"):
        HOOKS.numpy = None
    with pytest.raises(FunctxError, match="no hook called 'nmupy'"):
        register_hook("nmupy", None)
    assert HOOKS.numpy is not None


# -- composite rules (Primitive.def_composite_rules) -----------------------------------------------

def make_composite_cube(registry: Registry, **kwargs) -> functx.Primitive:
    """``x ** 3 * w`` as a primitive whose derivatives come from its composite."""
    p = functx.Primitive(unique("composite_cube"), registry=registry)
    p.def_abstract_eval(lambda x, w, *, k: x)
    p.def_impl(lambda xp, x, w, *, k: x * x * x * w * k)

    def composite(x, w, *, k):
        return _ew.mul(_ew.mul(_ew.mul(_ew.mul(x, x), x), w), k)

    assert p.def_composite_rules(composite, **kwargs) is composite
    return p


def test_composite_rules_give_every_order_of_derivative() -> None:
    """VJP and JVP of the composite: d/dx = 3 k w x^2, d2/dx2 = 6 k w x, d/dw = k x^3, and
    forward mode agrees with reverse mode."""
    p = make_composite_cube(Registry())
    w = np.array(1.5)
    f = lambda x: p.bind(x, w, k=2.0)  # noqa: E731
    for x in (-1.5, 0.5, 2.0):
        np.testing.assert_allclose(functx.grad(f)(x), 3 * 2.0 * 1.5 * x ** 2)
        np.testing.assert_allclose(functx.grad(functx.grad(f))(x), 6 * 2.0 * 1.5 * x)
        _, t = functx.jvp(f, (np.array(x),), (np.array(0.5),))
        np.testing.assert_allclose(t, 0.5 * 3 * 2.0 * 1.5 * x ** 2)
        np.testing.assert_allclose(functx.grad(lambda w_: p.bind(np.array(x), w_, k=2.0))(1.5),
                                   2.0 * x ** 3)
    assert p.save_inputs is True and p.jvp is not None


def test_composite_rules_respect_argnums_and_zero_if() -> None:
    """Inputs outside argnums get no cotangent and no tangent; where zero_if holds every
    derivative is zero and the composite is not run."""
    p = make_composite_cube(Registry(), argnums=(0,))
    x, w = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    gx, gw = functx.grad(lambda x, w: total(p.bind(x, w, k=1.0)), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, 3 * w * x ** 2)
    np.testing.assert_array_equal(gw, 0.0)
    _, t = functx.jvp(lambda w: p.bind(x, w, k=1.0), (w,), (np.ones(2),))
    np.testing.assert_array_equal(t, 0.0)

    q = make_composite_cube(Registry(), zero_if=lambda x, w, *, k: k == 0.0)
    np.testing.assert_array_equal(functx.grad(lambda x: total(q.bind(x, w, k=0.0)))(x), 0.0)
    np.testing.assert_allclose(functx.grad(lambda x: total(q.bind(x, w, k=1.0)))(x),
                               3 * w * x ** 2)


def test_composite_vjp_and_jvp_helpers() -> None:
    """composite_vjp/composite_jvp: one cotangent per input (None outside argnums), and
    None for all-zero tangents."""
    from functx.registry import composite_jvp, composite_vjp

    def f(x, y, *, c):
        return _ew.mul(_ew.mul(x, y), c)

    x, y = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    ct = np.array([1.0, 1.0])
    dx, dy = composite_vjp(f, (x, y), ct, c=2.0)
    np.testing.assert_allclose(dx, 2 * y)
    np.testing.assert_allclose(dy, 2 * x)
    assert composite_vjp(f, (x, y), ct, (1,), c=2.0)[0] is None
    assert composite_jvp(f, (x, y), (None, None), c=2.0) is None
    np.testing.assert_allclose(composite_jvp(f, (x, y), (None, np.ones(2)), c=2.0), 2 * x)


def test_cpu_arrays_impl_runs_for_numpy_operands_only_and_yields_to_a_new_impl() -> None:
    """The CPU fast path (def_cpu_arrays_impl) is used when every operand is a NumPy array;
    Python scalars take the CPU rule; a CPU implementation registered later replaces both."""
    from functx.registry import Primitive, Registry
    from functx.tracing import apply_eager

    calls = []
    p = Primitive("arrays_impl_probe", registry=Registry())
    p.def_abstract_eval(lambda x, y: x)
    p.def_impl(lambda xp, x, y: (calls.append("rule"), xp.add(x, y))[1], backend="cpu")
    p.def_cpu_arrays_impl(lambda x, y: (calls.append("arrays"), np.add(x, y))[1])
    x = np.arange(3.0)
    np.testing.assert_array_equal(apply_eager(p, (x, x), {}), 2 * x)
    np.testing.assert_array_equal(apply_eager(p, (x, 1.0), {}), x + 1)
    assert calls == ["arrays", "rule"]
    p.def_impl(lambda xp, x, y: (calls.append("new"), xp.subtract(x, y))[1], backend="cpu")
    assert p.cpu_arrays_impl is None
    np.testing.assert_array_equal(apply_eager(p, (x, x), {}), 0 * x)
    assert calls[-1] == "new"
    # the binary ufunc primitives have it, and it gives the rule's results
    assert _ew.mul_p.cpu_arrays_impl is np.multiply


def test_promote_pair_agrees_with_promote_args_dtype() -> None:
    import ml_dtypes

    from functx.numpy._promotion import promote_args_dtype, promote_pair

    arrays = [np.ones(2, d) for d in (np.float16, np.float32, np.float64, np.complex64,
                                      np.int32, np.bool_, ml_dtypes.bfloat16)]
    scalars = [0.5, 2, 0.0, -0.0, float("nan"), True, 3 + 1j]
    for a in arrays:
        for s in scalars:
            for pair in ((a, s), (s, a)):
                try:
                    (w0, w1), wdt = promote_args_dtype("t", *pair)
                except Exception as e:  # noqa: BLE001 (the same error either way)
                    with pytest.raises(type(e)):
                        promote_pair("t", *pair)
                    continue
                g0, g1, gdt = promote_pair("t", *pair)
                assert gdt == wdt
                for g, w in ((g0, w0), (g1, w1)):
                    assert type(g) is type(w)
                    g, w = np.asarray(g), np.asarray(w)
                    assert g.dtype == w.dtype
                    if g.dtype.kind != "c":  # (NaNs compare equal in float64, not bfloat16)
                        g, w = g.astype(np.float64), w.astype(np.float64)
                    np.testing.assert_array_equal(g, w)
