"""``kerasbert train --maxlen N`` past the checkpoint's position table, and ``--recompute``.

A tiny model of 16 positions trains on texts of up to 40 tokens: the run reads its table
hierarchically (bert4keras's ``hierarchical_position``, alpha 0.4), its ``bert_config.json``
says so, and every later use of the run (resume, evaluate, predict, export, a model rebuilt
from the config and checkpoint) reads the same positions.
"""

import json
import random

import keras
import numpy as np
import pytest

from conftest import BAD, GOOD, NEUTRAL, TINY, write_tsv
from kerasbert import build_transformer_model, save_weights_as_checkpoint
from kerasbert.cli.main import main
from kerasbert.models.names import EMBEDDING_POSITION
from kerasbert.tasks import open_run
from kerasbert.tasks.classification.task import ClassificationOptions
from kerasbert.tasks.classification.task import train as train_classifier
from kerasbert.tasks.ner.data import Sentence
from kerasbert.tasks.ner.task import NerOptions, encode
from kerasbert.tasks.ner.task import train as train_tagger
from kerasbert.tasks.qa.span_qa import QuestionAnswerer
from kerasbert.tasks.qa.task import QaOptions
from kerasbert.tasks.qa.task import train as train_reader
from kerasbert.training.rundir import RunError

POSITIONS, MAXLEN = 16, 40  # texts past the table, within its square (256)
SURNAMES, GIVEN, PLACES = "张王李", "明华", "京沪"


def long_text(rng, length, word):
    """``length`` filler characters with ``word`` near the end, past position 16."""
    text = [rng.choice(NEUTRAL) for _ in range(length)]
    return "".join(text[:length - 6]) + word + "".join(text[length - 6:])


def classification_rows(count, seed):
    rng = random.Random(seed)
    return [(label, long_text(rng, rng.randint(24, 34), rng.choice(marks)))
            for i in range(count)
            for label, marks in [(("positive", GOOD), ("negative", BAD))[i % 2]]]


def tagged_sentences(count, seed):
    """CoNLL sentences of 24-34 filler characters with a person or a place after the 16th."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        lines += [f"{rng.choice(NEUTRAL)} O" for _ in range(rng.randint(18, 26))]
        if rng.random() < 0.5:
            lines += [f"{rng.choice(SURNAMES)} B-PER", f"{rng.choice(GIVEN)} I-PER"]
        else:
            lines += [f"{rng.choice(PLACES)} B-LOC", "市 I-LOC"]
        lines += [f"{rng.choice(NEUTRAL)} O" for _ in range(rng.randint(2, 6))]
        lines.append("")
    return "\n".join(lines) + "\n"


def squad_file(path, count, seed):
    """Contexts of 24-34 characters naming one person after the 16th (the question: who?)."""
    rng = random.Random(seed)
    paragraphs = []
    for n in range(count):
        before = "".join(rng.choice(NEUTRAL) for _ in range(rng.randint(18, 26)))
        name = rng.choice(SURNAMES) + rng.choice(GIVEN)
        after = "".join(rng.choice(NEUTRAL) for _ in range(rng.randint(2, 6)))
        paragraphs.append({"context": before + name + after, "qas": [
            {"id": f"q{n}", "question": "谁？",
             "answers": [{"text": name, "answer_start": len(before)}]}]})
    path.write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": paragraphs}]},
                               ensure_ascii=False), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A tiny model of 16 positions (random weights) and each task's files; read-only."""
    root = tmp_path_factory.mktemp("long")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "谁", "？", "市"] + sorted(
        set(GOOD + BAD + NEUTRAL + SURNAMES + GIVEN + PLACES))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(TINY, vocab_size=len(vocab), max_position_embeddings=POSITIONS)
    (root / "bert_config.json").write_text(json.dumps(config))
    keras.utils.set_random_seed(0)
    save_weights_as_checkpoint(build_transformer_model(config, with_pool=True),
                               str(root / "bert_model.ckpt"))
    model = {"config": str(root / "bert_config.json"),
             "checkpoint": str(root / "bert_model.ckpt"), "vocab": str(root / "vocab.txt")}
    for name, count, seed in (("train", 32, 1), ("dev", 16, 2)):
        write_tsv(root / f"{name}.tsv", classification_rows(count, seed))
        (root / f"{name}.txt").write_text(tagged_sentences(count, seed), encoding="utf-8")
        squad_file(root / f"{name}.json", count, seed)
    return {task: {**model, **{split: str(root / f"{split}.{ext}") for split in ("train", "dev")}}
            for task, ext in (("classification", "tsv"), ("ner", "txt"), ("qa", "json"))}


def run_flags(paths):
    return [f"--{key}={value}" for key, value in paths.items()]


def position_layer(model):
    return model.get_layer(EMBEDDING_POSITION)


def encoder_output(model, token_ids):
    """The last encoder layer's output of ``model`` (a run's, or a rebuilt encoder)."""
    last = [layer for layer in model.layers if layer.name.endswith("-FeedForward-Norm")][-1]
    encoder = keras.Model(model.inputs[:2], last.output)
    return keras.ops.convert_to_numpy(encoder([token_ids, np.zeros_like(token_ids)]))


@pytest.fixture(scope="module")
def classifier_run(inputs, tmp_path_factory):
    """A classification run with --maxlen 40 on 16 positions, through the command line:
    ``(run directory, what it printed)``."""
    import contextlib
    import io

    output = tmp_path_factory.mktemp("runs") / "classification"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["train", "--task", "classification", "--output", str(output),
                     "--maxlen", str(MAXLEN), "--epochs", "2", "--batch-size", "16",
                     "--lr", "1e-3", "--seed", "1", "--patience", "0",
                     *run_flags(inputs["classification"])]) == 0
    return output, printed.getvalue()


def test_a_run_past_the_positions_says_so_and_its_config_records_it(classifier_run):
    output, printed = classifier_run
    assert ("--maxlen 40 exceeds the checkpoint's 16 positions: hierarchical positions "
            "(alpha 0.4)") in printed.splitlines()
    config = json.loads((output / "bert_config.json").read_text())
    assert config["hierarchical_position"] == 0.4
    assert config["max_position_embeddings"] == POSITIONS
    run = open_run(output)
    assert position_layer(run.model).hierarchical == 0.4
    assert position_layer(run.model).max_length == POSITIONS ** 2


def test_the_config_and_checkpoint_rebuild_the_runs_encoder(classifier_run):
    """build_transformer_model reads hierarchical_position from the run's config: the model
    rebuilt from its bert_config.json and bert_model.ckpt gives the run's outputs on 40
    tokens, the keyword given explicitly overrides the key."""
    output, _ = classifier_run
    run = open_run(output)
    rebuilt = build_transformer_model(str(output / "bert_config.json"),
                                      str(output / "bert_model.ckpt"))
    assert position_layer(rebuilt).hierarchical == 0.4
    token_ids = np.random.default_rng(0).integers(5, 20, size=(2, MAXLEN))
    np.testing.assert_allclose(encoder_output(rebuilt, token_ids),
                               encoder_output(run.model, token_ids), atol=1e-5)
    other = build_transformer_model(str(output / "bert_config.json"), hierarchical_position=0.3)
    assert position_layer(other).hierarchical == 0.3


def test_evaluate_predict_and_export_read_the_whole_long_text(classifier_run, inputs,
                                                              tmp_path):
    import tensorflow as tf

    output, _ = classifier_run
    run = open_run(output)
    assert 0 <= run.evaluate(inputs["classification"]["dev"])["accuracy"] <= 1
    texts = [text for _, text in classification_rows(6, 9)]
    assert min(map(len, texts)) > POSITIONS
    predicted = run.predict(texts)
    run.export(str(tmp_path / "served"))
    classify = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["classify"]
    served = classify(text=tf.constant(texts))
    assert [label.decode() for label in served["label"].numpy()] == [
        row["label"] for row in predicted]
    np.testing.assert_allclose(served["probabilities"].numpy().max(-1),
                               [row["probability"] for row in predicted], atol=1e-5)


class Kill(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations.numpy() == 3:  # epoch 2, batch 1
            raise KeyboardInterrupt("killed")


def classifier_options(inputs, output, **changes):
    """The options of ``classifier_run``, through the Python API."""
    values = dict(inputs["classification"], output=str(output), maxlen=MAXLEN, epochs=2,
                  batch_size=16, lr=1e-3, seed=1, patience=0)
    return ClassificationOptions(**{**values, **changes})


def test_a_killed_long_run_resumes_to_the_same_result(classifier_run, inputs, tmp_path):
    output, _ = classifier_run
    with pytest.raises(KeyboardInterrupt):
        train_classifier(classifier_options(inputs, tmp_path / "run"), callbacks=[Kill()])
    with pytest.raises(RunError, match="pass --resume"):
        train_classifier(classifier_options(inputs, tmp_path / "run"))
    # A run started before --recompute existed saved no such key: it resumes without it.
    saved = tmp_path / "run" / "train_config.json"
    saved.write_text(json.dumps({key: value for key, value in json.loads(saved.read_text())
                                 .items() if key != "recompute"}))
    with pytest.raises(RunError, match=r"differ \(recompute \(False -> True\)\)"):
        train_classifier(classifier_options(inputs, tmp_path / "run", resume=True,
                                            recompute=True))
    resumed = train_classifier(classifier_options(inputs, tmp_path / "run", resume=True))
    assert resumed["dev"] == json.loads((output / "metrics.json").read_text())["dev"]
    assert json.loads((tmp_path / "run" / "bert_config.json").read_text())[
        "hierarchical_position"] == 0.4


def test_recompute_trains_the_same_weights_and_is_recorded(inputs, tmp_path):
    """One update with --recompute (dropout on: the same masks forward and recomputed) gives
    the weights of one without it; the run records it and its layers keep it."""
    weights = {}
    for recompute in (False, True):
        output = tmp_path / f"recompute-{recompute}"
        train_classifier(classifier_options(inputs, output, epochs=1, max_train_examples=16,
                                            recompute=recompute))
        weights[recompute] = open_run(output).model.get_weights()
        assert json.loads((output / "train_config.json").read_text())["recompute"] is recompute
    for plain, recomputed in zip(weights[False], weights[True]):
        np.testing.assert_allclose(recomputed, plain, atol=1e-5)
    layers = open_run(tmp_path / "recompute-True").model.layers
    assert {layer.recompute for layer in layers if hasattr(layer, "recompute")} == {True}


def test_ner_tags_and_exports_the_whole_long_text(inputs, tmp_path):
    import tensorflow as tf

    output = tmp_path / "ner"
    train_tagger(NerOptions(**inputs["ner"], output=str(output), maxlen=MAXLEN, epochs=3,
                            batch_size=16, lr=5e-3, seed=1, patience=0))
    run = open_run(output)
    assert position_layer(run.model).hierarchical == 0.4
    rng = random.Random(7)
    texts = [long_text(rng, 30, "张明"), long_text(rng, 34, "京市"), "张明在京市"]
    # Every character is read, none cut at the table's 16 positions.
    assert encode(run.tokenizer, [Sentence(text, []) for text in texts], MAXLEN,
                  run.tags)[0].shape[1] == len(texts[1]) + 2 > POSITIONS
    predicted = run.predict(texts)
    run.export(str(tmp_path / "served"))
    entities = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["entities"]
    served = entities(text=tf.constant(texts))
    for i, row in enumerate(predicted):
        count = int(served["count"][i])
        assert [(served["type"][i][k].numpy().decode(), int(served["start"][i][k]),
                 int(served["end"][i][k])) for k in range(count)] == [
            (entity["type"], entity["start"], entity["end"]) for entity in row["entities"]]


def test_qa_answers_past_the_positions_and_strides_past_maxlen(inputs, tmp_path):
    import tensorflow as tf

    output = tmp_path / "qa"
    train_reader(QaOptions(**inputs["qa"], output=str(output), maxlen=MAXLEN, epochs=3,
                           batch_size=16, lr=5e-3, seed=1, patience=0))
    run = open_run(output)
    rng = random.Random(5)
    # Within maxlen (one window past the 16 positions), and past it (windows of 40).
    contexts = [long_text(rng, 28, "王华"), long_text(rng, 70, "李明")]
    pairs = [text for context in contexts for text in ("谁？", context)]
    predicted = run.predict(pairs)
    # The span head is in the run's checkpoint, its positions in its config.
    rebuilt = QuestionAnswerer.from_checkpoint(output, max_seq_len=MAXLEN, doc_stride=20,
                                               max_answer_len=30, handle_impossible_answer=True)
    assert position_layer(rebuilt.model).hierarchical == 0.4
    for answerer in (rebuilt, QuestionAnswerer(output)):
        found = answerer(question=["谁？"] * 2, context=contexts)
        assert [(row["answer"], row["start"], row["end"]) for row in found] == [
            (row["answer"], row["start"], row["end"]) for row in predicted]
        np.testing.assert_allclose([row["score"] for row in found],
                                   [row["score"] for row in predicted], rtol=1e-5)
    run.export(str(tmp_path / "served"))
    answer = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["answer"]
    served = answer(question=tf.constant(["谁？"] * 2), context=tf.constant(contexts))
    assert [(a.decode(), int(s), int(e)) for a, s, e in zip(
        served["answer"].numpy(), served["start"], served["end"])] == [
        (row["answer"], row["start"], row["end"]) for row in predicted]
    np.testing.assert_allclose(served["score"].numpy(), [row["score"] for row in predicted],
                               rtol=1e-5)


def test_a_maxlen_past_the_square_of_the_positions_is_refused(inputs, tmp_path, capsys):
    output = tmp_path / "refused"
    assert main(["train", "--task", "ner", "--output", str(output), "--maxlen", "257",
                 *run_flags(inputs["ner"])]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"kerasbert train: --maxlen (257) in {inputs['ner']['config']}: exceeds the 256 "
        "positions hierarchical_position reads (max_position_embeddings 16, squared)"]
    assert not output.exists()


def test_families_without_a_position_table_take_no_hierarchical_positions(inputs):
    from kerasbert.tasks.runs import run_config

    for family in ("roformer", "nezha"):
        options = classifier_options(inputs, "-", model=family).resolved()
        assert run_config(options).hierarchical_position is None
    with pytest.raises(ValueError, match="hierarchical_position .0.4. in <dict>: "
                                         "model='roformer' builds no hierarchical"):
        build_transformer_model(dict(TINY, hierarchical_position=0.4), model="roformer")


@pytest.mark.slow
def test_the_shipped_model_trains_on_1024_tokens(tmp_path, capsys):
    """kerasbert-zh-small (512 positions) fine-tuned on texts of about 1000 characters with
    --maxlen 1024: two steps, then predict reads a text past position 512.

    Why slow: a 4-layer model of width 256 on 1024 tokens, its checkpoint loaded, trained,
    saved and loaded again (about 30 s on two CPU cores)."""
    rng = random.Random(3)
    rows = [(label, "".join(rng.choice(NEUTRAL) for _ in range(900)) + rng.choice(marks))
            for label, marks in [("positive", GOOD), ("negative", BAD)] * 2]
    files = {name: write_tsv(tmp_path / f"{name}.tsv", rows[:count])
             for name, count in (("train", 4), ("dev", 2))}
    output = tmp_path / "run"
    assert main(["train", "--task", "classification", "--output", str(output), "--maxlen",
                 "1024", "--epochs", "1", "--batch-size", "2", "--patience", "0",
                 *run_flags(files)]) == 0
    assert ("--maxlen 1024 exceeds the checkpoint's 512 positions: hierarchical positions "
            "(alpha 0.4)") in capsys.readouterr().out
    run = open_run(output)
    assert run.options.maxlen == 1024
    assert json.loads((output / "bert_config.json").read_text())["hierarchical_position"] == 0.4
    assert run.predict([rows[0][1]])[0]["label"] in ("positive", "negative")


def test_the_predictor_pads_up_to_a_hierarchical_tables_length():
    from kerasbert.inference.predictor import Predictor, _max_length

    bert = build_transformer_model(dict(TINY, max_position_embeddings=POSITIONS),
                                   hierarchical_position=True)
    assert _max_length(bert) == POSITIONS ** 2
    token_ids = np.random.default_rng(0).integers(5, 90, size=(3, MAXLEN))
    np.testing.assert_allclose(Predictor(bert, bucket=32)(token_ids, np.zeros_like(token_ids)),
                               bert.predict([token_ids, np.zeros_like(token_ids)], verbose=0),
                               atol=1e-5)
