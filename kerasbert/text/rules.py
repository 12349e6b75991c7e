"""What differs between Google's BERT tokenizer and bert4keras 0.11.5's, as data and small
functions: `Rules` names the choice and gives the engine its normalizer, pre-tokenizer and
unknown-word token, and `decode` its spacing. The engine that runs them is
`kerasbert.text.engine`.

Example:
    >>> rules = Rules("bert4keras", do_lower_case=False, max_word_chars=200)
    >>> rules.pre_tokenizer().pre_tokenize_str("语言 BERT!")
    [('语', (0, 1)), ('言', (1, 2)), ('BERT', (3, 7)), ('!', (7, 8))]
    >>> rules.join(["[CLS]", "语", "言", "BERT", "!", "it", "'", "s", "good"])
    "语言BERT! it's good"
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from tokenizers import Regex, normalizers, pre_tokenizers

from kerasbert import shipped
from kerasbert.text.vocab import is_cjk, is_control, is_punctuation, is_space, is_special

MAX_WORD_CHARS = 100  # Google's WordPiece gives [UNK] for any longer word
# Never a word: "\x00" is deleted before splitting. Under bert4keras's rules the engine answers
# it for a word WordPiece cannot split, which bert4keras keeps whole.
WHOLE_WORD = "\x00whole word"


@dataclass(frozen=True)
class Rules:
    """The rules a WordPiece engine follows: Google's or bert4keras 0.11.5's.

    Attributes:
        family: "google": Google's `BasicTokenizer` and `WordpieceTokenizer` (control,
            format, private-use and unassigned characters vanish, as Python's `unicodedata`
            classifies them; an unknown word is [UNK]). "bert4keras": lowercasing by
            `str.lower` before the engine (the caller's), only Cc and Cf characters vanish, an
            unknown word stays whole as its token; its own `decode` spacing.
        do_lower_case: lowercase and strip accents.
        max_word_chars: a longer word is not split (Google: 100, bert4keras: 200 by default).
    """

    family: Literal["google", "bert4keras"]
    do_lower_case: bool
    max_word_chars: int = MAX_WORD_CHARS

    @property
    def unknown(self) -> str:
        """The engine's token for a word WordPiece cannot split."""
        return "[UNK]" if self.family == "google" else WHOLE_WORD

    def normalizer(self) -> normalizers.Normalizer:
        """The engine's normalizer (bert4keras's lowercases before it)."""
        if self.family == "google":
            return google_normalizer(self.do_lower_case)
        deleted, spaces, _ = _classes("bert4keras")
        return normalizers.Sequence(
            [normalizers.Replace(deleted, ""), normalizers.Replace(spaces, " ")])

    def pre_tokenizer(self) -> pre_tokenizers.PreTokenizer:
        """The engine's pre-tokenizer: words split at spaces, punctuation and CJK alone."""
        if self.family == "google":
            return google_pre_tokenizer()
        return pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(" +"), behavior="removed"),
            pre_tokenizers.Split(_classes("bert4keras")[2], behavior="isolated")])

    def join(self, tokens: Sequence[str]) -> str:
        """`decode`'s text of `tokens`: special ones dropped, `##` pieces joined, spaced."""
        words = [t for t in tokens if not is_special(t)]
        return (_google_text if self.family == "google" else _bert4keras_text)(words)


# -- character classes ---------------------------------------------------------------------

# Python lowercases a word-final capital sigma to "ς" (Unicode Final_Sigma), as
# Google's tokenizer does through str.lower(); the engine lowercases letter by letter.
_FINAL_SIGMA = Regex(r"(?<=\p{Cased}\p{Case_Ignorable}*)Σ(?!\p{Case_Ignorable}*\p{Cased})")


def _ranges(codepoints: Iterable[int]) -> np.ndarray:
    """``[[first, last], ...]`` (int32): the sorted ``codepoints`` as inclusive ranges."""
    ranges: list[list[int]] = []
    for cp in codepoints:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return np.array(ranges, np.int32).reshape(-1, 2)


def _char_class(ranges: np.ndarray) -> Regex:
    """An engine regex matching the code points of ``ranges`` (from :func:`_ranges`)."""
    return Regex("[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges) + "]")


#: The classes' names, in the order :func:`_classes` returns them.
GOOGLE_CLASSES = ("dropped", "marks", "punctuation")
BERT4KERAS_CLASSES = ("deleted", "spaces", "alone")


def google_class_ranges() -> dict[str, np.ndarray]:
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


def bert4keras_class_ranges() -> dict[str, np.ndarray]:
    """``{class: ranges}`` of :data:`BERT4KERAS_CLASSES` from this Python's ``unicodedata``:
    deleted (controls, U+0000, U+FFFD), spaces, and split off alone (punctuation and CJK
    ideographs). ~0.5 s; shipped for the Unicode version the tests run on."""
    deleted, spaces, alone = [], [], []
    for cp in range(0x110000):
        ch = chr(cp)
        if is_punctuation(ch) or is_cjk(ch):
            alone.append(cp)
        elif is_space(ch):
            spaces.append(cp)
        elif cp in (0, 0xFFFD) or is_control(ch):
            deleted.append(cp)
        elif ch.isspace():  # U+2028, U+2029: bert4keras's str.split() splits there too
            spaces.append(cp)
    return dict(zip(BERT4KERAS_CLASSES, map(_ranges, (deleted, spaces, alone))))


def google_classes_key() -> str:
    """What the class tables depend on: Python's Unicode version."""
    return f"Unicode {unicodedata.unidata_version}"


@functools.cache
def _classes(family: str) -> tuple[Regex, ...]:
    """The family's character classes, from this Python's `unicodedata`, as engine regexes
    (the shipped table where it was made on this Unicode version).

    The engine's own Unicode tables differ from Python's (some newer, some older):
    alone it would keep unassigned code points and recent format characters as
    [UNK], keep recent combining marks, and disagree on some punctuation. Google's
    and bert4keras's code classify with `unicodedata`, so that is what decides here too.

    Returns:
        regexes of `GOOGLE_CLASSES` or `BERT4KERAS_CLASSES`; built once per process.
    """
    names, make = ((GOOGLE_CLASSES, google_class_ranges) if family == "google"
                   else (BERT4KERAS_CLASSES, bert4keras_class_ranges))
    ranges = shipped.precomputed(f"{family}_classes", google_classes_key(), make)
    return tuple(_char_class(ranges[name]) for name in names)


def google_normalizer(do_lower_case: bool) -> normalizers.Normalizer:
    """Engine normalizer: Google's text cleaning, CJK spacing, lowercasing, accent stripping."""
    dropped, marks, _ = _classes("google")
    steps: list[normalizers.Normalizer] = [normalizers.Replace(dropped, "")]
    if do_lower_case:
        # Google lowercases before NFD and dropping marks; the other order gives the same
        # text (checked for every code point) and leaves one pass for BertNormalizer.
        steps += [normalizers.Replace(_FINAL_SIGMA, "ς"), normalizers.NFD(),
                  normalizers.Replace(marks, "")]
    steps.append(normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=do_lower_case))
    return normalizers.Sequence(steps)


def google_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """Engine pre-tokenizer splitting on whitespace and isolating each punctuation mark."""
    return pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(_classes("google")[2], behavior="isolated")])


# -- decode's spacing -----------------------------------------------------------------------

# Google's rules: no space after openers ("(a", "$5"), none around joiners ("state-of-the-art").
_OPENERS = set("([{<“‘«《〈「『【〔（［｛＜$#£€¥")
_JOINERS = set("-/+=@_~^\\")
_CONTRACTIONS = {"s", "t", "m", "d", "re", "ve", "ll"}
# bert4keras's: no space after these, nor in "it ' s", "2. 5".
CJK_PUNCTUATION = ("＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､"
                   "\u3000、〃〈〉《》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏﹑﹔·！？｡。")
_GLUED_AFTER = re.compile("(%s) " % "|".join(map(re.escape, CJK_PUNCTUATION + "+-/={(<[")))
_CONTRACTION = re.compile("' (re|m|s|t|ve|d|ll) ")
_DECIMAL = re.compile(r"(\d\.) (\d)")


def _google_text(tokens: Sequence[str]) -> str:
    """`tokens` (none special) as prose: `##` pieces joined, spaces where prose has them."""
    text, prev, quotes = "", "", 0
    for token in tokens:
        suffix = token.startswith("##") and len(token) > 2
        piece = token[2:] if suffix else token
        if text and not (suffix or _glued(text, prev, piece, quotes % 2)):
            text += " "
        text += piece
        quotes += piece == '"'
        prev = piece
    return text


def _glued(text: str, prev: str, piece: str, in_quote: int) -> bool:
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


def _bert4keras_text(tokens: Sequence[str]) -> str:
    """`tokens` (none special) joined as bert4keras's `decode` joins them."""
    text = ""
    for token in tokens:
        if token[:2] == "##":
            text += token[2:]
        elif len(token) == 1 and is_cjk(token):
            text += token
        elif len(token) == 1 and is_punctuation(token):
            text += token + " "
        elif text and is_cjk(text[-1]):
            text += token
        else:
            text += " " + token
    text = re.sub(" +", " ", text)
    text = _CONTRACTION.sub(r"'\1 ", text)
    text = _GLUED_AFTER.sub(r"\1", text)
    return _DECIMAL.sub(r"\1\2", text).strip()
