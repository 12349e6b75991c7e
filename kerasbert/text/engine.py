"""The one WordPiece engine of kerasbert's BERT tokenizers: Hugging Face `tokenizers` set up
from a vocabulary and `Rules` (Google's or bert4keras's), and the operations they share.

`WordPieceEngine` sets the engine up (`_new_engine`, the only place that does) and owns the
vocabulary, the id lookups, the WordPiece tokens of texts, `decode` and `rematch`. The
`Tokenizer` of `kerasbert.text.tokenizer` is it under Google's rules; the `Tokenizer` of
`kerasbert.tokenizers` under bert4keras 0.11.5's, with bert4keras's keywords on top.

Example:
    >>> engine = WordPieceEngine({"[UNK]": 0, "hi": 1, "##s": 2}, Rules("google", True))
    >>> engine.decode(engine.tokens_to_ids(["hi", "##s", "hi"]))
    'his hi'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from tokenizers import Encoding, models
from tokenizers import Tokenizer as _Engine

from kerasbert.text.rules import WHOLE_WORD, Rules
from kerasbert.text.vocab import is_control, is_special, lowercase_and_normalize, stem

_FRAME = {"[CLS]", "[SEP]", "[PAD]", "[MASK]"}  # Google's rematch gives them []
_SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair: not a Unicode character


class Lookups:
    """Token <-> id lookups over a tokenizer's `token_to_id` and `id_to_token`."""

    def token_to_id(self, token: str) -> int:
        raise NotImplementedError

    def tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """`token_to_id` of each token."""
        return [self.token_to_id(t) for t in tokens]

    def id_to_token(self, i: int) -> str:
        raise NotImplementedError

    def ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """`id_to_token` of each id."""
        return [self.id_to_token(i) for i in ids]


class WordPieceEngine(Lookups):
    """A BERT vocabulary's WordPiece tokenizer under `rules`, run by Hugging Face `tokenizers`.

    Args:
        token_dict: `{token: id}`, kept as given.
        rules: Google's or bert4keras's (see `Rules`).
    """

    def __init__(self, token_dict: dict[str, int], rules: Rules) -> None:
        self._token_dict = token_dict
        self._id_to_token = {i: t for t, i in token_dict.items()}
        self._unk_id = token_dict.get("[UNK]")
        self._rules = rules
        self._do_lower_case = rules.do_lower_case
        self._vocab = dict(token_dict)
        self._whole_word_id = None
        if rules.unknown == WHOLE_WORD:  # a new id, that no token of the vocabulary has
            self._whole_word_id = max(token_dict.values(), default=-1) + 1
            self._vocab[WHOLE_WORD] = self._whole_word_id
        self._vanishing: dict[str, bool] = {}
        self._engine = self._new_engine()

    def _new_engine(self) -> _Engine:
        """A new engine: WordPiece over the vocabulary behind the rules' normalizer and
        pre-tokenizer (without [CLS] / [SEP], truncation or padding)."""
        rules = self._rules
        engine = _Engine(models.WordPiece(self._vocab, unk_token=rules.unknown,
                                          max_input_chars_per_word=rules.max_word_chars))
        engine.normalizer, engine.pre_tokenizer = rules.normalizer(), rules.pre_tokenizer()
        return engine

    def token_to_id(self, token: str) -> int:
        """Id of `token`, or the [UNK] id if it is not in the vocabulary.

        Raises:
            KeyError: `token` is not in a vocabulary without [UNK].
        """
        i = self._token_dict.get(token, self._unk_id)
        if i is None:
            raise KeyError(f"token {token!r} is not in the vocabulary, which has no [UNK]")
        return i

    def id_to_token(self, i: int) -> str:
        """Token of id `i`. Raises KeyError if `i` is not an id of the vocabulary."""
        try:
            return self._id_to_token[int(i)]
        except KeyError:
            raise KeyError(f"id {i!r} is not in the vocabulary "
                           f"({len(self._token_dict)} tokens)") from None

    def _pieces(self, texts: list[str]) -> list[list[str]]:
        """The WordPiece tokens of each text (parts of one `text`), without [CLS] / [SEP]."""
        rows = []
        # The fast batch call gives ids only (no token strings, no word indices).
        for text, encoding in zip(texts, _encode(self._engine, texts, lambda i: "text",
                                                 add_special_tokens=False)):
            if self._whole_word_id in encoding.ids:
                encoding = self._engine.encode(text, add_special_tokens=False)
                words = self._engine.pre_tokenizer.pre_tokenize_str(
                    self._engine.normalizer.normalize_str(text))
                rows.append([words[w][0] if t == WHOLE_WORD else t
                             for t, w in zip(encoding.tokens, encoding.word_ids)])
            else:
                rows.append([self._id_to_token[i] for i in encoding.ids])
        return rows

    def decode(self, ids: Iterable[int]) -> str:
        """Readable text: special tokens dropped, `##` pieces joined, CJK without spaces.

        Under Google's rules other words are separated by a space, punctuation attached as
        in prose; bert4keras's put a space after punctuation but not after CJK punctuation,
        `+-/={(<[`, `it'`, `2.`. Lowercasing and accent stripping are not undone.

        Example:
            >>> token_dict = {"[CLS]": 0, "[UNK]": 1, "语": 2, "言": 3, "$": 4, "5": 5, ",": 6}
            >>> ids = [0, 2, 3, 4, 5, 6, 5]
            >>> WordPieceEngine(token_dict, Rules("google", True)).decode(ids)
            '语言$5, 5'
            >>> WordPieceEngine(token_dict, Rules("bert4keras", True)).decode(ids)
            '语言$ 5, 5'
        """
        return self._rules.join(self.ids_to_tokens(ids))

    def rematch(self, text: str, tokens: Sequence[str]) -> list[list[int]]:
        """Character positions in `text` of each token, e.g. to map spans back.

        Args:
            text: the original text. tokens: its tokens, as `tokenize(text)` gave them.

        Returns:
            a list of character indices per token, without the characters the tokenizer
            deletes (controls, zero-width, combining accents when lowercasing). Under
            Google's rules [CLS], [SEP], [PAD] and [MASK] get `[]`, an [UNK] the word it
            replaced; under bert4keras's every bracketed token gets `[]`, and positions
            count in the lowercased text when lowercasing (as bert4keras gives them).

        Raises:
            ValueError: a token that does not occur, in order, in `text`.

        Example:
            >>> token_dict = {"[CLS]": 0, "[UNK]": 1, "be": 2, "##rt": 3, "模": 4}
            >>> tokens = ["[CLS]", "be", "##rt", "模"]
            >>> WordPieceEngine(token_dict, Rules("google", True)).rematch("BERT模", tokens)
            [[], [0, 1], [2, 3], [4]]
        """
        _need_str(text, "text")
        if self._rules.family == "bert4keras":
            return self._searched(text, tokens)
        encoding = _encode(self._engine, [text], _named("text"), add_special_tokens=False,
                           offsets=True)[0]
        pieces = list(zip(encoding.tokens, encoding.offsets))
        mapping, start = [], 0
        for n, token in enumerate(tokens):
            k = None if token in _FRAME else next(
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

    def _searched(self, text: str, tokens: Sequence[str]) -> list[list[int]]:
        """bert4keras's `rematch`: each token looked for, in order, in the text lowercased
        (if so set) and without the characters bert4keras deletes (controls, tab and
        newline included)."""
        lower = self._do_lower_case
        if lower:
            text = text.lower()
        normalized, positions = "", []
        for i, ch in enumerate(text):
            if lower:
                ch = lowercase_and_normalize(ch)
            ch = "".join(c for c in ch if not (c in "\x00\ufffd" or is_control(c)))
            normalized += ch
            positions += [i] * len(ch)
        mapping: list[list[int]] = []
        offset = 0
        for token in tokens:
            if is_special(token):
                mapping.append([])
                continue
            token = stem(token)
            start = normalized.index(token, offset)
            offset = start + len(token)
            mapping.append(positions[start:offset])
        return mapping

    def _vanishes(self, ch: str) -> bool:
        """Whether normalization deletes `ch` (a control, zero-width or combining character)."""
        gone = self._vanishing.get(ch)
        if gone is None:
            gone = self._vanishing[ch] = not self._engine.normalizer.normalize_str(ch)
        return gone


def _encode(engine: _Engine, texts: list[str], name: Callable[[int], str],
            add_special_tokens: bool = True, offsets: bool = False) -> list[Encoding]:
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


def _named(*names: str) -> Callable[[int], str]:
    return lambda i: names[i]


def _need_str(value: object, name: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}: {value!r:.60}")
