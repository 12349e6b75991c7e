"""Every notebook in notebooks/ runs top to bottom (stored without outputs)."""

import glob
import os

import nbformat
import pytest

NOTEBOOKS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "notebooks", "*.ipynb")))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path):
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "notebooks are stored without outputs"
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(path)}}).execute()


def test_notebooks_are_there():
    names = [os.path.basename(path) for path in NOTEBOOKS]
    assert names == ["01_bert_architecture.ipynb", "02_checkpoints.ipynb",
                     "03_finetune_chinese_classifier.ipynb"]
