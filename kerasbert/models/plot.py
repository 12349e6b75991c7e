"""Drawing a model with ``keras.utils.plot_model`` (pydot + Graphviz)."""

from __future__ import annotations

import os
import shutil

import keras


class GraphvizMissing(RuntimeError):
    """Graphviz's ``dot`` program (or pydot) is not installed."""


def check_graphviz() -> None:
    """Raises :class:`GraphvizMissing` with install instructions if a plot cannot be drawn."""
    try:
        import pydot  # noqa: F401  (plot_model needs it)
    except ImportError:
        raise GraphvizMissing("pydot is not installed: run 'pip install pydot'") from None
    if shutil.which("dot") is None:
        raise GraphvizMissing(
            "Graphviz's 'dot' program was not found on PATH: install Graphviz "
            "('sudo apt-get install graphviz' on Debian/Ubuntu, 'brew install graphviz' on macOS)"
        )


#: The picture formats :func:`plot` draws, by the file's extension.
FORMATS = ("png", "svg", "pdf")


def picture_format(path: str | os.PathLike[str]) -> str:
    """The format of ``path`` by its extension (none: PNG).

    Raises:
        ValueError: ``picture in model.txt: .txt is not a format plot draws; ...``.
    """
    extension = os.path.splitext(os.fspath(path))[1][1:].lower()
    if extension and extension not in FORMATS:
        raise ValueError(f"picture in {path}: .{extension} is not a format plot draws; name the "
                         f"file {', '.join('.' + f for f in FORMATS)}")
    return extension or "png"


def plot(model: keras.Model, path: str | os.PathLike[str],
         dpi: int = 96) -> str | os.PathLike[str]:
    """Draws ``model`` to ``path`` (PNG, SVG or PDF by extension) with names and shapes.

    Raises:
        GraphvizMissing: Graphviz or pydot is not installed.
        ValueError: another extension (nothing is written).
    """
    picture = picture_format(path)
    check_graphviz()
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    # plot_model itself hands every format but PDF to IPython's Image, which has no SVG.
    graph = keras.utils.model_to_dot(model, show_shapes=True, show_layer_names=True,
                                     show_dtype=False, dpi=dpi)
    graph.write(os.fspath(path), format=picture)
    return path
