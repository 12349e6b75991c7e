"""Parameter audit: the count of every layer computed from the config alone, next to a model's.

The formulas (V vocabulary, H hidden, E embedding width, T segment types, P positions,
I intermediate, n labels), for BERT::

    Embedding-Token       V·H          MultiHeadSelfAttention  4·(H·H+H)
    Embedding-Segment     T·H          FeedForward             2·H·I+I+H
    Embedding-Position    P·H          each LayerNorm          2·H
    Pooler-Dense          H·H+H        NSP-Proba               2·H+2
    MLM  H·H+H + 2·H + V (the output matrix is Embedding-Token, counted once)
    dense_output          H·n+n

and what each other family changes: ALBERT's and ELECTRA's embeddings are E wide
(V·E, T·E, P·E, 2·E) with ``Embedding-Mapping`` E·H+H, and ALBERT's one shared
attention and feed-forward block is counted once; NEZHA has no ``Embedding-Position``
but a fixed relative table (2m+1)·d (d = H/A, m = ``max_relative_position``); RoFormer
has no position weights; RoFormer-v2 has no biases (4·H·H, 2·H·I) and weightless norms;
ELECTRA's discriminator is ``Discriminator-Dense`` H·H+H and ``-Prediction`` H+1.

:func:`print_summary` prints Keras's own ``model.summary()`` with columns wide enough for
bert4keras's long layer names (``Transformer-10-MultiHeadSelfAttention-Dropout``).

Example:
    >>> from kerasbert.models.config import BertConfig
    >>> config = BertConfig.from_json_file("checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
    >>> sum(row.expected for row in expected_rows(config, num_labels=2))
    101678594
"""

import contextlib
import dataclasses
import os

from kerasbert.models import names
from kerasbert.models.families import variant_of


@dataclasses.dataclass
class Row:
    """One layer of the audit."""

    group: str
    layer: str
    formula: str
    expected: int
    actual: int = None

    @property
    def ok(self):
        return self.actual == self.expected


def expected_rows(config, with_pool=False, with_nsp=False, with_mlm=False, num_labels=None,
                  family=None, with_discriminator=False):
    """The layers that hold parameters, with formula and expected count, in graph order.

    ``family`` (None: the config's) picks the variant's rows: ALBERT's factorised
    embedding (V·E, then ``Embedding-Mapping`` E·H+H) and its shared layers counted once,
    NEZHA's fixed relative table ((2m+1)·d, d = H/A), RoFormer's missing position table,
    RoFormer-v2's bias-free layers and weightless norms, ELECTRA's discriminator.
    """
    variant = variant_of(family or config.family)
    # The letters of the formulas (I: intermediate size, as in the published tables).
    V, H, T, P, I, E = (config.vocab_size, config.hidden_size,  # noqa: E741
                        config.type_vocab_size, config.max_position_embeddings,
                        config.intermediate_size, config.embedding_size)
    e = "E" if E != H else "H"  # BERT's tables say H

    def norm(group, layer, width, letter):
        if not variant.scale_free_norm:  # RoFormer-v2's norms hold no weights
            rows.append(Row(group, layer, f"2·{letter}", 2 * width))

    def dense(group, layer, inputs, outputs, formula):  # formula of the kernel alone
        bias = variant.use_bias
        rows.append(Row(group, layer, formula + (f"+{outputs[0]}" if bias else ""),
                        inputs[1] * outputs[1] + (outputs[1] if bias else 0)))

    rows = [Row("embeddings", names.EMBEDDING_TOKEN, f"V·{e}", V * E)]
    if T > 0:
        rows.append(Row("embeddings", names.EMBEDDING_SEGMENT, f"T·{e}", T * E))
    if variant.position == "absolute":
        rows.append(Row("embeddings", names.EMBEDDING_POSITION, f"P·{e}", P * E))
    norm("embeddings", names.EMBEDDING_NORM, E, e)
    if E != H:
        dense("embeddings", names.EMBEDDING_MAPPING, ("E", E), ("H", H), "E·H")
    if variant.position == "relative":
        rows.append(Row("embeddings", names.EMBEDDING_RELATIVE_POSITION, "(2m+1)·d",
                        (2 * config.max_relative_position + 1) * config.head_size))
    attention, feed_forward = (("4·(H·H+H)", 4 * (H * H + H)), ("2·H·I+I+H", 2 * H * I + I + H))
    if not variant.use_bias:
        attention, feed_forward = ("4·H·H", 4 * H * H), ("2·H·I", 2 * H * I)
    blocks = ([(names.SHARED_ATTENTION, names.SHARED_FEED_FORWARD)] if variant.shared_layers
              else [(names.attention_name(i), names.feed_forward_name(i))
                    for i in range(config.num_hidden_layers)])
    for attention_name, feed_forward_name in blocks:
        rows.append(Row("encoder", attention_name, *attention))
        norm("encoder", names.norm_name(attention_name), H, "H")
        rows.append(Row("encoder", feed_forward_name, *feed_forward))
        norm("encoder", names.norm_name(feed_forward_name), H, "H")
    if with_discriminator:
        dense("discriminator", names.DISCRIMINATOR_DENSE, ("H", H), ("H", H), "H·H")
        dense("discriminator", names.DISCRIMINATOR_PREDICTION, ("H", H), ("1", 1), "H")
    if with_pool or with_nsp:
        rows.append(Row("pooler", names.POOLER_DENSE, "H·H+H", H * H + H))
    if with_nsp:
        rows.append(Row("nsp", names.NSP_PROBA, "2·H+2", 2 * H + 2))
    if with_mlm and variant.heads == "roformer_v2":
        if E != H:  # the tied embedding alone, after a bias-free mapping
            dense("mlm", names.OUTPUT_MAPPING, ("H", H), ("E", E), "H·E")
    elif with_mlm:
        rows.append(Row("mlm", names.MLM_DENSE, f"H·{e}+{e}", H * E + E))
        norm("mlm", names.MLM_NORM, E, e)
        rows.append(Row("mlm", names.MLM_BIAS, "V", V))
    if num_labels:
        rows.append(Row("classifier", names.CLS_DENSE, "H·n+n", H * num_labels + num_labels))
    return rows


def audit_model(model, config, with_pool=False, with_nsp=False, with_mlm=False, num_labels=None,
                family=None, with_discriminator=False):
    """Fills in each row's actual count from ``model``.

    A layer of the model that holds parameters but has no row is reported as a row
    with the formula "unexpected" and expected 0, so it fails the audit.

    Returns:
        the list of :class:`Row`.
    """
    rows = expected_rows(config, with_pool, with_nsp, with_mlm, num_labels, family,
                         with_discriminator)
    layers = {layer.name: layer for layer in model.layers}
    for row in rows:
        layer = layers.get(row.layer)
        row.actual = None if layer is None else layer.count_params()
    listed = {row.layer for row in rows}
    for layer in model.layers:
        if layer.name not in listed and layer.count_params():
            rows.append(Row("unexpected", layer.name, "unexpected", 0, layer.count_params()))
    return rows


def group_totals(rows):
    """``{group: (expected, actual)}`` in first-seen order."""
    totals = {}
    for row in rows:
        expected, actual = totals.get(row.group, (0, 0))
        totals[row.group] = (expected + row.expected, actual + (row.actual or 0))
    return totals


def format_table(rows, total_params=None):
    """The audit as a plain-text table with group subtotals and the total."""
    lines = [f"{'group':<11} {'layer':<44} {'formula':<10} {'expected':>13} {'actual':>13}  ok"]
    lines.append("-" * len(lines[0]))
    for row in rows:
        actual = "missing" if row.actual is None else f"{row.actual:,}"
        lines.append(f"{row.group:<11} {row.layer:<44} {row.formula:<10} "
                     f"{row.expected:>13,} {actual:>13}  {'yes' if row.ok else 'NO'}")
    lines.append("-" * len(lines[0]))
    for group, (expected, actual) in group_totals(rows).items():
        lines.append(f"{group:<11} {'(subtotal)':<44} {'':<10} {expected:>13,} {actual:>13,}  "
                     f"{'yes' if expected == actual else 'NO'}")
    expected = sum(row.expected for row in rows)
    actual = sum(row.actual or 0 for row in rows) if total_params is None else total_params
    lines.append(f"{'total':<11} {'':<44} {'':<10} {expected:>13,} {actual:>13,}  "
                 f"{'yes' if expected == actual else 'NO'}")
    return "\n".join(lines)


def to_json(rows, total_params):
    """The audit as a JSON-ready dict: rows, group subtotals, totals and ``ok``."""
    expected = sum(row.expected for row in rows)
    return {
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


def print_summary(model, print_fn=None):
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
def _console_width(columns):
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
