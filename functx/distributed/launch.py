"""``python -m functx.distributed.launch --nproc-per-node N script.py [args...]``.

Starts ``N`` processes of ``script.py`` on this host with ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (and ``FUNCTX_DIST_AUTHKEY``, a fresh
secret for the group's connections) set, as ``torchrun`` does; each line a process prints
is prefixed with ``[rank R]``. When a process exits with an error, the launcher says which
rank failed and with which exit code, stops every other rank (SIGTERM, then SIGKILL after
``--grace`` seconds) and exits with that code: a failure never leaves the job hanging.

Several hosts: run it on each with ``--nnodes M --node-rank K`` and the same
``--master-addr`` (rank 0's host) and ``--master-port``; then ``WORLD_SIZE = M * N`` and
``RANK = K * N + LOCAL_RANK``.
"""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Sequence


def _pump(stream: IO[bytes], prefix: bytes, out: IO[bytes]) -> None:
    for line in iter(stream.readline, b""):
        out.write(prefix + line)
        out.flush()
    stream.close()


def _stop(procs: list, grace: float) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        left = deadline - time.monotonic()
        try:
            p.wait(timeout=max(left, 0.01))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; returns the exit code (0, or the first failing rank's)."""
    ap = argparse.ArgumentParser(prog="python -m functx.distributed.launch",
                                 description="Start one process per GPU (or CPU worker).")
    ap.add_argument("--nproc-per-node", type=int, required=True)
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--master-addr", default="127.0.0.1")
    ap.add_argument("--master-port", type=int, default=29500)
    ap.add_argument("--grace", type=float, default=5.0,
                    help="seconds between SIGTERM and SIGKILL when stopping ranks")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    n, world = a.nproc_per_node, a.nproc_per_node * a.nnodes
    env_base = dict(os.environ, WORLD_SIZE=str(world), MASTER_ADDR=a.master_addr,
                    MASTER_PORT=str(a.master_port), PYTHONUNBUFFERED="1")
    env_base.setdefault("FUNCTX_DIST_AUTHKEY", secrets.token_hex(16))
    procs, ranks, pumps = [], [], []
    for local in range(n):
        r = a.node_rank * n + local
        env = dict(env_base, RANK=str(r), LOCAL_RANK=str(local))
        p = subprocess.Popen([sys.executable, a.script, *a.args], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        t = threading.Thread(target=_pump, args=(p.stdout, f"[rank {r}] ".encode(),
                                                 sys.stdout.buffer), daemon=True)
        t.start()
        procs.append(p)
        ranks.append(r)
        pumps.append(t)
    # One thread per rank waits for it and notes when it ended, so the rank named is the
    # first to fail (the others often fail because it did), however late the loop looks.
    exits: list = []

    def wait(p: subprocess.Popen, r: int) -> None:
        p.wait()
        exits.append((time.monotonic(), r, p))

    for p, r in zip(procs, ranks):
        threading.Thread(target=wait, args=(p, r), daemon=True).start()
    code = 0
    try:
        while True:
            done = [(p, r) for p, r in zip(procs, ranks) if p.poll() is not None]
            failed = sorted((e for e in list(exits) if e[2].returncode != 0),
                            key=lambda e: e[0])
            if failed:
                _, r, p = failed[0]
                code = p.returncode if p.returncode > 0 else 1
                others = [q for q in procs if q.poll() is None]
                sys.stderr.write(f"functx.distributed.launch: rank {r} failed with exit code "
                                 f"{p.returncode}; stopping the other {len(others)} running "
                                 "rank(s).\n")
                _stop(procs, a.grace)
                break
            if len(done) == len(procs) and len(exits) == len(procs):
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        _stop(procs, a.grace)
        code = 130
    for t in pumps:
        t.join(timeout=2)
    return code


if __name__ == "__main__":
    sys.exit(main())
