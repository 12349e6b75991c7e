"""A classification run's metrics (scikit-learn) and its confusion matrix (matplotlib, with
the fonts and atomic files of :mod:`kerasbert.training.reports`)."""

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kerasbert.training.reports import figure, save, style

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def classification_metrics(labels: Sequence[str], y_true: np.ndarray | Sequence[int],
                           y_pred: np.ndarray | Sequence[int]) -> dict[str, Any]:
    """Accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix."""
    from sklearn import metrics

    indices = list(range(len(labels)))
    precision, recall, f1, support = metrics.precision_recall_fscore_support(
        y_true, y_pred, labels=indices, zero_division=0)
    return {
        "examples": int(len(y_true)),
        "accuracy": float(metrics.accuracy_score(y_true, y_pred)),
        "macro_f1": float(metrics.f1_score(y_true, y_pred, labels=indices, average="macro",
                                           zero_division=0)),
        "per_class": {
            label: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for label, p, r, f, s in zip(labels, precision, recall, f1, support)
        },
        "confusion_matrix": metrics.confusion_matrix(y_true, y_pred, labels=indices).tolist(),
    }


def plot_confusion_matrix(path: str | os.PathLike[str], labels: Sequence[str],
                          matrix: np.ndarray | Sequence[Sequence[int]],
                          title: str = "Confusion matrix") -> "Figure":
    """Draws the confusion matrix (counts, rows = true label) to a PNG, atomically.

    Label names may be Chinese (see :func:`kerasbert.training.reports.font_family`).

    Returns:
        the matplotlib ``Figure`` that was saved.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> figure = plot_confusion_matrix(os.path.join(folder, "confusion_matrix.png"),
        ...                                ["差评", "好评"], [[80, 9], [12, 73]])
        >>> os.listdir(folder)
        ['confusion_matrix.png']
    """
    matrix = np.asarray(matrix)
    size = max(4, 0.8 * len(labels) + 2)
    with style():
        fig = figure((size, size))
        ax = fig.subplots()
        ax.imshow(matrix, cmap="Blues")
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
        ax.set_yticks(range(len(labels)), labels)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        ax.set_title(title)
        threshold = matrix.max() / 2 if matrix.size else 0
        for (i, j), count in np.ndenumerate(matrix):
            ax.text(j, i, str(count), ha="center", va="center",
                    color="white" if count > threshold else "black")
        save(fig, path)
    return fig
