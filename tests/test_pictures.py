"""What kerasbert shows people: pictures of a run and model summaries.

Pictures draw Chinese label names with a CJK font and leave the user's rcParams alone; they
are drawn in a fresh process, because matplotlib's font manager is process-wide and a font
registered by another test must not be what makes the glyphs appear here. Summaries print
every layer name in full.
"""

import json
import os
import re

import pytest

import reference as ref
from peers import run_python

# Short labels as in the shipped review split, and a longer one.
LABELS = ["差评", "好评", "非常满意的好评"]

SCRIPT = r"""
import json, sys, warnings

import matplotlib

# The user's own setting, which the pictures must neither need nor change.
matplotlib.rcParams["font.family"] = ["serif"]
before = dict(matplotlib.rcParams)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from kerasbert.tasks.classification.reports import plot_confusion_matrix
    from kerasbert.training import reports

    labels, out = json.loads(sys.argv[1]), sys.argv[2]
    figure = plot_confusion_matrix(f"{out}/confusion_matrix.png", labels,
                                   [[50, 3, 1], [4, 40, 2], [0, 5, 30]])
    reports.plot_training_curves(f"{out}/training_curves.png",
                                 {"loss": [0.7, 0.4], "val_loss": [0.6, 0.5],
                                  "accuracy": [0.6, 0.8], "val_accuracy": [0.6, 0.7]},
                                 best_epoch=2)

import importlib.resources
import numpy as np
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.font_manager import FontProperties
from matplotlib.figure import Figure

NOTO = str(importlib.resources.files("mplfonts").joinpath("fonts/NotoSansCJKsc-Regular.otf"))
DEJAVU = font_manager.findfont(FontProperties(family="DejaVu Sans"))


def fonts_of(properties):
    # The files matplotlib falls back through for these properties, one per family.
    found = []
    for family in properties.get_family():
        try:
            found.append(font_manager.findfont(FontProperties(family=family),
                                               fallback_to_default=False))
        except ValueError:
            pass
    return found


def has_glyph(path, character):
    return font_manager.get_font(path).get_char_index(ord(character)) != 0


def render(text, properties):
    # The text alone, as pixels.
    alone = Figure(figsize=(3, 0.6), dpi=100)
    FigureCanvasAgg(alone)
    alone.text(0.02, 0.2, text, fontproperties=properties, fontsize=20)
    alone.canvas.draw()
    return np.asarray(alone.canvas.buffer_rgba())


axes = figure.axes[0]
ticks = []
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the DejaVu-only rendering below lacks the glyphs
    for tick in axes.get_xticklabels() + axes.get_yticklabels():
        text, properties = tick.get_text(), tick.get_fontproperties()
        drawn = render(text, properties)
        fonts = fonts_of(properties)
        noto, dejavu = (render(text, FontProperties(fname=path)) for path in (NOTO, DEJAVU))
        ticks.append({
            "text": text,
            "covered": all(any(has_glyph(font, c) for font in fonts) for c in text),
            "same_as_noto": bool(np.array_equal(drawn, noto)),
            "same_as_dejavu": bool(np.array_equal(drawn, dejavu)),
        })

title = axes.title
print(json.dumps({
    "warnings": [str(w.message) for w in caught],
    "ticks": ticks,
    "title_font": font_manager.findfont(title.get_fontproperties()),
    "dejavu": DEJAVU,
    "rc_unchanged": dict(matplotlib.rcParams) == before,
    # Keras imports pyplot; the pictures must leave no figure in its global list.
    "pyplot_figures": sys.modules["matplotlib.pyplot"].get_fignums()
    if "matplotlib.pyplot" in sys.modules else [],
}))
"""


# The tests that use it are marked slow: the fresh process takes about 8 s.
@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    out = tmp_path_factory.mktemp("pictures")
    return out, run_python(SCRIPT, args=[json.dumps(LABELS), str(out)], timeout=300)


@pytest.mark.slow
def test_chinese_labels_draw_without_missing_glyphs(drawn):
    out, report = drawn
    missing = [w for w in report["warnings"] if "missing from font" in w]
    assert not missing, missing
    assert (out / "confusion_matrix.png").stat().st_size > 1000
    assert (out / "training_curves.png").stat().st_size > 1000


@pytest.mark.slow
def test_chinese_labels_are_drawn_with_noto_sans_cjk(drawn):
    _, report = drawn
    ticks = report["ticks"]
    assert sorted(tick["text"] for tick in ticks) == sorted(LABELS * 2)
    for tick in ticks:
        # Every character has a glyph in the fonts the label falls back through, and the
        # label's pixels are Noto Sans CJK SC's, not DejaVu Sans's empty boxes.
        assert tick["covered"], tick
        assert tick["same_as_noto"] and not tick["same_as_dejavu"], tick


@pytest.mark.slow
def test_latin_text_keeps_dejavu_sans(drawn):
    _, report = drawn
    assert report["title_font"] == report["dejavu"]


@pytest.mark.slow
def test_pictures_leave_the_users_matplotlib_settings_alone(drawn):
    _, report = drawn
    assert report["rc_unchanged"]
    assert report["pyplot_figures"] == []


# A row of the summary table: "│ <layer (type)> │ <output shape> │ <param #> │ <connected to> │".
CONNECTION = re.compile(r"^(?P<name>.+)\[\d+\]\[\d+\]$")


def table_cells(text):
    rows = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
    return [[cell.strip() for cell in row] for row in rows]


def test_summary_prints_every_layer_name_in_full(capsys):
    import keras

    from kerasbert import build_transformer_model
    from kerasbert.models.audit import print_summary
    from kerasbert.models.deferred import shapes_only

    keras.utils.clear_session()
    with shapes_only():  # as `kerasbert audit` builds it: shapes, no values
        model = build_transformer_model(ref.CHINESE_BASE, with_pool=True, with_nsp=True,
                                        with_mlm=True)
    columns = os.environ.get("COLUMNS")
    print_summary(model)  # to stdout, as `kerasbert audit` prints it
    text = capsys.readouterr().out
    names = {operation.name for operation in model.operations}  # layers and not_equal

    cells = table_cells(text)
    assert cells and all(len(row) == 4 for row in cells), "a column is cut off:\n" + text[:2000]
    # The first cell of a row starts with the layer name; "(LayerNormalization)" may wrap.
    shown = {row[0].split(" ")[0] for row in cells if row[0] and not row[0].startswith("(")}
    assert shown == names
    connections = [word.rstrip(",") for row in cells for word in row[3].split()
                   if word != "-"]
    matched = [CONNECTION.match(word) for word in connections]
    assert connections and all(matched), [w for w, m in zip(connections, matched) if not m]
    assert {match["name"] for match in matched} <= names
    assert "…" not in text
    assert f"Total params: {ref.CHINESE_BASE_ALL_HEADS:,}" in text
    assert f"Trainable params: {ref.CHINESE_BASE_ALL_HEADS:,}" in text
    assert os.environ.get("COLUMNS") == columns


def test_summary_goes_to_print_fn_whole(tiny_config):
    from kerasbert import build_transformer_model
    from kerasbert.models.audit import print_summary

    model = build_transformer_model(tiny_config)
    printed = []
    print_summary(model, print_fn=printed.append)
    assert len(printed) == 1
    assert {row[0].split(" ")[0] for row in table_cells(printed[0]) if row[0]} >= {
        "Transformer-1-MultiHeadSelfAttention-Dropout", "Transformer-1-FeedForward-Norm"}
    assert f"Total params: {model.count_params():,}" in printed[0]
