"""kerasbert's benchmark suite: ``python -m bench`` (or ``make bench``).

Benchmarks are not tests: nothing here asserts a timing. Each suite is a module
``bench/<name>.py`` with

* ``WORKERS``: ``{name: function(**options) -> dict}``, each run in a fresh process by
  ``python -m bench.worker <suite> <name> '<options json>'`` (:func:`bench.runner.run_worker`);
  a worker that raises :class:`bench.runner.Skipped` (a peer not installed) becomes a
  row marked *skipped*;
* ``run(options, log) -> section``: runs its workers and returns
  ``{"suite": name, "results": {...}, "tables": [{"title", "columns", "rows"}]}``,
  which :mod:`bench.__main__` prints as markdown and writes to JSON.

A suite listed in ``bench.__main__.DEFAULT_SUITES`` whose module is absent is reported
as skipped, so the runner works before every part of the project has its benchmark.
"""
