"""Text generation, source to target (UniLM, or T5 in ``t5.py``): ``options.py`` its flags,
``task.py`` its data, training and ``Run``, ``export.py`` its SavedModel.

The names of ``task.py`` are this package's too, imported on first use."""

from kerasbert.tasks import task_names

__getattr__ = task_names(__name__)
