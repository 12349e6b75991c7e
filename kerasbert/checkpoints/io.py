"""Google (TensorFlow, name-based) checkpoint files: find, read and write them.

A checkpoint is a prefix ``.../bert_model.ckpt`` with two files beside it,
``bert_model.ckpt.index`` and ``bert_model.ckpt.data-00000-of-00001``. This module
knows nothing of models; :mod:`kerasbert.models.loading` maps variables to layers.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import keras
import numpy as np

from kerasbert import disk_space, files
from kerasbert.files import pause_point, temporary_name

INDEX_SUFFIX = ".index"
DATA_SUFFIX = ".data-"


# TensorFlow's reader raises its own errors, and plain ones where its C++ status is
# translated by pybind (OutOfRange → IndexError for a truncated data file).
def _read_errors() -> tuple[type[Exception], ...]:
    import tensorflow as tf

    return (tf.errors.OpError, ValueError, IndexError, RuntimeError)


class CheckpointError(ValueError):
    """A checkpoint that exists but cannot be used: corrupt, truncated, or not fitting the model."""


def resolve_prefix(path: str | os.PathLike[str]) -> str:
    """The checkpoint prefix for a prefix, a directory holding one, or one of its files.

    Args:
        path: ``.../bert_model.ckpt``, ``.../bert_model.ckpt.index``,
            ``.../bert_model.ckpt.data-00000-of-00001`` or the directory holding them.

    Returns:
        The prefix, e.g. ``"chinese_L-12_H-768_A-12/bert_model.ckpt"``.

    Raises:
        FileNotFoundError: no checkpoint there (the message names what was looked for).
        CheckpointError: a Keras ``.weights.h5`` / ``.keras`` file, or a directory with
            several checkpoints and no ``checkpoint`` file.

    Example:
        >>> resolve_prefix("kerasbert/resources/kerasbert-zh-small")
        'kerasbert/resources/kerasbert-zh-small/bert_model.ckpt'
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return _prefix_in_directory(path)
    if os.path.isfile(path):
        path = re.sub(r"(\.index|\.meta|\.data-\d+-of-\d+)$", "", path)
    if not os.path.exists(path + INDEX_SUFFIX):
        if path.endswith((".h5", ".keras")) and os.path.isfile(path):
            raise CheckpointError(
                f"checkpoint in {path}: is a Keras weights file, not a Google checkpoint; load it "
                "with model.load_weights, or write a checkpoint with save_weights_as_checkpoint")
        if os.path.isfile(path):  # a TF1 (V1) single-file checkpoint
            return path
        raise FileNotFoundError(
            f"checkpoint in {path}: no such checkpoint, expected {path}{INDEX_SUFFIX} and "
            f"{path}{DATA_SUFFIX}00000-of-00001"
        )
    if not _data_files(path):
        raise FileNotFoundError(
            f"checkpoint in {path}: has an index but no data file, expected "
            f"{path}{DATA_SUFFIX}00000-of-00001"
        )
    return path


def _data_files(prefix: str) -> list[str]:
    return sorted(glob.glob(glob.escape(prefix) + DATA_SUFFIX + "*-of-*"))


def checkpoints_in(directory: str) -> list[str]:
    """The prefixes of the checkpoints in ``directory`` (those with an index), sorted."""
    # glob's * skips hidden names, so unfinished writes of write_checkpoint are never found.
    return sorted(found[: -len(INDEX_SUFFIX)] for found in
                  glob.glob(os.path.join(glob.escape(directory), "*" + INDEX_SUFFIX)))


def _prefix_in_directory(directory: str) -> str:
    prefixes = checkpoints_in(directory)
    if len(prefixes) == 1:
        return resolve_prefix(prefixes[0])
    if not prefixes:
        raise FileNotFoundError(f"checkpoint in {directory}: the directory holds no checkpoint "
                                f"(*{INDEX_SUFFIX})")
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(directory)
    if latest:
        return resolve_prefix(latest)
    raise CheckpointError(
        f"checkpoint in {directory}: the directory holds {len(prefixes)} checkpoints "
        f"({', '.join(os.path.basename(p) for p in prefixes)}); pass one prefix"
    )


class DictSource:
    """Checkpoint variables held in a dict of arrays (tests, converted weights)."""

    def __init__(self, arrays: Mapping[str, Any], description: str = "<dict>") -> None:
        self.arrays = arrays
        self.description = description

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """``{name: shape}`` of every variable."""
        return {name: tuple(np.shape(value)) for name, value in self.arrays.items()}

    def dtypes(self) -> dict[str, str]:
        """``{name: dtype name}`` of every variable (see :func:`dtype_name`)."""
        return {name: dtype_name(value.dtype if hasattr(value, "dtype")
                                 else np.asarray(value).dtype)
                for name, value in self.arrays.items()}

    def read_all(self, names: Sequence[str]) -> list[np.ndarray]:
        """The variables ``names`` as NumPy arrays, in that order."""
        return [np.asarray(self.arrays[name]) for name in names]


class FileSource:
    """Variables of a checkpoint on disk, read with TensorFlow.

    Raises:
        FileNotFoundError: see :func:`resolve_prefix`.
        CheckpointError: the index cannot be parsed (the message names the file).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import tensorflow as tf

        self.prefix = resolve_prefix(path)
        self.description = self.prefix
        try:
            self.reader = tf.train.load_checkpoint(self.prefix)
        except _read_errors() as error:
            index = self.prefix + INDEX_SUFFIX
            index = index if os.path.exists(index) else self.prefix  # a V1 checkpoint: one file
            raise CheckpointError(
                f"checkpoint index in {index}: cannot be read "
                f"(corrupt or not a TensorFlow checkpoint): {_message(error)}"
            ) from None

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """``{name: shape}`` of every variable, from the index alone."""
        shapes = self.reader.get_variable_to_shape_map()
        return {name: tuple(shape) for name, shape in shapes.items()}

    def dtypes(self) -> dict[str, str]:
        """``{name: dtype name}`` of every variable, from the index alone."""
        return {name: dtype_name(dtype)
                for name, dtype in self.reader.get_variable_to_dtype_map().items()}

    def read_all(self, names: Sequence[str]) -> list[Any]:
        """The variables ``names`` in that order, in one read: TensorFlow tensors on its
        backend, NumPy arrays on the others (a JAX variable keeps what it is given).

        One ``RestoreV2`` reads them all (checksums checked) straight into tensors
        that a TensorFlow variable can take over without another copy.

        Raises:
            CheckpointError: the data file is truncated or corrupt (it is named).
        """
        import tensorflow as tf

        dtypes = self.reader.get_variable_to_dtype_map()
        try:
            with tf.device("/cpu:0"):
                tensors = list(tf.raw_ops.RestoreV2(
                    prefix=self.prefix, tensor_names=list(names),
                    shape_and_slices=[""] * len(names), dtypes=[dtypes[n] for n in names]))
        except _read_errors() as error:
            files = ", ".join(_data_files(self.prefix)) or self.prefix
            raise CheckpointError(
                f"checkpoint data in {files}: cannot be read (truncated or corrupt): "
                f"{_message(error)}"
            ) from None
        if keras.backend.backend() == "tensorflow":
            return tensors
        return [tensor.numpy() for tensor in tensors]


def _message(error: BaseException) -> str:
    # Eager op errors carry the wrapped function's name and the op name: noise to a user.
    message = getattr(error, "message", None) or str(error)
    return re.sub(r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\]", "", message)


def dtype_name(dtype: Any) -> str:
    """A NumPy or TensorFlow dtype as a user knows it: "float32", "bfloat16", "string"..."""
    if hasattr(dtype, "as_numpy_dtype"):  # TensorFlow's, which also names strings "string"
        return dtype.name
    dtype = np.dtype(dtype)
    return "string" if dtype.kind in "US" else dtype.name


def is_float_dtype(name: str) -> bool:
    """Whether a :func:`dtype_name` names a floating-point type (bfloat16 and float8 included)."""
    return name.startswith(("float", "bfloat"))


def count_non_finite(value: Any) -> tuple[int, int]:
    """``(NaN count, inf count)`` of a float NumPy array or TensorFlow tensor.

    A healthy tensor costs one summing pass (a NaN or inf anywhere makes the sum
    non-finite; so may an overflow, which the exact count then clears), so loading a
    healthy checkpoint stays fast (about 50 ms for BERT-base's 400 MB).

    Example:
        >>> count_non_finite(np.array([1.0, np.nan, np.inf, -np.inf]))
        (1, 2)
    """
    value = np.asarray(value)  # a CPU tensor's buffer, not a copy
    with np.errstate(all="ignore"):  # inf - inf in the sum is what it is looking for
        if np.isfinite(value.sum()):
            return 0, 0
    return int(np.isnan(value).sum()), int(np.isinf(value).sum())


def open_source(
        checkpoint: str | os.PathLike[str] | dict[str, Any]) -> DictSource | FileSource:
    """A :class:`DictSource` for a dict, else a :class:`FileSource` for a path."""
    if isinstance(checkpoint, dict):
        return DictSource(checkpoint)
    return FileSource(checkpoint)


def write_checkpoint(variables: Mapping[str, np.ndarray],
                     prefix: str | os.PathLike[str]) -> str:
    """Writes ``{Google name: array}`` as a TensorFlow checkpoint, atomically.

    The files are written under a hidden temporary prefix in the same directory and
    renamed into place, the index last, so ``prefix`` never names a half-written
    checkpoint: after a crash it names the whole new checkpoint, or no loadable one.
    The free space is checked first; a folder made for the checkpoint is removed again
    when the write fails.

    Args:
        variables: variable name → array (float16/32/64, int, bool...).
        prefix: ``.../bert_model.ckpt``; its directory is created if needed.

    Returns:
        The prefix written.

    Raises:
        ValueError: ``prefix`` is a directory.
        kerasbert.disk_space.NoSpace: the disk has no room for the checkpoint (nothing written).

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> prefix = write_checkpoint({"bert/pooler/dense/bias": np.zeros(4, "float32")},
        ...                           os.path.join(folder, "x.ckpt"))
        >>> sorted(os.listdir(folder))
        ['x.ckpt.data-00000-of-00001', 'x.ckpt.index']
    """
    prefix = os.fspath(prefix)
    check_prefix(prefix)
    with disk_space.room_for(_folder(prefix), checkpoint_size(variables),
                        what=os.path.basename(prefix)), atomic_checkpoint(prefix) as temporary:
        save_variables(variables, temporary)
    return prefix


def check_prefix(prefix: str) -> None:
    """Refuses a checkpoint prefix that is a directory, or whose name is empty or hidden
    (``out/``: its files would be ``out/.index``); nothing is written.

    Raises:
        ValueError: ``checkpoint prefix in out: is a directory; give a prefix such as
            out/bert_model.ckpt``.
    """
    if os.path.isdir(prefix):
        raise ValueError(f"checkpoint prefix in {prefix}: is a directory; give a prefix such as "
                         f"{os.path.join(prefix, 'bert_model.ckpt')}")
    name = os.path.basename(prefix)
    if name in ("", ".", "..") or name.startswith("."):
        folder = prefix.rstrip("/" + os.sep) if name in ("", ".", "..") else \
            os.path.dirname(prefix)
        raise ValueError(f"checkpoint prefix in {prefix}: names no checkpoint file (its files "
                         f"would be {prefix}.index, hidden); give a prefix such as "
                         f"{os.path.join(folder or '.', 'bert_model.ckpt')}")


def checkpoint_size(variables: Mapping[str, Any]) -> int:
    """An upper bound of the bytes of a checkpoint of ``{name: array}`` (its data and index)."""
    arrays = [value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)
              for value in variables.values()]
    return disk_space.estimated_size(arrays, overhead=256)


def checkpoint_files(prefix: str) -> list[str]:
    """The files of the checkpoint at ``prefix`` that exist: its index and data shards."""
    index = [prefix + INDEX_SUFFIX] if os.path.lexists(prefix + INDEX_SUFFIX) else []
    return index + _data_files(prefix)


@contextlib.contextmanager
def atomic_checkpoint(prefix: str) -> Iterator[str]:
    """Yields a hidden temporary prefix beside ``prefix``; on success the checkpoint written
    there replaces the one at ``prefix`` (old index removed first, new index renamed
    last). On an exception the temporary files are removed, and so are the folders made
    for them; a full disk is raised as :class:`kerasbert.disk_space.NoSpace`."""
    temporary = temporary_name(prefix, suffix="")
    with files.making_folder(os.path.dirname(os.path.abspath(prefix))):
        try:
            with disk_space.no_space(_folder(prefix), what=os.path.basename(prefix)):
                yield temporary
                pause_point(f"write:{os.path.basename(prefix)}")
                _move_into_place(temporary, prefix)
        finally:
            for leftover in glob.glob(glob.escape(temporary) + "*"):
                os.remove(leftover)


def save_variables(variables: Mapping[str, Any], prefix: str) -> None:
    """Writes ``{name: array}`` at ``prefix`` with TensorFlow's ``SaveV2`` (not atomic: see
    :func:`atomic_checkpoint`)."""
    import tensorflow as tf

    names = sorted(variables)
    with tf.device("/cpu:0"):
        tf.raw_ops.SaveV2(
            prefix=prefix,
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[np.asarray(variables[name]) for name in names],
        )


def _folder(prefix: str) -> str:
    return os.path.dirname(prefix) or "."


def _move_into_place(temporary: str, prefix: str) -> None:
    # An old index beside new data would be a corrupt mix: it goes first, then the
    # old data shards, then the new data; the new index last makes the prefix valid.
    if os.path.exists(prefix + INDEX_SUFFIX):
        os.remove(prefix + INDEX_SUFFIX)
    for old in _data_files(prefix):
        os.remove(old)
    for new in _data_files(temporary):
        os.replace(new, prefix + new[len(temporary):])
    os.replace(temporary + INDEX_SUFFIX, prefix + INDEX_SUFFIX)
