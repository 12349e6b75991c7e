"""What a ``--task`` is, and the one training loop that drives every task.

A task is one folder of :mod:`kerasbert.tasks` whose ``task.py`` holds a :class:`Task`: how
it reads and checks its files, the head it puts on BERT, its loss, the dev score its best
epoch is chosen by, the files a run writes, what ``train`` and ``evaluate`` print, and its
``Run`` (a finished run directory: evaluate / predict / export). Its options are its own
class in its ``options.py`` (only the flags it uses). :func:`train` does the rest, for
every task alike: options checked, every input read before the first step, the
distribution strategy, gradient accumulation, mixed precision, backups, resume.

Example::

    # the shipped kerasbert-zh-small on the shipped People's Daily split
    summary = train(NerOptions(output="runs/ner", maxlen=160))
    summary["test"]["micro"]["f1"]
"""

import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np

from kerasbert.models.lora import DEFAULT_TARGETS, enable_lora, own_variables
from kerasbert.tasks import get_task
from kerasbert.tasks.options import TaskOptions
from kerasbert.tasks.runs import OPTIONS_FILE, load_run_model, write_model_files
from kerasbert.training import batches, distribute
from kerasbert.training.callbacks import RunRecorder, inference_model
from kerasbert.training.lifecycle import TrainingRun
from kerasbert.training.optimizer import make_optimizer
from kerasbert.training.options import OptionError, running_precision
from kerasbert.training.rundir import ADAPTERS_FILE, MODEL_FILE, RunDirectory
from kerasbert.training.rundir import TRAIN_FINISHED_FILE as FINISHED_FILE

log = logging.getLogger(__name__)


class Task:
    """One ``--task``: subclass it in the task's module and set ``TASK`` there.

    Attributes:
        name: the ``--task`` value.
        monitor: the logged dev score whose best epoch is kept (``val_accuracy``,
            ``val_entity_f1``, ``val_f1``, ``val_rouge_l``).
        run_class: the task's ``Run``, which opens a finished run directory.
        columns: whether its files have columns (``--text-column`` and the others).
        texts_per_example: how many ``TEXT`` arguments of ``predict`` make one example.
    """

    name: str | None = None
    monitor: str | None = None
    run_class: Any = None  # the task's Run class, set after it is defined
    columns = False
    texts_per_example = 1

    # ``options`` and ``inputs`` are Any: each task takes its own options class and inputs.
    def read_inputs(self, options: Any) -> Any:
        """Reads and checks every input before anything is built or written; returns what
        the other methods take as ``inputs`` (with ``.steps``, the batches per epoch)."""
        raise NotImplementedError

    def training_arrays(self, options: Any,
                        inputs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The arrays of the training set: token ids, segment ids, targets (a T5's: encoder
        ids, decoder ids, targets)."""
        raise NotImplementedError

    def build_model(self, options: Any, inputs: Any) -> keras.Model:
        """The model trained: BERT (:func:`kerasbert.tasks.runs.build_encoder`) and the head."""
        raise NotImplementedError

    def loss(self, model: keras.Model) -> Any:
        """The loss ``compile`` takes, from the training model's outputs."""
        raise NotImplementedError

    def metrics(self) -> list[Any]:
        """The metrics ``compile`` takes."""
        return []

    def dev_scoring(self, options: Any, inputs: Any) -> tuple[Any, list[Any]]:
        """``(validation_data, callbacks)`` that put :attr:`monitor` in each epoch's logs."""
        raise NotImplementedError

    def saved_model(self, model: keras.Model) -> keras.Model:
        """The model saved as ``model.keras`` from the trained one."""
        return inference_model(model)

    def write_results(self, options: Any, inputs: Any, recorder: RunRecorder,
                      model: keras.Model) -> dict[str, Any]:
        """Writes the task's own files after training; returns the summary
        (``metrics.json``). ``model``: the best epoch's, as ``evaluate`` and ``predict``
        load it; the files every run writes beside it are written already
        (:func:`kerasbert.tasks.runs.write_model_files`)."""
        raise NotImplementedError

    def train_report(self, options: Any, summary: dict[str, Any]) -> list[str]:
        """The lines ``kerasbert train`` prints at the end."""
        raise NotImplementedError

    def evaluation_report(self, metrics: dict[str, Any]) -> list[str]:
        """The lines ``kerasbert evaluate`` prints (without ``--json``)."""
        raise NotImplementedError

    def check_texts(self, texts: Sequence[str], run: Any = None) -> None:
        """Raises ``ValueError`` when ``predict``'s texts do not make whole examples (for
        ``run``, the opened run, where its options decide)."""
        if len(texts) % self.texts_per_example:
            raise ValueError(f"{len(texts)} texts: a {self.name} run takes them "
                             f"{self.texts_per_example} at a time")


def train(options: TaskOptions, callbacks: Sequence[Any] = (), verbose: str | int = "auto",
          on_checked: Callable[[], object] | None = None) -> dict[str, Any]:
    """Fine-tunes the task of ``options``; returns the run summary (also in ``metrics.json``).

    Everything that can be checked is checked before the first step: the options, the run
    directory, every input file (train, dev and test), the config against the vocabulary
    and ``maxlen``, and the checkpoint.

    Args:
        options: the task's options, its folder's ``options.py`` class
            (:class:`~kerasbert.tasks.ner.options.NerOptions`, ...).
        callbacks: more Keras callbacks for ``fit``.
        verbose: Keras's progress output (``"auto"``, 0, 1 or 2: one line per epoch).
        on_checked: called with no arguments once every input is checked, before anything
            is built (``kerasbert train`` prints the defaults the run took there).

    Raises:
        kerasbert.training.options.OptionError: an option outside its range, or one the
            task does not use.
        kerasbert.training.rundir.RunError: a finished run in ``output``, an interrupted one
            without ``resume``, or ``resume`` with other options; under
            ``strategy="multi-worker"``, also a check that failed on another worker
            (docs/multi_worker.md).
        kerasbert.training.data.DataError: a bad row (file and line named).
        kerasbert.training.callbacks.TrainingDiverged: the loss became NaN or infinite.
    """
    return train_resolved(options.resolved(), callbacks, verbose, on_checked)


def train_resolved(options: TaskOptions, callbacks: Sequence[Any] = (),
                   verbose: str | int = "auto",
                   on_checked: Callable[[], object] | None = None) -> dict[str, Any]:
    """:func:`train` on options already resolved (:func:`kerasbert.tasks.options.prepare`,
    as ``kerasbert train`` resolves its flags once).

    Raises:
        ValueError: ``options`` are not resolved.
    """
    if options.model_config is None:
        raise ValueError("options not resolved: train() resolves them, or call "
                         "options.resolved() first")
    options = running_precision(options)
    task = get_task(options.task)
    strategy_name = getattr(options, "strategy", None)
    check_cluster(strategy_name)
    # MultiWorkerMirroredStrategy must be made before TensorFlow runs its first op. Only
    # the chief checks the run directory; a failed check on any worker stops them all.
    strategy = distribute.make_strategy(strategy_name)
    directory = RunDirectory(options.output, OPTIONS_FILE, FINISHED_FILE)
    try:
        with distribute.whole_run(strategy):
            return _train(task, options, strategy, directory, callbacks, verbose, on_checked)
    finally:
        directory.release()


def _train(task: Task, options: TaskOptions, strategy: Any, directory: RunDirectory,
           callbacks: Sequence[Any], verbose: str | int,
           on_checked: Callable[[], object] | None) -> dict[str, Any]:
    def check() -> Any:
        if distribute.is_chief(strategy):
            directory.check(options, options.resume)
        return task.read_inputs(options)

    inputs = distribute.check_together(strategy, check)
    if on_checked is not None:
        on_checked()
    if options.weights == "random":  # after the checks: a refused run says only why
        log.warning("no --checkpoint: the encoder starts from RANDOM weights, not a pretrained "
                    "model (recorded as weights=random in %s); pass --checkpoint PREFIX to "
                    "fine-tune a pretrained BERT", OPTIONS_FILE)
    # The other workers of a multi-worker run write into a temporary folder instead; the
    # options come back as given (another worker's: a copy), still the task's class.
    with distribute.worker_run(strategy, directory, options) as (  # type: ignore[assignment]
            directory, options):
        run = TrainingRun(options, OPTIONS_FILE, FINISHED_FILE, directory=directory,
                          verbose=verbose).prepare(check=False)
        arrays = task.training_arrays(options, inputs)
        cap = batches.describe_cap(options.maxlen, arrays[0])
        if cap:
            log.warning("%s", cap)
        updates = max(1, inputs.steps * options.epochs // options.grad_accum)
        with strategy.scope():
            model = task.build_model(options, inputs)
            if options.lora:
                enable_lora(model, options.lora, options.lora_targets or DEFAULT_TARGETS)
            model.compile(
                optimizer=make_optimizer(model, options.lr, updates, options.warmup,
                                         options.weight_decay,
                                         gradient_accumulation=options.grad_accum),
                loss=task.loss(model), metrics=task.metrics(),
                jit_compile=step_compilation(options.jit_compile))
            distribute.fit_under(model, strategy)
            model.optimizer.build(model.trainable_variables)  # its size, for the room check
        saved = task.saved_model(model)
        # A LoRA run keeps its adapters and head only; export merges them into the base.
        kept = own_variables(saved) if options.lora else saved.weights
        model_file = ADAPTERS_FILE if options.lora else MODEL_FILE
        run.start(model, options.epochs, best=kept, last=() if options.lora else kept,
                  model_file=model_file)
        # Global batches; each worker of a multi-worker run takes its part of every one.
        train_set = distribute.shard_by_data(batches.make_dataset(
            *arrays, batch_size=options.batch_size, seed=options.seed,
            first_epoch=run.first_epoch))
        validation, scoring = task.dev_scoring(options, inputs)
        recorder = run.fit(model, train_set, validation_data=validation, epochs=options.epochs,
                           steps_per_epoch=inputs.steps,
                           hint=f"lower --lr ({options.lr:g}) or check the data",
                           monitor=task.monitor, patience=options.patience,
                           save_model=task.saved_model, stop=scoring,
                           model_file=model_file,
                           callbacks=list(callbacks))
        best = load_run_model(options.output)
        write_model_files(options, best)
        return run.finish(task.write_results(options, inputs, recorder, best))


def step_compilation(jit_compile: bool | str) -> bool | str:
    """Keras's ``jit_compile`` for a run's train step: on TensorFlow ``--jit-compile``
    (XLA, off by default); on JAX and PyTorch Keras's own default unless it is given
    (``"auto"``: JAX compiles the step with ``jax.jit``, where an uncompiled step would run
    op by op, each a program of its own; PyTorch runs it eagerly)."""
    if jit_compile or keras.backend.backend() == "tensorflow":
        return jit_compile
    return "auto"


def check_cluster(strategy: str | None) -> None:
    """Refuses ``--strategy multi-worker`` without a cluster: a ``TF_CONFIG`` that is a JSON
    object with ``cluster`` and ``task`` (one process alone would train as if it were all).

    Raises:
        OptionError: ``missing cluster in TF_CONFIG: --strategy multi-worker needs ...``.
    """
    if strategy != "multi-worker":
        return
    text = os.environ.get("TF_CONFIG", "")
    try:
        config = json.loads(text) if text.strip() else None
    except ValueError:
        config = None
    if not isinstance(config, dict) or not {"cluster", "task"} <= set(config):
        what = "missing cluster" if not text.strip() else "invalid value"
        raise OptionError(f"{what} in TF_CONFIG: --strategy multi-worker needs each worker's "
                          "TF_CONFIG, a JSON object with its cluster and task "
                          "(docs/multi_worker.md)")


class DevScores(keras.callbacks.Callback):
    """Adds a task's dev score to each epoch's logs. ``score(model)`` returns ``(logs,
    result)``: the ``{name: value}`` to log (the task's ``monitor`` among them) and the
    whole dev result, kept by epoch so that the run's summary takes the best epoch's
    (:meth:`result`) instead of scoring the dev set a second time."""

    def __init__(self, score: Callable[[keras.Model], tuple[dict[str, Any], Any]]) -> None:
        super().__init__()
        self.score = score
        self.results: dict[int, Any] = {}  # 1-based epoch -> result

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        values, self.results[epoch + 1] = self.score(self.model)
        logs.update(values)  # type: ignore[union-attr]  # fit passes each epoch's logs

    def result(self, epoch: int | None, compute: Callable[[], Any]) -> Any:
        """The dev result of ``epoch`` (1-based, the recorder's best) when it was scored in
        this process, with the weights ``model.keras`` holds; else ``compute()`` (an epoch
        trained before a resume)."""
        return self.results[epoch] if epoch in self.results else compute()
