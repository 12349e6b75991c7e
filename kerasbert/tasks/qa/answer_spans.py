"""From start and end logits to answers: the windows over a long context, and the spans
picked in them, scored as transformers 4.x's ``QuestionAnsweringPipeline`` scores them.

A context longer than one window is cut into windows of context tokens, each sharing
``stride`` tokens with the one before (the last window ends at the last token). In each
window the start and end logits go through a softmax over the window's tokens, where
everything but the context and [CLS] is masked out; [CLS] then gets probability 0. A
span's score is ``p_start[i] * p_end[j]`` for context tokens ``i <= j < i + max_answer_len``.
Each window proposes its ``2 * top_k + 10`` best spans, widened to whole words (as far as the
window reaches); proposals whose text is the same, ignoring case, are one answer whose score
is the sum of theirs, so an answer found in two overlapping windows counts twice.

The windows are cut by one function (:func:`window_bounds`, with its refusals
:func:`window_refusals` and its stride :func:`default_doc_stride`), which training,
:class:`~kerasbert.tasks.qa.span_qa.QuestionAnswerer` and the export's graph all call; what
follows the model, from the logits to the ranked answers (:func:`ranked_answers`), is
TensorFlow ops that both run too.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from kerasbert.serving.graph_text import substrings

if TYPE_CHECKING:  # annotations only
    from kerasbert.text.tokenizer import Tokenizer

#: The logit a masked token gets before the softmax (the pipeline's value).
MASKED_LOGIT = -10000.0


@dataclasses.dataclass
class Context:
    """A context's WordPiece tokens and where each lies in the text.

    Attributes:
        text: the context as given.
        ids: the token ids, without [CLS] and [SEP].
        starts, ends: each token's first character and the character after its last.
        word_starts: whether each token starts a word (it is the first, or not ``##``).
    """

    text: str
    ids: list
    starts: list
    ends: list
    word_starts: list


def read_context(tokenizer: Tokenizer, text: str) -> Context:
    """Tokenizes ``text`` and finds each token's characters and word.

    A word is what the tokenizer splits on whitespace and punctuation: a token that does
    not start with ``##`` starts a new one.

    Args:
        tokenizer: a :class:`kerasbert.text.tokenizer.Tokenizer`.
        text: the context.

    Returns:
        A :class:`Context`.

    Raises:
        ValueError: ``text`` holds no token (it is empty or only whitespace and controls).

    Example:
        >>> from kerasbert import Tokenizer
        >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
        >>> context = read_context(tokenizer, "BERT模型")
        >>> context.starts, context.ends, context.word_starts
        ([0, 2, 4, 5], [2, 4, 5, 6], [True, False, True, True])
    """
    tokens = tokenizer.tokenize(text)[1:-1]
    if not tokens:
        raise ValueError(f"context ({text!r:.60}) holds no token: nothing to answer from")
    chars = tokenizer.rematch(text, tokens)
    return Context(text, tokenizer.tokens_to_ids(tokens), [c[0] for c in chars],
                   [c[-1] + 1 for c in chars],
                   [index == 0 or not token.startswith("##") for index, token in enumerate(tokens)])


#: The most question tokens a window holds (Google's ``max_query_length``): a longer
#: question is cut.
MAX_QUESTION_LEN = 64


def default_doc_stride(max_seq_len: int) -> int:
    """The context tokens each window shares with the one before when none is given: half
    a window, at most 128 (Google's ``doc_stride``). Training, ``predict`` and the export
    all take it from here.

    Example:
        >>> default_doc_stride(384), default_doc_stride(64)
        (128, 32)
    """
    return min(max_seq_len // 2, 128)


def window_refusals(tokens: Any, length: Any, stride: int) -> list[tuple[Any, str]]:
    """Why contexts cannot be cut into windows: ``[(bad, reason)]``, ``bad`` a boolean per
    example, each ``reason`` a format string of ``{asked}`` (the question's tokens, or
    nothing), ``{max_seq_len}``, ``{stride}`` and ``{length}`` (the window's context
    tokens, or nothing). Plain operators only, so NumPy arrays and tensors alike: the
    Python side raises the first, the export's graph fails its request with them.

    Args:
        tokens: each context's number of tokens.
        length: the most context tokens a window of each example holds.
        stride: tokens each window repeats from the one before.
    """
    return [
        (length < 1, "the question{asked} leaves no room for context in max_seq_len "
                     "({max_seq_len})"),
        (tokens < 1, "context holds no token: nothing to answer from"),
        ((tokens > length) & (length <= stride), "doc_stride ({stride}) must be smaller than "
         "the context tokens a window holds{length}: lower doc_stride or raise max_seq_len"),
    ]


def window_bounds(tokens: Any, length: Any, stride: Any) -> tuple[tf.Tensor, tf.Tensor,
                                                                    tf.Tensor]:
    """The windows a batch of contexts is cut into: the one rule of the Python side
    (:func:`~kerasbert.tasks.qa.span_qa.question_windows`, for training and ``predict``) and
    of the export's graph.

    Each window holds ``length`` context tokens and shares ``stride`` with the one before;
    the last one ends at the last token (it may be shorter). This is how Hugging Face
    ``tokenizers`` cuts the overflowing tokens of a pair truncated ``only_second`` with
    ``stride``. TensorFlow ops: eager on arrays, in a graph on tensors; the inputs are
    those :func:`window_refusals` passes.

    Args:
        tokens: int ``[batch]``, each context's number of tokens.
        length: int ``[batch]``, the most context tokens a window of each example holds.
        stride: tokens each window repeats from the one before.

    Returns:
        ``(example, begin, stop)``, int64 ``[windows]``: the example of each window and its
        context tokens ``begin .. stop - 1``.

    Example:
        >>> example, begin, stop = window_bounds([10, 3], [4, 4], 1)
        >>> example.numpy().tolist(), begin.numpy().tolist(), stop.numpy().tolist()
        ([0, 0, 0, 1], [0, 3, 6, 0], [4, 7, 10, 3])
    """
    tokens = tf.cast(tokens, tf.int64)
    length = tf.cast(length, tf.int64)
    step = tf.maximum(length - tf.cast(stride, tf.int64), 1)
    count = tf.where(tokens > length, 1 + (tokens - length + step - 1) // step, 1)
    example = tf.repeat(tf.range(tf.size(tokens, out_type=tf.int64)), count)
    begin = tf.ragged.range(count).flat_values * tf.gather(step, example)
    stop = tf.minimum(begin + tf.gather(length, example), tf.gather(tokens, example))
    return example, begin, stop


class Windows(typing.NamedTuple):
    """The windows the model ran on, one entry each: the example it belongs to, its context
    tokens ``begin .. stop - 1`` (counted in the example's context) and the position in its
    row of its first context token, ``first``."""

    example: tf.Tensor
    begin: tf.Tensor
    stop: tf.Tensor
    first: tf.Tensor


def probabilities(start_logits: tf.Tensor, end_logits: tf.Tensor, first: tf.Tensor,
                  last: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Each window's start and end softmax (float64 ``[windows, width]``) with every
    position but [CLS] and the context ``first .. last - 1`` masked out, and which
    positions are its context (bool)."""
    position = tf.range(tf.shape(start_logits, out_type=tf.int64)[1])
    inside = ((position >= tf.expand_dims(first, 1)) & (position < tf.expand_dims(last, 1)))
    keep = inside | (position == 0)
    masked = tf.constant(MASKED_LOGIT, tf.float64)
    start_p, end_p = (tf.nn.softmax(tf.where(keep, tf.cast(logits, tf.float64), masked), axis=1)
                      for logits in (start_logits, end_logits))
    return start_p, end_p, inside


def best_spans(start_p: tf.Tensor, end_p: tf.Tensor, inside: tf.Tensor, max_answer_len: int,
               count: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """The ``count`` best spans of each window, ``i <= j < i + max_answer_len`` both in its
    context, scored ``start_p[i] * end_p[j]``: ``(score, window, i, j)``, flat, window by
    window and best first (ties in the order of ``(i, j)``), ``i`` and ``j`` positions in
    the window's row.

    Example:
        >>> logits = tf.math.log([[1.0, 1.0, 2.0, 1.0, 4.0]])   # [CLS] q [SEP] c0 c1
        >>> first, last = tf.constant([3], tf.int64), tf.constant([5], tf.int64)
        >>> score, _, i, j = best_spans(*probabilities(logits, logits, first, last),
        ...                             max_answer_len=2, count=2)
        >>> score.numpy().round(4).tolist(), i.numpy().tolist(), j.numpy().tolist()
        ([0.4444, 0.1111], [4, 3], [4, 4])
    """
    width = tf.shape(start_p, out_type=tf.int64)[1]
    position = tf.range(width)
    span = tf.expand_dims(start_p, 2) * tf.expand_dims(end_p, 1)
    gap = tf.expand_dims(position, 0) - tf.expand_dims(position, 1)
    allowed = ((gap >= 0) & (gap < max_answer_len) & tf.expand_dims(inside, 2)
               & tf.expand_dims(inside, 1))
    flat = tf.reshape(tf.where(allowed, span, tf.constant(-1.0, tf.float64)),
                      [tf.shape(span, out_type=tf.int64)[0], width * width])
    # top_k puts the lower index first among equals: the order of (i, j).
    proposals = tf.minimum(tf.constant(count, tf.int64), width * width)
    best, index = tf.math.top_k(flat, k=tf.cast(proposals, tf.int32))
    valid = tf.where(best >= 0)
    score, index = tf.gather_nd(best, valid), tf.cast(tf.gather_nd(index, valid), tf.int64)
    return score, valid[:, 0], index // width, index % width


def ranked_answers(start_logits: tf.Tensor, end_logits: tf.Tensor, windows: Windows,
                   context: tf.Tensor, word_starts: tf.RaggedTensor, starts: tf.RaggedTensor,
                   ends: tf.RaggedTensor, *, max_answer_len: int, top_k: int = 1,
                   align_to_words: bool = True,
                   handle_impossible_answer: bool = False) -> dict[str, tf.Tensor]:
    """The ``top_k`` best answers of each example from its windows' logits, as the module's
    docstring says the pipeline ranks them.

    Args:
        start_logits, end_logits: float ``[windows, width]``, a row per window
            (``[CLS] question [SEP] context part [SEP]``, then padding).
        windows: the :class:`Windows` of those rows.
        context: string ``[batch]``, the texts answered from.
        word_starts, starts, ends: ragged ``[batch, None]`` over each context's tokens:
            whether it starts a word, its first character and the character after its last
            (int64).
        max_answer_len: the most tokens a span holds.
        top_k: answers per example; each window proposes ``2 * top_k + 10`` spans (``top_k``
            when not ``align_to_words``).
        align_to_words: widen a span to whole words, as far as its window reaches.
        handle_impossible_answer: rank "no answer" (``""`` at ``0, 0``, scored as the lowest
            [CLS] score over the example's windows) among the answers, after equals.

    Returns:
        ``{"answer", "start", "end", "score"}`` ``[batch, top_k]`` (string, int64, int64,
        float64), best first, padded with ``""``, -1 and 0.0; ``"count"`` ``[batch]``, the
        answers each example has. Answers with the same text but for case are one: the
        first one's span, their summed score.
    """
    batch = tf.shape(context, out_type=tf.int64)[0]
    last = windows.first + windows.stop - windows.begin
    start_p, end_p, inside = probabilities(start_logits, end_logits, windows.first, last)
    no_answer = tf.math.unsorted_segment_min(start_p[:, 0] * end_p[:, 0], windows.example, batch)
    count = 2 * top_k + 10 if align_to_words else top_k
    score, window, i, j = best_spans(start_p, end_p, inside, max_answer_len, count)
    # From a row's positions to the flat tokens of the contexts.
    base = tf.gather(tf.gather(starts.row_splits, windows.example), window)
    offset = base + tf.gather(windows.begin - windows.first, window)
    i, j = i + offset, j + offset
    if align_to_words:
        word = tf.cumsum(tf.cast(word_starts.flat_values | _row_first(starts), tf.int64)) - 1
        index = tf.range(tf.size(word, out_type=tf.int64))
        word_first = tf.gather(tf.math.unsorted_segment_min(index, word, tf.size(word)), word)
        word_last = tf.gather(tf.math.unsorted_segment_max(index, word, tf.size(word)), word)
        i = tf.maximum(tf.gather(word_first, i), base + tf.gather(windows.begin, window))
        j = tf.minimum(tf.gather(word_last, j), base + tf.gather(windows.stop, window) - 1)
    char_start, char_end = tf.gather(starts.flat_values, i), tf.gather(ends.flat_values, j)
    owner = tf.gather(windows.example, window)
    text = substrings(context, owner, char_start, char_end)
    # One answer per example and text but for case: the first proposal's, the scores summed.
    key = tf.strings.join([tf.strings.as_string(owner),
                           tf.strings.lower(text, encoding="utf-8")], separator="\n")
    keys, group = tf.unique(key, out_idx=tf.int64)
    groups = tf.size(keys, out_type=tf.int64)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(group, out_type=tf.int64)), group,
                                         groups)
    answers = {"answer": tf.gather(text, first), "start": tf.gather(char_start, first),
               "end": tf.gather(char_end, first),
               "score": tf.math.unsorted_segment_sum(score, group, groups)}
    owner = tf.gather(owner, first)
    if handle_impossible_answer:  # after the answers: the last among equals
        zeros = tf.zeros([batch], tf.int64)
        nothing = {"answer": tf.fill([batch], ""), "start": zeros, "end": zeros,
                   "score": no_answer}
        answers = {key: tf.concat([answers[key], nothing[key]], 0) for key in answers}
        owner = tf.concat([owner, tf.range(batch)], 0)
    order = tf.argsort(-answers["score"], stable=True)
    order = tf.gather(order, tf.argsort(tf.gather(owner, order), stable=True))
    ranked = tf.RaggedTensor.from_value_rowids(order, tf.gather(owner, order), nrows=batch)
    ranked = ranked[:, :top_k]
    fill = {"answer": "", "start": tf.constant(-1, tf.int64), "end": tf.constant(-1, tf.int64),
            "score": tf.constant(0.0, tf.float64)}
    found = {key: ranked.with_flat_values(tf.gather(values, ranked.flat_values)).to_tensor(
        fill[key], shape=[batch, top_k]) for key, values in answers.items()}
    return {**found, "count": ranked.row_lengths()}


def _row_first(ragged: tf.RaggedTensor) -> tf.Tensor:
    """Whether each flat value of ``ragged`` is its row's first."""
    index = tf.range(tf.size(ragged.flat_values, out_type=tf.int64))
    return index == tf.gather(ragged.row_splits, ragged.value_rowids())
