"""Sequence-to-sequence runs: UniLM generation on a BERT-family model, or a T5
encoder-decoder, scored by ROUGE-L, BLEU and exact match.

UniLM: the model is the encoder with its MLM head and UniLM's attention mask
(``application="unilm"``): a row is ``[CLS] source [SEP] target [SEP]``, the source in
segment 0 (seen whole by every token) and the target in segment 1 (each token sees the
source and the target tokens before it). The loss is the cross-entropy of each next target
token, the closing ``[SEP]`` included, over the target tokens only. A pair longer than
``--maxlen`` loses tokens from its longer side first (as ``Tokenizer.encode`` cuts a pair);
the number of pairs cut is in ``metrics.json``.

T5 (``--model t5``, ``t5.1.1`` or ``mt5.1.1``, or the config's ``model_type``; its
SentencePiece model in ``--sp-model``): the encoder reads ``source </s>``, the decoder
``0 target`` (teacher forcing, 0 is T5's start id), and the loss is the same cross-entropy
of each next id of ``target </s>`` (:mod:`kerasbert.tasks.seq2seq.t5`). Each side is cut
to ``--maxlen`` ids; the pairs cut are counted as for UniLM.

Generation (:func:`kerasbert.inference.generation.generate`, with its key/value cache) reads
``[CLS] source [SEP]`` (the source cut to ``maxlen - 2`` tokens; T5: ``source </s>`` cut to
``maxlen`` ids, through the encoder once) and adds up to ``--max-new-tokens`` tokens, greedy
or by beam search (``--num-beams``), until ``[SEP]`` (T5: ``</s>``).
An output is scored against its target by ROUGE-L on characters (``rouge-score``, the F
measure, averaged over pairs), corpus BLEU (``sacrebleu``, its ``zh`` tokenisation: a
Chinese character is a word) and exact match, all in percent, case and spaces ignored. The
best epoch is the one with the best dev ROUGE-L. The run also reports the score of copying
each source's first characters (as many as the median training target has): the baseline a
model must beat.

The families that train: BERT (RoBERTa, kerasbert-zh-small) and ELECTRA, whose MLM head can
decode step by step, and T5; ALBERT's shared layers, rotary and relative positions
(RoFormer, NEZHA) and GPT are refused by name.

A run directory holds ``model.keras``, ``bert_model.ckpt.*`` (encoder and MLM head under
Google's names; T5's weights under bert4keras's Mesh TensorFlow names),
``bert_config.json``, ``vocab.txt`` (T5: ``spiece.model``), ``train_config.json``,
``history.csv`` and ``metrics.json``. ``export`` writes a SavedModel that generates from
raw text, the tokenizer in the graph (T5's SentencePiece model too).

Example::

    # the shipped kerasbert-zh-small on the shipped Chinese answer-generation set
    summary = train(Seq2SeqOptions(output="runs/answers"))
    summary["test"]["rouge_l"], summary["test_copy_baseline"]["rouge_l"]
"""

import dataclasses
import os
import statistics
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from kerasbert.models import names
from kerasbert.tasks.base import DevScores, Task, train
from kerasbert.tasks.runs import (
    FinishedRun,
    check_checkpoint,
    check_model_files,
    export_saved_model,
    is_encoder_decoder,
    run_config,
    run_directory_line,
    run_dtype,
    run_recompute,
)
from kerasbert.tasks.seq2seq import t5 as seq2seq_t5
from kerasbert.tasks.seq2seq.options import Seq2SeqOptions
from kerasbert.text.padding import sequence_padding
from kerasbert.text.pieces import SentencePieceText
from kerasbert.training.callbacks import RunRecorder
from kerasbert.training.data import (
    TEXT_SUFFIXES,
    DataError,
    json_object,
    lone_surrogate,
    read_lines,
    read_texts,
    unknown_keys,
)
from kerasbert.training.options import OptionError
from kerasbert.training.rundir import RunError

__all__ = ["Pair", "Run", "Seq2SeqOptions", "TASK", "UnilmLoss",
           "copy_baseline", "generate_texts", "read_pairs", "scores", "train",
           "training_arrays"]
MONITOR = "val_rouge_l"
KEYS = ("source", "target")
#: Sources generated from at once (a compiled program per width, a multiple of 8).
CHUNK = 256


@dataclasses.dataclass(frozen=True)
class Pair:
    """A source, its target (None where a file to generate from gives none) and its line."""

    source: str
    target: str
    line: int


def _invisible(text: str) -> bool:
    """Whether ``text`` has no character a tokenizer keeps: only white space, control and
    format characters (``\u200b``, ``\x07``), which Google's and SentencePiece's
    tokenizers drop."""
    return all(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf") for ch in text)


def read_pairs(path: str | os.PathLike[str], targets: bool = True) -> list[Pair]:
    """The pairs of a JSONL file: one object per line with a string ``source`` and, when
    ``targets``, a string ``target`` (blank lines skipped).

    Raises:
        FileNotFoundError, DataError: a missing file, a line that is not UTF-8 or not a JSON
            object, a missing or empty ``source`` / ``target``, an unknown key (named with
            the file and line), or no pair at all.

    Example:
        >>> from kerasbert import shipped
        >>> pairs = read_pairs(shipped.data_file("peoples_daily_seq2seq", "dev"))
        >>> len(pairs), pairs[1].target
        (409, '辛业江')
    """
    path = os.fspath(path)
    needed = KEYS if targets else KEYS[:1]
    pairs = []
    for number, line in read_lines(path, "data file"):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        row = json_object(line, where, "a JSON object with "
                                       f"{' and '.join(repr(k) for k in needed)}")
        problem = unknown_keys(row, KEYS + ("id",))
        if problem:
            raise DataError(f"bad row in {where}: {problem}")
        for key in needed:
            value = row.get(key)
            if not isinstance(value, str) or not value.strip():
                got = "missing" if key not in row else (
                    "empty" if isinstance(value, str) else f"a {type(value).__name__}")
                raise DataError(f"bad row in {where}: {key!r} must be a non-empty string "
                                f"(got {got})")
            problem = lone_surrogate(value, repr(key))
            if problem:
                raise DataError(f"bad row in {where}: {problem}")
            if _invisible(value):
                raise DataError(f"bad row in {where}: {key!r} holds only control or invisible "
                                f"characters ({value!r}), nothing once tokenized")
        target = row.get("target")
        pairs.append(Pair(row["source"], target if isinstance(target, str) else None,  # type: ignore[arg-type]
                          number))
    if not pairs:
        raise DataError(f"data file in {path}: no pair, every line is blank (one JSON object "
                        "with 'source' and 'target' per line is expected)")
    return pairs


def training_arrays(tokenizer: Any, pairs: Iterable[Pair], maxlen: int,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(token_ids, segment_ids, next_ids, cut)``: each pair as ``[CLS] source [SEP] target
    [SEP]`` (segments 0 and 1), ``next_ids`` the id each position must predict (the next
    target token, 0 elsewhere) and ``cut`` the number of pairs that lost tokens to
    ``maxlen``.

    Example:
        >>> from kerasbert.text.tokenizer import Tokenizer
        >>> tokenizer = Tokenizer("checkpoints/chinese_L-12_H-768_A-12/vocab.txt")
        >>> ids, segments, next_ids, cut = training_arrays(
        ...     tokenizer, [Pair("语言", "模型", 1)], 16)
        >>> ids[0].tolist(), segments[0].tolist(), next_ids[0].tolist(), cut
        ([101, 6427, 6241, 102, 3563, 1798, 102], [0, 0, 0, 0, 1, 1, 1], \
[0, 0, 0, 3563, 1798, 102, 0], 0)
    """
    rows: list[tuple[list[int], list[int]]]
    rows, cut = [], 0
    for pair in pairs:
        whole = tokenizer.encode(pair.source, pair.target)[0]
        ids, segments = tokenizer.encode(pair.source, pair.target, maxlen=maxlen)
        cut += len(ids) < len(whole)
        rows.append((ids, segments))
    token_ids = sequence_padding([ids for ids, _ in rows], dtype="int32")
    segment_ids = sequence_padding([segments for _, segments in rows], dtype="int32")
    # Position t predicts token t + 1 where that token is in the target (segment 1).
    next_ids = np.zeros_like(token_ids)
    next_ids[:, :-1] = np.where(segment_ids[:, 1:] == 1, token_ids[:, 1:], 0)
    return token_ids, segment_ids, next_ids, cut


@keras.saving.register_keras_serializable(package=names.SERIALIZATION_PACKAGE)
class UnilmLoss(keras.losses.Loss):
    """The mean cross-entropy of the target tokens: ``y_true`` ``[batch, length]`` holds the
    id each position must predict (0: not a target position), ``y_pred`` the MLM head's
    (T5: the decoder's) probabilities ``[batch, length, vocab]``."""

    def __init__(self, name: str = "unilm_loss",
                 reduction: str = "sum_over_batch_size") -> None:
        super().__init__(name=name, reduction=reduction)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        # Keras would weigh the loss by the padding mask of y_pred: the target mask is ours.
        y_true = ops.cast(y_true, "int32")
        weights = ops.cast(y_true > 0, "float32")
        losses = keras.losses.sparse_categorical_crossentropy(
            y_true, ops.cast(y_pred, "float32"))
        return ops.sum(losses * weights) / ops.maximum(ops.sum(weights), 1.0)

    def call(self, y_true: Any, y_pred: Any) -> Any:
        return self(y_true, y_pred)


def _normal(text: str) -> str:
    """A text as it is scored: lower case, without spaces."""
    return "".join(text.lower().split())


class _Characters:
    """rouge-score's tokenizer interface: a text's characters, spaces left out."""

    def tokenize(self, text: str) -> list[str]:
        return list(_normal(text))


def scores(outputs: Sequence[str], targets: Sequence[str]) -> dict[str, Any]:
    """ROUGE-L (F measure on characters, averaged), corpus BLEU (sacrebleu, ``zh``
    tokens) and exact match of ``outputs`` against ``targets``, all in percent.

    Example:
        >>> result = scores(["江泽民", "北京"], ["江泽民", "北京市"])
        >>> round(result["rouge_l"], 2), result["exact"], result["pairs"]
        (90.0, 50.0, 2)
    """
    import sacrebleu
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_Characters())
    rouge = [scorer.score(target, output)["rougeL"].fmeasure if _normal(target) else 0.0
             for output, target in zip(outputs, targets)]
    bleu = sacrebleu.corpus_bleu([_normal(o) for o in outputs], [[_normal(t) for t in targets]],
                                 tokenize="zh")
    exact = [_normal(o) == _normal(t) for o, t in zip(outputs, targets)]
    return {"rouge_l": 100 * float(np.mean(rouge)), "bleu": float(bleu.score),
            "exact": 100 * float(np.mean(exact)), "pairs": len(targets)}


def copy_baseline(sources: Iterable[str], length: int) -> list[str]:
    """Each source's first ``length`` characters (spaces left out): the output of copying."""
    return [_normal(source)[:length] for source in sources]


def check_family(options: Seq2SeqOptions) -> bool:
    """Raises :class:`OptionError` when the run's family is neither a BERT family that can
    train UniLM and decode (its class's ``unilm_seq2seq``, with absolute positions) nor an
    encoder-decoder (T5), or when its tokenizer flags do not fit it
    (:func:`kerasbert.tasks.seq2seq.t5.check_tokenizer_flags`); returns whether it is an
    encoder-decoder.
    """
    from kerasbert.models.families import DEFAULT_FAMILY, family_class

    config = run_config(options)
    family = config.family or DEFAULT_FAMILY
    kind = family_class(family)
    encoder_decoder = is_encoder_decoder(config)
    if not encoder_decoder and (not kind.unilm_seq2seq or kind.position != "absolute"):
        where = "--model" if options.model else options.config
        raise OptionError(f"invalid family {family!r} in {where}: --task seq2seq trains UniLM "
                          "on a BERT-family model with absolute positions and an MLM head "
                          "(bert, roberta) or a T5 (t5, t5.1.1, mt5.1.1); ALBERT's shared "
                          "layers, RoFormer's rotary and NEZHA's relative positions, ELECTRA "
                          "(a discriminator, no MLM head) and GPT are not supported")
    seq2seq_t5.check_tokenizer_flags(options, family, encoder_decoder)
    return encoder_decoder


def check_lengths(options: Seq2SeqOptions) -> None:
    """Raises :class:`OptionError` when a source of ``maxlen`` tokens and the generated ones
    would run past the model's positions."""
    config = run_config(options)
    if is_encoder_decoder(config):  # relative positions: no table to run past
        return
    if options.maxlen + options.max_new_tokens > config.max_position_embeddings:
        raise OptionError(f"invalid value {options.max_new_tokens} in max_new_tokens: with "
                          f"maxlen {options.maxlen}, generation would run past the "
                          f"{config.max_position_embeddings} positions of {options.config}")


def generate_texts(model: keras.Model, tokenizer: Any, sources: Iterable[str],
                   options: Seq2SeqOptions, progress: bool = False) -> tuple[list[str], int]:
    """``(outputs, cut)``: the text generated for each source (see the module's text) and
    the number of sources cut to ``maxlen``."""
    from kerasbert.inference.generation import generate

    prompts: list[list[int]]
    prompts, cut = [], 0
    for source in sources:
        ids = _encoded(tokenizer, source, options.maxlen)
        cut += len(ids) < len(_encoded(tokenizer, source))
        prompts.append(ids)
    count = len(prompts)
    if count > CHUNK:
        # The last chunk filled up with the longest source: its shape is then the other
        # chunks' (CHUNK rows, the longest width), and the compiled program is reused,
        # which costs less than compiling one for a short chunk.
        prompts += [max(prompts, key=len)] * (-count % CHUNK)
    chunks: Iterable[int] = range(0, len(prompts), CHUNK)
    if progress:
        from tqdm import tqdm

        chunks = tqdm(chunks, desc="generating", unit="chunk", leave=False)
    outputs: list[str] = []
    for start in chunks:
        new = generate(model, prompts[start:start + CHUNK], max_new_tokens=options.max_new_tokens,
                       end_id=_end_id(tokenizer), num_beams=options.num_beams)
        outputs += [tokenizer.decode(ids) for ids in new]
    return outputs[:count], cut


def _encoded(tokenizer: Any, text: str, maxlen: int | None = None) -> list[int]:
    """A source's ids as the model reads it: ``[CLS] text [SEP]`` (UniLM), or the pieces and
    ``</s>`` (T5, whose tokenizer is a :class:`SentencePieceText`)."""
    if isinstance(tokenizer, SentencePieceText):
        return tokenizer.encode(text, maxlen)
    return tokenizer.encode(text, maxlen=maxlen)[0]


#: The most unknown tokens (``[UNK]``, ``<unk>``) a tokenizer may make of the training pairs'
#: first rows; more and the vocabulary is not for the data's language.
UNKNOWN_SHARE = 0.5
_SAMPLE = 200


def check_unknown_share(tokenizer: Any, pairs: Sequence[Pair], options: Seq2SeqOptions) -> None:
    """Refuses a vocabulary or SentencePiece model that reads most of the first training
    pairs as unknown tokens (another language's: every Chinese source became ``[3, 2]``,
    and the run "succeeded" at ROUGE-L 0), before the first step.

    Raises:
        OptionError: ``vocabulary in spiece.model: 97% of the text of the first 200 pairs
            of train.jsonl is unknown (<unk>); ...``.
    """
    texts = [text for p in pairs[:_SAMPLE] for text in (p.source, p.target)]
    if isinstance(tokenizer, SentencePieceText):
        # SentencePiece reads a run of unknown characters as one <unk>: count characters.
        model, where, name = tokenizer.model, options.sp_model, "<unk>"
        sizes = [(len(piece.lstrip("\u2581")), i == model.unk_id()) for text in texts
                 for piece, i in zip(model.encode_as_pieces(text), model.encode_as_ids(text))]
    else:
        unknown, where, name = tokenizer.token_to_id("[UNK]"), options.vocab, "[UNK]"
        sizes = [(1, i == unknown) for text in texts for i in tokenizer.encode(text)[0][1:-1]]
    share = sum(n for n, unknown in sizes if unknown) / max(sum(n for n, _ in sizes), 1)
    if share > UNKNOWN_SHARE:
        raise OptionError(
            f"vocabulary in {where}: {share:.0%} of the text of the first "
            f"{min(len(pairs), _SAMPLE)} pairs of {options.train} is unknown ({name}); it is "
            "not a vocabulary of the data's language: give the model's own")


def _end_id(tokenizer: Any) -> int:
    """The id that ends a generated text: ``[SEP]`` (UniLM) or ``</s>`` (T5)."""
    if isinstance(tokenizer, SentencePieceText):
        return tokenizer.end_id
    return tokenizer.token_to_id("[SEP]")


def _score_pairs(model: keras.Model, tokenizer: Any, pairs: Sequence[Pair],
                 options: Seq2SeqOptions,
                 progress: bool = False) -> tuple[dict[str, Any], list[str]]:
    outputs, cut = generate_texts(model, tokenizer, [p.source for p in pairs], options, progress)
    return {**scores(outputs, [p.target for p in pairs]), "cut_sources": cut}, outputs


class _Inputs:
    """A run's pairs and training arrays, all read before the directory is made."""

    encoder_decoder: bool
    tokenizer: Any
    pairs: dict[str, list[Pair]]
    arrays: list[np.ndarray]  # token (T5: encoder) ids, segment (decoder) ids, next ids
    cut: int
    steps: int
    copy_length: int
    dev_scores: DevScores

    @classmethod
    def read(cls, options: Seq2SeqOptions) -> "_Inputs":
        self = cls()
        self.encoder_decoder = check_family(options)
        self.tokenizer = check_model_files(options)
        check_lengths(options)
        self.pairs = {"train": read_pairs(options.train)[:options.max_train_examples or None],
                      "dev": read_pairs(options.dev)}
        if options.test:
            self.pairs["test"] = read_pairs(options.test)
        check_unknown_share(self.tokenizer, self.pairs["train"], options)
        check_checkpoint(options)
        rows = seq2seq_t5.training_arrays if self.encoder_decoder else training_arrays
        *self.arrays, self.cut = rows(self.tokenizer, self.pairs["train"], options.maxlen)
        self.steps = -(-len(self.arrays[0]) // options.batch_size)
        self.copy_length = max(1, round(statistics.median(
            len(_normal(p.target)) for p in self.pairs["train"])))
        return self


def _write_results(options: Seq2SeqOptions, inputs: _Inputs,
                   recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
    summary: dict[str, Any] = {"best_epoch": recorder.best_epoch,
                               "train_pairs": len(inputs.pairs["train"]),
                               "train_pairs_cut": inputs.cut, "copy_length": inputs.copy_length}
    for split in ("dev", "test"):
        if split in inputs.pairs:
            pairs = inputs.pairs[split]

            def scored(pairs: list[Pair] = pairs) -> dict[str, Any]:
                return _score_pairs(model, inputs.tokenizer, pairs, options)[0]

            summary[split] = (inputs.dev_scores.result(recorder.best_epoch, scored)
                              if split == "dev" else scored())
            summary[f"{split}_copy_baseline"] = scores(
                copy_baseline([p.source for p in pairs], inputs.copy_length),
                [p.target for p in pairs])
    return summary


def _line(result: dict[str, Any]) -> str:
    return (f"ROUGE-L {result['rouge_l']:.2f}, BLEU {result['bleu']:.2f}, exact match "
            f"{result['exact']:.2f}")


class Seq2Seq(Task):
    """``--task seq2seq``: UniLM or T5 generation, chosen by dev ROUGE-L."""

    name = "seq2seq"
    monitor = MONITOR

    def read_inputs(self, options: Seq2SeqOptions) -> _Inputs:
        return _Inputs.read(options)

    def training_arrays(self, options: Seq2SeqOptions,
                        inputs: _Inputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return inputs.arrays  # type: ignore[return-value]  # a list of the three

    def build_model(self, options: Seq2SeqOptions, inputs: _Inputs) -> keras.Model:
        from kerasbert.models.build import build_transformer_model

        # T5's decoder is a language model already; UniLM is BERT under UniLM's mask.
        mask: dict[str, Any] = {} if inputs.encoder_decoder else {"application": "unilm"}
        return build_transformer_model(run_config(options), options.checkpoint, model=options.model,
                                       dropout_rate=options.dropout, dtype=run_dtype(options),
                                       recompute=run_recompute(options), **mask)

    def loss(self, model: keras.Model) -> Any:
        return UnilmLoss()

    def dev_scoring(self, options: Seq2SeqOptions,
                    inputs: _Inputs) -> tuple[Any, list[Any]]:
        def dev_rouge(model: keras.Model) -> tuple[dict[str, Any], dict[str, Any]]:
            result, _ = _score_pairs(model, inputs.tokenizer, inputs.pairs["dev"], options)
            return {MONITOR: result["rouge_l"], "val_exact": result["exact"]}, result

        inputs.dev_scores = DevScores(dev_rouge)
        return None, [inputs.dev_scores]

    def write_results(self, options: Seq2SeqOptions, inputs: _Inputs,
                      recorder: RunRecorder, model: keras.Model) -> dict[str, Any]:
        return _write_results(options, inputs, recorder, model)

    def train_report(self, options: Seq2SeqOptions, summary: dict[str, Any]) -> list[str]:
        shown = "test" if "test" in summary else "dev"
        lines = [f"\n{shown} {_line(summary[shown])} (best epoch {summary['best_epoch']})",
                 f"copying each source's first {summary['copy_length']} characters: "
                 f"{_line(summary[f'{shown}_copy_baseline'])}"]
        if summary["train_pairs_cut"]:
            lines.append(f"{summary['train_pairs_cut']} training pairs were longer than --maxlen "
                         f"({options.maxlen}) and lost tokens")
        return [*lines, run_directory_line(options, "bert_model.ckpt")]

    def evaluation_report(self, metrics: dict[str, Any]) -> list[str]:
        cut = (f" ({metrics['cut_sources']} sources cut to --maxlen)"
               if metrics["cut_sources"] else "")
        return [f"pairs {metrics['pairs']}  {_line(metrics)}{cut}"]


class Run(FinishedRun):
    """A finished seq2seq run directory, for evaluate / predict / export.

    Raises:
        RunError: not a finished seq2seq run, or a missing or corrupt file (named).
    """

    def check_model(self) -> None:
        layers = {layer.name for layer in self.model.layers}
        if names.MLM_ACTIVATION not in layers and names.DECODER_INPUT_TOKEN not in layers:
            raise RunError(f"model in {os.path.join(self.run_dir, 'model.keras')}: not a "
                           f"seq2seq model (it has no {names.MLM_ACTIVATION} and no "
                           f"{names.DECODER_INPUT_TOKEN})")

    def evaluate(self, path: str | os.PathLike[str], progress: bool = False) -> dict[str, Any]:
        """ROUGE-L, BLEU and exact match (percent) on a JSONL file of pairs, and the number
        of sources cut to ``maxlen``."""
        return _score_pairs(self.model, self.tokenizer, read_pairs(path), self.options,
                            progress)[0]

    def predict(self, texts: Iterable[str] | None = None,
                path: str | os.PathLike[str] | None = None,
                progress: bool = False) -> list[dict[str, Any]]:
        """``[{"source", "output"}]`` for ``texts``, or for the sources of a file: JSONL with
        ``source`` (a ``target`` is allowed and not used) or plain ``.txt``, one source per
        line."""
        if path is not None:
            if os.fspath(path).lower().endswith(TEXT_SUFFIXES):
                texts = read_texts(path).texts
            else:
                texts = [pair.source for pair in read_pairs(path, targets=False)]
        texts = list(texts)  # type: ignore[arg-type]  # given where no path is
        if not texts:
            return []
        outputs, _ = generate_texts(self.model, self.tokenizer, texts, self.options, progress)
        return [{"source": source, "output": output} for source, output in zip(texts, outputs)]

    def export(self, directory: str | os.PathLike[str], overwrite: bool = False,
               format: str = "saved_model", **options: Any) -> list[str]:
        """Writes the model for serving, a SavedModel whose ``generate`` signature takes raw
        sources (:mod:`kerasbert.tasks.seq2seq.export`); returns the files written.

        Raises:
            RunError: a format other than ``saved_model``.
        """
        settings = {"maxlen": self.options.maxlen,
                    "max_new_tokens": self.options.max_new_tokens,
                    "num_beams": self.options.num_beams}
        vocab = self.tokenizer.path if isinstance(self.tokenizer, SentencePieceText) else None
        return export_saved_model(self, "kerasbert.tasks.seq2seq.export", directory,
                                  overwrite, format, dict(options, **settings), vocab=vocab)


Seq2Seq.run_class = Run
TASK = Seq2Seq()
