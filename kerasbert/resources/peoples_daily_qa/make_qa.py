"""Builds the shipped Chinese extractive QA set from the People's Daily NER split (run once;
the output is committed).

    python kerasbert/resources/peoples_daily_qa/make_qa.py [--seed 42] [--output DIR]

For every sentence of ``../peoples_daily/{train,dev,test}.txt`` and every entity type, the
question "which person / place / organisation does this sentence name?" is asked when the
sentence names exactly one entity of that type (its span is the answer); a sentence naming
several is skipped (the answer would be ambiguous). A sentence that names no entity of the
type but others does gives an unanswerable question (SQuAD v2.0), kept with probability
``UNANSWERABLE_RATE`` (seeded), so that about one question in five has no answer.
Output: train.json, dev.json, test.json (SQuAD v2.0) next to this script.
"""

import argparse
import json
import os
import random
import sys
from collections.abc import Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SPLIT_DIR = os.path.join(HERE, "..", "peoples_daily")
QUESTIONS = {"PER": "这句话提到的人是谁？", "LOC": "这句话提到的地方是哪里？",
             "ORG": "这句话提到的机构是哪个？"}
UNANSWERABLE_RATE = 0.15


def read_conll(path: str) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """``[(text, [(type, start, end)])]`` of a character BIO file."""
    sentences, chars, tags = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in list(f) + [""]:
            if line.strip():
                char, tag = line.split()
                chars.append(char)
                tags.append(tag)
                continue
            if chars:
                entities = []
                for i, tag in enumerate(tags):
                    if tag.startswith("B-"):
                        end = i + 1
                        while end < len(tags) and tags[end] == f"I-{tag[2:]}":
                            end += 1
                        entities.append((tag[2:], i, end))
                sentences.append(("".join(chars), entities))
            chars, tags = [], []
    return sentences


def questions(sentences: list[tuple[str, list[tuple[str, int, int]]]], split: str,
              rng: random.Random) -> dict[str, Any]:
    paragraphs = []
    for n, (text, entities) in enumerate(sentences):
        qas = []
        for kind, question in QUESTIONS.items():
            found = [(start, end) for k, start, end in entities if k == kind]
            qid = f"{split}-{n}-{kind}"
            if len(found) == 1:
                start, end = found[0]
                qas.append({"id": qid, "question": question, "is_impossible": False,
                            "answers": [{"text": text[start:end], "answer_start": start}]})
            elif not found and entities and rng.random() < UNANSWERABLE_RATE:
                qas.append({"id": qid, "question": question, "is_impossible": True,
                            "answers": []})
        if qas:
            paragraphs.append({"context": text, "qas": qas})
    return {"version": "v2.0", "data": [{"title": f"peoples_daily_{split}",
                                         "paragraphs": paragraphs}]}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default=HERE, help="folder to write to (default: here)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    for split in ("train", "dev", "test"):
        document = questions(read_conll(os.path.join(SPLIT_DIR, f"{split}.txt")), split, rng)
        path = os.path.join(args.output, f"{split}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(document, f, ensure_ascii=False, indent=0)
            f.write("\n")
        qas = [qa for p in document["data"][0]["paragraphs"] for qa in p["qas"]]
        print(f"{path}: {len(qas)} questions, "
              f"{sum(qa['is_impossible'] for qa in qas)} unanswerable", file=sys.stderr)


if __name__ == "__main__":
    main()
