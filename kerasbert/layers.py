"""bert4keras's ``layers`` on Keras 3: ``from kerasbert.layers import Loss, GlobalPointer``.

bert4keras 0.11.5's ``layers`` module holds its own layers and, through
``from keras.layers import *``, every Keras layer (``Dense``, ``Input``, ``Lambda``...); so
does this one. Each layer takes bert4keras's arguments with their defaults, gives its
outputs (tested against bert4keras itself) and keeps its weights in the same order (so
``set_weights`` with bert4keras's arrays fits). Layers are registered with Keras under
``kerasbert.layers>`` (apart from the model code's layers of the same names), so a model
holding them loads with ``keras.saving.load_model(path, safe_mode=True)`` once this module
is imported; :data:`custom_objects` is there for ``load_model(custom_objects=...)``.

Reused from the model code: the CRF (:mod:`kerasbert.models.crf`: forward algorithm and
Viterbi) and the feed-forward block (:mod:`kerasbert.models.layers`); the tensor helpers are
:mod:`kerasbert.backend`'s. What differs from bert4keras, and why:

- ``ConditionalRandomField`` and ``MaximumEntropyMarkovModel`` return their input with
  ``-inf`` at padding and no Keras mask, as in bert4keras: ``sparse_loss`` and
  ``sparse_accuracy`` read the padding from it. ``crf.loss`` is ``crf.sparse_loss``.
- ``Loss`` layers add their loss with ``add_loss``; ``model.compile(optimizer)`` with no
  ``loss`` trains on it, as in Keras 2.
- ``FeedForward`` with a list of activations (a gated linear unit), ``GatedAttentionUnit``,
  ``RelativePositionEmbeddingT5``, ``BatchSplit`` and ``BatchConcat`` are not provided:
  importing one says why (:data:`NOT_PROVIDED`).
- ``GlobalAveragePooling1D`` is Keras 3's own (it honours the mask, as bert4keras's
  replacement did); bert4keras replaced Keras's at import, this module changes nothing in
  Keras.

Example:
    >>> import numpy as np
    >>> pointer = EfficientGlobalPointer(heads=2, head_size=8)
    >>> pointer(np.zeros((1, 5, 16), "float32")).shape
    TensorShape([1, 2, 5, 5])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import keras
import numpy as np
from keras import activations, initializers, ops  # noqa: F401  (bert4keras's names)
from keras.layers import *  # noqa: F403  (bert4keras's layers module re-exports Keras's)

from kerasbert.backend import (  # noqa: F401  (bert4keras's layers module has them too)
    K,
    align,
    apply_rotary_position_embeddings,
    attention_normalize,
    recompute_grad,
    sequence_masking,
    sinusoidal_embeddings,
    tf,
)
from kerasbert.models import NotProvided
from kerasbert.models import crf as core_crf
from kerasbert.models import layers as core_layers
from kerasbert.models.layers import attend

#: The registration package: the model code registers layers of the same names (its
#: ``PositionEmbedding``, ``FeedForward``, ``ConditionalRandomField``) under ``kerasbert``.
PACKAGE = "kerasbert.layers"
register = keras.saving.register_keras_serializable(package=PACKAGE)
# Tensors are typed Any: symbolic (keras.KerasTensor) while a model is built, the backend's
# own tensors (or NumPy arrays) when it runs.
_F = TypeVar("_F", bound=Callable[..., Any])
_Activation = str | Callable[..., Any]

#: bert4keras ``layers`` names kerasbert does not provide -> why, and what to use instead.
NOT_PROVIDED = {
    "GatedAttentionUnit": "bert4keras's layer is not provided; kerasbert's GAU-α "
                          "(model='gau_alpha') builds its units with "
                          "kerasbert.models.families.gau_alpha.GatedAttentionUnit",
    "RelativePositionEmbeddingT5": "bert4keras's layer is not provided; kerasbert's T5 "
                                   "(model='t5' / 't5.1.1' / 'mt5.1.1') builds its buckets "
                                   "with kerasbert.models.families.t5.RelativePositionBias",
    "BatchSplit": "bert4keras's data_parallel is not provided; train under "
                  "tf.distribute.MirroredStrategy",
    "BatchConcat": "bert4keras's data_parallel is not provided; train under "
                   "tf.distribute.MirroredStrategy",
}


def __getattr__(name: str) -> NoReturn:
    if name in NOT_PROVIDED:
        raise NotProvided(f"kerasbert.layers.{name} (bert4keras.layers.{name}) is not "
                          f"provided: {NOT_PROVIDED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def integerize_shape(func: _F) -> _F:
    """bert4keras's decorator of ``build``: Keras 3's shapes are already ints and None, so
    ``func`` comes back as it is."""
    return func


def _merged(inputs, embeddings, merge_mode, tile):
    """A position layer's output: ``embeddings`` added to, multiplied into (``mul``: by
    ``embeddings + 1``), put in place of (``zero``) or appended to ``inputs``."""
    if merge_mode == "add":
        return inputs + embeddings
    if merge_mode == "mul":
        return inputs * (embeddings + 1.0)
    if merge_mode == "zero":
        return embeddings
    if tile:
        embeddings = ops.tile(embeddings, [ops.shape(inputs)[0], 1, 1])
    return ops.concatenate([inputs, embeddings], axis=-1)


def _first(mask):
    """The mask of a layer's first input (a list of inputs has a list of masks)."""
    return mask[0] if isinstance(mask, (list, tuple)) else mask


class Layer(keras.layers.Layer):
    """bert4keras's base layer: a mask passes through it.

    Example:
        >>> Layer().supports_masking
        True
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.supports_masking = True


@register
class GlobalMaxPooling1D(keras.layers.GlobalMaxPooling1D):
    """Keras's ``GlobalMaxPooling1D`` that leaves padding out of the maximum (bert4keras's).

    Example:
        >>> x = np.array([[[1.0], [5.0]]], "float32")
        >>> float(GlobalMaxPooling1D()(x, mask=np.array([[True, False]]))[0, 0])
        1.0
    """

    def __init__(self, data_format: str = "channels_last", **kwargs: Any) -> None:
        super().__init__(data_format=data_format, **kwargs)
        self.supports_masking = True

    def call(self, inputs: Any, mask: Any = None) -> Any:
        axis = 1 if self.data_format == "channels_last" else 2
        inputs = sequence_masking(inputs, mask, -np.inf, axis)
        return ops.max(inputs, axis=axis, keepdims=self.keepdims)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None


@register
class Embedding(keras.layers.Embedding):
    """Keras's ``Embedding`` with bert4keras's two additions: ``layer(x, mode="dense")``
    multiplies ``x`` by the transposed table (a language model's tied output), and the
    padding mask (``mask_zero=True``) never hides the first token (T5's decoder starts
    with id 0).

    Raises:
        ValueError: a ``mode`` other than ``"embedding"`` or ``"dense"``.

    Example:
        >>> table = Embedding(10, 4)
        >>> hidden = table(np.array([[1, 2]]))
        >>> table(hidden, mode="dense").shape
        TensorShape([1, 2, 10])
    """

    MODES = ("embedding", "dense")

    def __init__(self, input_dim: int, output_dim: int, **kwargs: Any) -> None:
        super().__init__(input_dim, output_dim, **kwargs)
        self.supports_masking = True  # the dense mode passes its input's mask on

    def call(self, inputs: Any, mode: str = "embedding") -> Any:
        if mode not in self.MODES:
            raise ValueError(f"{self.name}: mode={mode!r} is not one of {self.MODES}")
        if mode == "embedding":
            return super().call(inputs)
        return ops.matmul(inputs, ops.transpose(ops.cast(self.embeddings, inputs.dtype)))

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if len(inputs.shape) != 2:
            return mask
        mask = super().compute_mask(inputs, mask)
        if mask is None:
            return None
        return ops.concatenate([ops.ones_like(mask[:, :1]), mask[:, 1:]], axis=1)

    def compute_output_spec(self, inputs: Any, mode: str = "embedding") -> Any:
        if mode == "dense":
            return keras.KerasTensor((*inputs.shape[:-1], self.input_dim), dtype=inputs.dtype)
        return keras.KerasTensor((*inputs.shape, self.output_dim), dtype=self.compute_dtype)


@register
class ScaleOffset(Layer):
    """Multiplies the last axis by ``gamma`` and adds ``beta`` (bert4keras's affine layer).

    Args:
        scale, offset: True: a learned ``gamma`` (ones) / ``beta`` (zeros); a number: that
            constant; False or None: none.
        conditional: the layer is called on ``[x, condition]``; ``gamma`` and ``beta`` each
            gain a dense projection of the condition (``gamma_dense``, ``beta_dense``, zero
            at the start), so the condition steers the scale and offset.
        hidden_units, hidden_activation, hidden_initializer: a dense layer
            (``hidden_dense``, no bias) the condition goes through first, when
            ``hidden_units`` is given.

    Example:
        >>> ScaleOffset()(np.ones((1, 3, 4), "float32")).shape
        TensorShape([1, 3, 4])
    """

    def __init__(self, scale: bool | float | None = True, offset: bool | float | None = True,
                 conditional: bool = False,
                 hidden_units: int | None = None,
                 hidden_activation: str | Callable[..., Any] = "linear",
                 hidden_initializer: str | keras.initializers.Initializer = "glorot_uniform",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale = scale
        self.offset = offset
        self.conditional = conditional
        self.hidden_units = hidden_units
        self.hidden_activation = activations.get(hidden_activation)
        self.hidden_initializer = initializers.get(hidden_initializer)

    def build(self, input_shape: Any) -> None:
        condition_shape: Any = None
        if self.conditional:
            input_shape, condition_shape = input_shape
        dim = input_shape[-1]
        # bert4keras's order: beta, gamma, then the dense layers of the condition.
        if self.offset is True:
            self.beta = self.add_weight(name="beta", shape=(dim,), initializer="zeros")
        if self.scale is True:
            self.gamma = self.add_weight(name="gamma", shape=(dim,), initializer="ones")
        if not self.conditional:
            return
        if self.hidden_units is not None:
            self.hidden_dense = keras.layers.Dense(
                self.hidden_units, activation=self.hidden_activation, use_bias=False,
                kernel_initializer=self.hidden_initializer, name="hidden_dense",
                dtype=self.dtype_policy)
            self.hidden_dense.build(condition_shape)
            condition_shape = (*condition_shape[:-1], self.hidden_units)
        for kind in ("beta", "gamma"):
            if getattr(self, "offset" if kind == "beta" else "scale") not in (False, None):
                dense = keras.layers.Dense(dim, use_bias=False, kernel_initializer="zeros",
                                           name=f"{kind}_dense", dtype=self.dtype_policy)
                dense.build(condition_shape)
                setattr(self, f"{kind}_dense", dense)

    def call(self, inputs: Any) -> Any:
        condition = None
        if self.conditional:
            inputs, condition = inputs
            if self.hidden_units is not None:
                condition = self.hidden_dense(condition)
            condition = align(condition, [0, -1], len(inputs.shape))
        if self.scale not in (False, None):
            gamma = self.gamma if self.scale is True else self.scale
            if self.conditional:
                gamma = gamma + self.gamma_dense(condition)
            inputs = inputs * gamma
        if self.offset not in (False, None):
            beta = self.beta if self.offset is True else self.offset
            if self.conditional:
                beta = beta + self.beta_dense(condition)
            inputs = inputs + beta
        return inputs

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return _first(mask) if self.conditional else mask

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[0] if self.conditional else input_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "scale": self.scale, "offset": self.offset,
                "conditional": self.conditional, "hidden_units": self.hidden_units,
                "hidden_activation": activations.serialize(self.hidden_activation),
                "hidden_initializer": initializers.serialize(self.hidden_initializer)}


@register
class LayerNormalization(ScaleOffset):
    """bert4keras's (conditional) layer normalization: ``(x - mean) / sqrt(var + epsilon)``,
    then :class:`ScaleOffset` (``conditional=True``: called on ``[x, condition]``, the
    condition steering ``gamma`` and ``beta``: https://kexue.fm/archives/7124).

    Args:
        zero_mean: subtract the mean (False: RMS normalization).
        unit_variance: divide by the root mean square.
        epsilon: added to the variance; None: ``keras.config.epsilon()`` (1e-7), as
            bert4keras's ``K.epsilon()``.
        **kwargs: :class:`ScaleOffset`'s (``scale``, ``offset``, ``conditional``,
            ``hidden_units``, ``hidden_activation``, ``hidden_initializer``) and Keras's.

    Example:
        >>> norm = LayerNormalization(conditional=True, hidden_units=8)
        >>> norm([np.ones((2, 3, 16), "float32"), np.ones((2, 4), "float32")]).shape
        TensorShape([2, 3, 16])
        >>> [w.path.split("/")[-1] for w in norm.weights]
        ['beta', 'gamma', 'kernel', 'kernel', 'kernel']
    """

    def __init__(self, zero_mean: bool = True, unit_variance: bool = True,
                 epsilon: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.zero_mean = zero_mean
        self.unit_variance = unit_variance
        self.epsilon = epsilon or keras.config.epsilon()

    def call(self, inputs: Any) -> Any:
        x = inputs[0] if self.conditional else inputs
        if self.zero_mean:
            x = x - ops.mean(x, axis=-1, keepdims=True)
        if self.unit_variance:
            variance = ops.mean(ops.square(x), axis=-1, keepdims=True)
            x = ops.divide_no_nan(x, ops.sqrt(variance + self.epsilon))
        return super().call([x, inputs[1]] if self.conditional else x)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "zero_mean": self.zero_mean,
                "unit_variance": self.unit_variance, "epsilon": self.epsilon}


@register
class Concatenate1D(core_layers.Concatenate1D):
    """Joins sequences along the length axis, and their masks (an input without a mask
    counts as unmasked), which Keras's ``Concatenate`` does not do for a mix: the layer
    models put attention caches in front of the hidden states with.

    Example:
        >>> Concatenate1D()([np.ones((1, 2, 4)), np.ones((1, 3, 4))]).shape
        TensorShape([1, 5, 4])
    """


@register
class MultiHeadAttention(Layer):
    """bert4keras's multi-head attention, called on ``[q, k, v]`` (self-attention:
    ``[x, x, x]``), then an attention bias and a position input when asked for.

    Args:
        heads, head_size: the number and width of the heads (values).
        out_dim: the output width (default ``heads * head_size``).
        key_size: the width of a query / key head (default ``head_size``).
        use_bias: the four projections (``q_dense``, ``k_dense``, ``v_dense``, ``o_dense``)
            have biases.
        normalization: ``"softmax"``, ``"squared_relu"`` or ``"softmax_plus"``
            (see :func:`kerasbert.backend.attention_normalize`).
        attention_scale: divide the scores by ``sqrt(key_size)``.
        attention_dropout: dropout rate of the attention weights (in training).
        return_attention_scores: return ``[output, scores]`` (scores before normalisation).
        kernel_initializer: of the projections.

    Call arguments: ``a_bias=True``: the input after ``v`` is an attention bias (a bool mask
    or additive scores, ``(batch or 1, q_len, k_len)`` or with a heads axis); ``p_bias``:
    ``"rotary"`` (the next input is the sinusoid table of
    :class:`SinusoidalPositionEmbedding` ``merge_mode="zero"``), ``"typical_relative"``
    (the next input is ``(q_len, k_len, key_size)`` from
    :class:`RelativePositionEmbedding`) or ``"t5_relative"`` (``(q_len, k_len, heads)``).
    Keys masked out (the mask of ``v``) get no weight.

    Example:
        >>> attention = MultiHeadAttention(heads=2, head_size=8)
        >>> x = np.ones((1, 5, 16), "float32")
        >>> attention([x, x, x]).shape
        TensorShape([1, 5, 16])
    """

    def __init__(self, heads: int, head_size: int, out_dim: int | None = None,
                 key_size: int | None = None, use_bias: bool = True, normalization: str = "softmax",
                 attention_scale: bool = True, attention_dropout: float | None = None,
                 return_attention_scores: bool = False,
                 kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heads = heads
        self.head_size = head_size
        self.out_dim = out_dim or heads * head_size
        self.key_size = key_size or head_size
        self.use_bias = use_bias
        self.normalization = normalization
        self.attention_scale = attention_scale
        self.attention_dropout = attention_dropout
        self.return_attention_scores = return_attention_scores
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.dropout = (keras.layers.Dropout(attention_dropout, dtype=self.dtype_policy)
                        if attention_dropout else None)

    def build(self, input_shape: Any) -> None:
        widths = {"q_dense": self.key_size * self.heads, "k_dense": self.key_size * self.heads,
                  "v_dense": self.head_size * self.heads, "o_dense": self.out_dim}
        fan_in = {"q_dense": input_shape[0], "k_dense": input_shape[1],
                  "v_dense": input_shape[2], "o_dense": (None, self.head_size * self.heads)}
        for name, units in widths.items():
            dense = keras.layers.Dense(units, use_bias=self.use_bias,
                                       kernel_initializer=self.kernel_initializer, name=name,
                                       dtype=self.dtype_policy)
            dense.build(fan_in[name])
            setattr(self, name, dense)

    def call(self, inputs: Any, mask: Any = None, a_bias: Any = None, p_bias: Any = None,
             training: bool | None = None) -> Any:
        q, k, v = inputs[:3]
        q_mask, v_mask = (None, None) if mask is None else (mask[0], mask[2])
        # (batch, length, heads, size)
        qw = ops.reshape(self.q_dense(q), (*ops.shape(q)[:2], self.heads, self.key_size))
        kw = ops.reshape(self.k_dense(k), (*ops.shape(k)[:2], self.heads, self.key_size))
        vw = ops.reshape(self.v_dense(v), (*ops.shape(v)[:2], self.heads, self.head_size))
        o, a = self.pay_attention_to([qw, kw, vw, *inputs[3:]], [q_mask, v_mask],
                                     a_bias=a_bias, p_bias=p_bias, training=training)
        o = self.o_dense(ops.reshape(o, (*ops.shape(o)[:2], self.heads * self.head_size)))
        return [o, a] if self.return_attention_scores else o

    def pay_attention_to(self, inputs: Any, mask: Any = None, a_bias: Any = None,
                         p_bias: Any = None, training: bool | None = None) -> Any:
        """Dot-product attention of the projected heads, ``(batch, length, heads, size)``
        each, by kerasbert's one attention (:func:`kerasbert.models.layers.attend`): returns
        the context (same layout) and the scores (``(batch, heads, q_len, k_len)``, before
        the masks and the normalization). Override it to make another attention, as in
        bert4keras."""
        (qw, kw, vw), n = inputs[:3], 3
        v_mask = mask[1] if mask is not None else None
        bias = allowed = relative = None
        if a_bias:
            bias, n = inputs[n], n + 1
            if len(bias.shape) == 3:  # (batch or 1, q_len, k_len)
                bias = align(bias, [0, -2, -1], 4)
            if "bool" in str(bias.dtype):
                allowed, bias = bias, None
        if p_bias == "rotary":
            qw, kw = apply_rotary_position_embeddings(inputs[n], qw, kw)
        scale = self.key_size**-0.5 if self.attention_scale else None
        if p_bias == "typical_relative":
            relative = inputs[n]
        elif p_bias == "t5_relative":  # scaled with the scores, as bert4keras does
            position = ops.expand_dims(ops.transpose(inputs[n], (2, 0, 1)), 0)
            bias = position * scale if scale else position if bias is None else \
                bias + (position * scale if scale else position)
        query, key, value = (ops.transpose(x, (0, 2, 1, 3)) for x in (qw, kw, vw))
        o, a = attend(query, key, value, scale=scale, bias=bias, key_mask=v_mask,
                      allowed=allowed, relative=relative, dropout=self.dropout,
                      training=training, normalization=self.normalization, return_scores=True)
        return ops.transpose(o, (0, 2, 1, 3)), a

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        mask = _first(mask)
        return [mask, None] if self.return_attention_scores else mask

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "heads": self.heads, "head_size": self.head_size,
                "out_dim": self.out_dim, "key_size": self.key_size, "use_bias": self.use_bias,
                "normalization": self.normalization, "attention_scale": self.attention_scale,
                "attention_dropout": self.attention_dropout,
                "return_attention_scores": self.return_attention_scores,
                "kernel_initializer": initializers.serialize(self.kernel_initializer)}


@register
class PositionEmbedding(Layer):
    """bert4keras's learned position embedding.

    Args:
        input_dim: the number of positions; output_dim: the embedding width.
        merge_mode: ``"add"`` (to the input), ``"mul"`` (input times embedding + 1),
            ``"zero"`` (the embeddings alone) or ``"concat"``.
        hierarchical: positions beyond ``input_dim`` as two digits in base ``input_dim``
            (https://kexue.fm/archives/7947): True (alpha 0.4) or alpha itself.
        embeddings_initializer: of the table (default zeros).
        custom_position_ids: called on ``[x, position_ids]`` instead of positions 0, 1...

    Example:
        >>> PositionEmbedding(32, 16)(np.zeros((2, 5, 16), "float32")).shape
        TensorShape([2, 5, 16])
    """

    def __init__(self, input_dim: int, output_dim: int, merge_mode: str = "add",
                 hierarchical: bool | float | None = None,
                 embeddings_initializer: str | keras.initializers.Initializer = "zeros",
                 custom_position_ids: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.merge_mode = merge_mode
        self.hierarchical = hierarchical
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self.custom_position_ids = custom_position_ids

    def build(self, input_shape: Any) -> None:
        self.embeddings = self.add_weight(name="embeddings",
                                          shape=(self.input_dim, self.output_dim),
                                          initializer=self.embeddings_initializer)

    def call(self, inputs: Any) -> Any:
        if self.custom_position_ids:
            inputs, position_ids = inputs
            position_ids = ops.cast(position_ids, "int32")
        else:
            position_ids = ops.expand_dims(ops.arange(ops.shape(inputs)[1], dtype="int32"), 0)
        table = ops.cast(self.embeddings, inputs.dtype)
        if self.hierarchical:
            alpha = 0.4 if self.hierarchical is True else self.hierarchical
            table = (table - alpha * table[:1]) / (1 - alpha)
            embeddings = (alpha * ops.take(table, position_ids // self.input_dim, axis=0)
                          + (1 - alpha) * ops.take(table, position_ids % self.input_dim, axis=0))
        elif self.custom_position_ids:
            embeddings = ops.take(table, position_ids, axis=0)
        else:
            embeddings = ops.expand_dims(table[:ops.shape(inputs)[1]], 0)
        return _merged(inputs, embeddings, self.merge_mode, not self.custom_position_ids)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return _first(mask)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "input_dim": self.input_dim,
                "output_dim": self.output_dim, "merge_mode": self.merge_mode,
                "hierarchical": self.hierarchical,
                "embeddings_initializer": initializers.serialize(self.embeddings_initializer),
                "custom_position_ids": self.custom_position_ids}


@register
class SinusoidalPositionEmbedding(Layer):
    """The sin-cos position embedding (interleaved, as RoFormer's), merged as
    :class:`PositionEmbedding`'s ``merge_mode`` says; no weights.

    Example:
        >>> layer = SinusoidalPositionEmbedding(8, merge_mode="zero")
        >>> layer(np.zeros((2, 5, 16), "float32")).shape
        TensorShape([1, 5, 8])
    """

    def __init__(self, output_dim: int, merge_mode: str = "add", custom_position_ids: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_dim = output_dim
        self.merge_mode = merge_mode
        self.custom_position_ids = custom_position_ids

    def call(self, inputs: Any) -> Any:
        if self.custom_position_ids:
            inputs, position_ids = inputs
        else:
            position_ids = ops.expand_dims(ops.arange(ops.shape(inputs)[1], dtype="float32"), 0)
        embeddings = ops.cast(sinusoidal_embeddings(position_ids, self.output_dim), inputs.dtype)
        return _merged(inputs, embeddings, self.merge_mode, not self.custom_position_ids)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return _first(mask)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "output_dim": self.output_dim,
                "merge_mode": self.merge_mode, "custom_position_ids": self.custom_position_ids}


@register
class RelativePositionEmbedding(Layer):
    """Relative positions (https://arxiv.org/abs/1803.02155), NEZHA's: called on
    ``[q, v]``, returns ``(q_len, v_len, output_dim)``, row ``(i, j)`` the embedding of
    ``j - i`` clipped to ``±(input_dim - 1) // 2``.

    Example:
        >>> x = np.zeros((1, 5, 16), "float32")
        >>> RelativePositionEmbedding(9, 8)([x, x]).shape
        TensorShape([5, 5, 8])
    """

    def __init__(self, input_dim: int, output_dim: int,
                 embeddings_initializer: str | keras.initializers.Initializer = "zeros",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.embeddings_initializer = initializers.get(embeddings_initializer)

    def build(self, input_shape: Any) -> None:
        self.embeddings = self.add_weight(name="embeddings",
                                          shape=(self.input_dim, self.output_dim),
                                          initializer=self.embeddings_initializer)

    def call(self, inputs: Any) -> Any:
        return ops.take(self.embeddings, self.compute_position_ids(inputs), axis=0)

    def compute_position_ids(self, inputs: Any) -> Any:
        """``(q_len, v_len)`` row ids of the table."""
        q, v = inputs
        distance = (ops.expand_dims(ops.arange(ops.shape(v)[1], dtype="int32"), 0)
                    - ops.expand_dims(ops.arange(ops.shape(q)[1], dtype="int32"), 1))
        farthest = (self.input_dim - 1) // 2
        return ops.clip(distance, -farthest, farthest) + farthest

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return _first(mask)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "input_dim": self.input_dim,
                "output_dim": self.output_dim,
                "embeddings_initializer": initializers.serialize(self.embeddings_initializer)}


@register
class FeedForward(core_layers.FeedForward):
    """bert4keras's feed-forward block: ``Dense(units, activation)`` then back to the
    input's width (the model code's block, with bert4keras's arguments).

    Raises:
        ValueError: a list of several activations (bert4keras's gated linear unit), which
            kerasbert does not build.

    Example:
        >>> FeedForward(32, activation="gelu")(np.zeros((1, 5, 16), "float32")).shape
        TensorShape([1, 5, 16])
    """

    def __init__(
            self, units: int,
            activation: _Activation | list[_Activation] | tuple[_Activation, ...] = "relu",
            use_bias: bool = True,
            kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
            **kwargs: Any) -> None:
        if isinstance(activation, (list, tuple)):
            if len(activation) != 1:
                raise ValueError(f"FeedForward(activation={activation!r}): a list of several "
                                 "activations (a gated linear unit) is "
                                 "kerasbert.models.families.t5.GatedFeedForward; give one here")
            activation = activation[0]
        super().__init__(intermediate_size=units, activation=activation, use_bias=use_bias,
                         initializer=kernel_initializer, **kwargs)
        self.units = units
        self.kernel_initializer = initializers.get(kernel_initializer)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        for key in ("intermediate_size", "initializer_range", "initializer"):
            config.pop(key, None)
        activation = self.activation
        return {**config, "units": self.units, "use_bias": self.use_bias,
                "activation": activation if isinstance(activation, str)
                else activations.serialize(activation),
                "kernel_initializer": initializers.serialize(self.kernel_initializer)}


def _scores_mask(y_pred):
    """The real positions of a CRF's or MEMM's output: those not ``-inf`` (bert4keras's)."""
    return ops.all(ops.not_equal(y_pred, -np.inf), axis=2)


def _tags_like(y_true, y_pred):
    """Integer tags shaped as ``y_pred`` without its last axis."""
    return ops.cast(ops.reshape(y_true, ops.shape(y_pred)[:-1]), "int32")


def _masked_mean(values, mask):
    mask = ops.cast(mask, values.dtype)
    return ops.sum(values * mask) / ops.sum(mask)


@register
class ConditionalRandomField(core_crf.ConditionalRandomField):
    """bert4keras's CRF layer: the model code's CRF (forward algorithm, Viterbi) with
    bert4keras's outputs and method names.

    It returns its input with ``-inf`` at padding and no mask; ``sparse_loss`` /
    ``dense_loss`` (``y_true`` tags / one-hot) and ``sparse_accuracy`` /
    ``dense_accuracy`` (the share of real tokens whose best emission is the tag, as
    bert4keras's) read the padding from it; ``trans`` is the transition matrix (times
    ``lr_multiplier``). ``crf.decode`` gives the Viterbi paths.

    Example:
        >>> tokens = keras.Input((None,), dtype="int32")
        >>> hidden = keras.layers.Embedding(20, 8, mask_zero=True)(tokens)
        >>> CRF = ConditionalRandomField(lr_multiplier=100)
        >>> tagger = keras.Model(tokens, CRF(keras.layers.Dense(3)(hidden)))
        >>> tagger.compile(optimizer="adam", loss=CRF.sparse_loss, metrics=[CRF.sparse_accuracy])
        >>> tuple(K.eval(CRF.trans).shape)
        (3, 3)
    """

    def call(self, inputs: Any, mask: Any = None) -> Any:
        return sequence_masking(inputs, mask, -np.inf, 1)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def log_likelihood(self, tags: Any, emissions: Any, mask: Any = None) -> Any:
        """``[batch]`` log-probabilities of ``tags``; ``mask`` defaults to the positions
        that are not ``-inf``."""
        mask = _scores_mask(emissions) if mask is None else mask
        emissions = ops.where(ops.expand_dims(ops.cast(mask, "bool"), -1), emissions, 0.0)
        return core_crf.crf_log_likelihood(tags, emissions, self.trans, mask)

    def decode(self, emissions: Any, mask: Any = None) -> Any:
        """int32 ``[batch, length]`` Viterbi paths, 0 at padding (``-inf`` positions)."""
        mask = _scores_mask(emissions) if mask is None else mask
        emissions = ops.where(ops.expand_dims(ops.cast(mask, "bool"), -1), emissions, 0.0)
        return core_crf.viterbi_decode(emissions, self.trans, mask)

    def sparse_loss(self, y_true: Any, y_pred: Any) -> Any:
        """``-log p(tags)`` per sequence; ``y_true`` integer tags."""
        return -self.log_likelihood(_tags_like(y_true, y_pred), y_pred)

    def dense_loss(self, y_true: Any, y_pred: Any) -> Any:
        """``-log p(tags)`` per sequence; ``y_true`` one-hot tags."""
        return self.sparse_loss(ops.argmax(y_true, axis=-1), y_pred)

    # bert4keras's methods, where the model code's layer has properties (its loss and metric
    # objects): a signature of their own by design.
    def sparse_accuracy(self, y_true: Any, y_pred: Any) -> Any:  # type: ignore[override]
        """The share of real tokens whose best emission is the tag; ``y_true`` integers."""
        right = ops.equal(_tags_like(y_true, y_pred),
                          ops.cast(ops.argmax(y_pred, axis=2), "int32"))
        return _masked_mean(ops.cast(right, "float32"), _scores_mask(y_pred))

    def dense_accuracy(self, y_true: Any, y_pred: Any) -> Any:
        """:meth:`sparse_accuracy` of one-hot ``y_true``."""
        return self.sparse_accuracy(ops.argmax(y_true, axis=2), y_pred)

    @property
    def loss(self) -> Callable[[Any, Any], Any]:  # type: ignore[override]
        """:meth:`sparse_loss` (the model code's ``crf.loss`` reads a Keras mask this layer
        does not give)."""
        return self.sparse_loss


@register
class MaximumEntropyMarkovModel(Layer):
    """bert4keras's (bidirectional) maximum-entropy Markov model: a CRF-like tagger head
    whose loss is a softmax per token, each token's scores averaged with the transition
    scores from the gold previous tag, forwards and backwards.

    Args:
        lr_multiplier: as :class:`ConditionalRandomField`'s.
        hidden_dim: None: one ``(tags, tags)`` transition matrix (``trans``); a number:
            it as a product of ``l_trans`` and ``r_trans``, ``(tags, hidden_dim)`` each.

    Example:
        >>> memm = MaximumEntropyMarkovModel()
        >>> memm(np.zeros((1, 4, 3), "float32")).shape
        TensorShape([1, 4, 3])
    """

    def __init__(self, lr_multiplier: float = 1, hidden_dim: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lr_multiplier = lr_multiplier
        self.hidden_dim = hidden_dim

    def build(self, input_shape: Any) -> None:
        tags = input_shape[-1]
        glorot = initializers.GlorotUniform()

        def initializer(shape, dtype=None):
            return glorot(shape, dtype) / self.lr_multiplier

        shapes = ({"_trans": (tags, tags)} if self.hidden_dim is None else
                  {"_l_trans": (tags, self.hidden_dim), "_r_trans": (tags, self.hidden_dim)})
        for name, shape in shapes.items():
            setattr(self, name, self.add_weight(name=name.lstrip("_"), shape=shape,
                                                initializer=initializer))

    trans = property(lambda self: self._trans * self.lr_multiplier)
    l_trans = property(lambda self: self._l_trans * self.lr_multiplier)
    r_trans = property(lambda self: self._r_trans * self.lr_multiplier)

    def call(self, inputs: Any, mask: Any = None) -> Any:
        return sequence_masking(inputs, mask, -np.inf, 1)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def reverse_sequence(self, inputs: Any, mask: Any = None) -> Any:
        """Each of ``inputs`` with the first ``sum(mask)`` positions of each row reversed
        (all of them without a mask); padding stays at the end."""
        if mask is None:
            return [x[:, ::-1] for x in inputs]
        length = ops.sum(ops.cast(mask, "int32"), axis=1, keepdims=True)
        positions = ops.expand_dims(ops.arange(ops.shape(mask)[1], dtype="int32"), 0)
        order = ops.where(positions < length, length - 1 - positions, positions)
        return [ops.take_along_axis(x, ops.reshape(order, (*ops.shape(order),
                                                           *([1] * (len(x.shape) - 2)))),
                                    axis=1) for x in inputs]

    def _scores(self, y_true, y_pred, go_backwards):
        """Tags, the real positions, and each token's scores averaged with the transition
        scores from the gold tag before it (after it, backwards)."""
        y_pred = ops.cast(y_pred, "float32")  # 16-bit scores: the softmax wants float32
        mask = _scores_mask(y_pred)
        y_true = _tags_like(y_true, y_pred)
        if go_backwards:
            y_true, y_pred = self.reverse_sequence([y_true, y_pred], mask)
        if self.hidden_dim is None:
            trans = ops.transpose(self.trans) if go_backwards else self.trans
            history = ops.take(trans, y_true, axis=0)
        else:
            left, right = self.l_trans, self.r_trans
            if go_backwards:
                left, right = right, left
            history = ops.einsum("bnd,kd->bnk", ops.take(left, y_true, axis=0), right)
        history = ops.concatenate([y_pred[:, :1], history[:, :-1]], axis=1)
        return y_true, mask, (y_pred + history) / 2

    def basic_loss(self, y_true: Any, y_pred: Any, go_backwards: bool = False) -> Any:
        """The mean cross-entropy over real tokens, one direction; ``y_true`` integers."""
        y_true, mask, scores = self._scores(y_true, y_pred, go_backwards)
        scores = ops.where(ops.expand_dims(mask, -1), scores, 0.0)
        loss = ops.sparse_categorical_crossentropy(y_true, scores, from_logits=True)
        return _masked_mean(loss, mask)

    def sparse_loss(self, y_true: Any, y_pred: Any) -> Any:
        """Both directions' :meth:`basic_loss`, averaged; ``y_true`` integer tags."""
        return (self.basic_loss(y_true, y_pred) + self.basic_loss(y_true, y_pred, True)) / 2

    def dense_loss(self, y_true: Any, y_pred: Any) -> Any:
        """:meth:`sparse_loss` of one-hot ``y_true``."""
        return self.sparse_loss(ops.argmax(y_true, axis=2), y_pred)

    def basic_accuracy(self, y_true: Any, y_pred: Any, go_backwards: bool = False) -> Any:
        """The share of real tokens whose best averaged score is the tag, one direction."""
        y_true, mask, scores = self._scores(y_true, y_pred, go_backwards)
        right = ops.equal(y_true, ops.cast(ops.argmax(scores, axis=2), "int32"))
        return _masked_mean(ops.cast(right, "float32"), mask)

    def sparse_accuracy(self, y_true: Any, y_pred: Any) -> Any:
        """Both directions' :meth:`basic_accuracy`, averaged; ``y_true`` integer tags."""
        return (self.basic_accuracy(y_true, y_pred)
                + self.basic_accuracy(y_true, y_pred, True)) / 2

    def dense_accuracy(self, y_true: Any, y_pred: Any) -> Any:
        """:meth:`sparse_accuracy` of one-hot ``y_true``."""
        return self.sparse_accuracy(ops.argmax(y_true, axis=2), y_pred)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "lr_multiplier": self.lr_multiplier,
                "hidden_dim": self.hidden_dim}


@register
class GlobalPointer(Layer):
    """GlobalPointer (https://kexue.fm/archives/8373): each span ``(start, end)`` scored as
    one, per head (entity type): ``(batch, length, hidden) -> (batch, heads, length,
    length)``. Padding rows and columns, and with ``tril_mask`` spans ending before they
    start, are ``-inf``; train with :func:`kerasbert.backend.multilabel_categorical_crossentropy`.

    Args:
        heads: the number of span types; head_size: the width of each query / key.
        RoPE: rotate queries and keys by their positions (relative positions).
        use_bias: the projection has a bias.
        tril_mask: mask the spans whose end comes before their start.
        kernel_initializer: of the projection (default ``lecun_normal``).

    Example:
        >>> GlobalPointer(heads=3, head_size=8)(np.zeros((1, 5, 16), "float32")).shape
        TensorShape([1, 3, 5, 5])
    """

    def __init__(self, heads: int, head_size: int, RoPE: bool = True, use_bias: bool = True,
                 tril_mask: bool = True,
                 kernel_initializer: str | keras.initializers.Initializer = "lecun_normal",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heads = heads
        self.head_size = head_size
        self.RoPE = RoPE
        self.use_bias = use_bias
        self.tril_mask = tril_mask
        self.kernel_initializer = initializers.get(kernel_initializer)

    def _dense(self, units, input_shape, name):
        dense = keras.layers.Dense(units, use_bias=self.use_bias,
                                   kernel_initializer=self.kernel_initializer, name=name,
                                   dtype=self.dtype_policy)
        dense.build(input_shape)
        return dense

    def build(self, input_shape: Any) -> None:
        self.dense = self._dense(self.head_size * self.heads * 2, input_shape, "dense")

    def _rotated(self, qw, kw):
        if not self.RoPE:
            return qw, kw
        positions = ops.expand_dims(ops.arange(ops.shape(qw)[1], dtype="float32"), 0)
        table = ops.cast(sinusoidal_embeddings(positions, self.head_size), qw.dtype)
        return apply_rotary_position_embeddings(table, qw, kw)

    def call(self, inputs: Any, mask: Any = None) -> Any:
        x = self.dense(inputs)
        # (batch, length, heads, 2 * head_size): each head's query, then its key
        x = ops.reshape(x, (*ops.shape(x)[:2], self.heads, 2 * self.head_size))
        qw, kw = self._rotated(x[..., :self.head_size], x[..., self.head_size:])
        logits = ops.einsum("bmhd,bnhd->bhmn", qw, kw) / self.head_size**0.5
        return self._masked(logits, mask)

    def _masked(self, logits, mask):
        upper = None
        if self.tril_mask:
            positions = ops.arange(ops.shape(logits)[-1])
            upper = ops.expand_dims(positions, 0) >= ops.expand_dims(positions, 1)  # end >= start
        return sequence_masking(logits, mask, -np.inf, [2, 3], upper)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "heads": self.heads, "head_size": self.head_size,
                "RoPE": self.RoPE, "use_bias": self.use_bias, "tril_mask": self.tril_mask,
                "kernel_initializer": initializers.serialize(self.kernel_initializer)}


@register
class EfficientGlobalPointer(GlobalPointer):
    """Efficient GlobalPointer (https://kexue.fm/archives/8877): one query / key projection
    shared by all heads (``p_dense``) and a per-head bias of each start and end
    (``q_dense``), far fewer weights; the same arguments and outputs as
    :class:`GlobalPointer`.

    Example:
        >>> pointer = EfficientGlobalPointer(heads=3, head_size=8)
        >>> pointer(np.zeros((1, 5, 16), "float32")).shape
        TensorShape([1, 3, 5, 5])
        >>> [tuple(w.shape) for w in pointer.weights]
        [(16, 16), (16,), (16, 6), (6,)]
    """

    def build(self, input_shape: Any) -> None:
        self.p_dense = self._dense(self.head_size * 2, input_shape, "p_dense")
        self.q_dense = self._dense(self.heads * 2, (*input_shape[:-1], self.head_size * 2),
                                   "q_dense")

    def call(self, inputs: Any, mask: Any = None) -> Any:
        x = self.p_dense(inputs)
        qw, kw = self._rotated(x[..., ::2], x[..., 1::2])
        logits = ops.einsum("bmd,bnd->bmn", qw, kw) / self.head_size**0.5
        bias = ops.transpose(self.q_dense(x), (0, 2, 1)) / 2  # (batch, 2 * heads, length)
        # Head h: the start's bias (row 2h) on each row, the end's (row 2h + 1) on each column.
        logits = (ops.expand_dims(logits, 1) + ops.expand_dims(bias[:, ::2], 2)
                  + ops.expand_dims(bias[:, 1::2], 3))
        return self._masked(logits, mask)


@register
class Loss(Layer):
    """bert4keras's loss layer: subclass it with ``compute_loss(inputs, mask=None)``; the
    layer adds that loss to the model (``add_loss``) and returns its inputs, or those at
    ``output_axis`` (an index or a list). ``model.compile(optimizer)`` with no ``loss``
    then trains on it.

    Example:
        >>> class MeanSquare(Loss):
        ...     def compute_loss(self, inputs, mask=None):
        ...         return K.mean(K.square(inputs[0] - inputs[1]))
        >>> x, y = keras.Input((3,)), keras.Input((3,))
        >>> model = keras.Model([x, y], MeanSquare(1)([x, keras.layers.Dense(3)(y)]))
        >>> model.compile(optimizer="sgd")
    """

    def __init__(self, output_axis: int | list[int] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.output_axis = output_axis

    def call(self, inputs: Any, mask: Any = None) -> Any:
        # bert4keras's inputs are float32 (Keras 2's Input default) and its scripts multiply
        # losses by the token and segment ids as they come: integer ids are given as floats.
        self.add_loss(self.compute_loss(_as_floats(inputs), mask))
        return self._chosen(inputs)

    def compute_loss(self, inputs: Any, mask: Any = None) -> Any:
        """The loss (a scalar tensor) of ``inputs``; ``mask``: their masks (a list for a
        list of inputs, None where an input has none)."""
        raise NotImplementedError(f"{type(self).__name__} must define "
                                  "compute_loss(self, inputs, mask=None)")

    def _chosen(self, values):
        if self.output_axis is None or values is None:
            return values
        if isinstance(self.output_axis, (list, tuple)):
            return [values[i] for i in self.output_axis]
        return values[self.output_axis]

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return self._chosen(mask)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "output_axis": self.output_axis}


def _as_floats(values):
    """``values`` (a tensor or a list of them) with integer tensors cast to ``floatx``."""
    if isinstance(values, (list, tuple)):
        return type(values)(_as_floats(value) for value in values)
    if values is not None and "int" in str(values.dtype):
        return ops.cast(values, keras.config.floatx())
    return values


#: bert4keras's layers by name, for ``keras.saving.load_model(..., custom_objects=...)``.
custom_objects = {cls.__name__: cls for cls in (
    Embedding, ScaleOffset, Concatenate1D, MultiHeadAttention, LayerNormalization,
    PositionEmbedding, SinusoidalPositionEmbedding, RelativePositionEmbedding, FeedForward,
    ConditionalRandomField, MaximumEntropyMarkovModel, GlobalPointer, EfficientGlobalPointer,
    Loss, GlobalMaxPooling1D)}
