"""A classification run for serving: a TensorFlow SavedModel that classifies raw text.

The export follows TensorFlow Serving's layout, one numbered folder per version::

    <directory>/<version>/saved_model.pb  variables/  assets/vocab.txt

with two signatures:

    serving_default   token_ids, segment_ids (int32 [batch, length]) -> probabilities
    classify          text (string [batch]) [+ pair for sentence pairs]
                      -> label (string), label_id (int32), probabilities (float32 [batch, labels])

``classify`` runs the WordPiece tokenizer inside the graph
(:class:`kerasbert.serving.graph_text.TextEncoder`) and gives exactly the ids of
:class:`kerasbert.text.tokenizer.Tokenizer`. The layout and the writing are every task's
(:mod:`kerasbert.serving.saved_model`); the signatures are this task's.

An exporter takes a model, its vocabulary and its settings (labels, ``maxlen``), not a
run: a task's run passes its own (:meth:`kerasbert.tasks.classification.task.Run.export`).

Example::

    # runs/reviews: a finished run of `kerasbert train` (minutes)
    from kerasbert.tasks import open_run

    written = open_run("runs/reviews").export("exported/reviews")
    "exported/reviews/1/saved_model.pb" in written   # True
"""

import os
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from kerasbert.serving.graph_text import TextEncoder
from kerasbert.serving.saved_model import version_folder, write_archive


def export(model: Any, vocab: str | os.PathLike[str], directory: str | os.PathLike[str], *,
           labels: Sequence[str], maxlen: int, pairs: bool = False, version: int | None = None,
           overwrite: bool = False, source: str | None = None) -> list[str]:
    """Writes a classifier as ``<directory>/<version>/``, a SavedModel for TF Serving.

    Args:
        model: the classifier (token and segment ids -> probabilities).
        vocab: its ``vocab.txt``.
        directory: the model's base path (TF Serving's ``--model_base_path``); it may
            hold earlier versions, and nothing else.
        labels: the label of each probability, in order.
        maxlen: tokens per text, [CLS] and [SEP] included, for ``classify``.
        pairs: ``classify`` takes sentence pairs (``text`` and ``pair``).
        version: the version folder, a whole number >= 1; by default the one after the
            highest version already there (1 in a new directory).
        overwrite: replace an earlier export of this version (never anything else).
        source: the folder the model came from (its run directory), which the export must
            neither be nor hold.

    Returns:
        The paths of the files written, sorted.

    Raises:
        RunError: ``directory`` is ``source`` or holds it, is a file, or holds other
            files than version folders; ``version`` exists (without ``overwrite``), is not
            a SavedModel, or is not a whole number >= 1.

    Example::

        # a finished run of `kerasbert train`; exported/reviews: new
        run = open_run("runs/reviews")
        export(run.model, "runs/reviews/vocab.txt", "exported/reviews", labels=run.labels,
               maxlen=128)[0]   # 'exported/reviews/1/assets/vocab.txt'
    """
    directory = os.fspath(directory)
    target = version_folder(directory, source, version, overwrite)
    encoder = TextEncoder(os.fspath(vocab), maxlen)
    label_names = tf.constant(list(labels))

    def probabilities(token_ids: Any, segment_ids: Any) -> Any:
        return tf.cast(model([token_ids, segment_ids], training=False), tf.float32)

    def classify(text: Any, pair: Any = None) -> dict[str, Any]:
        found = probabilities(*encoder(text, pair))
        label_id = tf.argmax(found, axis=-1, output_type=tf.int32)
        return {"label": tf.gather(label_names, label_id), "label_id": label_id,
                "probabilities": found}

    ids = tf.TensorSpec((None, None), tf.int32)
    texts = tf.TensorSpec((None,), tf.string)
    endpoints: list[tuple[str, Callable[..., Any], list[Any]]] = [("serving_default",
                  lambda token_ids, segment_ids: {
                      "probabilities": probabilities(token_ids, segment_ids)},
                  [ids, ids])]
    if pairs:
        endpoints.append(("classify", lambda text, pair: classify(text, pair), [texts, texts]))
    else:
        endpoints.append(("classify", lambda text: classify(text), [texts]))
    return write_archive(target, [model, encoder], endpoints)
