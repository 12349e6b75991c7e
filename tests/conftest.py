import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The one tiny config every fast test uses.
TINY = {
    "vocab_size": 100,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 32,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}


@pytest.fixture(autouse=True)
def _run_from_root(monkeypatch):
    # Paths such as checkpoints/... in tests and docs are relative to the repository root.
    monkeypatch.chdir(ROOT)


@pytest.fixture
def tiny_config():
    from kerasbert import BertConfig

    return BertConfig.from_dict(dict(TINY))


@pytest.fixture
def tiny_config_path(tmp_path):
    import json

    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(TINY))
    return path
