"""One schema for the options of a run: the Python API and the command line share it.

A run's options are a dataclass whose fields carry their help and their rule
(:func:`option`); :func:`validate` checks every value before any work starts, and
:func:`add_arguments` makes the command-line flags from the same fields, so a rule or
a default is written once.

Example:
    >>> try:
    ...     validate(RunOptions(output="runs/x", batch_size=0))
    ... except OptionError as error:
    ...     print(error)
    invalid value 0 in batch_size: must be an integer of at least 1
"""

import argparse
import copy
import dataclasses
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from kerasbert.hardware import compute_policy
from kerasbert.models.families import FAMILIES
from kerasbert.models.names import LORA_TARGETS
from kerasbert.presets.table import DEFAULTS_FILE as MODEL_DEFAULTS_FILE
from kerasbert.presets.table import names as preset_names

if TYPE_CHECKING:
    import argparse

BASE_LR = 2e-5  # BERT-base's fine-tuning rate, for models that carry no defaults

#: A class of run options: :func:`running_precision` and :func:`from_arguments` give one back.
_Options = TypeVar("_Options", bound="RunOptions")


class OptionError(ValueError):
    """An option outside its rule; the message names the option, the value and the rule."""


def option(default: Any = None, help: str = "", rule: "Rule | None" = None,
           required: bool = False,
           choices: Sequence[Any] | Callable[[], Sequence[Any]] | None = None,
           nargs: str | None = None, metavar: str | None = None, input: str | None = None,
           const: Any = None) -> Any:
    """A dataclass field of a run's options, with its help and rule.

    Args:
        default: the value when none is given.
        help: one line for ``--help``.
        rule: a :class:`Rule` the value must follow (None: any value of the field's type).
        required: the value must be given (``--flag`` is required on the command line).
        choices, nargs, metavar, const: as for ``argparse``; ``choices`` may be a function
            that returns them (a registry filled in below the field); ``const`` is the value
            of the flag given without one (with ``nargs="?"``).
        input: the value names files the run reads: ``"file"`` (one or a list) or
            ``"checkpoint"`` (a prefix); their fingerprints are recorded
            (:mod:`kerasbert.training.fingerprints`) and their paths compared as files.
    """
    return dataclasses.field(default=default, metadata={
        "help": help, "rule": rule, "required": required, "choices": choices, "nargs": nargs,
        "metavar": metavar, "input": input, "const": const})


def derived() -> Any:
    """A dataclass field of a run's options that resolution fills in from the others (the
    parsed model config): neither a flag nor saved in the run's options file, nor compared
    on ``--resume`` (:func:`saved_values`)."""
    return dataclasses.field(default=None, compare=False, repr=False,
                             metadata={"derived": True})


def saved_values(options: "RunOptions") -> dict[str, Any]:
    """The fields of ``options`` a run saves in its options file, as a JSON-ready dict (the
    :func:`derived` ones left out)."""
    return {field.name: copy.deepcopy(getattr(options, field.name))
            for field in dataclasses.fields(options) if not field.metadata.get("derived")}


@dataclasses.dataclass(frozen=True)
class Rule:
    """A value's type and range: ``kind`` int or float, ``low`` / ``high`` bounds."""

    kind: type
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def words(self) -> str:
        """The rule in words: "an integer of at least 1", "a finite number in [0, 1)"."""
        return ("an integer" if self.kind is int else "a finite number") + self.describe()

    def why_not(self, value: Any) -> str | None:
        """None if ``value`` follows the rule, else what it must be."""
        if self.kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
                  and math.isfinite(value))
        if not ok:
            return f"must be {self.words()}"
        low = self.low is None or (value > self.low if self.low_open else value >= self.low)
        high = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return None if low and high else f"must be {self.words()}"

    def describe(self) -> str:
        """The range in words: " of at least 1", " in [0, 1)"."""
        low, high = (None if v is None else int(v) if self.kind is int else f"{v:g}"
                     for v in (self.low, self.high))
        if self.low is not None and self.high is not None:
            return (f" in {'(' if self.low_open else '['}{low}, {high}"
                    f"{')' if self.high_open else ']'}")
        if self.low is not None:
            return f" {'above' if self.low_open else 'of at least'} {low}"
        return ""


COUNT = Rule(int, 1)
NON_NEGATIVE_INT = Rule(int, 0)
POSITIVE = Rule(float, 0, low_open=True)
NON_NEGATIVE = Rule(float, 0)
FRACTION = Rule(float, 0, 1, high_open=True)
SEED = Rule(int, 0, 2**32 - 1)
SEQUENCE_LENGTH = Rule(int, 3)  # [CLS] one token [SEP]


#: The 16-bit compute dtypes of ``--mixed-precision``, and the Keras policy of each.
MIXED_POLICIES = {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
PRECISIONS = tuple(MIXED_POLICIES)


def precision(value: Any) -> Any:
    """``mixed_precision`` as it is kept: a name of :data:`PRECISIONS` or None (float32).

    Runs saved before float16 was offered recorded a switch: ``true`` (bfloat16) or
    ``false``; those, and the Python API's ``mixed_precision=True``, read as today's
    value. Anything else is returned as it is, for :func:`validate` to refuse by name.

    Example:
        >>> precision(True), precision(False), precision("float16")
        ('bfloat16', None, 'float16')
    """
    if value is True:
        return "bfloat16"
    return None if value is False else value


def running_precision(options: _Options, warn: bool = True) -> _Options:
    """``options`` with ``mixed_precision`` as this machine runs it: None (float32) where
    :func:`kerasbert.hardware.compute_policy` runs a bfloat16 request in float32 (a CPU
    without bfloat16 units; its warning names ``--mixed-precision`` unless ``warn`` is
    False), so that a run's saved options record the precision that ran, and a resume on the
    same machine compares the same.

    Example:
        >>> from unittest import mock
        >>> with mock.patch("kerasbert.hardware.cpu_flags", lambda: frozenset({"avx2"})), \\
        ...         mock.patch("kerasbert.hardware.visible_gpus", lambda: []):
        ...     asked = FinetuneOptions(output="x", task="ner", mixed_precision="bfloat16")
        ...     running_precision(asked, warn=False).mixed_precision is None
        True
    """
    policy = MIXED_POLICIES.get(getattr(options, "mixed_precision", None))  # type: ignore[arg-type]
    if not policy or compute_policy(policy, "--mixed-precision", warn=False) != "float32":
        return options  # float16 on a CPU runs; the model's build says it is slow
    if warn:
        compute_policy(policy, "--mixed-precision")  # its one warning line
    # Only options with a mixed_precision field get here.
    return dataclasses.replace(options, mixed_precision=None)  # type: ignore[call-arg]


@dataclasses.dataclass(kw_only=True)
class RunOptions:
    """What every training run takes; :class:`FinetuneOptions` and :class:`PretrainOptions`
    add their own."""

    output: str = option(help="run directory to create (or to continue with --resume)",
                         required=True, metavar="DIR")
    model: str = option(None, f"model family, as bert4keras names it: {', '.join(FAMILIES)} "
                        "(default: the config's model_type, ALBERT's for an ALBERT config, "
                        "else bert)", choices=tuple(FAMILIES), metavar="FAMILY")
    maxlen: int = option(128, "tokens per sequence, [CLS] and [SEP] included", SEQUENCE_LENGTH)
    batch_size: int = option(32, "sequences per batch", COUNT)
    lr: float = option(2e-5, "peak learning rate", POSITIVE)
    warmup: float = option(0.1, "fraction of the updates spent warming the rate up", FRACTION)
    weight_decay: float = option(0.01, "AdamW weight decay (not on LayerNorm and biases)",
                                 NON_NEGATIVE)
    seed: int = option(42, "seed of the initialisation, data order and dropout", SEED)
    jit_compile: bool = option(False, "compile the train step with XLA (on JAX it always is; "
                               "on PyTorch: with torch.compile)")
    resume: bool = option(False, "continue an interrupted run in --output")
    restart: bool = option(False, "start the run in --output again from the beginning, "
                           "removing the earlier run's files (a kerasbert run directory only)")
    accept_changed: bool = option(False, "with --resume: continue although an input file "
                                  "changed since the run started")


def task_option(name: str) -> Any:
    """The ``task`` field of a task's options class: its own name, the one value it takes,
    so ``NerOptions(...)`` trains a tagger (:mod:`kerasbert.tasks` lists the tasks)."""
    return option(name, "what to train", choices=(name,))


@dataclasses.dataclass(kw_only=True)
class FinetuneOptions(RunOptions):
    """What every ``--task`` of ``kerasbert train`` takes; each task's options class adds
    the flags only it uses, and is saved as the run's ``train_config.json``.

    A task's class says, for the command line, what the task is (``SUMMARY``), which files
    it reads (``FILES``, the ``--train`` / ``--data`` formats), what ``predict`` takes
    (``TEXTS``; ``TEXT_LINES``: also a .txt file of one per line) and the signature of its
    SavedModel export (``SIGNATURE``; ``FORMATS``: the export formats it takes);
    ``SHIPPED`` names the :func:`kerasbert.shipped.data_file` dataset it trains on by
    default; ``LONG_TEXTS``: whether ``maxlen`` may run past the checkpoint's position table,
    read hierarchically. ``EXAMPLE``: the run folder and the words of the command line's examples
    (``{"run": "runs/ner", "train": "People's Daily NER", "predict": "江泽民..."}``).
    """

    SUMMARY = ""
    FILES = ""
    TEXTS = "texts"
    TEXT_LINES = True
    SIGNATURE = ""
    FORMATS: ClassVar[tuple[str, ...]] = ("saved_model",)
    SHIPPED = ""
    LONG_TEXTS = True
    EXAMPLE: ClassVar[dict[str, str]] = {}  # noqa: RUF012 (read only)

    task: str = option(None, "what to train", required=True)
    model: str = option(None, f"model family, as bert4keras names it ({', '.join(FAMILIES)}), or "
                        "a preset (see kerasbert presets; downloaded on first use, its config, "
                        "checkpoint and vocab are the run's) (default: the config's model_type, "
                        "else bert)", choices=lambda: (*FAMILIES, *preset_names()),
                        metavar="FAMILY|PRESET")
    train: str = option(None, "file to train on, in the task's format (default: the task's "
                        "shipped split)", metavar="FILE", input="file")
    dev: str = option(None, "file the best epoch is chosen on (required with --train)",
                      metavar="FILE", input="file")
    test: str = option(None, "file evaluated once at the end", metavar="FILE", input="file")
    config: str = option(None, "bert_config.json (default: the shipped kerasbert-zh-small)",
                         metavar="FILE", input="file")
    checkpoint: str = option(None, "Google checkpoint prefix to start from (with --config; "
                             "without it the encoder starts from random weights)",
                             metavar="PREFIX", input="checkpoint")
    vocab: str = option(None, "vocab.txt (default: beside the config)", metavar="FILE",
                        input="file")
    maxlen: int = option(None, "tokens per sequence, [CLS] and [SEP] included (default: the "
                         "model's for the task, else 128)", SEQUENCE_LENGTH)
    batch_size: int = option(None, "sequences per batch (default: the model's for the task, "
                             "else 32)", COUNT)
    lr: float = option(None, f"peak learning rate (default: the model's {MODEL_DEFAULTS_FILE} "
                       f"beside its config for the task, else {BASE_LR:g})", POSITIVE)
    epochs: int = option(None, "passes over the training data (default: the model's for the "
                         "task, else 3)", COUNT)
    grad_accum: int = option(1, "batches whose gradients are summed per update", COUNT)
    dropout: float = option(0.1, "dropout rate of the encoder and the task's head", FRACTION)
    patience: int = option(None, "epochs without a better dev score before stopping "
                           "(0: never stop early; default: the model's for the task, else 2)",
                           NON_NEGATIVE_INT)
    max_train_examples: int = option(None, "use only the first N training examples", COUNT,
                                     metavar="N")
    mixed_precision: str = option(
        None, "compute in 16 bits, weights kept in float32: bfloat16 (the flag alone; CPUs with "
        "AVX-512 BF16 or AMX, GPUs from A100 on) or float16 (GPUs without bfloat16 such as T4 "
        "and V100, with dynamic loss scaling) (default: float32)", choices=PRECISIONS,
        nargs="?", const="bfloat16")
    recompute: bool = option(False, "compute each attention and feed-forward layer's "
                             "activations again in the backward pass instead of keeping them: "
                             "less memory for long --maxlen, more time, the same gradients "
                             "(bert4keras's RECOMPUTE=1)")
    lora: int = option(None, "train LoRA adapters of rank RANK beside the checkpoint's frozen "
                       "weights, and the task's head in full; the run keeps only those (a few "
                       "MB) and reads the checkpoint again, checked by its fingerprint "
                       "(default: every weight trains)", COUNT, metavar="RANK")
    lora_targets: list = option(None, "with --lora: the projections given adapters, of "
                                f"{', '.join(LORA_TARGETS)}, or all (default: query value, as "
                                "LoRA's paper)", nargs="+", metavar="NAME")
    # Filled in by kerasbert.tasks.options.resolve, recorded in train_config.json; not a flag.
    # str, for validate() (which reads a field's type); None until it is filled in.
    weights: str = dataclasses.field(default=None)  # type: ignore[assignment]
    #: The model's config as the run builds it (a BertConfig, hierarchical positions added
    #: where ``maxlen`` needs them), read once by resolution; None before it.
    model_config: object = derived()
    #: The options taken from the model's ``finetune_defaults.json`` (none given), as
    #: resolution found them; None before it.
    defaults_taken: tuple = derived()

    def __post_init__(self) -> None:
        self.mixed_precision = precision(self.mixed_precision)


@dataclasses.dataclass(kw_only=True)
class PretrainOptions(RunOptions):
    """Everything ``kerasbert pretrain`` takes; saved as ``pretrain_config.json``."""

    config: str = option(None, "bert_config.json of the model to pretrain (its vocab_size is "
                         "replaced by the reduced vocabulary's)", required=True, metavar="FILE",
                         input="file")
    vocab: str = option(None, "full vocab.txt; the corpus's tokens are kept", required=True,
                        metavar="FILE", input="file")
    corpus: list = option(None, "labelled TSV/CSV/JSONL (its text column) or plain text, one "
                          "text per line", required=True, nargs="+", metavar="FILE",
                          input="file")
    dev: list = option(None, "text to measure MLM accuracy on at the end", nargs="+",
                       metavar="FILE", input="file")
    checkpoint: str = option(None, "Google checkpoint to start from (default: random init)",
                             metavar="PREFIX", input="checkpoint")
    text_column: str = option("text", "column of the text in labelled files", metavar="NAME")
    steps: int = option(10000, "optimizer updates in the whole run", COUNT)
    steps_per_epoch: int = option(200, "updates between backups (an epoch)", COUNT)
    lr: float = option(5e-4, "peak learning rate", POSITIVE)
    save_dtype: str = option("float32", "dtype of the written checkpoint (float16 halves its "
                             "size)", choices=("float32", "float16"))


def choices_of(meta: Mapping[str, Any]) -> Any:
    """The choices of a field's metadata (None: any value)."""
    choices = meta.get("choices")
    return choices() if callable(choices) else choices


def flag(name: str) -> str:
    """The command-line flag of a field: ``batch_size`` → ``--batch-size``."""
    return "--" + name.replace("_", "-")


def validate(options: "RunOptions", flags: bool = False) -> None:
    """Checks every field of ``options`` against its rule.

    Args:
        options: a :class:`RunOptions` dataclass.
        flags: name options as command-line flags (``--batch-size``), else as fields.

    Raises:
        OptionError: ``invalid value -4 in --batch-size: must be an integer of at least 1``.
    """
    name: Any  # each field's name in the loop, then the function that names a field
    for field in dataclasses.fields(options):
        meta, value = field.metadata, getattr(options, field.name)
        name = flag(field.name) if flags else field.name
        if meta.get("derived"):
            continue
        if value is None:
            if meta.get("required"):
                raise OptionError(f"missing value in {name}: it is required")
            continue
        why = meta["rule"].why_not(value) if meta.get("rule") else None
        if why is None and isinstance(value, str) and not value.strip():
            why = "must not be empty"
        if why is None and isinstance(value, (list, tuple)):
            why = ("must name at least one file" if not value else
                   "must not be empty" if not all(isinstance(v, str) and v.strip() for v in value)
                   else None)
        if why is None and choices_of(meta) and value not in choices_of(meta):
            why = f"must be one of {', '.join(map(str, choices_of(meta)))}"
        if why is None and field.type in ("str", str) and not isinstance(value, str):
            why = f"must be a string, not {type(value).__name__}"
        if why is None and field.type in ("bool", bool) and not isinstance(value, bool):
            why = f"must be true or false, not {value!r}"
        if why:
            shown = repr(value) if not isinstance(value, str) or value.strip() else "''"
            raise OptionError(f"invalid value {shown} in {name}: {why}")
    name = flag if flags else (lambda field: field)
    if getattr(options, "resume", False) and getattr(options, "restart", False):
        raise OptionError(f"conflicting options in {name('resume')} and {name('restart')}: "
                          "continue the run or start it again, not both")
    copies, maxlen = getattr(options, "prefix_copies", None), getattr(options, "maxlen", None)
    if copies and (copies < 3 or (maxlen and copies >= maxlen)):
        raise OptionError(f"invalid value {copies} in {name('prefix_copies')}: must be 0 (none) "
                          "or from 3 ([CLS], a token, [SEP]) to below "
                          f"{name('maxlen')}{f' ({maxlen})' if maxlen else ''}")
    targets = getattr(options, "lora_targets", None)
    if targets is not None and not getattr(options, "lora", None):
        raise OptionError(f"invalid option in {name('lora_targets')}: only with {name('lora')} "
                          "(the adapters' rank)")
    unknown = [target for target in targets or () if target not in (*LORA_TARGETS, "all")]
    if unknown or (targets and "all" in targets and len(targets) > 1):
        shown = unknown[0] if unknown else " ".join(targets)  # type: ignore[arg-type]  # a list
        raise OptionError(f"invalid value {shown!r} in {name('lora_targets')}: must be some of "
                          f"{', '.join(LORA_TARGETS)}, or all alone")
    if getattr(options, "accept_changed", False) and not getattr(options, "resume", False):
        raise OptionError(f"invalid option in {name('accept_changed')}: only with "
                          f"{name('resume')} (a new run records its inputs as they are)")


def integer(text: str) -> int:
    """argparse type: an integer (its name shows in argparse's messages)."""
    return int(text)


def argument_type(rule: Rule | None = None) -> Callable[[str], Any]:
    """The argparse ``type`` of a flag that no options class holds (``audit --num-labels``,
    ``export --version``): its text read as ``rule``'s kind and checked by the rule, in the
    words :func:`validate` gives a field (``invalid value 0 in --num-labels: must be an
    integer of at least 1``); without a rule, a text that is not empty.

    Example:
        >>> argument_type(COUNT)("3")
        3
    """
    def read(text: str) -> Any:
        if rule is None:
            if not text.strip():
                raise argparse.ArgumentTypeError("invalid value '': must not be empty")
            return text
        try:
            value = rule.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: must be "
                                             f"{rule.words()}") from None
        why = rule.why_not(value)
        if why:
            raise argparse.ArgumentTypeError(f"invalid value {value!r}: {why}")
        return value

    read.__name__ = "text" if rule is None else "integer" if rule.kind is int else "number"
    return read


def number(text: str) -> float:
    """argparse type: a number."""
    return float(text)


def add_arguments(parser: Any, options_class: type["RunOptions"],
                  only: Collection[str] | None = None) -> None:
    """Adds one flag per field of ``options_class`` to an ``argparse`` parser (or group);
    ``only``: the names of the fields to add (None: all)."""
    for field in dataclasses.fields(options_class):
        meta = field.metadata
        if "help" not in meta or (only is not None and field.name not in only):
            continue
        kind = field.type
        help_text = meta["help"]
        if kind is bool:
            parser.add_argument(flag(field.name), action="store_true", help=help_text)
            continue
        if meta.get("rule") is not None:
            help_text += f"; {meta['rule'].words()}"
        if meta.get("required"):
            help_text += " (required)"
        elif field.default is not None:
            help_text += f" (default: {field.default})"
        extra = {"const": meta["const"]} if meta.get("const") is not None else {}
        parser.add_argument(
            flag(field.name),
            type={int: integer, float: number}.get(kind, str),  # type: ignore[arg-type]
            default=field.default, required=bool(meta.get("required")), help=help_text,
            choices=choices_of(meta), nargs=meta.get("nargs"), metavar=meta.get("metavar"),
            **extra)


def from_arguments(options_class: type[_Options], arguments: "argparse.Namespace") -> _Options:
    """An ``options_class`` from an ``argparse`` namespace (fields it does not have ignored)."""
    names = {field.name for field in dataclasses.fields(options_class)}
    return options_class(**{k: v for k, v in vars(arguments).items() if k in names})
