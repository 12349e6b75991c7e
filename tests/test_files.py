"""Atomic writes: a file appears whole under its final name, or not at all."""

import json
import os

import pytest

from kerasbert.files import atomic_path, write_json


def test_atomic_writes_leave_no_temporary_and_normal_permissions(tmp_path):
    write_json(tmp_path / "metrics.json", {"accuracy": 1.0})
    assert os.listdir(tmp_path) == ["metrics.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(tmp_path / "metrics.json").st_mode & 0o777 == 0o666 & ~umask


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "labels.json"
    write_json(path, ["negative", "positive"])
    with pytest.raises(OSError, match="disk full"):
        with atomic_path(path) as temporary:
            with open(temporary, "w") as f:
                f.write('["half')
            raise OSError("disk full")
    assert json.loads(path.read_text()) == ["negative", "positive"]
    assert os.listdir(tmp_path) == ["labels.json"]
