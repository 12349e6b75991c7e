"""bert4keras's ``AutoRegressiveDecoder``: beam search and random sampling over a
``predict`` a subclass writes, running the whole sequence through the model at each step.

:mod:`kerasbert.snippets` exports it under bert4keras's name; :func:`kerasbert.generate`
decodes kerasbert's language models through a key/value cache instead, and runs this loop
as its reference (``use_cache=False`` with beams).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only
    import keras


def _check(where: str, value: Any, low: float, high: float | None = None, whole: bool = True,
           allow_none: bool = False) -> Any:
    """``value`` when it is a number (a whole one if ``whole``) from ``low`` up to
    ``high`` (included); else a ValueError naming ``where``, the value and the range."""
    if value is None and allow_none:
        return value
    kinds = (int, np.integer) if whole else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds) or not (
            value >= low if whole else value > low) or (high is not None and value > high):
        if whole:
            span = f"a whole number from {low}" + ("" if high is None else f" to {high}")
        else:
            span = f"a number above {low}" if high is None else f"a number in ({low}, {high}]"
        raise ValueError(f"{where}={value!r}: must be {span}")
    return value


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numpy softmax along ``axis``."""
    x = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return x / x.sum(axis=axis, keepdims=True)


class AutoRegressiveDecoder:
    """Beam search and random sampling over a ``predict`` you write, as in bert4keras.

    Subclass it and write ``predict(self, inputs, output_ids, states)`` decorated with
    ``@AutoRegressiveDecoder.wraps(default_rtype="probas")`` (or ``"logits"``): it returns
    the next token's probabilities (or logits) for each row of ``output_ids``, and with
    ``use_states=True`` a pair ``(scores, states)``.

    Args:
        start_id: the id every output starts with (None: none). end_id: the id that ends
            an output, or a list of ids any of which ends it (kerasbert's addition; None:
            outputs run to ``maxlen``). maxlen: the most steps. minlen: the fewest ids
            before an end counts.

    Example:
        >>> class Count(AutoRegressiveDecoder):
        ...     @AutoRegressiveDecoder.wraps(default_rtype="logits")
        ...     def predict(self, inputs, output_ids, states):
        ...         return np.eye(4)[np.minimum(output_ids[:, -1] + 1, 3)] * 10
        >>> Count(start_id=0, end_id=3, maxlen=8).beam_search([[0]], topk=2).tolist()
        [0, 1, 2, 3]
    """

    def __init__(self, start_id: int | None, end_id: int | Sequence[int] | None, maxlen: int,
                 minlen: int = 1) -> None:
        self.start_id, self.end_id = start_id, end_id
        self.maxlen, self.minlen = maxlen, minlen
        self.models: dict[keras.Model, keras.Model] = {}
        self.first_output_ids = (np.empty((1, 0), dtype=int) if start_id is None
                                 else np.array([[start_id]]))

    @staticmethod
    def wraps(default_rtype: str = "probas", use_states: bool = False,
              ) -> Callable[[Callable[..., Any]], Callable[..., tuple[np.ndarray, Any]]]:
        """Decorator of ``predict``: adds ``temperature`` and ``rtype`` (``"probas"`` or
        ``"logits"``, the latter giving log-probabilities) and the states convention."""
        def decorator(predict: Callable[..., Any]) -> Callable[..., tuple[np.ndarray, Any]]:
            def wrapper(self: AutoRegressiveDecoder, inputs: Any, output_ids: np.ndarray,
                        states: Any, temperature: float = 1,
                        rtype: str = default_rtype) -> tuple[np.ndarray, Any]:
                _check("temperature", temperature, 0, whole=False)
                if rtype not in ("probas", "logits"):
                    raise ValueError(f"rtype must be 'probas' or 'logits', got rtype={rtype!r}")
                scores = predict(self, inputs, output_ids, states)
                scores, states = scores if use_states else (scores, None)
                if default_rtype == "logits":
                    scores = softmax(scores / temperature)
                elif temperature != 1:
                    scores = np.power(scores, 1.0 / temperature)
                    scores = scores / scores.sum(axis=-1, keepdims=True)
                return (scores if rtype == "probas" else np.log(scores + 1e-12)), states
            return wrapper
        return decorator

    def last_token(self, model: keras.Model) -> keras.Model:
        """``model`` with each output cut to its last position, made once per model."""
        if model not in self.models:
            import keras

            outputs = [output[:, -1] for output in model.outputs]
            inputs = model.inputs
            self.models[model] = keras.Model(inputs if len(inputs) > 1 else inputs[0],
                                             outputs if len(outputs) > 1 else outputs[0])
        return self.models[model]

    def predict(self, inputs: Any, output_ids: np.ndarray, states: Any = None) -> Any:
        """The next token's scores for each row of ``output_ids``: yours to write."""
        raise NotImplementedError("an AutoRegressiveDecoder subclass writes predict(self, "
                                  "inputs, output_ids, states), decorated with wraps()")

    def _ended(self, output_ids: np.ndarray, min_ends: int) -> np.ndarray:
        """Per row: whether it ends with an end id, having at least ``min_ends`` of them."""
        end_ids: list[int] | np.ndarray = [] if self.end_id is None else np.ravel(self.end_id)
        ends = np.isin(output_ids, end_ids).sum(axis=1)
        return np.isin(output_ids[:, -1], end_ids) & (ends >= min_ends)

    def beam_search(self, inputs: Sequence[Any], topk: int, states: Any = None,
                    temperature: float = 1, min_ends: int = 1) -> np.ndarray:
        """The highest-scoring output of a beam of ``topk``, as an id array.

        Raises:
            ValueError: ``topk`` not a whole number from 1 to the vocabulary's size,
                ``temperature`` not above 0, ``min_ends`` below 1.
        """
        _check("topk", topk, 1)
        _check("temperature", temperature, 0, whole=False)
        _check("min_ends", min_ends, 1)
        inputs = [np.array([x]) for x in inputs]
        output_ids, output_scores = self.first_output_ids, np.zeros(1)
        for step in range(self.maxlen):
            # The subclass's predict, as wraps() makes it: it also takes temperature and rtype.
            scores, states = self.predict(  # type: ignore[call-arg]
                inputs, output_ids, states, temperature, "logits")
            if step == 0:
                _check("topk", topk, 1, scores.shape[1])  # the vocabulary's size
                inputs = [np.repeat(x, topk, axis=0) for x in inputs]
            scores = output_scores[:, None] + scores
            kept = scores.argpartition(-topk, axis=None)[-topk:]
            rows, ids = np.divmod(kept, scores.shape[1])
            output_ids = np.concatenate([output_ids[rows], ids[:, None]], axis=1)
            output_scores = scores.reshape(-1)[kept]
            if output_ids.shape[1] < self.minlen:
                continue
            ended = self._ended(output_ids, min_ends)
            best = output_scores.argmax()
            if ended[best]:
                return output_ids[best]
            if ended.any():  # finished beams leave; the beam narrows
                going = ~ended
                inputs = [x[going] for x in inputs]
                output_ids, output_scores = output_ids[going], output_scores[going]
                topk = going.sum()
        return output_ids[output_scores.argmax()]

    def random_sample(self, inputs: Sequence[Any], n: int, topk: int | None = None,
                      topp: float | None = None, states: Any = None, temperature: float = 1,
                      min_ends: int = 1) -> list[np.ndarray]:
        """``n`` outputs, each token drawn from the predicted distribution (cut to the
        ``topk`` likeliest tokens, and to the likeliest whose probabilities reach ``topp``).

        Draws from ``np.random`` as bert4keras does, so a seed gives bert4keras's outputs.
        A ``topp`` of 1 or more keeps every token, as in bert4keras (the probabilities
        never sum past it).

        Returns:
            a list of ``n`` id arrays, finished ones first.

        Raises:
            ValueError: ``n`` below 1, ``topk`` not from 1 to the vocabulary's size,
                ``topp`` not above 0, ``temperature`` not above 0, ``min_ends`` below 1.
        """
        _check("n", n, 1)
        _check("topk", topk, 1, allow_none=True)
        _check("topp", topp, 0, whole=False, allow_none=True)
        _check("temperature", temperature, 0, whole=False)
        _check("min_ends", min_ends, 1)
        inputs = [np.array([x]) for x in inputs]
        output_ids, results = self.first_output_ids, []
        for step in range(self.maxlen):
            probas, states = self.predict(  # type: ignore[call-arg]  # as in beam_search
                inputs, output_ids, states, temperature, "probas")
            probas = probas / probas.sum(axis=1, keepdims=True)
            if step == 0:
                _check("topk", topk, 1, probas.shape[1], allow_none=True)
                probas = np.repeat(probas, n, axis=0)
                inputs = [np.repeat(x, n, axis=0) for x in inputs]
                output_ids = np.repeat(output_ids, n, axis=0)
            candidates = np.broadcast_to(np.arange(probas.shape[1]), probas.shape)
            if topk is not None:
                candidates = probas.argpartition(-topk, axis=1)[:, -topk:]
                probas = np.take_along_axis(probas, candidates, axis=1)
                probas = probas / probas.sum(axis=1, keepdims=True)
            if topp is not None:
                order = probas.argsort(axis=1)[:, ::-1]
                candidates = np.take_along_axis(candidates, order, axis=1)
                probas = np.take_along_axis(probas, order, axis=1)
                # A token goes once the likelier tokens before it already reach topp.
                reached = np.cumsum(probas, axis=1) >= topp
                probas[:, 1:] = np.where(reached[:, :-1], 0, probas[:, 1:])
                probas = probas / probas.sum(axis=1, keepdims=True)
            picks = _draw(probas)
            output_ids = np.concatenate(
                [output_ids, np.take_along_axis(candidates, picks[:, None], axis=1)], axis=1)
            if output_ids.shape[1] < self.minlen:
                continue
            ended = self._ended(output_ids, min_ends)
            if ended.any():
                results.extend(output_ids[ended])
                inputs = [x[~ended] for x in inputs]
                output_ids = output_ids[~ended]
                if len(output_ids) == 0:
                    break
        results.extend(output_ids)
        return results


def _draw(probas: np.ndarray) -> np.ndarray:
    """One index per row drawn from its probabilities, consuming ``np.random`` exactly as
    ``np.random.choice(len(p), p=p)`` row after row does (one uniform each)."""
    cdf = np.cumsum(probas.astype(np.float64), axis=1)
    cdf /= cdf[:, -1:]
    uniform = np.random.random_sample(len(probas))
    return (cdf <= uniform[:, None]).sum(axis=1)
