"""SQuAD-format question answering files, and SQuAD's exact-match and F1 scores.

A file is SQuAD v1.1 or v2.0 JSON: ``{"data": [{"paragraphs": [{"context": ...,
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}``;
v2's unanswerable questions have ``is_impossible: true`` and no answers.

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

from kerasbert.files import open_input
from kerasbert.text.vocab import is_cjk
from kerasbert.training.data import DataError

_ARTICLES = re.compile(r"\b(a|an|the)\b")
# SQuAD's ASCII punctuation, and the CJK and full-width punctuation of Chinese text.
_PUNCTUATION = set(string.punctuation) | set("，。！？；：、“”‘’（）《》【】…—～·「」『』")


@dataclasses.dataclass
class Question:
    """One question of a file, with its context and gold answers (character offsets)."""

    id: str
    question: str
    context: str
    answers: list  # [(text, start)]; empty for an unanswerable question
    where: str = ""


def read_squad(path):
    """The questions of a SQuAD v1.1 / v2.0 JSON file.

    Raises:
        FileNotFoundError: no file at ``path``.
        kerasbert.training.data.DataError: invalid JSON, a missing field, or an answer
            whose text is not at its ``answer_start`` in the context (all named).

    Example:
        >>> questions = read_squad("kerasbert/resources/peoples_daily_qa/dev.json")
        >>> questions[0].answers[0][0] in questions[0].context
        True
    """
    path = os.fspath(path)
    with open_input(path, "data", "a SQuAD JSON file") as f:
        try:
            document = json.loads(f.read().decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataError(f"data in {path}: not SQuAD JSON ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise DataError(f"data in {path}: expected an object with a 'data' list (SQuAD format)")
    questions = []
    for a, article in enumerate(document["data"]):
        for p, paragraph in enumerate(_field(article, "paragraphs", list, f"data[{a}]", path)):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", str, where, path)
            for q, qa in enumerate(_field(paragraph, "qas", list, where, path)):
                questions.append(_question(qa, context, f"{where}.qas[{q}]", path))
    if not questions:
        raise DataError(f"data in {path}: no question found")
    return questions


def _field(obj, key, kind, where, path):
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        raise DataError(f"bad entry in {path}, {where}: '{key}' must be a "
                        f"{'list' if kind is list else 'string'}")
    return value


def _question(qa, context, where, path):
    question = _field(qa, "question", str, where, path)
    answers = []
    if not qa.get("is_impossible", False):
        for n, answer in enumerate(_field(qa, "answers", list, where, path)):
            text = _field(answer, "text", str, f"{where}.answers[{n}]", path)
            start = answer.get("answer_start") if isinstance(answer, dict) else None
            if (not isinstance(start, int) or isinstance(start, bool)
                    or context[start:start + len(text)] != text or not text):
                raise DataError(f"bad answer in {path}, {where}.answers[{n}]: {text!r} is not "
                                f"at answer_start {start!r} of the context")
            answers.append((text, start))
        if not answers:
            raise DataError(f"bad entry in {path}, {where}: no answer, and not marked "
                            "is_impossible")
    return Question(str(qa.get("id", where)), question, context, answers, f"{path}, {where}")


def normalize_answer(text):
    """SQuAD's normalisation: lowercase, no punctuation, no English articles, single spaces.

    Example:
        >>> normalize_answer("The  Eiffel Tower!"), normalize_answer("“北京”。")
        ('eiffel tower', '北京')
    """
    text = "".join(ch for ch in unicodedata.normalize("NFKC", text).lower()
                   if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text):
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


def exact_match(prediction, gold):
    """1.0 if the normalised texts are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction, gold):
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


def squad_scores(questions, predictions):
    """Exact match and F1 in percent over ``questions``, as SQuAD's script computes them.

    Args:
        questions: :class:`Question` rows.
        predictions: ``{id: answer text}`` ("" for "no answer").

    Returns:
        ``{"exact", "f1", "total"}``, and ``"has_answer_*"`` / ``"no_answer_*"`` splits
        when the file has unanswerable questions.
    """
    rows = {"has_answer": [], "no_answer": []}
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


def _percent(rows):
    total = len(rows)
    return {"exact": 100.0 * sum(e for e, _ in rows) / max(total, 1),
            "f1": 100.0 * sum(f for _, f in rows) / max(total, 1), "total": total}
