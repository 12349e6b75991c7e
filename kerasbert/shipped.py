"""The files that ship inside the package: the small Chinese model, the review split and
the People's Daily NER split, and tables kerasbert would otherwise compute at each start.

They are package data (``kerasbert/resources/``), found through
``importlib.resources``, so the defaults of ``kerasbert train`` work from any directory
once the wheel is installed, without a download.

Example:
    >>> os.path.basename(model_dir())
    'kerasbert-zh-small'
    >>> from kerasbert.training.data import read_examples
    >>> sorted(set(read_examples(review_file("dev")).labels))
    ['negative', 'positive']
"""

import importlib.resources
import os

import numpy as np

MODEL_NAME = "kerasbert-zh-small"
SPLITS = ("train", "dev", "test")


def resource(*parts):
    """The path of ``kerasbert/resources/<parts>`` as a string.

    Raises:
        FileNotFoundError: the package was installed without its data.
    """
    place = importlib.resources.files("kerasbert").joinpath("resources")
    for part in parts:
        place = place.joinpath(part)
    path = os.fspath(place)
    if not os.path.exists(path):
        raise FileNotFoundError(f"shipped file in {path}: missing; reinstall kerasbert (its wheel "
                                "carries the default model and the review split)")
    return path


def model_dir():
    """The folder of the shipped ``kerasbert-zh-small``: config, vocab, checkpoint."""
    return resource(MODEL_NAME)


def ner_file(split):
    """``train``, ``dev`` or ``test`` file (CoNLL, character BIO) of the shipped People's
    Daily NER split."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: must be one of {', '.join(SPLITS)}")
    return resource("peoples_daily", f"{split}.txt")


def qa_file(split):
    """``train``, ``dev`` or ``test`` SQuAD v2.0 file of the shipped Chinese QA set."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: must be one of {', '.join(SPLITS)}")
    return resource("peoples_daily_qa", f"{split}.json")


def seq2seq_file(split):
    """``train``, ``dev`` or ``test`` JSONL (``source``, ``target``) of the shipped Chinese
    answer-generation set."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: must be one of {', '.join(SPLITS)}")
    return resource("peoples_daily_seq2seq", f"{split}.jsonl")


def review_file(split):
    """``train``, ``dev`` or ``test`` TSV of the shipped review split."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: must be one of {', '.join(SPLITS)}")
    return resource("reviews", f"{split}.tsv")


def precomputed(name, key, make):
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


def precomputed_file(name):
    """The path of the shipped table ``name`` (which may not exist)."""
    return os.fspath(importlib.resources.files("kerasbert").joinpath(
        "resources", "precomputed", f"{name}.npz"))


def write_precomputed(name, key, arrays):
    """Writes ``arrays`` (a dict of NumPy arrays) made under ``key`` as the shipped table
    ``name``."""
    path = precomputed_file(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez_compressed(path, key=np.array(key), **arrays)
