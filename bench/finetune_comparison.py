"""Is the shipped kerasbert-zh-small worth its pretraining? Three runs on the review split.

1. ``kerasbert train`` from the shipped checkpoint;
2. the same command, same config and options, without ``--checkpoint`` (random init);
3. TF-IDF character 1-3-grams + logistic regression (:mod:`bench.baselines`).

Each is timed (wall clock, start-up and evaluation included) and scored on the test file.
The two BERT runs run one after the other in fresh interpreters, never at the same time.

Usage::

    python -m bench.finetune_comparison --runs runs/comparison \\
        --json kerasbert/resources/kerasbert-zh-small/finetune_comparison.json
"""

import argparse
import json
import os
import subprocess
import sys
import time

from bench.baselines import tfidf_logistic_regression, write_json

MODEL = "kerasbert/resources/kerasbert-zh-small"
DATA = "kerasbert/resources/reviews"
# The demo's options: 3 epochs of the 13,891 training reviews fit in ~10 minutes on 2 cores.
OPTIONS = ["--epochs", "3", "--batch-size", "32", "--maxlen", "128", "--lr", "1e-4",
           "--seed", "42"]


def bert_run(output, checkpoint):
    """Runs ``kerasbert train`` once; returns its test metrics and wall time."""
    command = [sys.executable, "-m", "kerasbert.cli.main", "train", "--output", output,
               "--config", f"{MODEL}/bert_config.json", "--vocab", f"{MODEL}/vocab.txt",
               "--train", f"{DATA}/train.tsv", "--dev", f"{DATA}/dev.tsv",
               "--test", f"{DATA}/test.tsv", *OPTIONS]
    if checkpoint:
        command += ["--checkpoint", f"{MODEL}/bert_model.ckpt"]
    started = time.perf_counter()
    subprocess.run(command, check=True, env=dict(os.environ, CI="1"))
    seconds = time.perf_counter() - started
    with open(os.path.join(output, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    return {"command": " ".join(["kerasbert"] + command[3:]),
            "test": {k: metrics["test"][k] for k in ("accuracy", "macro_f1")},
            "dev": {k: metrics["dev"][k] for k in ("accuracy", "macro_f1")},
            "best_epoch": metrics["best_epoch"], "seconds": round(seconds, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="runs/comparison", help="folder for the two BERT runs")
    parser.add_argument("--json", help="write the three results here")
    args = parser.parse_args(argv)
    results = {
        "pretrained": bert_run(os.path.join(args.runs, "pretrained"), checkpoint=True),
        "random_init": bert_run(os.path.join(args.runs, "random_init"), checkpoint=False),
        "tfidf": tfidf_logistic_regression(DATA),
        "cpu_count": os.cpu_count(),
    }
    for name in ("pretrained", "random_init", "tfidf"):
        row = results[name]
        print(f"{name:<12} test accuracy {row['test']['accuracy']:.4f}  "
              f"macro-F1 {row['test']['macro_f1']:.4f}  {row['seconds']:.0f} s")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
