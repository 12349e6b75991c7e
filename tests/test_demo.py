"""``make demo``'s training run, whole, and what its model says of plain sentences.

The run takes about ten minutes on 2 CPU cores, so it is left out of ``make test`` and runs
under ``make test-demo``. The sentences are short praise and complaints, far shorter than
the reviews the split trains on; each is one that a character 1-3-gram TF-IDF + logistic
regression fitted to the same ``train.tsv`` reads right, so the split's words decide it
(``这本书写得真好`` is not among them: ``写得`` is as common in its negative reviews as in its
positive ones, and every model tried calls it negative; docs/classification.md).
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

PLAIN = {
    "酒店服务很好，房间干净": "positive",
    "这本书很好": "positive",
    "这本书很好，推荐！": "positive",
    "这家店的菜很好吃": "positive",
    "房间太小了，服务很差": "negative",
    "质量太差了，不会再买": "negative",
    "这本书写得很差": "negative",
}


def demo_train_command():
    """``make demo``'s ``kerasbert train`` line, as the Makefile writes it."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        found = re.search(r"^\t\$\(VENV\)/bin/kerasbert train (.+)$", f.read(), re.M)
    words = found[1].split()
    assert words[:2] == ["--output", "$(RUN)"], words
    return words[2:]


def kerasbert(*words, cwd):
    script = os.path.join(os.path.dirname(sys.executable), "kerasbert")
    done = subprocess.run([script, *words], cwd=cwd, capture_output=True, text=True,
                          timeout=3600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.demo
def test_the_demo_run_labels_plain_sentences_right(tmp_path):
    run = tmp_path / "demo"
    kerasbert("train", "--output", str(run), *demo_train_command(), cwd=tmp_path)
    done = kerasbert("predict", "--model", str(run), *PLAIN, cwd=tmp_path)
    said = {row["text"]: (row["label"], round(row["probability"], 3))
            for row in map(json.loads, done.stdout.splitlines())}
    wrong = {text: said[text] for text, label in PLAIN.items() if said[text][0] != label}
    assert not wrong, f"labelled wrong (label, probability): {wrong}"
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["test"]["accuracy"] >= 0.83, metrics["test"]
