"""Span QA runs: training windows, the loss, and whole runs from the command line."""

import json
import random

import numpy as np
import pytest

from conftest import TINY
from kerasbert import QuestionAnswerer, build_transformer_model, save_weights_as_checkpoint
from kerasbert.cli.main import main
from kerasbert.tasks import open_run
from kerasbert.tasks.qa.squad import Question, read_squad
from kerasbert.tasks.qa.task import SpanLoss, training_windows
from kerasbert.text.tokenizer import Tokenizer
from peers import run_python

CHINESE_VOCAB = "checkpoints/chinese_L-12_H-768_A-12/vocab.txt"


def test_each_window_points_at_the_answer_it_holds_or_at_cls():
    tokenizer = Tokenizer(CHINESE_VOCAB)
    context = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉"  # 20 characters, one token each
    questions = [Question("a", "谁", context, [("午未", 16)]), Question("b", "谁", context, [])]
    token_ids, segment_ids, positions = training_windows(tokenizer, questions, maxlen=12)
    # [CLS] 谁 [SEP] + 8 context tokens + [SEP]; windows overlap by 6 (half of 12): starts 0,
    # 2, 4 ... 12 for each question.
    assert token_ids.shape[1] == 12 and len(token_ids) == 2 * 7
    first = 3  # the first context token of a window
    for row, (start, end) in zip(token_ids[:7], positions[:7]):
        if (start, end) != (0, 0):
            assert tokenizer.ids_to_tokens(row[start:end + 1].tolist()) == ["午", "未"]
            assert start >= first
    assert sum((start, end) != (0, 0) for start, end in positions[:7]) == 2  # from 10 and 12
    assert not positions[7:].any()  # unanswerable: [CLS] in every window
    assert (segment_ids[:, :first] == 0).all() and (segment_ids[:, first] == 1).all()


def test_the_span_loss_is_the_cross_entropy_of_both_positions_without_padding():
    import keras

    tokens = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(5, 2, mask_zero=True)(tokens)  # a mask, as BERT's
    model = keras.Model(tokens, keras.layers.Identity()(hidden))
    logits = np.array([[[1.0, 0.0], [2.0, 3.0], [0.5, 9.0], [7.0, 7.0]]], "float32")
    model.get_layer(index=1).set_weights([np.concatenate([[[0, 0]], logits[0]])])
    ids = np.array([[1, 2, 3, 0]])  # the last position is padding: its logits must not count
    loss = float(SpanLoss()(np.array([[1, 2]]), model(ids)))
    start, end = logits[0, :3, 0], logits[0, :3, 1]
    expected = np.mean([np.log(np.exp(start).sum()) - start[1],
                        np.log(np.exp(end).sum()) - end[2]])
    assert loss == pytest.approx(expected, rel=1e-6)


# ---------------------------------------------------------------------------- whole runs
SURNAMES, GIVEN = "张王李赵刘", "明华伟芳"
FILLER = "的了在是我有和就不人都一上也很到说要去你会着没看好自"


def squad_file(path, count, seed):
    """Contexts of filler with at most one person (a surname and a given name); the
    question asks who is named, unanswerable when nobody is."""
    rng = random.Random(seed)
    paragraphs = []
    for n in range(count):
        before = "".join(rng.choice(FILLER) for _ in range(rng.randint(1, 8)))
        after = "".join(rng.choice(FILLER) for _ in range(rng.randint(1, 8)))
        if rng.random() < 0.8:
            name = rng.choice(SURNAMES) + rng.choice(GIVEN)
            qa = {"id": f"q{n}", "question": "谁？",
                  "answers": [{"text": name, "answer_start": len(before)}]}
        else:
            name, qa = "", {"id": f"q{n}", "question": "谁？", "is_impossible": True,
                            "answers": []}
        paragraphs.append({"context": before + name + after, "qas": [qa]})
    path.write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": paragraphs}]},
                               ensure_ascii=False), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def qa_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "谁", "？"] + sorted(
        set(SURNAMES + GIVEN + FILLER))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(TINY, vocab_size=len(vocab))
    (root / "bert_config.json").write_text(json.dumps(config))
    save_weights_as_checkpoint(build_transformer_model(config), str(root / "bert_model.ckpt"))
    return {"config": str(root / "bert_config.json"),
            "checkpoint": str(root / "bert_model.ckpt"), "vocab": str(root / "vocab.txt"),
            "train": squad_file(root / "train.json", 400, 1),
            "dev": squad_file(root / "dev.json", 48, 2),
            "test": squad_file(root / "test.json", 64, 3)}


@pytest.mark.slow
def test_a_qa_run_learns_to_answer_and_the_command_line_uses_it(qa_inputs, tmp_path, capsys):
    """Why slow: six epochs, until the tiny reader answers; then every command of a QA run
    (evaluate, predict, export) on it, the export in a fresh process."""
    output = tmp_path / "run"
    assert main(["train", "--task", "qa", "--output", str(output), "--epochs", "6",
                 "--batch-size", "16", "--lr", "5e-3", "--maxlen", "32", "--seed", "1",
                 "--patience", "0",
                 *[f"--{key}={value}" for key, value in qa_inputs.items()]]) == 0
    assert "test exact match" in capsys.readouterr().out
    summary = json.loads((output / "metrics.json").read_text())
    assert summary["test"]["f1"] > 90, summary["test"]
    assert summary["test"]["no_answer_total"] > 0

    assert main(["evaluate", "--model", str(output), "--data", qa_inputs["test"],
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == summary["test"]
    # The summary's dev scores, kept from the best epoch: those of the saved model.
    assert main(["evaluate", "--model", str(output), "--data", qa_inputs["dev"],
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == summary["dev"]
    assert main(["predict", "--model", str(output), "谁？", "我在看张明的书"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["answer"], row["start"], row["end"]) == ("张明", 3, 5)
    # The run's checkpoint holds the span head: it answers as the run does.
    found = QuestionAnswerer.from_checkpoint(output, max_seq_len=32, max_answer_len=30,
                                             handle_impossible_answer=True)(
        question="谁？", context="我在看张明的书")
    assert found["answer"] == "张明"
    assert found["score"] == pytest.approx(row["score"], abs=1e-6)
    assert open_run(output).options.task == "qa"
    # QuestionAnswerer(run_dir) answers with the run's settings, as predict does.
    found = QuestionAnswerer(output)(question="谁？", context="我在看张明的书")
    assert {"question": "谁？", **found} == row
    with pytest.raises(TypeError, match="leave out tokenizer"):
        QuestionAnswerer(output, open_run(output).tokenizer)

    # The exported SavedModel answers as predict does, from raw text, in a process that
    # does not import kerasbert: the test contexts, contexts of several windows (maxlen 32)
    # and characters the vocabulary lacks.
    run = open_run(output)
    pairs = [(q.question, q.context) for q in read_squad(qa_inputs["test"])]
    contexts = [c for _, c in pairs]
    pairs += [("谁？", "".join(contexts[k:k + 5])) for k in range(0, 40, 5)]
    pairs += [("谁？", "Ｘ我在 看张明的书!"), ("谁在看书？", "e\u0301我在\u200b看王华的书")]
    assert sum(len(c) > 27 for _, c in pairs) >= 8
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "served")]) == 0
    capsys.readouterr()
    served = run_python(f"""
        import json, sys, tensorflow as tf, tensorflow_text  # noqa: F401 (its ops)
        answer = tf.saved_model.load({str(tmp_path / "served" / "1")!r}).signatures["answer"]
        pairs = {pairs!r}
        out = answer(question=tf.constant([q for q, _ in pairs]),
                     context=tf.constant([c for _, c in pairs]))
        none = tf.constant([], tf.string)
        empty = {{key: value.shape.as_list()
                 for key, value in answer(question=none, context=none).items()}}
        try:
            answer(question=tf.constant(["谁？"]), context=tf.constant([" \u200b"]))
            refused = ""
        except tf.errors.InvalidArgumentError as error:
            refused = error.message
        print(json.dumps({{"answer": [a.decode("utf-8") for a in out["answer"].numpy()],
                          "start": out["start"].numpy().tolist(),
                          "end": out["end"].numpy().tolist(),
                          "score": out["score"].numpy().tolist(), "empty": empty,
                          "refused": refused,
                          "kerasbert": any(m.startswith("kerasbert") for m in sys.modules)}}))
    """)
    assert not served["kerasbert"]
    assert served["empty"] == {"answer": [0], "start": [0], "end": [0], "score": [0]}
    assert "context holds no token: nothing to answer from" in served["refused"]
    expected = run.predict(texts=[text for pair in pairs for text in pair])
    assert run.predict(texts=[]) == []
    assert [(row["answer"], row["start"], row["end"]) for row in expected] == list(
        zip(served["answer"], served["start"], served["end"]))
    assert sum(row["answer"] == "" for row in expected) > 0
    np.testing.assert_allclose(served["score"], [row["score"] for row in expected], rtol=1e-5)
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "onnx"),
                 "--format", "onnx"]) == 2
    assert capsys.readouterr().err.strip() == (
        "kerasbert export: invalid value 'onnx' in --format: qa runs export as saved_model "
        "only")
    assert not (tmp_path / "onnx").exists()
