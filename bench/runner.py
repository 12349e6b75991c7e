"""What every benchmark shares: the options, timing, worker processes, and running a suite.

A suite is a module ``bench/<name>.py`` with ``run(options, log) -> section`` (see
:mod:`bench`). Each implementation it measures runs in a process of its own
(``python -m bench.worker SUITE NAME``, :func:`run_worker`), so no library's threads, caches
or Keras version leak into another's figures. A worker that cannot run here (a peer that is
not installed) becomes a row marked *skipped*; one that crashes, a row marked *failed*.
"""

import dataclasses
import importlib
import json
import os
import platform
import statistics
import sys
import time
import traceback

from bench import worker
from bench.tables import format_table
from bench.worker import Skipped, WorkerError  # noqa: F401 (Skipped: suites raise it)

# The runner's process imports no suite's libraries (TensorFlow, kerasbert): every figure is
# taken in a child, and a child's peak memory (ru_maxrss) starts from its parent's.
DEFAULT_SUITES = ("gemm", "forward", "bf16", "build", "load", "tokenize", "train", "serving")
ALL_SUITES = DEFAULT_SUITES + ("generate", "ablation", "long", "long_quality", "lora", "fidelity",
                               "scores", "backends")

# bert4keras 0.11.5 needs Keras 2: it runs on tf-keras and never shares a process with Keras 3.
TF_KERAS_ENV = {"TF_KERAS": "1", "TF_USE_LEGACY_KERAS": "1"}
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"}


@dataclasses.dataclass(frozen=True)
class Options:
    """The settings every suite's ``run(options, log)`` reads; ``python -m bench --help``.

    Example::

        from bench import forward
        forward.run(Options(repeats=3, only=("kerasbert",), max_wait=0), print)
    """

    warmup: int = 3             # untimed calls before the timed ones
    repeats: int = 10           # timed calls per figure (three times as many for short calls)
    rounds: int | None = None   # passes over the implementations, in turn (None: the suite's own)
    only: tuple = ()            # implementations to run (empty: all of each suite's)
    peers: bool = True          # tokenize: also the pure-Python peers (bert4keras, transformers)
    corpus: tuple = ()          # tokenize: corpus files (empty: found, else synthetic)
    limit: int | None = None    # tokenize: only the first N lines
    max_wait: float = 600       # seconds a worker waits for idle cores (0: it does not wait)
    quick: bool = False         # long: a tiny model at short lengths (the protocol, in a minute)
    shapes: tuple = ()          # long: only these model shapes (empty: all)
    batches: tuple = ()         # long: only these batch sizes (empty: all)
    earlier: dict = dataclasses.field(default_factory=dict)  # sections already run, by suite

    @property
    def small_repeats(self):
        """Timed calls for a short call (batch x length <= 256), which varies more."""
        return 3 * self.repeats

    def timing(self):
        """The keyword arguments of a timing worker: warmup, repeats, small_repeats."""
        return {"warmup": self.warmup, "repeats": self.repeats,
                "small_repeats": self.small_repeats}


def load_average():
    """The 1-, 5- and 15-minute load averages (zeros where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return [0.0, 0.0, 0.0]


def wait_for_quiet(max_load, max_wait_s, log=print):
    """Waits until the 1-minute load average is at most ``max_load``.

    Timings taken while other processes share the cores are meaningless, so a run
    starts only on a quiet machine; after ``max_wait_s`` it goes on and says so.

    Returns:
        the load averages when the run started, and whether the wait gave up.
    """
    start = time.monotonic()
    while load_average()[0] > max_load:
        if time.monotonic() - start >= max_wait_s:
            log(f"load {load_average()[0]} is still above {max_load}: timings will be noisy")
            return load_average(), True
        log(f"load {load_average()[0]} > {max_load}: waiting 60 s for a quiet machine")
        time.sleep(60)
    return load_average(), False


def busy_fraction(seconds=2.0):
    """The share of all cores' time spent busy over the next ``seconds`` (None off Linux)."""
    def sample():
        with open("/proc/stat", encoding="ascii") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        return sum(values), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError):
        return None
    return 1.0 - (idle1 - idle0) / max(total1 - total0, 1)


def wait_for_idle(max_wait_s, max_busy=0.25, log=print):
    """Waits until other processes leave the cores (nearly) idle; returns the busy share.

    The load average lags by a minute and counts the worker that just ended; the busy
    share of the last two seconds does neither, so it is checked before each worker.
    With ``max_wait_s`` 0 nothing is checked and the share is None.
    """
    if max_wait_s <= 0:
        return None
    start = time.monotonic()
    busy = busy_fraction()
    while busy is not None and busy > max_busy and time.monotonic() - start < max_wait_s:
        log(f"cores {busy:.0%} busy: waiting for other jobs to finish")
        time.sleep(10)
        busy = busy_fraction()
    return None if busy is None else round(busy, 2)


def timed(fn, warmup=3, repeats=10):
    """Calls ``fn`` ``warmup`` times untimed, then ``repeats`` times timed.

    Returns:
        ``{"median_ms", "min_ms", "max_ms", "repeats"}``.
    """
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return {"median_ms": round(statistics.median(times), 2), "min_ms": round(min(times), 2),
            "max_ms": round(max(times), 2), "repeats": repeats}


def worker_env(tf_keras=False):
    """The environment changes of a child process: quiet TensorFlow on the CPU, and Keras 2
    (tf-keras) for bert4keras or else Keras 3, whatever this shell has set."""
    return {**QUIET_ENV, **(TF_KERAS_ENV if tf_keras else dict.fromkeys(TF_KERAS_ENV))}


def run_worker(suite, name, kwargs, options, log, tf_keras=False, timeout=900, backend=None):
    """Runs ``bench.<suite>``'s ``WORKERS[name](**kwargs)`` in a fresh interpreter (with
    ``KERAS_BACKEND=backend`` when one is given).

    Waits up to ``options.max_wait`` seconds for idle cores first.

    Returns:
        the worker's JSON result with ``busy_before`` and ``load_average``; ``{"skipped":
        reason}`` when it cannot run here, ``{"failed": reason}`` when it crashed.
    """
    busy = wait_for_idle(options.max_wait, log=log)
    load = load_average()
    try:
        result = worker.run_python(module="bench.worker", args=[suite, name, json.dumps(kwargs)],
                                   env={**worker_env(tf_keras),
                                        **({"KERAS_BACKEND": backend} if backend else {})},
                                   timeout=timeout)
    except WorkerError as error:
        for line in str(error).splitlines()[-12:]:
            log(f"{suite}: {name}: {line}")
        return {"failed": error.reason}
    return {**result, "busy_before": busy, "load_average": load}


def why_missing(result):
    """``"skipped: ..."`` or ``"failed: ..."`` for a worker result without figures, else None."""
    for key in ("skipped", "failed"):
        if key in result:
            return f"{key}: {result[key]}"
    return None


def require(result, what):
    """``result`` if it has figures; raises :class:`Skipped` or RuntimeError naming ``what``."""
    if "skipped" in result:
        raise Skipped(f"{what} skipped: {result['skipped']}")
    if "failed" in result:
        raise RuntimeError(f"{what} failed: {result['failed']}")
    return result


def selected(options, names, allowed=None):
    """The implementations a suite runs: ``names``, or those of ``options.only`` it has.

    Raises:
        Skipped: ``options.only`` names none of ``allowed`` (default ``names``).
    """
    if not options.only:
        return list(names)
    allowed = list(allowed or names)
    chosen = [name for name in options.only if name in allowed]
    if not chosen:
        raise Skipped(f"--only {' '.join(options.only)} names none of its implementations "
                      f"({', '.join(allowed)})")
    return chosen


def timing_row(name, result, shape):
    """A table row for one worker's result at one shape, and its timing (None if missing)."""
    missing = why_missing(result)
    if missing:
        return {"name": name, "label": missing}, None
    timing = result["timings"][shape]
    return {"name": name, "label": result["label"], "median_ms": timing["median_ms"],
            "min_ms": timing["min_ms"], "max_ms": timing["max_ms"]}, timing


def machine():
    """The facts a reader needs to compare figures: CPU, cores, library versions."""
    cpu, flags = platform.processor() or "unknown", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and cpu in ("unknown", "x86_64", ""):
                    cpu = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = line
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "avx512f": " avx512f" in flags,
        "avx512_bf16": " avx512_bf16" in flags,
        "amx": " amx_tile" in flags,
        "python": platform.python_version(),
    }


def run_suite(name, options, log):
    """Imports ``bench.<name>`` and returns the section its ``run(options, log)`` returns.

    A suite that raises :class:`Skipped` gives ``{"skipped": reason}``; one that raises
    anything else, ``{"failed": "Error: message"}`` (its traceback goes to ``log``); workers
    that crashed are listed under ``failed_workers``. One broken suite never costs the others.
    """
    started = time.monotonic()
    try:
        section = dict(importlib.import_module(f"bench.{name}").run(options, log))
    except Skipped as reason:
        section = {"skipped": str(reason)}
    except Exception as error:
        for line in traceback.format_exc().strip().splitlines():
            log(f"{name}: {line}")
        section = {"failed": f"{type(error).__name__}: {error}"}
    failed = sorted(key for key, result in section.get("results", {}).items()
                    if isinstance(result, dict) and "failed" in result)
    if failed:
        section["failed_workers"] = failed
    return {"suite": name, **section, "seconds": round(time.monotonic() - started, 1),
            "load_average_at_end": load_average()}


def run_suites(names, options, log, write=print):
    """Runs each suite in turn and writes its tables; returns the sections by suite.

    Each suite sees the sections before it as ``options.earlier`` (forward reads gemm's).
    """
    sections = {}
    for name in names:
        sections[name] = run_suite(name, dataclasses.replace(options, earlier=dict(sections)), log)
        print_section(sections[name], write)
    return sections


def print_section(section, write=print):
    """Writes a section's tables as markdown, or why it has none."""
    name = section["suite"]
    for status in ("skipped", "failed"):
        if status in section:
            write(f"\n## {name}: {status} ({section[status]})")
            return
    for table in section.get("tables", []):
        write(f"\n### {table['title']}\n")
        write(format_table(table["columns"], table["rows"]))
    for note in section.get("notes", []):
        write(f"\n{note}")
    if section.get("failed_workers"):
        write(f"\n{name}: failed: {', '.join(section['failed_workers'])} (the log says why)")


def stderr_log(message):
    """The log of ``python -m bench``: one line to stderr, marked ``[bench]``."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)
