"""Parameter audit: the count of every layer computed from the config alone, next to a model's.

Each family's module holds its formulas (BERT's in :mod:`kerasbert.models.families.bert`:
V·H for ``Embedding-Token``, 4·(H·H+H) for each ``MultiHeadSelfAttention``...); this module
compares them with a built model and formats the table.

:func:`print_summary` prints Keras's own ``model.summary()`` with columns wide enough for
bert4keras's long layer names (``Transformer-10-MultiHeadSelfAttention-Dropout``).

Example:
    >>> from kerasbert.models.config import BertConfig
    >>> config = BertConfig.from_json_file("checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
    >>> sum(row.expected for row in expected_rows(config, num_labels=2))
    101678594
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kerasbert.models import names
from kerasbert.models.families import family_class

if TYPE_CHECKING:  # annotations only
    import keras

    from kerasbert.models.config import BertConfig
    from kerasbert.models.families.base import Transformer


@dataclasses.dataclass
class Row:
    """One layer of the audit."""

    group: str
    layer: str
    formula: str
    expected: int
    actual: int | None = None  # None until the built model is counted
    # With LoRA (audit_model's lora=): the parameters that train, expected and counted.
    expected_trainable: int | None = None
    trainable: int | None = None

    @property
    def ok(self) -> bool:
        return self.actual == self.expected and self.trainable == self.expected_trainable


def expected_rows(config: BertConfig, with_pool: bool | str = False, with_nsp: bool = False,
                  with_mlm: bool | str = False, num_labels: int | None = None,
                  family: str | type[Transformer] | None = None,
                  with_discriminator: bool | str = False) -> list[Row]:
    """The layers that hold parameters, with formula and expected count, in graph order.

    The formulas are the family's (``family``, None: the config's): its class's
    ``audit_rows`` in :mod:`kerasbert.models.families`; ``num_labels`` adds the
    classifier's ``dense_output`` H·n+n.
    """
    cls = family_class(family or config.family)
    rows = [Row(*row) for row in cls.audit_rows(config, with_pool, with_nsp, with_mlm,
                                                with_discriminator)]
    if num_labels:
        H = config.hidden_size
        rows.append(Row("classifier", names.CLS_DENSE, "H·n+n", H * num_labels + num_labels))
    return rows


def audit_model(model: keras.Model, config: BertConfig, with_pool: bool | str = False,
                with_nsp: bool = False, with_mlm: bool | str = False,
                num_labels: int | None = None, family: str | type[Transformer] | None = None,
                with_discriminator: bool | str = False, lora: int | None = None,
                lora_targets: tuple[str, ...] | None = None) -> list[Row]:
    """Fills in each row's actual count from ``model``.

    With ``lora`` (the rank of the adapters :func:`kerasbert.models.lora.enable_lora` put on
    ``lora_targets``, None: its default), each attention and feed-forward row expects its
    adapters too, r·(inputs+outputs) for each projection given some, and every row says how
    many of its parameters train: its adapters alone (the base is frozen), all of the
    classifier's.

    A layer of the model that holds parameters but has no row is reported as a row
    with the formula "unexpected" and expected 0, so it fails the audit. The dense layers
    a conditional layer norm (``layer_norm_cond``) passes its condition through have rows
    of their own, in the group ``condition``: the config does not say the condition's
    width, so they are counted from the layer.

    Returns:
        the list of :class:`Row`.
    """
    rows = expected_rows(config, with_pool, with_nsp, with_mlm, num_labels, family,
                         with_discriminator)
    if lora is not None:
        rows = [_with_adapters(row, config, lora, lora_targets) for row in rows]
    from kerasbert.models.loading import layer_prefix  # Keras's import, for a model

    # A prefixed model's rows (bert4keras's prefix=) are named without its prefix.
    prefix = layer_prefix(model)
    layers = {layer.name.removeprefix(prefix): layer for layer in model.layers}
    conditions = []
    if names.shares_segment_table(layers):  # its segments read Embedding-Token's table
        rows = [row for row in rows if row.layer != names.EMBEDDING_SEGMENT]
    for row in rows:
        layer = layers.get(row.layer)
        condition = None if layer is None else condition_row(layer)
        if condition is not None:
            conditions.append(condition)
        row.actual = None if layer is None else layer.count_params() - (
            condition.expected if condition is not None else 0)
        if lora is not None and layer is not None:
            row.trainable = _count(layer.trainable_weights)
    rows += conditions
    listed = {row.layer for row in rows}
    for name, layer in layers.items():
        if name not in listed and layer.count_params():
            rows.append(Row("unexpected", name, "unexpected", 0, layer.count_params(),
                            *((0, _count(layer.trainable_weights)) if lora is not None else ())))
    return rows


def _count(variables: list[Any]) -> int:
    return sum(math.prod(variable.shape) for variable in variables)


def _with_adapters(row: Row, config: BertConfig, rank: int,
                   targets: tuple[str, ...] | None) -> Row:
    """``row`` expecting the LoRA adapters of rank ``rank`` on ``targets`` where it is an
    attention or a feed-forward layer, and what of it trains."""
    from kerasbert.models.lora import DEFAULT_TARGETS, checked_targets

    chosen = checked_targets(targets or DEFAULT_TARGETS)
    hidden, inner = config.hidden_size, config.intermediate_size
    heads = config.num_attention_heads * config.head_size
    widths = {"query": hidden + heads, "key": hidden + heads, "value": hidden + heads,
              "attention_output": heads + hidden, "intermediate": hidden + inner,
              "output": inner + hidden}
    kind = ("attention" if row.layer.endswith("MultiHeadSelfAttention") else
            "feed_forward" if row.layer.endswith("FeedForward") else "")
    own = {"attention": ("query", "key", "value", "attention_output"),
           "feed_forward": ("intermediate", "output")}.get(kind, ())
    adapters = sum(rank * widths[target] for target in chosen if target in own)
    if not adapters:
        trains = row.expected if row.group == "classifier" else 0
        return dataclasses.replace(row, expected_trainable=trains)
    given = sum(target in own for target in chosen)
    term = f"{given}·r·{'(H+A)' if kind == 'attention' else '(H+I)'}".removeprefix("1·")
    return dataclasses.replace(row, formula=f"{row.formula}+{term}",
                               expected=row.expected + adapters, expected_trainable=adapters)


def condition_row(layer: keras.layers.Layer) -> Row | None:
    """The row of the dense layers of a conditional layer norm's condition
    (``hidden_dense`` C·h, ``beta_dense`` and ``gamma_dense`` h·W each, h the hidden
    layer's width or C), or None for another layer."""
    from kerasbert.models.layers import ScaleOffset

    if not isinstance(layer, ScaleOffset) or not layer.conditional:
        return None
    parts = [getattr(layer, part) for part in ("hidden_dense", "beta_dense", "gamma_dense")
             if hasattr(layer, part)]
    count = sum(math.prod(part.kernel.shape) for part in parts)
    formula = "+".join(f"{part.kernel.shape[0]}·{part.kernel.shape[1]}" for part in parts)
    return Row("condition", layer.name, formula, count, count)


def group_totals(rows: list[Row]) -> dict[str, tuple[int, int]]:
    """``{group: (expected, actual)}`` in first-seen order."""
    totals: dict[str, tuple[int, int]] = {}
    for row in rows:
        expected, actual = totals.get(row.group, (0, 0))
        totals[row.group] = (expected + row.expected, actual + (row.actual or 0))
    return totals


def format_table(rows: list[Row], total_params: int | None = None) -> str:
    """The audit as a plain-text table with group subtotals and the total; with LoRA, each
    row's trainable and frozen parameters too, and the share that trains."""
    lora = any(row.expected_trainable is not None for row in rows)
    width = max([10, *(len(row.formula) for row in rows)])
    extra = f" {'trainable':>11} {'frozen':>13}" if lora else ""
    lines = [f"{'group':<11} {'layer':<44} {'formula':<{width}} {'expected':>13} "
             f"{'actual':>13}{extra}  ok"]
    lines.append("-" * len(lines[0]))
    for row in rows:
        shown = "missing" if row.actual is None else f"{row.actual:,}"
        counts = ""
        if lora:
            trains = row.trainable or 0
            counts = f" {trains:>11,} {(row.actual or 0) - trains:>13,}"
        lines.append(f"{row.group:<11} {row.layer:<44} {row.formula:<{width}} "
                     f"{row.expected:>13,} {shown:>13}{counts}  {'yes' if row.ok else 'NO'}")
    lines.append("-" * len(lines[0]))
    for group, (expected, actual) in group_totals(rows).items():
        lines.append(f"{group:<11} {'(subtotal)':<44} {'':<{width}} {expected:>13,} {actual:>13,}  "
                     f"{'yes' if expected == actual else 'NO'}")
    expected = sum(row.expected for row in rows)
    actual = sum(row.actual or 0 for row in rows) if total_params is None else total_params
    lines.append(f"{'total':<11} {'':<44} {'':<{width}} {expected:>13,} {actual:>13,}  "
                 f"{'yes' if expected == actual else 'NO'}")
    if lora:
        trains = sum(row.trainable or 0 for row in rows)
        lines.append(f"trainable {trains:,} of {actual:,} ({100 * trains / max(actual, 1):.2f}%), "
                     f"frozen {actual - trains:,}")
    return "\n".join(lines)


def to_json(rows: list[Row], total_params: int) -> dict[str, Any]:
    """The audit as a JSON-ready dict: rows, group subtotals, totals and ``ok``."""
    expected = sum(row.expected for row in rows)
    lora = any(row.expected_trainable is not None for row in rows)
    return {
        **({"trainable": sum(row.trainable or 0 for row in rows)} if lora else {}),
        "rows": [dataclasses.asdict(row) | {"ok": row.ok} for row in rows],
        "groups": {g: {"expected": e, "actual": a} for g, (e, a) in group_totals(rows).items()},
        "total": {"expected": expected, "actual": total_params},
        "ok": all(row.ok for row in rows) and expected == total_params,
    }


# Keras's summary table: its four headers, the widest output shape we expect (wider ones wrap
# at their commas), and what a connection adds to a layer name ("<layer>[node][tensor], ").
_HEADERS = ("Layer (type)", "Output Shape", "Param #", "Connected to")
_SHAPE = "(None, None, 21128)"
_CONNECTION = "[10][0],"
# rich pads each column by one space on each side and draws n + 1 borders inside the width Keras
# asks for, then takes that excess (3n + 1) evenly from the columns: at most 4 from each.
_RICH_SHRINK = 4


def print_summary(model: keras.Model, print_fn: Callable[[str], Any] | None = None) -> None:
    """Prints ``model.summary()`` with every layer name in full.

    Keras 3 draws the summary as a rich table at most 108 characters wide by default (less in a
    narrower terminal) and crops it to the width rich detects (80 columns when the output is not
    a terminal, 115 in Jupyter); a name longer than the first column (about 30 characters) is cut,
    so ``Transformer-0-MultiHeadSelfAttention`` and its ``-Dropout``, ``-Add`` and ``-Norm`` all
    read ``Transformer-0-Mult…``. This sizes the columns from the longest layer name (144
    characters in all for Chinese BERT-base) and lets rich draw the table that wide.

    Args:
        model: a Keras model, e.g. one from ``build_transformer_model``.
        print_fn: called with the whole summary as one string, as in ``model.summary``;
            ``None`` prints it (in colour on a terminal).

    Example:
        >>> from kerasbert import build_transformer_model
        >>> bert = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32, max_position_embeddings=32, type_vocab_size=2))
        >>> printed = []
        >>> print_summary(bert, print_fn=printed.append)
        >>> "Transformer-1-MultiHeadSelfAttention-Dropout" in printed[0]   # in full
        True
    """
    longest = max(len(layer.name) for layer in model.layers)
    contents = (longest, len(_SHAPE), len(f"{model.count_params():,}"), longest + len(_CONNECTION))
    widths = [max(content, len(header)) + _RICH_SHRINK
              for content, header in zip(contents, _HEADERS)]
    line_length = sum(widths)
    # Keras 3 reads positions as fractions of line_length only; the half keeps int() exact.
    ends = [sum(widths[:i + 1]) for i in range(len(widths))]
    positions = [(end + 0.5) / line_length for end in ends[:-1]] + [1.0]
    with _console_width(line_length):
        model.summary(line_length=line_length, positions=positions, print_fn=print_fn)


@contextlib.contextmanager
def _console_width(columns: int) -> Iterator[None]:
    """Sets the width rich gives its console while the summary is drawn.

    Keras makes the rich console inside ``summary`` and offers no argument for its width; rich
    reads it from ``COLUMNS`` (``JUPYTER_COLUMNS`` in Jupyter). Both are restored afterwards.
    """
    names = ("COLUMNS", "JUPYTER_COLUMNS")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update({name: str(columns) for name in names})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
