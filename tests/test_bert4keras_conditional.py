"""Conditional layer normalization (``layer_norm_cond``) and ``additional_input_layers``
against bert4keras 0.11.5.

bert4keras (in its own interpreter) builds a tiny BERT (and an ALBERT: shared norms, an MLM
head narrower than the hidden size) whose every layer norm is steered by a condition
computed from an extra input: a class id's embedding, or a dense layer of float features
(through ``layer_norm_cond_hidden_size``'s own dense layer first where it is given). It draws
random values for every weight, the condition's dense layers included (they start at
zero, where they would prove nothing), writes the checkpoint and prints the weights no
checkpoint holds and the outputs. kerasbert builds the same model, loads the checkpoint
strictly, sets those weights and must give the same outputs at every real token, with the
same layer names, counts and inputs.
"""

import json

import keras
import numpy as np
import pytest

from conftest import TINY
from kerasbert import BertConfig, build_transformer_model
from kerasbert.inference.generation import Decoder
from kerasbert.models.audit import audit_model
from kerasbert.models.layers import ConditionalLayerNorm
from peers import run_bert4keras

CONFIG = {**TINY, "max_position_embeddings": 32, "type_vocab_size": 2}
#: case -> the condition's source and build_transformer_model's keywords besides it.
CASES = {
    "label": ("label", {"with_mlm": "linear"}),
    "features+hidden": ("features", {"with_mlm": "linear", "application": "lm",
                                     "layer_norm_cond_hidden_size": 4,
                                     "layer_norm_cond_hidden_act": "tanh"}),
    # Shared norms, and an MLM head E wide.
    "albert+label": ("label", {"model": "albert", "embedding_size": 8, "with_mlm": "linear",
                               "layer_norm_cond_hidden_size": 6}),
}
CLASSES, FEATURES, CONDITION = 3, 5, 8
NORMS = ["Embedding-Norm", "MLM-Norm"] + [
    f"Transformer-{i}-{block}-Norm" for i in range(TINY["num_hidden_layers"])
    for block in ("MultiHeadSelfAttention", "FeedForward")]
TOLERANCE = 1e-5


def batch(source):
    """Two rows of 8 tokens (6 and 3 real, two segments) and their condition's input."""
    tokens = np.array([[2, 5, 7, 9, 11, 3, 0, 0], [2, 40, 3, 0, 0, 0, 0, 0]], "int32")
    segments = np.array([[0, 0, 0, 1, 1, 1, 0, 0], [0, 1, 1, 0, 0, 0, 0, 0]], "int32")
    extra = (np.array([2, 1], "int32") if source == "label"
             else np.random.default_rng(3).normal(size=(2, FEATURES)).astype("float32"))
    return [tokens, segments, extra]


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's layers, inputs, checkpoint, extra weights and outputs of each case."""
    root = tmp_path_factory.mktemp("conditional")
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    jobs = {}
    for case, (source, keywords) in CASES.items():
        (root / case).mkdir()
        jobs[case] = {"dir": str(root / case), "source": source, "keywords": keywords,
                      "batch": [array.tolist() for array in batch(source)]}
    out = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 saves with TF 1's Session and Saver, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K, keras
        from bert4keras.models import build_transformer_model

        def condition(source):
            if source == "label":
                extra = keras.layers.Input(shape=(), dtype="int32", name="Input-Label")
                return extra, keras.layers.Embedding({CLASSES}, {CONDITION},
                                                     name="Label-Embedding")(extra)
            extra = keras.layers.Input(shape=({FEATURES},), name="Input-Features")
            return extra, keras.layers.Dense({CONDITION}, name="Features-Dense")(extra)

        out = {{}}
        for case, job in json.loads({json.dumps(json.dumps(jobs))}).items():
            K.clear_session()
            extra, cond = condition(job["source"])
            bert = build_transformer_model({json.dumps(str(root / "bert_config.json"))},
                                           return_keras_model=False, layer_norm_cond=cond,
                                           additional_input_layers=extra, **job["keywords"])
            model = bert.model
            rng = np.random.default_rng(0)
            K.batch_set_value([(w, rng.normal(0, 0.2, K.int_shape(w)).astype("float32"))
                               for w in model.trainable_weights])
            bert.save_weights_as_checkpoint(job["dir"] + "/bert_model.ckpt")
            dense = {{}}
            for layer in model.layers:
                if type(layer).__name__ != "LayerNormalization":
                    continue
                dense[layer.name] = {{part: K.eval(getattr(layer, part).kernel).tolist()
                               for part in ("hidden_dense", "beta_dense", "gamma_dense")
                               if hasattr(layer, part)}}
            source = model.get_layer(
                "Label-Embedding" if job["source"] == "label" else "Features-Dense")
            result = model.predict([np.array(a) for a in job["batch"]], verbose=0)
            out[case] = {{
                "layers": [[l.name, int(l.count_params())] for l in model.layers],
                "inputs": [i.name.split(":")[0] for i in model.inputs],
                "count": int(model.count_params()), "dense": dense,
                "source": [w.tolist() for w in source.get_weights()],
                "outputs": result.tolist()}}
        print(json.dumps(out))
    """)
    return {case: {**out[case], "dir": job["dir"]} for case, job in jobs.items()}


def build(case, checkpoint=None):
    """kerasbert's model of ``case`` (its condition's layers named as bert4keras's)."""
    source, keywords = CASES[case]
    if source == "label":
        extra = keras.Input((), dtype="int32", name="Input-Label")
        cond = keras.layers.Embedding(CLASSES, CONDITION, name="Label-Embedding")(extra)
    else:
        extra = keras.Input((FEATURES,), name="Input-Features")
        cond = keras.layers.Dense(CONDITION, name="Features-Dense")(extra)
    return build_transformer_model(CONFIG, checkpoint, layer_norm_cond=cond,
                                   additional_input_layers=extra, **keywords)


@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_names_counts_and_inputs_match_bert4keras(theirs, case):
    model = build(case)
    ours = [[layer.name, layer.count_params()] for layer in model.layers]
    assert sorted(map(tuple, ours)) == sorted(map(tuple, theirs[case]["layers"]))
    assert [tensor.name for tensor in model.inputs] == theirs[case]["inputs"]
    assert model.count_params() == theirs[case]["count"]


@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_outputs_match_bert4keras_with_its_checkpoint_and_condition_weights(theirs, case):
    model = build(case, f"{theirs[case]['dir']}/bert_model.ckpt")
    for name, parts in theirs[case]["dense"].items():
        layer = model.get_layer(name)
        # Not in the checkpoint: loaded as zeros (their initial value), set from bert4keras.
        assert parts and all(not getattr(layer, part).kernel.numpy().any() for part in parts
                             if part != "hidden_dense")
        for part, kernel in parts.items():
            getattr(layer, part).kernel.assign(np.asarray(kernel, "float32"))
    source = "Label-Embedding" if CASES[case][0] == "label" else "Features-Dense"
    model.get_layer(source).set_weights([np.asarray(w, "float32")
                                         for w in theirs[case]["source"]])
    inputs = batch(CASES[case][0])
    real = inputs[0] != 0  # padding rows differ by design
    ours = model.predict(inputs, verbose=0)
    np.testing.assert_allclose(ours[real], np.asarray(theirs[case]["outputs"])[real],
                               atol=TOLERANCE, rtol=0)


def test_a_conditional_model_saves_and_loads_in_safe_mode(tmp_path):
    model = build("features+hidden")
    norm = model.get_layer("Transformer-1-FeedForward-Norm")
    assert isinstance(norm, ConditionalLayerNorm) and norm.hidden_units == 4
    rng = np.random.default_rng(1)
    for weight in norm.weights:  # the condition's dense layers steer, not zeros
        weight.assign(rng.normal(0, 0.2, weight.shape).astype("float32"))
    path = str(tmp_path / "conditional.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    inputs = batch("features+hidden")
    np.testing.assert_array_equal(loaded.predict(inputs, verbose=0),
                                  model.predict(inputs, verbose=0))
    # Another condition gives other outputs: the norms read it.
    other = [*inputs[:2], inputs[2] + 1]
    assert not np.allclose(model.predict(other, verbose=0), model.predict(inputs, verbose=0))


def test_the_audit_names_the_condition_rows_and_sums_to_count_params():
    model = build("features+hidden")
    rows = audit_model(model, BertConfig.from_dict(CONFIG), with_mlm=True)
    condition = [row for row in rows if row.group == "condition"]
    assert [row.layer for row in condition] == NORMS[:1] + NORMS[2:] + NORMS[1:2]
    # hidden_dense C·4, beta_dense and gamma_dense 4·H each.
    assert {row.expected for row in condition} == {CONDITION * 4 + 2 * 4 * 16}
    assert all(row.ok for row in rows if row.group != "unexpected")
    assert [row.layer for row in rows if row.group == "unexpected"] == ["Features-Dense"]
    assert sum(row.actual for row in rows) == model.count_params()


def test_what_is_not_built_is_refused_by_name():
    extra = keras.Input((FEATURES,), name="Input-Features")
    with pytest.raises(ValueError, match="layer_norm_cond_hidden_size given without "
                                         "layer_norm_cond"):
        build_transformer_model(CONFIG, layer_norm_cond_hidden_size=4)
    with pytest.raises(ValueError, match="model='roformer_v2' builds no conditional"):
        build_transformer_model(CONFIG, model="roformer_v2", layer_norm_cond=extra,
                                additional_input_layers=extra)
    with pytest.raises(ValueError, match=r"condition must be \(batch, features\).*\(None, 2, 5\)"):
        build_transformer_model(CONFIG, layer_norm_cond=keras.Input((2, FEATURES)))
    # Cached decoding runs the steps without the condition: the whole model decodes.
    with pytest.raises(ValueError, match="decoding of conditional layer norms"):
        Decoder(build("features+hidden"))
