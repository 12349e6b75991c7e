"""Sequence-labelling data: tagged files in, WordPiece-aligned tag ids out, and back.

A sentence is its text and its entities as character spans ``(type, start, end)``
(``end`` exclusive), whatever the file's format:

- CoNLL two-column (``.txt``, ``.conll``, ``.bio``, ...): one token and its tag per line
  (BIO, IOB1 or BIOES), a blank line between sentences, ``-DOCSTART-`` lines ignored.
  Tokens of one character (Chinese) are joined as they are; longer ones with a space.
- JSONL (``.jsonl``): ``{"text": "...", "entities": [{"start": 0, "end": 2, "label":
  "PER"}, ...]}`` (or ``[start, end, label]`` triples), offsets in characters.

The model sees WordPiece tokens: :func:`token_tags` gives each token the BIO tag of the
entity it falls in, through the tokenizer's character offsets, so the characters the
tokenizer deletes (spaces, controls) or merges into one word are handled; an entity that
no token covers any more (truncated by ``maxlen``, or made only of deleted characters)
is counted as lost. :func:`token_entities` maps predicted token tags back to character
spans of the text, and scores are computed on characters against the file's own spans
(:func:`char_tags`), so a lost entity counts as missed.
"""

import dataclasses
import json
import os

from kerasbert.files import open_input
from kerasbert.inference.entities import entity_spans, split_tag
from kerasbert.training.data import DataError

JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclasses.dataclass
class Sentence:
    """A text and its entities ``[(type, start, end), ...]`` in characters."""

    text: str
    entities: list
    where: str = ""  # file and line, for messages


def read_sentences(path):
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
    with open_input(path, "data", "a tagged file") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError(f"data in {path}: not UTF-8 text ({error})") from None
    reader = _read_jsonl if path.lower().endswith(JSONL_SUFFIXES) else _read_conll
    sentences = reader(text.splitlines(), path)
    if not sentences:
        raise DataError(f"data in {path}: no tagged sentence found")
    return sentences


def _read_conll(lines, path):
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
        if len(columns) < 2:
            raise DataError(f"bad line in {path}, line {number}: expected a token and its tag "
                            f"separated by whitespace, got {line.strip()!r}")
        try:
            split_tag(columns[-1])
        except ValueError as error:
            raise DataError(f"bad tag in {path}, line {number}: {error}") from None
        first = first if tokens else number
        tokens.append(columns[0])
        tags.append(columns[-1])
    return sentences


def _conll_sentence(tokens, tags, where):
    separator = "" if all(len(token) == 1 for token in tokens) else " "
    starts, position = [], 0
    for token in tokens:
        starts.append(position)
        position += len(token) + len(separator)
    entities = [(kind, starts[start], starts[end - 1] + len(tokens[end - 1]))
                for kind, start, end in entity_spans(tags)]
    return Sentence(separator.join(tokens), entities, where)


def _read_jsonl(lines, path):
    sentences = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(f"bad row in {where}: invalid JSON ({error.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise DataError(f"bad row in {where}: expected an object with a string 'text'")
        spans = row.get("entities", row.get("spans", []))
        if not isinstance(spans, list):
            raise DataError(f"bad row in {where}: 'entities' must be a list")
        entities = sorted(_span(span, row["text"], where) for span in spans)
        entities = [(kind, start, end) for start, end, kind in entities]
        for (_, _, end), (_, start, _) in zip(entities, entities[1:]):
            if start < end:
                raise DataError(f"bad row in {where}: entities overlap at character {start} "
                                "(BIO tags give each character one entity)")
        sentences.append(Sentence(row["text"], entities, where))
    return sentences


def _span(span, text, where):
    if isinstance(span, dict):
        span = [span.get("start"), span.get("end"), span.get("label", span.get("type"))]
    if not (isinstance(span, list) and len(span) == 3 and isinstance(span[2], str)
            and span[2] and all(isinstance(v, int) and not isinstance(v, bool)
                                for v in span[:2])):
        raise DataError(f"bad entity in {where}: {span!r} is not [start, end, label] "
                        "(integer character offsets and a label)")
    start, end, kind = span
    if not 0 <= start < end <= len(text):
        raise DataError(f"bad entity in {where}: [{start}, {end}) is not a span of the "
                        f"{len(text)}-character text")
    return start, end, kind


def tag_names(sentences):
    """The BIO tags of the entity types in ``sentences``: ``["O", "B-LOC", "I-LOC", ...]``."""
    types = sorted({kind for sentence in sentences for kind, _, _ in sentence.entities})
    return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in ("B", "I")]


def token_tags(tokenizer, sentence, maxlen, tags):
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


def token_entities(tag_ids, spans, tags):
    """Character spans ``[(type, start, end)]`` of the entities in predicted token tags.

    Example:
        >>> token_entities([0, 1, 2, 0], [None, (0, 1), (1, 3), None], ["O", "B-PER", "I-PER"])
        [('PER', 0, 3)]
    """
    names = [tags[i] if span is not None else "O" for i, span in zip(tag_ids, spans)]
    return [(kind, spans[start][0], spans[end - 1][1])
            for kind, start, end in entity_spans(names)]


def char_tags(text, entities):
    """One BIO tag per character of ``text`` for the entity spans (for scoring)."""
    tags = ["O"] * len(text)
    for kind, start, end in entities:
        tags[start:end] = [f"B-{kind}"] + [f"I-{kind}"] * (end - start - 1)
    return tags
