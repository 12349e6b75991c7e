"""Builds the shipped Chinese name pairs from the People's Daily NER split (run once; the
output is committed).

    python kerasbert/resources/peoples_daily_name_pairs/make_pairs.py [--seed 42] [--output DIR]

The names are the persons, places and organisations tagged in ``../peoples_daily/``; a pair
of two names is labelled 1 when both are of one kind (two persons, two places, two
organisations) and 0 when they are of two kinds. A name tagged with two kinds somewhere in
the split (内塔尼亚胡, 南阳) is left out, and each name belongs to the first file that names
it, in the order train, dev, test, so that no name is in two files. Each file gives half
pairs of each label, drawn with the seed: the first name uniformly among the file's names,
the second among the other names of its kind (label 1) or the names of the other kinds
(label 0), no unordered pair twice. Output: train.tsv, dev.tsv, test.tsv (a header row
``text_a<TAB>text_b<TAB>label``) next to this script.
"""

import argparse
import os
import random
import sys
from collections.abc import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
SPLIT_DIR = os.path.join(HERE, "..", "peoples_daily")
SPLITS = ("train", "dev", "test")
SIZES = {"train": 2000, "dev": 600, "test": 600}


def read_names(path: str) -> set[tuple[str, str]]:
    """``{(kind, name)}`` of a character BIO file: each entity's tag type and text."""
    names, chars, tags = set(), [], []
    with open(path, encoding="utf-8") as f:
        for line in list(f) + [""]:
            if line.strip():
                char, tag = line.split()
                chars.append(char)
                tags.append(tag)
                continue
            for i, tag in enumerate(tags):
                if tag.startswith("B-"):
                    end = i + 1
                    while end < len(tags) and tags[end] == f"I-{tag[2:]}":
                        end += 1
                    names.add((tag[2:], "".join(chars[i:end])))
            chars, tags = [], []
    return names


def names_by_split() -> dict[str, dict[str, list[str]]]:
    """``{split: {kind: [name, ...]}}``: each name of one kind in the first split naming it."""
    found = {split: read_names(os.path.join(SPLIT_DIR, f"{split}.txt")) for split in SPLITS}
    kinds: dict[str, set[str]] = {}
    for names in found.values():
        for kind, name in names:
            kinds.setdefault(name, set()).add(kind)
    result: dict[str, dict[str, list[str]]] = {}
    seen: set[str] = set()
    for split in SPLITS:
        result[split] = {}
        for kind, name in sorted(found[split]):
            if len(kinds[name]) == 1 and name not in seen:
                result[split].setdefault(kind, []).append(name)
        seen.update(name for names in result[split].values() for name in names)
    return result


def pairs(by_kind: dict[str, list[str]], size: int,
          rng: random.Random) -> list[tuple[str, str, int]]:
    """``size`` rows ``(text_a, text_b, label)``, half of each label, in a seeded order."""
    names = [(kind, name) for kind in sorted(by_kind) for name in by_kind[kind]]
    rows: list[tuple[str, str, int]] = []
    seen: set[frozenset[str]] = set()
    while len(rows) < size:
        label = len(rows) % 2
        kind, first = rng.choice(names)
        others = (by_kind[kind] if label else
                  [name for other in sorted(by_kind) if other != kind for name in by_kind[other]])
        second = rng.choice(others)
        if second != first and frozenset((first, second)) not in seen:
            seen.add(frozenset((first, second)))
            rows.append((first, second, label))
    rng.shuffle(rows)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default=HERE, help="folder to write to (default: here)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    for split, by_kind in names_by_split().items():
        rows = pairs(by_kind, SIZES[split], rng)
        path = os.path.join(args.output, f"{split}.tsv")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("text_a\ttext_b\tlabel\n")
            for a, b, label in rows:
                f.write(f"{a}\t{b}\t{label}\n")
        counts = ", ".join(f"{kind} {len(names)}" for kind, names in sorted(by_kind.items()))
        print(f"{path}: {len(rows)} pairs, {sum(row[2] for row in rows)} of one kind; "
              f"names: {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
