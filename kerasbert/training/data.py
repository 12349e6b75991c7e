"""Labelled text files in: rows of text, pair and label, checked line by line.

Files are TSV, CSV or JSONL (chosen by extension) whose header row (or JSON keys)
names the columns; docs/data_formats.md gives the rules of each format. A bad row
(empty text, missing label, wrong column count, bytes that are not UTF-8, a stray CSV
quote that joins lines) is an error naming the file, the line and the problem; with
``skip_bad_rows=True`` it is skipped, and a warning on the ``kerasbert`` logger says how
many rows each file lost, why and where.

The readers of other tasks' files use the helpers here too: :func:`decode_text` (bytes to
text, naming the line of a byte that is not UTF-8), :func:`lone_surrogate` and
:func:`json_surrogate_line` (a JSON ``"\\ud800"`` escape), :func:`unknown_keys` (a key a
reader would ignore, named with the close spelling it may stand for).

Example:
    >>> examples = read_examples("kerasbert/resources/reviews/dev.tsv")
    >>> len(examples), sorted(set(examples.labels))
    (1736, ['negative', 'positive'])
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import difflib
import io
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}
TABLES = "a .tsv/.csv/.jsonl file"
#: Plain text, one text per line: texts to predict, without labels or columns.
TEXT_SUFFIXES = (".txt",)
#: What a missing column's message advises where the columns are chosen by flags.
RENAMING_BY_FLAGS = ("to read other columns, name them with --text-column, --pair-column or "
                     "--label-column")
STRAY_QUOTE = "a quoted field takes in lines that read as rows of their own"

logger = logging.getLogger(__name__)

# Bytes that are not UTF-8 are read as U+DC80..U+DCFF ("surrogateescape"), so one bad
# line is reported as such instead of failing the whole file. Valid UTF-8 never decodes to
# a surrogate: JSONL lines are checked for escaped bytes before parsing, so a surrogate in
# a parsed value came from a JSON "\ud800" escape.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
SURROGATE = re.compile("[\ud800-\udfff]")
# csv refuses fields over 128 KiB by default, yet one long document is a valid field. The
# limit is process-wide, so it is only ever raised, to the largest value a C long holds on
# every platform.
_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)
_DIALECTS: dict[str, dict[str, Any]] = {"tsv": {"delimiter": "\t", "quoting": csv.QUOTE_NONE},
             "csv": {"delimiter": ",", "quotechar": '"', "doublequote": True, "strict": True}}


class DataError(ValueError):
    """A labelled file cannot be read; the message names the file, the line and the problem."""


@dataclasses.dataclass
class Examples:
    """Rows of one labelled file (texts, optional pair texts, labels).

    ``lines[i]`` is the line row ``i`` starts on; ``skipped`` lists ``(line, problem)``
    of the rows left out.
    """

    texts: list
    pairs: list
    labels: list
    path: str = ""
    lines: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.lines:  # made by hand: number the rows
            self.lines = list(range(1, len(self.texts) + 1))

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def from_texts(cls, texts: Iterable[str],
                   pairs: Iterable[str | None] | None = None) -> Examples:
        """Unlabelled examples of raw strings, e.g. to predict.

        Raises:
            TypeError: ``texts`` is a single str. ValueError: ``pairs`` differs in length.

        Example:
            >>> Examples.from_texts(["很好", "太差了"]).lines
            [1, 2]
        """
        if isinstance(texts, str):
            raise TypeError(f"texts must be a list of str, not a single str ({texts!r:.40})")
        texts = list(texts)
        pairs = [None] * len(texts) if pairs is None else list(pairs)
        if len(pairs) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pairs)} pairs")
        return cls(texts, pairs, [None] * len(texts), "the given texts")

    def head(self, n: int) -> Examples:
        """The first ``n`` rows (``path`` and ``skipped`` kept)."""
        return self._select(range(min(n, len(self))), self.skipped)

    def _select(self, rows: Iterable[int], skipped: Iterable[tuple[int, str]]) -> Examples:
        rows = list(rows)
        return Examples([self.texts[i] for i in rows], [self.pairs[i] for i in rows],
                        [self.labels[i] for i in rows], self.path,
                        [self.lines[i] for i in rows], list(skipped))


def check_file(path: str, what: str = "data file", expected: str = TABLES) -> None:
    """Raises the one-line error for a path that is missing or a directory.

    Raises:
        FileNotFoundError: ``<what> in <path>: no such file``.
        DataError: ``<what> in <path>: is a directory, expected <expected>``.
    """
    if os.path.isdir(path):
        raise DataError(f"{what} in {path}: is a directory, expected {expected}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} in {path}: no such file")


def _physical_lines(path: str) -> Iterator[str]:
    """Each line of a UTF-8 file with its ending; a line ends at \\n, \\r\\n or a lone \\r.

    A BOM at the start is dropped; bytes that are not UTF-8 become U+DC80..U+DCFF.
    """
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        yield from f


def read_lines(path: str | os.PathLike[str], what: str = "text file") -> Iterator[tuple[int, str]]:
    """Yields ``(line_number, line)`` of a UTF-8 text file, line endings removed.

    Raises:
        FileNotFoundError, DataError: a missing file, a directory, or a line that is not
            UTF-8 (``bad line in <path>, line <n>: invalid UTF-8 byte 0xff (the file must
            be UTF-8)``).
    """
    path = os.fspath(path)
    check_file(path, what, "a text file")
    for number, line in enumerate(_physical_lines(path), start=1):
        if _ESCAPED_BYTE.search(line):
            raise DataError(f"bad line in {path}, line {number}: {_undecodable(line)}")
        yield number, line.rstrip("\r\n")


def read_texts(path: str | os.PathLike[str]) -> Examples:
    """Unlabelled examples of a plain text file (``.txt``): one text per line, kept as
    written; blank lines are skipped (the others keep their line numbers).

    Raises:
        FileNotFoundError, DataError: a missing file, a directory, a line that is not
            UTF-8, or no text at all (``data file in <path>: no text, every line is blank``).

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        ...     _ = f.write("这家店的菜很好吃\\n\\n服务太差了\\n")
        >>> examples = read_texts(f.name)
        >>> examples.texts, examples.lines
        (['这家店的菜很好吃', '服务太差了'], [1, 3])
    """
    path = os.fspath(path)
    found = [(number, line) for number, line in read_lines(path, "data file") if line.strip()]
    if not found:
        raise DataError(f"data file in {path}: no text, every line is blank")
    return Examples([line for _, line in found], [None] * len(found), [None] * len(found),
                    path, [number for number, _ in found])


def _undecodable(text: str) -> str:
    """The problem of a line read with "surrogateescape": the first byte that is not UTF-8."""
    return invalid_byte(ord(_ESCAPED_BYTE.search(text).group())  # type: ignore[union-attr]
                        - 0xDC00)  # called where the pattern is found


def invalid_byte(byte: int) -> str:
    """``invalid UTF-8 byte 0xff (the file must be UTF-8)``: the problem of a byte that no
    UTF-8 text holds where it stands (a file saved as GBK, Latin-1, UTF-16...)."""
    return f"invalid UTF-8 byte 0x{byte:02x} (the file must be UTF-8)"


def decode_text(raw: bytes, path: str) -> str:
    """The text of a whole file's bytes (a UTF-8 BOM dropped).

    Raises:
        DataError: ``bad line in <path>, line <n>: invalid UTF-8 byte 0xff (the file must
            be UTF-8)``, for the first byte that is not UTF-8.

    Example:
        >>> decode_text(b"ok\\n\\xff", "a.txt")
        Traceback (most recent call last):
            ...
        kerasbert.training.data.DataError: bad line in a.txt, line 2: invalid UTF-8 byte 0xff ...
    """
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise DataError(f"bad line in {path}, line {line}: "
                        f"{invalid_byte(raw[error.start])}") from None


def lone_surrogate(value: Any, name: str) -> str | None:
    """The problem of a JSON string holding half of a UTF-16 pair, or None.

    Only a JSON escape such as ``"\\ud800"`` gives one (UTF-8 text has none), so the
    problem says so: ``'text' holds a lone surrogate escape \\ud800 in JSON (half of a
    UTF-16 pair, not a character)``.
    """
    found = isinstance(value, str) and SURROGATE.search(value)
    if not found:
        return None
    return (f"{name} holds a lone surrogate escape \\u{ord(found.group()):04x} in JSON (half "
            "of a UTF-16 pair, not a character)")


# A JSON escape, or an escaped backslash: JSON's \\ud800 is a backslash and "ud800".
_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def json_surrogate_line(text: str, code: int | None = None) -> int | None:
    """The line of the first lone surrogate escape (``\\ud800`` not followed by a low half, or
    ``\\udc00`` not after a high one) in JSON text, or None; only of the code point ``code``
    where it is given.

    Example:
        >>> json_surrogate_line('{"a": "\\\\ud83d\\\\ude00",\\n "b": "\\\\ud800"}')
        2
    """
    high = None  # the escape of a high half that waits for its low half
    for match in _JSON_ESCAPE.finditer(text):
        value = int(match.group(1), 16) if match.group(1) else None
        low = value is not None and 0xDC00 <= value <= 0xDFFF
        if high and not (low and match.start() == high.end()):
            if code in (None, int(high.group(1), 16)):
                return text.count("\n", 0, high.start()) + 1
        elif low and not high and code in (None, value):
            return text.count("\n", 0, match.start()) + 1
        high = match if value is not None and 0xD800 <= value <= 0xDBFF else None
    if high and code in (None, int(high.group(1), 16)):
        return text.count("\n", 0, high.start()) + 1
    return None


def text_lines(text: str) -> list[str]:
    """The lines of a text, endings removed: a line ends at \\n, \\r\\n or a lone \\r, as in
    every reader here (``str.splitlines`` also splits at U+2028 and form feeds, which JSON
    strings may hold as they are)."""
    return [line.rstrip("\r\n") for line in io.StringIO(text, newline="")]


def unknown_keys(obj: Iterable[Any], known: Collection[str], what: str = "key") -> str | None:
    """The problem of an object's keys that are not in ``known``, or None; a close spelling
    is suggested (``'entity'`` for ``'entities'``).

    Example:
        >>> unknown_keys({"text": "a", "entity": []}, ["text", "entities", "spans"])
        "unknown key 'entity' (did you mean 'entities'? known keys: text, entities, spans)"
    """
    unknown = [key for key in obj if key not in known]
    if not unknown:
        return None
    close = difflib.get_close_matches(str(unknown[0]), list(known), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    keys = ", ".join(map(repr, unknown))
    return (f"unknown {what}{'s' if len(unknown) > 1 else ''} {keys} ({hint}known keys: "
            f"{', '.join(known)})")


def _json_rows(path: str,
               columns: Sequence[str | None]) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Yields ``(line_number, dict or problem string)`` for every non-blank line."""
    seen = False
    for number, line in enumerate(_physical_lines(path), start=1):
        if not line.strip():
            continue
        seen_rows, seen = seen, True
        if _ESCAPED_BYTE.search(line):
            yield number, _undecodable(line)
            continue
        try:
            row = json.loads(line.rstrip("\r\n"))  # so an error's column is on this line
        except json.JSONDecodeError as error:
            if not seen_rows:
                _refuse_squad(path, line)
            yield number, f"invalid JSON ({error.msg} at column {error.colno})"
            continue
        if (not seen_rows and isinstance(row, dict) and isinstance(row.get("data"), list)
                and not set(columns) & set(row)):
            _refuse_squad(path, line)
        if not isinstance(row, dict):
            yield number, f"not a JSON object (got {json_kind(row)})"
        elif "\\u" in line:  # only an escape gives a lone surrogate
            yield number, _lone_surrogate(row, columns) or row
        else:
            yield number, row
    if not seen:
        raise DataError(f"data file in {path}: the file is empty (one JSON object per line "
                        "is expected)")


def _lone_surrogate(row: dict[Any, Any], columns: Iterable[str | None]) -> str | None:
    return next(filter(None, (lone_surrogate(row.get(column), repr(column))
                              for column in columns)), None)


class _Problem(str):
    """A bad row's problem that says more than its ``reason`` (what rows are grouped by in
    the skipped-rows warning), for a row that runs from its first line to line ``end``."""

    reason: str
    end: int

    def __new__(cls, text: str, reason: str, end: int) -> _Problem:
        problem = super().__new__(cls, text)
        problem.reason, problem.end = reason, end
        return problem


def _records(path: str,
             kind: str) -> Iterator[tuple[int, Any, str | None, Sequence[str]]]:
    """Yields ``(first_line, fields or None, problem or None, physical_lines)`` of every CSV /
    TSV record but blank ones."""
    if csv.field_size_limit() < _FIELD_LIMIT:
        csv.field_size_limit(_FIELD_LIMIT)
    lines: list[str] = []

    def kept() -> Iterator[str]:  # the record's physical lines, for the stray-quote check
        for line in _physical_lines(path):
            lines.append(line)
            yield line

    reader = csv.reader(kept(), **_DIALECTS[kind])
    fields: Any  # the record's fields (list[str]), or None where it is bad
    while True:
        number = reader.line_num + 1  # a record may span lines: name its first
        lines.clear()
        try:
            fields, problem = next(reader), None
        except StopIteration:
            return
        except csv.Error as error:  # the reader goes on at the next line
            fields, problem = None, _csv_problem(error, number, reader.line_num)
        else:
            if any(map(_ESCAPED_BYTE.search, fields)):
                problem = _undecodable("".join(fields))
            elif not any(field.strip() for field in fields):
                continue  # a blank line, or a row of empty fields
        yield number, fields, problem, list(lines) if len(lines) > 1 else ()


def _table_rows(path: str, kind: str, required: Sequence[str], label_column: str | None = None,
                header: Sequence[str] | None = None,
                renaming: str = RENAMING_BY_FLAGS) -> Iterator[tuple[int, dict[str, str] | str]]:
    """Yields ``(first_line_number, dict or problem string)`` for every CSV / TSV record;
    ``header``: the column names of a file without a header row (its first line is a row).

    A quoted CSV field may hold line breaks, but one that takes in lines that read as rows
    of the file on their own is a bad row: a stray quote opened it (see :func:`_row_test`).
    The file is read whole first, as its labels tell such a line from text.
    """
    rows: list[tuple[int, dict[str, str] | str, Sequence[str]]]
    header, rows = (None if header is None else list(header)), []
    for number, fields, problem, lines in _records(path, kind):
        if header is None:
            if problem:
                raise DataError(f"header row in {path}, line {number}: {problem}")
            header = _header(path, number, fields, required, renaming)
        elif problem:
            rows.append((number, problem, lines))
        elif len(fields) != len(header):
            rows.append((number, f"{len(fields)} columns where the header has {len(header)}",
                         lines))
        else:
            rows.append((number, dict(zip(header, fields)), lines))
    if header is None:
        raise DataError(f"data file in {path}: the file is empty (a header row naming the "
                        "columns is needed)")
    swallowed = _row_test(rows, header, kind, label_column)
    for number, row, lines in rows:
        inner = swallowed(lines) if isinstance(row, dict) and len(lines) > 1 else None
        if inner is not None:
            shown = lines[inner].strip()
            shown = repr(shown if len(shown) <= 40 else shown[:40] + "...")
            row = _Problem(f"{STRAY_QUOTE} (the quote opened on line {number} closes on line "
                           f"{number + len(lines) - 1}; line {number + inner}, {shown}, reads "
                           'as a row: a stray quote? a quote inside a quoted field is '
                           'written "")', STRAY_QUOTE, number + len(lines) - 1)
        yield number, row


def _row_test(rows: Sequence[tuple[int, dict[str, str] | str, Sequence[str]]], header: list[str],
              kind: str, label_column: str | None) -> Callable[[Sequence[str]], int | None]:
    """The test of a multi-line record's physical lines: the index of the first line after
    its first that reads as a row of the file on its own, or None.

    Read alone, such a line has the header's number of columns and one of the labels of the
    file's rows in its label column. A file without labels (to predict on, a corpus) is not
    tested: a column count alone is no evidence, as a line of prose with one comma has two
    columns.
    """
    index = header.index(label_column) if label_column in header else None
    labels = {row[label_column].strip()  # type: ignore[index]  # in header: a str
              for _, row, _ in rows
              if index is not None and isinstance(row, dict)} - {""}

    def reads_as_row(line: str) -> bool:
        try:
            fields = next(csv.reader([line], **_DIALECTS[kind]))
        except (csv.Error, StopIteration):
            return False
        return (len(fields) == len(header)
                and fields[index].strip() in labels)  # type: ignore[index]  # labels: an index

    def swallowed(lines: Sequence[str]) -> int | None:
        return next((k for k in range(1, len(lines)) if reads_as_row(lines[k])), None)

    return swallowed if labels else lambda lines: None


def _csv_problem(error: csv.Error, first: int, last: int) -> str:
    message = str(error)
    if "expected after" in message:
        reason = "text after the closing quote of a field"
        where = (f"the quoted field runs from line {first} to line {last}; " if last > first
                 else "")
        return _Problem(f'{reason} ({where}a quote inside a quoted field is written "")',
                        reason, last)
    if "end of data" in message:
        reason = "a quoted field is never closed"
        return _Problem(f"{reason} (the file ends inside it, lines {first}-{last} are one row)",
                        reason, last)
    return f"not valid CSV ({message})"


def _header(path: str, number: int, fields: Sequence[str], required: Sequence[str],
            renaming: str = RENAMING_BY_FLAGS) -> list[str]:
    """The column names (surrounding spaces stripped), checked to hold ``required``."""
    header = [field.strip() for field in fields]
    missing = [column for column in required if column not in header]
    if missing:
        raise DataError(f"header row in {path}, line {number}: no column "
                        f"{', '.join(map(repr, missing))} in the header "
                        f"(columns: {', '.join(header)}); {renaming}")
    twice = [column for column in required if header.count(column) > 1]
    if twice:
        raise DataError(f"header row in {path}, line {number}: column {twice[0]!r} appears "
                        f"{header.count(twice[0])} times")
    return header


def _refuse_squad(path: str, first_line: str) -> None:
    """Raises when a file that starts with ``first_line`` is one JSON document with SQuAD's
    ``data`` (a span QA file), which reads as invalid JSON lines otherwise."""
    if not first_line.lstrip().startswith("{"):
        return
    try:
        with open(path, encoding="utf-8-sig") as f:
            document = json.load(f)
    except (OSError, ValueError):
        return
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        raise DataError(f"data file in {path}: a SQuAD JSON file (one object with 'data'), not "
                        "labelled rows, one JSON object per line; span question answering reads it")


def read_examples(path: str | os.PathLike[str], text_column: str = "text",
                  pair_column: str | None = None, label_column: str | None = "label",
                  skip_bad_rows: bool = False, require_labels: bool = True,
                  header: Sequence[str] | None = None,
                  renaming: str = RENAMING_BY_FLAGS) -> Examples:
    """Reads a labelled TSV / CSV / JSONL file.

    Texts are kept exactly as written; labels are stripped of surrounding spaces (a
    warning names spellings this merges) and a JSON integer label becomes its digits.

    Args:
        path: the file; its extension picks the format.
        text_column, pair_column, label_column: column names (``pair_column`` for
            sentence pairs, None for single texts).
        skip_bad_rows: skip and count bad rows instead of raising; one warning (on the
            ``kerasbert`` logger) then says how many rows were skipped, why and where.
        require_labels: False for files to predict (the label column may be absent or
            empty; labels are then None).
        header: the column names of a TSV / CSV file that has no header row (LCQMC's
            ``text_a<TAB>text_b<TAB>label`` lines); None: its first row names them.
        renaming: what the message about a header without the columns advises (a task
            whose columns are fixed says so instead of naming the column flags).

    Returns:
        :class:`Examples`; ``skipped`` lists ``(line, problem)`` of skipped rows.

    Raises:
        FileNotFoundError: no such file.
        DataError: a bad row (when not skipping), a directory, an unknown extension, an
            empty file, a missing column, or no usable row.
    """
    path = os.fspath(path)
    check_file(path)
    kind = FORMATS.get(os.path.splitext(path)[1].lower())
    if kind is None:
        suffix = os.path.splitext(path)[1]
        plain = (" (a .txt file, one text per line, is read by predict only: it has no labels)"
                 if suffix.lower() in TEXT_SUFFIXES else "")
        raise DataError(f"data file in {path}: unknown file type {suffix!r}, expected "
                        f"{TABLES}{plain}")
    wanted = [text_column] + ([pair_column] if pair_column else [])
    required = wanted + ([label_column] if require_labels else [])
    rows: Iterator[tuple[int, Any]] = (_json_rows(path, wanted + [label_column]) if kind == "jsonl"
            else _table_rows(path, kind, required,  # type: ignore[arg-type]  # names here
                             label_column, header, renaming))
    spellings: dict[str, set[str]]
    examples, spellings = Examples([], [], [], path), {}
    for number, row in rows:
        row = row if isinstance(row, str) else _values(row, wanted, label_column, require_labels)
        if isinstance(row, str):
            _bad_row(examples, examples.skipped, number, row, skip_bad_rows)
            continue
        text, pair, label = row
        if label is not None:
            spellings.setdefault(label.strip(), set()).add(label)
            label = label.strip()
        examples.texts.append(text)
        examples.pairs.append(pair)
        examples.labels.append(label)
        examples.lines.append(number)
    _check_usable(examples)
    _warn_skipped(path, examples.skipped)
    _warn_merged(path, spellings)
    return examples


def _values(row: dict[str, Any], wanted: Sequence[str], label_column: str | None,
            require_labels: bool) -> tuple[str, str | None, str | None] | str:
    """``(text, pair, label)`` of a parsed row, or the problem that makes it a bad row."""
    values = []
    for column in wanted:
        if column not in row:
            return _missing(column, row)
        value = row[column]
        if not isinstance(value, str):
            return f"'{column}' must be a string, got {json_kind(value)}"
        if not value.strip():
            return f"empty '{column}'"
        values.append(value)
    label = row.get(label_column) if label_column else None
    if isinstance(label, int) and not isinstance(label, bool):
        label = str(label)  # a JSON 1 is the label "1"
    if not label_column or label_column not in row:
        problem = _missing(label_column, row)
    elif label is None or isinstance(label, str) and not label.strip():
        problem = f"missing label in column '{label_column}'"
    elif not isinstance(label, str):
        problem = f"the label must be a string or an integer, got {json_kind(label)}"
    else:
        problem = None
    if problem:
        if require_labels:
            return problem
        label = None
    return values[0], values[1] if len(values) > 1 else None, label  # type: ignore[return-value]


def _missing(column: str | None, row: Iterable[Any]) -> str:
    return f"column '{column}' is missing (columns: {', '.join(map(str, row))})"


def json_object(line: str, where: str, expected: str = "a JSON object") -> dict[str, Any]:
    """The JSON object on one line of a JSON-lines file.

    Raises:
        DataError: ``bad row in <where>: invalid JSON (Expecting value at column 11)``, or
            ``bad row in <where>: expected <expected>, got a list``.

    Example:
        >>> json_object('{"source": "a"}', "pairs.jsonl, line 1")
        {'source': 'a'}
    """
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataError(f"bad row in {where}: invalid JSON ({error.msg} at column "
                        f"{error.colno})") from None
    if not isinstance(row, dict):
        raise DataError(f"bad row in {where}: expected {expected}, got {json_kind(row)}")
    return row


def json_kind(value: Any) -> str:
    """The JSON name of a value's type, with the value where it is short: a string, a list,
    an object, a number, a boolean, null.

    Example:
        >>> json_kind("false"), json_kind(True), json_kind(3), json_kind([1])
        ('a string ("false")', 'a boolean (true)', 'a number (3)', 'a list')
    """
    if value is None:
        return "null"
    if isinstance(value, str):
        shown = json.dumps(value, ensure_ascii=False)
        return f"a string ({shown if len(shown) <= 42 else shown[:40] + '...'})"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    return {dict: "an object", list: "a list"}.get(  # type: ignore[call-overload]
        type(value), type(value).__name__)


def _bad_row(examples: Examples, skipped: list[tuple[int, str]], line: int, problem: str,
             skip_bad_rows: bool) -> None:
    """Raises the one-line error for a bad row, or adds it to ``skipped``."""
    if not skip_bad_rows:
        raise DataError(f"bad row in {examples.path}, line {line}: {problem}")
    skipped.append((line, problem))


def _check_usable(examples: Examples) -> None:
    if not examples.texts:
        skipped = (f" ({len(examples.skipped)} skipped: {skipped_rows(examples.skipped)})"
                   if examples.skipped else "")
        raise DataError(f"data file in {examples.path}: no usable rows{skipped}")


def skipped_rows(skipped: Iterable[tuple[int, str]]) -> str:
    """What ``(line, problem)`` rows were skipped for, grouped by reason, in one line.

    Example:
        >>> skipped_rows([(4, "missing label in column 'label'"), (5, "empty 'text'"),
        ...               (9, "missing label in column 'label'")])
        "missing label in column 'label': 2 rows (lines 4, 9); empty 'text': 1 row (line 5)"
    """
    groups: dict[str, list[str]] = {}
    for line, problem in skipped:
        end = getattr(problem, "end", line)
        reason = getattr(problem, "reason", None) or _PARENTHESIS.sub("", problem) or problem
        groups.setdefault(reason, []).append(f"{line}-{end}" if end > line else str(line))
    parts = []
    for reason, lines in groups.items():
        shown = ", ".join(lines[:_SHOWN_LINES])
        if len(lines) > _SHOWN_LINES:
            shown += ", ..."
        plural = "s" if len(lines) > 1 else ""
        spans = "s" if plural or "-" in lines[0] else ""
        parts.append(f"{reason}: {len(lines)} row{plural} (line{spans} {shown})")
    return "; ".join(parts)


# A problem's closing details, such as "(known: a, b)", left out to group rows by reason.
_PARENTHESIS = re.compile(r"\s*\([^()]*\)$")
_SHOWN_LINES = 10


def _warn_skipped(path: str, skipped: Sequence[tuple[int, str]]) -> None:
    """The warning that ``skip_bad_rows`` always gives when it left rows out."""
    if skipped:
        logger.warning("skipped %d bad row%s in %s: %s", len(skipped),
                       "s" if len(skipped) > 1 else "", path, skipped_rows(skipped))


def _warn_merged(path: str, spellings: dict[str, set[str]]) -> None:
    """One warning naming the label spellings that stripping made one."""
    merged = [(label, sorted(forms, key=lambda form: (form != label, form)))
              for label, forms in spellings.items() if len(forms) > 1]
    if merged:
        groups = "; ".join(f"{_and(forms)} are read as one label {label!r}"
                           for label, forms in merged)
        logger.warning("labels in %s: %s (surrounding spaces are stripped)", path, groups)


def _and(items: Iterable[Any]) -> str:
    items = [repr(item) for item in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _unknown_labels(examples: Examples,
                    labels: Sequence[str]) -> Iterator[tuple[int, int, str]]:
    """``(row, line, problem)`` of each example whose label is not in ``labels``."""
    known = set(labels)
    shown = ", ".join(map(str, labels[:20]))
    if len(labels) > 20:
        shown += f", ... ({len(labels)} in all)"
    for i, (label, line) in enumerate(zip(examples.labels, examples.lines)):
        if label not in known:
            yield i, line, (f"label {label!r} was not seen in training (known: {shown})"
                            if label is not None else "missing label")


def label_ids(examples: Examples, labels: Iterable[str]) -> np.ndarray:
    """Maps each example's label to its index in ``labels``.

    Raises:
        DataError: a label that training never saw, naming the file and line.
    """
    labels = list(labels)
    for _, line, problem in _unknown_labels(examples, labels):
        _bad_row(examples, [], line, problem, skip_bad_rows=False)
    index = {label: i for i, label in enumerate(labels)}
    return np.asarray([index[label] for label in examples.labels], dtype="int32")


def keep_known_labels(examples: Examples, labels: Iterable[str],
                      skip_bad_rows: bool = False) -> Examples:
    """The examples whose label is one of ``labels`` (e.g. a dev file after training).

    Args:
        examples: :class:`Examples` (left unchanged). labels: the known labels.
        skip_bad_rows: drop a row with another label, adding ``(line, problem)`` to
            ``skipped`` and saying so in a warning, instead of raising.

    Returns:
        New :class:`Examples`.

    Raises:
        DataError: ``bad row in <path>, line <n>: label 'x' was not seen in training
            (known: a, b)`` when not skipping; ``no usable rows`` when none is left.

    Example:
        >>> dev = read_examples("kerasbert/resources/reviews/dev.tsv")
        >>> kept = keep_known_labels(dev, ["positive"], skip_bad_rows=True)
        >>> len(dev), len(kept), kept.skipped[0]
        (1736, 833, (5, "label 'negative' was not seen in training (known: positive)"))
    """
    unknown: list[tuple[int, str]]
    unknown, dropped = [], set()
    for i, line, problem in _unknown_labels(examples, list(labels)):
        _bad_row(examples, unknown, line, problem, skip_bad_rows)
        dropped.add(i)
    kept = examples._select([i for i in range(len(examples)) if i not in dropped],
                            sorted(examples.skipped + unknown))
    _check_usable(kept)
    _warn_skipped(examples.path, unknown)
    return kept
