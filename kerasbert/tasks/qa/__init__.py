"""Span question answering: ``options.py`` its flags, ``squad.py`` its files and scores,
``answer_spans.py`` windows and span search, ``span_qa.py`` the span head and
:class:`QuestionAnswerer`, ``task.py`` its training and ``Run``, ``export.py`` its SavedModel.

The names of ``task.py`` are this package's too, imported on first use."""

from kerasbert.tasks import task_names

__getattr__ = task_names(__name__)
