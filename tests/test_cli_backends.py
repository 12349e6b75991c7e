"""The command line on Keras's JAX and PyTorch backends: what does not run there (export,
pretrain, TensorFlow's strategies) is refused by name in one line before any work, nothing
written; a run of each task trained on JAX or PyTorch predicts the same there and on
TensorFlow; a run killed with SIGKILL resumes there bit for bit. Each command in a fresh
process with ``KERAS_BACKEND`` set, as a user meets it."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(os.path.dirname(sys.executable), "kerasbert")
SMALL = os.path.join(ROOT, "kerasbert", "resources", "kerasbert-zh-small")


def kerasbert(argv, backend, cwd):
    env = {**os.environ, "KERAS_BACKEND": backend}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("argv, named", [
    (["train", "--strategy", "mirrored", "--output", "run"], "--strategy mirrored"),
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


@pytest.mark.backends
def test_a_run_trained_on_jax_predicts_the_same_on_tensorflow(tmp_path):
    """Why slow: the shipped model fine-tuned for an epoch on 64 reviews under JAX, then
    evaluated and asked on both backends."""
    train = kerasbert(["train", "--output", "run", "--epochs", "1", "--max-train-examples",
                       "64"], "jax", tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0 <= metrics["test"]["accuracy"] <= 1
    answers = {}
    for backend in ("jax", "tensorflow"):
        done = kerasbert(["predict", "--model", "run", "这家酒店很好", "房间太脏了"], backend,
                         tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        answers[backend] = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["label"] for a in answers["jax"]] == [a["label"] for a in answers["tensorflow"]]
    for here, there in zip(answers["jax"], answers["tensorflow"]):
        assert abs(here["probability"] - there["probability"]) < 1e-5


#: What each task's run is asked, and the field of its answer compared between backends.
ASKED = {"ner": (["江泽民在北京会见了新华社记者。"], "entities"),
         "qa": (["这句话提到的人是谁？", "江泽民在北京会见了新华社记者。"], "score"),
         "similarity": (["克林顿", "江泽民"], "similarity"),
         "seq2seq": (["江泽民在北京会见了新华社记者。这句话提到的人是谁？"], "output")}


@pytest.mark.backends
@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("task", sorted(ASKED))
def test_every_task_trains_there_and_predicts_the_same_on_tensorflow(tmp_path, backend, task):
    """Why slow: the shipped model fine-tuned for a step of 32 examples on the task's
    shipped data, on JAX or PyTorch, then asked on that backend and on TensorFlow."""
    train = kerasbert(["train", "--task", task, "--output", "run", "--epochs", "1",
                       "--max-train-examples", "32", "--maxlen", "64"], backend, tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    texts, field = ASKED[task]
    answers = {}
    for on in (backend, "tensorflow"):
        done = kerasbert(["predict", "--model", "run", *texts], on, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        answers[on] = json.loads(done.stdout.splitlines()[0])[field]
    here, there = answers[backend], answers["tensorflow"]
    if isinstance(here, float):
        assert abs(here - there) < 1e-5 * max(1.0, abs(there)), (here, there)
    else:
        assert here == there


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
