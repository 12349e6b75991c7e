"""Sequence-labelling data: tagged files in, WordPiece-aligned tag ids out, and back.

A sentence is its text and its entities as character spans ``(type, start, end)``
(``end`` exclusive), whatever the file's format:

- CoNLL two-column (``.txt``, ``.conll``, ``.bio``, ...): one token and its tag per line
  (BIO, IOB1 or BIOES), a blank line between sentences, ``-DOCSTART-`` lines ignored.
  Tokens of one character (Chinese) are joined as they are; longer ones with a space.
- JSONL (``.jsonl``, ``.ndjson``): ``{"text": "...", "entities": [{"start": 0, "end": 2,
  "label": "PER"}, ...]}`` (or ``[start, end, label]`` triples; ``spans`` for
  ``entities``, ``type`` for ``label``), offsets in characters, ``end`` exclusive. An
  entity may give its ``text``, which must be the text's characters there; a row may have
  an ``id``. Any other key is refused by name (a row's ``entity`` would otherwise lose its
  annotations without a word), as are offsets that are not integers inside the text, and
  an empty label.

Files to tag (:func:`read_texts`) may also be plain text, one text per line, or a
TSV / CSV / JSONL file with a ``text`` column.

The model sees WordPiece tokens: :func:`token_tags` gives each token the BIO tag of the
entity it falls in, through the tokenizer's character offsets, so the characters the
tokenizer deletes (spaces, controls) or merges into one word are handled; an entity that
no token covers any more (truncated by ``maxlen``, or made only of deleted characters)
is counted as lost. :func:`kerasbert.tasks.ner.decoding.token_entities` maps predicted
token tags back to character spans of the text, and scores are computed on characters
against the file's own spans (:func:`char_tags`), so a lost entity counts as missed.
"""

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

from kerasbert.files import open_input
from kerasbert.tasks.ner.entities import entity_spans, split_tag
from kerasbert.training.data import (
    DataError,
    decode_text,
    json_kind,
    json_object,
    lone_surrogate,
    read_examples,
    text_lines,
    unknown_keys,
)

JSONL_SUFFIXES = (".jsonl", ".ndjson")
TABLE_SUFFIXES = (".tsv", ".csv")
ROW_KEYS = ("text", "entities", "spans", "id")
ENTITY_KEYS = ("start", "end", "label", "type", "text")


@dataclasses.dataclass
class Sentence:
    """A text and its entities ``[(type, start, end), ...]`` in characters."""

    text: str
    entities: list
    where: str = ""  # file and line, for messages


def read_sentences(path: str | os.PathLike[str]) -> list[Sentence]:
    """The sentences of a tagged file (CoNLL two-column or JSONL, by suffix).

    Raises:
        FileNotFoundError: no file at ``path``.
        kerasbert.training.data.DataError: a malformed line, tag or span (file and line
            named), or a file without sentences.

    Example:
        >>> sentences = read_sentences("kerasbert/resources/peoples_daily/dev.txt")
        >>> len(sentences), sentences[1].text[:9], sentences[1].entities
        (1000, '《虎踞钟山》剧组人', [('LOC', 3, 5)])
    """
    path = os.fspath(path)
    lines = _lines(path, "a tagged file")
    reader = _read_jsonl if path.lower().endswith(JSONL_SUFFIXES) else _read_conll
    return _found(reader(lines, path), path, "tagged sentence")


def read_texts(path: str | os.PathLike[str]) -> list[Sentence]:
    """The texts of a file to tag, as sentences (with the entities a tagged file gives).

    The form is read from the suffix, then the content:

    - ``.jsonl`` / ``.ndjson``: JSONL as :func:`read_sentences` reads it (``entities`` may
      be left out);
    - ``.tsv`` / ``.csv``: a table with a ``text`` column (other columns are not used);
    - anything else: a tagged CoNLL file when its first line is a token and a tag
      (``张 B-PER``) or ``-DOCSTART-``, else plain text, one text per line, blank lines
      skipped.

    Raises:
        FileNotFoundError: no file at ``path``.
        kerasbert.training.data.DataError: a bad line or row (file and line named), or a
            file without text.

    Example:
        >>> len(read_texts("kerasbert/resources/peoples_daily/dev.txt"))  # a tagged file
        1000
    """
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix in JSONL_SUFFIXES:
        return read_sentences(path)
    if suffix in TABLE_SUFFIXES:
        rows = read_examples(path, label_column=None, require_labels=False)
        return [Sentence(text, [], f"{path}, line {line}")
                for text, line in zip(rows.texts, rows.lines)]
    lines = _lines(path, "a text file")
    first = next((line.split() for line in lines if line.strip()), [])
    if first[:1] == ["-DOCSTART-"] or len(first) >= 2 and _is_tag(first[-1]):
        return _found(_read_conll(lines, path), path, "tagged sentence")
    return _found([Sentence(line, [], f"{path}, line {number}")
                   for number, line in enumerate(lines, start=1) if line.strip()],
                  path, "text")


def _lines(path: str, expected: str) -> list[str]:
    with open_input(path, "data", expected) as f:
        return text_lines(decode_text(f.read(), path))


def _found(sentences: list[Sentence], path: str, what: str) -> list[Sentence]:
    if not sentences:
        raise DataError(f"data in {path}: no {what} found")
    return sentences


def _is_tag(word: str) -> bool:
    try:
        split_tag(word)
    except ValueError:
        return False
    return True


def _read_conll(lines: list[str], path: str) -> list[Sentence]:
    sentences: list[Sentence]
    tokens: list[str]
    tags: list[str]
    sentences, tokens, tags, first = [], [], [], 0
    for number, line in enumerate(lines + [""], start=1):
        columns = line.split()
        if columns and columns[0] == "-DOCSTART-":
            continue
        if not columns:
            if tokens:
                sentences.append(_conll_sentence(tokens, tags, f"{path}, line {first}"))
            tokens, tags = [], []
            continue
        if line.lstrip().startswith("{") and not sentences and not tokens:
            raise DataError(f"bad line in {path}, line {number}: a JSON object, not a token "
                            "and its tag (a JSONL file of texts and entities is named .jsonl)")
        if len(columns) < 2:
            raise DataError(f"bad line in {path}, line {number}: expected a token and its tag "
                            f"separated by whitespace, got {line.strip()!r}")
        try:
            split_tag(columns[-1])
        except ValueError as error:
            hint = (f" (the first column, {columns[0]!r}, is a tag: the token goes first)"
                    if _is_tag(columns[0]) else "")
            raise DataError(f"bad tag in {path}, line {number}: {error}{hint}") from None
        first = first if tokens else number
        tokens.append(columns[0])
        tags.append(columns[-1])
    return sentences


def _conll_sentence(tokens: list[str], tags: list[str], where: str) -> Sentence:
    separator = "" if all(len(token) == 1 for token in tokens) else " "
    starts, position = [], 0
    for token in tokens:
        starts.append(position)
        position += len(token) + len(separator)
    entities = [(kind, starts[start], starts[end - 1] + len(tokens[end - 1]))
                for kind, start, end in entity_spans(tags)]
    return Sentence(separator.join(tokens), entities, where)


def _read_jsonl(lines: list[str], path: str) -> list[Sentence]:
    sentences = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        row = json_object(line, where, "an object with a string 'text'")
        if not isinstance(row.get("text"), str):
            raise DataError(f"bad row in {where}: expected an object with a string 'text'")
        problem = (unknown_keys(row, ROW_KEYS) or lone_surrogate(row["text"], "'text'")
                   or _id_problem(row))
        if not problem and "entities" in row and "spans" in row:
            problem = "both 'entities' and 'spans' (give one)"
        if problem:
            raise DataError(f"bad row in {where}: {problem}")
        key = "spans" if "spans" in row else "entities"
        spans = row.get(key, [])
        if not isinstance(spans, list):
            raise DataError(f"bad row in {where}: {key!r} must be a list, got "
                            f"{json_kind(spans)}")
        # (start, end, kind) to sort them, then (kind, start, end) as a Sentence keeps them
        entities: list[Any] = sorted(_span(span, row["text"], f"{where}, {key}[{n}]")
                                     for n, span in enumerate(spans))
        entities = [(kind, start, end) for start, end, kind in entities]
        for (_, _, end), (_, start, _) in zip(entities, entities[1:]):
            if start < end:
                raise DataError(f"bad row in {where}: entities overlap at character {start} "
                                "(BIO tags give each character one entity)")
        sentences.append(Sentence(row["text"], entities, where))
    return sentences


def _id_problem(row: dict[str, Any]) -> str | None:
    value = row.get("id")
    if value is None or isinstance(value, str) or (isinstance(value, int)
                                                   and not isinstance(value, bool)):
        return None
    return f"'id' must be a string or an integer, got {json_kind(value)}"


def _span(span: Any, text: str, where: str) -> tuple[int, int, str]:
    """``(start, end, label)`` of one entity, checked against the text."""
    given = None
    if isinstance(span, dict):
        problem = unknown_keys(span, ENTITY_KEYS)
        missing = [key for key in ("start", "end", "label")
                   if key not in span and not (key == "label" and "type" in span)]
        if not problem and "label" in span and "type" in span:
            problem = "both 'label' and 'type' (give one)"
        elif not problem and missing:
            problem = f"no {missing[0]!r}"
        if problem:
            raise DataError(f"bad entity in {where}: {problem}")
        given = span.get("text")
        span = [span.get("start"), span.get("end"), span.get("label", span.get("type"))]
    if not (isinstance(span, list) and len(span) == 3):
        raise DataError(f"bad entity in {where}: expected [start, end, label] or an object "
                        f"with 'start', 'end' and 'label', got {json_kind(span)}")
    for name, value, kind in zip(("start", "end", "label"), span, (int, int, str)):
        if not isinstance(value, kind) or isinstance(value, bool):
            raise DataError(f"bad entity in {where}: {name!r} must be "
                            f"{'an integer' if kind is int else 'a string'}, got "
                            f"{json_kind(value)}")
    start, end, kind = span
    if not kind.strip() or kind != kind.strip():
        raise DataError(f"bad entity in {where}: label {kind!r} is empty or has spaces "
                        "around it")
    problem = lone_surrogate(kind, "the label")
    if problem:
        raise DataError(f"bad entity in {where}: {problem}")
    if not 0 <= start < end <= len(text):
        raise DataError(f"bad entity in {where}: [{start}, {end}) is not a span of the "
                        f"{len(text)}-character text")
    if given is not None and given != text[start:end]:
        raise DataError(f"bad entity in {where}: its text {given!r} is not the text's "
                        f"characters [{start}, {end}), {text[start:end]!r}")
    return start, end, kind


def tag_names(sentences: Iterable[Sentence]) -> list[str]:
    """The BIO tags of the entity types in ``sentences``: ``["O", "B-LOC", "I-LOC", ...]``."""
    types = sorted({kind for sentence in sentences for kind, _, _ in sentence.entities})
    return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in ("B", "I")]


def token_tags(tokenizer: Any, sentence: Sentence, maxlen: int, tags: Sequence[str],
               ) -> tuple[list[int], list[int], list[tuple[int, int] | None], int]:
    """The sentence as WordPiece ids with one tag id per token.

    Args:
        tokenizer: a :class:`kerasbert.text.tokenizer.Tokenizer`.
        sentence: a :class:`Sentence`.
        maxlen: tokens per sequence, [CLS] and [SEP] included.
        tags: the tag names (:func:`tag_names`); an entity type outside them is tagged O.

    Returns:
        ``(token_ids, tag_ids, spans, lost)``: [CLS] and [SEP] are tagged O; ``spans`` are
        each token's characters as ``(start, end)`` (None for [CLS] / [SEP]); ``lost`` the
        number of entities no token covers.
    """
    tokens = tokenizer.tokenize(sentence.text, maxlen=maxlen)
    spans = [(chars[0], chars[-1] + 1) if chars else None
             for chars in tokenizer.rematch(sentence.text, tokens)]
    index = {name: i for i, name in enumerate(tags)}
    labels, covered = [], set()
    for span in spans:
        found = None if span is None else next(
            (entity for entity in sentence.entities
             if span[0] < entity[2] and entity[1] < span[1]), None)
        if found is None or f"B-{found[0]}" not in index:
            labels.append(0)
            continue
        labels.append(index[f"{'I' if found in covered else 'B'}-{found[0]}"])
        covered.add(found)
    lost = sum(entity not in covered for entity in sentence.entities)
    return tokenizer.tokens_to_ids(tokens), labels, spans, lost


def char_tags(text: str, entities: Iterable[tuple[str, int, int]]) -> list[str]:
    """One BIO tag per character of ``text`` for the entity spans (for scoring)."""
    tags = ["O"] * len(text)
    for kind, start, end in entities:
        tags[start:end] = [f"B-{kind}"] + [f"I-{kind}"] * (end - start - 1)
    return tags
