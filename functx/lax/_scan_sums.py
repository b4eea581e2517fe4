"""Sums over a scan's steps, taken after the loop: ``sum_t x_t^T g_t`` as one product.

The VJP of a scan accumulates the cotangent of each constant in a carry: for an RNN's
weight ``W`` the backward step adds ``h_{t-1}^T g_t`` (a small matrix product) into it, for
its bias ``sum(g_t, 0)``. :func:`sink_sums` moves such sums out of the loop: the step
emits the per-step operand ``g_t`` as one more stacked output instead (``h_{t-1}`` is
stacked already), and after the loop one product contracts the steps' axis too
(``H^T G`` over ``steps x batch``). The loop then runs fewer, and the product runs at the
GEMM rate of a big matrix instead of one launch per step.

Which carries: a carry ``c`` whose step output is ``add(c, term)`` (a primitive with
``sums_operands``), read nowhere else in the step, where ``term`` is the result of a
primitive with a step-sum rule (``prim.def_step_sum``: ``dot_general``, ``reduce_sum``;
through primitives linear in their one operand, ``transpose``, ``reshape``, ``neg``) whose
operands are the step's constants, slices of ``xs`` (stacked already) or values the step
computes (emitted). The intermediate results must be read only on that path, so the
whole sum leaves the loop. The emitted stacks may not hold more than the stacked inputs
the loop reads already (so the sinking at most doubles a backward pass's residual memory,
and a loop with no stacked inputs is left alone): the candidates are taken in order while
they fit.

The final carry is ``init + sum``, in the order of the original ``add``'s operands.
Nothing here names a primitive: the rules come from the registry.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from functx.ir import Literal, Trace, Var
from functx.tracing import bind
from functx.transforms.interpret import prune
from functx.transforms.vmap import vmap

__all__ = ["sink_sums"]


def _nbytes(aval: Any) -> int:
    return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize


class _Scanner:
    """What the step's equations look like: producers, uses, where the inputs sit."""

    def __init__(self, body: Trace, n_consts: int, n_carry: int) -> None:
        self.n_consts, self.n_carry = n_consts, n_carry
        self.producer = {id(v): e for e in body.eqns if not e.prim.multiple_results
                         for v in e.outputs}
        self.uses: dict[int, int] = {}
        for e in body.eqns:
            for v in e.inputs:
                if type(v) is Var:
                    self.uses[id(v)] = self.uses.get(id(v), 0) + 1
        for v in body.outputs:
            if type(v) is Var:
                self.uses[id(v)] = self.uses.get(id(v), 0) + 1
        self.in_pos = {id(v): i for i, v in enumerate(body.in_vars)}

    def leaf(self, a: Any) -> tuple:
        """An operand of a product: ``("const", k)``, ``("xs", j)``, ``("lit", atom)``,
        ``("emit", var)`` (a per-step value to stack) or ``("map", eqn, leaf)`` (a
        primitive linear in its one operand, read only here, applied to a stacked leaf
        after the loop: the bias's ``sum(-g_t)`` stacks ``g_t``, not ``-g_t`` too)."""
        if type(a) is Literal:
            return ("lit", a)
        pos = self.in_pos.get(id(a))
        if pos is not None and pos < self.n_consts:
            return ("const", pos)
        if pos is not None and pos >= self.n_consts + self.n_carry:
            return ("xs", pos - self.n_consts - self.n_carry)
        q = self.producer.get(id(a))
        if (q is not None and q.prim.step_sum == "linear" and len(q.inputs) == 1
                and self.uses.get(id(a)) == 1 and type(q.inputs[0]) is Var):
            inner = self.leaf(q.inputs[0])
            if inner[0] in ("xs", "emit", "map"):
                return ("map", q, inner)
        return ("emit", a)

    def plan(self, v: Any) -> tuple | None:
        """How ``sum_t v_t`` is computed after the loop, or None where it cannot be (or
        where an intermediate result is also read elsewhere in the step)."""
        q = self.producer.get(id(v)) if type(v) is Var else None
        if q is None or self.uses.get(id(v)) != 1 or q.prim.step_sum is None:
            return None
        if q.prim.step_sum == "linear":
            inner = self.plan(q.inputs[0]) if len(q.inputs) == 1 else None
            return None if inner is None else ("linear", q, inner)
        leaves = tuple(self.leaf(a) for a in q.inputs)
        if not any(lf[0] in ("xs", "emit", "map") for lf in leaves):
            return None
        return ("product", q, leaves)


def _leaf_emitted(lf: tuple, out: list) -> None:
    if lf[0] == "map":
        _leaf_emitted(lf[2], out)
    elif lf[0] == "emit" and all(lf[1] is not w for w in out):
        out.append(lf[1])


def _emitted(plan: tuple, out: list) -> None:
    if plan[0] == "linear":
        _emitted(plan[2], out)
        return
    for lf in plan[2]:
        _leaf_emitted(lf, out)


def _leaf_value(lf: tuple, consts: Sequence[Any], xs: Sequence[Any], stacks: dict) -> Any:
    kind = lf[0]
    if kind == "const":
        return consts[lf[1]]
    if kind == "xs":
        return xs[lf[1]]
    if kind == "lit":
        return lf[1].value
    if kind == "emit":
        return stacks[id(lf[1])]
    q = lf[1]  # "map": the primitive on every step's slice of the stacked operand
    return vmap(lambda u: bind(q.prim, u, **q.params))(_leaf_value(lf[2], consts, xs, stacks))


def _eval(plan: tuple, consts: Sequence[Any], xs: Sequence[Any], stacks: dict) -> Any:
    if plan[0] == "linear":
        q = plan[1]
        return bind(q.prim, _eval(plan[2], consts, xs, stacks), **q.params)
    q, leaves = plan[1], plan[2]
    operands = [_leaf_value(lf, consts, xs, stacks) for lf in leaves]
    stacked = tuple(lf[0] in ("xs", "emit", "map") for lf in leaves)
    return q.prim.step_sum(stacked, *operands, **q.params)


def sink_sums(body: Trace, consts: Sequence[Any], init: Sequence[Any], xs: Sequence[Any],
              candidates: Sequence[int], length: int
              ) -> tuple[Trace, list, Callable[[list, list], tuple[list, list]]] | None:
    """The step without the carries among ``candidates`` that are sums of per-step
    products (see the module docstring), or None where there are none.

    Returns:
        ``(body, init, finish)``: the new step (the sunk carries gone from its inputs and
        carry outputs, the emitted per-step operands appended to its ``ys``), the initial
        carries left, and ``finish(carry, ys) -> (carry, ys)`` computing the sunk carries
        from the scan's outputs (to call after binding the new step) and returning the
        original carries and ``ys``.
    """
    n_consts, n_carry = len(consts), len(init)
    if length < 2 or body.const_vars or not xs:
        return None
    s = _Scanner(body, n_consts, n_carry)
    sunk: dict[int, tuple] = {}  # carry index -> (add equation, position of c, plan)
    for i in candidates:
        c_in, c_out = body.in_vars[n_consts + i], body.outputs[i]
        e = s.producer.get(id(c_out)) if type(c_out) is Var else None
        if (e is None or not e.prim.sums_operands or len(e.inputs) != 2
                or s.uses.get(id(c_in)) != 1 or s.uses.get(id(c_out)) != 1
                or not any(a is c_in for a in e.inputs)):
            continue
        j = 0 if e.inputs[0] is c_in else 1
        term = e.inputs[1 - j]
        if (type(term) is not Var or tuple(term.aval.shape) != tuple(c_out.aval.shape)
                or term.aval.dtype != c_out.aval.dtype):
            continue
        plan = s.plan(term)
        if plan is not None:
            sunk[i] = (e, j, plan)
    emit: list = []
    budget = sum(_nbytes(v.aval) for v in body.in_vars[n_consts + n_carry:])
    for i in list(sunk):  # in order, while the emitted stacks fit the budget
        more = list(emit)
        _emitted(sunk[i][2], more)
        if sum(_nbytes(v.aval) for v in more) > budget:
            del sunk[i]
        else:
            emit = more
    if not sunk:
        return None
    keep = [i for i in range(n_carry) if i not in sunk]
    in_vars = (body.in_vars[:n_consts] + tuple(body.in_vars[n_consts + i] for i in keep)
               + body.in_vars[n_consts + n_carry:])
    outputs = (tuple(body.outputs[i] for i in keep) + body.outputs[n_carry:] + tuple(emit))
    new_body = prune(Trace(in_vars, (), (), body.eqns, outputs))
    n_y = len(body.outputs) - n_carry

    def finish(carry: list, ys: list) -> tuple[list, list]:
        stacks = {id(v): y for v, y in zip(emit, ys[n_y:])}
        full: list = [None] * n_carry
        for i, c in zip(keep, carry):
            full[i] = c
        for i, (e, j, plan) in sunk.items():
            total = _eval(plan, consts, xs, stacks)
            pair = (init[i], total) if j == 0 else (total, init[i])
            full[i] = bind(e.prim, *pair, **e.params)
        return full, list(ys[:n_y])

    return new_body, [init[i] for i in keep], finish
