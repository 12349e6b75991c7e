"""Adversarial training (FGM) and the gradient penalty of bert4keras's examples, on Keras 3.

bert4keras's ``task_iflytek_adversarial_training.py`` and ``task_iflytek_gradient_penalty.py``
write both through Keras 2's graph (``model._make_train_function``, ``model.total_loss``,
``K.gradients``), which Keras 3 does not have. Here each is one call with the example's
arguments:

- :func:`adversarial_training` replaces the compiled model's ``train_step``: the loss's
  gradient ``g`` on the token embedding matrix gives the perturbation
  ``epsilon * g / (|g| + 1e-8)``, added to the matrix for Keras's own step (forward,
  gradients, optimizer update) and taken off again, as bert4keras's train function does.
  The update uses the perturbed batch's gradient only, and the reported loss is the
  perturbed batch's.
- :func:`loss_with_gradient_penalty` returns a loss for ``compile``: the mean sparse
  categorical cross-entropy plus ``0.5 * epsilon`` times the sum of the squared gradient
  rows of the loss on the token embedding (one row per token of the batch, as bert4keras's
  ``.values`` of its sparse gradient).

Both need the TensorFlow backend, and the penalty a compiled step (``run_eagerly=False``,
the default): it takes its gradient in the step's graph, as ``K.gradients`` did.

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

import keras
from keras import ops

from kerasbert.backend import search_layer


def _token_embeddings(model, embedding_name, caller):
    """The embedding matrix (a Keras variable) of the layer ``embedding_name`` in ``model``."""
    if keras.backend.backend() != "tensorflow":
        raise NotImplementedError(f"{caller} runs on the TensorFlow backend; Keras runs on "
                                  f"{keras.backend.backend()!r}")
    layer = search_layer(model, embedding_name)
    if layer is None:
        names = sorted(v.path.split("/")[0] for v in model.weights if "embeddings" in v.path)
        raise ValueError(f"{caller}: no layer named {embedding_name!r} in model "
                         f"{model.name!r} (nested models searched); layers with embeddings: "
                         f"{names}")
    if not hasattr(layer, "embeddings"):
        raise TypeError(f"{caller}: layer {embedding_name!r} ({type(layer).__name__}) has no "
                        f"embeddings matrix")
    return layer.embeddings


def adversarial_training(model, embedding_name="Embedding-Token", epsilon=1):
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
    if not getattr(model, "compiled", False):
        raise ValueError(f"adversarial_training: compile model {model.name!r} first (its "
                         f"training step is what this changes)")
    import tensorflow as tf

    keras_train_step = model.train_step

    def train_step(data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                      training=True)
        gradient = tf.convert_to_tensor(tape.gradient(loss, embeddings.value))
        delta = epsilon * gradient / (tf.norm(gradient) + 1e-8)
        embeddings.assign_add(delta)
        logs = keras_train_step(data)
        embeddings.assign_sub(delta)
        return logs

    model.train_step = train_step
    model.train_function = None  # made again, around the new step, at the next fit


def loss_with_gradient_penalty(model, epsilon=1, embedding_name="Embedding-Token"):
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
        ValueError: the model has no layer ``embedding_name``; at training, the step runs
            eagerly (``run_eagerly=True``), where no graph gradient can be taken.

    Example:
        >>> model.compile(loss=loss_with_gradient_penalty(model, epsilon=1),
        ...               optimizer=Adam(2e-5))  # doctest: +SKIP
    """
    embeddings = _token_embeddings(model, embedding_name, "loss_with_gradient_penalty")
    import tensorflow as tf

    def loss(y_true, y_pred):
        labels = ops.cast(ops.reshape(y_true, ops.shape(y_pred)[:-1]), "int32")
        cross_entropy = ops.mean(ops.categorical_crossentropy(
            ops.one_hot(labels, ops.shape(y_pred)[-1], dtype=y_pred.dtype), y_pred))
        if tf.executing_eagerly():
            raise ValueError("loss_with_gradient_penalty takes the loss's gradient in the "
                             "step's graph; compile without run_eagerly=True")
        gradient = tf.gradients(cross_entropy, embeddings.value)[0]
        rows = gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient
        return cross_entropy + 0.5 * epsilon * ops.sum(ops.square(rows))

    loss.__name__ = "loss_with_gradient_penalty"
    return loss
