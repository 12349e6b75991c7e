"""Keras callbacks of a run: seeds, step limit, history and best model, backup, divergence.

Keras's ``BackupAndRestore`` rewrites its files in place (a kill mid-write leaves them
corrupt) and deletes them when ``fit`` ends, before the run is finished; here the
backup is :class:`RunBackup` on :class:`kerasbert.training.rundir.RunDirectory`, which writes a
whole new backup before dropping the old one. History, best score and the
early-stopping count are derived from ``history.json``, so a resumed run makes the
same decisions as an uninterrupted one.
"""

import json
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import keras
import numpy as np

from kerasbert import disk_space, files
from kerasbert.training import reports
from kerasbert.training.rundir import (
    ADAPTERS_FILE,
    HISTORY,
    MODEL_FILE,
    RunDirectory,
    pause_point,
    write_run_model,
)


class ProgressLines(keras.callbacks.Callback):
    """A line on stdout at most every ``every`` seconds while an epoch trains (``epoch 1/3:
    batch 120/540, loss 0.4312, 61 s``): where Keras writes one line per epoch (a pipe, a
    log file), a long epoch would otherwise show nothing for minutes.

    Args:
        every: the seconds between two lines.
        stream: where the lines go (stdout).
    """

    def __init__(self, every: float = 60.0, stream: TextIO | None = None) -> None:
        super().__init__()
        self.every = every
        self.stream = stream
        self.epoch = 0
        self.started = self.shown = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch
        self.started = self.shown = time.monotonic()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.monotonic()
        if now - self.shown < self.every:
            return
        self.shown = now
        steps = self.params.get("steps")
        loss = (logs or {}).get("loss")
        parts = [f"epoch {self.epoch + 1}/{self.params.get('epochs')}: batch {batch + 1}"
                 + (f"/{steps}" if steps else "")]
        if loss is not None:
            parts.append(f"loss {float(loss):.4f}")
        parts.append(f"{now - self.started:.0f} s")
        print(", ".join(parts), file=self.stream or sys.stdout, flush=True)


class TrainingDiverged(ValueError):
    """The loss became NaN or infinite; the message names the epoch, the batch and the cure."""


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stops the run with :class:`TrainingDiverged` at the first batch whose loss is not finite.

    Args:
        hint: what to change, for the message (``"lower --lr (0.5)"``).
    """

    def __init__(self, hint: str) -> None:
        super().__init__()
        self.hint = hint
        self.epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            raise TrainingDiverged(
                f"loss {float(loss)} in epoch {self.epoch + 1}, batch {batch + 1}: training "
                f"diverged, so it was stopped; {self.hint}")


class RunBackup(keras.callbacks.Callback):
    """Backs the run up after every epoch and restores it when ``fit`` starts.

    Args:
        run: a :class:`kerasbert.training.rundir.RunDirectory`.
        epochs: the run's last epoch; the backup after it is marked done.
    """

    def __init__(self, run: RunDirectory, epochs: int) -> None:
        super().__init__()
        self.run = run
        self.epochs = epochs

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.run.restore_backup(self.model)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        done = bool(self.model.stop_training) or epoch + 1 >= self.epochs
        self.run.write_backup(self.model, epoch + 1, done)


class EpochSeeds(keras.callbacks.Callback):
    """Draws the state of every random layer (dropout) afresh from ``(seed, epoch)``.

    ``BackupAndRestore`` keeps weights and optimizer but not the random generators'
    states, so without this a resumed run would draw other dropout masks than an
    uninterrupted one; with it, epoch ``k`` draws the same masks either way, on every
    Keras backend.
    """

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = int(seed)
        self.epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        weights = {id(w) for w in self.model.weights}
        # model.variables = weights + the SeedGenerator states ([seed, counter], int).
        states = [v for v in self.model.variables if id(v) not in weights]
        rng = np.random.default_rng([self.seed, epoch])
        for state in states:
            state.assign(np.array([rng.integers(1, 2**31), 0], dtype=state.dtype))
        self.epoch = epoch

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if keras.backend.backend() == "torch":
            # Keras's dropout on PyTorch draws from torch's own generator when the layer
            # was given no seed, and so does each new iterator over the data: the
            # generator is seeded from (seed, epoch, batch) before every step.
            import torch

            torch.manual_seed(int(np.random.default_rng([self.seed, self.epoch, batch])
                                  .integers(1, 2**31)))


class StopAtStep(keras.callbacks.Callback):
    """Stops training after ``steps`` optimizer updates, even inside an epoch.

    Lets a run of any number of steps be cut into epochs of a fixed size (the last
    one shorter), so each epoch can be backed up.
    """

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = int(steps)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if int(self.model.optimizer.iterations.numpy()) >= self.steps:
            self.model.stop_training = True


class RunRecorder(keras.callbacks.Callback):
    """Records each epoch, keeps ``model.keras`` at the best dev score, stops early.

    The history of the epochs before ``first_epoch`` is read from ``history.json``
    when the recorder is made (a resumed run); later epochs there are dropped: they
    were never backed up and run again.

    Args:
        run_dir: the run directory.
        patience: epochs without a better dev score before training stops (0: never).
        monitor: the logged metric to maximise (the task's dev score: accuracy for
            classification, entity F1 for NER, F1 for QA, ROUGE-L for seq2seq); None only
            records the history.
        first_epoch: the epoch training starts at (a resumed run's restored epoch).
        save_model: makes the model saved as ``model.keras`` from the trained one
            (default :func:`inference_model`).
        model_file: the file it is saved as: ``model.keras``, or a LoRA run's
            :data:`~kerasbert.training.rundir.ADAPTERS_FILE`.
    """

    def __init__(self, run_dir: str, patience: int = 2, monitor: str | None = "val_accuracy",
                 first_epoch: int = 0, save_model: Callable[[Any], Any] | None = None,
                 model_file: str = MODEL_FILE) -> None:
        super().__init__()
        self.save_model = save_model or inference_model
        self.model_file = model_file
        self.run_dir = run_dir
        self.patience = patience
        self.monitor = monitor
        self.first_epoch = first_epoch
        history: dict[str, list[float]] = {}
        if first_epoch and os.path.exists(self._state_path):
            with open(self._state_path, encoding="utf-8") as f:
                history = json.load(f)
        self.history = {key: values[:first_epoch] for key, values in history.items()}

    @property
    def _state_path(self) -> str:
        return os.path.join(self.run_dir, HISTORY)

    @property
    def best_epoch(self) -> int | None:
        """1-based epoch with the best score so far, or None."""
        scores = self.history.get(self.monitor, [])  # type: ignore[arg-type]  # None: no scores
        return scores.index(max(scores)) + 1 if scores else None

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        logs = logs or {}
        if self.monitor is not None and self.monitor not in logs:
            raise ValueError(f"RunRecorder needs {self.monitor!r} in the logs: pass "
                             "validation_data")
        for key, value in logs.items():
            self.history.setdefault(key, []).append(float(value))
        self._write_history()
        pause_point("epoch-end")
        if self.monitor is None:
            return
        scores = self.history[self.monitor]
        if scores[-1] >= max(scores):
            # Earliest best wins ties; a later equal score does not replace the model.
            if scores.index(max(scores)) == len(scores) - 1:
                self._save_best()
        if (self.patience  # best_epoch: an epoch, as scores is not empty
                and len(scores) - self.best_epoch >= self.patience):  # type: ignore[operator]
            self.model.stop_training = True

    def _save_best(self) -> None:
        """Writes the model file (``model.keras``; a LoRA run's adapters), the free space
        checked first (the previous one is kept when it fails)."""
        model = self.save_model(self.model)
        what = self.model_file
        advice = ("; the run so far is kept: free some space, then continue it with "
                  "--resume")
        kept = model.weights
        if what == ADAPTERS_FILE:
            from kerasbert.models.lora import own_variables

            kept = own_variables(model)
        with disk_space.room_for(self.run_dir, disk_space.estimated_size(kept), what=what,
                            advice=advice), \
                files.atomic_path(os.path.join(self.run_dir, what)) as temporary:
            write_run_model(model, what, temporary)
            pause_point("model-write")

    def _write_history(self) -> None:
        files.write_json(self._state_path, self.history)
        reports.write_history_csv(os.path.join(self.run_dir, "history.csv"), self.history)


def inference_model(model: keras.Model) -> keras.Model:
    """The same layers and weights as an uncompiled model: saved, it carries no optimizer
    state or training configuration, so it loads wherever its layers are registered (the
    resume state lives in the run's backup)."""
    return keras.Model(model.inputs, model.outputs, name=model.name)


class ProgressBar(keras.callbacks.Callback):
    """A ``tqdm`` bar on stderr over the batches of ``predict`` or ``evaluate``.

    It writes to stderr, so the JSON lines of ``kerasbert predict`` on stdout stay
    clean, and it is silent when stderr is not a terminal (a log file, a pipe).
    """

    def __init__(self, total: int | None, unit: str = "batches") -> None:
        super().__init__()
        self.total, self.unit = total, unit
        self.bar: Any = None

    def on_predict_begin(self, logs: dict[str, Any] | None = None) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, unit=f" {self.unit}", file=sys.stderr, disable=None,
                        leave=False)

    def on_predict_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.bar.update(1)

    def on_predict_end(self, logs: dict[str, Any] | None = None) -> None:
        self.bar.close()
