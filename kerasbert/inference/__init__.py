"""Using a trained model: fast prediction, and what turns a model's outputs into answers.

Below both :mod:`kerasbert.tasks` (which trains and scores with these) and
:mod:`kerasbert.serving` (which writes them into exported graphs): :mod:`.predictor`
(one traced graph for every shape), :mod:`.entities` (entity chunks of tag sequences and
their scores), :mod:`.answer_spans` (windows and span search over start/end logits) and
:mod:`.span_qa` (the span head and :class:`~kerasbert.inference.span_qa.QuestionAnswerer`).
"""
