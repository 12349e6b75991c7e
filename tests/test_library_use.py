"""kerasbert as a user meets it outside the code: a run's model loaded in their own script,
the command line's speed and quietness, its warnings, other files' columns, the shipped
model's defaults."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from kerasbert.tasks.classification.options import ClassificationOptions
from kerasbert.tasks.ner.options import NerOptions
from kerasbert.tasks.options import (
    FALLBACK_DEFAULTS,
    MODEL_DEFAULT_KEYS,
    MODEL_DEFAULTS_FILE,
    describe_defaults,
)
from kerasbert.tasks.qa.options import QaOptions
from kerasbert.training.options import BASE_LR, OptionError, validate
from peers import run_python

TEXTS = ["这个好棒", "我们买了差", "书店东西好爱"]
BIN = os.path.dirname(sys.executable)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kerasbert(*argv, cwd=None, env=None):
    """The installed ``kerasbert`` console script in a new process."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("TF_CPP_MIN_LOG_LEVEL", "KERASBERT_DEBUG")}
    environment.update(env or {})
    return subprocess.run([os.path.join(BIN, "kerasbert"), *argv], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=300, check=False)


# ------------------------------------------------------------------ a run's model, anywhere
@pytest.mark.slow
def test_a_runs_model_loads_in_a_script_that_only_imports_kerasbert(finished_run):
    output, _ = finished_run
    script = f"""
        import json, sys
        import keras
        import kerasbert

        model = kerasbert.load_model({str(output / "model.keras")!r})
        tokenizer = kerasbert.Tokenizer({str(output / "vocab.txt")!r})
        token_ids, segment_ids = tokenizer.encode_batch({TEXTS!r}, maxlen=32)
        probabilities = model.predict([token_ids, segment_ids], verbose=0)
        print(json.dumps(probabilities.tolist()))
    """
    probabilities = np.array(run_python(script))
    done = kerasbert("predict", "--model", str(output), *TEXTS)
    assert done.returncode == 0, done.stderr
    predicted = [json.loads(line) for line in done.stdout.splitlines()]
    labels = json.loads((output / "labels.json").read_text())
    assert [labels[i] for i in probabilities.argmax(-1)] == [row["label"] for row in predicted]
    np.testing.assert_allclose(probabilities.max(-1), [row["probability"] for row in predicted],
                               atol=1e-6)


def test_import_kerasbert_loads_no_tensorflow_and_its_names_are_listed():
    """``import kerasbert`` loads no TensorFlow, a tokenizer needs none; a model kerasbert
    saved then loads with ``kerasbert.load_model`` (tests/test_import_hygiene.py: nothing
    global changed)."""
    saved = os.path.join(ROOT, "tests", "fixtures", "saved-0.1.0", "mlm.keras")
    script = f"""
        import json, sys
        import kerasbert

        def heavy():
            return sorted(m for m in ("tensorflow", "keras") if m in sys.modules)

        loaded = {{"import kerasbert": heavy()}}
        tokenizer = kerasbert.Tokenizer(kerasbert.shipped.model_dir() + "/vocab.txt")
        loaded["Tokenizer"] = heavy()
        model = kerasbert.load_model({saved!r})
        print(json.dumps({{"loaded": loaded, "layers": len(model.layers),
                          "names": sorted(kerasbert.PUBLIC) == sorted(kerasbert.__all__),
                          "models": sorted(kerasbert.models.PROVIDED)
                                    == sorted(kerasbert.models.__all__)}}))
    """
    found = run_python(script)
    assert found["loaded"] == {"import kerasbert": [], "Tokenizer": []}
    assert found["layers"] > 10 and found["names"] and found["models"]


@pytest.mark.slow
def test_without_import_kerasbert_the_model_does_not_load(finished_run):
    # What makes the test above a test: the layers are kerasbert's and need registering.
    output, _ = finished_run
    script = f"""
        import keras
        try:
            keras.saving.load_model({str(output / "model.keras")!r}, safe_mode=True)
            print('"loaded"')
        except Exception as error:
            print(__import__("json").dumps(str(error)))
    """
    assert "kerasbert>" in run_python(script)


def test_the_best_model_is_an_inference_artefact(finished_run):
    output, _ = finished_run
    with zipfile.ZipFile(output / "model.keras") as archive:
        config = json.loads(archive.read("config.json"))
        weights = archive.read("model.weights.h5")
    assert not config.get("compile_config")
    assert b"optimizer" not in weights
    assert config["config"]["name"]  # the model keeps its name


# ------------------------------------------------------------------------- the command line
@pytest.mark.parametrize("argv", [["--help"], *([command, "--help"] for command in (
    "audit", "plot", "train", "pretrain", "evaluate", "predict", "export", "convert"))],
    ids=lambda argv: " ".join(argv))
def test_help_is_quick_and_loads_no_tensorflow(argv):
    script = f"""
        import contextlib, io, json, sys
        import kerasbert_cli
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                kerasbert_cli.main({argv!r})
            except SystemExit as done:
                code = done.code
        print(json.dumps({{"code": code, "help": out.getvalue(),
                          "loaded": sorted(m for m in sys.modules
                                           if m.split(".")[0] in ("tensorflow", "keras"))}}))
    """
    result = run_python(script)
    assert result["code"] == 0 and result["loaded"] == []
    text = result["help"]
    assert "examples:" in text and "usage: kerasbert" in text
    if argv[0] != "--help":
        assert "(required)" in text or argv[0] in ("audit", "plot")
    if argv[0] in ("train", "pretrain", "evaluate", "predict", "export", "plot"):
        assert "(default:" in text
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        done = kerasbert(*argv)
        seconds.append(time.perf_counter() - start)
        assert done.returncode == 0 and done.stderr == ""
    assert min(seconds) < 1.0, f"{' '.join(argv)} took {min(seconds):.2f} s"


def test_a_command_starts_without_the_modules_keras_imports_for_its_wrappers():
    """The console script imports Keras without scikit-learn and matplotlib (~1.4 s of
    each command's start); kerasbert's own code still imports them as usual."""
    script = """
        import contextlib, io, json, sys
        import kerasbert_cli
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = kerasbert_cli.main(["audit", "kerasbert/resources/kerasbert-zh-small/"
                                       "bert_config.json"])
        loaded = sorted({m.split(".")[0] for m in sys.modules}
                        & {"sklearn", "scipy", "matplotlib"})
        from sklearn import metrics  # as kerasbert's classification report imports it
        import matplotlib.pyplot
        import keras.src.wrappers.sklearn_wrapper as wrappers
        print(json.dumps({"code": code, "loaded": loaded, "keras": "keras" in sys.modules,
                          "audit": "Total params" in out.getvalue(),
                          "keras_wrappers_without": wrappers.sklearn is None}))
    """
    assert run_python(script) == {"code": 0, "loaded": [], "keras": True, "audit": True,
                                  "keras_wrappers_without": True}


@pytest.mark.slow
def test_commands_that_run_a_model_are_quiet_unless_verbose(finished_run):
    output, _ = finished_run
    quiet = kerasbert("predict", "--model", str(output), TEXTS[0])
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = kerasbert("--verbose", "predict", "--model", str(output), TEXTS[0])
    # TensorFlow's own log lines (absl's "I0000 00:00:..." form): which ones depends on the
    # CPU (oneDNN's line only where TensorFlow turns oneDNN on, AVX-512 machines)
    assert loud.returncode == 0 and re.search(r"^[IWE]\d{4} \d\d:\d\d:", loud.stderr, re.M)
    assert loud.stdout == quiet.stdout


@pytest.mark.slow
def test_a_maxlen_far_above_the_texts_says_what_it_costs(tiny_run_inputs, tmp_path):
    """``--maxlen`` is a cap: far above the longest text it cuts nothing, every text is read
    whole and a batch is as wide as its longest text; train says so before the first step,
    with the widths (the shipped reviews' longest has 2,878 tokens)."""
    argv = ["train", "--output", "run", "--config", tiny_run_inputs["config"],
            "--vocab", tiny_run_inputs["vocab"], "--checkpoint", tiny_run_inputs["checkpoint"],
            "--train", tiny_run_inputs["train"], "--dev", tiny_run_inputs["dev"],
            "--epochs", "1", "--max-train-examples", "32", "--batch-size", "16"]
    far = kerasbert(*argv, "--maxlen", "1000", cwd=tmp_path)
    assert far.returncode == 0, far.stderr
    warning = [line for line in far.stderr.splitlines() if "far above" in line]
    assert len(warning) == 1 and re.match(
        r"kerasbert train: warning: --maxlen 1000 is far above the longest text of --train "
        r"\(\d+ tokens, the median \d+\): it cuts nothing", warning[0]), far.stderr
    near = kerasbert(*argv, "--maxlen", "16", "--output", "near", cwd=tmp_path)
    assert near.returncode == 0 and "far above" not in near.stderr, near.stderr


@pytest.mark.slow
def test_train_without_a_checkpoint_says_so_and_records_it(tiny_run_inputs, tmp_path):
    argv = ["train", "--output", "run", "--config", tiny_run_inputs["config"],
            "--vocab", tiny_run_inputs["vocab"], "--train", tiny_run_inputs["train"],
            "--dev", tiny_run_inputs["dev"], "--epochs", "1", "--max-train-examples", "32",
            "--maxlen", "16", "--batch-size", "16"]
    done = kerasbert(*argv, cwd=tmp_path, env={"CI": "1"})
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "RANDOM weights" in line]
    assert warning and warning[0].startswith("kerasbert train: warning: no --checkpoint")
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert saved["weights"] == "random" and saved["checkpoint"] is None


def test_a_finished_run_records_its_checkpoint(finished_run):
    output, _ = finished_run
    saved = json.loads((output / "train_config.json").read_text())
    assert saved["weights"] == "checkpoint" and saved["checkpoint"]


@pytest.mark.slow
def test_evaluate_and_predict_read_other_column_names(finished_run, tiny_run_inputs, tmp_path):
    output, summary = finished_run
    rows = [line.split("\t") for line in
            open(tiny_run_inputs["test"], encoding="utf-8").read().splitlines()[1:]]
    other = tmp_path / "other.tsv"
    other.write_text("id\tsentiment\treview\n" + "".join(
        f"{i}\t{label}\t{text}\n" for i, (label, text) in enumerate(rows)), encoding="utf-8")

    refused = kerasbert("evaluate", "--model", str(output), "--data", str(other))
    assert refused.returncode == 2 and "text" in refused.stderr and str(other) in refused.stderr
    done = kerasbert("evaluate", "--model", str(output), "--data", str(other), "--json",
                     "--text-column", "review", "--label-column", "sentiment")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["accuracy"] == summary["test"]["accuracy"]

    done = kerasbert("predict", "--model", str(output), "--input", str(other),
                     "--text-column", "review")
    assert done.returncode == 0, done.stderr
    predicted = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["text"] for row in predicted] == [text for _, text in rows]

    # A plain text file, one text per line (blank lines skipped), predicts as the table.
    plain = tmp_path / "texts.txt"
    plain.write_text("\n".join(text for _, text in rows[:3]) + "\n\n" +
                     "\n".join(text for _, text in rows[3:]) + "\n", encoding="utf-8")
    done = kerasbert("predict", "--model", str(output), "--input", str(plain))
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == predicted


# ----------------------------------------------------------------- the shipped model's defaults
def test_the_shipped_model_brings_its_defaults_per_task(tiny_run_inputs, tmp_path):
    from kerasbert import shipped

    shipped_defaults = json.loads(open(os.path.join(shipped.model_dir(), MODEL_DEFAULTS_FILE),
                                       encoding="utf-8").read())
    chosen = ClassificationOptions(output="x").resolved()
    assert (chosen.lr, chosen.epochs, chosen.patience, chosen.maxlen, chosen.batch_size) == (
        shipped_defaults["lr"], 3, 2, 128, 32)
    assert shipped_defaults["lr"] == 1e-4
    # Short copies for the short texts a user tries (docs/classification.md): classification's.
    assert chosen.prefix_copies == 32
    assert describe_defaults(ClassificationOptions(output="x", epochs=3).resolved()) == (
        "lr 0.0001, maxlen 128, batch_size 32, prefix_copies 32: the defaults of "
        "kerasbert-zh-small for --task classification (its finetune_defaults.json)")
    assert not hasattr(NerOptions(output="x").resolved(), "prefix_copies")
    # A maxlen no longer than the default copies: nothing to copy, the default turns off.
    assert ClassificationOptions(output="x", maxlen=32).resolved().prefix_copies == 0
    assert tuple(FALLBACK_DEFAULTS) == MODEL_DEFAULT_KEYS  # a fallback for every key
    ner = NerOptions(output="x").resolved()
    assert (ner.lr, ner.epochs, ner.patience, ner.maxlen) == (3e-4, 10, 3, 160)
    assert NerOptions(output="x").resolved().epochs == 10
    qa = QaOptions(output="x").resolved()
    assert (qa.lr, qa.epochs, qa.maxlen, qa.batch_size) == (3e-4, 5, 192, 32)
    given_ner = NerOptions(output="x", lr=3e-5, epochs=2, patience=0, maxlen=64,
                           batch_size=8).resolved()
    assert (given_ner.lr, given_ner.epochs, given_ner.patience, given_ner.maxlen,
            given_ner.batch_size) == (3e-5, 2, 0, 64, 8)
    assert describe_defaults(NerOptions(output="x", epochs=2, batch_size=16).resolved()) == (
        "lr 0.0003, patience 3, maxlen 160: the defaults of kerasbert-zh-small for --task ner "
        "(its finetune_defaults.json)")
    assert describe_defaults(NerOptions(output="x", epochs=2, lr=1e-4, patience=1, maxlen=64,
                                        batch_size=16).resolved()) is None
    with pytest.raises(ValueError, match="not resolved"):
        describe_defaults(NerOptions(output="x"))
    given = dict(tiny_run_inputs, output="x")
    fallback = ClassificationOptions(**given).resolved()  # a model that carries none
    assert (fallback.lr, fallback.epochs, fallback.patience, fallback.batch_size,
            fallback.prefix_copies) == (BASE_LR, 3, 2, 32, 0)
    assert describe_defaults(ClassificationOptions(**given).resolved()) is None

    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(tiny_run_inputs["config"], model / "bert_config.json")
    mine = dict(given, config=str(model / "bert_config.json"))
    (model / MODEL_DEFAULTS_FILE).write_text('{"lr": 5e-5, "tasks": {"ner": {"epochs": 4}}}')
    assert ClassificationOptions(**mine).resolved().lr == 5e-5
    assert (ClassificationOptions(**mine).resolved().epochs,
            NerOptions(**mine).resolved().epochs) == (3, 4)
    assert NerOptions(**mine).resolved().lr == 5e-5
    for bad, named in [('{"lr": -1}', "lr"), ('{"tasks": {"ner": {"epochs": 0}}}', "epochs"),
                       ('{"lr": 1e-4, "maxlen": 2}', "maxlen"),
                       ('{"lr": 1e-4, "warmup": 0.2}', "defaults in"),
                       ('{"tasks": {"translation": {}}}', "defaults in"),
                       ('{"tasks": {"ner": {"dropout": 0.2}}}', "defaults in"), ("[1]", "object"),
                       ('{"tasks": {"ner": {"prefix_copies": 32}}}', "--task ner does not use"),
                       ('{"tasks": {"classification": {"prefix_copies": 2}}}', "prefix_copies")]:
        (model / MODEL_DEFAULTS_FILE).write_text(bad)
        with pytest.raises(OptionError, match=f"defaults in .*{MODEL_DEFAULTS_FILE}") as error:
            NerOptions(**mine).resolved()
        assert named in str(error.value)


def test_prefix_copies_add_each_long_example_cut_short(tiny_run_inputs, tmp_path):
    """--prefix-copies N: the training rows, then each row longer than N tokens cut to N as
    --maxlen cuts (its [SEP] kept), with its label; the epoch's batches count them."""
    from kerasbert.tasks.classification.task import TASK, _Inputs
    from kerasbert.text.tokenizer import Tokenizer
    from kerasbert.training import data

    train = tmp_path / "train.tsv"
    train.write_text("label\ttext\npos\t好好好好好好\nneg\t差\npos\t好好好\nneg\t差差差差差\n",
                     encoding="utf-8")
    tokenizer = Tokenizer(tiny_run_inputs["vocab"])
    rows = data.read_examples(str(train))
    options = ClassificationOptions(output="x", maxlen=16, batch_size=4, prefix_copies=5,
                                    epochs=1, lr=1e-4, patience=1)
    inputs = _Inputs(tokenizer, ["neg", "pos"], rows, rows, steps=1)
    ids, segments, labels = TASK.training_arrays(options, inputs)
    full, _ = tokenizer.encode_batch(rows.texts, maxlen=16)
    cut, _ = tokenizer.encode_batch(["好好好好好好", "差差差差差"], maxlen=5)
    assert ids.shape == (6, full.shape[1]) and segments.shape == ids.shape
    np.testing.assert_array_equal(ids[:4], full)
    np.testing.assert_array_equal(ids[4:, :5], cut)  # two longer than 5: cut, in file order
    assert (ids[4:, 5:] == 0).all() and (segments == 0).all()
    assert ids[4, 4] == tokenizer.token_to_id("[SEP]")
    assert labels.tolist() == [1, 0, 1, 0, 1, 0]
    assert (inputs.copies, inputs.steps) == (2, 2)
    plain = _Inputs(tokenizer, ["neg", "pos"], rows, rows, steps=1)
    assert len(TASK.training_arrays(dataclasses.replace(options, prefix_copies=0), plain)[0]) == 4
    assert (plain.copies, plain.steps) == (0, 1)
    for bad in (1, 2, 16, 20):
        with pytest.raises(OptionError, match=rf"invalid value {bad} in --prefix-copies: must "
                                              r"be 0 \(none\) or from 3 .* below --maxlen \(16\)"):
            validate(dataclasses.replace(options, prefix_copies=bad), flags=True)


def test_a_run_that_ends_at_one_class_says_so_and_what_to_try():
    from kerasbert.tasks.classification.task import TASK

    def summary(confusion):
        metrics = {"accuracy": 0.5, "macro_f1": 0.33, "confusion_matrix": confusion}
        return {"labels": ["negative", "positive"], "best_epoch": 1, "skipped_rows": {},
                "test": metrics}

    options = ClassificationOptions(output="runs/x", epochs=3, lr=1e-4)
    lines = TASK.train_report(options, summary([[0, 40], [0, 60]]))
    said = [line for line in lines if "only one class" in line]
    assert said == ["every test example was labelled 'positive': the model learnt only one "
                    "class; try more epochs (--epochs, 3 now) or another rate (--lr, 0.0001 "
                    "now), and check that the training file has enough examples of each label"]
    assert not [line for line in TASK.train_report(options, summary([[30, 10], [5, 55]]))
                if "only one class" in line]


@pytest.mark.slow
def test_train_prints_the_defaults_it_took_once_the_inputs_are_checked(tiny_run_inputs, tmp_path,
                                                                       capsys):
    from kerasbert.cli.main import main

    model = tmp_path / "tiny-model"
    model.mkdir()
    for key in ("config", "vocab"):
        shutil.copy(tiny_run_inputs[key], model)
    (model / MODEL_DEFAULTS_FILE).write_text(
        '{"lr": 1e-2, "tasks": {"classification": {"epochs": 1, "patience": 0}}}')
    flags = ["--config", str(model / "bert_config.json"), "--checkpoint",
             tiny_run_inputs["checkpoint"], "--train", tiny_run_inputs["train"],
             "--max-train-examples", "32", "--maxlen", "32", "--batch-size", "16"]

    assert main(["train", "--output", str(tmp_path / "refused"), *flags, "--dev",
                 str(tmp_path / "missing.tsv")]) == 2
    refused = capsys.readouterr()
    assert refused.out == "" and len(refused.err.splitlines()) == 1

    assert main(["train", "--output", str(tmp_path / "run"), *flags, "--dev",
                 tiny_run_inputs["dev"], "--epochs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("lr 0.01, patience 0: the defaults of tiny-model for --task "
                                   "classification (its finetune_defaults.json)")
    recorded = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert (recorded["lr"], recorded["epochs"], recorded["patience"]) == (1e-2, 1, 0)
