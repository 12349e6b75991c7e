"""Hugging Face directory → Google checkpoint (``kerasbert convert --from-hf``)."""

import json

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import save_file

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.cli import main as cli
from kerasbert.models.convert import convert_hf_to_google, google_name, pytorch_name
from peers import have_transformers4, run_transformers4

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


# ------------------------------------------- tf_model.h5 of transformers' TensorFlow classes
# Each family's PyTorch pretraining class and its TensorFlow twin in transformers 4.57 (the
# last release with TensorFlow classes), and its config beyond the shared small sizes.
TF_TWINS = {
    "bert": ("BertConfig", "BertForPreTraining", "TFBertForPreTraining", {}),
    "albert": ("AlbertConfig", "AlbertForPreTraining", "TFAlbertForPreTraining",
               {"embedding_size": 8}),
    "electra": ("ElectraConfig", "ElectraForPreTraining", "TFElectraForPreTraining",
                {"embedding_size": 8}),
    "roformer": ("RoFormerConfig", "RoFormerForMaskedLM", "TFRoFormerForMaskedLM", {}),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", "TFGPT2LMHeadModel",
             {"n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 32}),
}
TF_TWIN_SCRIPT = """
import json, sys
import torch, transformers
twins, out = json.loads(sys.argv[1]), sys.argv[2]
small = dict(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=32)
for family, (config_class, pt_class, tf_class, extra) in twins.items():
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**{**small, **extra})
    model = getattr(transformers, pt_class)(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_()
    model.save_pretrained(f"{out}/{family}/pt", safe_serialization=True)
    getattr(transformers, tf_class).from_pretrained(
        f"{out}/{family}/pt", from_pt=True).save_pretrained(f"{out}/{family}/tf")
print(json.dumps({"version": transformers.__version__}))
"""


def test_pytorch_names_of_tensorflow_weights():
    assert pytorch_name("tf_bert_model/bert/encoder/layer_._11/output/dense/kernel:0") == (
        "bert.encoder.layer.11.output.dense.weight", True)
    assert pytorch_name("tf_bert_for_pre_training/nsp___cls/seq_relationship/bias:0") == (
        "cls.seq_relationship.bias", False)
    assert pytorch_name("tf_albert_model/albert/encoder/albert_layer_groups_._0/"
                        "albert_layers_._0/full_layer_layer_norm/gamma:0") == (
        "albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.weight", False)
    assert pytorch_name("tfgp_t2lm_head_model/transformer/h_._1/attn/c_attn/weight:0") == (
        "transformer.h.1.attn.c_attn.weight", False)


@pytest.fixture(scope="module")
def tf_twins(tmp_path_factory):
    """Per family, the same random weights saved by transformers' PyTorch class
    (``pt/model.safetensors``) and by its TensorFlow class (``tf/tf_model.h5``)."""
    if not have_transformers4():
        pytest.skip("the transformers 4.57 oracle is not installed in .oracles/transformers4")
    out = tmp_path_factory.mktemp("tf_twins")
    found = run_transformers4(TF_TWIN_SCRIPT, args=[json.dumps(TF_TWINS), str(out)],
                              TF_USE_LEGACY_KERAS="1", OMP_NUM_THREADS="1")
    assert found["version"].startswith("4.57.")
    return out


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("family", list(TF_TWINS))
def test_tf_model_h5_converts_as_its_safetensors_twin(tf_twins, family, tmp_path):
    """A hub repository with only transformers' ``tf_model.h5`` converts to the same
    checkpoint, bit for bit, as the same weights in ``model.safetensors``."""
    assert not (tf_twins / family / "tf" / "model.safetensors").exists()
    readers = {}
    for kind in ("pt", "tf"):
        prefix = str(tmp_path / kind / "bert_model.ckpt")
        done = convert_hf_to_google(tf_twins / family / kind, prefix)
        assert done.skipped == [], done.skipped
        readers[kind] = tf.train.load_checkpoint(prefix)
    shapes = {kind: reader.get_variable_to_shape_map() for kind, reader in readers.items()}
    assert shapes["tf"] == shapes["pt"]
    for name in shapes["pt"]:
        np.testing.assert_array_equal(readers["tf"].get_tensor(name),
                                      readers["pt"].get_tensor(name), err_msg=name)


def test_a_broken_tf_model_h5_is_named(tmp_path):
    source = hf_directory(tmp_path / "hf", hf_weights(np.random.default_rng(2)))
    (source / "model.safetensors").unlink()
    (source / "tf_model.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    with pytest.raises(ValueError, match=r"weights in .*tf_model.h5: truncated or not a Keras h5"):
        convert_hf_to_google(source, tmp_path / "out" / "bert_model.ckpt")
    assert not (tmp_path / "out").exists()
    (source / "tf_model.h5").unlink()
    (source / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"no model.safetensors or tf_model.h5 \(found "
                                                r"pytorch_model.bin"):
        convert_hf_to_google(source, tmp_path / "out" / "bert_model.ckpt")
