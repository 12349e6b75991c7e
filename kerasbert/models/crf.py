"""A linear-chain conditional random field (CRF) for sequence labelling, in ``keras.ops``.

A tagger ends in per-token emission scores ``[batch, length, num_tags]``; the
``ConditionalRandomField`` layer (named ``"CRF"`` in bert4keras's scripts) adds a learned
``[num_tags, num_tags]`` matrix of transition scores and passes the emissions on unchanged.
The score of a tag path is the sum of its emissions and of the transitions between
consecutive tags; training maximises the log-probability of the gold path among all paths
(the forward algorithm), prediction takes the best path (Viterbi).

Padding: a position whose mask is False is taken out of the sequence. Its emission, its tag
and the transitions into and out of it count for nothing; the loss and the best path of a
padded sequence are those of the sequence without its padding, wherever the padding is.

The mask is Keras's, and travels with the model's output (no state in the layer): the layer
passes on the mask of its input (from ``mask_zero=True`` token ids) or the one given to it,
``crf(emissions, mask=...)``; ``crf.loss``, ``crf.sparse_accuracy`` and, by default,
``crf.decode`` and ``crf.log_likelihood`` read it from the tensor they are given. The last
two also take an explicit ``mask``.

``crf.loss`` and ``crf.sparse_accuracy`` are Keras objects bound to their layer. A model
saved while compiled with them loads with ``keras.saving.load_model(path, safe_mode=True)``;
the restored objects are unbound (a saved file cannot point at a layer) and ask to be
compiled again: ``model.compile(loss=model.get_layer("CRF").loss, ...)``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import keras
from keras import ops

from kerasbert.internals import get_keras_mask
from kerasbert.models import names

# Tensors are typed Any: symbolic (keras.KerasTensor) while the graph is built, the
# backend's own tensors when it runs.

PACKAGE = names.SERIALIZATION_PACKAGE
#: The tag :func:`viterbi_decode` writes at padding positions.
PADDING_TAG = 0


def _prepare(emissions: Any, transitions: Any, mask: Any) -> tuple[Any, Any, Any, Any]:
    """Emissions ``[length, batch, num_tags]`` with padding zeroed, the mask as
    ``[length, batch, 1]`` and as ``[batch, length]``, the transitions, all checked.

    Zeroing keeps NaN or huge values at padding out of the arithmetic (and the gradients);
    they would be discarded anyway.
    """
    emissions = ops.convert_to_tensor(emissions)
    transitions = ops.convert_to_tensor(transitions)
    if len(emissions.shape) != 3:
        raise ValueError(f"emissions must be [batch, length, num_tags]; received shape "
                         f"{tuple(emissions.shape)}")
    num_tags = transitions.shape[0]
    if tuple(transitions.shape) != (num_tags, num_tags) or emissions.shape[-1] not in (
            None, num_tags):
        raise ValueError(f"emissions of shape {tuple(emissions.shape)} need transitions of "
                         f"shape ({emissions.shape[-1]}, {emissions.shape[-1]}); received "
                         f"{tuple(transitions.shape)}")
    dtype = "float64" if keras.backend.standardize_dtype(emissions.dtype) == "float64" else (
        "float32")  # float16 / bfloat16 emissions: the sums over paths want float32
    emissions = ops.cast(emissions, dtype)
    if mask is None:
        mask = ops.ones_like(emissions[..., 0], dtype="bool")
    mask = ops.cast(mask, "bool")
    emissions = ops.where(mask[..., None], emissions, ops.zeros_like(emissions))
    return (ops.transpose(emissions, (1, 0, 2)), ops.transpose(mask, (1, 0))[..., None], mask,
            ops.cast(transitions, dtype))


def _loop(body: Callable[..., tuple[Any, ...]], start: tuple[Any, ...], length: Any,
          backwards: bool = False) -> Any:
    """``body(t, *state)`` for t over the positions, forwards or backwards.

    On TensorFlow, ``keras.ops.while_loop`` with the number of positions as
    ``maximum_iterations``: XLA (``jit_compile``, Keras's default on a GPU) differentiates a
    TensorFlow loop only when that bound is given, and ``keras.ops.scan`` gives none. On JAX
    and PyTorch, whose lengths are known when the step is traced, ``keras.ops.scan`` over
    the positions: JAX differentiates a loop only when it is a scan.
    """
    if keras.backend.backend() != "tensorflow":
        def scanned(state: tuple[Any, ...], t: Any) -> tuple[tuple[Any, ...], None]:
            return tuple(body(length - 1 - t if backwards else t, *state)), None

        return ops.scan(scanned, tuple(start), ops.arange(length, dtype="int32"))[0]
    first = length - 1 if backwards else 0

    def step(t: Any, *state: Any) -> tuple[Any, ...]:
        return (t - 1 if backwards else t + 1, *body(t, *state))

    def more(t: Any, *state: Any) -> Any:
        return t >= 0 if backwards else t < length

    return ops.while_loop(more, step, (first, *start), maximum_iterations=length)[1:]


def _tags(y_true: Any) -> Any:
    """Integer tags ``[batch, length]`` from ``[batch, length]`` or ``[batch, length, 1]``."""
    tags = ops.convert_to_tensor(y_true)
    if len(tags.shape) == 3 and tags.shape[-1] == 1:
        tags = ops.squeeze(tags, -1)
    if len(tags.shape) != 2:
        raise ValueError(f"tags must be integers [batch, length] (or [batch, length, 1]); "
                         f"received shape {tuple(tags.shape)}")
    return ops.cast(tags, "int32")


def crf_log_likelihood(tags: Any, emissions: Any, transitions: Any, mask: Any = None) -> Any:
    """The log-probability of each tag path under a linear-chain CRF.

    Args:
        tags: integer tags ``[batch, length]`` (or ``[batch, length, 1]``).
        emissions: scores ``[batch, length, num_tags]``.
        transitions: ``[num_tags, num_tags]``; ``transitions[i, j]`` scores tag ``i``
            followed by tag ``j``.
        mask: ``[batch, length]``, False at padding (None: no padding). A sequence with no
            position left has log-likelihood 0.

    Returns:
        ``[batch]``: gold path score minus the log-sum-exp of all path scores (float32,
        or float64 for float64 emissions).

    Raises:
        ValueError: when the shapes do not fit together.

    Example:
        >>> import numpy as np
        >>> flat = np.zeros((1, 2, 3), "float32")   # 3 tags, 2 positions: 9 paths, all equal
        >>> float(crf_log_likelihood([[0, 2]], flat, np.zeros((3, 3))).numpy()[0])
        -2.197...
    """
    tags = _tags(tags)
    emissions, valid, _, transitions = _prepare(emissions, transitions, mask)
    gold_tags = ops.one_hot(ops.transpose(tags, (1, 0)), transitions.shape[0],
                            dtype=emissions.dtype)

    def step(t: Any, paths: Any, gold: Any, previous: Any,
             started: Any) -> tuple[Any, Any, Any, Any]:
        # paths: log-sum-exp of the scores of all paths so far, by last tag; gold: the
        # gold path's score; previous: its last tag (one-hot); started: a position was real.
        emission, tag, here = emissions[t], gold_tags[t], valid[t]
        through = ops.logsumexp(paths[:, :, None] + transitions, axis=1) + emission
        paths = ops.where(here, ops.where(started, through, emission), paths)
        moved = ops.sum(ops.matmul(previous, transitions) * tag, axis=-1, keepdims=True)
        gained = ops.sum(emission * tag, axis=-1, keepdims=True)
        gained += ops.where(started, moved, ops.zeros_like(moved))
        gold += ops.where(here, gained, ops.zeros_like(gained))
        return paths, gold, ops.where(here, tag, previous), ops.logical_or(started, here)

    first = emissions[0]
    paths, gold, _, started = _loop(
        step, (ops.zeros_like(first), ops.zeros_like(first[:, :1]), ops.zeros_like(first),
               ops.zeros_like(valid[0])), ops.shape(emissions)[0])
    log_z = ops.logsumexp(paths, axis=-1, keepdims=True)
    return (gold - ops.where(started, log_z, ops.zeros_like(log_z)))[:, 0]


def viterbi_decode(emissions: Any, transitions: Any, mask: Any = None) -> Any:
    """The best tag path of each sequence (Viterbi), in the graph.

    Args:
        emissions: scores ``[batch, length, num_tags]``.
        transitions: ``[num_tags, num_tags]``, as in :func:`crf_log_likelihood`.
        mask: ``[batch, length]``, False at padding (None: no padding).

    Returns:
        int32 ``[batch, length]``: the highest-scoring path, ``PADDING_TAG`` (0) at padding.

    Raises:
        ValueError: when the shapes do not fit together.

    Example:
        >>> import numpy as np
        >>> emissions = np.array([[[2., 0.], [0., 0.1], [0., 5.]]], "float32")
        >>> stay = np.array([[1., -1.], [-1., 1.]], "float32")   # changing tag costs 2
        >>> viterbi_decode(emissions, stay).numpy().tolist()
        [[0, 1, 1]]
        >>> viterbi_decode(emissions, stay, mask=[[True, True, False]]).numpy().tolist()
        [[0, 0, 0]]
    """
    emissions, valid, mask, transitions = _prepare(emissions, transitions, mask)
    length = ops.shape(emissions)[0]
    stay = ops.zeros_like(emissions[0], dtype="int32") + ops.arange(transitions.shape[0],
                                                                    dtype="int32")

    def forward(t: Any, best: Any, started: Any, pointers: Any) -> tuple[Any, Any, Any]:
        # best: the best score of a path so far, by last tag; pointers[t]: for each tag at
        # t, the tag before it on that path (at padding: the same tag, carried through).
        emission, here = emissions[t], valid[t]
        candidates = best[:, :, None] + transitions
        came_from = ops.cast(ops.argmax(candidates, axis=1), "int32")
        through = ops.max(candidates, axis=1) + emission
        best = ops.where(here, ops.where(started, through, emission), best)
        pointer = ops.where(here, came_from, stay)
        return (best, ops.logical_or(started, here),
                ops.slice_update(pointers, (t, 0, 0), pointer[None]))

    start = (ops.zeros_like(emissions[0]), ops.zeros_like(valid[0]),
             ops.zeros_like(emissions, dtype="int32"))
    best, _, pointers = _loop(forward, start, length)

    def backward(t: Any, tag: Any, path: Any) -> tuple[Any, Any]:
        path = ops.slice_update(path, (t, 0), tag[None])
        return ops.take_along_axis(pointers[t], tag[:, None], axis=1)[:, 0], path

    last = ops.cast(ops.argmax(best, axis=-1), "int32")
    _, path = _loop(backward, (last, ops.zeros_like(emissions[..., 0], dtype="int32")),
                    length, backwards=True)
    path = ops.transpose(path, (1, 0))
    return ops.where(mask, path, ops.full_like(path, PADDING_TAG))


def factored_transitions(left: Any, right: Any, tags: Any) -> Any:
    """The transition scores from each of ``tags`` (``[batch, length]``) to every tag,
    ``[batch, length, num_tags]``, of a transition matrix factored as ``left @ right^T``
    (``[num_tags, rank]`` each; bert4keras's ``MaximumEntropyMarkovModel(hidden_dim=...)``)."""
    return ops.matmul(ops.take(left, tags, axis=0), ops.transpose(right))


@keras.saving.register_keras_serializable(package=PACKAGE)
class ConditionalRandomField(keras.layers.Layer):
    """A linear-chain CRF over the emissions it is called on, which it returns unchanged.

    Holds the transition scores; the loss (``crf.loss``), the best paths (``crf.decode``)
    and a token accuracy (``crf.sparse_accuracy``) use them. Masks pass through, so a
    model's output carries the padding mask of its token ids.

    Args:
        lr_multiplier: as bert4keras's: the weight ``transitions`` stores the matrix divided
            by this, so that with Adam-like optimizers it moves this many times faster than
            the rest of the model (fine-tuning BERT at 2e-5 with a CRF takes 100-1000).
            ``crf.trans`` is the matrix itself.

    Example:
        >>> tokens = keras.Input((None,), dtype="int32")
        >>> hidden = keras.layers.Embedding(20, 8, mask_zero=True)(tokens)
        >>> crf = ConditionalRandomField(name="CRF")
        >>> tagger = keras.Model(tokens, crf(keras.layers.Dense(3)(hidden)))
        >>> tagger.compile(optimizer="adam", loss=crf.loss, metrics=[crf.sparse_accuracy])
        >>> crf.count_params()
        9
        >>> int(crf.decode(tagger(keras.ops.array([[5, 6, 0]])))[0, 2])   # at padding
        0
    """

    def __init__(self, lr_multiplier: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not lr_multiplier > 0:
            raise ValueError(f"lr_multiplier must be positive; received {lr_multiplier!r}")
        self.lr_multiplier = lr_multiplier
        self.supports_masking = True

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        num_tags = input_shape[-1]
        if num_tags is None:
            raise ValueError(f"{self.name}: the last axis of the emissions (the number of "
                             f"tags) must be known; received shape {tuple(input_shape)}")
        glorot = keras.initializers.GlorotUniform()
        self.transitions = self.add_weight(
            name="transitions", shape=(num_tags, num_tags),
            initializer=lambda shape, dtype=None: glorot(shape, dtype) / self.lr_multiplier)

    @property
    def trans(self) -> Any:
        """The transition matrix ``[num_tags, num_tags]`` (bert4keras's name)."""
        if self.lr_multiplier == 1:
            return self.transitions
        return ops.multiply(self.transitions, self.lr_multiplier)

    def call(self, inputs: Any, mask: Any = None) -> Any:
        return inputs

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        return mask

    def compute_output_shape(self, input_shape: tuple[int | None, ...],
                             ) -> tuple[int | None, ...]:
        return input_shape

    def compute_output_spec(self, inputs: Any, mask: Any = None) -> keras.KerasTensor:
        # A new symbolic tensor: returning the input itself would rewrite its history.
        return keras.KerasTensor(inputs.shape, dtype=inputs.dtype)

    def log_likelihood(self, tags: Any, emissions: Any, mask: Any = None) -> Any:
        """``[batch]`` log-probabilities of ``tags``; ``mask`` defaults to the Keras mask
        of ``emissions`` (see :func:`crf_log_likelihood`)."""
        return crf_log_likelihood(tags, emissions, self.trans, _mask_of(emissions, mask))

    def decode(self, emissions: Any, mask: Any = None) -> Any:
        """int32 ``[batch, length]`` best paths, 0 at padding; ``mask`` defaults to the Keras
        mask of ``emissions`` (see :func:`viterbi_decode`)."""
        return viterbi_decode(emissions, self.trans, _mask_of(emissions, mask))

    @property
    def loss(self) -> CRFLoss:
        """A :class:`CRFLoss` for ``model.compile(loss=crf.loss)``."""
        return CRFLoss(self)

    @property
    def sparse_accuracy(self) -> CRFAccuracy:
        """A :class:`CRFAccuracy` for ``model.compile(metrics=[crf.sparse_accuracy])``."""
        return CRFAccuracy(self)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "lr_multiplier": self.lr_multiplier}


def _mask_of(emissions: Any, mask: Any) -> Any:
    return get_keras_mask(emissions) if mask is None else mask


class _BoundToLayer:
    """What the loss and the metric share: their layer, and a message when it is gone.

    The layer is held by a weak reference, reached through ``crf()``. Keras's saving walks
    every attribute of a layer and follows those that hold Keras objects: ``loss`` and
    ``sparse_accuracy``, made on demand, would lead back to the layer and on to a new loss
    or metric without end. A saved file holds the layer's name only.
    """

    attribute: str | None = None  # the layer's attribute that makes one
    name: str  # the loss's or metric's own (Keras's class beside this one sets it)

    def _bind(self, crf: ConditionalRandomField | None, layer_name: str | None) -> None:
        self._layer = weakref.ref(crf) if crf is not None else None
        self.layer_name = crf.name if crf is not None else layer_name

    def crf(self) -> ConditionalRandomField:
        layer = self._layer() if self._layer is not None else None
        if layer is None:
            raise ValueError(
                f"{type(self).__name__} {self.name!r} is not bound to a ConditionalRandomField "
                f"(it was restored from a saved model, or its layer is gone): compile again "
                f"with model.get_layer({self.layer_name!r}).{self.attribute}")
        return layer

    def get_config(self) -> dict[str, Any]:
        # A mixin: super() is the Keras loss or metric after it in the MRO (mypy sees object,
        # which has no get_config).
        return {**super().get_config(), "layer_name": self.layer_name}  # type: ignore[misc]


@keras.saving.register_keras_serializable(package=PACKAGE)
class CRFLoss(_BoundToLayer, keras.losses.Loss):
    """The negative log-likelihood of each gold tag path, averaged over the batch.

    ``y_true``: integer tags ``[batch, length]`` (or ``[batch, length, 1]``); ``y_pred``: the
    CRF's output, whose Keras mask marks the padding. Sample weights are per sequence.

    Args:
        crf: the :class:`ConditionalRandomField`; usually written ``crf.loss``.
        name, reduction: as for any ``keras.losses.Loss``.
        layer_name: kept for the message of a loss restored without its layer.

    Example:
        >>> import numpy as np
        >>> crf = ConditionalRandomField(name="CRF")
        >>> crf.build((None, None, 3))
        >>> _ = crf.transitions.assign(np.zeros((3, 3)))
        >>> round(float(crf.loss([[0, 2]], np.zeros((1, 2, 3)))), 4)   # -log(1/9)
        2.1972
    """

    attribute = "loss"

    def __init__(self, crf: ConditionalRandomField | None = None, name: str = "crf_loss",
                 reduction: str | None = "sum_over_batch_size",
                 layer_name: str | None = None) -> None:
        super().__init__(name=name, reduction=reduction)
        self._bind(crf, layer_name)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        # Keras's Loss.__call__ weights the loss values by the mask of y_pred, which fits
        # one value per token; here there is one per sequence. The mask goes in beside the
        # emissions (a pair carries no mask) and the CRF takes the padding out itself.
        mask = _mask_of(y_pred, None)
        if mask is None:
            mask = ops.ones_like(y_pred[..., 0], dtype="bool")
        return super().__call__(y_true, (y_pred, mask), sample_weight)

    def call(self, y_true: Any, y_pred: tuple[Any, Any]) -> Any:
        emissions, mask = y_pred
        return -self.crf().log_likelihood(y_true, emissions, mask)



@keras.saving.register_keras_serializable(package=PACKAGE)
class CRFAccuracy(_BoundToLayer, keras.metrics.Mean):
    """The share of real (not padding) tokens whose Viterbi tag is right.

    bert4keras's ``sparse_accuracy`` takes each token's best emission; this one decodes the
    whole path, which is what prediction does.

    Args:
        crf: the :class:`ConditionalRandomField`; usually written ``crf.sparse_accuracy``.
        name, dtype: as for any ``keras.metrics.Metric``.
        layer_name: kept for the message of a metric restored without its layer.
    """

    attribute = "sparse_accuracy"

    def __init__(self, crf: ConditionalRandomField | None = None, name: str = "sparse_accuracy",
                 dtype: str | None = None, layer_name: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        self._bind(crf, layer_name)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        mask = _mask_of(y_pred, None)
        tags = _tags(y_true)
        right = ops.cast(ops.equal(self.crf().decode(y_pred, mask), tags), self.dtype)
        weight = ops.ones_like(right) if mask is None else ops.cast(mask, self.dtype)
        if sample_weight is not None:
            weight *= ops.reshape(ops.cast(sample_weight, self.dtype), (-1, 1))
        return super().update_state(right, sample_weight=weight)
