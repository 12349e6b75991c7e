"""The command line on Keras's JAX and PyTorch backends: what does not run there (export,
pretrain, the tasks other than classification, TensorFlow's strategies) is refused by name
in one line before any work, nothing written; a classification run trained on JAX evaluates
and predicts on JAX and on TensorFlow alike. Each command in a fresh process with
``KERAS_BACKEND`` set, as a user meets it."""

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
    (["train", "--task", "ner", "--output", "run"], "--task ner"),
    (["train", "--task", "seq2seq", "--output", "run"], "--task seq2seq"),
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
