"""Fine-tuning a BERT text classifier end to end: train, evaluate, predict, export.

A run directory holds everything needed to use the model again::

    model.keras          best epoch by dev accuracy (loads with safe_mode=True)
    bert_model.ckpt.*    the fine-tuned backbone as a Google checkpoint
    bert_config.json  vocab.txt  labels.json  train_config.json
    history.csv  metrics.json  confusion_matrix.png  training_curves.png

Example:
    >>> summary = train(TrainOptions(output="runs/reviews", epochs=1))
    >>> summary["test"]["accuracy"] > 0.8
    True
"""

import dataclasses
import json
import logging
import os
import shutil

import keras
import numpy as np

from kerasbert import data, reports
from kerasbert.callbacks import RunRecorder, backup_and_restore, check_run_directory, first_epoch
from kerasbert.config import BertConfig
from kerasbert.heads import add_cls_classifier
from kerasbert.models import build_transformer_model
from kerasbert.training import make_optimizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, "checkpoints", "kerasbert-zh-small")
DEFAULT_DATA = os.path.join(ROOT, "data", "reviews")
log = logging.getLogger(__name__)


@dataclasses.dataclass
class TrainOptions:
    """Everything ``kerasbert train`` takes; saved as ``train_config.json``."""

    output: str
    train: str = None
    dev: str = None
    test: str = None
    config: str = None
    checkpoint: str = None
    vocab: str = None
    text_column: str = "text"
    pair_column: str = None
    label_column: str = "label"
    maxlen: int = 128
    batch_size: int = 32
    epochs: int = 3
    lr: float = 2e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    grad_accum: int = 1
    dropout: float = 0.1
    patience: int = 2
    seed: int = 42
    max_train_examples: int = None
    mixed_precision: bool = False
    jit_compile: bool = False
    strategy: str = None
    skip_bad_rows: bool = False
    resume: bool = False

    def resolved(self):
        """Fills in the shipped model and review split where none is given."""
        model_dir = DEFAULT_MODEL
        values = dataclasses.asdict(self)
        if not self.train:
            values.update(train=os.path.join(DEFAULT_DATA, "train.tsv"),
                          dev=self.dev or os.path.join(DEFAULT_DATA, "dev.tsv"),
                          test=self.test or os.path.join(DEFAULT_DATA, "test.tsv"))
        if not self.config:
            values.update(config=os.path.join(model_dir, "bert_config.json"),
                          checkpoint=self.checkpoint or os.path.join(model_dir, "bert_model.ckpt"),
                          vocab=self.vocab or os.path.join(model_dir, "vocab.txt"))
        if not values["dev"]:
            raise ValueError("--dev is needed: the best epoch is chosen on it")
        if not values["vocab"]:
            values["vocab"] = os.path.join(os.path.dirname(values["config"]), "vocab.txt")
        return TrainOptions(**values)


def _strategy(name):
    import tensorflow as tf

    if not name:
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if name == "multi-worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"strategy {name!r} is not supported; use mirrored or multi-worker")


def train(options, callbacks=()):
    """Fine-tunes a classifier; returns the run summary (also in ``metrics.json``).

    Args:
        options: a :class:`TrainOptions`.
        callbacks: more Keras callbacks for ``fit``.
    """
    options = options.resolved()
    check_run_directory(options.output, options.resume)
    policy = keras.mixed_precision.dtype_policy()
    if options.mixed_precision:
        keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        return _train(options, list(callbacks))
    finally:
        keras.mixed_precision.set_dtype_policy(policy)


def _train(options, callbacks):
    from kerasbert.tokenizer import Tokenizer

    keras.utils.set_random_seed(options.seed)
    tokenizer = Tokenizer(options.vocab)
    read = dict(text_column=options.text_column, pair_column=options.pair_column,
                label_column=options.label_column, skip_bad_rows=options.skip_bad_rows)
    train_rows = data.read_examples(options.train, **read)
    if options.max_train_examples:
        train_rows = _head(train_rows, options.max_train_examples)
    dev_rows = data.read_examples(options.dev, **read)
    labels = sorted(set(train_rows.labels))
    if len(labels) < 2:
        raise data.DataError(f"{options.train}: training needs at least two labels, found {labels}")
    encode = lambda rows: (*data.encode_examples(tokenizer, rows, options.maxlen),  # noqa: E731
                           data.label_ids(rows, labels))
    train_arrays, dev_arrays = encode(train_rows), encode(dev_rows)

    steps_per_epoch = -(-len(train_rows) // options.batch_size)
    updates = max(1, steps_per_epoch * options.epochs // options.grad_accum)
    start_epoch = first_epoch(options.output) if options.resume else 0
    os.makedirs(options.output, exist_ok=True)
    with _strategy(options.strategy).scope():
        bert = build_transformer_model(options.config, options.checkpoint,
                                       dropout_rate=options.dropout)
        model = add_cls_classifier(bert, len(labels), dropout_rate=options.dropout)
        model.compile(
            optimizer=make_optimizer(model, options.lr, updates, options.warmup,
                                     options.weight_decay, gradient_accumulation=options.grad_accum),
            loss="sparse_categorical_crossentropy", metrics=["accuracy"],
            jit_compile=options.jit_compile)
    train_set = data.make_dataset(*train_arrays, batch_size=options.batch_size,
                                  seed=options.seed, first_epoch=start_epoch)
    dev_set = data.make_dataset(*dev_arrays, batch_size=64)
    recorder = RunRecorder(options.output, patience=options.patience, first_epoch=start_epoch)
    history = model.fit(
        train_set, validation_data=dev_set, epochs=options.epochs, initial_epoch=start_epoch,
        steps_per_epoch=steps_per_epoch, shuffle=False, verbose=2 if os.environ.get("CI") else 1,
        # The recorder writes the epoch's history before the backup marks the epoch done.
        callbacks=[recorder, backup_and_restore(options.output)] + callbacks)
    del history  # the recorder keeps the whole history, resumed epochs included
    return _finish_run(options, tokenizer, labels, train_rows, dev_rows, recorder)


def _head(rows, n):
    return data.Examples(rows.texts[:n], rows.pairs[:n], rows.labels[:n], rows.path,
                         rows.lines[:n], rows.skipped)


def _finish_run(options, tokenizer, labels, train_rows, dev_rows, recorder):
    from kerasbert.checkpoint import save_weights_as_checkpoint

    output = options.output
    model = load_run_model(output)
    config = BertConfig.from_json_file(options.config)
    config.to_json_file(os.path.join(output, "bert_config.json"))
    with reports.atomic_path(os.path.join(output, "vocab.txt")) as temporary:
        shutil.copyfile(options.vocab, temporary)
    reports.write_json(os.path.join(output, "labels.json"), labels)
    reports.write_json(os.path.join(output, "train_config.json"), dataclasses.asdict(options))
    save_weights_as_checkpoint(model, os.path.join(output, "bert_model.ckpt"))

    summary = {"labels": labels, "best_epoch": recorder.best_epoch,
               "train_examples": len(train_rows),
               "skipped_rows": {options.train: len(train_rows.skipped),
                                options.dev: len(dev_rows.skipped)},
               "dev": _metrics(model, tokenizer, labels, dev_rows, options)}
    shown = summary["dev"]
    if options.test:
        test_rows = data.read_examples(options.test, text_column=options.text_column,
                                       pair_column=options.pair_column,
                                       label_column=options.label_column,
                                       skip_bad_rows=options.skip_bad_rows)
        summary["skipped_rows"][options.test] = len(test_rows.skipped)
        summary["test"] = shown = _metrics(model, tokenizer, labels, test_rows, options)
    reports.write_json(os.path.join(output, "metrics.json"), summary)
    reports.plot_confusion_matrix(os.path.join(output, "confusion_matrix.png"), labels,
                                  shown["confusion_matrix"],
                                  title="test" if options.test else "dev")
    reports.plot_training_curves(os.path.join(output, "training_curves.png"), recorder.history,
                                 best_epoch=recorder.best_epoch)
    return summary


def _metrics(model, tokenizer, labels, rows, options):
    probabilities = _predict(model, tokenizer, rows, options.maxlen)
    return reports.classification_metrics(labels, data.label_ids(rows, labels),
                                          probabilities.argmax(-1))


def _predict(model, tokenizer, rows, maxlen, batch_size=64):
    token_ids, segment_ids = data.encode_examples(tokenizer, rows, maxlen)
    dataset = data.make_dataset(token_ids, segment_ids, batch_size=batch_size)
    return np.asarray(model.predict(dataset, verbose=0), dtype="float32")


def load_run_model(run_dir):
    """The best model of a run, loaded with ``safe_mode=True``."""
    path = os.path.join(run_dir, "model.keras")
    if not os.path.exists(path):
        raise FileNotFoundError(f"No model.keras in {run_dir}: is it a kerasbert run directory?")
    return keras.saving.load_model(path, safe_mode=True)


class Run:
    """A finished run directory, for evaluate / predict / export."""

    def __init__(self, run_dir):
        from kerasbert.tokenizer import Tokenizer

        self.run_dir = run_dir
        self.model = load_run_model(run_dir)
        with open(os.path.join(run_dir, "labels.json"), encoding="utf-8") as f:
            self.labels = json.load(f)
        with open(os.path.join(run_dir, "train_config.json"), encoding="utf-8") as f:
            self.options = TrainOptions(**json.load(f))
        self.tokenizer = Tokenizer(os.path.join(run_dir, "vocab.txt"))

    def evaluate(self, path):
        """Metrics of the model on a labelled file."""
        o = self.options
        rows = data.read_examples(path, o.text_column, o.pair_column, o.label_column,
                                  skip_bad_rows=o.skip_bad_rows)
        return _metrics(self.model, self.tokenizer, self.labels, rows, o)

    def predict(self, texts=None, path=None):
        """``[{"text", "label", "probability"}]`` for texts, or for the rows of a file."""
        if path is not None:
            o = self.options
            rows = data.read_examples(path, o.text_column, o.pair_column, o.label_column,
                                      require_labels=False)
        else:
            rows = data.Examples(list(texts), [None] * len(texts), [None] * len(texts))
        probabilities = _predict(self.model, self.tokenizer, rows, self.options.maxlen)
        best = probabilities.argmax(-1)
        return [{"text": text, "label": self.labels[i], "probability": float(p[i])}
                for text, i, p in zip(rows.texts, best, probabilities)]

    def export(self, directory):
        """Writes a TensorFlow SavedModel with an int32 ``serving_default`` signature."""
        import tensorflow as tf

        archive = keras.export.ExportArchive()
        archive.track(self.model)
        spec = [tf.TensorSpec((None, None), tf.int32, name="token_ids"),
                tf.TensorSpec((None, None), tf.int32, name="segment_ids")]
        archive.add_endpoint("serving_default",
                             lambda token_ids, segment_ids: self.model([token_ids, segment_ids],
                                                                       training=False),
                             input_signature=spec)
        temporary = f"{os.fspath(directory).rstrip('/')}.tmp"
        shutil.rmtree(temporary, ignore_errors=True)
        archive.write_out(temporary)
        if os.path.exists(directory):
            shutil.rmtree(directory)
        os.replace(temporary, directory)
        return directory
