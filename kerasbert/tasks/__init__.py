"""The tasks a run trains, one module each, named as ``--task`` names them
(:data:`kerasbert.training.options.TASKS`): ``classification``, ``ner``.

Each module has ``train(options, callbacks=(), verbose="auto")`` and a ``Run`` class that
opens a finished run directory for evaluate / predict / export; :func:`open_run` picks the
class from the run's saved options. Adding a task is a module here and its name there.
"""

import importlib
import json
import os

from kerasbert.training.options import TASKS


def task_module(task):
    """The module of ``task`` (one of :data:`kerasbert.training.options.TASKS`)."""
    if task not in TASKS:
        raise ValueError(f"task {task!r}: must be one of {', '.join(TASKS)}")
    return importlib.import_module(f"kerasbert.tasks.{task}")


def open_run(run_dir):
    """The finished run in ``run_dir``, opened by its task's ``Run`` class.

    Raises:
        kerasbert.training.rundir.RunError: see the task's ``Run``.
    """
    from kerasbert.tasks.runs import OPTIONS_FILE

    task = "classification"  # runs saved before tasks were recorded
    try:
        with open(os.path.join(os.fspath(run_dir), OPTIONS_FILE), encoding="utf-8") as f:
            saved = json.load(f)
        task = saved.get("task") or task if isinstance(saved, dict) else task
    except (OSError, ValueError):
        pass  # the task's Run names what is wrong with the directory
    return task_module(task if task in TASKS else "classification").Run(run_dir)
