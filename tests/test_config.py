import json

import pytest

from kerasbert import BertConfig
from reference import CHINESE_BASE


def write(tmp_path, text, name="bert_config.json"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_google_config_keeps_key_names_and_unknown_keys(tmp_path):
    config = BertConfig.from_json_file(CHINESE_BASE)
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (21128, 768, 12)
    assert config.extra["pooler_fc_size"] == 768
    assert config.extra["directionality"] == "bidi"
    path = tmp_path / "out.json"
    config.to_json_file(path)
    written = json.loads(path.read_text())
    original = json.loads(open(CHINESE_BASE).read())
    assert {k: written[k] for k in original} == original
    assert BertConfig.from_json_file(path) == config


def test_hugging_face_config_is_accepted(tmp_path):
    hf = {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": 30522,
        "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
        "intermediate_size": 1536, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
        "max_position_embeddings": 512, "type_vocab_size": 2, "pad_token_id": 0,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02, "position_embedding_type": "absolute",
    }
    config = BertConfig.from_json_file(write(tmp_path, json.dumps(hf), "config.json"))
    assert config.head_size == 32
    assert config.extra["model_type"] == "bert"


def test_bert4keras_keyword_overrides(tmp_path):
    config = BertConfig.from_json_file(CHINESE_BASE, num_hidden_layers=2, dropout_rate=0,
                                       attention_dropout_rate=0.0, max_position=128,
                                       segment_vocab_size=0)
    assert config.num_hidden_layers == 2
    assert config.hidden_dropout_prob == 0 and config.attention_probs_dropout_prob == 0
    assert config.max_position_embeddings == 128 and config.type_vocab_size == 0


@pytest.mark.parametrize("change, words", [
    ({"hidden_size": 770}, ["hidden_size (770)", "num_attention_heads (12)", "divisible"]),
    ({"num_hidden_layers": 0}, ["num_hidden_layers (0)", "positive"]),
    ({"vocab_size": -5}, ["vocab_size (-5)", "positive"]),
    ({"hidden_size": "768"}, ["hidden_size ('768')", "integer", "str"]),
    ({"intermediate_size": 3072.0}, ["intermediate_size (3072.0)", "integer"]),
    ({"hidden_act": "swishy"}, ["hidden_act ('swishy')", "Unknown"]),
    ({"hidden_dropout_prob": 1.5}, ["hidden_dropout_prob (1.5)", "[0, 1)"]),
    ({"num_attention_heads": True}, ["num_attention_heads (True)", "integer"]),
])
def test_invalid_values_name_key_value_rule_and_file(tmp_path, change, words):
    values = {**json.loads(open(CHINESE_BASE).read()), **change}
    path = write(tmp_path, json.dumps(values))
    with pytest.raises(ValueError) as error:
        BertConfig.from_json_file(path)
    message = str(error.value)
    for word in words + [str(path)]:
        assert word in message


def test_missing_required_key_is_named(tmp_path):
    values = json.loads(open(CHINESE_BASE).read())
    del values["intermediate_size"]
    path = write(tmp_path, json.dumps(values))
    with pytest.raises(ValueError, match=r"missing key\(s\) in .*bert_config.json: "
                                         r"intermediate_size is required"):
        BertConfig.from_json_file(path)


def test_invalid_json_reports_line_and_column(tmp_path):
    path = write(tmp_path, '{\n  "vocab_size": 21128,\n  "hidden_size": 768\n  "x": 1\n}')
    with pytest.raises(ValueError, match=r"config in .*bert_config.json: invalid JSON at "
                                         r"line 4, column 3"):
        BertConfig.from_json_file(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BertConfig.from_json_file(tmp_path / "nope.json")


def test_not_an_object(tmp_path):
    with pytest.raises(ValueError, match="must be a JSON object, received list"):
        BertConfig.from_json_file(write(tmp_path, "[1, 2]"))
