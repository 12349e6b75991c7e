"""Data files are refused clearly, never half-read: SQuAD, NER and CSV files as users break them.

Each class of problem is met the way a user meets it: through the readers (SQuAD JSON, NER
JSONL and CoNLL, labelled CSV / TSV, files to predict on), and twice through ``kerasbert``
itself: exit code 2 and one line on stderr naming the file, the line or question, and the
field.
"""

import json
import logging
import os
import subprocess
import sys
import types

import keras
import pytest

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.cli.main import main
from kerasbert.models.heads import add_tagger
from kerasbert.tasks import ner, qa
from kerasbert.tasks.ner import data as ner_data
from kerasbert.tasks.qa.span_qa import add_span_head
from kerasbert.tasks.qa.squad import read_questions, read_squad
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.training.data import (
    DataError,
    decode_text,
    json_surrogate_line,
    keep_known_labels,
    read_examples,
    read_lines,
)

CONTEXT = "张三在北京工作。"
GOOD = {"id": "q1", "question": "谁？", "answers": [{"text": "张三", "answer_start": 0}]}
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(CONTEXT + "谁？哪里"))


def squad(tmp_path, *questions, name="data.json", article=None, paragraph=None):
    document = {"version": "v2.0", "data": [dict(article or {}, paragraphs=[
        dict(paragraph or {}, context=CONTEXT, qas=list(questions))])]}
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")  # ASCII, as CMRC's are
    return path


def refused(read, path, **kwargs):
    with pytest.raises(DataError) as caught:
        read(path, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message, message
    return message.replace(f"{path}", "FILE")


# ------------------------------------------------------------------------------ SQuAD files
@pytest.mark.parametrize("change, message", [
    ({"is_impossible": "false"},
     "bad field in FILE, question 'q1' at data[0].paragraphs[0].qas[0]: 'is_impossible' must "
     'be true or false, got a string ("false")'),
    ({"answers": [{"text": "。", "answer_start": -1}]},
     "bad answer in FILE, question 'q1' at data[0].paragraphs[0].qas[0], answers[0]: "
     "answer_start -1 is outside the 8-character context (the 1-character answer '。' can "
     "start at 0 to 7)"),
    ({"answers": [{"text": "张", "answer_start": True}]},
     "bad field in FILE, question 'q1' at data[0].paragraphs[0].qas[0], answers[0]: "
     "'answer_start' must be an integer, got a boolean (true)"),
    ({"answers": [{"text": "北京", "answer_start": 2}]},
     "bad answer in FILE, question 'q1' at data[0].paragraphs[0].qas[0], answers[0]: '北京' "
     "is not at answer_start 2 of the context, which holds '在北' there; '北京' is at 3"),
    ({"is_imposible": True},
     "bad question in FILE, question 'q1' at data[0].paragraphs[0].qas[0]: unknown key "
     "'is_imposible' (did you mean 'is_impossible'? known keys: id, question, answers, "
     "is_impossible, plausible_answers)"),
    ({"answers": [{"text": "张三", "answer_start": 0, "answer_end": 2}]},
     "bad answer in FILE, question 'q1' at data[0].paragraphs[0].qas[0], answers[0]: unknown "
     "key 'answer_end' (did you mean 'answer_start'? known keys: text, answer_start, id)"),
    ({"is_impossible": True},
     "bad question in FILE, question 'q1' at data[0].paragraphs[0].qas[0]: marked "
     "is_impossible yet it has 1 answer(s) (SQuAD v2.0 keeps an unanswerable question's "
     "guesses in 'plausible_answers')"),
    ({"id": 7}, "bad field in FILE, data[0].paragraphs[0].qas[0]: 'id' must be a string, got a "
                "number (7)"),
    ({"question": " "}, "bad field in FILE, question 'q1' at data[0].paragraphs[0].qas[0]: "
                        "empty 'question'"),
])
def test_squad_fields_are_checked_by_type_offset_and_name(tmp_path, change, message):
    assert refused(read_squad, squad(tmp_path, dict(GOOD, **change))) == message


def test_squad_duplicate_ids_and_unknown_paragraph_keys_are_refused(tmp_path):
    twice = squad(tmp_path, GOOD, dict(GOOD, question="又是谁？"))
    assert refused(read_squad, twice) == (
        "duplicate id in FILE, question 'q1' at data[0].paragraphs[0].qas[1]: the id of "
        "data[0].paragraphs[0].qas[0] too (EM and F1 count each id once)")
    typo = squad(tmp_path, GOOD, paragraph={"contexts": ""})
    assert refused(read_squad, typo) == (
        "bad paragraph in FILE, data[0].paragraphs[0]: unknown key 'contexts' (did you mean "
        "'context'? known keys: context, qas, id)")


def test_real_squad_v2_cmrc_and_drcd_keys_are_read(tmp_path):
    v2 = squad(tmp_path, GOOD, {"id": "q2", "question": "哪里？", "is_impossible": True,
                                "answers": [], "plausible_answers": [
                                    {"text": "北京", "answer_start": 3}]},
               article={"title": "张三"})
    assert [(q.id, q.answers) for q in read_squad(v2)] == [("q1", [("张三", 0)]), ("q2", [])]
    cmrc = squad(tmp_path, dict(GOOD, answers=[dict(GOOD["answers"][0], id="1")]),
                 name="cmrc.json", article={"id": "TRAIN_1", "title": "张三"},
                 paragraph={"id": "TRAIN_1"})
    assert read_squad(cmrc)[0].answers == [("张三", 0)]


def test_squad_bytes_and_lone_surrogates_name_the_line(tmp_path):
    path = squad(tmp_path, dict(GOOD, question="谁\ud800？"))
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "\\ud800" in text)
    assert refused(read_squad, path) == (
        f"bad field in FILE, line {line}, question 'q1' at data[0].paragraphs[0].qas[0]: "
        "'question' holds a lone surrogate escape \\ud800 in JSON (half of a UTF-16 pair, not "
        "a character)")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"data": [\n"caf\xe9"]}')
    assert refused(read_squad, latin) == ("bad line in FILE, line 2: invalid UTF-8 byte 0xe9 "
                                          "(the file must be UTF-8)")
    # An escaped backslash before "ud800" is text, and a surrogate pair is one character.
    assert json_surrogate_line('["\\\\ud800", "\\ud83d\\ude00",\n "\\udc00"]') == 2
    assert json_surrogate_line('["\\\\ud800", "\\ud83d\\ude00"]') is None


# ---------------------------------------------------------------------------- NER files
@pytest.mark.parametrize("row, message", [
    ({"text": "我在北京", "entity": [[2, 4, "LOC"]]},
     "bad row in FILE, line 1: unknown key 'entity' (did you mean 'entities'? known keys: "
     "text, entities, spans, id)"),
    ({"text": "我在北京", "entities": [{"start": 2, "end": 4, "lable": "LOC"}]},
     "bad entity in FILE, line 1, entities[0]: unknown key 'lable' (did you mean 'label'? "
     "known keys: start, end, label, type, text)"),
    ({"text": "我在北京", "entities": [{"start": 2, "end": 4, "label": "LOC", "text": "北"}]},
     "bad entity in FILE, line 1, entities[0]: its text '北' is not the text's characters "
     "[2, 4), '北京'"),
    ({"text": "我在北京", "entities": [[False, 4, "LOC"]]},
     "bad entity in FILE, line 1, entities[0]: 'start' must be an integer, got a boolean "
     "(false)"),
    ({"text": "我在北京", "entities": [[3, 3, "LOC"]]},
     "bad entity in FILE, line 1, entities[0]: [3, 3) is not a span of the 4-character text"),
    ({"text": "我在北京", "entities": [[2, 4, ""]]},
     "bad entity in FILE, line 1, entities[0]: label '' is empty or has spaces around it"),
    ({"text": "我在北京", "entities": [], "spans": []},
     "bad row in FILE, line 1: both 'entities' and 'spans' (give one)"),
    ({"text": "我在\ud800"},
     "bad row in FILE, line 1: 'text' holds a lone surrogate escape \\ud800 in JSON (half of "
     "a UTF-16 pair, not a character)"),
])
def test_ner_jsonl_rows_are_checked_key_by_key(tmp_path, row, message):
    path = tmp_path / "ner.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert refused(ner_data.read_sentences, path) == message


def test_ner_jsonl_keeps_unicode_line_separators_inside_a_text(tmp_path):
    path = tmp_path / "ner.jsonl"
    row = {"id": 3, "text": "北京\u2028上海", "entities": [{"start": 3, "end": 5, "type": "LOC",
                                                          "text": "上海"}]}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert [(s.text, s.entities) for s in ner_data.read_sentences(path)] == [
        ("北京\u2028上海", [("LOC", 3, 5)])]


@pytest.mark.parametrize("content, message", [
    ('{"text": "我在北京", "entities": []}\n',
     "bad line in FILE, line 1: a JSON object, not a token and its tag (a JSONL file of "
     "texts and entities is named .jsonl)"),
    ("张 B-PER\nB-PER 三\n",
     "bad tag in FILE, line 2: '三' is not a tag: expected 'O' or B-, I-, E-, S- followed by an "
     "entity type, such as 'B-PER' (the first column, 'B-PER', is a tag: the token goes "
     "first)"),
    (b"\xe5\xbc\xa0 B-PER\n\n\xd5\xc5 O\n",
     "bad line in FILE, line 3: invalid UTF-8 byte 0xd5 (the file must be UTF-8)"),
])
def test_conll_files_name_the_line_and_what_it_looks_like(tmp_path, content, message):
    path = tmp_path / "tags.txt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    assert refused(ner_data.read_sentences, path) == message


def test_ner_texts_to_tag_come_from_plain_tagged_table_or_jsonl_files(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("江泽民在北京会见了记者。\n\n New York \n", encoding="utf-8")
    assert [(s.text, s.where) for s in ner_data.read_texts(plain)] == [
        ("江泽民在北京会见了记者。", f"{plain}, line 1"), (" New York ", f"{plain}, line 3")]
    tagged = tmp_path / "tagged.txt"
    tagged.write_text("张 B-PER\n三 I-PER\n\n在 O\n", encoding="utf-8")
    assert [s.text for s in ner_data.read_texts(tagged)] == ["张三", "在"]
    table = tmp_path / "texts.tsv"
    table.write_text("id\ttext\n1\t江泽民\n2\t记者\n", encoding="utf-8")
    assert [s.text for s in ner_data.read_texts(table)] == ["江泽民", "记者"]
    lines = tmp_path / "texts.jsonl"
    lines.write_text('{"text": "江泽民"}\n{"txt": "记者"}\n', encoding="utf-8")
    assert refused(ner_data.read_texts, lines).startswith(
        "bad row in FILE, line 2: expected an object with a string 'text'")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n", encoding="utf-8")
    assert refused(ner_data.read_texts, blank) == "data in FILE: no text found"


# ------------------------------------------------------------------------ QA files to answer
def test_qa_questions_to_answer_come_from_squad_jsonl_or_tab_lines(tmp_path):
    unanswered = squad(tmp_path, {"id": "q1", "question": "谁？"})
    with pytest.raises(DataError, match="no 'answers'"):
        read_squad(unanswered)
    assert [(q.id, q.question) for q in read_questions(unanswered)] == [("q1", "谁？")]
    jsonl = tmp_path / "questions.jsonl"
    jsonl.write_text(json.dumps({"id": "a", "question": "谁？", "context": CONTEXT},
                                ensure_ascii=False) + "\n\n"
                     + json.dumps({"question": "哪里？", "context": CONTEXT},
                                  ensure_ascii=False) + "\n", encoding="utf-8")
    assert [(q.id, q.question, q.where) for q in read_questions(jsonl)] == [
        ("a", "谁？", f"{jsonl}, line 1"), (None, "哪里？", f"{jsonl}, line 3")]
    jsonl.write_text(json.dumps({"question": "谁？", "contxt": CONTEXT}, ensure_ascii=False))
    assert refused(read_questions, jsonl) == (
        "bad row in FILE, line 1: unknown key 'contxt' (did you mean 'context'? known keys: "
        "id, question, context)")
    tabs = tmp_path / "questions.txt"
    tabs.write_text(f"question\tcontext\n谁？\t{CONTEXT}\n哪里？\t{CONTEXT}\n", encoding="utf-8")
    assert [(q.question, q.context, q.id) for q in read_questions(tabs)] == [
        ("谁？", CONTEXT, None), ("哪里？", CONTEXT, None)]
    tabs.write_text(f"谁？\t{CONTEXT}\n1\t哪里？\t{CONTEXT}\n", encoding="utf-8")
    assert refused(read_questions, tabs) == (
        f"bad line in FILE, line 2: expected a question, a tab and its context, got 2 tabs in "
        f"'1\\t哪里？\\t{CONTEXT}' (texts with tabs go in JSONL)")


def _tiny(run_class, head):
    """A run of ``run_class`` holding a tiny untrained model and the test vocabulary."""
    keras.utils.set_random_seed(0)
    run = object.__new__(run_class)
    run.model = head(build_transformer_model(dict(TINY, vocab_size=len(VOCAB))))
    run.tokenizer = Tokenizer({token: i for i, token in enumerate(VOCAB)})
    run.options, run.tags = types.SimpleNamespace(maxlen=32), ["O", "B-PER", "I-PER"]
    return run


def test_predict_reads_plain_text_files_for_ner_and_qa(tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("张三在北京工作。\n\n谁在北京？\n", encoding="utf-8")
    rows = _tiny(ner.Run, lambda bert: add_tagger(bert, 3)).predict(path=str(texts))
    assert [row["text"] for row in rows] == ["张三在北京工作。", "谁在北京？"]
    assert all(set(row) == {"text", "entities"} for row in rows)

    questions = tmp_path / "questions.tsv"
    questions.write_text(f"谁？\t{CONTEXT}\n哪里？\t{CONTEXT}\n", encoding="utf-8")
    reader = _tiny(qa.Run, add_span_head)
    rows = reader.predict(path=str(questions))
    assert [row["question"] for row in rows] == ["谁？", "哪里？"] and "id" not in rows[0]
    squad_file = squad(tmp_path, {"id": "q9", "question": "谁？"})
    assert [row["id"] for row in reader.predict(path=str(squad_file))] == ["q9"]


# ---------------------------------------------------------------------- labelled CSV files
def stray_quote_csv(tmp_path):
    """40 rows, one of whose texts opens a quote that a text 15 lines down closes."""
    rows = ["label,text"] + [f"{('neg', 'pos')[i % 2]},text {i}" for i in range(40)]
    rows[10] = 'pos,"terrible start'  # line 11
    rows[25] = 'neg,I love it"'  # line 26
    path = tmp_path / "train.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_a_stray_csv_quote_is_a_bad_row_not_fifteen_lost_rows(tmp_path, caplog):
    path = stray_quote_csv(tmp_path)
    assert refused(read_examples, path) == (
        "bad row in FILE, line 11: a quoted field takes in lines that read as rows of their "
        "own (the quote opened on line 11 closes on line 26; line 12, 'neg,text 10', reads as "
        'a row: a stray quote? a quote inside a quoted field is written "")')
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        examples = read_examples(path, skip_bad_rows=True)
    assert len(examples) == 24 and examples.lines[8:10] == [10, 27]
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped 1 bad row in {path}: a quoted field takes in lines that read as rows of their "
        "own: 1 row (lines 11-26)"]


def test_quoted_line_breaks_that_are_text_still_read(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text('label,text\npos,"see, here\nnot a row, nor this"\nneg,"one\ntwo"\n',
                    encoding="utf-8")
    assert read_examples(path).texts == ["see, here\nnot a row, nor this", "one\ntwo"]
    # Without labels a line's column count is no evidence: prose with commas is text.
    path.write_text('id,text\n1,"a\nb, c\nd, e"\n', encoding="utf-8")
    assert read_examples(path, require_labels=False).texts == ["a\nb, c\nd, e"]


def test_skip_bad_rows_always_warns_what_it_skipped(tmp_path, caplog):
    path = tmp_path / "dev.tsv"
    path.write_text("label\ttext\npos\t好\n\t无标签\nneg\t\nmaybe\t一般\n\t空\nneg\t差\n",
                    encoding="utf-8")
    clean = tmp_path / "clean.tsv"
    clean.write_text("label\ttext\npos\t好\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="kerasbert"):
        examples = read_examples(path, skip_bad_rows=True)
        keep_known_labels(examples, ["neg", "pos"], skip_bad_rows=True)
        read_examples(clean, skip_bad_rows=True)  # nothing skipped: no warning
    assert [(r.name.split(".")[0], r.getMessage()) for r in caplog.records] == [
        ("kerasbert", f"skipped 3 bad rows in {path}: missing label in column 'label': 2 rows "
                      "(lines 3, 6); empty 'text': 1 row (line 4)"),
        ("kerasbert", f"skipped 1 bad row in {path}: label 'maybe' was not seen in training: "
                      "1 row (line 5)")]


def test_bytes_that_are_not_utf8_are_named_as_bytes(tmp_path):
    with pytest.raises(DataError, match=r"^bad line in a.txt, line 3: invalid UTF-8 byte 0xff"):
        decode_text(b"\xef\xbb\xbfone\r\ntwo\n\xff", "a.txt")
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"ok\n\xc4\xe3\xba\xc3\n")
    with pytest.raises(DataError, match=r"corpus.txt, line 2: invalid UTF-8 byte 0xc4 \(the "):
        list(read_lines(path))


# ---------------------------------------------------------------------------- the command line
def test_the_command_line_refuses_bad_files_in_one_line(tmp_path, capsys):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(TINY, vocab_size=len(VOCAB))))
    model = ["--config", str(tmp_path / "bert_config.json"), "--maxlen", "32",
             "--output", str(tmp_path / "out")]
    path = stray_quote_csv(tmp_path)
    assert main(["train", "--train", str(path), "--dev", str(path), *model]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(
        f"kerasbert train: bad row in {path}, line 11: a quoted field takes in lines"), err
    entity = tmp_path / "ner.jsonl"
    entity.write_text('{"text": "张三", "entity": [[0, 2, "PER"]]}\n', encoding="utf-8")
    assert main(["train", "--task", "ner", "--train", str(entity), "--dev", str(entity),
                 *model]) == 2
    assert capsys.readouterr().err == (
        f"kerasbert train: bad row in {entity}, line 1: unknown key 'entity' (did you mean "
        "'entities'? known keys: text, entities, spans, id)\n")
    assert not (tmp_path / "out").exists()


def run_kerasbert(argv, cwd):
    """``kerasbert`` in a new process, as a user runs it."""
    script = os.path.join(os.path.dirname(sys.executable), "kerasbert")
    start = [script] if os.path.exists(script) else [sys.executable, "-m", "kerasbert.cli.main"]
    env = {key: value for key, value in os.environ.items() if key != "KERASBERT_DEBUG"}
    return subprocess.run(start + argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_a_real_process_names_the_squad_question_and_field(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(TINY, vocab_size=len(VOCAB))))
    squad(tmp_path, dict(GOOD, is_impossible="false"), name="train.json")
    done = run_kerasbert(["train", "--task", "qa", "--train", "train.json", "--dev",
                          "train.json", "--config", "bert_config.json", "--maxlen", "32",
                          "--output", "out"], tmp_path)
    assert done.returncode == 2 and done.stderr == (
        "kerasbert train: bad field in train.json, question 'q1' at "
        "data[0].paragraphs[0].qas[0]: 'is_impossible' must be true or false, got a string "
        '("false")\n'), done.stderr
    assert not (tmp_path / "out").exists()
