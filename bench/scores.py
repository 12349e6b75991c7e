"""One classification and one NER run of ``kerasbert-zh-small`` on each Keras backend: the
same shipped data, options and seed, the scores side by side.

Each run is ``kerasbert train`` as a user types it, in a fresh process with
``KERAS_BACKEND`` set: the review corpus (classification) and the People's Daily sample
(NER) that kerasbert ships, the first :data:`EXAMPLES` training examples, :data:`OPTIONS`.
A row gives the run's test scores (accuracy and macro F1 of the reviews; entity-level micro
F1 and precision of the sentences) and its wall-clock seconds. Backends draw their random
numbers differently (initialisation of the head, dropout), so the scores agree as two seeds
do, not digit for digit. Not run by default; ``python -m bench scores`` (about twenty
minutes on 2 cores).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench.runner import run_worker, why_missing

BACKENDS = ("tensorflow", "jax", "torch")
#: Training examples of each run (the shipped sets hold 13,891 reviews, 20,864 sentences).
EXAMPLES = 2000
#: The options both tasks' runs share besides their task's shipped defaults.
OPTIONS = ["--epochs", "2", "--maxlen", "64", "--batch-size", "32", "--seed", "0"]
#: Each task -> the test scores its row shows, as paths into metrics.json.
SCORES = {"classification": {"accuracy": ("test", "accuracy"), "macro F1": ("test", "macro_f1")},
          "ner": {"entity F1": ("test", "micro", "f1"),
                  "entity precision": ("test", "micro", "precision")}}


def train(task, folder):
    """Worker: ``kerasbert train --task TASK`` on the shipped data; its metrics.json and
    wall-clock seconds."""
    output = os.path.join(folder, f"{task}-{os.environ.get('KERAS_BACKEND', 'tensorflow')}")
    command = [os.path.join(os.path.dirname(sys.executable), "kerasbert"), "train", "--task",
               task, "--output", output, "--max-train-examples", str(EXAMPLES), *OPTIONS]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, check=False)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"kerasbert train --task {task} failed: {done.stderr[-2000:]}")
    with open(os.path.join(output, "metrics.json"), encoding="utf-8") as file:
        return {"metrics": json.load(file), "seconds": seconds}


WORKERS = {"train": train}


def score(metrics, path):
    """The number at ``path`` in ``metrics``, or None where it has none."""
    for key in path:
        if not isinstance(metrics, dict) or key not in metrics:
            return None
        metrics = metrics[key]
    return metrics if isinstance(metrics, (int, float)) else None


def run(options, log):
    """Trains each task once on each backend and tabulates the test scores."""
    folder = tempfile.mkdtemp(prefix="kerasbert-bench-scores-")
    found = {}
    try:
        for task in SCORES:
            for backend in BACKENDS:
                log(f"scores: {task} on {backend}")
                found[task, backend] = run_worker("scores", "train",
                                                  {"task": task, "folder": folder}, options,
                                                  log, timeout=3600, backend=backend)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    tables, results = [], {}
    for task, wanted in SCORES.items():
        rows = []
        for backend in BACKENDS:
            result = found[task, backend]
            row = {"backend": backend, "note": why_missing(result)}
            if not row["note"]:
                row.update({name: score(result.get("metrics"), path)
                            for name, path in wanted.items()})
                row["seconds"] = round(result.get("seconds", 0.0), 1)
            rows.append(row)
            results[f"{task} on {backend}"] = row
        columns = [("backend", "Keras backend"), *((name, name) for name in wanted),
                   ("seconds", "seconds"), ("note", "note")]
        tables.append({"title": f"kerasbert-zh-small {task}, {EXAMPLES} training examples, "
                                f"{' '.join(OPTIONS)}, test scores on each backend",
                       "columns": columns, "rows": rows})
    return {"results": results, "tables": tables}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("scores")
