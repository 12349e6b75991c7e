"""A tagger's outputs to entities: what ``predict`` and ``evaluate`` run, and what the
exported SavedModel's signatures run, the same functions for both (the reader in TensorFlow
ops, which it runs eagerly on every Keras backend).

:func:`best_tags` is the model and its decoding (the CRF's best path, or the best tag of
each token without a CRF); :class:`EntityReader` reads entities off the tag ids of ragged
rows as conlleval reads them, with the rule of
:func:`kerasbert.tasks.ner.entities.continues` as a table of tag pairs; :func:`token_entities`
is the reader over encoded sentences, their tokens mapped back to characters.

Example::

    reader = EntityReader(["O", "B-PER", "I-PER"])
    found = reader(tf.ragged.constant([[0, 1, 2, 0, 1]]), tf.ragged.constant([[0, 1, 2, 3, 4]]),
                   tf.ragged.constant([[1, 2, 3, 4, 5]]))
    found["type"].numpy(), found["start"].numpy(), found["end"].numpy()
    # [b'PER', b'PER'], [1, 4], [3, 5]
"""

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from keras import ops

from kerasbert.models import names
from kerasbert.tasks.ner.entities import OUTSIDE, continues, split_tag


def best_tags(model: Any, token_ids: Any, segment_ids: Any) -> tuple[Any, Any]:
    """``(tag_ids, scores)`` of a tagger for int32 ``[batch, length]`` ids: the CRF's best
    paths (or the highest score per token without a CRF), 0 at padding, and the float32
    scores ``[batch, length, tags]``. In ``keras.ops``: the export's graph on TensorFlow,
    ``predict`` and ``evaluate`` on every backend."""
    scores = ops.cast(model([token_ids, segment_ids], training=False), "float32")
    mask = ops.not_equal(token_ids, 0)
    if names.CRF in {layer.name for layer in model.layers}:
        best = ops.cast(model.get_layer(names.CRF).decode(scores, mask=mask), "int32")
    else:
        best = ops.where(mask, ops.cast(ops.argmax(scores, -1), "int32"), 0)
    return best, scores


def continuation_table(tags: Sequence[str]) -> np.ndarray:
    """``table[a, b]``: whether tag ``b`` after tag ``a`` continues the entity ``a`` is in
    (:func:`~kerasbert.tasks.ner.entities.continues`; False when ``a`` is ``O``).

    Example:
        >>> continuation_table(["O", "B-PER", "I-PER"]).astype(int).tolist()
        [[0, 0, 0], [0, 0, 1], [0, 0, 1]]
    """
    split = [split_tag(tag) for tag in tags]
    return np.array([[continues(a, b) for b in split] for a in split])


class EntityReader:
    """The entities in tag ids, for one list of tags.

    Args:
        tags: the tag of each id, in order (``O`` among them).

    Calling it with ragged ``[batch, None]`` ``tag_ids`` and each token's characters,
    ``starts`` and ``ends`` (int64, as ragged), gives ``{"row", "type", "start", "end"}``,
    one flat entry per entity in order: the row it is in (int64), its type (string) and its
    characters, from the first token's start to the last token's end.
    """

    def __init__(self, tags: Iterable[str]) -> None:
        tags = list(tags)
        self.outside = tags.index(OUTSIDE)
        self.continues = tf.constant(continuation_table(tags))
        self.kinds = tf.constant([split_tag(tag)[1] for tag in tags])

    def __call__(self, tag_ids: Any, starts: Any, ends: Any) -> dict[str, Any]:
        tags = tf.cast(tag_ids.flat_values, tf.int32)
        first, last, row = self._chunks(tags, tag_ids.value_rowids(), tag_ids.row_splits)
        return {"row": row, "type": tf.gather(self.kinds, tf.gather(tags, first)),
                "start": tf.gather(starts.flat_values, first),
                "end": tf.gather(ends.flat_values, last)}

    def _chunks(self, tags: Any, rows: Any, row_splits: Any) -> tuple[Any, Any, Any]:
        """``(first token, last token, row)`` of each entity, flat indices in order.

        An entity starts at a tag that is not ``O`` and does not continue the tag before
        it (``O`` before a row's first tag), and ends at a tag that is not ``O`` and that
        the next tag does not continue (``O`` after a row's last tag); the k-th start and
        the k-th end are one entity.
        """
        outside = self.outside
        position = tf.range(tf.size(tags, out_type=tf.int64))
        row_first = position == tf.gather(row_splits, rows)
        row_last = position == tf.gather(row_splits, rows + 1) - 1
        before = tf.where(row_first, outside, tf.concat([[outside], tags[:-1]], 0))
        after = tf.where(row_last, outside, tf.concat([tags[1:], [outside]], 0))
        tagged = tags != outside
        begins = tagged & ~tf.gather_nd(self.continues, tf.stack([before, tags], -1))
        stops = tagged & ~tf.gather_nd(self.continues, tf.stack([tags, after], -1))
        first = tf.where(begins)[:, 0]
        return first, tf.where(stops)[:, 0], tf.gather(rows, first)


def token_entities(reader: EntityReader, tag_ids: Sequence[Sequence[int]] | np.ndarray,
                   spans: Sequence[Sequence[tuple[int, int] | None]],
                   ) -> list[list[tuple[str, int, int]]]:
    """Character spans ``[(type, start, end)]`` of the entities of each sentence, read by
    ``reader`` off its predicted token tags.

    Args:
        reader: an :class:`EntityReader`.
        tag_ids: a row of tag ids per sentence, at least as long as its ``spans``.
        spans: each token's characters ``(start, end)``, None for [CLS] / [SEP], whose
            tags count as ``O`` (:func:`kerasbert.tasks.ner.data.token_tags`).

    Example:
        >>> token_entities(EntityReader(["O", "B-PER", "I-PER"]), [[0, 1, 2, 0]],
        ...                [[None, (0, 1), (1, 3), None]])
        [[('PER', 0, 3)]]
    """
    lengths = [len(row) for row in spans]
    flat = [span for row in spans for span in row]
    known = np.array([span is not None for span in flat], bool)
    tags = np.concatenate([np.asarray(ids[:n], np.int32) for ids, n in zip(tag_ids, lengths)]
                          + [np.zeros(0, np.int32)])
    chars = np.array([span or (0, 0) for span in flat], np.int64).reshape(-1, 2)

    def ragged(values: np.ndarray) -> Any:
        return tf.RaggedTensor.from_row_lengths(values, np.array(lengths, np.int64))

    found = reader(ragged(np.where(known, tags, reader.outside)), ragged(chars[:, 0]),
                   ragged(chars[:, 1]))
    entities: list[list[tuple[str, int, int]]] = [[] for _ in spans]
    for row, kind, start, end in zip(*(found[key].numpy().tolist()
                                       for key in ("row", "type", "start", "end"))):
        entities[row].append((kind.decode("utf-8"), start, end))
    return entities
