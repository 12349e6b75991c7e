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
Viterbi), the feed-forward block, the attention, the (conditional) layer norm and
``ScaleOffset`` (:mod:`kerasbert.models.layers`), T5's position buckets
(:mod:`kerasbert.models.families.t5`); the tensor helpers are :mod:`kerasbert.backend`'s.
What differs from bert4keras, and why:

- ``ConditionalRandomField`` and ``MaximumEntropyMarkovModel`` return their input with
  ``-inf`` at padding and no Keras mask, as in bert4keras: ``sparse_loss`` and
  ``sparse_accuracy`` read the padding from it. ``crf.loss`` is ``crf.sparse_loss``.
- ``Loss`` layers add their loss with ``add_loss``; ``model.compile(optimizer)`` with no
  ``loss`` trains on it, as in Keras 2.
- ``FeedForward`` with a list of activations (a gated linear unit), ``BatchSplit`` and
  ``BatchConcat`` are not provided: importing one says why (:data:`NOT_PROVIDED`).
- ``GatedAttentionUnit`` computes its attention with the model code's; with
  ``self_attention=False`` the first input's mask still masks the keys (bert4keras's
  behaviour: give ``q`` and ``k`` of one length, or no mask).
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
from kerasbert.models.families.t5 import relative_buckets
from kerasbert.models.layers import attend, attention_scores

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


def _merged(inputs: Any, embeddings: Any, merge_mode: str, tile: bool) -> Any:
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


def _first(mask: Any) -> Any:
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
        return core_layers.table_logits(inputs, self.embeddings)

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
class ScaleOffset(core_layers.ScaleOffset):
    """bert4keras's affine layer, ``x * gamma + beta``, a condition steering both where
    ``conditional=True``: :class:`kerasbert.models.layers.ScaleOffset` (its arguments and
    defaults are bert4keras's).

    Example:
        >>> ScaleOffset()(np.ones((1, 3, 4), "float32")).shape
        TensorShape([1, 3, 4])
    """


@register
class LayerNormalization(core_layers.ConditionalLayerNorm, ScaleOffset):
    """bert4keras's (conditional) layer normalization:
    :class:`kerasbert.models.layers.ConditionalLayerNorm`, the layer every norm of a model
    built with ``layer_norm_cond`` is (its arguments and defaults are bert4keras's).

    Example:
        >>> norm = LayerNormalization(conditional=True, hidden_units=8)
        >>> norm([np.ones((2, 3, 16), "float32"), np.ones((2, 4), "float32")]).shape
        TensorShape([2, 3, 16])
        >>> [w.path.split("/")[-1] for w in norm.weights]
        ['beta', 'gamma', 'kernel', 'kernel', 'kernel']
    """


@register
class Concatenate1D(core_layers.Concatenate1D):
    """Joins sequences along the length axis, and their masks (an input without a mask
    counts as unmasked), which Keras's ``Concatenate`` does not do for a mix: the layer
    models put attention caches in front of the hidden states with.

    Example:
        >>> Concatenate1D()([np.ones((1, 2, 4)), np.ones((1, 3, 4))]).shape
        TensorShape([1, 5, 4])
    """


def _attention_bias(bias: Any) -> tuple[Any, Any]:
    """An ``a_bias`` input as :func:`attend` takes it: ``(bias, allowed)``, a bool mask as
    ``allowed`` and additive scores as ``bias`` (the other None), with a heads axis."""
    if len(bias.shape) == 3:  # (batch or 1, q_len, k_len)
        bias = align(bias, [0, -2, -1], 4)
    return (None, bias) if "bool" in str(bias.dtype) else (bias, None)


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
            (bias, allowed), n = _attention_bias(inputs[n]), n + 1
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
class GatedAttentionUnit(Layer):
    """bert4keras's gated attention unit (GAU, https://arxiv.org/abs/2202.10447): one-head
    attention gating a feed-forward, ``o = (u ⊙ A v) W_o``.

    Self-attention (the default) is called on ``x`` (or ``[x, ...]``): ``u, v, z =
    split(act(x W_i))`` (widths ``units``, ``units``, ``key_size``), the queries and keys
    ``z`` scaled (and offset, with ``use_bias``) feature by feature. With
    ``self_attention=False`` it is called on ``[q, k, v]``: ``u`` and the queries from
    ``q``, the keys from ``k``, the values from ``v``. The attention is the model code's one
    (:func:`kerasbert.models.layers.attend`); the mask of the first input masks the keys,
    as in bert4keras.

    Args:
        units: the width of ``u`` and ``v``; key_size: the width of queries and keys.
        activation: of the input projections (default ``swish``).
        use_bias: the projections have biases and the query / key scales offsets.
        normalization: ``"squared_relu"`` (default), ``"softmax"`` or ``"softmax_plus"``
            (see :func:`kerasbert.backend.attention_normalize`).
        self_attention: one input projection (``i_dense``) or three (``uq_dense``,
            ``k_dense``, ``v_dense``).
        attention_scale: divide the scores by ``sqrt(key_size)``.
        attention_dropout: dropout rate of the attention weights (in training).
        kernel_initializer: of the projections.

    Call arguments: ``a_bias=True``: the input after ``x`` (after ``v``) is an attention
    bias (a bool mask or additive scores, ``(batch or 1, q_len, k_len)``);
    ``p_bias="rotary"``: the next input is the sinusoid table of
    :class:`SinusoidalPositionEmbedding` ``merge_mode="zero"``.

    Example:
        >>> unit = GatedAttentionUnit(units=32, key_size=8)
        >>> unit(np.zeros((1, 5, 16), "float32")).shape
        TensorShape([1, 5, 16])
        >>> [tuple(w.shape) for w in unit.weights]
        [(16, 72), (72,), (8,), (8,), (8,), (8,), (32, 16), (16,)]
    """

    def __init__(self, units: int, key_size: int, activation: _Activation = "swish",
                 use_bias: bool = True, normalization: str = "squared_relu",
                 self_attention: bool = True, attention_scale: bool = True,
                 attention_dropout: float | None = None,
                 kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.units = units
        self.key_size = key_size
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.normalization = normalization
        self.self_attention = self_attention
        self.attention_scale = attention_scale
        self.attention_dropout = attention_dropout
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.dropout = (keras.layers.Dropout(attention_dropout, dtype=self.dtype_policy)
                        if attention_dropout else None)

    def _dense(self, units: int, fan_in: Any, name: str,
               activation: Any = None) -> keras.layers.Dense:
        dense = keras.layers.Dense(units, activation=activation, use_bias=self.use_bias,
                                   kernel_initializer=self.kernel_initializer, name=name,
                                   dtype=self.dtype_policy)
        dense.build(fan_in)
        return dense

    def _scale(self, name: str) -> ScaleOffset:
        scale = ScaleOffset(offset=self.use_bias, name=name, dtype=self.dtype_policy)
        scale.build((None, self.key_size))
        return scale

    def build(self, input_shape: Any) -> None:
        shapes = input_shape if isinstance(input_shape[0], (list, tuple)) else [input_shape]
        # bert4keras's order of weights: the input projections, the scales, o_dense.
        if self.self_attention:
            self.i_dense = self._dense(2 * self.units + self.key_size, shapes[0], "i_dense",
                                       self.activation)
            self.q_scaleoffset = self._scale("q_scaleoffset")
            self.k_scaleoffset = self._scale("k_scaleoffset")
        else:
            self.uq_dense = self._dense(self.units + self.key_size, shapes[0], "uq_dense",
                                        self.activation)
            self.k_dense = self._dense(self.key_size, shapes[1], "k_dense", self.activation)
            self.v_dense = self._dense(self.units, shapes[2], "v_dense", self.activation)
        self.o_dense = self._dense(shapes[0][-1], (None, self.units), "o_dense")

    def call(self, inputs: Any, mask: Any = None, a_bias: Any = None, p_bias: Any = None,
             training: bool | None = None) -> Any:
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        n = 1 if self.self_attention else 3
        bias = allowed = None
        if a_bias:
            (bias, allowed), n = _attention_bias(inputs[n]), n + 1
        if self.self_attention:
            u, v, z = ops.split(self.i_dense(inputs[0]), [self.units, 2 * self.units], axis=-1)
            q, k = self.q_scaleoffset(z), self.k_scaleoffset(z)
        else:
            u, q = ops.split(self.uq_dense(inputs[0]), [self.units], axis=-1)
            k, v = self.k_dense(inputs[1]), self.v_dense(inputs[2])
        if p_bias == "rotary":
            q, k = apply_rotary_position_embeddings(inputs[n], q, k)
        # One head, as an axis of 1: (batch, 1, length, size).
        query, key, value = (ops.expand_dims(x, 1) for x in (q, k, v))
        context = attend(query, key, value,
                         scale=self.key_size**-0.5 if self.attention_scale else None,
                         bias=bias, key_mask=_first(mask), allowed=allowed,
                         dropout=self.dropout, training=training,
                         normalization=self.normalization)
        return self.o_dense(u * context[:, 0])

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return _first(mask)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[0] if isinstance(input_shape[0], (list, tuple)) else input_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "units": self.units, "key_size": self.key_size,
                "activation": activations.serialize(self.activation),
                "use_bias": self.use_bias, "normalization": self.normalization,
                "self_attention": self.self_attention,
                "attention_scale": self.attention_scale,
                "attention_dropout": self.attention_dropout,
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
        alpha = core_layers.hierarchical_alpha(self.hierarchical)
        if self.custom_position_ids:
            inputs, position_ids = inputs
            position_ids = ops.cast(position_ids, "int32")
        else:
            length = core_layers.checked_length(ops.shape(inputs)[1], self.input_dim, alpha,
                                                self.name)
            position_ids = ops.expand_dims(ops.arange(length, dtype="int32"), 0)
        table = ops.cast(self.embeddings, inputs.dtype)
        if alpha is None and not self.custom_position_ids:
            embeddings = ops.expand_dims(table[:length], 0)
        else:
            embeddings = core_layers.position_rows(table, position_ids, alpha, self.name)
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
class RelativePositionEmbeddingT5(RelativePositionEmbedding):
    """T5's relative positions: called on ``[q, v]``, returns ``(q_len, v_len,
    output_dim)``, row ``(i, j)`` the table's row of the bucket of ``j - i`` (the model
    code's :func:`kerasbert.models.families.t5.relative_buckets`: half the buckets exact
    distances, the rest on a log scale up to ``max_distance``). With ``output_dim`` the
    number of heads it is :class:`MultiHeadAttention`'s ``p_bias="t5_relative"`` input.

    Args:
        input_dim: the number of buckets (T5: 32); output_dim: the width of a row.
        max_distance: the distance from which all fall in the last bucket.
        bidirectional: keys after the query have buckets of their own (an encoder); False:
            they share bucket 0 (a decoder).
        embeddings_initializer: of the table (default zeros).

    Example:
        >>> x = np.zeros((1, 5, 16), "float32")
        >>> RelativePositionEmbeddingT5(32, 2)([x, x]).shape
        TensorShape([5, 5, 2])
    """

    def __init__(self, input_dim: int, output_dim: int, max_distance: int = 128,
                 bidirectional: bool = True,
                 embeddings_initializer: str | keras.initializers.Initializer = "zeros",
                 **kwargs: Any) -> None:
        super().__init__(input_dim, output_dim, embeddings_initializer=embeddings_initializer,
                         **kwargs)
        self.max_distance = max_distance
        self.bidirectional = bidirectional

    def compute_position_ids(self, inputs: Any) -> Any:
        """``(q_len, v_len)`` bucket ids."""
        q, v = inputs
        return relative_buckets(ops.arange(ops.shape(q)[1]), ops.arange(ops.shape(v)[1]),
                                self.bidirectional, self.input_dim, self.max_distance)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "max_distance": self.max_distance,
                "bidirectional": self.bidirectional}


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


def _scores_mask(y_pred: Any) -> Any:
    """The real positions of a CRF's or MEMM's output: those not ``-inf`` (bert4keras's)."""
    return ops.all(ops.not_equal(y_pred, -np.inf), axis=2)


def _tags_like(y_true: Any, y_pred: Any) -> Any:
    """Integer tags shaped as ``y_pred`` without its last axis."""
    return ops.cast(ops.reshape(y_true, ops.shape(y_pred)[:-1]), "int32")


def _masked_mean(values: Any, mask: Any) -> Any:
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

        def initializer(shape: Any, dtype: Any = None) -> Any:
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

    def _scores(self, y_true: Any, y_pred: Any, go_backwards: bool) -> tuple[Any, Any, Any]:
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
            history = core_crf.factored_transitions(left, right, y_true)
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

    def _dense(self, units: int, input_shape: Any, name: str) -> keras.layers.Dense:
        dense = keras.layers.Dense(units, use_bias=self.use_bias,
                                   kernel_initializer=self.kernel_initializer, name=name,
                                   dtype=self.dtype_policy)
        dense.build(input_shape)
        return dense

    def build(self, input_shape: Any) -> None:
        self.dense = self._dense(self.head_size * self.heads * 2, input_shape, "dense")

    def _rotated(self, qw: Any, kw: Any) -> tuple[Any, Any]:
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
        # Each head's span scores are its attention scores: (batch, heads, length, length).
        qw, kw = (ops.transpose(x, (0, 2, 1, 3)) for x in (qw, kw))
        return self._masked(attention_scores(qw, kw, self.head_size**-0.5), mask)

    def _masked(self, logits: Any, mask: Any) -> Any:
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
        # The scores of one head, shared: (batch, 1, length, length).
        logits = attention_scores(ops.expand_dims(qw, 1), ops.expand_dims(kw, 1),
                                  self.head_size**-0.5)
        bias = ops.transpose(self.q_dense(x), (0, 2, 1)) / 2  # (batch, 2 * heads, length)
        # Head h: the start's bias (row 2h) on each row, the end's (row 2h + 1) on each column.
        logits = (logits + ops.expand_dims(bias[:, ::2], 2)
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

    def _chosen(self, values: Any) -> Any:
        if self.output_axis is None or values is None:
            return values
        if isinstance(self.output_axis, (list, tuple)):
            return [values[i] for i in self.output_axis]
        return values[self.output_axis]

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return self._chosen(mask)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "output_axis": self.output_axis}


def _as_floats(values: Any) -> Any:
    """``values`` (a tensor or a list of them) with integer tensors cast to ``floatx``."""
    if isinstance(values, (list, tuple)):
        return type(values)(_as_floats(value) for value in values)
    if values is not None and "int" in str(values.dtype):
        return ops.cast(values, keras.config.floatx())
    return values


#: bert4keras's layers by name, for ``keras.saving.load_model(..., custom_objects=...)``.
custom_objects = {cls.__name__: cls for cls in (
    Embedding, ScaleOffset, Concatenate1D, MultiHeadAttention, GatedAttentionUnit,
    LayerNormalization, PositionEmbedding, SinusoidalPositionEmbedding,
    RelativePositionEmbedding, RelativePositionEmbeddingT5, FeedForward,
    ConditionalRandomField, MaximumEntropyMarkovModel, GlobalPointer, EfficientGlobalPointer,
    Loss, GlobalMaxPooling1D)}
