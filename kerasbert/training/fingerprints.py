"""What a run read and what it wrote, as SHA-256 fingerprints, so that a later command
notices a file that changed since.

A run records, in ``<run>/fingerprints.json``:

- ``inputs``: every file its options name as an input (the fields marked ``input`` in
  :mod:`kerasbert.training.options`: data files, config, vocabulary, the checkpoint's
  files), when the run starts. A resumed run refuses an input that changed: its epochs
  so far were trained on the old one, and the rest would mix two datasets.
- ``written``: the names (in the run directory) of the files and folders the run
  wrote, recorded when it starts, after each epoch and when it finishes; ``kept``: the
  files that were there before it (kept by ``--restart``), with their fingerprints.
  ``--restart`` removes only what ``written`` names, so a user's file in the folder stays.
- ``outputs``: the files of the finished run that later commands read (``model.keras``,
  ``labels.json``, ``vocab.txt``, ``train_config.json``, ...; not its history or
  pictures), when it finishes.
  ``evaluate``, ``predict`` and ``export`` refuse a run whose file was replaced: a
  different ``labels.json`` of the same size would silently rename every prediction.

In both cases ``accept_changed=True`` (``--accept-changed``) goes on with the new file and
says so in a warning; a resumed run records the new input's fingerprint, while
``evaluate``, ``predict`` and ``export`` write nothing into the run (the flag is needed
each time). Runs written before fingerprints were recorded have no file: nothing is
compared.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "labels.json")
    >>> files.write_json(path, ["negative", "positive"])
    >>> record_outputs(folder, finished_file="metrics.json")
    >>> files.write_json(path, ["positive", "negative"])     # the same size
    >>> check_outputs(folder)
    Traceback (most recent call last):
    ...
    kerasbert.training.fingerprints.ChangedFile: run file in ...labels.json: changed (same ...
"""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kerasbert import files
from kerasbert.files import fingerprint

if TYPE_CHECKING:
    from kerasbert.training.options import RunOptions

log = logging.getLogger(__name__)

FILE = "fingerprints.json"
#: Files of a run directory no later command reads: never compared (pictures neither).
_NOT_OUTPUTS = {FILE, "history.json", "history.csv"}
_PICTURES = (".png", ".svg", ".pdf")


class ChangedFile(ValueError):
    """A file a run read or wrote differs from the one it recorded."""


def input_files(options: RunOptions) -> dict[str, list[str]]:
    """``{field: [path, ...]}``: the files each input option of ``options`` names (a
    checkpoint prefix: its ``.index`` and ``.data-*`` files); options left out are absent."""
    found: dict[str, list[str]] = {}
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        if not field.metadata.get("input") or not value:
            continue
        paths = []
        for path in value if isinstance(value, (list, tuple)) else [value]:
            if field.metadata.get("input") == "checkpoint":
                paths += [path + ".index"] + sorted(glob.glob(glob.escape(path) + ".data-*"))
            else:
                paths.append(path)
        found[field.name] = [path for path in paths if os.path.isfile(path)]
    return found


def _read(folder: str) -> dict[str, Any] | None:
    path = os.path.join(folder, FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            recorded = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError):
        recorded = None
    if not isinstance(recorded, dict):
        raise ChangedFile(f"fingerprints in {path}: not the JSON object kerasbert wrote; was it "
                          "edited?")
    return recorded


def _write(folder: str, recorded: dict[str, Any]) -> None:
    files.write_json(os.path.join(folder, FILE), recorded)


def record_inputs(folder: str, options: RunOptions) -> None:
    """Records the fingerprints of the inputs of ``options`` (when the run starts; a
    resumed run keeps those recorded first, unless it accepted a change)."""
    recorded = _read(folder) or {}
    recorded["inputs"] = {name: [{"path": path, **fingerprint(path)} for path in paths]
                          for name, paths in input_files(options).items()}
    _write(folder, recorded)


def check_inputs(folder: str, options: RunOptions, accept_changed: bool = False) -> None:
    """Refuses an input of a resumed run that differs from the one the run started with.

    Args:
        folder: the run directory.
        options: the resumed run's options (the same paths as the run's, checked before).
        accept_changed: go on with the changed files (a warning; their new fingerprints
            are recorded when the run starts again).

    Raises:
        ChangedFile: ``input in train.tsv: changed since the run started (...)``.
    """
    recorded = (_read(folder) or {}).get("inputs")
    if recorded is None:
        return
    current = input_files(options)
    for name, entries in recorded.items():
        paths = current.get(name, [])
        for entry in entries:
            path = entry.get("path")
            why = _difference(entry, path if path in paths else None)
            if why is None:
                continue
            if accept_changed:
                log.warning("input in %s: %s; continuing with it (--accept-changed)", path, why)
                continue
            raise ChangedFile(
                f"input in {path}: {why} since the run started; its epochs so far were trained "
                "on the old file: pass --accept-changed to continue with the new one anyway, "
                "or --restart to train again from the start")


def check_base(folder: str, checkpoint: str, accept_changed: bool = False) -> None:
    """Refuses the base checkpoint of a finished LoRA run when it is gone or differs from
    the one the run was trained on (the ``checkpoint`` input it recorded): the run holds
    only its adapters and head, which fit that base alone.

    Raises:
        ChangedFile: ``base checkpoint in .../bert_model.ckpt.data-00000-of-00001: changed
            (same size, ...) since the LoRA run trained on it; ...``.
    """
    recorded = ((_read(folder) or {}).get("inputs") or {}).get("checkpoint") or []
    if not recorded:
        raise ChangedFile(f"base checkpoint in {os.path.join(folder, FILE)}: the LoRA run "
                          "recorded no fingerprint of its checkpoint, so its base cannot be "
                          "checked; is it a kerasbert run directory?")
    for entry in recorded:
        path = entry.get("path")
        why = _difference(entry, path)
        if why is None:
            continue
        if accept_changed and why != "removed":
            log.warning("base checkpoint in %s: %s; using it (--accept-changed)", path, why)
            continue
        advice = ("put it back where it was" if why == "removed" else
                  "put the run's own checkpoint back, or pass --accept-changed to use this one")
        raise ChangedFile(f"base checkpoint in {path}: {why} since the LoRA run trained on it; "
                          f"the run holds only its adapters and head, which fit that checkpoint "
                          f"alone: {advice}")


def record_kept(folder: str, names: Iterable[str]) -> None:
    """Records ``names`` (in ``folder``, left there by ``--restart``) as files the run did
    not write, with their fingerprints (a folder: none)."""
    recorded = _read(folder) or {}
    recorded["kept"] = {name: (fingerprint(os.path.join(folder, name))
                               if os.path.isfile(os.path.join(folder, name)) else {})
                        for name in names}
    _write(folder, recorded)


def _kept_unchanged(recorded: dict[str, Any], folder: str) -> set[str]:
    """The kept names whose file the run has not replaced since it started."""
    kept = recorded.get("kept") or {}
    return {name for name, entry in kept.items()
            if not entry or _difference(entry, os.path.join(folder, name)) is None}


def record_written(folder: str) -> None:
    """Adds the names now in ``folder`` (but the files kept from before the run) to the
    names the run wrote."""
    recorded = _read(folder) or {}
    kept = _kept_unchanged(recorded, folder)
    written = set(recorded.get("written") or [])
    written.update(name for name in os.listdir(folder)
                   if not files.is_temporary(name) and name not in kept)
    written.add(FILE)
    recorded["written"] = sorted(written)
    _write(folder, recorded)


def written_names(folder: str) -> set[str]:
    """The names the run in ``folder`` recorded as written (a run from before they were
    recorded: the first part of each of its outputs' names)."""
    recorded = _read(folder) or {}
    names = recorded.get("written")
    if isinstance(names, list):
        return set(names)
    return {name.split(os.sep)[0] for name in recorded.get("outputs") or {}}


def record_outputs(folder: str, finished_file: str) -> None:
    """Records the fingerprints of the files a finished run leaves for later commands
    (every file of ``folder`` but the backup, the history and ``finished_file``)."""
    recorded = _read(folder) or {}
    kept = _kept_unchanged(recorded, folder)
    recorded["outputs"] = {name: fingerprint(os.path.join(folder, name))
                           for name in _outputs(folder, finished_file)
                           if name.split(os.sep)[0] not in kept}
    _write(folder, recorded)


def _outputs(folder: str, finished_file: str) -> list[str]:
    names = []
    for root, directories, names_here in os.walk(folder):
        directories[:] = sorted(d for d in directories
                                if d != "backup" and not files.is_temporary(d))
        for name in sorted(names_here):
            relative = os.path.relpath(os.path.join(root, name), folder)
            if (relative not in _NOT_OUTPUTS and relative != finished_file
                    and not name.endswith(_PICTURES) and not files.is_temporary(name)):
                names.append(relative)
    return names


def check_outputs(folder: str, accept_changed: bool = False) -> None:
    """Refuses a finished run whose recorded file was replaced or edited since it finished
    (a file removed since is left to the command that reads it).

    Raises:
        ChangedFile: ``run file in runs/x/labels.json: changed since the run finished ...``.
    """
    recorded = (_read(folder) or {}).get("outputs")
    for name, entry in sorted((recorded or {}).items()):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        why = _difference(entry, path)
        if why is None:
            continue
        if not accept_changed:
            raise ChangedFile(
                f"run file in {path}: {why} since the run finished; its model was trained with "
                "the old one and would give wrong answers: put it back, or pass "
                "--accept-changed to use the run as it is now")
        log.warning("run file in %s: %s; using it (--accept-changed)", path, why)


def _difference(entry: dict[str, Any], path: str | None) -> str | None:
    """None if ``path`` has ``entry``'s fingerprint, else what differs, in words."""
    if path is None or not os.path.isfile(path):
        return "removed"
    size = os.path.getsize(path)
    if size != entry.get("size"):
        return f"changed (was {entry.get('size')} bytes, now {size})"
    if fingerprint(path)["sha256"] != entry.get("sha256"):
        return f"changed (same size, {size} bytes, other content)"
    return None
