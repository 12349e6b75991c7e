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
resume instead of starting again. ``restart=True`` starts a stopped or finished run
again in place, keeping nothing of it.

While a process trains in a run directory it holds an OS lock on it (``flock`` of the
folder, released by the kernel when the process ends, ``kill -9`` included): a second
process that would train there is refused, naming the holder's pid. The inputs a run
read and the files it wrote are fingerprinted (:mod:`kerasbert.training.fingerprints`).
"""

import dataclasses
import json
import logging
import os
import shutil
from typing import TYPE_CHECKING, Any

from kerasbert import disk_space, files
from kerasbert.checkpoints.io import checkpoint_size
from kerasbert.files import pause_point
from kerasbert.training import fingerprints
from kerasbert.training.options import running_precision, saved_values

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; runs are not guarded there
    fcntl = None  # type: ignore[assignment]

BACKUP = "backup"
HISTORY = "history.json"
_STATE = "state.json"
_WEIGHTS = "training.weights.h5"


#: A run's model at its best epoch: the whole model, or a LoRA run's adapters and head
#: (:func:`kerasbert.models.lora.save_adapters`), its base read again from the checkpoint.
MODEL_FILE = "model.keras"
ADAPTERS_FILE = "adapters.lora.h5"

#: The options file and the finished file of a fine-tuning run (``kerasbert train``).
TRAIN_OPTIONS_FILE = "train_config.json"
TRAIN_FINISHED_FILE = "metrics.json"
#: Those of a pretraining run (``kerasbert pretrain``).
PRETRAIN_OPTIONS_FILE = "pretrain_config.json"
PRETRAIN_FINISHED_FILE = "pretrain_metrics.json"


#: The ``event`` of the log record a run makes when its checks have passed and it starts
#: (the command line shows the warnings it held back until then).
STARTED = "run started"

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from kerasbert.training.options import RunOptions


class RunError(ValueError):
    """A run directory that cannot be used as asked; the message says what to do."""


def _nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_writable(path: str, flag: str = "--output") -> None:
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


def check_export_target(directory: str, run_dir: str | None = None) -> None:
    """Refuses a folder to write an export or a converted checkpoint into, before anything
    is written: the run directory (if any) or one holding it, a kerasbert run directory or
    a folder inside one (its files are the run's: a new file there would be lost to
    ``--restart``, a replaced one would change what the run says it wrote), or a folder
    that cannot be written.

    A run directory is known by its options file (``train_config.json``,
    ``pretrain_config.json``) or its fingerprints, written when it starts, or its
    ``history.json``.

    Raises:
        RunError: ``--to in runs/x/serving: is inside the kerasbert run directory runs/x
            (it holds train_config.json); ...``.
    """
    target = os.path.realpath(directory)
    run = os.path.realpath(run_dir) if run_dir is not None else None
    if run is not None and (target == run or run.startswith(target.rstrip(os.sep) + os.sep)):
        raise RunError(f"--to in {directory}: is the run directory or holds it; export to a "
                       "new directory")
    folder = os.path.realpath(_nearest_existing(directory))
    while True:
        marker = next((name for name in (TRAIN_OPTIONS_FILE, PRETRAIN_OPTIONS_FILE,
                                         fingerprints.FILE, HISTORY)
                       if os.path.isfile(os.path.join(folder, name))), None)
        if marker:
            where = ("is a kerasbert run directory" if folder == target else
                     "is inside the kerasbert run directory "
                     + (folder if os.path.isabs(directory) else os.path.relpath(folder)))
            raise RunError(f"--to in {directory}: {where} (it holds {marker}); the run's files "
                           "are its own: write to a directory outside it")
        if os.path.dirname(folder) == folder:
            break
        folder = os.path.dirname(folder)
    check_writable(directory, flag="--to")


#: The run directories this process holds the lock of: ``{real path: file descriptor}``.
_LOCKS: dict[str, int] = {}


def lock(path: str, flag: str = "--output") -> None:
    """Takes the lock of the run directory ``path`` for this process (again: nothing to do).

    Raises:
        RunError: another process holds it: ``--output in runs/x: another kerasbert process
            (pid 4242) is training in it; ...``.
    """
    key = os.path.realpath(path)
    if fcntl is None or key in _LOCKS:
        return
    descriptor = os.open(key, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _lock_holder(descriptor)
        os.close(descriptor)
        who = f"another kerasbert process (pid {holder})" if holder else "another process"
        raise RunError(f"{flag} in {path}: {who} is training in it; wait until it ends, or "
                       "choose another directory") from None
    _LOCKS[key] = descriptor


def unlock(path: str) -> None:
    """Releases this process's lock of ``path`` (if it holds it)."""
    descriptor = _LOCKS.pop(os.path.realpath(path), None)
    if descriptor is not None:
        os.close(descriptor)


def _lock_holder(descriptor: int) -> int | None:
    """The pid holding the ``flock`` of an open folder, from ``/proc/locks`` (None where
    that is not known)."""
    inode = os.fstat(descriptor).st_ino
    try:
        with open("/proc/locks", encoding="ascii") as f:
            for line in f:
                fields = line.split()
                if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
                    continue
                if fields[5].rsplit(":", 1)[-1] == str(inode):
                    return int(fields[4])
    except (OSError, ValueError):
        pass
    return None


def same_path(a: str, b: str) -> bool:
    """Whether two paths name the same file or folder (``./runs/x`` and ``runs/x``)."""
    return os.path.realpath(a) == os.path.realpath(b)


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

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def finished(self) -> bool:
        return os.path.exists(self.file(self.finished_file))

    @property
    def started(self) -> bool:
        return (os.path.exists(self.file(self.options_file))
                or os.path.isdir(self.file(BACKUP)))

    def check(self, options: "RunOptions", resume: bool) -> None:
        """Takes the directory's lock (if it exists) and refuses what would lose or mix
        results; nothing is written.

        Raises:
            RunError: another process trains there; a finished run without ``restart``; an
                interrupted one without ``resume`` or ``restart``; ``resume`` with nothing to
                continue, with other options than the run's, or with a changed input; a
                folder of other files.
        """
        check_writable(self.path)
        if os.path.isdir(self.path):
            lock(self.path)
        try:
            self._check(options, resume)
        except Exception:
            unlock(self.path)
            raise

    def _check(self, options: "RunOptions", resume: bool) -> None:
        restart = getattr(options, "restart", False)
        if self.finished and not restart:
            # A kill after the finished file, before the backup was removed, left it behind.
            shutil.rmtree(self.file(BACKUP), ignore_errors=True)
            raise RunError(f"--output in {self.path}: holds a finished run; choose a new "
                           "--output, or pass --restart to train it again, replacing it")
        if resume:
            if not self.started:
                raise RunError(f"--resume in {self.path}: no interrupted run to continue; "
                               "leave out --resume to start one")
            self._check_same_options(options)
            fingerprints.check_inputs(self.path, options,
                                      getattr(options, "accept_changed", False))
            return
        if self.started or self.finished:
            if restart:
                return
            raise RunError(f"--output in {self.path}: holds an interrupted run; pass --resume "
                           "to continue it, --restart to start it again, or choose another "
                           "--output")
        if os.path.isdir(self.path) and [n for n in os.listdir(self.path)
                                         if not files.is_temporary(n)]:
            raise RunError(f"--output in {self.path}: is not empty and holds no kerasbert run; "
                           "choose a new or empty directory")

    def _check_same_options(self, options: "RunOptions") -> None:
        path = self.file(self.options_file)
        if not os.path.exists(path):
            return  # killed before its options were written: nothing to compare
        saved = read_json(path, "options")
        current = json.loads(json.dumps(saved_values(options)))  # tuples as saved: lists
        paths = {field.name for field in dataclasses.fields(options)
                 if field.metadata.get("input") or field.name == "output"}
        # An option newer than the run (--recompute) is saved at its default.
        saved = {**{field.name: field.default for field in dataclasses.fields(options)
                    if field.default is not dataclasses.MISSING and field.name not in saved},
                 **saved}
        # Read as the options class reads them (an older run's "mixed_precision": true is
        # today's "bfloat16"), its precision as this machine runs it (an older run recorded
        # "bfloat16" where it ran float32).
        saved = {**saved, **json.loads(json.dumps(saved_values(running_precision(
            type(options)(**{key: value for key, value in saved.items() if key in current}),
            warn=False))))}
        changed = [key for key in current if key not in _RESUME_FLAGS
                   and not _same_value(saved.get(key), current[key], key in paths)]
        if changed:
            shown = ", ".join(f"{key} ({saved.get(key)!r} -> {current[key]!r})"
                              for key in changed)
            raise RunError(f"--resume in {self.path}: the run's options differ ({shown}); "
                           f"a resumed run keeps the options in its {self.options_file} "
                           "(pass --restart instead to train again with the new ones)")

    def start(self, options: "RunOptions") -> None:
        """Creates the directory (taking its lock if :meth:`check` could not: it did not
        exist), clears what a kill left behind (or, for ``restart``, the whole earlier run),
        saves the options and the fingerprints of the inputs."""
        if os.path.realpath(self.path) not in _LOCKS:
            created = not os.path.isdir(self.path)
            os.makedirs(self.path, exist_ok=True)
            try:
                lock(self.path)
                self._check(options, options.resume)  # another process may have been faster
            except Exception:
                if created and not os.listdir(self.path):
                    os.rmdir(self.path)
                raise
        kept = self._clear() if getattr(options, "restart", False) else None
        files.remove_temporaries(self.path)
        files.remove_temporaries(self.file(BACKUP))
        if not os.path.exists(self.file(self.options_file)):
            files.write_json(self.file(self.options_file), saved_values(options))
        if (not options.resume or getattr(options, "accept_changed", False)
                or not os.path.exists(self.file(fingerprints.FILE))):
            fingerprints.record_inputs(self.path, options)
        if kept:
            fingerprints.record_kept(self.path, kept)
            log.warning("--restart in %s: kept %s (not written by the run)", self.path,
                        ", ".join(kept))
        self.record_written()
        log.info("training in %s", self.path, extra={"event": STARTED})

    def record_written(self) -> None:
        """Records the names in the directory as the run's own (but those it kept)."""
        fingerprints.record_written(self.path)

    def _own_names(self) -> set[str]:
        """The names of the run's files and folders: those it recorded as written (a run
        from before they were recorded: its outputs), and the lifecycle's own files."""
        lifecycle = {self.options_file, self.finished_file, HISTORY, "history.csv", BACKUP,
                     fingerprints.FILE}
        return fingerprints.written_names(self.path) | lifecycle

    def _clear(self) -> list[str]:
        """Removes every file of the earlier run, and only those (a file it did not write
        stays): moved aside at once (a kill leaves only a temporary behind), then deleted.

        Returns:
            the names kept (sorted).
        """
        own = self._own_names()
        names = [name for name in os.listdir(self.path) if not files.is_temporary(name)]
        kept = sorted(name for name in names if name not in own)
        names = [name for name in names if name in own]
        if names:
            aside = files.temporary_name(self.file("restart"), suffix="")
            os.mkdir(aside)
            for name in names:
                os.replace(self.file(name), os.path.join(aside, name))
            shutil.rmtree(aside, ignore_errors=True)
        return kept

    def release(self) -> None:
        """Releases the directory's lock (when the run ends, however it ends)."""
        unlock(self.path)

    # ------------------------------------------------------------------ backup
    def backup_state(self) -> dict[str, Any] | None:
        """``{"epoch", "done"}`` of the newest complete backup, or None."""
        found = self._backups()
        if not found:
            return None
        return read_json(os.path.join(found[-1], _STATE), "backup state")

    def _backups(self) -> list[str]:
        folder = self.file(BACKUP)
        if not os.path.isdir(folder):
            return []
        return [os.path.join(folder, name) for name in sorted(os.listdir(folder))
                if name.startswith("epoch-")
                and os.path.exists(os.path.join(folder, name, _STATE))]

    def resume_files(self) -> list[str]:
        """What a resumed run reads, as paths relative to the run directory: the newest
        backup's files and the history (sent to the other workers of a multi-worker run)."""
        found = self._backups()
        names = [os.path.relpath(os.path.join(found[-1], name), self.path)
                 for name in sorted(os.listdir(found[-1]))] if found else []
        if os.path.exists(self.file(HISTORY)):
            names.append(HISTORY)
        return names

    def check_room(self, model: Any, best: Any = (), last: Any = (), epochs: int = 1,
                   restart: bool = False, model_file: str = MODEL_FILE) -> None:
        """Refuses to train where the run's folder has no room for what the run will write,
        before the first step: the epoch backups (weights and optimizer; two at once while
        the newest is written, from the second one on), ``best`` beside them (the weights
        saved as ``model.keras`` at each best epoch) and ``last`` beside the last backup
        (the weights written as ``bert_model.ckpt`` at the end), less what the folder holds
        already and the run replaces (a resumed run's backup and ``model.keras``; with
        ``restart``, the whole earlier run).

        Args:
            model: the compiled model, its optimizer built.
            best, last: the variables of those files.
            epochs: the epochs left to train.
            restart: whether the earlier run in the folder is removed first.
            model_file: the file ``best`` is saved as (a LoRA run's: its adapters).

        Raises:
            kerasbert.disk_space.NoSpace: ``no space in runs/x: 60.2 MB needed for the run's
                files (...), 20.0 MB free; nothing was trained: ...``.
        """
        backup = disk_space.estimated_size(
            [*model.weights, *(model.optimizer.variables if model.optimizer else ())])
        best = disk_space.estimated_size(best) if best else 0
        # Its names are not needed, only the sizes: the variables are numbered.
        last = checkpoint_size(dict(enumerate(last))) if last else 0  # type: ignore[arg-type]
        held = 0
        if os.path.isdir(self.path):
            held = (disk_space.size_of(self.path) if restart else
                    sum(disk_space.size_of(path) for path in (self.file(BACKUP),
                                                              self.file(MODEL_FILE),
                                                              self.file(ADAPTERS_FILE))
                        if os.path.exists(path)))
        at_once = 2 if epochs > 1 or self._backups() else 1
        needed = best + max(at_once * backup, backup + last) - held
        parts = ["two epoch backups" if at_once == 2 else "the epoch backup"]
        parts += [model_file] * bool(best) + ["bert_model.ckpt"] * bool(last)
        resumed = self.started and not restart
        advice = ("; the run so far is kept: free some space, then continue it with --resume"
                  if resumed else "; nothing was trained: free some space or choose another "
                  "--output, then run the command again")
        if needed > 0:
            disk_space.check_space(self.path, needed,
                                   what=f"the run's files ({', '.join(parts)})", advice=advice)

    def write_backup(self, model: Any, epoch: int, done: bool) -> None:
        """Backs up weights and optimizer after ``epoch`` (1-based) epochs, atomically.

        The free space is checked first; the previous backup is removed only once the new
        one is complete. Where the disk is nearly full (less than four backups free), the
        weights go through memory (:class:`kerasbert.disk_space.MemoryFile`) so that HDF5 never
        meets a full disk, which it cannot recover from; elsewhere they are written straight
        to the file (twice as fast on BERT-base, without a copy of every weight in memory).

        Raises:
            kerasbert.disk_space.NoSpace: no room for the backup; the previous one is kept, so
                the run can be continued with ``--resume`` once there is space.
        """
        from kerasbert.models.layers import adapters_apart

        target = self.file(os.path.join(BACKUP, f"epoch-{epoch:04d}"))
        what = f"the backup of epoch {epoch}"
        advice = ("; the previous backup is kept: free some space, then continue the run "
                  "with --resume" if self._backups() else
                  "; no epoch is backed up yet, so --resume starts the run again from its "
                  "first epoch: free some space, then continue it with --resume")
        variables = [*model.weights, *(model.optimizer.variables if model.optimizer else ())]
        size = disk_space.estimated_size(variables)
        tight = disk_space.free_space(self.path) < 4 * disk_space.space_needed(size)
        with disk_space.room_for(self.path, size, what=what,
                            advice=advice), files.atomic_directory(target) as temporary:
            with adapters_apart():  # a LoRA run goes on from its adapters as they are
                if tight:
                    weights = disk_space.MemoryFile(os.path.join(temporary, _WEIGHTS))
                    model.save_weights(weights)
                    weights.save()
                else:
                    model.save_weights(os.path.join(temporary, _WEIGHTS))
            pause_point("backup-write")
            files.write_json(os.path.join(temporary, _STATE), {"epoch": epoch, "done": done})
        pause_point("backup-written")
        for older in self._backups():
            if older != target:
                shutil.rmtree(older, ignore_errors=True)
        self.record_written()

    def restore_backup(self, model: Any) -> dict[str, Any] | None:
        """Loads the newest backup's weights and optimizer into ``model``; its state or None."""
        found = self._backups()
        if not found:
            return None
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        weights = os.path.join(found[-1], _WEIGHTS)
        from kerasbert.models.layers import adapters_apart

        try:
            with adapters_apart():
                model.load_weights(weights)
        except (OSError, ValueError) as error:
            raise RunError(f"backup in {weights}: cannot be read ({error}); the run cannot be "
                           "resumed, start it again with a new --output") from None
        return read_json(os.path.join(found[-1], _STATE), "backup state")

    def close(self) -> None:
        """After the finished file is written: the backup is no longer needed."""
        pause_point("backup-removal")
        shutil.rmtree(self.file(BACKUP), ignore_errors=True)
        self.release()


#: Options that say how to start a run, not what it trains: a resumed run may differ in them.
_RESUME_FLAGS = ("resume", "restart", "accept_changed")


def _same_value(saved: Any, current: Any, path: bool) -> bool:
    """Whether a saved option equals the current one (paths: the same files)."""
    if saved == current or not path or saved is None or current is None:
        return saved == current
    if isinstance(saved, list) and isinstance(current, list):
        return len(saved) == len(current) and all(map(same_path, saved, current))
    return isinstance(saved, str) and isinstance(current, str) and same_path(saved, current)


def read_json(path: str, what: str) -> Any:
    """A JSON file of a run; a missing or corrupt one is a one-line :class:`RunError`."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise RunError(f"{what} in {path}: the file is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RunError(f"{what} in {path}: not valid JSON ({error})") from None


def check_finished(run_dir: str, options_file: str = TRAIN_OPTIONS_FILE,
                   finished_file: str = TRAIN_FINISHED_FILE, accept_changed: bool = False) -> None:
    """Raises unless ``run_dir`` holds a finished run (``finished_file`` written last) whose
    files are those it wrote (:func:`kerasbert.training.fingerprints.check_outputs`).

    Args:
        accept_changed: use a run whose file changed since it finished (a warning).

    Raises:
        RunError: no directory, a file, an unfinished run (how to continue it), or not a
            run directory.
        kerasbert.training.fingerprints.ChangedFile: a file of the run was replaced.
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
    fingerprints.check_outputs(run_dir, accept_changed)


def write_run_model(model: Any, model_file: str, path: str) -> None:
    """Writes a run's best model to ``path`` as ``model_file`` says: :data:`ADAPTERS_FILE`
    (a LoRA run's adapters and head) or :data:`MODEL_FILE` (the whole model)."""
    if model_file == ADAPTERS_FILE:
        from kerasbert.models.lora import save_adapters

        save_adapters(model, path)
    else:
        model.save(path)


def load_run_model(run_dir: str, accept_changed: bool = False) -> Any:
    """The best model of a run, ``model.keras``, loaded with ``safe_mode=True``; a LoRA
    run's is built again from its adapters file and the checkpoint it was trained on
    (refused when that checkpoint is gone or changed: its fingerprint), the adapters
    merged into the kernels.

    Args:
        accept_changed: use a LoRA run's base although it changed (a warning).

    Raises:
        RunError: no ``model.keras``, or one that is truncated or corrupt; a LoRA run whose
            base checkpoint is missing or does not fit.
        kerasbert.training.fingerprints.ChangedFile: a LoRA run's base checkpoint changed.
    """
    import keras

    from kerasbert.models.saved import register_model_objects
    from kerasbert.training import optimizer  # noqa: F401 (registers the schedule)

    register_model_objects()  # the task's own objects: its module, imported by the caller
    if os.path.exists(os.path.join(run_dir, ADAPTERS_FILE)):
        return _load_adapted(run_dir, accept_changed)
    path = os.path.join(run_dir, MODEL_FILE)
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


def _load_adapted(run_dir: str, accept_changed: bool) -> Any:
    """A LoRA run's model: its base checkpoint (the run's ``checkpoint``) checked against
    the fingerprint the run recorded, then read, then the adapters and head."""
    from kerasbert.models.config import BertConfig
    from kerasbert.models.families import DEFAULT_FAMILY, family_class
    from kerasbert.models.lora import load_adapted, merged_model

    options = read_json(os.path.join(run_dir, TRAIN_OPTIONS_FILE), "options")
    base = options.get("checkpoint") if isinstance(options, dict) else None
    if not base:
        raise RunError(f"options in {os.path.join(run_dir, TRAIN_OPTIONS_FILE)}: a LoRA run "
                       "without its checkpoint; is it a kerasbert run directory?")
    fingerprints.check_base(run_dir, base, accept_changed)
    path = os.path.join(run_dir, ADAPTERS_FILE)
    # t5.1.1 and mT5 have the same layers: the run's family says whose names to read.
    config_path = os.path.join(run_dir, "bert_config.json")
    config = BertConfig.from_json_file(config_path if os.path.exists(config_path)
                                       else options.get("config"), family=options.get("model"))
    family = config.family if family_class(config.family or DEFAULT_FAMILY).encoder_decoder \
        else None
    try:
        # Merged: the outputs of the model trained, as fast as one without adapters.
        return merged_model(load_adapted(path, base, family=family))
    except (OSError, ValueError) as error:
        reason = (str(error).strip().splitlines() or [""])[0]
        raise RunError(f"model in {path}: cannot be built on the base {base} "
                       f"({reason[:300]})") from None
