"""A span QA run for serving: a TensorFlow SavedModel that answers questions from raw text.

The export has TF Serving's layout (see :mod:`kerasbert.serving.saved_model`) and two
signatures::

    serving_default   token_ids, segment_ids (int32 [batch, length])
                      -> start_logits, end_logits (float32 [batch, length])
    answer            question, context (string [batch])
                      -> answer (string [batch]), start, end (int32 [batch]),
                         score (float64 [batch])

``answer`` does what the run's :class:`kerasbert.tasks.qa.span_qa.QuestionAnswerer` does
(``kerasbert predict`` on a QA run), in the graph: the question's and the context's
WordPiece tokens with their characters (:meth:`TextEncoder.pieces`), the context cut into
windows of ``maxlen`` tokens that share ``doc_stride`` tokens, the model on every window,
then what the class runs after its model too
(:func:`kerasbert.tasks.qa.answer_spans.ranked_answers`): each window's 12 best spans of at
most ``max_answer_len`` tokens widened to whole words, spans with the same text but for
case summed into one answer, and "no answer" (``""`` at ``start = end = 0``) when the
lowest [CLS] score beats the best answer. ``context[start:end]`` is the answer, in
characters (code points). A question that leaves no room for context, a context without a
token, or one needing windows no longer than ``doc_stride`` fail the request with that
message, as the Python class raises.

Example::

    # runs/qa: a finished run of `kerasbert train --task qa`
    from kerasbert.tasks import open_run

    open_run("runs/qa").export("exported/qa")   # exported/qa/1/saved_model.pb ...
    answer = tf.saved_model.load("exported/qa/1").signatures["answer"]
    answer(question=tf.constant(["谁在北京？"]), context=tf.constant(["江泽民在北京。"]))
"""

import os
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from kerasbert.serving.graph_text import TextEncoder, row_concat
from kerasbert.serving.saved_model import version_folder, write_archive
from kerasbert.tasks.qa.answer_spans import (
    Windows,
    ranked_answers,
    window_bounds,
    window_refusals,
)
from kerasbert.tasks.qa.span_qa import QuestionAnswerer
from kerasbert.text.tokenizer import Tokenizer


# settings: Any, as it is the settings' dict, then the QuestionAnswerer that checks them.
def export(model: Any, vocab: str | os.PathLike[str], directory: str | os.PathLike[str], *,
           settings: Any, version: int | None = None, overwrite: bool = False,
           source: str | None = None) -> list[str]:
    """Writes a span QA model as ``<directory>/<version>/``, a SavedModel for TF Serving.

    Args:
        model: token and segment ids -> start and end logits ``[batch, length, 2]``.
        vocab: its ``vocab.txt``.
        settings: the :class:`~kerasbert.tasks.qa.span_qa.QuestionAnswerer` settings the
            ``answer`` signature follows (``max_seq_len``, ``max_answer_len``...; a
            run's: :func:`kerasbert.tasks.qa.span_qa.run_settings`).
        directory, version, overwrite, source: as for
            :func:`kerasbert.serving.saved_model.version_folder`.

    Returns the paths written (:func:`~kerasbert.serving.saved_model.write_archive`);
    raises as :func:`~kerasbert.serving.saved_model.version_folder`; ``ValueError``
    for settings :class:`~kerasbert.tasks.qa.span_qa.QuestionAnswerer` refuses.
    """
    directory = os.fspath(directory)
    target = version_folder(directory, source, version, overwrite)
    settings = QuestionAnswerer(model, Tokenizer(os.fspath(vocab)), **settings)
    encoder = TextEncoder(os.fspath(vocab), settings.max_seq_len)

    def logits(token_ids: Any, segment_ids: Any) -> dict[str, Any]:
        found = tf.cast(model([token_ids, segment_ids], training=False), tf.float32)
        return {"start_logits": found[..., 0], "end_logits": found[..., 1]}

    def answer(question: Any, context: Any) -> dict[str, Any]:
        return find_answers(settings, encoder, logits, question, context)

    ids, texts = tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None,), tf.string)
    return write_archive(target, [model, encoder],
                         [("serving_default", logits, [ids, ids]),
                          ("answer", answer, [texts, texts])])


def find_answers(settings: QuestionAnswerer, encoder: TextEncoder,
                 logits: Callable[[Any, Any], dict[str, Any]], question: Any,
                 context: Any) -> dict[str, Any]:
    """The ``answer`` signature's graph: see the module's docstring.

    Args:
        settings: the :class:`kerasbert.tasks.qa.span_qa.QuestionAnswerer` whose settings
            (``max_seq_len``, ``doc_stride``, ``max_question_len``, ``max_answer_len``,
            ``align_to_words``, ``handle_impossible_answer``) the graph follows.
        encoder: a :class:`TextEncoder` of the model's vocabulary.
        logits: ``(token_ids, segment_ids) -> {"start_logits", "end_logits"}``.
        question, context: string ``[batch]``.
    """
    questions = encoder.token_ids(question)[:, :settings.max_question_len]
    ids, starts, ends, word_starts = encoder.pieces(context)
    windows, token_ids, segment_ids = _windows(settings, encoder, questions, ids)
    found = logits(token_ids, segment_ids)
    best = ranked_answers(found["start_logits"], found["end_logits"], windows, context,
                          word_starts, starts, ends, max_answer_len=settings.max_answer_len,
                          align_to_words=settings.align_to_words,
                          handle_impossible_answer=settings.handle_impossible_answer)
    return {"answer": best["answer"][:, 0], "start": tf.cast(best["start"][:, 0], tf.int32),
            "end": tf.cast(best["end"][:, 0], tf.int32), "score": best["score"][:, 0]}


def _windows(settings: QuestionAnswerer, encoder: TextEncoder, questions: Any,
             ids: Any) -> tuple[Windows, Any, Any]:
    """``(Windows, token_ids, segment_ids)``: ``[CLS] question [SEP] context part [SEP]``
    rows, padded, cut by :func:`~kerasbert.tasks.qa.answer_spans.window_bounds` as
    ``question_windows`` cuts them, after its refusals (failing the request)."""
    tokens, asked = ids.row_lengths(), questions.row_lengths()
    length = settings.max_seq_len - asked - 3
    checks = [tf.debugging.Assert(~tf.reduce_any(bad), [reason.format(
        asked="", max_seq_len=settings.max_seq_len, stride=settings.doc_stride, length="")])
        for bad, reason in window_refusals(tokens, length, settings.doc_stride)]
    with tf.control_dependencies(checks):
        example, begin, stop = window_bounds(tokens, length, settings.doc_stride)
    taken = tf.ragged.range(begin, stop) + tf.expand_dims(tf.gather(ids.row_splits, example), 1)
    rows = row_concat([[encoder.cls_id], tf.gather(questions, example), [encoder.sep_id],
                       tf.gather(ids.flat_values, taken), [encoder.sep_id]])
    first = tf.gather(asked, example) + 2
    segments = tf.ragged.range(rows.row_lengths()) >= tf.expand_dims(first, 1)
    # At least [CLS] [SEP] [SEP] wide, so that an empty batch still has a [CLS] column;
    # padded with id 0, as QuestionAnswerer pads.
    return (Windows(example, begin, stop, first),
            *encoder.padded(rows, segments, 3, pad=0))
