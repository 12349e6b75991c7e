"""Masked-LM inputs: BERT's 15% masking with 80% [MASK], 10% random, 10% kept.

Masking picks whole *words*: a WordPiece continuation (``##ing``) is masked together
with the piece it continues, as in Google's whole-word-masking release. A Chinese
character is a token of its own, so for Chinese text every character is a word.

Example:
    >>> masker = Masker(mask_id=4, special_ids=[0, 1, 2, 3, 4], vocab_size=100)
    >>> batch = masker(np.array([[2, 50, 51, 52, 53, 54, 55, 3, 0]]), np.random.default_rng(0))
    >>> batch.inputs.shape, int(batch.weights.sum())
    ((1, 9), 1)
"""

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike


@dataclasses.dataclass
class MaskedBatch:
    """One batch ready for the MLM head.

    Attributes:
        inputs: token ids with the chosen positions replaced ([MASK], random or kept).
        labels: the original token ids (the prediction targets).
        weights: float32, 1 at the chosen positions and 0 elsewhere, so the loss and
            the accuracy count the chosen positions only.
    """

    inputs: np.ndarray
    labels: np.ndarray
    weights: np.ndarray

    def gathered(self, min_k: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The chosen positions only: ``(positions, labels, weights)``, each ``[batch, k]``.

        ``k`` is the most positions chosen in a row, at least ``min_k`` (a ``k`` fixed by
        the batch width keeps the number of distinct shapes, and so of retraces, small);
        shorter rows are filled with unchosen positions of weight 0. This is the form of
        Google's ``masked_lm_positions`` / ``masked_lm_ids`` / ``masked_lm_weights``.

        Example:
            >>> ids = np.array([[2, 7, 8, 3], [2, 9, 3, 0]])
            >>> MaskedBatch(ids, ids, np.array([[0, 1, 0, 1], [0, 0, 1, 0]], "float32")
            ...             ).gathered()[0].tolist()
            [[1, 3], [2, 0]]
        """
        chosen = self.weights > 0
        k = min(max(min_k, int(chosen.sum(axis=1).max())), chosen.shape[1])
        positions = np.argsort(~chosen, axis=1, kind="stable")[:, :k].astype(np.int32)
        return (positions, np.take_along_axis(self.labels, positions, axis=1),
                np.take_along_axis(self.weights, positions, axis=1))


class Masker:
    """Chooses and corrupts the positions to predict, BERT's way.

    In each row, ``max(1, round(rate * words))`` words are chosen (words: runs of a
    token and its ``##`` continuations, specials never count); each chosen token is
    replaced by [MASK] with probability ``mask_prob``, by a random ordinary token with
    ``random_prob``, and kept otherwise.

    Args:
        mask_id: the id of [MASK].
        special_ids: ids never chosen and never drawn as random tokens
            ([PAD], [UNK], [CLS], [SEP], [MASK]...).
        vocab_size: ids are ``0 .. vocab_size - 1``.
        continuation_ids: ids of ``##`` pieces (joined to the word before them).
        rate, mask_prob, random_prob: BERT's 0.15, 0.8 and 0.1.

    Raises:
        ValueError: a probability outside [0, 1], ``mask_prob + random_prob > 1``, or
            no ordinary token left to draw random replacements from.
    """

    def __init__(self, mask_id: int, special_ids: Iterable[int], vocab_size: int,
                 continuation_ids: Iterable[int] = (), rate: float = 0.15,
                 mask_prob: float = 0.8, random_prob: float = 0.1) -> None:
        for name, value in (("rate", rate), ("mask_prob", mask_prob),
                            ("random_prob", random_prob)):
            if not 0 <= value <= 1:
                raise ValueError(f"{name} ({value}) must be in [0, 1]")
        if mask_prob + random_prob > 1:
            raise ValueError(f"mask_prob ({mask_prob}) + random_prob ({random_prob}) must not "
                             "exceed 1")
        self.mask_id = int(mask_id)
        self.rate, self.mask_prob, self.random_prob = rate, mask_prob, random_prob
        self._special = np.zeros(vocab_size, dtype=bool)
        self._special[list(special_ids)] = True
        self._special[self.mask_id] = True
        self._continuation = np.zeros(vocab_size, dtype=bool)
        self._continuation[list(continuation_ids)] = True
        self._ordinary = np.flatnonzero(~self._special).astype(np.int32)
        if not len(self._ordinary):
            raise ValueError(f"the vocabulary ({vocab_size} ids) has no token other than the "
                             "special ones to use as a random replacement")

    @classmethod
    def for_vocab(cls, token_dict: Mapping[str, int], **kwargs: Any) -> "Masker":
        """A masker for a ``{token: id}`` vocabulary: bracketed tokens are special.

        Raises:
            ValueError: the vocabulary has no [MASK].

        Example:
            >>> from kerasbert.text.tokenizer import Tokenizer
            >>> tokenizer = Tokenizer("kerasbert/resources/kerasbert-zh-small/vocab.txt")
            >>> Masker.for_vocab(tokenizer.token_dict).mask_id
            4
        """
        from kerasbert.text.vocab import is_special

        if "[MASK]" not in token_dict:
            raise ValueError("the vocabulary has no [MASK] token; masked-LM pretraining needs one")
        return cls(token_dict["[MASK]"],
                   [i for token, i in token_dict.items() if is_special(token)],
                   max(token_dict.values()) + 1,
                   [i for token, i in token_dict.items() if token.startswith("##")], **kwargs)

    def __call__(self, token_ids: ArrayLike, rng: np.random.Generator) -> MaskedBatch:
        """Masks a batch of padded rows.

        Args:
            token_ids: int array ``[batch, length]`` ([CLS] ... [SEP] then [PAD]).
            rng: a ``numpy.random.Generator``; the same state gives the same masks.

        Returns:
            A :class:`MaskedBatch`.
        """
        token_ids = np.asarray(token_ids, dtype=np.int32)
        candidate = ~self._special[token_ids]
        # A word starts at every candidate that does not continue a candidate before it
        # (a ## piece after [CLS] or [UNK] has no word to join, so it starts one).
        follows = np.zeros_like(candidate)
        follows[:, 1:] = candidate[:, :-1]
        starts = candidate & ~(self._continuation[token_ids] & follows)
        words = starts.sum(axis=1)
        chosen_count = np.where(words > 0, np.maximum(1, np.rint(self.rate * words)), 0)
        # A random score per word start; the lowest `chosen_count` of each row are chosen.
        scores = np.where(starts, rng.random(token_ids.shape), np.inf)
        ranks = np.argsort(np.argsort(scores, axis=1, kind="stable"), axis=1, kind="stable")
        chosen_start = starts & (ranks < chosen_count[:, None])
        # Each token belongs to the word begun at the last start at or before it.
        word_of = np.maximum.accumulate(
            np.where(starts, np.arange(token_ids.shape[1])[None, :], -1), axis=1)
        chosen = candidate & (word_of >= 0) & np.take_along_axis(
            chosen_start, np.maximum(word_of, 0), axis=1)

        action = rng.random(token_ids.shape)
        inputs = token_ids.copy()
        inputs[chosen & (action < self.mask_prob)] = self.mask_id
        replace = chosen & (action >= self.mask_prob) & (action < self.mask_prob + self.random_prob)
        inputs[replace] = rng.choice(self._ordinary, size=int(replace.sum()))
        return MaskedBatch(inputs, token_ids, chosen.astype(np.float32))
