"""A NER run for serving: a TensorFlow SavedModel that finds the entities of raw text.

The export has TF Serving's layout (see :mod:`kerasbert.serving.saved_model`) and two
signatures::

    serving_default   token_ids, segment_ids (int32 [batch, length])
                      -> tag_ids (int32 [batch, length], 0 at padding),
                         scores (float32 [batch, length, tags])
    entities          text (string [batch])
                      -> type, entity (string [batch, n]), start, end (int32 [batch, n]),
                         count (int32 [batch]): each text's entities in order, padded
                         with "" and -1 to the most entities of the batch

``entities`` does what :meth:`kerasbert.tasks.ner.task.Run.predict` does, in the graph: the
WordPiece tokens of the text and their characters (:meth:`TextEncoder.pieces`), the model,
the CRF's best path (or the best tag of each token without a CRF), and the entities read
off the tags as conlleval reads them, ``text[start:end]`` in characters (code points). The
chunking rule is a table of tag pairs asked of :func:`kerasbert.tasks.ner.entities.entity_spans`
when the model is exported, so the served model reads tags as the run's scores did.

Example::

    # runs/ner: a finished run of `kerasbert train --task ner`
    from kerasbert.tasks import open_run

    open_run("runs/ner").export("exported/ner")   # exported/ner/1/saved_model.pb ...
    served = tf.saved_model.load("exported/ner/1").signatures["entities"]
    served(text=tf.constant(["江泽民在北京会见了客人"]))["type"]   # [[b'PER', b'LOC']]
"""

import os

import numpy as np
import tensorflow as tf

from kerasbert.models import names
from kerasbert.serving.graph_text import TextEncoder, substrings
from kerasbert.serving.saved_model import version_folder, write_archive
from kerasbert.tasks.ner.entities import OUTSIDE, entity_spans, split_tag


def export(model, vocab, directory, *, tags, maxlen, version=None, overwrite=False,
           source=None):
    """Writes a tagger as ``<directory>/<version>/``, a SavedModel for TF Serving.

    Args:
        model: the tagger (token and segment ids -> a score per tag and token), with or
            without its ``CRF`` layer.
        vocab: its ``vocab.txt``.
        tags: the tag of each score, in order (``O`` among them).
        maxlen: tokens per text, [CLS] and [SEP] included, for ``entities``.
        directory, version, overwrite, source: as for
            :func:`kerasbert.serving.saved_model.version_folder`.

    Returns the paths written (:func:`~kerasbert.serving.saved_model.write_archive`);
    raises as :func:`~kerasbert.serving.saved_model.version_folder`.
    """
    directory = os.fspath(directory)
    target = version_folder(directory, source, version, overwrite)
    encoder = TextEncoder(os.fspath(vocab), maxlen)
    tags = list(tags)
    outside = tags.index(OUTSIDE)
    continues = tf.constant(continuation_table(tags))
    kinds = tf.constant([split_tag(tag)[1] for tag in tags])
    crf = (model.get_layer(names.CRF)
           if names.CRF in {layer.name for layer in model.layers} else None)

    def tagged(token_ids, segment_ids):
        scores = tf.cast(model([token_ids, segment_ids], training=False), tf.float32)
        mask = token_ids != 0
        if crf is not None:
            best = tf.cast(crf.decode(scores, mask=mask), tf.int32)
        else:
            best = tf.where(mask, tf.argmax(scores, -1, output_type=tf.int32), 0)
        return {"tag_ids": best, "scores": scores}

    def entities(text):
        ids, starts, ends, _ = encoder.pieces(text)
        starts, ends = starts[:, :encoder.maxlen - 2], ends[:, :encoder.maxlen - 2]
        best = tagged(*encoder.inputs(ids))["tag_ids"][:, 1:]
        tags = tf.RaggedTensor.from_tensor(best, lengths=starts.row_lengths()).flat_values
        first, last, row = _chunks(tags, starts.value_rowids(), starts.row_splits, continues,
                                   outside)
        start, end = tf.gather(starts.flat_values, first), tf.gather(ends.flat_values, last)
        words = substrings(text, row, start, end)
        batch = tf.shape(text, out_type=tf.int64)[0]

        def padded(values, fill):
            return tf.RaggedTensor.from_value_rowids(values, row, nrows=batch).to_tensor(fill)

        return {"type": padded(tf.gather(kinds, tf.gather(tags, first)), ""),
                "entity": padded(words, ""),
                "start": padded(tf.cast(start, tf.int32), -1),
                "end": padded(tf.cast(end, tf.int32), -1),
                "count": tf.cast(tf.math.bincount(row, minlength=batch, maxlength=batch,
                                                  dtype=tf.int64), tf.int32)}

    ids = tf.TensorSpec((None, None), tf.int32)
    return write_archive(target, [model, encoder],
                         [("serving_default", tagged, [ids, ids]),
                          ("entities", entities, [tf.TensorSpec((None,), tf.string)])])


def continuation_table(tags):
    """``table[a, b]``: whether tag ``b`` after tag ``a`` continues the entity ``a`` is in,
    as :func:`entity_spans` reads the pair (False when ``a`` is ``O``).

    Example:
        >>> continuation_table(["O", "B-PER", "I-PER"]).astype(int).tolist()
        [[0, 0, 0], [0, 0, 1], [0, 0, 1]]
    """
    return np.array([[a != OUTSIDE and entity_spans([a, b]) == [(split_tag(a)[1], 0, 2)]
                      for b in tags] for a in tags])


def _chunks(tags, rows, row_splits, continues, outside):
    """The entities in flat tag ids of ragged rows: ``(first token, last token, row)``
    of each, flat indices in order.

    An entity starts at a tag that is not ``O`` and does not continue the tag before it
    (``O`` before a row's first tag), and ends at a tag that is not ``O`` and that the
    next tag does not continue (``O`` after a row's last tag); the k-th start and the
    k-th end are one entity.
    """
    position = tf.range(tf.size(tags, out_type=tf.int64))
    row_first = position == tf.gather(row_splits, rows)
    row_last = position == tf.gather(row_splits, rows + 1) - 1
    before = tf.where(row_first, outside, tf.concat([[outside], tags[:-1]], 0))
    after = tf.where(row_last, outside, tf.concat([tags[1:], [outside]], 0))
    tagged = tags != outside
    begins = tagged & ~tf.gather_nd(continues, tf.stack([before, tags], -1))
    stops = tagged & ~tf.gather_nd(continues, tf.stack([tags, after], -1))
    first = tf.where(begins)[:, 0]
    return first, tf.where(stops)[:, 0], tf.gather(rows, first)
