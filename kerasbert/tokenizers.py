"""bert4keras's ``tokenizers``: ``Tokenizer``, ``SpTokenizer`` and ``load_vocab`` with their
keywords and results.

``from kerasbert.tokenizers import Tokenizer, load_vocab`` gives bert4keras 0.11.5's tokens,
ids, segment ids, ``decode`` text and ``rematch`` offsets. ``Tokenizer`` is kerasbert's one
WordPiece engine (``kerasbert.text.engine``, which also runs :class:`kerasbert.Tokenizer`)
under bert4keras's rules where they differ from Google's:

- ``do_lower_case`` defaults to False; lowercasing is Python's ``str.lower`` with accents
  stripped, before anything else;
- only control (Cc, Cf) characters are deleted; private-use and unassigned ones stay;
- a word WordPiece cannot split, or longer than ``word_maxlen`` (200) characters, stays
  whole as its token (its id is [UNK]'s) instead of becoming ``[UNK]``;
- ``pre_tokenize``, ``token_translate``, ``token_start`` / ``token_end`` (None for none),
  an ``encode`` of token lists, and ``truncate_from`` as an index work as in bert4keras.

``SpTokenizer`` gives bert4keras's tokens, ids and ``decode`` text for a SentencePiece model
(T5's and mT5's ``spiece.model``, ALBERT's ``30k-clean.model``), run by ``sentencepiece``
as in bert4keras. ``load_vocab`` refuses a token listed twice (bert4keras would shift
every later id).

Example:
    >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt",
    ...                       do_lower_case=True)
    >>> tokenizer.encode("语言模型", "BERT")
    ([101, 6427, 6241, 3563, 1798, 102, 8815, 8716, 102], [0, 0, 0, 0, 0, 0, 1, 1, 1])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, overload

import sentencepiece  # noqa: F401 (SpTokenizer's example trains a model with it)

from kerasbert.snippets import is_string, open, truncate_sequences
from kerasbert.text.engine import Lookups, WordPieceEngine
from kerasbert.text.pieces import load_sentencepiece
from kerasbert.text.rules import CJK_PUNCTUATION, Rules
from kerasbert.text.vocab import (
    is_cjk,
    is_control,
    is_punctuation,
    is_redundant,
    is_space,
    is_special,
    lowercase_and_normalize,
    simplify_vocab,
)
from kerasbert.text.vocab import stem as _stem

__all__ = ["SpTokenizer", "Tokenizer", "TokenizerBase", "load_vocab", "save_vocab"]


@overload
def load_vocab(dict_path: str | os.PathLike[str], encoding: str = "utf-8",
               simplified: Literal[False] = False,
               startswith: Sequence[str] | None = None) -> dict[str, int]: ...
@overload
def load_vocab(dict_path: str | os.PathLike[str], encoding: str = "utf-8", *,
               simplified: Literal[True],
               startswith: Sequence[str] | None = None) -> tuple[dict[str, int], list[int]]: ...
@overload
def load_vocab(dict_path: str | os.PathLike[str], encoding: str, simplified: Literal[True],
               startswith: Sequence[str] | None = None) -> tuple[dict[str, int], list[int]]: ...
@overload
def load_vocab(dict_path: str | os.PathLike[str], encoding: str = "utf-8", simplified: bool = False,
               startswith: Sequence[str] | None = None,
               ) -> dict[str, int] | tuple[dict[str, int], list[int]]: ...
def load_vocab(dict_path: str | os.PathLike[str], encoding: str = "utf-8", simplified: bool = False,
               startswith: Sequence[str] | None = None,
               ) -> dict[str, int] | tuple[dict[str, int], list[int]]:
    """bert4keras's vocabulary reader: a token per line (its first field), ids by line.

    Args:
        dict_path: the ``vocab.txt``. encoding: its encoding.
        simplified: also drop tokens the tokenizer never produces (as bert4keras does, to
            shrink the embedding); ``startswith``: tokens to put first then.

    Returns:
        ``{token: id}``, or with ``simplified=True`` ``(token_dict, keep_tokens)``, where
        ``keep_tokens[new_id]`` is the token's id in the file.

    Raises:
        ValueError: a token on two lines (naming both), or a ``startswith`` token absent.

    Example:
        >>> token_dict, keep_tokens = load_vocab(
        ...     "checkpoints/chinese_L-12_H-768_A-12/vocab.txt", simplified=True,
        ...     startswith=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
        >>> len(token_dict), keep_tokens[:5]
        (13584, [0, 100, 101, 102, 106])
    """
    token_dict: dict[str, int] = {}
    with open(dict_path, encoding=encoding) as reader:
        for lineno, line in enumerate(reader, 1):
            fields = line.split()
            token = fields[0] if fields else line.strip()
            if token in token_dict:
                raise ValueError(f"vocab in {dict_path}, line {lineno}: token {token!r} is "
                                 f"already on line {token_dict[token] + 1}")
            token_dict[token] = len(token_dict)
    if simplified:
        return simplify_vocab(token_dict, startswith, source=dict_path)
    return token_dict


def save_vocab(dict_path: str | os.PathLike[str], token_dict: Mapping[str, int],
               encoding: str = "utf-8") -> None:
    """Writes ``token_dict`` as a ``vocab.txt``: its tokens in id order, one per line."""
    with open(dict_path, "w", encoding=encoding) as writer:
        for token, _ in sorted(token_dict.items(), key=lambda item: item[1]):
            writer.write(token + "\n")


class TokenizerBase(Lookups):
    """What bert4keras's tokenizers share: the frame tokens, ``tokenize``, ``encode`` and the
    id lookups.

    Args:
        token_start, token_end: the tokens put around a text (None: none).
        pre_tokenize: a function splitting a text into words first (e.g. jieba's); a
            word in the vocabulary is one token, another is tokenized as usual.
        token_translate: ``{token: replacement}`` applied after tokenizing.
    """

    def __init__(self, token_start: str | None = "[CLS]", token_end: str | None = "[SEP]",
                 pre_tokenize: Callable[[str], Iterable[str]] | None = None,
                 token_translate: Mapping[str, str] | None = None) -> None:
        self._token_pad: str | None = "[PAD]"
        self._token_unk: str | None = "[UNK]"
        self._token_mask: str | None = "[MASK]"
        self._token_start, self._token_end = token_start, token_end
        self._pre_tokenize = pre_tokenize
        self._token_translate = token_translate or {}
        self._token_translate_inv = {v: k for k, v in self._token_translate.items()}

    def tokenize(self, text: str, maxlen: int | None = None) -> list[str]:
        """The tokens of ``text`` between ``token_start`` and ``token_end``; with ``maxlen``
        at most that many (cut before the end token)."""
        tokens = [self._token_translate.get(t) or t for t in self._tokenize(text)]
        if self._token_start is not None:
            tokens.insert(0, self._token_start)
        if self._token_end is not None:
            tokens.append(self._token_end)
        if maxlen is not None:
            truncate_sequences(maxlen, -(self._token_end is not None) - 1, tokens)
        return tokens

    def encode(self, first_text: str | Sequence[str],
               second_text: str | Sequence[str] | None = None, maxlen: int | None = None,
               pattern: str = "S*E*E",
               truncate_from: Literal["right", "left"] | int = "right",
               ) -> tuple[list[int], list[int]]:
        """Token ids and segment ids of a text, or of a pair.

        Args:
            first_text, second_text: texts, or lists of tokens (with their frame tokens).
            maxlen: the most ids in all; the longer text loses tokens first.
            pattern: ``"S*E*E"`` drops the second text's start token, ``"S*ES*E"`` keeps it.
            truncate_from: ``"right"`` cuts before the end token, ``"left"`` after the
                start token; an int is the index to cut at.

        Returns:
            ``(token_ids, segment_ids)``, two lists.
        """
        first = self.tokenize(first_text) if is_string(first_text) else list(first_text)
        second = None
        if second_text is not None:
            second = (self.tokenize(second_text) if is_string(second_text)
                      else list(second_text))
        if maxlen is not None:
            if truncate_from == "right":
                index = -(self._token_end is not None) - 1
            elif truncate_from == "left":
                index = int(self._token_start is not None)
            else:
                index = truncate_from
            if second is not None and pattern == "S*E*E":
                maxlen += 1  # the second start token is dropped below
            truncate_sequences(maxlen, index, first, second)
        token_ids = self.tokens_to_ids(first)
        segment_ids = [0] * len(token_ids)
        if second is not None:
            if pattern == "S*E*E":
                second = second[int(bool(self._token_start)):]
            token_ids += self.tokens_to_ids(second)
            segment_ids += [1] * len(second)
        return token_ids, segment_ids

    def decode(self, ids: Iterable[int]) -> str:
        raise NotImplementedError

    def _tokenize(self, text: str) -> list[str]:
        raise NotImplementedError


class Tokenizer(TokenizerBase, WordPieceEngine):
    """bert4keras's BERT tokenizer: kerasbert's WordPiece engine under bert4keras's rules.

    Args:
        token_dict: a ``vocab.txt`` path, or ``{token: id}``.
        do_lower_case: lowercase and strip accents (False by default, as in bert4keras).
        word_maxlen: a longer word is one token, not split.
        **kwargs: ``token_start``, ``token_end``, ``pre_tokenize``, ``token_translate``
            (see :class:`TokenizerBase`).

    Example:
        >>> tokenizer = Tokenizer({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hi": 4})
        >>> tokenizer.tokenize("hi Hi!")
        ['[CLS]', 'hi', 'Hi', '!', '[SEP]']
        >>> tokenizer.encode("hi Hi!")[0]
        [2, 4, 1, 1, 3]
    """

    _token_unk_id: int  # set by __init__ (with the other ids of the frame tokens)

    def __init__(self, token_dict: str | dict[str, int],
                 do_lower_case: bool = False, word_maxlen: int = 200, **kwargs: Any) -> None:
        TokenizerBase.__init__(self, **kwargs)
        if isinstance(token_dict, str):
            token_dict = load_vocab(token_dict)
        WordPieceEngine.__init__(self, token_dict, Rules("bert4keras", do_lower_case, word_maxlen))
        self._token_dict_inv = self._id_to_token
        self._vocab_size = len(token_dict)
        self._word_maxlen = word_maxlen
        for name in ("pad", "unk", "mask", "start", "end"):
            token = getattr(self, f"_token_{name}")
            if token in token_dict:
                setattr(self, f"_token_{name}_id", token_dict[token])

    def token_to_id(self, token: str) -> int:
        """Id of ``token``, or ``_token_unk_id`` for a token the vocabulary lacks.

        As in bert4keras, ``_token_unk_id`` is the id of ``[UNK]`` where the vocabulary has
        one, and a script may set it itself over a vocabulary without it (``[CLS]`` and
        ``[SEP]`` then encode as that id too).

        Raises:
            KeyError: ``token`` is not in a vocabulary without [UNK], and no
                ``_token_unk_id`` was set.
        """
        i = self._token_dict.get(token)
        if i is not None:
            return i
        unknown = getattr(self, "_token_unk_id", None)
        if unknown is None:
            raise KeyError(f"token {token!r} is not in the vocabulary, which has no "
                           f"{self._token_unk}: set tokenizer._token_unk_id to the id it "
                           "should encode as")
        return unknown

    def decode(self, ids: Iterable[int], tokens: Sequence[str] | None = None) -> str:
        """Readable text: frame tokens dropped, ``##`` pieces joined, CJK unspaced.

        Example:
            >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
            >>> tokenizer.decode(tokenizer.encode("语言模型, it's 2.5 倍")[0])
            "语言模型, it's 2.5倍"
        """
        return self._rules.join(tokens or self.ids_to_tokens(ids))

    def _tokenize(self, text: str, pre_tokenize: bool = True) -> list[str]:
        """The tokens of ``text`` without the frame tokens."""
        if self._do_lower_case:
            text = lowercase_and_normalize(text)
        if pre_tokenize and self._pre_tokenize is not None:
            words = list(self._pre_tokenize(text))
            split = iter(self._pieces([lowercase_and_normalize(w) if self._do_lower_case
                                       else w for w in words if w not in self._token_dict]))
            return [t for w in words for t in ([w] if w in self._token_dict else next(split))]
        return self._pieces([text])[0]

    # bert4keras's character classes, as its scripts call them.
    stem = staticmethod(_stem)
    _is_cjk_character = staticmethod(is_cjk)
    _is_punctuation = staticmethod(is_punctuation)
    _is_special = staticmethod(is_special)
    _is_redundant = staticmethod(is_redundant)
    _is_space = staticmethod(is_space)
    _is_control = staticmethod(is_control)

    @staticmethod
    def _cjk_punctuation() -> str:
        """The full-width and CJK punctuation ``decode`` writes without a space after it."""
        return CJK_PUNCTUATION


class SpTokenizer(TokenizerBase):
    """bert4keras's tokenizer for a SentencePiece model, run by ``sentencepiece``.

    The tokens are the model's pieces (``▁`` marks the start of a word). The frame tokens
    default to ``[CLS]`` / ``[SEP]`` as for BERT; a piece the model lacks (T5's has neither)
    gets the unknown piece's id, as in bert4keras. T5 and mT5 take ``token_start=None,
    token_end="</s>"``.

    Args:
        sp_model_path: the SentencePiece ``.model`` file.
        **kwargs: ``token_start``, ``token_end``, ``pre_tokenize`` (its words are joined
            with spaces before the model splits them) and ``token_translate`` (see
            :class:`TokenizerBase`).

    Attributes:
        sp_model: the ``sentencepiece.SentencePieceProcessor``.
        _token_pad, _token_unk: the model's padding and unknown pieces (``_token_pad`` is
            None for a model without padding, where bert4keras fails to load it).
        _token_pad_id, _token_unk_id, _token_mask_id, _token_start_id, _token_end_id: the
            ids of those pieces, of ``[MASK]`` and of the frame tokens; absent for a token
            that is None.
        _vocab_size: the number of pieces.

    Raises:
        FileNotFoundError: no file at ``sp_model_path``.
        ValueError: the file is not a SentencePiece model.

    Example:
        A T5-like model (``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2) trained on the shipped reviews:

        >>> import csv
        >>> with open("kerasbert/resources/reviews/dev.tsv", encoding="utf-8") as f:
        ...     texts = [row["text"] for row in csv.DictReader(f, delimiter="\\t")]
        >>> sentencepiece.SentencePieceTrainer.train(
        ...     sentence_iterator=iter(texts), model_prefix="reviews", vocab_size=4000,
        ...     pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1, minloglevel=2)
        >>> tokenizer = SpTokenizer("reviews.model", token_start=None, token_end="</s>")
        >>> tokenizer.tokenize("这本书很好看，但是价格有点贵。")
        ['▁', '这本书', '很好', '看', ',', '但是', '价格', '有点', '贵', '。', '</s>']
        >>> token_ids, segment_ids = tokenizer.encode("这本书很好看，但是价格有点贵。", maxlen=6)
        >>> token_ids, tokenizer.ids_to_tokens(token_ids)
        ([6, 80, 95, 32, 3, 1], ['▁', '这本书', '很好', '看', ',', '</s>'])
        >>> tokenizer.decode(token_ids)
        '这本书很好看,'
    """

    def __init__(self, sp_model_path: str | os.PathLike[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sp_model = load_sentencepiece(sp_model_path)
        pad_id = self.sp_model.pad_id()
        self._token_pad = self.sp_model.id_to_piece(pad_id) if pad_id >= 0 else None
        self._token_unk = self.sp_model.id_to_piece(self.sp_model.unk_id())
        self._vocab_size = self.sp_model.get_piece_size()
        for name in ("pad", "unk", "mask", "start", "end"):
            token = getattr(self, f"_token_{name}")
            if token is not None:
                setattr(self, f"_token_{name}_id", self.token_to_id(token))

    def token_to_id(self, token: str) -> int:
        """The piece's id, or the unknown piece's."""
        return self.sp_model.piece_to_id(token)

    def id_to_token(self, i: int) -> str:
        """The piece of id ``i``; ``""`` from ``vocab_size`` on (IndexError below 0)."""
        return self.sp_model.id_to_piece(i) if i < self._vocab_size else ""

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` as the model writes it back: control pieces (``</s>``,
        ``<pad>``) dropped, the unknown piece as `` ⁇ ``, ``token_translate`` undone."""
        tokens = [self._token_translate_inv.get(t) or t for t in self.ids_to_tokens(ids)]
        return self.sp_model.decode_pieces(tokens)

    def _tokenize(self, text: str) -> list[str]:
        """The pieces of ``text``, without the frame tokens."""
        if self._pre_tokenize is not None:
            text = " ".join(self._pre_tokenize(text))
        return self.sp_model.encode_as_pieces(text)

    def _is_special(self, i: int) -> bool:
        """Whether id ``i`` is a control, unknown or unused piece."""
        model = self.sp_model
        return model.is_control(i) or model.is_unknown(i) or model.is_unused(i)

    def _is_decodable(self, i: int) -> bool:
        """Whether id ``i`` is a piece that decodes to text."""
        return i < self._vocab_size and not self._is_special(i)
