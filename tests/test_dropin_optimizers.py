"""kerasbert.optimizers and kerasbert.adversarial against bert4keras 0.11.5 and by hand.

bert4keras's optimizers run once, in their own interpreter (tf_keras, with the OptimizerV2
base class they were written for); SCRIPT runs under both libraries on the same variables
(bert4keras's layer names) and the same gradients, every variant for STEPS updates.
"""

import numpy as np
import pytest

from conftest import TINY
from kerasbert import BertConfig, build_transformer_model, internals
from kerasbert import optimizers as kb_optimizers
from kerasbert.adversarial import (
    adversarial_training,
    loss_with_gradient_penalty,
    virtual_adversarial_training,
)
from kerasbert.backend import keras
from peers import run_bert4keras

SCRIPT = """
import json
import numpy as np

STEPS = 5
SHAPES = [(6, 4), (4, 3), (3,), (3,), (3,)]
SCHEDULE = {2: 1.0, 4: 0.5}
NO_DECAY = ["Norm", "bias"]
# name: (base class, extensions innermost first, keyword arguments)
VARIANTS = {
    "adam": ("Adam", [], {"learning_rate": 0.01}),
    "adam_no_bias_correction": ("Adam", [], {"learning_rate": 0.01, "bias_correction": False}),
    "adamw": ("Adam", ["weight_decay"], {"learning_rate": 0.01, "weight_decay_rate": 0.1,
                                         "exclude_from_weight_decay": NO_DECAY}),
    "lamb": ("Adam", ["weight_decay", "layer_adaptation"],
             {"learning_rate": 0.01, "weight_decay_rate": 0.1,
              "exclude_from_weight_decay": NO_DECAY, "exclude_from_layer_adaptation": NO_DECAY}),
    "pretraining": ("Adam", ["weight_decay", "layer_adaptation", "piecewise_linear_lr"],
                    {"learning_rate": 0.01, "lr_schedule": SCHEDULE, "weight_decay_rate": 0.01,
                     "exclude_from_weight_decay": NO_DECAY,
                     "exclude_from_layer_adaptation": NO_DECAY, "bias_correction": False}),
    "adam_lr": ("Adam", ["piecewise_linear_lr"], {"learning_rate": 0.01, "lr_schedule": SCHEDULE}),
    "lazy": ("Adam", ["lazy_optimization"],
             {"learning_rate": 0.01, "include_in_lazy_optimization": ["Embedding"]}),
    "paramwise": ("Adam", ["parameter_wise_lr"], {"learning_rate": 0.01, "paramwise_lr_schedule":
                                                  {"Dense-A": 2.0, "kernel": 0.5, "Norm": 0.1}}),
    "lookahead": ("Adam", ["lookahead"],
                  {"learning_rate": 0.01, "steps_per_slow_update": 2, "slow_step_size": 0.5}),
    "ema": ("Adam", ["exponential_moving_average"], {"learning_rate": 0.01, "ema_momentum": 0.9}),
    "ema_decay_lr": ("Adam", ["weight_decay", "exponential_moving_average", "piecewise_linear_lr"],
                     {"learning_rate": 0.01, "ema_momentum": 0.8, "lr_schedule": SCHEDULE}),
    "accumulation": ("Adam", ["gradient_accumulation"],
                     {"learning_rate": 0.01, "grad_accum_steps": 2, "bias_correction": False}),
    "lion": ("Lion", [], {"learning_rate": 0.01}),
    "lion_decay": ("Lion", ["weight_decay"], {"learning_rate": 0.01, "weight_decay_rate": 0.1}),
    "adafactor": ("AdaFactor", [], {"learning_rate": 0.01, "min_dim_size_to_factor": 4}),
    "adafactor_relative": ("AdaFactor", [], {
        "learning_rate": None, "beta1": 0.9, "min_dim_size_to_factor": 3,
        "exclude_from_parameter_scale": ["Norm"]}),
    "adafactor_unscaled": ("AdaFactor", [], {
        "learning_rate": None, "multiply_by_parameter_scale": False, "clipping_threshold": None,
        "beta2": 0.9}),
}


def variables(keras):
    # Called, not only built: tf.keras names a layer's variables under its name in a call.
    embedding = keras.layers.Embedding(6, 4, name="Embedding-Token")
    embedding(np.zeros((1, 1), "int32"))
    dense = keras.layers.Dense(3, name="Dense-A")
    dense(np.zeros((1, 4), "float32"))
    norm = keras.layers.LayerNormalization(name="Output-Norm")
    norm(np.zeros((1, 3), "float32"))
    return [embedding.embeddings, dense.kernel, dense.bias, norm.gamma, norm.beta]


def run(keras, optimizers, peer, names=None):
    rng = np.random.default_rng(0)
    initial = [rng.normal(size=shape).astype("float32") for shape in SHAPES]
    gradients = [[rng.normal(size=shape).astype("float32") for shape in SHAPES]
                 for _ in range(STEPS)]
    for step, grads in enumerate(gradients):  # rows no token of the batch touched
        grads[0][[step % 6, (step + 2) % 6]] = 0.0
    values = lambda vs: [np.asarray(v.numpy()).tolist() for v in vs]
    out = {"names": [getattr(v, "path", v.name) for v in variables(keras)]}
    for name in names or VARIANTS:
        base, extensions, kwargs = VARIANTS[name]
        cls = getattr(optimizers, base)
        for extension in extensions:
            cls = getattr(optimizers, "extend_with_" + extension)(cls)
        weights = variables(keras)
        for variable, value in zip(weights, initial):
            variable.assign(value)
        optimizer = cls(**kwargs)
        if peer and "lookahead" in extensions:  # bert4keras starts its slow weights at zero
            optimizer._create_all_weights(weights)
            for variable in weights:
                optimizer.get_slot(variable, "slow_var").assign(variable)
        for grads in gradients:
            optimizer.apply_gradients(zip(grads, weights))
        out[name] = {"weights": values(weights)}
        if "exponential_moving_average" in extensions:
            optimizer.apply_ema_weights()
            out[name]["ema"] = values(weights)
            optimizer.reset_old_weights()
            out[name]["reset"] = values(weights)
            optimizer.apply_ema_weights(bias_correction=False)
            out[name]["ema_raw"] = values(weights)
            optimizer.reset_old_weights()
    return out
"""

FAST_AND_PLAIN = ["adam", "adam_no_bias_correction", "adamw", "ema_decay_lr", "adam_lr"]


def _run(names=None):
    scope = {}
    exec(SCRIPT, scope)
    return scope["run"](keras, kb_optimizers, False, names)


@pytest.fixture(scope="module")
def bert4keras_updates():
    return run_bert4keras(SCRIPT + """
import tensorflow as tf
tf.keras.optimizers.Optimizer = tf.keras.optimizers.legacy.Optimizer  # what 0.11.5 extends
from bert4keras.backend import keras
from bert4keras import optimizers
print(json.dumps(run(keras, optimizers, True)))
""")


@pytest.fixture(scope="module")
def kerasbert_updates():
    with internals.fast_paths(True):
        return _run()


def _assert_same(ours, theirs, what):
    assert ours.keys() == theirs.keys()
    for key in ours:
        for n, (a, b) in enumerate(zip(ours[key], theirs[key])):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7,
                                       err_msg=f"{what} {key}[{n}]")


def _optimizers(updates):
    """The optimizers' names in a script's results (its other key lists the weights)."""
    return [name for name in updates if name != "names"]


@pytest.mark.peer
def test_every_optimizer_updates_as_bert4keras(bert4keras_updates, kerasbert_updates):
    # The lists of names match Keras 3's paths as they matched tf.keras's names.
    assert [f"{path}:0" for path in kerasbert_updates["names"]] == bert4keras_updates[
        "names"] == ["Embedding-Token/embeddings:0", "Dense-A/kernel:0", "Dense-A/bias:0",
                     "Output-Norm/gamma:0", "Output-Norm/beta:0"]
    assert kerasbert_updates.keys() == bert4keras_updates.keys()
    for name in _optimizers(kerasbert_updates):
        _assert_same(kerasbert_updates[name], bert4keras_updates[name], name)


@pytest.mark.peer
def test_adam_without_the_fused_kernel_updates_as_bert4keras(bert4keras_updates):
    with internals.fast_paths(False):
        plain = _run(FAST_AND_PLAIN)
    for name in FAST_AND_PLAIN:
        _assert_same(plain[name], bert4keras_updates[name], f"{name} (fast paths off)")


def test_the_updates_move_the_weights(kerasbert_updates):
    """A parity that holds because nothing moved would prove nothing."""
    initial = np.random.default_rng(0).normal(size=(6, 4)).astype("float32")  # SCRIPT's first
    for name in _optimizers(kerasbert_updates):
        result = kerasbert_updates[name]
        assert np.abs(np.asarray(result["weights"][0]) - initial).max() > 1e-3, name
    lazy = np.asarray(kerasbert_updates["lazy"]["weights"][0])
    # Every embedding row had a zero gradient at some step: lazy Adam left it there, Adam
    # moved it on its momentum; the other variables are not in include_in_lazy_optimization.
    assert not np.allclose(lazy, kerasbert_updates["adam"]["weights"][0])
    np.testing.assert_allclose(kerasbert_updates["lazy"]["weights"][1],
                               kerasbert_updates["adam"]["weights"][1], rtol=1e-6)


# ------------------------------------------------------------------- EMA, accumulation, names
def _dense(seed=0):
    layer = keras.layers.Dense(3, name="Dense-A")
    layer.build((None, 4))
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(size=(4, 3)).astype("float32"), np.zeros(3, "float32")])
    return layer


def test_ema_weights_are_applied_and_taken_back():
    AdamEMA = kb_optimizers.extend_with_exponential_moving_average(kb_optimizers.Adam, "AdamEMA")
    optimizer = AdamEMA(learning_rate=0.1, ema_momentum=0.5)
    layer = _dense()
    with pytest.raises(ValueError, match="not built yet"):
        optimizer.apply_ema_weights()
    rng = np.random.default_rng(1)
    average = [np.zeros((4, 3)), np.zeros(3)]
    for _ in range(3):
        optimizer.apply_gradients(zip([rng.normal(size=(4, 3)), rng.normal(size=3)],
                                      layer.trainable_variables))
        average = [0.5 * a + 0.5 * w for a, w in zip(average, layer.get_weights())]
    trained = layer.get_weights()
    with pytest.raises(ValueError, match="apply_ema_weights has not been called"):
        optimizer.reset_old_weights()
    optimizer.apply_ema_weights()
    for got, want in zip(layer.get_weights(), average):
        np.testing.assert_allclose(got, want / (1 - 0.5 ** 3), rtol=1e-5)
    optimizer.reset_old_weights()
    for got, want in zip(layer.get_weights(), trained):
        np.testing.assert_array_equal(got, want)
    assert optimizer.get_config()["ema_momentum"] == 0.5


def _classifier(optimizer, seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax", name="Dense-A")(inputs))
    model.compile(loss="sparse_categorical_crossentropy", optimizer=optimizer)
    return model


def test_gradient_accumulation_equals_the_big_batch_update():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(16, 4)).astype("float32"), rng.integers(0, 3, 16)
    AdamW = kb_optimizers.extend_with_weight_decay(kb_optimizers.Adam)
    AdamWGA = kb_optimizers.extend_with_gradient_accumulation(AdamW)
    small = _classifier(AdamWGA(learning_rate=0.05, grad_accum_steps=4, weight_decay_rate=0.1))
    big = _classifier(AdamW(learning_rate=0.05, weight_decay_rate=0.1))
    small.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0)  # 12 batches, 3 updates
    big.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)  # 3 updates
    assert int(small.optimizer.iterations) == int(big.optimizer.iterations) == 3
    for a, b in zip(small.get_weights(), big.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_exclusion_lists_match_the_variable_paths_as_bert4keras_users_write_them():
    model = build_transformer_model(BertConfig.from_dict(dict(TINY)))
    AdamW = kb_optimizers.extend_with_weight_decay(kb_optimizers.Adam)
    optimizer = AdamW(learning_rate=0.1, weight_decay_rate=0.5,
                      exclude_from_weight_decay=["Norm", "bias"])
    before = {v.path: v.numpy() for v in model.trainable_variables}
    # A zero gradient moves Adam by nothing: what changes is the weight decay alone.
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v)
                               for v in model.trainable_variables])
    decayed = {v.path for v in model.trainable_variables
               if not np.array_equal(v.numpy(), before[v.path])}
    assert decayed == {v.path for v in model.trainable_variables if len(v.shape) == 2}
    assert {"Transformer-0-FeedForward/output/kernel", "Embedding-Token/embeddings"} <= decayed
    assert not {"Embedding-Norm/gamma", "Transformer-1-FeedForward/output/bias"} & decayed


def test_extensions_stack_save_and_load(tmp_path):
    AdamWLR = kb_optimizers.extend_with_piecewise_linear_lr(
        kb_optimizers.extend_with_weight_decay(kb_optimizers.Adam), name="AdamWLR")
    optimizer = AdamWLR(1e-3, lr_schedule={10: 1}, weight_decay_rate=0.02,
                        exclude_from_weight_decay=["bias"])
    model = _classifier(optimizer)
    model.fit(np.ones((2, 4)), np.zeros(2), verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path).optimizer
    assert type(loaded).__name__ == "AdamWLR"
    assert loaded.lr_schedule == {10: 1.0} and loaded.weight_decay_rate == 0.02
    assert list(loaded.exclude_from_weight_decay) == ["bias"]
    assert int(loaded.iterations) == 1  # one batch seen: the schedule's rate is 1/10 of it
    assert float(loaded.learning_rate) == pytest.approx(1e-3 * 1 / 10)
    for a, b in zip(loaded.variables, model.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert loaded.get_config()["learning_rate"] == pytest.approx(1e-3)


def test_what_kerasbert_does_not_take_is_refused_by_name():
    with pytest.raises(ValueError, match="lr="):
        kb_optimizers.Adam(lr=1e-3)
    with pytest.raises(ValueError, match="InverseTimeDecay"):
        kb_optimizers.Adam(1e-3, decay=1e-4)
    with pytest.raises(TypeError, match="extend_with_weight_decay extends an optimizer class "
                                        "of kerasbert.optimizers"):
        kb_optimizers.extend_with_weight_decay(keras.optimizers.Adam)
    AdamW = kb_optimizers.extend_with_weight_decay(kb_optimizers.Adam)
    with pytest.raises(ValueError, match="would decay twice"):
        AdamW(weight_decay=0.1)
    AdamGA = kb_optimizers.extend_with_gradient_accumulation(kb_optimizers.Adam)
    with pytest.raises(ValueError, match="grad_accum_steps must be an integer"):
        AdamGA(grad_accum_steps=0)
    assert kb_optimizers.extend_with_weight_decay_v2 is kb_optimizers.extend_with_weight_decay
    assert kb_optimizers.AdaFactorV2 is kb_optimizers.AdaFactor


def test_lookahead_keeps_the_weights_at_the_first_update():
    """bert4keras starts its slow weights at zero, so its first update halves every weight."""
    AdamLA = kb_optimizers.extend_with_lookahead(kb_optimizers.Adam)
    layer = _dense()
    start = layer.get_weights()
    AdamLA(learning_rate=0.0).apply_gradients(zip([np.ones((4, 3)), np.ones(3)],
                                                  layer.trainable_variables))
    for got, want in zip(layer.get_weights(), start):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ adversarial training (FGM)
X = np.array([[1, 2, 1], [3, 4, 4], [1, 1, 2], [4, 3, 3]], "int32")
Y = np.array([0, 1, 0, 1])


def _token_classifier(seed=0):
    keras.utils.set_random_seed(seed)
    tokens = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(5, 3, name="Embedding-Token")(tokens)
    pooled = keras.layers.GlobalAveragePooling1D()(hidden)
    return keras.Model(tokens, keras.layers.Dense(2, activation="softmax", name="out")(pooled))


def _forward_backward(embeddings, kernel, bias):
    """The mean cross-entropy of the token classifier on X, Y and its gradients, by hand;
    also the gradient on each token's embedding (one row per token of the batch)."""
    batch, length = X.shape
    hidden = embeddings[X].mean(axis=1)
    logits = hidden @ kernel + bias
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    loss = -np.log(probs[np.arange(batch), Y]).mean()
    d_logits = (probs - np.eye(2)[Y]) / batch
    d_hidden = d_logits @ kernel.T
    token_rows = np.repeat(d_hidden / length, length, axis=0)
    d_embeddings = np.zeros_like(embeddings)
    np.add.at(d_embeddings, X.reshape(-1), token_rows)
    return loss, (d_embeddings, hidden.T @ d_logits, d_logits.sum(0)), token_rows


def test_adversarial_training_is_one_fgm_step():
    model = _token_classifier()
    model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.SGD(0.5))
    embeddings, kernel, bias = [w.astype("float64") for w in model.get_weights()]
    adversarial_training(model, "Embedding-Token", epsilon=0.3)
    history = model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)

    _, (g_embeddings, _, _), _ = _forward_backward(embeddings, kernel, bias)
    delta = 0.3 * g_embeddings / (np.sqrt((g_embeddings ** 2).sum()) + 1e-8)
    loss, grads, _ = _forward_backward(embeddings + delta, kernel, bias)
    expected = [embeddings - 0.5 * grads[0], kernel - 0.5 * grads[1], bias - 0.5 * grads[2]]
    for got, want in zip(model.get_weights(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert history.history["loss"][0] == pytest.approx(loss, rel=1e-5)  # the perturbed batch's


def test_a_tiny_bert_classifier_learns_under_adversarial_training():
    bert = build_transformer_model(BertConfig.from_dict(dict(TINY)), dropout_rate=0.0)
    pooled = keras.layers.GlobalAveragePooling1D()(bert.output)
    model = keras.Model(bert.inputs, keras.layers.Dense(2, activation="softmax")(pooled))
    model.compile(loss="sparse_categorical_crossentropy",
                  optimizer=kb_optimizers.Adam(1e-3))
    adversarial_training(model, "Embedding-Token", 0.5)
    rng = np.random.default_rng(3)
    labels = np.arange(32) % 2
    tokens = rng.integers(5, 100, (32, 8))
    tokens[:, 1] = np.where(labels == 0, 3, 4)  # the class's word
    history = model.fit([tokens, np.zeros_like(tokens)], labels, batch_size=16, epochs=8,
                        verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]


def test_virtual_adversarial_training_learns_its_own_clean_predictions():
    """With no push (epsilon 0) a step is Keras's own step towards the model's predictions
    on the clean batch, whatever the labels; the random start of norm xi is taken off."""
    targets = _token_classifier().predict(X, verbose=0)
    plain = _token_classifier()
    plain.compile(loss="kld", optimizer=keras.optimizers.SGD(0.5))
    plain.fit(X, targets, batch_size=4, epochs=1, shuffle=False, verbose=0)
    model = _token_classifier()
    model.compile(loss="kld", optimizer=keras.optimizers.SGD(0.5))
    virtual_adversarial_training(model, "Embedding-Token", epsilon=0.0, xi=0.1)
    model.train_on_batch(X, np.zeros((4, 2)))
    for got, want in zip(model.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="virtual_adversarial_training: compile model"):
        virtual_adversarial_training(_token_classifier())


def test_the_embedding_layer_is_named_or_refused():
    model = _token_classifier()
    with pytest.raises(ValueError, match="compile model"):
        adversarial_training(model)
    model.compile(loss="sparse_categorical_crossentropy", optimizer="sgd")
    with pytest.raises(ValueError, match=r"no layer named 'Embedding-Segment'.*"
                                         r"with embeddings: \['Embedding-Token'\]"):
        adversarial_training(model, "Embedding-Segment")


# --------------------------------------------------------------------------- gradient penalty
def test_gradient_penalty_loss_is_the_cross_entropy_plus_the_penalty():
    model = _token_classifier()
    model.compile(loss=loss_with_gradient_penalty(model, epsilon=0.7),
                  optimizer=keras.optimizers.SGD(0.5))
    weights = [w.astype("float64") for w in model.get_weights()]
    loss, _, token_rows = _forward_backward(*weights)
    expected = loss + 0.5 * 0.7 * (token_rows ** 2).sum()
    assert model.evaluate(X, Y, batch_size=4, verbose=0) == pytest.approx(expected, rel=1e-5)
    history = model.fit(X, Y, batch_size=4, epochs=20, shuffle=False, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
