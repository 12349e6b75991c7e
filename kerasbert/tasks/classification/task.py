"""Fine-tuning a BERT text classifier end to end: train, evaluate, predict, export.

A run directory holds everything needed to use the model again::

    model.keras          best epoch by dev accuracy (loads with safe_mode=True)
    bert_model.ckpt.*    the fine-tuned backbone as a Google checkpoint
    bert_config.json  vocab.txt  labels.json  train_config.json
    history.csv  metrics.json  confusion_matrix.png  training_curves.png

Example::

    # the shipped kerasbert-zh-small on the shipped reviews (7.3 minutes on 2 CPU cores)
    summary = train(ClassificationOptions(output="runs/reviews", epochs=3))
    round(summary["test"]["accuracy"], 3)   # 0.841, as in `make demo` (README.md)
"""

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import keras
import numpy as np

from kerasbert import files
from kerasbert.inference.predictor import Predictor, predict_in_batches
from kerasbert.models import names
from kerasbert.models.heads import add_cls_classifier
from kerasbert.tasks.base import Task, train
from kerasbert.tasks.classification import reports as class_reports
from kerasbert.tasks.classification.options import ClassificationOptions
from kerasbert.tasks.runs import (
    FinishedRun,
    build_encoder,
    check_checkpoint,
    check_model_files,
    run_directory_line,
)
from kerasbert.training import batches, data, distribute, reports
from kerasbert.training.callbacks import RunRecorder
from kerasbert.training.rundir import RunError, read_json

__all__ = ["ClassificationOptions", "Run", "TASK", "build_classifier", "train",
           "with_probabilities"]


@dataclasses.dataclass
class _Inputs:
    tokenizer: object
    labels: list
    train: data.Examples
    dev: data.Examples
    test: data.Examples | None = None
    steps: int = 0  # batches per epoch
    copies: int = 0  # short copies of long training rows (--prefix-copies)


def _read_inputs(options: ClassificationOptions) -> _Inputs:
    """Reads and checks every input before anything is built or written."""

    tokenizer = check_model_files(options)
    read: dict[str, Any] = dict(text_column=options.text_column, pair_column=options.pair_column,
                label_column=options.label_column, skip_bad_rows=options.skip_bad_rows)
    train_rows = data.read_examples(options.train, **read)
    if options.max_train_examples:
        train_rows = train_rows.head(options.max_train_examples)
    labels = sorted(set(train_rows.labels))
    if len(labels) < 2:
        raise data.DataError(f"labels in {options.train}: training needs at least two labels, "
                             f"found {labels}")
    inputs = _Inputs(tokenizer, labels, train_rows,
                     data.keep_known_labels(data.read_examples(options.dev, **read), labels,
                                            options.skip_bad_rows))
    if options.test:
        inputs.test = data.keep_known_labels(data.read_examples(options.test, **read), labels,
                                             options.skip_bad_rows)
    check_checkpoint(options)
    inputs.steps = -(-len(train_rows) // options.batch_size)
    return inputs


def build_classifier(options: ClassificationOptions, num_labels: int) -> keras.Model:
    """The classifier a run trains: BERT from the run's config and checkpoint, then
    ``CLS-token`` → ``CLS-Dropout`` → ``dense_output`` giving logits.

    The loss is computed from the logits (stabler than from probabilities, above all
    in bfloat16); the model a run saves appends the softmax (:func:`with_probabilities`).
    """
    bert = build_encoder(options)
    return add_cls_classifier(bert.model, num_labels, dropout_rate=options.dropout,
                              activation="linear",
                              initializer_range=bert.config.initializer_range)


#: ``(token_ids, segment_ids, label_ids)``.
_Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def _encode(inputs: _Inputs, rows: data.Examples, maxlen: int) -> _Arrays:
    """``(token_ids, segment_ids, label_ids)`` of labelled rows."""
    return (*batches.encode_examples(inputs.tokenizer, rows, maxlen),
            data.label_ids(rows, inputs.labels))


def _with_prefix_copies(inputs: _Inputs, arrays: _Arrays, length: int) -> _Arrays:
    """``(token_ids, segment_ids, label_ids)`` of the training rows, then a copy of each row
    longer than ``length`` tokens cut to ``length`` (as ``--maxlen`` cuts), with its label.

    A model fine-tuned on long texts alone reads short ones badly where the short training
    texts lean to one class (the shipped reviews: a median of 46 characters, and those of
    10-40 characters 2,284 positive to 3,083 negative); the copies are short texts whose
    words carry their review's label.
    """
    ids, segments, labels = arrays
    longer = batches.row_lengths(ids) > length
    cut_ids, cut_segments = batches.encode_examples(inputs.tokenizer, inputs.train, length)
    width = ((0, 0), (0, ids.shape[1] - cut_ids.shape[1]))  # [PAD] is 0, as row_lengths has it
    return (np.concatenate([ids, np.pad(cut_ids[longer], width)]),
            np.concatenate([segments, np.pad(cut_segments[longer], width)]),
            np.concatenate([labels, labels[longer]]))


class Classification(Task):
    """``--task classification``: a classifier on the [CLS] token, chosen by dev accuracy."""

    name = "classification"
    monitor = "val_accuracy"
    columns = True

    def read_inputs(self, options: ClassificationOptions) -> _Inputs:
        return _read_inputs(options)

    def check_texts(self, texts: Sequence[str], run: "Run | None" = None) -> None:
        """A run on sentence pairs takes its texts two at a time, each text and its pair."""
        if run is not None and run.options.pair_column and len(texts) % 2:
            raise ValueError(f"odd number of texts in TEXT ({len(texts)}): this run classifies "
                             f"sentence pairs ({run.options.text_column}, "
                             f"{run.options.pair_column}): give TEXT PAIR, TEXT PAIR...")

    def training_arrays(self, options: ClassificationOptions, inputs: _Inputs) -> _Arrays:
        arrays = _encode(inputs, inputs.train, options.maxlen)
        if options.prefix_copies:
            arrays = _with_prefix_copies(inputs, arrays, options.prefix_copies)
            inputs.copies = len(arrays[0]) - len(inputs.train)
            inputs.steps = -(-len(arrays[0]) // options.batch_size)
        return arrays

    def build_model(self, options: ClassificationOptions, inputs: _Inputs) -> keras.Model:
        return build_classifier(options, len(inputs.labels))

    def loss(self, model: keras.Model) -> Any:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def metrics(self) -> list[Any]:
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def dev_scoring(self, options: ClassificationOptions,
                    inputs: _Inputs) -> tuple[Any, list[Any]]:
        dev = batches.make_dataset(*_encode(inputs, inputs.dev, options.maxlen), batch_size=64)
        return distribute.shard_by_data(dev), []

    def saved_model(self, model: keras.Model) -> keras.Model:
        return with_probabilities(model)

    def write_results(self, options: ClassificationOptions, inputs: _Inputs,
                      recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
        return _write_results(options, inputs, recorder, model)

    def train_report(self, options: ClassificationOptions,
                     summary: dict[str, Any]) -> list[str]:
        shown = "test" if "test" in summary else "dev"
        lines = [f"\n{shown} accuracy {summary[shown]['accuracy']:.4f}, "
                 f"macro-F1 {summary[shown]['macro_f1']:.4f} (best epoch "
                 f"{summary['best_epoch']})"]
        one_class = _only_class(summary[shown], summary["labels"])
        if one_class is not None:
            lines.append(f"every {shown} example was labelled {one_class!r}: the model learnt "
                         f"only one class; try more epochs (--epochs, {options.epochs} now) or "
                         f"another rate (--lr, {options.lr:g} now), and check that the "
                         "training file has enough examples of each label")
        skipped = {path: n for path, n in summary["skipped_rows"].items() if n}
        if skipped:
            lines.append("skipped rows: " + ", ".join(f"{n} in {path}"
                                                      for path, n in skipped.items()))
        lines.append(run_directory_line(options, "confusion_matrix.png", "training_curves.png"))
        return lines

    def evaluation_report(self, metrics: dict[str, Any]) -> list[str]:
        width = max(len(label) for label in metrics["per_class"])
        return [f"examples {metrics['examples']}  accuracy {metrics['accuracy']:.4f}  "
                f"macro-F1 {metrics['macro_f1']:.4f}"] + [
            f"  {label:<{width}}  precision {row['precision']:.4f}  recall "
            f"{row['recall']:.4f}  F1 {row['f1']:.4f}  support {row['support']}"
            for label, row in metrics["per_class"].items()]


def _only_class(metrics: dict[str, Any], labels: Sequence[str]) -> str | None:
    """The label every example of ``metrics`` was given, or None when there were several."""
    predicted = np.asarray(metrics["confusion_matrix"]).sum(axis=0)
    used = np.flatnonzero(predicted)
    return labels[int(used[0])] if len(used) == 1 and len(labels) > 1 else None


def with_probabilities(model: keras.Model) -> keras.Model:
    """The saved form of a trained classifier: the same layers and weights, uncompiled,
    with a float32 softmax after ``dense_output`` so that it gives probabilities."""
    probabilities = keras.layers.Softmax(name=names.CLS_PROBABILITIES, dtype="float32")(
        model.outputs[0])
    return keras.Model(model.inputs, probabilities, name=model.name)


def _write_results(options: ClassificationOptions, inputs: _Inputs,
                   recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
    """Writes the run's files; returns the summary, which ``finish`` writes last."""
    output = options.output
    files.write_json(os.path.join(output, "labels.json"), inputs.labels)

    labels, tokenizer = inputs.labels, inputs.tokenizer
    summary: dict[str, Any] = {"labels": labels, "best_epoch": recorder.best_epoch,
               "train_examples": len(inputs.train), "prefix_copies": inputs.copies,
               "skipped_rows": {options.train: len(inputs.train.skipped),
                                options.dev: len(inputs.dev.skipped)},
               "dev": _metrics(model, tokenizer, labels, inputs.dev, options)}
    shown = summary["dev"]
    if inputs.test is not None:
        summary["skipped_rows"][options.test] = len(inputs.test.skipped)
        summary["test"] = shown = _metrics(model, tokenizer, labels, inputs.test, options)
    class_reports.plot_confusion_matrix(os.path.join(output, "confusion_matrix.png"), labels,
                                  shown["confusion_matrix"],
                                  title="test" if inputs.test is not None else "dev")
    reports.plot_training_curves(os.path.join(output, "training_curves.png"), recorder.history,
                                 best_epoch=recorder.best_epoch)
    return summary


def _metrics(model: keras.Model, tokenizer: Any, labels: list[str], rows: data.Examples,
             options: ClassificationOptions, progress: bool = False) -> dict[str, Any]:
    probabilities = _predict(model, tokenizer, rows, options.maxlen, progress=progress)
    return class_reports.classification_metrics(labels, data.label_ids(rows, labels),
                                          probabilities.argmax(-1))


def _predict(model: keras.Model, tokenizer: Any, rows: data.Examples, maxlen: int,
             batch_size: int = 64, progress: bool = False) -> np.ndarray:
    token_ids, segment_ids = batches.encode_examples(tokenizer, rows, maxlen)
    return np.stack(predict_in_batches(Predictor(model), token_ids, segment_ids, batch_size,
                                       progress=progress))


class Run(FinishedRun):
    """A finished run directory, for evaluate / predict / export.

    Args:
        run_dir: the run directory.
        accept_changed: open it although a file changed since the run finished.

    Raises:
        RunError: not a run directory, an unfinished run, or a missing or corrupt file
            (named).
        kerasbert.training.fingerprints.ChangedFile: a file replaced since the run finished.
    """

    def check_model(self) -> None:
        """Reads ``labels.json``, refused unless it names one label per output."""
        path = os.path.join(self.run_dir, "labels.json")
        self.labels = _read_labels(path)
        outputs = self.model.outputs[0].shape[-1]
        if outputs != len(self.labels):
            raise RunError(f"labels in {path}: {len(self.labels)} labels but the model has "
                           f"{outputs} outputs")

    def _read(self, path: str | os.PathLike[str], columns: dict[str, str | None],
              require_labels: bool, skip_bad_rows: bool | None = None) -> data.Examples:
        """Rows of a file, in the run's columns unless ``columns`` names others; bad rows
        skipped as the run did unless ``skip_bad_rows`` says otherwise."""
        o = self.options
        names = dict(text_column=o.text_column, pair_column=o.pair_column,
                     label_column=o.label_column)
        unknown = set(columns) - set(names)
        if unknown:
            raise TypeError(f"unknown column argument(s): {', '.join(sorted(unknown))}")
        names.update(columns)
        skip = o.skip_bad_rows if skip_bad_rows is None else skip_bad_rows
        return data.read_examples(path, **names, require_labels=require_labels,
                                  skip_bad_rows=skip)

    def _read_texts(self, path: str | os.PathLike[str],
                    columns: dict[str, str | None]) -> data.Examples:
        """The lines of a plain text file, for a run that classifies single texts."""
        if columns:
            raise data.DataError(f"columns in {path}: a .txt file has one text per line and no "
                                 f"columns ({', '.join(sorted(columns))} given)")
        if self.options.pair_column:
            raise data.DataError(
                f"data file in {path}: a .txt file holds one text per line, but this run "
                f"classifies pairs; give a .tsv/.csv/.jsonl file with the columns "
                f"'{self.options.text_column}' and '{self.options.pair_column}'")
        return data.read_texts(path)

    def evaluate(self, path: str | os.PathLike[str], progress: bool = False,
                 skip_bad_rows: bool | None = None, **columns: str | None) -> dict[str, Any]:
        """Metrics of the model on a labelled file.

        Args:
            path: labelled TSV/CSV/JSONL.
            progress: show a progress bar on stderr (when it is a terminal).
            skip_bad_rows: skip (and count, in a warning) malformed rows and rows of a label
                the run does not know; None: as the run did (its ``skip_bad_rows``).
            **columns: ``text_column``, ``pair_column``, ``label_column`` of the file,
                where they differ from the run's.
        """
        skip = self.options.skip_bad_rows if skip_bad_rows is None else skip_bad_rows
        rows = data.keep_known_labels(self._read(path, columns, require_labels=True,
                                                 skip_bad_rows=skip), self.labels, skip)
        return _metrics(self.model, self.tokenizer, self.labels, rows, self.options,
                        progress=progress)

    def predict(self, texts: Iterable[str] | None = None,
                path: str | os.PathLike[str] | None = None, progress: bool = False,
                **columns: str | None) -> list[dict[str, Any]]:
        """``[{"text", "label", "probability"}]`` for texts, for the rows of a table (its
        columns as for :meth:`evaluate`), or for the lines of a ``.txt`` file (one text per
        line, blank lines skipped). A run on sentence pairs takes ``texts`` as ``[text,
        pair, text, pair...]``, and each answer names its ``pair`` too."""
        if path is not None and os.path.splitext(path)[1].lower() in data.TEXT_SUFFIXES:
            rows = self._read_texts(path, columns)
        elif path is not None:
            rows = self._read(path, columns, require_labels=False)
        elif self.options.pair_column:
            texts = list(texts)  # type: ignore[arg-type]  # given where no path is
            TASK.check_texts(texts, self)
            rows = data.Examples.from_texts(texts[::2], texts[1::2])
        else:
            rows = data.Examples.from_texts(list(texts))  # type: ignore[arg-type]
        if not len(rows):
            return []
        probabilities = _predict(self.model, self.tokenizer, rows, self.options.maxlen,
                                 progress=progress)
        best = probabilities.argmax(-1)
        pairs = self.options.pair_column is not None
        return [{"text": text, **({"pair": pair} if pairs else {}), "label": self.labels[i],
                 "probability": float(p[i])}
                for text, pair, i, p in zip(rows.texts, rows.pairs, best, probabilities)]

    def export(self, directory: str | os.PathLike[str], overwrite: bool = False,
               format: str = "saved_model", **options: Any) -> list[str]:
        """Writes the model for serving; returns the files written.

        ``format`` ``saved_model`` (:func:`kerasbert.tasks.classification.export.export`),
        ``onnx`` or ``litert`` (:mod:`kerasbert.serving.portable`).
        """
        export: Callable[..., list[str]]  # this task's SavedModel, or a portable format
        if format == "saved_model":
            from kerasbert.tasks.classification.export import export

            options = dict(options, pairs=bool(self.options.pair_column))
        elif format == "onnx":
            from kerasbert.serving.portable import export_onnx as export
        elif format == "litert":
            from kerasbert.serving.portable import export_litert as export
        else:
            raise ValueError(f"invalid value {format!r} in --format: must be saved_model, onnx "
                             "or litert")
        return export(self.model, os.path.join(self.run_dir, "vocab.txt"), directory,
                      labels=self.labels, maxlen=self.options.maxlen, overwrite=overwrite,
                      source=self.run_dir, **options)


def _read_labels(path: str) -> list[str]:
    labels = read_json(path, "labels")
    if (not isinstance(labels, list) or len(labels) < 2
            or not all(isinstance(label, str) for label in labels)):
        raise RunError(f"labels in {path}: must be a JSON list of at least two label strings")
    return labels


Classification.run_class = Run
TASK = Classification()
