"""SQuAD files and scores, and the shipped Chinese QA set built from the NER split."""

import filecmp
import json
import subprocess
import sys

import pytest

from kerasbert.tasks.qa.squad import exact_match, f1, normalize_answer, read_squad, squad_scores
from kerasbert.training.data import DataError

QA_DIR = "kerasbert/resources/peoples_daily_qa"


def test_scores_follow_squad_normalisation_and_count_chinese_by_character():
    assert normalize_answer("The Eiffel  Tower.") == "eiffel tower"
    assert exact_match("an apple", "Apple!") == 1.0 and exact_match("apples", "apple") == 0.0
    assert f1("the cat sat", "cat sat down") == pytest.approx(0.8)  # 2 common of 2 and 3
    assert f1("北京市", "北京") == pytest.approx(0.8)  # characters: 2 common of 3 and 2
    assert f1("《人民日报》", "人民日报") == 1.0  # book-title marks are punctuation
    assert f1("", "") == 1.0 and f1("北京", "") == 0.0 and f1("", "北京") == 0.0
    assert f1("iPhone 8手机", "iphone 8") == pytest.approx(2 * 0.5 * 1.0 / 1.5)


def test_squad_scores_best_gold_answer_and_unanswerable_questions(tmp_path):
    path = tmp_path / "v2.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": [{
        "context": "张三在北京工作。",
        "qas": [{"id": "a", "question": "谁？", "answers": [
                    {"text": "张三", "answer_start": 0}, {"text": "张", "answer_start": 0}]},
                {"id": "b", "question": "哪里？", "answers": [{"text": "北京", "answer_start": 3}]},
                {"id": "c", "question": "哪个机构？", "is_impossible": True, "answers": []}]}]}]}),
        encoding="utf-8")
    questions = read_squad(path)
    scores = squad_scores(questions, {"a": "张", "b": "北京工作", "c": ""})
    assert scores["total"] == 3 and scores["no_answer_total"] == 1
    assert scores["exact"] == pytest.approx(200 / 3)  # a (second gold) and c
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 3)
    assert squad_scores(questions, {"c": "北京"})["no_answer_exact"] == 0.0


@pytest.mark.parametrize("document, message", [
    ({"data": [{"paragraphs": [{"context": "abc", "qas": [
        {"id": "x", "question": "?", "answers": [{"text": "bc", "answer_start": 0}]}]}]}]},
     r"bad answer in .*bad.json, question 'x' at data\[0\].paragraphs\[0\].qas\[0\], "
     r"answers\[0\]: 'bc' is not at answer_start 0 of the context, which holds 'ab' there; "
     "'bc' is at 1"),
    ({"data": [{"paragraphs": [{"qas": []}]}]},
     r"missing field in .*bad.json, data\[0\].paragraphs\[0\]: no 'context'"),
    ({"data": [{"paragraphs": [{"context": 3, "qas": []}]}]},
     r"bad field in .*bad.json, data\[0\].paragraphs\[0\]: 'context' must be a string, got "
     r"a number \(3\)"),
    ({"data": [{"paragraphs": [{"context": "abc", "qas": [{"id": "x", "question": "?",
                                                         "answers": []}]}]}]},
     r"no answer, and not marked is_impossible"),
    ([], r"expected an object with a 'data' list"),
])
def test_malformed_squad_files_are_refused_naming_the_entry(tmp_path, document, message):
    (tmp_path / "bad.json").write_text(json.dumps(document))
    with pytest.raises(DataError, match=message):
        read_squad(tmp_path / "bad.json")


def test_the_shipped_qa_set_is_rebuilt_exactly_by_its_script(tmp_path):
    subprocess.run([sys.executable, f"{QA_DIR}/make_qa.py", "--output", str(tmp_path)],
                   check=True, capture_output=True)
    for split in ("train", "dev", "test"):
        assert filecmp.cmp(tmp_path / f"{split}.json", f"{QA_DIR}/{split}.json", shallow=False)
        questions = read_squad(f"{QA_DIR}/{split}.json")  # every answer at its offset
        assert len({q.id for q in questions}) == len(questions)
    contexts = {split: {q.context for q in read_squad(f"{QA_DIR}/{split}.json")}
                for split in ("train", "dev", "test")}
    assert not contexts["train"] & contexts["test"] and not contexts["dev"] & contexts["test"]


def test_the_qa_set_readme_counts_its_files():
    readme = open(f"{QA_DIR}/README.md", encoding="utf-8").read()
    for split in ("train", "dev", "test"):
        questions = read_squad(f"{QA_DIR}/{split}.json")
        answerable = sum(bool(q.answers) for q in questions)
        row = (f"| `{split}.json` | {len(questions):,} | {answerable:,} | "
               f"{len(questions) - answerable:,} |")
        assert row in readme, row
