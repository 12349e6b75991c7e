"""Atomic writes: a file or a folder appears whole under its final name, or not at all.

Everything is first written under a hidden temporary name beside its target
(``.<name>.kerasbert-tmp-<random><suffix>``) and renamed into place, so a run killed in
the middle of a write never leaves a half-written file under a name that is read
later. :func:`remove_temporaries` deletes what such a kill left behind; it only ever
matches names this module makes (the checkpoint writer uses them too). A write that
fails also removes the folders it created for its target, so a failed command leaves
no empty folder behind.

Every write here turns the disk filling up under it into one line, the old file kept
(:func:`kerasbert.disk_space.no_space`).

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> write_json(os.path.join(folder, "labels.json"), ["negative", "positive"])
    >>> os.listdir(folder)          # the temporary file has become labels.json
    ['labels.json']
"""

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO

from kerasbert.disk_space import folder_of, no_space

MARK = ".kerasbert-tmp-"
_TEMPORARY = re.compile(r"^\..+\.kerasbert-tmp-[0-9a-f]{8}")


def is_temporary(name: str) -> bool:
    """Whether a file name is one of :func:`temporary_name`'s (left by a killed write)."""
    return bool(_TEMPORARY.match(name))


def pause_point(name: str) -> None:
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


_PAUSES: dict[str, int] = {}


def temporary_name(path: str | os.PathLike[str], suffix: str | None = None) -> str:
    """A hidden, unique name beside ``path``, ending in ``path``'s suffix (Keras checks it)."""
    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    if suffix is None:
        suffix = "".join(_suffixes(name))
    return os.path.join(directory, f".{name}{MARK}{uuid.uuid4().hex[:8]}{suffix}")


def _suffixes(name: str) -> list[str]:
    # ".weights.h5" and ".tar.gz" are one suffix to the tools that read them.
    parts = name.split(".")
    if len(parts) > 2:
        return ["." + p for p in parts[-2:]]
    return ["." + parts[-1]] if len(parts) > 1 else []


def _readable_permissions(path: str) -> None:
    # mkstemp-style private files (0600): give them the permissions open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~umask)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yields a temporary path beside ``path``; renames it to ``path`` on success.

    The folder of ``path`` is created if needed. On an exception the temporary file
    is removed, and so are the folders made for it; ``path`` keeps its old content. A
    full disk is raised as :class:`~kerasbert.disk_space.NoSpace`.
    """
    path = os.fspath(path)
    temporary = temporary_name(path)
    with making_folder(os.path.dirname(os.path.abspath(path))):
        try:
            with no_space(folder_of(path), what=os.path.basename(path), written=temporary):
                yield temporary
                if os.path.exists(temporary):
                    _readable_permissions(temporary)
                pause_point(f"write:{os.path.basename(path)}")
                os.replace(temporary, path)
        finally:
            if os.path.lexists(temporary):
                os.remove(temporary)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str], create: bool = True) -> Iterator[str]:
    """Yields a temporary folder path beside ``path``; on success it becomes ``path``.

    An existing ``path`` is replaced only once the new folder is complete: it is
    moved aside, the new one renamed into place, then the old one deleted. On an
    exception the temporary folder is removed, and so are the folders made for it. A
    full disk is raised as :class:`~kerasbert.disk_space.NoSpace`.

    Args:
        path: the folder to write.
        create: make the temporary folder (False: the caller's writer makes it).
    """
    path = os.fspath(path).rstrip(os.sep) or os.sep
    temporary = temporary_name(path, suffix="")
    with making_folder(os.path.dirname(os.path.abspath(path))):
        try:
            with no_space(folder_of(path), what=os.path.basename(path), written=temporary):
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
def making_folder(folder: str | os.PathLike[str]) -> Iterator[str]:
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


def fingerprint(path: str | os.PathLike[str]) -> dict[str, int | str]:
    """``{"size", "sha256"}`` of a file's bytes (read in 1 MiB pieces)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return {"size": os.path.getsize(path), "sha256": digest.hexdigest()}


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Writes ``text`` (UTF-8), atomically."""
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="") as f:
            f.write(text)


def write_json(path: str | os.PathLike[str], value: Any) -> None:
    """Writes ``value`` as pretty JSON, atomically."""
    write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def copy_file(source: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Copies ``source`` to ``path``, atomically."""
    with atomic_path(path) as temporary:
        shutil.copyfile(source, temporary)


def open_input(path: str | os.PathLike[str], what: str, expected: str) -> BinaryIO:
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


def remove_temporaries(directory: str | os.PathLike[str]) -> list[str]:
    """Deletes the temporary files and folders a killed write left in ``directory``.

    Returns:
        The names removed.
    """
    removed: list[str] = []
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
