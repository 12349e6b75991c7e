"""BERT vocabularies and Google's character classes.

Reads, checks and shrinks `vocab.txt`, and gives the `tokenizers` engine the
normalizer and pre-tokenizer that split text into words exactly as Google's
`BasicTokenizer` does.

Example:
    >>> token_dict = load_vocab("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
    >>> token_dict["[CLS]"]
    101
"""

from __future__ import annotations

import functools
import os
import unicodedata
from collections.abc import Sequence
from typing import Literal, overload

import numpy as np
from tokenizers import Regex, normalizers, pre_tokenizers

from kerasbert import shipped
from kerasbert.files import open_input

#: Tokens every BERT vocabulary must hold; [MASK] is only needed for pre-training.
REQUIRED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")

# Google's "Chinese character" blocks: each such character is a word of its own.
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_cjk(ch):
    """True if `ch` is in Google's CJK ideograph blocks (split off as its own word)."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def is_punctuation(ch):
    """True for BERT punctuation: any Unicode P* character plus all ASCII symbols."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_special(token):
    """True for bracketed tokens such as [CLS], [SEP], [UNK] or [unused1]."""
    return len(token) > 1 and token[0] == "[" and token[-1] == "]"


def stem(token):
    """The text a token stands for: `##ing` -> `ing`."""
    return token[2:] if token.startswith("##") else token


def is_redundant(token):
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


def simplify_vocab(token_dict, startswith=None, source="the vocabulary"):
    """Keep `startswith` tokens first, then every non-redundant token in id order.

    Returns:
        `(new_token_dict, keep_tokens)` as `load_vocab(..., simplified=True)`.

    Raises:
        ValueError: a `startswith` token is not in `token_dict`.
    """
    new_dict, keep_tokens = {}, []
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


def check_vocab(token_dict, source="the given dict"):
    """Validate a `{token: id}` dict for use by the tokenizer.

    Raises:
        TypeError: a key that is not a str or an id that is not an int.
        ValueError: a negative or repeated id, or missing [PAD]/[UNK]/[CLS]/[SEP].
    """
    seen = {}
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


# Python lowercases a word-final capital sigma to "ς" (Unicode Final_Sigma), as
# Google's tokenizer does through str.lower(); the engine lowercases letter by letter.
_FINAL_SIGMA = Regex(r"(?<=\p{Cased}\p{Case_Ignorable}*)Σ(?!\p{Case_Ignorable}*\p{Cased})")


def _ranges(codepoints):
    """``[[first, last], ...]`` (int32): the sorted ``codepoints`` as inclusive ranges."""
    ranges = []
    for cp in codepoints:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return np.array(ranges, np.int32).reshape(-1, 2)


def _char_class(ranges):
    """An engine regex matching the code points of ``ranges`` (from :func:`_ranges`)."""
    return Regex("[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges) + "]")


#: The classes' names, in the order :func:`_google_classes` returns them.
GOOGLE_CLASSES = ("dropped", "marks", "punctuation")


def google_class_ranges():
    """``{class: ranges}`` of :data:`GOOGLE_CLASSES`, from this Python's ``unicodedata``
    (~0.4 s; shipped for the Unicode version of the Python the tests run on)."""
    dropped, marks, punctuation = [], [], []
    for cp, cat in enumerate(map(unicodedata.category, map(chr, range(0x110000)))):
        if cat[0] == "C" and cp not in (9, 10, 13) or cp == 0xFFFD:
            dropped.append(cp)
        elif cat == "Mn":
            marks.append(cp)
        elif cat[0] == "P" or 33 <= cp <= 126 and not chr(cp).isalnum():
            punctuation.append(cp)
        elif 0x2B820 <= cp <= 0x2B91F:
            # Google's CJK Ext. E block starts at U+2B820, the engine's at U+2B920;
            # a CJK character stands alone, exactly like punctuation.
            punctuation.append(cp)
    return dict(zip(GOOGLE_CLASSES, map(_ranges, (dropped, marks, punctuation))))


def google_classes_key():
    """What :func:`google_class_ranges` depends on: Python's Unicode version."""
    return f"Unicode {unicodedata.unidata_version}"


@functools.cache
def _google_classes():
    """Google's character classes, from this Python's `unicodedata`, as engine regexes.

    The engine's own Unicode tables differ from Python's (some newer, some older):
    alone it would keep unassigned code points and recent format characters as
    [UNK], keep recent combining marks, and disagree on some punctuation. Google's
    code classifies with `unicodedata`, so that is what decides here too.

    Returns:
        `(dropped, marks, punctuation)` regexes; built once per process.
    """
    ranges = shipped.precomputed("google_classes", google_classes_key(), google_class_ranges)
    return tuple(_char_class(ranges[name]) for name in GOOGLE_CLASSES)


def google_normalizer(do_lower_case):
    """Engine normalizer: Google's text cleaning, CJK spacing, lowercasing, accent stripping."""
    dropped, marks, _ = _google_classes()
    steps = [normalizers.Replace(dropped, "")]
    if do_lower_case:
        # Google lowercases before NFD and dropping marks; the other order gives the same
        # text (checked for every code point) and leaves one pass for BertNormalizer.
        steps += [normalizers.Replace(_FINAL_SIGMA, "ς"), normalizers.NFD(),
                  normalizers.Replace(marks, "")]
    steps.append(normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=do_lower_case))
    return normalizers.Sequence(steps)


def google_pre_tokenizer():
    """Engine pre-tokenizer splitting on whitespace and isolating each punctuation mark."""
    return pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(_google_classes()[2], behavior="isolated")])
