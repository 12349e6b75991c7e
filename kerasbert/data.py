"""Labelled text files in, batched ``tf.data`` pipelines out.

Files are TSV, CSV or JSONL (chosen by extension) whose header row (or JSON keys)
names the columns. A bad row (empty text, missing label, wrong column count,
undecodable bytes) is an error naming the file, the line and the problem; with
``skip_bad_rows=True`` it is skipped and counted instead.

Example:
    >>> examples = read_examples("data/reviews/dev.tsv")
    >>> len(examples), sorted(set(examples.labels))
    (1736, ['negative', 'positive'])
"""

import csv
import dataclasses
import io
import json
import os

import numpy as np

FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}


class DataError(ValueError):
    """A labelled file cannot be read; the message names the file, the line and the problem."""


@dataclasses.dataclass
class Examples:
    """Rows of one labelled file (texts, optional pair texts, labels)."""

    texts: list
    pairs: list
    labels: list
    path: str = ""
    lines: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)

    def __len__(self):
        return len(self.texts)


def _decoded_lines(path):
    """Yields ``(line_number, text)``; undecodable bytes are reported per line."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                yield number, error


def _rows(path, kind, required):
    """Yields ``(line_number, dict or problem string)`` for every data row."""
    lines = _decoded_lines(path)
    if kind == "jsonl":
        for number, text in lines:
            if isinstance(text, Exception):
                yield number, f"undecodable bytes ({text.reason} at byte {text.start})"
            elif text.strip():
                try:
                    row = json.loads(text)
                except json.JSONDecodeError as error:
                    yield number, f"invalid JSON ({error.msg} at column {error.colno})"
                    continue
                yield number, row if isinstance(row, dict) else "not a JSON object"
        return
    delimiter = "\t" if kind == "tsv" else ","
    header = None
    for number, text in lines:
        if isinstance(text, Exception):
            if header is None:
                raise DataError(f"{path}, line {number}: the header row is not UTF-8")
            yield number, f"undecodable bytes ({text.reason} at byte {text.start})"
            continue
        if not text.strip():
            continue
        fields = next(csv.reader(io.StringIO(text), delimiter=delimiter))
        if header is None:
            header = fields
            missing = [column for column in required if column not in header]
            if missing:
                raise DataError(f"{path}, line {number}: no column {', '.join(map(repr, missing))} "
                                f"in the header (columns: {', '.join(header)})")
            continue
        if len(fields) != len(header):
            yield number, f"{len(fields)} columns where the header has {len(header)}"
            continue
        yield number, dict(zip(header, fields))
    if header is None:
        raise DataError(f"{path}: the file is empty (a header row naming the columns is needed)")


def read_examples(path, text_column="text", pair_column=None, label_column="label",
                  skip_bad_rows=False, require_labels=True):
    """Reads a labelled TSV / CSV / JSONL file.

    Args:
        path: the file; its extension picks the format.
        text_column, pair_column, label_column: column names (``pair_column`` for
            sentence pairs, None for single texts).
        skip_bad_rows: skip and count bad rows instead of raising.
        require_labels: False for files to predict (the label column may be absent).

    Returns:
        :class:`Examples`; ``skipped`` lists ``(line, problem)`` of skipped rows.

    Raises:
        DataError: a bad row (when not skipping), an unknown extension, a missing column.
    """
    path = os.fspath(path)
    kind = FORMATS.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise DataError(f"{path}: unknown file type; use .tsv, .csv or .jsonl")
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such data file: {path}")
    examples = Examples([], [], [], path)
    wanted = [text_column] + ([pair_column] if pair_column else [])
    required = wanted + ([label_column] if require_labels else [])
    for number, row in _rows(path, kind, required):
        problem = row if isinstance(row, str) else _problem(row, wanted, label_column,
                                                            require_labels)
        if problem:
            if not skip_bad_rows:
                raise DataError(f"{path}, line {number}: {problem}")
            examples.skipped.append((number, problem))
            continue
        examples.texts.append(str(row[text_column]))
        examples.pairs.append(str(row[pair_column]) if pair_column else None)
        examples.labels.append(str(row[label_column]) if label_column in row else None)
        examples.lines.append(number)
    if not examples.texts:
        raise DataError(f"{path}: no usable rows" + (
            f" ({len(examples.skipped)} skipped)" if examples.skipped else ""))
    return examples


def _problem(row, wanted, label_column, require_labels):
    for column in wanted:
        if column not in row:
            return f"column '{column}' is missing (columns: {', '.join(map(str, row))})"
        if row[column] is None or not str(row[column]).strip():
            return f"empty '{column}'"
    if require_labels:
        if label_column not in row:
            return f"column '{label_column}' is missing (columns: {', '.join(map(str, row))})"
        if row[label_column] is None or not str(row[label_column]).strip():
            return f"missing label in column '{label_column}'"
    return None


def label_ids(examples, labels):
    """Maps each example's label to its index in ``labels``.

    Raises:
        DataError: a label that training never saw, naming the file and line.
    """
    index = {label: i for i, label in enumerate(labels)}
    ids = []
    for label, line in zip(examples.labels, examples.lines):
        if label not in index:
            raise DataError(
                f"{examples.path}, line {line}: label {label!r} was not seen in training "
                f"(known: {', '.join(labels)})"
            )
        ids.append(index[label])
    return np.asarray(ids, dtype="int32")


def encode_examples(tokenizer, examples, maxlen):
    """Token and segment ids of every example, padded to the longest: ``(ids, segments)``."""
    pairs = examples.pairs if examples.pairs and examples.pairs[0] is not None else None
    return tokenizer.encode_batch(examples.texts, pairs=pairs, maxlen=maxlen)


def length_grouped_batches(lengths, batch_size, seed=None, epoch=0, group=50):
    """Batches of example indices, similar lengths together; ``seed=None`` keeps file order.

    Each epoch's order is drawn from ``(seed, epoch)`` alone, so a run resumed at epoch
    ``k`` sees exactly the batches an uninterrupted run sees. Within a random window of
    ``group`` batches the examples are sorted by length, so padding stays small while
    batches are still mixed; the batch order is then shuffled.
    """
    lengths = np.asarray(lengths)
    if seed is None:
        order = np.arange(len(lengths))
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    window = batch_size * group
    for start in range(0, len(order), window):
        chunk = order[start:start + window]
        order[start:start + window] = chunk[np.argsort(-lengths[chunk], kind="stable")]
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def batch_width(lengths, limit, pad_multiple=8):
    """The width a batch is cut to: its longest row rounded up to ``pad_multiple``, at most
    ``limit`` (few distinct shapes, so few retraces)."""
    width = -(-max(int(np.max(lengths)), 1) // pad_multiple) * pad_multiple
    return int(min(width, limit))


def make_dataset(token_ids, segment_ids, labels=None, batch_size=32, seed=None, first_epoch=0,
                 pad_multiple=8):
    """A ``tf.data.Dataset`` of ``((token_ids, segment_ids), labels)`` batches.

    Batches are cut to their longest row, rounded up to ``pad_multiple`` (dynamic
    padding: few distinct shapes, so few retraces). Without a ``seed``: one pass in
    file order. With a ``seed``: endless, epoch after epoch from ``first_epoch``, each
    length-grouped and shuffled (see :func:`length_grouped_batches`); give ``fit``
    its ``steps_per_epoch``.
    """
    import itertools

    import tensorflow as tf

    lengths = np.count_nonzero(token_ids, axis=1)
    epochs = itertools.count(first_epoch) if seed is not None else [0]

    def generate():
        plan = (rows for epoch in epochs
                for rows in length_grouped_batches(lengths, batch_size, seed, epoch))
        for rows in plan:
            width = batch_width(lengths[rows], token_ids.shape[1], pad_multiple)
            features = (token_ids[rows, :width], segment_ids[rows, :width])
            yield (features, labels[rows]) if labels is not None else (features,)

    matrix = tf.TensorSpec((None, None), tf.int32)
    signature = ((matrix, matrix),)
    if labels is not None:
        signature += (tf.TensorSpec((None,), tf.int32),)
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    if seed is None:
        # A generator hides its length; Keras needs it for progress bars and epoch ends.
        batches = -(-len(lengths) // batch_size)
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return dataset.prefetch(tf.data.AUTOTUNE)
