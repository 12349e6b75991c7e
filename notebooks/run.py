"""Executes the notebooks top to bottom, as the test suite does.

Usage (from the repository root)::

    python notebooks/run.py [--output out/notebooks] [NOTEBOOK ...]

The notebooks are stored without outputs; with ``--output`` the executed copies, with
their tables and pictures, are written there (the stored files are never changed).
"""

import argparse
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOKS = sorted(glob.glob(os.path.join(HERE, "*.ipynb")))


def execute(path, timeout=900):
    """Runs the notebook at ``path`` in a fresh kernel (working directory: notebooks/);
    returns it with its outputs. A failing cell raises ``nbclient``'s CellExecutionError."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": HERE}}).execute()
    return notebook


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", default=NOTEBOOKS, help="default: all of them")
    parser.add_argument("--output", default=os.path.join("out", "notebooks"),
                        help="folder for the executed copies (default: out/notebooks)")
    args = parser.parse_args(argv)
    import nbformat

    os.makedirs(args.output, exist_ok=True)
    for path in args.notebooks:
        target = os.path.join(args.output, os.path.basename(path))
        nbformat.write(execute(path), target)
        print(f"{os.path.basename(path)}: ran; executed copy in {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
