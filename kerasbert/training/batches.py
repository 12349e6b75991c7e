"""Examples to batches: token ids, length-grouped batch plans, ``tf.data`` pipelines.

Batches are cut to their longest row (dynamic padding), and an epoch's order is drawn
from ``(seed, epoch)`` alone, so a resumed run sees the batches an uninterrupted one does.
"""

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from kerasbert.training.data import Examples


def encode_examples(tokenizer: Any, examples: Examples, maxlen: int | None) -> Any:
    """Token and segment ids of every example, padded to the longest: ``(ids, segments)``."""
    pairs = examples.pairs if examples.pairs and examples.pairs[0] is not None else None
    return tokenizer.encode_batch(examples.texts, pairs=pairs, maxlen=maxlen)


def length_grouped_batches(lengths: Sequence[int] | np.ndarray, batch_size: int,
                           seed: int | None = None, epoch: int = 0,
                           group: int = 50) -> list[np.ndarray]:
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


def batch_width(lengths: Sequence[int] | np.ndarray, limit: int, pad_multiple: int = 8) -> int:
    """The width a batch is cut to: its longest row rounded up to ``pad_multiple``, at most
    ``limit`` (few distinct shapes, so few retraces)."""
    width = -(-max(int(np.max(lengths)), 1) // pad_multiple) * pad_multiple
    return int(min(width, limit))


def describe_cap(maxlen: int | None, token_ids: Any, flag: str = "--maxlen",
                 data: str = "--train") -> str | None:
    """One line saying that ``maxlen`` is far above (more than twice) the longest row of
    ``token_ids`` (the training set, each row cut to ``maxlen`` and padded to the longest),
    or None. Such a cap costs nothing itself, since every batch is cut to its longest row,
    but it reads every text whole: the line gives the widths that the steps then take.

    Example:
        >>> describe_cap(1000, np.ones((4, 300), "int32"))[:66]
        '--maxlen 1000 is far above the longest text of --train (300 tokens'
    """
    token_ids = np.asarray(token_ids)
    if token_ids.ndim != 2 or not len(token_ids) or not maxlen or maxlen <= 2 * token_ids.shape[1]:
        return None
    lengths = row_lengths(token_ids)
    longest, median = int(lengths.max()), int(np.median(lengths))
    return (f"{flag} {maxlen} is far above the longest text of {data} ({longest} tokens, the "
            f"median {median}): it cuts nothing, every text is read whole, and a batch is as "
            f"wide as its longest text, so steps over the longest texts take longer (attention "
            f"grows with the square of the width); a lower {flag} cuts them")


def row_lengths(*matrices: Any) -> np.ndarray:
    """Each row's length: one past the last position where any of ``matrices`` is not 0
    (a T5 row's decoder ids start with id 0 and may run past its encoder ids)."""
    lengths: Any = 0
    for matrix in matrices:
        present = np.asarray(matrix) != 0
        last = present.shape[1] - np.argmax(present[:, ::-1], axis=1)
        lengths = np.maximum(lengths, np.where(present.any(axis=1), last, 0))
    return lengths


def make_dataset(token_ids: np.ndarray, segment_ids: np.ndarray, labels: Any = None,
                 batch_size: int = 32, seed: int | None = None, first_epoch: int = 0,
                 pad_multiple: int = 8) -> Any:
    """A ``tf.data.Dataset`` of ``((token_ids, segment_ids), labels)`` batches; ``labels``
    has one id (or a row of ids) per sequence, or one per token (the shape of
    ``token_ids``: cut with the tokens). A T5's are its encoder ids, decoder ids and
    labels; a row is as long as the longest of them (:func:`row_lengths`).

    Batches are cut to their longest row, rounded up to ``pad_multiple`` (dynamic
    padding: few distinct shapes, so few retraces). Without a ``seed``: one pass in
    file order. With a ``seed``: endless, epoch after epoch from ``first_epoch``, each
    length-grouped and shuffled (see :func:`length_grouped_batches`); give ``fit``
    its ``steps_per_epoch``.
    """
    import itertools

    import tensorflow as tf

    labels = None if labels is None else np.asarray(labels)
    per_token = labels is not None and labels.shape[1:] == token_ids.shape[1:]
    lengths = row_lengths(token_ids, segment_ids, *([labels] if per_token else []))
    epochs = itertools.count(first_epoch) if seed is not None else [0]

    def generate() -> Iterator[tuple[Any, ...]]:
        plan = (rows for epoch in epochs
                for rows in length_grouped_batches(lengths, batch_size, seed, epoch))
        for rows in plan:
            width = batch_width(lengths[rows], token_ids.shape[1], pad_multiple)
            features = (token_ids[rows, :width], segment_ids[rows, :width])
            if labels is None:
                yield (features,)
            elif per_token:  # one label per token: cut like the tokens
                yield features, labels[rows, :width]
            else:
                yield features, labels[rows]

    matrix = tf.TensorSpec((None, None), tf.int32)
    signature: tuple[Any, ...] = ((matrix, matrix),)
    if labels is not None:
        signature += (tf.TensorSpec((None,) * labels.ndim, tf.int32),)
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    if seed is None:
        # A generator hides its length; Keras needs it for progress bars and epoch ends.
        batches = -(-len(lengths) // batch_size)
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return dataset.prefetch(tf.data.AUTOTUNE)
