"""Named entities from tag sequences, and their entity-level scores, as conlleval counts them.

A tag is ``O`` or ``PREFIX-TYPE``, PREFIX one of ``B`` (begin), ``I`` (inside), ``E`` (end),
``S`` (single), so BIO (IOB2), IOB1 and BIOES sequences all read the same way. Chunks follow
conlleval.pl, which is also seqeval's default mode (no ``mode="strict"``): an ``I-`` or ``E-``
tag continues the entity before it when that entity has the same type and its last tag was
``B-`` or ``I-``; every other tag but ``O`` starts a new entity. An ``I-`` after ``O`` or after
another type (IOB1, or a tagger's slip) therefore starts an entity instead of being dropped.

An entity counts as found only when its type, start and end all match. Precision, recall and
F1 are given per type and averaged two ways: micro (over all entities) and macro (the plain
mean over the types found in either the truth or the prediction). A ratio whose denominator
is zero is 0.0, as in seqeval.

Example::

    sentences = read_conll("kerasbert/resources/peoples_daily/test.txt")
    truth = [tags for _, tags in sentences]
    scores = entity_scores(truth, predicted)
    scores["micro"]["f1"], scores["per_type"]["ORG"]["recall"]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

PREFIXES = ("B", "I", "E", "S")
OUTSIDE = "O"


def split_tag(tag: str) -> tuple[str, str]:
    """Splits a tag into its prefix and entity type.

    Args:
        tag: ``"O"`` or ``"B-TYPE"`` / ``"I-TYPE"`` / ``"E-TYPE"`` / ``"S-TYPE"``.

    Returns:
        ``(prefix, type)``; ``("O", "")`` for ``"O"``.

    Raises:
        ValueError: ``tag`` has another form (``"B"``, ``"X-PER"``, ``"B-"``).

    Example:
        >>> split_tag("I-ORG")
        ('I', 'ORG')
        >>> split_tag("O")
        ('O', '')
    """
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, dash, kind = str(tag).partition("-")
    if prefix not in PREFIXES or not dash or not kind:
        raise ValueError(f"{tag!r} is not a tag: expected 'O' or B-, I-, E-, S- followed by "
                         "an entity type, such as 'B-PER'")
    return prefix, kind


def continues(before: tuple[str, str], tag: tuple[str, str]) -> bool:
    """Whether a tag continues the entity of the tag before it, as conlleval reads the pair:
    an ``I-`` or ``E-`` after a ``B-`` or ``I-`` of the same type.

    Args:
        before, tag: the two tags, split (:func:`split_tag`).

    Example:
        >>> continues(("B", "PER"), ("I", "PER")), continues(("E", "PER"), ("I", "PER"))
        (True, False)
    """
    return tag[0] in ("I", "E") and before[0] in ("B", "I") and tag[1] == before[1]


def entity_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of one tagged sentence, read as conlleval reads them.

    Args:
        tags: the sentence's tags, one per token (BIO, IOB1 or BIOES).

    Returns:
        A list of ``(type, start, end)`` in order, ``end`` exclusive: the entity's tokens
        are ``tokens[start:end]``.

    Raises:
        ValueError: a tag that is not ``O`` or ``B-``/``I-``/``E-``/``S-`` + type (its
            position is named).

    Example:
        >>> entity_spans(["B-PER", "I-PER", "O", "S-LOC", "I-ORG", "I-ORG", "B-ORG"])
        [('PER', 0, 2), ('LOC', 3, 4), ('ORG', 4, 6), ('ORG', 6, 7)]
    """
    spans: list[tuple[str, int, int]] = []
    start: int | None = None
    before = (OUTSIDE, "")
    for index, tag in enumerate(tags):
        try:
            split = split_tag(tag)
        except ValueError as error:
            raise ValueError(f"{error} (at position {index})") from None
        joined = continues(before, split)
        if start is not None and not joined:
            spans.append((before[1], start, index))
            start = None
        if split[0] != OUTSIDE and not joined:
            start = index
        before = split
    if start is not None:
        spans.append((before[1], start, len(tags)))
    return spans


def entity_scores(true_tags: Iterable[Sequence[str]],
                  predicted_tags: Iterable[Sequence[str]]) -> dict[str, dict[str, Any]]:
    """Entity-level precision, recall and F1 per type, micro- and macro-averaged.

    The same numbers as seqeval's ``classification_report`` / ``f1_score`` in their default
    (conlleval) mode.

    Args:
        true_tags: the reference, a list of sentences, each a list of tags.
        predicted_tags: the prediction, sentence for sentence and token for token as long.

    Returns:
        ``{"per_type": {type: scores}, "micro": scores, "macro": scores}``, where each
        ``scores`` is ``{"precision", "recall", "f1", "support"}`` (support: the number of
        true entities). Per type, also ``"predicted"`` and ``"correct"`` counts. The types
        are those found in either argument, in sorted order.

    Raises:
        ValueError: the two differ in the number of sentences or in a sentence's length, a
            sentence is a string instead of a list of tags, or a tag is malformed (sentence
            and position named).

    Example:
        >>> truth = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG"]]
        >>> found = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "I-ORG"]]
        >>> scores = entity_scores(truth, found)
        >>> round(scores["micro"]["f1"], 4), scores["micro"]["precision"]
        (0.8, 1.0)
        >>> scores["per_type"]["LOC"]
        {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'support': 1, 'predicted': 0, 'correct': 0}
        >>> round(scores["macro"]["f1"], 4)
        0.6667
    """
    true_tags, predicted_tags = list(true_tags), list(predicted_tags)
    if len(true_tags) != len(predicted_tags):
        raise ValueError(f"true_tags has {len(true_tags)} sentences but predicted_tags has "
                         f"{len(predicted_tags)}; they must be as many")
    true_sets: dict[str, set[tuple[int, int, int]]] = {}
    predicted_sets: dict[str, set[tuple[int, int, int]]] = {}
    for number, (truth, predicted) in enumerate(zip(true_tags, predicted_tags)):
        for name, sentence in (("true_tags", truth), ("predicted_tags", predicted)):
            if isinstance(sentence, str):
                raise ValueError(f"{name}[{number}] is a string ({sentence!r}); pass a list of "
                                 "sentences, each a list of tags")
        if len(truth) != len(predicted):
            raise ValueError(f"sentence {number} has {len(truth)} true tags but "
                             f"{len(predicted)} predicted ones; they must be as many")
        for name, sentence, found in (("true_tags", truth, true_sets),
                                      ("predicted_tags", predicted, predicted_sets)):
            try:
                spans = entity_spans(sentence)
            except ValueError as error:
                raise ValueError(f"{name}[{number}]: {error}") from None
            for kind, start, end in spans:
                found.setdefault(kind, set()).add((number, start, end))

    per_type: dict[str, dict[str, float]] = {}
    for kind in sorted(set(true_sets) | set(predicted_sets)):
        true_set, predicted_set = true_sets.get(kind, set()), predicted_sets.get(kind, set())
        correct = len(true_set & predicted_set)
        per_type[kind] = {**_ratios(correct, len(predicted_set), len(true_set)),
                          "predicted": len(predicted_set), "correct": correct}
    micro = _ratios(sum(s["correct"] for s in per_type.values()),
                    sum(s["predicted"] for s in per_type.values()),
                    sum(s["support"] for s in per_type.values()))
    count = len(per_type) or 1  # no entity at all: every average is 0.0
    macro = {key: sum(s[key] for s in per_type.values()) / count
             for key in ("precision", "recall", "f1")}
    macro["support"] = micro["support"]
    return {"per_type": per_type, "micro": micro, "macro": macro}


def _ratios(correct: float, predicted: float, support: float) -> dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / support if support else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": support}


def format_report(scores: dict[str, dict[str, Any]], digits: int = 4) -> str:
    """A plain-text table of :func:`entity_scores`' result, one row per type, then the averages.

    Args:
        scores: what :func:`entity_scores` returned.
        digits: decimals of precision, recall and F1.

    Returns:
        The table as one string (no trailing newline).

    Example:
        >>> scores = entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]])
        >>> print(format_report(scores, digits=2))
                   precision  recall    f1  support
        PER             1.00    1.00  1.00        1
        micro avg       1.00    1.00  1.00        1
        macro avg       1.00    1.00  1.00        1
    """
    rows = [(kind, values) for kind, values in scores["per_type"].items()]
    rows += [("micro avg", scores["micro"]), ("macro avg", scores["macro"])]
    width = max(len(name) for name, _ in rows)
    column = max(digits + 2, len("precision"))
    lines = [" " * width + f"  {'precision':>{column}}  {'recall':>{digits + 2}}  "
             f"{'f1':>{digits + 2}}  support"]
    for name, values in rows:
        ratios = "  ".join(f"{values[key]:>{size}.{digits}f}" for key, size in
                           (("precision", column), ("recall", digits + 2), ("f1", digits + 2)))
        lines.append(f"{name:<{width}}  {ratios}  {values['support']:>7}")
    return "\n".join(lines)


def read_conll(path: str | os.PathLike[str]) -> list[tuple[list[str], list[str]]]:
    """Reads a two-column CoNLL file: ``token tag`` on each line, a blank line after each
    sentence.

    Args:
        path: the file (UTF-8).

    Returns:
        A list of ``(tokens, tags)``, two lists of strings per sentence.

    Raises:
        ValueError: a line without exactly two columns, or a malformed tag (file and line
            named).

    Example:
        >>> sentences = read_conll("kerasbert/resources/peoples_daily/dev.txt")
        >>> len(sentences), sentences[0][1][:3]
        (1000, ['O', 'O', 'O'])
    """
    sentences: list[tuple[list[str], list[str]]] = []
    tokens: list[str] = []
    tags: list[str] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                if tokens:
                    sentences.append((tokens, tags))
                    tokens, tags = [], []
                continue
            if len(fields) != 2:
                raise ValueError(f"{path}:{number}: expected 'token tag', two columns; "
                                 f"received {line.rstrip()!r}")
            try:
                split_tag(fields[1])
            except ValueError as error:
                raise ValueError(f"{path}:{number}: {error}") from None
            tokens.append(fields[0])
            tags.append(fields[1])
    if tokens:
        sentences.append((tokens, tags))
    return sentences
