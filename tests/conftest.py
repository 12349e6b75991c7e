"""The tiny config every fast test uses, and the fixtures more than one test file shares."""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The one tiny config every fast test uses.
TINY = {
    "vocab_size": 100,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 32,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}


@pytest.fixture(autouse=True)
def _run_from_root(monkeypatch):
    # Paths such as checkpoints/... in tests and docs are relative to the repository root.
    monkeypatch.chdir(ROOT)


@pytest.fixture
def tiny_config():
    from kerasbert import BertConfig

    return BertConfig.from_dict(dict(TINY))


@pytest.fixture
def tiny_config_path(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(TINY))
    return path


# ------------------------------------------------- a tiny fine-tuning task, and a run of it
# A synthetic Chinese task the tiny model can learn: each text holds one word of its class.
GOOD, BAD, NEUTRAL = "好棒赞爱", "差烂坏糟", "这个东西我们买了用过书店"


def make_rows(n, seed):
    """``n`` (label, text) rows, alternately positive and negative."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = ("positive", "negative")[i % 2]
        words = list(rng.choice(list(NEUTRAL), size=rng.integers(3, 12)))
        words.insert(int(rng.integers(0, len(words))),
                     rng.choice(list(GOOD if i % 2 == 0 else BAD)))
        rows.append((label, "".join(words)))
    return rows


def write_tsv(path, rows):
    path.write_text("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows),
                    encoding="utf-8")
    return str(path)


def train_options(inputs, output, **changes):
    """The ClassificationOptions of a tiny fine-tuning run on ``inputs`` (see
    ``tiny_run_inputs``)."""
    from kerasbert.tasks.classification.task import ClassificationOptions

    # The tiny model learns the task from most seeds; seed 42's dropout masks leave it at chance.
    values = dict(inputs, output=str(output), epochs=3, batch_size=16, lr=1e-2, maxlen=32,
                  patience=0, seed=1)
    values.update(changes)
    return ClassificationOptions(**values)


@pytest.fixture(scope="session")
def tiny_run_inputs(tmp_path_factory):
    """A tiny pretrained-format model (random weights) and train/dev/test files; read-only."""
    import keras

    from kerasbert import build_transformer_model, save_weights_as_checkpoint

    root = tmp_path_factory.mktemp("finetune")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(GOOD + BAD + NEUTRAL))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(TINY, vocab_size=len(vocab))
    (root / "bert_config.json").write_text(json.dumps(config))
    keras.utils.set_random_seed(0)
    save_weights_as_checkpoint(build_transformer_model(config, with_pool=True),
                               str(root / "bert_model.ckpt"))
    return {
        "config": str(root / "bert_config.json"), "checkpoint": str(root / "bert_model.ckpt"),
        "vocab": str(root / "vocab.txt"),
        "train": write_tsv(root / "train.tsv", make_rows(384, 1)),
        "dev": write_tsv(root / "dev.tsv", make_rows(64, 2)),
        "test": write_tsv(root / "test.tsv", make_rows(64, 3)),
    }


@pytest.fixture(scope="session")
def finished_run(tiny_run_inputs, tmp_path_factory):
    """A finished 3-epoch run on ``tiny_run_inputs``: its directory and its summary.

    Made once for the session and shared by the test files; tests only read it.
    """
    from kerasbert.tasks.classification.task import train

    output = tmp_path_factory.mktemp("runs") / "run"
    return output, train(train_options(tiny_run_inputs, output))


def pytest_collection_modifyitems(config, items):
    """The longest files first (tests/durations.json): with the files spread over the
    workers (``make test``: ``-n logical --dist loadfile``), the last file to start is a
    short one, so the workers end together. A file's tests keep their order."""
    from durations import load

    seconds = load()["files"]
    items.sort(key=lambda item: -seconds.get(os.path.basename(str(item.path)), 0.0))
