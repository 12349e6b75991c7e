"""BERT tokenizer with the bert4keras interface and Google's ids, run by Hugging Face `tokenizers`.

The engine is a `tokenizers` WordPiece model behind Google's text cleaning and word
splitting (see `kerasbert.text.vocab`); this module adds bert4keras's methods and numpy batches.

Example:
    >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
    >>> tokenizer.encode("语言模型")
    ([101, 6427, 6241, 3563, 1798, 102], [0, 0, 0, 0, 0, 0])
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

import numpy as np
from tokenizers import Tokenizer as _Engine
from tokenizers import models, processors

from kerasbert.text.vocab import (
    check_vocab,
    google_normalizer,
    google_pre_tokenizer,
    is_cjk,
    is_punctuation,
    is_special,
    load_vocab,
)

__all__ = ["Tokenizer", "load_vocab"]

MAX_WORD_CHARS = 100  # Google's WordPiece gives [UNK] for any longer word
_PATTERNS = ("S*E*E", "S*ES*E")  # [CLS] a [SEP] b [SEP]; the second repeats [CLS] before b
# decode: no space after openers ("(a", "$5"), none around joiners ("state-of-the-art").
_OPENERS = set("([{<“‘«《〈「『【〔（［｛＜$#£€¥")
_JOINERS = set("-/+=@_~^\\")
_CONTRACTIONS = {"s", "t", "m", "d", "re", "ve", "ll"}
_SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair: not a Unicode character


class Tokenizer:
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
        self._token_dict = token_dict
        self._id_to_token = {i: t for t, i in token_dict.items()}
        self._do_lower_case = bool(do_lower_case)
        self._unk_id, self._pad_id = token_dict["[UNK]"], token_dict["[PAD]"]
        self._cls_id, self._sep_id = token_dict["[CLS]"], token_dict["[SEP]"]
        self._frame = {"[CLS]", "[SEP]", "[PAD]", "[MASK]"}
        self._engines: dict[tuple[Any, ...], _Engine] = {}
        self._vanishing: dict[str, bool] = {}
        self._engine = self._engine_for()

    @property
    def vocab_size(self) -> int:
        """Number of tokens in the vocabulary."""
        return len(self._token_dict)

    @property
    def token_dict(self) -> dict[str, int]:
        """A copy of the `{token: id}` vocabulary."""
        return dict(self._token_dict)

    def _engine_for(self, maxlen=None, truncate_from="right", pad=None):
        """The engine for one truncation and padding (None, "longest", "maxlen"), made once.

        Engines are never reconfigured, so concurrent calls cannot disturb each other.
        """
        key = (maxlen, truncate_from if maxlen else "right", pad)
        engine = self._engines.get(key)
        if engine is None:
            engine = _Engine(models.WordPiece(self._token_dict, unk_token="[UNK]",
                                              max_input_chars_per_word=MAX_WORD_CHARS))
            engine.normalizer = google_normalizer(self._do_lower_case)
            engine.pre_tokenizer = google_pre_tokenizer()
            engine.post_processor = processors.TemplateProcessing(
                single="[CLS] $A [SEP]",
                special_tokens=[("[CLS]", self._cls_id), ("[SEP]", self._sep_id)])
            if maxlen is not None:
                engine.enable_truncation(int(maxlen), direction=truncate_from)
            if pad:
                engine.enable_padding(pad_id=self._pad_id, pad_token="[PAD]",
                                      length=int(maxlen) if pad == "maxlen" else None)
            if len(self._engines) >= 32:
                self._engines.clear()
            self._engines[key] = engine
        return engine

    @staticmethod
    def _check(maxlen, pattern, truncate_from, pair):
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
        ids = _encode(self._engine_for(maxlen), [text], _named("text"))[0].ids
        return [self._id_to_token[i] for i in ids]

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
        if not pair:
            # The batch call skips offset tracking: faster than encode() even for one text.
            encoding = _encode(self._engine_for(maxlen, truncate_from), [first_text],
                               _named("first_text"))[0]
            return encoding.ids, encoding.type_ids
        a, b = _encode(self._engine, [first_text, second_text],
                       _named("first_text", "second_text"), add_special_tokens=False)
        return self._pair_row(a.ids, b.ids, maxlen, pattern, truncate_from)

    def _pair_row(self, a, b, maxlen, pattern, truncate_from):
        """`(token_ids, segment_ids)` of a pair from the ids of its texts.

        The engine's own pair truncation keeps a leftover token in the text that was
        longer, which is neither Google's nor bert4keras's rule; so it is done here.
        """
        repeat_cls = pattern == "S*ES*E"
        if maxlen is not None:
            na, nb = _longest_first(len(a), len(b), maxlen - 3 - repeat_cls)
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
            width = (maxlen or 0) if pad_to_maxlen else max(len(ids) for ids, _ in rows)
            token_ids: np.ndarray = np.full((len(rows), width), self._pad_id, dtype=np.int32)
            segment_ids = np.zeros((len(rows), width), dtype=np.int32)
            for i, (ids, segments) in enumerate(rows):
                token_ids[i, :len(ids)], segment_ids[i, :len(ids)] = ids, segments
            return token_ids, segment_ids
        engine = self._engine_for(maxlen, truncate_from, "maxlen" if pad_to_maxlen else "longest")
        # No offsets needed; the engine truncates and pads, so all rows are as long.
        encodings = _encode(engine, texts, _named_batch(len(texts)))
        shape = (len(encodings), len(encodings[0]))
        # fromiter over one flat generator is about twice as fast as np.array(list of lists).
        token_ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), np.int32,
                                count=shape[0] * shape[1]).reshape(shape)
        return token_ids, np.zeros(shape, dtype=np.int32)

    def token_to_id(self, token: str) -> int:
        """Id of `token`, or the [UNK] id if it is not in the vocabulary."""
        return self._token_dict.get(token, self._unk_id)

    def tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """`token_to_id` of each token."""
        return [self._token_dict.get(t, self._unk_id) for t in tokens]

    def id_to_token(self, i: int) -> str:
        """Token of id `i`. Raises KeyError if `i` is not an id of the vocabulary."""
        try:
            return self._id_to_token[int(i)]
        except KeyError:
            raise KeyError(f"id {i!r} is not in the vocabulary "
                           f"({len(self._token_dict)} tokens)") from None

    def ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """`id_to_token` of each id."""
        return [self.id_to_token(i) for i in ids]

    def decode(self, ids: Iterable[int]) -> str:
        """Readable text: special tokens dropped, `##` pieces joined, CJK without spaces.

        Other words are separated by a space, punctuation attached as in prose;
        lowercasing and accent stripping are not undone.

        Example:
            >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
            >>> tokenizer.decode(tokenizer.encode("语言模型 BERT, 2.5 倍")[0])
            '语言模型bert, 2.5倍'
        """
        text, prev, quotes = "", "", 0
        for token in self.ids_to_tokens(ids):
            if is_special(token):
                continue
            suffix = token.startswith("##") and len(token) > 2
            piece = token[2:] if suffix else token
            if text and not (suffix or _glued(text, prev, piece, quotes % 2)):
                text += " "
            text += piece
            quotes += piece == '"'
            prev = piece
        return text

    def rematch(self, text: str, tokens: Sequence[str]) -> list[list[int]]:
        """Character positions in `text` of each token, e.g. to map spans back.

        Args:
            text: the original text. tokens: its tokens, as `tokenize(text)` gave them.

        Returns:
            a list of character indices per token, without the characters the tokenizer
            deletes (controls, zero-width, combining accents when lowercasing); [CLS],
            [SEP], [PAD] and [MASK] get `[]`, an [UNK] the word it replaced.

        Raises:
            ValueError: a token that does not occur, in order, in `text`.

        Example:
            >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
            >>> tokenizer.rematch("BERT模型", ['[CLS]', 'be', '##rt', '模', '型', '[SEP]'])
            [[], [0, 1], [2, 3], [4], [5], []]
        """
        _need_str(text, "text")
        encoding = _encode(self._engine, [text], _named("text"), add_special_tokens=False,
                           offsets=True)[0]
        pieces = list(zip(encoding.tokens, encoding.offsets))
        mapping, start = [], 0
        for n, token in enumerate(tokens):
            k = None if token in self._frame else next(
                (k for k in range(start, len(pieces)) if pieces[k][0] == token), None)
            if k is not None:
                begin, end = pieces[k][1]
                mapping.append([i for i in range(begin, end) if not self._vanishes(text[i])])
                start = k + 1
            elif is_special(token):
                mapping.append([])
            else:
                after = pieces[start - 1][1][1] if start else 0
                raise ValueError(f"tokens[{n}]={token!r} does not occur in the text after "
                                 f"character {after}; rematch needs the tokens of tokenize(text)")
        return mapping

    def _vanishes(self, ch):
        """Whether normalization deletes `ch` (a control, zero-width or combining character)."""
        gone = self._vanishing.get(ch)
        if gone is None:
            gone = self._vanishing[ch] = not self._engine.normalizer.normalize_str(ch)
        return gone


def _encode(engine, texts, name, add_special_tokens=True, offsets=False):
    """The engine's encodings of `texts` (with character offsets if `offsets`).

    The engine only takes valid Unicode and answers a lone surrogate (e.g. from a JSON
    "\\ud800" escape) with a TypeError about its input types. The texts are searched
    only then, so valid input pays nothing.

    Raises:
        ValueError: a text holds a lone surrogate; `name(i)` names the i-th text.
    """
    try:
        if offsets:
            return engine.encode_batch(texts, add_special_tokens=add_special_tokens)
        return engine.encode_batch_fast(texts, add_special_tokens=add_special_tokens)
    except Exception:
        for i, text in enumerate(texts):
            found = _SURROGATE.search(text)
            if found:
                point = ord(found.group())
                # U+DC80..U+DCFF is also how Python keeps a byte that is not UTF-8.
                byte = (f" (or the byte 0x{point - 0xDC00:02x}, not UTF-8, as Python keeps "
                        "such bytes)" if 0xDC80 <= point <= 0xDCFF else "")
                raise ValueError(f"{name(i)} contains a lone surrogate U+{point:04X} at "
                                 f"character {found.start()}{byte}, not valid Unicode") from None
        raise


def _named(*names):
    return lambda i: names[i]


def _named_batch(n):
    """Names of the texts of a batch: `texts[i]`, then `pairs[i]` past the first `n`."""
    return lambda i: f"texts[{i}]" if i < n else f"pairs[{i - n}]"


def _need_str(value, name):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}: {value!r:.60}")


def _str_list(values: Iterable[str], name: str) -> list[str]:
    if isinstance(values, str):
        raise TypeError(f"{name} must be a list of str, not a single str ({values!r:.40})")
    values = list(values)
    for i, value in enumerate(values):
        _need_str(value, f"{name}[{i}]")
    return values


def _longest_first(a, b, budget):
    """Lengths `(a, b)` cut to `a + b <= budget` as bert4keras does.

    One token at a time from the longer text, from the first text on a tie (Google's
    `_truncate_seq_pair` takes ties from the second text).
    """
    excess = a + b - budget
    if excess <= 0:
        return a, b
    cut = min(excess, abs(a - b))
    a, b = (a - cut, b) if a >= b else (a, b - cut)
    excess -= cut
    return a - (excess + 1) // 2, b - excess // 2


def _glued(text, prev, piece, in_quote):
    """Whether `piece` follows `text` (whose last token was `prev`) without a space."""
    last = text[-1]
    if is_cjk(last) or is_cjk(piece[0]) or last in _OPENERS or last in _JOINERS:
        return True
    if piece == '"' or last == '"' and in_quote:
        return bool(in_quote)  # a closing quote, or the word after an opening one
    if len(piece) == 1 and is_punctuation(piece) and piece not in _OPENERS:
        return True
    if is_punctuation(last) and not last.isascii():
        return True  # full-width punctuation carries its own spacing
    if prev == "'" and piece in _CONTRACTIONS:
        return True
    # "2 . 5" was 2.5 and "1 , 000" was 1,000
    return (prev in (".", ",") and len(text) > 1 and text[-2].isdigit() and piece.isdigit()
            and (prev == "." or len(piece) == 3))
