"""Nothing the user did not name is replaced: ``convert`` and ``export`` refuse to write over
existing files without ``--overwrite``, replace only kerasbert's own earlier output with it,
never write into a run directory, and leave no folder behind when they fail.
"""

import errno
import os

import numpy as np
import pytest

from kerasbert.cli.main import main
from kerasbert.models.convert import WouldReplace, convert_hf_to_google
from kerasbert.serving import portable
from kerasbert.tasks.classification import export as saved_model
from kerasbert.training.rundir import RunError
from test_cli_errors import snapshot
from test_convert import hf_directory, hf_weights

WRITTEN = ("old.ckpt.index", "old.ckpt.data-00000-of-00001", "bert_config.json", "vocab.txt",
           "kerasbert-conversion.json")


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    """A tiny Hugging Face BERT directory."""
    return hf_directory(tmp_path_factory.mktemp("hf") / "bert",
                        hf_weights(np.random.default_rng(0)))


@pytest.fixture
def converted(hf, tmp_path, monkeypatch):
    """``demo/``, an earlier conversion (``demo/old.ckpt``) beside the user's notes; the
    working directory is ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    assert main(["convert", "--from-hf", str(hf), "--to", "demo/old.ckpt"]) == 0
    (tmp_path / "demo" / "notes.txt").write_text("mine\n")
    return tmp_path / "demo"


def run(argv, capsys):
    """``kerasbert`` in this process: its exit code and its stderr lines."""
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err.splitlines()


def refused(argv, folder, capsys, *expected):
    """Runs ``argv``, which must fail in one line naming ``expected`` and leave ``folder``
    exactly as it was (every file's bytes, size and time)."""
    before = snapshot(folder)
    code, lines = run(argv, capsys)
    assert code == 2 and len(lines) == 1, lines
    for text in expected:
        assert text in lines[0], lines[0]
    assert snapshot(folder) == before


def test_convert_replaces_nothing_without_overwrite(hf, converted, capsys):
    # A new prefix beside an earlier one: its config and vocabulary would be replaced.
    refused(["convert", "--from-hf", str(hf), "--to", "demo/new.ckpt"], converted, capsys,
            "kerasbert convert: output in demo/new.ckpt: would replace demo/bert_config.json, "
            "demo/vocab.txt (those of demo/old.ckpt); pass --overwrite")
    refused(["convert", "--from-hf", str(hf), "--to", "demo/old.ckpt"], converted, capsys,
            "would replace demo/old.ckpt.index, demo/old.ckpt.data-00000-of-00001, "
            "demo/bert_config.json, demo/vocab.txt;")
    with pytest.raises(WouldReplace, match="would replace"):
        convert_hf_to_google(hf, converted / "old.ckpt")


def test_overwrite_replaces_the_earlier_conversion_and_nothing_else(hf, converted, capsys):
    before = {name: os.stat(converted / name).st_ino for name in WRITTEN}
    notes = snapshot(converted)["notes.txt"]
    code, lines = run(["convert", "--from-hf", str(hf), "--to", "demo/old.ckpt", "--overwrite"],
                      capsys)
    assert code == 0 and lines == []
    assert sorted(os.listdir(converted)) == sorted([*WRITTEN, "notes.txt"])  # no temporary
    assert all(os.stat(converted / name).st_ino != before[name] for name in WRITTEN)
    assert snapshot(converted)["notes.txt"] == notes


@pytest.mark.parametrize("name, content", [
    ("bert_config.json", b'{"note": "mine"}'),
    ("vocab.txt", b"\x00\x01\x02binary"),
    ("vocab.txt", None),  # the same size, one byte changed
    ("old.ckpt.index", None),
])
def test_overwrite_refuses_files_changed_since_the_conversion(hf, converted, capsys, name,
                                                               content):
    if content is None:
        data = bytearray((converted / name).read_bytes())
        data[-2] ^= 1
        content = bytes(data)
    (converted / name).write_bytes(content)
    refused(["convert", "--from-hf", str(hf), "--to", "demo/old.ckpt", "--overwrite"],
            converted, capsys, f"output in demo/old.ckpt: demo/{name} changed since the "
                               "earlier conversion wrote it; --overwrite replaces only")


def test_overwrite_never_replaces_another_checkpoints_files_or_unrecorded_ones(
        hf, converted, capsys, tmp_path):
    # Another prefix in the folder of demo/old.ckpt: its config and vocabulary are
    # old.ckpt's, which would no longer build.
    refused(["convert", "--from-hf", str(hf), "--to", "demo/x.ckpt", "--overwrite"],
            converted, capsys, "output in demo/x.ckpt: demo/bert_config.json belongs to the "
                               "conversion to demo/old.ckpt")
    # A folder no conversion wrote (Google's own checkpoint folder, a user's vocab.txt).
    google = tmp_path / "google"
    google.mkdir()
    (google / "bert_config.json").write_text('{"hidden_size": 16}')
    (google / "vocab.txt").write_text("[PAD]\n")
    refused(["convert", "--from-hf", str(hf), "--to", "google/bert_model.ckpt", "--overwrite"],
            google, capsys, "google/bert_config.json has no record of a conversion "
                            "(google/kerasbert-conversion.json is missing)")


def test_a_prefix_that_names_no_file_is_refused(hf, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for prefix, folder in (("new/", "new"), ("new/.ckpt", "new")):
        code, lines = run(["convert", "--from-hf", str(hf), "--to", prefix], capsys)
        assert code == 2 and len(lines) == 1, lines
        assert f"checkpoint prefix in {prefix}: names no checkpoint file" in lines[0]
        assert f"such as {folder}/bert_model.ckpt" in lines[0]
    assert os.listdir(tmp_path) == []


def test_overwrite_refuses_a_folder_named_like_a_checkpoint_file(hf, converted, capsys):
    os.remove(converted / "old.ckpt.index")
    os.mkdir(converted / "old.ckpt.index")
    refused(["convert", "--from-hf", str(hf), "--to", "demo/old.ckpt", "--overwrite"],
            converted, capsys, "demo/old.ckpt.index is not a file")


def test_convert_never_writes_into_a_run_directory(hf, converted, capsys):
    (converted / "train_config.json").write_text("{}")  # demo/ is now a fine-tuning run's
    for target in ("demo/old.ckpt", "demo/inside/bert_model.ckpt"):
        refused(["convert", "--from-hf", str(hf), "--to", target, "--overwrite"],
                converted.parent, capsys, "--to in demo", "kerasbert run directory",
                "(it holds train_config.json)")


def test_a_failed_convert_leaves_no_folder_behind(hf, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def full(variables, prefix):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("kerasbert.models.convert.save_variables", full)
    code, lines = run(["convert", "--from-hf", str(hf), "--to", "new/deeper/bert_model.ckpt"],
                      capsys)
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("kerasbert convert: no space in new/deeper: "), lines[0]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("export", [
    lambda target, **options: saved_model.export(None, "vocab.txt", target, labels=["a", "b"],
                                                 maxlen=8, **options),
    lambda target, **options: portable.export_onnx(None, "vocab.txt", target, labels=["a", "b"],
                                                   maxlen=8, **options),
], ids=["saved_model", "onnx"])
def test_exports_never_go_into_a_run_directory(tmp_path, export):
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.json").write_text("{}")  # any run, from its first epoch
    for target in (run, run / "serving", run / "a" / "b"):
        with pytest.raises(RunError, match=r"^--to in .*: is (a|inside the) kerasbert run "
                                           r"directory.*\(it holds history.json\)"):
            export(str(target), overwrite=True)
    assert os.listdir(run) == ["history.json"]


def test_onnx_overwrite_keeps_files_that_are_not_the_exports(tmp_path):
    target = tmp_path / "onnx"
    target.mkdir()
    for name in ("model.onnx", "labels.json", "vocab.txt", "notes.md"):
        (target / name).write_text("")
    with pytest.raises(RunError, match=r"holds other files than an ONNX export \(notes.md\); "
                                       "--overwrite only replaces an earlier export"):
        portable.export_onnx(None, "vocab.txt", target, labels=["a", "b"], maxlen=8,
                             overwrite=True)
