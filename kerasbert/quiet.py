"""TensorFlow imported without its start-up lines on stderr.

TensorFlow's shared libraries log a few lines when they load ("oneDNN custom
operations are on", "Could not find cuda drivers", CPU feature notes) before any log
level applies, so ``TF_CPP_MIN_LOG_LEVEL`` cannot silence them. They would break the
command line's promise of one line per failure; stderr is closed while the libraries
load, and the C++ log level defaults to 3 (a machine without a GPU logs a failed
``cuInit`` as an error). Set ``TF_CPP_MIN_LOG_LEVEL=0`` (or ``KERASBERT_DEBUG=1``) to see
them.
"""

import os
import sys


def import_tensorflow():
    """Imports TensorFlow once, with stderr silenced while its libraries load."""
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0" or os.environ.get("KERASBERT_DEBUG") == "1":
        import tensorflow  # noqa: F401
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
