"""``python -m bench [SUITE ...]``: runs the benchmark suites and prints their tables.

Suites: ``gemm`` (the machine's GEMM limit), ``forward`` (kerasbert against bert4keras,
keras-hub, Hugging Face torch and onnxruntime, batch 8 x 128 and 1 x 32), ``bf16`` (bf16
deviation on real weights), ``build`` (build time and memory against bert4keras), ``load``
(build + load a BERT-base checkpoint against bert4keras and TensorFlow's reader),
``tokenize`` (tokenizer speed against the engine and the peers), ``train`` (fine-tuning
samples/s against the peers), ``serving`` (texts -> probabilities, per way of serving),
``generate`` (GPT-2 small greedy decoding against transformers and keras-hub, not run by
default: about ten minutes), ``ablation`` (kerasbert's own variants, not run by default) and
``long`` (fine-tuning memory and speed at 512 to 4,096 tokens and the longest text that fits,
against Hugging Face torch, not run by default: up to an hour; ``--quick``: a minute),
``long_quality`` (or ``long-quality``: fine-tuning on texts past 512 tokens, truncated
against hierarchical positions, not run by default: about fifteen minutes quiet),
``backends`` (forward, fine-tuning and decoding speed on TensorFlow, JAX and PyTorch against
keras-hub on each and Hugging Face torch, not run by default: about twenty minutes),
``fidelity`` (every family's outputs on JAX and PyTorch against TensorFlow's, the same
checkpoint, not run by default: a few minutes) and ``scores`` (a classification and an NER
run of kerasbert-zh-small on each backend, their test scores side by side, not run by
default: about twenty minutes).
The tables are printed as markdown and everything is written as JSON (``--json``), with the
machine, the options and the load average at the start.

``python -m bench.<suite> [OPTIONS]`` runs one suite at once (no wait for a quiet machine
unless ``--max-wait`` asks for one) and writes only its results with ``--json``.
"""

import argparse
import dataclasses
import datetime
import json
import os

from bench.runner import (
    ALL_SUITES,
    DEFAULT_SUITES,
    Options,
    machine,
    run_suites,
    stderr_log,
    wait_for_quiet,
)


def build_parser(suite=None):
    """The options of ``python -m bench``, or of ``python -m bench.<suite>`` for ``suite``."""
    alone = suite is not None
    prog = f"python -m bench.{suite}" if alone else "python -m bench"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    if not alone:
        parser.add_argument("suites", nargs="*", metavar="SUITE",
                            help=f"suites to run, of {', '.join(ALL_SUITES)} "
                                 f"(default: {' '.join(DEFAULT_SUITES)})")
    parser.add_argument("--json", default=None if alone else os.path.join("out", "bench.json"),
                        help="where to write the JSON results (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=10,
                        help="timed calls per figure, three times as many for short calls "
                             "(default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first (default: 3)")
    parser.add_argument("--rounds", type=int,
                        help="run each implementation this many times, taking turns; forward and "
                             "tokenize keep the best, load the median "
                             "(default: forward 1, tokenize 3, load 3)")
    # The spellings of `python -m bench.load --runs` and `python -m bench.tokenize --repeat`
    # before the suites shared these options.
    for old in ("--runs", "--repeat"):
        parser.add_argument(old, type=int, dest="rounds", help=argparse.SUPPRESS)
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="forward, ablation, train, serving, load, long, long_quality: only "
                             "these implementations")
    parser.add_argument("--corpus", nargs="+", metavar="FILE",
                        help="tokenize: corpus files (.txt: a text per line, .tsv: a 'text' "
                             "column; default: the review corpus if found, else a synthetic one)")
    parser.add_argument("--limit", type=int, metavar="N", help="tokenize: only the first N lines")
    parser.add_argument("--no-peers", action="store_true",
                        help="tokenize: skip the pure-Python peers (bert4keras, transformers)")
    parser.add_argument("--quick", action="store_true",
                        help="long: a tiny model at 64 and 128 tokens (the protocol, not figures)")
    parser.add_argument("--shapes", nargs="+", metavar="SHAPE",
                        help="long: only these model shapes (small, base)")
    parser.add_argument("--batches", nargs="+", type=int, metavar="N",
                        help="long: only these batch sizes (1, 2, 4, 8)")
    if not alone:
        parser.add_argument("--max-load", type=float, default=1.0,
                            help="wait until the 1-minute load average is at most this "
                                 "(default: %(default)s)")
    parser.add_argument("--max-wait", type=float, default=0 if alone else 600,
                        help="seconds to wait for a quiet machine (before the run and before each "
                             "worker) before running anyway; 0: never wait (default: %(default)s)")
    return parser


def parse_options(parser, argv):
    """``(args, Options)`` from the command line; a bad count is a usage error naming it."""
    args = parser.parse_args(argv)
    for flag, value, least in (("--repeats", args.repeats, 1), ("--warmup", args.warmup, 0),
                               ("--rounds", args.rounds, 1), ("--limit", args.limit, 1)):
        if value is not None and value < least:
            parser.error(f"{flag} must be at least {least}; received: {flag} {value}")
    options = Options(warmup=args.warmup, repeats=args.repeats, rounds=args.rounds,
                      only=tuple(args.only or ()), peers=not args.no_peers,
                      corpus=tuple(args.corpus or ()), limit=args.limit, max_wait=args.max_wait,
                      quick=args.quick, shapes=tuple(args.shapes or ()),
                      batches=tuple(args.batches or ()))
    return args, options


def main(argv=None):
    """Runs the chosen suites; returns the exit status: 1 if a suite or a worker failed, else 0."""
    parser = build_parser()
    args, options = parse_options(parser, argv)
    # A suite is its module's name; the hyphen spelling (long-quality) is taken as well.
    suites = [name.replace("-", "_") for name in args.suites] or list(DEFAULT_SUITES)
    unknown = [name for name in suites if name not in ALL_SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(ALL_SUITES)}")
    settings = {key: value for key, value in dataclasses.asdict(options).items()
                if key != "earlier"}
    report = {"started": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": machine(), "options": settings}
    # The load average is checked once, before anything of ours runs (afterwards it also
    # counts our own workers); each worker then waits for idle cores (runner.run_worker).
    report["load_average_at_start"], report["load_wait_gave_up"] = wait_for_quiet(
        args.max_load, args.max_wait, stderr_log)
    report["suites"] = run_suites(suites, options, stderr_log)
    write_json(args.json, report)
    failed = [name for name, section in report["suites"].items()
              if "failed" in section or section.get("failed_workers")]
    if failed:
        stderr_log(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


def run_alone(suite, argv=None):
    """``python -m bench.<suite> [OPTIONS]``: one suite, printed as markdown.

    Returns:
        the suite's results (what ``--json`` writes).

    Raises:
        SystemExit: the suite was skipped or failed, or one of its workers failed.
    """
    args, options = parse_options(build_parser(suite), argv)
    section = run_suites([suite], options, stderr_log)[suite]
    for status in ("skipped", "failed"):
        if status in section:
            raise SystemExit(f"{suite}: {status}: {section[status]}")
    write_json(args.json, section["results"])
    if section.get("failed_workers"):
        raise SystemExit(f"{suite}: failed: {', '.join(section['failed_workers'])}")
    return section["results"]


def write_json(path, value):
    """Writes ``value`` as indented JSON to ``path`` (nothing when ``path`` is empty)."""
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, default=str)
    stderr_log(f"wrote {path}")
