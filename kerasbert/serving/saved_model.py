"""What every SavedModel export shares: TensorFlow Serving's layout, one numbered folder
per version::

    <directory>/<version>/saved_model.pb  variables/  assets/vocab.txt

checked before anything is written (:func:`version_folder`), and the archive written at once
with its signatures (:func:`write_archive`). Each task's folder has its ``export.py`` with its
signatures (``kerasbert.tasks.<task>.export``), whose in-graph tokenizer
(:class:`kerasbert.serving.graph_text.TextEncoder`) gives exactly the ids of
:class:`kerasbert.text.tokenizer.Tokenizer`.
"""

import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import keras
import tensorflow as tf

from kerasbert import disk_space, files
from kerasbert.training.rundir import RunError, check_export_target


def write_archive(target: str, tracked: Sequence[Any],
                  endpoints: Iterable[tuple[str, Callable[..., Any], Any]]) -> list[str]:
    """Writes a SavedModel of ``endpoints`` into the folder ``target`` at once (it appears
    complete or not at all); returns the paths of its files, sorted.

    Each endpoint is traced once and written as a signature alone: an endpoint kept as an
    attribute of the saved object too (as ``keras.export.ExportArchive`` keeps them) is
    traced again when it is written, and Keras traces it once more to find its variables.

    Args:
        target: the version folder, from :func:`version_folder`.
        tracked: the Keras models, whose variables it holds, and the ``tf.Module`` s (the
            in-graph tokenizers) whose tables and assets it holds.
        endpoints: ``(signature name, function, input signature)`` each.
    """
    root = tf.Module()
    models = [item for item in tracked if isinstance(item, keras.layers.Layer)]
    # TensorFlow's variable under each Keras variable: what the traced graphs read.
    root.model_variables = [variable.value for model in models for variable in model.variables]
    root.modules = [item for item in tracked if item not in models]
    signatures = {
        name: tf.function(function, input_signature=signature,
                          autograph=False).get_concrete_function()
        for name, function, signature in endpoints}
    directory = os.path.dirname(target) or "."
    what = f"the SavedModel (version {os.path.basename(target)})"
    weights = [weight for model in models for weight in model.weights]
    with disk_space.room_for(directory, saved_model_size(weights), what=what,
                        advice=disk_space.NOTHING_WRITTEN), \
            files.atomic_directory(target, create=False) as temporary:
        tf.saved_model.save(root, temporary, signatures=signatures)
    return sorted(os.path.join(folder, name) for folder, _, names in os.walk(target)
                  for name in names)


#: What a SavedModel version folder holds; --overwrite replaces nothing else.
SAVED_MODEL_NAMES = {"saved_model.pb", "saved_model.pbtxt", "fingerprint.pb", "variables",
                     "assets", "assets.extra"}


def saved_model_size(weights: Sequence[Any]) -> int:
    """An upper bound of a SavedModel's bytes, for a model of ``weights``.

    Measured (2 to 12 layers, vocabularies of 100 to 21,000): the variables file holds
    each weight once (twice when Keras's ``ExportArchive`` wrote it: kept as the bound);
    the graph takes about 1 MB with the tokenizer and some 11 kB a variable.
    """
    return 2 * disk_space.estimated_size(weights, overhead=16 << 10) + (2 << 20)


def version_folder(directory: str, source: str | None, version: int | None,
                   overwrite: bool) -> str:
    """The version folder to write, ``<directory>/<version>``, once checked (``source``: a
    folder it must neither be nor hold, or None); nothing is written."""
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or version < 1):
        raise RunError(f"version {version!r} in --version: must be a whole number of at least "
                       "1 (TF Serving's version folders are numbers)")
    check_export_target(directory, source)
    names = [] if not os.path.isdir(directory) else sorted(
        name for name in os.listdir(directory) if not files.is_temporary(name))
    versions = {int(name): name for name in names
                if re.fullmatch("[0-9]+", name) and os.path.isdir(os.path.join(directory, name))}
    others = [name for name in names if name not in versions.values()]
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise RunError(f"--to in {directory}: holds other files than version folders ({shown}); "
                       "export to a new directory, or to one that holds only versions")
    if version is None:
        version = max(versions, default=0) + 1
    path = os.path.join(directory, versions.get(version, str(version)))
    if version in versions:
        if not overwrite:
            raise RunError(f"--to in {path}: version {version} exists; pass --overwrite to "
                           f"replace it, or leave out --version to add version "
                           f"{max(versions) + 1}")
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):
            raise RunError(f"--to in {path}: is not a SavedModel; --overwrite only replaces an "
                           "earlier export")
        others = sorted(set(os.listdir(path)) - SAVED_MODEL_NAMES)
        if others:
            raise RunError(f"--to in {path}: holds other files than a SavedModel's "
                           f"({', '.join(others[:3])}); --overwrite only replaces an earlier "
                           "export")
    return path
