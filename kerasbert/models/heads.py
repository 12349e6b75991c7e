"""Output heads: pooler, next-sentence prediction, masked LM, and the CLS-token classifier.

Each ``apply_*`` function adds its layers to a functional graph under construction;
the names are bert4keras's (see :mod:`kerasbert.models.names`).
"""

import keras

from kerasbert.models import names
from kerasbert.models.layers import BiasAdd, FirstToken, get_activation


def _initializer(config):
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


def apply_pooler(sequence, config, activation="tanh"):
    """``Pooler`` (first token) then ``Pooler-Dense`` (H -> H, tanh by default)."""
    x = FirstToken(name=names.POOLER)(sequence)
    return keras.layers.Dense(
        config.hidden_size,
        activation=activation,
        kernel_initializer=_initializer(config),
        name=names.POOLER_DENSE,
    )(x)


def apply_nsp(pooled, config):
    """``NSP-Proba``: the two-way next-sentence softmax on the pooled vector."""
    return keras.layers.Dense(
        2, activation="softmax", kernel_initializer=_initializer(config), name=names.NSP_PROBA
    )(pooled)


def apply_mlm(sequence, config, token_embedding, activation="softmax"):
    """The masked-LM head, its output matrix tied to ``Embedding-Token``.

    ``MLM-Dense`` (H -> H, hidden_act), ``MLM-Norm``, the transposed token
    embedding, ``MLM-Bias`` (one bias per vocabulary entry), ``MLM-Activation``.
    """
    x = keras.layers.Dense(
        config.hidden_size,
        activation=get_activation(config.hidden_act),
        kernel_initializer=_initializer(config),
        name=names.MLM_DENSE,
    )(sequence)
    x = keras.layers.LayerNormalization(epsilon=config.layer_norm_eps, name=names.MLM_NORM)(x)
    x = token_embedding(x, reverse=True)
    x = BiasAdd(name=names.MLM_BIAS)(x)
    return keras.layers.Activation(activation, name=names.MLM_ACTIVATION)(x)


def add_cls_classifier(model, num_labels, dropout_rate=0.1, activation="softmax"):
    """Adds a classifier on the [CLS] vector: ``CLS-token`` → dropout → ``dense_output``.

    On a model whose output is the sequence, ``CLS-token`` takes its first vector;
    on a model built ``with_pool=True`` the pooled vector is used as it is.

    Args:
        model: a model from :func:`kerasbert.build_transformer_model`.
        num_labels: number of classes (at least 1).
        dropout_rate: dropout before the dense layer; 0 omits the layer.
        activation: of ``dense_output`` ("softmax"; "linear" gives logits).

    Returns:
        A new ``keras.Model`` with the same inputs.

    Example:
        >>> bert = build_transformer_model("checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
        >>> add_cls_classifier(bert, num_labels=2).count_params()
        101678594
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
    x = model.outputs[0]
    head = x._keras_history.operation.name
    if head in (names.NSP_PROBA, names.MLM_ACTIVATION):
        raise ValueError(
            f"add_cls_classifier needs the sequence or pooled output; {model.name} ends in "
            f"{head} (build it without the NSP/MLM heads)"
        )
    if len(x.shape) == 3:
        x = FirstToken(name=names.CLS_TOKEN)(x)
    if dropout_rate:
        x = keras.layers.Dropout(dropout_rate, name=names.CLS_DROPOUT)(x)
    stddev = 0.02
    outputs = keras.layers.Dense(
        num_labels,
        activation=activation,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=stddev),
        name=names.CLS_DENSE,
    )(x)
    return keras.Model(model.inputs, outputs, name=f"{model.name}_classifier")
