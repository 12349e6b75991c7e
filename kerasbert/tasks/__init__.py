"""The tasks ``kerasbert train`` trains, one folder each, named as ``--task`` names them.

A task's folder holds all it knows: ``options.py`` (its options class, ``OPTIONS``: only
the flags it uses, its summary, files and shipped dataset), ``task.py`` (``TASK``, a
:class:`kerasbert.tasks.base.Task`: its data, head, loss, dev score and printouts, and its
``Run``: evaluate, predict, export) and the modules only it uses (readers, decoding of its
outputs, export). :func:`kerasbert.tasks.base.train` trains any of them, :func:`open_run`
opens a finished run by the task it saved, and the command line reads the flags, summaries
and formats of each from here: it names no task. A further task is a folder here and one
line in :data:`TASKS`.

Importing this package, or a task's options, loads no TensorFlow; ``kerasbert.tasks.ner``
gives the names of its ``task.py`` (``Run``, ``train``, ``NerOptions``, ...) on first use.
"""

import importlib
import json
import os
from collections.abc import Callable
from typing import Any

from kerasbert.training.options import OptionError

#: Each ``--task``, as its folder here is named; the first is the default.
TASKS = (
    "classification",
    "ner",
    "qa",
    "seq2seq",
    "similarity",
)


def _folder(name: str) -> str:
    if name not in TASKS:
        raise OptionError(f"invalid value {name!r} in --task: must be one of {', '.join(TASKS)}")
    return f"{__name__}.{name}"


# The options classes and tasks are Any here: their modules import this one.
def options_class(name: str) -> Any:
    """The options class of the task called ``name`` (its ``options.py``'s ``OPTIONS``).

    Raises:
        OptionError: an unknown task.
    """
    return importlib.import_module(f"{_folder(name)}.options").OPTIONS


def get_task(name: str) -> Any:
    """The :class:`~kerasbert.tasks.base.Task` called ``name`` (its ``task.py``'s ``TASK``).

    Raises:
        OptionError: an unknown task.
    """
    return importlib.import_module(f"{_folder(name)}.task").TASK


def task_names(task_module: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of a task's folder: its ``task.py``'s names, imported on first
    use, so that ``from kerasbert.tasks.ner import Run`` works while ``import
    kerasbert.tasks.ner.options`` stays free of TensorFlow."""

    def names(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(f"{task_module}.task"), name)

    return names


def run_task(run_dir: str | os.PathLike[str]) -> Any:
    """The task of the run in ``run_dir``, from its saved options (the default task for
    runs saved before tasks were recorded, or when the file cannot be read: the task's
    ``Run`` then names what is wrong)."""
    from kerasbert.training.rundir import TRAIN_OPTIONS_FILE

    try:
        with open(os.path.join(os.fspath(run_dir), TRAIN_OPTIONS_FILE), encoding="utf-8") as f:
            saved = json.load(f)
        task = saved.get("task") if isinstance(saved, dict) else None
    except (OSError, ValueError):
        task = None
    return get_task(task if task in TASKS else TASKS[0])


def open_run(run_dir: str | os.PathLike[str], accept_changed: bool = False) -> Any:
    """The finished run in ``run_dir``, opened by its task's ``Run`` class.

    Args:
        accept_changed: open it although one of its files changed since it finished.

    Raises:
        kerasbert.training.rundir.RunError: see the task's ``Run``.
        kerasbert.training.fingerprints.ChangedFile: a file of the run was replaced.
    """
    return run_task(run_dir).run_class(run_dir, accept_changed=accept_changed)
