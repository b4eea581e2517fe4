"""The example scripts run as a user runs them (a fresh Python process) and do what they say."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_example(name: str) -> subprocess.CompletedProcess:
    """Run ``examples/<name>`` with this interpreter, importing this checkout's functx."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in
                                          env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.run([sys.executable, str(ROOT / "examples" / name)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_quickstart_trains_and_prints_trace_and_gradients():
    proc = run_example("quickstart.py")
    assert proc.returncode == 0, f"quickstart.py failed:\n{proc.stdout}\n{proc.stderr}"
    out = proc.stdout

    # The trace listing of the loss: a jaxpr-like block with the model's operations.
    assert "{ lambda" in out and "tanh" in out, out
    # One gradient per parameter, shaped like it.
    for name, shape in [("w1", (2, 32)), ("b1", (32,)), ("w2", (32, 1)), ("b2", (1,))]:
        assert f"{name}: shape {shape}" in out, out

    m = re.search(r"initial loss ([0-9.eE+-]+) final loss ([0-9.eE+-]+)", out)
    assert m is not None, out
    initial, final = float(m.group(1)), float(m.group(2))
    assert initial > 0.5, out  # an untrained network is far from the ±1 labels
    assert final < 0.25 * initial, out

    accuracies = [float(a) for a in re.findall(r"accuracy ([0-9.]+)", out)]
    assert accuracies and accuracies[-1] >= 0.95, out
