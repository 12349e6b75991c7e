"""The training forms of GELU and dropout, and the fused Adam update: the numbers Keras's own
forms give, and the model trains through them."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src.backend import set_keras_mask

from kerasbert import BertConfig, add_cls_classifier, build_transformer_model
from kerasbert.models import layers, names
from kerasbert.models.kernels import (
    Dropout,
    affine,
    separate_products,
    tied_logits,
    token_rows,
    training_activation,
    transposed_kernels,
)
from kerasbert.training.optimizer import AdamW, make_optimizer
from tests.conftest import TINY


def value_and_gradient(function, x, upstream):
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = function(x)
    return y.numpy(), tape.gradient(y, x, output_gradients=tf.constant(upstream)).numpy()


def test_training_gelu_gives_keras_gelu_and_its_derivative():
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-9, 9, 4001), rng.normal(size=4000) * 3]).astype("float32")
    upstream = rng.normal(size=x.shape).astype("float32")
    gelu = training_activation(keras.activations.gelu)
    assert gelu is not keras.activations.gelu
    value, gradient = value_and_gradient(gelu, x, upstream)
    expected_value, expected_gradient = value_and_gradient(keras.activations.gelu, x, upstream)
    np.testing.assert_array_equal(value, expected_value)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-5, atol=1e-6)
    # bfloat16: computed in float32 and rounded once.
    value, gradient = value_and_gradient(gelu, tf.cast(x, tf.bfloat16),
                                         tf.cast(upstream, tf.bfloat16))
    assert value.dtype == gradient.dtype == tf.bfloat16.as_numpy_dtype
    wide = tf.cast(tf.cast(x, tf.bfloat16), tf.float32)
    _, wide_gradient = value_and_gradient(
        keras.activations.gelu, wide, tf.cast(tf.cast(upstream, tf.bfloat16), tf.float32))
    np.testing.assert_array_equal(
        value, tf.cast(keras.activations.gelu(wide), tf.bfloat16).numpy())
    np.testing.assert_allclose(gradient.astype("float32"), wide_gradient, rtol=1e-2, atol=1e-2)


def test_other_activations_train_as_they_are():
    assert training_activation(layers.gelu_approximate) is layers.gelu_approximate
    relu = keras.activations.get("relu")
    assert training_activation(relu) is relu


def test_feed_forward_gives_the_same_numbers_in_training_and_inference():
    layer = layers.FeedForward(intermediate_size=64)
    x = tf.constant(np.random.default_rng(1).normal(size=(2, 7, 16)).astype("float32"))
    with tf.GradientTape(persistent=True) as tape:
        trained = layer(x, training=True)
        inferred = layer(x, training=False)
    np.testing.assert_array_equal(trained.numpy(), inferred.numpy())
    for a, b in zip(tape.gradient(trained, layer.trainable_variables),
                    tape.gradient(inferred, layer.trainable_variables)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


PADDED = np.array([[5, 6, 7, 8, 9, 10], [11, 12, 13, 0, 0, 0], [14, 0, 0, 0, 0, 0]], "int32")


def test_feed_forward_trains_on_the_rows_of_tokens_only():
    """In training, padding's rows never reach the products (its output is zeros); the
    tokens' rows are what the whole batch gives; inference computes every row."""
    layer = layers.FeedForward(intermediate_size=64)
    x = tf.constant(np.random.default_rng(2).normal(size=(3, 6, 16)).astype("float32"))
    mask = tf.constant(PADDED != 0)
    set_keras_mask(x, mask)  # as the layer before it hands the mask on
    trained = layer(x, training=True).numpy()
    inferred = layer(x, training=False).numpy()
    assert not trained[~mask.numpy()].any()
    assert np.abs(inferred[~mask.numpy()]).min() > 0
    np.testing.assert_allclose(trained[mask.numpy()], inferred[mask.numpy()], rtol=1e-6, atol=1e-7)


def test_training_on_tokens_gives_the_numbers_of_the_whole_batch(monkeypatch):
    """The encoder's outputs at tokens and every gradient of a loss at tokens are the same
    whether the products of padding are computed or not."""
    config = BertConfig.from_dict(dict(TINY, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0))
    keras.utils.set_random_seed(0)
    model = build_transformer_model(config)
    inputs = [tf.constant(PADDED), tf.zeros_like(PADDED)]
    mask = PADDED != 0

    def outputs_and_gradients():
        with tf.GradientTape() as tape:
            output = model(inputs, training=True)
            loss = tf.reduce_sum(tf.where(mask[..., None], output, 0.0) ** 2)
        return output.numpy()[mask], tape.gradient(loss, model.trainable_variables)

    tokens_only, gradients = outputs_and_gradients()
    monkeypatch.setattr(layers, "token_rows", lambda mask: None)
    every_row, every_row_gradients = outputs_and_gradients()
    np.testing.assert_allclose(tokens_only, every_row, rtol=1e-5, atol=1e-6)
    for ours, theirs in zip(gradients, every_row_gradients):
        np.testing.assert_allclose(tf.convert_to_tensor(ours).numpy(),
                                   tf.convert_to_tensor(theirs).numpy(), rtol=1e-4, atol=1e-6)


def test_xla_computes_every_row():
    """XLA fixes shapes at compile time: there the layers keep the padded rows."""
    mask = tf.constant(PADDED != 0)
    assert token_rows(mask) is not None
    assert tf.function(lambda m: tf.constant(token_rows(m) is None), jit_compile=True)(mask)
    layer = layers.FeedForward(intermediate_size=8)

    def masked_call(x, m):
        set_keras_mask(x, m)
        return layer(x, training=True)

    compiled = tf.function(masked_call, jit_compile=True)
    assert np.abs(compiled(tf.ones((3, 6, 4)), mask).numpy()).min() > 0


def test_separate_products_keeps_the_product_out_of_xla_fusions():
    """Within separate_products an XLA program holds the product and its bias apart (an
    optimization barrier between them), with the same numbers; outside it, and after it,
    nothing changes."""
    rng = np.random.default_rng(0)
    rows, kernel, bias = (tf.constant(rng.standard_normal(shape), "float32")
                          for shape in ((3, 16), (16, 8), (8,)))

    def hlo_and_value():
        compiled = tf.function(lambda r: affine(r, kernel, bias), jit_compile=True)
        return (compiled.experimental_get_compiler_ir(rows)(stage="hlo"),
                compiled(rows).numpy())

    plain_hlo, plain = hlo_and_value()
    with separate_products():
        separate_hlo, separate = hlo_and_value()
    after_hlo, _ = hlo_and_value()
    assert "opt-barrier" in separate_hlo
    assert "opt-barrier" not in plain_hlo and "opt-barrier" not in after_hlo
    np.testing.assert_allclose(separate, plain, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(plain, rows.numpy() @ kernel.numpy() + bias.numpy(), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_transposed_kernels_multiply_by_a_copy_made_once(dtype):
    """Within transposed_kernels, traced for XLA, a feed-forward layer's two products read
    transposed copies in its compute dtype, made once (before a loop that runs the layer
    three times), with the numbers of the plain layer; the copies are gone after it."""
    layer = layers.FeedForward(intermediate_size=24, dtype=dtype)
    x = tf.cast(tf.constant(np.random.default_rng(0).standard_normal((1, 2, 8)),
                            "float32"), dtype)
    plain = layer(x)

    def looped(x):
        with transposed_kernels([layer]):
            return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, layer(x) + y),
                                 (tf.constant(0), tf.zeros_like(x)))[1] / 3

    compiled = tf.function(looped, jit_compile=True)
    hlo = compiled.experimental_get_compiler_ir(x)(stage="hlo")
    loops, entry = hlo.split("ENTRY")  # the loop's computations come before the entry's
    swaps = re.compile(r"transpose\([^)]*\), dimensions=\{1,0\}")  # a matrix transposed
    assert "body" in loops and not swaps.search(loops) and "opt-barrier" not in loops
    assert len(swaps.findall(entry)) == 2 and entry.count("opt-barrier(") == 2
    np.testing.assert_allclose(np.asarray(compiled(x), "float32"), np.asarray(plain, "float32"),
                               rtol=1e-5 if dtype == "float32" else 2e-2, atol=1e-5)
    with tf.GradientTape():  # eager, outside: the layer's own kernels again
        np.testing.assert_array_equal(np.asarray(layer(x), "float32"),
                                      np.asarray(plain, "float32"))


def test_tied_logits_are_the_token_embeddings_reverse_call():
    """The logits of the table as it lies equal the layer's own ``reverse=True`` call,
    eager and compiled by XLA within separate_products."""
    embedding = layers.TokenEmbedding(50, 8)
    rows = tf.constant(np.random.default_rng(0).standard_normal((3, 8)), "float32")
    embedding(tf.zeros((1, 1), "int32"))
    expected = embedding(rows, reverse=True).numpy()
    np.testing.assert_allclose(tied_logits(rows, embedding).numpy(), expected, rtol=1e-6,
                               atol=1e-6)
    with separate_products():
        compiled = tf.function(lambda r: tied_logits(r, embedding), jit_compile=True)
        np.testing.assert_allclose(compiled(rows).numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dropout_drops_at_its_rate_and_scales_the_rest(dtype):
    layer = Dropout(0.1, seed=3, dtype=dtype)
    x = tf.cast(tf.fill((64, 125, 127), 1.5), dtype)  # an odd number of elements
    y = layer(x, training=True).numpy().astype("float32")
    dropped = y == 0
    assert abs(dropped.mean() - 0.1) < 0.002
    kept = (tf.cast(x, dtype) * tf.cast(1 / 0.9, dtype)).numpy().astype("float32")
    np.testing.assert_array_equal(y[~dropped], kept[~dropped])
    # The two draws of one 32-bit word are independent: neighbours are dropped together
    # as often as chance has it.
    flat = dropped.reshape(-1)[: dropped.size // 2 * 2].reshape(-1, 2)
    assert abs((flat[:, 0] & flat[:, 1]).mean() - 0.01) < 0.001
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())


def test_dropout_masks_follow_the_seed_generator():
    """The same state draws the same mask (what a resumed run relies on); the next call
    another."""
    x = tf.ones((8, 33))
    first, second = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
    a, b = first(x, training=True).numpy(), second(x, training=True).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, first(x, training=True).numpy())
    first.seed_generator.state.assign(np.array([11, 0]))
    second.seed_generator.state.assign(np.array([11, 0]))
    np.testing.assert_array_equal(first(x, training=True).numpy(),
                                  second(x, training=True).numpy())


def test_dropout_gradient_is_the_mask_times_the_scale():
    layer = Dropout(0.2, seed=5)
    x = tf.constant(np.random.default_rng(2).normal(size=(4, 50)).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
    gradient = tape.gradient(y, x).numpy()
    kept = y.numpy() != 0
    np.testing.assert_allclose(gradient[kept], np.float32(1 / 0.8))
    assert not gradient[~kept].any()


def test_adamw_update_is_keras_adamw_to_rounding():
    rng = np.random.default_rng(0)
    start = [rng.normal(size=(300, 200)).astype("float32"), np.zeros(200, "float32")]
    gradients = [[rng.normal(size=w.shape).astype("float32") * 1e-2 for w in start]
                 for _ in range(20)]
    finals = []
    for cls in (keras.optimizers.AdamW, AdamW):
        variables = [keras.Variable(w) for w in start]
        optimizer = cls(learning_rate=1e-3, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
        for step in gradients:
            optimizer.apply([tf.constant(g) for g in step], variables)
        finals.append([v.numpy() for v in variables])
    for ours, theirs, first in zip(finals[1], finals[0], start):
        assert np.abs(theirs - first).max() > 5e-3  # they moved
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-6)


def test_the_training_step_runs_through_the_fast_forms(tiny_config):
    """Keras's traced train step draws 32-bit words for the masks, no float per element,
    and updates the variables with ApplyAdam."""
    model = add_cls_classifier(build_transformer_model(tiny_config), 2)
    model.compile(optimizer=make_optimizer(model, 1e-3, 10), loss="sparse_categorical_crossentropy")
    x = (tf.ones((2, 5), "int32"), tf.zeros((2, 5), "int32"))
    step = tf.function(model.train_step).get_concrete_function((x, tf.constant([0, 1])))
    definition = step.graph.as_graph_def()
    types = {node.op for node in definition.node}
    types.update(node.op for function in definition.library.function for node in function.node_def)
    assert "StatelessRandomUniformFullIntV2" in types
    assert "StatelessRandomUniformV2" not in types
    assert "ResourceApplyAdam" in types
    assert isinstance(model.get_layer(names.dropout_name(names.attention_name(0))), Dropout)
