"""The ``kerasbert`` command, started without loading TensorFlow.

``import kerasbert`` loads TensorFlow and Keras, so that every object a saved kerasbert
model refers to is registered as soon as the package is imported. The command line must
not pay those seconds to print its help or to refuse a bad flag. The console script
therefore starts here: it loads the modules that define the command line and print its
errors, ``kerasbert.training.options`` and ``kerasbert.cli`` (none imports TensorFlow),
without running the package's ``__init__``; the package is imported as usual once a command runs a
model, Keras without the modules it imports for wrappers no command uses
(:data:`KERAS_EXTRAS`).
"""

import importlib.machinery
import importlib.util
import os
import sys

# In import order: kerasbert.cli.main imports the other two.
COMMAND_LINE_MODULES = ("kerasbert.training.options", "kerasbert.tasks", "kerasbert.tasks.options",
                        "kerasbert.cli.commands", "kerasbert.cli.main")
# Modules those import from packages that must still load as usual later (kerasbert.models
# holds the rest of the model code): loaded alone, their package left alone. The families
# and the presets name --model's choices; disk_space is read by the error printer (a full
# disk is one line of its own), so that refusing a flag loads no TensorFlow either. None of
# the three imports anything of kerasbert.
STANDALONE_MODULES = ("kerasbert.models.families", "kerasbert.presets.table",
                      "kerasbert.disk_space")


def _load_alone(name):
    """Imports ``kerasbert.<package>.<module>`` by its file, registering neither
    ``kerasbert`` nor the package: a later ``from kerasbert.<package> import x`` then
    imports the package, and ``kerasbert`` with it, as usual."""
    if name in sys.modules:
        return sys.modules[name]
    root = importlib.util.find_spec("kerasbert").submodule_search_locations[0]
    path = os.path.join(root, *name.split(".")[1:])
    path = os.path.join(path, "__init__.py") if os.path.isdir(path) else path + ".py"
    return _execute(name, importlib.util.spec_from_file_location(name, path))


def _execute(name, spec):
    """Runs the module of ``spec`` as ``sys.modules[name]`` (left out if it fails)."""
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _load(name):
    """Imports ``kerasbert.<...>.<module>`` without running the ``kerasbert`` package's
    ``__init__``; the subpackages on the way (``kerasbert.training``) are loaded as well,
    and their ``__init__`` files import nothing."""
    if name in sys.modules:
        return sys.modules[name]
    parent, _, child = name.rpartition(".")
    if parent == "kerasbert":
        locations = importlib.util.find_spec("kerasbert").submodule_search_locations
    else:
        locations = _load(parent).__path__
    module = _execute(name, importlib.machinery.PathFinder.find_spec(name, locations))
    if parent != "kerasbert":
        # As the import system does: ``from kerasbert.cli import commands`` then finds the
        # module on its package instead of importing it again through ``kerasbert``.
        setattr(sys.modules[parent], child, module)
    return module


#: Modules Keras imports, when they are installed, for its scikit-learn wrappers and image
#: galleries, and TensorFlow for its Keras 2 sparse inputs, none of which a command uses:
#: scikit-learn, matplotlib and SciPy, about 1.5 s of each command's start. -> the modules
#: that import them.
KERAS_EXTRAS = {"sklearn": ("keras.src.wrappers",),
                "matplotlib": ("keras.src.visualization",),
                "scipy": ("tensorflow.python.keras",)}


class _KerasWithoutExtras:
    """An import finder: to the modules of :data:`KERAS_EXTRAS` (which import them in
    ``try: ... except ImportError``) those modules are not installed; any other module
    imports them as usual (kerasbert's classification report reads scikit-learn)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        importers = KERAS_EXTRAS.get(name)
        if importers is None:
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_globals.get("__name__", "").startswith(
                ("importlib", "_frozen_importlib")):
            frame = frame.f_back  # the import system's own frames, up to the importer
        importer = "" if frame is None else frame.f_globals.get("__name__", "")
        if importer.startswith(importers):
            raise ModuleNotFoundError(f"No module named {name!r} (for Keras, in kerasbert's "
                                      "command line)", name=name)
        return None


def main(argv=None):
    """Runs ``kerasbert <command>``; see :func:`kerasbert.cli.main.main`."""
    if "keras" not in sys.modules:
        sys.meta_path.insert(0, _KerasWithoutExtras)
    for name in STANDALONE_MODULES:
        _load_alone(name)
    for name in COMMAND_LINE_MODULES:
        module = _load(name)
    return module.main(argv)


if __name__ == "__main__":
    sys.exit(main())
