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
model's tags and the entities are the graph functions ``predict`` runs
(:mod:`kerasbert.tasks.ner.decoding`); only the tokens come from other code, the
Tokenizer's rules in TensorFlow ops.

Example::

    # runs/ner: a finished run of `kerasbert train --task ner`
    from kerasbert.tasks import open_run

    open_run("runs/ner").export("exported/ner")   # exported/ner/1/saved_model.pb ...
    served = tf.saved_model.load("exported/ner/1").signatures["entities"]
    served(text=tf.constant(["江泽民在北京会见了客人"]))["type"]   # [[b'PER', b'LOC']]
"""

import os
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from kerasbert.serving.graph_text import TextEncoder, substrings
from kerasbert.serving.saved_model import version_folder, write_archive
from kerasbert.tasks.ner.decoding import EntityReader, best_tags


def export(model: Any, vocab: str | os.PathLike[str], directory: str | os.PathLike[str], *,
           tags: Sequence[str], maxlen: int, version: int | None = None, overwrite: bool = False,
           source: str | None = None) -> list[str]:
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
    reader = EntityReader(tags)

    def tagged(token_ids: Any, segment_ids: Any) -> dict[str, Any]:
        best, scores = best_tags(model, token_ids, segment_ids)
        return {"tag_ids": best, "scores": scores}

    def entities(text: Any) -> dict[str, Any]:
        ids, starts, ends, _ = encoder.pieces(text)
        starts, ends = starts[:, :encoder.maxlen - 2], ends[:, :encoder.maxlen - 2]
        best = best_tags(model, *encoder.inputs(ids))[0][:, 1:]
        found = reader(tf.RaggedTensor.from_tensor(best, lengths=starts.row_lengths()),
                       starts, ends)
        row, start, end = found["row"], found["start"], found["end"]
        batch = tf.shape(text, out_type=tf.int64)[0]

        def padded(values: Any, fill: Any) -> Any:
            return tf.RaggedTensor.from_value_rowids(values, row, nrows=batch).to_tensor(fill)

        return {"type": padded(found["type"], ""),
                "entity": padded(substrings(text, row, start, end), ""),
                "start": padded(tf.cast(start, tf.int32), -1),
                "end": padded(tf.cast(end, tf.int32), -1),
                "count": tf.cast(tf.math.bincount(row, minlength=batch, maxlength=batch,
                                                  dtype=tf.int64), tf.int32)}

    ids = tf.TensorSpec((None, None), tf.int32)
    return write_archive(target, [model, encoder],
                         [("serving_default", tagged, [ids, ids]),
                          ("entities", entities, [tf.TensorSpec((None,), tf.string)])])
