"""bert4keras 0.11.5's T5 classes and the two layers of models built otherwise, against
bert4keras itself: ``T5_Encoder``, ``T5_Decoder`` (``T5_Base``'s halves, by ``version=``),
``GatedAttentionUnit`` and ``RelativePositionEmbeddingT5``.

bert4keras runs once, in its own interpreter. LAYERS runs under both libraries: each layer
is built, given the same random weights in its own order (which checks that order and the
shapes) and called. Then bert4keras builds a tiny t5.1.1 whole, draws random weights, writes
them as a checkpoint, and builds ``T5_Encoder`` and ``T5_Decoder`` from that checkpoint;
kerasbert's classes must load the same checkpoint strictly, have the same layers and give the
same outputs at real tokens.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert.models as M
from kerasbert import layers
from peers import run_bert4keras

TOLERANCE = 1e-5
# A tiny t5.1.1: gated feed-forward, heads (6) narrower than hidden_size / heads.
CONFIG = {"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "attention_head_size": 6, "intermediate_size": 24,
          "hidden_act": ["gelu", "linear"], "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1}
# Source ids with padding; decoder ids start at 0 (T5's start id, never masked).
SOURCE = [[5, 17, 23, 9, 41, 3, 0, 0], [7, 8, 3, 0, 0, 0, 0, 0]]
TARGET = [[0, 12, 33, 4, 0], [0, 61, 0, 0, 0]]

LAYERS = """
import numpy as np
import tensorflow as tf


def run(L, value):
    rng = np.random.default_rng(0)
    T = lambda a, dtype="float32": tf.constant(np.asarray(a), dtype=dtype)
    x = T(rng.normal(size=(2, 6, 16)))
    y = T(rng.normal(size=(2, 6, 12)))  # keys and values of another width
    scores = T(rng.normal(size=(2, 6, 6)))
    mask = T([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], "bool")
    lm = T(np.tril(np.ones((1, 6, 6))), "bool")
    rotary = L.SinusoidalPositionEmbedding(8, merge_mode="zero")(x)
    out = {}

    def weigh(layer, *args, **kwargs):
        # Built by a first call, then every weight drawn in the layer's own order.
        layer(*args, **kwargs)
        layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32")
                           for w in layer.get_weights()])
        return {"shapes": [list(w.shape) for w in layer.get_weights()],
                "outputs": value(layer(*args, **kwargs))}

    units = {
        "softmax_plus": ({"normalization": "softmax_plus"}, x, {"mask": mask}),
        "squared_relu-lm-rotary": ({}, [x, lm, rotary],
                                   {"mask": [mask, None, None], "a_bias": True,
                                    "p_bias": "rotary"}),
        "squared_relu-unscaled-scores": ({"attention_scale": False, "use_bias": False},
                                         [x, scores], {"a_bias": True}),
        "softmax-relu": ({"normalization": "softmax", "activation": "relu"}, [x],
                         {"mask": [mask]}),
        "cross": ({"self_attention": False, "normalization": "softmax_plus"}, [x, y, y],
                  {"mask": [mask, mask, mask]}),
    }
    out["gau"] = {name: weigh(L.GatedAttentionUnit(units=24, key_size=8, **options), args,
                              **kwargs)
                  for name, (options, args, kwargs) in units.items()}

    # bert4keras's relative positions hand on the mask of a masked input only: .call.
    long = T(np.zeros((1, 40, 4)))
    tables = {"default": (L.RelativePositionEmbeddingT5(32, 2), [x, x]),
              "encoder": (L.RelativePositionEmbeddingT5(16, 3, max_distance=20), [long, long]),
              "decoder": (L.RelativePositionEmbeddingT5(16, 3, max_distance=20,
                                                        bidirectional=False),
                          [long[:, :30], long])}
    out["t5_positions"] = {}
    for name, (layer, args) in tables.items():
        layer.build([a.shape for a in args])
        layer.set_weights([rng.normal(0, 0.5, (layer.input_dim, layer.output_dim))
                           .astype("float32")])
        out["t5_positions"][name] = value(layer.call(args))

    # The table as MultiHeadAttention's t5_relative bias (T5's attention: no scale, no bias).
    attention = L.MultiHeadAttention(heads=2, head_size=8, use_bias=False,
                                     attention_scale=False)
    table = L.RelativePositionEmbeddingT5(32, 2)
    table.build([x.shape, x.shape])
    table.set_weights([rng.normal(0, 0.5, (32, 2)).astype("float32")])
    out["t5_attention"] = weigh(attention, [x, x, x, table.call([x, x])],
                                mask=[mask, mask, mask, None], p_bias="t5_relative")
    return out
"""


def as_lists(tree):
    """``tree`` with every array a nested list (the answers' JSON form)."""
    return json.loads(json.dumps(tree, default=lambda t: np.asarray(t).tolist()))


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's layer answers, and its T5 checkpoint, halves' layers and outputs."""
    root = tmp_path_factory.mktemp("t5-names")
    (root / "config.json").write_text(json.dumps(CONFIG))
    out = run_bert4keras(LAYERS + f"""
import json
# bert4keras 0.11.5 saves with TF 1's Session and Saver, in graph mode.
tf.compat.v1.disable_eager_execution()
tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
from bert4keras import layers
from bert4keras.backend import K
from bert4keras.models import T5_Decoder, T5_Encoder, build_transformer_model

out = json.loads(json.dumps(run(layers, K.eval), default=lambda t: np.asarray(t).tolist()))
config, checkpoint = {json.dumps(str(root / "config.json"))}, {json.dumps(str(root / "t5.ckpt"))}
K.clear_session()
t5 = build_transformer_model(config, model="t5.1.1", return_keras_model=False)
rng = np.random.default_rng(0)
K.batch_set_value([(w, rng.normal(0, 0.2, K.int_shape(w)).astype("float32"))
                   for w in t5.model.trainable_weights])
t5.save_weights_as_checkpoint(checkpoint)
K.clear_session()
encoder = build_transformer_model(config, checkpoint, model=T5_Encoder, version="t5.1.1")
context = encoder.predict(np.array({SOURCE}), verbose=0)
K.clear_session()
decoder = build_transformer_model(config, checkpoint, model=T5_Decoder, version="t5.1.1",
                                  with_lm="linear")
out["encoder"] = {{"layers": sorted([l.name, int(l.count_params())] for l in encoder.layers),
                  "inputs": [x.name.split(":")[0] for x in encoder.inputs],
                  "outputs": context.tolist()}}
out["decoder"] = {{"layers": sorted([l.name, int(l.count_params())] for l in decoder.layers),
                  "inputs": [x.name.split(":")[0] for x in decoder.inputs],
                  "outputs": decoder.predict([context, np.array({TARGET})], verbose=0).tolist()}}
print(json.dumps(out))
""")
    return {**out, "dir": str(root)}


@pytest.fixture(scope="module")
def ours():
    scope = {}
    exec(LAYERS, scope)
    return as_lists(scope["run"](layers, np.asarray))


def compare(a, b, where):
    """Nested answers equal key by key, numbers within TOLERANCE."""
    if isinstance(b, dict):
        assert sorted(a) == sorted(b), where
        for key in b:
            compare(a[key], b[key], f"{where}/{key}")
    elif where.endswith("shapes"):
        assert a == b, where
    else:
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), atol=TOLERANCE,
                                   rtol=TOLERANCE, err_msg=where)


@pytest.mark.peer
@pytest.mark.parametrize("part", ["gau", "t5_positions", "t5_attention"])
def test_the_layers_equal_bert4keras_with_its_weights(theirs, ours, part):
    compare(ours[part], theirs[part], part)


def real(ids):
    """The real tokens of ``ids``: not 0, and the first of each row (the decoder's start)."""
    mask = np.asarray(ids) != 0
    mask[:, 0] = True
    return mask


@pytest.mark.peer
@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_t5_halves_load_the_whole_checkpoint_and_equal_bert4keras(theirs, side):
    cls, options = {"encoder": (M.T5_Encoder, {}),
                    "decoder": (M.T5_Decoder, {"with_lm": "linear"})}[side]
    half = M.build_transformer_model(f"{theirs['dir']}/config.json",
                                     f"{theirs['dir']}/t5.ckpt", model=cls, version="t5.1.1",
                                     return_keras_model=False, **options)
    report = half.load_report
    other = "decoder/" if side == "encoder" else "encoder/"
    assert report.ok and report.unused and all(name.startswith(other) for name in report.unused)
    assert sorted([layer.name, layer.count_params()] for layer in half.model.layers) == \
        theirs[side]["layers"]
    assert [x.name for x in half.model.inputs] == theirs[side]["inputs"]
    source, target = np.array(SOURCE, "int32"), np.array(TARGET, "int32")
    context = np.array(theirs["encoder"]["outputs"], "float32")
    outputs = half.model.predict(source if side == "encoder" else [context, target],
                                 verbose=0)
    at = real(source if side == "encoder" else target)
    np.testing.assert_allclose(outputs[at], np.array(theirs[side]["outputs"])[at],
                               atol=TOLERANCE, rtol=0)


def test_the_halves_are_those_of_the_whole_t5():
    whole = M.build_transformer_model(CONFIG, model="t5.1.1", return_keras_model=False)
    for cls, model, other in ((M.T5_Encoder, whole.encoder, "Decoder-"),
                              (M.T5_Decoder, whole.decoder, "Encoder-")):
        half = M.build_transformer_model(CONFIG, model=cls, version="t5.1.1",
                                         return_keras_model=False)
        assert sorted(layer.name for layer in half.model.layers) == \
            sorted(layer.name for layer in model.layers)
        assert half.model.count_params() == model.count_params()
        # Its own table: the other side's layers are left out, those it has all there.
        table = half.variable_mapping()
        assert not [name for name in table if name.startswith(other)]
        assert {layer.name for layer in half.model.layers if layer.weights} <= set(table)
    # t5.1.0 (the default version): the decoder's head is the tied embedding.
    decoder = M.build_transformer_model(dict(CONFIG, hidden_act="relu"), model=M.T5_Decoder)
    assert "Decoder-Output-LM-Activation" in [layer.name for layer in decoder.layers]
    with pytest.raises(ValueError, match=r"T5_Encoder\(version='t5.2'\): not one of"):
        M.build_transformer_model(CONFIG, model=M.T5_Encoder, version="t5.2")
    # The family class T5 is t5.1.0: another version is refused, not built as t5.1.0.
    with pytest.raises(ValueError, match=r"T5\(version='t5.1.1'\): .*model=T5_Base"):
        M.build_transformer_model(CONFIG, model=M.T5, version="t5.1.1")


def test_the_layers_save_and_load_in_safe_mode(tmp_path):
    x = keras.Input((None, 16))
    table = layers.RelativePositionEmbeddingT5(32, 2, bidirectional=False)([x, x])
    y = layers.MultiHeadAttention(2, 8, use_bias=False)([x, x, x, table], p_bias="t5_relative")
    y = layers.GatedAttentionUnit(24, 8, normalization="softmax_plus")(y)
    model = keras.Model(x, layers.GatedAttentionUnit(24, 8, self_attention=False)([y, x, x]))
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True, compile=False)
    batch = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    np.testing.assert_array_equal(loaded.predict(batch, verbose=0),
                                  model.predict(batch, verbose=0))
    assert tf.is_tensor(layers.GatedAttentionUnit(8, 4)(batch))
