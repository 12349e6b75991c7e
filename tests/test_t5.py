"""T5 (t5.1.0), t5.1.1 and mT5 against bert4keras 0.11.5 and Hugging Face transformers.

bert4keras (in its own interpreter) builds each version from one config, draws random
weights, writes them in Mesh TensorFlow's names and runs a padded batch through the
encoder-decoder. kerasbert must have its layer names and counts, load that checkpoint
strictly, give its outputs at every real decoder token, its encoder and decoder models,
and write the checkpoint back bit for bit. Random Hugging Face T5 / mT5 models converted by
``kerasbert convert --from-hf`` must give transformers' logits.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from kerasbert import BertConfig, build_transformer_model, generate
from kerasbert.models.audit import audit_model, expected_rows
from peers import run_bert4keras

CONFIG = {"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "attention_head_size": 6, "intermediate_size": 24,
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
# version -> hidden_act (t5.1.0: relu; t5.1.1 and mT5 gated).
VERSIONS = {"t5": "relu", "t5.1.1": ["gelu", "linear"], "mt5.1.1": ["gelu", "linear"]}
# Source ids with padding; decoder ids start at 0 (T5's start id, never masked) and are
# padded after.
SOURCE = [[5, 17, 23, 9, 41, 3, 0, 0], [7, 8, 3, 0, 0, 0, 0, 0]]
TARGET = [[0, 12, 33, 4, 0], [0, 61, 0, 0, 0]]
TOLERANCE = 1e-5
# The sources as prompts (generate pads them itself).
PROMPTS = [[t for t in row if t] for row in SOURCE]


def config_of(version):
    return {**CONFIG, "hidden_act": VERSIONS[version]}


def real(ids):
    ids = np.asarray(ids)
    mask = ids != 0
    mask[:, 0] = True
    return mask


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's layers, checkpoints and outputs for each version, in one interpreter."""
    root = tmp_path_factory.mktemp("t5")
    jobs = {}
    for version in VERSIONS:
        directory = root / version
        directory.mkdir()
        (directory / "config.json").write_text(json.dumps(config_of(version)))
        jobs[version] = str(directory)
    out = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K
        from bert4keras.models import build_transformer_model
        from bert4keras.snippets import AutoRegressiveDecoder
        jobs = json.loads({json.dumps(json.dumps(jobs))})
        source, target = np.array({SOURCE}), np.array({TARGET})
        out = {{}}
        for version, directory in jobs.items():
            K.clear_session()  # a new graph per model: one graph of them all slows each step
            t5 = build_transformer_model(directory + "/config.json", model=version,
                                         return_keras_model=False, with_lm="linear")
            rng = np.random.default_rng(0)
            K.batch_set_value([(w, rng.normal(0, 0.2, K.int_shape(w)).astype("float32"))
                               for w in t5.model.trainable_weights])
            t5.save_weights_as_checkpoint(directory + "/model.ckpt")
            context = t5.encoder.predict(source, verbose=0)

            class Decoder(AutoRegressiveDecoder):
                @AutoRegressiveDecoder.wraps(default_rtype="logits")
                def predict(self, inputs, output_ids, states):
                    return self.last_token(t5.decoder).predict([inputs[0], output_ids])

            decoder = Decoder(start_id=0, end_id=1, maxlen=8)
            searched = {{str(beams): [decoder.beam_search(
                [t5.encoder.predict(np.array([row[row != 0]]), verbose=0)[0]],
                topk=beams).tolist() for row in source] for beams in (1, 3)}}
            out[version] = {{
                "searched": searched,
                "layers": sorted([layer.name, int(layer.count_params())]
                                 for layer in t5.model.layers),
                "logits": t5.model.predict([source, target], verbose=0).tolist(),
                "context": context.tolist(),
                "decoded": t5.decoder.predict([context[:1, :6], target[:1]],
                                              verbose=0).tolist()}}
        print(json.dumps(out))
    """)
    return {version: {**out[version], "dir": directory} for version, directory in jobs.items()}


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("version", list(VERSIONS))
def test_t5_equals_bert4keras_on_its_checkpoint_and_saves_it_back_exactly(
        theirs, tmp_path, version):
    directory = theirs[version]["dir"]
    t5 = build_transformer_model(f"{directory}/config.json", f"{directory}/model.ckpt",
                                 model=version, return_keras_model=False, with_lm="linear")
    assert t5.load_report.ok and not t5.load_report.unused
    assert sorted([layer.name, layer.count_params()] for layer in t5.model.layers) == \
        theirs[version]["layers"]
    source, target = np.array(SOURCE), np.array(TARGET)
    logits = t5.model.predict([source, target], verbose=0)
    np.testing.assert_allclose(logits[real(target)],
                               np.array(theirs[version]["logits"])[real(target)],
                               atol=TOLERANCE, rtol=0)
    context = t5.encoder.predict(source, verbose=0)
    np.testing.assert_allclose(context[source != 0],
                               np.array(theirs[version]["context"])[source != 0],
                               atol=TOLERANCE, rtol=0)
    decoded = t5.decoder.predict([context[:1, :6], target[:1]], verbose=0)
    np.testing.assert_allclose(decoded[real(target[:1])],
                               np.array(theirs[version]["decoded"])[real(target[:1])],
                               atol=TOLERANCE, rtol=0)

    saved = str(tmp_path / "again" / "model.ckpt")
    t5.save_weights_as_checkpoint(saved)
    original = tf.train.load_checkpoint(f"{directory}/model.ckpt")
    written = tf.train.load_checkpoint(saved)
    assert set(written.get_variable_to_shape_map()) == \
        set(original.get_variable_to_shape_map())
    for name in written.get_variable_to_shape_map():
        np.testing.assert_array_equal(written.get_tensor(name), original.get_tensor(name),
                                      err_msg=name)


@pytest.mark.slow
@pytest.mark.peer
def test_keep_tokens_takes_rows_of_the_shared_embedding_and_the_output_matrix(theirs):
    # bert4keras's mT5 scripts keep the Chinese tenth of mT5's 250,112 pieces this way.
    directory = theirs["mt5.1.1"]["dir"]
    keep = [0, 1, 2, 9, 41, 77]
    t5 = build_transformer_model(f"{directory}/config.json", f"{directory}/model.ckpt",
                                 model="mt5.1.1", keep_tokens=keep)
    reader = tf.train.load_checkpoint(f"{directory}/model.ckpt")
    np.testing.assert_array_equal(t5.get_layer("Embedding-Token").embeddings.numpy(),
                                  reader.get_tensor("shared/embedding")[keep])
    np.testing.assert_array_equal(t5.get_layer("Decoder-Output-LM").kernel.numpy(),
                                  reader.get_tensor("decoder/logits/kernel")[:, keep].T)
    assert t5.output.shape[-1] == len(keep)


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("version", list(VERSIONS))
def test_greedy_and_beam_search_equal_bert4keras_autoregressive_decoder(theirs, version):
    directory = theirs[version]["dir"]
    t5 = build_transformer_model(f"{directory}/config.json", f"{directory}/model.ckpt",
                                 model=version, with_lm="linear")
    for beams in (1, 3):
        # bert4keras's outputs start with the start id (0).
        expected = [row[1:] for row in theirs[version]["searched"][str(beams)]]
        assert generate(t5, PROMPTS, max_new_tokens=8, end_id=1, num_beams=beams) == expected


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("version", list(VERSIONS))
def test_the_audit_formulas_count_t5_as_bert4keras(theirs, version):
    config = BertConfig.from_dict(config_of(version), family=version)
    rows = expected_rows(config)
    counted = {name: count for name, count in theirs[version]["layers"] if count}
    assert {row.layer: row.expected for row in rows} == counted
    model = build_transformer_model(config, model=version)
    assert all(row.ok for row in audit_model(model, config, family=version))


@pytest.mark.peer
@pytest.mark.parametrize("version", ["t5", "t5.1.1", "mt5.1.1"])
def test_a_t5_converted_from_hugging_face_gives_transformers_logits(tmp_path, version):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from kerasbert.cli.main import main

    torch.manual_seed(0)
    sizes = dict(vocab_size=120, d_model=16, d_kv=6, d_ff=24, num_layers=2, num_heads=2,
                 decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    if version == "t5":
        theirs = transformers.T5ForConditionalGeneration(transformers.T5Config(**sizes))
    else:
        kind = "MT5" if version == "mt5.1.1" else "T5"
        theirs = getattr(transformers, f"{kind}ForConditionalGeneration")(
            getattr(transformers, f"{kind}Config")(**sizes, feed_forward_proj="gated-gelu",
                                                   tie_word_embeddings=False))
    theirs.eval()
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.normal_(0, 0.3)
    theirs.save_pretrained(tmp_path / "hf")
    assert main(["convert", "--from-hf", str(tmp_path / "hf"), "--to",
                 str(tmp_path / "google" / "model.ckpt")]) == 0
    config = json.loads((tmp_path / "google" / "bert_config.json").read_text())
    assert config["model_type"] == version and config["cross_position_bias"] is False
    ours = build_transformer_model(str(tmp_path / "google" / "bert_config.json"),
                                   str(tmp_path / "google" / "model.ckpt"), with_lm="linear")
    source, target = np.array(SOURCE), np.array(TARGET)
    with torch.no_grad():
        logits = theirs(input_ids=torch.tensor(source),
                        attention_mask=torch.tensor(source != 0).long(),
                        decoder_input_ids=torch.tensor(target)).logits.numpy()
    np.testing.assert_allclose(ours.predict([source, target], verbose=0)[real(target)],
                               logits[real(target)], atol=TOLERANCE, rtol=0)
    # transformers' greedy generate on the padded batch (it pads ended rows with 0).
    with torch.no_grad():
        expected = theirs.generate(input_ids=torch.tensor(source),
                                   attention_mask=torch.tensor(source != 0).long(),
                                   max_new_tokens=8, do_sample=False, num_beams=1)[:, 1:]
    expected = [row[:row.index(1) + 1] if 1 in row else row for row in expected.tolist()]
    assert generate(ours, PROMPTS, max_new_tokens=8, end_id=1) == expected


@pytest.mark.slow
def test_t5_decodes_through_its_caches_as_without_them():
    # t5.1.0 decodes as bert4keras's AutoRegressiveDecoder above (greedy, beams).
    t5 = build_transformer_model({**config_of("t5.1.1"), "vocab_size": 60}, model="t5.1.1")
    rng = np.random.default_rng(0)
    for weight in t5.weights:  # wide weights: the choices are far apart
        weight.assign(rng.normal(0, 0.5, weight.shape).astype("float32"))
    sources = [[5, 6, 7, 9, 11], [8, 3], [21, 22, 23, 24, 25, 26, 27, 28, 29]]
    for settings in ({"end_id": [3, 4]}, {"sample": True, "top_k": 5, "seed": 3},
                     {"num_beams": 3, "end_id": 3}):
        cached = generate(t5, sources, max_new_tokens=6, **settings)
        assert cached == generate(t5, sources, max_new_tokens=6, use_cache=False, **settings)
    # A source decodes as it does alone (the batch pads it on the right).
    assert cached[1] == generate(t5, sources[1:2], max_new_tokens=6, num_beams=3, end_id=3)[0]


def test_a_classifier_or_fine_tuning_run_on_t5_is_refused_by_name(tmp_path, capsys):
    from kerasbert.cli.main import main

    config = tmp_path / "config.json"
    config.write_text(json.dumps({**config_of("t5.1.1"), "model_type": "t5.1.1",
                                  "vocab_size": 21128}))
    vocab = "checkpoints/chinese_L-12_H-768_A-12/vocab.txt"
    assert main(["train", "--config", str(config), "--vocab", vocab, "--output",
                 str(tmp_path / "run"), "--epochs", "1"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("kerasbert train: ") and \
        "is an encoder-decoder (T5)" in error[0]
    assert not (tmp_path / "run").exists()
