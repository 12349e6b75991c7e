"""The fast path computes the same numbers as the plain formula, and traces once."""

import logging

import keras
import numpy as np
import pytest

from kerasbert import build_transformer_model, hardware
from kerasbert.inference.predictor import Predictor, with_dtype_policy
from kerasbert.models import names
from test_models import batch


def reference_attention(x, mask, weights, num_heads):
    """BERT self-attention as Google's modeling.py writes it, in float64 numpy."""
    q_kernel, q_bias, k_kernel, k_bias, v_kernel, v_bias, o_kernel, o_bias = (
        w.astype("float64") for w in weights)
    batch, length, hidden = x.shape
    size = hidden // num_heads

    def heads(kernel, bias):
        return (x @ kernel + bias).reshape(batch, length, num_heads, size)

    q, k, v = heads(q_kernel, q_bias), heads(k_kernel, k_bias), heads(v_kernel, v_bias)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(size)
    scores = np.where(mask[:, None, None, :], scores, -1e9)
    probabilities = np.exp(scores - scores.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    context = np.einsum("bhqk,bkhd->bqhd", probabilities, v).reshape(batch, length, hidden)
    return context @ o_kernel + o_bias


@pytest.fixture
def tiny_model(tiny_config):
    model = build_transformer_model(tiny_config, with_pool=True, with_mlm="linear")
    # Non-zero biases, so a bias applied in the wrong place would show.
    rng = np.random.default_rng(7)
    for layer in model.layers:
        layer.set_weights([w + rng.normal(0, 0.05, w.shape).astype("float32")
                           for w in layer.get_weights()])
    return model


@pytest.mark.parametrize("lengths", [(9, 6, 4), (9, 9, 9), (9, 1, 0)])
def test_attention_equals_the_reference_with_padding(tiny_model, lengths):
    layer = tiny_model.get_layer(names.attention_name(1))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 9, 16)).astype("float32")
    mask = np.arange(9)[None, :] < np.array(lengths)[:, None]
    got = np.asarray(layer(x, mask=keras.ops.convert_to_tensor(mask)))
    expected = reference_attention(x, mask, layer.get_weights(), layer.num_heads)
    # Real tokens only: what a padding query position gets is nobody's output.
    np.testing.assert_allclose(got[mask], expected[mask], atol=1e-5)


def test_attention_without_mask_equals_the_reference(tiny_model):
    layer = tiny_model.get_layer(names.attention_name(0))
    x = np.random.default_rng(1).normal(size=(2, 5, 16)).astype("float32")
    expected = reference_attention(x, np.ones((2, 5), bool), layer.get_weights(), 2)
    np.testing.assert_allclose(layer(x), expected, atol=1e-5)


def test_predictor_equals_the_eager_model_with_padding(tiny_model):
    tokens, segments = batch(np.random.default_rng(2), shape=(3, 9), pad_from=(9, 6, 4))
    expected = [np.asarray(o) for o in tiny_model([tokens, segments])]
    got = Predictor(tiny_model)(tokens, segments)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, atol=1e-5)


def test_predictor_traces_once_for_any_batch_contents_and_shape(tiny_model):
    predict = Predictor(tiny_model)
    rng = np.random.default_rng(3)
    for shape, lengths in [((3, 9), (9, 6, 4)), ((3, 9), (2, 9, 5)), ((3, 9), (9, 9, 1)),
                           ((5, 17), (17, 3, 8, 1, 12)), ((1, 4), (4,))]:
        pooled, mlm = predict(*batch(rng, shape=shape, pad_from=lengths))
        assert pooled.shape == (shape[0], 16) and mlm.shape == (*shape, 100)
    assert predict.traces == 1


def test_xla_predictor_buckets_lengths_and_keeps_the_numbers(tiny_model):
    predict = Predictor(tiny_model, jit_compile=True, bucket=8)
    rng = np.random.default_rng(4)
    for shape, lengths in [((3, 9), (9, 6, 4)), ((3, 11), (11, 2, 7)), ((4, 16), (16, 3, 5, 9))]:
        tokens, segments = batch(rng, shape=shape, pad_from=lengths)
        pooled, mlm = predict(tokens, segments)
        expected_pooled, expected_mlm = tiny_model([tokens, segments])
        assert mlm.shape == (*shape, 100)
        np.testing.assert_allclose(pooled, expected_pooled, atol=1e-5)
        for row, length in enumerate(lengths):
            np.testing.assert_allclose(mlm[row, :length], np.asarray(expected_mlm)[row, :length],
                                       atol=1e-5)
    assert predict.traces == 1


def test_model_predict_does_not_retrace_when_only_contents_change(tiny_model):
    traces = []
    predict_step = tiny_model.predict_step

    def counting_predict_step(data):
        traces.append(1)  # Python runs here only while tracing
        return predict_step(data)

    tiny_model.predict_step = counting_predict_step
    rng = np.random.default_rng(5)
    tiny_model.predict(list(batch(rng, shape=(4, 9), pad_from=(9, 6, 4, 2))), batch_size=4,
                       verbose=0)
    first = len(traces)
    for lengths in [(1, 2, 3, 4), (9, 9, 9, 9), (5, 0, 7, 8)]:
        tiny_model.predict(list(batch(rng, shape=(4, 9), pad_from=lengths)), batch_size=4,
                           verbose=0)
    assert len(traces) == first


@pytest.mark.parametrize("policy", ["bfloat16", "mixed_bfloat16"])
def test_bf16_copy_keeps_the_weights_and_stays_close(tiny_model, policy, caplog):
    copy = with_dtype_policy(tiny_model, policy)
    assert [layer.name for layer in copy.layers] == [layer.name for layer in tiny_model.layers]
    assert copy.get_layer(names.feed_forward_name(0)).compute_dtype == "bfloat16"
    assert tiny_model.get_layer(names.feed_forward_name(0)).compute_dtype == "float32"
    # bfloat16 keeps 8 significant bits: weights rounded once, to within 2^-8 relative.
    rtol = 2.0**-8 if policy == "bfloat16" else 0
    for ours, theirs in zip(copy.get_weights(), tiny_model.get_weights()):
        np.testing.assert_allclose(np.asarray(ours, "float32"), theirs, rtol=rtol, atol=0)
    tokens, segments = batch(np.random.default_rng(6), shape=(3, 9), pad_from=(9, 6, 4))
    fp32 = Predictor(tiny_model)(tokens, segments)
    with caplog.at_level(logging.WARNING):
        bf16 = Predictor(tiny_model, dtype_policy=policy)(tokens, segments)
    fast = hardware.has_fast_bfloat16()
    for a, b in zip(fp32, bf16):
        assert b.dtype == np.float32
        np.testing.assert_allclose(a, b, atol=0.1)
        # bf16 really ran where the CPU has it; elsewhere the Predictor ran float32, and said so
        assert (np.abs(a - b).max() > 0) == fast
    assert fast or "no hardware bfloat16" in caplog.text


def test_predictor_rejects_bad_inputs(tiny_model):
    with pytest.raises(ValueError, match="bucket=0"):
        Predictor(tiny_model, bucket=0)
    predict = Predictor(tiny_model)
    with pytest.raises(ValueError, match=r"\(batch, length\), received shape \(4,\)"):
        predict(np.ones(4, "int32"))
    with pytest.raises(ValueError, match="segment_ids shape"):
        predict(np.ones((2, 4), "int32"), np.zeros((2, 5), "int32"))


def test_dense_products_reach_tensorflow_as_matmul_and_biasadd():
    """Every weight product is ``MatMul`` + ``BiasAdd``, the pair oneDNN fuses (with the
    GELU that follows); a Keras ``add`` would be an ``AddV2`` that stays a separate pass."""
    config = dict(vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=32, type_vocab_size=2)
    for policy in (None, "bfloat16"):
        predict = Predictor(build_transformer_model(config), dtype_policy=policy)
        graph = predict._function.get_concrete_function().graph
        operations = graph.get_operations()
        matmuls = [op for op in operations if op.type == "MatMul"]
        assert len(matmuls) == 6 * 2  # q, k, v, output, and the two feed-forward products
        for op in matmuls:
            assert [c.type for c in op.outputs[0].consumers()] == ["BiasAdd"], op.name
        gelus = [op for op in operations if op.type == "Erfc"]
        assert len(gelus) == 2
