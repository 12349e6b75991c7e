"""Serving export: TF Serving's layout, the two signatures, and the in-graph tokenizer.

The tokenizer in the graph must give the Tokenizer's ids on every input: the review
test split, its rows paired, an adversarial set and random Unicode, with the shipped
vocabulary and Google's Chinese one.
"""

import json
import os
import random
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import build_transformer_model, save_weights_as_checkpoint, shipped
from kerasbert.cli.main import main
from kerasbert.serving.graph_text import TextEncoder
from kerasbert.tasks.classification.task import ClassificationOptions, Run, train
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.training.data import read_examples
from kerasbert.training.rundir import RunError
from peers import run_python

SMALL_VOCAB = os.path.join(shipped.model_dir(), "vocab.txt")
GOOGLE_VOCAB = "checkpoints/chinese_L-12_H-768_A-12/vocab.txt"
GOOD, BAD, NEUTRAL = "好棒赞爱", "差烂坏糟", "这个东西我们买了用过书店"

ADVERSARIAL = [
    # full-width punctuation, letters and digits stay full-width (no NFKC folding)
    "！，。？ＡＢＣ１２３", "ＡＢＣ公司，ｈｔｔｐ：／／ｘ．ｃｎ", "３．１４％～",
    "“引号”《书名》【注】…",
    # private-use and unassigned code points are deleted, as in Google's tokenizer
    "也不能\ue139期", "\ue000\uf8ff", "x\U000f0000y\U0010fffd", "a\u0378b\U000e0080c",
    # accents are stripped after lowercasing
    "café naïve Ångström", "CAFÉ NAÏVE", "Ｃａｆé résumé",
    # words of more than 100 characters are [UNK]; CJK characters are words of their own
    "a" * 100, "a" * 101, "é" * 150, "ab" * 60 + " ok", "好" * 130, "x" * 99 + "é",
    "ﬁ" * 101, "İ" * 101,
    # mixed scripts
    "BERT模型很好用 日本語のテキスト カタカナ ひらがな 한국어 텍스트 "
    "مرحبا بالعالم 😀👍🏽 👨‍👩‍👧 ok",
    "Москва ΑΘΗΝΑ हिन्दी ภาษาไทย ᠮᠣᠩᠭᠣᠯ",
    # control and invisible characters
    "a\tb\rc\x00d\x0be\u200bf\ufeffg", "\u200b", "\ufeff开头", "x\x85y\x1cz", "a\u2028b\u2029c",
    "\x7f\x9f\u00ad\u2060\u202e反向\u202c", "tab\there\nnewline\r\nend",
    # combining marks, alone and stacked
    "e\u0301", "\u0301\u0301", "a\u0308\u0304", "\u20dd圆", "q\u0307\u0323",
    # empty and blank
    "", " ", "   ", "\u3000\u3000", "\t\n", "\u00a0",
    # Greek capital sigma at the end of a word, and next to modifier letters
    "ΟΔΟΣ ΟΔΟΣ.", "ΣΑΣ", "ΑΣ\u0345", "ʰΣ", "AΣʰ", "Σ", "ΑΣ\u0301Β",
    # case and compatibility forms that are not NFKC-folded
    "İstanbul ß ẞ ǅ Ⅻ ①② ㍿ ﬀ", "豈 更 𠀀 𫠫 ⺀ ⼀",
    # text that looks like special tokens is split like any text
    "[CLS] [SEP] [UNK] [PAD] ##ing", "state-of-the-art U.S.A. 1,000 2.5",
    "！" * 70, "emoji🙂inside😀words",
]


def _tiny_model(root, vocab_file):
    """A tiny config and random checkpoint for ``vocab_file``."""
    from conftest import TINY

    size = len(Tokenizer(vocab_file).token_dict)
    config = dict(TINY, vocab_size=size)
    (root / "bert_config.json").write_text(json.dumps(config))
    keras.utils.set_random_seed(0)
    save_weights_as_checkpoint(build_transformer_model(config, with_pool=True),
                               str(root / "bert_model.ckpt"))
    return {"config": str(root / "bert_config.json"), "checkpoint": str(root / "bert_model.ckpt"),
            "vocab": vocab_file}


def _rows(n, seed, pairs=False):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        words = list(rng.choice(list(NEUTRAL), size=rng.integers(3, 12)))
        words.insert(int(rng.integers(0, len(words))), rng.choice(list(GOOD if i % 2 else BAD)))
        rows.append([("negative", "positive")[i % 2], "".join(words)]
                    + (["".join(rng.choice(list(NEUTRAL), size=5))] if pairs else []))
    return rows


def _write(path, rows, pairs=False):
    header = "label\ttext" + ("\tpair" if pairs else "")
    path.write_text("\n".join([header] + ["\t".join(row) for row in rows]) + "\n",
                    encoding="utf-8")
    return str(path)


def _finished_run(root, pairs):
    """A run of one epoch on the shipped vocabulary (real texts give real ids)."""
    inputs = _tiny_model(root, SMALL_VOCAB)
    for split, n, seed in (("train", 128, 1), ("dev", 32, 2)):
        inputs[split] = _write(root / f"{split}.tsv", _rows(n, seed, pairs), pairs)
    output = root / "run"
    train(ClassificationOptions(**inputs, output=str(output), epochs=1, batch_size=16, lr=1e-2,
                                maxlen=24, seed=1, pair_column="pair" if pairs else None))
    return Run(str(output))


@pytest.fixture(scope="module")
def single_run(tmp_path_factory):
    return _finished_run(tmp_path_factory.mktemp("single"), pairs=False)


@pytest.fixture(scope="module")
def pair_run(tmp_path_factory):
    return _finished_run(tmp_path_factory.mktemp("pair"), pairs=True)


@pytest.fixture(scope="module")
def exported(single_run, tmp_path_factory):
    base = tmp_path_factory.mktemp("exported") / "reviews"
    written = single_run.export(str(base))
    return base, written


def _review_texts(n=None):
    return read_examples(shipped.data_file("reviews", "test")).texts[:n]


# --- the SavedModel -----------------------------------------------------------------------


@pytest.mark.slow
def test_export_writes_version_1_and_lists_its_files(exported):
    base, written = exported
    assert sorted(os.listdir(base)) == ["1"]
    assert written == sorted(written) and all(os.path.isfile(path) for path in written)
    names = {os.path.relpath(path, base / "1") for path in written}
    assert {"saved_model.pb", os.path.join("assets", "vocab.txt"),
            os.path.join("variables", "variables.index")} <= names
    with open(base / "1" / "assets" / "vocab.txt", "rb") as got, open(SMALL_VOCAB, "rb") as vocab:
        assert got.read() == vocab.read()


@pytest.mark.slow
def test_saved_model_cli_lists_both_signatures(exported):
    base, _ = exported
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    shown = subprocess.run([cli, "show", "--dir", str(base / "1"), "--all"], capture_output=True,
                           text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert shown.returncode == 0, shown.stderr[-2000:]
    out = shown.stdout
    signatures = {name: out.split(f"signature_def['{name}']:")[1].split("signature_def[")[0]
                  for name in ("classify", "serving_default")}
    classify, ids = signatures["classify"], signatures["serving_default"]
    for name, dtype, shape in (("text", "DT_STRING", "(-1)"),):
        assert f"inputs['{name}'] tensor_info:\n        dtype: {dtype}\n        shape: {shape}" \
            in classify
    assert "inputs['pair']" not in classify
    for name, dtype, shape in (("label", "DT_STRING", "(-1)"), ("label_id", "DT_INT32", "(-1)"),
                               ("probabilities", "DT_FLOAT", "(-1, 2)")):
        assert f"outputs['{name}'] tensor_info:\n        dtype: {dtype}\n        shape: {shape}" \
            in classify
    for name in ("token_ids", "segment_ids"):
        assert f"inputs['{name}'] tensor_info:\n        dtype: DT_INT32\n        shape: (-1, -1)" \
            in ids
    assert ("outputs['probabilities'] tensor_info:\n        dtype: DT_FLOAT\n"
            "        shape: (-1, 2)") in ids


_LOAD_AND_CLASSIFY = """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the WordPiece op, as TF Serving has it built in
    served = tf.saved_model.load({path!r})
    inputs = json.loads({inputs!r})
    out = served.signatures["classify"](**{{k: tf.constant(v) for k, v in inputs["texts"].items()}})
    ids = served.signatures["serving_default"](
        token_ids=tf.constant(inputs["ids"], tf.int32),
        segment_ids=tf.constant(inputs["segments"], tf.int32))
    print(json.dumps({{"label": [x.decode() for x in out["label"].numpy()],
                      "label_id": out["label_id"].numpy().tolist(),
                      "probabilities": out["probabilities"].numpy().tolist(),
                      "from_ids": ids["probabilities"].numpy().tolist(),
                      "kerasbert": any(m.startswith("kerasbert") for m in sys.modules)}}))
"""


def _served(path, texts, ids, segments):
    script = _LOAD_AND_CLASSIFY.format(path=str(path), inputs=json.dumps(
        {"texts": texts, "ids": ids.tolist(), "segments": segments.tolist()}))
    return run_python(script)


@pytest.mark.slow
def test_classify_in_a_fresh_process_matches_predict(single_run, exported):
    base, _ = exported
    texts = ["这个好棒", "书店差", "", "   "] + _review_texts(60)
    got = _served(base / "1", {"text": texts},
                  *single_run.tokenizer.encode_batch(texts, maxlen=single_run.options.maxlen))
    assert not got["kerasbert"]
    expected = single_run.predict(texts=texts)
    assert got["label"] == [row["label"] for row in expected]
    assert [single_run.labels[i] for i in got["label_id"]] == got["label"]
    probabilities = np.array(got["probabilities"])
    np.testing.assert_allclose(probabilities.max(-1), [row["probability"] for row in expected],
                               atol=1e-5)
    np.testing.assert_allclose(probabilities, got["from_ids"], atol=1e-5)


@pytest.mark.slow
def test_a_pair_run_classifies_text_and_pair(pair_run, tmp_path):
    written = pair_run.export(str(tmp_path / "pairs"))
    assert os.path.join(str(tmp_path / "pairs"), "1", "saved_model.pb") in written
    rows = [[label, text, pair] for label, text, pair in _rows(6, 9, pairs=True)]
    reviews = _review_texts(41)
    rows += [["positive", a, b] for a, b in zip(reviews, reviews[1:])]
    expected = pair_run.predict(path=_write(tmp_path / "pairs.tsv", rows, pairs=True))
    texts, pairs = [row[1] for row in rows], [row[2] for row in rows]
    got = _served(tmp_path / "pairs" / "1", {"text": texts, "pair": pairs},
                  *pair_run.tokenizer.encode_batch(texts, pairs, maxlen=pair_run.options.maxlen))
    assert got["label"] == [row["label"] for row in expected]
    probabilities = np.array(got["probabilities"])
    np.testing.assert_allclose(probabilities.max(-1), [row["probability"] for row in expected],
                               atol=1e-5)
    np.testing.assert_allclose(probabilities, got["from_ids"], atol=1e-5)


@pytest.mark.slow
def test_a_pair_run_takes_its_texts_two_at_a_time(pair_run, tmp_path, capsys):
    """TEXTs on the command line are TEXT PAIR pairs for a run on sentence pairs (never each
    text alone); an odd count is refused in one line; the export refuses unequal inputs."""
    texts = ["这个好棒", "我们买了差", "书店好", "东西糟"]
    assert main(["predict", "--model", pair_run.run_dir, *texts]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    table = _write(tmp_path / "two.tsv", [["positive", texts[0], texts[1]],
                                         ["positive", texts[2], texts[3]]], pairs=True)
    assert rows == pair_run.predict(path=table) == pair_run.predict(texts=texts)
    assert [(row["text"], row["pair"]) for row in rows] == [tuple(texts[:2]), tuple(texts[2:])]
    assert main(["predict", "--model", pair_run.run_dir, *texts[:3]]) == 2
    assert capsys.readouterr().err == (
        "kerasbert predict: odd number of texts in TEXT (3): this run classifies sentence "
        "pairs (text, pair): give TEXT PAIR, TEXT PAIR...\n")
    assert pair_run.predict(texts=[]) == []

    import tensorflow_text  # noqa: F401 (the WordPiece op)

    pair_run.export(str(tmp_path / "served"))
    classify = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["classify"]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="text and pair must hold as many texts"):
        classify(text=tf.constant(texts[:2]), pair=tf.constant(texts[:1]))


@pytest.mark.slow
def test_cli_export_serves_the_run(single_run, tmp_path, capsys):
    saved = tmp_path / "saved"
    assert main(["export", "--model", single_run.run_dir, "--to", str(saved)]) == 0
    assert str(saved / "1" / "saved_model.pb") in capsys.readouterr().out
    texts = ["这个好棒", "我们买了差"]
    rows = single_run.predict(texts=texts)
    loaded = tf.saved_model.load(str(saved / "1"))
    ids, segments = single_run.tokenizer.encode_batch(texts, maxlen=single_run.options.maxlen)
    out = loaded.signatures["serving_default"](token_ids=tf.constant(ids),
                                               segment_ids=tf.constant(segments))
    np.testing.assert_allclose(out["probabilities"].numpy().max(-1),
                               [r["probability"] for r in rows], atol=1e-5)
    empty = loaded.signatures["classify"](text=tf.constant([], tf.string))
    assert empty["probabilities"].shape == (0, 2) and empty["label"].shape == (0,)


# --- versions and what export refuses -----------------------------------------------------


@pytest.mark.slow
def test_versions_are_added_beside_earlier_ones_and_replaced_only_when_asked(
        single_run, tmp_path, capfd):
    base = tmp_path / "model"
    capfd.readouterr()
    first = single_run.export(str(base))
    second = single_run.export(str(base))  # a new version needs no overwrite
    assert capfd.readouterr() == ("", "")  # nothing on stdout or stderr
    assert all(path.startswith(str(base / "1") + os.sep) for path in first)
    assert all(path.startswith(str(base / "2") + os.sep) for path in second)
    graph = base / "1" / "saved_model.pb"
    before = os.stat(graph).st_ino
    with pytest.raises(RunError, match=r"1: version 1 exists; pass --overwrite to replace it, "
                                       r"or leave out --version to add version 3"):
        single_run.export(str(base), version=1)
    assert os.stat(graph).st_ino == before
    single_run.export(str(base), version=1, overwrite=True)
    assert os.stat(graph).st_ino != before  # a new file (the old folder was written aside)
    (base / "1" / "notes.txt").write_text("keep")  # not the export's: never replaced
    with pytest.raises(RunError, match=r"1: holds other files than a SavedModel's "
                                       r"\(notes.txt\); --overwrite only replaces"):
        single_run.export(str(base), version=1, overwrite=True)
    assert (base / "1" / "notes.txt").read_text() == "keep"
    single_run.export(str(base), version=7)
    assert sorted(os.listdir(base)) == ["1", "2", "7"]  # no temporary left beside them
    (base / "8").mkdir()
    (base / "8" / "notes.txt").write_text("keep")
    with pytest.raises(RunError, match="8: is not a SavedModel; --overwrite only replaces"):
        single_run.export(str(base), version=8, overwrite=True)
    assert (base / "8" / "notes.txt").read_text() == "keep"
    for version in (0, -1, "3", 2.0, True):
        with pytest.raises(RunError, match=r"in --version: must be a whole number of at least 1"):
            single_run.export(str(base), version=version)


@pytest.mark.slow
def test_export_never_replaces_what_it_did_not_write(single_run, tmp_path):
    run_dir = single_run.run_dir
    before = sorted(os.listdir(run_dir))
    for target in (run_dir, os.path.dirname(run_dir)):
        with pytest.raises(RunError, match="is the run directory or holds it"):
            single_run.export(target, overwrite=True)
    assert sorted(os.listdir(run_dir)) == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    (mine / "3").mkdir()
    with pytest.raises(RunError, match=r"mine: holds other files than version folders "
                                       r"\(notes.txt\); export to a new directory"):
        single_run.export(str(mine), overwrite=True)
    assert sorted(os.listdir(mine)) == ["3", "notes.txt"]
    unversioned = tmp_path / "unversioned"  # a SavedModel written straight into the folder
    unversioned.mkdir()
    for name in ("saved_model.pb", "variables", "assets"):
        (unversioned / name).write_text("")
    with pytest.raises(RunError, match=r"holds other files than version folders \(assets, "
                                       r"saved_model.pb, variables\)"):
        single_run.export(str(unversioned), version=1, overwrite=True)
    (tmp_path / "file").write_text("")
    with pytest.raises(RunError, match="--to in .*file: is a file"):
        single_run.export(str(tmp_path / "file"))


# --- the tokenizer in the graph ---------------------------------------------------------


def _random_unicode(n, seed):
    """Texts of random code points: any, Greek with marks and modifier letters, and the
    first planes."""
    rng = random.Random(seed)
    greek = [*range(0x370, 0x400), 0x2B0, 0x2B1, 0x345, 0x27, 0x2019, 0xB7, 0x300, 0x301, 0x20,
             0x41, 0x3A3, 0x3A3, 0x200B, 0x9]
    texts = []
    for i in range(n):
        pick = (lambda: rng.randrange(0x110000), lambda: rng.choice(greek),
                lambda: rng.randrange(0x3100))[i % 3]
        cps = (pick() for _ in range(rng.randrange(30)))
        texts.append("".join(chr(cp) for cp in cps if not 0xD800 <= cp <= 0xDFFF))
    return texts


@pytest.mark.slow
@pytest.mark.parametrize("vocab", [SMALL_VOCAB, GOOGLE_VOCAB], ids=["zh-small", "google-chinese"])
def test_graph_tokenizer_gives_the_tokenizers_ids(vocab):
    tokenizer = Tokenizer(vocab)
    singles, pairs = TextEncoder(vocab, maxlen=512), TextEncoder(vocab, maxlen=64)
    encode = tf.function(singles, input_signature=[tf.TensorSpec([None], tf.string)])
    encode_pairs = tf.function(pairs, input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    reviews = _review_texts()
    adversarial = ADVERSARIAL + _random_unicode(3000, seed=0)
    cases = [(reviews, None, 512), (reviews[:-1], reviews[1:], 64), (adversarial, None, 512),
             (adversarial, adversarial[::-1], 64)]
    for texts, second, maxlen in cases:
        expected = tokenizer.encode_batch(texts, second, maxlen=maxlen)
        got = (encode(tf.constant(texts)) if second is None
               else encode_pairs(tf.constant(texts), tf.constant(second)))
        for want, have in zip(expected, got):
            have = have.numpy()
            assert have.dtype == np.int32 and have.shape == want.shape
            different = np.flatnonzero((have != want).any(-1))
            assert not len(different), [texts[i] for i in different[:5]]


def test_graph_tokenizer_truncates_pairs_longest_first():
    tokenizer = Tokenizer(GOOGLE_VOCAB)
    first = ["今天天气很好", "短", "一二三四五六七八九十"]
    second = ["适合出去玩", "一二三四五六七八九十", "短"]
    for maxlen in (4, 5, 8, 9, 12):
        got = TextEncoder(GOOGLE_VOCAB, maxlen)(tf.constant(first), tf.constant(second))
        want = tokenizer.encode_batch(first, second, maxlen=maxlen)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b)


@pytest.mark.slow
@pytest.mark.parametrize("vocab", [SMALL_VOCAB, GOOGLE_VOCAB], ids=["zh-small", "google-chinese"])
def test_graph_tokenizer_gives_each_tokens_characters_as_rematch(vocab):
    """TextEncoder.pieces (what NER and QA exports use): the characters of each token as
    Tokenizer.rematch gives them, and which tokens are ## pieces."""
    tokenizer = Tokenizer(vocab)
    pieces = tf.function(TextEncoder(vocab, maxlen=512).pieces,
                         input_signature=[tf.TensorSpec([None], tf.string)])
    texts = ADVERSARIAL + _random_unicode(3000, seed=1) + _review_texts()
    ids, starts, ends, word_starts = (part.to_list() for part in pieces(tf.constant(texts)))
    for i, text in enumerate(texts):
        tokens = tokenizer.tokenize(text)[1:-1]
        spans = [(chars[0], chars[-1] + 1) for chars in tokenizer.rematch(text, tokens)]
        assert ids[i] == tokenizer.tokens_to_ids(tokens), text
        assert list(zip(starts[i], ends[i])) == spans, text
        assert word_starts[i] == [not token.startswith("##") for token in tokens], text
