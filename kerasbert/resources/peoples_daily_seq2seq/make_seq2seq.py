"""Builds the shipped Chinese seq2seq set from the shipped QA set (run once; the output is
committed).

    python kerasbert/resources/peoples_daily_seq2seq/make_seq2seq.py [--output DIR]

Every answerable question of ``../peoples_daily_qa/{train,dev,test}.json`` becomes one pair:
the source is the newspaper sentence followed by the question (``这句话提到的人是谁？``,
``…地方是哪里？``, ``…机构是哪个？``), the target is the answer written out (the person,
place or organisation). Pairs whose source and target together exceed ``MAX_CHARS``
characters are left out, so that every pair fits the default ``--maxlen`` of 128 tokens
whole. Output: train.jsonl, dev.jsonl, test.jsonl (one ``{"source", "target"}`` object per
line, in the QA set's order) next to this script.
"""

import argparse
import json
import os
import sys
from collections.abc import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
QA_DIR = os.path.join(HERE, "..", "peoples_daily_qa")
MAX_CHARS = 120


def pairs(path: str) -> list[dict[str, str]]:
    """``[{"source", "target"}]`` of a SQuAD v2.0 file's answerable questions."""
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    found = []
    for article in document["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa["is_impossible"]:
                    continue
                source = paragraph["context"] + qa["question"]
                target = qa["answers"][0]["text"]
                if len(source) + len(target) <= MAX_CHARS:
                    found.append({"source": source, "target": target})
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=HERE, help="folder to write to (default: here)")
    args = parser.parse_args(argv)
    for split in ("train", "dev", "test"):
        rows = pairs(os.path.join(QA_DIR, f"{split}.json"))
        path = os.path.join(args.output, f"{split}.jsonl")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{path}: {len(rows)} pairs", file=sys.stderr)


if __name__ == "__main__":
    main()
