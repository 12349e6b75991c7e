"""What every benchmark shares: quiet-machine check, timing, worker processes, tables.

Each implementation runs in a process of its own (``python -m bench.worker SUITE NAME``),
so no library's threads, caches or Keras version leak into another's figures. A
worker prints one JSON object as its last line; a worker that fails (a peer that is
not installed, say) becomes a row marked *skipped* with the reason, never a crash.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# bert4keras 0.11.5 needs Keras 2: it runs on tf-keras and never shares a process with Keras 3.
TF_KERAS_ENV = {"TF_KERAS": "1", "TF_USE_LEGACY_KERAS": "1"}
# How long a worker waits for other jobs to leave the cores; `--max-wait` sets it.
IDLE_WAIT_S = 300
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"}


class Skipped(Exception):
    """Raised by a worker whose implementation cannot run here (e.g. not installed)."""


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


def wait_for_idle(max_busy=0.25, max_wait_s=None, log=print):
    """Waits until other processes leave the cores (nearly) idle; returns the busy share.

    The load average lags by a minute and counts the worker that just ended; the
    busy share of the last two seconds does neither, so it is checked before each worker.
    """
    max_wait_s = IDLE_WAIT_S if max_wait_s is None else max_wait_s
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


def run_worker(suite, name, options, tf_keras=False, timeout=900):
    """Runs ``bench.<suite>``'s worker ``name`` in a fresh interpreter.

    Returns:
        the worker's JSON result, or ``{"skipped": reason}`` when it could not run.
    """
    env = dict(os.environ, **QUIET_ENV, **(TF_KERAS_ENV if tf_keras else {}))
    if not tf_keras:
        # A shell that set these for bert4keras must not turn Keras 3 workers into tf_keras.
        for key in TF_KERAS_ENV:
            env.pop(key, None)
    command = [sys.executable, "-m", "bench.worker", suite, name, json.dumps(options)]
    busy = wait_for_idle(log=lambda message: print(f"[bench] {message}", file=sys.stderr))
    load = load_average()
    try:
        result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True,
                                timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timed out after {timeout} s"}
    lines = result.stdout.strip().splitlines()
    if result.returncode or not lines:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"worker failed: {tail[:300]}"}
    return {**json.loads(lines[-1]), "busy_before": busy, "load_average": load}


def run_script(suite, timeout=900):
    """Runs ``python -m bench.<suite>`` as it is; its JSON last line, if any, is kept as data."""
    env = dict(os.environ, **QUIET_ENV)
    try:
        result = subprocess.run([sys.executable, "-m", f"bench.{suite}"], env=env, cwd=ROOT,
                                capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"suite": suite, "skipped": f"timed out after {timeout} s"}
    if result.returncode:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return {"suite": suite, "skipped": f"failed: {tail[:300]}"}
    section = {"suite": suite, "output": result.stdout.strip()}
    try:
        section["results"] = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        pass
    return section


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


def timing_row(name, result, shape):
    """A table row for one worker's result at one shape, and its timing (None if skipped)."""
    if "skipped" in result:
        return {"name": name, "label": "skipped: " + result["skipped"]}, None
    timing = result["timings"][shape]
    return {"name": name, "label": result["label"], "median_ms": timing["median_ms"],
            "min_ms": timing["min_ms"], "max_ms": timing["max_ms"]}, timing


def format_table(columns, rows):
    """A GitHub-markdown table; ``columns`` are ``(key, heading)`` pairs."""
    lines = ["| " + " | ".join(heading for _, heading in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(key)) for key, _ in columns) + " |")
    return "\n".join(lines)


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)
