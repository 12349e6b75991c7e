"""Adversarial training (FGM, virtual adversarial training) and the gradient penalty of
bert4keras's examples, on Keras 3.

bert4keras's ``task_iflytek_adversarial_training.py`` and
``task_sentiment_virtual_adversarial_training.py`` rebuild Keras 2's train function from its
graph (``model._make_train_function``, ``model.total_loss``, ``K.function`` on the feed
placeholders), which Keras 3 does not have. Here each is one call with the example's
arguments, after ``compile``; each finds the embedding layer as the examples do, with
``search_layer`` back from the model's outputs:

- :func:`adversarial_training` replaces the compiled model's ``train_step``: the loss's
  gradient ``g`` on the token embedding matrix (without dropout) gives the perturbation
  ``epsilon * g / (|g| + 1e-8)``, added to the matrix for Keras's own step (forward,
  gradients, optimizer update) and taken off again, as bert4keras's train function does.
  The update uses the perturbed batch's gradient only, and the reported loss is the
  perturbed batch's.
- :func:`virtual_adversarial_training` does the same with no labels: the model's own
  predictions on the clean batch are the targets, and the perturbation is found from a
  random one of norm ``xi`` by ``iters`` gradient steps of the loss between clean and
  perturbed predictions, then scaled to norm ``epsilon``.
- :func:`loss_with_gradient_penalty` returns a loss for ``compile``: the mean sparse
  categorical cross-entropy plus ``0.5 * epsilon`` times the sum of the squared gradient
  rows of the loss on the token embedding (one row per token of the batch, as bert4keras's
  ``.values`` of its sparse gradient). bert4keras's example itself, written with
  ``search_layer(y_pred, ...)`` and ``K.gradients``, runs as it is on
  :mod:`kerasbert.backend`; this is the same loss, given the model.

All need the TensorFlow backend, and the penalty a compiled step (``run_eagerly=False``,
the default): it takes its gradient in the step's graph, as ``K.gradients`` does.

Example:
    >>> import keras
    >>> tokens = keras.Input((None,), dtype="int32")
    >>> hidden = keras.layers.Embedding(10, 4, name="Embedding-Token")(tokens)
    >>> probs = keras.layers.Dense(2, activation="softmax")(
    ...     keras.layers.GlobalAveragePooling1D()(hidden))
    >>> model = keras.Model(tokens, probs)
    >>> model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    >>> adversarial_training(model, "Embedding-Token", epsilon=0.5)
"""

from collections.abc import Callable
from typing import Any

import keras
from keras import ops

from kerasbert.backend import K, search_layer


def _token_embeddings(model: keras.Model, embedding_name: str, caller: str) -> keras.Variable:
    """The embedding matrix (a Keras variable) of the layer ``embedding_name`` in ``model``."""
    if keras.backend.backend() != "tensorflow":
        raise NotImplementedError(f"{caller} runs on the TensorFlow backend; Keras runs on "
                                  f"{keras.backend.backend()!r}")
    # Back from each output, as bert4keras's examples search; then every layer of a model
    # with no symbolic outputs (a subclassed one).
    starts = [*(getattr(model, "outputs", None) or []), model]
    layer = next((found for start in starts
                  for found in [search_layer(start, embedding_name)] if found is not None), None)
    if layer is None:
        names = sorted(v.path.split("/")[0] for v in model.weights if "embeddings" in v.path)
        raise ValueError(f"{caller}: no layer named {embedding_name!r} in model "
                         f"{model.name!r} (nested models searched); layers with embeddings: "
                         f"{names}")
    if not hasattr(layer, "embeddings"):
        raise TypeError(f"{caller}: layer {embedding_name!r} ({type(layer).__name__}) has no "
                        f"embeddings matrix")
    return layer.embeddings


def adversarial_training(model: keras.Model, embedding_name: str = "Embedding-Token",
                         epsilon: float = 1) -> None:
    """Trains ``model`` on batches whose token embeddings are pushed ``epsilon`` along the
    loss's gradient (FGM), as bert4keras's example does. Call it after ``compile``.

    Args:
        model: a compiled Keras model holding the layer ``embedding_name``.
        embedding_name: the token embedding layer (bert4keras's name by default).
        epsilon: the perturbation's norm (over the whole embedding matrix).

    Raises:
        ValueError: the model is not compiled, or has no layer ``embedding_name``.
        NotImplementedError: Keras runs on another backend than TensorFlow.

    Example:
        >>> adversarial_training(model, "Embedding-Token", 0.5)  # doctest: +SKIP
    """
    embeddings = _token_embeddings(model, embedding_name, "adversarial_training")
    _must_be_compiled(model, "adversarial_training")
    keras_train_step = model.train_step

    def train_step(data: Any) -> Any:
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        # Without dropout, as bert4keras's K.function (its learning phase left at 0) takes it.
        gradient = _loss_gradient(model, embeddings, x, y, sample_weight, training=False)
        delta = epsilon * _unit(gradient)
        embeddings.assign_add(delta)
        logs = keras_train_step(data)
        embeddings.assign_sub(delta)
        return logs

    _replace_train_step(model, train_step)


def virtual_adversarial_training(model: keras.Model, embedding_name: str = "Embedding-Token",
                                 epsilon: float = 1, xi: float = 10, iters: int = 1) -> None:
    """Trains ``model`` to predict on batches whose token embeddings are pushed ``epsilon``
    the way that most changes its predictions, what it predicts on the clean batch
    (virtual adversarial training, as bert4keras's example does). The batch's labels are
    not used: train it on unlabelled text. Call it after ``compile`` with a loss between two
    distributions (bert4keras's example: ``'kld'``).

    Args:
        model: a compiled Keras model holding the layer ``embedding_name``.
        embedding_name: the token embedding layer (bert4keras's name by default).
        epsilon: the final perturbation's norm (over the whole embedding matrix).
        xi: the norm of the random perturbation the search starts from.
        iters: how many gradient steps refine the perturbation's direction.

    Raises:
        ValueError: the model is not compiled, or has no layer ``embedding_name``.
        NotImplementedError: Keras runs on another backend than TensorFlow.

    Example:
        >>> model_vat.compile(loss="kld", optimizer=Adam(1e-5))  # doctest: +SKIP
        >>> virtual_adversarial_training(model_vat, "Embedding-Token")  # doctest: +SKIP
    """
    embeddings = _token_embeddings(model, embedding_name, "virtual_adversarial_training")
    _must_be_compiled(model, "virtual_adversarial_training")
    import tensorflow as tf

    keras_train_step = model.train_step

    def train_step(data: Any) -> Any:
        x, _, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        # The clean predictions, as the targets: constants, made without dropout.
        targets = tf.stop_gradient(model(x, training=False))
        applied, delta = 0.0, tf.random.normal(tf.shape(embeddings.value))
        for _ in range(iters):
            delta = xi * _unit(delta)
            embeddings.assign_add(delta - applied)
            applied = delta
            delta = _loss_gradient(model, embeddings, x, targets, sample_weight, training=False)
        delta = epsilon * _unit(delta)
        embeddings.assign_add(delta - applied)
        logs = keras_train_step((x, targets, sample_weight))
        embeddings.assign_sub(delta)
        return logs

    _replace_train_step(model, train_step)


def _must_be_compiled(model: keras.Model, caller: str) -> None:
    if not getattr(model, "compiled", False):
        raise ValueError(f"{caller}: compile model {model.name!r} first (its training step is "
                         f"what this changes)")


def _replace_train_step(model: keras.Model, train_step: Callable[[Any], Any]) -> None:
    model.train_step = train_step
    model.train_function = None  # made again, around the new step, at the next fit


def _loss_gradient(model: keras.Model, embeddings: keras.Variable, x: Any, y: Any,
                   sample_weight: Any, training: bool) -> Any:
    """The gradient of ``model``'s compiled loss on ``(x, y)`` on the matrix ``embeddings``,
    dense (bert4keras's examples add it to zeros of the matrix's shape)."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        y_pred = model(x, training=training)
        loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                  training=training)
    return tf.convert_to_tensor(tape.gradient(loss, embeddings.value))


def _unit(x: Any) -> Any:
    """``x`` scaled to norm 1 (0 stays 0), over all its entries."""
    return x / (ops.sqrt(ops.sum(ops.square(x))) + 1e-8)


def loss_with_gradient_penalty(model: keras.Model, epsilon: float = 1,
                               embedding_name: str = "Embedding-Token",
                               ) -> Callable[[Any, Any], Any]:
    """A loss for ``model.compile``: sparse categorical cross-entropy on probabilities plus
    ``0.5 * epsilon * sum(g ** 2)``, ``g`` the loss's gradient rows on the token embedding,
    as bert4keras's ``loss_with_gradient_penalty`` example.

    Args:
        model: the model to compile, holding the layer ``embedding_name``.
        epsilon: the penalty's weight.
        embedding_name: the token embedding layer (bert4keras's name by default).

    Returns:
        ``loss(y_true, y_pred)``: a scalar, the batch's mean cross-entropy plus the penalty.

    Raises:
        ValueError: the model has no layer ``embedding_name``.
        NoKeras3Counterpart: (a NotImplementedError) at training, the step runs eagerly
            (``run_eagerly=True``), where ``K.gradients`` has no graph to take it in.

    Example:
        >>> model.compile(loss=loss_with_gradient_penalty(model, epsilon=1),
        ...               optimizer=Adam(2e-5))  # doctest: +SKIP
    """
    embeddings = _token_embeddings(model, embedding_name, "loss_with_gradient_penalty")

    def loss(y_true: Any, y_pred: Any) -> Any:
        cross_entropy = K.mean(K.sparse_categorical_crossentropy(y_true, y_pred))
        gradient = K.gradients(cross_entropy, [embeddings])[0]
        rows = getattr(gradient, "values", gradient)  # dense where the matrix is also tied
        return cross_entropy + 0.5 * epsilon * K.sum(rows ** 2)

    loss.__name__ = "loss_with_gradient_penalty"
    return loss
