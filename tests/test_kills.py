"""``kill -9`` of real ``kerasbert train`` / ``pretrain`` processes, then ``--resume``.

Each run is a subprocess of the command line. ``KERASBERT_PAUSE_AT`` makes it stop at
a named point (in the middle of writing the backup, between the history and the
model, while finishing ...); the test kills it there with SIGKILL, resumes it, and
compares the result with an uninterrupted run bit for bit: every variable of the
written checkpoint, the history and the metrics. Dropout is on.

``python tests/test_kills.py --random 24`` kills runs at random moments instead and
prints how many kills ended in a run that could not be resumed.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from conftest import make_rows, write_tsv  # noqa: E402

pytestmark = pytest.mark.slow  # real processes, killed with SIGKILL

TRAIN = ["--epochs", "3", "--batch-size", "16", "--lr", "1e-2", "--maxlen", "32",
         "--patience", "0", "--seed", "1", "--dropout", "0.1"]


def make_inputs(root):
    """A tiny model (random weights, Google checkpoint) and train/dev/test files."""
    from conftest import BAD, GOOD, NEUTRAL, TINY

    os.makedirs(root, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(GOOD + BAD + NEUTRAL))
    with open(os.path.join(root, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    config = dict(TINY, vocab_size=len(vocab))
    with open(os.path.join(root, "bert_config.json"), "w") as f:
        json.dump(config, f)
    script = (f"import json, keras, kerasbert\nkeras.utils.set_random_seed(0)\n"
              f"kerasbert.save_weights_as_checkpoint(kerasbert.build_transformer_model("
              f"json.load(open({os.path.join(root, 'bert_config.json')!r})), with_pool=True), "
              f"{os.path.join(root, 'bert_model.ckpt')!r})\n")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, env=_env(),
                   capture_output=True)
    from pathlib import Path

    return ["--config", os.path.join(root, "bert_config.json"),
            "--checkpoint", os.path.join(root, "bert_model.ckpt"),
            "--vocab", os.path.join(root, "vocab.txt"),
            "--train", write_tsv(Path(root) / "train.tsv", make_rows(192, 1)),
            "--dev", write_tsv(Path(root) / "dev.tsv", make_rows(48, 2)),
            "--test", write_tsv(Path(root) / "test.tsv", make_rows(48, 3))]


def _env(**more):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", CI="1",
               PYTHONPATH=ROOT)
    env.pop("KERASBERT_PAUSE_AT", None)
    env.update(more)
    return env


def command(*args):
    return [sys.executable, "-m", "kerasbert.cli.main", *args]


def run_to_end(args):
    result = subprocess.run(command(*args), cwd=ROOT, env=_env(), capture_output=True, text=True,
                            timeout=600)
    return result.returncode, result.stderr


def kill_at(args, point, timeout=300):
    """Starts ``args``, waits until it pauses at ``point``, kills it with SIGKILL."""
    process = subprocess.Popen(command(*args), cwd=ROOT, env=_env(KERASBERT_PAUSE_AT=point),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    try:
        for line in process.stderr:
            if line.startswith("paused at "):
                break
            if time.time() > deadline:
                break
        else:
            raise AssertionError(
                f"the run ended (exit {process.wait()}) without pausing at {point}")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL


def kill_after(args, seconds):
    """Starts ``args`` and kills it with SIGKILL after ``seconds``; True if it was still running."""
    process = subprocess.Popen(command(*args), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        process.wait(timeout=seconds)
        return False
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        return True


def checkpoint_arrays(prefix):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_same_run(run, reference):
    """Bit-identical weights, the same history and metrics, nothing left behind."""
    got, want = (checkpoint_arrays(os.path.join(d, "bert_model.ckpt")) for d in (run, reference))
    assert sorted(got) == sorted(want)
    for name in want:
        assert np.array_equal(got[name], want[name]), name
    for name in ("history.json", "metrics.json"):
        with open(os.path.join(run, name)) as a, open(os.path.join(reference, name)) as b:
            assert json.load(a) == json.load(b), name
    assert not os.path.exists(os.path.join(run, "backup"))
    assert not [n for n in os.listdir(run) if n.startswith(".")], os.listdir(run)


@pytest.fixture(scope="module")
def kill_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("kills")
    inputs = make_inputs(str(root / "inputs"))
    reference = str(root / "reference")
    code, stderr = run_to_end(["train", *inputs, *TRAIN, "--output", reference])
    assert code == 0, stderr
    return inputs, reference, root


# The moments of a 3-epoch run at which one run is killed, in the order they come: each
# process resumes the run the kill before it left, and is killed at the next moment. "@N" is
# the N-th time that process passes the point (a resumed process counts from its own start).
CHAIN = [
    ("model-write@1", "model.keras of epoch 1 written under its temporary name, no backup"),
    ("epoch-end@2", "history of epoch 2 written, its model and backup not yet"),
    ("backup-write@1", "epoch 2's backup half-way: the new folder not yet in place"),
    ("backup-written@1", "epoch 2's backup in place, epoch 1's not yet removed"),
    ("train-end", "training over, nothing of the finishing written"),
    ("write:bert_model.ckpt", "the backbone checkpoint written under a temporary name"),
    ("write:metrics.json", "everything but the finished mark written"),
]


def test_a_run_killed_at_every_moment_in_turn_resumes_bit_exact(kill_inputs, tmp_path):
    """Why slow: eight real processes (one run killed at seven moments, one after the other,
    and the resume that finishes it), each importing TensorFlow, besides the module's
    uninterrupted reference run. A kill of a resumed run is a kill too: each process
    continues what the kill before left, and the finished run equals the uninterrupted one
    bit for bit."""
    inputs, reference, _ = kill_inputs
    output = str(tmp_path / "run")
    args = ["train", *inputs, *TRAIN, "--output", output]
    for number, (point, _) in enumerate(CHAIN):
        kill_at(args + (["--resume"] if number else []), point)
        if number == 0:  # the refusal is the run folder's, the same after every kill
            code, stderr = run_to_end(args)
            assert code == 2 and "holds an interrupted run; pass --resume" in stderr
    code, stderr = run_to_end(args + ["--resume"])
    assert code == 0, stderr
    assert_same_run(output, reference)


def test_killed_while_removing_the_backup_is_a_finished_run(kill_inputs, tmp_path):
    inputs, reference, _ = kill_inputs
    output = str(tmp_path / "run")
    args = ["train", *inputs, *TRAIN, "--output", output]
    kill_at(args, "backup-removal")
    code, stderr = run_to_end(args + ["--resume"])
    assert code == 2 and "holds a finished run; choose a new --output" in stderr
    assert_same_run(output, reference)  # the leftover backup was removed


def test_killed_pretraining_resumes_bit_exact(tmp_path):
    """Why slow: three real pretraining processes: one runs to the end, one is killed with
    SIGKILL while writing its backup, and one resumes it to the same weights."""
    corpus = tmp_path / "corpus.txt"
    rows = make_rows(96, 7)
    corpus.write_text("".join(text + "\n" for _, text in rows), encoding="utf-8")
    inputs = make_inputs(str(tmp_path / "inputs"))
    config, vocab = inputs[1], inputs[5]
    args = ["pretrain", "--config", config, "--vocab", vocab, "--corpus", str(corpus),
            "--steps", "12", "--steps-per-epoch", "4", "--batch-size", "16", "--maxlen", "32",
            "--lr", "1e-3"]
    code, stderr = run_to_end(args + ["--output", str(tmp_path / "reference")])
    assert code == 0, stderr
    kill_at(args + ["--output", str(tmp_path / "run")], "backup-write@2")
    code, stderr = run_to_end(args + ["--output", str(tmp_path / "run"), "--resume"])
    assert code == 0, stderr
    got, want = (checkpoint_arrays(str(tmp_path / d / "bert_model.ckpt"))
                 for d in ("run", "reference"))
    for name in want:
        assert np.array_equal(got[name], want[name]), name


def random_kills(kills, seed=0, workdir=None):
    """Kills runs at random moments until ``kills`` kills; returns the figures."""
    import tempfile

    rng = random.Random(seed)
    root = workdir or tempfile.mkdtemp(prefix="kerasbert-kills-")
    inputs = make_inputs(os.path.join(root, "inputs"))
    reference = os.path.join(root, "reference")
    started = time.time()
    code, stderr = run_to_end(["train", *inputs, *TRAIN, "--output", reference])
    assert code == 0, stderr
    length = time.time() - started
    done = dead_ends = runs = 0
    while done < kills:
        runs += 1
        output = os.path.join(root, f"run-{runs}")
        args = ["train", *inputs, *TRAIN, "--output", output]
        resume = []
        while True:
            if done < kills and kill_after(args + resume, rng.uniform(2.0, length * 1.1)):
                done += 1
                print(f"kill {done} in run {runs}", flush=True)
                started = os.path.exists(os.path.join(output, "train_config.json"))
                resume = ["--resume"] if started else []
                continue
            code, stderr = run_to_end(args + resume)
            print(f"run {runs} ended: exit {code}", flush=True)
            if code != 0 and "finished run" not in stderr:
                dead_ends += 1
                print(f"dead end in {output}: {stderr.strip()}")
            else:
                try:
                    assert_same_run(output, reference)
                except AssertionError as error:
                    dead_ends += 1
                    print(f"differs from the uninterrupted run in {output}: {error}")
            break
    shutil.rmtree(root, ignore_errors=True)
    return {"kills": done, "runs": runs, "dead_ends": dead_ends, "run_seconds": round(length, 1)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=24, help="number of kills")
    parser.add_argument("--seed", type=int, default=0)
    print(json.dumps(random_kills(parser.parse_args().random, parser.parse_args().seed)))
