"""Build + load a BERT-base-size Google checkpoint: kerasbert next to bert4keras and the floor.

The floor is reading every tensor with TensorFlow's checkpoint reader and keeping it.
Each implementation runs in a fresh interpreter (bert4keras on tf-keras), one after the
other, several rounds; the table shows medians. Peak RSS is ``ru_maxrss`` inside each
process: raw, after imports, the difference (what building and loading added), and the
part the load alone added (peak at the end minus peak after building). Timings on a
busy machine mislead: the machine's load average is printed before and after.

Usage::

    python -m bench.load [--runs 3] [--json out/bench_load.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    "kerasbert": f"""
        from kerasbert import build_transformer_model, load_checkpoint
        baseline = rss_mb()
        start = time.perf_counter()
        model = build_transformer_model(config, **{HEADS!r})
        built, built_mb = time.perf_counter(), rss_mb()
        load_checkpoint(model, prefix)
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
ENVIRONMENTS = {
    "floor": {},
    "kerasbert": {},
    "bert4keras": {"TF_KERAS": "1", "TF_USE_LEGACY_KERAS": "1"},
}


WRITER = """
    import os, sys
    import numpy as np
    from kerasbert import build_transformer_model, write_checkpoint
    from kerasbert.checkpoints.loading import model_targets
    from kerasbert.checkpoints.mapping import TRANSPOSED_VARIABLES
    config, prefix, heads = sys.argv[1], sys.argv[2], eval(sys.argv[3])
    rng = np.random.default_rng(0)
    variables = {}
    for target in model_targets(build_transformer_model(config, **heads)):
        shape = tuple(target.variable.shape)
        shape = shape[::-1] if target.name in TRANSPOSED_VARIABLES else shape
        variables[target.name] = rng.standard_normal(shape, dtype="float32") * 0.02
    write_checkpoint(variables, prefix)
    print(sum(os.path.getsize(os.path.join(os.path.dirname(prefix), f))
              for f in os.listdir(os.path.dirname(prefix))) / 2**20)
"""


def run_script(script, arguments, env):
    """Runs ``script`` in a fresh interpreter and returns the JSON of its last line.

    Every step runs in a child of this small process: ``ru_maxrss`` survives fork and
    exec on Linux, so a parent that had held the checkpoint would lift every child's peak.
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=ROOT, **env)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *arguments], env=env,
                            capture_output=True, text=True, check=False)
    if result.returncode:
        raise RuntimeError(f"benchmark step failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def write_random_checkpoint(config_path, prefix):
    """Writes a checkpoint with every variable of BERT + pooler + NSP + MLM, random, with
    TensorFlow; returns its size in MiB."""
    return run_script(WRITER, [config_path, prefix, repr(HEADS)], {})


def run_one(name, config_path, prefix):
    script = "".join(textwrap.dedent(part) for part in (PREAMBLE, SCRIPTS[name], EPILOGUE))
    return run_script(script, [config_path, prefix], ENVIRONMENTS[name])


def summarize(samples, checkpoint_mb):
    results = {}
    for name, runs in samples.items():
        row = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        row["total_s"] = statistics.median(run["build_s"] + run["load_s"] for run in runs)
        row["added_mb"] = statistics.median(run["peak_mb"] - run["baseline_mb"] for run in runs)
        row["load_added_mb"] = statistics.median(run["peak_mb"] - run["built_mb"] for run in runs)
        results[name] = row
    floor, ours = results["floor"], results["kerasbert"]
    for row in results.values():
        row["total_vs_floor"] = row["total_s"] / floor["total_s"]
        row["load_vs_floor"] = row["load_s"] / floor["load_s"]
        row["added_vs_checkpoint"] = row["added_mb"] / checkpoint_mb
        row["load_added_vs_checkpoint"] = row["load_added_mb"] / checkpoint_mb
    if "bert4keras" in results:
        ours["total_vs_bert4keras"] = ours["total_s"] / results["bert4keras"]["total_s"]
    return results


def format_table(results, checkpoint_mb, runs, load_before):
    columns = [  # heading, key, format
        ("build s", "build_s", ".2f"), ("load s", "load_s", ".2f"), ("total s", "total_s", ".2f"),
        ("total/floor", "total_vs_floor", ".2f"), ("load/floor", "load_vs_floor", ".2f"),
        ("peak MiB", "peak_mb", ".0f"), ("imports MiB", "baseline_mb", ".0f"),
        ("added MiB", "added_mb", ".0f"), ("added/ckpt", "added_vs_checkpoint", ".2f"),
        ("load added/ckpt", "load_added_vs_checkpoint", ".2f"),
    ]
    lines = [f"BERT-base checkpoint with all heads: {checkpoint_mb:.0f} MiB; median of {runs} runs; "
             f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after",
             "| | " + " | ".join(heading for heading, _, _ in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for name, row in results.items():
        lines.append(f"| {name} | " + " | ".join(format(row[key], spec) for _, key, spec in columns)
                     + " |")
    if "total_vs_bert4keras" in results["kerasbert"]:
        lines.append(f"kerasbert / bert4keras, build + load: "
                     f"{results['kerasbert']['total_vs_bert4keras']:.2f}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds (median reported)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--config", default=CONFIG, help="bert_config.json of the checkpoint")
    parser.add_argument("--skip-bert4keras", action="store_true", help="when it is not installed")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()[0]
    names = ["floor", "kerasbert"] + ([] if args.skip_bert4keras else ["bert4keras"])
    with tempfile.TemporaryDirectory() as directory:
        prefix = os.path.join(directory, "bert_model.ckpt")
        checkpoint_mb = write_random_checkpoint(args.config, prefix)
        samples = {name: [] for name in names}
        for _ in range(args.runs):
            for name in names:  # interleaved, so drift in machine load spreads evenly
                samples[name].append(run_one(name, args.config, prefix))
    results = summarize(samples, checkpoint_mb)
    print(format_table(results, checkpoint_mb, args.runs, load_before))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"checkpoint_mb": checkpoint_mb, "runs": args.runs, "results": results,
                       "samples": samples}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
