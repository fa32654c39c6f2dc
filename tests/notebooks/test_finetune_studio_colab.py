"""The Colab notebook runs top to bottom in CI mode (``STUDIO_NOTEBOOK_CI=1``: no install, no share
link, 3 training steps of the real default model on identity.json), so it cannot rot."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "finetune_studio_colab.ipynb"
STEPS = 3
CELL_TIMEOUT_S = 600


def _cell(nb, cell_id: str):
    return next(cell for cell in nb.cells if cell.get("id") == cell_id)


def _text(cell) -> str:
    """The cell's stream output (stdout and stderr), joined."""
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


def test_notebook_is_valid_and_saved_without_outputs():
    """Valid nbformat 4, the python3 kernel, and no outputs committed."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_notebook_runs_in_ci_mode(tmp_path, monkeypatch, datasets_dir, model_dir):
    """Every cell runs; the run folder, the figure and the skip message are there. (``model_dir``: the
    offline default model is built before the kernel starts; the notebook trains it by name.)"""
    data_dir = tmp_path / "studio_data"
    # The kernel and the processes it starts inherit this environment.
    monkeypatch.setenv("STUDIO_NOTEBOOK_CI", "1")
    monkeypatch.setenv("STUDIO_NOTEBOOK_DATASET", str(datasets_dir / "identity.json"))
    monkeypatch.setenv("STUDIO_NOTEBOOK_MAX_STEPS", str(STEPS))
    monkeypatch.setenv("STUDIO_DATA_DIR", str(data_dir))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=CELL_TIMEOUT_S, resources={"metadata": {"path": str(REPO)}}
    )
    client.execute()  # raises CellExecutionError naming the cell when one fails

    assert not [
        out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs if out.output_type == "error"
    ]
    setup = _text(_cell(nb, "setup"))
    assert "install skipped" in setup
    assert f"python: {sys.executable}" in setup  # the kernel is this interpreter (jupyter_client swaps "python")
    defaults = _text(_cell(nb, "defaults"))
    assert defaults.startswith(("no CUDA GPU: CPU settings", "GPU: ")), defaults

    run_dirs = list((data_dir / "runs").glob("notebook_*"))
    assert len(run_dirs) == 1, run_dirs
    metrics = [json.loads(line) for line in (run_dirs[0] / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert [m["step"] for m in metrics if m.get("loss") is not None] == list(range(1, STEPS + 1))
    assert (run_dirs[0] / "adapter_model.safetensors").is_file()
    assert "completed" in _text(_cell(nb, "train"))

    plot = _cell(nb, "plot")
    assert any("application/vnd.plotly.v1+json" in out.get("data", {}) for out in plot.outputs), plot.outputs
    assert f"{STEPS} logged steps; final loss" in _text(plot)
    assert "share link skipped on CI" in _text(_cell(nb, "share"))
