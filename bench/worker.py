"""Python in a fresh interpreter that answers with one JSON line: the one such helper of bench/.

:func:`run_python` runs a snippet or a module and returns the JSON value of the last line it
prints. ``python -m bench.worker SUITE NAME OPTIONS_JSON`` is the module every suite's workers
run as: it calls ``WORKERS[NAME](**options)`` of ``bench.<SUITE>`` and prints the result as
that line; a :class:`Skipped` or a missing import becomes ``{"skipped": reason}``.
"""

import importlib
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STDERR_TAIL = 3000  # characters of a failed child's stderr kept in the error


class WorkerError(RuntimeError):
    """A Python child that exited with an error, timed out, or printed no JSON last line.

    ``reason`` is one line for a table cell; the message adds the tail of the child's stderr.
    """

    def __init__(self, reason, stderr=""):
        if isinstance(stderr, bytes):
            stderr = stderr.decode("utf-8", "replace")
        tail = (stderr or "").strip()[-STDERR_TAIL:]
        super().__init__(reason + (f"\n{tail}" if tail else ""))
        self.reason = reason


class Skipped(Exception):
    """Raised where an implementation, or a whole suite, cannot run here (e.g. not installed)."""


def run_python(code=None, module=None, args=(), env=None, timeout=900, cwd=ROOT, stdin=None):
    """Runs ``code`` (``python -c``) or ``module`` (``python -m``) in a fresh interpreter.

    Args:
        code: Python source; indented source (a triple-quoted block) is dedented first.
        module: a module to run instead of ``code``, e.g. ``"bench.worker"``.
        args: the child's command-line arguments (``sys.argv[1:]``).
        env: variables set on top of this process's environment; a ``None`` value removes one.
        timeout: seconds before the child is killed.
        cwd: the child's working directory (default: the repository root, so ``bench`` and
            ``kerasbert`` import from this checkout).
        stdin: text written to the child's standard input.

    Returns:
        the JSON value of the last line the child printed to stdout.

    Raises:
        ValueError: neither or both of ``code`` and ``module`` were given.
        WorkerError: the child failed, timed out, or its last line is not JSON; the message
            ends with the last lines of its stderr.

    Example::

        run_python("import json, sys; print(json.dumps(sys.argv[1:]))", args=["a"])  # ["a"]
    """
    if (code is None) == (module is None):
        raise ValueError(f"run_python takes code or module, one of them; received: code={code!r}, "
                         f"module={module!r}")
    command = ([sys.executable, "-c", textwrap.dedent(code)] if module is None
               else [sys.executable, "-m", module])
    command += [str(arg) for arg in args]
    what = f"python -m {module}" if module else "python -c <snippet>"
    environment = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = str(value)
    try:
        done = subprocess.run(command, env=environment, cwd=cwd, input=stdin, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        raise WorkerError(f"{what} timed out after {timeout} s", error.stderr) from None
    if done.returncode:
        lines = done.stderr.strip().splitlines() or ["no output on stderr"]
        raise WorkerError(f"{what} exited with status {done.returncode}: {lines[-1][:300]}",
                          done.stderr)
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        last = repr(lines[-1][:200]) if lines else "nothing"
        raise WorkerError(f"{what} printed {last} last, not a JSON line", done.stderr) from None


def main(argv):
    suite, name = argv[0], argv[1]
    options = json.loads(argv[2]) if len(argv) > 2 else {}
    module = importlib.import_module(f"bench.{suite}")
    # Run as ``python -m bench.worker``, this file is ``__main__``; the suites raise the
    # Skipped of the module ``bench.worker``, a class of its own.
    from bench.worker import Skipped as skipped_by_suites

    try:
        result = module.WORKERS[name](**options)
    except (skipped_by_suites, ImportError) as error:
        result = {"skipped": str(error) or type(error).__name__}
    sys.stdout.flush()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main(sys.argv[1:])
