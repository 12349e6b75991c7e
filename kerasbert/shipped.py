"""The files that ship inside the package: the small Chinese model, the datasets the tasks
train on by default (a folder each: train, dev and test), and tables kerasbert would otherwise
compute at each start.

They are package data (``kerasbert/resources/``), found through
``importlib.resources``, so the defaults of ``kerasbert train`` work from any directory
once the wheel is installed, without a download.

Example:
    >>> os.path.basename(model_dir())
    'kerasbert-zh-small'
    >>> from kerasbert.training.data import read_examples
    >>> sorted(set(read_examples(data_file("reviews", "dev")).labels))
    ['negative', 'positive']
"""

import importlib.resources
import os
from collections.abc import Callable
from typing import Any, cast

import numpy as np

MODEL_NAME = "kerasbert-zh-small"
SPLITS = ("train", "dev", "test")


def resource(*parts: str) -> str:
    """The path of ``kerasbert/resources/<parts>`` as a string.

    Raises:
        FileNotFoundError: the package was installed without its data.
    """
    place = importlib.resources.files("kerasbert").joinpath("resources")
    for part in parts:
        place = place.joinpath(part)
    # files() of a package installed as files (not zipped) is a pathlib.Path
    path = os.fspath(cast("os.PathLike[str]", place))
    if not os.path.exists(path):
        raise FileNotFoundError(f"shipped file in {path}: missing; reinstall kerasbert (its wheel "
                                "carries the default model and the review split)")
    return path


def model_dir() -> str:
    """The folder of the shipped ``kerasbert-zh-small``: config, vocab, checkpoint."""
    return resource(MODEL_NAME)


def data_file(dataset: str, split: str) -> str:
    """The ``train``, ``dev`` or ``test`` file of a shipped dataset, a folder of
    ``kerasbert/resources/`` (``reviews``, ``peoples_daily``, ``peoples_daily_qa``, ...) that
    holds one file per split, named after it.

    Raises:
        ValueError: another split.
        FileNotFoundError: no such dataset, or not its split.
    """
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: must be one of {', '.join(SPLITS)}")
    folder = resource(dataset)
    found = sorted(name for name in os.listdir(folder) if os.path.splitext(name)[0] == split)
    if not found:
        raise FileNotFoundError(f"shipped file in {folder}: no {split} split; reinstall kerasbert")
    return os.path.join(folder, found[0])


def precomputed(name: str, key: str, make: Callable[[], dict[str, np.ndarray]]
                ) -> dict[str, np.ndarray]:
    """The arrays ``make()`` returns (a dict of NumPy arrays), read from the shipped
    ``kerasbert/resources/precomputed/<name>.npz`` when it was made where ``key`` (the
    versions the arrays depend on) was the same, else made here.

    ``python tests/record_precomputed.py`` writes the files again.
    """
    path = precomputed_file(name)
    try:
        with np.load(path) as found:
            if str(found["key"]) == key:
                return {field: found[field] for field in found.files if field != "key"}
    except (OSError, KeyError, ValueError):
        pass  # none shipped, or another layout: made here
    return make()


def precomputed_file(name: str) -> str:
    """The path of the shipped table ``name`` (which may not exist)."""
    return os.fspath(cast("os.PathLike[str]", importlib.resources.files("kerasbert").joinpath(
        "resources").joinpath("precomputed").joinpath(f"{name}.npz")))


def write_precomputed(name: str, key: str, arrays: dict[str, Any]) -> None:
    """Writes ``arrays`` (a dict of NumPy arrays) made under ``key`` as the shipped table
    ``name``."""
    path = precomputed_file(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez_compressed(path, key=np.array(key), **arrays)
