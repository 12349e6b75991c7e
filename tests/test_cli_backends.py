"""The command line on Keras's JAX and PyTorch backends: what does not run there (export,
pretrain, TensorFlow's multi-worker strategy; mirrored on PyTorch) is refused by name in
one line before any work, nothing written; a run of each task trained on JAX or PyTorch,
killed with SIGKILL after its first epoch, resumes there bit for bit, then evaluates and
predicts the same there and on TensorFlow; a JAX run exports on TensorFlow and serves the
same answers; ``--strategy
mirrored`` on two JAX devices trains as one device does. Each command in a fresh process
with ``KERAS_BACKEND`` set, as a user meets it."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(os.path.dirname(sys.executable), "kerasbert")
SMALL = os.path.join(ROOT, "kerasbert", "resources", "kerasbert-zh-small")


def kerasbert(argv, backend, cwd, **variables):
    env = {**os.environ, "KERAS_BACKEND": backend, **variables}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("argv, named", [
    (["train", "--strategy", "multi-worker", "--output", "run"], "--strategy multi-worker"),
    (["export", "--model", "run", "--to", "served"], "kerasbert export"),
    (["pretrain", "--corpus", "corpus.txt", "--output", "run", "--config",
      os.path.join(SMALL, "bert_config.json"), "--vocab", os.path.join(SMALL, "vocab.txt")],
     "kerasbert pretrain"),
])
def test_what_runs_on_tensorflow_only_is_refused_by_name(tmp_path, backend, argv, named):
    done = kerasbert(argv, backend, tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert re.fullmatch(rf"kerasbert {argv[0]}: unsupported backend in "
                        rf"KERAS_BACKEND={backend}: .*{re.escape(named)}.*", lines[0]), lines[0]
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_torch_refuses_mirrored_by_name(tmp_path):
    done = kerasbert(["train", "--strategy", "mirrored", "--output", "run"], "torch", tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "kerasbert train: unsupported backend in KERAS_BACKEND=torch: --strategy mirrored runs "
        "on TensorFlow's backend only (on torch: none); set KERAS_BACKEND=tensorflow (the "
        "default) for it\n")
    assert os.listdir(tmp_path) == []


@pytest.mark.backends
def test_mirrored_on_two_jax_devices_trains_as_one_device(tmp_path):
    """Why slow: the shipped model fine-tuned for an epoch of 33 reviews (an odd last batch)
    on JAX twice, once over two host devices by ``--strategy mirrored``, then asked."""
    two = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    answers = {}
    for run, strategy in (("one", []), ("two", ["--strategy", "mirrored"])):
        train = kerasbert(["train", "--output", run, "--epochs", "1", "--max-train-examples",
                           "33", "--batch-size", "8", "--maxlen", "64", *strategy], "jax",
                          tmp_path, **two)
        assert train.returncode == 0, train.stderr[-3000:]
        done = kerasbert(["predict", "--model", run, *TEXTS], "jax", tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        answers[run] = [json.loads(line)["probability"] for line in done.stdout.splitlines()]
    options = json.loads((tmp_path / "two" / "train_config.json").read_text())
    assert options["strategy"] == "mirrored"
    assert answers["two"] == pytest.approx(answers["one"], abs=1e-4)


#: Reviews a classification run is asked.
TEXTS = ["这家酒店很好", "房间太脏了"]


@pytest.mark.backends
def test_a_run_trained_on_jax_predicts_exports_and_serves_the_same_on_tensorflow(tmp_path):
    """Why slow: the shipped model fine-tuned for an epoch on 64 reviews under JAX, then
    evaluated and asked on both backends, exported on TensorFlow and served."""
    train = kerasbert(["train", "--output", "run", "--epochs", "1", "--max-train-examples",
                       "64"], "jax", tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0 <= metrics["test"]["accuracy"] <= 1
    answers = {}
    for backend in ("jax", "tensorflow"):
        done = kerasbert(["predict", "--model", "run", *TEXTS], backend, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        answers[backend] = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["label"] for a in answers["jax"]] == [a["label"] for a in answers["tensorflow"]]
    for here, there in zip(answers["jax"], answers["tensorflow"]):
        assert abs(here["probability"] - there["probability"]) < 1e-5
    export = kerasbert(["export", "--model", "run", "--to", "served"], "tensorflow", tmp_path)
    assert export.returncode == 0, export.stderr[-3000:]
    served = subprocess.run([sys.executable, "-c", _SERVE, str(tmp_path / "served" / "1"),
                             *TEXTS], capture_output=True, text=True, timeout=600, check=False)
    assert served.returncode == 0, served.stderr[-3000:]
    for answer, (label, probabilities) in zip(answers["jax"], json.loads(served.stdout)):
        assert answer["label"] == label
        assert abs(answer["probability"] - max(probabilities)) < 1e-5


#: A SavedModel's classify signature asked in a process that imports no kerasbert.
_SERVE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401 (the WordPiece op, built into TF Serving)
classify = tf.saved_model.load(sys.argv[1]).signatures["classify"]
out = classify(text=tf.constant(sys.argv[2:]))
print(json.dumps([[label.decode(), row] for label, row in
                  zip(out["label"].numpy(), out["probabilities"].numpy().tolist())]))
"""


#: What each task's run is asked, and the field of its answer compared between backends.
ASKED = {"ner": (["江泽民在北京会见了新华社记者。"], "entities"),
         "qa": (["这句话提到的人是谁？", "江泽民在北京会见了新华社记者。"], "score"),
         "similarity": (["克林顿", "江泽民"], "similarity"),
         "seq2seq": (["江泽民在北京会见了新华社记者。这句话提到的人是谁？"], "output")}


@pytest.mark.backends
@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("task", sorted(ASKED))
def test_every_task_resumes_evaluates_and_predicts_there_as_on_tensorflow(tmp_path, backend,
                                                                          task):
    """Why slow: the shipped model fine-tuned for two epochs of 32 examples on the task's
    shipped data, on JAX or PyTorch, twice (once killed with SIGKILL after its first epoch
    and resumed), then evaluated and asked on that backend and on TensorFlow."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import test_kills

    argv = ["train", "--task", task, "--epochs", "2", "--max-train-examples", "32",
            "--batch-size", "16", "--maxlen", "64", "--patience", "0"]
    reference = kerasbert([*argv, "--output", "reference"], backend, tmp_path)
    assert reference.returncode == 0, reference.stderr[-3000:]
    process = subprocess.Popen([CLI, *argv, "--output", "run"], cwd=tmp_path, text=True,
                               env={**os.environ, "KERAS_BACKEND": backend,
                                    "KERASBERT_PAUSE_AT": "epoch-end@1"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert any(line.startswith("paused at ") for line in process.stderr)
    finally:
        process.kill()
        process.wait()
    resumed = kerasbert([*argv, "--output", "run", "--resume"], backend, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    test_kills.assert_same_run(str(tmp_path / "run"), str(tmp_path / "reference"))
    dev = json.loads((tmp_path / "run" / "train_config.json").read_text())["dev"]
    texts, field = ASKED[task]
    scores, answers = {}, {}
    for on in (backend, "tensorflow"):
        done = kerasbert(["evaluate", "--model", "run", "--data", dev, "--json"], on, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        scores[on] = json.loads(done.stdout)
        done = kerasbert(["predict", "--model", "run", *texts], on, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        answers[on] = json.loads(done.stdout.splitlines()[0])[field]
    assert_close(scores[backend], scores["tensorflow"])
    assert_close(answers[backend], answers["tensorflow"], field)


def assert_close(here, there, where="scores"):
    """``here`` equals ``there`` (nested JSON) but for floats within 1e-5 relative."""
    if isinstance(there, dict):
        assert sorted(here) == sorted(there), where
        for key in there:
            assert_close(here[key], there[key], f"{where}[{key!r}]")
    elif isinstance(there, list):
        assert len(here) == len(there), where
        for index, (a, b) in enumerate(zip(here, there)):
            assert_close(a, b, f"{where}[{index}]")
    elif isinstance(there, float):
        assert abs(here - there) <= 1e-5 * max(1.0, abs(there)), (where, here, there)
    else:
        assert here == there, (where, here, there)


@pytest.mark.backends
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_run_killed_there_resumes_bit_exact(tmp_path, monkeypatch, backend):
    """Why slow: three real training processes of a tiny model with dropout on (one
    uninterrupted, one killed with SIGKILL after its second epoch's history, the resume),
    each importing its backend."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import test_kills

    monkeypatch.setenv("KERAS_BACKEND", backend)  # test_kills's processes take it
    inputs = test_kills.make_inputs(str(tmp_path / "inputs"))
    reference, output = str(tmp_path / "reference"), str(tmp_path / "run")
    code, stderr = test_kills.run_to_end(["train", *inputs, *test_kills.TRAIN, "--output",
                                          reference])
    assert code == 0, stderr[-3000:]
    args = ["train", *inputs, *test_kills.TRAIN, "--output", output]
    test_kills.kill_at(args, "epoch-end@2")
    code, stderr = test_kills.run_to_end(args + ["--resume"])
    assert code == 0, stderr[-3000:]
    test_kills.assert_same_run(output, reference)
