"""Pictures of a run: its training curves, and the fonts and files every picture shares.

Pictures come from matplotlib (``Figure`` objects, not pyplot,
and our fonts set per picture, so the user's own plots and rcParams are left as they are);
Chinese label names are drawn with Noto Sans CJK SC from mplfonts. Every file is written
atomically (:mod:`kerasbert.files`), so a killed run never leaves a half-written file.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import importlib.resources
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from kerasbert.files import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def write_history_csv(path: str | os.PathLike[str],
                      history: Mapping[str, Sequence[float]]) -> None:
    """Writes Keras ``History.history`` (a dict of lists) as one row per epoch."""
    keys = list(history)
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["epoch"] + keys)
            for epoch in range(len(history[keys[0]]) if keys else 0):
                writer.writerow([epoch + 1] + [history[k][epoch] for k in keys])


# Noto Sans CJK SC, shipped by mplfonts (SIL Open Font License).
CJK_FONT = ("mplfonts", "fonts/NotoSansCJKsc-Regular.otf")


@functools.cache
def font_family() -> tuple[str, str]:
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
    # mplfonts is installed as files: its resource is a path on disk.
    path = os.fspath(  # type: ignore[call-overload]
        importlib.resources.files(package).joinpath(name))
    font_manager.fontManager.addfont(path)
    return ("DejaVu Sans", font_manager.FontProperties(fname=path).get_name())


@contextlib.contextmanager
def style() -> Iterator[None]:
    """Our fonts for what is drawn inside, without touching the user's own rcParams."""
    import matplotlib

    with matplotlib.rc_context({"font.family": list(font_family())}):
        yield


def figure(figsize: tuple[float, float]) -> Figure:
    """A matplotlib ``Figure`` of ``figsize`` inches with its own Agg canvas."""
    # A Figure with its own Agg canvas, not pyplot's: no global backend or figure list.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize)
    FigureCanvasAgg(figure)
    return figure


def plot_training_curves(path: str | os.PathLike[str], history: Mapping[str, Sequence[float]],
                         best_epoch: int | None = None) -> Figure:
    """Draws loss and accuracy per epoch (train and dev) to a PNG, atomically.

    ``best_epoch`` (1-based), the epoch whose model was kept, is marked on both panels.

    Returns:
        the matplotlib ``Figure`` that was saved.
    """
    from matplotlib.ticker import MaxNLocator

    with style():
        fig = figure((10, 4))
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
        save(fig, path)
    return fig


def save(fig: Figure, path: str | os.PathLike[str]) -> None:
    """Lays ``fig`` out and writes it to ``path`` as a PNG, atomically."""
    # Laid out and drawn inside style(), so every text (ticks are made late) gets our fonts.
    fig.tight_layout()
    with atomic_path(path) as temporary:
        fig.savefig(temporary, dpi=100, format="png")
