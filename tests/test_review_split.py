"""The shipped review split: clean, disjoint, balanced, and reproducible from its source."""

import csv
import os

import pytest

HERE = os.path.join("kerasbert", "resources", "reviews")
SOURCE = os.path.join("..", "shared", "data", "sentiment")


def read(name):
    with open(os.path.join(HERE, f"{name}.tsv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["label", "text"]
    return rows[1:]


def test_split_is_disjoint_clean_and_stratified():
    parts = {name: read(name) for name in ("train", "dev", "test")}
    assert {name: len(rows) for name, rows in parts.items()} == {
        "train": 13891, "dev": 1736, "test": 1736}
    seen = {}
    for name, rows in parts.items():
        for label, text in rows:
            assert label in ("negative", "positive") and text.strip() == text and text
            assert text not in seen, f"{text!r} is in {seen[text]} and {name}"
            seen[text] = name
        share = sum(label == "positive" for label, _ in rows) / len(rows)
        assert 0.47 < share < 0.49, name


@pytest.mark.skipif(not os.path.isdir(SOURCE), reason="the source corpus is not beside the checkout")
def test_split_is_reproducible_from_the_source(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_split", os.path.join(HERE, "make_split.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parts, conflicts = module.split(SOURCE, seed=42)
    assert conflicts == 47
    for name, rows in parts.items():
        assert [list(row) for row in rows] == read(name)
