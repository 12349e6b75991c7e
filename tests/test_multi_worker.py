"""``kerasbert train --strategy multi-worker`` on two real worker processes of this machine.

A chief and a worker (``TF_CONFIG`` each, loopback ports, CPU only) fine-tune the tiny
model with a global batch of 16 (8 rows on each worker) and are compared with one
process training on the same batches of 16: every weight of the backbone checkpoint
within ``TOLERANCE``, the dev and test metrics equal. Then both workers are killed
with SIGKILL after the first backup, refused without ``--resume``, and resumed: the
result is bit for bit the uninterrupted two-worker run's.

Dropout is off (the hidden and the attention dropout of the config, and the
classifier's), so the only difference from one process is the order of the float32
sums: each worker averages its 8 rows, the two averages are then summed. Measured:
at most 1.2e-7 on any weight after 24 updates. ``TOLERANCE`` is 1e-5, 80 times that
noise and 3,000 times below the 3e-2 that clipping each worker's half of the gradient,
instead of the sum, produced in this very run.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from test_kills import _env, assert_same_run, checkpoint_arrays, command, make_inputs  # noqa: E402

pytestmark = pytest.mark.slow  # real processes, killed with SIGKILL

TRAIN = ["--epochs", "2", "--batch-size", "16", "--lr", "1e-2", "--maxlen", "32",
         "--patience", "0", "--seed", "1", "--dropout", "0"]
TOLERANCE = 1e-5
TIMEOUT = 240  # seconds for one two-process run; a hung collective fails the test, not CI
RUN_FILES = {"model.keras", "bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001",
             "labels.json", "vocab.txt", "bert_config.json", "train_config.json",
             "history.json", "history.csv", "metrics.json", "confusion_matrix.png",
             "training_curves.png", "fingerprints.json"}


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class Cluster:
    """A chief and a worker running ``kerasbert train`` on this machine, each with its
    own ``TF_CONFIG``, ``--output`` and ``TMPDIR``."""

    def __init__(self, root, name, args, outputs, pause=None):
        chief, worker = free_ports(2)
        cluster = {"chief": [f"localhost:{chief}"], "worker": [f"localhost:{worker}"]}
        self.tasks, self.logs, self.temporaries, self.processes = ("chief", "worker"), [], [], []
        for task, output in zip(self.tasks, outputs):
            temporary = root / f"{name}-{task}-tmp"
            temporary.mkdir()
            env = _env(TF_CONFIG=json.dumps({"cluster": cluster,
                                             "task": {"type": task, "index": 0}}),
                       TMPDIR=str(temporary))
            if pause:
                env["KERASBERT_PAUSE_AT"] = pause
            log = root / f"{name}-{task}.log"
            with open(log, "w") as f:
                self.processes.append(subprocess.Popen(
                    command("train", *args, "--strategy", "multi-worker", "--output",
                            str(output)), cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT))
            self.logs.append(log)
            self.temporaries.append(temporary)

    def output(self, task):
        return self.logs[self.tasks.index(task)].read_text(encoding="utf-8", errors="replace")

    def wait(self):
        """Both exit codes; both processes are killed if they outlast ``TIMEOUT``."""
        deadline = time.time() + TIMEOUT
        try:
            return [p.wait(timeout=max(1, deadline - time.time())) for p in self.processes]
        finally:
            self.kill()

    def kill_when_paused(self, point):
        """Waits until both processes pause at ``point``, then kills both with SIGKILL."""
        deadline = time.time() + TIMEOUT
        try:
            while not all(f"paused at {point}" in self.output(t) for t in self.tasks):
                ended = [p.poll() for p in self.processes]
                assert None in ended and time.time() < deadline, (
                    f"no pause at {point} (exit codes {ended}):\n" + self.output("chief")[-3000:])
                time.sleep(0.5)
        finally:
            self.kill()
        assert [p.returncode for p in self.processes] == [-signal.SIGKILL] * 2

    def kill(self):
        for p in self.processes:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()


def run_cluster(root, name, args, outputs):
    cluster = Cluster(root, name, args, outputs)
    codes = cluster.wait()
    assert codes == [0, 0], "\n".join(cluster.output(t)[-3000:] for t in cluster.tasks)
    return cluster


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Inputs without any dropout, a one-process run and an uninterrupted two-worker run."""
    from kerasbert.cli.main import main

    root = tmp_path_factory.mktemp("multi_worker")
    inputs = make_inputs(str(root / "inputs"))
    config = inputs[inputs.index("--config") + 1]
    with open(config) as f:
        values = json.load(f)
    values.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with open(config, "w") as f:
        json.dump(values, f)
    args = [*inputs, *TRAIN]
    assert main(["train", *args, "--output", str(root / "single")]) == 0
    cluster = run_cluster(root, "two", args, [root / "two", root / "two-worker-output"])
    return root, args, cluster


def test_two_workers_train_like_one_process(runs):
    """Why slow: its fixture (the first test of the module to ask for it pays) trains the
    tiny model in this process and again in a cluster of two fresh worker processes."""
    root, _, cluster = runs
    single, chief = root / "single", root / "two"
    got, want = (checkpoint_arrays(str(d / "bert_model.ckpt")) for d in (chief, single))
    assert sorted(got) == sorted(want)
    worst = max(float(np.max(np.abs(got[name] - want[name]))) for name in want)
    assert worst <= TOLERANCE, f"weights differ by {worst:.2e}"
    history = [json.loads((d / "history.json").read_text()) for d in (chief, single)]
    assert history[0].keys() == history[1].keys()
    for key in history[1]:
        np.testing.assert_allclose(history[0][key], history[1][key], rtol=TOLERANCE, err_msg=key)
    metrics = [json.loads((d / "metrics.json").read_text()) for d in (chief, single)]
    assert metrics[0]["dev"] == metrics[1]["dev"] and metrics[0]["test"] == metrics[1]["test"]

    # Only the chief writes: its run directory is whole; the worker never created its
    # --output and removed its temporary folder.
    assert set(os.listdir(chief)) == RUN_FILES
    assert not (root / "two-worker-output").exists()
    assert [os.listdir(t) for t in cluster.temporaries] == [[], []]
    # Both finished the same run: the same summary line.
    lines = [next(line for line in cluster.output(t).splitlines() if line.startswith("test "))
             for t in cluster.tasks]
    assert lines[0] == lines[1]


def test_killed_workers_resume_from_the_chief_to_the_same_result(runs):
    """Both on one --output, as on a shared filesystem; only the chief writes there.

    Why slow: two real worker processes are started, killed together and started again."""
    root, args, _ = runs
    output = root / "killed"
    Cluster(root, "kill", args, [output, output], pause="epoch-end@2").kill_when_paused(
        "epoch-end")
    assert (output / "backup" / "epoch-0001").is_dir()  # epoch 2 ran, was never backed up

    # A check that fails on the chief stops the worker too, with the chief's reason.
    refused = Cluster(root, "refused", args, [output, output])
    assert refused.wait() == [2, 2]
    reason = "holds an interrupted run; pass --resume"
    assert reason in refused.output("chief")
    assert reason in refused.output("worker") and "(on the chief; every worker stops)" in (
        refused.output("worker"))

    # The worker has no backup of its own: it resumes from the chief's, sent to it.
    resumed = run_cluster(root, "resumed", [*args, "--resume"], [output, output])
    assert_same_run(str(output), str(root / "two"))
    assert [os.listdir(t) for t in resumed.temporaries] == [[], []]
