"""Text classification on the [CLS] token (the default task): ``options.py`` its flags, ``task.py``
its training, evaluation, prediction and exports.

The names of ``task.py`` are this package's too, imported on first use."""

from kerasbert.tasks import task_names

__getattr__ = task_names(__name__)
