"""Several processes (one per GPU, on one host or several): a process group and collectives.

``python -m functx.distributed.launch --nproc-per-node 4 train.py`` starts one process per
GPU with the environment of torchrun: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``. In the script, :func:`initialize` joins the group and
the collectives (:func:`all_reduce`, :func:`all_gather`, :func:`reduce_scatter`,
:func:`broadcast`, :func:`barrier`) combine arrays across the processes.

Two backends:

* ``"nccl"`` (the default where CuPy sees a GPU): each process uses GPU ``LOCAL_RANK``
  (after :func:`initialize`, the device ``"cuda"`` means that GPU in this process, as
  ``torch.cuda.set_device`` makes it; ``"cuda:K"`` still names GPU K) and the collectives run on ``cupyx.distributed``'s NCCL process group
  (``init_process_group``; its TCP store listens on ``MASTER_PORT + 1`` on rank 0's host).
* ``"tcp"``: NumPy arrays over the group's own TCP connections, through rank 0 (a hub):
  for CPUs, tests and debugging; not fast.

**Rendezvous.** Rank 0 listens on ``MASTER_ADDR:MASTER_PORT``; every other rank connects
to it (retrying until ``timeout``). If some ranks have not arrived by then, every rank
that did raises :class:`DistributedError` naming the ranks that never arrived.

**Failures.** A rank whose peer dies (or raises and exits) sees its connection close and
raises :class:`DistributedError` naming that rank instead of waiting forever; the
launcher stops every rank when one fails and names it. On the NCCL backend a dead peer
can leave NCCL waiting: the launcher's stop is what ends it. With ``check_shapes=True``
(the default) every collective first compares the ranks' shapes and dtypes over the TCP
connections and raises naming the rank that differs (one small host round trip; turn it
off for speed once a script works).

**Several hosts.** Run the launcher on every host with ``--nnodes``, ``--node-rank`` and
the same ``--master-addr`` (rank 0's host, reachable from all) and ``--master-port``;
``RANK = node_rank * nproc_per_node + local_rank``. Ports ``MASTER_PORT`` and
``MASTER_PORT + 1`` must be open on rank 0's host.

Example:
    >>> g = fx.distributed.initialize()            # in each launched process
    >>> grads = fx.distributed.all_reduce(grads, op="mean")
"""
from __future__ import annotations

import os
import time
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

import numpy as np

from functx import backends, tree
from functx.errors import FunctxError

__all__ = ["DistributedError", "ProcessGroup", "initialize", "group", "shutdown",
           "all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier", "rank",
           "world_size", "BUCKET_BYTES"]

_OPS = ("sum", "mean", "max", "min")


class DistributedError(FunctxError, RuntimeError):
    """A process group failed: a rank never arrived, died, or disagreed on a shape."""


def _env_int(name: str, given: int | None, default: int | None = None) -> int:
    if given is not None:
        return int(given)
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise DistributedError(f"initialize: {name} is not set; pass it as an argument or "
                                   "start the script with python -m functx.distributed.launch.")
        return default
    return int(value)


class ProcessGroup:
    """The processes of one job. Made by :func:`initialize`; see the module docstring.

    Attributes:
        rank, world_size, local_rank: this process's place in the job.
        backend: ``"nccl"`` or ``"tcp"``.
    """

    def __init__(self, rank: int, world_size: int, local_rank: int, backend: str,
                 links: dict[int, Connection], check_shapes: bool) -> None:
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.backend = backend
        self._links = links  # rank 0: {r: conn to r}; others: {0: conn to rank 0}
        self._check = check_shapes
        self._nccl: Any = None
        self._listener: Any = None

    # -- the hub's messages ----------------------------------------------------------------
    def _send(self, peer: int, msg: Any) -> None:
        try:
            self._links[peer].send(msg)
        except (OSError, EOFError, BrokenPipeError) as e:
            raise DistributedError(f"rank {self.rank}: the connection to rank {peer} broke "
                                   f"({type(e).__name__}); rank {peer} has probably failed "
                                   "(see its error).") from None

    def _recv(self, peer: int) -> Any:
        try:
            msg = self._links[peer].recv()
        except (OSError, EOFError) as e:
            raise DistributedError(f"rank {self.rank}: rank {peer} closed its connection "
                                   f"({type(e).__name__}) without taking part in the "
                                   f"collective; rank {peer} has probably failed (see its "
                                   "error).") from None
        if isinstance(msg, tuple) and msg and msg[0] == "__error__":
            raise DistributedError(msg[1])
        return msg

    def _hub(self, payload: Any, combine: Any) -> Any:
        """Every rank's payload to rank 0, ``combine(list by rank)`` there, and each rank's
        share back: combine returns a list by rank (or raises DistributedError, which every
        rank then raises too)."""
        if self.world_size == 1:
            return combine([payload])[0]
        if self.rank != 0:
            self._send(0, payload)
            return self._recv(0)
        payloads = [payload] + [self._recv(r) for r in range(1, self.world_size)]
        try:
            shares = combine(payloads)
        except DistributedError as e:
            for r in range(1, self.world_size):
                try:
                    self._links[r].send(("__error__", str(e)))
                except OSError:
                    pass
            raise
        for r in range(1, self.world_size):
            self._send(r, shares[r])
        return shares[0]

    def _agree(self, op: str, x: Any) -> None:
        """Check that every rank passes the same shape and dtype (naming one that does not)."""
        meta = (tuple(np.shape(x)), str(np.dtype(x.dtype)))

        def check(metas: list) -> list:
            for r, m in enumerate(metas):
                if m != metas[0]:
                    raise DistributedError(
                        f"{op}: rank {r} passed an array of shape {m[0]} and dtype {m[1]}, "
                        f"but rank 0 passed shape {metas[0][0]} and dtype {metas[0][1]}; "
                        "every rank must pass the same shape and dtype.")
            return [None] * len(metas)
        self._hub(meta, check)

    # -- collectives ---------------------------------------------------------------------
    def all_reduce(self, x: Any, op: str = "sum") -> Any:
        """The sum (``op``: ``"sum"``, ``"mean"``, ``"max"``, ``"min"``) over the ranks."""
        if op not in _OPS:
            raise DistributedError(f"all_reduce: op must be one of {_OPS}, got {op!r}.")
        if self._check:
            self._agree("all_reduce", x)
        if self._nccl is not None:
            xp = backends.get_backend("cuda").xp
            x = xp.ascontiguousarray(x)
            out = xp.empty_like(x)
            self._nccl.all_reduce(x, out, "sum" if op == "mean" else op)
            return out / self.world_size if op == "mean" else out
        x = np.asarray(x)

        def reduce(xs: list) -> list:
            stacked = np.stack(xs)
            out = {"sum": stacked.sum(0), "mean": stacked.mean(0), "max": stacked.max(0),
                   "min": stacked.min(0)}[op].astype(x.dtype if op != "mean" else None)
            return [out] * len(xs)
        return self._hub(x, reduce)

    def all_gather(self, x: Any) -> Any:
        """Every rank's ``x`` stacked along a new leading axis (in rank order)."""
        if self._check:
            self._agree("all_gather", x)
        if self._nccl is not None:
            xp = backends.get_backend("cuda").xp
            x = xp.ascontiguousarray(x)
            out = xp.empty((self.world_size,) + x.shape, x.dtype)
            self._nccl.all_gather(x, out, x.size)
            return out
        return self._hub(np.asarray(x), lambda xs: [np.stack(xs)] * len(xs))

    def reduce_scatter(self, x: Any, op: str = "sum") -> Any:
        """The sum over ranks of ``x`` (whose leading axis is a multiple of the world size),
        of which rank ``r`` keeps block ``r`` along the leading axis."""
        if self._check:
            self._agree("reduce_scatter", x)
        n = self.world_size
        if np.shape(x)[0] % n:
            raise DistributedError(f"reduce_scatter: the leading axis of {np.shape(x)} is not "
                                   f"a multiple of the world size {n}.")
        if self._nccl is not None:
            xp = backends.get_backend("cuda").xp
            x = xp.ascontiguousarray(x)
            out = xp.empty((x.shape[0] // n,) + x.shape[1:], x.dtype)
            self._nccl.reduce_scatter(x, out, out.size, "sum" if op == "mean" else op)
            return out / n if op == "mean" else out
        total = self._hub(np.asarray(x), lambda xs: [np.sum(xs, 0).astype(xs[0].dtype)]
                          * len(xs))
        if op == "mean":
            total = total / n
        return np.split(total, n)[self.rank]

    def broadcast(self, x: Any, root: int = 0) -> Any:
        """Rank ``root``'s ``x`` on every rank."""
        if self._check:
            self._agree("broadcast", x)
        if self._nccl is not None:
            xp = backends.get_backend("cuda").xp
            x = xp.array(x, copy=True)
            self._nccl.broadcast(x, root)
            return x
        return self._hub(np.asarray(x), lambda xs: [xs[root]] * len(xs))

    def barrier(self) -> None:
        """Wait until every rank has reached this call."""
        self._hub(None, lambda xs: [None] * len(xs))

    def shutdown(self) -> None:
        """Close the connections (the group cannot be used afterwards)."""
        for c in self._links.values():
            c.close()
        self._links = {}
        if self._listener is not None:
            self._listener.close()
        if self._nccl is not None and hasattr(self._nccl, "stop"):
            self._nccl.stop()


_GROUP: ProcessGroup | None = None


def _rendezvous(rank: int, world_size: int, addr: str, port: int, timeout: float,
                authkey: bytes) -> tuple[dict, Any]:
    deadline = time.monotonic() + timeout
    if rank == 0:
        listener = Listener((addr if addr not in ("localhost",) else "127.0.0.1", port),
                            authkey=authkey, backlog=max(16, world_size))
        links: dict[int, Connection] = {}
        # accept() must time out: multiprocessing's Listener has no timeout of its own, so
        # the timeout is set on its listening socket
        sock = listener._listener._socket
        while len(links) < world_size - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, world_size)) - set(links))
                msg = (f"initialize: rendezvous timed out after {timeout:g} s at "
                       f"{addr}:{port}: rank(s) {missing} of {world_size} never arrived "
                       f"(arrived: {sorted([0] + list(links))}). Check that every process "
                       "was started, with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE.")
                for c in links.values():
                    c.send(("__error__", msg))
                    c.close()
                listener.close()
                raise DistributedError(msg)
            sock.settimeout(min(left, 1.0))
            try:
                conn = listener.accept()
            except (OSError, TimeoutError):
                continue
            r = conn.recv()
            if not isinstance(r, int) or not 0 < r < world_size or r in links:
                conn.send(("__error__", f"initialize: rank {r!r} is invalid or arrived "
                           f"twice (world size {world_size})."))
                conn.close()
                continue
            links[r] = conn
        for c in links.values():
            c.send("ready")
        return links, listener
    while True:
        try:
            conn = Client((addr, port), authkey=authkey)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise DistributedError(
                    f"initialize: rank {rank} could not reach rank 0 at {addr}:{port} within "
                    f"{timeout:g} s: rank 0 never arrived (is it running, and are "
                    "MASTER_ADDR/MASTER_PORT right?).") from None
            time.sleep(0.05)
    conn.send(rank)
    reply = conn.recv() if conn.poll(max(deadline - time.monotonic(), 0.1) + 5) else None
    if reply is None:
        raise DistributedError(f"initialize: rank {rank} reached rank 0 but the group did not "
                               f"form within {timeout:g} s.")
    if isinstance(reply, tuple) and reply and reply[0] == "__error__":
        raise DistributedError(reply[1])
    return {0: conn}, None


def initialize(backend: str | None = None, *, rank: int | None = None,
               world_size: int | None = None, local_rank: int | None = None,
               master_addr: str | None = None, master_port: int | None = None,
               timeout: float = 300.0, check_shapes: bool = True) -> ProcessGroup:
    """Join the job's process group (each process calls it once).

    Args:
        backend: ``"nccl"`` (default where CuPy sees a GPU) or ``"tcp"``.
        rank, world_size, local_rank, master_addr, master_port: default from the
            environment variables ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (default: rank),
            ``MASTER_ADDR`` (default 127.0.0.1), ``MASTER_PORT`` (default 29500), which
            the launcher sets.
        timeout: seconds to wait for every rank at the rendezvous.
        check_shapes: compare shapes and dtypes across ranks before each collective.

    Returns:
        The group, also the default of this module's functions.

    Raises:
        DistributedError: a rank never arrived (naming it), or a variable is missing.
    """
    global _GROUP
    r = _env_int("RANK", rank)
    n = _env_int("WORLD_SIZE", world_size)
    lr = _env_int("LOCAL_RANK", local_rank, default=r)
    addr = master_addr or os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = _env_int("MASTER_PORT", master_port, default=29500)
    if not 0 <= r < n:
        raise DistributedError(f"initialize: rank {r} is not in [0, {n}).")
    if backend is None:
        backend = "nccl" if backends.devices("cuda") else "tcp"
    if backend not in ("nccl", "tcp"):
        raise DistributedError(f"initialize: backend must be 'nccl' or 'tcp', got {backend!r}.")
    authkey = os.environ.get("FUNCTX_DIST_AUTHKEY", "functx").encode()
    links, listener = _rendezvous(r, n, addr, port, timeout, authkey)
    group = ProcessGroup(r, n, lr, backend, links, check_shapes)
    group._listener = listener
    if backend == "nccl":
        import cupy  # lazily: only the NCCL backend needs it
        import cupyx.distributed

        cupy.cuda.Device(lr).use()
        # "cuda" (device_put(x, "cuda"), default_device("cuda")) now means this process's
        # GPU, not cuda:0 (without it, every rank's arrays landed on GPU 0)
        backends.set_local_device(backends.Device("cuda", lr))
        group._nccl = cupyx.distributed.init_process_group(n, r, host=addr, port=port + 1)
    _GROUP = group
    return group


def group() -> ProcessGroup:
    """The group :func:`initialize` made.

    Raises:
        DistributedError: :func:`initialize` was not called.
    """
    if _GROUP is None:
        raise DistributedError("functx.distributed: call functx.distributed.initialize() "
                               "first (in every process of the job).")
    return _GROUP


def shutdown() -> None:
    """Leave the group (closes the connections)."""
    global _GROUP
    if _GROUP is not None:
        _GROUP.shutdown()
        _GROUP = None


def rank() -> int:
    """This process's rank."""
    return group().rank


def world_size() -> int:
    """The number of processes in the job."""
    return group().world_size


BUCKET_BYTES = 25 << 20


def all_reduce(x: Any, op: str = "sum", bucket_bytes: int = BUCKET_BYTES) -> Any:
    """:meth:`ProcessGroup.all_reduce` of every leaf of ``x`` (a pytree) on the group, in
    buckets: leaves of one dtype and device are flattened into buffers of about
    ``bucket_bytes`` (25 MiB, as PyTorch's DDP), one collective per buffer, so a model's
    gradients take a few NCCL calls instead of one per parameter.

    Args:
        x: a pytree of arrays (NumPy on the ``"tcp"`` backend, CuPy on ``"nccl"``).
        op: ``"sum"``, ``"mean"``, ``"max"`` or ``"min"``.
        bucket_bytes: the most bytes one collective carries (a larger leaf goes alone);
            0 for one collective per leaf.

    Returns:
        ``x``'s structure with every leaf reduced over the ranks (same shapes and dtypes).

    Raises:
        DistributedError: ``op`` is unknown, or the ranks' leaves differ.

    Example:
        >>> grads = fx.distributed.all_reduce(grads, op="mean")
    """
    g = group()
    leaves, treedef = tree.flatten(x)
    out = list(leaves)
    groups: dict = {}
    for i, leaf in enumerate(leaves):
        key = (np.dtype(leaf.dtype).str, type(leaf)) if hasattr(leaf, "dtype") else None
        if key is None or bucket_bytes <= 0 or leaf.nbytes >= bucket_bytes:
            out[i] = g.all_reduce(leaf, op)
        else:
            groups.setdefault(key, []).append(i)
    for idx in groups.values():
        bucket: list = []
        size = 0
        for i in idx + [None]:
            if i is not None and size + leaves[i].nbytes <= bucket_bytes:
                bucket.append(i)
                size += leaves[i].nbytes
                continue
            if bucket:
                _reduce_bucket(g, leaves, out, bucket, op)
            bucket, size = ([i], leaves[i].nbytes) if i is not None else ([], 0)
    return tree.unflatten(treedef, out)


def _reduce_bucket(g: ProcessGroup, leaves: list, out: list, idx: list, op: str) -> None:
    """One collective for the leaves ``idx`` (one dtype and array type), written to ``out``."""
    if len(idx) == 1:
        out[idx[0]] = g.all_reduce(leaves[idx[0]], op)
        return
    xp = backends.backend_of(leaves[idx[0]]).xp
    flat = g.all_reduce(xp.concatenate([xp.ravel(leaves[i]) for i in idx]), op)
    start = 0
    for i in idx:
        n = leaves[i].size
        out[i] = flat[start:start + n].reshape(leaves[i].shape)
        start += n


def all_gather(x: Any) -> Any:
    """:meth:`ProcessGroup.all_gather` of every leaf of ``x`` on the group."""
    g = group()
    return tree.map(g.all_gather, x)


def reduce_scatter(x: Any, op: str = "sum") -> Any:
    """:meth:`ProcessGroup.reduce_scatter` of every leaf of ``x`` on the group."""
    g = group()
    return tree.map(lambda leaf: g.reduce_scatter(leaf, op), x)


def broadcast(x: Any, root: int = 0) -> Any:
    """:meth:`ProcessGroup.broadcast` of every leaf of ``x`` on the group."""
    g = group()
    return tree.map(lambda leaf: g.broadcast(leaf, root), x)


def barrier() -> None:
    """Wait until every rank of the group has reached this call."""
    group().barrier()
