"""Span question answering runs: train on SQuAD files, evaluate exact match and F1, predict.

The model is BERT with ``Span-Dense`` (:func:`kerasbert.tasks.qa.span_qa.add_span_head`).
Each question is cut into windows as :class:`~kerasbert.tasks.qa.span_qa.QuestionAnswerer`
cuts it (``--maxlen`` tokens, overlapping by half of it, at most 128); a window is trained
to point at the answer's first and last token, or at [CLS] when the answer is not inside
it or the question has none (SQuAD v2.0). The loss is the mean of the start and end
positions' cross-entropies over the window's tokens. The best epoch is the one with the best
dev F1, the dev questions answered as ``QuestionAnswerer`` answers them (with "no answer"
when the file has unanswerable questions).

A run directory holds ``model.keras``, ``bert_model.ckpt.*`` (encoder and Google's
``cls/squad/*`` head, so ``QuestionAnswerer.from_checkpoint(run_dir)`` answers from it),
``bert_config.json``, ``vocab.txt``, ``train_config.json``, ``history.csv`` and
``metrics.json``.

Example::

    # the shipped kerasbert-zh-small on the shipped Chinese QA set
    summary = train(QaOptions(output="runs/qa", maxlen=192))
    summary["test"]["f1"]
"""


import os
from collections.abc import Sequence
from typing import Any, cast

import keras
import numpy as np
from keras import ops

from kerasbert.internals import get_keras_mask
from kerasbert.models import names
from kerasbert.tasks.base import DevScores, Task, train
from kerasbert.tasks.qa.answer_spans import default_doc_stride
from kerasbert.tasks.qa.options import QaOptions
from kerasbert.tasks.qa.span_qa import (
    QuestionAnswerer,
    add_span_head,
    question_windows,
    run_settings,
)
from kerasbert.tasks.qa.squad import Question, read_questions, read_squad, squad_scores
from kerasbert.tasks.runs import (
    FinishedRun,
    build_encoder,
    check_checkpoint,
    check_model_files,
    export_saved_model,
    run_directory_line,
)
from kerasbert.text.padding import sequence_padding
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.training.callbacks import RunRecorder

__all__ = ["QaOptions", "Run", "SpanLoss", "TASK", "answer_settings", "answerer",
           "predictions", "train", "training_windows"]
MONITOR = "val_f1"
MASKED_LOGIT = -1e4


@keras.saving.register_keras_serializable(package=names.SERIALIZATION_PACKAGE)
class SpanLoss(keras.losses.Loss):
    """The mean cross-entropy of the start and end positions ``[batch, 2]`` over a window's
    tokens, padding left out (read from the Keras mask of the ``[batch, length, 2]``
    logits)."""

    def __init__(self, name: str = "span_loss",
                 reduction: str = "sum_over_batch_size") -> None:
        super().__init__(name=name, reduction=reduction)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        # Keras would apply the [batch, length] mask to [batch] losses: it is used here.
        mask = get_keras_mask(y_pred)
        logits = ops.transpose(ops.cast(y_pred, "float32"), (0, 2, 1))  # [batch, 2, length]
        if mask is not None:
            logits = ops.where(ops.expand_dims(mask, 1), logits, MASKED_LOGIT)
        losses = keras.losses.sparse_categorical_crossentropy(
            ops.cast(y_true, "int32"), logits, from_logits=True)
        return ops.mean(losses)

    def call(self, y_true: Any, y_pred: Any) -> Any:
        return self(y_true, y_pred)


def answer_settings(options: QaOptions,
                    questions: Sequence[Question] | None = None) -> dict[str, Any]:
    """The :class:`QuestionAnswerer` settings of a run; "no answer" is considered where
    ``questions`` hold unanswerable ones, and always without ``questions``."""
    return run_settings(options.maxlen,
                        questions is None or any(not q.answers for q in questions))


def answerer(model: keras.Model, tokenizer: Tokenizer, options: QaOptions,
             questions: Sequence[Question] | None = None) -> QuestionAnswerer:
    """The :class:`QuestionAnswerer` of a run's settings (:func:`answer_settings`)."""
    return QuestionAnswerer(model, tokenizer, **answer_settings(options, questions))


def predictions(answer: QuestionAnswerer, questions: Sequence[Question],
                progress: bool = False) -> dict[str | None, str]:
    """``{id: answer text}`` of ``answer`` (a :class:`QuestionAnswerer`) on ``questions``."""
    # Lists of questions and contexts: a list of answers.
    found = cast(list[dict[str, Any]], answer([q.question for q in questions],
                                              [q.context for q in questions],
                                              progress=progress))
    return {q.id: row["answer"] for q, row in zip(questions, found)}


class _Inputs:
    """A run's questions and training windows, all read before the directory is made."""

    tokenizer: Any
    questions: dict[str, list[Question]]
    features: tuple[np.ndarray, np.ndarray, np.ndarray]
    steps: int
    dev_scores: DevScores

    @classmethod
    def read(cls, options: QaOptions) -> "_Inputs":
        self = cls()
        self.tokenizer = check_model_files(options)
        self.questions = {"train": read_squad(options.train)[:options.max_train_examples or None],
                          "dev": read_squad(options.dev)}
        if options.test:
            self.questions["test"] = read_squad(options.test)
        check_checkpoint(options)
        self.features = training_windows(self.tokenizer, self.questions["train"], options.maxlen)
        self.steps = -(-len(self.features[0]) // options.batch_size)
        return self


def training_windows(tokenizer: Tokenizer, questions: Sequence[Question],
                     maxlen: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(token_ids, segment_ids, positions)`` of every window of ``questions``: positions
    ``[windows, 2]`` are the answer's first and last token in the window, or ``(0, 0)``
    ([CLS]) when the window does not hold it or there is none."""
    rows, positions = [], []
    cut = question_windows(tokenizer, [(question.question, question.context)
                                       for question in questions], maxlen,
                           default_doc_stride(maxlen))
    for question, (question_ids, context, spans, windows) in zip(questions, cut):
        first = len(question_ids) + 2
        answer = question.answers[0] if question.answers else None
        tokens = ([k for k, (start, end) in enumerate(zip(context.starts, context.ends))
                   if start < answer[1] + len(answer[0]) and answer[1] < end]
                  if answer else [])
        for (start, stop), window in zip(spans, windows):
            inside = tokens and start <= tokens[0] and tokens[-1] < stop
            positions.append((first + tokens[0] - start, first + tokens[-1] - start)
                             if inside else (0, 0))
            rows.append(window)
    return (sequence_padding([ids for ids, _ in rows], dtype="int32"),
            sequence_padding([segments for _, segments in rows], dtype="int32"),
            np.array(positions, "int32"))


def _write_results(options: QaOptions, inputs: _Inputs,
                   recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
    summary: dict[str, Any] = {"best_epoch": recorder.best_epoch,
               "train_questions": len(inputs.questions["train"]),
               "train_windows": len(inputs.features[0])}
    def scored(split: str) -> dict[str, float]:
        questions = inputs.questions[split]
        return squad_scores(questions, predictions(
            answerer(model, inputs.tokenizer, options, questions), questions))

    summary["dev"] = inputs.dev_scores.result(recorder.best_epoch, lambda: scored("dev"))
    if "test" in inputs.questions:
        summary["test"] = scored("test")
    return summary


class Qa(Task):
    """``--task qa``: span question answering, chosen by dev SQuAD F1."""

    name = "qa"
    monitor = MONITOR
    texts_per_example = 2

    def read_inputs(self, options: QaOptions) -> _Inputs:
        return _Inputs.read(options)

    def training_arrays(self, options: QaOptions,
                        inputs: _Inputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return inputs.features

    def build_model(self, options: QaOptions, inputs: _Inputs) -> keras.Model:
        bert = build_encoder(options)
        return add_span_head(bert.model, initializer_range=bert.config.initializer_range)

    def loss(self, model: keras.Model) -> SpanLoss:
        return SpanLoss()

    def dev_scoring(self, options: QaOptions, inputs: _Inputs) -> tuple[Any, list[Any]]:
        def dev_f1(model: keras.Model) -> tuple[dict[str, float], dict[str, float]]:
            questions = inputs.questions["dev"]
            answer = answerer(model, inputs.tokenizer, options, questions)
            scores = squad_scores(questions, predictions(answer, questions))
            return {MONITOR: scores["f1"], "val_exact": scores["exact"]}, scores

        inputs.dev_scores = DevScores(dev_f1)
        return None, [inputs.dev_scores]

    def write_results(self, options: QaOptions, inputs: _Inputs,
                      recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
        return _write_results(options, inputs, recorder, model)

    def train_report(self, options: QaOptions, summary: dict[str, Any]) -> list[str]:
        shown = "test" if "test" in summary else "dev"
        return [f"\n{shown} exact match {summary[shown]['exact']:.2f}, F1 "
                f"{summary[shown]['f1']:.2f} (best epoch {summary['best_epoch']})",
                run_directory_line(options, "bert_model.ckpt")]

    def evaluation_report(self, metrics: dict[str, Any]) -> list[str]:
        return [f"questions {metrics['total']}  exact match {metrics['exact']:.2f}  "
                f"F1 {metrics['f1']:.2f}"]

    def check_texts(self, texts: Sequence[str], run: Any = None) -> None:
        if len(texts) % 2:
            raise ValueError(f"odd number of texts in TEXT ({len(texts)}): a QA run takes "
                             "QUESTION CONTEXT pairs")


class Run(FinishedRun):
    """A finished span QA run directory, for evaluate / predict.

    Raises:
        RunError: not a finished run, or a missing or corrupt file (named).
    """

    def evaluate(self, path: str | os.PathLike[str], progress: bool = False) -> dict[str, float]:
        """SQuAD exact match and F1 (percent) on a SQuAD JSON file."""
        questions = read_squad(path)
        answer = answerer(self.model, self.tokenizer, self.options, questions)
        return squad_scores(questions, predictions(answer, questions, progress))

    def predict(self, texts: Sequence[str] | None = None,
                path: str | os.PathLike[str] | None = None,
                progress: bool = False) -> list[dict[str, Any]]:
        """``[{"question", "answer", "start", "end", "score"}]`` for ``texts`` given as
        ``[question, context, question, context...]``, or for the questions of a file (with
        their ``id`` where it gives one): SQuAD JSON (answers not needed), JSONL with
        ``question`` and ``context``, or one ``question<TAB>context`` per line (see
        :func:`~kerasbert.tasks.qa.squad.read_questions`); "no answer" is an empty answer."""
        if path is not None:
            questions = read_questions(path)
            pairs = [(q.question, q.context) for q in questions]
        else:
            # texts: given where no path is.
            TASK.check_texts(texts)  # type: ignore[arg-type]
            pairs, questions = list(zip(texts[::2], texts[1::2])), None  # type: ignore[index]
        if not pairs:
            return []
        answer = answerer(self.model, self.tokenizer, self.options)
        found = answer([q for q, _ in pairs], [c for _, c in pairs], progress=progress)
        rows = [{"question": q, **row} for (q, _), row in zip(pairs, found)]
        if questions is not None:
            rows = [{"id": q.id, **row} if q.id is not None else row
                    for q, row in zip(questions, rows)]
        return rows

    def export(self, directory: str | os.PathLike[str], overwrite: bool = False,
               format: str = "saved_model", **options: Any) -> list[str]:
        """Writes the model for serving, a SavedModel (:mod:`kerasbert.tasks.qa.export`);
        returns the files written."""
        return export_saved_model(self, "kerasbert.tasks.qa.export", directory, overwrite,
                                  format, dict(options, settings=answer_settings(self.options)))


Qa.run_class = Run
TASK = Qa()
