"""T5's text and ids: a SentencePiece model's pieces, each text closed by ``</s>``.

T5's models pad with id 0 (also the decoder's start id) and end a text with ``</s>``; a
SentencePiece model for them is trained with ``pad_id=0, eos_id=1, unk_id=2, bos_id=-1``
(Google's ``spiece.model`` is laid out so). :class:`kerasbert.tokenizers.SpTokenizer`
(``token_start=None, token_end="</s>"``) gives the same ids through bert4keras's interface.

Example::

    pieces = SentencePieceText("spiece.model")
    ids = pieces.encode("语言模型", maxlen=8)   # [..., pieces.end_id]
    pieces.decode(ids)                          # '语言模型'
"""

import os
from collections.abc import Iterable

import sentencepiece


def load_sentencepiece(path: str | os.PathLike[str]) -> sentencepiece.SentencePieceProcessor:
    """The ``SentencePieceProcessor`` of the model file at ``path``.

    Raises:
        FileNotFoundError, ValueError: no file at ``path``, or not a SentencePiece model
            (each naming the path).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"SpTokenizer: no SentencePiece model file at {path!r}")
    model = sentencepiece.SentencePieceProcessor()
    try:
        model.Load(path)
    except (RuntimeError, OSError) as error:  # OSError from releases before 0.2
        raise ValueError(f"SpTokenizer: {path!r} is not a SentencePiece model "
                         f"(sentencepiece: {error})") from None
    return model


class SentencePieceText:
    """A T5 model's text to ids and back, through its SentencePiece model.

    Args:
        path: the ``.model`` file.

    Attributes:
        path: that file; ``vocab_size``: its number of pieces; ``end_id``: the id of
            ``</s>``.

    Raises:
        FileNotFoundError, ValueError: a missing file, not a SentencePiece model, or one
            whose padding is not id 0 or that has no ``</s>`` (T5 pads and starts decoding
            with id 0, and ends each text with ``</s>``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if os.path.isdir(self.path):
            inside = os.path.join(self.path, "spiece.model")
            hint = (f"give {inside}" if os.path.isfile(inside)
                    else "give the .model file (T5's spiece.model)")
            raise ValueError(f"sentencepiece model in {self.path}: is a directory; {hint}")
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"sentencepiece model in {self.path}: no such file")
        try:
            self.model = load_sentencepiece(self.path)
        except ValueError:
            raise ValueError(f"sentencepiece model in {self.path}: not a SentencePiece model "
                             "file") from None
        self.vocab_size = self.model.get_piece_size()
        self.end_id = self.model.eos_id()
        if self.model.pad_id() != 0 or self.end_id < 0:
            raise ValueError(
                f"sentencepiece model in {self.path}: pad id {self.model.pad_id()} and end id "
                f"{self.end_id}; a T5 model pads with id 0 and ends texts with </s> (train it "
                "with pad_id=0, eos_id=1, unk_id=2, bos_id=-1, as T5's spiece.model)")

    def encode(self, text: str, maxlen: int | None = None) -> list[int]:
        """The ids of ``text``'s pieces and ``</s>``; with ``maxlen``, at most that many
        (the pieces cut, ``</s>`` kept)."""
        ids = self.model.encode_as_ids(text)
        if maxlen is not None:
            ids = ids[:max(maxlen - 1, 0)]
        return ids + [self.end_id]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``, control pieces (``</s>``, padding) and ids past the model's
        pieces left out."""
        return self.model.decode_ids([int(i) for i in ids if 0 <= i < self.vocab_size])
