"""BERT vocabularies and the character tests of the tokenizers' rules.

Reads, checks and shrinks `vocab.txt`; says which characters are CJK, punctuation, spaces
or controls (the engine's character classes in `kerasbert.text.engine` are made from these).

Example:
    >>> token_dict = load_vocab("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
    >>> token_dict["[CLS]"]
    101
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

from kerasbert.files import open_input

#: Tokens every BERT vocabulary must hold; [MASK] is only needed for pre-training.
REQUIRED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")

# Google's "Chinese character" blocks: each such character is a word of its own.
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_cjk(ch: str) -> bool:
    """True if `ch` is in Google's CJK ideograph blocks (split off as its own word)."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def is_punctuation(ch: str) -> bool:
    """True for BERT punctuation: any Unicode P* character plus all ASCII symbols."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_space(ch: str) -> bool:
    """bert4keras's space: space, tab, newline, carriage return or a Unicode space (Zs)."""
    return ch in " \n\r\t" or unicodedata.category(ch) == "Zs"


def is_control(ch: str) -> bool:
    """bert4keras's control: a control or format character (Cc, Cf)."""
    return unicodedata.category(ch) in ("Cc", "Cf")


def lowercase_and_normalize(text: str) -> str:
    """Lowercased, decomposed (NFD), without non-spacing marks: ``"Ça"`` -> ``"ca"``."""
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(ch for ch in text if unicodedata.category(ch) != "Mn")


def is_special(token: str) -> bool:
    """True for bracketed tokens such as [CLS], [SEP], [UNK] or [unused1]."""
    return len(token) > 1 and token[0] == "[" and token[-1] == "]"


def stem(token: str) -> str:
    """The text a token stands for: `##ing` -> `ing`."""
    return token[2:] if token.startswith("##") else token


def is_redundant(token: str) -> bool:
    """True if BERT's basic tokenizer can never produce `token`.

    CJK characters and punctuation always stand alone as words, so a
    multi-character token (or a `##` piece) containing one is never used.
    """
    return len(token) > 1 and any(is_cjk(c) or is_punctuation(c) for c in stem(token))


@overload
def load_vocab(path: str | os.PathLike[str], simplified: Literal[False] = False,
               startswith: Sequence[str] | None = None) -> dict[str, int]: ...
@overload
def load_vocab(path: str | os.PathLike[str], simplified: Literal[True],
               startswith: Sequence[str] | None = None) -> tuple[dict[str, int], list[int]]: ...
@overload
def load_vocab(path: str | os.PathLike[str], simplified: bool = False,
               startswith: Sequence[str] | None = None,
               ) -> dict[str, int] | tuple[dict[str, int], list[int]]: ...
def load_vocab(path: str | os.PathLike[str], simplified: bool = False,
               startswith: Sequence[str] | None = None,
               ) -> dict[str, int] | tuple[dict[str, int], list[int]]:
    """Read a BERT `vocab.txt`: one token per line, the id is the 0-based line number.

    Args:
        path: the vocabulary file (UTF-8).
        simplified: also drop the tokens the tokenizer can never produce
            (see `is_redundant`), as bert4keras does to shrink the embedding.
        startswith: tokens to put first in the simplified vocabulary, in this order
            (e.g. `["[PAD]", "[UNK]", "[CLS]", "[SEP]"]`).

    Returns:
        `{token: id}`; with `simplified=True` the pair `(new_token_dict, keep_tokens)`
        where `keep_tokens[new_id]` is the token's id in the full vocabulary (the
        rows of the checkpoint's embedding to keep).

    Raises:
        FileNotFoundError: no file at `path` (`vocab in <path>: no such file`).
        ValueError: `path` is a directory, a line that is not UTF-8, a token on two
            lines, or a `startswith` token absent from the file; the message names
            file and line.

    Example:
        >>> token_dict, keep_tokens = load_vocab(
        ...     "checkpoints/chinese_L-12_H-768_A-12/vocab.txt", simplified=True,
        ...     startswith=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
        >>> len(token_dict), keep_tokens[:4]   # of 21128 tokens; the four given ones first
        (13584, [0, 100, 101, 102])
    """
    path = os.fspath(path)
    token_dict: dict[str, int] = {}
    line_of: dict[str, int] = {}
    with open_input(path, "vocab", "vocab.txt") as reader:
        for lineno, raw in enumerate(reader, 1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"vocab in {path}, line {lineno}: vocabulary files must be UTF-8, "
                    f"but byte {err.start} of the line is not ({err.reason})"
                ) from None
            # Google's loader strips surrounding whitespace and numbers lines from 0.
            token = line.strip()
            if token in line_of:
                raise ValueError(
                    f"vocab in {path}, line {lineno}: token {token!r} already appears on line "
                    f"{line_of[token]}; a token must have a single id"
                )
            line_of[token] = lineno
            token_dict[token] = lineno - 1
    if not simplified:
        return token_dict
    return simplify_vocab(token_dict, startswith, source=path)


def simplify_vocab(token_dict: Mapping[str, int], startswith: Sequence[str] | None = None,
                   source: str | os.PathLike[str] = "the vocabulary",
                   ) -> tuple[dict[str, int], list[int]]:
    """Keep `startswith` tokens first, then every non-redundant token in id order.

    Returns:
        `(new_token_dict, keep_tokens)` as `load_vocab(..., simplified=True)`.

    Raises:
        ValueError: a `startswith` token is not in `token_dict`.
    """
    new_dict: dict[str, int] = {}
    keep_tokens: list[int] = []
    for token in startswith or ():
        if token not in token_dict:
            raise ValueError(f"startswith token {token!r} is not in {source}")
        if token not in new_dict:
            new_dict[token] = len(new_dict)
            keep_tokens.append(token_dict[token])
    for token, i in sorted(token_dict.items(), key=lambda item: item[1]):
        if token not in new_dict and not is_redundant(token):
            new_dict[token] = len(new_dict)
            keep_tokens.append(i)
    return new_dict, keep_tokens


def check_vocab(token_dict: Mapping[Any, Any], source: str = "the given dict") -> None:
    """Validate a `{token: id}` dict for use by the tokenizer.

    Raises:
        TypeError: a key that is not a str or an id that is not an int.
        ValueError: a negative or repeated id, or missing [PAD]/[UNK]/[CLS]/[SEP].
    """
    seen: dict[int, str] = {}
    for token, i in token_dict.items():
        if not isinstance(token, str):
            raise TypeError(f"vocabulary keys must be str, got {token!r} in {source}")
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise ValueError(f"token {token!r} in {source} has id {i!r}; ids must be ints >= 0")
        if i in seen:
            raise ValueError(f"tokens {seen[i]!r} and {token!r} in {source} share id {i}")
        seen[i] = token
    missing = [t for t in REQUIRED_TOKENS if t not in token_dict]
    if missing:
        raise ValueError(
            f"vocab in {source}: lacks the special token(s) {', '.join(missing)}; "
            f"a BERT vocabulary needs all of {', '.join(REQUIRED_TOKENS)}"
        )
