"""Every notebook in notebooks/ runs top to bottom (stored without outputs)."""

import importlib.util
import os

import nbformat
import pytest

_spec = importlib.util.spec_from_file_location(
    "run_notebooks", os.path.join(os.path.dirname(__file__), "..", "notebooks", "run.py"))
run_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_notebooks)


@pytest.mark.slow
@pytest.mark.parametrize("path", run_notebooks.NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path):
    stored = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in stored.cells if cell.cell_type == "code"), \
        "notebooks are stored without outputs"
    executed = run_notebooks.execute(path)
    errors = [output for cell in executed.cells for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors


def test_notebooks_are_there():
    names = [os.path.basename(path) for path in run_notebooks.NOTEBOOKS]
    assert names == ["01_bert_architecture.ipynb", "02_checkpoints.ipynb",
                     "03_finetune_chinese_classifier.ipynb"]
