"""The few layers Keras does not have in the form a Google checkpoint needs.

Keras supplies the embeddings, layer norms and dense layers; ``kernels.py`` the dropout and
how products and GELU run on TensorFlow. What remains: self-attention and feed-forward
blocks whose kernels are the 2-D matrices stored in
Google checkpoints (so loading is a plain assignment, no reshaping), the learned
position embedding, the first-token slice used by ``Pooler`` and ``CLS-token``, the
output bias of the MLM head, and the layer norm a condition steers (``layer_norm_cond``;
bert4keras's ``LayerNormalization``). All build their weights in ``build()`` so
``model.summary()`` is exact before the first call, and all are registered so a
saved ``.keras`` file loads with ``safe_mode=True``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeAlias

import keras
from keras import ops

from kerasbert.internals import dense_kernel, get_keras_mask
from kerasbert.models import names
from kerasbert.models.config import APPROXIMATE_GELU_NAMES
from kerasbert.models.kernels import (
    Dropout,
    affine,
    checked_below,
    is_variable,
    keras_attention,
    outside_as_nan,
    token_rows,
    training_activation,
    written_in_place,
)
from kerasbert.models.positions import rotate

PACKAGE = names.SERIALIZATION_PACKAGE
# What an ``initializer=`` takes: a name, a Keras initializer, or its config (from get_config).
_Initializer: TypeAlias = str | dict[str, Any] | keras.initializers.Initializer


@keras.saving.register_keras_serializable(package=PACKAGE)
def gelu_approximate(x: Any) -> Any:
    """The tanh approximation of GELU (Hugging Face's ``gelu_new``)."""
    return keras.activations.gelu(x, approximate=True)


def get_activation(name: str | Callable[..., Any] | None) -> Callable[..., Any]:
    """Resolves a config's ``hidden_act``: ``"gelu"`` is the exact erf form."""
    if name in APPROXIMATE_GELU_NAMES:
        return gelu_approximate
    return keras.activations.get(name)


#: What ``hidden_act: "gelu"`` builds: ``"erf"`` (Google's, the default) or ``"tanh"`` (chosen
#: with bert4keras's ``set_gelu``; models built afterwards spell it ``gelu_approximate``, so a
#: saved model keeps its activation whatever is chosen when it is loaded).
_GELU = {"version": "erf"}


def set_gelu(version: str) -> None:
    """Chooses the GELU that ``hidden_act: "gelu"`` builds from now on: ``"erf"`` or
    ``"tanh"`` (bert4keras's ``set_gelu``).

    Raises:
        ValueError: another version.
    """
    version = str(version).lower()
    if version not in ("erf", "tanh"):
        raise ValueError(f"gelu version must be 'erf' or 'tanh', got version={version!r}")
    _GELU["version"] = version


def gelu_version() -> str:
    """The version :func:`set_gelu` chose last (``"erf"`` unless told otherwise)."""
    return _GELU["version"]


def built_activation(name: str) -> str:
    """The activation name a model is built with for a config's ``hidden_act``: ``"gelu"``
    is ``"gelu_approximate"`` after ``set_gelu("tanh")``."""
    return "gelu_approximate" if name == "gelu" and _GELU["version"] == "tanh" else name


#: bert4keras's spellings of a true and of a false ``RECOMPUTE`` (distutils' ``strtobool``).
_TRUE, _FALSE = ("y", "yes", "t", "true", "on", "1"), ("n", "no", "f", "false", "off", "0")


def recompute_requested() -> bool:
    """Whether ``RECOMPUTE`` in the environment asks for recomputation, as bert4keras reads
    it (unset: no).

    Raises:
        ValueError: a value that is neither a true nor a false spelling.
    """
    value = os.environ.get("RECOMPUTE", "0").strip().lower()
    if value not in _TRUE + _FALSE:
        raise ValueError(f"RECOMPUTE={value!r} in the environment: expected 1 or 0 (or "
                         f"{', '.join(_TRUE[:-1])} / {', '.join(_FALSE[:-1])})")
    return value in _TRUE


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    """The initializer of every BERT weight matrix: Google's truncated normal with the
    config's ``initializer_range`` as its standard deviation."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def kernel_initializer(layer: keras.layers.Layer) -> keras.initializers.Initializer:
    """A layer's kernel initializer: its ``initializer`` if given, else BERT's truncated
    normal with its ``initializer_range``."""
    if layer.initializer is not None:
        return keras.initializers.get(layer.initializer)
    return truncated_normal(layer.initializer_range)


#: What :class:`MultiHeadSelfAttention` adds position information with, besides BERT's none
#: (``"bias"``: T5's, added to the scores).
POSITION_KINDS = (None, "rotary", "relative", "bias")


def variant_config(layer: keras.layers.Layer) -> dict[str, Any]:
    """The family options of a layer that differ from BERT's, for ``get_config`` (files
    saved before they existed have none)."""
    config: dict[str, Any] = {} if layer.use_bias else {"use_bias": False}
    if getattr(layer, "position", None):
        config["position"] = layer.position
    for flag in ("attention_mask", "return_scores", "cached", "recompute"):
        if getattr(layer, flag, False):
            config[flag] = True
    return config


def initializer_config(layer: keras.layers.Layer) -> dict[str, Any]:
    """``{"initializer": ...}`` for ``get_config`` where one was given (files saved before
    the argument existed have none)."""
    if layer.initializer is None:
        return {}
    return {"initializer": keras.initializers.serialize(
        keras.initializers.get(layer.initializer))}


@keras.saving.register_keras_serializable(package=PACKAGE)
class TokenEmbedding(keras.layers.ReversibleEmbedding):
    """Token embedding whose transpose is also the MLM output matrix (``reverse=True``).

    Keras's ``ReversibleEmbedding`` with the padding mask (token id 0) handed on to the
    next layers of a functional graph, as ``keras.layers.Embedding(mask_zero=True)`` does.

    Example:
        >>> layer = TokenEmbedding(100, 16, mask_zero=True)
        >>> tuple(layer(keras.ops.ones((1, 4), "int32"), reverse=False).shape)
        (1, 4, 16)
    """

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if self.mask_zero and "int" in str(inputs.dtype):
            return ops.not_equal(inputs, 0)
        # The output matrix (reverse): the padding mask goes on to the MLM / LM outputs, as
        # in bert4keras, where a seq2seq loss reads it.
        return mask


def table_logits(x: Any, table: Any) -> Any:
    """``x @ table^T``: the logits of ``x`` under a token table read transposed (a language
    model's tied output; kerasbert's :class:`TokenEmbedding` has it from Keras's
    ``ReversibleEmbedding``, bert4keras's ``Embedding(mode="dense")`` from here)."""
    return ops.matmul(x, ops.transpose(ops.cast(table, x.dtype)))


@keras.saving.register_keras_serializable(package=PACKAGE)
class Add(keras.layers.Add):
    """``keras.layers.Add`` that keeps the mask of the inputs that have one.

    Keras 3 drops the mask when any input has none; token + segment embeddings must
    keep the token padding mask (the segment embedding has no mask of its own). A
    residual sum sees the same mask twice: it is passed on as it is, so the graph
    (and ``plot_model``) holds one padding-mask operation, not one per layer.

    Args:
        first_mask_only: keep the first input's mask alone: segment ids read through
            ``Embedding-Token`` (``shared_segment_embeddings``) carry its padding mask,
            yet segment 0 is no padding.
    """

    def __init__(self, first_mask_only: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.first_mask_only = first_mask_only

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        masks: list[Any] = []
        for m in (mask or [])[:1] if self.first_mask_only else mask or []:
            if m is not None and not any(m is seen for seen in masks):
                masks.append(m)
        if not masks:
            return None
        output_mask = masks[0]
        for m in masks[1:]:
            output_mask = ops.logical_and(output_mask, m)
        return output_mask

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        return {**config, "first_mask_only": True} if self.first_mask_only else config


@keras.saving.register_keras_serializable(package=PACKAGE)
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned embedding of each position to the input sequence.

    Args:
        max_position: the number of positions (``max_position_embeddings``).
        initializer_range: stddev of the truncated-normal initializer.
        initializer: another initializer instead (models saved by earlier versions may carry
            ``"zeros"`` here).
        hierarchical: None, or alpha of hierarchically decomposed positions
            (https://kexue.fm/archives/7947): position ``i`` reads
            ``alpha·E'[i // n] + (1 - alpha)·E'[i % n]`` with ``E' = (E - alpha·E[0]) /
            (1 - alpha)`` (``n = max_position``), which is ``E[i]`` below ``n`` and goes on
            to ``n²`` positions with the same table.

    Example:
        >>> layer = PositionEmbedding(max_position=512)
        >>> tuple(layer(keras.ops.zeros((2, 10, 16))).shape)
        (2, 10, 16)
        >>> tuple(PositionEmbedding(8, hierarchical=0.4)(keras.ops.zeros((1, 20, 4))).shape)
        (1, 20, 4)
    """

    def __init__(self, max_position: int, initializer_range: float = 0.02,
                 initializer: _Initializer | None = None, hierarchical: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_position = max_position
        self.initializer_range = initializer_range
        self.initializer = initializer
        self.hierarchical = hierarchical
        self.supports_masking = True

    @property
    def max_length(self) -> int:
        """The longest sequence the table reads: ``max_position`` (hierarchical: its square)."""
        return self.max_position ** (1 if self.hierarchical is None else 2)

    def build(self, input_shape: Any) -> None:
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_position, input_shape[-1]),
            initializer=kernel_initializer(self),
        )

    def call(self, inputs: Any, positions: Any = None, checked: bool = False) -> Any:
        """``positions``: each token's ``(batch, length)`` position ids, where they do not
        count from 0 (decoding: left-padded rows, the new tokens after a cache; the model's
        ``Input-Position``), checked against the table (:func:`position_rows`) unless
        ``checked`` says the caller did (a decoder, before its first step)."""
        if checked:
            return inputs + ops.cast(
                ops.take(self.embeddings, positions, axis=0) if self.hierarchical is None
                else self.decomposed(positions, self.hierarchical), inputs.dtype)
        if positions is None:
            length = checked_length(ops.shape(inputs)[1], self.max_position, self.hierarchical,
                                    self.name)
            if self.hierarchical is None:
                return inputs + ops.cast(self.embeddings[:length], inputs.dtype)[None]
            positions = ops.arange(length)[None]
        rows = position_rows(self.embeddings, positions, self.hierarchical, self.name)
        return inputs + ops.cast(rows, inputs.dtype)

    def compute_output_shape(self, input_shape: Any) -> Any:
        # JAX's symbolic trace cannot tell that the table's first ``length`` rows match.
        return input_shape

    def decomposed(self, positions: Any, alpha: float) -> Any:
        """The embeddings of ``positions`` (int, any shape) decomposed with ``alpha``."""
        return decomposed_positions(self.embeddings, positions, alpha)

    def get_config(self) -> dict[str, Any]:
        config = {
            **super().get_config(),
            "max_position": self.max_position,
            "initializer_range": self.initializer_range,
            **initializer_config(self),
        }
        # Files saved before the option existed have none.
        return config if self.hierarchical is None else {**config,
                                                         "hierarchical": self.hierarchical}


def _positions_read(rows: int, alpha: float | None, where: str) -> tuple[int, str]:
    """How many positions a table of ``rows`` reads, and how the message names them."""
    if alpha is None:
        return rows, f"the {rows} positions of {where} (max_position_embeddings)"
    return rows * rows, (f"the {rows * rows:,} positions hierarchical_position reads with the "
                         f"{rows} rows of {where}")


def checked_length(length: Any, rows: int, alpha: float | None, where: str) -> Any:
    """A sequence's ``length`` (an int, or a scalar tensor) checked against the positions a
    table of ``rows`` reads (``alpha``: hierarchically decomposed, ``rows²``); ``where``
    names the table in the message (:func:`~kerasbert.models.kernels.checked_below`).

    Example:
        >>> checked_length(100, 64, None, "Embedding-Position")
        Traceback (most recent call last):
        ValueError: tokens in a sequence: more than the 64 positions of ... (found 100)
    """
    limit, read = _positions_read(rows, alpha, where)
    cut = ("; cut the texts (maxlen)" + (" or read longer ones with hierarchical_position=True"
                                          if alpha is None else ""))
    return checked_below(length, limit + 1, f"tokens in a sequence: more than {read}{cut}")


def position_rows(table: Any, positions: Any, alpha: float | None, where: str) -> Any:
    """The rows of a ``(rows, width)`` position ``table`` for ``positions`` (int, ``(batch,
    length)``), each position checked first against those the table reads (``alpha``:
    hierarchically decomposed, :func:`decomposed_positions`), so that no device reads
    past the table: a ``ValueError`` (or TensorFlow's ``InvalidArgumentError`` in a graph)
    naming the position, where a bare lookup raises on a CPU and reads zeros on a GPU.

    Example:
        >>> position_rows(ops.zeros((64, 2)), ops.convert_to_tensor([[3, 70]]), None,
        ...               "Embedding-Position")
        Traceback (most recent call last):
        ValueError: position id: outside the 64 positions of Embedding-Position ... (found 70)
    """
    limit, read = _positions_read(table.shape[0], alpha, where)
    positions = checked_below(positions, limit,
                              f"position id: outside {read}, 0 to {limit - 1}")
    rows = (ops.take(table, positions, axis=0) if alpha is None
            else decomposed_positions(table, positions, alpha))
    return outside_as_nan(rows, positions, limit)


def decomposed_positions(table: Any, positions: Any, alpha: float) -> Any:
    """The hierarchically decomposed embeddings of ``positions`` (int, any shape) from a
    ``(n, width)`` position ``table``: ``alpha·E'[i // n] + (1 - alpha)·E'[i % n]`` with
    ``E' = (E - alpha·E[0]) / (1 - alpha)``."""
    n = table.shape[0]
    table = (table - alpha * table[:1]) / (1 - alpha)
    return (alpha * ops.take(table, positions // n, axis=0)
            + (1 - alpha) * ops.take(table, positions % n, axis=0))


def hierarchical_alpha(value: bool | float | None) -> float | None:
    """bert4keras's ``hierarchical_position`` as the alpha of :class:`PositionEmbedding`:
    True is 0.4, a number is alpha itself, None and False mean none.

    Raises:
        ValueError: alpha not a number between 0 and 1 (1 divides by zero; bert4keras builds
            0 as alpha 0, a table read again from its start past its end, not as none).

    Example:
        >>> hierarchical_alpha(True), hierarchical_alpha(0.3), hierarchical_alpha(None)
        (0.4, 0.3, None)
    """
    if value is None or value is False:
        return None
    if value is True:
        return 0.4
    if not isinstance(value, numbers.Real) or not 0 < value < 1:
        raise ValueError(f"hierarchical_position ({value!r}): must be True (alpha 0.4) or "
                         "alpha, a number between 0 and 1 (exclusive); False or None for "
                         "none")
    return float(value)


def attention_bias(mask: Any, dtype: Any, axis: int | tuple[int, ...] | None = (1, 2)) -> Any:
    """The additive attention bias of a mask: 0 where attended, a large negative where not.

    A padding mask's ``(batch, length)`` booleans become ``(batch, 1, 1, length)``,
    broadcast over heads and queries; an attention mask's ``(batch, length, length)``
    become ``(batch, 1, length, length)`` (``axis=1``). A large negative rather than -inf:
    a row of padding still gives finite output. Every layer asks for the same bias of the
    same mask, and graph optimisation computes it once per batch.
    """
    floor = -1e4 if keras.backend.standardize_dtype(dtype) == "float16" else -1e9
    bias = ops.where(ops.cast(mask, "bool"), ops.cast(0.0, dtype), ops.cast(floor, dtype))
    return bias if axis is None else ops.expand_dims(bias, axis)


def attend(query: Any, key: Any, value: Any, scale: float | None = None, bias: Any = None,
           key_mask: Any = None, allowed: Any = None, relative: Any = None,
           dropout: Callable[..., Any] | None = None, training: bool | None = None,
           normalization: str = "softmax", return_scores: bool = False,
           score_bias: Any = None) -> Any:
    """Dot-product attention of heads: the one place kerasbert computes it (BERT's and every
    family's self-attention, T5's, decoding through a cache, bert4keras's
    ``MultiHeadAttention``). On JAX and PyTorch, a softmax attention without NEZHA's
    relative table and without dropout on its weights (inference, or a rate of 0) is Keras's
    own ``dot_product_attention`` (:func:`~kerasbert.models.kernels.keras_attention`).

    Args:
        query: ``(batch, heads, queries, key size)``; key: ``(batch, heads, keys, key size)``;
            value: ``(batch, heads, keys, value size)``.
        scale: the queries' factor (BERT: ``1 / sqrt(key size)``), or None. Scaling the
            queries (queries x key size) costs less than scaling the scores (queries x keys),
            and gives the same numbers to rounding; what is added to the scores through
            ``relative`` is scaled with them, ``bias`` is not.
        bias: added to the scores (T5's position bias, ``(batch or 1, heads, queries, keys)``).
        key_mask: ``(batch, keys)`` booleans: the keys that are tokens (padding gets no weight).
        allowed: ``(batch or 1, queries, keys)`` booleans: which key each query may attend to
            (a causal LM's mask, UniLM's, the slots a decoding cache has written).
        relative: NEZHA's ``(queries, keys, key size)`` table, added to the scores and the
            context.
        dropout: a dropout layer for the attention weights (in training), or a function
            called as one, or None.
        normalization: scores to weights: ``"softmax"``, or bert4keras's ``"squared_relu"``
            (``relu(s)² / n``) or ``"softmax_plus"`` (``softmax(s · log n / log 512)``, n
            the keys that are tokens, at least 16 for the latter).
        return_scores: also return the scores (before ``score_bias``, the masks and the
            normalization).
        score_bias: added to the scores after they are kept for ``return_scores``, not scaled
            (RealFormer: the previous layer's scores, with the attention mask's bias where
            there is one), ``(batch or 1, heads or 1, queries, keys)``.

    Returns:
        the context, ``(batch, heads, queries, value size)`` (and the scores).
    """
    if scale is not None:
        query = query * ops.cast(scale, query.dtype)
    if relative is None and normalization == "softmax" and not return_scores and (
            dropout is None or not training):
        parts = [ops.cast(part, query.dtype) for part in (bias, score_bias) if part is not None]
        if key_mask is not None:
            parts.append(attention_bias(key_mask, query.dtype))
        if allowed is not None:
            parts.append(attention_bias(_heads_axis(allowed), query.dtype, axis=None))
        total = None
        for part in parts:
            total = part if total is None else total + part
        context = keras_attention(query, key, value, total)
        if context is not None:
            return context
    scores = attention_scores(query, key)
    if relative is not None:
        relative = ops.cast(relative, query.dtype)
        scores = scores + ops.einsum("bnjd,jkd->bnjk", query, relative)
    if bias is not None:
        scores = scores + ops.cast(bias, scores.dtype)
    raw = scores
    if score_bias is not None:
        scores = scores + ops.cast(score_bias, scores.dtype)
    if key_mask is not None:  # (B, Tk) -> (B, 1, 1, Tk)
        scores = scores + attention_bias(key_mask, scores.dtype)
    if allowed is not None:  # (B or 1, [N,] Tq, Tk) -> (B or 1, N or 1, Tq, Tk)
        scores = scores + attention_bias(_heads_axis(allowed), scores.dtype, axis=None)
    probabilities = normalized(scores, normalization,
                               None if normalization == "softmax"
                               else _visible_keys(scores, key_mask, allowed))
    if dropout is not None:
        probabilities = dropout(probabilities, training=training)
    context = ops.matmul(probabilities, value)
    if relative is not None:
        context = context + ops.einsum("bnjk,jkd->bnjd", probabilities, relative)
    return (context, raw) if return_scores else context


def _heads_axis(allowed: Any) -> Any:
    """An attention mask with its heads axis: ``(batch or 1, [heads,] queries, keys)``."""
    return ops.expand_dims(allowed, 1) if len(allowed.shape) == 3 else allowed


def attention_scores(query: Any, key: Any, scale: float | None = None) -> Any:
    """``(query · scale) @ key^T`` of heads, ``(batch, heads, queries, size)`` and
    ``(batch, heads, keys, size)`` -> ``(batch, heads, queries, keys)``: the scores of
    :func:`attend` and of bert4keras's ``GlobalPointer``."""
    if scale is not None:
        query = query * ops.cast(scale, query.dtype)
    return ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))


#: What :func:`normalized` turns scores into weights with.
NORMALIZATIONS = ("softmax", "squared_relu", "softmax_plus")


def normalized(scores: Any, normalization: str = "softmax", length: Any = None,
               axis: int = -1) -> Any:
    """Attention scores (masked already) to weights along ``axis``: the one place kerasbert
    computes them (:func:`attend`, bert4keras's ``attention_normalize``).

    Args:
        scores: the scores, masked positions very negative (or ``-inf``).
        normalization: ``"softmax"``, or bert4keras's ``"squared_relu"`` (``relu(s)² / n``)
            or ``"softmax_plus"`` (``softmax(s · log n / log 512)``, n at least 16).
        length: n, the keys each query sees (broadcast against ``scores``); None: all of
            them along ``axis``.

    A softmax is computed in float32 where the scores are 16-bit: half-precision sums of
    512 terms lose the small ones.

    Raises:
        ValueError: another normalization.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization={normalization!r} is not one of "
                         f"{', '.join(map(repr, NORMALIZATIONS))}")
    dtype = scores.dtype
    half = keras.backend.standardize_dtype(dtype) in ("float16", "bfloat16")
    if normalization == "softmax":
        if scores.shape[axis] == 1:  # one key (Keras warns about a softmax over one value)
            return ops.ones_like(scores)
        if half:
            return ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=axis), dtype)
        return ops.softmax(scores, axis=axis)
    if length is None:
        length = ops.shape(scores)[axis]
    if normalization == "squared_relu":
        return ops.relu(scores) ** 2 / ops.cast(length, dtype)
    # The scores of n keys times log(n) / log(512): attention spreads no thinner over a
    # long input than over the 512 tokens of training (short ones scaled as 16).
    factor = ops.log(ops.maximum(ops.cast(length, "float32"), 16.0)) / math.log(512)
    return ops.cast(ops.softmax(ops.cast(scores, "float32") * factor, axis=axis), dtype)


def _visible_keys(scores: Any, key_mask: Any, allowed: Any) -> Any:
    """How many keys each query of ``scores`` sees, ``(batch or 1, heads or 1, queries,
    1)``, by the padding and the attention mask (None: all of them)."""
    visible = None  # the keys each query sees, 1 or 0
    if key_mask is not None:
        visible = ops.cast(key_mask, scores.dtype)[:, None, None, :]
    if allowed is not None:
        seen = ops.cast(_heads_axis(allowed), scores.dtype)
        visible = seen if visible is None else visible * seen
    return None if visible is None else ops.sum(visible, axis=-1, keepdims=True)


def rematerialized(run: Callable[[Any], Any], inputs: Any) -> Any:
    """``run(inputs)``, its activations computed again in the backward pass rather than
    kept (``keras.remat``). Only the floating-point tensors of ``inputs`` (a tensor or a
    list) go through the recomputed function, which takes no mask, id or keyword; the
    others reach ``run`` as they are."""
    many = isinstance(inputs, (list, tuple))
    flat = list(inputs) if many else [inputs]
    floating = [i for i, x in enumerate(flat) if "float" in str(x.dtype)]

    def again(*tensors: Any) -> Any:
        given = list(flat)
        for i, tensor in zip(floating, tensors):
            given[i] = tensor
        return run(given if many else given[0])

    return keras.remat(again)(*(flat[i] for i in floating))


@keras.saving.register_keras_serializable(package=PACKAGE)
class Projection(keras.layers.Dense):
    """A dense product of 2-D rows: the query, key, value and output projections of
    attention, the two products of a feed-forward block.

    Keras's ``Dense``, so that what Keras offers its dense layers reaches these weights:
    ``enable_lora`` (adapters beside a frozen kernel), ``quantize`` (``"int8"``, ``"int4"``,
    ``"float8"``; :meth:`keras.Model.quantize` reaches it), their saving and loading. Its
    product is :func:`~kerasbert.models.kernels.affine` (on TensorFlow the ``MatMul`` +
    ``BiasAdd`` pair oneDNN fuses), with LoRA adapters plus theirs; quantized, Keras's own
    call.

    Example:
        >>> layer = Projection(4, name="query")
        >>> tuple(layer(keras.ops.ones((3, 8))).shape)
        (3, 4)
        >>> layer.enable_lora(2)
        >>> [w.path for w in layer.trainable_weights]
        ['query/bias', 'query/lora_kernel_a', 'query/lora_kernel_b']
    """

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        if self.activation is not keras.activations.linear:
            return super().call(inputs, training=training)
        if self.lora_enabled:
            # The frozen kernel's product plus the adapters' own, (x A) B · alpha / r: the
            # gradients reach A and B through two thin products, where Keras's call
            # multiplies by the merged kernel, whose gradient is one more full product.
            low = ops.matmul(ops.matmul(inputs, self.lora_kernel_a), self.lora_kernel_b)
            return (affine(inputs, dense_kernel(self), self.bias)
                    + low * (self.lora_alpha / self.lora_rank))
        return affine(inputs, self.kernel, self.bias)

    def quantize(self, mode: str | None = None, type_check: bool = True,
                 config: Any = None) -> None:
        # Keras's Dense quantizes only itself, not its subclasses: this one computes the same.
        super().quantize(mode, type_check=False, config=config)

    def save_own_variables(self, store: Any) -> None:
        if _ADAPTERS_APART.get() and self.built:
            for i, variable in enumerate(self.variables):
                store[str(i)] = variable
            return
        super().save_own_variables(store)

    def load_own_variables(self, store: Any) -> None:
        if getattr(self, "loaded_by_owner", False) and not list(store.keys()):
            self.loaded_by_owner = False  # a file whose owner held these weights itself
            return
        if _ADAPTERS_APART.get():
            for i, variable in enumerate(self.variables):
                variable.assign(store[str(i)])
            return
        super().load_own_variables(store)


#: Set by :func:`adapters_apart`.
_ADAPTERS_APART: contextvars.ContextVar[bool] = contextvars.ContextVar("adapters_apart",
                                                                       default=False)


@contextlib.contextmanager
def adapters_apart() -> Iterator[None]:
    """Within it, :class:`Projection` layers save and load their variables as they are, the
    LoRA adapters beside an unmerged kernel, where Keras writes the kernel merged and the
    adapters as zeros: a training backup, from which training goes on exactly as before."""
    token = _ADAPTERS_APART.set(True)
    try:
        yield
    finally:
        _ADAPTERS_APART.reset(token)


def model_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """Every layer of ``model``, nested models' included (after the model holding them),
    each once."""
    found: dict[int, keras.layers.Layer] = {}
    pending = list(model.layers)
    while pending:
        layer = pending.pop(0)
        found.setdefault(id(layer), layer)
        if isinstance(layer, keras.Model):
            pending.extend(layer.layers)
    return list(found.values())


def dense_layers(model: keras.Model) -> list[keras.layers.Dense]:
    """Every Keras ``Dense`` layer of ``model`` (:func:`model_layers`), each once: the
    attention and feed-forward projections, the heads.

    Example:
        >>> from kerasbert import build_transformer_model
        >>> len(dense_layers(build_transformer_model(dict(vocab_size=100, hidden_size=16,
        ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=32),
        ...     with_pool=True)))
        13
    """
    found: dict[int, keras.layers.Dense] = {}
    for layer in model_layers(model):
        for dense in (layer.projections() if isinstance(layer, ProjectionOwner) else [layer]):
            if isinstance(dense, keras.layers.Dense):
                found.setdefault(id(dense), dense)
    return list(found.values())


def projection_weight(projection: str, kind: str) -> property:
    """The ``kind`` (``"kernel"`` or ``"bias"``) of a layer's ``{projection}_dense``, as the
    attribute checkpoint tables name it (``query_kernel``); the kernel is the frozen one under
    LoRA adapters."""

    def weight(self: Any) -> Any:
        dense = getattr(self, f"{projection}_dense")
        return dense_kernel(dense) if kind == "kernel" else dense.bias

    return property(weight, doc=f"The ``{kind}`` of ``{projection}_dense``.")


class ProjectionOwner:
    """What a layer whose weights are :class:`Projection` sublayers adds: the weights under
    the attributes checkpoint tables name (``query_kernel``, ``output_bias``), and files
    saved while they were the layer's own weights (in the order of :attr:`PROJECTED`) still
    load."""

    #: The projections' names, in the order their weights were built (and saved).
    PROJECTED: tuple[str, ...] = ()
    #: The projections each LoRA target (:data:`~kerasbert.models.names.LORA_TARGETS`)
    #: names in this layer.
    LORA_PROJECTIONS: dict[str, tuple[str, ...]] = {}

    def __init__(self, *args: Any, projection_dtypes: dict[str, Any] | None = None,
                 projection_lora: dict[str, dict[str, Any]] | None = None,
                 **kwargs: Any) -> None:
        """``projection_dtypes``: the dtype policies of quantized projections by name;
        ``projection_lora``: the ``{"rank", "alpha"}`` of projections with LoRA adapters by
        name (both from :meth:`get_config`): a saved model builds them so again."""
        super().__init__(*args, **kwargs)
        self.projection_dtypes = dict(projection_dtypes or {})
        self.projection_lora = dict(projection_lora or {})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for projection in cls.PROJECTED:
            for kind in ("kernel", "bias"):
                setattr(cls, f"{projection}_{kind}", projection_weight(projection, kind))

    def stored_weight(self, attribute: str) -> Any:
        """The value a float checkpoint stores for ``attribute`` (``query_kernel``): a
        kernel with its LoRA adapters merged into it.

        Raises:
            ValueError: the projection is quantized (its float kernel is gone).
        """
        projection, kind = attribute.rsplit("_", 1)
        if projection not in self.projected():  # a weight of the layer's own (a gamma)
            return getattr(self, attribute)
        dense = getattr(self, f"{projection}_dense")
        if dense.quantization_mode is not None:
            raise ValueError(f"{dense.path}: quantized to {dense.quantization_mode}; a float "
                             "checkpoint is written from the model before it is quantized")
        return dense.kernel if kind == "kernel" else dense.bias

    def projected(self) -> tuple[str, ...]:
        """This layer's projections, by name, in build order (:attr:`PROJECTED`)."""
        return self.PROJECTED

    def projections(self) -> list[Projection]:
        """The built projections, in :meth:`projected` order."""
        return [getattr(self, f"{projection}_dense") for projection in self.projected()]

    def lora_projections(self, target: str) -> list[Projection]:
        """The built projections the LoRA target ``target`` names in this layer
        (:attr:`LORA_PROJECTIONS`), none where it names none."""
        named = self.LORA_PROJECTIONS.get(target, ())
        return [getattr(self, f"{projection}_dense") for projection in self.projected()
                if projection in named]

    def make_projection(self, projection: str, units: int, width: int, use_bias: bool,
                        initializer: Any) -> None:
        """Builds ``{projection}_dense``: ``width`` inputs, ``units`` outputs."""
        dtype = self.projection_dtypes.get(projection)
        dense = Projection(units, use_bias=use_bias, kernel_initializer=initializer,
                           name=projection,
                           dtype=self.dtype_policy if dtype is None  # type: ignore[attr-defined]
                           else keras.dtype_policies.deserialize(dtype))
        dense.build((None, width))
        lora = self.projection_lora.get(projection)
        if lora is not None:  # Keras's own build would take the rank but not the alpha
            dense.enable_lora(lora["rank"], lora_alpha=lora["alpha"])
        setattr(self, f"{projection}_dense", dense)

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = super().get_config()  # type: ignore[misc]
        built = list(zip(self.projected(), self.projections())) if self.built else []  # type: ignore[attr-defined]
        quantized = {projection: keras.dtype_policies.serialize(dense.dtype_policy)
                     for projection, dense in built if dense.quantization_mode is not None}
        lora = {projection: {"rank": dense.lora_rank, "alpha": dense.lora_alpha}
                for projection, dense in built if dense.lora_enabled}
        return {**config, **({"projection_dtypes": quantized} if quantized else {}),
                **({"projection_lora": lora} if lora else {})}

    def load_own_variables(self, store: Any) -> None:
        keys = list(store.keys())
        held = {id(w) for dense in self.projections() for w in dense.weights}
        own = [w for w in self.weights if id(w) not in held]  # type: ignore[attr-defined]
        if len(keys) == len(own):  # the projections hold theirs
            for i, weight in enumerate(own):
                weight.assign(store[str(i)])
            return
        # A file saved while the projections' weights were this layer's own: they come in
        # build order, then the layer's others.
        weights = [w for dense in self.projections() for w in (dense_kernel(dense), dense.bias)
                   if w is not None] + own
        if len(keys) != len(weights):
            raise ValueError(f"layer {self.name!r}: {len(weights)} weights expected, "  # type: ignore[attr-defined]
                             f"the file holds {len(keys)}")
        for i, weight in enumerate(weights):
            weight.assign(store[str(i)])
        for dense in self.projections():
            dense.loaded_by_owner = True


@keras.saving.register_keras_serializable(package=PACKAGE)
class MultiHeadSelfAttention(ProjectionOwner, keras.layers.Layer):
    """BERT self-attention with Google's 2-D query/key/value/output kernels.

    Padding (mask value False, from token id 0) is never attended to.

    Args:
        num_heads: number of attention heads.
        head_size: size of each head; ``num_heads * head_size`` is the width of q, k, v.
        dropout: dropout rate on the attention probabilities.
        initializer_range: stddev of the truncated-normal kernel initializer.
        initializer: another kernel initializer instead (see :class:`PositionEmbedding`).
        use_bias: False for RoFormer-v2's bias-free projections.
        position: None (BERT: positions are in the embeddings), ``"rotary"``
            (RoFormer: queries and keys rotated by ``Embedding-Rotary-Position``),
            ``"relative"`` (NEZHA: ``Embedding-Relative-Position`` added to the scores
            and the context) or ``"bias"`` (T5: a bias added to the scores): what the
            call's ``position`` is.
        return_scores: also return the scores, ``(batch, heads, queries, keys)``, as
            bert4keras's ``return_attention_scores`` does (scaled, before the score bias,
            the masks and the softmax): RealFormer's residual scores, which the next layer
            takes as its ``score_bias``.
        recompute: in training, the layer's activations (the scores, the attention weights)
            are computed again in the backward pass rather than kept (bert4keras's
            ``RECOMPUTE=1``); its attention dropout draws the same mask both times.
        attention_mask, cached: how a call on a list is read (see :meth:`listed`): graphs
            saved before the keyword call hold one; new models do not set them.

    Call arguments:
        inputs: ``(batch, length, hidden)``, the states the queries are projected from (and,
            without ``keys``, the keys and values: self-attention).
        keys: the states the keys (and, without ``values``, the values) are projected
            from: T5's cross-attention (the encoder's output), bert4keras's
            ``attention_caches`` (a cache put in front of the hidden states). The keys'
            padding mask is the values' where they are given, else the keys'.
        values: the states the values are projected from.
        position: the position input of ``position``: the rotary or relative table, T5's
            ``(1, heads, queries, keys)`` bias.
        attention_mask: ``(batch or 1, queries, keys)`` booleans (from
            :class:`kerasbert.models.attention_masks.AttentionMask`: a causal LM's, UniLM's);
            padding is masked either way.
        score_bias: added to the scaled scores (RealFormer: the previous layer's scores, to
            which :class:`AttentionBias` has added the attention mask's bias where there is
            one: it then takes the attention mask's place).
        cache: decoding one or a few new tokens at a time, a dict of ``keys`` ``(batch,
            heads, slots, head_size)``, ``values`` ``(batch, heads, head_size, slots)`` and
            ``start``: the new tokens' keys and values are written at slots ``start ..
            start + new - 1`` and the queries attend to the slots the attention mask allows
            (padding and slots not yet written are not). The call then returns ``(output,
            cache)``. Without ``start`` the cache is read, not written: keys and values
            computed once (T5's encoder output), and ``present`` the slots that are tokens.
            The values lie slots last so that both products read their cache the same way:
            XLA's CPU compiler otherwise copies the value cache at every step (greedy GPT-2
            small at batch 8 and 480 new tokens: 109.9 tokens/s against 106.3, 2 cores).
        mask, inputs_mask, keys_mask, values_mask: the padding masks Keras gives (``mask``
            where ``inputs`` is the only tensor).
        biased: a saved graph's list ends with the score bias (see :meth:`listed`).

    Example:
        >>> layer = MultiHeadSelfAttention(num_heads=2, head_size=8)
        >>> tuple(layer(keras.ops.zeros((1, 5, 16))).shape)
        (1, 5, 16)
    """

    PROJECTED = ("query", "key", "value", "output")
    LORA_PROJECTIONS = {"query": ("query",), "key": ("key",), "value": ("value",),
                        "attention_output": ("output",)}
    #: Its queries are scaled by ``1 / sqrt(head_size)`` (T5: not).
    scaled = True
    #: A saved graph's list holds the keys' states second (T5's layers; see :meth:`listed`).
    two_sequences = False

    def __init__(self, num_heads: int, head_size: int, dropout: float = 0.0,
                 initializer_range: float = 0.02, initializer: _Initializer | None = None,
                 use_bias: bool = True, position: str | None = None,
                 attention_mask: bool = False, return_scores: bool = False,
                 cached: bool = False, recompute: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if position not in POSITION_KINDS:
            raise ValueError(f"position={position!r} is not one of {POSITION_KINDS}")
        self.initializer = initializer
        self.use_bias = use_bias
        self.position = position
        self.attention_mask = attention_mask
        self.return_scores = return_scores
        self.cached = cached
        self.recompute = recompute
        self.num_heads = num_heads
        self.head_size = head_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.supports_masking = True
        self.probability_dropout = (Dropout(dropout, dtype=self.dtype_policy)
                                    if dropout else None)

    def listed(self, inputs: Sequence[Any], mask: Any, biased: bool) -> dict[str, Any]:
        """The keyword arguments of a call on a list, as graphs saved before the keyword
        call hold it: ``[queries, (keys, values: cached; keys: two sequences), (position
        input), (attention mask, or the score bias: biased)]``, with their masks."""
        inputs = list(inputs)
        masks = list(mask) if isinstance(mask, (list, tuple)) else [mask] * len(inputs)
        words: dict[str, Any] = {"inputs": inputs[0], "inputs_mask": masks[0]}
        if biased:
            words["score_bias"] = inputs.pop()
        elif self.attention_mask:
            words["attention_mask"] = inputs.pop()
        if self.position:
            words["position"] = inputs.pop()
        if self.cached:
            words.update(keys=inputs[1], values=inputs[2], keys_mask=masks[1],
                         values_mask=masks[2])
        elif self.two_sequences:
            words.update(keys=inputs[1], keys_mask=masks[1])
        return words

    def build(self, inputs_shape: Any, keys_shape: Any = None, values_shape: Any = None) -> None:
        queries, keys, values = self.shapes(inputs_shape, keys_shape, values_shape)
        inner = self.num_heads * self.head_size
        initializer = kernel_initializer(self)
        for projection, width in zip(self.PROJECTED[:3], (queries[-1], keys[-1], values[-1])):
            self.make_projection(projection, inner, width, self.use_bias, initializer)
        self.make_projection("output", queries[-1], inner, self.use_bias, initializer)

    def shapes(self, inputs_shape: Any, keys_shape: Any = None,
               values_shape: Any = None) -> tuple[Any, Any, Any]:
        """The queries', keys' and values' input shapes (a saved graph's list: see
        :meth:`listed`; a build does not know whether its call is ``biased``)."""
        if isinstance(inputs_shape[0], (list, tuple)):  # a saved graph's list
            listed = self.cached or self.two_sequences
            keys_shape = inputs_shape[1] if listed else None
            values_shape = inputs_shape[2] if self.cached else None
            inputs_shape = inputs_shape[0]
        keys_shape = inputs_shape if keys_shape is None else keys_shape
        return inputs_shape, keys_shape, keys_shape if values_shape is None else values_shape

    def heads(self, states: Any, projection: str, rows: Any = None,
              spread: Callable[[Any], Any] | None = None) -> Any:
        """``(batch, length, hidden)`` states projected to ``(batch, heads, length,
        head_size)``; ``rows``: the states as 2-D rows already (in training the real tokens'
        alone, put back in place by ``spread``)."""
        batch, length = ops.shape(states)[0], ops.shape(states)[1]
        if rows is None:
            rows = ops.reshape(states, (-1, states.shape[-1]))
        x = getattr(self, f"{projection}_dense")(rows)
        if spread is not None:
            x = spread(x)
        x = ops.reshape(x, (batch, length, self.num_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, inputs: Any, keys: Any = None, values: Any = None, position: Any = None,
             attention_mask: Any = None, score_bias: Any = None,
             cache: dict[str, Any] | None = None, training: bool | None = None,
             mask: Any = None, inputs_mask: Any = None, keys_mask: Any = None,
             values_mask: Any = None, biased: bool = False) -> Any:
        if isinstance(inputs, (list, tuple)):
            return self.call(**self.listed(inputs, mask, biased), cache=cache,
                             training=training)
        # The keys' padding: the values' (bert4keras's caches), the keys' (T5's
        # cross-attention), the queries' own.
        own = inputs_mask if inputs_mask is not None else mask
        key_mask = (values_mask if values is not None else keys_mask if keys is not None
                    else own)
        given = {name: tensor for name, tensor in (
            ("inputs", inputs), ("keys", keys), ("values", values), ("position", position),
            ("attention_mask", attention_mask), ("score_bias", score_bias))
            if tensor is not None}
        dropout: Callable[..., Any] | None = self.probability_dropout
        if not (self.recompute and training and cache is None):
            return self.attention(**given, key_mask=key_mask, cache=cache, training=training,
                                  dropout=dropout)
        if self.probability_dropout is not None:  # one mask, forward and recomputed
            dropout = self.probability_dropout.seeded(self.probability_dropout.next_seed())
        order = list(given)
        return rematerialized(lambda tensors: self.attention(
            **dict(zip(order, tensors)), key_mask=key_mask, cache=None, training=training,
            dropout=dropout), list(given.values()))

    def attention(self, inputs: Any, keys: Any = None, values: Any = None,
                  position: Any = None, attention_mask: Any = None, score_bias: Any = None,
                  key_mask: Any = None, cache: dict[str, Any] | None = None,
                  training: bool | None = None,
                  dropout: Callable[..., Any] | None = None) -> Any:
        """The layer's call (see the class) on the queries' states ``inputs``, the keys'
        padding mask ``key_mask``, its attention weights through ``dropout``."""
        if cache is not None and self.return_scores:
            raise ValueError(f"{self.name}: decoding through a cache does not pass residual "
                             "attention scores on; build the model without them")
        # Shapes: B batch, T length, H hidden, N heads, D head_size (N * D = inner width).
        # Projections on 2-D rows: each is one plain GEMM (no batched matmul, no einsum
        # transposes), the shape the CPU's BLAS is fastest at. In training, the projections
        # of the real tokens only (padding's are zeros).
        rows = ops.reshape(inputs, (-1, inputs.shape[-1]))  # (B*T, H)
        own_keys = keys is None and values is None  # keys and values from the queries
        gather, spread = ((token_rows(key_mask) if training and own_keys
                           else None) or (None, None))
        if gather is not None:
            rows = gather(rows)
        query = self.heads(inputs, "query", rows, spread)  # each (B, N, T, D)
        if cache is not None and cache.get("start") is None:  # read only
            key, value = cache["keys"], ops.transpose(cache["values"], (0, 1, 3, 2))
            key_mask = cache["present"]
        elif own_keys:
            key = self.heads(inputs, "key", rows, spread)
            value = self.heads(inputs, "value", rows, spread)
        else:
            keys = inputs if keys is None else keys
            key = self.heads(keys, "key")
            value = self.heads(keys if values is None else values, "value")
        if self.position == "rotary":
            query, key = rotate(query, position), rotate(key, position)
        if cache is not None and cache.get("start") is not None:
            cache = self.write(cache, key, value)
            key, value = cache["keys"], ops.transpose(cache["values"], (0, 1, 3, 2))
            key_mask = None  # the attention mask says which slots are tokens
        attended = attend(
            query, key, value, scale=1.0 / math.sqrt(self.head_size) if self.scaled else None,
            bias=position if self.position == "bias" else None,
            relative=position if self.position == "relative" else None,
            key_mask=key_mask, allowed=attention_mask, dropout=dropout,
            training=training, score_bias=score_bias, return_scores=self.return_scores)
        context, scores = attended if self.return_scores else (attended, None)
        # (B, N, T, D) -> (B, T, N, D) -> (B*T, N*D): the heads side by side, as rows.
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)),
                              (-1, self.num_heads * self.head_size))
        if gather is not None:
            context = gather(context)
        output = self.output_dense(context)  # (B*T, H)
        if spread is not None:
            output = spread(output)
        output = ops.reshape(output, (batch, length, output.shape[-1]))  # (B, T, H)
        if self.return_scores:
            return [output, scores]
        return output if cache is None else (output, cache)

    def write(self, cache: dict[str, Any], key: Any, value: Any) -> dict[str, Any]:
        """The cache with the new tokens' ``key`` and ``value`` written from its ``start``;
        a cache held in variables (:func:`kerasbert.models.kernels.written_in_place`) is
        written where it lies and read back."""
        zero, start = ops.zeros((), "int32"), ops.cast(cache["start"], "int32")
        if is_variable(cache["keys"]):
            return {**cache, "keys": written_in_place(cache["keys"], key, 2, start),
                    "values": written_in_place(
                        cache["values"], ops.transpose(value, (0, 1, 3, 2)), 3, start)}
        keys = ops.slice_update(cache["keys"], (zero, zero, start, zero),
                                ops.cast(key, cache["keys"].dtype))
        values = ops.slice_update(cache["values"], (zero, zero, zero, start), ops.cast(
            ops.transpose(value, (0, 1, 3, 2)), cache["values"].dtype))
        return {**cache, "keys": keys, "values": values}

    def compute_output_shape(self, inputs_shape: Any, keys_shape: Any = None,
                             values_shape: Any = None) -> Any:
        queries, keys, _ = self.shapes(inputs_shape, keys_shape, values_shape)
        if self.return_scores:
            return [queries, (queries[0], self.num_heads, queries[1], keys[1])]
        return queries

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        return [mask, None] if self.return_scores else mask

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "head_size": self.head_size,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
            **initializer_config(self),
            **variant_config(self),
        }


@keras.saving.register_keras_serializable(package=PACKAGE)
class AttentionBias(keras.layers.Layer):
    """The score bias of a layer with residual attention scores under an attention mask
    (``Transformer-i-MultiHeadSelfAttention-Attention-Bias``): the previous layer's scores
    plus the mask's bias (0 where attended, a large negative where not).

    Called on ``[attention mask, scores]``: the mask is ``(batch or 1, queries, keys)``
    booleans (or an additive bias of that shape), the scores ``(batch, heads, queries,
    keys)``.

    Example:
        >>> allowed = keras.ops.convert_to_tensor([[[True, False], [True, True]]])
        >>> bias = AttentionBias()([allowed, keras.ops.zeros((1, 2, 2, 2))])
        >>> float(bias[0, 0, 0, 1]) < -1e8, float(bias[0, 1, 1, 0])
        (True, 0.0)
    """

    def call(self, inputs: Any) -> Any:
        mask, scores = inputs
        mask = _heads_axis(mask)
        if "bool" in str(mask.dtype):
            return scores + attention_bias(mask, scores.dtype, axis=None)
        return scores + ops.cast(mask, scores.dtype)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[1]


@keras.saving.register_keras_serializable(package=PACKAGE)
class Concatenate1D(keras.layers.Layer):
    """Joins sequences along the length axis, and their padding masks (an input without a
    mask counts as tokens throughout): a cache put in front of the states an attention
    layer reads (``Transformer-i-MultiHeadSelfAttention-Cached-Key`` / ``-Value``).

    Example:
        >>> tuple(Concatenate1D()([keras.ops.ones((1, 2, 4)), keras.ops.ones((1, 3, 4))]).shape)
        (1, 5, 4)
    """

    def call(self, inputs: Any) -> Any:
        return ops.concatenate(inputs, axis=1)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        if mask is None or all(m is None for m in mask):
            return None
        return ops.concatenate([ops.ones_like(x[..., 0], dtype="bool") if m is None
                                else ops.cast(m, "bool") for x, m in zip(inputs, mask)], axis=1)

    def compute_output_shape(self, input_shape: Any) -> Any:
        lengths = [shape[1] for shape in input_shape]
        length = None if None in lengths else sum(lengths)
        return (input_shape[0][0], length, input_shape[0][-1])


@keras.saving.register_keras_serializable(package=PACKAGE)
class FeedForward(ProjectionOwner, keras.layers.Layer):
    """Position-wise feed-forward block: ``act(x W1 + b1) W2 + b2``.

    In training, ``act`` is the form :func:`kernels.training_activation` gives (for the exact
    GELU: the same values, a derivative computed in float32).

    Args:
        intermediate_size: width of the hidden layer.
        activation: ``hidden_act`` of the config ("gelu" is the exact erf form).
        initializer_range: stddev of the truncated-normal kernel initializer.
        initializer: another kernel initializer instead (see :class:`PositionEmbedding`).
        use_bias: False for RoFormer-v2's bias-free products.
        recompute: in training, the hidden layer is computed again in the backward pass
            rather than kept (bert4keras's ``RECOMPUTE=1``).

    Example:
        >>> tuple(FeedForward(intermediate_size=32)(keras.ops.zeros((1, 5, 16))).shape)
        (1, 5, 16)
    """

    PROJECTED = ("intermediate", "output")
    LORA_PROJECTIONS = {"intermediate": ("intermediate",), "output": ("output",)}

    def __init__(self, intermediate_size: int,
                 activation: str | Callable[..., Any] = "gelu",
                 initializer_range: float = 0.02, initializer: _Initializer | None = None,
                 use_bias: bool = True, recompute: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.initializer = initializer
        self.use_bias = use_bias
        self.recompute = recompute
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.initializer_range = initializer_range
        self.activation_fn = get_activation(activation)
        self.training_activation_fn = training_activation(self.activation_fn)
        self.supports_masking = True

    def build(self, input_shape: Any) -> None:
        hidden = input_shape[-1]
        initializer = kernel_initializer(self)
        self.make_projection("intermediate", self.intermediate_size, hidden, self.use_bias,
                             initializer)
        self.make_projection("output", hidden, self.intermediate_size, self.use_bias,
                             initializer)

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        # The padding mask is read from the input, not taken as an argument: a `mask`
        # argument would change the layer's graph node and files saved before it would not
        # load. Read here: a recomputed function's inputs carry none.
        mask = get_keras_mask(inputs)
        if self.recompute and training:
            return rematerialized(lambda x: self.feed_forward(x, training, mask), inputs)
        return self.feed_forward(inputs, training, mask)

    def feed_forward(self, inputs: Any, training: bool | None, mask: Any) -> Any:
        """The layer's call on ``inputs`` whose padding mask is ``mask``."""
        # On 2-D rows, so each product is one GEMM fused with its bias and activation.
        rows = ops.reshape(inputs, (-1, inputs.shape[-1]))  # (B*T, H)
        # In training, the products of the real tokens only (padding's output is zeros).
        gather, spread = (token_rows(mask) if training else None) or (None, None)
        if gather is not None:
            rows = gather(rows)
        activation = self.training_activation_fn if training else self.activation_fn
        x = self.output_dense(activation(self.intermediate_dense(rows)))
        if spread is not None:
            x = spread(x)
        return ops.reshape(x, ops.shape(inputs))

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "intermediate_size": self.intermediate_size,
            "activation": self.activation,
            "initializer_range": self.initializer_range,
            **initializer_config(self),
            **variant_config(self),
        }


@keras.saving.register_keras_serializable(package=PACKAGE)
class FirstToken(keras.layers.Layer):
    """Takes the vector of the first token ([CLS]): ``(batch, length, hidden) -> (batch, hidden)``.

    Used by ``Pooler`` and ``CLS-token``. The sequence mask ends here: the output is
    one vector per example.

    Example:
        >>> tuple(FirstToken()(keras.ops.zeros((2, 7, 16))).shape)
        (2, 16)
    """

    def call(self, inputs: Any) -> Any:
        return inputs[:, 0]

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return None

    def compute_output_shape(self, input_shape: Any) -> Any:
        return (input_shape[0], input_shape[-1])


@keras.saving.register_keras_serializable(package=PACKAGE)
class BiasAdd(keras.layers.Layer):
    """Adds a learned bias to the last axis (the MLM head's ``output_bias``).

    Example:
        >>> tuple(BiasAdd()(keras.ops.zeros((1, 3, 10))).shape)
        (1, 3, 10)
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, input_shape: Any) -> None:
        self.bias = self.add_weight(name="bias", shape=(input_shape[-1],), initializer="zeros")

    def call(self, inputs: Any) -> Any:
        return inputs + ops.cast(self.bias, inputs.dtype)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape


@keras.saving.register_keras_serializable(package=PACKAGE)
class ScaleFreeNorm(keras.layers.Layer):
    """RoFormer-v2's norm: ``x / sqrt(mean(x^2) + epsilon)`` over the last axis, with no
    mean subtracted and no weights.

    Example:
        >>> x = keras.ops.convert_to_tensor([[3.0, 4.0]])
        >>> [round(float(v), 4) for v in ScaleFreeNorm()(x)[0]]
        [0.8485, 1.1314]
    """

    def __init__(self, epsilon: float = 1e-12, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.supports_masking = True

    def call(self, inputs: Any) -> Any:
        x = ops.cast(inputs, "float32")
        x = x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.epsilon)
        return ops.cast(x, inputs.dtype)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "epsilon": self.epsilon}


def _is_learned(value: bool | float | None) -> bool:
    """A scale or offset argument that makes a weight (``True``, not a number)."""
    return value is True


def _is_applied(value: bool | float | None) -> bool:
    """A scale or offset argument that is applied at all (a weight or a constant)."""
    return value is not False and value is not None


@keras.saving.register_keras_serializable(package=PACKAGE)
class ScaleOffset(keras.layers.Layer):
    """Multiplies the last axis by ``gamma`` and adds ``beta``, each of which a condition may
    steer (bert4keras's affine layer, and the second half of :class:`ConditionalLayerNorm`).

    Args:
        scale, offset: True: a learned ``gamma`` (ones) / ``beta`` (zeros); a number: that
            constant; False or None: none.
        conditional: the layer is called on ``[x, condition]``, ``condition`` a
            ``(batch, features)`` tensor; ``gamma`` and ``beta`` each gain a dense
            projection of it (``gamma_dense``, ``beta_dense``, no bias, zeros at the start,
            so that a new condition leaves a loaded model's outputs as they were).
        hidden_units, hidden_activation, hidden_initializer: a dense layer
            (``hidden_dense``, no bias) the condition goes through first, when
            ``hidden_units`` is given.

    Example:
        >>> tuple(ScaleOffset()(keras.ops.ones((1, 3, 4))).shape)
        (1, 3, 4)
    """

    def __init__(self, scale: bool | float | None = True, offset: bool | float | None = True,
                 conditional: bool = False, hidden_units: int | None = None,
                 hidden_activation: str | Callable[..., Any] | None = "linear",
                 hidden_initializer: _Initializer = "glorot_uniform",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale = scale
        self.offset = offset
        self.conditional = conditional
        self.hidden_units = hidden_units
        self.hidden_activation = keras.activations.get(hidden_activation)
        self.hidden_initializer = keras.initializers.get(hidden_initializer)

    def build(self, input_shape: Any) -> None:
        condition_shape: Any = None
        if self.conditional:
            input_shape, condition_shape = input_shape
            if len(condition_shape) != 2:
                raise ValueError(
                    f"{self.name}: the condition must be (batch, features), one vector per "
                    f"example; received shape {tuple(condition_shape)}")
        width = input_shape[-1]
        # bert4keras's weight order: beta, gamma, then the condition's dense layers (so
        # set_weights takes its arrays as they come).
        if _is_learned(self.offset):
            self.beta = self.add_weight(name="beta", shape=(width,), initializer="zeros")
        if _is_learned(self.scale):
            self.gamma = self.add_weight(name="gamma", shape=(width,), initializer="ones")
        if not self.conditional:
            return
        if self.hidden_units is not None:
            self.hidden_dense = self._dense(self.hidden_units, "hidden_dense", condition_shape,
                                            self.hidden_activation, self.hidden_initializer)
            condition_shape = (*condition_shape[:-1], self.hidden_units)
        if _is_applied(self.offset):
            self.beta_dense = self._dense(width, "beta_dense", condition_shape)
        if _is_applied(self.scale):
            self.gamma_dense = self._dense(width, "gamma_dense", condition_shape)

    def _dense(self, units: int, name: str, input_shape: Any,
               activation: Callable[..., Any] | None = None,
               initializer: _Initializer = "zeros") -> keras.layers.Dense:
        """A bias-free dense layer of the condition, built on ``input_shape``."""
        dense = keras.layers.Dense(units, activation=activation, use_bias=False,
                                   kernel_initializer=initializer, name=name,
                                   dtype=self.dtype_policy)
        dense.build(input_shape)
        return dense

    def call(self, inputs: Any) -> Any:
        condition = None
        if self.conditional:
            inputs, condition = inputs
            if self.hidden_units is not None:
                condition = self.hidden_dense(condition)
            # (batch, features) -> (batch, 1, ..., features): one vector for every position.
            for _ in range(len(inputs.shape) - 2):
                condition = ops.expand_dims(condition, 1)
        if _is_applied(self.scale):
            gamma = self.gamma if _is_learned(self.scale) else self.scale
            if condition is not None:
                gamma = gamma + self.gamma_dense(condition)
            inputs = inputs * gamma
        if _is_applied(self.offset):
            beta = self.beta if _is_learned(self.offset) else self.offset
            if condition is not None:
                beta = beta + self.beta_dense(condition)
            inputs = inputs + beta
        return inputs

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        # The condition has no positions: the output keeps the sequence's mask.
        if self.conditional and isinstance(mask, (list, tuple)):
            return mask[0]
        return mask

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape[0] if self.conditional else input_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "scale": self.scale, "offset": self.offset,
                "conditional": self.conditional, "hidden_units": self.hidden_units,
                "hidden_activation": keras.activations.serialize(self.hidden_activation),
                "hidden_initializer": keras.initializers.serialize(self.hidden_initializer)}


@keras.saving.register_keras_serializable(package=PACKAGE)
class ConditionalLayerNorm(ScaleOffset):
    """Layer normalization whose ``gamma`` and ``beta`` a condition may steer
    (https://kexue.fm/archives/7124): ``(x - mean) / sqrt(var + epsilon)``, then
    :class:`ScaleOffset`. What every norm of a model built with ``layer_norm_cond`` is;
    bert4keras's ``LayerNormalization`` (``kerasbert.layers``) is this layer.

    Args:
        zero_mean: subtract the mean (False: RMS normalization).
        unit_variance: divide by the root mean square.
        epsilon: added to the variance; None: ``keras.config.epsilon()`` (1e-7), as
            bert4keras's ``K.epsilon()``.
        **kwargs: :class:`ScaleOffset`'s (``scale``, ``offset``, ``conditional``,
            ``hidden_units``, ``hidden_activation``, ``hidden_initializer``) and Keras's.

    Example:
        >>> norm = ConditionalLayerNorm(conditional=True, hidden_units=8)
        >>> tuple(norm([keras.ops.ones((2, 3, 16)), keras.ops.ones((2, 4))]).shape)
        (2, 3, 16)
        >>> [w.path.split("/")[-2] for w in norm.weights[2:]]
        ['hidden_dense', 'beta_dense', 'gamma_dense']
    """

    def __init__(self, zero_mean: bool = True, unit_variance: bool = True,
                 epsilon: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.zero_mean = zero_mean
        self.unit_variance = unit_variance
        self.epsilon = epsilon or keras.config.epsilon()

    def call(self, inputs: Any) -> Any:
        x = inputs[0] if self.conditional else inputs
        dtype = x.dtype
        # float16's range: an epsilon of 1e-12 is 0 there, and squares above 256 overflow.
        if keras.backend.standardize_dtype(dtype) == "float16":
            x = ops.cast(x, "float32")
        if self.zero_mean:
            x = x - ops.mean(x, axis=-1, keepdims=True)
        if self.unit_variance:
            variance = ops.mean(ops.square(x), axis=-1, keepdims=True)
            x = ops.divide_no_nan(x, ops.sqrt(variance + self.epsilon))
        x = ops.cast(x, dtype)
        return super().call([x, inputs[1]] if self.conditional else x)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "zero_mean": self.zero_mean,
                "unit_variance": self.unit_variance, "epsilon": self.epsilon}
