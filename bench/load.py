"""Build + load a BERT-base-size Google checkpoint: kerasbert next to bert4keras and the floor.

The floor is reading every tensor with TensorFlow's checkpoint reader and keeping it.
Each implementation runs in a fresh interpreter (bert4keras on tf-keras), one after the
other, several rounds; the table shows medians. Peak RSS is ``ru_maxrss`` inside each
process: raw, after imports, the difference (what building and loading added), and the
part the load alone added (peak at the end minus peak after building). Timings on a
busy machine mislead: the machine's load average is given before and after.

Usage::

    python -m bench load [--rounds 3] [--only floor kerasbert]   # or python -m bench.load
"""

import importlib.util
import os
import statistics
import tempfile
import textwrap

from bench import worker
from bench.runner import load_average, selected, wait_for_idle, why_missing, worker_env
from bench.worker import ROOT, WorkerError

CONFIG = os.path.join(ROOT, "checkpoints", "chinese_L-12_H-768_A-12", "bert_config.json")
HEADS = dict(with_pool=True, with_nsp=True, with_mlm=True)

# Each script: imports first (not timed), then "build" and "load" phases.
PREAMBLE = """
    import json, resource, sys, time
    def rss_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    config, prefix = sys.argv[1], sys.argv[2]
"""
SCRIPTS = {
    "floor": """
        import tensorflow as tf
        baseline = rss_mb()
        start = time.perf_counter()
        built, built_mb = start, rss_mb()
        reader = tf.train.load_checkpoint(prefix)
        tensors = [reader.get_tensor(name) for name in reader.get_variable_to_shape_map()]
    """,
    # Build, then load_checkpoint on it: everything checked before the first assignment.
    "kerasbert": f"""
        from kerasbert import build_transformer_model, load_checkpoint
        baseline = rss_mb()
        start = time.perf_counter()
        model = build_transformer_model(config, **{HEADS!r})
        built, built_mb = time.perf_counter(), rss_mb()
        load_checkpoint(model, prefix)
    """,
    # The one call users make: the fresh model is loaded a group of variables at a time.
    "kerasbert-checkpoint": f"""
        from kerasbert import build_transformer_model
        baseline = rss_mb()
        start = time.perf_counter()
        built, built_mb = start, baseline  # one call: its time is all under "load"
        build_transformer_model(config, prefix, **{HEADS!r})
    """,
    "bert4keras": f"""
        from bert4keras.models import build_transformer_model
        baseline = rss_mb()
        start = time.perf_counter()
        bert = build_transformer_model(config, return_keras_model=False, **{HEADS!r})
        built, built_mb = time.perf_counter(), rss_mb()
        bert.load_weights_from_checkpoint(prefix)
    """,
}
EPILOGUE = """
    done = time.perf_counter()
    print(json.dumps({"build_s": built - start, "load_s": done - built, "baseline_mb": baseline,
                      "built_mb": built_mb, "peak_mb": rss_mb()}))
"""
# The last one runs on tf-keras.
IMPLEMENTATIONS = ("floor", "kerasbert", "kerasbert-checkpoint", "bert4keras")
ROUNDS = 3
FIGURES = ("build_s", "load_s", "baseline_mb", "built_mb", "peak_mb")  # what EPILOGUE prints


WRITER = """
    import json, os, sys
    import numpy as np
    from kerasbert import build_transformer_model, write_checkpoint
    from kerasbert.models.loading import model_targets
    from kerasbert.models.checkpoint_names import TRANSPOSED_VARIABLES
    config, prefix, heads = sys.argv[1], sys.argv[2], eval(sys.argv[3])
    rng = np.random.default_rng(0)
    variables = {}
    for target in model_targets(build_transformer_model(config, **heads)):
        shape = tuple(target.variable.shape)
        shape = shape[::-1] if target.name in TRANSPOSED_VARIABLES else shape
        variables[target.name] = rng.standard_normal(shape, dtype="float32") * 0.02
    write_checkpoint(variables, prefix)
    print(json.dumps({"checkpoint_mb": sum(
        os.path.getsize(os.path.join(os.path.dirname(prefix), f))
        for f in os.listdir(os.path.dirname(prefix))) / 2**20}))
"""


def write_random_checkpoint(config_path, prefix):
    """Writes a checkpoint with every variable of BERT + pooler + NSP + MLM, random, with
    TensorFlow; returns its size in MiB."""
    result = worker.run_python(WRITER, args=[config_path, prefix, repr(HEADS)],
                               env=worker_env(tf_keras=False))
    return result["checkpoint_mb"]


def run_one(name, config_path, prefix):
    """One build + load of implementation ``name`` in a fresh interpreter; its figures.

    Every step runs in a child of this small process: ``ru_maxrss`` survives fork and
    exec on Linux, so a parent that had held the checkpoint would lift every child's peak.
    """
    script = "".join(textwrap.dedent(part) for part in (PREAMBLE, SCRIPTS[name], EPILOGUE))
    return worker.run_python(script, args=[config_path, prefix],
                             env=worker_env(tf_keras=name == "bert4keras"))


def summarize(samples, checkpoint_mb):
    """Medians over the rounds of each implementation, and the ratios to the floor."""
    results = {}
    for name, runs in samples.items():
        row = {key: statistics.median(run[key] for run in runs) for key in FIGURES}
        row["total_s"] = statistics.median(run["build_s"] + run["load_s"] for run in runs)
        row["added_mb"] = statistics.median(run["peak_mb"] - run["baseline_mb"] for run in runs)
        row["load_added_mb"] = statistics.median(run["peak_mb"] - run["built_mb"] for run in runs)
        row["added_vs_checkpoint"] = row["added_mb"] / checkpoint_mb
        row["load_added_vs_checkpoint"] = row["load_added_mb"] / checkpoint_mb
        results[name] = row
    floor = results.get("floor")
    for row in results.values() if floor else ():
        row["total_vs_floor"] = row["total_s"] / floor["total_s"]
        row["load_vs_floor"] = row["load_s"] / floor["load_s"]
    return results


def run(options, log):
    """Build + load in fresh interpreters, interleaved rounds; returns the section.

    ``options``: ``rounds`` (default 3; medians are reported), ``only`` (of
    :data:`IMPLEMENTATIONS`), ``max_wait``.
    """
    names = selected(options, IMPLEMENTATIONS)
    rounds = options.rounds or ROUNDS
    load_before = load_average()[0]
    missing = {}
    if "bert4keras" in names and importlib.util.find_spec("bert4keras") is None:
        missing["bert4keras"] = {"skipped": "bert4keras is not installed "
                                            "(pip install --no-deps bert4keras==0.11.5)"}
    samples = {name: [] for name in names if name not in missing}
    with tempfile.TemporaryDirectory(prefix="bench-load-") as directory:
        prefix = os.path.join(directory, "bert_model.ckpt")
        log("load: writing a random BERT-base checkpoint with all heads")
        checkpoint_mb = write_random_checkpoint(CONFIG, prefix)
        for round_ in range(rounds):
            for name in [name for name in samples if name not in missing]:
                # Interleaved, so drift in the machine's load spreads evenly.
                log(f"load: {name} (round {round_ + 1} of {rounds})")
                wait_for_idle(options.max_wait, log=log)
                try:
                    samples[name].append(run_one(name, CONFIG, prefix))
                except WorkerError as error:
                    for line in str(error).splitlines()[-12:]:
                        log(f"load: {name}: {line}")
                    missing[name] = {"failed": error.reason}
    measured = summarize({name: runs for name, runs in samples.items() if name not in missing},
                         checkpoint_mb)
    results = {name: measured.get(name) or missing[name] for name in names}
    title = (f"Build + load, BERT-base checkpoint with all heads: {checkpoint_mb:.0f} MiB; "
             f"median of {rounds} runs; load average {load_before:.2f} before, "
             f"{load_average()[0]:.2f} after")
    section = {"results": results, "checkpoint_mb": checkpoint_mb, "samples": samples,
               "tables": [{"title": title, "columns": COLUMNS, "rows": _rows(results)}]}
    ours, theirs = results.get("kerasbert", {}), results.get("bert4keras", {})
    if "total_s" in ours and "total_s" in theirs:
        section["notes"] = [f"kerasbert / bert4keras, build + load: "
                            f"{ours['total_s'] / theirs['total_s']:.2f}"]
    return section


COLUMNS = [("name", ""), ("build_s", "build s"), ("load_s", "load s"), ("total_s", "total s"),
           ("total_vs_floor", "total/floor"), ("load_vs_floor", "load/floor"),
           ("peak_mb", "peak MiB"), ("baseline_mb", "imports MiB"), ("added_mb", "added MiB"),
           ("added_vs_checkpoint", "added/ckpt"),
           ("load_added_vs_checkpoint", "load added/ckpt")]


def _rows(results):
    rows = []
    for name, result in results.items():
        if why_missing(result):
            rows.append({"name": name, "build_s": why_missing(result)})
            continue
        # Seconds and ratios to two decimals, memory to the MiB.
        rows.append({"name": name, **{key: round(value) if key.endswith("_mb") else round(value, 2)
                                      for key, value in result.items()}})
    return rows


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("load")
