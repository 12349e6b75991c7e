"""kerasbert's benchmark suite: ``python -m bench`` (or ``make bench``).

Benchmarks are not tests: nothing here asserts a timing. Each suite is a module
``bench/<name>.py``, listed in :data:`bench.runner.ALL_SUITES`, with

* ``run(options, log) -> section``, the only thing the runner calls: ``options`` is a
  :class:`bench.runner.Options` (repeats, rounds, max wait...), ``log`` a callable taking
  one line of progress. It returns ``{"results": {...}, "tables": [{"title", "columns",
  "rows"}], "notes": [...]}`` (notes optional); :func:`bench.runner.print_section` prints
  the tables with the one formatter, :mod:`bench.tables`, and the results go to the JSON
  report. It raises :class:`bench.runner.Skipped` when the whole suite cannot run here; any
  other exception marks the suite *failed* in the report, and ``python -m bench`` exits 1;
* ``WORKERS``: ``{name: function(**kwargs) -> dict}``, each run in a fresh process by
  ``python -m bench.worker <suite> <name> '<kwargs json>'`` (:func:`bench.runner.run_worker`);
  a worker that raises :class:`bench.runner.Skipped` or an ImportError (a peer not installed)
  becomes a row marked *skipped*, one that crashes a row marked *failed*.

Every child Python process that answers bench/ with JSON is started by
:func:`bench.worker.run_python`.
"""
