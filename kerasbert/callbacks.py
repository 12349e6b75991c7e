"""RunRecorder: history, best model and early stopping that survive a killed run.

Keras's ``BackupAndRestore`` restores weights and optimizer after a kill, but not the
history, the best score or the early-stopping count. Here all three are derived from
``history.json`` in the run directory, so a resumed run makes the same decisions as an
uninterrupted one.
"""

import json
import os

import keras

from kerasbert import reports


class RunRecorder(keras.callbacks.Callback):
    """Records each epoch, keeps ``model.keras`` at the best dev accuracy, stops early.

    Args:
        run_dir: the run directory.
        patience: epochs without a better dev accuracy before training stops (0: never).
        monitor: the logged metric to maximise.
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
        if self.monitor not in logs:
            raise ValueError(f"RunRecorder needs {self.monitor!r} in the logs: pass validation_data")
        for key, value in logs.items():
            self.history.setdefault(key, []).append(float(value))
        scores = self.history[self.monitor]
        if scores[-1] >= max(scores):
            # Earliest best wins ties; a later equal score does not replace the model.
            if scores.index(max(scores)) == len(scores) - 1:
                with reports.atomic_path(os.path.join(self.run_dir, "model.keras")) as temporary:
                    self.model.save(temporary)
        reports.write_json(self._state_path, self.history)
        reports.write_history_csv(os.path.join(self.run_dir, "history.csv"), self.history)
        if self.patience and len(scores) - self.best_epoch >= self.patience:
            self.model.stop_training = True
