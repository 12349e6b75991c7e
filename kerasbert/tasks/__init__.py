"""The tasks a run trains, one module each, named as ``--task`` names them.

Each module holds ``TASK``, a :class:`kerasbert.tasks.task.Task` (its data, head, loss, dev
score, printouts and ``Run``); its options are its own class, registered by name in
:data:`kerasbert.training.options.TASK_OPTIONS`. :func:`kerasbert.tasks.task.train` trains
any of them and :func:`open_run` opens a finished run by the task it saved. A further task
is one module here, its options class and one line in ``TASK_OPTIONS``.
"""

import importlib
import json
import os

from kerasbert.training.options import TASK_OPTIONS


def get_task(name):
    """The :class:`~kerasbert.tasks.task.Task` called ``name`` (a key of ``TASK_OPTIONS``).

    Raises:
        ValueError: an unknown task.
    """
    if name not in TASK_OPTIONS:
        raise ValueError(f"task {name!r}: must be one of {', '.join(TASK_OPTIONS)}")
    return importlib.import_module(f"{__name__}.{name}").TASK


def task_module(name):
    """The module of the task called ``name``."""
    return importlib.import_module(get_task(name).__module__)


def run_task(run_dir):
    """The task of the run in ``run_dir``, from its saved options (``classification`` for
    runs saved before tasks were recorded, or when the file cannot be read: the task's
    ``Run`` then names what is wrong)."""
    from kerasbert.training.rundir import TRAIN_OPTIONS_FILE

    try:
        with open(os.path.join(os.fspath(run_dir), TRAIN_OPTIONS_FILE), encoding="utf-8") as f:
            saved = json.load(f)
        task = saved.get("task") if isinstance(saved, dict) else None
    except (OSError, ValueError):
        task = None
    return get_task(task if task in TASK_OPTIONS else "classification")


def open_run(run_dir, accept_changed=False):
    """The finished run in ``run_dir``, opened by its task's ``Run`` class.

    Args:
        accept_changed: open it although one of its files changed since it finished.

    Raises:
        kerasbert.training.rundir.RunError: see the task's ``Run``.
        kerasbert.training.fingerprints.ChangedFile: a file of the run was replaced.
    """
    return run_task(run_dir).run_class(run_dir, accept_changed=accept_changed)
