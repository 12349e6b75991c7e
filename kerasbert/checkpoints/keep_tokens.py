"""keep_tokens / compound_tokens: a smaller or extended vocabulary from a checkpoint's rows.

As in bert4keras, ``keep_tokens`` picks rows of ``word_embeddings`` (and of the MLM
``output_bias``) in a new order; each ``compound_tokens`` entry appends one row, the
average of existing rows, whose ids count in the vocabulary *after* ``keep_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kerasbert.checkpoints.io import CheckpointError


class KeepTokens:
    """The row selection for vocabulary-sized variables, checked against a checkpoint.

    Args:
        keep_tokens: checkpoint token ids to keep, in their new order, or None for all.
        compound_tokens: a list of entries, each a list of ids (plain average) or a
            pair ``(ids, weights)`` (weighted average), or None.
        where: the checkpoint, quoted in error messages.

    Example:
        >>> rows = KeepTokens([0, 5, 2], [[1, 2]], "ckpt")
        >>> rows.apply(np.arange(8.0).reshape(8, 1)).ravel().tolist()
        [0.0, 5.0, 2.0, 3.5]
    """

    def __init__(self, keep_tokens: Sequence[int] | None = None,
                 compound_tokens: Sequence[Any] | None = None,
                 where: str = "<checkpoint>") -> None:
        self.keep = None if keep_tokens is None else [int(i) for i in keep_tokens]
        self.compound = [(list(item[0]), list(item[1])) if _is_weighted(item)
                         else (list(item), [1.0] * len(item))
                         for item in compound_tokens or []]
        self.where = where
        for ids, weights in self.compound:
            if not ids or len(ids) != len(weights):
                raise ValueError(
                    f"compound_tokens entry ({ids!r}, {weights!r}) needs at least one id and "
                    "one weight per id")

    @property
    def changes_rows(self) -> bool:
        """Whether :meth:`apply` changes anything."""
        return self.keep is not None or bool(self.compound)

    def size(self, stored_rows: int) -> int:
        """The number of rows after selection, for a checkpoint with ``stored_rows``."""
        return (stored_rows if self.keep is None else len(self.keep)) + len(self.compound)

    def check(self, stored_rows: int) -> None:
        """Raises CheckpointError naming the first id outside the vocabulary."""
        kept_rows = stored_rows if self.keep is None else len(self.keep)
        compound_ids = [i for ids, _ in self.compound for i in ids]
        for argument, ids, rows, note in (("keep_tokens", self.keep or [], stored_rows, ""),
                                          ("compound_tokens", compound_ids, kept_rows,
                                           ", after keep_tokens")):
            bad = [i for i in ids if not 0 <= i < rows]
            if bad:
                raise CheckpointError(
                    f"Token id {bad[0]} in {argument} is outside the vocabulary of "
                    f"{self.where} (0 to {rows - 1}{note})")

    def apply(self, rows: np.ndarray) -> np.ndarray:
        """The selected rows (and the compound rows appended) of a [vocab, ...] array."""
        if self.keep is not None:
            rows = rows[self.keep]
        if self.compound:
            # np.average sums in float64 as bert4keras does; the result is cast back.
            extra = [np.average(rows[ids], axis=0, weights=weights).astype(rows.dtype)
                     for ids, weights in self.compound]
            rows = np.concatenate([rows, np.stack(extra)], axis=0)
        return rows


def _is_weighted(item: Any) -> bool:
    # bert4keras accepts (ids, weights) as well as a plain list of ids.
    return (isinstance(item, tuple) and len(item) == 2
            and not isinstance(item[0], (int, np.integer)))
