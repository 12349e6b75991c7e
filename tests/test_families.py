"""ALBERT, NEZHA, RoFormer (v1, v2), ELECTRA, GPT, GPT-2, GPT2-ML and the language-model
applications (``application="lm"`` / ``"unilm"``) against bert4keras 0.11.5 itself.

For each family, bert4keras (in its own interpreter) builds the model from the same
config, draws random weights, writes them as a checkpoint in the family's original
variable names and runs a padded batch with segment ids. kerasbert must have the same
layer names with the same parameter counts, load that checkpoint strictly, give the same
outputs at every real token, and write the checkpoint back bit for bit.
"""

import json
import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf

import reference as ref
from conftest import TINY
from kerasbert import BertConfig, build_transformer_model
from kerasbert.models.audit import audit_model, expected_rows
from kerasbert.models.loading import save_weights_as_checkpoint
from peers import run_bert4keras

ROOT = pathlib.Path(__file__).resolve().parent.parent

# family -> (config changes, heads). Heads give logits so that small differences show.
CASES = {
    "albert": ({"embedding_size": 8}, {"with_pool": True, "with_mlm": "linear"}),
    "albert_unshared": ({"embedding_size": 8}, {"with_pool": True, "with_mlm": "linear"}),
    "nezha": ({}, {"with_pool": True, "with_nsp": True, "with_mlm": "linear"}),
    "roformer": ({}, {"with_pool": True, "with_mlm": "linear"}),
    "roformer_v2": ({}, {"with_mlm": "linear"}),
    "electra": ({"embedding_size": 8}, {"with_discriminator": "linear"}),
    "gpt": ({}, {"final_activation": "linear"}),
    "gpt2": ({}, {"final_activation": "linear"}),
    "gpt2_ml": ({}, {"final_activation": "linear"}),
    # A case "<family>+<application>": bert4keras's UniLM and LM, MLM head included.
    "bert+unilm": ({}, {"application": "unilm", "with_mlm": "linear"}),
    "bert+lm": ({}, {"application": "lm", "with_mlm": "linear"}),
    "roformer+unilm": ({}, {"application": "unilm", "with_mlm": "linear"}),
}
# The audit's heads: the with_* keywords of a case, as booleans.
HEAD_FLAGS = ("with_pool", "with_nsp", "with_mlm", "with_discriminator")


def model_of(case):
    """The ``model=`` of a case (``"bert+unilm"`` -> ``"bert"``)."""
    return case.partition("+")[0]


def takes_segments(case):
    """Whether the case's models take segment ids (GPT-2 and GPT2-ML: token ids alone)."""
    return model_of(case) not in ("gpt2", "gpt2_ml")


def model_inputs(case, tokens, segments):
    return [tokens, segments] if takes_segments(case) else tokens


def audit_heads(heads):
    return {key: bool(value) for key, value in heads.items() if key in HEAD_FLAGS}
# Token ids with padding (0) and two segments; the NEZHA and RoFormer batch of 1,024
# tokens is far longer than max_position_embeddings (32): they have no position table
# to run out of.
TOKENS = [[2, 15, 27, 33, 3, 41, 52, 3, 0, 0], [2, 64, 3, 0, 0, 0, 0, 0, 0, 0]]
SEGMENTS = [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]
LONG = 1024  # twice BERT's 512 positions
#: Of a long batch's per-token outputs, every STRIDE-th position is recorded and compared
#: (positions 0 to 1,008, past 512 among them): the recording stays small enough to keep.
STRIDE = 16
TOLERANCE = 1e-5


def batch(family):
    tokens, segments = np.array(TOKENS, "int32"), np.array(SEGMENTS, "int32")
    if family in ("nezha", "roformer", "roformer_v2"):
        rng = np.random.default_rng(1)
        long_tokens = rng.integers(1, TINY["vocab_size"], (2, LONG)).astype("int32")
        long_tokens[1, 700:] = 0
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
                        "model": model_of(family), "segments": takes_segments(family),
                        "writer": "albert" if family == "albert_unshared" else model_of(family)}
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
            K.clear_session()  # a new graph per family: one graph of them all slows each step
            config = job["dir"] + "/bert_config.json"
            shown = build_transformer_model(config, model=job["model"], **job["heads"])
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
                inputs = [np.array(tokens), np.array(segments)]
                result = bert.model.predict(inputs if job["segments"] else inputs[0], verbose=0)
                result = result if isinstance(result, list) else [result]
                outputs.append([(r[:, ::{STRIDE}] if r.ndim == 3 and r.shape[1] == {LONG}
                                 else r).tolist() for r in result])
            out[family] = {{"layers": layers, "outputs": outputs}}
        print(json.dumps(out))
    """)
    return {family: {**out[family], "dir": job["dir"]} for family, job in jobs.items()}


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("family", list(CASES))
def test_names_and_counts_match_bert4keras(theirs, family):
    changes, heads = CASES[family]
    model = build_transformer_model({**TINY, **changes}, model=model_of(family), **heads)
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
    bert = build_transformer_model(f"{directory}/bert_config.json", prefix,
                                   model=model_of(family), return_keras_model=False, **heads)
    assert bert.load_report.ok and not bert.load_report.unused
    for (tokens, segments), expected in zip(batch(family), theirs[family]["outputs"]):
        result = bert.model.predict(model_inputs(family, tokens, segments), verbose=0)
        result = result if isinstance(result, list) else [result]
        real = tokens != 0
        for ours, their in zip(result, expected):
            ours, their = np.asarray(ours), np.asarray(their)
            if ours.ndim == 3:  # per token: real tokens only (padding rows differ by design)
                kept = slice(None, None, STRIDE if ours.shape[1] == LONG else 1)
                ours, their = ours[:, kept][real[:, kept]], their[real[:, kept]]
            np.testing.assert_allclose(ours, their, atol=TOLERANCE, rtol=0)

    saved = str(tmp_path / "again" / "bert_model.ckpt")
    bert.save_weights_as_checkpoint(saved)
    assert_same_checkpoint(saved, prefix)


def assert_same_checkpoint(written, original):
    """The checkpoints at prefixes ``written`` and ``original`` hold the same variables,
    bit for bit."""
    written, original = tf.train.load_checkpoint(written), tf.train.load_checkpoint(original)
    names = written.get_variable_to_shape_map()
    assert set(names) == set(original.get_variable_to_shape_map())
    for name in names:
        np.testing.assert_array_equal(written.get_tensor(name), original.get_tensor(name),
                                      err_msg=name)


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("family", list(CASES))
def test_the_audit_formulas_give_bert4keras_counts_layer_by_layer(theirs, family):
    changes, heads = CASES[family]
    config = BertConfig.from_dict({**TINY, **changes}, family=model_of(family))
    rows = expected_rows(config, **audit_heads(heads))
    counted = {name: count for name, count in theirs[family]["layers"] if count}
    assert {row.layer: row.expected for row in rows} == counted
    model = build_transformer_model(config, model=model_of(family), **heads)
    assert all(row.ok for row in audit_model(model, config, family=model_of(family),
                                             **audit_heads(heads)))


@pytest.mark.slow
@pytest.mark.peer
def test_published_family_configs_count_as_bert4keras_and_the_readme_says(tmp_path):
    """Why slow: asked live (``make test-peers``, or where no recording matches), bert4keras
    builds the ten full-size published configs to count them; replayed, it takes seconds."""
    jobs = {}
    for path, (family, _) in ref.FAMILY_CONFIGS.items():
        config = json.loads((ROOT / path).read_text())
        if "gelu_new" in json.dumps(config["hidden_act"]):
            # bert4keras spells GPT-2's and mT5's tanh GELU "gelu" (after set_gelu("tanh"));
            # the count does not depend on it.
            copy = tmp_path / path.replace("/", "_")
            copy.write_text(json.dumps(config).replace('"gelu_new"', '"gelu"'))
            jobs[path] = [str(copy), family]
        else:
            jobs[path] = [str(ROOT / path), family]
    counts = run_bert4keras(f"""
        import json
        from bert4keras.models import build_transformer_model
        out = {{}}
        for path, (config, family) in json.loads({json.dumps(json.dumps(jobs))}).items():
            out[path] = int(build_transformer_model(config, model=family).count_params())
        print(json.dumps(out))
    """)
    readme = (ROOT / "checkpoints" / "README.md").read_text()
    for path, (family, total) in ref.FAMILY_CONFIGS.items():
        config = BertConfig.from_json_file(ROOT / path, family=family)
        assert sum(row.expected for row in expected_rows(config)) == total == counts[path], path
        folder = path.split("/")[1]
        assert re.search(rf"`{re.escape(folder)}/`.*\| {total:,} \|", readme), folder
    albert_base = BertConfig.from_json_file(ROOT / "checkpoints/albert_base_v2/albert_config.json")
    assert sum(row.expected for row in expected_rows(albert_base, with_pool=True)) == \
        ref.ALBERT_BASE_POOLER


def test_a_family_reads_a_hugging_face_model_type_and_refuses_a_mismatch():
    albert = build_transformer_model({**TINY, "embedding_size": 8, "model_type": "albert"})
    assert albert.get_layer("Transformer-MultiHeadSelfAttention").count_params() > 0
    with pytest.raises(ValueError, match="^model_type \\('albert'\\) in <dict>: another family "
                                         "than model='bert'"):
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


@pytest.mark.slow
@pytest.mark.parametrize("family, changes, maxlen", [
    ("albert", {"embedding_size": 8}, 32),
    # NEZHA fine-tuned on sequences longer than its config's 32 positions.
    ("nezha", {"max_relative_position": 4}, 48),
    ("gau_alpha", {"hidden_act": "swish", "attention_key_size": 8}, 48),
])
def test_the_command_line_fine_tunes_predicts_and_exports_a_family(
        tiny_run_inputs, tmp_path, capsys, family, changes, maxlen):
    from kerasbert.cli.main import main
    from kerasbert.tasks.classification.task import Run

    inputs = dict(tiny_run_inputs)
    config = {**json.loads(open(inputs["config"]).read()), **changes}
    inputs["config"] = str(tmp_path / "bert_config.json")
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    inputs["checkpoint"] = str(tmp_path / "pretrained" / "bert_model.ckpt")
    save_weights_as_checkpoint(build_transformer_model(config, model=family),
                               inputs["checkpoint"])
    output = tmp_path / "run"
    assert main(["train", "--model", family, "--output", str(output), "--epochs", "2",
                 "--batch-size", "16", "--lr", "1e-2", "--maxlen", str(maxlen), "--seed", "1",
                 *[f"--{key}={inputs[key]}" for key in ("config", "checkpoint", "vocab",
                                                         "train", "dev", "test")]]) == 0
    run = Run(str(output))
    model_layers = {layer.name for layer in run.model.layers}
    assert ("Transformer-MultiHeadSelfAttention" in model_layers) == (family == "albert")
    assert ("Embedding-Relative-Position" in model_layers) == (family == "nezha")
    assert json.loads((output / "train_config.json").read_text())["model"] == family
    # The run's checkpoint is in the family's names: it loads strictly as that family.
    reloaded = build_transformer_model(str(output / "bert_config.json"),
                                       str(output / "bert_model.ckpt"), model=family,
                                       return_keras_model=False)
    assert reloaded.load_report.ok
    capsys.readouterr()
    assert main(["predict", "--model", str(output), "这个好棒", "书店差"]) == 0
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["label"] for row in predicted] == [
        row["label"] for row in run.predict(["这个好棒", "书店差"])]
    written = run.export(str(tmp_path / "served"))
    assert any(path.endswith("saved_model.pb") for path in written)
    served = tf.saved_model.load(str(tmp_path / "served" / "1"))
    probabilities = served.signatures["classify"](text=tf.constant(["这个好棒", "书店差"]))
    np.testing.assert_allclose(probabilities["probabilities"].numpy().max(-1),
                               [row["probability"] for row in predicted], atol=1e-5)


def test_pretraining_refuses_a_family_without_bert_s_masked_lm_head(tmp_path, capsys):
    from kerasbert.cli.main import main

    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**TINY, "embedding_size": 8}))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("这个好棒\n书店差\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "这", "个"]))
    code = main(["pretrain", "--model", "electra", "--config", str(config), "--vocab",
                 str(vocab), "--corpus", str(corpus), "--output", str(tmp_path / "run")])
    assert code == 2
    assert capsys.readouterr().err == (
        "kerasbert pretrain: model family in --model: pretraining trains BERT's masked-LM head "
        "(MLM-Dense, MLM-Norm, MLM-Bias), which electra does not have\n")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("family", list(CASES))
def test_keep_tokens_and_dropout_rate_zero_work_for_every_family(tmp_path, family):
    changes, heads = CASES[family]
    config = {**TINY, **changes}
    # The unshared ALBERT reads ALBERT's shared checkpoint.
    writer = "albert" if family == "albert_unshared" else model_of(family)
    full = build_transformer_model(config, model=writer, **heads)
    prefix = str(tmp_path / "bert_model.ckpt")
    save_weights_as_checkpoint(full, prefix, family=writer)
    keep = [0, 1, 2, 3, 10, 20, 30]
    small = build_transformer_model(config, prefix, model=model_of(family), keep_tokens=keep,
                                    dropout_rate=0, **heads)
    np.testing.assert_array_equal(small.get_layer("Embedding-Token").embeddings.numpy(),
                                  full.get_layer("Embedding-Token").embeddings.numpy()[keep])
    assert not [layer.name for layer in small.layers if "Dropout" in layer.name]
    assert [layer.name for layer in full.layers if "Dropout" in layer.name]
