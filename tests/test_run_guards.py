"""One run directory, one process; a changed input or run file is noticed; a stopped run can
be started again on purpose.

Real ``kerasbert`` processes on a tiny model: a second process is refused while the first
trains (its pid named), SIGTERM stops a run in one line and ``--resume`` continues it, a
training file edited between the two (same size) is refused, ``./runs/x`` and ``runs/x``
are one folder, ``--restart`` replaces a run, and ``evaluate`` / ``predict`` refuse a run
whose ``labels.json`` or ``vocab.txt`` was replaced. A ``kill -9`` leaves no stale lock:
every resume of ``tests/test_kills.py`` takes the lock the killed process held.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from test_kills import TRAIN, _env, command, make_inputs  # noqa: E402

SHORT = [*TRAIN[:1], "2", *TRAIN[2:]]  # two epochs


def run(*args, cwd=ROOT):
    result = subprocess.run(command(*args), cwd=cwd, env=_env(), capture_output=True, text=True,
                            timeout=600)
    return result.returncode, result.stdout, result.stderr.splitlines()


def errors(lines):
    """stderr without the warning lines."""
    return [line for line in lines if ": warning: " not in line]


def paused(args, point):
    """A process of ``args`` that has stopped at ``point``."""
    process = subprocess.Popen(command(*args), cwd=ROOT, env=_env(KERASBERT_PAUSE_AT=point),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if line.startswith("paused at "):
            return process
    raise AssertionError(f"the run ended (exit {process.wait()}) without pausing at {point}")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_inputs(str(tmp_path_factory.mktemp("inputs")))


@pytest.fixture(scope="module")
def finished(inputs, tmp_path_factory):
    output = str(tmp_path_factory.mktemp("runs") / "finished")
    code, _, stderr = run("train", *inputs, *SHORT, "--output", output)
    assert code == 0, stderr
    return output


def _file(inputs, flag):
    return inputs[inputs.index(flag) + 1]


@pytest.mark.slow
def test_one_process_per_run_sigterm_then_resume_and_changed_input(inputs, tmp_path):
    """Why slow: five real processes (the run, two refused beside it, a refused resume of an
    edited input, the resume to the end), as a user meets the lock and SIGTERM."""
    output = tmp_path / "runs" / "x"
    spelled = os.path.join(os.path.relpath(tmp_path, ROOT), ".", "runs", "x")
    first = paused(["train", *inputs, *SHORT, "--output", str(output)], "backup-written@1")
    try:
        # A second run, and a resume, while the first still trains: one line with its pid.
        for more in ([], ["--resume"]):
            code, _, stderr = run("train", *inputs, *SHORT, "--output", spelled, *more)
            assert code == 2 and len(stderr) == 1, stderr
            assert f"pid {first.pid}" in stderr[0] and "is training in it" in stderr[0]
        first.send_signal(signal.SIGTERM)
        rest = first.stderr.read().splitlines()
        assert first.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if first.poll() is None:
            first.kill()
    assert len(rest) == 1 and "interrupted by SIGTERM" in rest[0] and "--resume" in rest[0], rest
    assert os.path.isdir(output / "backup")

    # The training file edited (one label swapped: the same size) is refused by name...
    train = _file(inputs, "--train")
    with open(train, encoding="utf-8") as f:
        original = f.read()
    edited = original.replace("positive", "negative", 1)
    assert len(edited) == len(original) and edited != original
    try:
        with open(train, "w", encoding="utf-8") as f:
            f.write(edited)
        code, _, stderr = run("train", *inputs, *SHORT, "--output", spelled, "--resume")
        assert code == 2 and len(stderr) == 1, stderr
        assert f"input in {train}: changed (same size" in stderr[0]
        assert "--accept-changed" in stderr[0] and "--restart" in stderr[0]
    finally:
        with open(train, "w", encoding="utf-8") as f:
            f.write(original)
    # ... and the run, resumed under another spelling of its folder, finishes.
    code, _, stderr = run("train", *inputs, *SHORT, "--output", spelled, "--resume")
    assert code == 0, stderr
    assert os.path.exists(output / "metrics.json") and not os.path.exists(output / "backup")


@pytest.mark.slow
def test_restart_replaces_a_run_on_purpose(inputs, finished, tmp_path):
    """Why slow: the refusals, the restarted run and the evaluation of its model are each a
    real process, as a user's commands are."""
    output = str(tmp_path / "again")
    shutil.copytree(finished, output)
    code, _, stderr = run("train", *inputs, *SHORT, "--output", output)
    assert code == 2 and "holds a finished run" in stderr[0] and "--restart" in stderr[0]
    code, _, stderr = run("train", *inputs, *SHORT, "--output", output, "--resume", "--restart")
    assert code == 2 and "conflicting options in --resume and --restart" in stderr[0], stderr
    # The user's own file in the run folder: not the run's, so --restart keeps it.
    earlier = sorted(os.listdir(output))
    with open(os.path.join(output, "notes.txt"), "w") as f:
        f.write("the user's notes")
    started = time.time()
    code, _, stderr = run("train", *inputs, *SHORT, "--output", output, "--restart", "--lr",
                          "5e-3")
    assert code == 0, stderr
    assert [line for line in stderr if "kept notes.txt (not written by the run)" in line]
    with open(os.path.join(output, "notes.txt")) as f:
        assert f.read() == "the user's notes"
    with open(os.path.join(output, "train_config.json")) as f:
        assert json.load(f)["lr"] == 5e-3
    # Every file of the earlier run was removed; those there now are the new run's.
    assert sorted(os.listdir(output)) == sorted(earlier + ["notes.txt"])
    assert all(os.path.getmtime(os.path.join(output, name)) >= started for name in earlier)
    assert not [name for name in os.listdir(output) if name.startswith(".")]
    # The kept file is not the run's: editing it leaves the run usable; a second restart
    # keeps it again.
    with open(os.path.join(output, "notes.txt"), "a") as f:
        f.write(", edited")
    code, _, stderr = run("evaluate", "--model", output, "--data", _file(inputs, "--test"))
    assert code == 0, stderr
    with open(os.path.join(output, "fingerprints.json")) as f:
        recorded = json.load(f)
    assert "notes.txt" not in recorded["outputs"] and "notes.txt" not in recorded["written"]


@pytest.mark.slow
def test_a_replaced_run_file_is_refused(inputs, finished, tmp_path):
    test = _file(inputs, "--test")
    labels = os.path.join(finished, "labels.json")
    with open(labels, encoding="utf-8") as f:
        original = f.read()
    names = json.loads(original)
    try:
        with open(labels, "w", encoding="utf-8") as f:
            f.write(original.replace(names[0], "@" * len(names[0])).replace(names[1], names[0])
                    .replace("@" * len(names[0]), names[1]))
        code, _, stderr = run("predict", "--model", finished, "好棒")
        assert code == 2 and len(stderr) == 1, stderr
        assert f"run file in {labels}: changed (same size" in stderr[0]
        code, stdout, stderr = run("predict", "--model", finished, "好棒", "--accept-changed")
        assert code == 0 and not errors(stderr) and "--accept-changed" in stderr[0], stderr
        assert json.loads(stdout)["label"] in names
    finally:
        with open(labels, "w", encoding="utf-8") as f:
            f.write(original)
    vocab = os.path.join(finished, "vocab.txt")
    shutil.copy(vocab, tmp_path / "vocab.txt")
    try:
        with open(vocab, encoding="utf-8") as f:
            tokens = f.read().split("\n")
        tokens[-2], tokens[-3] = tokens[-3], tokens[-2]  # two characters' ids swapped
        with open(vocab, "w", encoding="utf-8") as f:
            f.write("\n".join(tokens))
        code, _, stderr = run("evaluate", "--model", finished, "--data", test)
        assert code == 2 and len(stderr) == 1 and f"run file in {vocab}" in stderr[0], stderr
    finally:
        shutil.copy(tmp_path / "vocab.txt", vocab)
    code, _, stderr = run("evaluate", "--model", finished, "--data", test)
    assert code == 0, stderr


@pytest.mark.slow
def test_a_refused_run_says_only_why(inputs, tmp_path):
    # Without --checkpoint the run warns of random weights, but only once it can start.
    changed = list(inputs)
    del changed[changed.index("--checkpoint"):changed.index("--checkpoint") + 2]
    changed[changed.index("--train") + 1] = str(tmp_path / "missing.tsv")
    code, _, stderr = run("train", *changed, *SHORT, "--output", str(tmp_path / "run"))
    assert code == 2 and len(stderr) == 1 and "missing.tsv" in stderr[0], stderr
    assert not os.path.exists(tmp_path / "run")


# ---------------------------------------------------------------- fast, in this process
def test_paths_of_a_resumed_run_are_compared_as_files(tmp_path):
    from kerasbert.training.rundir import same_path

    assert same_path("runs/x", "./runs/x") and same_path("runs/x/", "runs/../runs/x")
    assert not same_path("runs/x", "runs/y")


def test_options_that_cannot_go_together(tmp_path):
    from kerasbert.tasks.classification.options import ClassificationOptions
    from kerasbert.training.options import OptionError, validate

    with pytest.raises(OptionError, match=r"conflicting options in --resume and --restart"):
        validate(ClassificationOptions(output="x", resume=True, restart=True), flags=True)
    with pytest.raises(OptionError, match=r"invalid option in --accept-changed: only with "):
        validate(ClassificationOptions(output="x", accept_changed=True), flags=True)


def test_the_lock_names_its_holder_and_dies_with_it(tmp_path):
    from kerasbert.training.rundir import RunError, lock, unlock

    folder = tmp_path / "run"
    folder.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"d = os.open({str(folder)!r}, os.O_RDONLY); fcntl.flock(d, fcntl.LOCK_EX)\n"
         "print('held', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunError, match=rf"--output in .*run: another kerasbert process "
                                           rf"\(pid {holder.pid}\) is training in it"):
            lock(str(folder))
    finally:
        holder.kill()
        holder.wait()
    lock(str(folder))  # the kernel released the killed holder's lock
    lock(str(folder))  # this process holds it already: nothing to do
    unlock(str(folder))


def test_a_family_other_than_the_configs_is_named(tmp_path):
    from conftest import TINY
    from kerasbert import BertConfig

    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(TINY, model_type="electra")))
    with pytest.raises(ValueError, match=r"model_type \('electra'\) in .*config.json: another "
                                         r"family than model='bert' \(--model bert\), which "
                                         r"builds model_type 'bert'; leave the family out"):
        BertConfig.from_json_file(path, family="bert")
    path.write_text(json.dumps(dict(TINY, hidden_size=30, num_attention_heads=2)))
    with pytest.raises(ValueError, match=r"hidden_size \(30\) in .*: roformer's rotary positions "
                                         r".*= 15\) must be even"):
        BertConfig.from_json_file(path, family="roformer")


def test_warnings_of_a_command_that_fails_are_not_shown(tmp_path, capsys):
    from conftest import TINY, make_rows, write_tsv
    from kerasbert.cli.main import main

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "好"]) + "\n")
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(dict(TINY, vocab_size=5)))
    train = tmp_path / "train.tsv"
    train.write_text("label\ttext\npositive\t好\n\t好\nnegative\t坏\n", encoding="utf-8")
    dev = write_tsv(tmp_path / "dev.tsv", make_rows(4, 0)).replace("dev.tsv", "dev-x.tsv")
    (tmp_path / "dev-x.tsv").write_text("labels\ttext\npositive\t好\n", encoding="utf-8")
    # The skipped row of --train warns, then the dev file's header fails: one line only.
    code = main(["train", "--config", str(config), "--vocab", str(vocab), "--train", str(train),
                 "--dev", dev, "--skip-bad-rows", "--maxlen", "16", "--output",
                 str(tmp_path / "run")])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and "dev-x.tsv" in err[0] and ": warning:" not in err[0]
    assert not (tmp_path / "run").exists()
