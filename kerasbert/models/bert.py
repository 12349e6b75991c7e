"""Config → functional Keras 3 BERT with bert4keras's layer names.

The graph, per bert4keras 0.11.5 and Google's ``modeling.py``::

    Input-Token ─ Embedding-Token ─┐
    Input-Segment ─ Embedding-Segment ─ Embedding-Token-Segment (add)
      ─ Embedding-Position (add) ─ Embedding-Norm ─ Embedding-Dropout
      ─ L × [ Transformer-i-MultiHeadSelfAttention ─ -Dropout ─ -Add ─ -Norm
              Transformer-i-FeedForward ─ -Dropout ─ -Add ─ -Norm ]
      ─ heads (Pooler / NSP / MLM), if asked for

Token id 0 is padding: ``Embedding-Token`` emits a mask that every layer passes on
and attention honours, so outputs at real tokens do not depend on padding.
"""

import dataclasses
import os

import keras

from kerasbert.models import names
from kerasbert.models.audit import expected_rows
from kerasbert.models.config import check_maxlen
from kerasbert.models.families import variant_of
from kerasbert.models.heads import apply_mlm, apply_nsp, apply_pooler
from kerasbert.models.kernels import Dropout
from kerasbert.models.layers import (
    Add,
    FeedForward,
    MultiHeadSelfAttention,
    PositionEmbedding,
    ScaleFreeNorm,
    TokenEmbedding,
    get_activation,
    truncated_normal,
)
from kerasbert.models.positions import RelativePositions, RotaryPositions

# The keys that set the number of parameters, quoted when a model is too large.
SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
             "max_position_embeddings", "type_vocab_size")
BYTES_PER_WEIGHT = 4  # float32 variables, also under mixed precision


def _dropout_layer(rate, name, dtype):
    # bert4keras leaves the layer out when the rate is 0; the layer list matches.
    return Dropout(rate, name=name, dtype=dtype) if rate else None


def _dropout(x, rate, name, dtype):
    layer = _dropout_layer(rate, name, dtype)
    return layer(x) if layer is not None else x


def _norm(name, config, variant, dtype):
    if variant.scale_free_norm:
        return ScaleFreeNorm(epsilon=config.layer_norm_eps, name=name, dtype=dtype)
    return keras.layers.LayerNormalization(epsilon=config.layer_norm_eps, name=name, dtype=dtype)


def _dense(units, name, config, variant, dtype, activation=None):
    return keras.layers.Dense(units, activation=activation, use_bias=variant.use_bias,
                              kernel_initializer=truncated_normal(config.initializer_range),
                              name=name, dtype=dtype)


def _embeddings(token_ids, segment_ids, config, variant, dtype):
    width = config.embedding_size
    token_embedding = TokenEmbedding(
        config.vocab_size, width,
        embeddings_initializer=truncated_normal(config.initializer_range),
        mask_zero=True, tie_weights=True, name=names.EMBEDDING_TOKEN, dtype=dtype,
    )
    x = token_embedding(token_ids)
    if segment_ids is not None:
        s = keras.layers.Embedding(
            config.type_vocab_size, width,
            embeddings_initializer=truncated_normal(config.initializer_range),
            name=names.EMBEDDING_SEGMENT, dtype=dtype,
        )(segment_ids)
        x = Add(name=names.EMBEDDING_TOKEN_SEGMENT, dtype=dtype)([x, s])
    if variant.position == "absolute":
        x = PositionEmbedding(config.max_position_embeddings,
                              initializer_range=config.initializer_range,
                              name=names.EMBEDDING_POSITION, dtype=dtype)(x)
    norm = _norm(names.EMBEDDING_NORM, config, variant, dtype)
    if variant.scale_free_norm:  # RoFormer-v2: dropout first
        x = norm(_dropout(x, config.hidden_dropout_prob, names.EMBEDDING_DROPOUT, dtype))
    else:
        x = _dropout(norm(x), config.hidden_dropout_prob, names.EMBEDDING_DROPOUT, dtype)
    if width != config.hidden_size:  # ALBERT, ELECTRA: factorised embeddings
        x = _dense(config.hidden_size, names.EMBEDDING_MAPPING, config, variant, dtype)(x)
    return x, token_embedding


def _block_layers(block, block_name, config, variant, dtype):
    """``block`` and its Dropout, Add (residual) and Norm, named after ``block_name``."""
    return (block,
            _dropout_layer(config.hidden_dropout_prob, names.dropout_name(block_name), dtype),
            Add(name=names.add_name(block_name), dtype=dtype),
            _norm(names.norm_name(block_name), config, variant, dtype))


def _encoder_layers(config, variant, index, dtype):
    """The two residual blocks of encoder layer ``index`` (ALBERT: of every layer)."""
    attention_name, feed_forward_name = (
        (names.SHARED_ATTENTION, names.SHARED_FEED_FORWARD) if variant.shared_layers
        else (names.attention_name(index), names.feed_forward_name(index)))
    common = dict(initializer_range=config.initializer_range, use_bias=variant.use_bias,
                  dtype=dtype)
    position = variant.position if variant.position != "absolute" else None
    attention = MultiHeadSelfAttention(
        config.num_attention_heads, config.head_size,
        dropout=config.attention_probs_dropout_prob, position=position,
        name=attention_name, **common)
    feed_forward = FeedForward(config.intermediate_size, activation=config.hidden_act,
                               name=feed_forward_name, **common)
    return (_block_layers(attention, attention_name, config, variant, dtype),
            _block_layers(feed_forward, feed_forward_name, config, variant, dtype))


def _apply_block(x, layers, table=None):
    block, dropout, add, norm = layers
    y = block([x, table] if table is not None else x)
    y = dropout(y) if dropout is not None else y
    return norm(add([x, y]))


def _position_table(x, config, variant, dtype):
    if variant.position == "rotary":
        return RotaryPositions(config.head_size, name=names.EMBEDDING_ROTARY_POSITION,
                               dtype=dtype)(x)
    if variant.position == "relative":
        return RelativePositions(config.head_size, config.max_relative_position,
                                 name=names.EMBEDDING_RELATIVE_POSITION, dtype=dtype)(x)
    return None


def _heads(x, config, variant, token_embedding, with_pool, with_nsp, with_mlm,
           with_discriminator, dtype):
    if variant.heads == "electra":
        if not with_discriminator:
            return []
        x = _dense(config.hidden_size, names.DISCRIMINATOR_DENSE, config, variant, dtype,
                   activation=get_activation(config.hidden_act))(x)
        activation = "sigmoid" if with_discriminator is True else with_discriminator
        return [_dense(1, names.DISCRIMINATOR_PREDICTION, config, variant, dtype,
                       activation=activation)(x)]
    heads = []
    if with_pool or with_nsp:
        pooled = apply_pooler(x, config, "tanh" if with_pool in (True, False) else with_pool,
                              dtype=dtype)
        heads.append(apply_nsp(pooled, config, dtype=dtype) if with_nsp else pooled)
    if with_mlm:
        activation = "softmax" if with_mlm is True else with_mlm
        if variant.heads == "roformer_v2":
            if config.embedding_size != config.hidden_size:
                x = _dense(config.embedding_size, names.OUTPUT_MAPPING, config, variant, dtype)(x)
            x = _dropout(x, config.hidden_dropout_prob, names.OUTPUT_MLM_DROPOUT, dtype)
            x = token_embedding(x, reverse=True)
            heads.append(keras.layers.Activation(activation, name=names.OUTPUT_MLM_ACTIVATION,
                                                 dtype=dtype)(x))
        else:
            heads.append(apply_mlm(x, config, token_embedding, activation, dtype=dtype))
    return heads


def build_bert(config, with_pool=False, with_nsp=False, with_mlm=False, sequence_length=None,
               name=None, dtype=None, family="bert", with_discriminator=False):
    """Builds the functional graph of a BERT-family model for a :class:`BertConfig`.

    Args:
        config: the architecture.
        with_pool: add ``Pooler``/``Pooler-Dense``; True means tanh, a string names
            another activation. Implied by ``with_nsp``.
        with_nsp: add ``NSP-Proba`` on the pooled vector.
        with_mlm: add the masked-LM head; True means softmax, a string names another
            activation (``"linear"`` gives logits).
        sequence_length: fixed input length, or None for any length.
        name: the model's name.
        dtype: the dtype policy of every layer (``"mixed_bfloat16"``: bfloat16
            compute, float32 weights); None: Keras's global policy (float32 unless
            the caller changed it).
        family: a key of :data:`kerasbert.models.families.VARIANTS` (``"albert"``,
            ``"nezha"``, ``"roformer"``...): what the family changes in BERT's graph.
        with_discriminator: ELECTRA's replaced-token head (``Discriminator-Dense``,
            ``Discriminator-Prediction``); True means sigmoid.

    Returns:
        A ``keras.Model`` with int32 inputs ``Input-Token`` (and ``Input-Segment``
        when ``type_vocab_size > 0``). Outputs follow bert4keras: no head → the
        sequence output; one head → that head; several → a list (pooler/NSP, MLM).

    Raises:
        ValueError: an unknown family, a head the family does not have, the weights
            would not fit in this machine's memory, or ``sequence_length`` exceeds
            ``max_position_embeddings``; checked before any layer is made.
    """
    variant = variant_of(family, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
                         with_discriminator=with_discriminator)
    check_fits_in_memory(config, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
                         family=family, with_discriminator=with_discriminator)
    check_maxlen(dataclasses.replace(config, family=family), sequence_length,
                 flag="sequence_length")
    token_ids = keras.Input((sequence_length,), dtype="int32", name=names.INPUT_TOKEN)
    inputs = [token_ids]
    segment_ids = None
    if config.type_vocab_size > 0:
        segment_ids = keras.Input((sequence_length,), dtype="int32", name=names.INPUT_SEGMENT)
        inputs.append(segment_ids)

    x, token_embedding = _embeddings(token_ids, segment_ids, config, variant, dtype)
    table = _position_table(x, config, variant, dtype)
    shared = _encoder_layers(config, variant, 0, dtype) if variant.shared_layers else None
    for index in range(config.num_hidden_layers):
        attention, feed_forward = shared or _encoder_layers(config, variant, index, dtype)
        x = _apply_block(_apply_block(x, attention, table), feed_forward)

    heads = _heads(x, config, variant, token_embedding, with_pool, with_nsp, with_mlm,
                   with_discriminator, dtype)
    outputs = x if not heads else heads[0] if len(heads) == 1 else heads
    return keras.Model(inputs if len(inputs) > 1 else token_ids, outputs,
                       name=name or variant.default_name)


def parameter_count(config, with_pool=False, with_nsp=False, with_mlm=False, family=None,
                    with_discriminator=False):
    """The number of weights :func:`build_bert` makes for ``config`` (and ``family``, None:
    the config's), without building it.

    Example:
        >>> from kerasbert.models.config import BertConfig
        >>> config = BertConfig.from_json_file(
        ...     "checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
        >>> parameter_count(config), parameter_count(config, with_pool=True)
        (101677056, 102267648)
    """
    # Audit's formulas for one and for two encoder layers give the cost of a layer; a
    # config of a billion layers is then counted without listing a billion rows.
    one, two = (sum(row.expected for row in expected_rows(
        dataclasses.replace(config, num_hidden_layers=layers), with_pool, with_nsp, with_mlm,
        family=family, with_discriminator=with_discriminator))
        for layers in (1, 2))
    return one + (config.num_hidden_layers - 1) * (two - one)


def physical_memory():
    """This machine's memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits_in_memory(config, with_pool=False, with_nsp=False, with_mlm=False, family=None,
                         with_discriminator=False):
    """Raises before building when the weights alone would exceed this machine's memory.

    A config with a huge ``vocab_size`` or ``hidden_size`` (a typo, an extra digit)
    would otherwise be killed by the system, or fail deep in TensorFlow, mid-build.

    Raises:
        ValueError: ``model size in <config>: vocab_size=..., hidden_size=..., ... need
            about 1.1 TiB for the weights alone, more than this machine's 24 GiB of memory``.
    """
    needed = BYTES_PER_WEIGHT * parameter_count(config, with_pool, with_nsp, with_mlm, family,
                                                with_discriminator)
    memory = physical_memory()
    if memory and needed > memory:
        sizes = ", ".join(f"{key}={getattr(config, key)}" for key in SIZE_KEYS)
        raise ValueError(
            f"model size in {config.source}: {sizes} need about {_format_bytes(needed)} for "
            f"the weights alone, more than this machine's {_format_bytes(memory)} of memory")


def _format_bytes(count):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if count < 1024 or unit == "PiB":
            return f"{count:.3g} {unit}"
        count /= 1024
