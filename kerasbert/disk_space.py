"""Disk space: a full disk is one line, the previous state kept.

:class:`NoSpace` reads ``no space in runs/x: 12.3 MB needed for model.keras, 1.1 MB free;
...``. A big write whose size is known checks the free space first (:func:`check_space`,
:func:`room_for`, with :func:`estimated_size` of its arrays); a disk that fills up during a
write (``ENOSPC``, or h5py's and TensorFlow's wording of it) is raised as the same error
(:func:`no_space`). :class:`MemoryFile` builds an HDF5 file in memory where the disk is
nearly full, since HDF5 cannot recover from a disk that fills up inside a file.
"""

import contextlib
import errno
import io
import math
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

#: Kept free beyond what a write is estimated to take: the filesystem's block rounding,
#: the small files written with a big one (state, history) and the estimate's error.
SPACE_MARGIN = 1 << 20
SPACE_MARGIN_SHARE = 0.01  # and 1% of the write itself
#: The end of a message about a write that found no room and left everything as it was.
NOTHING_WRITTEN = "; nothing was written: free some space, then run the command again"
# How a full disk (or quota) reads in h5py's and TensorFlow's errors.
_NO_SPACE_TEXT = re.compile(r"No space left on device|Disk quota exceeded|errno = (28|122)\b")


class NoSpace(OSError):
    """Too little free space for a write: an ``OSError`` with ``errno.ENOSPC`` whose text is
    one line, ``no space in runs/x: 12.3 MB needed for model.keras, 1.1 MB free; ...``.

    Attributes:
        folder: where the write went, as the user named it.
        free: bytes free there (when the error was raised).
        needed: bytes the write needs, margin included; None where only ``written`` (the
            bytes written before the disk filled up) is known.
    """

    def __init__(self, folder: str | os.PathLike[str], free: int, *, needed: int | None = None,
                 written: int = 0, what: str | None = None, advice: str | None = None) -> None:
        super().__init__(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.folder, self.free, self.needed, self.written = folder, free, needed, written
        self.what, self.advice = what, advice

    def __str__(self) -> str:
        what = f" for {self.what}" if self.what else ""
        if self.needed is not None:
            amount = f"{format_bytes(self.needed)} needed{what}"
        elif self.written:
            amount = f"more than {format_bytes(self.written)} needed{what}"
        else:
            amount = "the disk filled up" + (f" while writing {self.what}" if self.what else "")
        advice = self.advice or "; free some space, then run the command again"
        return f"no space in {self.folder}: {amount}, {format_bytes(self.free)} free{advice}"


def format_bytes(count: float) -> str:
    """A byte count as disk tools show it: ``"512 bytes"``, ``"12.3 MB"`` (powers of 1000).

    Example:
        >>> format_bytes(12_345_678), format_bytes(999)
        ('12.3 MB', '999 bytes')
    """
    if count < 1000:
        return f"{count} bytes"
    for unit in ("kB", "MB", "GB"):
        count /= 1000
        if count < 999.95:
            return f"{count:.1f} {unit}"
    return f"{count / 1000:.1f} TB"


def free_space(path: str | os.PathLike[str]) -> int:
    """Bytes free to this user on the filesystem of ``path`` (or of its nearest existing
    folder, for a path still to be made)."""
    path = os.path.abspath(os.fspath(path))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def space_needed(size: float) -> int:
    """The free bytes a write of ``size`` bytes asks for: ``size`` plus the margin."""
    return int(size + SPACE_MARGIN + size * SPACE_MARGIN_SHARE)


def estimated_size(arrays: Iterable[Any], overhead: int = 4096) -> int:
    """An upper bound of the bytes a file of ``arrays`` takes: their bytes, ``overhead``
    bytes for each one (its name, shape and layout) and 64 KiB for the file.

    Measured overheads per array: HDF5 (``.weights.h5``, a ``.keras`` file) under 2.5 kB, a
    TensorFlow checkpoint under 100 bytes.

    Args:
        arrays: anything with a ``shape`` and a ``dtype``: NumPy arrays, Keras or TensorFlow
            variables.

    Example:
        >>> estimated_size([np.zeros((1000, 16), "float32")], overhead=0)
        129536
    """
    return 65536 + sum(overhead + math.prod(array.shape) * _itemsize(array.dtype)
                       for array in arrays)


def _itemsize(dtype: Any) -> int:
    name = getattr(dtype, "name", None) or str(dtype)  # TensorFlow's dtypes, Keras's names
    try:
        return np.dtype(name).itemsize
    except TypeError:  # bfloat16 and float8 without ml_dtypes loaded: the bits in the name
        bits = re.search(r"(\d+)", name)
        return int(bits[1]) // 8 if bits else 8


def check_space(folder: str | os.PathLike[str], size: float, what: str | None = None,
                advice: str | None = None) -> None:
    """Refuses a write of ``size`` bytes into ``folder`` before it starts, when its
    filesystem has less than :func:`space_needed` free.

    Raises:
        NoSpace: ``no space in runs/x: 2.4 MB needed for model.keras, 1.1 MB free; ...``.
    """
    needed = space_needed(size)
    free = free_space(folder)
    if free < needed:
        raise NoSpace(folder, free, needed=needed, what=what, advice=advice)


@contextlib.contextmanager
def room_for(folder: str | os.PathLike[str], size: float, what: str | None = None,
             advice: str | None = None) -> Iterator[None]:
    """Checks that ``folder`` has room for a write of about ``size`` bytes
    (:func:`check_space`), then runs the block, raising a disk that fills up in it all the
    same as :class:`NoSpace` (:func:`no_space`).

    Example::

        with room_for("runs/x", estimated_size(model.weights), what="model.keras"):
            model.save("runs/x/model.keras")
    """
    check_space(folder, size, what=what, advice=advice)
    with no_space(folder, what=what, needed=space_needed(size), advice=advice):
        yield


def is_no_space(error: BaseException) -> bool:
    """Whether ``error`` says the disk or the user's quota is full: an ``OSError`` with
    ``ENOSPC`` or ``EDQUOT``, or an error of h5py or TensorFlow whose text says so."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    # kerasbert's own ValueErrors may quote such a text: they already say what happened.
    return not isinstance(error, ValueError) and bool(_NO_SPACE_TEXT.search(str(error)))


@contextlib.contextmanager
def no_space(folder: str | os.PathLike[str], what: str | None = None,
             needed: int | None = None, advice: str | None = None,
             written: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Raises a full disk inside the block as one :class:`NoSpace` about ``folder``.

    A :class:`NoSpace` raised deeper (by an inner write) takes this block's ``folder``,
    ``what``, ``needed`` and ``advice`` where they are given (the outer block knows better
    what the user asked for), and the free space once the inner write's temporaries are
    removed.

    Args:
        folder: the folder named in the message.
        what: what was being written (``"model.keras"``).
        needed: the bytes the write needs, if known.
        advice: the end of the message (default: free some space and run again).
        written: a file or folder whose size, when the disk fills up, is what was written.

    Example::

        with no_space("runs/x", what="model.keras"):
            model.save("runs/x/model.keras")
    """
    try:
        yield
    except NoSpace as error:
        for name, value in (("folder", folder), ("what", what), ("needed", needed),
                            ("advice", advice)):
            if value is not None:
                setattr(error, name, value)
        error.free = free_space(error.folder)  # the inner write's temporaries are gone now
        raise
    except Exception as error:
        if not is_no_space(error):
            raise
        raise NoSpace(folder, free_space(folder), needed=needed, what=what, advice=advice,
                      written=size_of(written) if written else 0) from error


def size_of(path: str | os.PathLike[str]) -> int:
    """The bytes of a file, or of every file under a folder (0: nothing there)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(folder, name))
               for folder, _, names in os.walk(path) for name in names
               if os.path.isfile(os.path.join(folder, name)))


def folder_of(path: str | os.PathLike[str]) -> str:
    """The folder of ``path`` as the user wrote it (``runs/x`` for ``runs/x/model.keras``)."""
    return os.path.dirname(os.fspath(path).rstrip(os.sep)) or "."


class MemoryFile(io.BytesIO):
    """A file in memory whose ``str()`` is a path, for a writer that insists on a file name.

    Keras's ``save_weights`` wants a name ending in ``.weights.h5`` but also takes a
    ``BytesIO``: given one of these, it writes the HDF5 file into memory, and
    :meth:`save` puts the bytes on disk in one plain write. HDF5 cannot recover from a
    disk that fills up in the middle of a file (every later call fails and the process
    crashes when it exits); a plain write fails cleanly. A Keras that turns the name into
    a string writes to the path itself and leaves this empty.

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.weights.h5")
        >>> memory = MemoryFile(path)
        >>> memory.write(b"bytes"), str(memory) == path
        (5, True)
        >>> memory.save(), open(path, "rb").read()
        (True, b'bytes')
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = os.fspath(path)

    def __str__(self) -> str:
        return self.path

    def close(self) -> None:
        """Kept open: the writer closes the file it wrote, but its bytes are still to be
        saved."""

    def save(self) -> bool:
        """Writes the bytes to the path; False where nothing was written into memory."""
        with self.getbuffer() as data:
            if not data.nbytes:
                return False
            with open(self.path, "wb") as f:
                f.write(data)
        return True
