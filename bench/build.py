"""Time and peak memory to build Chinese BERT-base: kerasbert next to bert4keras.

Each library builds ``build_transformer_model(config_path)`` in a fresh process of
its own, so neither pays for the other's imports. Time counts the build call alone
(imports done before); peak memory is the process's peak resident set during the
build, less what it held after the imports.
"""

import resource
import time

from bench.peers import CHINESE_BASE
from bench.runner import Skipped, run_worker, why_missing


def _peak_rss_mb():
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb():
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return _peak_rss_mb()
    return pages * resource.getpagesize() / 2**20


def measure(library):
    """Worker: imports ``library``, then times one ``build_transformer_model`` call."""
    if library == "kerasbert":
        import keras

        from kerasbert import build_transformer_model

        version = f"kerasbert, keras {keras.__version__}"
    else:
        import os

        if os.environ.get("TF_KERAS") != "1":
            raise Skipped("bert4keras must run with TF_KERAS=1 TF_USE_LEGACY_KERAS=1")
        import bert4keras
        from bert4keras.models import build_transformer_model

        version = f"bert4keras {bert4keras.__version__}, tf_keras"
    before = _current_rss_mb()
    start = time.perf_counter()
    model = build_transformer_model(CHINESE_BASE)
    seconds = time.perf_counter() - start
    return {"label": version, "seconds": round(seconds, 2),
            "peak_mb": round(_peak_rss_mb() - before, 1),
            "params": int(model.count_params())}


WORKERS = {"kerasbert": lambda: measure("kerasbert"), "bert4keras": lambda: measure("bert4keras")}


def run(options, log):
    """Builds with each library in its own process; returns the section (``options``: max_wait)."""
    results = {}
    for library in WORKERS:
        log(f"build: {library}")
        results[library] = run_worker("build", library, {}, options, log,
                                      tf_keras=library == "bert4keras")
    ours, theirs = results["kerasbert"], results["bert4keras"]
    rows = []
    for library, result in results.items():
        if why_missing(result):
            rows.append({"library": library, "label": why_missing(result)})
            continue
        rows.append({"library": library, "seconds": result["seconds"],
                     "peak_mb": result["peak_mb"], "params": f"{result['params']:,}",
                     "label": result["label"]})
    if not why_missing(ours) and not why_missing(theirs):
        rows.append({"library": "kerasbert / bert4keras",
                     "seconds": round(ours["seconds"] / theirs["seconds"], 2),
                     "peak_mb": round(ours["peak_mb"] / theirs["peak_mb"], 2)})
    columns = [("library", "library"), ("seconds", "build s"), ("peak_mb", "peak MiB"),
               ("params", "parameters"), ("label", "version")]
    table = {"title": "Building Chinese BERT-base (random weights)", "columns": columns,
             "rows": rows}
    return {"results": results, "tables": [table]}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("build")
