"""ALBERT, NEZHA, RoFormer (v1, v2) and ELECTRA against bert4keras 0.11.5 itself.

For each family, bert4keras (in its own interpreter) builds the model from the same
config, draws random weights, writes them as a checkpoint in the family's original
variable names and runs a padded batch with segment ids. kerasbert must have the same
layer names with the same parameter counts, load that checkpoint strictly, give the same
outputs at every real token, and write the checkpoint back bit for bit.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.checkpoints.loading import save_weights_as_checkpoint
from peers import run_bert4keras

# family -> (config changes, heads). Heads give logits so that small differences show.
CASES = {
    "albert": ({"embedding_size": 8}, {"with_pool": True, "with_mlm": "linear"}),
    "albert_unshared": ({"embedding_size": 8}, {"with_pool": True, "with_mlm": "linear"}),
    "nezha": ({}, {"with_pool": True, "with_nsp": True, "with_mlm": "linear"}),
    "roformer": ({}, {"with_pool": True, "with_mlm": "linear"}),
    "roformer_v2": ({}, {"with_mlm": "linear"}),
    "electra": ({"embedding_size": 8}, {"with_discriminator": "linear"}),
}
# Token ids with padding (0) and two segments; the NEZHA and RoFormer batch is longer
# than max_position_embeddings (32): they have no position table to run out of.
TOKENS = [[2, 15, 27, 33, 3, 41, 52, 3, 0, 0], [2, 64, 3, 0, 0, 0, 0, 0, 0, 0]]
SEGMENTS = [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]
LONG = 48
TOLERANCE = 1e-5


def batch(family):
    tokens, segments = np.array(TOKENS, "int32"), np.array(SEGMENTS, "int32")
    if family in ("nezha", "roformer", "roformer_v2"):
        rng = np.random.default_rng(1)
        long_tokens = rng.integers(1, TINY["vocab_size"], (2, LONG)).astype("int32")
        long_tokens[1, 30:] = 0
        return [(tokens, segments), (long_tokens, np.zeros_like(long_tokens))]
    return [(tokens, segments)]


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's layers, checkpoint and outputs for every family, in one interpreter."""
    root = tmp_path_factory.mktemp("families")
    jobs = {}
    for family, (changes, heads) in CASES.items():
        directory = root / family
        directory.mkdir()
        (directory / "bert_config.json").write_text(json.dumps({**TINY, **changes}))
        batches = [[tokens.tolist(), segments.tolist()] for tokens, segments in batch(family)]
        # The unshared ALBERT loads ALBERT's shared checkpoint: bert4keras writes it as ALBERT.
        jobs[family] = {"dir": str(directory), "heads": heads, "batches": batches,
                        "writer": "albert" if family == "albert_unshared" else family}
    out = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 saves with TF 1's Session and Saver, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K
        from bert4keras.models import build_transformer_model
        jobs = json.loads({json.dumps(json.dumps(jobs))})
        out = {{}}
        for family, job in jobs.items():
            config = job["dir"] + "/bert_config.json"
            shown = build_transformer_model(config, model=family, **job["heads"])
            layers = [[layer.name, int(layer.count_params())] for layer in shown.layers]
            bert = build_transformer_model(config, model=job["writer"], return_keras_model=False,
                                           **job["heads"])
            rng = np.random.default_rng(0)
            # Wide enough that the layer norms' epsilon (bert4keras: 1e-7 in some
            # families, Google's 1e-12 in others) is lost in float32 rounding.
            K.batch_set_value([(weight, rng.normal(0, 0.2, K.int_shape(weight)).astype("float32"))
                               for weight in bert.model.trainable_weights])
            bert.save_weights_as_checkpoint(job["dir"] + "/bert_model.ckpt")
            outputs = []
            for tokens, segments in job["batches"]:
                result = bert.model.predict([np.array(tokens), np.array(segments)], verbose=0)
                result = result if isinstance(result, list) else [result]
                outputs.append([r.tolist() for r in result])
            out[family] = {{"layers": layers, "outputs": outputs}}
        print(json.dumps(out))
    """)
    return {family: {**out[family], "dir": job["dir"]} for family, job in jobs.items()}


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("family", list(CASES))
def test_names_and_counts_match_bert4keras(theirs, family):
    changes, heads = CASES[family]
    model = build_transformer_model({**TINY, **changes}, model=family, **heads)
    ours = [[layer.name, layer.count_params()] for layer in model.layers]
    assert sorted(map(tuple, ours)) == sorted(map(tuple, theirs[family]["layers"]))


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("family", list(CASES))
def test_outputs_match_bert4keras_on_its_checkpoint_and_save_back_exactly(
        theirs, tmp_path, family):
    _, heads = CASES[family]
    directory = theirs[family]["dir"]
    prefix = f"{directory}/bert_model.ckpt"
    bert = build_transformer_model(f"{directory}/bert_config.json", prefix, model=family,
                                   return_keras_model=False, **heads)
    assert bert.load_report.ok and not bert.load_report.unused
    for (tokens, segments), expected in zip(batch(family), theirs[family]["outputs"]):
        result = bert.model.predict([tokens, segments], verbose=0)
        result = result if isinstance(result, list) else [result]
        real = tokens != 0
        for ours, their in zip(result, expected):
            ours, their = np.asarray(ours), np.asarray(their)
            if ours.ndim == 3:  # per token: real tokens only (padding rows differ by design)
                ours, their = ours[real], their[real]
            np.testing.assert_allclose(ours, their, atol=TOLERANCE, rtol=0)

    saved = str(tmp_path / "again" / "bert_model.ckpt")
    bert.save_weights_as_checkpoint(saved)
    original, written = tf.train.load_checkpoint(prefix), tf.train.load_checkpoint(saved)
    names = written.get_variable_to_shape_map()
    assert set(names) == set(original.get_variable_to_shape_map())
    for name in names:
        np.testing.assert_array_equal(written.get_tensor(name), original.get_tensor(name),
                                      err_msg=name)


def test_a_family_reads_a_hugging_face_model_type_and_refuses_a_mismatch():
    albert = build_transformer_model({**TINY, "embedding_size": 8, "model_type": "albert"})
    assert albert.get_layer("Transformer-MultiHeadSelfAttention").count_params() > 0
    with pytest.raises(ValueError, match="^model_type \\('albert'\\) in <dict>: not supported"):
        build_transformer_model({**TINY, "model_type": "albert"}, model="bert")
    with pytest.raises(ValueError, match="model='electra' has no with_pool head"):
        build_transformer_model(TINY, model="electra", with_pool=True)


def test_an_unshared_albert_that_was_fine_tuned_apart_is_not_saved_as_albert(tmp_path):
    config = {**TINY, "embedding_size": 8}
    shared = str(tmp_path / "shared" / "bert_model.ckpt")
    save_weights_as_checkpoint(build_transformer_model(config, model="albert"), shared)
    model = build_transformer_model(config, shared, model="albert_unshared")
    unchanged = str(tmp_path / "unchanged" / "bert_model.ckpt")
    assert save_weights_as_checkpoint(model, unchanged, family="albert_unshared") == \
        sorted(tf.train.load_checkpoint(shared).get_variable_to_shape_map())
    layer = model.get_layer("Transformer-1-FeedForward")
    layer.output_bias.assign(layer.output_bias + 1.0)
    with pytest.raises(ValueError, match="Transformer-1-FeedForward.output_bias and "
                                         "Transformer-0-FeedForward.output_bias differ"):
        save_weights_as_checkpoint(model, str(tmp_path / "apart" / "bert_model.ckpt"),
                                   family="albert_unshared")
    assert not (tmp_path / "apart").exists()
