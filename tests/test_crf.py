"""The CRF against brute force over every tag path, with padding, in training and saved."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.models.crf import (
    ConditionalRandomField,
    CRFAccuracy,
    CRFLoss,
    crf_log_likelihood,
    viterbi_decode,
)

NUM_TAGS = 3
SEGMENT_TAGS = 4  # the trained tagger's: B-a, I-a, B-b, I-b (see segment_data)


def brute_force(emissions, transitions):
    """Every path of one sequence ``[length, num_tags]`` with its score, and log Z (float64)."""
    length, num_tags = emissions.shape
    paths = list(itertools.product(range(num_tags), repeat=length))
    scores = np.array([sum(emissions[t, tag] for t, tag in enumerate(path))
                       + sum(transitions[a, b] for a, b in zip(path, path[1:]))
                       for path in paths], "float64")
    log_z = np.log(np.sum(np.exp(scores - scores.max()))) + scores.max()
    return paths, scores, log_z


def random_case(rng, length, batch=1):
    emissions = rng.normal(size=(batch, length, NUM_TAGS)).astype("float32") * 2
    transitions = rng.normal(size=(NUM_TAGS, NUM_TAGS)).astype("float32")
    return emissions, transitions


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_log_likelihood_of_every_path_equals_brute_force(length):
    emissions, transitions = random_case(np.random.default_rng(length), length)
    paths, scores, log_z = brute_force(emissions[0].astype("float64"), transitions)
    got = crf_log_likelihood(np.array(paths), np.repeat(emissions, len(paths), axis=0),
                             transitions).numpy()
    np.testing.assert_allclose(got, scores - log_z, rtol=0, atol=1e-5)
    assert abs(np.exp(got.astype("float64")).sum() - 1) < 1e-5  # a distribution over paths


def test_float64_emissions_are_computed_in_float64_and_float16_in_float32():
    emissions, transitions = random_case(np.random.default_rng(7), 4)
    emissions, transitions = emissions.astype("float64"), transitions.astype("float64")
    paths, scores, log_z = brute_force(emissions[0], transitions)
    got = crf_log_likelihood(np.array(paths[:5]), np.repeat(emissions, 5, axis=0), transitions)
    assert got.dtype == "float64"
    np.testing.assert_allclose(got.numpy(), scores[:5] - log_z, rtol=0, atol=1e-12)
    half = crf_log_likelihood(np.array(paths[:5]), np.repeat(emissions, 5, axis=0).astype(
        "float16"), transitions.astype("float16"))
    assert half.dtype == "float32"  # sums over paths are not taken in half precision


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_viterbi_equals_brute_force_argmax(length):
    rng = np.random.default_rng(10 + length)
    for _ in range(10):
        emissions, transitions = random_case(rng, length, batch=4)
        best = [brute_force(e.astype("float64"), transitions) for e in emissions]
        expected = [paths[int(np.argmax(scores))] for paths, scores, _ in best]
        got = viterbi_decode(emissions, transitions)
        assert got.dtype == "int32"
        assert got.numpy().tolist() == [list(path) for path in expected]


def padded_batch(rng, lengths, width, fill):
    """Sequences of ``lengths`` right-padded to ``width`` with ``fill(shape)``."""
    sequences = [rng.normal(size=(n, NUM_TAGS)).astype("float32") * 2 for n in lengths]
    tags = [rng.integers(0, NUM_TAGS, size=n) for n in lengths]
    emissions = fill((len(lengths), width, NUM_TAGS)).astype("float32")
    padded_tags = rng.integers(0, NUM_TAGS, size=(len(lengths), width))
    mask = np.zeros((len(lengths), width), bool)
    for row, n in enumerate(lengths):
        emissions[row, :n], padded_tags[row, :n], mask[row, :n] = sequences[row], tags[row], True
    return sequences, tags, emissions, padded_tags, mask


def test_padding_gives_each_sequence_its_own_result():
    rng = np.random.default_rng(3)
    transitions = rng.normal(size=(NUM_TAGS, NUM_TAGS)).astype("float32")
    lengths = [4, 1, 3, 2]
    sequences, tags, emissions, padded_tags, mask = padded_batch(
        rng, lengths, 6, lambda shape: rng.normal(size=shape) * 50)
    batch_ll = crf_log_likelihood(padded_tags, emissions, transitions, mask).numpy()
    batch_path = viterbi_decode(emissions, transitions, mask).numpy()
    for row, n in enumerate(lengths):
        alone = crf_log_likelihood(tags[row][None], sequences[row][None], transitions).numpy()
        np.testing.assert_allclose(batch_ll[row], alone[0], rtol=0, atol=1e-5)
        assert batch_path[row, :n].tolist() == viterbi_decode(
            sequences[row][None], transitions).numpy()[0].tolist()
        assert not batch_path[row, n:].any()  # padding decodes to tag 0

    # Other padding emissions and tags (NaN included) leave every number as it was.
    garbage = emissions.copy()
    garbage[~mask] = np.nan
    garbage[0, -1] = 1e30
    other_tags = np.where(mask, padded_tags, NUM_TAGS - 1)
    assert np.array_equal(crf_log_likelihood(other_tags, garbage, transitions, mask).numpy(),
                          batch_ll)
    assert np.array_equal(viterbi_decode(garbage, transitions, mask).numpy(), batch_path)


def test_masked_positions_anywhere_are_taken_out_of_the_sequence():
    # Left padding and holes: the result is that of the sequence without those positions.
    rng = np.random.default_rng(4)
    emissions, transitions = random_case(rng, 6, batch=3)
    tags = rng.integers(0, NUM_TAGS, size=(3, 6))
    mask = np.array([[0, 0, 1, 1, 1, 1], [1, 0, 1, 0, 0, 1], [0, 1, 1, 0, 1, 0]], bool)
    ll = crf_log_likelihood(tags, emissions, transitions, mask).numpy()
    path = viterbi_decode(emissions, transitions, mask).numpy()
    for row in range(3):
        kept = mask[row]
        alone = crf_log_likelihood(tags[row, kept][None], emissions[row, kept][None],
                                   transitions).numpy()[0]
        assert abs(ll[row] - alone) < 1e-5
        assert path[row, kept].tolist() == viterbi_decode(
            emissions[row, kept][None], transitions).numpy()[0].tolist()
        assert not path[row, ~kept].any()


def test_a_sequence_of_padding_only_has_log_likelihood_zero():
    emissions, transitions = random_case(np.random.default_rng(5), 3, batch=2)
    mask = np.array([[False] * 3, [True] * 3])
    ll = crf_log_likelihood(np.zeros((2, 3), "int32"), emissions, transitions, mask).numpy()
    assert ll[0] == 0 and ll[1] < 0
    assert viterbi_decode(emissions, transitions, mask).numpy()[0].tolist() == [0, 0, 0]


def test_gradient_is_gold_minus_marginals_and_zero_at_padding():
    rng = np.random.default_rng(6)
    emissions, transitions = random_case(rng, 3)
    tags = np.array([[2, 0, 1, 0]])
    padded = tf.Variable(np.concatenate([emissions, np.ones((1, 1, NUM_TAGS), "float32")], 1))
    mask = np.array([[True, True, True, False]])
    with tf.GradientTape() as tape:
        ll = crf_log_likelihood(tags, padded, transitions, mask)
    gradient = tape.gradient(ll, padded).numpy()[0]
    paths, scores, log_z = brute_force(emissions[0].astype("float64"), transitions)
    marginals = np.zeros((3, NUM_TAGS))
    for path, p in zip(paths, np.exp(scores - log_z)):
        marginals[np.arange(3), path] += p
    gold = np.eye(NUM_TAGS)[tags[0, :3]]
    np.testing.assert_allclose(gradient[:3], gold - marginals, rtol=0, atol=1e-5)
    assert not gradient[3].any()


def test_transitions_exist_before_the_first_call():
    crf = ConditionalRandomField(name="CRF")
    crf.build((None, None, 5))
    assert crf.count_params() == 25
    assert [w.path for w in crf.trainable_weights] == ["CRF/transitions"]
    assert crf.transitions.shape == (5, 5)

    tokens = keras.Input((None,), dtype="int32")
    emissions = keras.layers.Dense(5)(keras.layers.Embedding(10, 4)(tokens))
    model = keras.Model(tokens, ConditionalRandomField(name="CRF")(emissions))
    assert model.count_params() == 10 * 4 + (4 * 5 + 5) + 5 * 5
    assert model.get_layer("CRF").count_params() == 25


def test_the_layer_is_the_identity_and_passes_the_mask_on():
    crf = ConditionalRandomField()
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    mask = np.array([[True, True, False], [True, False, False]])
    out = crf(x, mask=mask)
    assert np.array_equal(out.numpy(), x)
    assert np.array_equal(crf.compute_mask(x, mask), mask)


def tagger(**crf_options):
    """Token ids (0 is padding) -> Embedding -> Dense(SEGMENT_TAGS) -> CRF."""
    keras.utils.set_random_seed(1)
    tokens = keras.Input((None,), dtype="int32", name="Input-Token")
    hidden = keras.layers.Embedding(4, 8, mask_zero=True)(tokens)
    crf = ConditionalRandomField(name="CRF", **crf_options)
    return keras.Model(tokens, crf(keras.layers.Dense(SEGMENT_TAGS)(hidden))), crf


def segment_data(rng, n, width=8):
    """Token 2 or 3 begins a segment of kind a or b (tag 0 = B-a, 2 = B-b), token 1 goes on
    with it (1 = I-a, 3 = I-b), 0 pads.

    Alone, a token 1 could be either kind: only the tag before it says which, so a model
    tagging each token by itself gets about half of them right.
    """
    tokens = np.zeros((n, width), "int32")
    tags = np.zeros((n, width), "int32")
    for row in range(n):
        kind = None
        for t in range(int(rng.integers(3, width + 1))):
            if kind is None or rng.random() < 0.3:
                kind = int(rng.integers(0, 2))
                tokens[row, t], tags[row, t] = 2 + kind, 2 * kind
            else:
                tokens[row, t], tags[row, t] = 1, 2 * kind + 1
    return tokens, tags


def test_loss_decode_and_metric_read_the_keras_mask():
    model, crf = tagger()
    tokens, tags = segment_data(np.random.default_rng(8), 6)
    mask = tokens != 0
    y_pred = model(tokens)
    per_sequence = -crf.log_likelihood(tags, y_pred, mask).numpy()
    unpadded = [-crf.log_likelihood(tags[i, m][None], model(tokens[i, m][None])).numpy()[0]
                for i, m in enumerate(mask)]
    np.testing.assert_allclose(per_sequence, unpadded, rtol=0, atol=1e-5)
    assert abs(float(crf.loss(tags, y_pred)) - per_sequence.mean()) < 1e-5
    assert abs(float(crf.loss(tags[..., None], y_pred)) - per_sequence.mean()) < 1e-5
    # Without the mask the padding would count.
    assert abs(float(crf.loss(tags, y_pred.numpy())) - per_sequence.mean()) > 1e-2
    assert np.array_equal(crf.decode(y_pred).numpy(), crf.decode(y_pred, mask).numpy())

    weights = np.array([1, 0, 2, 1, 1, 0], "float32")
    weighted = float(crf.loss(tags, y_pred, sample_weight=weights))
    assert abs(weighted - (per_sequence * weights).sum() / len(weights)) < 1e-5

    # The same numbers in graph mode, through compile and evaluate.
    model.compile(loss=crf.loss, metrics=[crf.sparse_accuracy])
    loss, accuracy = model.evaluate(tokens, tags, batch_size=6, verbose=0)
    assert abs(loss - per_sequence.mean()) < 1e-5
    right = crf.decode(y_pred, mask).numpy() == tags
    assert abs(accuracy - right[mask].mean()) < 1e-6
    metric = crf.sparse_accuracy
    metric.update_state(tags, y_pred, sample_weight=weights)
    per_token = np.where(mask, weights[:, None], 0)
    assert abs(float(metric.result()) - (right * per_token).sum() / per_token.sum()) < 1e-6


def test_a_mask_given_to_the_layer_reaches_the_compiled_loss():
    features = keras.Input((None, 5))
    mask = keras.Input((None,), dtype="bool")
    crf = ConditionalRandomField(name="CRF")
    model = keras.Model([features, mask], crf(keras.layers.Dense(NUM_TAGS)(features), mask=mask))
    model.compile(loss=crf.loss)
    rng = np.random.default_rng(11)
    x = rng.normal(size=(4, 6, 5)).astype("float32")
    m = np.arange(6) < np.array([[6], [3], [1], [4]])
    tags = rng.integers(0, NUM_TAGS, size=(4, 6))
    expected = -crf.log_likelihood(tags, model([x, m]), m).numpy().mean()
    assert abs(model.evaluate([x, m], tags, verbose=0) - expected) < 1e-5
    x[~m] = 1e3  # padding features do not count
    assert abs(model.evaluate([x, m], tags, verbose=0) - expected) < 1e-5


@pytest.fixture(scope="module")
def trained():
    model, crf = tagger()
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=crf.loss,
                  metrics=[crf.sparse_accuracy])
    tokens, tags = segment_data(np.random.default_rng(0), 320)
    history = model.fit(tokens, tags, batch_size=32, epochs=12, verbose=0)
    return model, crf, history.history


def test_training_learns_tags_that_follow_the_previous_tag(trained):
    model, crf, history = trained
    assert history["loss"][-1] < 0.2 * history["loss"][0]
    assert history["sparse_accuracy"][-1] > 0.95
    tokens, tags = segment_data(np.random.default_rng(1), 200)
    mask = tokens != 0
    path = crf.decode(model.predict(tokens, verbose=0), mask).numpy()
    assert (path == tags)[mask].mean() > 0.97
    # Token by token (no transitions) the rule cannot be followed.
    alone = np.argmax(model.predict(tokens, verbose=0), axis=-1)
    assert (alone == tags)[mask].mean() < 0.8


def test_training_compiles_with_xla():
    # jit_compile is Keras's default on a GPU; XLA needs a bound on every loop it differentiates.
    tokens, tags = segment_data(np.random.default_rng(0), 64)
    losses = []
    for jit_compile in (False, True):
        model, crf = tagger()
        model.compile(optimizer=keras.optimizers.Adam(0.05), loss=crf.loss,
                      metrics=[crf.sparse_accuracy], jit_compile=jit_compile)
        losses.append(model.fit(tokens, tags, batch_size=32, epochs=2, verbose=0)
                      .history["loss"])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)


def test_saved_model_loads_safely_with_the_same_transitions_and_paths(trained, tmp_path):
    model, crf, _ = trained
    path = tmp_path / "tagger.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    loaded_crf = loaded.get_layer("CRF")
    assert isinstance(loaded_crf, ConditionalRandomField)
    assert np.array_equal(loaded_crf.transitions.numpy(), crf.transitions.numpy())
    tokens, tags = segment_data(np.random.default_rng(2), 16)
    assert np.array_equal(loaded_crf.decode(loaded(tokens)).numpy(),
                          crf.decode(model(tokens)).numpy())

    # The compiled loss comes back unbound and says how to bind it.
    assert isinstance(loaded.loss, CRFLoss)
    with pytest.raises(ValueError, match=r"model.get_layer\('CRF'\).loss"):
        loaded.evaluate(tokens, tags, verbose=0)
    loaded.compile(loss=loaded_crf.loss, metrics=[loaded_crf.sparse_accuracy])
    np.testing.assert_allclose(loaded.evaluate(tokens, tags, verbose=0),
                               model.evaluate(tokens, tags, verbose=0), rtol=1e-6)


def test_unbound_metric_says_how_to_bind_it():
    metric = CRFAccuracy.from_config(CRFAccuracy(ConditionalRandomField(name="Tags"))
                                     .get_config())
    with pytest.raises(ValueError, match=r"model.get_layer\('Tags'\).sparse_accuracy"):
        metric.update_state(np.zeros((1, 2)), np.zeros((1, 2, 3)))


def test_decode_runs_in_a_graph_with_unknown_shapes_and_under_xla():
    crf = ConditionalRandomField()
    crf.build((None, None, NUM_TAGS))
    decode = tf.function(crf.decode, input_signature=[
        tf.TensorSpec([None, None, NUM_TAGS], tf.float32), tf.TensorSpec([None, None], tf.bool)])
    rng = np.random.default_rng(9)
    compiled = tf.function(crf.decode, jit_compile=True)
    for batch, length in [(2, 5), (3, 1)]:
        emissions = rng.normal(size=(batch, length, NUM_TAGS)).astype("float32")
        mask = rng.random((batch, length)) < 0.8
        expected = crf.decode(emissions, mask).numpy()
        assert np.array_equal(decode(emissions, mask).numpy(), expected)
        assert np.array_equal(compiled(emissions, mask).numpy(), expected)


def test_lr_multiplier_scales_the_stored_weight():
    crf = ConditionalRandomField(lr_multiplier=100.0)
    crf.build((None, None, NUM_TAGS))
    np.testing.assert_allclose(np.asarray(crf.trans), crf.transitions.numpy() * 100, rtol=1e-6)
    assert np.abs(np.asarray(crf.trans)).max() <= np.sqrt(6 / (2 * NUM_TAGS)) + 1e-6  # glorot
    emissions, _ = random_case(np.random.default_rng(1), 3)
    np.testing.assert_allclose(
        crf.log_likelihood([[0, 1, 2]], emissions).numpy(),
        crf_log_likelihood([[0, 1, 2]], emissions, np.asarray(crf.trans)).numpy(), atol=1e-6)
    assert ConditionalRandomField.from_config(crf.get_config()).lr_multiplier == 100.0


def test_bad_inputs_are_named():
    transitions = np.zeros((NUM_TAGS, NUM_TAGS), "float32")
    with pytest.raises(ValueError, match=r"\(1, 2, 4\) need transitions of shape \(4, 4\)"):
        viterbi_decode(np.zeros((1, 2, 4)), transitions)
    with pytest.raises(ValueError, match=r"\[batch, length, num_tags\]; received shape \(2, 3\)"):
        viterbi_decode(np.zeros((2, 3)), transitions)
    with pytest.raises(ValueError, match=r"received shape \(1, 2, 3\)"):
        crf_log_likelihood(np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), transitions)
    with pytest.raises(ValueError, match="lr_multiplier must be positive; received 0"):
        ConditionalRandomField(lr_multiplier=0)
    with pytest.raises(ValueError, match=r"number of tags\) must be known"):
        ConditionalRandomField(name="CRF").build((None, None, None))
