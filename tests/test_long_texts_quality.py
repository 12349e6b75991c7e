"""The long-text check (``python -m bench long-quality``): its examples put every review past
the checkpoint's 512 positions, the same way on every machine, and both fine-tuning runs go
through end to end (here on a tiny randomly initialised model, so in seconds)."""

import os

import numpy as np
import pytest

from bench import cli, long_quality
from bench.long_texts import LABELS, long_examples
from kerasbert import Tokenizer, shipped
from tests.conftest import TINY


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer(os.path.join(shipped.model_dir(), "vocab.txt"))


@pytest.fixture(scope="module")
def examples(tokenizer):
    return long_examples("dev", 40, tokenizer)


def test_labels_are_balanced(examples):
    labels = [example.label for example in examples]
    assert {label: labels.count(label) for label in LABELS} == {"negative": 20, "positive": 20}
    assert labels[:20] != sorted(labels[:20])  # shuffled, not one label after the other


def test_every_review_starts_past_position_512_and_is_tokenized_as_on_its_own(examples,
                                                                             tokenizer):
    # 512 news tokens after [CLS]: every review at position 513, past a checkpoint's table.
    assert {example.review_start for example in examples} == {513}
    for example in examples:
        token_ids, _ = tokenizer.encode(example.text)
        assert token_ids[example.review_start:-1] == tokenizer.encode(example.review)[0][1:-1]
        assert example.text.endswith(example.review)
    # So the head a 512-position checkpoint keeps is news alone: no review label leaks in.
    head, _ = tokenizer.encode(examples[0].text, maxlen=512)
    news = examples[0].text[:-len(examples[0].review)]
    assert head == tokenizer.encode(news, maxlen=512)[0]


def test_the_same_arguments_give_the_same_examples(examples, tokenizer):
    assert long_examples("dev", 40, tokenizer) == examples
    assert long_examples("dev", 40, tokenizer, seed=1) != examples


def test_an_odd_count_is_refused_by_name(tokenizer):
    with pytest.raises(ValueError, match=r"count \(7\) must be even"):
        long_examples("dev", 7, tokenizer)


def test_python_m_bench_takes_the_hyphen_spelling(monkeypatch):
    ran = []
    monkeypatch.setattr(cli, "wait_for_quiet", lambda *args: ([0.0] * 3, False))
    monkeypatch.setattr(cli, "run_suites", lambda names, *args: ran.append(names) or {})
    assert cli.main(["long-quality", "--json", ""]) == 0
    assert ran == [["long_quality"]]


def test_both_runs_fine_tune_and_score_on_a_tiny_model(tokenizer):
    """Truncated at the tiny model's 32 positions against 256 tokens read with hierarchical
    positions, on examples whose review starts at position 41 (eager: tracing the steps
    would take longer than running them)."""
    config = {**TINY, "vocab_size": tokenizer.vocab_size}
    small = {"config": config, "train_split": "dev", "dev_split": "test", "train_count": 8,
             "dev_count": 8, "prefix_tokens": 40, "max_review_tokens": 16, "epochs": 1,
             "batch_size": 4, "run_eagerly": True}
    truncated = long_quality.finetune(maxlen=32, **small)
    hierarchical = long_quality.finetune(maxlen=256, hierarchical=True, **small)
    assert truncated["train_tokens"] == [8, 32]
    assert 32 < hierarchical["train_tokens"][1] <= 256
    for result in (truncated, hierarchical):
        assert 0.0 <= result["dev_accuracy"] <= 1.0 and result["chance"] == 0.5
        assert np.isfinite(result["train_loss"]).all() and len(result["train_loss"]) == 1
