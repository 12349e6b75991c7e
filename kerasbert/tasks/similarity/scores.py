"""The loss and the scores of a similarity run: CoSENT, Spearman's correlation, and the
accuracy and F1 at a cosine threshold.

CoSENT (Su Jianlin, 2022) trains on the order of the cosines: for every two pairs of a batch
whose labels say that pair ``(i, j)`` is less similar than pair ``(k, l)``, it adds
``exp(λ (cos_ij − cos_kl))`` to a sum, and the loss is ``log(1 + sum)``, with λ = 20.
The labels may be 0/1 or graded scores (STS-B's 0 to 5): only their order counts. The dev
score is the Spearman correlation of the cosines with the labels (it needs no threshold);
where the dev labels are 0/1, the threshold that gives the best dev accuracy is then kept
for predict and evaluate.

Example:
    >>> import numpy as np
    >>> round(spearman(np.array([0.1, 0.9, 0.4]), np.array([0, 1, 1])), 4)
    0.866
    >>> best_threshold(np.array([0.1, 0.9, 0.4]), np.array([0, 1, 1]))
    0.25
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

#: CoSENT's λ: the cosines' differences are scaled by it before the exponential.
COSENT_SCALE = 20.0


def cosent_loss(labels: Any, cosines: Any, scale: float = COSENT_SCALE) -> Any:
    """The CoSENT loss of a batch: ``log(1 + Σ exp(scale · (cos_i − cos_j)))`` over the
    pairs ``i, j`` of the batch where ``label_i < label_j``.

    Args:
        labels: ``[batch]``, 0 / 1 (or any scores: only their order counts).
        cosines: ``[batch]``, the model's cosine of each pair.
        scale: λ.

    Returns:
        A scalar tensor.
    """
    from keras import ops

    labels = ops.reshape(ops.cast(labels, "float32"), (-1,))
    cosines = ops.reshape(ops.cast(cosines, "float32"), (-1,)) * scale
    # Differences of the pairs that should be ranked the other way round, and -1e12
    # elsewhere (exp gives 0); the 0 in front is the 1 of log(1 + sum).
    lower = ops.cast(labels[:, None] < labels[None, :], "float32")
    differences = cosines[:, None] - cosines[None, :] - (1.0 - lower) * 1e12
    return ops.logsumexp(ops.concatenate([ops.zeros((1,)), ops.reshape(differences, (-1,))]))


def average_ranks(values: np.ndarray | Sequence[float]) -> np.ndarray:
    """The ranks of ``values`` from 1, ties given the mean of their ranks (as Spearman's
    correlation ranks them).

    Example:
        >>> average_ranks(np.array([3.0, 1.0, 3.0])).tolist()
        [2.5, 1.0, 2.5]
    """
    values = np.asarray(values)
    ranks = np.empty(len(values), "float64")
    ranks[np.argsort(values, kind="stable")] = np.arange(1, len(values) + 1)
    _, group, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=ranks) / counts)[group]


def spearman(cosines: np.ndarray | Sequence[float],
             labels: np.ndarray | Sequence[float]) -> float | None:
    """Spearman's rank correlation of ``cosines`` with ``labels``; None when either is
    constant (it is undefined there)."""
    x, y = average_ranks(cosines), average_ranks(np.asarray(labels, "float64"))
    x, y = x - x.mean(), y - y.mean()
    norm = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / norm) if norm > 0 else None


def best_threshold(cosines: np.ndarray | Sequence[float],
                   labels: np.ndarray | Sequence[float]) -> float:
    """The cosine threshold with the best accuracy on ``labels`` (a pair is 1 when its
    cosine is at least the threshold): the middle of the gap between two cosines, the
    lowest such gap among equally good ones."""
    cosines = np.asarray(cosines, "float64")
    order = np.argsort(cosines, kind="stable")
    sorted_cosines, ones = cosines[order], np.asarray(labels, "int64")[order]
    # Cut k: the k lowest cosines are called 0, the others 1.
    zeros_below = np.concatenate([[0], np.cumsum(1 - ones)])
    ones_above = ones.sum() - np.concatenate([[0], np.cumsum(ones)])
    correct = zeros_below + ones_above
    n = len(cosines)
    cuts = [k for k in range(n + 1) if k in (0, n) or sorted_cosines[k - 1] < sorted_cosines[k]]
    k = max(cuts, key=lambda cut: (correct[cut], -cut))
    if k == 0:
        return float(sorted_cosines[0] - 1e-6)
    if k == n:
        return float(sorted_cosines[-1] + 1e-6)
    return float((sorted_cosines[k - 1] + sorted_cosines[k]) / 2)


def pair_scores(cosines: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[float],
                threshold: float | None) -> dict[str, Any]:
    """``{"pairs", "spearman", "threshold", "accuracy", "precision", "recall", "f1"}`` of
    cosines against 0/1 labels, a pair called 1 at a cosine of at least ``threshold`` (F1,
    precision and recall of the label 1); ``{"pairs", "spearman", "threshold"}`` alone
    where the labels are graded scores or ``threshold`` is None.

    Example:
        >>> pair_scores([0.9, 0.2, 0.5], [3.5, 0.0, 1.2], None)
        {'pairs': 3, 'spearman': 1.0, 'threshold': None}
    """
    labels = np.asarray(labels, "float64")
    if threshold is None or not set(labels.tolist()) <= {0.0, 1.0}:
        return {"pairs": int(len(labels)), "spearman": spearman(cosines, labels),
                "threshold": None if threshold is None else float(threshold)}
    labels = labels.astype("int64")
    called = (np.asarray(cosines) >= threshold).astype("int64")
    hits = int((called & labels).sum())
    precision = hits / called.sum() if called.sum() else 0.0
    recall = hits / labels.sum() if labels.sum() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"pairs": int(len(labels)), "spearman": spearman(cosines, labels),
            "threshold": float(threshold), "accuracy": float((called == labels).mean()),
            "precision": float(precision), "recall": float(recall), "f1": float(f1)}
