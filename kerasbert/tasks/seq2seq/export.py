"""A seq2seq run for serving: a TensorFlow SavedModel that generates text from raw text.

The export has TF Serving's layout (see :mod:`kerasbert.serving.saved_model`) and two
signatures::

    serving_default   token_ids, segment_ids (int32 [batch, length])
                      -> probabilities (float32 [batch, length, vocab]): the MLM head
    generate          source (string [batch]) -> output (string [batch])

``generate`` does what :meth:`kerasbert.tasks.seq2seq.task.Run.predict` does, in the graph: the
source's WordPiece ids (:class:`~kerasbert.serving.graph_text.TextEncoder`, cut to
``maxlen - 2``) as ``[CLS] source [SEP]`` padded on the left, the decoding loop of
:func:`kerasbert.inference.generation.generate` with its key/value cache (greedy or beam
search, up to ``max_new_tokens``, each row ending at ``[SEP]``), and the new ids written
back as text (:class:`~kerasbert.serving.graph_text.TextDecoder`, as ``Tokenizer.decode``).

A T5 run's export does what its ``predict`` does: the source's pieces by its SentencePiece
model in the graph (``tensorflow_text.SentencepieceTokenizer``, the SentencePiece library
that :class:`~kerasbert.text.pieces.SentencePieceText` runs), cut to ``maxlen - 1`` and
closed by ``</s>``, padded on the right; the encoder once and the decoder through its caches;
the new ids written back as text by the same model. Its ``serving_default`` takes
``source_ids`` and ``target_ids`` and gives the decoder's probabilities.

Example::

    # runs/gen: a finished run of `kerasbert train --task seq2seq`
    from kerasbert.tasks import open_run

    open_run("runs/gen").export("exported/gen")   # exported/gen/1/saved_model.pb ...
    served = tf.saved_model.load("exported/gen/1").signatures["generate"]
    served(source=tf.constant(["江泽民在北京会见了新华社记者。这句话提到的人是谁？"]))["output"]
"""

import os
from typing import Any

import tensorflow as tf

from kerasbert.inference.generation import Seq2SeqDecoder, Settings, decoder_of, padded_width
from kerasbert.serving.graph_text import TextDecoder, TextEncoder, row_concat
from kerasbert.serving.saved_model import version_folder, write_archive


def export(model: Any, vocab: str | os.PathLike[str], directory: str | os.PathLike[str], *,
           maxlen: int, max_new_tokens: int, num_beams: int = 1, version: int | None = None,
           overwrite: bool = False, source: str | None = None) -> list[str]:
    """Writes a UniLM or T5 generator as ``<directory>/<version>/``, a SavedModel for TF
    Serving.

    Args:
        model: the run's model (token and segment ids -> the MLM head's probabilities,
            under UniLM's mask; or T5's source and target ids -> the decoder's).
        vocab: its ``vocab.txt`` (T5: its SentencePiece ``.model``).
        maxlen: the source is cut to ``maxlen - 2`` tokens, as the run cuts it.
        max_new_tokens, num_beams: the run's generation settings.
        directory, version, overwrite, source: as for
            :func:`kerasbert.serving.saved_model.version_folder`.

    Returns the paths written (:func:`~kerasbert.serving.saved_model.write_archive`);
    raises as :func:`~kerasbert.serving.saved_model.version_folder`.
    """
    directory = os.fspath(directory)
    target = version_folder(directory, source, version, overwrite)
    if isinstance(decoder_of(model), Seq2SeqDecoder):
        return _export_t5(model, os.fspath(vocab), target, maxlen, max_new_tokens, num_beams)
    encoder = TextEncoder(os.fspath(vocab), maxlen)
    decoder = TextDecoder(os.fspath(vocab))
    generator = decoder_of(model)
    settings = Settings(int(max_new_tokens), end_ids=(encoder.sep_id,),
                        num_beams=int(num_beams))
    settings.check()

    def probabilities(token_ids: Any, segment_ids: Any) -> dict[str, Any]:
        return {"probabilities": tf.cast(model([token_ids, segment_ids], training=False),
                                         tf.float32)}

    def generate(source: Any) -> dict[str, Any]:
        ids = encoder.rows(encoder.token_ids(source))[0]
        lengths = ids.row_lengths()
        # Padded on the left, as generate() pads its prompts.
        width = padded_width(tf.reduce_max(tf.concat([lengths, [1]], 0)))
        column = tf.range(width)[None, :] - (width - lengths)[:, None]
        prompts = tf.where(column >= 0, tf.gather(ids.to_tensor(0, shape=[ids.nrows(), width]),
                                                  tf.maximum(column, 0), batch_dims=1), 0)
        prompts = tf.cast(prompts, tf.int32)
        rows = tf.shape(prompts)[0]
        new, counts = generator.run(prompts, tf.zeros_like(prompts), tf.ones((rows,), tf.int32),
                                    tf.constant([0, 0], tf.int32), settings)
        return {"output": decoder(tf.RaggedTensor.from_tensor(new, lengths=counts))}

    ids = tf.TensorSpec((None, None), tf.int32)
    return write_archive(target, [model, encoder, decoder],
                         [("serving_default", probabilities, [ids, ids]),
                          ("generate", generate, [tf.TensorSpec((None,), tf.string)])])


def _export_t5(model: Any, sp_model: str, target: str, maxlen: int, max_new_tokens: int,
               num_beams: int) -> list[str]:
    """A T5 generator's SavedModel into ``target``, its SentencePiece model in the graph."""
    import tensorflow_text

    from kerasbert.text.pieces import SentencePieceText

    text = SentencePieceText(sp_model)  # refuses a model T5 cannot read
    with open(sp_model, "rb") as f:
        pieces = tensorflow_text.SentencepieceTokenizer(model=f.read(), out_type=tf.int32)
    generator = decoder_of(model)
    settings = Settings(int(max_new_tokens), end_ids=(text.end_id,), num_beams=int(num_beams))
    settings.check()

    def probabilities(source_ids: Any, target_ids: Any) -> dict[str, Any]:
        return {"probabilities": tf.cast(model([source_ids, target_ids], training=False),
                                         tf.float32)}

    def generate(source: Any) -> dict[str, Any]:
        ids = row_concat([tf.cast(pieces.tokenize(source), tf.int64)[:, :maxlen - 1],
                          [text.end_id]])
        # Padded on the right, as generate() pads an encoder's sources.
        width = padded_width(tf.reduce_max(tf.concat([ids.row_lengths(), [1]], 0)))
        prompts = tf.cast(ids.to_tensor(0, shape=[ids.nrows(), width]), tf.int32)
        rows = tf.shape(prompts)[0]
        new, counts = generator.run(prompts, tf.zeros_like(prompts), tf.zeros((rows,), tf.int32),
                                    tf.constant([0, 0], tf.int32), settings)
        new = tf.RaggedTensor.from_tensor(new, lengths=counts)
        # Ids past the model's pieces (a head wider than its vocabulary) are left out, as
        # SentencePieceText.decode leaves them out.
        new = tf.ragged.boolean_mask(new, new < text.vocab_size)
        return {"output": pieces.detokenize(new)}

    ids = tf.TensorSpec((None, None), tf.int32)
    return write_archive(target, [model, pieces],
                         [("serving_default", probabilities, [ids, ids]),
                          ("generate", generate, [tf.TensorSpec((None,), tf.string)])])

