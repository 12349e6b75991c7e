"""TensorFlow imported without its start-up lines on stderr, and Keras told where kerasbert's
saved objects are, both when they are first imported (:func:`install`).

TensorFlow's shared libraries log a few lines when they load ("oneDNN custom
operations are on", "Could not find cuda drivers", CPU feature notes) before any log
level applies, so ``TF_CPP_MIN_LOG_LEVEL`` cannot silence them. They would break the
command line's promise of one line per failure; stderr is closed while the libraries
load, and the C++ log level defaults to 3 (a machine without a GPU logs a failed
``cuInit`` as an error). Set ``TF_CPP_MIN_LOG_LEVEL=0`` (or ``KERASBERT_DEBUG=1``) to see
them.
"""

import importlib.abc
import os
import sys


def import_tensorflow():
    """Imports TensorFlow once, with stderr silenced while its libraries load."""
    if "tensorflow" not in sys.modules:
        _silenced(lambda: __import__("tensorflow"))


def _silenced(load):
    """Runs ``load()`` with stderr closed (see the module's docstring)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0" or os.environ.get("KERASBERT_DEBUG") == "1":
        return load()
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        return load()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def install(find_saved_object):
    """From now on, TensorFlow is imported quietly whoever imports it first, and Keras, once
    imported, calls ``find_saved_object(name)`` for a registered name it does not know
    (``"kerasbert>MultiHeadSelfAttention"``) before it gives up, so that
    ``keras.saving.load_model`` finds kerasbert's objects although they were not imported.
    Both apply at once to a module already imported."""
    if "keras" in sys.modules:
        _look_up_through(sys.modules["keras"], find_saved_object)
    if "tensorflow" in sys.modules and "keras" in sys.modules:
        return
    if not any(isinstance(finder, _FirstImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _FirstImport(find_saved_object))


class _FirstImport(importlib.abc.MetaPathFinder):
    """An import finder that steps in once for ``tensorflow`` (loaded with stderr silenced)
    and once for ``keras`` (told of kerasbert's saved objects once loaded); it finds the
    module with the finders after it and changes nothing else of the import."""

    def __init__(self, find_saved_object):
        self.find_saved_object = find_saved_object

    def find_spec(self, name, path=None, target=None):
        if name not in ("tensorflow", "keras") or name in sys.modules:
            return None
        spec = next((found for finder in sys.meta_path
                     if finder is not self and hasattr(finder, "find_spec")
                     for found in [finder.find_spec(name, path, target)] if found), None)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Around(spec.loader, name, self.find_saved_object)
        if all(module in sys.modules or module == name for module in ("tensorflow", "keras")):
            sys.meta_path.remove(self)  # the last of the two
        return spec


class _Around(importlib.abc.Loader):
    """A loader that runs another around its ``exec_module``: TensorFlow silenced, Keras
    told where kerasbert's saved objects are; the module keeps its own loader."""

    def __init__(self, loader, name, find_saved_object):
        self.loader, self.name, self.find_saved_object = loader, name, find_saved_object

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        if self.name == "tensorflow":
            _silenced(lambda: self.loader.exec_module(module))
        else:
            self.loader.exec_module(module)
            _look_up_through(module, self.find_saved_object)


def _look_up_through(keras, find_saved_object):
    """Makes ``keras`` (loaded) call ``find_saved_object`` for a registered name it lacks."""
    from kerasbert.internals import ask_for_missing_objects

    ask_for_missing_objects(find_saved_object)
