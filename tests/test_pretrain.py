"""Masked-LM pretraining: masking rules, the reduced vocabulary, the CLI, resuming, and the
shipped kerasbert-zh-small checkpoint."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import Tokenizer, build_transformer_model
from kerasbert.cli.main import main
from kerasbert.pretraining.corpus import (
    SPECIAL_TOKENS,
    read_corpus,
    reduce_vocab,
    split_rows,
)
from kerasbert.pretraining.masking import Masker
from kerasbert.pretraining.mlm import PretrainOptions, evaluate_mlm, mlm_training_model, pretrain
from kerasbert.text.padding import sequence_padding
from kerasbert.training.rundir import RunError

CHINESE_VOCAB = "checkpoints/chinese_L-12_H-768_A-12/vocab.txt"
SHIPPED = "kerasbert/resources/kerasbert-zh-small"
PAD, UNK, CLS, SEP, MASK = range(5)


# ---------------------------------------------------------------------------------- masking
def random_rows(rng, rows, width, vocab_size):
    """[CLS] tokens [SEP] [PAD]..., lengths 1 to width - 2 tokens."""
    ids = np.zeros((rows, width), dtype=np.int32)
    for row in range(rows):
        n = int(rng.integers(1, width - 1))
        ids[row, 0], ids[row, n + 1] = CLS, SEP
        ids[row, 1:n + 1] = rng.integers(5, vocab_size, size=n)
    return ids


def test_masking_follows_bert_statistics_and_never_touches_specials():
    rng = np.random.default_rng(0)
    ids = random_rows(rng, 4000, 64, vocab_size=1000)
    ids[::7, 3] = UNK  # a few [UNK]s inside texts
    masker = Masker(MASK, [PAD, UNK, CLS, SEP, MASK], vocab_size=1000)
    batch = masker(ids, np.random.default_rng(1))

    chosen = batch.weights > 0
    ordinary = ids >= 5
    np.testing.assert_array_equal(batch.labels, ids)
    assert not chosen[~ordinary].any()  # never [PAD], [UNK], [CLS], [SEP]
    np.testing.assert_array_equal(batch.inputs[~chosen], ids[~chosen])
    words = ordinary.sum(1)
    np.testing.assert_array_equal(chosen.sum(1), np.maximum(1, np.rint(0.15 * words)))
    assert abs(chosen.sum() / ordinary.sum() - 0.15) < 0.005

    masked = batch.inputs[chosen] == MASK
    kept = batch.inputs[chosen] == ids[chosen]
    replaced = ~masked & ~kept
    n = chosen.sum()
    assert abs(masked.sum() / n - 0.8) < 0.01
    assert abs(replaced.sum() / n - 0.1) < 0.01
    assert abs(kept.sum() / n - 0.1) < 0.01
    assert batch.inputs[chosen][replaced].min() >= 5  # random tokens are ordinary ones
    assert batch.weights.dtype == np.float32


def test_masking_is_reproducible_and_fresh_per_generator_state():
    masker = Masker(MASK, [PAD, UNK, CLS, SEP, MASK], vocab_size=50)
    ids = random_rows(np.random.default_rng(0), 16, 20, 50)
    first = masker(ids, np.random.default_rng([7, 0, 3]))
    again = masker(ids, np.random.default_rng([7, 0, 3]))
    other = masker(ids, np.random.default_rng([7, 1, 3]))
    np.testing.assert_array_equal(first.inputs, again.inputs)
    np.testing.assert_array_equal(first.weights, again.weights)
    assert (first.weights != other.weights).any()


def test_whole_words_are_masked_together():
    tokens = list(SPECIAL_TOKENS) + ["un", "##aff", "##able", "run", "##s", "好", "##x"]
    token_dict = {t: i for i, t in enumerate(tokens)}
    masker = Masker.for_vocab(token_dict, rate=0.5)
    un, aff, able, run, s, good, x = (token_dict[t] for t in tokens[5:])
    # un##aff##able | run##s | 好 | [UNK]##x: the ## after [UNK] is a word of its own.
    row = [CLS, un, aff, able, run, s, good, UNK, x, SEP, PAD]
    seen = set()
    for seed in range(200):
        chosen = masker(np.array([row]), np.random.default_rng(seed)).weights[0] > 0
        assert chosen[1] == chosen[2] == chosen[3] and chosen[4] == chosen[5]
        assert not chosen[[0, 7, 9, 10]].any()
        assert chosen[[1, 4, 6, 8]].sum() == 2  # round(0.5 * 4 words)
        seen.add(tuple(chosen[[1, 4, 6, 8]]))
    assert len(seen) == 6  # every pair of words gets its turn


def test_the_training_model_predicts_at_the_gathered_positions(tiny_config):
    bert = build_transformer_model(tiny_config, with_mlm="linear")
    ids = random_rows(np.random.default_rng(2), 6, 12, tiny_config.vocab_size)
    batch = Masker(MASK, [PAD, UNK, CLS, SEP, MASK], tiny_config.vocab_size)(
        ids, np.random.default_rng(3))
    positions, labels, weights = batch.gathered(min_k=3)
    chosen = batch.weights > 0
    assert positions.shape[1] == max(3, chosen.sum(1).max())
    np.testing.assert_array_equal(weights.sum(1), chosen.sum(1))
    np.testing.assert_array_equal(np.sort(np.where(weights > 0, positions, -1), axis=1)[:, -1],
                                  [np.flatnonzero(row).max() for row in chosen])
    segments = np.zeros_like(ids)
    full = np.asarray(bert([batch.inputs, segments]))
    part = np.asarray(mlm_training_model(bert)([batch.inputs, segments, positions]))
    np.testing.assert_allclose(part, np.take_along_axis(full, positions[..., None], axis=1),
                               atol=1e-5)
    np.testing.assert_array_equal(labels, np.take_along_axis(ids, positions, axis=1))


def test_masker_refuses_a_vocabulary_without_mask():
    with pytest.raises(ValueError, match=r"no \[MASK\] token"):
        Masker.for_vocab({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4})
    with pytest.raises(ValueError, match=r"mask_prob \(0.8\) \+ random_prob \(0.3\)"):
        Masker(MASK, [PAD], vocab_size=10, random_prob=0.3)


# ------------------------------------------------------------------------------- vocabulary
@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    """40 real reviews and a line of English WordPiece words, as TSV and as plain text."""
    rows = open("kerasbert/resources/reviews/train.tsv", encoding="utf-8").read().splitlines()[1:41]
    texts = [row.split("\t", 1)[1] for row in rows] + ["unaffable runners, 2.5倍 BERT"]
    root = tmp_path_factory.mktemp("corpus")
    (root / "corpus.tsv").write_text(
        "label\ttext\n" + "".join(f"x\t{t}\n" for t in texts), encoding="utf-8")
    (root / "corpus.txt").write_text("\n".join(texts) + "\n\n", encoding="utf-8")
    return root, texts


def test_reduced_vocabulary_tokenizes_the_corpus_as_the_full_one(corpus_file):
    root, texts = corpus_file
    assert read_corpus([root / "corpus.tsv"]) == read_corpus([root / "corpus.txt"]) == texts
    vocab = reduce_vocab(CHINESE_VOCAB, texts)
    full, reduced = Tokenizer(CHINESE_VOCAB), Tokenizer(vocab.token_dict)
    assert vocab.tokens[:5] == list(SPECIAL_TOKENS)
    assert 100 < len(vocab.tokens) < 1500
    assert any(t.startswith("##") for t in vocab.tokens)
    full_tokens = full.ids_to_tokens(range(full.vocab_size))
    assert [full_tokens[i] for i in vocab.keep_tokens] == vocab.tokens
    for text, row in zip(texts, vocab.rows):
        assert reduced.tokenize(text) == full.tokenize(text)
        assert reduced.encode(text)[0] == row.tolist()


def test_long_rows_are_split_with_their_own_cls_and_sep():
    continuation = np.zeros(20, dtype=bool)
    continuation[[11, 12]] = True
    row = np.array([CLS, 5, 6, 7, 10, 11, 12, 8, 9, SEP])
    pieces = split_rows([row], maxlen=6, continuation=continuation)
    assert [p.tolist() for p in pieces] == [[CLS, 5, 6, 7, SEP], [CLS, 10, 11, 12, 8, SEP],
                                            [CLS, 9, SEP]]
    assert sequence_padding(pieces).shape == (3, 6)
    with pytest.raises(ValueError, match=r"maxlen \(2\) must be at least 3"):
        split_rows([row], maxlen=2)


# ------------------------------------------------------------------------------ whole runs
def run_options(corpus_file, tiny_config_path, output, **changes):
    root, _ = corpus_file
    values = dict(config=str(tiny_config_path), vocab=CHINESE_VOCAB,
                  corpus=[str(root / "corpus.tsv")], output=str(output), steps=10,
                  steps_per_epoch=4, batch_size=8, maxlen=32, lr=1e-3, seed=3)
    values.update(changes)
    return PretrainOptions(**values)


def checkpoint_arrays(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.mark.slow
@pytest.mark.peer
def test_cli_writes_a_google_checkpoint_that_bert4keras_reads(corpus_file, tiny_config_path,
                                                              tmp_path, capsys):
    from peers import run_bert4keras

    root, texts = corpus_file
    output = tmp_path / "out"
    assert main(["pretrain", "--config", str(tiny_config_path), "--vocab", CHINESE_VOCAB,
                 "--corpus", str(root / "corpus.txt"), "--dev", str(root / "corpus.tsv"),
                 "--output", str(output), "--steps", "6", "--steps-per-epoch", "4",
                 "--batch-size", "8", "--maxlen", "32"]) == 0
    assert "dev MLM accuracy" in capsys.readouterr().out
    assert sorted(os.listdir(output)) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "fingerprints.json", "history.csv", "history.json", "pretrain_config.json",
        "pretrain_metrics.json", "vocab.txt"]
    vocab = (output / "vocab.txt").read_text(encoding="utf-8").splitlines()
    config = json.loads((output / "bert_config.json").read_text())
    metrics = json.loads((output / "pretrain_metrics.json").read_text())
    assert config["vocab_size"] == len(vocab) == metrics["vocab_size"]
    assert metrics["steps"] == 6 and metrics["dev"]["masked_tokens"] > 100
    stored = checkpoint_arrays(output / "bert_model.ckpt")
    assert stored["cls/predictions/output_bias"].shape == (len(vocab),)
    assert {"cls/predictions/transform/dense/kernel", "cls/predictions/transform/LayerNorm/gamma",
            "bert/embeddings/word_embeddings"} <= set(stored)

    ids, segments = Tokenizer(str(output / "vocab.txt")).encode_batch(texts[:3], maxlen=32)
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "segments.npy", segments)
    theirs = run_bert4keras(f"""
        import json, numpy as np
        from bert4keras.models import build_transformer_model
        bert = build_transformer_model({str(output / 'bert_config.json')!r},
                                       {str(output / 'bert_model.ckpt')!r}, with_mlm=True)
        x = [np.load({str(tmp_path / 'ids.npy')!r}), np.load({str(tmp_path / 'segments.npy')!r})]
        np.save({str(tmp_path / 'theirs.npy')!r}, bert.predict(x, verbose=0))
        print(json.dumps("ok"))
    """)
    assert theirs == "ok"
    ours = build_transformer_model(str(output / "bert_config.json"),
                                   str(output / "bert_model.ckpt"), with_mlm=True)
    np.testing.assert_allclose(ours([ids, segments]), np.load(tmp_path / "theirs.npy"),
                               atol=1e-5)


class Kill(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations.numpy() == 6:  # epoch 2, batch 2
            raise KeyboardInterrupt("killed")


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_weights(corpus_file, tiny_config_path, tmp_path):
    """Bit for bit, dropout included (the tiny config has dropout 0.1)."""
    whole = pretrain(run_options(corpus_file, tiny_config_path, tmp_path / "whole"))
    killed = run_options(corpus_file, tiny_config_path, tmp_path / "killed")
    with pytest.raises(KeyboardInterrupt):
        pretrain(killed, callbacks=[Kill()])
    with pytest.raises(RunError, match="holds an interrupted run; pass --resume"):
        pretrain(killed)
    with pytest.raises(RunError, match=r"options differ \(lr \(0.001 -> 0.002\)\)"):
        pretrain(run_options(corpus_file, tiny_config_path, tmp_path / "killed", resume=True,
                             lr=2e-3))
    resumed = pretrain(run_options(corpus_file, tiny_config_path, tmp_path / "killed",
                                   resume=True))
    assert resumed["resumed_at_epoch"] == 1 and resumed["steps"] == whole["steps"] == 10
    assert resumed["train"] == whole["train"]
    first = checkpoint_arrays(tmp_path / "whole" / "bert_model.ckpt")
    second = checkpoint_arrays(tmp_path / "killed" / "bert_model.ckpt")
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)
    history = (tmp_path / "killed" / "history.csv").read_text().splitlines()
    assert history == (tmp_path / "whole" / "history.csv").read_text().splitlines()
    assert len(history) == 1 + 3 and not (tmp_path / "killed" / "backup").exists()
    with pytest.raises(RunError, match="holds a finished run"):
        pretrain(killed)


# -------------------------------------------------------------------- the shipped checkpoint
def test_shipped_checkpoint_predicts_masked_dev_characters():
    """The embedded default: loads strictly with its MLM head and has learned Chinese."""
    bert = build_transformer_model(f"{SHIPPED}/bert_config.json", f"{SHIPPED}/bert_model.ckpt",
                                   with_mlm=True, return_keras_model=False)
    assert bert.load_report.ok and not bert.load_report.unused
    tokenizer = Tokenizer(f"{SHIPPED}/vocab.txt")
    assert tokenizer.vocab_size == bert.config.vocab_size
    texts = read_corpus(["kerasbert/resources/reviews/dev.tsv"])[:64]
    ids, _ = tokenizer.encode_batch(texts, maxlen=128)
    result = evaluate_mlm(bert.model, ids, Masker.for_vocab(tokenizer.token_dict))
    # Chance is 1 / vocab_size (about 0.0002); docs/pretraining.md records the whole dev split.
    assert result["masked_tokens"] > 300 and result["accuracy"] > 0.25
    size = sum(os.path.getsize(os.path.join(SHIPPED, f)) for f in os.listdir(SHIPPED))
    assert size < 26 * 2**20


@pytest.mark.slow
@pytest.mark.parametrize("family, changes, maxlen", [
    ("albert", {"embedding_size": 8}, 32),
    ("roformer", {}, 48),  # past max_position_embeddings (32): rotary positions have no table
])
def test_pretraining_another_family_writes_its_checkpoint_names(corpus_file, tiny_config,
                                                                tmp_path, family, changes,
                                                                maxlen):
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**tiny_config.to_dict(), **changes}))
    summary = pretrain(run_options(corpus_file, config, tmp_path / "run", model=family,
                                   maxlen=maxlen))
    stored = checkpoint_arrays(tmp_path / "run" / "bert_model.ckpt")
    shared = "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel"
    assert (shared in stored) == (family == "albert")
    assert ("bert/embeddings/position_embeddings" in stored) == (family == "albert")
    bert = build_transformer_model(str(tmp_path / "run" / "bert_config.json"),
                                   str(tmp_path / "run" / "bert_model.ckpt"), model=family,
                                   with_mlm=True, return_keras_model=False)
    assert bert.load_report.ok and not bert.load_report.unused
    assert bert.model.count_params() == summary["parameters"]
