"""Sentence-pair similarity (text matching, LCQMC-style): a siamese BERT whose mean-pooled
vectors are compared by their cosine, trained with the CoSENT loss. ``options.py`` its
flags, ``data.py`` its files, ``task.py`` its model, loss, scores and ``Run``, ``export.py``
its SavedModel.

The names of ``task.py`` are this package's too, imported on first use."""

from kerasbert.tasks import task_names

__getattr__ = task_names(__name__)
