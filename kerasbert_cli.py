"""The ``kerasbert`` command, started without loading TensorFlow.

``import kerasbert`` loads no TensorFlow, and neither do the modules that define the command
line (:mod:`kerasbert.cli`, the options, the task registry): ``--help`` and a refused flag
take a fraction of a second. TensorFlow is loaded once a command runs a model, Keras without
the modules it imports for wrappers no command uses (:data:`KERAS_EXTRAS`).
"""

import sys

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
    from kerasbert.cli.main import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
