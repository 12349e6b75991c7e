"""SQuAD-format question answering files, and SQuAD's exact-match and F1 scores.

A file is SQuAD v1.1 or v2.0 JSON: ``{"data": [{"paragraphs": [{"context": ...,
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}``;
v2's unanswerable questions have ``is_impossible: true`` and no answers (their
``plausible_answers`` are not used). CMRC 2018 and DRCD files are read too (their ``id`` on
articles, paragraphs and answers). Everything is checked before a question is used: the
type of every field (``is_impossible`` a JSON boolean, ``answer_start`` an integer), each
answer's text at its ``answer_start`` in the context, question ids unique (scores count
each id once), and no key other than those above (``is_imposible`` would otherwise make a
question answerable without a word). Errors name the file, the question (its id, or its
place such as ``data[0].paragraphs[2].qas[1]``) and the field.

Files to answer (:func:`read_questions`) may also be JSONL (``{"question": ..., "context":
..., "id": ...}`` per line) or text with one ``question<TAB>context`` per line.

Scores follow SQuAD's evaluation script: an answer is normalised (lowercased, punctuation,
English articles and extra spaces removed) and compared with every gold answer, the best
one counting; exact match is equality, F1 the overlap of tokens. Tokens are words for
text with spaces and single characters for Chinese (as CMRC 2018 scores it), so a Chinese
answer gets partial credit per character. An unanswerable question is right only when the
prediction is empty.
"""

import collections
import dataclasses
import json
import os
import re
import string
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kerasbert.files import open_input
from kerasbert.text.vocab import is_cjk
from kerasbert.training.data import (
    SURROGATE,
    DataError,
    decode_text,
    json_kind,
    json_object,
    json_surrogate_line,
    lone_surrogate,
    text_lines,
    unknown_keys,
)

_ARTICLES = re.compile(r"\b(a|an|the)\b")
# SQuAD's ASCII punctuation, and the CJK and full-width punctuation of Chinese text.
_PUNCTUATION = set(string.punctuation) | set("，。！？；：、“”‘’（）《》【】…—～·「」『』")
# The keys of each object: SQuAD v1.1 and v2.0, and the ids CMRC 2018 and DRCD add.
ARTICLE_KEYS = ("title", "paragraphs", "id")
PARAGRAPH_KEYS = ("context", "qas", "id")
QUESTION_KEYS = ("id", "question", "answers", "is_impossible", "plausible_answers")
ANSWER_KEYS = ("text", "answer_start", "id")
# The keys of a JSONL line of questions to answer.
LINE_KEYS = ("id", "question", "context")
_TYPES = {str: "a string", list: "a list", dict: "an object", bool: "true or false",
          int: "an integer"}


@dataclasses.dataclass
class Question:
    """One question of a file, with its context and gold answers (character offsets)."""

    id: str | None  # None for a question of a file to answer that gives none
    question: str
    context: str
    answers: list  # [(text, start)]; empty for an unanswerable question
    where: str = ""


def read_squad(path: str | os.PathLike[str], require_answers: bool = True) -> list[Question]:
    """The questions of a SQuAD v1.1 / v2.0 JSON file (CMRC 2018 and DRCD too).

    Args:
        path: the file.
        require_answers: False for a file to answer, whose questions need no answers (the
            answers it gives are checked all the same).

    Raises:
        FileNotFoundError: no file at ``path``.
        kerasbert.training.data.DataError: bytes that are not UTF-8 or invalid JSON (line
            named), a missing field or one of another type, an unknown key, an answer
            whose text is not at its ``answer_start`` in the context, a question id given
            twice (file, question and field named).

    Example:
        >>> questions = read_squad("kerasbert/resources/peoples_daily_qa/dev.json")
        >>> questions[0].answers[0][0] in questions[0].context
        True
    """
    path = os.fspath(path)
    text = _read_text(path, "a SQuAD JSON file")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"data in {path}, line {error.lineno}: not SQuAD JSON ({error.msg} at "
                        f"column {error.colno})") from None
    return _squad_questions(document, text, path, require_answers)


def _read_text(path: str, expected: str) -> str:
    with open_input(path, "data", expected) as f:
        return decode_text(f.read(), path)


def _squad_questions(document: Any, text: str, path: str,
                     require_answers: bool) -> list[Question]:
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise DataError(f"data in {path}: expected an object with a 'data' list (SQuAD format)")
    check = _Checks(path, text)
    questions: list[Question] = []
    seen: dict[str | None, str] = {}
    for a, article in enumerate(document["data"]):
        where = f"data[{a}]"
        check.keys(article, ARTICLE_KEYS, "article", where)
        for p, paragraph in enumerate(check.field(article, "paragraphs", list, where)):
            where = f"data[{a}].paragraphs[{p}]"
            check.keys(paragraph, PARAGRAPH_KEYS, "paragraph", where)
            context = check.text(paragraph, "context", where)
            for q, qa in enumerate(check.field(paragraph, "qas", list, where)):
                place = f"{where}.qas[{q}]"
                question = _question(check, qa, context, place, require_answers)
                if question.id in seen:
                    raise DataError(f"duplicate id in {question.where}: the id of "
                                    f"{seen[question.id]} too (EM and F1 count each id once)")
                seen[question.id] = place
                questions.append(question)
    if not questions:
        raise DataError(f"data in {path}: no question found")
    return questions


class _Checks:
    """The checks of one file's objects; ``where`` names an object in the file."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.source = path, text

    def keys(self, obj: Any, known: Sequence[str], what: str, where: str) -> None:
        if not isinstance(obj, dict):
            raise DataError(f"bad {what} in {self.path}, {where}: expected an object, got "
                            f"{json_kind(obj)}")
        problem = unknown_keys(obj, known)
        if problem:
            raise DataError(f"bad {what} in {self.path}, {where}: {problem}")

    def field(self, obj: dict[str, Any], key: str, kind: type, where: str,
              default: Any = ...) -> Any:
        """``obj[key]``, of the JSON type ``kind``; ``default`` where it may be left out."""
        if key not in obj:
            if default is not ...:
                return default
            raise DataError(f"missing field in {self.path}, {where}: no {key!r}")
        value = obj[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise DataError(f"bad field in {self.path}, {where}: {key!r} must be "
                            f"{_TYPES[kind]}, got {json_kind(value)}")
        return value

    def text(self, obj: dict[str, Any], key: str, where: str, default: Any = ...) -> Any:
        """A string field that is not blank and holds no lone surrogate."""
        value = self.field(obj, key, str, where, default)
        if value is default:
            return value
        if not value.strip():
            raise DataError(f"bad field in {self.path}, {where}: empty {key!r}")
        problem = lone_surrogate(value, repr(key))
        if problem:
            # lone_surrogate found one: the search finds it.
            line = json_surrogate_line(self.source, ord(
                SURROGATE.search(value).group()))  # type: ignore[union-attr]
            raise DataError(f"bad field in {self.path}, line {line}, {where}: {problem}")
        return value


def _question(check: _Checks, qa: Any, context: str, where: str,
              require_answers: bool) -> Question:
    if isinstance(qa, dict) and isinstance(qa.get("id"), str) and qa["id"].strip():
        where = f"question {qa['id']!r} at {where}"
    check.keys(qa, QUESTION_KEYS, "question", where)
    given = check.text(qa, "id", where, None)
    question = check.text(qa, "question", where)
    impossible = check.field(qa, "is_impossible", bool, where, False)
    check.field(qa, "plausible_answers", list, where, None)
    required = require_answers and not impossible
    found = check.field(qa, "answers", list, where, ... if required else [])
    if impossible and found:
        raise DataError(f"bad question in {check.path}, {where}: marked is_impossible yet it "
                        f"has {len(found)} answer(s) (SQuAD v2.0 keeps an unanswerable "
                        "question's guesses in 'plausible_answers')")
    if require_answers and not impossible and not found:
        raise DataError(f"bad entry in {check.path}, {where}: no answer, and not marked "
                        "is_impossible")
    answers = [_answer(check, answer, context, f"{where}, answers[{n}]")
               for n, answer in enumerate(found)]
    return Question(given if given is not None else where, question, context, answers,
                    f"{check.path}, {where}")


def _answer(check: _Checks, answer: Any, context: str, where: str) -> tuple[str, int]:
    check.keys(answer, ANSWER_KEYS, "answer", where)
    text = check.text(answer, "text", where)
    start = check.field(answer, "answer_start", int, where)
    if not 0 <= start <= len(context) - len(text):
        raise DataError(f"bad answer in {check.path}, {where}: answer_start {start} is outside "
                        f"the {len(context)}-character context (the {len(text)}-character "
                        f"answer {text!r} can start at 0 to {len(context) - len(text)})")
    there = context[start:start + len(text)]
    if there != text:
        elsewhere = context.find(text)
        hint = f"; {text!r} is at {elsewhere}" if elsewhere >= 0 else ""
        raise DataError(f"bad answer in {check.path}, {where}: {text!r} is not at answer_start "
                        f"{start} of the context, which holds {there!r} there{hint}")
    return text, start


def read_questions(path: str | os.PathLike[str]) -> list[Question]:
    """The questions of a file to answer, whatever its form (answers are not needed):

    - SQuAD JSON (``.json``, or any file holding one JSON object with ``data``), read by
      :func:`read_squad`;
    - JSONL (``.jsonl``, ``.ndjson``, or lines that start with ``{``): an object per line
      with ``question``, ``context`` and an optional ``id`` (strings);
    - anything else: text with one ``question<TAB>context`` per line (a first line
      ``question<TAB>context`` is a header); blank lines are skipped.

    A question without an id has ``id`` None.

    Raises:
        FileNotFoundError: no file at ``path``.
        kerasbert.training.data.DataError: a malformed line or object (file and line or
            question named).

    Example:
        >>> questions = read_questions("kerasbert/resources/peoples_daily_qa/dev.json")
        >>> questions[0].id == read_squad("kerasbert/resources/peoples_daily_qa/dev.json")[0].id
        True
    """
    path = os.fspath(path)
    text = _read_text(path, "a file of questions")
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".json" or suffix not in (".jsonl", ".ndjson") and text.lstrip()[:1] == "{":
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            if suffix == ".json":
                raise DataError(f"data in {path}, line {error.lineno}: not SQuAD JSON "
                                f"({error.msg} at column {error.colno})") from None
            document = None
        if suffix == ".json" or isinstance(document, dict) and "data" in document:
            return _squad_questions(document, text, path, require_answers=False)
        return _line_questions(text, path, _json_question)
    if suffix in (".jsonl", ".ndjson"):
        return _line_questions(text, path, _json_question)
    return _line_questions(text, path, _tab_question)


def _line_questions(text: str, path: str,
                    parse: Callable[..., Question | None]) -> list[Question]:
    questions: list[Question] = []
    for number, line in enumerate(text_lines(text), start=1):
        if line.strip():
            question = parse(line, f"{path}, line {number}", first=not questions)
            if question is not None:
                questions.append(question)
    if not questions:
        raise DataError(f"data in {path}: no question found")
    return questions


def _json_question(line: str, where: str, first: bool) -> Question:
    row = json_object(line, where, "an object")
    problem = unknown_keys(row, LINE_KEYS) or next(
        filter(None, (_line_field(row, key) for key in LINE_KEYS)), None)
    if problem:
        raise DataError(f"bad row in {where}: {problem}")
    return Question(row.get("id"), row["question"], row["context"], [], where)


def _line_field(row: dict[str, Any], key: str) -> str | None:
    """The problem of one field of a JSONL question, or None."""
    if key not in row:
        return None if key == "id" else f"no {key!r}"
    value = row[key]
    if not isinstance(value, str):
        return f"{key!r} must be a string, got {json_kind(value)}"
    return f"empty {key!r}" if not value.strip() else lone_surrogate(value, repr(key))


def _tab_question(line: str, where: str, first: bool) -> Question | None:
    question, tab, context = line.partition("\t")
    if first and (question.strip().lower(), context.strip().lower()) == ("question", "context"):
        return None  # the header
    tabs = line.count("\t")
    if tabs != 1:
        raise DataError(f"bad line in {where}: expected a question, a tab and its context, got "
                        f"{tabs} tabs in {line[:40]!r} (texts with tabs go in JSONL)")
    for name, value in (("question", question), ("context", context)):
        if not value.strip():
            raise DataError(f"bad line in {where}: empty {name}")
    return Question(None, question, context, [], where)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lowercase, no punctuation, no English articles, single spaces.

    Example:
        >>> normalize_answer("The  Eiffel Tower!"), normalize_answer("“北京”。")
        ('eiffel tower', '北京')
    """
    text = "".join(ch for ch in unicodedata.normalize("NFKC", text).lower()
                   if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """The tokens F1 counts: words, and each CJK character on its own."""
    tokens = []
    for word in normalize_answer(text).split():
        piece = ""
        for ch in word:
            if is_cjk(ch):
                tokens += [piece] if piece else []
                tokens.append(ch)
                piece = ""
            else:
                piece += ch
        tokens += [piece] if piece else []
    return tokens


def exact_match(prediction: str, gold: str) -> float:
    """1.0 if the normalised texts are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """Token-overlap F1 of two answers (see :func:`answer_tokens`); two empty answers: 1.0.

    Example:
        >>> round(f1("中华人民共和国", "人民共和国"), 4), f1("Paris", "the Paris")
        (0.8333, 1.0)
    """
    predicted, truth = answer_tokens(prediction), answer_tokens(gold)
    if not predicted or not truth:
        return float(predicted == truth)
    common = sum((collections.Counter(predicted) & collections.Counter(truth)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(truth)
    return 2 * precision * recall / (precision + recall)


def squad_scores(questions: Iterable[Question],
                 predictions: Mapping[str | None, str]) -> dict[str, float]:
    """Exact match and F1 in percent over ``questions``, as SQuAD's script computes them.

    Args:
        questions: :class:`Question` rows.
        predictions: ``{id: answer text}`` ("" for "no answer").

    Returns:
        ``{"exact", "f1", "total"}``, and ``"has_answer_*"`` / ``"no_answer_*"`` splits
        when the file has unanswerable questions.
    """
    rows: dict[str, list[tuple[float, float]]] = {"has_answer": [], "no_answer": []}
    for question in questions:
        predicted = predictions.get(question.id, "")
        golds = [text for text, _ in question.answers] or [""]
        rows["has_answer" if question.answers else "no_answer"].append(
            (max(exact_match(predicted, gold) for gold in golds),
             max(f1(predicted, gold) for gold in golds)))
    every = rows["has_answer"] + rows["no_answer"]
    scores = _percent(every)
    if rows["no_answer"]:
        for kind, values in rows.items():
            scores.update({f"{kind}_{key}": value for key, value in _percent(values).items()})
    return scores


def _percent(rows: Sequence[tuple[float, float]]) -> dict[str, float]:
    total = len(rows)
    return {"exact": 100.0 * sum(e for e, _ in rows) / max(total, 1),
            "f1": 100.0 * sum(f for _, f in rows) / max(total, 1), "total": total}
