"""Moved to :mod:`kerasbert.inference.entities`, below both tasks and serving; this name
stays for code written against earlier versions."""

from kerasbert.inference.entities import (
    OUTSIDE,
    PREFIXES,
    entity_scores,
    entity_spans,
    format_report,
    read_conll,
    split_tag,
)

__all__ = ["OUTSIDE", "PREFIXES", "entity_scores", "entity_spans", "format_report",
           "read_conll", "split_tag"]
