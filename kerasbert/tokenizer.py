"""BERT tokenizer with the bert4keras interface, run by Hugging Face `tokenizers`.

The engine is a `tokenizers` WordPiece model behind the BERT normalizer and
pre-tokenizer, which reproduces Google's `FullTokenizer`; this module adds the
bert4keras methods (`encode`, `decode`, `rematch`, ...) and numpy batches.

Example:
    >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
    >>> tokenizer.encode("语言模型")
    ([101, 6427, 6241, 3563, 1798, 102], [0, 0, 0, 0, 0, 0])
"""

import functools
import os
import unicodedata

import numpy as np
from tokenizers import Regex
from tokenizers import Tokenizer as _Engine
from tokenizers import models, normalizers, pre_tokenizers, processors

from kerasbert.vocab import check_vocab, is_cjk, is_punctuation, is_special, load_vocab

__all__ = ["Tokenizer", "load_vocab"]

# Google's WordPiece gives [UNK] for any word longer than this.
MAX_WORD_CHARS = 100

# Special tokens each pattern adds around (first, second); a pair must keep them all.
_PATTERNS = {
    "S*E*E": ("[CLS] $A [SEP] $B:1 [SEP]:1", 3),
    "S*ES*E": ("[CLS] $A [SEP] [CLS]:1 $B:1 [SEP]:1", 4),
}
_TRUNCATE_FROM = ("right", "left")
# decode: no space after opening brackets, none around joiners ("state-of-the-art").
_OPENERS = set("([{<“‘«《〈「『【〔（［｛＜")
_JOINERS = set("-/+=@_~^\\")
_CONTRACTIONS = {"s", "t", "m", "d", "re", "ve", "ll"}
# Python lowercases a word-final capital sigma to "ς" (Unicode Final_Sigma), as
# Google's tokenizer does through str.lower(); the engine lowercases letter by letter.
_FINAL_SIGMA = Regex(
    r"(?<=\p{Cased}|\p{Cased}\p{Case_Ignorable}|\p{Cased}\p{Case_Ignorable}{2})"
    r"Σ(?!\p{Case_Ignorable}*\p{Cased})")


def _char_class(codepoints):
    """A regex class for a sorted list of code points, written as ranges."""
    ranges = []
    for cp in codepoints:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return Regex("[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges) + "]")


@functools.cache
def _unicode_classes():
    """Google's character classes, from this Python's `unicodedata`, as engine regexes.

    The engine's own tables differ from Python's (some newer, some older): it would
    keep unassigned code points and recent format characters as [UNK], keep recent
    combining marks, and disagree on what is punctuation. Matching Python's tables
    is what makes the ids Google's. Returns `(dropped, marks, punctuation)`; built
    once per process (about 0.5 s).
    """
    dropped, marks, punctuation = [], [], []
    for cp, cat in enumerate(map(unicodedata.category, map(chr, range(0x110000)))):
        if cat[0] == "C" and cp not in (9, 10, 13) or cp == 0xFFFD:
            dropped.append(cp)
        elif cat == "Mn":
            marks.append(cp)
        elif cat[0] == "P" or 33 <= cp <= 126 and not chr(cp).isalnum():
            punctuation.append(cp)
        elif 0x2B820 <= cp <= 0x2B91F:
            # Google splits CJK Ext. E from U+2B820; the engine's block starts at
            # U+2B920. Each CJK character is a word of its own, like punctuation.
            punctuation.append(cp)
    return _char_class(dropped), _char_class(marks), _char_class(punctuation)


class Tokenizer:
    """BERT WordPiece tokenizer with bert4keras's methods and Google's ids.

    Args:
        vocab: path of a `vocab.txt`, or a `{token: id}` dict (e.g. from
            `load_vocab(..., simplified=True)`).
        do_lower_case: lowercase and strip accents (True for uncased and Chinese
            checkpoints, False for cased ones).

    Raises:
        ValueError: the vocabulary lacks [PAD], [UNK], [CLS] or [SEP], or the file is bad.
        TypeError: `vocab` is neither a path nor a dict.

    Example:
        >>> tokenizer = Tokenizer({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hi": 4})
        >>> tokenizer.tokenize("Hi!")
        ['[CLS]', 'hi', '[UNK]', '[SEP]']
    """

    def __init__(self, vocab, do_lower_case=True):
        if isinstance(vocab, (str, os.PathLike)):
            source = os.fspath(vocab)
            token_dict = load_vocab(source)
        elif isinstance(vocab, dict):
            source, token_dict = "the given vocabulary dict", dict(vocab)
        else:
            raise TypeError(f"vocab must be a vocab.txt path or a dict, got {type(vocab).__name__}")
        check_vocab(token_dict, source)
        self._token_dict = token_dict
        self._id_to_token = {i: t for t, i in token_dict.items()}
        self._do_lower_case = bool(do_lower_case)
        self._unk_id = token_dict["[UNK]"]
        self._pad_id = token_dict["[PAD]"]
        self._frame = {"[CLS]", "[SEP]", "[PAD]", "[MASK]"}
        self._engines = {}
        self._engine = self._engine_for(None, "right", "S*E*E", False)

    @property
    def vocab_size(self):
        """Number of tokens in the vocabulary."""
        return len(self._token_dict)

    @property
    def token_dict(self):
        """A copy of the `{token: id}` vocabulary."""
        return dict(self._token_dict)

    def _engine_for(self, maxlen, truncate_from, pattern, pad_to_maxlen):
        """An engine set up for one truncation/padding choice, built once and reused.

        Engines are never reconfigured after creation, so concurrent calls with
        different settings cannot disturb each other.
        """
        key = (maxlen, truncate_from, pattern, pad_to_maxlen)
        engine = self._engines.get(key)
        if engine is not None:
            return engine
        engine = _Engine(models.WordPiece(
            self._token_dict, unk_token="[UNK]", max_input_chars_per_word=MAX_WORD_CHARS))
        dropped, marks, punctuation = _unicode_classes()
        steps = [normalizers.Replace(dropped, "")]
        if self._do_lower_case:
            # Google: lowercase, NFD, drop combining marks (strip accents).
            steps += [normalizers.Replace(_FINAL_SIGMA, "ς"), normalizers.NFD(),
                      normalizers.Replace(marks, "")]
        steps.append(normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=False,
            lowercase=self._do_lower_case))
        engine.normalizer = normalizers.Sequence(steps)
        engine.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Split(punctuation, behavior="isolated")])
        cls_id, sep_id = self._token_dict["[CLS]"], self._token_dict["[SEP]"]
        engine.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair=_PATTERNS[pattern][0],
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
        if maxlen is not None:
            # longest_first trims the longer text one token at a time, as Google's
            # _truncate_seq_pair does (on a tie the first text keeps one more).
            engine.enable_truncation(maxlen, strategy="longest_first", direction=truncate_from)
        if pad_to_maxlen:
            engine.enable_padding(pad_id=self._pad_id, pad_token="[PAD]", length=maxlen)
        elif pad_to_maxlen is None:
            engine.enable_padding(pad_id=self._pad_id, pad_token="[PAD]")
        if len(self._engines) >= 32:
            self._engines.clear()
        self._engines[key] = engine
        return engine

    def _checked(self, maxlen, pattern, truncate_from, pair):
        if pattern not in _PATTERNS:
            raise ValueError(f"pattern={pattern!r} is not supported; use one of {list(_PATTERNS)}")
        if truncate_from not in _TRUNCATE_FROM:
            raise ValueError(f"truncate_from={truncate_from!r} must be 'right' or 'left'")
        if maxlen is None:
            return
        least = _PATTERNS[pattern][1] if pair else 2
        if isinstance(maxlen, bool) or not isinstance(maxlen, (int, np.integer)) or maxlen < least:
            what = f"a pair with pattern {pattern!r}" if pair else "a single text"
            raise ValueError(
                f"maxlen={maxlen!r} is too small: {what} needs maxlen >= {least} "
                f"to hold its [CLS]/[SEP] tokens")

    @staticmethod
    def _check_text(text, name):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, got {type(text).__name__}: {text!r:.60}")

    def tokenize(self, text, maxlen=None):
        """Split `text` into WordPiece tokens framed by [CLS] and [SEP].

        Args:
            text: the text. maxlen: keep at most this many tokens (cut before [SEP]).

        Returns:
            list of str, e.g. `['[CLS]', '语', '言', '[SEP]']`; unknown words are `[UNK]`.
        """
        self._check_text(text, "text")
        self._checked(maxlen, "S*E*E", "right", False)
        return self._engine_for(maxlen, "right", "S*E*E", False).encode(text).tokens

    def encode(self, first_text, second_text=None, maxlen=None, pattern="S*E*E",
               truncate_from="right"):
        """Token ids and segment ids of one text or a text pair, unpadded.

        Args:
            first_text: the text (segment 0). second_text: optional second text (segment 1).
            maxlen: total length limit, special tokens included; a pair is cut
                longest-first.
            pattern: "S*E*E" gives `[CLS] a [SEP] b [SEP]`; "S*ES*E" gives
                `[CLS] a [SEP] [CLS] b [SEP]`.
            truncate_from: "right" drops the last tokens, "left" the first ones.

        Returns:
            `(token_ids, segment_ids)`, two lists of ints of equal length.

        Raises:
            ValueError: `maxlen` too small to hold the special tokens, or an
                unknown `pattern` / `truncate_from`.

        Example:
            >>> tokenizer.encode("语言", "模型")
            ([101, 6427, 6241, 102, 3563, 1798, 102], [0, 0, 0, 0, 1, 1, 1])
        """
        pair = second_text is not None
        self._check_text(first_text, "first_text")
        if pair:
            self._check_text(second_text, "second_text")
        self._checked(maxlen, pattern, truncate_from, pair)
        engine = self._engine_for(maxlen, truncate_from, pattern, False)
        encoding = engine.encode(first_text, second_text)
        return encoding.ids, encoding.type_ids

    def encode_batch(self, texts, pairs=None, maxlen=None, pattern="S*E*E",
                     truncate_from="right", pad_to_maxlen=False):
        """Encode many texts at once (in parallel Rust threads) into padded arrays.

        Args:
            texts: sequence of str. pairs: optional sequence of second texts.
            maxlen, pattern, truncate_from: as in `encode`.
            pad_to_maxlen: pad every row to `maxlen` instead of to the longest row.

        Returns:
            `(token_ids, segment_ids)`, int32 arrays of shape `(len(texts), length)`,
            padded with the [PAD] id and segment 0.

        Example:
            >>> ids, segments = tokenizer.encode_batch(["语言模型", "好"], maxlen=128)
            >>> ids.shape
            (2, 6)
        """
        texts = list(texts)
        if pairs is not None:
            pairs = list(pairs)
            if len(pairs) != len(texts):
                raise ValueError(f"got {len(texts)} texts but {len(pairs)} pairs; "
                                 "pairs needs one second text per text")
        for name, seq in (("texts", texts), ("pairs", pairs or ())):
            bad = next((i for i, t in enumerate(seq) if not isinstance(t, str)), None)
            if bad is not None:
                raise TypeError(f"{name}[{bad}] must be a str, got {type(seq[bad]).__name__}")
        self._checked(maxlen, pattern, truncate_from, pairs is not None)
        if pad_to_maxlen and maxlen is None:
            raise ValueError("pad_to_maxlen=True needs a maxlen to pad to")
        width = maxlen if pad_to_maxlen else 0
        if not texts:
            empty = np.zeros((0, width), dtype=np.int32)
            return empty, empty.copy()
        engine = self._engine_for(maxlen, truncate_from, pattern, True if pad_to_maxlen else None)
        batch = texts if pairs is None else list(zip(texts, pairs))
        # encode_batch_fast skips offset tracking, which batches never need.
        encodings = engine.encode_batch_fast(batch)
        token_ids = np.array([e.ids for e in encodings], dtype=np.int32)
        segment_ids = np.array([e.type_ids for e in encodings], dtype=np.int32)
        return token_ids, segment_ids

    def token_to_id(self, token):
        """Id of `token`, or the [UNK] id if it is not in the vocabulary."""
        return self._token_dict.get(token, self._unk_id)

    def tokens_to_ids(self, tokens):
        """`token_to_id` over a list."""
        return [self._token_dict.get(t, self._unk_id) for t in tokens]

    def id_to_token(self, i):
        """Token of id `i`.

        Raises:
            KeyError: `i` is not an id of the vocabulary.
        """
        try:
            return self._id_to_token[int(i)]
        except KeyError:
            raise KeyError(f"id {i!r} is not in the vocabulary "
                           f"({len(self._token_dict)} tokens)") from None

    def ids_to_tokens(self, ids):
        """`id_to_token` over a list."""
        return [self.id_to_token(i) for i in ids]

    def decode(self, ids):
        """Readable text from ids: special tokens dropped, `##` pieces joined.

        CJK characters are written without spaces; other words are separated by
        one space, with punctuation attached as in ordinary prose. Lowercasing
        and accent stripping are not undone.

        Example:
            >>> tokenizer.decode(tokenizer.encode("语言模型 BERT, 2.5 倍")[0])
            '语言模型bert, 2.5倍'
        """
        tokens = [t for t in self.ids_to_tokens(ids) if not is_special(t)]
        text, prev = "", ""
        for token in tokens:
            suffix = token.startswith("##") and len(token) > 2
            piece = token[2:] if suffix else token
            if text and not (suffix or self._joins(text, prev, piece)):
                text += " "
            text += piece
            prev = token
        return text

    @staticmethod
    def _joins(text, prev, piece):
        """Whether `piece` is written right after `text` (prev: the previous token)."""
        last = text[-1]
        if is_cjk(last) or is_cjk(piece[0]) or last in _OPENERS or last in _JOINERS:
            return True
        if len(piece) == 1 and is_punctuation(piece) and piece not in _OPENERS:
            return True
        if is_punctuation(last) and not last.isascii():
            return True  # full-width punctuation carries its own spacing
        if prev == "'" and piece in _CONTRACTIONS:
            return True
        # "2 . 5" was the number 2.5
        return prev == "." and piece[0].isdigit() and len(text) > 1 and text[-2].isdigit()

    def rematch(self, text, tokens):
        """Character positions in `text` of each token, e.g. for span extraction.

        Args:
            text: the original text. tokens: its tokens, as `tokenize(text)` gave them.

        Returns:
            one list of character indices per token; [CLS], [SEP], [PAD] and
            [MASK] map to `[]`, an [UNK] to the word it replaced.

        Raises:
            ValueError: a token that does not occur (in order) in `text`.

        Example:
            >>> tokenizer.rematch("BERT模型", ['[CLS]', 'be', '##rt', '模', '型', '[SEP]'])
            [[], [0, 1], [2, 3], [4], [5], []]
        """
        self._check_text(text, "text")
        encoding = self._engine.encode(text, add_special_tokens=False)
        pieces = list(zip(encoding.tokens, encoding.offsets))
        mapping, start = [], 0
        for n, token in enumerate(tokens):
            if token in self._frame:
                mapping.append([])
                continue
            k = next((k for k in range(start, len(pieces)) if pieces[k][0] == token), None)
            if k is not None:
                begin, end = pieces[k][1]
                mapping.append(list(range(begin, end)))
                start = k + 1
            elif is_special(token):
                mapping.append([])
            else:
                after = pieces[start - 1][1][1] if start else 0
                raise ValueError(
                    f"tokens[{n}]={token!r} does not occur in the text after character "
                    f"{after}; rematch needs the tokens that tokenize(text) returned")
        return mapping
