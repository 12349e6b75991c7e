"""A similarity run for serving: a TensorFlow SavedModel that compares and embeds raw text.

The export has TF Serving's layout (see :mod:`kerasbert.serving.saved_model`) and three
signatures::

    serving_default   token_ids, segment_ids (int32 [batch, length])
                      -> vector (float32 [batch, hidden])
    similarity        text_a, text_b (string [batch])
                      -> similarity (float32 [batch], the cosine of the two texts' vectors),
                         label (int32 [batch], 1 where the similarity is at least the run's
                         threshold; none for a run on graded labels); text_a and text_b
                         must hold as many texts
    embed             text (string [batch]) -> vector (float32 [batch, hidden])

``similarity`` and ``embed`` run the WordPiece tokenizer in the graph
(:class:`kerasbert.serving.graph_text.TextEncoder`) and give what
:meth:`kerasbert.tasks.similarity.task.Run.predict` and ``Run.embed`` give.

Example::

    # runs/pairs: a finished run of `kerasbert train --task similarity`
    from kerasbert.tasks import open_run

    open_run("runs/pairs").export("exported/pairs")   # exported/pairs/1/saved_model.pb ...
    served = tf.saved_model.load("exported/pairs/1").signatures["similarity"]
    served(text_a=tf.constant(["江泽民会见了克林顿。"]),
           text_b=tf.constant(["克林顿访问北京。"]))["similarity"]
"""

import os
from typing import Any

import tensorflow as tf

from kerasbert.serving.graph_text import TextEncoder, same_count
from kerasbert.serving.saved_model import version_folder, write_archive


def export(model: Any, vocab: str | os.PathLike[str], directory: str | os.PathLike[str], *,
           threshold: float | None, maxlen: int, version: int | None = None,
           overwrite: bool = False, source: str | None = None) -> list[str]:
    """Writes a run's encoder as ``<directory>/<version>/``, a SavedModel for TF Serving.

    Args:
        model: the encoder (token and segment ids -> a vector per text).
        vocab: its ``vocab.txt``.
        threshold: the cosine from which ``similarity`` calls a pair 1 (None: no label,
            a run on graded labels).
        maxlen: tokens per text, [CLS] and [SEP] included.
        directory, version, overwrite, source: as for
            :func:`kerasbert.serving.saved_model.version_folder`.

    Returns the paths written (:func:`~kerasbert.serving.saved_model.write_archive`);
    raises as :func:`~kerasbert.serving.saved_model.version_folder`.
    """
    directory = os.fspath(directory)
    target = version_folder(directory, source, version, overwrite)
    encoder = TextEncoder(os.fspath(vocab), maxlen)

    def vector(token_ids: Any, segment_ids: Any) -> dict[str, Any]:
        return {"vector": tf.cast(model([token_ids, segment_ids], training=False), tf.float32)}

    def embed(text: Any) -> dict[str, Any]:
        return vector(*encoder(text))

    def similarity(text_a: Any, text_b: Any) -> dict[str, Any]:
        text_a, text_b = same_count(text_a, text_b, "text_a", "text_b")
        a, b = (tf.math.l2_normalize(embed(text)["vector"], axis=-1, epsilon=1e-24)
                for text in (text_a, text_b))
        cosine = tf.reduce_sum(a * b, axis=-1)
        if threshold is None:  # a run on graded labels
            return {"similarity": cosine}
        return {"similarity": cosine,
                "label": tf.cast(cosine >= tf.constant(threshold, tf.float32), tf.int32)}

    ids = tf.TensorSpec((None, None), tf.int32)
    texts = tf.TensorSpec((None,), tf.string)
    return write_archive(target, [model, encoder],
                         [("serving_default", vector, [ids, ids]),
                          ("similarity", similarity, [texts, texts]),
                          ("embed", embed, [texts])])
