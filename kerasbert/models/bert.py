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
from kerasbert.models.heads import apply_mlm, apply_nsp, apply_pooler
from kerasbert.models.layers import (
    Add,
    FeedForward,
    MultiHeadSelfAttention,
    PositionEmbedding,
    TokenEmbedding,
    truncated_normal,
)

# The keys that set the number of parameters, quoted when a model is too large.
SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
             "max_position_embeddings", "type_vocab_size")
BYTES_PER_WEIGHT = 4  # float32 variables, also under mixed precision


def _dropout(x, rate, name, dtype):
    # bert4keras leaves the layer out when the rate is 0; the layer list matches.
    return keras.layers.Dropout(rate, name=name, dtype=dtype)(x) if rate else x


def _residual_block(x, block, block_name, config, dtype):
    """``block`` → Dropout → Add(residual) → Norm, named after ``block_name``."""
    y = block(x)
    y = _dropout(y, config.hidden_dropout_prob, names.dropout_name(block_name), dtype)
    y = Add(name=names.add_name(block_name), dtype=dtype)([x, y])
    return keras.layers.LayerNormalization(
        epsilon=config.layer_norm_eps, name=names.norm_name(block_name), dtype=dtype
    )(y)


def _embeddings(token_ids, segment_ids, config, dtype):
    token_embedding = TokenEmbedding(
        config.vocab_size,
        config.hidden_size,
        embeddings_initializer=truncated_normal(config.initializer_range),
        mask_zero=True,
        tie_weights=True,
        name=names.EMBEDDING_TOKEN,
        dtype=dtype,
    )
    x = token_embedding(token_ids)
    if segment_ids is not None:
        s = keras.layers.Embedding(
            config.type_vocab_size,
            config.hidden_size,
            embeddings_initializer=truncated_normal(config.initializer_range),
            name=names.EMBEDDING_SEGMENT,
            dtype=dtype,
        )(segment_ids)
        x = Add(name=names.EMBEDDING_TOKEN_SEGMENT, dtype=dtype)([x, s])
    x = PositionEmbedding(
        config.max_position_embeddings,
        initializer_range=config.initializer_range,
        name=names.EMBEDDING_POSITION,
        dtype=dtype,
    )(x)
    x = keras.layers.LayerNormalization(epsilon=config.layer_norm_eps, name=names.EMBEDDING_NORM,
                                        dtype=dtype)(x)
    x = _dropout(x, config.hidden_dropout_prob, names.EMBEDDING_DROPOUT, dtype)
    return x, token_embedding


def _encoder_layer(x, index, config, dtype):
    common = dict(initializer_range=config.initializer_range, dtype=dtype)
    attention = MultiHeadSelfAttention(
        config.num_attention_heads, config.head_size,
        dropout=config.attention_probs_dropout_prob, name=names.attention_name(index), **common)
    x = _residual_block(x, attention, names.attention_name(index), config, dtype)
    feed_forward = FeedForward(
        config.intermediate_size, activation=config.hidden_act,
        name=names.feed_forward_name(index), **common)
    return _residual_block(x, feed_forward, names.feed_forward_name(index), config, dtype)


def build_bert(config, with_pool=False, with_nsp=False, with_mlm=False, sequence_length=None,
               name=None, dtype=None):
    """Builds the functional BERT graph for a :class:`BertConfig`.

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

    Returns:
        A ``keras.Model`` with int32 inputs ``Input-Token`` (and ``Input-Segment``
        when ``type_vocab_size > 0``). Outputs follow bert4keras: no head → the
        sequence output; one head → that head; several → a list (pooler/NSP, MLM).

    Raises:
        ValueError: the weights would not fit in this machine's memory, or
            ``sequence_length`` exceeds ``max_position_embeddings``; checked before
            any layer is made.
    """
    check_fits_in_memory(config, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm)
    check_maxlen(config, sequence_length, flag="sequence_length")
    token_ids = keras.Input((sequence_length,), dtype="int32", name=names.INPUT_TOKEN)
    inputs = [token_ids]
    segment_ids = None
    if config.type_vocab_size > 0:
        segment_ids = keras.Input((sequence_length,), dtype="int32", name=names.INPUT_SEGMENT)
        inputs.append(segment_ids)

    x, token_embedding = _embeddings(token_ids, segment_ids, config, dtype)
    for index in range(config.num_hidden_layers):
        x = _encoder_layer(x, index, config, dtype)

    heads = []
    if with_pool or with_nsp:
        pooled = apply_pooler(x, config, "tanh" if with_pool in (True, False) else with_pool,
                              dtype=dtype)
        heads.append(apply_nsp(pooled, config, dtype=dtype)
                     if with_nsp else pooled)
    if with_mlm:
        heads.append(apply_mlm(x, config, token_embedding,
                               "softmax" if with_mlm is True else with_mlm, dtype=dtype))
    outputs = x if not heads else heads[0] if len(heads) == 1 else heads
    return keras.Model(inputs if len(inputs) > 1 else token_ids, outputs, name=name or "bert")


def parameter_count(config, with_pool=False, with_nsp=False, with_mlm=False):
    """The number of weights :func:`build_bert` makes for ``config``, without building it.

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
        dataclasses.replace(config, num_hidden_layers=layers), with_pool, with_nsp, with_mlm))
        for layers in (1, 2))
    return one + (config.num_hidden_layers - 1) * (two - one)


def physical_memory():
    """This machine's memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits_in_memory(config, with_pool=False, with_nsp=False, with_mlm=False):
    """Raises before building when the weights alone would exceed this machine's memory.

    A config with a huge ``vocab_size`` or ``hidden_size`` (a typo, an extra digit)
    would otherwise be killed by the system, or fail deep in TensorFlow, mid-build.

    Raises:
        ValueError: ``model size in <config>: vocab_size=..., hidden_size=..., ... need
            about 1.1 TiB for the weights alone, more than this machine's 24 GiB of memory``.
    """
    needed = BYTES_PER_WEIGHT * parameter_count(config, with_pool, with_nsp, with_mlm)
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
