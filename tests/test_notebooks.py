"""Every notebook in notebooks/ is stored clean, is described in docs/notebooks.md, and runs
top to bottom. What is checked comes from the folder itself, so a notebook added there is checked
without a change here."""

import glob
import importlib.util
import os

import nbformat
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOUND = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))

_spec = importlib.util.spec_from_file_location(
    "run_notebooks", os.path.join(ROOT, "notebooks", "run.py"))
run_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_notebooks)


def test_run_py_executes_every_notebook_in_the_folder():
    assert FOUND, "notebooks/ holds no notebook"
    assert [os.path.abspath(path) for path in run_notebooks.NOTEBOOKS] == FOUND


@pytest.mark.parametrize("path", FOUND, ids=os.path.basename)
def test_notebook_is_stored_valid_and_without_outputs(path):
    stored = nbformat.read(path, as_version=4)
    nbformat.validate(stored)
    assert stored.metadata.kernelspec.name == "python3"
    code = [cell for cell in stored.cells if cell.cell_type == "code"]
    assert code, "a notebook without code"
    assert all(not cell.outputs and cell.execution_count is None for cell in code), \
        "notebooks are stored without outputs (run `make notebooks` for executed copies)"


@pytest.mark.parametrize("path", FOUND, ids=os.path.basename)
def test_notebook_is_described_in_the_docs(path):
    with open(os.path.join(ROOT, "docs", "notebooks.md"), encoding="utf-8") as f:
        assert f"`{os.path.basename(path)}`" in f.read()


# The notebooks that fine-tune (minutes each; a quarter of the suite on a CPU without
# AVX-512): run by `make test-notebooks`, left out of `make test`.
TRAINING = ("03_finetune_chinese_classifier.ipynb", "04_ner_and_qa.ipynb")


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    pytest.param(path, marks=pytest.mark.training_notebook)
    if os.path.basename(path) in TRAINING else path for path in FOUND], ids=os.path.basename)
def test_notebook_runs(path):
    executed = run_notebooks.execute(path)
    code = [cell for cell in executed.cells if cell.cell_type == "code"]
    errors = [output for cell in code for output in cell.outputs
              if output.output_type == "error"]
    assert not errors
    assert all(cell.execution_count for cell in code), "a code cell did not run"
    assert any(cell.outputs for cell in code), "the notebook showed nothing"
