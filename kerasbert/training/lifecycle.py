"""The one lifecycle of a training run, shared by fine-tuning and pretraining.

Every run goes through the same four steps, in this order::

    run = TrainingRun(options, OPTIONS_FILE, FINISHED_FILE)
    run.prepare()        # run directory checked (nothing written), seeds set
    ...                  # read the data, build and compile the model
    run.start(model, epochs)  # room checked; directory created, leftovers of a kill
                              # removed, options saved
    recorder = run.fit(model, data, epochs=..., steps_per_epoch=..., hint=...)
    ...                  # write the run's files
    run.finish(summary)  # the finished file last, then the backup is removed
    run.release()        # in a finally: the directory's lock, however the run ended

so both get the same guarantees: the disk's room checked and the options saved before
the first step, a resume
refused when the options differ, dropout seeds drawn from ``(seed, epoch)`` so a
resumed run equals an uninterrupted one, an atomic backup after every epoch, the
history kept in ``history.json``, and a finished file written last.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import keras

from kerasbert import files
from kerasbert.training import fingerprints
from kerasbert.training.callbacks import (
    EpochSeeds,
    RunBackup,
    RunRecorder,
    StopOnNonFiniteLoss,
    inference_model,
)
from kerasbert.training.options import RunOptions
from kerasbert.training.rundir import MODEL_FILE, RunDirectory, pause_point


class TrainingRun:
    """A training run in its directory, from the first check to the finished file.

    Args:
        options: the run's options (a :class:`kerasbert.training.options.RunOptions`,
            already validated): ``output``, ``seed`` and ``resume`` are read here.
        options_file: the file the options are saved in (``train_config.json``).
        finished_file: the file whose presence marks a finished run (``metrics.json``).
        directory: a :class:`RunDirectory` to use instead of ``options.output`` (the
            temporary folder of a multi-worker run's other workers).
        verbose: Keras's progress output of ``fit`` (``"auto"``, 0, 1 or 2).
    """

    def __init__(self, options: RunOptions, options_file: str, finished_file: str,
                 directory: RunDirectory | None = None, verbose: str | int = "auto") -> None:
        self.options = options
        self.directory = directory or RunDirectory(options.output, options_file, finished_file)
        self.verbose = verbose

    def prepare(self, check: bool = True) -> TrainingRun:
        """Refuses a directory that would lose or mix results, then seeds every generator.

        Args:
            check: False where the directory was checked elsewhere (by the chief of a
                multi-worker run).

        Raises:
            kerasbert.training.rundir.RunError: see :meth:`RunDirectory.check`.
        """
        if check:
            self.directory.check(self.options, self.options.resume)
        keras.utils.set_random_seed(self.options.seed)
        return self

    @functools.cached_property
    def resumed(self) -> dict[str, Any] | None:
        """The restored backup's ``{"epoch", "done"}``, or None for a new run."""
        return self.directory.backup_state() if self.options.resume else None

    @property
    def first_epoch(self) -> int:
        """The epoch training starts at: 0, or the last backed-up epoch of a resumed run."""
        return self.resumed["epoch"] if self.resumed else 0

    @property
    def trained(self) -> bool:
        """Whether every epoch was trained and backed up before the run was interrupted."""
        return bool(self.resumed and self.resumed["done"])

    def start(self, model: keras.Model, epochs: int, best: Sequence[Any] = (),
              last: Sequence[Any] = (), model_file: str = MODEL_FILE) -> None:
        """Checks that the folder has room for what the run will write
        (:meth:`RunDirectory.check_room`: ``model``'s backups over the ``epochs`` left,
        ``best`` and ``last``), then creates the directory, clears what a kill left behind,
        saves the options.

        Raises:
            kerasbert.disk_space.NoSpace: too little room; nothing written.
        """
        self.directory.check_room(model, best=best, last=last,
                                  epochs=0 if self.trained else epochs - self.first_epoch,
                                  restart=getattr(self.options, "restart", False),
                                  model_file=model_file)
        self.directory.start(self.options)

    def fit(self, model: keras.Model, data: Any, *, epochs: int, steps_per_epoch: int | None,
            hint: str, validation_data: Any = None, monitor: str | None = None,
            patience: int = 0, save_model: Callable[[Any], Any] = inference_model,
            stop: Sequence[Any] = (), callbacks: Sequence[Any] = (),
            model_file: str = MODEL_FILE) -> RunRecorder:
        """Trains ``model`` from the run's first epoch, backing up after every epoch.

        Args:
            model: the compiled model.
            data: the training dataset (endless or one pass per epoch).
            epochs, steps_per_epoch: as for ``fit``.
            hint: what to change when the loss diverges, for the error message.
            validation_data: as for ``fit``; required with ``monitor``.
            monitor: the logged metric whose best epoch is saved as ``model.keras``
                (None: no best model, only the history).
            patience: epochs without a better ``monitor`` before stopping (0: never).
            save_model: the model saved as ``model.keras`` from the trained one.
            model_file: the file it is saved as (a LoRA run's: its adapters and head,
                :data:`~kerasbert.training.rundir.ADAPTERS_FILE`).
            stop: callbacks that may end training early (run before the recorder).
            callbacks: more Keras callbacks, run last.

        Returns:
            The :class:`RunRecorder`, holding the history of every epoch.
        """
        recorder = RunRecorder(self.directory.path, patience=patience, monitor=monitor,
                               first_epoch=self.first_epoch, save_model=save_model,
                               model_file=model_file)
        if self.trained:
            # Trained to the end before a kill: only the finishing is left.
            self.directory.restore_backup(model)
        else:
            model.fit(
                data, validation_data=validation_data, epochs=epochs,
                initial_epoch=self.first_epoch, steps_per_epoch=steps_per_epoch,
                shuffle=False, verbose=self.verbose,
                # Seeds first (the epoch's dropout masks); the recorder writes the epoch's
                # history and decides on stopping before the backup marks the epoch done.
                callbacks=[EpochSeeds(self.options.seed), StopOnNonFiniteLoss(hint), *stop,
                           recorder, RunBackup(self.directory, epochs), *callbacks])
        pause_point("train-end")
        return recorder

    def finish(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Records the fingerprints of the run's files, writes ``summary`` as the finished
        file, then removes the backup and releases the directory."""
        self.directory.record_written()
        fingerprints.record_outputs(self.directory.path, self.directory.finished_file)
        files.write_json(self.directory.file(self.directory.finished_file), summary)
        self.directory.close()
        return summary

    def release(self) -> None:
        """Releases the run directory's lock, however the run ended (call it in a
        ``finally``)."""
        self.directory.release()
