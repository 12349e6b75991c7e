"""Classification metrics and pictures of a run.

Metrics come from scikit-learn and pictures from matplotlib; every file is written
atomically (:mod:`kerasbert.files`), so a killed run never leaves a half-written file.
"""

import csv

import numpy as np

from kerasbert.files import atomic_path, write_json  # noqa: F401  (re-exported)


def write_history_csv(path, history):
    """Writes Keras ``History.history`` (a dict of lists) as one row per epoch."""
    keys = list(history)
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["epoch"] + keys)
            for epoch in range(len(history[keys[0]]) if keys else 0):
                writer.writerow([epoch + 1] + [history[k][epoch] for k in keys])


def classification_metrics(labels, y_true, y_pred):
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


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Chinese label names need a CJK font where one is installed; others fall back silently.
    plt.rcParams["font.sans-serif"] = ["Noto Sans CJK SC", "WenQuanYi Zen Hei", "DejaVu Sans"]
    return plt


def plot_confusion_matrix(path, labels, matrix, title="Confusion matrix"):
    """Draws the confusion matrix (counts, rows = true label) to a PNG, atomically."""
    plt = _figure()
    matrix = np.asarray(matrix)
    size = max(4, 0.8 * len(labels) + 2)
    fig, ax = plt.subplots(figsize=(size, size))
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
    fig.tight_layout()
    _save(fig, path, plt)


def plot_training_curves(path, history, best_epoch=None):
    """Draws loss and accuracy per epoch (train and dev) to a PNG, atomically.

    ``best_epoch`` (1-based), the epoch whose model was kept, is marked on both panels.
    """
    plt = _figure()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric in zip(axes, ("loss", "accuracy")):
        for key, label in ((metric, "train"), (f"val_{metric}", "dev")):
            if key in history:
                epochs = range(1, len(history[key]) + 1)
                ax.plot(epochs, history[key], marker="o", label=label)
        if best_epoch:
            ax.axvline(best_epoch, color="grey", linestyle="--", linewidth=1,
                       label=f"kept (epoch {best_epoch})")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_title(metric)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    _save(fig, path, plt)


def _save(fig, path, plt):
    with atomic_path(path) as temporary:
        fig.savefig(temporary, dpi=100, format="png")
    plt.close(fig)
