"""functx.distributed on the CPU: the launcher, the TCP process group's collectives, and
its failure behaviour (a failing rank stops the job and is named; a rendezvous timeout
names the missing ranks; mismatched shapes name the rank). The NCCL backend runs the same
script on GPUs (see the report's commands)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import functx as fx
from functx.distributed import DistributedError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tmp_path, body: str, n: int, timeout: float = 120) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import functx as fx
        D = fx.distributed
        g = D.initialize("tcp", timeout=30)
        r, n = g.rank, g.world_size
    """) + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=ROOT, FUNCTX_DISABLE_CUDA="1")
    return subprocess.run([sys.executable, "-m", "functx.distributed.launch",
                           "--nproc-per-node", str(n), "--master-port", str(free_port()),
                           str(script)], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_across_processes(tmp_path, n):
    out = launch(tmp_path, """
        x = np.arange(2.0 * n).reshape(n, 2) * (r + 1)
        s = D.all_reduce({"a": x}, op="sum")["a"]
        m = D.all_reduce(x, op="max")
        gathered = D.all_gather(np.array([r]))
        rs = D.reduce_scatter(x)
        b = D.broadcast(np.array([10.0 + r]), root=n - 1)
        D.barrier()
        tot = sum(k + 1 for k in range(n))
        assert np.allclose(s, np.arange(2.0 * n).reshape(n, 2) * tot), s
        assert np.allclose(m, np.arange(2.0 * n).reshape(n, 2) * n), m
        assert gathered.ravel().tolist() == list(range(n)), gathered
        assert np.allclose(rs, (np.arange(2.0 * n).reshape(n, 2) * tot)[r:r + 1]), rs
        assert b.tolist() == [10.0 + n - 1], b
        print("ok", r, flush=True)
    """, n)
    assert out.returncode == 0, out.stdout + out.stderr
    for r in range(n):
        assert f"[rank {r}] ok {r}" in out.stdout


def test_all_reduce_of_a_pytree_in_buckets(tmp_path):
    """Leaves of two dtypes and one too big for a bucket: the bucketed all-reduce gives
    every leaf's own sum, in its shape and dtype."""
    out = launch(tmp_path, """
        rng = np.random.default_rng(0)
        tree = {"w": [rng.standard_normal((3, 4)) * (r + 1) for _ in range(5)],
                "h": [np.arange(6, dtype=np.float32).reshape(2, 3) * (r + 1)] * 3,
                "big": np.ones(40) * (r + 1), "i": np.arange(4) * (r + 1)}
        got = D.all_reduce(tree, op="mean", bucket_bytes=200)  # several buckets
        each = fx.tree.map(lambda a: D.group().all_reduce(a, "mean"), tree)
        for a, b in zip(fx.tree.flatten(got)[0], fx.tree.flatten(each)[0]):
            assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
            np.testing.assert_allclose(a, b, rtol=1e-6)
        print("ok", r, flush=True)
    """, 2)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[rank 0] ok 0" in out.stdout and "[rank 1] ok 1" in out.stdout


def test_a_failing_rank_stops_the_job_and_is_named(tmp_path):
    t0 = time.monotonic()
    out = launch(tmp_path, """
        if r == 1:
            raise ValueError("boom on purpose")
        D.all_reduce(np.ones(3))   # rank 0 would wait for rank 1 forever
        print("unreachable", flush=True)
    """, 3)
    assert out.returncode != 0
    assert time.monotonic() - t0 < 60
    assert "rank 1 failed with exit code 1" in out.stderr
    assert "[rank 1] ValueError: boom on purpose" in out.stdout
    assert "unreachable" not in out.stdout


def test_mismatched_shapes_name_the_rank(tmp_path):
    out = launch(tmp_path, """
        D.all_reduce(np.ones(3 if r != 1 else 4))
    """, 2)
    assert out.returncode != 0
    assert "all_reduce: rank 1 passed an array of shape (4,)" in out.stdout


def test_rendezvous_timeout_names_missing_ranks():
    port = free_port()
    with pytest.raises(DistributedError, match=r"rank\(s\) \[1, 2\] of 3 never arrived"):
        fx.distributed.initialize("tcp", rank=0, world_size=3, master_port=port, timeout=1.0)
    with pytest.raises(DistributedError, match="rank 0 never arrived"):
        fx.distributed.initialize("tcp", rank=1, world_size=2, master_port=port, timeout=0.5)


def test_single_process_group_and_missing_environment(monkeypatch):
    for var in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(DistributedError, match="RANK is not set"):
        fx.distributed.initialize("tcp")
    g = fx.distributed.initialize("tcp", rank=0, world_size=1, master_port=free_port())
    try:
        np.testing.assert_allclose(fx.distributed.all_reduce(np.ones(2), op="mean"), 1.0)
        assert fx.distributed.rank() == 0 and fx.distributed.world_size() == 1
    finally:
        fx.distributed.shutdown()
    with pytest.raises(DistributedError, match="initialize"):
        fx.distributed.rank()
    assert g.backend == "tcp"


def test_the_smoke_example_on_two_processes():
    env = dict(os.environ, PYTHONPATH=ROOT, FUNCTX_DISABLE_CUDA="1")
    out = subprocess.run([sys.executable, "-m", "functx.distributed.launch", "--nproc-per-node",
                          "2", "--master-port", str(free_port()),
                          os.path.join(ROOT, "examples", "distributed_smoke.py")],
                         env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[rank 0] ok rank 0 of 2 on tcp" in out.stdout
    assert "[rank 1] ok rank 1 of 2 on tcp" in out.stdout
