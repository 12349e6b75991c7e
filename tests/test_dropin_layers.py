"""kerasbert.layers against bert4keras 0.11.5's layers on the same inputs and weights.

bert4keras runs once, in its own interpreter (it needs Keras 2); SCRIPT runs under both
libraries, given the layers and backend modules: each layer is built, given the same random
weights (which also checks that its weights come in bert4keras's order and shapes), and
called; the losses and metrics are computed on its outputs, with their gradients; two tiny
models train from the same weights with a ``Loss`` layer and with the CRF.
"""

import keras
import numpy as np
import pytest

from kerasbert import backend, layers
from peers import run_bert4keras

SCRIPT = """
import json
import numpy as np
import tensorflow as tf


def run(L, B, viterbi):
    K, keras = B.K, B.keras
    rng = np.random.default_rng(0)
    T = lambda a, dtype="float32": tf.constant(np.asarray(a), dtype=dtype)
    out = {}

    def weigh(layer, *args, **kwargs):
        # Built by a first call, then every weight drawn in the layer's own order.
        layer(*args, **kwargs)
        layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32")
                           for w in layer.get_weights()])
        return [list(w.shape) for w in layer.get_weights()]

    def gradients(layer, loss):
        with tf.GradientTape() as tape:
            value = loss()
        return [value] + tape.gradient(value, layer.trainable_weights)

    x = T(rng.normal(size=(2, 6, 16)))
    mask = T([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], "bool")

    # GlobalPointer, EfficientGlobalPointer and the multi-label loss on their spans.
    for name, options in [("gp", {}), ("gp-plain", {"RoPE": False, "tril_mask": False,
                                                  "use_bias": False}),
                          ("egp", {}), ("egp-plain", {"RoPE": False, "tril_mask": False})]:
        cls = L.EfficientGlobalPointer if name.startswith("egp") else L.GlobalPointer
        layer = cls(heads=3, head_size=8, **options)
        shapes = weigh(layer, x, mask=mask)
        spans = (rng.random((2, 3, 6, 6)) > 0.8).astype("float32")

        def loss():
            y_pred = K.reshape(layer(x, mask=mask), (6, -1))
            return K.mean(B.multilabel_categorical_crossentropy(T(spans.reshape(6, -1)), y_pred))

        out[name] = {"shapes": shapes, "outputs": layer(x, mask=mask),
                     "loss": gradients(layer, loss)}

    # ConditionalRandomField: outputs, trans, losses, accuracies, gradients, best paths.
    crf = L.ConditionalRandomField(lr_multiplier=2)
    emissions = x[..., :4] * 3
    shapes = weigh(crf, emissions, mask=mask)
    scores = crf(emissions, mask=mask)
    tags = rng.integers(0, 4, (2, 6))
    one_hot = np.eye(4, dtype="float32")[tags]
    out["crf"] = {
        "shapes": shapes, "outputs": scores, "trans": crf.trans,
        "losses": [crf.sparse_loss(T(tags), scores), crf.dense_loss(T(one_hot), scores),
                   crf.sparse_loss(T(tags[..., None]), scores)],
        "accuracies": [crf.sparse_accuracy(T(tags), scores),
                       crf.dense_accuracy(T(one_hot), scores)],
        "gradients": gradients(crf, lambda: K.mean(crf.sparse_loss(T(tags), crf(
            emissions, mask=mask)))),
        "paths": viterbi(crf, scores, [5, 3]),
    }

    # MaximumEntropyMarkovModel, full-rank and low-rank.
    for name, options in [("memm", {}), ("memm-low-rank", {"hidden_dim": 3})]:
        memm = L.MaximumEntropyMarkovModel(lr_multiplier=2, **options)
        shapes = weigh(memm, emissions, mask=mask)
        scores = memm(emissions, mask=mask)
        out[name] = {
            "shapes": shapes, "outputs": scores,
            "losses": [memm.sparse_loss(T(tags), scores), memm.dense_loss(T(one_hot), scores),
                       memm.basic_loss(T(tags), scores, True)],
            "accuracies": [memm.sparse_accuracy(T(tags), scores),
                           memm.dense_accuracy(T(one_hot), scores)],
            "gradients": gradients(memm, lambda: memm.sparse_loss(T(tags), memm(
                emissions, mask=mask))),
        }

    # (Conditional) layer normalization and ScaleOffset.
    condition = T(rng.normal(size=(2, 5)))
    norms = {
        "plain": (L.LayerNormalization(), [x]),
        "epsilon": (L.LayerNormalization(epsilon=1e-3, zero_mean=False), [x * 1e-2]),
        "conditional": (L.LayerNormalization(conditional=True, hidden_units=4,
                                              hidden_activation="relu"), [[x, condition]]),
        "conditional-direct": (L.LayerNormalization(conditional=True), [[x, condition]]),
        "conditional-scale-only": (L.LayerNormalization(conditional=True, offset=False),
                                   [[x, condition]]),
        "scale-offset-constants": (L.ScaleOffset(scale=2.0, offset=False), [x]),
    }
    out["norms"] = {}
    for name, (layer, args) in norms.items():
        shapes = weigh(layer, *args)
        out["norms"][name] = {"shapes": shapes, "outputs": layer(*args)}

    # MultiHeadAttention: masks, an LM bias, rotary and relative positions, scores.
    lm_bias = T(np.tril(np.ones((6, 6))), "bool")
    rotary = L.SinusoidalPositionEmbedding(4, merge_mode="zero")(x)
    relative = L.RelativePositionEmbedding(7, 8)
    # bert4keras's layer hands on the mask of a masked input only: called without __call__.
    relative.build([x.shape, x.shape])
    relative.set_weights([rng.normal(0, 0.5, (7, 8)).astype("float32")])
    relative_table = relative.call([x, x])
    attentions = {
        "masked": ({"heads": 2, "head_size": 8}, [x, x, x], {}),
        "shapes": ({"heads": 2, "head_size": 8, "out_dim": 12, "key_size": 4,
                    "use_bias": False}, [x, x, x], {}),
        "lm": ({"heads": 2, "head_size": 8}, [x, x, x, lm_bias], {"a_bias": True}),
        "rotary": ({"heads": 2, "head_size": 8, "key_size": 4}, [x, x, x, rotary],
                   {"p_bias": "rotary"}),
        "relative": ({"heads": 2, "head_size": 8},
                     [x, x, x, lm_bias, relative_table],
                     {"a_bias": True, "p_bias": "typical_relative"}),
        "squared_relu": ({"heads": 2, "head_size": 8, "normalization": "squared_relu",
                          "return_attention_scores": True}, [x, x, x], {}),
    }
    out["attention"] = {"relative": relative_table}
    for name, (options, args, kwargs) in attentions.items():
        layer = L.MultiHeadAttention(**options)
        masks = [mask, mask, mask] + [None] * (len(args) - 3)
        shapes = weigh(layer, args, mask=masks, **kwargs)
        out["attention"][name] = {"shapes": shapes,
                                  "outputs": layer(args, mask=masks, **kwargs)}

    # Positions, embeddings, feed-forward, pooling, concatenation.
    ids = T([[3, 1, 0, 2, 5, 4], [0, 1, 2, 3, 4, 5]], "int32")
    positions = {
        "add": (L.PositionEmbedding(8, 16), [x]),
        "mul": (L.PositionEmbedding(8, 16, merge_mode="mul"), [x]),
        "zero": (L.PositionEmbedding(8, 16, merge_mode="zero"), [x]),
        "concat": (L.PositionEmbedding(8, 4, merge_mode="concat"), [x]),
        "hierarchical": (L.PositionEmbedding(4, 16, hierarchical=True), [x]),
        "custom": (L.PositionEmbedding(8, 16, custom_position_ids=True), [[x, ids]]),
        "sinusoidal-add": (L.SinusoidalPositionEmbedding(16), [x]),
        "sinusoidal-concat": (L.SinusoidalPositionEmbedding(6, merge_mode="concat"), [x]),
        "sinusoidal-custom": (L.SinusoidalPositionEmbedding(16, custom_position_ids=True),
                              [[x, ids]]),
    }
    out["positions"] = {}
    for name, (layer, args) in positions.items():
        shapes = weigh(layer, *args)
        out["positions"][name] = {"shapes": shapes, "outputs": layer(*args)}
    embedding = L.Embedding(10, 16, mask_zero=True)
    shapes = weigh(embedding, ids)
    out["embedding"] = {"shapes": shapes, "outputs": embedding(ids),
                        "dense": embedding(x, mode="dense"),
                        "mask": embedding.compute_mask(ids)}
    out["feed_forward"] = {}
    for activation in ("relu", "gelu", ["gelu"]):
        layer = L.FeedForward(32, activation=activation)
        shapes = weigh(layer, x)
        out["feed_forward"][str(activation)] = {"shapes": shapes, "outputs": layer(x)}
    out["max_pool"] = L.GlobalMaxPooling1D()(x, mask=mask)
    out["concatenate"] = L.Concatenate1D().compute_mask([x, x[:, :2]], [mask, None])
    out["training"] = {"loss": train_with_loss_layer(L, K, keras),
                       "crf": train_crf(L, K, keras)}
    return json.loads(json.dumps(out, default=lambda t: np.asarray(t).tolist()))


def tiny_data():
    rng = np.random.default_rng(3)
    tokens = rng.integers(1, 20, (16, 7))
    tokens[::2, 5:] = 0
    return tokens, tokens % 5 * (tokens > 0)


def set_random_weights(model):
    rng = np.random.default_rng(4)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32")
                       for w in model.get_weights()])


def train_with_loss_layer(L, K, keras):
    # bert4keras's seq2seq scripts: a Loss subclass reading the mask of its inputs.
    class CrossEntropy(L.Loss):
        def compute_loss(self, inputs, mask=None):
            y_true, y_pred = inputs
            y_mask = K.cast(mask[1], K.floatx())
            loss = K.sparse_categorical_crossentropy(y_true, y_pred)
            return K.sum(loss * y_mask) / K.sum(y_mask)

    tokens_in = L.Input((None,), dtype="int32")
    labels_in = L.Input((None,), dtype="int32")
    hidden = L.Embedding(20, 8, mask_zero=True)(tokens_in)
    probabilities = L.Dense(5, activation="softmax")(hidden)
    output = CrossEntropy(1)([labels_in, probabilities])
    model = keras.models.Model([tokens_in, labels_in], output)
    set_random_weights(model)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=3.0))
    tokens, labels = tiny_data()
    history = model.fit([tokens, labels], None, epochs=6, batch_size=16, shuffle=False,
                        verbose=0)
    return history.history["loss"]


def train_crf(L, K, keras):
    # bert4keras's NER scripts: compile(loss=CRF.sparse_loss, metrics=[CRF.sparse_accuracy]).
    tokens_in = L.Input((None,), dtype="int32")
    hidden = L.Embedding(20, 8, mask_zero=True)(tokens_in)
    CRF = L.ConditionalRandomField(lr_multiplier=10)
    output = CRF(L.Dense(5)(hidden))
    model = keras.models.Model(tokens_in, output)
    set_random_weights(model)
    model.compile(loss=CRF.sparse_loss, optimizer=keras.optimizers.SGD(learning_rate=0.03),
                  metrics=[CRF.sparse_accuracy])
    tokens, labels = tiny_data()
    history = model.fit(tokens, labels, epochs=6, batch_size=16, shuffle=False, verbose=0)
    return [history.history["loss"], history.history["sparse_accuracy"]]
"""

BERT4KERAS_VITERBI = """
from bert4keras.backend import K
from bert4keras.snippets import ViterbiDecoder


def viterbi(crf, scores, lengths):
    decoder = ViterbiDecoder(K.eval(crf.trans))
    return [decoder.decode(np.array(s)[:n]).tolist() for s, n in zip(scores, lengths)]
"""

TOLERANCE = 2e-5


def kerasbert_viterbi(crf, scores, lengths):
    paths = np.asarray(crf.decode(scores))
    return [path[:n].tolist() for path, n in zip(paths, lengths)]


@pytest.fixture(scope="module")
def bert4keras_answers():
    return run_bert4keras(SCRIPT + BERT4KERAS_VITERBI + """
from bert4keras import backend, layers
print(json.dumps(run(layers, backend, viterbi)))
""")


@pytest.fixture(scope="module")
def kerasbert_answers():
    scope = {}
    exec(SCRIPT, scope)
    return scope["run"](layers, backend, kerasbert_viterbi)


def assert_close(ours, theirs, where):
    """Equal nested lists of numbers (``-inf`` where bert4keras has it) within TOLERANCE."""
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    assert a.shape == b.shape, f"{where}: shape {a.shape} != {b.shape}"
    assert np.array_equal(np.isinf(a), np.isinf(b)), f"{where}: -inf at other places"
    finite = np.isfinite(b)
    np.testing.assert_allclose(a[finite], b[finite], rtol=TOLERANCE, atol=TOLERANCE,
                               err_msg=where)


def ragged(values):
    """Whether ``values`` is a list of things of different shapes (or of dicts)."""
    try:
        np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return True
    return False


def compare(ours, theirs, where=""):
    """The answers of both libraries, equal key by key and item by item."""
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), where
        for key in theirs:
            compare(ours[key], theirs[key], f"{where}/{key}")
    elif isinstance(theirs, list) and ragged(theirs):
        assert len(ours) == len(theirs), where
        for n, (a, b) in enumerate(zip(ours, theirs)):
            compare(a, b, f"{where}[{n}]")
    else:
        assert_close(ours, theirs, where)


@pytest.mark.peer
@pytest.mark.parametrize("part", ["gp", "gp-plain", "egp", "egp-plain", "crf", "memm",
                                  "memm-low-rank", "norms", "attention", "positions",
                                  "embedding", "feed_forward", "max_pool", "concatenate",
                                  "training"])
def test_equals_bert4keras(bert4keras_answers, kerasbert_answers, part):
    compare(kerasbert_answers[part], bert4keras_answers[part], part)


@pytest.mark.peer
def test_a_loss_layer_and_the_crf_train_and_their_loss_falls(kerasbert_answers):
    losses = kerasbert_answers["training"]["loss"]
    crf_losses, _ = kerasbert_answers["training"]["crf"]
    assert losses[-1] < 0.5 * losses[0] and crf_losses[-1] < 0.5 * crf_losses[0]


def test_every_layer_saves_and_loads_in_safe_mode(tmp_path):
    tokens = keras.Input((None,), dtype="int32")
    condition = keras.Input((4,))
    x = layers.Embedding(20, 16, mask_zero=True)(tokens)
    x = layers.PositionEmbedding(32, 16)(x)
    x = layers.LayerNormalization(conditional=True, hidden_units=4)([x, condition])
    x = layers.MultiHeadAttention(2, 8)([x, x, x])
    x = layers.FeedForward(32)(x)
    spans = layers.EfficientGlobalPointer(2, 8)(x)
    pointer = layers.GlobalPointer(2, 8)(x)
    tags = layers.ConditionalRandomField(lr_multiplier=10)(layers.Dense(3)(x))
    pooled = layers.GlobalMaxPooling1D()(x)
    model = keras.Model([tokens, condition], [spans, pointer, tags, pooled])
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True, compile=False)
    batch = [np.array([[3, 4, 5, 0]]), np.ones((1, 4), "float32")]
    for ours, theirs in zip(loaded.predict(batch, verbose=0), model.predict(batch, verbose=0)):
        np.testing.assert_array_equal(ours, theirs)


def test_keras_layers_are_there_and_what_is_not_provided_says_why():
    assert layers.Dense is keras.layers.Dense and layers.Input is keras.layers.Input
    assert layers.Lambda is keras.layers.Lambda
    assert layers.custom_objects["GlobalPointer"] is layers.GlobalPointer
    with pytest.raises(ImportError, match="BatchSplit.*not provided.*MirroredStrategy"):
        exec("from kerasbert.layers import BatchSplit", {})
    with pytest.raises(ValueError, match="gated linear unit"):
        layers.FeedForward(8, activation=["gelu", "linear"])
    with pytest.raises(NotImplementedError, match="compute_loss"):
        layers.Loss()(np.zeros((1, 2)))



def test_the_layers_and_losses_run_under_mixed_precision():
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], bool)
    policy = {"dtype": "mixed_bfloat16"}
    outputs = [layers.GlobalPointer(2, 8, **policy)(x, mask=mask),
               layers.EfficientGlobalPointer(2, 8, **policy)(x, mask=mask),
               layers.LayerNormalization(conditional=True, hidden_units=4, **policy)([x, x[:, 0]]),
               layers.MultiHeadAttention(2, 8, attention_dropout=0.1, **policy)(
                   [x, x, x], mask=[mask, mask, mask])]
    assert [str(o.dtype) for o in outputs] == ["<dtype: 'bfloat16'>"] * 4
    tags = np.zeros((2, 5))
    for layer in (layers.ConditionalRandomField(**policy),
                  layers.MaximumEntropyMarkovModel(hidden_dim=2, **policy)):
        scores = layer(x[..., :3], mask=mask)
        assert np.isfinite(backend.K.eval(layer.sparse_loss(tags, scores))).all()
        assert 0 <= float(layer.sparse_accuracy(tags, scores)) <= 1
