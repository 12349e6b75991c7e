"""Using a trained model: fast prediction and generation.

Below both :mod:`kerasbert.tasks` (which trains and scores with these) and
:mod:`kerasbert.serving`: :mod:`.predictor` (one traced graph for every shape),
:mod:`.generation` (``generate``: decoding through a key/value cache) and :mod:`.decoding`
(bert4keras's ``AutoRegressiveDecoder``). What turns a task's outputs into answers is the
task's own (``kerasbert.tasks.<task>``).
"""
