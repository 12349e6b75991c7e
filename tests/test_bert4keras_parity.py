"""Layer names and per-layer parameter counts against bert4keras 0.11.5 itself."""

import json

import pytest

from conftest import TINY
from kerasbert import build_transformer_model
from peers import run_bert4keras

HEADS = [
    {},
    {"with_pool": True},
    {"with_pool": True, "with_nsp": True, "with_mlm": True},
    {"with_mlm": True, "dropout_rate": 0, "attention_dropout_rate": 0},
]


@pytest.fixture(scope="module")
def bert4keras_layers(tmp_path_factory):
    config = tmp_path_factory.mktemp("b4k") / "bert_config.json"
    config.write_text(json.dumps(TINY))
    return run_bert4keras(f"""
        import json
        from bert4keras.models import build_transformer_model
        out = []
        for heads in {HEADS!r}:
            model = build_transformer_model({str(config)!r}, **heads)
            out.append([[layer.name, int(layer.count_params())] for layer in model.layers])
        print(json.dumps(out))
    """)


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("index", range(len(HEADS)))
def test_names_and_counts_match_bert4keras(bert4keras_layers, tiny_config_path, index):
    model = build_transformer_model(str(tiny_config_path), **HEADS[index])
    ours = [[layer.name, layer.count_params()] for layer in model.layers]
    theirs = bert4keras_layers[index]
    # Layer order within a functional graph may differ where branches are independent
    # (the MLM and pooler heads); names and counts must not.
    assert sorted(map(tuple, ours)) == sorted(map(tuple, theirs))
    assert model.count_params() == sum(count for _, count in theirs)
