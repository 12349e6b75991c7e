"""The files of a similarity run: pairs of texts and a 0/1 label, one pair a row.

TSV, CSV or JSONL (:func:`kerasbert.training.data.read_examples` reads them, and names a bad
row by file and line) with the columns ``text_a``, ``text_b`` and ``label``; a TSV or CSV
file whose first row does not name them, but has three fields and a 0 or 1 last, has no
header row and is read as ``text_a, text_b, label`` (LCQMC's ``train.txt`` renamed
``train.tsv``, BQ Corpus...).

Example:
    >>> pairs = read_pairs("kerasbert/resources/peoples_daily_name_pairs/dev.tsv")
    >>> len(pairs), sorted(set(pairs.labels))
    (600, ['0', '1'])
"""

import csv
import os

from kerasbert.training import data
from kerasbert.training.data import DataError

COLUMNS = ("text_a", "text_b", "label")
LABELS = ("0", "1")


def read_pairs(path, require_labels=True):
    """The pairs of a file as :class:`~kerasbert.training.data.Examples` (``texts`` the
    first texts, ``pairs`` the second, ``labels`` ``"0"`` or ``"1"``; None without a label
    where ``require_labels`` is False).

    Raises:
        FileNotFoundError: no such file.
        DataError: a bad row (``bad row in dev.tsv, line 7: label '2' must be 0 or 1``), a
            missing column, an empty file.
    """
    path = os.fspath(path)
    header = COLUMNS if _headerless(path) else None
    pairs = data.read_examples(path, text_column=COLUMNS[0], pair_column=COLUMNS[1],
                               label_column=COLUMNS[2], require_labels=require_labels,
                               header=header)
    for label, line in zip(pairs.labels, pairs.lines):
        if label is not None and label not in LABELS:
            raise DataError(f"bad row in {path}, line {line}: label {label!r} must be 0 or 1 "
                            "(1: the texts match)")
    return pairs


def check_both_labels(pairs):
    """Raises ``DataError`` when a file's pairs are all of one label: neither the Spearman
    correlation nor a threshold can be found on it."""
    found = sorted(set(pairs.labels))
    if found != list(LABELS):
        raise DataError(f"labels in {pairs.path}: pairs of both labels (0 and 1) are needed, "
                        f"found only {found}")


def _headerless(path):
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
            and fields[-1] in LABELS)
