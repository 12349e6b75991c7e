"""ALBERT, ELECTRA and RoFormer from Hugging Face: ``kerasbert convert --from-hf``, then the
converted model against Hugging Face transformers (CPU torch) on the same inputs.

Each case is a tiny random model of the family's pretraining class, saved by transformers
itself; kerasbert converts it to the family's Google variable names, builds the model from
the written config alone (its ``model_type`` picks the family), loads it strictly and must
give Hugging Face's outputs at every real token; saving the model back writes the converted
checkpoint bit for bit.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.cli import main as cli
from kerasbert.models.convert import convert_hf_to_google, google_name

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-5
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
# family -> (transformers classes, config changes, kerasbert heads). Heads give logits.
CASES = {
    "albert": ("AlbertConfig", "AlbertForPreTraining", {"embedding_size": 8},
               {"with_pool": True, "with_nsp": True, "with_mlm": "linear"}),
    "electra": ("ElectraConfig", "ElectraForPreTraining", {"embedding_size": 8},
                {"with_discriminator": "linear"}),
    "roformer": ("RoFormerConfig", "RoFormerForMaskedLM", {"embedding_size": 8},
                 {"with_mlm": "linear"}),
}
TOKENS = np.array([[2, 15, 27, 33, 3, 41, 52, 3, 0, 0], [2, 64, 3, 0, 0, 0, 0, 0, 0, 0]], "int32")
SEGMENTS = np.array([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0] * 10], "int32")


def hf_model(family, directory):
    """A seeded random Hugging Face model of ``family``, saved in ``directory``."""
    config_class, model_class, changes, _ = CASES[family]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**{**TINY, **NO_DROPOUT, **changes})
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            # RoFormer's sinusoid table is a fixed buffer-like parameter: keep it.
            if "embed_positions" not in name:
                parameter.normal_(0, 0.2)
    model.save_pretrained(directory)
    return model


def hf_outputs(family, model):
    """Hugging Face's head outputs, in the order kerasbert's model gives its heads."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor(TOKENS, dtype=torch.long),
                    token_type_ids=torch.tensor(SEGMENTS, dtype=torch.long),
                    attention_mask=torch.tensor(TOKENS != 0, dtype=torch.long))
    if family == "albert":  # sentence order (NSP-Proba's softmax), then MLM logits
        return [torch.softmax(out.sop_logits, -1).numpy(), out.prediction_logits.numpy()]
    if family == "electra":
        return [out.logits.numpy()[..., None]]
    return [out.logits.numpy()]


@pytest.mark.peer
@pytest.mark.parametrize("family", list(CASES))
def test_a_converted_hugging_face_model_gives_its_outputs_and_saves_back_exactly(
        tmp_path, family):
    model = hf_model(family, tmp_path / "hf")
    done = convert_hf_to_google(tmp_path / "hf", tmp_path / "google" / "bert_model.ckpt")
    assert done.skipped == []
    config = json.loads((tmp_path / "google" / "bert_config.json").read_text())
    assert config["model_type"] == family and config["embedding_size"] == 8

    bert = build_transformer_model(done.config_path, done.prefix, return_keras_model=False,
                                   **CASES[family][3])
    assert bert.family == family
    assert bert.load_report.ok and not bert.load_report.unused
    ours = bert.model.predict([TOKENS, SEGMENTS], verbose=0)
    ours = ours if isinstance(ours, list) else [ours]
    real = TOKENS != 0
    for mine, theirs in zip(ours, hf_outputs(family, model), strict=True):
        if mine.ndim == 3:  # per token: real tokens only (padding rows differ by design)
            mine, theirs = mine[real], theirs[real]
        np.testing.assert_allclose(mine, theirs, atol=TOLERANCE, rtol=0)

    again = str(tmp_path / "again" / "bert_model.ckpt")
    bert.save_weights_as_checkpoint(again)
    converted, written = tf.train.load_checkpoint(done.prefix), tf.train.load_checkpoint(again)
    stored = converted.get_variable_to_shape_map()
    assert set(written.get_variable_to_shape_map()) == set(stored)
    for name in stored:
        np.testing.assert_array_equal(written.get_tensor(name), converted.get_tensor(name),
                                      err_msg=name)


def test_each_family_names_its_original_variables():
    shared = "bert/encoder/transformer/group_0/inner_group_0"
    assert google_name("albert.encoder.albert_layer_groups.0.albert_layers.0."
                       "full_layer_layer_norm.weight", "albert") == (f"{shared}/LayerNorm_1/gamma",
                                                                    False)
    assert google_name("albert.encoder.albert_layer_groups.0.albert_layers.0.attention.dense."
                       "weight", "albert") == (f"{shared}/attention_1/output/dense/kernel", True)
    assert google_name("sop_classifier.classifier.weight", "albert") == (
        "cls/seq_relationship/output_weights", False)
    assert google_name("electra.embeddings_project.weight", "electra") == (
        "electra/embeddings_project/kernel", True)
    assert google_name("discriminator_predictions.dense_prediction.bias", "electra") == (
        "discriminator_predictions/dense_1/bias", False)
    assert google_name("electra.encoder.layer.1.output.LayerNorm.bias", "electra") == (
        "electra/encoder/layer_1/output/LayerNorm/beta", False)
    assert google_name("roformer.encoder.layer.0.attention.self.key.weight", "roformer") == (
        "bert/encoder/layer_0/attention/self/key/kernel", True)
    assert google_name("roformer.encoder.embed_positions.weight", "roformer") is None


@pytest.mark.peer
def test_the_command_line_converts_an_albert_and_audits_it_from_the_written_config(
        tmp_path, capsys):
    hf_model("albert", tmp_path / "hf")
    prefix = str(tmp_path / "google" / "bert_model.ckpt")
    assert cli.main(["convert", "--from-hf", str(tmp_path / "hf"), "--to", prefix]) == 0
    capsys.readouterr()
    config = str(tmp_path / "google" / "bert_config.json")
    assert cli.main(["audit", config, "--with-mlm", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"]
    rows = {row["layer"]: row for row in report["rows"]}
    assert rows["Embedding-Token"]["formula"] == "V·E"
    assert rows["Embedding-Token"]["actual"] == TINY["vocab_size"] * 8
    assert "Transformer-MultiHeadSelfAttention" in rows  # one shared block, counted once
    assert "Transformer-0-MultiHeadSelfAttention" not in rows


@pytest.mark.peer
def test_convert_refuses_a_roformer_that_rotates_values_and_a_family_it_cannot_read(tmp_path):
    hf_model("roformer", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    (tmp_path / "hf" / "config.json").write_text(json.dumps({**config, "rotary_value": True}))
    with pytest.raises(ValueError, match=r"rotary_value \(True\) in .*hf/config.json: not "
                                         "supported"):
        convert_hf_to_google(tmp_path / "hf", tmp_path / "out" / "bert_model.ckpt")
    (tmp_path / "hf" / "config.json").write_text(json.dumps({**config, "model_type": "nezha",
                                                            "embedding_size": TINY["hidden_size"]}))
    with pytest.raises(ValueError, match=r"model_type \('nezha'\) in .*: kerasbert convert "
                                         "reads bert, albert, roformer, electra, gpt2, "
                                         "openai-gpt, t5, mt5 models"):
        convert_hf_to_google(tmp_path / "hf", tmp_path / "out" / "bert_model.ckpt")
    assert not (tmp_path / "out").exists()
