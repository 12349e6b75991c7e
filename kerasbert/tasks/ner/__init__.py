"""Named-entity recognition (BERT + CRF): ``options.py`` its flags, ``data.py`` its files,
``entities.py`` entity chunks and scores, ``task.py`` its training and ``Run``, ``export.py``
its SavedModel.

The names of ``task.py`` are this package's too, imported on first use."""

from kerasbert.tasks import task_names

__getattr__ = task_names(__name__)
