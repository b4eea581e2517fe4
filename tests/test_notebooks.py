"""The notebooks in ``examples/notebooks/`` run from top to bottom, and are stored clean.

Each notebook ends with ``assert``s of what it demonstrates (the loss went down, a gradient
matches a finite difference, ...), so executing it is a test. Execution uses ``nbclient``
with the ``python3`` kernel (``ipykernel``; jupyter_client starts it with this interpreter)
and a 120 s limit per cell; the kernel imports this checkout's functx and runs with
functx's eager and trace checks on, as the rest of the suite does. Without the
``notebooks`` extra (``pip install -e '.[notebooks]'``) the execution tests are skipped.
"""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "examples" / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
MISSING = [name for name in ("nbclient", "nbformat", "ipykernel")
           if importlib.util.find_spec(name) is None]
CELL_TIMEOUT_S = 120

# Run in the kernel before the notebook's first cell (not stored in the notebook): the same
# checks tests/conftest.py turns on for the rest of the suite.
SETUP = "import functx.tracing\nfunctx.tracing.CHECK_EAGER = functx.tracing.CHECK_TRACES = True"


def test_there_are_notebooks() -> None:
    names = {nb.name for nb in NOTEBOOKS}
    assert {"01_tour.ipynb", "02_per_example_gradients.ipynb", "03_checkpoint_memory.ipynb",
            "04_gaussian_process.ipynb", "05_transformer_lm.ipynb"} <= names, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4, f"{path.name}: nbformat {nb['nbformat']}, expected 4"
    assert nb["metadata"].get("kernelspec", {}).get("name") == "python3", path.name
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    assert code, f"{path.name} has no code cells"
    dirty = [i for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: cells {dirty} have outputs or execution counts; clear "
                       "them before committing (jupyter nbconvert --clear-output --inplace)")
    last = "".join(code[-1]["source"])
    assert "assert " in last, f"{path.name}: the last code cell should check a result"


@pytest.mark.skipif(bool(MISSING), reason=f"executing the notebooks needs {', '.join(MISSING)} "
                    "(pip install -e '.[notebooks]')")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbclient
    import nbformat

    # The kernel is a child process: it inherits this environment, so it imports this
    # checkout's functx (whether or not functx is installed).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(SETUP))
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback

    outputs = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]
    errors = [out for out in outputs if out.output_type == "error"]
    assert not errors, errors
    source = "".join(cell.source for cell in nb.cells)
    if "plt.show()" in source:  # the inline backend returns each figure as a PNG
        assert any("image/png" in out.get("data", {}) for out in outputs), \
            f"{path.name} shows a plot but no image came back"
