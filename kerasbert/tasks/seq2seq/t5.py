"""T5's side of ``--task seq2seq``: its tokenizer flags and its teacher-forcing rows.

A T5 family (``t5``, ``t5.1.1``, ``mt5.1.1``) reads text through a SentencePiece model
(``--sp-model``, copied into the run as ``spiece.model``), not a ``vocab.txt``. Each pair
is trained by teacher forcing: the encoder reads ``source </s>``, the decoder ``0
target`` (0 is T5's start id) and each decoder position must predict the next id of
``target </s>``. Each side is cut to ``--maxlen`` ids, ``</s>`` kept.

Example::

    pieces = SentencePieceText("spiece.model")
    encoder_ids, decoder_ids, labels, cut = training_arrays(pieces, pairs, maxlen=64)
"""

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from kerasbert.text.padding import sequence_padding
from kerasbert.training.options import OptionError

if TYPE_CHECKING:
    from kerasbert.tasks.seq2seq.options import Seq2SeqOptions

__all__ = ["check_tokenizer_flags", "training_arrays"]


def check_tokenizer_flags(options: "Seq2SeqOptions", family: str,
                          encoder_decoder: bool) -> None:
    """Raises :class:`OptionError` when a T5 family has no ``--sp-model`` or is given a
    ``--vocab``, or a BERT family is given ``--sp-model``.

    Args:
        options: the run's resolved options (``vocab`` is None where ``sp_model`` is given
            and no ``--vocab``).
        family: the config's family; ``encoder_decoder``: whether it is T5's.
    """
    where = "--model" if options.model else options.config
    if not encoder_decoder:
        if options.sp_model:
            raise OptionError(f"invalid option in --sp-model: {family} (from {where}) reads "
                              "text through vocab.txt (--vocab); a SentencePiece model is for "
                              "the T5 families (t5, t5.1.1, mt5.1.1)")
        return
    if not options.sp_model:
        raise OptionError(f"missing file in --sp-model: {family} (from {where}) reads text "
                          "through a SentencePiece model (T5's spiece.model), not vocab.txt")
    if options.vocab:
        raise OptionError(f"invalid option in --vocab: {family} (from {where}) reads text "
                          "through --sp-model's SentencePiece model, not vocab.txt")


def training_arrays(tokenizer: Any, pairs: Iterable[Any], maxlen: int,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(encoder_ids, decoder_ids, labels, cut)``: each pair's ``source </s>``, ``0
    target`` and ``target </s>`` (each side cut to ``maxlen`` ids), padded with 0 to the
    longest, and the number of pairs that lost tokens.

    Args:
        tokenizer: a :class:`~kerasbert.text.pieces.SentencePieceText`.
        pairs: objects with ``source`` and ``target`` texts.
        maxlen: the most ids of each side, ``</s>`` included.

    Example:
        With ``encode("ab") == [5, 6, 1]`` and ``encode("c") == [7, 1]``, ``Pair("ab", "c")``
        gives the rows ``[5, 6, 1]``, ``[0, 7, 0]`` and ``[7, 1, 0]``.
    """
    rows: list[tuple[list[int], list[int]]]
    rows, cut = [], 0
    for pair in pairs:
        source = tokenizer.encode(pair.source, maxlen)
        target = tokenizer.encode(pair.target, maxlen)
        cut += (len(tokenizer.encode(pair.source)) > len(source)
                or len(tokenizer.encode(pair.target)) > len(target))
        rows.append((source, target))
    width = max(max(len(source), len(target)) for source, target in rows)
    # The decoder reads the target one step late; position 0: the start id, 0.
    encoder_ids, labels, decoder_ids = (
        sequence_padding(column, width, dtype="int32") for column in (
            [source for source, _ in rows], [target for _, target in rows],
            [[0, *target[:-1]] for _, target in rows]))
    return encoder_ids, decoder_ids, labels, cut
