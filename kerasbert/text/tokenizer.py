"""BERT tokenizer with the bert4keras interface and Google's ids, run by Hugging Face `tokenizers`.

The engine (`kerasbert.text.engine`) under Google's rules (`kerasbert.text.rules`) does the
text cleaning, word splitting, WordPiece, `decode` and `rematch`; this module adds encoding
with bert4keras's methods, truncation and numpy batches.

Example:
    >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
    >>> tokenizer.encode("语言模型")
    ([101, 6427, 6241, 3563, 1798, 102], [0, 0, 0, 0, 0, 0])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Any, cast

import numpy as np
from tokenizers import Tokenizer as _Engine
from tokenizers import processors

from kerasbert.text.engine import WordPieceEngine, _encode, _named, _need_str
from kerasbert.text.padding import longest_first, sequence_padding
from kerasbert.text.rules import Rules
from kerasbert.text.vocab import check_vocab, load_vocab

__all__ = ["Tokenizer", "load_vocab"]

_PATTERNS = ("S*E*E", "S*ES*E")  # [CLS] a [SEP] b [SEP]; the second repeats [CLS] before b


class Tokenizer(WordPieceEngine):
    """BERT WordPiece tokenizer with bert4keras's methods and Google's ids.

    Args:
        vocab: a `vocab.txt` path, or a `{token: id}` dict (e.g. from `load_vocab`).
        do_lower_case: lowercase and strip accents (Chinese and uncased checkpoints).

    Raises:
        ValueError: the vocabulary lacks [PAD], [UNK], [CLS] or [SEP], or its file is bad.
        TypeError: `vocab` is neither a path nor a dict.

    Example:
        >>> Tokenizer({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hi": 4}).tokenize("Hi!")
        ['[CLS]', 'hi', '[UNK]', '[SEP]']
    """

    def __init__(self, vocab: str | os.PathLike[str] | dict[str, int],
                 do_lower_case: bool = True) -> None:
        if isinstance(vocab, (str, os.PathLike)):
            source, token_dict = os.fspath(vocab), load_vocab(vocab)
        elif isinstance(vocab, dict):
            source, token_dict = "the given vocabulary dict", dict(vocab)
        else:
            raise TypeError(f"vocab must be a vocab.txt path or a dict, got {type(vocab).__name__}")
        check_vocab(token_dict, source)
        super().__init__(token_dict, Rules("google", bool(do_lower_case)))
        self._pad_id = token_dict["[PAD]"]
        self._cls_id, self._sep_id = token_dict["[CLS]"], token_dict["[SEP]"]
        self._engines: dict[tuple[Any, ...], _Engine] = {}

    @property
    def vocab_size(self) -> int:
        """Number of tokens in the vocabulary."""
        return len(self._token_dict)

    @property
    def token_dict(self) -> dict[str, int]:
        """A copy of the `{token: id}` vocabulary."""
        return dict(self._token_dict)

    def _engine_for(self, maxlen: int | None = None, truncate_from: str = "right",
                    pad: str | None = None) -> _Engine:
        """The engine for one truncation and padding (None, "longest", "maxlen"), made once.

        Engines are never reconfigured, so concurrent calls cannot disturb each other.
        """
        key = (maxlen, truncate_from if maxlen else "right", pad)
        engine = self._engines.get(key)
        if engine is None:
            engine = self._new_engine()
            engine.post_processor = processors.TemplateProcessing(
                single="[CLS] $A [SEP]",
                special_tokens=[("[CLS]", self._cls_id), ("[SEP]", self._sep_id)])
            if maxlen is not None:
                engine.enable_truncation(int(maxlen), direction=truncate_from)
            if pad:
                # pad="maxlen" comes with a maxlen (encode_batch refuses it without)
                engine.enable_padding(pad_id=self._pad_id, pad_token="[PAD]",
                                      length=int(cast(int, maxlen)) if pad == "maxlen" else None)
            if len(self._engines) >= 32:
                self._engines.clear()
            self._engines[key] = engine
        return engine

    @staticmethod
    def _check(maxlen: object, pattern: str, truncate_from: str, pair: bool) -> None:
        if pattern not in _PATTERNS:
            raise ValueError(f"pattern={pattern!r} is not supported; use one of {list(_PATTERNS)}")
        if truncate_from not in ("right", "left"):
            raise ValueError(f"truncate_from={truncate_from!r} must be 'right' or 'left'")
        if maxlen is None:
            return
        if isinstance(maxlen, bool) or not isinstance(maxlen, (int, np.integer)):
            raise ValueError(f"maxlen must be an int or None, got maxlen={maxlen!r}")
        least = (4 if pattern == "S*ES*E" else 3) if pair else 2
        if maxlen < least:
            what = f"a pair with pattern {pattern!r}" if pair else "a single text"
            raise ValueError(f"maxlen={maxlen!r} is too small: {what} needs maxlen >= {least} "
                             "to hold its [CLS]/[SEP] tokens")

    def tokenize(self, text: str, maxlen: int | None = None) -> list[str]:
        """WordPiece tokens of `text` between [CLS] and [SEP]; unknown words are [UNK].

        Args:
            text: the text. maxlen: keep at most this many tokens (cut before [SEP]).

        Raises:
            ValueError: `text` holds a lone surrogate (half of a UTF-16 pair), named with
                its position.

        Example:
            >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
            >>> tokenizer.tokenize("语言BERT")
            ['[CLS]', '语', '言', 'be', '##rt', '[SEP]']
        """
        _need_str(text, "text")
        self._check(maxlen, "S*E*E", "right", False)
        pieces = self._pieces([text])[0]
        return ["[CLS]", *(pieces if maxlen is None else pieces[:maxlen - 2]), "[SEP]"]

    def encode(self, first_text: str, second_text: str | None = None, maxlen: int | None = None,
               pattern: str = "S*E*E", truncate_from: str = "right") -> tuple[list[int], list[int]]:
        """Token ids and segment ids of a text or a text pair, unpadded.

        Args:
            first_text: the text (segment 0). second_text: optional second text (segment 1).
            maxlen: length limit, special tokens included; a pair loses tokens from its
                longer text first (from the first text when both are as long).
            pattern: "S*E*E" is `[CLS] a [SEP] b [SEP]`, "S*ES*E" `[CLS] a [SEP] [CLS] b [SEP]`.
            truncate_from: "right" drops the last tokens, "left" the first ones.

        Returns:
            `(token_ids, segment_ids)`, two lists of ints.

        Raises:
            ValueError: `maxlen` cannot hold the special tokens, a bad `pattern` or
                `truncate_from`, or a text with a lone surrogate (named with its position).

        Example:
            >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
            >>> tokenizer.encode("语言", "模型")
            ([101, 6427, 6241, 102, 3563, 1798, 102], [0, 0, 0, 0, 1, 1, 1])
        """
        pair = second_text is not None
        _need_str(first_text, "first_text")
        if pair:
            _need_str(second_text, "second_text")
        self._check(maxlen, pattern, truncate_from, pair)
        if second_text is None:
            # The batch call skips offset tracking: faster than encode() even for one text.
            encoding = _encode(self._engine_for(maxlen, truncate_from), [first_text],
                               _named("first_text"))[0]
            return encoding.ids, encoding.type_ids
        a, b = _encode(self._engine, [first_text, second_text],
                       _named("first_text", "second_text"), add_special_tokens=False)
        return self._pair_row(a.ids, b.ids, maxlen, pattern, truncate_from)

    def _pair_row(self, a: list[int], b: list[int], maxlen: int | None, pattern: str,
                  truncate_from: str) -> tuple[list[int], list[int]]:
        """`(token_ids, segment_ids)` of a pair from the ids of its texts.

        The engine's own pair truncation keeps a leftover token in the text that was
        longer, which is neither Google's nor bert4keras's rule; so it is done here.
        """
        repeat_cls = pattern == "S*ES*E"
        if maxlen is not None:
            na, nb = (int(n) for n in longest_first(len(a), len(b), maxlen - 3 - repeat_cls))
            a, b = ((a[:na], b[:nb]) if truncate_from == "right"
                    else (a[len(a) - na:], b[len(b) - nb:]))
        second = [self._cls_id] * repeat_cls + b + [self._sep_id]
        return [self._cls_id] + a + [self._sep_id] + second, [0] * (len(a) + 2) + [1] * len(second)

    def encode_batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None,
                     maxlen: int | None = None, pattern: str = "S*E*E",
                     truncate_from: str = "right",
                     pad_to_maxlen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Encode many texts at once, in parallel Rust threads, into padded arrays.

        Args:
            texts: a list of str. pairs: optional list of second texts.
            maxlen, pattern, truncate_from: as in `encode`.
            pad_to_maxlen: pad every row to `maxlen`, not to the longest row.

        Returns:
            `(token_ids, segment_ids)`: int32 arrays of shape `(len(texts), length)`,
            padded with the [PAD] id and segment 0.

        Raises:
            ValueError: as in `encode`; a lone surrogate is named as `texts[i]` or `pairs[i]`.

        Example:
            >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
            >>> tokenizer.encode_batch(["语言模型", "好"], maxlen=128)[0].shape
            (2, 6)
        """
        texts = _str_list(texts, "texts")
        if pairs is not None:
            pairs = _str_list(pairs, "pairs")
            if len(pairs) != len(texts):
                raise ValueError(f"got {len(texts)} texts but {len(pairs)} pairs; "
                                 "pairs needs one second text per text")
        self._check(maxlen, pattern, truncate_from, pairs is not None)
        if pad_to_maxlen and maxlen is None:
            raise ValueError("pad_to_maxlen=True needs a maxlen to pad to")
        if not texts:
            empty = np.zeros((0, (maxlen or 0) if pad_to_maxlen else 0), dtype=np.int32)
            return empty, empty.copy()
        if pairs is not None:
            encodings = _encode(self._engine, texts + pairs, _named_batch(len(texts)),
                                add_special_tokens=False)
            rows = [self._pair_row(encodings[i].ids, encodings[len(texts) + i].ids, maxlen,
                                   pattern, truncate_from) for i in range(len(texts))]
            width = (maxlen or 0) if pad_to_maxlen else None
            return (sequence_padding([ids for ids, _ in rows], width, self._pad_id,
                                     dtype=np.int32),
                    sequence_padding([segments for _, segments in rows], width, dtype=np.int32))
        engine = self._engine_for(maxlen, truncate_from, "maxlen" if pad_to_maxlen else "longest")
        # No offsets needed; the engine truncates and pads, so all rows are as long.
        encodings = _encode(engine, texts, _named_batch(len(texts)))
        shape = (len(encodings), len(encodings[0]))
        # fromiter over one flat generator is about twice as fast as np.array(list of lists).
        token_ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), np.int32,
                                count=shape[0] * shape[1]).reshape(shape)
        return token_ids, np.zeros(shape, dtype=np.int32)


def _named_batch(n: int) -> Callable[[int], str]:
    """Names of the texts of a batch: `texts[i]`, then `pairs[i]` past the first `n`."""
    return lambda i: f"texts[{i}]" if i < n else f"pairs[{i - n}]"


def _str_list(values: Iterable[str], name: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{name} must be a list of str, not a single str ({values!r:.40})")
    values = list(values)
    for i, value in enumerate(values):
        _need_str(value, f"{name}[{i}]")
    return values
