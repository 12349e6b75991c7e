"""Classification metrics and pictures of a run.

Metrics come from scikit-learn and pictures from matplotlib (``Figure`` objects, not pyplot,
and our fonts set per picture, so the user's own plots and rcParams are left as they are);
Chinese label names are drawn with Noto Sans CJK SC from mplfonts. Every file is written
atomically (:mod:`kerasbert.files`), so a killed run never leaves a half-written file.
"""

import contextlib
import csv
import functools
import importlib.resources
import os

import numpy as np

from kerasbert.files import atomic_path


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


# Noto Sans CJK SC, shipped by mplfonts (SIL Open Font License).
CJK_FONT = ("mplfonts", "fonts/NotoSansCJKsc-Regular.otf")


@functools.cache
def font_family():
    """The font fallback list every picture uses: DejaVu Sans, then Noto Sans CJK SC.

    Matplotlib draws each character with the first font of the list that has it, so Latin
    text keeps matplotlib's default look and Chinese label names are drawn, not shown as empty
    boxes. The first call registers mplfonts' Noto Sans CJK SC with matplotlib's font manager
    (which adds a font and changes no rcParams).

    Example:
        >>> font_family()
        ('DejaVu Sans', 'Noto Sans CJK SC')
    """
    from matplotlib import font_manager

    package, name = CJK_FONT
    path = os.fspath(importlib.resources.files(package).joinpath(name))
    font_manager.fontManager.addfont(path)
    return ("DejaVu Sans", font_manager.FontProperties(fname=path).get_name())


@contextlib.contextmanager
def _style():
    """Our fonts for what is drawn inside, without touching the user's own rcParams."""
    import matplotlib

    with matplotlib.rc_context({"font.family": list(font_family())}):
        yield


def _figure(figsize):
    # A Figure with its own Agg canvas, not pyplot's: no global backend or figure list.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize)
    FigureCanvasAgg(figure)
    return figure


def plot_confusion_matrix(path, labels, matrix, title="Confusion matrix"):
    """Draws the confusion matrix (counts, rows = true label) to a PNG, atomically.

    Label names may be Chinese (see :func:`font_family`).

    Returns:
        the matplotlib ``Figure`` that was saved.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> figure = plot_confusion_matrix(os.path.join(folder, "confusion_matrix.png"),
        ...                                ["差评", "好评"], [[80, 9], [12, 73]])
        >>> os.listdir(folder)
        ['confusion_matrix.png']
    """
    matrix = np.asarray(matrix)
    size = max(4, 0.8 * len(labels) + 2)
    with _style():
        fig = _figure((size, size))
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
        _save(fig, path)
    return fig


def plot_training_curves(path, history, best_epoch=None):
    """Draws loss and accuracy per epoch (train and dev) to a PNG, atomically.

    ``best_epoch`` (1-based), the epoch whose model was kept, is marked on both panels.

    Returns:
        the matplotlib ``Figure`` that was saved.
    """
    from matplotlib.ticker import MaxNLocator

    with _style():
        fig = _figure((10, 4))
        for ax, metric in zip(fig.subplots(1, 2), ("loss", "accuracy")):
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
        _save(fig, path)
    return fig


def _save(fig, path):
    # Laid out and drawn inside _style(), so every text (ticks are made late) gets our fonts.
    fig.tight_layout()
    with atomic_path(path) as temporary:
        fig.savefig(temporary, dpi=100, format="png")
