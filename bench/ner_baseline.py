"""A non-neural NER baseline on a CoNLL split: a character CRF (sklearn-crfsuite).

Each character is described by the characters around it (unigrams at offsets -2..+2, the
bigrams among them) and their kind (digit, Chinese numeral, punctuation, Latin letter, other);
a linear-chain CRF trained with L-BFGS tags it. The L1 / L2 weights ``c1`` and ``c2`` are
chosen on the dev file from a small grid, as the best epoch of a BERT run is; the test file is
scored once, entity by entity, with :func:`kerasbert.tasks.ner.entities.entity_scores` (the same
numbers as seqeval's default mode), so it is a yardstick for a fine-tuned BERT tagger on the
same files.

Usage::

    python -m bench.ner_baseline [--data kerasbert/resources/peoples_daily] [--json out/crf.json]
"""

import argparse
import itertools
import sys
import time
import unicodedata

from bench.baselines import write_json
from kerasbert.tasks.ner.entities import entity_scores, format_report, read_conll

C1_GRID = (0.05, 0.2)
C2_GRID = (0.01, 0.1)
MAX_ITERATIONS = 100
WINDOW = 2  # characters each side
CHINESE_NUMERALS = frozenset("〇零一二三四五六七八九十百千万亿两")


def char_kind(char):
    """A coarse class of one character: digit, numeral, punct, latin or other."""
    if char.isdigit():  # full-width digits too
        return "digit"
    if char in CHINESE_NUMERALS:
        return "numeral"
    category = unicodedata.category(char)
    if category[0] in "PS":
        return "punct"
    if category[0] == "L" and "LATIN" in unicodedata.name(char, ""):
        return "latin"
    return "other"


def sentence_features(chars):
    """One feature dict per character: the window's unigrams, bigrams and kinds."""
    padded = ["<s>"] * WINDOW + list(chars) + ["</s>"] * WINDOW
    kinds = ["pad"] * WINDOW + [char_kind(char) for char in chars] + ["pad"] * WINDOW
    features = []
    for index in range(WINDOW, len(padded) - WINDOW):
        found = {"bias": 1.0}
        for offset in range(-WINDOW, WINDOW + 1):
            found[f"c[{offset}]"] = padded[index + offset]
            if -1 <= offset <= 1:
                found[f"kind[{offset}]"] = kinds[index + offset]
            if offset < WINDOW:
                found[f"c[{offset}:{offset + 1}]"] = (padded[index + offset]
                                                      + padded[index + offset + 1])
        found["c[-1]c[1]"] = padded[index - 1] + padded[index + 1]
        features.append(found)
    return features


def read_features(path):
    """``(features, tags)`` of every sentence of a CoNLL file."""
    sentences = read_conll(path)
    return [sentence_features(tokens) for tokens, _ in sentences], \
        [tags for _, tags in sentences]


def crf_tagger(data_dir, c1_grid=C1_GRID, c2_grid=C2_GRID, max_iterations=MAX_ITERATIONS):
    """Fits a character CRF for each ``(c1, c2)`` of the grid; scores the best on test.

    Returns:
        ``{"c1", "c2", "grid": [{"c1", "c2", "dev_micro_f1", "train_seconds"}], "dev": micro
        scores, "test": entity_scores(...) on test.txt, "train_seconds": the chosen fit's,
        "seconds": wall time of it all}``.
    """
    import sklearn_crfsuite

    started = time.perf_counter()
    (train_x, train_y), (dev_x, dev_y), (test_x, test_y) = (
        read_features(f"{data_dir}/{name}.txt") for name in ("train", "dev", "test"))
    grid, best = [], None
    for c1, c2 in itertools.product(c1_grid, c2_grid):
        model = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2,
                                     max_iterations=max_iterations,
                                     all_possible_transitions=True)
        fit_started = time.perf_counter()
        model.fit(train_x, train_y)
        seconds = round(time.perf_counter() - fit_started, 1)
        dev = entity_scores(dev_y, model.predict(dev_x))
        grid.append({"c1": c1, "c2": c2, "dev_micro_f1": dev["micro"]["f1"],
                     "train_seconds": seconds})
        if best is None or dev["micro"]["f1"] > best[1]["micro"]["f1"]:
            best = (model, dev, grid[-1])
    model, dev, chosen = best
    return {"model": "character CRF, window unigrams + bigrams (sklearn-crfsuite, L-BFGS)",
            "c1": chosen["c1"], "c2": chosen["c2"], "max_iterations": max_iterations,
            "train_sentences": len(train_x),
            "train_characters": sum(len(sentence) for sentence in train_x),
            "grid": grid, "dev": dev["micro"], "test": entity_scores(test_y, model.predict(test_x)),
            "train_seconds": chosen["train_seconds"],
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="kerasbert/resources/peoples_daily",
                        help="folder with train/dev/test.txt (CoNLL: char tag)")
    parser.add_argument("--max-iterations", type=int, default=MAX_ITERATIONS)
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    result = crf_tagger(args.data, max_iterations=args.max_iterations)
    test = result["test"]
    print(f"{result['model']} (c1={result['c1']}, c2={result['c2']}, "
          f"{result['max_iterations']} iterations)")
    print(format_report(test))
    print(f"test micro-F1 {test['micro']['f1']:.4f}; training {result['train_seconds']} s, "
          f"{len(result['grid'])} fits and scoring {result['seconds']} s")
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
