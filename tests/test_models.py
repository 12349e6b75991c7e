import json
import math

import keras
import numpy as np
import pytest

from kerasbert import add_cls_classifier, build_bert, build_transformer_model
from kerasbert.models import names
from peers import run_python

TINY_LAYERS = [
    "Input-Token", "Input-Segment", "Embedding-Token", "Embedding-Segment",
    "Embedding-Token-Segment", "Embedding-Position", "Embedding-Norm", "Embedding-Dropout",
] + [
    f"Transformer-{i}-{block}{suffix}"
    for i in range(2)
    for block in ("MultiHeadSelfAttention", "FeedForward")
    for suffix in ("", "-Dropout", "-Add", "-Norm")
]


def batch(rng, vocab=100, shape=(3, 9), pad_from=(9, 6, 4)):
    tokens = rng.integers(1, vocab, size=shape).astype("int32")
    segments = np.zeros(shape, "int32")
    for row, start in enumerate(pad_from):
        tokens[row, start:] = 0
        segments[row, start // 2:start] = 1
    return tokens, segments


def test_layer_names_and_order(tiny_config):
    model = build_bert(tiny_config)
    assert [layer.name for layer in model.layers] == TINY_LAYERS


def test_dropout_layers_are_omitted_at_rate_zero(tiny_config):
    model = build_bert(tiny_config.replace(dropout_rate=0))
    layer_names = [layer.name for layer in model.layers]
    assert not [n for n in layer_names if n.endswith("Dropout")]
    assert layer_names == [n for n in TINY_LAYERS if not n.endswith("Dropout")]


def test_inputs_are_int32_and_no_lambda_layers(tiny_config):
    model = build_transformer_model(tiny_config, with_pool=True, with_nsp=True, with_mlm=True)
    assert [x.dtype for x in model.inputs] == ["int32", "int32"]
    assert not [layer for layer in model.layers if isinstance(layer, keras.layers.Lambda)]


def test_weights_exist_before_the_first_call(tiny_config):
    model = build_bert(tiny_config)
    assert all(layer.built for layer in model.layers)
    attention = model.get_layer(names.attention_name(0))
    # Keras Dense sublayers, in bert4keras's order of the weights (q, k, v, o).
    assert ["/".join(w.path.split("/")[-2:]) for w in attention.weights] == [
        "query/kernel", "query/bias", "key/kernel", "key/bias", "value/kernel", "value/bias",
        "output/kernel", "output/bias"]
    assert attention.weights[0].shape == (16, 16)
    assert attention.query_kernel is attention.weights[0]


def test_output_rules_follow_bert4keras(tiny_config):
    def shapes(**heads):
        outputs = build_transformer_model(tiny_config, **heads).outputs
        return [tuple(o.shape) for o in outputs]

    assert shapes() == [(None, None, 16)]
    assert shapes(with_pool=True) == [(None, 16)]
    assert shapes(with_nsp=True) == [(None, 2)]
    assert shapes(with_mlm=True) == [(None, None, 100)]
    assert shapes(with_pool=True, with_mlm=True) == [(None, 16), (None, None, 100)]
    assert shapes(with_nsp=True, with_mlm=True) == [(None, 2), (None, None, 100)]


def test_unknown_model_lists_the_supported_ones(tiny_config):
    with pytest.raises(ValueError, match="model='t5_encoder' is not supported; supported: "
                                         "bert, roberta, albert, albert_unshared, nezha, "
                                         "roformer, roformer_v2, gau_alpha, electra, gpt2, "
                                         "gpt2_ml, gpt, t5, t5.1.0, t5.1.1, mt5.1.1"):
        build_transformer_model(tiny_config, model="t5_encoder")
    roberta = build_transformer_model(tiny_config, model="roberta")
    assert [layer.name for layer in roberta.layers] == TINY_LAYERS


def test_config_path_keep_tokens_and_overrides(tiny_config_path):
    model = build_transformer_model(str(tiny_config_path), keep_tokens=list(range(40)),
                                    compound_tokens=[[1, 2], [3]], num_hidden_layers=1)
    assert model.get_layer("Embedding-Token").embeddings.shape == (42, 16)
    assert model.get_layer("Transformer-0-FeedForward") is not None
    with pytest.raises(ValueError, match="Transformer-1-FeedForward"):
        model.get_layer("Transformer-1-FeedForward")


def test_type_vocab_size_zero_has_no_segment_input(tiny_config):
    model = build_bert(tiny_config.replace(type_vocab_size=0))
    assert [x.name for x in model.inputs] == ["Input-Token"]
    assert "Embedding-Segment" not in [layer.name for layer in model.layers]


def test_padding_does_not_change_real_tokens(tiny_config):
    model = build_transformer_model(tiny_config, with_pool=True, with_mlm=True)
    tokens, segments = batch(np.random.default_rng(0))
    pooled, mlm = model([tokens, segments])
    longer = [np.pad(a, ((0, 0), (0, 7))) for a in (tokens, segments)]
    pooled2, mlm2 = model(longer)
    np.testing.assert_allclose(pooled, pooled2, atol=1e-6)
    for row, length in enumerate((9, 6, 4)):
        np.testing.assert_allclose(mlm[row, :length], mlm2[row, :length], atol=1e-6)


def test_gelu_is_exact_and_gelu_new_is_tanh(tiny_config):
    from kerasbert.models.layers import FeedForward

    x = np.linspace(-4, 4, 16, dtype="float32").reshape(1, 1, 16)
    exact, tanh = FeedForward(32, "gelu"), FeedForward(32, "gelu_new")
    exact.build(x.shape)
    tanh.build(x.shape)
    for layer in (exact, tanh):
        layer.set_weights([np.eye(16, 32, dtype="float32"), np.zeros(32, "float32"),
                           np.eye(32, 16, dtype="float32"), np.zeros(16, "float32")])
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(exact(x), x * 0.5 * (1 + erf(x / math.sqrt(2))), atol=1e-6)
    approx = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(tanh(x), approx, atol=1e-6)
    assert np.abs(np.asarray(exact(x)) - approx).max() > 1e-5  # the two forms really differ


def test_mlm_output_is_tied_to_the_token_embedding(tiny_config):
    model = build_transformer_model(tiny_config.replace(dropout_rate=0), with_mlm="linear")
    tokens, segments = batch(np.random.default_rng(1))
    bias = model.get_layer("MLM-Bias")
    bias.bias.assign(np.random.default_rng(2).normal(size=100).astype("float32"))
    norm = keras.Model(model.inputs, model.get_layer("MLM-Norm").output)
    hidden = np.asarray(norm([tokens, segments]))
    table = model.get_layer("Embedding-Token").embeddings.numpy()
    np.testing.assert_allclose(model([tokens, segments]), hidden @ table.T + bias.bias.numpy(),
                               atol=1e-5)


def test_checkpoint_path_loads_and_the_transformer_saves_back(tiny_config, tmp_path):
    source = build_transformer_model(tiny_config, with_pool=True, return_keras_model=False)
    for weight in source.model.weights:
        weight.assign(np.random.default_rng(4).normal(size=weight.shape).astype("float32"))
    prefix = str(tmp_path / "bert_model.ckpt")
    assert len(source.save_weights_as_checkpoint(prefix)) == 39
    built = build_transformer_model(tiny_config, checkpoint_path=prefix, with_pool=True,
                                    return_keras_model=False)
    assert built.load_report.ok and len(built.load_report.loaded) == 39
    tokens, segments = batch(np.random.default_rng(5))
    np.testing.assert_array_equal(built.model([tokens, segments]),
                                  source.model([tokens, segments]))
    with pytest.raises(FileNotFoundError, match="missing.ckpt"):
        build_transformer_model(tiny_config, checkpoint_path=str(tmp_path / "missing.ckpt"))


def test_classifier_layers_and_count(tiny_config):
    bert = build_transformer_model(tiny_config)
    model = add_cls_classifier(bert, num_labels=3)
    assert [layer.name for layer in model.layers][-3:] == [
        "CLS-token", "CLS-Dropout", "dense_output"]
    assert model.count_params() == bert.count_params() + 16 * 3 + 3
    assert tuple(model.outputs[0].shape) == (None, 3)
    pooled = add_cls_classifier(build_transformer_model(tiny_config, with_pool=True), 2, 0)
    assert [layer.name for layer in pooled.layers][-2:] == ["Pooler-Dense", "dense_output"]
    with pytest.raises(ValueError, match="num_labels"):
        add_cls_classifier(bert, num_labels=0)


def test_saved_model_loads_in_safe_mode_in_a_fresh_process(tiny_config, tmp_path):
    model = add_cls_classifier(
        build_transformer_model(tiny_config.replace(hidden_act="gelu_new"), with_mlm=False), 2)
    tokens, segments = batch(np.random.default_rng(3))
    expected = np.asarray(model([tokens, segments])).tolist()
    path = tmp_path / "classifier.keras"
    model.save(path)
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "segments.npy", segments)
    got = run_python(f"""
        import json, numpy as np, kerasbert
        model = kerasbert.load_model({str(path)!r})
        x = [np.load({str(tmp_path / 'tokens.npy')!r}), np.load({str(tmp_path / 'segments.npy')!r})]
        print(json.dumps({{"out": np.asarray(model(x)).tolist(),
                           "names": [l.name for l in model.layers]}}))
    """)
    assert got["names"] == [layer.name for layer in model.layers]
    np.testing.assert_array_equal(np.array(got["out"]), np.array(expected))


def test_padding_mask_is_computed_once_per_batch(tiny_config):
    # Keras records mask computations as graph operations; residual sums must not add more.
    model = build_transformer_model(tiny_config, with_pool=True)
    extra = [type(op).__name__ for op in model.operations if not isinstance(op, keras.layers.Layer)]
    assert extra == ["NotEqual"]


@pytest.mark.parametrize("keyword, meant", [("with_poll", "with_pool"), ("with_nps", "with_nsp"),
                                            ("hiden_size", "hidden_size"),
                                            ("num_hiden_layers", "num_hidden_layers"),
                                            ("dropout_rat", "dropout_rate")])
def test_a_misspelt_keyword_is_refused_with_the_name_meant(tiny_config, keyword, meant):
    """bert4keras drops ``with_poll=True`` and builds no pooler; kerasbert names the slip."""
    with pytest.raises(ValueError, match=f"^{keyword}: unknown keyword; did you mean {meant}\\?$"):
        build_transformer_model(tiny_config, **{keyword: 5})


@pytest.mark.parametrize("keyword, meant", [("pooling", "with_pool"),
                                            ("hidden_layers", "num_hidden_layers"),
                                            ("checkpoint", "checkpoint_path")])
def test_any_unknown_keyword_is_refused_with_the_nearest_known_name(tiny_config, keyword,
                                                                     meant):
    with pytest.raises(ValueError, match=f"^{keyword}: unknown keyword; did you mean {meant}\\?$"):
        build_transformer_model(tiny_config, **{keyword: 5})


def test_an_unknown_key_of_a_config_dict_is_refused_and_files_keep_theirs(tmp_path):
    """A dict is written by hand, so a slip in it is refused; the keys Google's and Hugging
    Face's files carry (IGNORED_KEYS) pass in both, and a file's other keys are kept."""
    from kerasbert.models.config import IGNORED_KEYS

    config = dict(vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32)
    with pytest.raises(ValueError, match=r"^hiden_size in the config dict: unknown key; "
                                         r"did you mean hidden_size\?$"):
        build_transformer_model({**config, "hiden_size": 8})
    with pytest.raises(ValueError, match="^num_hiden_layers in the config dict: .* "
                                         "num_hidden_layers"):
        build_transformer_model({**config, "num_hiden_layers": 8})
    ignored = {key: None for key in IGNORED_KEYS}
    model = build_transformer_model({**config, **ignored, "_name_or_path": "x"})
    assert model.count_params() == build_transformer_model(config).count_params()
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({**config, "my_own_note": "kept"}))
    bert = build_transformer_model(str(path), return_keras_model=False)
    assert bert.config.extra["my_own_note"] == "kept"
