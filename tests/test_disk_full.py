"""A full disk: exit code 2, one line naming the folder and the bytes needed, nothing lost.

Each test writes onto a small tmpfs it mounts (root only: skipped otherwise) and
unmounts, whatever happens. Two ways to run out: the free space is checked before a big
write and found short; or the disk fills up in the middle of the write (the check is
switched off to get there), which HDF5 and TensorFlow report in their own words, or in a
crash at exit, when they are left to it.
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import types

import keras
import numpy as np
import pytest

from conftest import BAD, GOOD, NEUTRAL, TINY, make_rows, write_tsv
from kerasbert import build_transformer_model, disk_space, files
from kerasbert.cli.main import main
from kerasbert.models.heads import add_cls_classifier
from kerasbert.training.rundir import TRAIN_FINISHED_FILE, TRAIN_OPTIONS_FILE, RunDirectory
from test_convert import hf_directory, hf_weights

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AMOUNT = r"[\d.]+ (bytes|kB|MB|GB)"  # "12.3 MB"


@contextlib.contextmanager
def tmpfs(path, size):
    """A tmpfs of ``size`` (``"512k"``) mounted at ``path`` while the block runs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    os.makedirs(path, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], check=False).returncode:
            subprocess.run(["umount", "-l", str(path)], check=False)


def resize(path, size):
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


def no_check(monkeypatch):
    """Switches the free-space check off: the disk fills up in the middle of the write."""
    monkeypatch.setattr(disk_space, "check_space", lambda *args, **kwargs: None)


def one_line(stderr, command):
    """The one line of a failed command, its warnings left aside."""
    lines = [line for line in stderr.splitlines()
             if not line.startswith(f"kerasbert {command}: warning: ")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def run(argv, capsys):
    """``kerasbert`` in this process: its exit code and its one line of stderr (or None)."""
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    return code, one_line(err, argv[0]) if code else None


def leftovers(folder):
    return sorted(os.path.relpath(os.path.join(path, name), folder)
                  for path, dirs, names in os.walk(folder) for name in dirs + names)


# ------------------------------------------------------------------------------ training
def _train_argv(inputs_root):
    """The flags of a tiny 2-epoch run (random weights) on files written into ``inputs_root``."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(GOOD + BAD + NEUTRAL))
    (inputs_root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (inputs_root / "bert_config.json").write_text(json.dumps(dict(TINY, vocab_size=len(vocab))))
    return ["--config", str(inputs_root / "bert_config.json"),
            "--vocab", str(inputs_root / "vocab.txt"),
            "--train", write_tsv(inputs_root / "train.tsv", make_rows(32, 1)),
            "--dev", write_tsv(inputs_root / "dev.tsv", make_rows(16, 2)),
            "--test", write_tsv(inputs_root / "test.tsv", make_rows(16, 3)),
            "--epochs", "2", "--batch-size", "16", "--maxlen", "32"]


@pytest.fixture(scope="module")
def full_disk_run(tmp_path_factory):
    """``kerasbert train`` (tiny, random weights, 2 epochs) onto a 1000 kB tmpfs: too little
    room for its backups and model.keras, refused before the first step; then the tmpfs
    grown to 16 MB and the same command again."""
    argv = _train_argv(tmp_path_factory.mktemp("inputs"))
    disk = tmp_path_factory.mktemp("disk")
    with tmpfs(disk, "1000k"):
        output = disk / "run"
        first = kerasbert(["train", "--output", str(output), *argv])
        left = leftovers(disk)
        resize(disk, "16m")
        second = kerasbert(["train", "--output", str(output), *argv])
        yield types.SimpleNamespace(first=first, left=left, second=second, output=output)


def _env(**extra):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT,
                **extra)


def kerasbert(argv):
    return subprocess.run([sys.executable, "-m", "kerasbert.cli.main", *argv], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=300, check=False)


def file_bytes(folder):
    """{path under ``folder``: its bytes} of every file there."""
    return {name: (folder / name).read_bytes() for name in leftovers(folder)
            if (folder / name).is_file()}


def test_a_run_without_room_is_refused_before_its_first_step(full_disk_run):
    first, output = full_disk_run.first, full_disk_run.output
    assert first.returncode == 2, first.stderr[-3000:]
    assert re.fullmatch(rf"kerasbert train: no space in {re.escape(str(output))}: {AMOUNT} "
                        r"needed for the run's files \(two epoch backups, model.keras, "
                        rf"bert_model.ckpt\), {AMOUNT} free; nothing was trained: free some "
                        "space or choose another --output, then run the command again",
                        one_line(first.stderr, "train"))
    assert "Epoch 1/2" not in first.stdout + first.stderr
    assert full_disk_run.left == []  # not even the run directory

    second = full_disk_run.second
    assert second.returncode == 0, second.stderr[-3000:]
    history = json.loads((output / "history.json").read_text())
    assert len(history["loss"]) == 2 and (output / TRAIN_FINISHED_FILE).exists()


def test_a_resume_without_room_is_refused_before_its_first_step(tmp_path):
    """A run killed after its first epoch's backup, on a disk then too full for the next
    one: ``--resume`` trains nothing and keeps the backup; with room, it finishes.

    Why slow: three real training processes (killed, refused, resumed to the end)."""
    argv = _train_argv(tmp_path)
    with tmpfs(tmp_path / "disk", "16m") as disk:
        output = disk / "run"
        process = subprocess.Popen(
            [sys.executable, "-m", "kerasbert.cli.main", "train", "--output", str(output), *argv],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=_env(KERASBERT_PAUSE_AT="backup-written@1"))
        try:
            assert any(line.startswith("paused at ") for line in process.stderr)
        finally:
            process.kill()
            process.wait()
        kept = file_bytes(output)
        assert any(name.startswith("backup") for name in kept)
        resize(disk, f"{(shutil.disk_usage(disk).used >> 10) + 128}k")  # 128 kB free
        resumed = kerasbert(["train", "--output", str(output), *argv, "--resume"])
        assert resumed.returncode == 2, resumed.stderr[-3000:]
        assert re.fullmatch(rf"kerasbert train: no space in {re.escape(str(output))}: {AMOUNT} "
                            r"needed for the run's files \(two epoch backups, model.keras, "
                            rf"bert_model.ckpt\), {AMOUNT} free; the run so far is kept: free "
                            "some space, then continue it with --resume",
                            one_line(resumed.stderr, "train"))
        assert file_bytes(output) == kept
        resize(disk, "16m")
        resumed = kerasbert(["train", "--output", str(output), *argv, "--resume"])
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert len(json.loads((output / "history.json").read_text())["loss"]) == 2


def test_a_disk_that_fills_up_during_training_stops_in_one_line_and_resumes(tmp_path, capsys,
                                                                           monkeypatch):
    """The room is checked before the first step; another writer may still fill the disk:
    the run then stops at the write that found no room, keeps what it has, and resumes."""
    monkeypatch.setattr(RunDirectory, "check_room", lambda *args, **kwargs: None)
    argv = _train_argv(tmp_path)
    with tmpfs(tmp_path / "disk", "1000k") as disk:
        output = disk / "run"
        code, line = run(["train", "--output", str(output), *argv], capsys)
        assert code == 2
        assert re.fullmatch(rf"kerasbert train: no space in {re.escape(str(output))}: {AMOUNT} "
                            rf"needed for model.keras, {AMOUNT} free; the run so far is kept: "
                            "free some space, then continue it with --resume", line), line
        left = leftovers(output)
        assert TRAIN_OPTIONS_FILE in left
        assert not [name for name in left if files.is_temporary(os.path.basename(name))]
        resize(disk, "16m")
        code, line = run(["train", "--output", str(output), *argv, "--resume"], capsys)
        assert code == 0, line
        assert len(json.loads((output / "history.json").read_text())["loss"]) == 2


def test_a_backup_without_room_keeps_the_previous_one(tmp_path, monkeypatch):
    model = add_cls_classifier(build_transformer_model(dict(TINY)), 2)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.optimizer.build(model.trainable_variables)
    with tmpfs(tmp_path / "disk", "4m") as disk:
        run = RunDirectory(str(disk / "run"), TRAIN_OPTIONS_FILE, TRAIN_FINISHED_FILE)
        os.makedirs(run.path)
        resize(disk, "64k")
        with pytest.raises(disk_space.NoSpace, match=(
                rf"no space in {re.escape(run.path)}: {AMOUNT} needed for the backup of epoch "
                rf"1, {AMOUNT} free; no epoch is backed up yet, so --resume starts the run "
                "again from its first epoch: free some space, then continue it with --resume")):
            run.write_backup(model, 1, False)
        resize(disk, "4m")
        run.write_backup(model, 1, False)
        kept = {name: (disk / "run" / name).read_bytes() for name in leftovers(run.path)
                if os.path.isfile(run.file(name))}
        epoch_1 = [np.array(w) for w in model.get_weights()]
        resize(disk, f"{(shutil.disk_usage(disk).used >> 10) + 64}k")  # 64 kB free
        model.set_weights([w + 1 for w in epoch_1])
        expected = (rf"no space in {re.escape(run.path)}: {AMOUNT} needed for the backup of "
                    rf"epoch 2, {AMOUNT} free; the previous backup is kept: free some space, "
                    "then continue the run with --resume")
        with pytest.raises(disk_space.NoSpace, match=expected):  # the check
            run.write_backup(model, 2, False)
        no_check(monkeypatch)
        with pytest.raises(disk_space.NoSpace, match=expected):  # the disk full during the write
            run.write_backup(model, 2, False)
        assert {name: (disk / "run" / name).read_bytes() for name in leftovers(run.path)
                if os.path.isfile(run.file(name))} == kept
        assert run.restore_backup(model) == {"epoch": 1, "done": False}
        for restored, saved in zip(model.get_weights(), epoch_1):
            np.testing.assert_array_equal(restored, saved)


# ------------------------------------------------------------------------ export, convert
def test_export_out_of_space_is_one_line_and_leaves_nothing(full_disk_run, tmp_path, capsys,
                                                            monkeypatch):
    run_dir = str(full_disk_run.output)
    with tmpfs(tmp_path / "disk", "256k") as disk:
        target = disk / "serving" / "reviews"
        expected = (rf"kerasbert export: no space in {re.escape(str(target))}: {AMOUNT} needed "
                    rf"for the SavedModel \(version 1\), {AMOUNT} free; nothing was written")
        for check in (True, False):
            if not check:
                no_check(monkeypatch)
            code, line = run(["export", "--model", run_dir, "--to", str(target)], capsys)
            assert code == 2 and re.match(expected, line), line
            assert leftovers(disk) == []  # no empty folder either


def test_export_into_the_run_directory_is_refused(full_disk_run, capsys):
    run_dir = full_disk_run.output
    before = leftovers(run_dir)
    code, line = run(["export", "--model", str(run_dir), "--to", str(run_dir / "serving")],
                     capsys)
    assert code == 2 and re.match(rf"kerasbert export: --to in {re.escape(str(run_dir))}/serving: "
                                  "is inside the kerasbert run directory", line), line
    assert leftovers(run_dir) == before


def test_convert_out_of_space_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    keras.utils.set_random_seed(0)
    hf = hf_directory(tmp_path / "hf", hf_weights(np.random.default_rng(0)))
    with tmpfs(tmp_path / "disk", "16k") as disk:
        prefix = disk / "google" / "bert_model.ckpt"
        expected = (rf"kerasbert convert: no space in {re.escape(str(prefix.parent))}: {AMOUNT} "
                    rf"needed for the checkpoint, bert_config.json and vocab.txt, {AMOUNT} free; "
                    "nothing was written")
        for check in (True, False):
            if not check:
                no_check(monkeypatch)
            code, line = run(["convert", "--from-hf", str(hf), "--to", str(prefix)], capsys)
            assert code == 2 and re.match(expected, line), line
            assert leftovers(disk) == []
