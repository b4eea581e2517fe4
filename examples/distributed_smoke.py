"""A smoke test of functx.distributed: every collective across the launched processes.

    python -m functx.distributed.launch --nproc-per-node 4 examples/distributed_smoke.py

On GPUs (CuPy sees them) it uses the NCCL backend, one GPU per process (LOCAL_RANK);
otherwise the TCP backend on NumPy arrays. Each rank prints "ok" and the reduction it got.
"""
from __future__ import annotations

import numpy as np

import functx as fx

D = fx.distributed
g = D.initialize(timeout=60)
r, n = g.rank, g.world_size
xp = fx.get_backend("cuda").xp if g.backend == "nccl" else np
x = xp.arange(4.0 * n, dtype=xp.float32).reshape(n, 4) * (r + 1)
tot = n * (n + 1) / 2
base = np.arange(4.0 * n, dtype=np.float32).reshape(n, 4)
checks = {
    "all_reduce": (D.all_reduce(x), base * tot),
    "all_reduce max": (D.all_reduce(x, op="max"), base * n),
    "all_gather": (D.all_gather(x), np.stack([base * (k + 1) for k in range(n)])),
    "reduce_scatter": (D.reduce_scatter(x), (base * tot)[r:r + 1]),
    "broadcast": (D.broadcast(x, root=n - 1), base * n),
}
if g.backend == "nccl":  # "cuda" means this process's GPU: LOCAL_RANK, not GPU 0
    placed = fx.device_put(np.ones(3, np.float32), "cuda")
    assert fx.device_of(placed).id == g.local_rank == x.device.id, (fx.device_of(placed), g)
for name, (got, want) in checks.items():
    np.testing.assert_allclose(fx.to_numpy(got), want, rtol=1e-6, err_msg=name)
D.barrier()
print(f"ok rank {r} of {n} on {g.backend}: all_reduce sum {float(fx.to_numpy(checks['all_reduce'][0]).sum())}")
D.shutdown()
