"""T5 as bert4keras builds it: ``model="t5"`` (Google's first release, also ``"t5.1.0"``),
``"t5.1.1"`` and ``"mt5.1.1"`` (multilingual T5): an encoder, a decoder that also attends
to the encoder's output, and the model joining them.

The graph (every norm a root-mean-square norm with a scale alone, epsilon 1e-6; no biases
anywhere; attention scores not divided by the square root of the head size)::

    Encoder-Input-Token ─ Embedding-Token ─ Encoder-Embedding-Dropout
      ─ L × [ -MultiHeadSelfAttention-Norm ─ Encoder-Transformer-i-MultiHeadSelfAttention
              (+ Encoder-Embedding-Relative-Position) ─ -Dropout ─ -Add
              -FeedForward-Norm ─ Encoder-Transformer-i-FeedForward ─ -Dropout ─ -Add ]
      ─ Encoder-Output-Norm ─ Encoder-Output-Dropout                     (the encoder)
    Input-Context, Decoder-Input-Token ─ Embedding-Token ─ Decoder-Embedding-Dropout
      ─ L × [ self-attention under Attention-LM-Mask (+ Decoder-Embedding-Relative-Position),
              Decoder-Transformer-i-MultiHeadCrossAttention on the context, feed-forward;
              each pre-norm with its residual ]
      ─ Decoder-Output-Norm ─ Decoder-Output-Dropout ─ Decoder-Output-Scale (× H^-0.5)
      ─ t5.1.0: Embedding-Token transposed ─ Decoder-Output-LM-Activation
        t5.1.1, mt5.1.1: Decoder-Output-LM (its own [H, V] matrix, softmax)   (the decoder)

``build_transformer_model(..., model="t5.1.1", return_keras_model=False)`` returns the
object with ``.encoder``, ``.decoder`` (``[context, decoder ids] -> next-token
probabilities``) and ``.model`` (``[encoder ids, decoder ids] -> probabilities``), as in
bert4keras; the Keras model is ``.model``. t5.1.1's feed-forward is gated
(``hidden_act: ["gelu", "linear"]``: ``gelu(x W0) * (x W1)``); t5.1.0's is ``relu``.

Positions are T5's relative buckets (32 buckets, distances up to 128: 16 exact, the rest on
a log scale), a bias per head learned once per side; as in bert4keras the decoder's table
also biases the cross-attention (``cross_position_bias=True``, its keyword). Hugging Face's
T5 has no bias there: configs converted from it say ``"cross_position_bias": false``.

Token id 0 is padding, but the first token of a sequence is never masked (T5's decoder
starts from id 0), as in bert4keras.

Checkpoints: Mesh TensorFlow's names, as bert4keras 0.11.5 reads them
(``shared/embedding``, ``encoder/block_000/layer_000/SelfAttention/q``,
``decoder/block_000/layer_002/DenseReluDense/wi_0/kernel``, ``decoder/logits/kernel``;
mT5's norms ``rms_norm`` where T5's are ``layer_norm``). Hugging Face's ``T5Model`` /
``T5ForConditionalGeneration`` / ``MT5ForConditionalGeneration`` convert to them
(``kerasbert convert --from-hf``). bert4keras scales the decoder's output by H^-0.5 before
t5.1.1's matrix too, Hugging Face's t5.1.1 and mT5 do not: the conversion writes that
matrix times sqrt(H) (the shared embedding's where transformers ties it), so kerasbert and
bert4keras give Hugging Face's probabilities.

Audit (A = heads · head size): ``Embedding-Token`` V·H; each side's relative table 32·N;
attention 4·H·A; each norm H; feed-forward 2·H·I (gated: 3·H·I); ``Decoder-Output-LM`` V·H.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import keras
import numpy as np
from keras import ops

from kerasbert.models import names
from kerasbert.models.attention_masks import AttentionMask
from kerasbert.models.checkpoint_names import T5_EMBEDDING, T5_LOGITS
from kerasbert.models.families.base import (
    AuditRow,
    GoogleVariables,
    HfVariables,
    HuggingFaceRecipe,
    NormCondition,
    Step,
    Transformer,
    check_head,
)
from kerasbert.models.layers import (
    Add,
    FeedForward,
    MultiHeadSelfAttention,
    ProjectionOwner,
    TokenEmbedding,
    built_activation,
    get_activation,
    kernel_initializer,
)
from kerasbert.models.model import functional_model

if TYPE_CHECKING:  # annotations only
    from kerasbert.models.config import BertConfig

PACKAGE = names.SERIALIZATION_PACKAGE
register = keras.saving.register_keras_serializable(package=PACKAGE)

#: T5's relative positions: buckets, and the distance from which all fall in the last one.
NUM_BUCKETS = 32
MAX_DISTANCE = 128
#: The epsilon of every T5 norm (bert4keras fixes it).
EPSILON = 1e-6
ENCODER, DECODER = names.ENCODER, names.DECODER
RELATIVE_POSITION = "Embedding-Relative-Position"
OUTPUT_SCALE = "Decoder-Output-Scale"
OUTPUT_LM = "Decoder-Output-LM"
OUTPUT_LM_ACTIVATION = "Decoder-Output-LM-Activation"


# ---------------------------------------------------------------------- layers
def relative_buckets(query_positions: Any, key_positions: Any, bidirectional: bool,
                     num_buckets: int = NUM_BUCKETS, max_distance: int = MAX_DISTANCE) -> Any:
    """T5's bucket of each (query, key) pair of positions: ``(queries, keys)`` int32.

    Half the buckets are exact distances, the rest grow on a log scale up to
    ``max_distance``; a bidirectional table has one half for keys after the query.

    Example:
        >>> import numpy as np
        >>> np.asarray(relative_buckets(np.arange(1), np.arange(5), True))[0].tolist()
        [0, 17, 18, 19, 20]
    """
    # query - key: > 0 for keys before the query; positions may have a leading batch axis.
    distance = ops.expand_dims(ops.cast(query_positions, "int32"), -1) - ops.expand_dims(
        ops.cast(key_positions, "int32"), -2)
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket = ops.cast(distance < 0, "int32") * num_buckets
        distance = ops.abs(distance)
    else:
        distance = ops.maximum(distance, 0)
    exact = num_buckets // 2
    steps = ops.log(ops.cast(ops.maximum(distance, 1), "float32") / exact)
    steps = steps / math.log(max_distance / exact) * (num_buckets - exact)
    large = ops.minimum(exact + ops.cast(steps, "int32"), num_buckets - 1)
    return bucket + ops.where(distance < exact, distance, large)


@register
class RelativePositionBias(keras.layers.Layer):
    """T5's learned bias of each head for each bucket of relative positions, called on
    ``[queries' states, keys' states]``: ``(1, heads, queries, keys)``.

    Example:
        >>> layer = RelativePositionBias(num_heads=2, bidirectional=True)
        >>> tuple(layer([keras.ops.zeros((1, 3, 8)), keras.ops.zeros((1, 5, 8))]).shape)
        (1, 2, 3, 5)
    """

    def __init__(self, num_heads: int, bidirectional: bool, num_buckets: int = NUM_BUCKETS,
                 max_distance: int = MAX_DISTANCE, initializer_range: float = 0.02,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.bidirectional = bidirectional
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.initializer_range = initializer_range
        self.initializer = None

    def build(self, input_shape: Any) -> None:
        # [heads, buckets], as Mesh TensorFlow stores it.
        self.embeddings = self.add_weight(name="embeddings",
                                          shape=(self.num_heads, self.num_buckets),
                                          initializer=kernel_initializer(self))

    def bias(self, query_positions: Any, key_positions: Any) -> Any:
        """``(1, heads, queries, keys)`` for the given 1-D positions (decoding one step)."""
        buckets = relative_buckets(query_positions, key_positions, self.bidirectional,
                                   self.num_buckets, self.max_distance)
        return ops.expand_dims(ops.take(self.embeddings, buckets, axis=1), 0)

    def call(self, inputs: Any) -> Any:
        queries, keys = inputs
        return self.bias(ops.arange(ops.shape(queries)[1]), ops.arange(ops.shape(keys)[1]))

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def compute_output_spec(self, inputs: Any) -> keras.KerasTensor:
        return keras.KerasTensor((1, self.num_heads, inputs[0].shape[1], inputs[1].shape[1]),
                                 dtype=self.compute_dtype)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_heads": self.num_heads,
                "bidirectional": self.bidirectional, "num_buckets": self.num_buckets,
                "max_distance": self.max_distance, "initializer_range": self.initializer_range}


@register
class RMSNorm(keras.layers.Layer):
    """T5's norm: ``x / sqrt(mean(x²) + epsilon) * gamma`` (no mean subtracted, no offset),
    computed in float32.

    Example:
        >>> import numpy as np
        >>> [round(float(x), 4) for x in RMSNorm()(np.array([[3.0, 4.0]], "float32"))[0]]
        [0.8485, 1.1314]
    """

    def __init__(self, epsilon: float = EPSILON, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.supports_masking = True

    def build(self, input_shape: Any) -> None:
        self.gamma = self.add_weight(name="gamma", shape=(input_shape[-1],), initializer="ones")

    def call(self, inputs: Any) -> Any:
        x = ops.cast(inputs, "float32")
        x = x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.epsilon)
        return ops.cast(x * ops.cast(self.gamma, "float32"), inputs.dtype)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "epsilon": self.epsilon}


@register
class T5TokenEmbedding(TokenEmbedding):
    """The shared ``Embedding-Token``: id 0 is padding, but never in the first column (the
    decoder's start id is 0), as bert4keras's ``Embedding`` masks."""

    def call(self, inputs: Any, reverse: bool = False) -> Any:
        if reverse:
            return super().call(inputs, reverse=True)
        # Keras's ReversibleEmbedding sets id 0's mask itself; this one is compute_mask's.
        return keras.layers.Embedding.call(self, inputs)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        mask = super().compute_mask(inputs, mask)
        if mask is None or "int" not in str(inputs.dtype):
            return mask
        return ops.concatenate([ops.ones_like(mask[:, :1]), mask[:, 1:]], axis=1)


@register
class T5Attention(MultiHeadSelfAttention):
    """T5's attention: kerasbert's one attention layer with query, key, value and output
    kernels without biases, scores not scaled, a position bias added to them.

    Called on the queries' states with ``keys=`` the keys' states (self-attention: the
    same tensor), ``position=`` the ``(1, heads, queries, keys)`` position bias where
    ``position_bias`` and ``attention_mask=`` a ``(batch or 1, queries, keys)`` boolean
    mask where there is one. Keys at padding (their Keras mask) are never attended to.

    Example:
        >>> x = keras.ops.zeros((1, 4, 16))
        >>> tuple(T5Attention(2, 8, position_bias=False)(x, keys=x).shape)
        (1, 4, 16)
    """

    scaled = False
    two_sequences = True

    def __init__(self, num_heads: int, head_size: int, dropout: float = 0.0,
                 initializer_range: float = 0.02, position_bias: bool = True,
                 attention_mask: bool = False, **kwargs: Any) -> None:
        super().__init__(num_heads, head_size, dropout=dropout,
                         initializer_range=initializer_range, use_bias=False,
                         position="bias" if position_bias else None,
                         attention_mask=attention_mask, **kwargs)
        self.position_bias = position_bias

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        for key in ("use_bias", "position"):
            config.pop(key, None)
        return {**config, "position_bias": self.position_bias}


@register
class GatedFeedForward(ProjectionOwner, keras.layers.Layer):
    """bert4keras's ``FeedForward`` with a list of activations (a gated linear unit, as in
    t5.1.1): ``(act0(x W0) * act1(x W1) * ...) Wo``, without biases; its products are
    :class:`~kerasbert.models.layers.Projection` layers ``intermediate_0``, ``intermediate_1``
    ... and ``output``.

    Raises:
        ValueError: more than :data:`MAX_GATES` activations, or none.

    Example:
        >>> layer = GatedFeedForward(32, ["gelu", "linear"])
        >>> tuple(layer(keras.ops.zeros((1, 5, 16))).shape), len(layer.weights)
        ((1, 5, 16), 3)
    """

    #: The most activations a layer takes (t5.1.1 has two).
    MAX_GATES = 8
    PROJECTED = (*(f"intermediate_{i}" for i in range(MAX_GATES)), "output")
    LORA_PROJECTIONS = {"intermediate": PROJECTED[:-1], "output": ("output",)}

    def __init__(self, intermediate_size: int, activations: Sequence[str],
                 initializer_range: float = 0.02, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 1 <= len(activations) <= self.MAX_GATES:
            raise ValueError(f"{self.name}: {len(activations)} activations ({activations!r}); "
                             f"a gated feed-forward takes 1 to {self.MAX_GATES}")
        self.intermediate_size = intermediate_size
        self.activations = list(activations)
        self.initializer_range = initializer_range
        self.initializer = None
        self.functions = [get_activation(name) for name in self.activations]
        self.supports_masking = True

    def projected(self) -> tuple[str, ...]:
        return (*(f"intermediate_{i}" for i in range(len(self.activations))), "output")

    def build(self, input_shape: Any) -> None:
        initializer = kernel_initializer(self)
        for name in self.projected()[:-1]:
            self.make_projection(name, self.intermediate_size, input_shape[-1], False,
                                 initializer)
        self.make_projection("output", input_shape[-1], self.intermediate_size, False,
                             initializer)

    def call(self, inputs: Any) -> Any:
        rows = ops.reshape(inputs, (-1, inputs.shape[-1]))
        x = None
        for dense, function in zip(self.projections(), self.functions):
            y = function(dense(rows))
            x = y if x is None else x * y
        return ops.reshape(self.output_dense(x), ops.shape(inputs))

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "intermediate_size": self.intermediate_size,
                "activations": self.activations, "initializer_range": self.initializer_range}


@register
class Scale(keras.layers.Layer):
    """Multiplies by a constant: ``Decoder-Output-Scale`` (H^-0.5)."""

    def __init__(self, scale: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale = scale
        self.supports_masking = True

    def call(self, inputs: Any) -> Any:
        return inputs * ops.cast(self.scale, inputs.dtype)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "scale": self.scale}


@register
class OutputProjection(keras.layers.Layer):
    """t5.1.1's ``Decoder-Output-LM``: ``x Wᵀ`` with ``W`` one row per token ([V, H], so a
    smaller vocabulary keeps rows as the embedding does), then the activation."""

    def __init__(self, vocab_size: int, activation: str = "softmax",
                 initializer_range: float = 0.02, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.activation = activation
        self.initializer_range = initializer_range
        self.initializer = None
        self.supports_masking = True

    def build(self, input_shape: Any) -> None:
        self.kernel = self.add_weight(name="kernel", shape=(self.vocab_size, input_shape[-1]),
                                      initializer=kernel_initializer(self))

    def logits(self, inputs: Any) -> Any:
        """The scores before the activation."""
        return ops.matmul(inputs, ops.transpose(ops.cast(self.kernel, inputs.dtype)))

    def call(self, inputs: Any) -> Any:
        return keras.activations.get(self.activation)(self.logits(inputs))

    def compute_output_shape(self, input_shape: Any) -> Any:
        return (*input_shape[:-1], self.vocab_size)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "activation": self.activation, "initializer_range": self.initializer_range}


# ------------------------------------------------------------------ the family
class T5(Transformer):
    """T5, version 1.0 (``model="t5"`` / ``"t5.1.0"``): relu feed-forward, the LM head tied
    to the token embedding."""

    model_type = "t5"
    default_name = "t5"
    position = "relative"
    segment_inputs = False
    head_flags = ()
    applications = ("encoder",)
    encoder_decoder = True
    #: Whether its heads may be narrower or wider than hidden_size / heads (``d_kv``).
    free_head_size = True
    #: Whether ``hidden_act`` may be a list (a gated feed-forward).
    gated_activations = True
    marker_layer: str | None = OUTPUT_LM_ACTIVATION
    checkpoint_pattern = r"(encoder|decoder)/block_\d+/"
    checkpoint_description = "a T5"
    #: Its cross-attention spans other keys than the self-attention before it.
    attention_options = ()
    #: The Mesh TensorFlow name of its norms (mT5: ``rms_norm``).
    norm_scope = "layer_norm"

    def __init__(self, config: BertConfig, with_lm: bool = True,
                 cross_position_bias: bool | None = None, version: str | None = None,
                 **kwargs: Any) -> None:
        # bert4keras's T5 takes version=; a family class is one version: another one is
        # refused, not built as this one.
        if version is not None and VERSIONS.get(version) is not type(self):
            raise ValueError(f"{type(self).__name__}(version={version!r}): this class builds "
                             f"model={self.model_type!r}; build model={version!r}, or "
                             f"model=T5_Base with version={version!r}")
        super().__init__(config, **kwargs)
        check_head("with_lm", with_lm)
        self.with_lm = with_lm
        self.cross_position_bias = (config.extra.get("cross_position_bias", True)
                                    if cross_position_bias is None else cross_position_bias)
        self.encoder: keras.Model | None = None
        self.decoder: keras.Model | None = None

    # ------------------------------------------------------------- layers
    def norm(self, name: str) -> keras.layers.Layer:
        return self.apply(layer=RMSNorm, epsilon=EPSILON, name=name)

    def attention(self, name: str, position_bias: bool = True) -> keras.layers.Layer:
        return self.apply(layer=T5Attention, num_heads=self.num_attention_heads,
                          head_size=self.attention_head_size,
                          dropout=self.attention_dropout_rate, position_bias=position_bias,
                          initializer_range=self.config.initializer_range, name=name)

    def feed_forward(self, name: str) -> keras.layers.Layer:
        if isinstance(self.config.hidden_act, (list, tuple)):
            return self.apply(layer=GatedFeedForward, intermediate_size=self.intermediate_size,
                              activations=[built_activation(act) for act in self.config.hidden_act],
                              initializer_range=self.config.initializer_range, name=name)
        return self.apply(layer=FeedForward, intermediate_size=self.intermediate_size,
                          activation=self.hidden_act, use_bias=False,
                          initializer_range=self.config.initializer_range, name=name)

    def relative_positions(self, side: str, bidirectional: bool) -> keras.layers.Layer:
        return self.apply(layer=RelativePositionBias, num_heads=self.num_attention_heads,
                          bidirectional=bidirectional,
                          initializer_range=self.config.initializer_range,
                          name=names.side_name(side, RELATIVE_POSITION))

    def residual(self, x: Any, block: str,
                 arguments: Callable[[Any], dict[str, Any]] | None = None,
                 step: Step | None = None) -> Any:
        """``x + Dropout(block(Norm(x), **arguments(Norm(x))))``: T5's pre-norm residual."""
        y = self.apply(inputs=x, name=names.norm_name(block))
        y = self.apply(inputs=y, name=block, arguments=arguments(y) if arguments else None,
                       step=step)
        y = self.dropout(y, names.dropout_name(block))
        return self.apply(inputs=[x, y], layer=Add, name=names.add_name(block))

    def embed(self, ids: Any, side: str) -> Any:
        x = self.apply(inputs=ids, layer=T5TokenEmbedding, input_dim=self.vocab_size,
                       output_dim=self.hidden_size, embeddings_initializer=self.initializer,
                       mask_zero=True, tie_weights=True, name=names.EMBEDDING_TOKEN)
        return self.dropout(x, names.side_name(side, names.EMBEDDING_DROPOUT))

    # -------------------------------------------------------------- graph
    def encode(self, ids: Any) -> Any:
        """The encoder on token ids: the context the decoder attends to."""
        x = self.embed(ids, ENCODER)
        bias = self.relative_positions(ENCODER, bidirectional=True)([x, x])
        for index in range(self.num_hidden_layers):
            attention = names.side_name(ENCODER, names.attention_name(index))
            feed_forward = names.side_name(ENCODER, names.feed_forward_name(index))
            self.norm(names.norm_name(attention))
            self.attention(attention)
            self.norm(names.norm_name(feed_forward))
            self.feed_forward(feed_forward)
            x = self.residual(x, attention, lambda y: {"keys": y, "position": bias})
            x = self.residual(x, feed_forward)
        x = self.norm(names.side_name(ENCODER, names.OUTPUT_NORM))(x)
        return self.dropout(x, names.side_name(ENCODER, names.OUTPUT_DROPOUT))

    def decode(self, context: Any, ids: Any, step: Step | None = None) -> Any:
        """The decoder on the encoder's output and the decoder's token ids (decoding: a new
        token at decoder slot ``step.position_ids``, through the step's caches)."""
        x = self.embed(ids, DECODER)
        positions = self.relative_positions(DECODER, bidirectional=False)
        if step is not None:
            allowed = step.allowed
            here = ops.reshape(ops.cast(step.position_ids, "int32"), (1,))
            slots, sources = (ops.shape(step.caches[name]["keys"])[2] for name in (
                names.side_name(DECODER, names.attention_name(0)),
                names.cross_attention_name(0)))
            self_bias = positions.bias(here, ops.arange(slots))
            cross_bias = positions.bias(here, ops.arange(sources))
            context = x  # not read: the cross-attention caches hold the encoder's keys, values
        else:
            allowed = self.apply(inputs=ids, layer=AttentionMask, kind="lm",
                                 name=names.ATTENTION_LM_MASK)
            self_bias = positions([x, x])
            cross_bias = positions([x, context]) if self.cross_position_bias else None
        for index in range(self.num_hidden_layers):
            attention = names.side_name(DECODER, names.attention_name(index))
            cross = names.cross_attention_name(index)
            feed_forward = names.side_name(DECODER, names.feed_forward_name(index))
            for block in (attention, cross, feed_forward):
                self.norm(names.norm_name(block))
            self.attention(attention)
            self.attention(cross, position_bias=self.cross_position_bias)
            self.feed_forward(feed_forward)
            x = self.residual(x, attention, lambda y: {
                "keys": y, "position": self_bias, "attention_mask": allowed}, step)
            x = self.residual(x, cross, lambda y: {"keys": context, **(
                {"position": cross_bias} if self.cross_position_bias else {})}, step)
            x = self.residual(x, feed_forward)
        x = self.norm(names.side_name(DECODER, names.OUTPUT_NORM))(x)
        x = self.dropout(x, names.side_name(DECODER, names.OUTPUT_DROPOUT))
        x = self.apply(inputs=x, layer=Scale, scale=self.hidden_size ** -0.5, name=OUTPUT_SCALE)
        if not self.with_lm:
            return x
        activation = "softmax" if self.with_lm is True else self.with_lm
        return self.lm_head(x, activation, step)

    def lm_head(self, x: Any, activation: str, step: Step | None = None) -> Any:
        """t5.1.0: the transposed ``Embedding-Token``, then ``Decoder-Output-LM-Activation``
        (decoding: the logits before it)."""
        x = self.tied_output(x, step)
        if step is not None:
            return x
        return self.output_activation(x, activation, OUTPUT_LM_ACTIVATION)

    def build(self, attention_caches: dict[str, Sequence[Any]] | None = None,
              layer_norm_cond: Any = None, layer_norm_cond_hidden_size: int | None = None,
              layer_norm_cond_hidden_act: str | Callable[..., Any] | None = None,
              additional_input_layers: Any = None, **kwargs: Any) -> None:
        """The encoder, the decoder, and the model joining them (``.model``).

        Raises:
            ValueError: ``attention_caches`` (refused by name); any other keyword: T5's
                norms take no condition, and so no extra input.
        """
        self.refuse_option("attention_caches", attention_caches)
        if additional_input_layers is not None:
            kwargs["additional_input_layers"] = additional_input_layers
        if kwargs:
            raise ValueError(f"Transformer.build: {', '.join(sorted(kwargs))} not supported")
        NormCondition.of(self, layer_norm_cond, layer_norm_cond_hidden_size,
                         layer_norm_cond_hidden_act)
        if not self.built:
            self.build_graph()

    def build_graph(self) -> None:
        """The encoder, the decoder and the model joining them."""
        name = self.name or self.default_name
        encoder_ids = self.encoder_input()
        context, decoder_ids = self.decoder_inputs()
        self.encoder = functional_model(encoder_ids, self.encode(encoder_ids),
                                        name=f"{name}_{ENCODER}")
        self.decoder = functional_model([context, decoder_ids],
                                        self.decode(context, decoder_ids),
                                        name=f"{name}_{DECODER}")
        self.set_inputs([encoder_ids, decoder_ids])
        self.set_outputs(self.decode(self.encoder.output, decoder_ids))
        self.model = functional_model(self.inputs, self.output, name=name)
        self.built = True

    def encoder_input(self) -> keras.KerasTensor:
        """The encoder's token ids, ``Encoder-Input-Token``."""
        return self.apply(layer=keras.Input, shape=(self.sequence_length,),
                          name=names.ENCODER_INPUT_TOKEN)

    def decoder_inputs(self) -> list[keras.KerasTensor]:
        """The decoder's inputs: the encoder's output (``Input-Context``) and the decoder's
        token ids (``Decoder-Input-Token``)."""
        context = self.apply(layer=keras.Input, shape=(self.sequence_length, self.hidden_size),
                             dtype="float32", name=names.INPUT_CONTEXT)
        return [context, self.apply(layer=keras.Input, shape=(self.sequence_length,),
                                    name=names.DECODER_INPUT_TOKEN)]

    @classmethod
    def config_of_layers(cls, layers: dict[str, keras.layers.Layer]) -> BertConfig:
        """:meth:`Transformer.config_of_layers`, with whether the cross-attention has a
        position bias."""
        config = super().config_of_layers(layers)
        cross = layers.get(names.cross_attention_name(0))
        config.extra["cross_position_bias"] = bool(cross is not None and cross.position_bias)
        return config

    # -------------------------------------------------------- checkpoints
    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """Mesh TensorFlow's names, as bert4keras reads them.

        Example:
            >>> table = T5.checkpoint_table(1)
            >>> table["Decoder-Transformer-0-MultiHeadCrossAttention"]["key_kernel"]
            'decoder/block_000/layer_001/EncDecAttention/k'
        """
        def attention(scope: str) -> dict[str, str]:
            return {f"{projection}_kernel": f"{scope}/{projection[0]}"
                    for projection in ("query", "key", "value", "output")}

        def scale(scope: str) -> dict[str, str]:
            return {"gamma": f"{scope}/{cls.norm_scope}/scale"}

        final = "final_layer_norm" if cls.norm_scope == "layer_norm" else cls.norm_scope
        table = {
            names.EMBEDDING_TOKEN: {"embeddings": T5_EMBEDDING},
            names.side_name(ENCODER, names.OUTPUT_NORM): {"gamma": f"encoder/{final}/scale"},
            names.side_name(DECODER, names.OUTPUT_NORM): {"gamma": f"decoder/{final}/scale"},
        }
        for side in (ENCODER, DECODER):
            table[names.side_name(side, RELATIVE_POSITION)] = {
                "embeddings": f"{side.lower()}/block_000/layer_000/SelfAttention/"
                              "relative_attention_bias"}
        for i in range(num_hidden_layers):
            for side in (ENCODER, DECODER):
                prefix = f"{side.lower()}/block_{i:03d}"
                blocks = [(names.side_name(side, names.attention_name(i)), "SelfAttention")]
                if side == DECODER:
                    blocks.append((names.cross_attention_name(i), "EncDecAttention"))
                for number, (block, module) in enumerate(blocks):
                    table[block] = attention(f"{prefix}/layer_{number:03d}/{module}")
                    table[names.norm_name(block)] = scale(f"{prefix}/layer_{number:03d}")
                layer = f"{prefix}/layer_{len(blocks):03d}"
                feed_forward = names.side_name(side, names.feed_forward_name(i))
                table[feed_forward] = cls.feed_forward_variables(f"{layer}/DenseReluDense")
                table[names.norm_name(feed_forward)] = scale(layer)
        return table

    @classmethod
    def feed_forward_variables(cls, scope: str) -> dict[str, str]:
        return {"intermediate_kernel": f"{scope}/wi/kernel",
                "output_kernel": f"{scope}/wo/kernel"}

    # --------------------------------------------------------------- audit
    @classmethod
    def audit_rows(cls, config: BertConfig, with_pool: bool | str = False,
                   with_nsp: bool = False, with_mlm: bool | str = False,
                   with_discriminator: bool | str = False) -> list[AuditRow]:
        """``(group, layer, formula, count)`` of every layer with weights (module docstring)."""
        V, H, I, N = (config.vocab_size, config.hidden_size,  # noqa: E741
                      config.intermediate_size, config.num_attention_heads)
        A = N * config.head_size
        gates = len(config.hidden_act) if isinstance(config.hidden_act, (list, tuple)) else 1
        attention = ("4·H·A" if A != H else "4·H·H", 4 * H * A)
        feed_forward = (f"{gates + 1}·H·I", (gates + 1) * H * I)
        rows = [("embeddings", names.EMBEDDING_TOKEN, "V·H", V * H)]
        for side in (ENCODER, DECODER):
            group = side.lower()
            rows.append((group, names.side_name(side, RELATIVE_POSITION),
                         f"{NUM_BUCKETS}·N", NUM_BUCKETS * N))
            for i in range(config.num_hidden_layers):
                blocks = [names.side_name(side, names.attention_name(i))]
                if side == DECODER:
                    blocks.append(names.cross_attention_name(i))
                for block in blocks:
                    rows += [(group, names.norm_name(block), "H", H), (group, block, *attention)]
                block = names.side_name(side, names.feed_forward_name(i))
                rows += [(group, names.norm_name(block), "H", H), (group, block, *feed_forward)]
            rows.append((group, names.side_name(side, names.OUTPUT_NORM), "H", H))
        return rows + cls.head_rows(config)

    @classmethod
    def head_rows(cls, config: BertConfig) -> list[AuditRow]:
        return []


class T5_1_1(T5):
    """t5.1.1 (``model="t5.1.1"``): gated feed-forward (``wi_0``, ``wi_1``), and its own
    output matrix ``Decoder-Output-LM``."""

    model_type = "t5.1.1"
    default_name = "t5"
    marker_layer: str | None = OUTPUT_LM

    def lm_head(self, x: Any, activation: str, step: Step | None = None) -> Any:
        """``Decoder-Output-LM`` (decoding: its logits, before the activation)."""
        head = self.apply(layer=OutputProjection, vocab_size=self.vocab_size,
                          activation=activation, initializer_range=self.config.initializer_range,
                          name=OUTPUT_LM)
        return head.logits(x) if step is not None else head(x)

    @classmethod
    def feed_forward_variables(cls, scope: str) -> dict[str, str]:
        return {"intermediate_0_kernel": f"{scope}/wi_0/kernel",
                "intermediate_1_kernel": f"{scope}/wi_1/kernel",
                "output_kernel": f"{scope}/wo/kernel"}

    @classmethod
    def checkpoint_table(cls, num_hidden_layers: int) -> dict[str, dict[str, str]]:
        """T5's table with t5.1.1's gated feed-forward and ``decoder/logits/kernel``.

        Example:
            >>> T5_1_1.checkpoint_table(1)["Decoder-Output-LM"]
            {'kernel': 'decoder/logits/kernel'}
        """
        return {**super().checkpoint_table(num_hidden_layers),
                OUTPUT_LM: {"kernel": T5_LOGITS}}

    @classmethod
    def head_rows(cls, config: BertConfig) -> list[AuditRow]:
        return [("decoder", OUTPUT_LM, "V·H", config.vocab_size * config.hidden_size)]


class MT5_1_1(T5_1_1):
    """Multilingual T5 (``model="mt5.1.1"``): t5.1.1's graph, norms stored as ``rms_norm``."""

    model_type = "mt5.1.1"
    marker_layer = None  # the graph is t5.1.1's: a built model reads t5.1.1's names
    checkpoint_description = "an mT5"
    norm_scope = "rms_norm"


# ------------------------------------------- bert4keras's T5 classes, by version
#: bert4keras's ``version=`` of its T5 classes -> the family whose checkpoint names and LM
#: head it builds.
VERSIONS: dict[str, type[T5]] = {"t5.1.0": T5, "t5.1.1": T5_1_1, "mt5.1.1": MT5_1_1}


class T5_Base(T5):
    """bert4keras's ``T5_Base``: T5 of the ``version`` given (``"t5.1.0"``, ``"t5.1.1"``,
    ``"mt5.1.1"``), which says the checkpoint's names and the decoder's LM head, as
    ``model="t5"`` / ``"t5.1.1"`` / ``"mt5.1.1"`` do; built alone, it is the whole
    encoder-decoder (:class:`T5`). :class:`T5_Encoder` and :class:`T5_Decoder` build one
    side each.

    Raises:
        ValueError: another ``version``.

    Example:
        >>> from kerasbert.models.config import BertConfig
        >>> config = BertConfig.from_dict(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        ...     intermediate_size=32, hidden_act=["gelu", "linear"]), family="t5")
        >>> t5 = T5_Base(config, version="t5.1.1")
        >>> t5.build()
        >>> t5.family, t5.model.output.shape
        ('t5.1.1', (None, None, 100))
    """

    #: The side whose layers this model lacks (``Encoder``, ``Decoder``), left out of its
    #: table; None: both sides are built.
    other_side: str | None = None

    def __init__(self, config: BertConfig, version: str = "t5.1.0", **kwargs: Any) -> None:
        if version not in VERSIONS:
            raise ValueError(f"{type(self).__name__}(version={version!r}): not one of "
                             f"{', '.join(map(repr, VERSIONS))}")
        self.version = version
        kwargs["family"] = kwargs.get("family") or VERSIONS[version].model_type
        super().__init__(config, **kwargs)

    @property
    def flavour(self) -> type[T5]:
        """The family class of :attr:`version`, whose names and head this model has."""
        return VERSIONS[self.version]

    def lm_head(self, x: Any, activation: str, step: Step | None = None) -> Any:
        """The head of :attr:`version` (t5.1.0: the tied embedding; else
        ``Decoder-Output-LM``)."""
        return self.flavour.lm_head(self, x, activation, step)

    def variable_mapping(self) -> dict[str, dict[str, str]]:
        """The table of :attr:`version`, less the other side's layers: a side loads (and
        writes) its own variables of a whole T5 checkpoint."""
        table = self.flavour.checkpoint_table(self.num_hidden_layers)
        if self.other_side is None:
            return table
        return {layer: variables for layer, variables in table.items()
                if not layer.startswith(f"{self.other_side}-")}

    def build_side(self, inputs: list[keras.KerasTensor], outputs: keras.KerasTensor,
                   side: str) -> None:
        """Sets the inputs, outputs and ``model`` of one side (``Encoder``, ``Decoder``)."""
        self.set_inputs(inputs)
        self.set_outputs(outputs)
        self.model = functional_model(self.input, self.output,
                                      name=self.name or f"{self.default_name}_{side}")
        self.built = True


class T5_Encoder(T5_Base):
    """bert4keras's ``T5_Encoder``: T5's encoder alone, ``Encoder-Input-Token`` -> the
    encoder's output sequence (``Encoder-Output-Dropout``), loading the encoder's variables
    of a T5 checkpoint.

    Example:
        >>> from kerasbert.models import build_transformer_model
        >>> encoder = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        ...     intermediate_size=32), model=T5_Encoder)
        >>> encoder.input.name, encoder.output.shape
        ('Encoder-Input-Token', (None, None, 16))
    """

    other_side = DECODER

    def build_graph(self) -> None:
        """The encoder's graph and ``model``."""
        ids = self.encoder_input()
        self.build_side([ids], self.encode(ids), ENCODER)


class T5_Decoder(T5_Base):
    """bert4keras's ``T5_Decoder``: T5's decoder alone, ``[Input-Context,
    Decoder-Input-Token]`` (the encoder's output and the decoder's ids) -> the next
    token's probabilities (``with_lm``: True softmax, a string another activation, False
    the scaled hidden states), loading the decoder's variables of a T5 checkpoint.
    ``cross_position_bias`` (default: the config's, else True, as bert4keras's) gives the
    cross-attention the decoder's position bias.

    Example:
        >>> from kerasbert.models import build_transformer_model
        >>> decoder = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        ...     intermediate_size=32), model=T5_Decoder, with_lm="linear")
        >>> [x.name for x in decoder.inputs], decoder.output.shape
        (['Input-Context', 'Decoder-Input-Token'], (None, None, 100))
    """

    other_side = ENCODER

    def build_graph(self) -> None:
        """The decoder's graph and ``model``."""
        context, ids = self.decoder_inputs()
        self.build_side([context, ids], self.decode(context, ids), DECODER)



# ---------------------------------------------------- Hugging Face's T5 and mT5
HF_LAYER = re.compile(r"(encoder|decoder)\.block\.(\d+)\.layer\.(\d)\.(.+)\.weight")


def hf_config(values: dict[str, Any], path: str) -> dict[str, Any]:
    """The Google config of a Hugging Face T5 / mT5 ``config.json``'s values, the family
    read from its feed-forward and head (t5.1.0: relu, tied; t5.1.1 / mT5: gated-gelu,
    untied).

    Raises:
        ValueError: sizes missing, or a T5 kerasbert does not build (other numbers of
            encoder and decoder layers, other buckets, a mixed feed-forward and head).

    Example:
        >>> hf_config({"model_type": "t5", "vocab_size": 32128, "d_model": 512, "d_kv": 64,
        ...            "d_ff": 1024, "num_layers": 8, "num_heads": 6,
        ...            "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False},
        ...           "x")["model_type"]
        't5.1.1'
    """
    missing = [key for key in ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers",
                               "num_heads") if key not in values]
    if missing:
        raise ValueError(f"{missing[0]} in {path}: missing; a T5 config.json has vocab_size, "
                         "d_model, d_kv, d_ff, num_layers and num_heads")
    fixed = {"num_decoder_layers": values["num_layers"],
             "relative_attention_num_buckets": NUM_BUCKETS,
             "relative_attention_max_distance": MAX_DISTANCE, "is_encoder_decoder": True}
    for key, built in fixed.items():
        if values.get(key, built) not in (built, None):
            raise ValueError(f"{key} ({values[key]!r}) in {path}: kerasbert's T5 is built "
                             f"with {key}={built!r} (as bert4keras's)")
    projection = values.get("feed_forward_proj", "relu")
    act: str | list[str]  # gated-gelu: one activation per gate
    if projection == "relu":
        family, act = "t5", "relu"
        if not decoder_scaled(values):
            raise ValueError(f"scale_decoder_outputs (False) in {path}: kerasbert's T5 1.0 "
                             "scales the decoder's output before its tied head, as T5 1.0 does")
    elif projection == "gated-gelu":
        family = "mt5.1.1" if values.get("model_type") == "mt5" else "t5.1.1"
        act = ["gelu_new", "linear"]
    else:
        raise ValueError(f"feed_forward_proj ({projection!r}) in {path}: kerasbert builds T5 "
                         "1.0 ('relu') and t5.1.1 / mT5 ('gated-gelu')")
    return {"model_type": family, "vocab_size": values["vocab_size"],
            "hidden_size": values["d_model"], "attention_head_size": values["d_kv"],
            "intermediate_size": values["d_ff"], "num_hidden_layers": values["num_layers"],
            "num_attention_heads": values["num_heads"], "hidden_act": act,
            "hidden_dropout_prob": values.get("dropout_rate", 0.1),
            "attention_probs_dropout_prob": values.get("dropout_rate", 0.1),
            "initializer_range": 0.02, "type_vocab_size": 0,
            "layer_norm_eps": values.get("layer_norm_epsilon", EPSILON),
            "cross_position_bias": False}


def hf_variables_of(norm_scope: str) -> HfVariables:
    """``(name, value) -> [(Google name, value)]`` for Hugging Face T5 parameters (None for
    one without a Google name): Linear weights transposed, ``relative_attention_bias`` as
    [heads, buckets], an untied ``lm_head`` as ``decoder/logits/kernel`` times sqrt(H)."""
    final = "final_layer_norm" if norm_scope == "layer_norm" else norm_scope

    def variables(name: str, value: np.ndarray) -> GoogleVariables | None:
        if name == "shared.weight":
            return [(T5_EMBEDDING, value)]
        if name == "lm_head.weight":  # [V, H]; scaled by hf_finish
            return [(T5_LOGITS, value.T)]
        for side in ("encoder", "decoder"):
            if name == f"{side}.final_layer_norm.weight":
                return [(f"{side}/{final}/scale", value)]
        found = HF_LAYER.fullmatch(name)
        if found is None:
            return None
        side, block, layer, module = found.groups()
        scope = f"{side}/block_{int(block):03d}/layer_{int(layer):03d}"
        if module == "layer_norm":
            return [(f"{scope}/{norm_scope}/scale", value)]
        if module.endswith("relative_attention_bias"):  # [buckets, heads]
            return [(f"{scope}/{module.replace('.', '/')}", value.T)]
        kind, _, projection = module.partition(".")
        if kind in ("SelfAttention", "EncDecAttention") and projection in "qkvo":
            return [(f"{scope}/{kind}/{projection}", value.T)]
        if kind == "DenseReluDense":
            return [(f"{scope}/DenseReluDense/{projection}/kernel", value.T)]
        return None
    return variables


def decoder_scaled(values: dict[str, Any]) -> bool:
    """Whether a Hugging Face T5 config's model scales the decoder's output by H^-0.5
    (transformers 5 says ``scale_decoder_outputs``, 4 said it by ``tie_word_embeddings``;
    its mT5 never does)."""
    if values.get("model_type") == "mt5":
        return False
    return values.get("scale_decoder_outputs", values.get("tie_word_embeddings", True))


def hf_finish(variables: dict[str, np.ndarray], values: dict[str, Any]) -> None:
    """t5.1.1 / mT5: the output matrix (the shared embedding where the file has none: tied),
    times sqrt(H) where Hugging Face does not scale the decoder's output and bert4keras's
    graph does."""
    if values.get("feed_forward_proj", "relu") == "relu":
        variables.pop(T5_LOGITS, None)  # T5 1.0's head is the shared embedding
        return
    logits = variables.get(T5_LOGITS)
    if logits is None:
        logits = variables[T5_EMBEDDING].T
    if not decoder_scaled(values):
        logits = logits * np.asarray(math.sqrt(logits.shape[0]), logits.dtype)
    variables[T5_LOGITS] = np.ascontiguousarray(logits)


#: Parameters Hugging Face keeps as copies of the shared embedding.
HF_IGNORED = (r"(encoder|decoder)\.embed_tokens\.weight",)
T5.hf_layout = HuggingFaceRecipe("", "", hf_config, hf_variables_of("layer_norm"),
                                 HF_IGNORED, model_type="t5", finish=hf_finish)
T5_1_1.hf_layout = T5.hf_layout
MT5_1_1.hf_layout = HuggingFaceRecipe("", "", hf_config, hf_variables_of("rms_norm"),
                                      HF_IGNORED, model_type="mt5", finish=hf_finish)
