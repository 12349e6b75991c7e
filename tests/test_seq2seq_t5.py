"""Seq2seq runs on T5 (t5.1.1): SentencePiece text, teacher-forcing rows, a whole run through
the command line in fresh processes (train, evaluate, predict), and the refusals."""

import csv
import dataclasses
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from kerasbert import build_transformer_model, shipped
from kerasbert.cli.main import main
from kerasbert.tasks.seq2seq.t5 import training_arrays
from kerasbert.tasks.seq2seq.task import Pair, generate_texts, read_pairs
from kerasbert.text.pieces import SentencePieceText
from kerasbert.tokenizers import SpTokenizer

#: The copy task: a source of filler characters names one person by a surname, and the
#: target copies it out (each character is a piece of its own in the SentencePiece model).
FILLER, NAMES = "的了在是我有和就不人都上也很到说", "张王李赵刘陈杨黄"


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory):
    """A T5-laid-out SentencePiece model (pad 0, </s> 1, unk 2) of 300 shipped pairs."""
    import sentencepiece

    root = tmp_path_factory.mktemp("pieces")
    texts = [text for pair in read_pairs(shipped.data_file("peoples_daily_seq2seq", "train"))[:300]
             for text in (pair.source, pair.target)]
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_prefix=str(root / "spiece"), vocab_size=2000,
        hard_vocab_limit=False, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1,
        minloglevel=2)
    return str(root / "spiece.model")


@pytest.fixture(scope="module")
def english_sp_model(tmp_path_factory):
    """A T5-laid-out SentencePiece model of English text only."""
    import sentencepiece

    root = tmp_path_factory.mktemp("english")
    words = "the model reads text and writes pieces of words for every sentence it sees".split()
    texts = [" ".join(words[i:] + words[:i]) for i in range(len(words))] * 20
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_prefix=str(root / "spiece"), vocab_size=60,
        hard_vocab_limit=False, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1,
        minloglevel=2)
    return str(root / "spiece.model")


def t5_config(vocab_size):
    return {"vocab_size": vocab_size, "hidden_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 4, "attention_head_size": 8, "intermediate_size": 64,
            "hidden_act": ["gelu", "linear"], "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "model_type": "t5.1.1"}


def copy_pairs(path, count, seed, long=0):
    """Sources of 1 to 6 filler characters and a surname, whose target is the surname;
    the first ``long`` sources hold 20 filler characters before it."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for k in range(count):
            filler = [rng.choice(FILLER) for _ in range(20 if k < long else rng.randint(1, 6))]
            name = rng.choice(NAMES)
            filler.insert(rng.randint(0, len(filler)), name)
            f.write(json.dumps({"source": "".join(filler), "target": name},
                               ensure_ascii=False) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def t5_inputs(sp_model, tmp_path_factory):
    """A tiny random t5.1.1 written as a checkpoint, its SentencePiece model and copy pairs."""
    import keras

    root = tmp_path_factory.mktemp("t5run")
    (root / "config.json").write_text(json.dumps(t5_config(SentencePieceText(sp_model)
                                                           .vocab_size)))
    keras.utils.set_random_seed(0)
    t5 = build_transformer_model(str(root / "config.json"), return_keras_model=False)
    written = t5.save_weights_as_checkpoint(str(root / "model.ckpt"))
    return {"config": str(root / "config.json"), "checkpoint": str(root / "model.ckpt"),
            "sp-model": sp_model, "train": copy_pairs(root / "train.jsonl", 480, 1, long=1),
            "dev": copy_pairs(root / "dev.jsonl", 16, 2),
            "test": copy_pairs(root / "test.jsonl", 24, 3)}, written


def test_pieces_are_those_of_sptokenizer_for_t5_and_decode_back(sp_model):
    ours = SentencePieceText(sp_model)
    theirs = SpTokenizer(sp_model, token_start=None, token_end="</s>")
    sources = [pair.source
               for pair in read_pairs(shipped.data_file("peoples_daily_seq2seq", "dev"))[:50]]
    for maxlen in (None, 6):
        assert [ours.encode(s, maxlen) for s in sources] == \
            [theirs.encode(s, maxlen=maxlen)[0] for s in sources]
    ids = ours.encode("江泽民在北京会见了新华社记者。")
    assert ids[-1] == ours.end_id == 1
    assert ours.decode(ids + [0, 0]) == theirs.decode(ids) == "江泽民在北京会见了新华社记者。"


def test_a_sentencepiece_model_not_laid_out_as_t5_s_is_refused(tmp_path):
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["语言模型"] * 20), model_prefix=str(tmp_path / "plain"),
        vocab_size=8, hard_vocab_limit=False, num_threads=1, minloglevel=2)
    with pytest.raises(ValueError, match=r"plain.model: pad id -1 and end id 2; a T5 model "
                                         "pads with id 0"):
        SentencePieceText(tmp_path / "plain.model")


def test_teacher_forcing_rows_start_the_decoder_at_0_and_end_the_labels_with_the_end_id(
        sp_model):
    pieces = SentencePieceText(sp_model)
    pairs = [Pair("我在看书", "张明", 1), Pair("的了在是我有和就不人", "北京", 2)]
    encoder_ids, decoder_ids, labels, cut = training_arrays(pieces, pairs, maxlen=6)
    source, target = pieces.encode("我在看书"), pieces.encode("张明")
    width = max(len(source), 6)
    assert encoder_ids.shape == decoder_ids.shape == labels.shape == (2, width)
    assert encoder_ids[0].tolist() == source + [0] * (width - len(source))
    assert labels[0].tolist() == target + [0] * (width - len(target))
    assert decoder_ids[0].tolist() == [0] + target[:-1] + [0] * (width - len(target))
    # The long source keeps 5 pieces and </s>; only that pair is cut.
    assert encoder_ids[1].tolist() == pieces.encode("的了在是我有和就不人")[:5] + [1]
    assert cut == 1


def test_a_t5_keras_model_is_written_in_all_of_bert4keras_s_t5_names(tmp_path):
    from kerasbert import save_weights_as_checkpoint

    t5 = build_transformer_model(t5_config(60), return_keras_model=False)
    expected = t5.save_weights_as_checkpoint(str(tmp_path / "t5" / "model.ckpt"))
    # A run saves the Keras model, whose encoder layers are "Encoder-Transformer-i-...".
    assert save_weights_as_checkpoint(t5.model, str(tmp_path / "keras" / "model.ckpt"),
                                      family="t5.1.1") == expected
    assert "encoder/block_001/layer_001/DenseReluDense/wi_1/kernel" in expected


def cli(*args):
    """``kerasbert ARGS`` in a fresh process: ``(exit code, stdout, stderr)``."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", CI="1",
               PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, "-m", "kerasbert.cli.main", *map(str, args)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.slow
def test_a_t5_run_learns_to_copy_and_fresh_processes_evaluate_and_predict_it(
        t5_inputs, tmp_path, capsys):
    """Why slow: the tiny T5 trains until it copies, then evaluate and predict run in fresh
    processes, as a user runs them after training."""
    import tensorflow as tf

    from kerasbert.tasks import open_run

    inputs, written = t5_inputs
    output = tmp_path / "run"
    code, out, err = cli("train", "--task", "seq2seq", "--output", output, "--epochs", 12,
                         "--batch-size", 16, "--lr", "1e-2", "--maxlen", 12, "--seed", 1,
                         "--patience", 0, "--dropout", 0, "--max-new-tokens", 8,
                         *[f"--{key}={value}" for key, value in inputs.items()])
    assert code == 0, err
    assert "test ROUGE-L" in out and "1 training pairs were longer than --maxlen" in out
    # Learning is real: the loss falls below log(8) / 3, where a model blind to the source
    # stops (it knows the target's frame but not which of the 8 surnames), and the test
    # surnames are copied out far better than by copying each source's first character.
    with open(output / "history.csv", encoding="utf-8") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    assert len(losses) == 12 and losses[-1] < 0.5 < losses[0] / 10, losses
    summary = json.loads((output / "metrics.json").read_text())
    assert summary["train_pairs_cut"] == 1
    assert summary["test"]["exact"] > 80, summary["test"]
    assert summary["test"]["exact"] > summary["test_copy_baseline"]["exact"] + 40
    # The run holds what a fresh process needs, the checkpoint in bert4keras's T5 names.
    assert {"spiece.model", "bert_config.json", "bert_model.ckpt.index", "model.keras",
            "train_config.json"} <= set(os.listdir(output))
    assert not (output / "vocab.txt").exists()
    names = tf.train.load_checkpoint(str(output / "bert_model.ckpt")).get_variable_to_shape_map()
    assert sorted(names) == written
    run = open_run(output)
    rebuilt = build_transformer_model(str(output / "bert_config.json"),
                                      str(output / "bert_model.ckpt"))
    encoder_ids, decoder_ids, _, _ = training_arrays(run.tokenizer, read_pairs(inputs["test"]),
                                                     12)
    np.testing.assert_allclose(rebuilt.predict([encoder_ids, decoder_ids], verbose=0),
                               run.model.predict([encoder_ids, decoder_ids], verbose=0),
                               atol=1e-6, rtol=0)

    code, out, err = cli("evaluate", "--model", output, "--data", inputs["test"], "--json")
    assert code == 0, err
    assert json.loads(out) == summary["test"]
    code, out, err = cli("predict", "--model", output, "--input", inputs["test"])
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows == run.predict(path=inputs["test"])
    targets = [pair.target for pair in read_pairs(inputs["test"])]
    assert sum(row["output"] == target for row, target in zip(rows, targets)) > 0.8 * len(rows)
    # Beam search generates from the same run, through the same T5 cache.
    beams, _ = generate_texts(run.model, run.tokenizer, targets[:4] + ["的了李在是"],
                              dataclasses.replace(run.options, num_beams=3))
    assert beams[-1] == "李"

    # The SavedModel generates from raw text as predict does, SentencePiece in the graph.
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "served")]) == 0
    served = tf.saved_model.load(str(tmp_path / "served" / "1")).signatures["generate"]
    sources = [row["source"] for row in rows] + ["的了李在是", "Hello 张 world", ""]
    got = served(source=tf.constant(sources))["output"].numpy()
    assert [text.decode() for text in got] == [row["output"] for row in run.predict(sources)]


@pytest.mark.parametrize("flags, message", [
    (["--config", "{t5}"], "missing file in --sp-model: t5.1.1 (from {t5}) reads text "
                           "through a SentencePiece model (T5's spiece.model), not vocab.txt"),
    (["--config", "{t5}", "--sp-model", "{sp}", "--vocab",
      "checkpoints/chinese_L-12_H-768_A-12/vocab.txt"],
     "invalid option in --vocab: t5.1.1 (from {t5}) reads text through --sp-model's "
     "SentencePiece model, not vocab.txt"),
    (["--sp-model", "{sp}"], "invalid option in --sp-model: bert (from {bert}) reads text "
                             "through vocab.txt (--vocab); a SentencePiece model is for the "
                             "T5 families (t5, t5.1.1, mt5.1.1)"),
    (["--config", "{t5}", "--sp-model", "{t5}"],
     "sentencepiece model in {t5}: not a SentencePiece model file"),
    (["--task", "ner", "--sp-model", "{sp}"],
     "invalid flag in --sp-model: --task ner does not use it (only --task seq2seq)"),
    (["--config", "{t5}", "--sp-model", "{folder}"],
     "sentencepiece model in {folder}: is a directory; give {folder}/spiece.model"),
    # English pieces for the shipped Chinese pairs: each source was read as [<unk>, </s>].
    (["--config", "{t5}", "--sp-model", "{english}"],
     "vocabulary in {english}: 100% of the text of the first 200 pairs of {train} is "
     "unknown (<unk>); it is not a vocabulary of the data's language: give the model's own"),
])
def test_a_tokenizer_that_does_not_fit_the_family_is_refused_by_name(
        sp_model, english_sp_model, tmp_path, capsys, flags, message):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(t5_config(2000)))
    paths = {"t5": str(config), "sp": sp_model, "folder": os.path.dirname(sp_model),
             "english": english_sp_model,
             "train": shipped.data_file("peoples_daily_seq2seq", "train"),
             "bert": os.path.join(shipped.model_dir(), "bert_config.json")}
    output = tmp_path / "run"
    argv = ["train", "--task", "seq2seq", "--output", str(output),
            *[flag.format(**paths) for flag in flags]]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"kerasbert train: {message.format(**paths)}"]
    assert not output.exists()


def test_a_mixed_precision_t5_run_generates_evaluates_and_predicts(t5_inputs, tmp_path, capsys):
    """``--mixed-precision`` on a T5: the dev generation after the epoch (where the encoder's
    cached pass met float32 weights in bfloat16 rows and the run stopped half-way), then
    evaluate and predict.

    Why slow: a training epoch, then the decoding loop compiled for the dev set, evaluate
    and predict, all in bfloat16."""
    inputs, _ = t5_inputs
    output = tmp_path / "run"
    flags = [f"--{key}={value}" for key, value in inputs.items()]
    assert main(["train", "--task", "seq2seq", "--output", str(output), "--epochs", "1",
                 "--batch-size", "32", "--maxlen", "12", "--max-new-tokens", "4",
                 "--max-train-examples", "64", "--mixed-precision", *flags]) == 0
    summary = json.loads((output / "metrics.json").read_text())
    capsys.readouterr()
    assert main(["evaluate", "--model", str(output), "--data", inputs["test"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == summary["test"]
    assert main(["predict", "--model", str(output), "的了李在是"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "的了李在是"
