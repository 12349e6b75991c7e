"""A non-neural baseline on a labelled split: character 1-3-gram TF-IDF + logistic regression.

Independent of kerasbert (scikit-learn only), so it is a fair yardstick for a fine-tuned
BERT on the same files. The regularisation strength ``C`` is chosen on the dev file, as
the best epoch of a BERT run is; the test file is scored once.

Usage::

    python -m bench.baselines [--data kerasbert/resources/reviews] [--json out/tfidf.json]
"""

import argparse
import csv
import json
import sys
import time

C_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def read_split(path):
    """``(texts, labels)`` of a TSV with ``label`` and ``text`` columns."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL))
    return [row["text"] for row in rows], [row["label"] for row in rows]


def tfidf_logistic_regression(data_dir, c_grid=C_GRID):
    """Fits TF-IDF (char 1-3-grams, sublinear tf) + logistic regression; scores dev and test.

    Returns:
        ``{"test": {"accuracy", "macro_f1"}, "dev": {...}, "C": best C, "seconds": wall time}``.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    started = time.perf_counter()
    (train_x, train_y), (dev_x, dev_y), (test_x, test_y) = (
        read_split(f"{data_dir}/{name}.tsv") for name in ("train", "dev", "test"))
    vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True,
                                 min_df=2)
    train_m = vectorizer.fit_transform(train_x)
    dev_m, test_m = vectorizer.transform(dev_x), vectorizer.transform(test_x)

    def scores(model, matrix, labels):
        predicted = model.predict(matrix)
        return {"accuracy": accuracy_score(labels, predicted),
                "macro_f1": f1_score(labels, predicted, average="macro")}

    best = None
    for c in c_grid:
        model = LogisticRegression(C=c, max_iter=2000).fit(train_m, train_y)
        dev = scores(model, dev_m, dev_y)
        if best is None or dev["accuracy"] > best[1]["accuracy"]:
            best = (c, dev, model)
    c, dev, model = best
    return {"model": "TF-IDF char 1-3-grams + logistic regression", "C": c,
            "features": len(vectorizer.vocabulary_), "dev": dev,
            "test": scores(model, test_m, test_y),
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="kerasbert/resources/reviews",
                        help="folder with train/dev/test.tsv")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    result = tfidf_logistic_regression(args.data)
    print(f"{result['model']} (C={result['C']}): test accuracy {result['test']['accuracy']:.4f}, "
          f"macro-F1 {result['test']['macro_f1']:.4f}, {result['seconds']} s")
    if args.json:
        write_json(args.json, result)
    return 0


def write_json(path, value):
    """Writes ``value`` as indented JSON."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
