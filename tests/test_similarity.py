"""Sentence-pair similarity: the files, the CoSENT loss and the scores against plain NumPy and
SciPy, and a whole run (train, evaluate, predict, export) on the tiny model; that the shipped model
learns the shipped pairs is checked by docs/similarity.md's one-epoch run (tests/test_readme.py)."""

import dataclasses
import json
import math

import numpy as np
import pytest

from conftest import make_rows
from kerasbert.cli.main import main
from kerasbert.tasks import open_run, options_class
from kerasbert.tasks.similarity.data import is_binary, one_label_share, read_pairs
from kerasbert.tasks.similarity.options import SimilarityOptions
from kerasbert.tasks.similarity.scores import (
    average_ranks,
    best_threshold,
    cosent_loss,
    pair_scores,
    spearman,
)
from kerasbert.training.data import DataError
from kerasbert.training.options import FinetuneOptions


def write_pairs(path, rows, header=True):
    lines = (["text_a\ttext_b\tlabel"] if header else []) + [
        f"{a}\t{b}\t{label}" for a, b, label in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def tiny_pairs(n, seed):
    """``n`` pairs of the tiny task's texts: 1 when both are of one class."""
    rows = make_rows(2 * n, seed)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(rows))
    return [(rows[i][1], rows[j][1], int(rows[i][0] == rows[j][0]))
            for i, j in zip(order[::2], order[1::2])]


# --------------------------------------------------------------------------- options, files
def test_similarity_takes_only_the_shared_flags_and_trains_on_the_shipped_pairs_by_default():
    assert options_class("similarity") is SimilarityOptions
    own = ({field.name for field in dataclasses.fields(SimilarityOptions)}
           - {field.name for field in dataclasses.fields(FinetuneOptions)})
    assert own == set()
    resolved = SimilarityOptions(output="runs/x").resolved()
    assert resolved.train.endswith("peoples_daily_name_pairs/train.tsv")
    assert resolved.test.endswith("peoples_daily_name_pairs/test.tsv")
    assert resolved.weights == "checkpoint"


def test_the_shipped_pairs_are_balanced_and_in_no_two_files():
    splits = {split: read_pairs(f"kerasbert/resources/peoples_daily_name_pairs/{split}.tsv")
              for split in ("train", "dev", "test")}
    assert {split: len(pairs) for split, pairs in splits.items()} == {
        "train": 2000, "dev": 600, "test": 600}
    for pairs in splits.values():
        assert pairs.labels.count("1") == len(pairs) // 2
    texts = {split: set(pairs.texts + pairs.pairs) for split, pairs in splits.items()}
    assert not texts["train"] & texts["dev"] and not texts["train"] & texts["test"]
    assert not texts["dev"] & texts["test"]


def test_the_shipped_pairs_are_made_again_byte_for_byte(tmp_path):
    import subprocess
    import sys

    subprocess.run([sys.executable, "kerasbert/resources/peoples_daily_name_pairs/make_pairs.py",
                    "--output", str(tmp_path)], check=True, capture_output=True)
    for split in ("train", "dev", "test"):
        shipped = f"kerasbert/resources/peoples_daily_name_pairs/{split}.tsv"
        with open(shipped, "rb") as f:
            assert (tmp_path / f"{split}.tsv").read_bytes() == f.read(), split


@pytest.mark.parametrize("row, problem", [
    ("甲\t乙\tyes", "label 'yes' must be a number: 0 or 1"),
    ("甲\t乙\tnan", "label 'nan' must be a number"),
    ("甲\t\t1", "empty 'text_b'"),
    ("甲\t乙", "2 columns where the header has 3"),
    ("甲\t乙\t", "missing label in column 'label'"),
])
def test_a_bad_pair_is_named_with_its_file_and_line(tmp_path, row, problem):
    path = tmp_path / "dev.tsv"
    path.write_text(f"text_a\ttext_b\tlabel\n甲\t乙\t1\n\n{row}\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^bad row in {path}, line 4: {problem}"):
        read_pairs(path)


def test_lcqmc_files_without_a_header_and_jsonl_are_read(tmp_path):
    plain = read_pairs(write_pairs(tmp_path / "lcqmc.tsv", [("喜欢打篮球的男生", "爱打篮球的男生",
                                                             1), ("我手机丢了", "我的手机掉了", 0)],
                                   header=False))
    assert (plain.texts, plain.pairs, plain.labels, plain.lines) == (
        ["喜欢打篮球的男生", "我手机丢了"], ["爱打篮球的男生", "我的手机掉了"], ["1", "0"], [1, 2])
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"text_a": "甲", "text_b": "乙", "label": 1}\n'
                    '{"text_a": "丙", "text_b": "丁"}\n', encoding="utf-8")
    assert read_pairs(path, require_labels=False).labels == ["1", None]
    with pytest.raises(DataError, match=r"line 2: column 'label' is missing"):
        read_pairs(path)
    other = tmp_path / "other.tsv"
    other.write_text("question\tanswer\tlabel\n甲\t乙\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no column 'text_a', 'text_b' in the header"):
        read_pairs(other)
    graded = read_pairs(write_pairs(tmp_path / "sts.tsv", [("甲", "乙", 4.2), ("丙", "丁", 0)],
                                    header=False))
    assert graded.labels == ["4.2", "0"] and not is_binary(graded)


def test_columns_of_other_names_are_refused_without_sending_to_other_flags(tiny_run_inputs,
                                                                           tmp_path, capsys):
    """The columns of a similarity file are fixed: the message says to rename them, not to
    name them with flags that --task similarity refuses."""
    train = tmp_path / "train.tsv"
    train.write_text("sent1\tsent2\tscore\n甲\t乙\t1\n丙\t丁\t0\n", encoding="utf-8")
    code = main(["train", "--task", "similarity", "--output", str(tmp_path / "run"),
                 "--config", tiny_run_inputs["config"], "--vocab", tiny_run_inputs["vocab"],
                 "--train", str(train), "--dev", str(train)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err == (f"kerasbert train: header row in {train}, line 1: no column 'text_a', "
                   "'text_b', 'label' in the header (columns: sent1, sent2, score); a similarity "
                   "file has the columns text_a, text_b and label: rename them in its first "
                   "row, or leave the header row out (rows of text_a, text_b, label)\n")
    assert "--text-column" not in err and not (tmp_path / "run").exists()


def _train(inputs, output, train, dev, *flags):
    return main(["train", "--task", "similarity", "--output", str(output),
                 "--config", inputs["config"], "--checkpoint", inputs["checkpoint"],
                 "--vocab", inputs["vocab"], "--train", train, "--dev", dev, "--epochs", "1",
                 "--maxlen", "16", *flags])


def test_training_that_could_learn_nothing_is_refused_before_it_starts(tiny_run_inputs,
                                                                       tmp_path, capsys):
    rows = tiny_pairs(16, 4)
    dev = write_pairs(tmp_path / "dev.tsv", rows)
    same = write_pairs(tmp_path / "same.tsv", [(a, a, label) for a, _, label in rows])
    assert _train(tiny_run_inputs, tmp_path / "a", same, dev) == 2
    assert capsys.readouterr().err == (
        f"kerasbert train: texts in {same}: text_a equals text_b on every row (16 rows), so "
        "every cosine is 1; are the columns the two texts to compare?\n")
    assert _train(tiny_run_inputs, tmp_path / "b", dev, dev, "--batch-size", "1") == 2
    assert capsys.readouterr().err == (
        "kerasbert train: invalid value 1 in --batch-size: CoSENT ranks the pairs of a batch "
        "against each other, and one pair has none to rank; use 2 or more (16 or more ranks "
        "more pairs a step)\n")
    one = write_pairs(tmp_path / "one.tsv", [(a, b, 0.5) for a, b, _ in rows])
    assert _train(tiny_run_inputs, tmp_path / "c", dev, one) == 2
    assert capsys.readouterr().err == (
        f"kerasbert train: labels in {one}: every pair has the label '0.5'; pairs of different "
        "labels are needed to rank their cosines\n")
    assert not [name for name in "abc" if (tmp_path / name).exists()]


def test_one_label_batches_are_counted_and_warned_before_training(tiny_run_inputs, tmp_path,
                                                                  capsys):
    rows = tiny_pairs(16, 4)  # 16 pairs, both labels
    pairs = read_pairs(write_pairs(tmp_path / "dev.tsv", rows))
    ones = sum(label for *_, label in rows)
    expected = (math.comb(ones, 2) + math.comb(16 - ones, 2)) / math.comb(16, 2)
    assert one_label_share(pairs, 2) == pytest.approx(expected)
    assert one_label_share(pairs, 16) == 0
    assert _train(tiny_run_inputs, tmp_path / "run", str(tmp_path / "dev.tsv"),
                  str(tmp_path / "dev.tsv"), "--batch-size", "2") == 0
    warning = next(line for line in capsys.readouterr().err.splitlines() if "CoSENT" in line)
    assert warning == (f"kerasbert train: warning: --batch-size 2: about {100 * expected:.0f}% "
                       f"of the batches of {tmp_path / 'dev.tsv'} hold pairs of one label "
                       "only, which give CoSENT no pair to rank (they add 0 to the loss); a "
                       "larger --batch-size ranks more pairs a step")


def test_graded_labels_train_with_cosent_and_are_scored_by_spearman(tiny_run_inputs, tmp_path,
                                                                    capsys):
    """STS-style scores: CoSENT ranks them; the best epoch by dev Spearman; no threshold, so
    predict, evaluate and the export give the cosine and no 0/1 label."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the WordPiece op)

    rng = np.random.default_rng(0)
    graded = [(a, b, round(float(rng.uniform(0, 5)), 1)) for a, b, _ in tiny_pairs(48, 5)]
    train = write_pairs(tmp_path / "train.tsv", graded[:32])
    dev = write_pairs(tmp_path / "dev.tsv", graded[32:])
    binary = write_pairs(tmp_path / "test.tsv", tiny_pairs(16, 6))
    assert _train(tiny_run_inputs, tmp_path / "run", train, dev, "--test", binary) == 0
    out = capsys.readouterr().out
    assert "(graded dev labels: no threshold; best epoch 1)" in out
    output = tmp_path / "run"
    assert json.loads((output / "threshold.json").read_text()) == {"threshold": None}
    summary = json.loads((output / "metrics.json").read_text())
    assert set(summary["dev"]) == set(summary["test"]) == {"pairs", "spearman", "threshold"}
    run = open_run(output)
    found = np.array([row["similarity"] for row in run.predict(path=dev)])
    assert spearman(found, np.array([label for *_, label in graded[32:]])) == pytest.approx(
        summary["dev"]["spearman"])
    rows = run.predict(texts=["好东西", "好用"])
    assert set(rows[0]) == {"text_a", "text_b", "similarity"}
    assert main(["evaluate", "--model", str(output), "--data", binary]) == 0
    assert capsys.readouterr().out == f"pairs 16  Spearman {summary['test']['spearman']:.4f}\n"
    run.export(tmp_path / "served")
    served = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["similarity"]
    got = served(text_a=tf.constant(["好东西"]), text_b=tf.constant(["好用"]))
    assert set(got) == {"similarity"}
    np.testing.assert_allclose(got["similarity"].numpy(), [rows[0]["similarity"]], atol=1e-5)


# ----------------------------------------------------------------------------- loss, scores
def numpy_cosent(labels, cosines, scale=20.0):
    """CoSENT as written: log(1 + Σ over pairs (i, j) with label_i < label_j of
    exp(scale · (cos_i − cos_j)))."""
    total = sum(math.exp(scale * (ci - cj)) for li, ci in zip(labels, cosines)
                for lj, cj in zip(labels, cosines) if li < lj)
    return math.log(1 + total)


@pytest.mark.parametrize("labels, cosines", [
    ([1, 0, 1, 0], [0.9, 0.2, 0.4, 0.5]),
    ([0, 0, 1], [0.1, -0.3, 0.05]),
    ([1, 1, 1], [0.3, 0.2, 0.1]),  # no pair ranked: log(1) = 0
    ([0, 1, 2, 1], [0.2, 0.1, 0.3, 0.35]),  # graded labels: only their order counts
])
def test_the_loss_is_cosent(labels, cosines):
    found = float(cosent_loss(np.array(labels, "int32"), np.array(cosines, "float32")))
    assert found == pytest.approx(numpy_cosent(labels, cosines), rel=1e-5, abs=1e-6)


def test_spearman_and_ranks_agree_with_scipy():
    from scipy import stats

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 200)
    cosines = np.round(labels * 0.3 + rng.normal(size=200), 1)  # ties on both sides
    assert spearman(cosines, labels) == pytest.approx(stats.spearmanr(cosines, labels)[0],
                                                      abs=1e-12)
    np.testing.assert_allclose(average_ranks(cosines), stats.rankdata(cosines))
    assert spearman(cosines, np.ones(200)) is None


def test_the_threshold_is_the_best_on_dev_and_scores_count_label_one():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 300)
    cosines = labels * 0.5 + rng.normal(size=300)
    threshold = best_threshold(cosines, labels)
    accuracy = pair_scores(cosines, labels, threshold)["accuracy"]
    brute = max(((cosines >= t) == labels).mean() for t in np.concatenate([cosines, [9.0]]))
    assert accuracy == pytest.approx(brute)
    scores = pair_scores(np.array([0.9, 0.8, 0.1, 0.7]), np.array([1, 0, 0, 1]), 0.75)
    assert scores == {"pairs": 4, "spearman": pytest.approx(0.4472136), "threshold": 0.75,
                      "accuracy": 0.5, "precision": 0.5, "recall": 0.5, "f1": 0.5}


# ------------------------------------------------------------------------------- a whole run
@pytest.fixture(scope="module")
def tiny_pair_run(tiny_run_inputs, tmp_path_factory):
    """A finished run of the tiny model on tiny pairs (same class or not): its directory,
    summary and test file."""
    from kerasbert.tasks.similarity.task import train

    root = tmp_path_factory.mktemp("pairs")
    files = {split: write_pairs(root / f"{split}.tsv", tiny_pairs(n, seed))
             for split, n, seed in (("train", 192, 1), ("dev", 48, 2), ("test", 48, 3))}
    options = SimilarityOptions(
        output=str(root / "run"), config=tiny_run_inputs["config"],
        checkpoint=tiny_run_inputs["checkpoint"], vocab=tiny_run_inputs["vocab"], **files,
        epochs=2, batch_size=32, lr=1e-3, maxlen=16, patience=0, seed=1)
    return root / "run", train(options, verbose=0), files["test"]


def test_a_run_trains_evaluates_and_predicts_with_its_dev_threshold(tiny_pair_run, capsys):
    output, summary, test = tiny_pair_run
    assert set(summary) >= {"best_epoch", "dev", "test", "train_pairs"}
    threshold = json.loads((output / "threshold.json").read_text())["threshold"]
    assert threshold == summary["dev"]["threshold"] == summary["test"]["threshold"]
    run = open_run(output)
    assert run.evaluate(test) == pytest.approx(summary["test"])
    assert main(["evaluate", "--model", str(output), "--data", test]) == 0
    assert capsys.readouterr().out.startswith("pairs 48  Spearman ")
    assert main(["predict", "--model", str(output), "好东西", "好用", "差书店", "好"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(row["text_a"], row["text_b"]) for row in rows] == [("好东西", "好用"),
                                                                ("差书店", "好")]
    for row in rows:
        assert -1 <= row["similarity"] <= 1
        assert row["label"] == int(row["similarity"] >= threshold)
    assert main(["predict", "--model", str(output), "只有一个"]) == 2
    assert "1 texts: a similarity run takes them 2 at a time" in capsys.readouterr().err
    (output.parent / "pairs.txt").write_text("好东西\t好用\n", encoding="utf-8")
    assert main(["predict", "--model", str(output), "--input",
                 str(output.parent / "pairs.txt")]) == 2
    assert capsys.readouterr().err == (
        f"kerasbert predict: data file in {output.parent / 'pairs.txt'}: a .txt file holds one "
        "text per line, but a similarity run compares pairs; give a .tsv/.csv/.jsonl file with "
        "the columns text_a and text_b, or the texts as TEXT_A TEXT_B pairs\n")
    vectors = run.embed([])
    assert vectors.shape == (0, run.embed(["好"]).shape[1]) and vectors.dtype == np.float32


def test_the_export_gives_what_predict_and_embed_give(tiny_pair_run, tmp_path):
    import tensorflow as tf

    output, _, test = tiny_pair_run
    run = open_run(output)
    pairs = read_pairs(test)
    written = run.export(tmp_path / "served")
    assert str(tmp_path / "served" / "1" / "saved_model.pb") in written
    served = tf.saved_model.load(str(tmp_path / "served" / "1"))
    found = served.signatures["similarity"](text_a=tf.constant(pairs.texts),
                                            text_b=tf.constant(pairs.pairs))
    expected = run.predict(path=test)
    np.testing.assert_allclose(found["similarity"].numpy(),
                               [row["similarity"] for row in expected], atol=1e-5)
    assert found["label"].numpy().tolist() == [row["label"] for row in expected]
    vectors = served.signatures["embed"](text=tf.constant(pairs.texts[:5]))["vector"].numpy()
    np.testing.assert_allclose(vectors, run.embed(pairs.texts[:5]), atol=1e-5)
    # Two first texts and one second: refused, not the one second text paired with both.
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="text_a and text_b must hold as many texts"):
        served.signatures["similarity"](text_a=tf.constant(pairs.texts[:2]),
                                        text_b=tf.constant(pairs.pairs[:1]))
