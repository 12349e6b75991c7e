"""GAU-α (ZhuiyiAI): RoFormer-v2 whose layers are each one gated attention unit.

The graph, as the published ``GAU_alpha`` class builds it on bert4keras 0.11.5's
``RoFormerV2`` and ``GatedAttentionUnit``::

    Input-Token ─ Embedding-Token ─┐
    Input-Segment ─ Embedding-Segment ─ Embedding-Token-Segment (add)
      ─ Embedding-Dropout ─ Embedding-Norm          (Embedding-Rotary-Position beside)
      ─ L × [ Transformer-i-GatedAttentionUnit ─ -Dropout ─ -Add ─ -Norm ]
      ─ Output-MLM-Dropout ─ Embedding-Token (transposed) ─ Output-MLM-Activation, if asked for

A unit replaces both attention and feed-forward: ``u, v, z = split(act(x W_i))`` (widths
I, I, S: ``intermediate_size`` and ``attention_key_size``), one head whose queries and keys
are ``z`` scaled feature by feature and rotated by their positions, and the output
``(u ⊙ A v) W_o``. The attention ``A`` is bert4keras's ``softmax_plus``: the scores
``q·k / sqrt(S)`` times ``log(max(n, 16)) / log(512)``, n the number of keys the query may
see, so that attention spreads no thinner over a long input than over the 512 tokens it was
trained on. Norms have no weights (RoFormer-v2's); nothing has a bias.

The checkpoint keeps BERT's embeddings (``bert/embeddings/word_embeddings``,
``token_type_embeddings``) and stores each unit under ``GAU_alpha/encoder/layer_{i}/gau/``.

Audit: ``Embedding-Token`` V·H, ``Embedding-Segment`` T·H, each unit H(3I+S)+2S (its
input product H·(2I+S), its output product I·H, the query and key scales S each); no norm
rows and no head rows (the MLM head is the tied embedding).
"""

from __future__ import annotations

import math
from collections.abc import Container
from typing import TYPE_CHECKING, Any

import keras
from keras import ops

from kerasbert.models import names
from kerasbert.models.checkpoint_names import WORD_EMBEDDINGS
from kerasbert.models.families.base import AuditRow, Step
from kerasbert.models.families.roformer import RoFormerV2
from kerasbert.models.kernels import Dropout
from kerasbert.models.layers import (
    ProjectionOwner,
    attend,
    get_activation,
    initializer_config,
    kernel_initializer,
)
from kerasbert.models.positions import rotate

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig

def unit_name(index: int) -> str:
    """``unit_name(0) -> "Transformer-0-GatedAttentionUnit"``."""
    return f"Transformer-{index}-GatedAttentionUnit"


def key_size(config: BertConfig) -> int:
    """The width of the queries and keys: the config's ``attention_key_size``, else
    ``hidden_size / num_attention_heads`` (bert4keras's default).

    Raises:
        ValueError: not a positive even integer (rotary positions turn pairs of features).

    Example:
        >>> from kerasbert.models.config import BertConfig
        >>> key_size(BertConfig.from_dict(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=1,
        ...     intermediate_size=32, attention_key_size=8), family="gau_alpha"))
        8
    """
    size = config.extra.get("attention_key_size") or config.head_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 2 or size % 2:
        raise ValueError(f"attention_key_size ({size!r}) in {config.source}: must be a "
                         "positive even integer (rotary positions turn pairs of features)")
    return size


@keras.saving.register_keras_serializable(package=names.SERIALIZATION_PACKAGE)
class GatedAttentionUnit(ProjectionOwner, keras.layers.Layer):
    """GAU-α's layer: one-head attention gating a feed-forward, bias-free, called on
    ``[hidden states, rotary position table]`` (and the attention mask, last, with
    ``attention_mask=True``). Padding is never attended to. Its two products are
    :class:`~kerasbert.models.layers.Projection` layers, ``input`` (to ``u``, ``v`` and the
    queries' and keys' ``z``) and ``output``, which LoRA and Keras's quantization reach.

    Args:
        units: the width I of ``u`` and ``v`` (``intermediate_size``).
        key_size: the width S of queries and keys (``attention_key_size``).
        activation: of the input product (GAU-α: ``"swish"``).
        dropout: on the attention probabilities.
        initializer_range: stddev of the truncated-normal kernel initializer.
        initializer: another kernel initializer instead.
        attention_mask: True when the layer is also given ``(batch or 1, length, length)``
            booleans (a causal LM's, UniLM's).

    Example:
        >>> from kerasbert.models.positions import RotaryPositions
        >>> x = keras.ops.zeros((1, 5, 16))
        >>> unit = GatedAttentionUnit(units=32, key_size=8)
        >>> tuple(unit([x, RotaryPositions(8)(x)]).shape), unit.count_params()
        ((1, 5, 16), 1680)
    """

    PROJECTED = ("input", "output")
    #: The LoRA targets that name its products: the input product makes the queries, the
    #: keys and the values at once.
    LORA_PROJECTIONS = {"query": ("input",), "key": ("input",), "value": ("input",),
                        "attention_output": ("output",)}

    def __init__(self, units: int, key_size: int, activation: str = "swish",
                 dropout: float = 0.0, initializer_range: float = 0.02,
                 initializer: Any = None, attention_mask: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.units = units
        self.key_size = key_size
        self.activation = activation
        self.activation_fn = get_activation(activation)
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.initializer = initializer
        self.attention_mask = attention_mask
        self.supports_masking = True
        self.probability_dropout = Dropout(dropout, dtype=self.dtype_policy) if dropout else None

    def build(self, input_shape: Any) -> None:
        hidden = input_shape[0][-1]
        initializer = kernel_initializer(self)
        self.make_projection("input", 2 * self.units + self.key_size, hidden, False,
                             initializer)
        self.make_projection("output", hidden, self.units, False, initializer)
        self.query_gamma = self.add_weight(name="query_gamma", shape=(self.key_size,),
                                           initializer="ones")
        self.key_gamma = self.add_weight(name="key_gamma", shape=(self.key_size,),
                                         initializer="ones")

    def call(self, inputs: Any, mask: Any = None, training: Any = None) -> Any:
        x, table = inputs[0], inputs[1]
        allowed = inputs[2] if self.attention_mask else None
        mask = mask[0] if isinstance(mask, (list, tuple)) else mask
        # Shapes: B batch, T length, H hidden, I units, S key size; one head.
        # u, v (B, T, I) and z (B, T, S).
        rows = self.input_dense(ops.reshape(x, (-1, x.shape[-1])))  # (B*T, 2I+S)
        u, v, z = ops.split(
            self.activation_fn(ops.reshape(rows, (*ops.shape(x)[:2], rows.shape[-1]))),
            [self.units, 2 * self.units], axis=-1)
        # One head, as an axis of 1: (B, 1, T, S) queries and keys, (B, 1, T, I) values.
        query = rotate(ops.expand_dims(z * self.query_gamma, 1), table)
        key = rotate(ops.expand_dims(z * self.key_gamma, 1), table)
        context = attend(query, key, ops.expand_dims(v, 1), scale=1.0 / math.sqrt(self.key_size),
                         key_mask=mask, allowed=allowed, normalization="softmax_plus",
                         dropout=self.probability_dropout, training=training)
        gated = u * context[:, 0]
        output = self.output_dense(ops.reshape(gated, (-1, self.units)))
        return ops.reshape(output, (*ops.shape(x)[:2], output.shape[-1]))

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[0]

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return mask[0] if isinstance(mask, (list, tuple)) else mask

    def get_config(self) -> dict[str, Any]:
        config = {**super().get_config(), "units": self.units, "key_size": self.key_size,
                  "activation": self.activation, "dropout": self.dropout,
                  "initializer_range": self.initializer_range, **initializer_config(self)}
        return {**config, "attention_mask": True} if self.attention_mask else config


class GAUAlpha(RoFormerV2):
    """GAU-α (``model="gau_alpha"``): RoFormer-v2's embeddings, norms and MLM head around
    one :class:`GatedAttentionUnit` per layer."""

    model_type = "gau_alpha"
    default_name = "gau_alpha"
    factorised = False  # its checkpoints have no Embedding-Mapping / Output-Mapping names
    marker_layer = unit_name(0)
    checkpoint_pattern = r"GAU_alpha/"
    checkpoint_description = "a GAU-α"
    attention_options = ()  # gated units: no MultiHeadSelfAttention

    @property
    def attention_key_size(self) -> int:
        """The width of queries, keys and the rotary table: :func:`key_size`."""
        return key_size(self.config)

    def apply_main_layers(self, inputs: keras.KerasTensor, index: int,
                          step: Step | None = None) -> keras.KerasTensor:
        """Layer ``index``: ``Norm(x + Dropout(unit([x, positions, mask])))``."""
        name = unit_name(index)
        extra = [bias for bias in (self.compute_position_bias(inputs),
                                   self.compute_attention_bias()) if bias is not None]
        self.apply(layer=GatedAttentionUnit, units=self.intermediate_size,
                   key_size=self.attention_key_size, activation=self.hidden_act,
                   dropout=self.attention_dropout_rate,
                   initializer_range=self.config.initializer_range,
                   attention_mask=self.compute_attention_bias() is not None, name=name)
        self.residual_layers(name)
        return self.residual(inputs, name, [inputs, *extra])

    @classmethod
    def count_layers(cls, layers: Container[str]) -> int:
        """The number of ``Transformer-i-GatedAttentionUnit`` in ``layers``."""
        count = 0
        while unit_name(count) in layers:
            count += 1
        return count

    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """The published GAU-α's names, keyed by weight attribute.

        bert4keras matches its table by position, and the published ``GAU_alpha`` lists
        ``o_dense`` second, which fits the bert4keras it was written for; 0.11.5's unit
        makes ``o_dense`` last. Keyed by attribute, the order is nobody's concern.

        Example:
            >>> GAUAlpha.checkpoint_table(1)["Transformer-0-GatedAttentionUnit"]["query_gamma"]
            'GAU_alpha/encoder/layer_0/gau/q_scaleoffset/gamma'
        """
        mapping = {
            names.EMBEDDING_TOKEN: {"embeddings": WORD_EMBEDDINGS},
            names.EMBEDDING_SEGMENT: {"embeddings": "bert/embeddings/token_type_embeddings"},
        }
        for i in range(num_hidden_layers):
            scope = f"GAU_alpha/encoder/layer_{i}/gau"
            mapping[unit_name(i)] = {"input_kernel": f"{scope}/i_dense/kernel",
                                     "output_kernel": f"{scope}/o_dense/kernel",
                                     "query_gamma": f"{scope}/q_scaleoffset/gamma",
                                     "key_gamma": f"{scope}/k_scaleoffset/gamma"}
        return mapping

    @classmethod
    def audit_rows(cls, config: BertConfig, with_pool: bool | str = False,
                   with_nsp: bool = False, with_mlm: bool | str = False,
                   with_discriminator: bool | str = False) -> list[AuditRow]:
        """RoFormer-v2's embedding and head rows around one row per unit (S: the key size)."""
        H, I, S = config.hidden_size, config.intermediate_size, key_size(config)  # noqa: E741
        rows = super().audit_rows(config, with_pool, with_nsp, with_mlm, with_discriminator)
        units = [("encoder", unit_name(i), "H(3I+S)+2S", H * (3 * I + S) + 2 * S)
                 for i in range(config.num_hidden_layers)]
        return ([row for row in rows if row[0] == "embeddings"] + units
                + [row for row in rows if row[0] not in ("embeddings", "encoder")])
