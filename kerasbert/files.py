"""Atomic writes: a file or a folder appears whole under its final name, or not at all.

Everything is first written under a hidden temporary name beside its target
(``.<name>.kerasbert-tmp-<random><suffix>``) and renamed into place, so a run killed in
the middle of a write never leaves a half-written file under a name that is read
later. :func:`remove_temporaries` deletes what such a kill left behind; it only ever
matches names this module makes (the checkpoint writer uses them too). A write that
fails also removes the folders it created for its target, so a failed command leaves
no empty folder behind.

A full disk is one line, :class:`NoSpace` (``no space in runs/x: 12.3 MB needed for
model.keras, 1.1 MB free; ...``): a big write whose size is known checks the free space
first (:func:`check_space`), and every write here turns the disk filling up under it
(``ENOSPC``, or h5py's and TensorFlow's wording of it) into that error
(:func:`no_space`), the old file kept.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> write_json(os.path.join(folder, "labels.json"), ["negative", "positive"])
    >>> os.listdir(folder)          # the temporary file has become labels.json
    ['labels.json']
"""

import contextlib
import errno
import io
import json
import math
import os
import re
import shutil
import time
import uuid

import numpy as np

MARK = ".kerasbert-tmp-"
_TEMPORARY = re.compile(r"^\..+\.kerasbert-tmp-[0-9a-f]{8}")


def is_temporary(name):
    """Whether a file name is one of :func:`temporary_name`'s (left by a killed write)."""
    return bool(_TEMPORARY.match(name))


def pause_point(name):
    """Stops the process here while ``KERASBERT_PAUSE_AT`` names this point.

    Fault-injection hook for tests that ``kill -9`` a run at a known moment:
    ``KERASBERT_PAUSE_AT=backup-write@2`` pauses at the second time the backup is
    being written. The process prints ``paused at <name>`` to stderr and waits.
    """
    wanted = os.environ.get("KERASBERT_PAUSE_AT")
    if not wanted:
        return
    point, _, count = wanted.partition("@")
    if point != name:
        return
    _PAUSES[name] = _PAUSES.get(name, 0) + 1
    if count and _PAUSES[name] != int(count):
        return
    os.write(2, f"paused at {name}\n".encode())
    while True:
        time.sleep(60)


_PAUSES = {}


def temporary_name(path, suffix=None):
    """A hidden, unique name beside ``path``, ending in ``path``'s suffix (Keras checks it)."""
    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    if suffix is None:
        suffix = "".join(_suffixes(name))
    return os.path.join(directory, f".{name}{MARK}{uuid.uuid4().hex[:8]}{suffix}")


def _suffixes(name):
    # ".weights.h5" and ".tar.gz" are one suffix to the tools that read them.
    parts = name.split(".")
    if len(parts) > 2:
        return ["." + p for p in parts[-2:]]
    return ["." + parts[-1]] if len(parts) > 1 else []


def _readable_permissions(path):
    # mkstemp-style private files (0600): give them the permissions open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~umask)


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path beside ``path``; renames it to ``path`` on success.

    The folder of ``path`` is created if needed. On an exception the temporary file
    is removed, and so are the folders made for it; ``path`` keeps its old content. A
    full disk is raised as :class:`NoSpace`.
    """
    path = os.fspath(path)
    temporary = temporary_name(path)
    with making_folder(os.path.dirname(os.path.abspath(path))):
        try:
            with no_space(_folder_of(path), what=os.path.basename(path), written=temporary):
                yield temporary
                if os.path.exists(temporary):
                    _readable_permissions(temporary)
                pause_point(f"write:{os.path.basename(path)}")
                os.replace(temporary, path)
        finally:
            if os.path.lexists(temporary):
                os.remove(temporary)


@contextlib.contextmanager
def atomic_directory(path, create=True):
    """Yields a temporary folder path beside ``path``; on success it becomes ``path``.

    An existing ``path`` is replaced only once the new folder is complete: it is
    moved aside, the new one renamed into place, then the old one deleted. On an
    exception the temporary folder is removed, and so are the folders made for it. A
    full disk is raised as :class:`NoSpace`.

    Args:
        path: the folder to write.
        create: make the temporary folder (False: the caller's writer makes it).
    """
    path = os.fspath(path).rstrip(os.sep) or os.sep
    temporary = temporary_name(path, suffix="")
    with making_folder(os.path.dirname(os.path.abspath(path))):
        try:
            with no_space(_folder_of(path), what=os.path.basename(path), written=temporary):
                if create:
                    os.mkdir(temporary)
                yield temporary
                _readable_permissions(temporary)
                old = None
                if os.path.lexists(path):
                    old = temporary_name(path, suffix="")
                    os.replace(path, old)
                os.replace(temporary, path)
                if old:
                    shutil.rmtree(old, ignore_errors=True)
        finally:
            if os.path.lexists(temporary):
                shutil.rmtree(temporary, ignore_errors=True)


@contextlib.contextmanager
def making_folder(folder):
    """Creates ``folder`` and its missing parents for a write; if the write fails (an
    exception in the block, Ctrl-C included), removes those it created that are still
    empty, so that nothing of a failed command is left behind.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> try:
        ...     with making_folder(os.path.join(root, "new", "deeper")):
        ...         raise ValueError("the write failed")
        ... except ValueError:
        ...     os.listdir(root)
        []
    """
    folder = os.path.abspath(os.fspath(folder))
    created = []  # the deepest first
    probe = folder
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        created.append(probe)
        probe = os.path.dirname(probe)
    try:
        os.makedirs(folder, exist_ok=True)
        yield folder
    except BaseException:
        for made in created:
            try:
                os.rmdir(made)
            except OSError:  # not empty (someone else wrote there) or already gone
                break
        raise


# --------------------------------------------------------------------------- disk space
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

    def __init__(self, folder, free, *, needed=None, written=0, what=None, advice=None):
        super().__init__(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.folder, self.free, self.needed, self.written = folder, free, needed, written
        self.what, self.advice = what, advice

    def __str__(self):
        what = f" for {self.what}" if self.what else ""
        if self.needed is not None:
            amount = f"{format_bytes(self.needed)} needed{what}"
        elif self.written:
            amount = f"more than {format_bytes(self.written)} needed{what}"
        else:
            amount = "the disk filled up" + (f" while writing {self.what}" if self.what else "")
        advice = self.advice or "; free some space, then run the command again"
        return f"no space in {self.folder}: {amount}, {format_bytes(self.free)} free{advice}"


def format_bytes(count):
    """A byte count as disk tools show it: ``"512 bytes"``, ``"12.3 MB"`` (powers of 1000).

    Example:
        >>> format_bytes(12_345_678), format_bytes(999)
        ('12.3 MB', '999 bytes')
    """
    if count < 1000:
        return f"{count} bytes"
    for unit in ("kB", "MB", "GB", "TB"):
        count /= 1000
        if count < 999.95 or unit == "TB":
            return f"{count:.1f} {unit}"


def free_space(path):
    """Bytes free to this user on the filesystem of ``path`` (or of its nearest existing
    folder, for a path still to be made)."""
    path = os.path.abspath(os.fspath(path))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def space_needed(size):
    """The free bytes a write of ``size`` bytes asks for: ``size`` plus the margin."""
    return int(size + SPACE_MARGIN + size * SPACE_MARGIN_SHARE)


def estimated_size(arrays, overhead=4096):
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


def _itemsize(dtype):
    name = getattr(dtype, "name", None) or str(dtype)  # TensorFlow's dtypes, Keras's names
    try:
        return np.dtype(name).itemsize
    except TypeError:  # bfloat16 and float8 without ml_dtypes loaded: the bits in the name
        bits = re.search(r"(\d+)", name)
        return int(bits[1]) // 8 if bits else 8


def check_space(folder, size, what=None, advice=None):
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
def room_for(folder, size, what=None, advice=None):
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


def is_no_space(error):
    """Whether ``error`` says the disk or the user's quota is full: an ``OSError`` with
    ``ENOSPC`` or ``EDQUOT``, or an error of h5py or TensorFlow whose text says so."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    # kerasbert's own ValueErrors may quote such a text: they already say what happened.
    return not isinstance(error, ValueError) and bool(_NO_SPACE_TEXT.search(str(error)))


@contextlib.contextmanager
def no_space(folder, what=None, needed=None, advice=None, written=None):
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
                      written=_size_of(written) if written else 0) from error


def _size_of(path):
    """The bytes of a file, or of every file under a folder (0: nothing there)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(folder, name))
               for folder, _, names in os.walk(path) for name in names
               if os.path.isfile(os.path.join(folder, name)))


def _folder_of(path):
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

    def __init__(self, path):
        super().__init__()
        self.path = os.fspath(path)

    def __str__(self):
        return self.path

    def close(self):
        """Kept open: the writer closes the file it wrote, but its bytes are still to be
        saved."""

    def save(self):
        """Writes the bytes to the path; False where nothing was written into memory."""
        with self.getbuffer() as data:
            if not data.nbytes:
                return False
            with open(self.path, "wb") as f:
                f.write(data)
        return True


def write_text(path, text):
    """Writes ``text`` (UTF-8), atomically."""
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="") as f:
            f.write(text)


def write_json(path, value):
    """Writes ``value`` as pretty JSON, atomically."""
    write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def copy_file(source, path):
    """Copies ``source`` to ``path``, atomically."""
    with atomic_path(path) as temporary:
        shutil.copyfile(source, temporary)


def open_input(path, what, expected):
    """Opens a file the user named, for reading bytes, or says in one line why it cannot.

    Args:
        path: the file.
        what: what the file holds, quoted first in the message ("config", "vocab").
        expected: the usual file name (``"bert_config.json"``), named when ``path`` is
            a directory.

    Raises:
        ValueError: ``path`` is a directory
            (``config in ckpt: is a directory, expected bert_config.json``).
        FileNotFoundError: nothing at ``path`` (``config in ckpt/x.json: no such file``).

    Example:
        >>> with open_input("checkpoints/chinese_L-12_H-768_A-12/vocab.txt", "vocab",
        ...                 "vocab.txt") as f:
        ...     f.readline()
        b'[PAD]\\n'
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        inside = os.path.join(path, expected)
        hint = f" ({inside} is there)" if os.path.isfile(inside) else ""
        raise ValueError(f"{what} in {path}: is a directory, expected {expected}{hint}")
    try:
        return open(path, "rb")
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"{what} in {path}: no such file") from None


def remove_temporaries(directory):
    """Deletes the temporary files and folders a killed write left in ``directory``.

    Returns:
        The names removed.
    """
    removed = []
    if not os.path.isdir(directory):
        return removed
    for name in sorted(os.listdir(directory)):
        if is_temporary(name):
            found = os.path.join(directory, name)
            if os.path.isdir(found) and not os.path.islink(found):
                shutil.rmtree(found, ignore_errors=True)
            else:
                os.remove(found)
            removed.append(name)
    return removed
