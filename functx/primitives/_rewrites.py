"""Identities across primitives, for the trace optimisation passes (functx.compiler.passes).

A primitive's own identities live beside its other rules (``prim.def_simplify``); the ones
here relate several primitives and would make a family's module import another's.
"""
from __future__ import annotations

from functx.primitives import elementwise as _ew
from functx.primitives.shape import concatenate_p, pad_p, transpose_p
from functx.registry.rewrite import Operand, Rewrite, known_scalar

__all__: list = []


# add(pad(a, 0), pad(b, 0)) with the two pieces side by side along one axis is the transpose
# of slicing an array into pieces (q, k, v = split(qkv)): the optimisation passes write it
# as one concatenate (padded where the pieces do not cover the axis), instead of two
# full-size pads and an add. A rule of add's, written here beside pad and concatenate.
def _pieces_side_by_side(args: list, out: object) -> object:
    if len(args) != 2 or any(a.shape != tuple(out.shape) for a in args):
        return None
    pa, pb = args[0].producer, args[1].producer
    if pa is None or pb is None or pa.prim is not pad_p or pb.prim is not pad_p:
        return None
    if known_scalar(pa.args[1]) != 0 or known_scalar(pb.args[1]) != 0:
        return None
    ca, cb = pa.params["padding_config"], pb.params["padding_config"]
    if any(c[2] != 0 or c[0] < 0 or c[1] < 0 for c in ca + cb):
        return None
    diff = [k for k, (x, y) in enumerate(zip(ca, cb)) if x != y]
    if len(diff) != 1:
        return None
    k = diff[0]
    (la, ha, _), (lb, hb, _) = ca[k], cb[k]
    if la + pa.args[0].shape[k] == lb:
        first, second, lo, hi = pa, pb, la, hb
    elif lb + pb.args[0].shape[k] == la:
        first, second, lo, hi = pb, pa, lb, ha
    else:
        return None
    joined = Rewrite(concatenate_p, _pieces(first.args[0], k) + _pieces(second.args[0], k),
                     {"dimension": k})
    config = tuple((lo, hi, 0) if j == k else c for j, c in enumerate(ca))
    if all(c == (0, 0, 0) for c in config):
        return joined
    return Rewrite(pad_p, (Operand.of(joined), pa.args[1]), {"padding_config": config})


def _pieces(op: Operand, axis: int) -> tuple:
    """``op``'s pieces along ``axis`` when it is itself a concatenate there (one copy)."""
    prod = op.producer
    if prod is not None and prod.prim is concatenate_p and prod.params["dimension"] == axis:
        return tuple(prod.args)
    return (op,)


_ew.add_p.def_simplify(_pieces_side_by_side)  # (tried before add's own identities)


# transpose(concatenate(pieces, d), perm) is concatenate(transpose(piece, perm) for each
# piece) along perm.index(d): the result is laid out in the transposed order as it is
# written, so a reshape of it is free (the cotangent of q, k, v = qkv[0], qkv[1], qkv[2]
# in attention is such a concatenate, transposed back into qkv's layout). A rule of
# transpose's, written here beside concatenate.
def _transpose_of_concatenate(args: list, out: object, *, permutation: tuple) -> object:
    prod = args[0].producer
    perm = tuple(int(p) for p in permutation)
    if prod is None or prod.prim is not concatenate_p or perm == tuple(range(len(perm))):
        return None
    pieces = tuple(Operand.of(Rewrite(transpose_p, (a,), {"permutation": perm}))
                   for a in prod.args)
    return Rewrite(concatenate_p, pieces, {"dimension": perm.index(prod.params["dimension"])})


transpose_p.def_simplify(_transpose_of_concatenate)
