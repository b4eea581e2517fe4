"""docs/singular_points.md is executable: each row's expression gives the documented values.

The table's **Expression** column is Python over ``xnp`` (a NumPy-like module) and ``grad``
(``grad(f, argnums=0)``); the **functx** column is asserted with ``xnp = functx.numpy``, and
the **JAX** and **PyTorch** columns with those frameworks where they are installed (a ``—``
cell is skipped), so neither the code nor the page can drift.
"""
from __future__ import annotations

import math
import pathlib
import re
import types
import warnings
from typing import Any, Callable

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "singular_points.md"
COLUMNS = ("point", "expression", "functx", "jax", "pytorch", "why")


def _rows() -> list[dict[str, str]]:
    """The table's rows, as {column: cell text without backticks}."""
    rows = []
    for line in DOC.read_text().splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        # (a "|" inside a cell would split it: the page must not use one)
        assert len(cells) == len(COLUMNS), f"{DOC}: a table row has {len(cells)} cells: {line}"
        if cells[0] == "Point" or set(cells[0]) <= {"-"}:
            continue
        row = {k: re.sub(r"^`|`$", "", c) for k, c in zip(COLUMNS, cells)}
        row["point"] = cells[0].replace("`", "")
        rows.append(row)
    return rows


ROWS = _rows()


def _value(cell: str) -> tuple | None:
    """A documented value: a number or a pair (``nan``, ``inf`` allowed); None for ``—``."""
    if cell in ("—", "-"):
        return None
    return tuple(np.atleast_1d(eval(f"({cell},)", {"nan": math.nan, "inf": math.inf})))


def _evaluate(expression: str, xnp: Any, grad: Callable) -> tuple:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        got = eval(expression, {"xnp": xnp, "grad": grad, "nan": math.nan})
    leaves = got if isinstance(got, (tuple, list)) else (got,)
    return tuple(float(np.asarray(v)) for v in leaves)


def _assert_documented(got: tuple, want: tuple, row: dict, column: str) -> None:
    np.testing.assert_allclose(
        np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-6, atol=0,
        equal_nan=True, err_msg=f"{row['point']}: {row['expression']} documented as "
                                f"{row[column]} for {column}, gives {got}")


def test_the_table_has_the_rows_the_issue_asks_for() -> None:
    points = " ".join(r["point"] for r in ROWS)
    for needed in ("abs", "fmax", "fmin", "maximum", "minimum", "hypot", "cbrt", "0 ** 0",
                   "x ** 0", "sqrt", "where", "floor_divide", "remainder", "fmod"):
        assert needed in points, f"no row for {needed} in {DOC}"


# -- functx --------------------------------------------------------------------------------------

def _fx_grad(f: Callable, argnums: Any = 0) -> Callable:
    g = fx.grad(f, argnums=argnums)
    return lambda *args: g(*[np.asarray(a, np.float64) for a in args])


@pytest.mark.parametrize("row", ROWS, ids=[r["point"] for r in ROWS])
def test_functx_gives_the_documented_value(row: dict) -> None:
    got = _evaluate(row["expression"], fnp, _fx_grad)
    _assert_documented(got, _value(row["functx"]), row, "functx")


def _one_argument_at_a_time(transform: Callable) -> Callable:
    """``transform(f, argnums=i)`` for each ``i`` in turn (the others held constant: forward
    mode with a zero tangent for ``x`` would form ``0 * inf`` at ``0 ** -1``, in JAX too)."""
    def make(f: Callable, argnums: Any) -> Callable:
        if not isinstance(argnums, tuple):
            return transform(f, argnums=argnums)
        return lambda *args: tuple(transform(f, argnums=n)(*args) for n in argnums)
    return make


def test_functx_values_hold_under_jit_and_in_forward_mode() -> None:
    # The values come from the primitives' rules: jit(grad) and forward mode agree.
    def wrap(transform: Callable) -> Callable:
        def make(f: Callable, argnums: Any = 0) -> Callable:
            g = transform(f, argnums)
            return lambda *args: g(*[np.asarray(a, np.float64) for a in args])
        return make

    for row in ROWS:
        for name, transform in [
                ("jit(grad)", lambda f, n: fx.jit(fx.grad(f, argnums=n))),
                ("jacfwd", _one_argument_at_a_time(fx.jacfwd))]:
            want = _value(row["functx"])
            if name == "jacfwd" and "Reverse mode only: forward mode" in row["why"]:
                want = (0.0,)  # as the row says
            got = _evaluate(row["expression"], fnp, wrap(transform))
            _assert_documented(got, want, dict(row, point=f"{row['point']} ({name})"),
                               "functx")


# -- JAX and PyTorch (where installed) ------------------------------------------------------------

@pytest.mark.parametrize("row", ROWS, ids=[r["point"] for r in ROWS])
def test_jax_gives_the_documented_value(row: dict) -> None:
    jax = pytest.importorskip("jax")
    want = _value(row["jax"])
    if want is None:
        pytest.skip("no JAX value")
    jgrad = lambda f, argnums=0: jax.grad(f, argnums=argnums)  # noqa: E731
    got = _evaluate(row["expression"], jax.numpy, jgrad)
    _assert_documented(got, want, row, "jax")


def _torch_np(torch: Any) -> Any:
    return types.SimpleNamespace(
        abs=torch.abs, maximum=torch.maximum, minimum=torch.minimum, fmax=torch.fmax,
        fmin=torch.fmin, hypot=torch.hypot, sqrt=torch.sqrt, power=torch.pow,
        where=torch.where, remainder=torch.remainder, fmod=torch.fmod, clip=torch.clip,
        arctan2=torch.atan2)


@pytest.mark.parametrize("row", ROWS, ids=[r["point"] for r in ROWS])
def test_pytorch_gives_the_documented_value(row: dict) -> None:
    torch = pytest.importorskip("torch")
    want = _value(row["pytorch"])
    if want is None:
        pytest.skip("no PyTorch value")

    def tgrad(f: Callable, argnums: Any = 0) -> Callable:
        nums = argnums if isinstance(argnums, tuple) else (argnums,)

        def g(*args: float) -> tuple:
            ts = [torch.tensor(a, dtype=torch.float64, requires_grad=i in nums)
                  for i, a in enumerate(args)]
            return torch.autograd.grad(f(*ts), [ts[i] for i in nums])
        return g

    got = _evaluate(row["expression"], _torch_np(torch), tgrad)
    _assert_documented(got, want, row, "pytorch")
