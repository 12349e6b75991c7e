"""Pretraining text: reading a corpus, the vocabulary it uses, sequences of at most maxlen.

A corpus file is a labelled table (``.tsv`` / ``.csv`` / ``.jsonl``, its text column
is read) or plain text with one text per line (any other extension). The reduced
vocabulary holds the special tokens and the tokens the corpus actually uses under
the full vocabulary, so the embedding of a small model shrinks from 21,128 rows (the
Chinese vocabulary) to a few thousand; ``keep_tokens`` maps it back to the full one.

Example:
    >>> texts = read_corpus(["kerasbert/resources/reviews/dev.tsv"])
    >>> vocab = reduce_vocab("checkpoints/chinese_L-12_H-768_A-12/vocab.txt", texts)
    >>> len(vocab.tokens), vocab.tokens[:5]     # the training split uses 5,915 tokens
    (3214, ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'])
"""

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from kerasbert import files
from kerasbert.text.vocab import load_vocab
from kerasbert.training import data

if TYPE_CHECKING:
    from kerasbert.text.tokenizer import Tokenizer

#: Kept first, in this order, by every reduced vocabulary.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def read_corpus(paths: Iterable[str | os.PathLike[str]], text_column: str = "text") -> list[str]:
    """Every text of the corpus files, in order.

    Args:
        paths: files; ``.tsv``/``.csv``/``.jsonl`` are read with
            :func:`kerasbert.training.data.read_examples` (labels not needed), anything else
            as UTF-8 text, one text per line (a line ends at \\n, \\r\\n or \\r;
            surrounding spaces are stripped and blank lines skipped).
        text_column: the column holding the text in tables.

    Returns:
        A list of str.

    Raises:
        FileNotFoundError: ``corpus file in <path>: no such file``.
        kerasbert.training.data.DataError: a directory, a line that is not UTF-8, a table that lacks
            the text column or has a bad row, or a file without text; the message names
            the file (and the line).
    """
    texts: list[str] = []
    for path in [os.fspath(p) for p in paths]:
        data.check_file(path, "corpus file", f"a text file or {data.TABLES}")
        if os.path.splitext(path)[1].lower() in data.FORMATS:
            texts += data.read_examples(path, text_column=text_column, label_column=None,
                                        require_labels=False).texts
            continue
        found = [line.strip() for _, line in data.read_lines(path, "corpus file")]
        found = [line for line in found if line]
        if not found:
            raise data.DataError(f"corpus file in {path}: no text (one text per line is expected)")
        texts += found
    return texts


def token_rows(tokenizer: "Tokenizer", texts: Sequence[str], batch: int = 1024) -> list[np.ndarray]:
    """The ids of each text, ``[CLS] ... [SEP]`` with no padding, as a list of int32 arrays."""
    rows = []
    for start in range(0, len(texts), batch):
        ids, _ = tokenizer.encode_batch(texts[start:start + batch])
        # [PAD] (id 0) only ever pads: the tokenizer never emits it inside a text.
        rows += [row[:n] for row, n in zip(ids, np.count_nonzero(ids, axis=1))]
    return rows


@dataclasses.dataclass
class CorpusVocab:
    """A vocabulary reduced to what a corpus uses.

    Attributes:
        tokens: the reduced vocabulary; a token's id is its index.
        keep_tokens: ``keep_tokens[new id]`` is the token's id in the full vocabulary.
        rows: the corpus texts as reduced ids (``[CLS] ... [SEP]``).
    """

    tokens: list[str]
    keep_tokens: list[int]
    rows: list[np.ndarray]

    @property
    def token_dict(self) -> dict[str, int]:
        return {token: i for i, token in enumerate(self.tokens)}

    def write(self, path: str | os.PathLike[str]) -> None:
        """Writes ``vocab.txt`` (one token per line), atomically."""
        with files.atomic_path(path) as temporary:
            with open(temporary, "w", encoding="utf-8") as f:
                f.write("".join(token + "\n" for token in self.tokens))


def reduce_vocab(vocab_path: str | os.PathLike[str], texts: Sequence[str]) -> CorpusVocab:
    """The special tokens and every token ``texts`` use under ``vocab_path``.

    The order is the full vocabulary's (:func:`kerasbert.text.vocab.load_vocab` with
    ``simplified=True``), the special tokens first. Since WordPiece picks the longest
    piece in the vocabulary and every piece the corpus used is kept, the reduced
    vocabulary tokenizes the corpus exactly as the full one does.

    Args:
        vocab_path: the full ``vocab.txt`` (it must hold [PAD] [UNK] [CLS] [SEP] [MASK]).
        texts: the corpus.

    Returns:
        A :class:`CorpusVocab` (its ``rows`` are the texts in reduced ids).

    Raises:
        ValueError: a special token is missing from ``vocab_path``.
    """
    from kerasbert.text.tokenizer import Tokenizer

    simplified, keep = load_vocab(vocab_path, simplified=True, startswith=list(SPECIAL_TOKENS))
    full = Tokenizer(vocab_path)
    full_rows = token_rows(full, texts)
    used = np.zeros(full.vocab_size, dtype=bool)
    for row in full_rows:
        used[row] = True
    kept = [(token, keep[i]) for token, i in simplified.items()
            if token in SPECIAL_TOKENS or used[keep[i]]]
    tokens, keep_tokens = [t for t, _ in kept], [i for _, i in kept]
    new_id = np.full(len(used), tokens.index("[UNK]"), dtype=np.int32)
    new_id[keep_tokens] = np.arange(len(keep_tokens), dtype=np.int32)
    return CorpusVocab(tokens, keep_tokens, [new_id[row] for row in full_rows])


def split_rows(rows: Iterable[np.ndarray], maxlen: int,
               continuation: np.ndarray | None = None) -> list[np.ndarray]:
    """Cuts each ``[CLS] ... [SEP]`` row longer than ``maxlen`` into several that fit.

    Every piece gets its own [CLS] and [SEP]; a cut never falls just before a ``##``
    piece when it can be avoided (``continuation``: boolean array by id).

    Raises:
        ValueError: ``maxlen`` below 3 (no room for a token between [CLS] and [SEP]).

    Example:
        >>> [r.tolist() for r in split_rows([np.array([2, 7, 8, 9, 3])], maxlen=4)]
        [[2, 7, 8, 3], [2, 9, 3]]
    """
    if maxlen < 3:
        raise ValueError(f"maxlen ({maxlen}) must be at least 3: [CLS], a token and [SEP]")
    pieces, width = [], maxlen - 2
    for row in rows:
        cls, body, sep = row[:1], row[1:-1], row[-1:]
        start = 0
        while start < len(body):
            end = min(start + width, len(body))
            while (continuation is not None and start + 1 < end < len(body)
                   and continuation[body[end]]):
                end -= 1
            pieces.append(np.concatenate([cls, body[start:end], sep]))
            start = end
    return pieces
