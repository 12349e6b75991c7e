"""What every task's run shares: the checks of its model files, its encoder, the files it
writes beside ``model.keras``, and the opening of a finished run directory.

Each task's folder adds its data, its head and its metrics
(:class:`kerasbert.tasks.base.Task`); the model side of a run is the same for all of them.
"""

import os
from collections.abc import Iterator
from typing import Any, cast

from kerasbert import files
from kerasbert.hardware import compute_policy
from kerasbert.models.build import build_transformer_model
from kerasbert.models.config import BertConfig, check_maxlen, check_vocab_fits
from kerasbert.models.layers import hierarchical_alpha
from kerasbert.tasks.options import TaskOptions, saved_options
from kerasbert.training.options import MIXED_POLICIES
from kerasbert.training.rundir import (
    ADAPTERS_FILE,
    MODEL_FILE,
    RunError,
    check_finished,
    load_run_model,
    read_json,
)
from kerasbert.training.rundir import TRAIN_FINISHED_FILE as FINISHED_FILE
from kerasbert.training.rundir import TRAIN_OPTIONS_FILE as OPTIONS_FILE

#: A T5 run's SentencePiece model, as Google's T5 checkpoints name it.
SP_MODEL_FILE = "spiece.model"
__all__ = ["FinishedRun", "OPTIONS_FILE", "build_encoder", "check_checkpoint", "check_finished",
           "check_model_files", "describe_positions", "is_encoder_decoder", "load_run_model",
           "read_options", "run_config", "run_directory_line", "run_dtype", "run_recompute",
           "run_tokenizer",
           "write_model_files"]


def check_model_files(options: TaskOptions) -> Any:
    """Reads the run's config and vocabulary (a T5's: its SentencePiece model,
    ``options.sp_model``) and checks them against each other and ``maxlen``; returns the
    :class:`~kerasbert.text.tokenizer.Tokenizer` (a T5's:
    :class:`~kerasbert.text.pieces.SentencePieceText`).

    Raises:
        ValueError: a bad config or vocabulary, a vocabulary larger than ``vocab_size``, or
            ``maxlen`` beyond the position table (each naming the file or flag).
    """
    config = run_config(options)
    sp_model = getattr(options, "sp_model", None)
    vocab = sp_model or options.vocab
    tokenizer = _tokenizer(vocab, pieces=bool(sp_model))
    check_maxlen(config, options.maxlen, hierarchical=config.hierarchical_position is not None)
    check_vocab_fits(config, tokenizer.vocab_size, vocab)
    return tokenizer


def run_config(options: TaskOptions) -> BertConfig:
    """The config of the run's model (a :class:`~kerasbert.models.config.BertConfig`), as
    resolution read it (:func:`kerasbert.tasks.options.model_config`: hierarchical
    positions added where ``maxlen`` needs them).

    Raises:
        ValueError: ``options`` are not resolved (``options.resolved()`` first).
    """
    if options.model_config is None:
        raise ValueError("options without a config: resolve them first (options.resolved())")
    # Its field says object (validate reads a field's type); resolution puts a BertConfig.
    return cast(BertConfig, options.model_config)


def describe_positions(options: TaskOptions) -> str | None:
    """One line saying that the run reads its position table hierarchically, or None:
    ``--maxlen 2048 exceeds the checkpoint's 512 positions: hierarchical positions (alpha
    0.4)``."""
    config = run_config(options)
    alpha = config.hierarchical_position
    if alpha is None or options.maxlen <= config.max_position_embeddings:
        return None
    return (f"--maxlen {options.maxlen} exceeds the checkpoint's "
            f"{config.max_position_embeddings} positions: hierarchical positions "
            f"(alpha {hierarchical_alpha(alpha):g})")


def _tokenizer(path: str, pieces: bool) -> Any:
    """The tokenizer of a ``vocab.txt``, or with ``pieces`` of a SentencePiece model (T5's)."""
    from kerasbert.text.pieces import SentencePieceText
    from kerasbert.text.tokenizer import Tokenizer

    return SentencePieceText(path) if pieces else Tokenizer(path)


def check_checkpoint(options: TaskOptions) -> None:
    """Raises when the run's ``checkpoint`` (if any) is not there (see ``resolve_prefix``)."""
    if options.checkpoint:
        from kerasbert.checkpoints.io import resolve_prefix

        resolve_prefix(options.checkpoint)


def build_encoder(options: TaskOptions) -> Any:
    """The run's BERT (its family, config, checkpoint, dropout and precision), as a
    :class:`~kerasbert.models.families.base.Transformer`."""
    return build_transformer_model(run_config(options), options.checkpoint, model=options.model,
                                   dropout_rate=options.dropout, return_keras_model=False,
                                   dtype=run_dtype(options), recompute=run_recompute(options))


def run_dtype(options: TaskOptions) -> str | None:
    """``dtype=`` of the run's model: the mixed policy ``--mixed-precision`` names
    (``"mixed_float16"``, ``"mixed_bfloat16"``), as this machine runs it
    (:func:`kerasbert.hardware.compute_policy`), or None: float32. ``train`` has already
    recorded what runs (:func:`kerasbert.training.options.running_precision`)."""
    policy = MIXED_POLICIES.get(getattr(options, "mixed_precision", None))  # type: ignore[arg-type]
    return compute_policy(policy, "--mixed-precision") if policy else None


def run_recompute(options: TaskOptions) -> bool | None:
    """``recompute=`` of the run's model: True with ``--recompute``, else None (as
    ``RECOMPUTE`` in the environment says)."""
    return True if getattr(options, "recompute", False) else None


def write_model_files(options: TaskOptions, model: Any) -> None:
    """Writes ``bert_config.json``, ``vocab.txt`` (a T5's: its SentencePiece model as
    ``spiece.model``) and ``bert_model.ckpt`` (the fine-tuned weights under Google's names;
    a T5's under Mesh TensorFlow's, as bert4keras writes them; not for a LoRA run, whose
    weights are its base checkpoint and its adapters) into the run directory."""
    from kerasbert.models.loading import save_weights_as_checkpoint

    output = options.output
    config = run_config(options)
    config.to_json_file(os.path.join(output, "bert_config.json"))
    sp_model = getattr(options, "sp_model", None)
    files.copy_file(sp_model or options.vocab,
                    os.path.join(output, SP_MODEL_FILE if sp_model else "vocab.txt"))
    if getattr(options, "lora", None):  # its weights are the base's and its adapters' file
        return
    # t5.1.1 and mT5 have the same layers: the family says whose variable names to write.
    save_weights_as_checkpoint(model, os.path.join(output, "bert_model.ckpt"),
                               family=config.family if is_encoder_decoder(config) else None)


def run_directory_line(options: TaskOptions, *names: str) -> str:
    """The last line ``kerasbert train`` prints: the run directory and its files,
    ``metrics.json`` and the model's file first, then ``names``; a LoRA run's model file is
    its adapters and head, and it writes no ``bert_model.ckpt``."""
    lora = getattr(options, "lora", None)
    shown = ["metrics.json", ADAPTERS_FILE if lora else MODEL_FILE,
             *(name for name in names if not (lora and name == "bert_model.ckpt"))]
    line = f"run directory: {options.output} ({', '.join(shown)})"
    return line + (f"; LoRA rank {lora} on the base {options.checkpoint}" if lora else "")


def is_encoder_decoder(config: BertConfig) -> bool:
    """Whether a :class:`~kerasbert.models.config.BertConfig`'s family is an encoder-decoder
    (T5's: ``t5``, ``t5.1.1``, ``mt5.1.1``; its class's ``encoder_decoder``)."""
    from kerasbert.models.families import DEFAULT_FAMILY, family_class

    return family_class(config.family or DEFAULT_FAMILY).encoder_decoder


def run_tokenizer(run_dir: str, model: Any) -> Any:
    """The tokenizer of a run's ``vocab.txt`` (a T5 run's: its ``spiece.model``), refused
    when it has more ids than ``model`` has embedding rows (a vocabulary replaced after
    training would fail in the middle of a batch).

    Raises:
        RunError: ``vocab in runs/x/vocab.txt: 120 tokens, but the model has 100 embedding
            rows; ...``.
    """
    from kerasbert.models.names import EMBEDDING_TOKEN

    path = os.path.join(run_dir, SP_MODEL_FILE)
    pieces = os.path.exists(path)
    if not pieces:
        path = os.path.join(run_dir, "vocab.txt")
    tokenizer = _tokenizer(path, pieces)
    rows = next((layer.input_dim for layer in _layers(model) if layer.name == EMBEDDING_TOKEN),
                None)
    if rows is not None and tokenizer.vocab_size > rows:
        raise RunError(f"vocab in {path}: {tokenizer.vocab_size} tokens, but the model has "
                       f"{rows} embedding rows; is it the run's own vocabulary?")
    return tokenizer


def _layers(model: Any) -> Iterator[Any]:
    """Every layer of ``model``, those of models inside it too."""
    for layer in model.layers:
        yield layer
        if hasattr(layer, "layers"):
            yield from _layers(layer)


class FinishedRun:
    """What a task's ``Run`` opens first: a finished run directory's options, its model
    (checked by :meth:`check_model`) and its tokenizer.

    Raises:
        RunError: not a finished run, or a missing or corrupt file (named).
    """

    def __init__(self, run_dir: str | os.PathLike[str], accept_changed: bool = False) -> None:
        self.run_dir = run_dir = os.fspath(run_dir)
        check_finished(run_dir, finished_file=FINISHED_FILE, accept_changed=accept_changed)
        self.options = read_options(run_dir)
        self.model = load_run_model(run_dir, accept_changed)
        self.check_model()
        self.tokenizer = run_tokenizer(run_dir, self.model)

    def check_model(self) -> None:
        """Raises ``RunError`` when ``self.model`` is not the task's (nothing by default)."""


# Any: the class is the saved task's, which the task's Run reads its own fields of.
def read_options(run_dir: str) -> Any:
    """The options a run saved, as its task's class (keys of other versions and tasks left
    out).

    Raises:
        RunError: the file is missing, corrupt or not a run's options.
    """
    path = os.path.join(run_dir, OPTIONS_FILE)
    saved = read_json(path, "options")
    if not isinstance(saved, dict) or "output" not in saved:
        raise RunError(f"options in {path}: not the options of a kerasbert run")
    return saved_options(saved)


def export_saved_model(run: Any, module: str, directory: str | os.PathLike[str],
                       overwrite: bool, format: str, options: dict[str, Any],
                       vocab: str | None = None) -> list[str]:
    """A run's ``export``, for the tasks that export a SavedModel only: ``module``'s
    ``export`` (e.g. ``"kerasbert.tasks.ner.export"``), given the run's ``vocab.txt`` or
    ``vocab`` (a T5 run's SentencePiece model).

    Raises:
        RunError: ``format`` is not ``saved_model`` (named with the task's runs).
    """
    import importlib

    if format not in run.options.FORMATS:
        raise RunError(f"invalid value {format!r} in --format: {run.options.task} runs export "
                       f"as {' or '.join(run.options.FORMATS)} only")
    export = importlib.import_module(module).export
    return export(run.model, vocab or os.path.join(run.run_dir, "vocab.txt"), directory,
                  overwrite=overwrite, source=run.run_dir, **options)
