"""Fine-tuning end to end on a tiny model and a synthetic Chinese task the model can learn."""

import json
import sys

import keras
import pytest

from conftest import make_rows, train_options, write_tsv
from kerasbert.cli.main import main
from kerasbert.tasks.classification.task import Run, train
from kerasbert.training.data import DataError
from kerasbert.training.rundir import RunError
from peers import run_python

# The fixtures tiny_run_inputs (a tiny model and its train/dev/test files) and finished_run
# (a 3-epoch run of it) come from conftest.py.

def test_run_directory_holds_everything(finished_run):
    output, summary = finished_run
    for name in ("model.keras", "bert_model.ckpt.index", "labels.json", "vocab.txt",
                 "bert_config.json", "train_config.json", "history.csv", "metrics.json",
                 "confusion_matrix.png", "training_curves.png"):
        assert (output / name).exists(), name
    assert not (output / "backup").exists()
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["test"]["accuracy"] == summary["test"]["accuracy"] > 0.9
    assert set(metrics["test"]["per_class"]) == {"negative", "positive"}
    assert metrics["labels"] == ["negative", "positive"]
    assert len((output / "history.csv").read_text().splitlines()) == 1 + 3

    import tensorflow as tf

    names = [name for name, _ in tf.train.list_variables(str(output / "bert_model.ckpt"))]
    assert "bert/encoder/layer_1/output/LayerNorm/gamma" in names


@pytest.mark.slow
def test_same_seed_gives_the_same_metrics(tiny_run_inputs, finished_run, tmp_path):
    _, first = finished_run
    again = train(train_options(tiny_run_inputs, tmp_path / "again"))
    assert again["dev"] == first["dev"] and again["test"] == first["test"]


@pytest.mark.slow
def test_speed_options_learn_the_task_and_save_a_loadable_model(tiny_run_inputs, tmp_path):
    """--mixed-precision, --jit-compile and --grad-accum together still learn the task (8
    epochs: two batches per update halve the updates); the saved model loads and predicts,
    and the global dtype policy is given back."""
    from kerasbert.hardware import has_fast_bfloat16

    output = tmp_path / "fast"
    summary = train(train_options(tiny_run_inputs, output, epochs=8, mixed_precision="bfloat16",
                            jit_compile=True, grad_accum=2))
    assert keras.mixed_precision.dtype_policy().name == "float32"
    assert summary["test"]["accuracy"] > 0.9
    config = json.loads((output / "train_config.json").read_text())
    # What ran: float32 on a CPU without bfloat16 units (kerasbert.hardware).
    assert config["mixed_precision"] == ("bfloat16" if has_fast_bfloat16() else None)
    assert config["jit_compile"]
    assert config["grad_accum"] == 2
    rows = Run(str(output)).predict(["好好好这个", "差差差这个"])
    assert [row["label"] for row in rows] == ["positive", "negative"]


class Kill(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations.numpy() == 24 + 5:  # epoch 2, batch 6
            raise KeyboardInterrupt("killed")


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_result(tiny_run_inputs, finished_run, tmp_path):
    """Stopped in the middle of an epoch (tests/test_kills.py kills real processes at the
    named moments between epochs); only the same options resume it."""
    output, uninterrupted = finished_run
    with pytest.raises(RunError, match="holds a finished run; choose a new --output"):
        train(train_options(tiny_run_inputs, output, resume=True))
    with pytest.raises(KeyboardInterrupt):
        train(train_options(tiny_run_inputs, tmp_path / "run"), callbacks=[Kill()])
    assert (tmp_path / "run" / "backup").exists()
    with pytest.raises(RunError, match="holds an interrupted run; pass --resume"):
        train(train_options(tiny_run_inputs, tmp_path / "run"))
    for change in ({"lr": 2e-2}, {"epochs": 4}, {"batch_size": 8},
                   {"train": tiny_run_inputs["dev"]}):
        key = next(iter(change))
        with pytest.raises(RunError, match=rf"the run's options differ \({key} "):
            train(train_options(tiny_run_inputs, tmp_path / "run", resume=True, **change))
    with pytest.raises(RunError, match="no interrupted run to continue"):
        train(train_options(tiny_run_inputs, tmp_path / "new", resume=True))
    resumed = train(train_options(tiny_run_inputs, tmp_path / "run", resume=True))
    assert resumed["test"] == uninterrupted["test"]
    assert len((tmp_path / "run" / "history.csv").read_text().splitlines()) == 1 + 3


def test_evaluate_predict(finished_run, tiny_run_inputs, tmp_path, capsys):
    output, summary = finished_run
    assert main(["evaluate", "--model", str(output), "--data", tiny_run_inputs["test"],
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == summary["test"]["accuracy"]
    assert main(["predict", "--model", str(output), "这个好棒", "书店差"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["label"] for row in rows] == ["positive", "negative"]
    assert all(0.5 < row["probability"] <= 1 for row in rows)


@pytest.mark.slow
def test_bad_rows_fail_or_are_counted(tiny_run_inputs, tmp_path):
    rows = make_rows(64, 5)
    bad = tmp_path / "train.tsv"
    bad.write_text("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows)
                   + "positive\t\n\t没有标签\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train.tsv, line 66: empty 'text'"):
        train(train_options(tiny_run_inputs, tmp_path / "a", train=str(bad), epochs=1))
    summary = train(train_options(tiny_run_inputs, tmp_path / "b", train=str(bad), epochs=1,
                            skip_bad_rows=True))
    assert summary["skipped_rows"][str(bad)] == 2 and summary["train_examples"] == 64


def test_unseen_label_at_evaluation(finished_run, tmp_path):
    output, _ = finished_run
    path = write_tsv(tmp_path / "odd.tsv", [("positive", "好"), ("neutral", "书")])
    with pytest.raises(DataError, match=r"odd.tsv, line 3: label 'neutral' was not seen"):
        Run(str(output)).evaluate(path)


@pytest.mark.slow
def test_mirrored_strategy_on_two_cpus_matches_one_device(tiny_run_inputs, finished_run, tmp_path):
    _, single = finished_run
    got = run_python(f"""
        import json, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import sys; sys.path.insert(0, "tests")
        from kerasbert.tasks.classification.task import ClassificationOptions, train
        inputs = {tiny_run_inputs!r}
        summary = train(ClassificationOptions(
                            **inputs, output={str(tmp_path / 'mirrored')!r}, epochs=3,
                                     batch_size=16, lr=1e-2, maxlen=32, patience=0,
                                     strategy="mirrored", seed=1))
        print(json.dumps(summary["test"]))
    """)
    assert abs(got["accuracy"] - single["test"]["accuracy"]) <= 0.05


def test_a_diverging_run_stops_with_a_message(tiny_run_inputs, tmp_path):
    from kerasbert.training.callbacks import TrainingDiverged

    with pytest.raises(TrainingDiverged,
                       match=r"loss (nan|inf) in epoch 1, batch \d+: training diverged, so it "
                             r"was stopped; lower --lr \(1e\+12\)"):
        train(train_options(tiny_run_inputs, tmp_path / "run", lr=1e12, epochs=1))
    assert not (tmp_path / "run" / "metrics.json").exists()
    assert not (tmp_path / "run" / "model.keras").exists()


@pytest.mark.slow
def test_unseen_dev_and_test_labels_are_skipped_with_skip_bad_rows(tiny_run_inputs, tmp_path):
    odd = write_tsv(tmp_path / "dev.tsv", make_rows(32, 4) + [("neutral", "书店")])
    with pytest.raises(DataError, match=r"dev.tsv, line 34: label 'neutral' was not seen"):
        train(train_options(tiny_run_inputs, tmp_path / "a", dev=odd, epochs=1))
    assert not (tmp_path / "a").exists()  # checked before anything was written
    summary = train(train_options(tiny_run_inputs, tmp_path / "b", dev=odd, test=odd, epochs=1,
                            skip_bad_rows=True))
    assert summary["skipped_rows"][odd] == 1 and summary["dev"]["examples"] == 32


def test_a_run_whose_output_is_not_a_terminal_shows_progress_within_each_epoch(
        tiny_run_inputs, tmp_path, capsys, monkeypatch):
    """Piped (``make demo | tee``), Keras writes one line per epoch; a line at most every
    minute (here: every batch) shows a long epoch at work."""
    from kerasbert.cli import commands

    monkeypatch.setattr(commands, "PROGRESS_SECONDS", 0.0)
    flags = [f"--{key}={value}" for key, value in tiny_run_inputs.items()]
    assert main(["train", *flags, "--output", str(tmp_path / "run"), "--epochs", "1",
                 "--batch-size", "128", "--maxlen", "16"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("epoch 1/1: batch ")]
    assert [line.split(",")[0] for line in lines] == ["epoch 1/1: batch 1/3",
                                                       "epoch 1/1: batch 2/3",
                                                       "epoch 1/1: batch 3/3"], lines
    assert all(", loss " in line and line.endswith(" s") for line in lines)


def test_kerasbert_train_checks_and_resolves_its_options_once_and_reads_its_config_once(
        tiny_run_inputs, tmp_path, monkeypatch):
    """The flags are checked once, resolved once (the model's defaults file read once), and
    ``bert_config.json`` is parsed once: every later step takes the resolved options."""
    from kerasbert.models.config import BertConfig
    from kerasbert.tasks import options as task_options

    calls = {"validate": 0, "resolve": 0, "model_defaults": 0}
    for name in calls:  # under every name a module of the package imported it as
        original = getattr(task_options, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        for module in [module for key, module in sys.modules.items()
                       if key.startswith("kerasbert")]:
            for attribute, value in list(vars(module).items()):
                if value is original:
                    monkeypatch.setattr(module, attribute, counted)
    read = []
    parse = BertConfig.from_json_file.__func__

    def from_json_file(cls, path, *args, **kwargs):
        read.append(str(path))
        return parse(cls, path, *args, **kwargs)

    monkeypatch.setattr(BertConfig, "from_json_file", classmethod(from_json_file))
    flags = [f"--{key}={value}" for key, value in tiny_run_inputs.items()]
    assert main(["train", *flags, "--output", str(tmp_path / "run"), "--epochs", "1",
                 "--batch-size", "128", "--maxlen", "16"]) == 0
    assert calls == {"validate": 1, "resolve": 1, "model_defaults": 1}
    assert read == [tiny_run_inputs["config"]]
