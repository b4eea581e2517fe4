"""Memory planning for ``jit``'s executor: buffer reuse from liveness, and donation.

``jit`` replays a signature's (optimised, fused) trace as a list of *steps*, each calling a
primitive's implementation on values held in numbered slots, and clearing each slot after
its last use (``functx.transforms.jit``). :func:`plan_buffers` rewrites that step list so
that a step whose primitive can write into preallocated memory (an *out-implementation*:
``Primitive.def_impl_out``; NumPy/CuPy ufunc primitives and the fused Numba kernels have
one) receives a *dead buffer* of its output's shape, dtype and backend instead of
allocating one:

* an input of the step that dies there, where the primitive allows its output to share
  memory with it (``alias``: ufuncs handle overlapping operands; a fused kernel reads such
  an input only at the element it writes) -- the step runs in place;
* else a buffer that died at an earlier step and has the same type (the most recently
  freed first): a donated argument (the caller holds it for the whole call anyway), kept
  in its slot until that step; an intermediate only if it died at the step just before
  (keeping one across other steps raises the peak memory).

The reusable buffers (*roots*) are the intermediates produced by out-implementations
(fresh memory, never a view of an input) and the *donated* arguments (``jit(f,
donate_argnums=...)``: the caller gives their memory to the call and must not read them
afterwards). A step without an out-implementation may return a view of its inputs
(``reshape``, ``transpose``, slicing), so its outputs count as possibly sharing every root
its inputs share; a root's memory is free only once every slot that may share it is dead,
and never where one of them is a result of the call. Intermediates smaller than
:data:`MIN_BYTES` are left to the allocator (its small-block caches are as fast). The
rewritten steps call a wrapper that checks, at every call, that each buffer is a
C-contiguous array of the backend (a donated NumPy array that is read-only and owns its
memory, as functx's results are, is made writeable; a donated read-only view is not used),
and falls back to the plain implementation otherwise: results are always the same.

Donation (:func:`donation_spec`, :func:`donated_leaves`): as in ``jax.jit``, a donated
argument's buffers may be overwritten by the call (a result may *be* that memory:
``np.shares_memory(out, arg)``), and the caller must not use the donated arrays afterwards
(nor anything holding them: a ``vjp`` function, a jitted function that closed over them).
Where no step can use a donated buffer (no output of its shape and dtype, or no step that
writes into memory), ``jit`` warns once per signature, naming the unused ones. A donated
array that is also passed as another argument, or is a constant of the trace, is copied
first (the other use must not see it change).
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any, Callable, Sequence

import numpy as np

from functx import tree
from functx.backends import finalize_cpu
from functx.errors import ArgumentTypeError
from functx.tracing import FlatArgs
from functx.transforms._args import argnums_by_name, index_tuple, name_tuple

__all__ = ["MIN_BYTES", "plan_buffers", "donation_spec", "donated_leaves",
           "prepare_donated", "finalize_outputs"]

# Intermediates below this size are not planned (the allocator's small-block cache is as
# fast as a planned reuse, and each planned step costs a Python call). Donated arguments
# are always planned.
MIN_BYTES = 1 << 14


# ----------------------------------------------------------------------------------------
# Donation: which arguments, which leaves


def donation_spec(f: Callable, fname: str, donate_argnums: Any, donate_argnames: Any,
                  static_argnums: Sequence[int], static_argnames: Sequence[str]
                  ) -> tuple[tuple[int, ...], frozenset]:
    """``(donated positions, donated names)`` of ``jit``, checked.

    As in JAX, when only one of ``donate_argnums``/``donate_argnames`` is given, the other
    is inferred from ``f``'s signature, so a donated argument may be passed by position or
    by keyword.

    Raises:
        ArgumentTypeError: a position is not an int (or is negative), a name not a string,
            a position beyond the parameters of a function without ``*args``, a name not a
            parameter of a function without ``**kwargs``, or an argument both donated and
            static.

    Example:
        >>> donation_spec(step, "jit(step)", 0, (), (), ())
        ((0,), frozenset({'params'}))
    """
    nums = tuple(dict.fromkeys(index_tuple(donate_argnums, "donate_argnums", fname)))
    names = name_tuple(donate_argnames, "donate_argnames", fname)
    for i in nums:
        if i < 0:
            raise ArgumentTypeError(
                f"{fname}: donate_argnums={donate_argnums} holds the negative position {i}; "
                "give the position of each donated argument counted from 0.")
    named = argnums_by_name(f, fname, nums, names, "donate", (donate_argnums, donate_argnames))
    if named is not None:
        if nums and not names:
            names = tuple(named[i] for i in nums if i in named)
        elif names and not nums:
            nums = tuple(i for i, n in named.items() if n in names)
    static_n = {i for i in static_argnums if i >= 0}
    both = sorted(static_n & set(nums))
    both_names = sorted(set(static_argnames) & set(names))
    if both or both_names:
        what = (f"position(s) {', '.join(map(str, both))}" if both else
                f"argument(s) {', '.join(map(repr, both_names))}")
        raise ArgumentTypeError(
            f"{fname}: {what} is both static and donated. A static argument is passed to "
            "the function as it is (a Python value, part of the cache key), so it has no "
            "buffer to donate: remove it from donate_argnums/donate_argnames or from "
            "static_argnums/static_argnames.")
    return nums, frozenset(names)


def donated_leaves(flat: FlatArgs, kwargs: dict, nums: Sequence[int],
                   names: frozenset) -> tuple[bool, ...]:
    """One bool per leaf of a call's flattened arguments (``flat.leaves``, from
    ``functx.tracing.flatten_args`` on the call's ``args`` and ``kwargs``): whether it
    belongs to a donated argument (position in ``nums`` or keyword in ``names``)."""
    args = flat.args
    dyn = {k: v for k, v in kwargs.items() if k not in flat.static_kwargs}
    marks = (tuple(tree.map(lambda _, d=i in nums: d, args[i]) for i in flat.dyn_idx),
             {k: tree.map(lambda _, d=k in names: d, v) for k, v in dyn.items()})
    out = tuple(bool(m) for m in tree.leaves(marks))
    assert len(out) == len(flat.leaves)  # (the same structure as flatten_args flattened)
    return out


def prepare_donated(inputs: list, donated: Sequence[bool], consts: Sequence[Any]) -> list:
    """The inputs of one call, where a donated array that is also another input (the same
    array, or a view of the same memory owner, donated or not) or a constant of the trace
    is replaced by a copy: the other use must not see it overwritten."""
    others: set[int] = set()
    for x, d in zip(inputs, donated):
        if not d:
            others.add(id(x))
            others.add(id(getattr(x, "base", None)))
    for c in consts:
        others.add(id(c))
        others.add(id(getattr(c, "base", None)))
    others.discard(id(None))
    out = list(inputs)
    seen: set[int] = set()
    for k, (x, d) in enumerate(zip(inputs, donated)):
        if not d:
            continue
        owner = getattr(x, "base", None)
        ids = (id(x),) if owner is None else (id(x), id(owner))
        if any(i in others or i in seen for i in ids):
            out[k] = x.copy()
        else:
            seen.update(ids)
    return out


def finalize_outputs(outs: list, inputs: list, donated: Sequence[bool] | None) -> list:
    """The CPU results of a call (``functx.backends.finalize_cpu``): read-only, sharing no
    memory with a writeable argument, except the donated ones, whose memory a result may
    be."""
    if donated:
        inputs = [x for x, d in zip(inputs, donated) if not d]
    return [finalize_cpu(o, inputs) for o in outs]


# ----------------------------------------------------------------------------------------
# The plan


def _usable_donated(b: Any) -> bool:
    """Whether a donated array can take a step's output now (see the module docstring)."""
    if type(b) is np.ndarray:
        if not b.flags.c_contiguous:
            return False
        if not b.flags.writeable:
            if b.base is not None:
                return False
            try:
                b.flags.writeable = True
            except ValueError:
                return False
        return True
    flags = getattr(b, "flags", None)
    return flags is not None and bool(flags.c_contiguous)


def _usable_intermediate(b: Any) -> bool:
    flags = getattr(b, "flags", None)
    return flags is not None and bool(flags.c_contiguous)


def _writer(plain: Callable, out_impl: Callable, n_in: int, checks: tuple,
            multiple: bool) -> Callable:
    """The step function of a planned step: its inputs, then one buffer (or None) per
    output; each buffer is checked, and the plain implementation runs if none is usable."""
    if not multiple:
        check = checks[0]

        def single(*args: Any, **params: Any) -> Any:
            buf = args[n_in]
            if buf is not None and check(buf):
                return out_impl(*args[:n_in], out=buf, **params)
            return plain(*args[:n_in], **params)
        return single

    def several(*args: Any, **params: Any) -> Any:
        bufs = [b if b is not None and ok(b) else None for b, ok in zip(args[n_in:], checks)]
        if all(b is None for b in bufs):
            return plain(*args[:n_in], **params)
        return out_impl(*args[:n_in], out=bufs, **params)
    return several


# A value may share the memory of at most this many reusable buffers (through steps that
# may return views); beyond it those buffers are not reused (keeps planning linear).
_MAX_SHARED = 32


def _nbytes(aval: Any) -> int:
    return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize


def plan_buffers(plan: Any, in_avals: Sequence[Any], backend: Any,
                 donated: Sequence[bool] | None = None, where: str = "jit") -> Any:
    """``plan`` (``(env template, steps, output slots)`` of jit's executor, or False) with
    its steps rewritten to reuse dead buffers (see the module docstring).

    Args:
        plan: the executor's plan; each step is ``(impl, input slots, params, output
            slot(s), slots to clear after it, equation)``; input slots come first, one per
            ``in_avals``.
        in_avals: the abstract values of the trace's inputs.
        backend: the backend the steps run on.
        donated: one bool per input: whether the caller donated it (None: none).
        where: the jitted function's name, for the warning.

    Returns:
        The rewritten plan (the same object where nothing is planned).

    Warns:
        UserWarning: some donated inputs can take no step's output (once per plan).
    """
    if plan is False:
        return plan
    template, steps, out_slots = plan
    donated = tuple(donated or ())
    n_in = len(in_avals)
    results = set(out_slots)
    never = len(steps)  # the death step of a slot that is never freed (a result)
    aval_of: dict[int, Any] = {i: a for i, a in enumerate(in_avals)}
    death: dict[int, int] = {}
    for k, step in enumerate(steps):
        for s in step[4]:
            death[s] = k
    # The memory a slot may share: itself for the roots (donated inputs, the outputs of
    # out-implementations: fresh memory); a step without an out-implementation may return
    # a view of any of its inputs, so its outputs may share all of their roots.
    roots: dict[int, frozenset] = {i: frozenset((i,)) for i in range(n_in)}
    reusable_root: set[int] = {i for i in range(n_in) if i < len(donated) and donated[i]}
    out_impls: list = []
    for impl, ins, params, outs, free, eqn in steps:
        out_impl = eqn.prim.impl_out_for(backend)
        slots = (outs,) if type(outs) is int else outs
        ok = out_impl is not None and all(
            int(np.prod(v.aval.shape, dtype=np.int64)) > 0 for v in eqn.outputs)
        out_impls.append(out_impl if ok else None)
        shared = frozenset().union(*(roots.get(s, frozenset()) for s in ins))
        if len(shared) > _MAX_SHARED:  # (bounded planning time: those are not reused)
            reusable_root.difference_update(shared)
            shared = frozenset()
        for s, v in zip(slots, eqn.outputs):
            aval_of[s] = v.aval
            if out_impl is not None:
                roots[s] = frozenset((s,))
                if _nbytes(v.aval) >= MIN_BYTES:
                    reusable_root.add(s)
            else:
                roots[s] = shared
    members: dict[int, list[int]] = defaultdict(list)
    for s, rs in roots.items():
        for r in rs:
            members[r].append(s)
    # the step after which nothing can see a root's memory any more
    gone = {r: max(death.get(m, never) for m in members[r]) for r in reusable_root}

    def key(s: int) -> tuple:
        a = aval_of[s]
        return tuple(a.shape), np.dtype(a.dtype)

    # As in JAX, each donated argument is meant for the first result of its type not yet
    # given one (in the order of the leaves): parameters -> updated parameters. It is
    # kept for that result until the step that makes it.
    made_at: dict[int, int] = {}
    for k, step in enumerate(steps):
        for s in ((step[3],) if type(step[3]) is int else step[3]):
            made_at[s] = k
    # A reserved buffer may serve an intermediate first (a chain of steps in place): the
    # reservation then passes to that intermediate, whose memory it now is.
    meant: dict[int, int] = {}        # result slot -> the buffer meant for it
    reserved: dict[int, int] = {}     # buffer -> the result slot it is meant for
    for d in sorted(r for r in reusable_root if r < n_in):
        for o in out_slots:
            if o not in meant and o in made_at and key(o) == key(d):
                meant[o], reserved[d] = d, o
                break

    def free_for(s: int, k: int, o: int) -> bool:
        """Whether buffer ``s`` may take slot ``o`` (made at step ``k``)."""
        r = reserved.get(s)
        return (r is None or made_at[r] <= k or meant.get(o) == s
                or (o not in results and o in reusable_root))

    def take(s: int, o: int) -> None:
        r = reserved.pop(s, None)
        if r is not None and r != o and made_at[r] > made_at[o]:
            meant[r], reserved[o] = o, r  # the memory goes on in ``o``

    # Keeping a dead intermediate for a later step must not raise the peak. A static count
    # of live bytes does not see the temporaries inside the steps (measured: jitted MLP
    # steps' peaks rose by up to 20% under such a check), so an intermediate is kept only
    # for the step right after the one where its memory died (nothing runs meanwhile).
    # Donated arguments cost nothing to keep: the caller holds them for the whole call.
    def fits(r: int, m: int) -> bool:
        return r < n_in or m == gone[r] + 1

    pool: dict[tuple, list[int]] = defaultdict(list)
    moved: dict[int, int] = {}        # pooled slot -> the step that now takes it
    assigned: list = [None] * len(steps)
    used_donated: set[int] = set()
    entering: dict[int, list[int]] = defaultdict(list)  # step -> roots dead after it
    for r, k in gone.items():
        if k < never:
            entering[k].append(r)
    recent: list[int] = []  # the intermediates that entered the pool at the step before
    for k, (impl, ins, params, outs, free, eqn) in enumerate(steps):
        out_impl = out_impls[k]
        taken: set[int] = set()
        if out_impl is not None:
            alias = eqn.prim.out_alias
            pairs = alias(params) if callable(alias) else None
            in_set = set(ins)
            bufs: list = []
            out_list = (outs,) if type(outs) is int else outs
            for j, v in enumerate(eqn.outputs):
                o = out_list[j]
                want = (tuple(v.aval.shape), np.dtype(v.aval.dtype))
                in_place = [] if alias is None else [
                    s for i, s in enumerate(ins)
                    if s in reusable_root and gone[s] == k and s not in taken and
                    key(s) == want and (pairs is None or (i, j) in pairs) and
                    (alias == "any" or not any(m != s and m in in_set for m in members[s]))
                    and free_for(s, k, o)]
                choice = None
                if meant.get(o) in in_place:   # in place: the argument donated for it
                    choice = meant[o]
                elif in_place:                 # in place: an input whose memory dies here
                    choice = in_place[0]
                elif meant.get(o) in pool.get(want, ()) and fits(meant[o], k):
                    choice = meant[o]
                    pool[want].remove(choice)
                elif pool.get(want):
                    choice = _pick(pool[want], n_in, o in results,
                                   lambda s: free_for(s, k, o) and fits(s, k))
                if choice is not None:
                    if choice not in in_place:
                        moved[choice] = k
                    take(choice, o)
                    taken.add(choice)
                    if choice < n_in:
                        used_donated.add(choice)
                bufs.append(choice)
            if any(b is not None for b in bufs):
                assigned[k] = bufs
        for r in recent:  # an intermediate fits only the step right after its death
            if r in pool[key(r)]:
                pool[key(r)].remove(r)
        recent = []
        for r in entering.get(k, ()):
            if r not in taken:
                pool[key(r)].append(r)
                if r >= n_in:
                    recent.append(r)
    if not any(a is not None for a in assigned):
        _warn_unused(donated, used_donated, in_avals, where)
        return plan
    new_free: list[list[int]] = [list(step[4]) for step in steps]
    for s, m in moved.items():  # kept in its slot from its death until the step taking it
        new_free[death[s]].remove(s)
        new_free[m].append(s)
    new_steps = []
    for k, (impl, ins, params, outs, free, eqn) in enumerate(steps):
        bufs = assigned[k]
        if bufs is None:
            new_steps.append((impl, ins, params, outs, tuple(new_free[k]), eqn))
            continue
        checks = tuple(_usable_donated if b is not None and b < n_in else _usable_intermediate
                       for b in bufs)
        fn = _writer(impl, out_impls[k], len(ins), checks, eqn.prim.multiple_results)
        buf_slots = tuple(_NONE_SLOT if b is None else b for b in bufs)
        new_steps.append((fn, tuple(ins) + buf_slots, params, outs, tuple(new_free[k]), eqn))
    _warn_unused(donated, used_donated, in_avals, where)
    template = list(template)
    if any(b is None for bufs in assigned if bufs for b in bufs):
        template.append(None)  # the slot that always holds None (an unplanned output)
        new_steps = [(fn, tuple(len(template) - 1 if s is _NONE_SLOT else s for s in ins),
                      *rest) for fn, ins, *rest in new_steps]
    return template, new_steps, out_slots


def _pick(free: list[int], n_in: int, result: bool, allowed: Callable[[int], bool]
          ) -> int | None:
    """Take a buffer from ``free`` (dead buffers of one type, oldest first) that
    ``allowed``: for a result of the call, a donated argument's if there is one; for an
    intermediate, an intermediate's if there is one (keeping donated buffers for the
    results). The most recently freed otherwise; None if none is allowed."""
    for want_donated in (result, not result):
        for k in range(len(free) - 1, -1, -1):
            if (free[k] < n_in) == want_donated and allowed(free[k]):
                return free.pop(k)
    return None


class _NoneSlot:
    """Placeholder for the slot of an output that gets no buffer (resolved at the end)."""


_NONE_SLOT = _NoneSlot()


def _warn_unused(donated: tuple, used: set, in_avals: Sequence[Any], where: str | None
                 ) -> None:
    unused = [i for i, d in enumerate(donated) if d and i not in used]
    if unused and where is not None:  # (None: a loop body's executor, no user donation)
        listed = ", ".join(f"{in_avals[i]} (input leaf {i})" for i in unused[:8])
        more = f" and {len(unused) - 8} more" if len(unused) > 8 else ""
        warnings.warn(f"{where}: some donated buffers were not usable: {listed}{more}. No "
                      "step of the compiled function writes an output of their shape and "
                      "dtype after their last use; donating them saves nothing (their "
                      "memory is freed when the caller drops them).", stacklevel=5)
