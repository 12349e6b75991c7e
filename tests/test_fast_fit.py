"""kerasbert's models feed ``fit`` on arrays through one endless pipeline (kerasbert.models.model).

What a user sees must not change: the same batches, the same weights and history as Keras's
own ``fit`` (shuffling off, dropout off), with ``validation_split``, ``validation_data``,
``class_weight`` and ``sample_weight``; only the data iterator lives for the whole run.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY
from kerasbert import BertConfig, build_transformer_model, internals
from kerasbert.models import model as fast
from kerasbert.models.heads import add_cls_classifier, add_tagger

ROWS, LENGTH, BATCH = 10, 12, 4


def arrays(seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, TINY["vocab_size"], size=(ROWS, LENGTH))
    tokens[:, 8:] *= rng.integers(0, 2, size=(ROWS, 1))  # some rows padded after 8 tokens
    segments = np.zeros_like(tokens)
    labels = np.arange(ROWS) % 2
    return [tokens, segments], labels


def twin_classifiers():
    """Two equal classifiers (dropout off), each compiled with its own Adam."""
    config = BertConfig.from_dict(dict(TINY, hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0))
    keras.utils.set_random_seed(0)
    models = [add_cls_classifier(build_transformer_model(config), 2, dropout_rate=0.0)
              for _ in range(2)]
    models[1].set_weights(models[0].get_weights())
    for model in models:
        model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    return models


def assert_same_training(ours, keras_fit, **fit_options):
    theirs_model, ours_model = twin_classifiers()
    assert fast.has_fast_fit(ours_model)
    mine = ours_model.fit(*ours, batch_size=BATCH, epochs=3, shuffle=False, verbose=0,
                          **fit_options)
    theirs = keras.Model.fit(theirs_model, *keras_fit, batch_size=BATCH, epochs=3,
                             shuffle=False, verbose=0, **fit_options)
    assert mine.history.keys() == theirs.history.keys()
    for key in theirs.history:
        np.testing.assert_allclose(mine.history[key], theirs.history[key], rtol=1e-6,
                                   err_msg=key)
    for a, b in zip(ours_model.weights, theirs_model.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-7, err_msg=a.path)
    return mine


def test_fit_on_arrays_trains_as_keras_fit_with_validation_split_and_class_weight():
    history = assert_same_training(arrays(), arrays(), validation_split=0.2,
                                   class_weight={0: 1.0, 1: 2.0})
    assert {"loss", "val_loss", "accuracy", "val_accuracy"} <= history.history.keys()
    assert len(history.history["loss"]) == 3


def test_fit_on_arrays_trains_as_keras_fit_with_sample_weight_and_validation_data():
    (x, y), (val_x, val_y) = arrays(0), arrays(1)
    weights = np.linspace(0.5, 1.5, ROWS)
    assert_same_training((x, y), (x, y), sample_weight=weights,
                         validation_data=(val_x, val_y))


def test_fit_runs_one_iterator_for_all_epochs(monkeypatch):
    calls = []
    keras_fit = keras.Model.fit

    def recording_fit(model, x=None, y=None, **options):
        calls.append((x, y, options))
        return keras_fit(model, x, y, **options)

    monkeypatch.setattr(keras.Model, "fit", recording_fit)
    _, model = twin_classifiers()
    (x, y), (val_x, val_y) = arrays(0), arrays(1)
    history = model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0,
                        validation_data=(val_x, val_y))
    assert len(history.history["val_loss"]) == 3
    [(data, labels, options)] = calls
    assert isinstance(data, tf.data.Dataset) and labels is None
    assert options["steps_per_epoch"] == 3 and options["validation_steps"] == 3
    assert isinstance(options["validation_data"], tf.data.Dataset)
    # A dataset, or anything with the fast paths off, goes to Keras's fit as it is.
    calls.clear()
    dataset = tf.data.Dataset.from_tensor_slices((tuple(x), y)).batch(BATCH)
    model.fit(dataset, epochs=1, verbose=0)
    assert calls[0][0] is dataset
    calls.clear()
    with internals.fast_paths(False):
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    assert calls[0][0] is x and calls[0][2]["batch_size"] == BATCH


def test_endless_batches_shuffle_every_epoch_and_keep_the_last_partial_batch():
    (x, y) = arrays()
    dataset, steps = internals.endless_array_batches(x, y, None, BATCH, shuffle=True)
    assert steps == 3
    batches = list(dataset.take(3 * steps).as_numpy_iterator())
    assert [len(labels) for _, labels in batches] == [4, 4, 2] * 3
    orders = []
    for epoch in range(3):
        rows = np.concatenate([inputs[0] for inputs, _ in batches[epoch * 3:epoch * 3 + 3]])
        order = [int(np.flatnonzero((x[0] == row).all(axis=1))[0]) for row in rows]
        assert sorted(order) == list(range(ROWS))  # every row once per epoch
        orders.append(order)
    assert len({tuple(order) for order in orders}) > 1  # shuffled again each pass


def test_every_model_kerasbert_returns_has_the_fast_fit(tmp_path):
    config = BertConfig.from_dict(dict(TINY))
    bert = build_transformer_model(config)
    models = [bert, add_cls_classifier(bert, 2), add_tagger(bert, 5),
              build_transformer_model(config, return_keras_model=False).model,
              build_transformer_model(config, application="unilm")]
    assert all(fast.has_fast_fit(model) for model in models)
    # What is saved is Keras's functional model; it loads and trains with Keras's fit.
    classifier = models[1]
    classifier.save(tmp_path / "classifier.keras")
    loaded = keras.models.load_model(tmp_path / "classifier.keras")
    assert type(loaded) is type(classifier) and not fast.has_fast_fit(loaded)
    loaded.compile("adam", "sparse_categorical_crossentropy")
    x, y = arrays()
    assert len(loaded.fit(x, y, epochs=2, verbose=0).history["loss"]) == 2


@pytest.mark.parametrize("shuffle", ["batch"])
def test_options_keras_treats_apart_go_to_keras(monkeypatch, shuffle):
    calls = []
    keras_fit = keras.Model.fit
    monkeypatch.setattr(keras.Model, "fit",
                        lambda model, x=None, *a, **k: calls.append(x) or keras_fit(
                            model, x, *a, **k))
    _, model = twin_classifiers()
    x, y = arrays()
    model.fit(x, y, batch_size=BATCH, shuffle=shuffle, verbose=0)
    model.fit(x, y, batch_size=BATCH, steps_per_epoch=2, verbose=0)
    assert calls == [x, x]


@pytest.mark.parametrize("data", ["arrays", "dataset"])
def test_the_train_step_is_traced_once_and_trains_as_keras(data):
    """fit makes the optimizer's slots and the metrics before Keras traces the step (the
    ``build`` fast path): TensorFlow traces a step that creates variables twice, and each
    trace of a BERT's step takes seconds. Keras's own fit, on a twin model, still traces
    twice; the weights after three epochs are the same."""
    x, y = arrays()
    if data == "dataset":
        x, y = tf.data.Dataset.from_tensor_slices((tuple(x), y)).batch(BATCH), None
    traces = {}
    models = twin_classifiers()
    for name, model in zip(("ours", "keras"), models):
        step = model.train_step

        def counted(batch, name=name, step=step):
            traces[name] = traces.get(name, 0) + 1
            return step(batch)

        model.train_step = counted
    models[0].fit(x, y, batch_size=None if y is None else BATCH, epochs=3, shuffle=False,
                  verbose=0)
    keras.Model.fit(models[1], x, y, batch_size=None if y is None else BATCH, epochs=3,
                    shuffle=False, verbose=0)
    assert traces == {"ours": 1, "keras": 2}
    for a, b in zip(*(model.weights for model in models)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-7, err_msg=a.path)
    with internals.fast_paths(False):
        again = twin_classifiers()[0]
        step, count = again.train_step, []
        again.train_step = lambda batch: count.append(1) or step(batch)
        again.fit(x, y, batch_size=None if y is None else BATCH, epochs=1, shuffle=False,
                  verbose=0)
    assert len(count) == 2  # the switch off: Keras's own build in the trace
