"""A fine-tuned run's model for serving: a TensorFlow SavedModel.

Example:
    >>> export(Run("runs/reviews"), "exported/reviews")
"""

import os

import keras

from kerasbert import files
from kerasbert.rundir import RunError, check_writable


def export(run, directory, overwrite=False):
    """Writes a TensorFlow SavedModel with an int32 ``serving_default`` signature.

    The SavedModel is written beside ``directory`` and renamed into place. An
    existing ``directory`` is replaced only with ``overwrite`` and only if it holds
    an earlier SavedModel; the run directory itself is never replaced.

    Raises:
        RunError: ``directory`` is the run directory or holds it, is a file, is a
            non-empty folder (without ``overwrite``), or is not a SavedModel.
    """
    import tensorflow as tf

    directory = os.fspath(directory)
    _check_export_target(directory, run.run_dir, overwrite)
    archive = keras.export.ExportArchive()
    archive.track(run.model)
    spec = [tf.TensorSpec((None, None), tf.int32, name="token_ids"),
            tf.TensorSpec((None, None), tf.int32, name="segment_ids")]
    archive.add_endpoint("serving_default",
                         lambda token_ids, segment_ids: run.model([token_ids, segment_ids],
                                                                   training=False),
                         input_signature=spec)
    with files.atomic_directory(directory, create=False) as temporary:
        archive.write_out(temporary, verbose=False)
    return directory


def _check_export_target(directory, run_dir, overwrite):
    target, run = os.path.realpath(directory), os.path.realpath(run_dir)
    if target == run or run.startswith(target.rstrip(os.sep) + os.sep):
        raise RunError(f"--to in {directory}: is the run directory or holds it; export to a "
                       "new directory")
    check_writable(directory, flag="--to")
    if os.path.isdir(directory) and os.listdir(directory):
        if not overwrite:
            raise RunError(f"--to in {directory}: exists and is not empty; pass --overwrite to "
                           "replace an earlier export, or choose a new directory")
        if not os.path.exists(os.path.join(directory, "saved_model.pb")):
            raise RunError(f"--to in {directory}: is not a SavedModel; --overwrite only "
                           "replaces an earlier export")
