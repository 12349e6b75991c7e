"""Runs peer libraries as oracles in their own interpreter.

bert4keras 0.11.5 needs Keras 2 (``tf-keras``) and must never share a process with Keras 3.
Both helpers go through :func:`bench.worker.run_python`, the one "fresh interpreter, JSON on
its last line" helper of the tests and the benchmarks.
"""

from bench.runner import worker_env
from bench.worker import run_python as run_worker_python


def run_bert4keras(script, timeout=600):
    """Runs ``script`` under bert4keras (tf_keras) and returns the JSON it prints last.

    The script sees ``from bert4keras...`` working and prints one JSON line at its end.

    Raises:
        bench.worker.WorkerError (a RuntimeError): the script failed; with its stderr tail.
    """
    return run_worker_python(script, env=worker_env(tf_keras=True), timeout=timeout)


def run_python(script, timeout=600, args=(), stdin=None, cwd=None, **env_overrides):
    """Runs ``script`` in a fresh Keras 3 interpreter (from the repository root unless
    ``cwd`` is given) and returns the JSON it prints last."""
    options = {"cwd": cwd} if cwd is not None else {}
    return run_worker_python(script, args=args, stdin=stdin, timeout=timeout,
                             env={"TF_CPP_MIN_LOG_LEVEL": "3", **env_overrides}, **options)
