"""TensorFlow imported without its start-up lines on stderr, for the ``kerasbert`` command
only (:func:`quiet_tensorflow`, called by the console script; the library changes nothing).

TensorFlow's shared libraries log a few lines when they load ("oneDNN custom
operations are on", "Could not find cuda drivers", CPU feature notes) before any log
level applies, so ``TF_CPP_MIN_LOG_LEVEL`` cannot silence them. They would break the
command line's promise of one line per failure: in the command's own process, stderr is
pointed at an unnamed temporary file while the libraries load, and the C++ log level defaults to 3
(a machine without a GPU logs a failed ``cuInit`` as an error). ``--verbose``,
``TF_CPP_MIN_LOG_LEVEL=0`` or ``KERASBERT_DEBUG=1`` show them. A process without a
standard error stream (its file descriptor 2 closed) loads TensorFlow as it is, and an
import that fails shows what TensorFlow wrote.
"""

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys
import tempfile
import types
from collections.abc import Iterator, MutableMapping, Sequence
from typing import cast


def quiet_tensorflow(environ: MutableMapping[str, str] = os.environ) -> None:
    """From now on, this process imports TensorFlow quietly, whoever imports it first (the
    command's own process: the caller owns ``environ`` and ``sys.meta_path``)."""
    environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if environ["TF_CPP_MIN_LOG_LEVEL"] == "0" or environ.get("KERASBERT_DEBUG") == "1":
        return
    if "tensorflow" not in sys.modules and not any(
            isinstance(finder, _QuietTensorFlow) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlow())


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """File descriptor 2 pointed at an unnamed temporary file, then given back; what was
    written there is copied to stderr if the block raises (an ImportError keeps the lines
    that explain it). Nothing is done where the process has no descriptor 2 (closed)."""
    if sys.stderr is not None:
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2: nothing to silence
        yield
        return
    with tempfile.TemporaryFile() as captured:  # unlinked at once: nothing left on disk
        os.dup2(captured.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if failed:
                captured.seek(0)
                os.write(2, captured.read()[-20000:])


class _QuietTensorFlow(importlib.abc.MetaPathFinder):
    """An import finder that steps in once, for ``tensorflow``: it finds the package as the
    standard path finder does, and loads it with stderr silenced; then it leaves
    ``sys.meta_path``. Any other import, and any finder before or after it, is untouched."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != "tensorflow":
            return None
        with contextlib.suppress(ValueError):  # already gone: another import found it first
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Silenced(spec.loader)
        return spec


class _Silenced(importlib.abc.Loader):
    """A loader that runs another's ``exec_module`` with stderr silenced; the module keeps
    its own loader."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        spec = cast(importlib.machinery.ModuleSpec, module.__spec__)  # the import system's
        module.__loader__ = spec.loader = self.loader
        with _stderr_silenced():
            self.loader.exec_module(module)
