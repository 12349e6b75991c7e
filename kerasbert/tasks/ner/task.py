"""Named-entity recognition: a tagger on BERT's sequence output, trained, evaluated, used.

The tagger is ``Tagger-Dropout`` → ``Tagger-Dense`` (one score per tag and token) → ``CRF``
(:func:`kerasbert.models.heads.add_tagger`), or a softmax over the tags without the CRF
(``no_crf``). Files are CoNLL or JSONL (:mod:`kerasbert.tasks.ner.data`); the best
epoch is the one with the best entity-level F1 on the dev file, scored on characters
against the file's own spans as conlleval counts them (:mod:`kerasbert.tasks.ner.entities`).

A run directory holds::

    model.keras          best epoch by dev entity F1 (loads with safe_mode=True)
    bert_model.ckpt.*    the fine-tuned backbone as a Google checkpoint
    bert_config.json  vocab.txt  tags.json  train_config.json  history.csv  metrics.json

Example::

    # the shipped kerasbert-zh-small on the shipped People's Daily split
    summary = train(NerOptions(output="runs/ner", maxlen=160))
    summary["test"]["micro"]["f1"]
"""

import os
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import keras
import numpy as np

from kerasbert import files
from kerasbert.inference.compiled import compiled
from kerasbert.inference.predictor import predict_in_batches
from kerasbert.models import names
from kerasbert.models.heads import add_tagger
from kerasbert.tasks.base import DevScores, Task, train
from kerasbert.tasks.ner import data as ner_data
from kerasbert.tasks.ner.decoding import EntityReader, best_tags, token_entities
from kerasbert.tasks.ner.entities import entity_scores
from kerasbert.tasks.ner.options import NerOptions
from kerasbert.tasks.runs import (
    FinishedRun,
    build_encoder,
    check_checkpoint,
    check_model_files,
    export_saved_model,
    run_directory_line,
)
from kerasbert.text.padding import sequence_padding
from kerasbert.training.callbacks import RunRecorder
from kerasbert.training.rundir import RunError, read_json

__all__ = ["NerOptions", "Run", "TASK", "build_tagger", "encode",
           "predict_tags", "score", "train"]
TAGS_FILE = "tags.json"
MONITOR = "val_entity_f1"

#: ``(token_ids, segment_ids, tag_ids, spans, lost)`` of sentences (:func:`encode`).
_Encoded = tuple[np.ndarray, np.ndarray, np.ndarray, list[list[tuple[int, int] | None]], int]


def build_tagger(options: NerOptions, num_tags: int) -> keras.Model:
    """The tagger a run trains: the run's BERT, then :func:`add_tagger`."""
    bert = build_encoder(options)
    return add_tagger(bert.model, num_tags, crf=not options.no_crf, dropout_rate=options.dropout,
                      initializer_range=bert.config.initializer_range)


_TAG_FUNCTIONS: weakref.WeakKeyDictionary[Any, Callable[..., Any]] = weakref.WeakKeyDictionary()


def _tag_function(model: keras.Model) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``(token_ids, segment_ids) -> tag ids`` for ``model``: :func:`best_tags` (the tagger
    and its decoding, as the export runs it) compiled once as the backend compiles it, for
    any batch and width (:func:`~kerasbert.inference.compiled.compiled`)."""
    if model not in _TAG_FUNCTIONS:
        _TAG_FUNCTIONS[model] = compiled(lambda ids, segments: best_tags(model, ids, segments)[0],
                                         model.weights, ["int32", "int32"])
    function = _TAG_FUNCTIONS[model]
    return lambda ids, segments: keras.ops.convert_to_numpy(function(
        keras.ops.convert_to_tensor(np.asarray(ids, "int32")),
        keras.ops.convert_to_tensor(np.asarray(segments, "int32"))))


class _Inputs:
    """A run's sentences, tags and encoded arrays, all read before the directory is made."""

    tokenizer: Any
    sentences: dict[str, list[ner_data.Sentence]]
    tags: list[str]
    maxlen: int
    train: _Encoded
    dev: _Encoded
    steps: int
    dev_scores: DevScores

    @classmethod
    def read(cls, options: NerOptions) -> "_Inputs":
        self = cls()
        self.tokenizer = check_model_files(options)
        self.sentences = {"train": ner_data.read_sentences(options.train)[
                              :options.max_train_examples or None],
                          "dev": ner_data.read_sentences(options.dev)}
        if options.test:
            self.sentences["test"] = ner_data.read_sentences(options.test)
        check_checkpoint(options)
        self.tags = ner_data.tag_names(self.sentences["train"])
        if len(self.tags) < 2:
            raise ner_data.DataError(f"data in {options.train}: no entity to learn")
        self.maxlen = options.maxlen
        self.train = self.encode(self.sentences["train"])
        self.dev = self.encode(self.sentences["dev"])
        self.steps = -(-len(self.sentences["train"]) // options.batch_size)
        return self

    def encode(self, sentences: Sequence[ner_data.Sentence]) -> _Encoded:
        return encode(self.tokenizer, sentences, self.maxlen, self.tags)


def encode(tokenizer: Any, sentences: Iterable[ner_data.Sentence], maxlen: int,
           tags: Sequence[str]) -> _Encoded:
    """``(token_ids, segment_ids, tag_ids, spans, lost)`` of ``sentences``, padded."""
    rows = [ner_data.token_tags(tokenizer, sentence, maxlen, tags) for sentence in sentences]
    token_ids = sequence_padding([row[0] for row in rows], dtype="int32")
    tag_ids = sequence_padding([row[1] for row in rows], token_ids.shape[1], dtype="int32")
    return (token_ids, np.zeros_like(token_ids), tag_ids, [row[2] for row in rows],
            sum(row[3] for row in rows))


def predict_tags(model: keras.Model, token_ids: np.ndarray, segment_ids: np.ndarray,
                 batch_size: int = 64, progress: bool = False) -> np.ndarray:
    """The best tag ids ``[examples, maxlen]`` for padded token ids (0 at padding).

    Rows go through the model in batches of similar length, each cut to its longest row;
    ``progress`` shows a bar over them on stderr (when it is a terminal).
    """
    if not len(token_ids):
        return np.zeros(token_ids.shape, "int32")
    return sequence_padding(predict_in_batches(_tag_function(model), token_ids, segment_ids,
                                               batch_size, per_token=True, progress=progress),
                            token_ids.shape[1], dtype="int32")


def score(model: keras.Model, encoded: _Encoded, sentences: Sequence[ner_data.Sentence],
          tags: Sequence[str], batch_size: int = 64, progress: bool = False,
          ) -> tuple[dict[str, Any], list[list[tuple[str, int, int]]]]:
    """Entity-level scores of ``model`` on encoded sentences (see :func:`entity_scores`),
    with the predicted entities of each sentence."""
    token_ids, segment_ids, _, spans, _ = encoded
    predicted = token_entities(
        EntityReader(tags), predict_tags(model, token_ids, segment_ids, batch_size, progress),
        spans)
    truth = [ner_data.char_tags(s.text, s.entities) for s in sentences]
    guess = [ner_data.char_tags(s.text, found) for s, found in zip(sentences, predicted)]
    return entity_scores(truth, guess), predicted


def _write_results(options: NerOptions, inputs: _Inputs,
                   recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
    output = options.output
    files.write_json(os.path.join(output, TAGS_FILE), inputs.tags)
    summary: dict[str, Any] = {"tags": inputs.tags, "best_epoch": recorder.best_epoch,
               "train_sentences": len(inputs.sentences["train"]),
               "lost_entities": {options.train: inputs.train[4], options.dev: inputs.dev[4]},
               "dev": inputs.dev_scores.result(recorder.best_epoch, lambda: score(
                   model, inputs.dev, inputs.sentences["dev"], inputs.tags)[0])}
    if options.test:
        test = inputs.encode(inputs.sentences["test"])
        summary["lost_entities"][options.test] = test[4]
        summary["test"] = score(model, test, inputs.sentences["test"], inputs.tags)[0]
    return summary


class Ner(Task):
    """``--task ner``: a tagger (CRF) on the sequence output, chosen by dev entity F1."""

    name = "ner"
    monitor = MONITOR

    def read_inputs(self, options: NerOptions) -> _Inputs:
        return _Inputs.read(options)

    def training_arrays(self, options: NerOptions,
                        inputs: _Inputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return inputs.train[:3]

    def build_model(self, options: NerOptions, inputs: _Inputs) -> keras.Model:
        return build_tagger(options, len(inputs.tags))

    def loss(self, model: keras.Model) -> Any:
        if names.CRF in {layer.name for layer in model.layers}:
            return model.get_layer(names.CRF).loss
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def dev_scoring(self, options: NerOptions, inputs: _Inputs) -> tuple[Any, list[Any]]:
        def dev_f1(model: keras.Model) -> tuple[dict[str, Any], dict[str, Any]]:
            scores, _ = score(model, inputs.dev, inputs.sentences["dev"], inputs.tags)
            return {MONITOR: scores["micro"]["f1"]}, scores

        inputs.dev_scores = DevScores(dev_f1)
        return None, [inputs.dev_scores]

    def write_results(self, options: NerOptions, inputs: _Inputs,
                      recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
        return _write_results(options, inputs, recorder, model)

    def train_report(self, options: NerOptions, summary: dict[str, Any]) -> list[str]:
        shown = "test" if "test" in summary else "dev"
        micro = summary[shown]["micro"]
        return [f"\n{shown} entity F1 {micro['f1']:.4f} (precision {micro['precision']:.4f}, "
                f"recall {micro['recall']:.4f}; best epoch {summary['best_epoch']})",
                run_directory_line(options, "tags.json")]

    def evaluation_report(self, metrics: dict[str, Any]) -> list[str]:
        micro = metrics["micro"]
        return [f"sentences {metrics['sentences']}  entity precision {micro['precision']:.4f}"
                f"  recall {micro['recall']:.4f}  F1 {micro['f1']:.4f}"] + [
            f"  {kind:<6}  precision {row['precision']:.4f}  recall {row['recall']:.4f}  "
            f"F1 {row['f1']:.4f}  support {row['support']}"
            for kind, row in metrics["per_type"].items()]


class Run(FinishedRun):
    """A finished NER run directory, for evaluate / predict.

    Raises:
        RunError: not a finished NER run, or a missing or corrupt file (named).
    """

    def check_model(self) -> None:
        """Reads the tags file, refused unless it names one tag per output."""
        path = os.path.join(self.run_dir, TAGS_FILE)
        self.tags = read_json(path, "tags")
        outputs = self.model.outputs[0].shape[-1]
        if not (isinstance(self.tags, list) and all(isinstance(t, str) for t in self.tags)):
            raise RunError(f"tags in {path}: not a JSON list of tag names")
        if outputs != len(self.tags):
            raise RunError(f"tags in {path}: {len(self.tags)} tags but the model has {outputs} "
                           "outputs; is it the run's own file?")

    def _encode(self, sentences: Sequence[ner_data.Sentence]) -> _Encoded:
        return encode(self.tokenizer, sentences, self.options.maxlen, self.tags)

    def evaluate(self, path: str | os.PathLike[str], progress: bool = False) -> dict[str, Any]:
        """Entity-level precision, recall and F1 per type, micro and macro, on a tagged file."""
        sentences = ner_data.read_sentences(path)
        encoded = self._encode(sentences)
        scores = score(self.model, encoded, sentences, self.tags, progress=progress)[0]
        return {**scores, "sentences": len(sentences), "lost_entities": encoded[4]}

    def predict(self, texts: Iterable[str] | None = None,
                path: str | os.PathLike[str] | None = None,
                progress: bool = False) -> list[dict[str, Any]]:
        """``[{"text", "entities": [{"type", "start", "end", "text"}]}]`` for texts, or for
        the texts of a file: plain text (one per line), a TSV / CSV / JSONL file with a
        ``text`` column, or a tagged file (see :func:`ner_data.read_texts`)."""
        sentences = (ner_data.read_texts(path) if path is not None
                     else [ner_data.Sentence(text, [])
                           for text in texts])  # type: ignore[union-attr]  # given where no path is
        if not sentences:
            return []
        _, predicted = score(self.model, self._encode(sentences), sentences, self.tags,
                             progress=progress)
        return [{"text": s.text,
                 "entities": [{"type": kind, "start": start, "end": end,
                               "text": s.text[start:end]} for kind, start, end in found]}
                for s, found in zip(sentences, predicted)]

    def export(self, directory: str | os.PathLike[str], overwrite: bool = False,
               format: str = "saved_model", **options: Any) -> list[str]:
        """Writes the model for serving, a SavedModel (:mod:`kerasbert.tasks.ner.export`);
        returns the files written."""
        return export_saved_model(self, "kerasbert.tasks.ner.export", directory, overwrite,
                                  format, dict(options, tags=self.tags,
                                               maxlen=self.options.maxlen))


Ner.run_class = Run
TASK = Ner()
