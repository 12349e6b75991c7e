"""Runs that survive a kill: RunRecorder, StopAtStep and the run-directory checks.

Keras's ``BackupAndRestore`` (in ``<run>/backup``) restores weights and optimizer after
a kill, but not the history, the best score or the early-stopping count. Here all three
are derived from ``history.json`` in the run directory, so a resumed run makes the same
decisions as an uninterrupted one.
"""

import json
import os

import keras
import numpy as np

from kerasbert import reports

BACKUP = "backup"


def check_run_directory(output, resume, finished="metrics.json"):
    """Refuses to start over an interrupted run without ``resume``, or over a finished one.

    Args:
        output: the run directory.
        resume: whether continuing an interrupted run was asked for.
        finished: the file whose presence marks a finished run.

    Raises:
        FileExistsError: naming the directory and what to do.
    """
    if resume:
        return
    if os.path.isdir(os.path.join(output, BACKUP)):
        raise FileExistsError(f"{output} holds an interrupted run: pass --resume to "
                              "continue it, or choose another --output")
    if os.path.exists(os.path.join(output, finished)):
        raise FileExistsError(f"{output} holds a finished run; choose another --output")


def first_epoch(output):
    """The epoch a resumed run starts at (what ``BackupAndRestore`` will restore), else 0."""
    path = os.path.join(output, BACKUP, "training_metadata.json")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return int(json.load(f)["epoch"])


def backup_and_restore(output):
    """Keras's ``BackupAndRestore`` in ``<output>/backup``, once per epoch."""
    return keras.callbacks.BackupAndRestore(os.path.join(output, BACKUP))


class EpochSeeds(keras.callbacks.Callback):
    """Draws the state of every random layer (dropout) afresh from ``(seed, epoch)``.

    ``BackupAndRestore`` keeps weights and optimizer but not the random generators'
    states, so without this a resumed run would draw other dropout masks than an
    uninterrupted one; with it, epoch ``k`` draws the same masks either way.
    """

    def __init__(self, seed):
        super().__init__()
        self.seed = int(seed)

    def on_epoch_begin(self, epoch, logs=None):
        weights = {id(w) for w in self.model.weights}
        # model.variables = weights + the SeedGenerator states ([seed, counter], int).
        states = [v for v in self.model.variables if id(v) not in weights]
        rng = np.random.default_rng([self.seed, epoch])
        for state in states:
            state.assign(np.array([rng.integers(1, 2**31), 0], dtype=state.dtype))


class StopAtStep(keras.callbacks.Callback):
    """Stops training after ``steps`` optimizer updates, even inside an epoch.

    Lets a run of any number of steps be cut into epochs of a fixed size (the last
    one shorter), so each epoch can be backed up.
    """

    def __init__(self, steps):
        super().__init__()
        self.steps = int(steps)

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.steps:
            self.model.stop_training = True


class RunRecorder(keras.callbacks.Callback):
    """Records each epoch, keeps ``model.keras`` at the best dev accuracy, stops early.

    Args:
        run_dir: the run directory.
        patience: epochs without a better dev accuracy before training stops (0: never).
        monitor: the logged metric to maximise; None only records the history.
        first_epoch: the epoch training starts at (a resumed run's restored epoch).
    """

    def __init__(self, run_dir, patience=2, monitor="val_accuracy", first_epoch=0):
        super().__init__()
        self.run_dir = run_dir
        self.patience = patience
        self.monitor = monitor
        self.first_epoch = first_epoch
        self.history = {}

    @property
    def _state_path(self):
        return os.path.join(self.run_dir, "history.json")

    @property
    def best_epoch(self):
        """1-based epoch with the best score so far, or None."""
        scores = self.history.get(self.monitor, [])
        return scores.index(max(scores)) + 1 if scores else None

    def on_train_begin(self, logs=None):
        history = {}
        if self.first_epoch and os.path.exists(self._state_path):
            with open(self._state_path, encoding="utf-8") as f:
                history = json.load(f)
        # Epochs after the restored one were never backed up: they will run again.
        self.history = {key: values[:self.first_epoch] for key, values in history.items()}

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.monitor is not None and self.monitor not in logs:
            raise ValueError(f"RunRecorder needs {self.monitor!r} in the logs: pass validation_data")
        for key, value in logs.items():
            self.history.setdefault(key, []).append(float(value))
        self._write_history()
        if self.monitor is None:
            return
        scores = self.history[self.monitor]
        if scores[-1] >= max(scores):
            # Earliest best wins ties; a later equal score does not replace the model.
            if scores.index(max(scores)) == len(scores) - 1:
                with reports.atomic_path(os.path.join(self.run_dir, "model.keras")) as temporary:
                    self.model.save(temporary)
        if self.patience and len(scores) - self.best_epoch >= self.patience:
            self.model.stop_training = True

    def _write_history(self):
        reports.write_json(self._state_path, self.history)
        reports.write_history_csv(os.path.join(self.run_dir, "history.csv"), self.history)
