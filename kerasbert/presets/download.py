"""Downloads a preset into the cache, never leaving a broken file in its place.

A preset's folder (``<cache>/presets/<name>``: ``bert_config.json``, ``vocab.txt``,
``bert_model.ckpt.*``, ``finetune_defaults.json``, ``preset.json``) appears whole or not at
all. A Google zip is fetched with ``requests`` into ``<cache>/downloads/<name>/`` as a
``.part`` file (resumed with an HTTP Range where an interrupted download left one), checked
(the table's SHA-256, else the server's MD5 ETag, and its length), unpacked into a temporary
folder beside the preset's and renamed into place. A Hugging Face repository is fetched with
``huggingface_hub`` (which resumes, and honours ``HF_ENDPOINT``): its config, vocabulary and
weights (``model.safetensors``, or ``tf_model.h5`` where the repository has only that),
each file checked against the hub's SHA-256 ETag, converted once to the Google format the
same way, by the converter the caller gives (``convert`` and the ``weights_files`` it reads:
this package knows no model; :func:`kerasbert.models.convert.download_preset` passes
kerasbert's). A ``filelock.FileLock`` per preset lets two processes ask for the same one: the
second waits, then finds it cached.

Every failure is a :class:`DownloadError` naming the preset and the URL; the preset's folder
is then left as it was (absent), and only the resumable ``.part`` stays in ``downloads/``
(folders left empty are removed). ``preset.json`` records the size and SHA-256 of every file
of the folder; each use checks them (:func:`damage`), and a folder with a file changed or
missing is named in a warning and downloaded again.

Example:
    >>> try:
    ...     download("no-such-model")
    ... except ValueError as error:
    ...     print(str(error).split(";")[0])
    preset 'no-such-model' in .../presets.json: unknown
"""

import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
import sys
import zipfile
from collections.abc import Callable, Sequence
from typing import Any, cast

from kerasbert import files
from kerasbert.presets import table

CHUNK = 1 << 13  # a connection that breaks off loses less than this
HUB = "https://huggingface.co"
HUB_FILES = ("config.json", "vocab.txt")  # then the first weights file the repository has
NEEDED = ("bert_config.json", "vocab.txt", "bert_model.ckpt.index")
MARKER = "preset.json"  # what the folder is and where it came from, written last


log = logging.getLogger(__name__)


class DownloadError(ValueError):
    """A preset could not be downloaded: ``preset <name> in <url>: <why>``."""


def _fail(preset: table.Preset, url: str, why: str) -> DownloadError:
    return DownloadError(f"preset {preset.name} in {url}: {why}")


def download(name: str, path: str | os.PathLike[str] | None = None, progress: bool = True,
             timeout: float = 60, convert: Callable[[str, str], object] | None = None,
             weights_files: Sequence[str] = ()) -> str:
    """The cached folder of preset ``name``, downloaded (and converted) on first use.

    Args:
        name: a preset of the table (:mod:`kerasbert.presets.table`).
        path: the table file; None: ``$KERASBERT_PRESETS`` or the shipped one.
        progress: draw a tqdm progress bar on stderr.
        timeout: seconds to wait for the server before giving up.
        convert: what makes a Hugging Face preset a Google checkpoint, called as
            ``convert(folder, prefix)`` on the folder of the repository's files; needed by a
            Hugging Face preset only (:func:`kerasbert.models.convert.download_preset`
            gives kerasbert's).
        weights_files: the weights files ``convert`` reads, in its order of preference: the
            first one the repository holds is fetched.

    Returns:
        The folder holding ``bert_config.json``, ``vocab.txt`` and ``bert_model.ckpt``.

    Raises:
        ValueError: ``name`` is no preset, or a Hugging Face preset and no converter given.
        DownloadError: no connection, an HTTP error, a checksum or length mismatch, a full
            disk, a zip or repository without the expected files (named, with the URL).
    """
    preset = table.get(name, path)
    if preset.kind == "hf" and (convert is None or not weights_files):
        # Refused even when cached: a call that works only until the cache is emptied is a bug.
        raise ValueError(f"preset {name!r} in {path or table.table_path()}: the Hugging Face "
                         f"repository {preset.hf} is converted to a Google checkpoint on "
                         "download, and no converter was given (convert= and weights_files=; "
                         "kerasbert.models.convert.download_preset gives kerasbert's)")
    final = table.preset_dir(name)
    if table.is_cached(name) and damage(name) is None:
        return final
    from filelock import FileLock

    locks = os.path.join(table.cache_home(), "locks")  # beside presets/, which holds only
    os.makedirs(locks, exist_ok=True)                   # whole folders
    with FileLock(os.path.join(locks, f"{name}.lock")):
        if table.is_cached(name):  # another process may have finished it meanwhile
            problem = damage(name)
            if problem is None:
                return final
            log.warning("preset %s in %s: %s; downloading it again", name, final, problem)
            _set_aside(final)
        files.remove_temporaries(os.path.dirname(final))
        staging = os.path.join(table.cache_home(), "downloads", name)
        try:
            if preset.kind == "zip":
                _from_zip(preset, final, staging, progress, timeout)
            else:  # a hub preset without a converter was refused above
                _from_hub(preset, final, staging, cast("Callable[[str, str], object]", convert),
                          weights_files)
        except BaseException:
            # A resumable .part stays; folders left empty go.
            _remove_empty(staging, os.path.dirname(staging), os.path.dirname(final))
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return final


def damage(name: str) -> str | None:
    """What is wrong with the cached folder of preset ``name`` (None: nothing), checked
    against the sizes and SHA-256 its ``preset.json`` recorded when it was downloaded: a
    file missing, or changed since (a flipped byte too). A folder from before they were
    recorded is checked for its needed files only."""
    folder = table.preset_dir(name)
    recorded = _read_json(os.path.join(folder, MARKER)).get("files")
    if not isinstance(recorded, dict):
        missing = [n for n in (*NEEDED, MARKER) if not os.path.isfile(os.path.join(folder, n))]
        return f"{missing[0]} is missing" if missing else None
    for file, entry in sorted(recorded.items()):
        path = os.path.join(folder, file)
        if not os.path.isfile(path):
            return f"{file} is missing"
        if files.fingerprint(path) != entry:
            return f"{file} changed since it was downloaded (its size or SHA-256)"
    return None


def _set_aside(folder: str) -> None:
    """Removes a damaged preset folder: renamed first (a kill leaves only a temporary)."""
    aside = files.temporary_name(folder, suffix="")
    os.replace(folder, aside)
    shutil.rmtree(aside, ignore_errors=True)


def _remove_empty(*folders: str) -> None:
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:  # not empty, or absent
            pass


# ---------------------------------------------------------------- a Google zip at a URL
def _from_zip(preset: table.Preset, final: str, staging: str, progress: bool,
              timeout: float) -> None:
    url = cast(str, preset.zip)  # a zip preset: the table gives it one
    part = os.path.join(staging, posixpath.basename(url) + ".part")
    os.makedirs(staging, exist_ok=True)
    etag = _fetch(preset, url, part, progress, timeout)
    _verify(preset, url, part, etag)
    _unpack(preset, url, part, final)


def _fetch(preset: table.Preset, url: str, part: str, progress: bool,
           timeout: float) -> str | None:
    """Fetches ``url`` into ``part``, resuming what is there; returns the server's ETag."""
    import requests
    from tqdm import tqdm

    meta_path = part + ".json"
    meta = _read_json(meta_path) if os.path.exists(part) else {}
    have = os.path.getsize(part) if meta.get("url") == url else 0
    headers = {}
    if have:
        # If-Range: the server sends the whole file again (200) if it changed since.
        headers = {"Range": f"bytes={have}-", **({"If-Range": meta["etag"]}
                                                  if meta.get("etag") else {})}
    try:
        with requests.get(url, headers=headers, stream=True, timeout=timeout) as response:
            if response.status_code == 416 and have:  # the .part is already whole
                return meta.get("etag")
            if response.status_code >= 400:
                raise _fail(preset, url, f"HTTP {response.status_code} {response.reason}")
            start = have if response.status_code == 206 else 0
            if response.status_code == 206 and not response.headers.get(
                    "Content-Range", "").startswith(f"bytes {have}-"):
                raise _fail(preset, url, "the server resumed at another byte; run again")
            length = response.headers.get("Content-Length")
            total = start + int(length) if length else None
            etag = response.headers.get("ETag")
            files.write_json(meta_path, {"url": url, "etag": etag, "total": total})
            with open(part, "ab" if start else "wb") as f, tqdm(
                    total=total, initial=start, unit="B", unit_scale=True, desc=preset.name,
                    file=sys.stderr, disable=not progress) as bar:
                for chunk in response.iter_content(CHUNK):
                    f.write(chunk)
                    bar.update(len(chunk))
    except requests.RequestException as error:
        raise _fail(preset, url, f"no connection or the download broke off ({_first(error)}); "
                                 "run again to resume") from None
    except OSError as error:  # a full disk, an unwritable cache
        raise _fail(preset, url, f"cannot write {part}: {error.strerror or error}") from None
    if total is not None and os.path.getsize(part) != total:
        raise _fail(preset, url, f"got {os.path.getsize(part)} of {total} bytes; run again to "
                                 "resume")
    return etag


def _verify(preset: table.Preset, url: str, part: str, etag: str | None) -> None:
    """Checks the download against the table's SHA-256, else an MD5 ETag; a mismatch
    removes it (the next try starts over)."""
    quoted = (etag or "").strip('"')
    if preset.sha256:
        kind, expected = "sha256", preset.sha256.lower()
    elif re.fullmatch(r"[0-9a-f]{32}", quoted):  # Google Storage's ETag of a plain upload
        kind, expected = "md5", quoted
    else:
        return
    found = _digest(part, kind)
    if found != expected:
        _remove(part, part + ".json")
        raise _fail(preset, url, f"checksum mismatch: {kind} {found}, expected {expected}; "
                                 "the download is removed")


def _unpack(preset: table.Preset, url: str, archive: str, final: str) -> None:
    """Extracts the folder of the zip that holds ``bert_config.json`` into ``final``."""
    try:
        with zipfile.ZipFile(archive) as zipped:
            members = [m for m in zipped.namelist() if not m.endswith("/")]
            configs = [m for m in members if posixpath.basename(m) == "bert_config.json"]
            inside = [m for m in members
                      if configs and posixpath.dirname(m) == posixpath.dirname(configs[0])]
            missing = [n for n in NEEDED if n not in {posixpath.basename(m) for m in inside}]
            if len(configs) != 1 or missing:
                raise _fail(preset, url, f"the zip lacks {', '.join(missing)} (it holds "
                                         f"{len(members)} files); the download is removed")
            with files.atomic_directory(final) as temporary:
                for member in inside:  # base names only: nothing lands outside the folder
                    with zipped.open(member) as source, open(
                            os.path.join(temporary, posixpath.basename(member)), "wb") as out:
                        shutil.copyfileobj(source, out)
                _finish(temporary, preset, url)
    except DownloadError:
        _remove(archive, archive + ".json")
        raise
    except (zipfile.BadZipFile, EOFError) as error:
        _remove(archive, archive + ".json")
        raise _fail(preset, url, f"not a readable zip ({error}); the download is "
                                 "removed") from None
    except OSError as error:
        raise _fail(preset, url, f"cannot unpack into {os.path.dirname(final)}: "
                                 f"{error.strerror or error}") from None


# ------------------------------------------------------------- a Hugging Face repository
def _from_hub(preset: table.Preset, final: str, staging: str,
              convert: Callable[[str, str], object], weights_files: Sequence[str]) -> None:
    from huggingface_hub.errors import EntryNotFoundError

    endpoint = (os.environ.get("HF_ENDPOINT") or HUB).rstrip("/")
    for filename in HUB_FILES:
        _fetch_from_hub(preset, filename, staging, endpoint)
    for filename in weights_files:  # the first one the repository holds
        try:
            _fetch_from_hub(preset, filename, staging, endpoint, absent_ok=True)
            break
        except EntryNotFoundError:
            continue
    else:
        raise _fail(preset, f"{endpoint}/{preset.hf}", f"no weights: the repository holds "
                                                      f"neither {' nor '.join(weights_files)}")
    url = f"{endpoint}/{preset.hf}"
    try:
        with files.atomic_directory(final) as temporary:
            convert(staging, os.path.join(temporary, "bert_model.ckpt"))
            _finish(temporary, preset, url)
    except (ValueError, OSError) as error:
        raise _fail(preset, url, f"cannot convert it: {_first(error)}") from None


def _fetch_from_hub(preset: table.Preset, filename: str, staging: str, endpoint: str,
                    absent_ok: bool = False) -> None:
    """Downloads one file of the preset's repository into ``staging``, checked against the
    hub's SHA-256 ETag; ``absent_ok``: a file the repository lacks raises the hub's
    ``EntryNotFoundError`` instead of a :class:`DownloadError`."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError

    repo = cast(str, preset.hf)  # a hub preset: the table gives it one
    url = hf_hub_url(repo, filename, revision=preset.revision, endpoint=endpoint)
    try:
        etag = get_hf_file_metadata(url).etag
        local = hf_hub_download(repo, filename, revision=preset.revision,
                                local_dir=staging, endpoint=endpoint)
    except EntryNotFoundError:
        if absent_ok:
            raise
        raise _fail(preset, url, "not in the repository") from None
    except Exception as error:  # the hub's errors have no common base: name each
        raise _fail(preset, url, f"{type(error).__name__}: {_first(error)}") from None
    # The hub's ETag of a large (LFS) file is its SHA-256.
    if etag and re.fullmatch(r"[0-9a-f]{64}", etag.strip('"')):
        found = _digest(local, "sha256")
        if found != etag.strip('"'):
            shutil.rmtree(staging, ignore_errors=True)
            raise _fail(preset, url, f"checksum mismatch: sha256 {found}, expected "
                                     f"{etag.strip(chr(34))}; the download is removed")


# ---------------------------------------------------------------------------- helpers
def _finish(folder: str, preset: table.Preset, url: str) -> None:
    """Writes the fine-tuning defaults and the marker into the folder about to be moved."""
    defaults = table.finetune_defaults(preset)
    if defaults:
        files.write_json(os.path.join(folder, table.DEFAULTS_FILE), defaults)
    files.write_json(os.path.join(folder, MARKER), {
        "name": preset.name, "source": url, "family": preset.family,
        "licence": preset.licence,
        # Checked on every use (damage): a file changed or missing is downloaded again.
        "files": {name: files.fingerprint(os.path.join(folder, name))
                  for name in sorted(os.listdir(folder)) if not files.is_temporary(name)}})


def _digest(path: str, kind: str) -> str:
    found = hashlib.new(kind)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            found.update(block)
    return found.hexdigest()


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _remove(*paths: str) -> None:
    for path in paths:
        if os.path.exists(path):
            os.remove(path)


def _first(error: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(error).split()) or type(error).__name__
