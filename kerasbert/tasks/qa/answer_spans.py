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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

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
        word_first, word_last: the first and last token of the word each token is in.
    """

    text: str
    ids: list
    starts: list
    ends: list
    word_first: list
    word_last: list


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
        >>> context.starts, context.ends, context.word_last
        ([0, 2, 4, 5], [2, 4, 5, 6], [1, 1, 2, 3])
    """
    tokens = tokenizer.tokenize(text)[1:-1]
    if not tokens:
        raise ValueError(f"context ({text!r:.60}) holds no token: nothing to answer from")
    chars = tokenizer.rematch(text, tokens)
    word_first: list[int] = []
    word_last = [len(tokens) - 1] * len(tokens)
    for index, token in enumerate(tokens):
        continues = index > 0 and token.startswith("##")
        word_first.append(word_first[-1] if continues else index)
    for index in reversed(range(len(tokens) - 1)):
        if word_first[index + 1] == word_first[index]:
            word_last[index] = word_last[index + 1]
        else:
            word_last[index] = index
    return Context(text, tokenizer.tokens_to_ids(tokens), [c[0] for c in chars],
                   [c[-1] + 1 for c in chars], word_first, word_last)


def window_starts(num_tokens: int, length: int, stride: int) -> list[int]:
    """The first token of each window of ``length`` tokens over ``num_tokens`` tokens.

    Each window shares ``stride`` tokens with the one before; the last one ends at the
    last token (it may be shorter). This is how Hugging Face ``tokenizers`` cuts the
    overflowing tokens of a pair truncated ``only_second`` with ``stride``.

    Args:
        num_tokens: the context's number of tokens.
        length: the most context tokens a window holds.
        stride: tokens each window repeats from the one before.

    Returns:
        A list of starts; ``[0]`` when the context fits in one window.

    Raises:
        ValueError: ``length`` is not positive, or the context needs several windows and
            ``stride`` is not smaller than ``length``.

    Example:
        >>> window_starts(10, 4, 1)
        [0, 3, 6]
        >>> window_starts(10, 4, 2)
        [0, 2, 4, 6]
    """
    if length < 1:
        raise ValueError(f"a window must hold at least one context token, received "
                         f"length={length}")
    if num_tokens <= length:
        return [0]
    if not 0 <= stride < length:
        raise ValueError(f"doc_stride ({stride}) must be smaller than the context tokens a "
                         f"window holds ({length}): lower doc_stride or raise max_seq_len")
    starts: list[int] = []
    for start in range(0, num_tokens, length - stride):
        starts.append(start)
        if start + length >= num_tokens:
            break
    return starts


def _probabilities(logits: np.ndarray, first: int, last: int) -> np.ndarray:
    """The window's softmax with every token but [CLS] and the context masked, then
    [CLS] set to 0; the context tokens' part."""
    masked = np.full(len(logits), MASKED_LOGIT)
    masked[0], masked[first:last] = logits[0], logits[first:last]
    exp = np.exp(masked - masked.max())
    return exp[first:last] / exp.sum()


def null_score(start_logits: ArrayLike, end_logits: ArrayLike, first: int, last: int) -> float:
    """The window's score of "no answer": [CLS]'s start and end probabilities multiplied,
    from the same softmax as the spans' (SQuAD v2.0 models point at [CLS] for it).

    Example:
        >>> round(null_score(np.log([2.0, 1.0, 1.0, 1.0]), np.log([2.0, 1.0, 1.0, 1.0]), 2, 4), 4)
        0.25
    """
    return float(np.prod([_cls_probability(np.asarray(logits, np.float64), first, last)
                          for logits in (start_logits, end_logits)]))


def _cls_probability(logits: np.ndarray, first: int, last: int) -> float:
    masked = np.full(len(logits), MASKED_LOGIT)
    masked[0], masked[first:last] = logits[0], logits[first:last]
    exp = np.exp(masked - masked.max())
    return exp[0] / exp.sum()


def best_spans(start_logits: ArrayLike, end_logits: ArrayLike, first: int, last: int,
               max_answer_len: int, count: int) -> list[tuple[float, int, int]]:
    """The ``count`` best spans of one window, best first.

    Args:
        start_logits, end_logits: the window's logits, one per token ([CLS] first, no
            padding).
        first, last: the window's context tokens are ``first .. last - 1``.
        max_answer_len: the most tokens a span holds.
        count: how many spans to return (fewer if the window has fewer).

    Returns:
        A list of ``(score, i, j)``: the span's first and last token, counted from
        ``first``; ties keep the order of ``(i, j)``.

    Example:
        >>> logits = np.log([1.0, 1.0, 2.0, 1.0, 4.0])   # [CLS] q [SEP] c0 c1
        >>> [(round(s, 4), i, j) for s, i, j in best_spans(logits, logits, 3, 5, 2, 2)]
        [(0.4444, 1, 1), (0.1111, 0, 1)]
    """
    start = _probabilities(np.asarray(start_logits, np.float64), first, last)
    end = _probabilities(np.asarray(end_logits, np.float64), first, last)
    n = last - first
    i = np.repeat(np.arange(n), max_answer_len)
    j = i + np.tile(np.arange(max_answer_len), n)
    inside = j < n
    i, j = i[inside], j[inside]
    scores = start[i] * end[j]
    order = np.argsort(-scores, kind="stable")[:count]
    return [(float(scores[k]), int(i[k]), int(j[k])) for k in order]


def char_span(context: Context, window: tuple[int, int], i: int, j: int,
              align_to_words: bool = True) -> tuple[int, int]:
    """The characters of context tokens ``i .. j``, widened to whole words as far as the
    window ``(first token, end token)`` reaches: ``(start, end)``, end exclusive."""
    if align_to_words:
        first, stop = window
        i, j = max(context.word_first[i], first), min(context.word_last[j], stop - 1)
    return context.starts[i], context.ends[j]


def merge_answers(proposals: Iterable[tuple[float, int, int]], text: str,
                  top_k: int) -> list[dict[str, Any]]:
    """The ``top_k`` answers from the windows' proposals, as the pipeline ranks them.

    Args:
        proposals: ``(score, start, end)`` character spans in the order found (window by
            window, best first in each).
        text: the context.
        top_k: how many answers to keep.

    Returns:
        A list of ``{"score", "start", "end", "answer"}``, best first. Proposals whose text
        is the same but for case are one answer: the first one's span, their summed score.

    Example:
        >>> merge_answers([(0.5, 0, 3), (0.2, 4, 7), (0.1, 8, 11)], "Foo bar foo", 1)
        [{'score': 0.6, 'start': 0, 'end': 3, 'answer': 'Foo'}]
    """
    answers: list[dict[str, Any]] = []
    by_text: dict[str, dict[str, Any]] = {}
    for score, start, end in proposals:
        answer = text[start:end]
        found = by_text.get(answer.lower())
        if found is not None:
            found["score"] += score
        else:
            by_text[answer.lower()] = {"score": score, "start": start, "end": end,
                                       "answer": answer}
            answers.append(by_text[answer.lower()])
    return sorted(answers, key=lambda answer: -answer["score"])[:top_k]
