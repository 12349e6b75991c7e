"""Sentence-pair similarity: a siamese BERT trained with CoSENT, evaluated, used.

Each text of a pair is encoded alone by the same BERT (zero segment ids), its token vectors
averaged over the text's tokens, [CLS] and [SEP] included and padding left out
(``Pooler-Mean``, :class:`MeanPooling`), and the pair is scored by the cosine of its two
vectors: a bi-encoder, as Sentence-BERT and bert4keras's CoSENT scripts build it, not a
cross-encoder reading both texts at once (classification's ``pair_column``). The loss is
CoSENT (:func:`kerasbert.tasks.similarity.scores.cosent_loss`); the best epoch is the one
whose dev cosines correlate best with the dev labels (Spearman), and the cosine threshold
with the best dev accuracy is kept for ``predict`` and ``evaluate``.

A run directory holds::

    model.keras          the encoder, text -> vector (best epoch by dev Spearman)
    bert_model.ckpt.*    the fine-tuned backbone as a Google checkpoint
    bert_config.json  vocab.txt  threshold.json  train_config.json  history.csv  metrics.json

Example::

    # the shipped kerasbert-zh-small on the shipped People's Daily name pairs
    summary = train(SimilarityOptions(output="runs/pairs"))
    summary["test"]["spearman"], summary["test"]["accuracy"]
"""

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any

import keras
import numpy as np

from kerasbert import files
from kerasbert.inference.predictor import Predictor, predict_in_batches
from kerasbert.models.names import SERIALIZATION_PACKAGE
from kerasbert.tasks.base import DevScores, Task, train
from kerasbert.tasks.runs import (
    FinishedRun,
    build_encoder,
    check_checkpoint,
    check_model_files,
    export_saved_model,
    run_directory_line,
)
from kerasbert.tasks.similarity import data as pair_data
from kerasbert.tasks.similarity.options import SimilarityOptions
from kerasbert.tasks.similarity.scores import best_threshold, cosent_loss, pair_scores
from kerasbert.training import data
from kerasbert.training.callbacks import RunRecorder, inference_model
from kerasbert.training.options import OptionError
from kerasbert.training.rundir import RunError, read_json

__all__ = ["MeanPooling", "Run", "SimilarityOptions", "TASK", "build_encoder_model",
           "build_siamese", "cosines", "embed", "train"]
log = logging.getLogger(__name__)
MONITOR = "val_spearman"
THRESHOLD_FILE = "threshold.json"
#: The layer names of the head: the mean over the tokens, and the encoder inside the
#: siamese model (the model a run saves).
MEAN_POOLING = "Pooler-Mean"
ENCODER = "Pair-Encoder"


@keras.saving.register_keras_serializable(package=SERIALIZATION_PACKAGE)
class MeanPooling(keras.layers.Layer):
    """The mean of a sequence's vectors over its tokens, padding (token id 0) left out:
    ``[(batch, length, hidden), (batch, length)] -> (batch, hidden)``, in float32.

    Example:
        >>> vectors = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]], "float32")
        >>> pooled = MeanPooling()([vectors, np.array([[5, 7, 0]], "int32")])
        >>> keras.ops.convert_to_numpy(pooled).tolist()
        [[2.0, 3.0]]
    """

    def call(self, inputs: Any) -> Any:
        sequence, token_ids = inputs
        mask = keras.ops.cast(keras.ops.not_equal(token_ids, 0), "float32")[:, :, None]
        total = keras.ops.sum(keras.ops.cast(sequence, "float32") * mask, axis=1)
        return total / keras.ops.maximum(keras.ops.sum(mask, axis=1), 1.0)

    def compute_mask(self, inputs: Any, mask: Any = None) -> None:
        return None

    def compute_output_shape(self, input_shape: Any) -> tuple[Any, Any]:
        return (input_shape[0][0], input_shape[0][-1])


def build_encoder_model(options: SimilarityOptions) -> keras.Model:
    """The model a run saves: the run's BERT (token and segment ids), then ``Pooler-Mean``:
    one vector per text."""
    bert = build_encoder(options).model
    vector = MeanPooling(name=MEAN_POOLING, dtype="float32")([bert.outputs[0], bert.inputs[0]])
    return keras.Model(bert.inputs, vector, name=ENCODER)


def build_siamese(encoder: keras.Model) -> keras.Model:
    """The model trained: the token ids of both texts -> the cosine of their vectors, each
    text encoded by ``encoder`` with zero segment ids."""
    first = keras.Input((None,), dtype="int32", name="Input-Token-A")
    second = keras.Input((None,), dtype="int32", name="Input-Token-B")
    vectors = [keras.ops.normalize(encoder([ids, keras.ops.zeros_like(ids)]), axis=-1)
               for ids in (first, second)]
    cosine = keras.ops.sum(vectors[0] * vectors[1], axis=-1)
    return keras.Model([first, second], cosine, name="siamese")


def embed(model: keras.Model, tokenizer: Any, texts: Iterable[str], maxlen: int,
          batch_size: int = 64, progress: bool = False) -> np.ndarray:
    """The vectors ``[texts, hidden]`` of ``model`` (a run's encoder) for ``texts``."""
    texts = list(texts)
    if not texts:
        return np.zeros((0, model.outputs[0].shape[-1]), "float32")
    token_ids, segment_ids = tokenizer.encode_batch(texts, maxlen=maxlen)
    return np.stack(predict_in_batches(Predictor(model), token_ids, segment_ids, batch_size,
                                       progress=progress))


def cosines(model: keras.Model, tokenizer: Any, pairs: data.Examples, maxlen: int,
            progress: bool = False) -> np.ndarray:
    """The cosine of each pair of :class:`~kerasbert.training.data.Examples` (its
    ``texts`` and ``pairs``)."""
    a, b = (embed(model, tokenizer, texts, maxlen, progress=progress)
            for texts in (pairs.texts, pairs.pairs))
    a /= np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b /= np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return (a * b).sum(-1)


def _dev_result(model: keras.Model, inputs: "_Inputs",
                options: SimilarityOptions) -> dict[str, Any]:
    """The dev scores of an encoder, at the threshold it is best at where the dev labels
    are 0 or 1 (graded labels: Spearman alone, no threshold)."""
    found = cosines(model, inputs.tokenizer, inputs.dev, options.maxlen)
    labels = pair_data.label_values(inputs.dev)
    threshold = best_threshold(found, labels) if pair_data.is_binary(inputs.dev) else None
    return pair_scores(found, labels, threshold)


class _Inputs:
    """A run's pairs, read and checked before the directory is made."""

    tokenizer: Any
    train: data.Examples
    dev: data.Examples
    test: data.Examples | None
    steps: int
    dev_scores: DevScores

    @classmethod
    def read(cls, options: SimilarityOptions) -> "_Inputs":
        self = cls()
        self.tokenizer = check_model_files(options)
        self.train = pair_data.read_pairs(options.train)
        if options.max_train_examples:
            self.train = self.train.head(options.max_train_examples)
        self.dev = pair_data.read_pairs(options.dev)
        self.test = pair_data.read_pairs(options.test) if options.test else None
        for pairs in (self.train, self.dev):
            pair_data.check_labels(pairs)
            pair_data.check_different_texts(pairs)
        if options.batch_size < 2:
            raise OptionError(f"invalid value {options.batch_size} in --batch-size: CoSENT ranks "
                              "the pairs of a batch against each other, and one pair has none "
                              "to rank; use 2 or more (16 or more ranks more pairs a step)")
        share = pair_data.one_label_share(self.train, options.batch_size)
        if share >= pair_data.ONE_LABEL_WARNING:
            log.warning("--batch-size %d: about %.0f%% of the batches of %s hold pairs of one "
                        "label only, which give CoSENT no pair to rank (they add 0 to the "
                        "loss); a larger --batch-size ranks more pairs a step", options.batch_size,
                        100 * share, options.train)
        check_checkpoint(options)
        self.steps = -(-len(self.train) // options.batch_size)
        return self


class Similarity(Task):
    """``--task similarity``: a siamese encoder scored by cosine, chosen by dev Spearman."""

    name = "similarity"
    monitor = MONITOR
    texts_per_example = 2

    def read_inputs(self, options: SimilarityOptions) -> _Inputs:
        return _Inputs.read(options)

    def training_arrays(self, options: SimilarityOptions,
                        inputs: _Inputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # The second text's ids go where other tasks have segment ids (make_dataset cuts
        # both to the batch's longest row).
        first, second = (inputs.tokenizer.encode_batch(texts, maxlen=options.maxlen)[0]
                         for texts in (inputs.train.texts, inputs.train.pairs))
        width = max(first.shape[1], second.shape[1])
        first, second = (np.pad(ids, [(0, 0), (0, width - ids.shape[1])])
                         for ids in (first, second))
        return first, second, pair_data.label_values(inputs.train)

    def build_model(self, options: SimilarityOptions, inputs: _Inputs) -> keras.Model:
        return build_siamese(build_encoder_model(options))

    def loss(self, model: keras.Model) -> Any:
        return cosent_loss

    def dev_scoring(self, options: SimilarityOptions,
                    inputs: _Inputs) -> tuple[Any, list[Any]]:
        def dev_spearman(model: keras.Model) -> tuple[dict[str, Any], dict[str, Any]]:
            result = _dev_result(model.get_layer(ENCODER), inputs, options)
            return {MONITOR: result["spearman"]}, result

        inputs.dev_scores = DevScores(dev_spearman)
        return None, [inputs.dev_scores]

    def saved_model(self, model: keras.Model) -> keras.Model:
        return inference_model(model.get_layer(ENCODER))

    def write_results(self, options: SimilarityOptions, inputs: _Inputs,
                      recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
        output = options.output
        dev = inputs.dev_scores.result(recorder.best_epoch,
                                       lambda: _dev_result(model, inputs, options))
        files.write_json(os.path.join(output, THRESHOLD_FILE), {"threshold": dev["threshold"]})
        summary: dict[str, Any] = {"best_epoch": recorder.best_epoch,
                                   "train_pairs": len(inputs.train), "dev": dev}
        if inputs.test is not None:
            summary["test"] = pair_scores(
                cosines(model, inputs.tokenizer, inputs.test, options.maxlen),
                pair_data.label_values(inputs.test), dev["threshold"])
        return summary

    def train_report(self, options: SimilarityOptions,
                     summary: dict[str, Any]) -> list[str]:
        shown = "test" if "test" in summary else "dev"
        threshold = summary["dev"]["threshold"]
        found = ("graded dev labels: no threshold" if threshold is None
                 else f"threshold {threshold:.4f} from dev")
        return [f"\n{shown} {_scores_line(summary[shown])} ({found}; best epoch "
                f"{summary['best_epoch']})",
                run_directory_line(options, THRESHOLD_FILE)]

    def evaluation_report(self, metrics: dict[str, Any]) -> list[str]:
        threshold = ("" if "accuracy" not in metrics
                     else f"  (threshold {metrics['threshold']:.4f})")
        return [f"pairs {metrics['pairs']}  {_scores_line(metrics)}{threshold}"]


def _scores_line(scores: dict[str, Any]) -> str:
    rho = "n/a" if scores["spearman"] is None else f"{scores['spearman']:.4f}"
    if "accuracy" not in scores:  # graded labels, or a run without a threshold
        return f"Spearman {rho}"
    return (f"Spearman {rho}  accuracy {scores['accuracy']:.4f}  F1 {scores['f1']:.4f} "
            f"(precision {scores['precision']:.4f}, recall {scores['recall']:.4f})")


class Run(FinishedRun):
    """A finished similarity run directory, for evaluate / predict / export.

    Raises:
        RunError: not a finished similarity run, or a missing or corrupt file (named).
    """

    def __init__(self, run_dir: str | os.PathLike[str], accept_changed: bool = False) -> None:
        super().__init__(run_dir, accept_changed=accept_changed)
        path = os.path.join(self.run_dir, THRESHOLD_FILE)
        saved = read_json(path, "threshold")
        value = saved.get("threshold", False) if isinstance(saved, dict) else False
        if value is not None and (isinstance(value, bool)
                                  or not isinstance(value, (int, float))):
            raise RunError(f"threshold in {path}: must be a JSON object "
                           "{\"threshold\": <cosine>} (null: a run on graded labels)")
        self.threshold = None if value is None else float(value)

    def check_model(self) -> None:
        if len(self.model.inputs) != 2 or len(self.model.outputs[0].shape) != 2:
            raise RunError(f"model in {os.path.join(self.run_dir, 'model.keras')}: not a text "
                           "encoder (token and segment ids -> a vector); is it the run's own?")

    def evaluate(self, path: str | os.PathLike[str], progress: bool = False) -> dict[str, Any]:
        """Spearman, and accuracy, precision, recall and F1 at the run's threshold (where
        it has one and the file's labels are 0 or 1), on a labelled file of pairs."""
        pairs = pair_data.read_pairs(path)
        found = cosines(self.model, self.tokenizer, pairs, self.options.maxlen, progress)
        return pair_scores(found, pair_data.label_values(pairs), self.threshold)

    def predict(self, texts: Sequence[str] | None = None,
                path: str | os.PathLike[str] | None = None,
                progress: bool = False) -> list[dict[str, Any]]:
        """``[{"text_a", "text_b", "similarity", "label"}]`` for ``texts`` given as
        ``[text_a, text_b, text_a, text_b...]``, or for the pairs of a file (labels not
        needed); ``label`` is 1 where the cosine is at least the run's threshold (a run on
        graded labels has none, and gives no ``label``)."""
        if path is not None and os.path.splitext(path)[1].lower() in data.TEXT_SUFFIXES:
            raise data.DataError(f"data file in {path}: a .txt file holds one text per line, "
                                 "but a similarity run compares pairs; give a .tsv/.csv/.jsonl "
                                 "file with the columns text_a and text_b, or the texts as "
                                 "TEXT_A TEXT_B pairs")
        if path is not None:
            pairs = pair_data.read_pairs(path, require_labels=False)
        else:
            # texts: given where no path is
            TASK.check_texts(texts)  # type: ignore[arg-type]
            pairs = data.Examples.from_texts(texts[::2], texts[1::2])  # type: ignore[index]
        found = cosines(self.model, self.tokenizer, pairs, self.options.maxlen, progress)
        return [{"text_a": a, "text_b": b, "similarity": float(cosine),
                 **({} if self.threshold is None else {"label": int(cosine >= self.threshold)})}
                for a, b, cosine in zip(pairs.texts, pairs.pairs, found)]

    def embed(self, texts: Iterable[str], progress: bool = False) -> np.ndarray:
        """The vectors ``[texts, hidden]`` (float32) of the run's encoder for ``texts``
        (``[0, hidden]`` for none)."""
        return embed(self.model, self.tokenizer, texts, self.options.maxlen, progress=progress)

    def export(self, directory: str | os.PathLike[str], overwrite: bool = False,
               format: str = "saved_model", **options: Any) -> list[str]:
        """Writes the model for serving, a SavedModel (:mod:`kerasbert.tasks.similarity.export`);
        returns the files written."""
        return export_saved_model(self, "kerasbert.tasks.similarity.export", directory,
                                  overwrite, format, dict(options, threshold=self.threshold,
                                                          maxlen=self.options.maxlen))


Similarity.run_class = Run
TASK = Similarity()
