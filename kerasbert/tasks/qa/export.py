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
each window's 12 best spans (``PROPOSALS``) of at most ``max_answer_len`` tokens widened to
whole words, spans with the same text but for case summed into one answer, and "no answer"
(``""`` at ``start = end = 0``) when the lowest [CLS] score beats the best answer
(:mod:`kerasbert.tasks.qa.answer_spans`). ``context[start:end]`` is the answer, in characters
(code points). A question that leaves no room for context, a context without a token, or
one needing windows no longer than ``doc_stride`` fail the request with that message, as
the Python class raises.

Example::

    # runs/qa: a finished run of `kerasbert train --task qa`
    from kerasbert.tasks import open_run

    open_run("runs/qa").export("exported/qa")   # exported/qa/1/saved_model.pb ...
    answer = tf.saved_model.load("exported/qa/1").signatures["answer"]
    answer(question=tf.constant(["谁在北京？"]), context=tf.constant(["江泽民在北京。"]))
"""

import os
import typing

import tensorflow as tf

from kerasbert.serving.graph_text import TextEncoder, row_concat, substrings
from kerasbert.serving.saved_model import version_folder, write_archive
from kerasbert.tasks.qa.answer_spans import MASKED_LOGIT
from kerasbert.tasks.qa.span_qa import QuestionAnswerer
from kerasbert.text.tokenizer import Tokenizer

#: Spans each window proposes: the pipeline's ``2 * top_k + 10`` for one answer.
PROPOSALS = 2 * 1 + 10


def export(model, vocab, directory, *, settings, version=None, overwrite=False, source=None):
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

    def logits(token_ids, segment_ids):
        found = tf.cast(model([token_ids, segment_ids], training=False), tf.float32)
        return {"start_logits": found[..., 0], "end_logits": found[..., 1]}

    def answer(question, context):
        return find_answers(settings, encoder, logits, question, context)

    ids, texts = tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None,), tf.string)
    return write_archive(target, [model, encoder],
                         [("serving_default", logits, [ids, ids]),
                          ("answer", answer, [texts, texts])])


def find_answers(settings, encoder, logits, question, context):
    """The ``answer`` signature's graph: see the module's docstring.

    Args:
        settings: the :class:`kerasbert.tasks.qa.span_qa.QuestionAnswerer` whose settings
            (``max_seq_len``, ``doc_stride``, ``max_question_len``, ``max_answer_len``,
            ``handle_impossible_answer``) the graph follows.
        encoder: a :class:`TextEncoder` of the model's vocabulary.
        logits: ``(token_ids, segment_ids) -> {"start_logits", "end_logits"}``.
        question, context: string ``[batch]``.
    """
    batch = tf.shape(question, out_type=tf.int64)[0]
    questions = encoder.token_ids(question)[:, :settings.max_question_len]
    ids, starts, ends, word_starts = encoder.pieces(context)
    windows = _windows(settings, encoder, questions, ids)
    found = logits(windows.token_ids, windows.segment_ids)
    start_p, end_p, inside = _probabilities(windows, found)
    no_answer = tf.math.unsorted_segment_min(start_p[:, 0] * end_p[:, 0], windows.example, batch)
    score, window, i, j = _best_spans(settings, windows, start_p, end_p, inside)
    # Widened to whole words as far as the window reaches, then to characters.
    word = tf.cumsum(tf.cast(word_starts.flat_values | _row_first(ids), tf.int64)) - 1
    index = tf.range(tf.size(word, out_type=tf.int64))
    word_first = tf.gather(tf.math.unsorted_segment_min(index, word, tf.size(word)), word)
    word_last = tf.gather(tf.math.unsorted_segment_max(index, word, tf.size(word)), word)
    base = tf.gather(tf.gather(ids.row_splits, windows.example), window)
    i = tf.maximum(tf.gather(word_first, base + i), base + tf.gather(windows.begin, window))
    j = tf.minimum(tf.gather(word_last, base + j), base + tf.gather(windows.stop, window) - 1)
    char_start, char_end = tf.gather(starts.flat_values, i), tf.gather(ends.flat_values, j)
    owner = tf.gather(windows.example, window)
    text = substrings(context, owner, char_start, char_end)
    chosen, top = _merged_best(text, score, owner, batch)
    empty = no_answer > top if settings.handle_impossible_answer else tf.zeros_like(top, bool)

    def offset(chars):
        return tf.where(empty, 0, tf.cast(tf.gather(chars, chosen), tf.int32))

    return {"answer": tf.where(empty, "", tf.gather(text, chosen)),
            "start": offset(char_start), "end": offset(char_end),
            "score": tf.where(empty, no_answer, top)}


class _Windows(typing.NamedTuple):
    """The model's rows: per window its example, its context tokens ``begin .. stop - 1``
    and its first context position ``first``; ``token_ids``, ``segment_ids`` padded."""

    example: tf.Tensor
    begin: tf.Tensor
    stop: tf.Tensor
    first: tf.Tensor
    token_ids: tf.Tensor
    segment_ids: tf.Tensor


def _windows(settings, encoder, questions, ids):
    """``[CLS] question [SEP] context part [SEP]`` rows, as ``question_windows`` makes
    them, after the checks that it makes (failing the request)."""
    tokens, asked = ids.row_lengths(), questions.row_lengths()
    length = settings.max_seq_len - asked - 3
    stride = settings.doc_stride
    several = tokens > length
    checks = [
        tf.debugging.assert_positive(length, message="the question leaves no room for context "
                                     f"in max_seq_len ({settings.max_seq_len})"),
        tf.debugging.assert_positive(tokens, message="context holds no token: nothing to "
                                     "answer from"),
        tf.debugging.Assert(tf.reduce_all(~several | (stride < length)), [
            f"doc_stride ({stride}) must be smaller than the context tokens a window holds: "
            "lower doc_stride or raise max_seq_len"])]
    with tf.control_dependencies(checks):
        step = tf.maximum(length - stride, 1)
    # The first token of each window, as window_starts gives them.
    count = tf.where(several, 1 + (tokens - length + step - 1) // step, 1)
    example = tf.repeat(tf.range(tf.size(tokens, out_type=tf.int64)), count)
    begin = tf.ragged.range(count).flat_values * tf.gather(step, example)
    stop = tf.minimum(begin + tf.gather(length, example), tf.gather(tokens, example))
    taken = tf.ragged.range(begin, stop) + tf.expand_dims(tf.gather(ids.row_splits, example), 1)
    rows = row_concat([[encoder.cls_id], tf.gather(questions, example), [encoder.sep_id],
                       tf.gather(ids.flat_values, taken), [encoder.sep_id]])
    first = tf.gather(asked, example) + 2
    segments = tf.ragged.range(rows.row_lengths()) >= tf.expand_dims(first, 1)
    # At least [CLS] [SEP] [SEP] wide, so that an empty batch still has a [CLS] column;
    # padded with id 0, as QuestionAnswerer pads.
    return _Windows(example, begin, stop, first, *encoder.padded(rows, segments, 3, pad=0))


def _probabilities(windows, found):
    """Each window's start and end softmax with all but [CLS] and its context masked
    (``answer_spans``), float64; and which positions are its context."""
    last = windows.first + windows.stop - windows.begin
    position = tf.range(tf.shape(windows.token_ids, out_type=tf.int64)[1])
    inside = ((position >= tf.expand_dims(windows.first, 1))
              & (position < tf.expand_dims(last, 1)))
    keep = inside | (position == 0)
    masked = tf.constant(MASKED_LOGIT, tf.float64)
    start_p, end_p = (tf.nn.softmax(tf.where(keep, tf.cast(found[key], tf.float64), masked),
                                    axis=1) for key in ("start_logits", "end_logits"))
    return start_p, end_p, inside


def _best_spans(settings, windows, start_p, end_p, inside):
    """The ``PROPOSALS`` best spans of each window, ``i <= j < i + max_answer_len`` both in
    its context, window by window and best first: ``(score, window, i, j)``, ``i`` and
    ``j`` counted in the example's context tokens."""
    width = tf.shape(start_p, out_type=tf.int64)[1]
    position = tf.range(width)
    span = tf.expand_dims(start_p, 2) * tf.expand_dims(end_p, 1)
    gap = tf.expand_dims(position, 0) - tf.expand_dims(position, 1)
    allowed = ((gap >= 0) & (gap < settings.max_answer_len) & tf.expand_dims(inside, 2)
               & tf.expand_dims(inside, 1))
    flat = tf.reshape(tf.where(allowed, span, tf.constant(-1.0, tf.float64)),
                      [tf.shape(span, out_type=tf.int64)[0], width * width])
    proposals = tf.minimum(tf.constant(PROPOSALS, tf.int64), width * width)
    best, index = tf.math.top_k(flat, k=tf.cast(proposals, tf.int32))
    valid = tf.where(best >= 0)
    score, index = tf.gather_nd(best, valid), tf.cast(tf.gather_nd(index, valid), tf.int64)
    window = valid[:, 0]
    offset = tf.gather(windows.begin - windows.first, window)
    return score, window, index // width + offset, index % width + offset


def _merged_best(text, score, owner, batch):
    """Proposals with the same text but for case are one answer, scored by their sum;
    ``(proposal, score)`` of each example's best answer, the first found among equals."""
    key = tf.strings.join([tf.strings.as_string(owner),
                           tf.strings.lower(text, encoding="utf-8")], separator="\n")
    keys, group = tf.unique(key, out_idx=tf.int64)
    groups = tf.size(keys, out_type=tf.int64)
    total = tf.math.unsorted_segment_sum(score, group, groups)
    proposal = tf.math.unsorted_segment_min(tf.range(tf.size(group, out_type=tf.int64)), group,
                                            groups)
    group_owner = tf.gather(owner, proposal)
    top = tf.math.unsorted_segment_max(total, group_owner, batch)
    winner = tf.math.unsorted_segment_min(
        tf.where(total == tf.gather(top, group_owner), tf.range(groups), groups), group_owner,
        batch)
    return tf.gather(proposal, winner), top


def _row_first(ragged):
    """Whether each flat value of ``ragged`` is its row's first."""
    index = tf.range(tf.size(ragged.flat_values, out_type=tf.int64))
    return index == tf.gather(ragged.row_splits, ragged.value_rowids())
