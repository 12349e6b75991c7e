"""kerasbert.backend against bert4keras 0.11.5's backend (Keras 2's ``K`` with bert4keras's
additions) on the same arrays.

bert4keras runs once, in its own interpreter (it needs Keras 2); SCRIPT runs under both
libraries, given the backend module, and every comparison reads its answers.
"""

import numpy as np
import pytest

from kerasbert import backend
from kerasbert.backend import K, keras
from peers import run_bert4keras

SCRIPT = """
import json
import numpy as np


def run(b):
    K = b.K
    rng = np.random.default_rng(0)
    T = lambda a, dtype="float32": K.constant(np.asarray(a), dtype=dtype)
    x, y = T(rng.normal(size=(2, 3, 4))), T(rng.normal(size=(2, 4, 5)))
    m, v = T(rng.normal(size=(4, 6))), T(rng.normal(size=(2, 4)))
    w = T(rng.normal(size=(2, 3, 4, 5)))
    probs = K.softmax(T(rng.normal(size=(2, 3, 6))))
    labels = T(rng.integers(0, 6, (2, 3)), "int32")
    mask = T([[1, 1, 0], [1, 0, 0]])
    signs = K.cast(K.greater(x, 0), "float32")
    out = {
        "reductions": [K.sum(x), K.sum(x, axis=1), K.mean(x, 2, keepdims=True),
                       K.max(x, axis=-1), K.min(x, axis=0), K.logsumexp(x, axis=1),
                       K.prod(x, axis=2), K.cumsum(x), K.cumprod(x, axis=2)],
        "elementwise": [K.exp(x), K.sqrt(x), K.square(x), K.abs(x), K.pow(x, 3),
                        K.log(K.abs(x) + 1), K.maximum(x, 0.2), K.minimum(x, -0.1),
                        K.clip(x, -0.5, None), K.clip(x, 0.3, 0.1), K.sign(x)],
        "compare": [K.equal(x, x), K.not_equal(x, 0), K.greater(x, 0), K.less(x, 0.1),
                    K.switch(K.greater(v, 0), v, -v), K.switch(K.greater(x[:, :, 0], 0), x, 2 * x)],
        "products": [K.dot(x, m), K.dot(v, y), K.dot(K.permute_dimensions(y, (0, 2, 1)), m),
                     K.batch_dot(x, y), K.batch_dot(x, y, axes=(2, 1)),
                     K.batch_dot(x, x, axes=(2, 2)), K.batch_dot(v, v, axes=1),
                     K.batch_dot(v, y, axes=(1, 1)), K.batch_dot(x, v, axes=(2, 1)),
                     K.batch_dot(w, x, axes=(1, 1))],
        "shapes": [K.concatenate([x, x], axis=1), K.expand_dims(v), K.squeeze(x[:, :1], 1),
                   K.reshape(w, (2, 12, 5)), K.reshape(w, (3, -1), 1, (5,), 3),
                   K.flatten(w, 1, 3), K.flatten(v), K.arange(5), K.arange(2, 9, 3),
                   K.ones_like(x), K.zeros_like(v), K.repeat_elements(v, 2, 1), K.tile(v, (2, 1)),
                   K.repeat(v, 3), K.batch_flatten(w), K.one_hot(labels, 6),
                   K.argmax(x), K.gather(m, T([3, 0, 3], "int32")), K.int_shape(w),
                   K.ndim(w), K.stack([v, v]), K.reverse(v, 1)],
        "activations": [K.softmax(x), K.softmax(x, axis=1), K.relu(x), K.relu(x, 0.1, 0.5),
                        K.relu(x, threshold=0.2), K.sigmoid(x), K.tanh(x), K.hard_sigmoid(x * 3),
                        K.elu(x), K.softplus(x), K.l2_normalize(x), K.l2_normalize(x, axis=-1),
                        b.gelu_erf(x), b.gelu_tanh(x), b.root_mean_square(x, axis=-1),
                        b.swish(x), b.leaky_relu(x)],
        "losses": [K.categorical_crossentropy(K.one_hot(labels, 6), probs),
                   K.sparse_categorical_crossentropy(labels, probs),
                   K.sparse_categorical_crossentropy(K.expand_dims(labels), probs),
                   K.sparse_categorical_crossentropy(labels, K.log(probs), from_logits=True),
                   K.binary_crossentropy(signs, K.sigmoid(y[:, :3, :4])),
                   K.binary_crossentropy(signs, y[:, :3, :4], True)],
        "additions": [],
    }
    scores = rng.normal(size=(3, 7)) * 3
    scores[0, 2] = -np.inf
    targets = (rng.random((3, 7)) > 0.6).astype("float32")
    add = out["additions"]
    add.append(b.multilabel_categorical_crossentropy(T(targets), T(scores)))
    positives = T([[1, 4, 0], [2, 0, 0], [6, 5, 3]], "int32")
    add.append(b.sparse_multilabel_categorical_crossentropy(positives, T(scores[:, :7])))
    add.append(b.sparse_multilabel_categorical_crossentropy(positives, T(scores), True))
    add.append(b.sequence_masking(x, mask, -1e4))
    add.append(b.sequence_masking(x[:, :, :3], mask, 0, axis=[1, 2]))
    add.append(b.sequence_masking(x, mask, -1e4, axis=1, bias=T(np.ones((1, 1, 4)))))
    add.append(b.sequence_masking(x, None, 0, bias=K.greater(x, 0)))
    positions = K.arange(0, 5, dtype="float32")[None]
    table = b.sinusoidal_embeddings(positions, 8)
    add += [table, b.sinusoidal_embeddings(positions, 6, base=500)]
    q, k = T(rng.normal(size=(1, 5, 2, 8))), T(rng.normal(size=(1, 5, 2, 8)))
    add += b.apply_rotary_position_embeddings(table, q, k)
    add.append(b.apply_rotary_position_embeddings(table, T(rng.normal(size=(1, 5, 8)))))
    a = T(rng.normal(size=(2, 3, 3)))
    for method in ("softmax", "squared_relu", "softmax_plus"):
        add.append(b.attention_normalize(a, mask, axis=-1, method=method))
    add.append(b.piecewise_linear(T([0, 500, 1000, 1500, 2500, 9999]), {1000: 1, 2000: 0.1}))
    add.append(b.piecewise_linear(T([0, 10, 30]), {0: 0.5, 20: 1.0}, from_zero=False))
    add.append(b.batch_gather(x, T([[2, 0], [1, 1]], "int32")))
    add.append(b.align(v, [0, 2], 4))
    add.append(b.divisible_temporal_padding(x, 4))
    add.append(b.pool1d(x, 2, 1, "same", pool_mode="max"))
    add.append(b.Sinusoidal()((6, 4)))
    return json.loads(json.dumps(out, default=lambda t: np.asarray(K.eval(t)).tolist()))
"""


@pytest.fixture(scope="module")
def bert4keras_answers():
    return run_bert4keras(SCRIPT + """
from bert4keras import backend
print(json.dumps(run(backend)))
""")


@pytest.fixture(scope="module")
def kerasbert_answers():
    scope = {}
    exec(SCRIPT, scope)
    return scope["run"](backend)


@pytest.mark.peer
@pytest.mark.parametrize("part", ["reductions", "elementwise", "compare", "products", "shapes",
                                  "activations", "losses", "additions"])
def test_equals_bert4keras(bert4keras_answers, kerasbert_answers, part):
    ours, theirs = kerasbert_answers[part], bert4keras_answers[part]
    assert len(ours) == len(theirs)
    for n, (a, b) in enumerate(zip(ours, theirs)):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        assert a.shape == b.shape, f"{part}[{n}]: shape {a.shape} != {b.shape}"
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=f"{part}[{n}]")


def test_values_and_variables():
    variable = K.variable(np.ones((2, 2)))
    K.set_value(variable, np.full((2, 2), 3.0))
    assert K.eval(variable).tolist() == [[3.0, 3.0]] * 2 and K.dtype(variable) == "float32"
    assert K.count_params(variable) == 4 and K.floatx() == "float32" and K.epsilon() == 1e-7
    optimizer = keras.optimizers.Adam(1e-3)
    K.set_value(optimizer.learning_rate, 2e-5)
    assert abs(float(K.get_value(optimizer.learning_rate)) - 2e-5) < 1e-12
    assert K.symbolic(len) is len and backend.symbolic(len) is len
    assert K.in_train_phase(1, 2, training=True) == 1 and K.in_test_phase(1, 2, training=True) == 2


def test_what_keras_3_lacks_is_refused_by_name():
    for name, hint in (("placeholder", "keras.Input"), ("get_session", "session"),
                       ("set_learning_phase", "training="), ("conv2d", "keras.ops")):
        with pytest.raises(NotImplementedError, match=f"K.{name} has no Keras 3.*{hint}"):
            getattr(K, name)
    assert getattr(K, "placeholder", None) is None  # also an AttributeError
    assert K.in_train_phase(1, 2) == 2 and K.learning_phase() == 0  # no call in progress
    inputs = keras.Input((3,))
    with pytest.raises(NotImplementedError, match="K.function"):
        K.function([inputs], [np.ones(3)])
    double = K.function([inputs], [inputs * 2])
    assert double([np.ones((1, 3))])[0].tolist() == [[2.0, 2.0, 2.0]]


def test_search_layer_set_gelu_and_recompute():
    inputs = keras.Input((3,))
    inner = keras.Model(inputs, keras.layers.Dense(2, name="Inner-Dense")(inputs), name="inner")
    outer = keras.Model(inputs, keras.layers.Dense(1, name="Head")(inner(inputs)))
    assert backend.search_layer(outer, "Inner-Dense").name == "Inner-Dense"
    assert backend.search_layer(outer, "Head") is outer.get_layer("Head")
    assert backend.search_layer(outer, "Missing") is None
    # From a tensor, as bert4keras's FGM finds the embeddings: back through the layers.
    assert backend.search_layer(outer.output, "Head") is outer.get_layer("Head")
    assert backend.search_layer(outer.output, "Inner-Dense").name == "Inner-Dense"
    assert backend.search_layer(outer.output, "Missing") is None
    from conftest import TINY
    from kerasbert import build_transformer_model

    bert = build_transformer_model(dict(TINY), with_pool=True)
    classifier = keras.Model(bert.inputs, keras.layers.Dense(2, name="Classifier")(bert.output))
    for start in (classifier.output, bert.get_layer("Transformer-0-FeedForward-Norm").output,
                  classifier):
        assert backend.search_layer(start, "Embedding-Token") is bert.get_layer(
            "Embedding-Token")
    with pytest.raises(TypeError, match="no layer made, outside a model.s loss; pass the model"):
        backend.search_layer(np.ones(3), "Head")
    assert backend.gelu_version() == "erf"
    backend.set_gelu("Tanh")
    try:
        assert backend.gelu_version() == "tanh"
        # Models built now take the tanh form, spelled out in their layers' configs.
        model = build_transformer_model(dict(TINY), with_mlm=True)
        assert model.get_layer("Transformer-0-FeedForward").get_config()["activation"] == (
            "gelu_approximate")
    finally:
        backend.set_gelu("erf")
    model = build_transformer_model(dict(TINY))
    assert model.get_layer("Transformer-0-FeedForward").get_config()["activation"] == "gelu"
    with pytest.raises(ValueError, match="'erf' or 'tanh'"):
        backend.set_gelu("relu")
    assert backend.recompute_grad(len) is len and backend.is_tf_keras is False
    with pytest.raises(NotImplementedError, match="tf.custom_gradient"):
        backend.graph_mode_decorator(len)


def _token_classifier():
    keras.utils.set_random_seed(0)
    tokens = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(6, 3, name="Embedding-Token")(tokens)
    pooled = keras.layers.GlobalAveragePooling1D()(hidden)
    return keras.Model(tokens, keras.layers.Dense(2, activation="softmax")(pooled))


def test_k_gradients_in_a_loss_under_fit_is_the_tapes_gradient():
    """bert4keras's gradient penalty as its examples write it: ``search_layer(y_pred, ...)``
    finds the embedding from the step's ``y_pred``, and ``K.gradients`` of the loss on its
    matrix, rows as ``IndexedSlices``, is the gradient a tape takes of the same loss."""
    import tensorflow as tf

    model = _token_classifier()
    embedding = model.get_layer("Embedding-Token")
    x, y = np.array([[1, 2, 1], [3, 4, 5]]), np.array([[0], [1]])
    found = keras.Variable(np.zeros((6, 3)), trainable=False)  # the step's gradient, kept
    searches = {}

    def loss(y_true, y_pred):
        cross_entropy = K.mean(K.sparse_categorical_crossentropy(y_true, y_pred))
        layer = backend.search_layer(y_pred, "Embedding-Token")
        searches.update(layer=layer, missing=backend.search_layer(y_pred, "Missing"))
        gradient = K.gradients(cross_entropy, [layer.embeddings])[0]
        assert isinstance(gradient, tf.IndexedSlices) and gradient.values.shape[-1] == 3
        found.assign(tf.convert_to_tensor(gradient))
        return cross_entropy

    model.compile(loss=loss, optimizer=keras.optimizers.SGD(0.0))
    model.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    assert searches == {"layer": embedding, "missing": None}
    with tf.GradientTape() as tape:
        cross_entropy = K.mean(K.sparse_categorical_crossentropy(y, model(x, training=True)))
    expected = tf.convert_to_tensor(tape.gradient(cross_entropy, embedding.embeddings.value))
    np.testing.assert_allclose(K.eval(found), K.eval(expected), rtol=0, atol=1e-6)
    assert np.abs(K.eval(expected)).max() > 1e-3  # a gradient, not zeros on both sides

    with pytest.raises(NotImplementedError, match="K.gradients .*runs eagerly"):
        K.gradients(cross_entropy, [embedding.embeddings])
    model.compile(loss=loss, optimizer=keras.optimizers.SGD(0.0), run_eagerly=True)
    with pytest.raises(NotImplementedError, match="K.gradients .*without run_eagerly=True"):
        model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    with pytest.raises(TypeError, match="outside a model's loss"):
        backend.search_layer(tf.constant(1.0), "Embedding-Token")


def test_k_gradients_while_fit_makes_its_state_and_search_past_keras_ops():
    """kerasbert's models make ``fit``'s state from the data's shapes before the step, the
    loss run on placeholders apart from the variables: ``K.gradients`` gives a gradient with
    no rows there. ``search_layer`` walks back past Keras ops on tensors (``x[:, 0]``)."""
    from kerasbert.models.model import functional_model

    tokens = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(6, 3, name="Embedding-Token")(tokens)
    model = functional_model(tokens, keras.layers.Dense(2, activation="softmax")(hidden[:, 0]))

    def loss(y_true, y_pred):
        cross_entropy = K.mean(K.sparse_categorical_crossentropy(y_true, y_pred))
        embeddings = backend.search_layer(y_pred, "Embedding-Token").embeddings
        return cross_entropy + K.sum(K.gradients(cross_entropy, [embeddings])[0].values ** 2)

    model.compile(loss=loss, optimizer=keras.optimizers.SGD(0.1))
    history = model.fit(np.array([[1, 2, 1], [3, 4, 5]]), np.array([[0], [1]]), epochs=2,
                        verbose=0)
    assert np.isfinite(history.history["loss"]).all()
