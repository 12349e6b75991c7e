"""Rows to a length: the one padding helper of the package, and the one truncation rule of
a pair of texts.

Every row of ids the library builds (a tokenizer's pairs, a task's training arrays, the
prompts of ``generate``, a pretraining corpus) is padded by :func:`sequence_padding`, which
is bert4keras's (``kerasbert.snippets`` gives it under that module's name), with a
``dtype``. Every pair of texts cut to ``maxlen`` is cut by :func:`longest_first`: the
Python tokenizer's and the exported graph's (:mod:`kerasbert.serving.graph_text`) alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike


def longest_first(a: Any, b: Any, budget: Any, xp: ModuleType = np) -> tuple[Any, Any]:
    """The lengths ``(a, b)`` of two texts cut to ``a + b <= budget`` as bert4keras cuts
    them: one token at a time from the longer text, from the first on a tie (Google's
    ``_truncate_seq_pair`` takes ties from the second text).

    Args:
        a, b: the texts' token counts (ints, or arrays of them).
        budget: the tokens both may hold together.
        xp: the array functions (``where``, ``minimum``...): NumPy's, or in a graph
            ``tf.experimental.numpy`` on tensors of lengths.

    Example:
        >>> [int(n) for n in longest_first(10, 3, 8)], [int(n) for n in longest_first(5, 5, 7)]
        ([5, 3], [3, 4])
    """
    excess = xp.maximum(a + b - budget, 0)
    cut = xp.minimum(excess, xp.abs(a - b))
    longer = a >= b
    a, b = xp.where(longer, a - cut, a), xp.where(longer, b, b - cut)
    excess = excess - cut
    return a - (excess + 1) // 2, b - excess // 2


def sequence_padding(inputs: Sequence[ArrayLike], length: int | Sequence[int] | None = None,
                     value: float = 0, seq_dims: int = 1, mode: str = "post",
                     dtype: DTypeLike | None = None) -> np.ndarray:
    """Pads (and cuts) sequences to one length and stacks them into an array.

    Args:
        inputs: sequences (lists or arrays) whose first ``seq_dims`` axes vary.
        length: the length of each padded axis (an int, or one per axis); None: the longest.
            Longer sequences lose their end.
        value: the padding value. seq_dims: how many leading axes to pad.
        mode: ``"post"`` pads after the values, ``"pre"`` before them.
        dtype: of the array (None: the sequences' own, as bert4keras; the library's rows of
            ids ask for int32).

    Raises:
        ValueError: another ``mode``, no sequences, or sequences whose axes after the
            first ``seq_dims`` differ (they are not padded).

    Example:
        >>> sequence_padding([[1, 2, 3], [4]], length=2, mode="pre")
        array([[1, 2],
               [0, 4]])
    """
    if mode not in ("post", "pre"):
        raise ValueError(f'"mode" argument must be "post" or "pre", got mode={mode!r}')
    arrays = [np.asarray(x) for x in inputs]
    if not arrays:
        raise ValueError("sequence_padding needs at least one sequence, got none")
    if isinstance(seq_dims, bool) or not isinstance(seq_dims, (int, np.integer)) or \
            seq_dims < 0:
        raise ValueError(f"seq_dims ({seq_dims!r}): must be a whole number of axes, 0 or more")
    for index, a in enumerate(arrays):
        if a.ndim < seq_dims or a.shape[seq_dims:] != arrays[0].shape[seq_dims:]:
            raise ValueError(
                f"inputs[{index}]: shape {a.shape}, inputs[0]: {arrays[0].shape}; with "
                f"seq_dims={seq_dims} the axes from {seq_dims} on are not padded and must "
                "be equal")
    if length is None:
        length = np.max([a.shape[:seq_dims] for a in arrays], axis=0)
    elif np.ndim(length) == 0:
        length = [length] * seq_dims  # type: ignore[list-item]  # an int here
    length = [int(n) for n in length[:seq_dims]]  # type: ignore[index]  # a sequence here
    if dtype is None:
        dtype = np.result_type(*{a.dtype for a in arrays})
    out = np.full((len(arrays), *length, *arrays[0].shape[seq_dims:]), value, dtype=dtype)
    for row, a in zip(out, arrays):
        a = a[tuple(slice(n) for n in length)]
        row[tuple(slice(n - m, n) if mode == "pre" else slice(m)
                  for n, m in zip(length, a.shape))] = a
    return out
