"""The files of a similarity run: pairs of texts and a label, one pair a row.

TSV, CSV or JSONL (:func:`kerasbert.training.data.read_examples` reads them, and names a bad
row by file and line) with the columns ``text_a``, ``text_b`` and ``label``; a TSV or CSV
file whose first row does not name them, but has three fields and a number last, has no
header row and is read as ``text_a, text_b, label`` (LCQMC's ``train.txt`` renamed
``train.tsv``, BQ Corpus...).

A label is 0 or 1 (1: the texts match), or a graded score (STS-B's 0 to 5, a 0.7): CoSENT
learns from the order of the labels alone, and the Spearman correlation that picks the best
epoch needs no more. Only where the dev labels are all 0 or 1 does a run also find the
cosine threshold that calls a pair 1 (accuracy, F1).

Example:
    >>> pairs = read_pairs("kerasbert/resources/peoples_daily_name_pairs/dev.tsv")
    >>> len(pairs), sorted(set(pairs.labels)), is_binary(pairs)
    (600, ['0', '1'], True)
"""

import collections
import csv
import math
import os
from typing import Any

import numpy as np

from kerasbert.training import data
from kerasbert.training.data import DataError

COLUMNS = ("text_a", "text_b", "label")
BINARY = (0.0, 1.0)
#: The advice of a message about a header without the columns: they are fixed.
RENAMING = ("a similarity file has the columns text_a, text_b and label: rename them in its "
            "first row, or leave the header row out (rows of text_a, text_b, label)")
#: The share of one-label batches from which ``kerasbert train`` warns.
ONE_LABEL_WARNING = 0.05


def read_pairs(path: str | os.PathLike[str], require_labels: bool = True) -> data.Examples:
    """The pairs of a file as :class:`~kerasbert.training.data.Examples` (``texts`` the
    first texts, ``pairs`` the second, ``labels`` as written, each a number; None without
    a label where ``require_labels`` is False).

    Raises:
        FileNotFoundError: no such file.
        DataError: a bad row (``bad row in dev.tsv, line 7: label 'yes' must be a number``),
            a missing column, an empty file.
    """
    path = os.fspath(path)
    header = COLUMNS if _headerless(path) else None
    pairs = data.read_examples(path, text_column=COLUMNS[0], pair_column=COLUMNS[1],
                               label_column=COLUMNS[2], require_labels=require_labels,
                               header=header, renaming=RENAMING)
    for label, line in zip(pairs.labels, pairs.lines):
        if label is not None and _number(label) is None:
            raise DataError(f"bad row in {path}, line {line}: label {label!r} must be a "
                            "number: 0 or 1 (1: the texts match), or a graded score such as "
                            "STS-B's 0 to 5")
    return pairs


def label_values(pairs: data.Examples) -> np.ndarray:
    """The labels of ``pairs`` as float32 numbers."""
    return np.asarray([_number(label) for label in pairs.labels], "float32")


def is_binary(pairs: data.Examples) -> bool:
    """Whether every label of ``pairs`` is 0 or 1 (a threshold can be found on them)."""
    return set(label_values(pairs).tolist()) <= set(BINARY)


def check_labels(pairs: data.Examples) -> None:
    """Raises ``DataError`` when the labels of a file's pairs cannot rank its cosines: all
    of one value, or 0/1 labels of one kind only (neither the Spearman correlation nor a
    threshold can be found on it)."""
    found = sorted(set(label_values(pairs).tolist()))
    if is_binary(pairs) and found != list(BINARY):
        raise DataError(f"labels in {pairs.path}: pairs of both labels (0 and 1) are needed, "
                        f"found only {sorted(set(pairs.labels))}")
    if len(found) < 2:
        raise DataError(f"labels in {pairs.path}: every pair has the label {pairs.labels[0]!r}; "
                        "pairs of different labels are needed to rank their cosines")


def check_different_texts(pairs: data.Examples) -> None:
    """Raises ``DataError`` when ``text_a`` equals ``text_b`` on every row: every cosine is
    then 1, and there is nothing to learn or to score."""
    if all(a.strip() == b.strip() for a, b in zip(pairs.texts, pairs.pairs)):
        raise DataError(f"texts in {pairs.path}: text_a equals text_b on every row "
                        f"({len(pairs)} rows), so every cosine is 1; are the columns the two "
                        "texts to compare?")


def one_label_share(pairs: data.Examples, batch_size: int) -> float:
    """The share of batches of ``batch_size`` pairs drawn at random from ``pairs`` whose
    labels are all equal: such a batch gives CoSENT no pair to rank, and adds 0 to the
    loss.

    Example:
        >>> pairs = data.Examples(["a"] * 4, ["b"] * 4, ["0", "1", "0", "1"])
        >>> round(one_label_share(pairs, 2), 3)
        0.333
    """
    counts = collections.Counter(label_values(pairs).tolist()).values()
    size = min(batch_size, len(pairs))
    return sum(math.comb(count, size) for count in counts) / math.comb(len(pairs), size)


def _number(label: Any) -> float | None:
    """A label as a finite float, or None."""
    try:
        value = float(label)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _headerless(path: str) -> bool:
    """Whether a TSV / CSV file has no header row: its first row names none of
    :data:`COLUMNS`, has three fields, and the last is a label."""
    kind = data.FORMATS.get(os.path.splitext(path)[1].lower())
    if kind not in ("tsv", "csv") or not os.path.isfile(path):
        return False
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        first = next((line for line in f if line.strip()), "")
    fields = (first.rstrip("\r\n").split("\t") if kind == "tsv"
              else next(csv.reader([first]), []))
    fields = [field.strip() for field in fields]
    return (len(fields) == len(COLUMNS) and not set(fields) & set(COLUMNS)
            and _number(fields[-1]) is not None)
