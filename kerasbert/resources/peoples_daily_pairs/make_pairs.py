"""Builds the shipped Chinese sentence-pair set from the People's Daily NER split (run once;
the output is committed).

    python kerasbert/resources/peoples_daily_pairs/make_pairs.py [--seed 42] [--output DIR]

Two newspaper sentences of one split make a pair; the label says whether they speak of the
same person, place or organisation: 1 when they name a common entity that is specific
(named by at most ``MAX_SHARE`` sentences of the split, so 中国 or 北京 alone make no pair),
0 when they name no common entity at all, though both name one of the same type (two
persons, two places...). Only sentences of at most ``MAX_CHARS`` characters are used. Each
split gives half positive and half negative pairs, at most ``PAIRS_PER_ENTITY`` positives
for one entity, drawn with the seed. Output: train.tsv, dev.tsv, test.tsv (a header row
``text_a<TAB>text_b<TAB>label``) next to this script.
"""

import argparse
import itertools
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SPLIT_DIR = os.path.join(HERE, "..", "peoples_daily")
MAX_CHARS = 80
MAX_SHARE = 20
PAIRS_PER_ENTITY = 4
SIZES = {"train": 2000, "dev": 300, "test": 600}


def read_conll(path):
    """``[(text, {(type, entity text)})]`` of a character BIO file."""
    sentences, chars, tags = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in list(f) + [""]:
            if line.strip():
                char, tag = line.split()
                chars.append(char)
                tags.append(tag)
                continue
            if chars:
                text, entities = "".join(chars), set()
                for i, tag in enumerate(tags):
                    if tag.startswith("B-"):
                        end = i + 1
                        while end < len(tags) and tags[end] == f"I-{tag[2:]}":
                            end += 1
                        entities.add((tag[2:], text[i:end]))
                sentences.append((text, entities))
            chars, tags = [], []
    return sentences


def pairs(sentences, size, rng):
    """``size`` rows ``(text_a, text_b, label)``, half of each label, in a seeded order."""
    sentences = [(text, entities) for text, entities in sentences
                 if entities and len(text) <= MAX_CHARS]
    named = {}
    for i, (_, entities) in enumerate(sentences):
        for entity in entities:
            named.setdefault(entity, []).append(i)
    positives = []
    for entity in sorted(named):
        holders = named[entity]
        if 2 <= len(holders) <= MAX_SHARE:
            found = list(itertools.combinations(holders, 2))
            positives += rng.sample(found, min(PAIRS_PER_ENTITY, len(found)))
    positives = sorted(set(positives))
    rng.shuffle(positives)
    positives = positives[:size // 2]
    by_type = {}
    for i, (_, entities) in enumerate(sentences):
        for kind in {kind for kind, _ in entities}:
            by_type.setdefault(kind, []).append(i)
    negatives, seen = [], set()
    while len(negatives) < size - len(positives):
        a = rng.choice([i for pair in positives for i in pair])
        kind = rng.choice(sorted({kind for kind, _ in sentences[a][1]}))
        b = rng.choice(by_type[kind])
        if b != a and not sentences[a][1] & sentences[b][1] and (a, b) not in seen:
            seen.add((a, b))
            negatives.append((a, b))
    rows = [(a, b, 1) for a, b in positives] + [(a, b, 0) for a, b in negatives]
    rng.shuffle(rows)
    return [(sentences[a][0], sentences[b][0], label) for a, b, label in rows]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default=HERE, help="folder to write to (default: here)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    for split, size in SIZES.items():
        rows = pairs(read_conll(os.path.join(SPLIT_DIR, f"{split}.txt")), size, rng)
        path = os.path.join(args.output, f"{split}.tsv")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("text_a\ttext_b\tlabel\n")
            for a, b, label in rows:
                f.write(f"{a}\t{b}\t{label}\n")
        print(f"{path}: {len(rows)} pairs, {sum(row[2] for row in rows)} same entity",
              file=sys.stderr)


if __name__ == "__main__":
    main()
