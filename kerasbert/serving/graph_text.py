"""Google's BERT tokenizer as TensorFlow ops: raw strings to WordPiece ids and offsets.

A served model takes text and gives what :class:`kerasbert.text.tokenizer.Tokenizer` gives:
the same ids, and each token's characters in the text. Google's text cleaning (drop
controls, lowercase, NFD, strip accents, split CJK characters and punctuation) is a
per-character table read off the Tokenizer's own normalizer and pre-tokenizer (shipped
for the pinned versions, made at export on others), so the served model splits text as
the training did, whatever Unicode version TensorFlow's string ops know;
``tensorflow_text``'s WordPiece op then reads the vocabulary file, an asset of the
SavedModel.

Example::

    # the character tables are shipped (kerasbert/resources/precomputed/)
    encode = TextEncoder("checkpoints/chinese_L-12_H-768_A-12/vocab.txt", maxlen=128)
    token_ids, segment_ids = encode(tf.constant(["语言模型"]))
    token_ids.numpy()   # array([[ 101, 6427, 6241, 3563, 1798,  102]], dtype=int32)
"""

import dataclasses
import functools
import os
import shutil
import tempfile
import unicodedata
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from kerasbert import shipped
from kerasbert.text.padding import longest_first
from kerasbert.text.rules import MAX_WORD_CHARS, google_normalizer, google_pre_tokenizer
from kerasbert.text.vocab import load_vocab

_CODE_POINTS = 0x110000
_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C2  # Σ, and ς that the Tokenizer writes at a word's end
# What normalization does to a code point (bits 0-1 of its table entry): _DROP is the
# normalizer's first step (controls), before anything else looks at the text.
_DROP, _KEEP, _MAP = 0, 1, 2
# How words are split at a normalized character (bits 2-3).
_JOIN, _ALONE, _SPACE = 0, 1, 2
# What a code point is to the final-sigma rule, looking for a cased letter (bits 4-5).
_BLOCK, _SKIP, _CASED = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class CharacterTables:
    """The Tokenizer's text cleaning as arrays, one entry per run of equal code points.

    ``info[i]`` holds the three classes above for code points ``starts[i]`` up to
    ``starts[i + 1]``; a code point of kind ``_MAP`` becomes
    ``values[splits[k]:splits[k + 1]]`` where ``mapped[k]`` is the code point.
    """

    starts: np.ndarray
    info: np.ndarray
    mapped: np.ndarray
    splits: np.ndarray
    values: np.ndarray


def tables_key(do_lower_case: bool) -> str:
    """What the tables depend on: the Tokenizer's engine (``tokenizers``, whose normalizer
    holds its own Unicode tables), Python's Unicode version (the controls dropped) and the
    casing."""
    import tokenizers

    return (f"tokenizers {tokenizers.__version__}, Unicode {unicodedata.unidata_version}, "
            f"do_lower_case {bool(do_lower_case)}")


def tables_name(do_lower_case: bool) -> str:
    """The name of the shipped tables (:func:`kerasbert.shipped.precomputed`)."""
    return "character_tables_" + ("lower" if do_lower_case else "cased")


@functools.cache
def character_tables(do_lower_case: bool = True) -> CharacterTables:
    """What :class:`~kerasbert.text.tokenizer.Tokenizer` does to each code point, as tables:
    the shipped ones where they were made on the installed versions, else
    :func:`make_character_tables` (~3 s, once per process)."""
    arrays = shipped.precomputed(
        tables_name(do_lower_case), tables_key(do_lower_case),
        lambda: dataclasses.asdict(make_character_tables(do_lower_case)))
    return CharacterTables(**arrays)


def make_character_tables(do_lower_case: bool = True) -> CharacterTables:
    """The tables of :func:`character_tables`, made from the installed Tokenizer.

    Each character is passed through the Tokenizer's normalizer alone, and its
    normalized characters through the pre-tokenizer, so the tables hold the
    Tokenizer's rules, not a second implementation of Google's. Takes ~3 s.
    """
    normalizer, pre_tokenizer = google_normalizer(do_lower_case), google_pre_tokenizer()
    # The normalizer's first step deletes these (Google's controls, U+FFFD): no need to ask.
    chars = [chr(cp) for cp in range(_CODE_POINTS)
             if not (unicodedata.category(chr(cp))[0] == "C" and chr(cp) not in "\t\n\r"
                     or cp == 0xFFFD)]
    normalized = {ch: normalizer.normalize_str(ch) for ch in chars}
    seen = sorted(set(chars).union(*map(set, normalized.values())))
    split = dict(zip(seen, _split_classes(seen, pre_tokenizer)))
    for ch in seen:
        alone = normalized[ch] if ch in normalized else normalizer.normalize_str(ch)
        if alone == f" {ch} ":  # CJK: the normalizer spaces it apart
            split[ch] = _ALONE
    info = np.full(_CODE_POINTS, _DROP, np.int32)
    for ch in seen:
        info[ord(ch)] = split[ch] << 2
    mapped, expansions = [], []
    for ch in chars:
        canonical = _canonical(normalized[ch], split)
        # A mark that normalizes to nothing is _MAP to nothing, not _DROP: unlike controls,
        # it is still there for the final-sigma rule.
        kind = _KEEP if canonical == ch else _MAP
        info[ord(ch)] = info[ord(ch)] & ~3 | kind
        if kind == _MAP:
            mapped.append(ord(ch))
            expansions.append([ord(c) for c in canonical])
    if do_lower_case:
        for ch in chars:
            info[ord(ch)] |= _sigma_class(normalizer, ch) << 4
    starts = np.flatnonzero(np.diff(info, prepend=-1))
    splits = np.cumsum([0] + [len(e) for e in expansions])
    return CharacterTables(starts.astype(np.int32), info[starts], np.array(mapped, np.int32),
                           splits.astype(np.int64),
                           np.array([c for e in expansions for c in e], np.int32))


def _split_classes(chars: Sequence[str], pre_tokenizer: Any) -> list[int]:
    """``_JOIN``, ``_ALONE`` or ``_SPACE`` of each character, asked of the pre-tokenizer
    at once: ``x<ch>x`` stays one word, becomes three, or two."""
    pieces = pre_tokenizer.pre_tokenize_str("".join(f"x{ch}x " for ch in chars))
    counts = np.bincount([start // 4 for _, (start, _) in pieces], minlength=len(chars))
    if counts.max() > 3:
        raise RuntimeError("the pre-tokenizer split a single character into several words")
    return [(_JOIN, _JOIN, _SPACE, _ALONE)[n] for n in counts]


def _canonical(text: str, split: dict[str, int]) -> str:
    """``text`` without the spaces that change no word (beside a character that stands
    alone, or repeated), so that a CJK character, spaced apart by the normalizer, maps to
    itself."""
    out: list[str] = []
    for ch in text:
        if split[ch] == _SPACE and out and split[out[-1]] in (_SPACE, _ALONE):
            continue
        if split[ch] == _ALONE and out and split[out[-1]] == _SPACE:
            out.pop()
        out.append(ch)
    return "".join(out)


def _sigma_class(normalizer: Any, ch: str) -> int:
    """Whether the Tokenizer's final-sigma rule, looking past ``ch`` for a cased letter,
    finds one (``_CASED``), looks further (``_SKIP``) or stops (``_BLOCK``)."""
    if normalizer.normalize_str(ch + "Σ")[-1] == "ς":
        return _CASED
    return _SKIP if normalizer.normalize_str("A" + ch + "Σ")[-1] == "ς" else _BLOCK


def same_count(first: Any, second: Any, first_name: str, second_name: str) -> tuple[Any, Any]:
    """``first`` and ``second`` (string ``[batch]``) once they are checked to hold as many
    texts: a served pair of unequal inputs fails with ``InvalidArgumentError`` naming both
    inputs, instead of pairing one text with every other one (broadcasting) or reading
    past the shorter input."""
    check = tf.debugging.assert_equal(
        tf.shape(first)[0], tf.shape(second)[0],
        message=f"{first_name} and {second_name} must hold as many texts: the texts of a pair "
                "are at the same place in each")
    with tf.control_dependencies([check]):
        return tf.identity(first), tf.identity(second)


class TextEncoder(tf.Module):
    """The Tokenizer's ``encode_batch`` in TensorFlow ops: raw strings to model inputs.

    Args:
        vocab: a ``vocab.txt``; becomes the asset of the WordPiece lookup table.
        maxlen: at most this many tokens per row, [CLS] and [SEP] included; a pair
            loses tokens from its longer text first, as in ``Tokenizer.encode``.
        do_lower_case: as the Tokenizer's.

    Example::

        # the character tables are shipped (kerasbert/resources/precomputed/)
        encode = TextEncoder("checkpoints/chinese_L-12_H-768_A-12/vocab.txt", maxlen=128)
        token_ids, segment_ids = encode(tf.constant(["语言模型"]))
        token_ids.numpy()   # array([[ 101, 6427, 6241, 3563, 1798,  102]], dtype=int32)
    """

    def __init__(self, vocab: str | os.PathLike[str], maxlen: int,
                 do_lower_case: bool = True) -> None:
        import tensorflow_text  # registers its ops; loads in ~1 s, so only when needed

        super().__init__(name="text_encoder")
        token_dict = load_vocab(vocab)
        self.maxlen = int(maxlen)
        self.cls_id, self.sep_id = token_dict["[CLS]"], token_dict["[SEP]"]
        self._pad = token_dict["[PAD]"]
        self._lower = do_lower_case
        tables = character_tables(do_lower_case)
        self._starts, self._info = tf.constant(tables.starts), tf.constant(tables.info)
        # One value more, so that the gather that other code points do too stays in range.
        self._mapped = tf.constant(tables.mapped)
        self._values = tf.constant(np.append(tables.values, 0).astype(np.int32))
        self._splits = tf.constant(tables.splits)
        self.vocab_file = _plain_vocab(vocab, token_dict, self)
        table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(self.vocab_file, tf.string,
                                          tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                          tf.lookup.TextFileIndex.LINE_NUMBER),
            default_value=-1)
        # Words are at most MAX_WORD_CHARS characters here (longer ones are [UNK] already).
        self.wordpiece = tensorflow_text.WordpieceTokenizer(
            table, suffix_indicator="##", max_bytes_per_word=4 * MAX_WORD_CHARS,
            token_out_type=tf.int64, unknown_token="[UNK]")

    def __call__(self, text: Any, pair: Any = None) -> tuple[Any, Any]:
        """``(token_ids, segment_ids)``: int32 ``[batch, longest row]``, padded with [PAD]
        (``pair``: as many second texts as ``text`` holds, :func:`same_count`)."""
        if pair is None:
            return self.inputs(self.token_ids(text))
        text, pair = same_count(text, pair, "text", "pair")
        return self.inputs(self.token_ids(text), self.token_ids(pair))

    def inputs(self, first: Any, second: Any = None) -> tuple[Any, Any]:
        """The model's inputs from each text's token ids (ragged, as :meth:`token_ids` or
        :meth:`pieces` give them), cut to ``maxlen`` as ``Tokenizer.encode`` cuts them:
        :meth:`rows`, padded."""
        # At least [CLS] [SEP] wide, so that an empty batch still has a [CLS] column.
        return self.padded(*self.rows(first, second), 2)

    def rows(self, first: Any, second: Any = None) -> tuple[Any, Any]:
        """Ragged ``(token_ids, segment_ids)``: ``[CLS] first [SEP]`` (``second [SEP]``),
        cut to ``maxlen`` as ``Tokenizer.encode`` cuts them (a pair by
        :func:`~kerasbert.text.padding.longest_first`)."""
        if second is None:
            ids = row_concat([[self.cls_id], first[:, :self.maxlen - 2], [self.sep_id]])
            segment_ids = tf.zeros_like(ids)
        else:
            keep_a, keep_b = longest_first(first.row_lengths(), second.row_lengths(),
                                           self.maxlen - 3, xp=tf.experimental.numpy)
            ids = row_concat([[self.cls_id], _row_head(first, keep_a), [self.sep_id],
                              _row_head(second, keep_b), [self.sep_id]])
            segment_ids = tf.ragged.range(ids.row_lengths()) >= tf.expand_dims(keep_a + 2, 1)
        return ids, segment_ids

    def padded(self, ids: Any, segment_ids: Any, min_width: int,
               pad: int | None = None) -> tuple[Any, Any]:
        """Ragged ids and segment ids as int32 ``[batch, longest row]`` (at least
        ``min_width``), padded with ``pad`` (by default [PAD]) and 0."""
        pad = self._pad if pad is None else pad
        shape = [ids.nrows(), tf.reduce_max(tf.concat([ids.row_lengths(), [min_width]], 0))]
        return (tf.cast(ids.to_tensor(tf.constant(pad, ids.dtype), shape=shape), tf.int32),
                tf.cast(segment_ids, tf.int32).to_tensor(0, shape=shape))

    def token_ids(self, text: Any) -> Any:
        """WordPiece ids of each text, without [CLS] and [SEP]: ragged int64 ``[batch, None]``."""
        return self.pieces(text)[0]

    def pieces(self, text: Any) -> tuple[Any, Any, Any, Any]:
        """Each text's WordPiece tokens and where they lie in it.

        Returns:
            ``(ids, starts, ends, word_starts)``, ragged ``[batch, None]`` without [CLS] and
            [SEP]: token ``k`` of text ``i`` is ``text[i][starts[i, k]:ends[i, k]]`` in
            characters (code points), as :meth:`Tokenizer.rematch` gives it (characters the
            tokenizer deletes are not at a token's edges; an [UNK] covers its word);
            ``word_starts`` is False for a ``##`` piece.
        """
        chars = tf.strings.unicode_decode(text, "UTF-8", errors="replace")
        where = tf.ragged.range(chars.row_lengths())
        keep = self._lookup(chars, 0) != _DROP
        chars, where = tf.ragged.boolean_mask(chars, keep), tf.ragged.boolean_mask(where, keep)
        if self._lower:
            chars = self._final_sigma(chars)
        words, letters, letter_where = self._words(*self._expand(chars, where))
        tokens, begin, end = self.wordpiece.tokenize_with_offsets(words)
        # Byte offsets in each word to the letters they begin and end in: a long word is
        # [UNK] over all its letters, whatever the op says of the "[UNK]" string.
        codes = letters.flat_values
        sizes = (1 + tf.cast(codes >= 0x80, tf.int64) + tf.cast(codes >= 0x800, tf.int64)
                 + tf.cast(codes >= 0x10000, tf.int64))
        byte_at = tf.cumsum(sizes, exclusive=True)
        word = begin.values.value_rowids()
        word_base = tf.gather(tf.concat([byte_at, [0]], 0), letters.row_splits[:-1])
        word_bytes = tf.math.unsorted_segment_sum(sizes, letters.value_rowids(), letters.nrows())
        long_word = tf.gather(letters.row_lengths() > MAX_WORD_CHARS, word)
        first_byte = tf.where(long_word, tf.constant(0, tf.int64), begin.flat_values)
        last_byte = tf.where(long_word, tf.gather(word_bytes, word), end.flat_values) - 1
        base = tf.gather(word_base, word)
        first = tf.searchsorted(byte_at, base + first_byte, side="right", out_type=tf.int64) - 1
        last = tf.searchsorted(byte_at, base + last_byte, side="right", out_type=tf.int64) - 1
        ids = tokens.merge_dims(1, 2)
        return (ids, ids.with_flat_values(tf.gather(letter_where.flat_values, first)),
                ids.with_flat_values(tf.gather(letter_where.flat_values, last) + 1),
                ids.with_flat_values(first_byte == 0))

    def _lookup(self, chars: Any, shift: int) -> Any:
        """One of the three classes of each code point of ragged ``chars``."""
        run = tf.searchsorted(self._starts, chars.flat_values, side="right") - 1
        info = tf.bitwise.right_shift(tf.gather(self._info, run), shift)
        return chars.with_flat_values(tf.bitwise.bitwise_and(info, 3))

    def _final_sigma(self, chars: Any) -> Any:
        """Σ becomes ς where the Tokenizer's rule finds a cased letter before it (looking
        past _SKIP characters) and none after it, within the text."""
        values, sigma = chars.flat_values, self._lookup(chars, 4).flat_values
        rows = chars.value_rowids()
        row_start = tf.gather(chars.row_splits, rows)
        row_end = tf.gather(chars.row_splits, rows + 1)
        stops = tf.cast(sigma != _SKIP, tf.int64)
        # Positions of the stopping characters, with -1 before the first and n after the last.
        n = tf.size(values, out_type=tf.int64)
        stop_at = tf.concat([[-1], tf.where(stops > 0)[:, 0], [n]], 0)
        sigma = tf.concat([sigma, [_BLOCK]], 0)
        counted = tf.cumsum(stops)
        before = tf.gather(stop_at, counted - stops)
        after = tf.gather(stop_at, counted + 1)
        cased_before = (before >= row_start) & (tf.gather(sigma, tf.maximum(before, 0)) == _CASED)
        cased_after = (after < row_end) & (tf.gather(sigma, after) == _CASED)
        final = (values == _SIGMA) & cased_before & ~cased_after
        return chars.with_flat_values(tf.where(final, _FINAL_SIGMA, values))

    def _expand(self, chars: Any, where: Any) -> tuple[Any, Any]:
        """Each code point replaced by its normalized characters (most stay as they are);
        with ``where``, the position in the text of each character's code point."""
        values = chars.flat_values
        mapped = self._lookup(chars, 0).flat_values == _MAP
        index = tf.clip_by_value(tf.searchsorted(self._mapped, values, out_type=tf.int64), 0,
                                 tf.size(self._mapped, out_type=tf.int64) - 1)
        spans = tf.gather(self._splits, index + 1) - tf.gather(self._splits, index)
        lengths = tf.where(mapped, spans, tf.ones_like(index))
        source = tf.repeat(tf.range(tf.size(values, out_type=tf.int64)), lengths)
        offset = tf.range(tf.reduce_sum(lengths)) - tf.gather(tf.cumsum(lengths, exclusive=True),
                                                              source)
        expanded = tf.where(
            tf.gather(mapped, source),
            tf.gather(self._values, tf.gather(tf.gather(self._splits, index), source) + offset),
            tf.gather(values, source))
        row_lengths = tf.math.unsorted_segment_sum(lengths, chars.value_rowids(), chars.nrows())
        return (tf.RaggedTensor.from_row_lengths(expanded, row_lengths),
                tf.RaggedTensor.from_row_lengths(tf.gather(where.flat_values, source),
                                                 row_lengths))

    def _words(self, chars: Any, where: Any) -> tuple[Any, Any, Any]:
        """The words of each text, ragged ``[batch, None]`` strings: split at spaces, every
        punctuation mark and CJK character a word of its own; a word of more than
        MAX_WORD_CHARS characters is [UNK], as in Google's WordPiece. Also each word's
        code points and their positions ``where``, ragged ``[words, None]``."""
        split = self._lookup(chars, 2).flat_values
        rows = chars.value_rowids()
        first = tf.range(tf.size(split, out_type=tf.int64)) == tf.gather(chars.row_splits, rows)
        after_break = first | (tf.concat([[_SPACE], split], 0)[:-1] != _JOIN)
        starts = (split != _SPACE) & ((split == _ALONE) | after_break)
        word = tf.cumsum(tf.cast(starts, tf.int64)) - 1
        inside = split != _SPACE
        rowids, count = tf.boolean_mask(word, inside), tf.reduce_sum(tf.cast(starts, tf.int64))
        letters = tf.RaggedTensor.from_value_rowids(tf.boolean_mask(chars.flat_values, inside),
                                                    rowids, nrows=count)
        letter_where = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(where.flat_values, inside), rowids, nrows=count)
        words = tf.strings.unicode_encode(letters, "UTF-8")
        words = tf.where(letters.row_lengths() > MAX_WORD_CHARS, "[UNK]", words)
        per_row = tf.math.unsorted_segment_sum(tf.cast(starts, tf.int64), rows, chars.nrows())
        return tf.RaggedTensor.from_row_lengths(words, per_row), letters, letter_where


def _plain_vocab(vocab: str | os.PathLike[str], token_dict: dict[str, int], owner: object) -> str:
    """A vocab.txt with exactly one token per line, in id order, for the lookup table.

    ``vocab`` itself when it is one; otherwise a copy (removed with ``owner``) without
    BOM, CR or surrounding whitespace, as ``load_vocab`` reads it. A line of only
    whitespace (Google's Chinese vocabulary has U+2028 on line 344) is the empty token,
    which TensorFlow's reader refuses: it is written as a space, which no word holds.
    """
    tokens = sorted(token_dict, key=token_dict.get)  # type: ignore[arg-type]  # every key's
    text = "".join((token or " ") + "\n" for token in tokens)
    with open(vocab, "rb") as f:
        if f.read() == text.encode("utf-8"):
            return os.fspath(vocab)
    folder = tempfile.mkdtemp(prefix="kerasbert-vocab-")
    weakref.finalize(owner, shutil.rmtree, folder, True)
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return path


def row_concat(parts: Sequence[Any]) -> Any:
    """Ragged rows joined end to end; a list part is the same tokens in every row."""
    batch = next(part for part in parts if not isinstance(part, list)).nrows()
    return tf.concat([tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(p[0], tf.int64)))
                      if isinstance(p, list) else p for p in parts], axis=1)


def substrings(text: Any, rows: Any, start: Any, end: Any) -> Any:
    """``text[rows[k]][start[k]:end[k]]`` for each k, in characters (code points), as
    UTF-8 strings; ``text`` a string ``[batch]``, the others int64 ``[k]``."""
    chars = tf.strings.unicode_decode(text, "UTF-8", errors="replace")
    where = tf.ragged.range(start, end) + tf.expand_dims(tf.gather(chars.row_splits, rows), 1)
    return tf.strings.unicode_encode(tf.gather(chars.flat_values, where), "UTF-8")


def _row_head(rows: Any, lengths: Any) -> Any:
    """The first ``lengths[i]`` items of each row ``i``."""
    return tf.ragged.boolean_mask(rows, tf.ragged.range(rows.row_lengths())
                                  < tf.expand_dims(lengths, 1))


class TextDecoder(tf.Module):
    """``Tokenizer.decode`` in TensorFlow ops: token ids back to readable text.

    Special tokens are dropped, ``##`` pieces joined to the token before, and a space put
    between two tokens where ``Tokenizer.decode`` puts one (never next to a CJK character,
    after an opening bracket or a joiner, before punctuation, inside quotes, in ``2.5`` and
    ``1,000``...): each rule reads properties of the two tokens (and, for numbers, of the
    one before), computed per vocabulary entry when the decoder is made.

    Args:
        vocab: a ``vocab.txt``.

    Example::

        decode = TextDecoder("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
        decode(tf.ragged.constant([[101, 6427, 6241, 102]])).numpy()   # [b'语言']
    """

    def __init__(self, vocab: str | os.PathLike[str]) -> None:
        from kerasbert.text import rules
        from kerasbert.text.vocab import is_cjk, is_punctuation, is_special

        super().__init__(name="text_decoder")
        token_dict = load_vocab(vocab)
        tokens = [""] * (max(token_dict.values()) + 1)
        for token, index in token_dict.items():
            tokens[index] = token
        suffix = [t.startswith("##") and len(t) > 2 for t in tokens]
        pieces = [t[2:] if s else t for t, s in zip(tokens, suffix)]
        last = [p[-1:] for p in pieces]
        properties = {
            "kept": [bool(t) and not is_special(t) for t in tokens],
            "suffix": suffix,
            "first_cjk": [bool(p) and is_cjk(p[0]) for p in pieces],
            "last_glues": [bool(c) and (is_cjk(c) or c in rules._OPENERS or c in rules._JOINERS)
                           for c in last],
            "quote": [p == '"' for p in pieces],
            "last_quote": [c == '"' for c in last],
            "punctuation": [len(p) == 1 and is_punctuation(p) and p not in rules._OPENERS
                            for p in pieces],
            "last_wide": [bool(c) and is_punctuation(c) and not c.isascii() for c in last],
            "apostrophe": [p == "'" for p in pieces],
            "contraction": [p in rules._CONTRACTIONS for p in pieces],
            "dot": [p == "." for p in pieces],
            "separator": [p in (".", ",") for p in pieces],
            "digits": [p.isdigit() for p in pieces],
            "three": [len(p) == 3 for p in pieces],
            "last_digit": [c.isdigit() for c in last],
        }
        self._pieces = tf.constant(pieces)
        self._properties = {name: tf.constant(values) for name, values in properties.items()}

    def __call__(self, ids: Any) -> Any:
        """Each row's text: ``ids`` ragged (or dense, every id read) ``[batch, None]``,
        a string ``[batch]`` comes back."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, tf.int64)
        ids = tf.ragged.boolean_mask(ids, tf.gather(self._properties["kept"], ids))
        flat = ids.flat_values
        at = {name: tf.gather(values, flat) for name, values in self._properties.items()}
        position = tf.ragged.range(ids.row_lengths()).flat_values
        index = tf.range(tf.size(flat, out_type=tf.int64))

        # the property of the token ``steps`` before, in its row
        def before(name: str, steps: int = 1) -> Any:
            return tf.logical_and(position >= steps,
                                  tf.gather(at[name], tf.maximum(index - steps, 0)))

        quotes = tf.cumsum(tf.cast(at["quote"], tf.int64), exclusive=True)
        row_start = tf.gather(ids.row_splits, ids.value_rowids())
        in_quote = tf.equal((quotes - tf.gather(tf.concat([quotes, [0]], 0), row_start)) % 2, 1)
        numbers = (before("separator") & before("last_digit", 2) & at["digits"]
                   & (before("dot") | at["three"]))
        glued = (at["suffix"] | before("last_glues") | at["first_cjk"]
                 | tf.where(at["quote"] | (before("last_quote") & in_quote), in_quote,
                            at["punctuation"] | before("last_wide")
                            | (before("apostrophe") & at["contraction"]) | numbers))
        space = tf.where((position > 0) & ~glued, " ", "")
        words = tf.strings.join([space, tf.gather(self._pieces, flat)])
        return tf.strings.reduce_join(ids.with_flat_values(words), axis=1)
