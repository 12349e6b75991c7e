"""Masked-LM pretraining of a BERT on a text corpus, saved as a Google checkpoint.

The output directory, when the run is done::

    bert_model.ckpt.*      Google variable names, MLM head (cls/predictions/...) included
    bert_config.json       the given config with the reduced vocab_size
    vocab.txt              the reduced vocabulary (see kerasbert.pretraining.corpus.reduce_vocab)
    pretrain_config.json   the options; pretrain_metrics.json  MLM accuracy on --dev
    history.csv            loss and masked accuracy per epoch

A run is ``steps`` optimizer updates cut into epochs of ``steps_per_epoch``; each epoch
is backed up (``<output>/backup``), and a killed run continues with ``resume=True``.
Batches come from an endless plan: pass ``p`` over the corpus is ordered by
``(seed, p)`` and batch ``b`` of it masked by ``(seed, p, b)``, so the batches of step
``k`` are the same whether or not the run was interrupted before it.

Example:
    The shipped kerasbert-zh-small (38.5 minutes on 2 CPU cores)::

        summary = pretrain(PretrainOptions(
            config="kerasbert/resources/kerasbert-zh-small/bert_config.json",
            vocab="checkpoints/chinese_L-12_H-768_A-12/vocab.txt",
            corpus=["kerasbert/resources/reviews/train.tsv"],
            dev=["kerasbert/resources/reviews/dev.tsv"],
            output="runs/zh-small", steps=5000, steps_per_epoch=250, lr=5e-4))
        round(summary["dev"]["accuracy"], 3)   # 0.379
"""

import dataclasses
import logging
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any, cast

import keras
import numpy as np

from kerasbert.models import names
from kerasbert.models.build import build_transformer_model, resolve_config
from kerasbert.models.config import BertConfig, check_maxlen
from kerasbert.models.families import family_class
from kerasbert.models.families.base import Transformer
from kerasbert.models.model import functional_model
from kerasbert.pretraining import corpus
from kerasbert.pretraining.masking import Masker
from kerasbert.text.padding import sequence_padding
from kerasbert.training import batches
from kerasbert.training.callbacks import StopAtStep
from kerasbert.training.lifecycle import TrainingRun
from kerasbert.training.optimizer import make_optimizer
from kerasbert.training.options import PretrainOptions, validate  # noqa: F401 (PretrainOptions re-exported)
from kerasbert.training.rundir import PRETRAIN_FINISHED_FILE, PRETRAIN_OPTIONS_FILE

#: Dev masks come from this seed whatever the training seed, so runs compare.
DEV_MASK_SEED = 0
OPTIONS_FILE = PRETRAIN_OPTIONS_FILE
FINISHED = PRETRAIN_FINISHED_FILE
log = logging.getLogger(__name__)


def mlm_training_model(model: keras.Model) -> keras.Model:
    """``model``'s MLM head computed at the chosen positions only, for training.

    As in Google's ``run_pretraining.py`` (``masked_lm_positions``): the sequence output
    is gathered at the positions to predict before ``MLM-Dense``, so the vocabulary-sized
    output is computed for ~15% of the tokens. In a small model that output is a third
    of the work. The layers are ``model``'s own: training this model trains ``model``.

    Args:
        model: a model built ``with_mlm`` (and no other head).

    Returns:
        A ``keras.Model`` taking ``[token_ids, segment_ids, positions]`` (positions
        ``[batch, k]``, int32) and giving the MLM output ``[batch, k, vocab]``.
    """
    layers = [model.get_layer(name) for name in (names.MLM_DENSE, names.MLM_NORM,
                                                 names.EMBEDDING_TOKEN, names.MLM_BIAS,
                                                 names.MLM_ACTIVATION)]
    positions = keras.Input((None,), dtype="int32", name=names.INPUT_MLM_POSITIONS)
    x = keras.ops.take_along_axis(layers[0].input, keras.ops.expand_dims(positions, -1), axis=1)
    x = layers[1](layers[0](x))
    x = layers[2](x, reverse=True)
    x = layers[4](layers[3](x))
    return functional_model(model.inputs + [positions], x, name=f"{model.name}_mlm_training")


def mlm_batches(matrix: np.ndarray, masker: Masker, batch_size: int, seed: int,
                start_step: int = 0, shuffle: bool = True, gathered: bool = False,
                ) -> Iterator[tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]]:
    """Masked batches ``((token_ids, segment_ids), labels, weights)`` from a padded matrix.

    Args:
        matrix: int32 ``[sequences, maxlen]``, ``[CLS] ... [SEP]`` then [PAD].
        masker: a :class:`kerasbert.pretraining.masking.Masker`.
        batch_size: rows per batch.
        seed: draws the order of each pass (if ``shuffle``) and every mask.
        start_step: the batch to begin at, counted over the endless plan.
        shuffle: length-grouped random order, endless; False: one pass in file order.
        gathered: yield ``((token_ids, segment_ids, positions), labels, weights)`` with
            labels and weights at the chosen positions only (see
            :meth:`kerasbert.pretraining.masking.MaskedBatch.gathered`), for
            :func:`mlm_training_model`.

    Yields:
        numpy tuples; each batch is cut to its longest row (see
        :func:`kerasbert.training.batches.batch_width`).
    """
    lengths = np.count_nonzero(matrix, axis=1)
    per_pass = -(-len(matrix) // batch_size)
    data_pass, skip = divmod(start_step, per_pass)
    while True:
        plan = batches.length_grouped_batches(lengths, batch_size, seed if shuffle else None,
                                           data_pass)
        for index in range(skip, len(plan)):
            rows = plan[index]
            ids = matrix[rows, :batches.batch_width(lengths[rows], matrix.shape[1])]
            batch = masker(ids, np.random.default_rng([seed, data_pass, index]))
            if gathered:
                positions, labels, weights = batch.gathered(
                    min_k=int(np.ceil(masker.rate * ids.shape[1])))
                yield (batch.inputs, np.zeros_like(ids), positions), labels, weights
            else:
                yield (batch.inputs, np.zeros_like(ids)), batch.labels, batch.weights
        if not shuffle:
            return
        data_pass, skip = data_pass + 1, 0


def _dataset(matrix: np.ndarray, masker: Masker, batch_size: int, seed: int,
             start_step: int) -> Any:
    import tensorflow as tf

    ints = tf.TensorSpec((None, None), tf.int32)
    signature = ((ints, ints, ints), ints, tf.TensorSpec((None, None), tf.float32))
    dataset = tf.data.Dataset.from_generator(
        lambda: mlm_batches(matrix, masker, batch_size, seed, start_step, gathered=True),
        output_signature=signature)
    return dataset.prefetch(tf.data.AUTOTUNE)


def evaluate_mlm(model: keras.Model, matrix: np.ndarray, masker: Masker, batch_size: int = 64,
                 seed: int = DEV_MASK_SEED) -> dict[str, float]:
    """Masked-token accuracy and loss of an MLM model on fixed masks of ``matrix``.

    Args:
        model: a model built ``with_mlm``: True (probabilities) or ``"linear"`` (logits).
        matrix, masker, batch_size: as :func:`mlm_batches`.
        seed: the masks; the same seed gives the same masks.

    Returns:
        ``{"accuracy", "loss", "masked_tokens", "sequences"}``; accuracy and loss are
        over every chosen position ([MASK], random and kept alike), as Google reports.

    Example:
        The shipped kerasbert-zh-small on the first 64 dev reviews, cut to 64 tokens (on the
        whole dev text it scores 0.379, see its ``pretrain_metrics.json``):

        >>> from kerasbert.text.tokenizer import Tokenizer
        >>> from kerasbert.training.data import read_examples
        >>> small = "kerasbert/resources/kerasbert-zh-small"
        >>> bert = build_transformer_model(f"{small}/bert_config.json", small, with_mlm=True)
        >>> tokenizer = Tokenizer(f"{small}/vocab.txt")
        >>> texts = read_examples("kerasbert/resources/reviews/dev.tsv").texts[:64]
        >>> dev_matrix = tokenizer.encode_batch(texts, maxlen=64)[0]
        >>> result = evaluate_mlm(bert, dev_matrix, Masker.for_vocab(tokenizer.token_dict))
        >>> result["masked_tokens"], round(result["accuracy"], 2)
        (415, 0.41)
    """
    logits = model.get_layer(names.MLM_ACTIVATION).get_config()["activation"] == "linear"
    correct = total = 0
    loss = 0.0
    for features, labels, weights in mlm_batches(matrix, masker, batch_size, seed,
                                                 shuffle=False):
        chosen = weights > 0
        out = np.asarray(model(list(features), training=False))[chosen].astype(np.float64)
        target = labels[chosen]
        if logits:
            out -= out.max(-1, keepdims=True)
            log_p = out - np.log(np.exp(out).sum(-1, keepdims=True))
        else:
            log_p = np.log(np.maximum(out, 1e-30))
        correct += int((out.argmax(-1) == target).sum())
        loss -= float(log_p[np.arange(len(target)), target].sum())
        total += len(target)
    return {"accuracy": correct / max(total, 1), "loss": loss / max(total, 1),
            "masked_tokens": total, "sequences": len(matrix)}


def pretrain(options: PretrainOptions, callbacks: Sequence[keras.callbacks.Callback] = (),
             verbose: str | int = "auto") -> dict[str, Any]:
    """Pretrains a BERT with its MLM head; returns the summary (also ``pretrain_metrics.json``).

    ``options`` is a :class:`PretrainOptions`; ``callbacks`` and ``verbose`` and the
    errors of the run directory and of training are those of
    :func:`kerasbert.tasks.base.train`.

    Raises:
        kerasbert.training.data.DataError: a corpus file without text.
        kerasbert.training.rundir.RunError: also a config whose
            ``max_position_embeddings`` is below ``maxlen``.
    """
    started = time.time()
    validate(options)
    config = resolve_config(options.config, family=options.model)
    if not family_class(config.family).masked_lm:  # before anything is written
        where = "--model" if options.model else config.source
        raise ValueError(f"model family in {where}: pretraining trains BERT's masked-LM head "
                         f"(MLM-Dense, MLM-Norm, MLM-Bias), which {config.family} does not have")
    run = TrainingRun(options, OPTIONS_FILE, FINISHED, verbose=verbose).prepare()
    try:
        return _pretrain(options, run, config, callbacks, started)
    finally:
        run.release()


def _pretrain(options: PretrainOptions, run: TrainingRun, config: BertConfig,
              callbacks: Sequence[keras.callbacks.Callback], started: float) -> dict[str, Any]:
    prepared = _TrainingData.read(options)
    config = config.replace(vocab_size=len(prepared.vocab.tokens))
    check_maxlen(config, options.maxlen)
    if options.dev:
        corpus.read_corpus(options.dev, options.text_column)  # a bad dev file fails now
    log.info("corpus: %d texts, %d sequences, %d tokens, vocabulary %d of the full one",
             len(prepared.texts), len(prepared.matrix), int(np.count_nonzero(prepared.matrix)),
             len(prepared.vocab.tokens))

    epochs = -(-options.steps // options.steps_per_epoch)
    bert = build_transformer_model(config, options.checkpoint, model=config.family,
                                   with_mlm="linear",
                                   keep_tokens=prepared.vocab.keep_tokens, return_keras_model=False)
    model = mlm_training_model(bert.model)
    model.compile(
        optimizer=make_optimizer(model, options.lr, options.steps, options.warmup,
                                 options.weight_decay),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=options.jit_compile)
    model.optimizer.build(model.trainable_variables)  # its size, for the room check
    # built: its model is set
    run.start(model, epochs, last=cast(keras.Model, bert.model).weights)
    prepared.vocab.write(os.path.join(options.output, "vocab.txt"))
    recorder = run.fit(
        model, _dataset(prepared.matrix, prepared.masker, options.batch_size, options.seed,
                        run.first_epoch * options.steps_per_epoch),
        epochs=epochs, steps_per_epoch=options.steps_per_epoch,
        hint=f"lower --lr ({options.lr:g})", stop=[StopAtStep(options.steps)],
        callbacks=list(callbacks))
    summary = _write_results(options, bert, prepared)
    summary.update({
        "steps": int(model.optimizer.iterations.numpy()),
        "train": {key: values[-1] for key, values in recorder.history.items()},
        "resumed_at_epoch": run.first_epoch or None,
        "wall_seconds": round(time.time() - started, 1),
    })
    return run.finish(summary)


@dataclasses.dataclass
class _TrainingData:
    """The corpus of a run as the model sees it."""

    texts: list[str]
    vocab: corpus.CorpusVocab
    matrix: np.ndarray  # int32 [sequences, maxlen], padded
    masker: Masker

    @classmethod
    def read(cls, options: PretrainOptions) -> "_TrainingData":
        texts = corpus.read_corpus(options.corpus, options.text_column)
        vocab = corpus.reduce_vocab(options.vocab, texts)
        continuation = np.array([t.startswith("##") for t in vocab.tokens])
        matrix = sequence_padding(corpus.split_rows(vocab.rows, options.maxlen, continuation),
                                  dtype=np.int32)
        return cls(texts, vocab, matrix, Masker.for_vocab(vocab.token_dict))


def _write_results(options: PretrainOptions, bert: Transformer,
                   prepared: _TrainingData) -> dict[str, Any]:
    """Writes the checkpoint and config; returns the summary's figures of the model and data."""
    output = options.output
    dtype = None if options.save_dtype == "float32" else options.save_dtype
    bert.save_weights_as_checkpoint(os.path.join(output, "bert_model.ckpt"), dtype=dtype)
    bert.config.to_json_file(os.path.join(output, "bert_config.json"))
    summary = {
        "parameters": cast(keras.Model, bert.model).count_params(),  # built: its model is set
        "vocab_size": len(prepared.vocab.tokens),
        "corpus": {"files": list(options.corpus), "texts": len(prepared.texts),
                   "sequences": len(prepared.matrix),
                   "tokens": int(np.count_nonzero(prepared.matrix))},
    }
    if options.dev:
        from kerasbert.text.tokenizer import Tokenizer

        rows = corpus.token_rows(Tokenizer(prepared.vocab.token_dict),
                                 corpus.read_corpus(options.dev, options.text_column))
        dev = sequence_padding(corpus.split_rows(rows, options.maxlen), dtype=np.int32)
        summary["dev"] = {"files": list(options.dev), "mask_seed": DEV_MASK_SEED,
                          **evaluate_mlm(bert.model, dev, prepared.masker)}
    return summary
