"""bert4keras's gradient penalty, written as its example writes it (``search_layer`` from
``y_pred``, ``K.gradients(...)[0].values``), on kerasbert against bert4keras 0.11.5.

bert4keras runs once, in its own interpreter, in graph mode as Keras 2 did: it draws a tiny
BERT's weights, writes them as a checkpoint, and gives the penalised loss of a batch and the
weights after one SGD step on it (the step differentiates the penalty, a gradient's
gradient). kerasbert loads the checkpoint, compiles the same loss text and must agree: the
loss does, and the step wherever it does not differentiate a LayerNorm's derivative (see
the expected failure).
"""

import inspect
import json
import textwrap

import numpy as np
import pytest

from conftest import TINY
from kerasbert.backend import K, keras, search_layer
from kerasbert.models import build_transformer_model
from peers import run_bert4keras

#: The example's loss, word for word but for its weight: large enough here that the penalty
#: moves a tiny random model's step far past the tolerance.
LOSS = """
def loss_with_gradient_penalty(y_true, y_pred, epsilon=100):
    loss = K.mean(K.sparse_categorical_crossentropy(y_true, y_pred))
    embeddings = search_layer(y_pred, 'Embedding-Token').embeddings
    gp = K.sum(K.gradients(loss, [embeddings])[0].values**2)
    return loss + 0.5 * epsilon * gp
"""
CONFIG = {**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
TOKENS = np.array([[2, 7, 31, 31, 5, 3, 0, 0], [2, 44, 9, 60, 12, 8, 19, 3]], "int32")
LABELS = np.array([[0], [2]])
LEARNING_RATE = 0.5
TOLERANCE = 1e-6


def classifier(bert):
    """The example's head: a softmax on the [CLS] vector."""
    output = keras.layers.Lambda(lambda x: x[:, 0])(bert.model.output)
    output = keras.layers.Dense(3, activation="softmax", name="Head")(output)
    return keras.models.Model(bert.model.input, output)


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's checkpoint, head weights, loss and weights after one step."""
    root = tmp_path_factory.mktemp("gradient_penalty")
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    head = """
        import json
        import numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 writes checkpoints with TF 1's Session and Saver, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K, keras, search_layer
        from bert4keras.models import build_transformer_model
    """
    body = f"""
        bert = build_transformer_model({json.dumps(str(root / "bert_config.json"))},
                                       return_keras_model=False)
        rng = np.random.default_rng(0)
        K.batch_set_value([(w, rng.normal(0, 0.2, K.int_shape(w)).astype("float32"))
                           for w in bert.model.trainable_weights])
        bert.save_weights_as_checkpoint({json.dumps(str(root / "bert_model.ckpt"))})
        model = classifier(bert)
        head = [rng.normal(0, 0.5, (16, 3)).astype("float32"), np.zeros(3, "float32")]
        model.get_layer("Head").set_weights(head)
        model.compile(loss=loss_with_gradient_penalty,
                      optimizer=tf.compat.v1.train.GradientDescentOptimizer({LEARNING_RATE}))
        x, y = [np.array({TOKENS.tolist()}), np.zeros((2, 8))], np.array({LABELS.tolist()})
        loss = model.evaluate(x, y, verbose=0)
        model.train_on_batch(x, y)
        print(json.dumps({{"head": [w.tolist() for w in head], "loss": float(loss),
                          "stepped": {{w.name: K.get_value(w).tolist()
                                      for w in model.trainable_weights}}}}))
    """
    out = run_bert4keras("\n".join([textwrap.dedent(head), inspect.getsource(classifier), LOSS,
                                    textwrap.dedent(body)]))
    return {**out, "checkpoint": str(root / "bert_model.ckpt"),
            "config": str(root / "bert_config.json")}


@pytest.fixture(scope="module")
def ours(theirs):
    """kerasbert's penalised loss of the batch, and its weights after the same step."""
    scope = {"K": K, "search_layer": search_layer}
    exec(LOSS, scope)
    bert = build_transformer_model(theirs["config"], theirs["checkpoint"],
                                   return_keras_model=False)
    model = classifier(bert)
    model.get_layer("Head").set_weights([np.array(w, "float32") for w in theirs["head"]])
    model.compile(loss=scope["loss_with_gradient_penalty"],
                  optimizer=keras.optimizers.SGD(LEARNING_RATE))
    x = [TOKENS, np.zeros_like(TOKENS)]
    loss = model.evaluate(x, LABELS, verbose=0)
    model.fit(x, LABELS, batch_size=2, epochs=1, shuffle=False, verbose=0)
    return {"loss": loss,
            "stepped": {variable.path: K.eval(variable) for variable in model.trainable_weights}}


def assert_same_step(ours, theirs, names):
    for name in names:
        np.testing.assert_allclose(ours["stepped"][name], theirs["stepped"][name + ":0"],
                                   rtol=1e-5, atol=TOLERANCE, err_msg=name)


@pytest.mark.peer
def test_the_penalised_loss_equals_bert4keras(ours, theirs):
    assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-6)


@pytest.mark.peer
def test_the_step_after_the_last_layer_norm_equals_bert4keras(ours, theirs):
    """The head and the last LayerNorm's own weights: their step differentiates the penalty
    through the head and the norm's scale, not through a norm's input."""
    assert_same_step(ours, theirs, ["Head/kernel", "Head/bias",
                                    "Transformer-1-FeedForward-Norm/gamma",
                                    "Transformer-1-FeedForward-Norm/beta"])


@pytest.mark.peer
@pytest.mark.xfail(strict=True, reason=(
    "Keras 3's LayerNormalization takes its variance on TensorFlow with tf.nn.moments, which "
    "stops the gradient through the mean: exact first derivatives, but second derivatives "
    "through a norm's input lack a term (bert4keras's norm has them); the penalty's part of "
    "the step is then off by about 2% below the last norm (up to 3e-4 here; 7e-8 with exact "
    "moments)"))
def test_the_whole_step_equals_bert4keras(ours, theirs):
    """Every weight both libraries name alike (bert4keras numbers its inner Dense layers)."""
    common = sorted(name[:-len(":0")] for name in theirs["stepped"]
                    if name[:-len(":0")] in ours["stepped"])
    assert {"Embedding-Token/embeddings", "Head/kernel"} <= set(common)
    assert_same_step(ours, theirs, common)
