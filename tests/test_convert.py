"""Hugging Face directory → Google checkpoint (``kerasbert convert --from-hf``)."""

import json

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import save_file

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.checkpoints.convert import convert_hf_to_google, google_name
from kerasbert.cli import main as cli

H, FFN, V = TINY["hidden_size"], TINY["intermediate_size"], TINY["vocab_size"]


def hf_weights(rng, old_norm_names=False):
    """A tiny BertForPreTraining state dict plus a task head and a buffer."""
    gamma, beta = ("gamma", "beta") if old_norm_names else ("weight", "bias")

    def linear(name, n_out, n_in):
        return {f"{name}.weight": rng.normal(size=(n_out, n_in)),
                f"{name}.bias": rng.normal(size=n_out)}

    def norm(name):
        return {f"{name}.{gamma}": rng.normal(size=H), f"{name}.{beta}": rng.normal(size=H)}

    weights = {
        "bert.embeddings.word_embeddings.weight": rng.normal(size=(V, H)),
        "bert.embeddings.position_embeddings.weight": rng.normal(size=(32, H)),
        "bert.embeddings.token_type_embeddings.weight": rng.normal(size=(2, H)),
        **norm("bert.embeddings.LayerNorm"),
        **linear("bert.pooler.dense", H, H),
        **linear("cls.predictions.transform.dense", H, H),
        **norm("cls.predictions.transform.LayerNorm"),
        "cls.predictions.bias": rng.normal(size=V),
        "cls.predictions.decoder.bias": rng.normal(size=V),
        **linear("cls.seq_relationship", 2, H),
        **linear("classifier", 3, H),
    }
    for i in range(TINY["num_hidden_layers"]):
        layer = f"bert.encoder.layer.{i}"
        for part in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            weights.update(linear(f"{layer}.{part}", H, H))
        weights.update(linear(f"{layer}.intermediate.dense", FFN, H))
        weights.update(linear(f"{layer}.output.dense", H, FFN))
        weights.update(norm(f"{layer}.attention.output.LayerNorm"))
        weights.update(norm(f"{layer}.output.LayerNorm"))
    weights = {name: value.astype("float32") for name, value in weights.items()}
    weights["bert.embeddings.position_ids"] = np.arange(32, dtype="int64")[None]
    return weights


def hf_directory(path, weights, **config):
    path.mkdir()
    save_file(weights, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(
        {**TINY, "model_type": "bert", "architectures": ["BertForPreTraining"], **config}))
    (path / "vocab.txt").write_text("".join(f"token{i}\n" for i in range(V)))
    return path


def test_names_follow_google():
    assert google_name("encoder.layer.11.output.dense.weight") == (
        "bert/encoder/layer_11/output/dense/kernel", True)
    assert google_name("bert.encoder.layer.0.attention.output.LayerNorm.bias") == (
        "bert/encoder/layer_0/attention/output/LayerNorm/beta", False)
    assert google_name("embeddings.LayerNorm.gamma") == ("bert/embeddings/LayerNorm/gamma", False)
    assert google_name("cls.seq_relationship.weight") == (
        "cls/seq_relationship/output_weights", False)
    assert google_name("classifier.weight") is None


@pytest.mark.parametrize("old_norm_names", [False, True])
def test_convert_writes_checkpoint_config_and_vocab(tmp_path, old_norm_names, capsys):
    weights = hf_weights(np.random.default_rng(0), old_norm_names)
    source = hf_directory(tmp_path / "hf", weights)
    prefix = str(tmp_path / "google" / "bert_model.ckpt")
    assert cli.main(["convert", "--from-hf", str(source), "--to", prefix]) == 0
    out = capsys.readouterr().out
    assert "left out (no Google name): classifier.bias, classifier.weight" in out

    reader = tf.train.load_checkpoint(prefix)
    assert len(reader.get_variable_to_shape_map()) == 46
    gamma = "gamma" if old_norm_names else "weight"
    expected = {
        "bert/encoder/layer_1/attention/self/key/kernel":
            weights["bert.encoder.layer.1.attention.self.key.weight"].T,
        "bert/encoder/layer_0/intermediate/dense/kernel":
            weights["bert.encoder.layer.0.intermediate.dense.weight"].T,
        "bert/encoder/layer_0/output/LayerNorm/gamma":
            weights[f"bert.encoder.layer.0.output.LayerNorm.{gamma}"],
        "bert/embeddings/word_embeddings": weights["bert.embeddings.word_embeddings.weight"],
        "cls/seq_relationship/output_weights": weights["cls.seq_relationship.weight"],
        "cls/predictions/output_bias": weights["cls.predictions.bias"],
    }
    for name, value in expected.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)

    config = json.loads((tmp_path / "google" / "bert_config.json").read_text())
    assert config["hidden_size"] == H
    assert "architectures" not in config and "model_type" not in config
    assert (tmp_path / "google" / "vocab.txt").read_text() == (source / "vocab.txt").read_text()
    model = build_transformer_model(str(tmp_path / "google" / "bert_config.json"), prefix,
                                    with_pool=True, with_nsp=True, with_mlm=True)
    np.testing.assert_array_equal(model.get_layer("NSP-Proba").kernel.numpy(),
                                  weights["cls.seq_relationship.weight"].T)


def test_convert_refuses_what_it_cannot_convert(tmp_path):
    weights = hf_weights(np.random.default_rng(1))
    roberta = hf_directory(tmp_path / "roberta", weights, model_type="roberta")
    with pytest.raises(ValueError, match=r"model_type \('roberta'\) in .*roberta/config.json"):
        convert_hf_to_google(roberta, tmp_path / "out" / "bert_model.ckpt")

    del weights["bert.encoder.layer.1.output.dense.weight"]
    incomplete = hf_directory(tmp_path / "incomplete", weights)
    with pytest.raises(ValueError, match=r"incomplete/model.safetensors: lacks 1 weight.*layer_1"):
        convert_hf_to_google(incomplete, tmp_path / "out" / "bert_model.ckpt")

    (incomplete / "model.safetensors").unlink()
    (incomplete / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(FileNotFoundError,
                       match="weights in .*: no model.safetensors.*pytorch_model.bin"):
        convert_hf_to_google(incomplete, tmp_path / "out" / "bert_model.ckpt")
    assert not (tmp_path / "out").exists()
