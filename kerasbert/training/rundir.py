"""The run directory of a training run: checked first, backed up each epoch, finished last.

One lifecycle for fine-tuning and pretraining::

    <run>/<options file>     the options, written before the first step
    <run>/backup/epoch-NNNN/ weights, optimizer and progress after epoch NNNN (the newest only)
    <run>/history.json       the metrics of every finished epoch
    <run>/<finished file>    written last: its presence marks a finished run

A run killed at any moment is continued by ``resume=True`` with the same options: a
backup folder appears whole or not at all (it is renamed into place), the previous
one is removed only after the new one is complete, and the backup is deleted only
after the finished file is written, so a run killed while finishing finishes on
resume instead of starting again.
"""

import dataclasses
import json
import os
import shutil

from kerasbert import files
from kerasbert.files import pause_point

BACKUP = "backup"
HISTORY = "history.json"
_STATE = "state.json"
_WEIGHTS = "training.weights.h5"


#: The options file and the finished file of a fine-tuning run (``kerasbert train``).
TRAIN_OPTIONS_FILE = "train_config.json"
TRAIN_FINISHED_FILE = "metrics.json"


class RunError(ValueError):
    """A run directory that cannot be used as asked; the message says what to do."""


def _nearest_existing(path):
    path = os.path.abspath(path)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_writable(path, flag="--output"):
    """Refuses a folder that cannot be created or written, before any work is done.

    Nothing is created: the nearest existing folder on the way is checked instead.

    Raises:
        RunError: ``output in runs/x: a file is in the way (runs is a file)``.
    """
    existing = _nearest_existing(path)
    shown = existing if os.path.isabs(path) else os.path.relpath(existing)
    if existing == os.path.abspath(path) and os.path.exists(path):
        if not os.path.isdir(path):
            raise RunError(f"{flag} in {path}: is a file, not a directory")
    elif not os.path.isdir(existing):
        raise RunError(f"{flag} in {path}: cannot create it, {shown} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunError(f"{flag} in {path}: cannot write there (no permission on {shown})")


def check_export_target(directory, run_dir=None):
    """Refuses an export folder that is the run directory (if any), holds it, or cannot be
    written.

    Raises:
        RunError: ``--to in runs/x: is the run directory or holds it; ...``.
    """
    target = os.path.realpath(directory)
    run = os.path.realpath(run_dir) if run_dir is not None else None
    if run is not None and (target == run or run.startswith(target.rstrip(os.sep) + os.sep)):
        raise RunError(f"--to in {directory}: is the run directory or holds it; export to a "
                       "new directory")
    check_writable(directory, flag="--to")


@dataclasses.dataclass
class RunDirectory:
    """A run directory and the names of its two marker files.

    Args:
        path: the directory.
        options_file: where the options are saved (``train_config.json``).
        finished_file: written last by a finished run (``metrics.json``).
    """

    path: str
    options_file: str
    finished_file: str

    def file(self, name):
        return os.path.join(self.path, name)

    @property
    def finished(self):
        return os.path.exists(self.file(self.finished_file))

    @property
    def started(self):
        return (os.path.exists(self.file(self.options_file))
                or os.path.isdir(self.file(BACKUP)))

    def check(self, options, resume):
        """Refuses what would lose or mix results; nothing is written.

        Raises:
            RunError: a finished run; an interrupted one without ``resume``; ``resume``
                with nothing to continue or with other options than the run's; a
                folder of other files.
        """
        check_writable(self.path)
        if self.finished:
            # A kill after the finished file, before the backup was removed, left it behind.
            shutil.rmtree(self.file(BACKUP), ignore_errors=True)
            raise RunError(f"--output in {self.path}: holds a finished run; "
                           "choose a new --output")
        if resume:
            if not self.started:
                raise RunError(f"--resume in {self.path}: no interrupted run to continue; "
                               "leave out --resume to start one")
            self._check_same_options(options)
            return
        if self.started:
            raise RunError(f"--output in {self.path}: holds an interrupted run; pass --resume "
                           "to continue it, or choose another --output")
        if os.path.isdir(self.path) and [n for n in os.listdir(self.path)
                                         if not files.is_temporary(n)]:
            raise RunError(f"--output in {self.path}: is not empty and holds no kerasbert run; "
                           "choose a new or empty directory")

    def _check_same_options(self, options):
        path = self.file(self.options_file)
        if not os.path.exists(path):
            return  # killed before its options were written: nothing to compare
        saved = read_json(path, "options")
        current = json.loads(json.dumps(dataclasses.asdict(options)))  # tuples as saved: lists
        changed = [key for key in current if key != "resume" and saved.get(key) != current[key]]
        if changed:
            shown = ", ".join(f"{key} ({saved.get(key)!r} -> {current[key]!r})"
                              for key in changed)
            raise RunError(f"--resume in {self.path}: the run's options differ ({shown}); "
                           f"a resumed run keeps the options in its {self.options_file}")

    def start(self, options):
        """Creates the directory, clears what a kill left behind, saves the options."""
        os.makedirs(self.path, exist_ok=True)
        files.remove_temporaries(self.path)
        files.remove_temporaries(self.file(BACKUP))
        if not os.path.exists(self.file(self.options_file)):
            files.write_json(self.file(self.options_file), dataclasses.asdict(options))

    # ------------------------------------------------------------------ backup
    def backup_state(self):
        """``{"epoch", "done"}`` of the newest complete backup, or None."""
        found = self._backups()
        if not found:
            return None
        return read_json(os.path.join(found[-1], _STATE), "backup state")

    def _backups(self):
        folder = self.file(BACKUP)
        if not os.path.isdir(folder):
            return []
        return [os.path.join(folder, name) for name in sorted(os.listdir(folder))
                if name.startswith("epoch-")
                and os.path.exists(os.path.join(folder, name, _STATE))]

    def resume_files(self):
        """What a resumed run reads, as paths relative to the run directory: the newest
        backup's files and the history (sent to the other workers of a multi-worker run)."""
        found = self._backups()
        names = [os.path.relpath(os.path.join(found[-1], name), self.path)
                 for name in sorted(os.listdir(found[-1]))] if found else []
        if os.path.exists(self.file(HISTORY)):
            names.append(HISTORY)
        return names

    def write_backup(self, model, epoch, done):
        """Backs up weights and optimizer after ``epoch`` (1-based) epochs, atomically."""
        target = self.file(os.path.join(BACKUP, f"epoch-{epoch:04d}"))
        with files.atomic_directory(target) as temporary:
            model.save_weights(os.path.join(temporary, _WEIGHTS))
            pause_point("backup-write")
            files.write_json(os.path.join(temporary, _STATE), {"epoch": epoch, "done": done})
        pause_point("backup-written")
        for older in self._backups():
            if older != target:
                shutil.rmtree(older, ignore_errors=True)

    def restore_backup(self, model):
        """Loads the newest backup's weights and optimizer into ``model``; its state or None."""
        found = self._backups()
        if not found:
            return None
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        weights = os.path.join(found[-1], _WEIGHTS)
        try:
            model.load_weights(weights)
        except (OSError, ValueError) as error:
            raise RunError(f"backup in {weights}: cannot be read ({error}); the run cannot be "
                           "resumed, start it again with a new --output") from None
        return read_json(os.path.join(found[-1], _STATE), "backup state")

    def close(self):
        """After the finished file is written: the backup is no longer needed."""
        pause_point("backup-removal")
        shutil.rmtree(self.file(BACKUP), ignore_errors=True)


def read_json(path, what):
    """A JSON file of a run; a missing or corrupt one is a one-line :class:`RunError`."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise RunError(f"{what} in {path}: the file is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RunError(f"{what} in {path}: not valid JSON ({error})") from None


def check_finished(run_dir, options_file=TRAIN_OPTIONS_FILE, finished_file=TRAIN_FINISHED_FILE):
    """Raises unless ``run_dir`` holds a finished run (``finished_file`` written last).

    Raises:
        RunError: no directory, a file, an unfinished run (how to continue it), or not a
            run directory.
    """
    if not os.path.isdir(run_dir):
        what = ("is a file, not a run directory" if os.path.exists(run_dir)
                else "no such directory")
        raise RunError(f"run in {run_dir}: {what}")
    directory = RunDirectory(run_dir, options_file, finished_file)
    if not directory.finished:
        if directory.started:
            raise RunError(f"run in {run_dir}: not finished; continue it with "
                           f"kerasbert train --resume --output {run_dir}")
        raise RunError(f"run in {run_dir}: not a kerasbert run directory "
                       f"(no {finished_file})")


def load_run_model(run_dir):
    """The best model of a run, ``model.keras``, loaded with ``safe_mode=True``.

    Raises:
        RunError: no ``model.keras``, or one that is truncated or corrupt.
    """
    import keras

    path = os.path.join(run_dir, "model.keras")
    if not os.path.exists(path):
        raise RunError(f"model in {run_dir}: no model.keras; is it a kerasbert run directory?")
    try:
        return keras.saving.load_model(path, safe_mode=True)
    except Exception as error:  # Keras raises ValueError, OSError, zipfile and h5py errors
        # Keras calls a file it cannot open as a zip "not found": do not repeat that.
        reason = (str(error).strip().splitlines() or [""])[0]
        detail = "" if not reason or "not found" in reason.lower() else f" ({reason[:200]})"
        raise RunError(f"model in {path}: cannot be loaded, the file is truncated or "
                       f"corrupt{detail}") from None
