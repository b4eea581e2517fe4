"""The example scripts run as a user runs them (a fresh Python process) and do what they say."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_example(name: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``examples/<name> *args`` with this interpreter, importing this checkout's functx."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in
                                          env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


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


def test_quickstart_saves_its_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="quickstart.py --plot needs matplotlib "
                        "(pip install -e '.[examples]')")
    out_png = tmp_path / "curves" / "quickstart.png"
    proc = run_example("quickstart.py", "--plot", str(out_png))
    assert proc.returncode == 0, f"quickstart.py --plot failed:\n{proc.stdout}\n{proc.stderr}"
    assert f"plot saved to {out_png}" in proc.stdout, proc.stdout
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cnn_digits_trains_a_little_and_saves_its_plot(tmp_path):
    # An example dependency (the `examples` extra), not a test one: skip without it.
    pytest.importorskip("sklearn", reason="examples/cnn_digits.py needs scikit-learn "
                        "(pip install -e '.[examples]')")
    pytest.importorskip("matplotlib", reason="examples/cnn_digits.py needs matplotlib "
                        "(pip install -e '.[examples]')")
    out_png = tmp_path / "plot.png"
    proc = run_example("cnn_digits.py", "--epochs", "3", "--limit", "400", "--out", str(out_png))
    assert proc.returncode == 0, f"cnn_digits.py failed:\n{proc.stdout}\n{proc.stderr}"
    out = proc.stdout
    m = re.search(r"first batch loss ([0-9.eE+-]+) last epoch loss ([0-9.eE+-]+)", out)
    assert m is not None, out
    first, last = float(m.group(1)), float(m.group(2))
    assert first > 1.5, out  # about log(10) for an untrained 10-class network
    assert last < 0.8 * first, out
    assert len(re.findall(r"^epoch +\d+ ", out, flags=re.M)) == 3, out
    accuracy = re.search(r"final test accuracy ([0-9.]+), wall time", out)
    assert accuracy is not None and float(accuracy.group(1)) > 0.3, out  # chance is 0.1
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _losses(out: str) -> tuple[float, float]:
    m = re.search(r"initial loss ([0-9.eE+-]+) final loss ([0-9.eE+-]+)", out)
    assert m is not None, out
    return float(m.group(1)), float(m.group(2))


def test_rnn_language_model_trains_with_scan():
    proc = run_example("rnn_language_model.py", "--steps", "60")
    assert proc.returncode == 0, f"rnn_language_model.py failed:\n{proc.stdout}\n{proc.stderr}"
    assert "scan[body=" in proc.stdout and "greedy sample:" in proc.stdout, proc.stdout
    initial, final = _losses(proc.stdout)
    assert initial > 2.5 and final < 0.5 * initial, proc.stdout  # ln(vocab) ~ 3.2 at start


def test_rnn_language_model_checkpointed_scan_trains_alike():
    proc = run_example("rnn_language_model.py", "--steps", "20", "--checkpoint", "sqrt")
    assert proc.returncode == 0, proc.stderr
    plain = run_example("rnn_language_model.py", "--steps", "20")
    # the same gradients, so the same losses (up to float32 summation order)
    a, b = _losses(proc.stdout), _losses(plain.stdout)
    assert abs(a[1] - b[1]) < 1e-3 * max(1.0, b[1]), (proc.stdout, plain.stdout)


def test_neural_ode_fits_the_spiral():
    proc = run_example("neural_ode.py", "--steps", "120")
    assert proc.returncode == 0, f"neural_ode.py failed:\n{proc.stdout}\n{proc.stderr}"
    initial, final = _losses(proc.stdout)
    assert final < 0.02 * initial, proc.stdout


def test_neural_ode_trains_with_the_adjoint_method():
    proc = run_example("neural_ode.py", "--solver", "adjoint", "--steps", "30")
    assert proc.returncode == 0, f"neural_ode.py failed:\n{proc.stdout}\n{proc.stderr}"
    initial, final = _losses(proc.stdout)
    assert final < 0.1 * initial, proc.stdout


def test_gaussian_process_fits_its_hyperparameters(tmp_path):
    proc = run_example("gaussian_process.py", "--plot", str(tmp_path / "gp.png"))
    assert proc.returncode == 0, f"gaussian_process.py failed:\n{proc.stdout}\n{proc.stderr}"
    out = proc.stdout
    m = re.search(r"initial nll ([0-9.eE+-]+) final nll ([0-9.eE+-]+)", out)
    assert m is not None, out
    assert float(m.group(2)) < float(m.group(1)) - 50, out
    noise = float(re.search(r"noise std ([0-9.]+)", out).group(1))
    assert 0.08 < noise < 0.3, out  # the data's noise is 0.15
    assert float(re.search(r"posterior rmse against the true function ([0-9.]+)",
                           out).group(1)) < 0.15, out
