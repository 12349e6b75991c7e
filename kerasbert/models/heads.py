"""Output heads: the CLS-token classifier and the taggers of sequence labelling (the pooler,
next-sentence prediction and the masked LM are BERT's family's own: a model object makes
them by name, with its prefix, and shares them as it shares its other layers).

Each ``apply_*`` function adds its layers to a functional graph under construction;
the names are bert4keras's (see :mod:`kerasbert.models.names`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras

from kerasbert.models import names
from kerasbert.models.crf import ConditionalRandomField
from kerasbert.models.kernels import Dropout
from kerasbert.models.layers import (
    FirstToken,
    truncated_normal,
)
from kerasbert.models.model import functional_model

# The CRF's transitions learn this many times faster than BERT's weights (bert4keras's
# lr_multiplier): at a fine-tuning rate of 1e-4 they move by about 0.02 per step.
CRF_LR_MULTIPLIER = 200

#: Heads whose output is a prediction, not a vector to classify.
PREDICTION_HEADS = (names.NSP_PROBA, names.MLM_ACTIVATION, names.OUTPUT_MLM_ACTIVATION,
                    names.DISCRIMINATOR_PREDICTION, names.LM_ACTIVATION)


def add_cls_classifier(model: keras.Model, num_labels: int, dropout_rate: float = 0.1,
                       activation: str | Callable[..., Any] = "softmax",
                       initializer_range: float = 0.02,
                       dtype: str | keras.DTypePolicy | None = None) -> keras.Model:
    """Adds a classifier on the [CLS] vector: ``CLS-token`` → dropout → ``dense_output``.

    On a model whose output is the sequence, ``CLS-token`` takes its first vector;
    on a model built ``with_pool=True`` the pooled vector is used as it is.

    Args:
        model: a model from :func:`kerasbert.build_transformer_model`.
        num_labels: number of classes (at least 1).
        dropout_rate: dropout before the dense layer; 0 omits the layer.
        activation: of ``dense_output`` ("softmax"; "linear" gives logits).
        initializer_range: stddev of the kernel's truncated-normal initializer
            (BERT's ``initializer_range``).
        dtype: the dtype policy of the head's layers; None: Keras's global policy
            (float32 unless changed), which keeps the head in float32 under a
            ``"mixed_bfloat16"`` encoder.

    Returns:
        A new ``keras.Model`` with the same inputs.

    Example:
        A tiny BERT (hidden size 16); the head adds 16·2 + 2 weights:

        >>> from kerasbert import build_transformer_model
        >>> bert = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32, max_position_embeddings=32, type_vocab_size=2))
        >>> bert.count_params(), add_cls_classifier(bert, num_labels=2).count_params()
        (6624, 6658)
    """
    if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
        raise ValueError(f"num_labels ({num_labels!r}) must be a positive integer")
    if not 0 <= dropout_rate < 1:
        raise ValueError(f"dropout_rate ({dropout_rate!r}) must be in [0, 1)")
    if len(model.outputs) != 1:
        raise ValueError(
            f"add_cls_classifier needs a model with one output; {model.name} has "
            f"{len(model.outputs)} (build it without the NSP/MLM heads)"
        )
    if any(layer.name == names.ENCODER_INPUT_TOKEN for layer in model.layers):
        raise ValueError(
            f"add_cls_classifier needs the sequence or pooled output; {model.name} is an "
            "encoder-decoder (T5) whose output is its decoder's next-token probabilities "
            "(a classifier on T5 is not built; generate() decodes it)")
    # A model's layers are those its output is computed from, so a prediction head
    # among them is the head its single output comes from.
    heads = [layer.name for layer in model.layers if layer.name in PREDICTION_HEADS]
    if heads:
        raise ValueError(
            f"add_cls_classifier needs the sequence or pooled output; {model.name} ends in "
            f"{heads[0]} (build it without the NSP/MLM heads"
            + ("; a GPT is a language model, with no sequence output to classify)"
               if heads[0] == names.LM_ACTIVATION else ")")
        )
    x = model.outputs[0]
    if len(x.shape) == 3:
        x = FirstToken(name=names.CLS_TOKEN, dtype=dtype)(x)
    if dropout_rate:
        x = Dropout(dropout_rate, name=names.CLS_DROPOUT, dtype=dtype)(x)
    outputs = keras.layers.Dense(
        num_labels,
        activation=activation,
        kernel_initializer=truncated_normal(initializer_range),
        name=names.CLS_DENSE,
        dtype=dtype,
    )(x)
    return functional_model(model.inputs, outputs, name=f"{model.name}_classifier")


def add_tagger(model: keras.Model, num_tags: int, crf: bool = True, dropout_rate: float = 0.1,
               initializer_range: float = 0.02, lr_multiplier: float = CRF_LR_MULTIPLIER,
               dtype: str | keras.DTypePolicy | None = None) -> keras.Model:
    """A tagger on ``model``'s sequence output: ``Tagger-Dropout``, ``Tagger-Dense`` and,
    with ``crf``, ``CRF``.

    Args:
        model: a model from :func:`kerasbert.build_transformer_model` without heads.
        num_tags: the number of tags (``O``, ``B-PER``, ``I-PER``...).
        crf: end in a CRF (trained with ``model.get_layer("CRF").loss``, decoded with its
            ``decode``); False: the scores alone, for a softmax over the tags.
        dropout_rate: before ``Tagger-Dense`` (0 leaves the layer out).
        initializer_range: the standard deviation of ``Tagger-Dense``'s kernel.
        lr_multiplier: the CRF's (see :class:`ConditionalRandomField`).
        dtype: the dtype policy of the dropout and dense layers; the CRF is float32.

    Returns:
        A ``keras.Model`` giving ``[batch, length, num_tags]`` scores, masked at padding.

    Example:
        >>> from kerasbert import build_transformer_model
        >>> bert = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32))
        >>> tagger = add_tagger(bert, num_tags=7)
        >>> tagger.get_layer("Tagger-Dense").count_params(), tagger.get_layer("CRF").count_params()
        (119, 49)
    """
    x = model.outputs[0]  # the sequence output
    if dropout_rate:
        x = Dropout(dropout_rate, name=names.TAGGER_DROPOUT, dtype=dtype)(x)
    x = keras.layers.Dense(num_tags, kernel_initializer=truncated_normal(initializer_range),
                           name=names.TAGGER_DENSE, dtype=dtype)(x)
    if crf:
        x = ConditionalRandomField(lr_multiplier, name=names.CRF, dtype="float32")(x)
    return functional_model(model.inputs, x, name=f"{model.name}_tagger")


def add_crf_tagger(model: keras.Model, num_tags: int, **options: Any) -> keras.Model:
    """:func:`add_tagger` with its CRF (bert4keras's sequence-labelling example)."""
    return add_tagger(model, num_tags, crf=True, **options)
