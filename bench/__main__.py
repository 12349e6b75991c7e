"""``python -m bench [SUITE ...]``: runs the benchmark suites and prints their tables.

Suites: ``gemm`` (the machine's GEMM limit), ``forward`` (kerasbert against
bert4keras, keras-hub, Hugging Face torch and onnxruntime, batch 8 x 128 and 1 x 32),
``bf16`` (bf16 deviation on real weights), ``build`` (build time and memory against
bert4keras), ``ablation`` (kerasbert's own variants, not run by default), and the
suites other parts of the project contribute (``load``, ``tokenize``, ``train``) when
they are present. The tables are printed as markdown and everything is written as
JSON (``--json``), with the machine, the versions and the load average at the start.
"""

import argparse
import datetime
import importlib
import json
import os
import sys

from bench import runner

DEFAULT_SUITES = ["gemm", "forward", "bf16", "build", "load", "tokenize", "train", "serving"]
ALL_SUITES = DEFAULT_SUITES + ["ablation"]


def _parser():
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help=f"suites to run, of {', '.join(ALL_SUITES)} "
                             f"(default: {' '.join(DEFAULT_SUITES)})")
    parser.add_argument("--json", default=os.path.join("out", "bench.json"),
                        help="where to write the JSON results (default: out/bench.json)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per figure")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first")
    parser.add_argument("--rounds", type=int, default=1,
                        help="forward: run each implementation this many times, taking turns, "
                             "and keep its best median")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="forward/ablation/train: only these implementations")
    parser.add_argument("--max-load", type=float, default=1.0,
                        help="wait until the 1-minute load average is at most this")
    parser.add_argument("--max-wait", type=float, default=600,
                        help="seconds to wait for a quiet machine (before the run and before "
                             "each worker) before running anyway")
    return parser


def _run_suite(name, options, args, results, log):
    only = args.only
    if name == "forward":
        gemm = results.get("gemm", {}).get("results", {}).get("float32")
        return importlib.import_module("bench.forward").run(
            {**options, "rounds": args.rounds}, log, only, gemm)
    if name in ("ablation", "train"):
        return importlib.import_module(f"bench.{name}").run(options, log, only)
    try:
        module = importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"bench.{name}":
            raise
        return {"suite": name, "skipped": "not part of this version of the benchmarks"}
    if not hasattr(module, "run"):
        # A benchmark written as a script: run it as one and keep what it prints.
        return runner.run_script(name)
    return module.run(options, log)


def _print_section(section):
    if "skipped" in section:
        print(f"\n## {section['suite']}: skipped ({section['skipped']})")
        return
    for table in section.get("tables", []):
        print(f"\n### {table['title']}\n")
        print(runner.format_table(table["columns"], table["rows"]))
    for note in section.get("notes", []):
        print(f"\n{note}")
    if "output" in section:
        print(f"\n## {section['suite']}\n\n{section['output']}")


def main(argv=None):
    """Runs the chosen suites; returns the exit status (0 unless a suite crashed)."""
    parser = _parser()
    args = parser.parse_args(argv)
    suites = args.suites or DEFAULT_SUITES
    unknown = [name for name in suites if name not in ALL_SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(ALL_SUITES)}")

    def log(message):
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    runner.IDLE_WAIT_S = args.max_wait
    options = {"warmup": args.warmup, "repeats": args.repeats, "small_repeats": 3 * args.repeats}
    report = {"started": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": runner.machine(),
              "options": {**options, "only": args.only, "rounds": args.rounds},
              "suites": {}}
    # The load average is checked once, before anything of ours runs (afterwards it also
    # counts our own workers); each worker then waits for idle cores (runner.run_worker).
    report["load_average_at_start"], report["load_wait_gave_up"] = runner.wait_for_quiet(
        args.max_load, args.max_wait, log)
    for name in suites:
        try:
            section = _run_suite(name, options, args, report["suites"], log)
        except Exception as error:  # one broken suite must not cost the others' figures
            section = {"suite": name, "skipped": f"crashed: {type(error).__name__}: {error}"}
        section["load_average_at_end"] = runner.load_average()
        report["suites"][name] = section
        _print_section(section)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
