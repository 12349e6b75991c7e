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

import dataclasses
import json
import math
import os

from kerasbert.models.families import FAMILIES
from kerasbert.presets.table import DEFAULT_KEYS as MODEL_DEFAULT_KEYS
from kerasbert.presets.table import DEFAULTS_FILE as MODEL_DEFAULTS_FILE
from kerasbert.presets.table import names as preset_names

BASE_LR = 2e-5  # BERT-base's fine-tuning rate, for models that carry no defaults
#: The options whose default depends on the model and the task (those a model folder's
#: finetune_defaults.json may set), and their values for a model that carries none.
FALLBACK_DEFAULTS = {"lr": BASE_LR, "epochs": 3, "patience": 2, "maxlen": 128, "batch_size": 32,
                     "prefix_copies": 0}


class OptionError(ValueError):
    """An option outside its rule; the message names the option, the value and the rule."""


def option(default=None, help="", rule=None, required=False, choices=None, nargs=None,
           metavar=None, input=None):
    """A dataclass field of a run's options, with its help and rule.

    Args:
        default: the value when none is given.
        help: one line for ``--help``.
        rule: a :class:`Rule` the value must follow (None: any value of the field's type).
        required: the value must be given (``--flag`` is required on the command line).
        choices, nargs, metavar: as for ``argparse``; ``choices`` may be a function that
            returns them (a registry filled in below the field).
        input: the value names files the run reads: ``"file"`` (one or a list) or
            ``"checkpoint"`` (a prefix); their fingerprints are recorded
            (:mod:`kerasbert.training.fingerprints`) and their paths compared as files.
    """
    return dataclasses.field(default=default, metadata={
        "help": help, "rule": rule, "required": required, "choices": choices, "nargs": nargs,
        "metavar": metavar, "input": input})


@dataclasses.dataclass(frozen=True)
class Rule:
    """A value's type and range: ``kind`` int or float, ``low`` / ``high`` bounds."""

    kind: type
    low: float = None
    high: float = None
    low_open: bool = False
    high_open: bool = False

    def words(self):
        """The rule in words: "an integer of at least 1", "a finite number in [0, 1)"."""
        return ("an integer" if self.kind is int else "a finite number") + self.describe()

    def why_not(self, value):
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

    def describe(self):
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


@dataclasses.dataclass(kw_only=True)
class RunOptions:
    """What every training run takes; :class:`TrainOptions` and :class:`PretrainOptions`
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
    jit_compile: bool = option(False, "compile the train step with XLA")
    resume: bool = option(False, "continue an interrupted run in --output")
    restart: bool = option(False, "start the run in --output again from the beginning, "
                           "removing the earlier run's files (a kerasbert run directory only)")
    accept_changed: bool = option(False, "with --resume: continue although an input file "
                                  "changed since the run started")


def task_option(name):
    """The ``task`` field, ``name`` by default: each task's options class names its own
    task, so ``NerOptions(...)`` trains a tagger."""
    return option(name, "what to train (each task's own flags are listed under it below)",
                  choices=lambda: TASKS)


@dataclasses.dataclass(kw_only=True)
class FinetuneOptions(RunOptions):
    """What every ``--task`` of ``kerasbert train`` takes; each task's options class adds
    the flags only it uses, and is saved as the run's ``train_config.json``.

    A task's class says, for the command line, what the task is (``SUMMARY``), which files
    it reads (``FILES``, the ``--train`` / ``--data`` formats) and what ``predict`` takes
    (``TEXTS``); ``SHIPPED`` names the :mod:`kerasbert.shipped` split it trains on by
    default.
    """

    SUMMARY = ""
    FILES = ""
    TEXTS = "texts"
    SHIPPED = "review_file"

    task: str = task_option("classification")
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
    mixed_precision: bool = option(False, "bfloat16 compute (float32 weights)")
    # Filled in by resolved(), recorded in train_config.json; not a flag.
    weights: str = dataclasses.field(default=None)

    def resolved(self):
        """Fills in the shipped model and the task's shipped split where none is given, the
        model's learning rate where none is given, and ``weights`` (``checkpoint`` or
        ``random``)."""
        from kerasbert import shipped

        values = dataclasses.asdict(self)
        if self.model and self.model not in FAMILIES:
            values.update(_preset_values(self))
        if not self.train:
            split = getattr(shipped, self.SHIPPED)
            values.update(train=split("train"), dev=self.dev or split("dev"),
                          test=self.test or split("test"))
        if not values["config"]:
            model_dir = shipped.model_dir()
            values.update(config=os.path.join(model_dir, "bert_config.json"),
                          checkpoint=self.checkpoint or os.path.join(model_dir, "bert_model.ckpt"),
                          vocab=self.vocab or os.path.join(model_dir, "vocab.txt"))
        if not values["dev"]:
            raise OptionError("missing file in --dev: the best epoch is chosen on a dev file")
        if not values["vocab"] and not values.get("sp_model"):
            values["vocab"] = os.path.join(os.path.dirname(values["config"]), "vocab.txt")
        defaults = model_defaults(values["config"], self.task)
        for key, fallback in FALLBACK_DEFAULTS.items():
            if key in values and values[key] is None:  # a task's own options: its fields
                values[key] = defaults.get(key, fallback)
        if _default_copies_too_long(self, values):  # no text is cut to a longer copy
            values["prefix_copies"] = 0
        values["weights"] = "checkpoint" if values["checkpoint"] else "random"
        return type(self)(**values)


def _default_copies_too_long(options, values):
    """Whether the model's default ``prefix_copies`` is no shorter than the ``maxlen`` the run
    takes (``--maxlen 32`` on a model whose copies are 32 tokens): then there is nothing to
    copy, and the default turns off instead of being refused as a given value is."""
    return (getattr(options, "prefix_copies", 0) is None and values.get("prefix_copies")
            and values["prefix_copies"] >= values["maxlen"])


def _preset_values(options):
    """The family, config, checkpoint and vocab of the preset ``--model`` names (downloaded
    on first use)."""
    from kerasbert.models.convert import download_preset
    from kerasbert.presets.table import get

    given = [flag(name) for name in ("config", "checkpoint", "vocab") if getattr(options, name)]
    if given:
        raise OptionError(f"conflicting options in --model and {' and '.join(given)}: the preset "
                          f"{options.model} brings its own config, checkpoint and vocab")
    folder = download_preset(options.model)
    return {"model": get(options.model).family,
            "config": os.path.join(folder, "bert_config.json"),
            "checkpoint": os.path.join(folder, "bert_model.ckpt"),
            "vocab": os.path.join(folder, "vocab.txt")}


@dataclasses.dataclass(kw_only=True)
class ClassificationOptions(FinetuneOptions):
    """``kerasbert train --task classification``: a text classifier on the [CLS] token."""

    SUMMARY = ("a text classifier on the [CLS] token (the default task); without --train and "
               "--config it fine-tunes the shipped kerasbert-zh-small on the shipped review "
               "split")
    FILES = "labelled TSV, CSV or JSONL with a header naming the columns"
    TEXTS = "texts to classify"

    # Named again (FinetuneOptions has it) because TrainOptions inherits from every task's
    # class, this one first: its task stays classification by default.
    task: str = task_option("classification")
    text_column: str = option("text", "column of the text", metavar="NAME")
    pair_column: str = option(None, "column of the second text of sentence pairs",
                              metavar="NAME")
    label_column: str = option("label", "column of the label", metavar="NAME")
    strategy: str = option(None, "distribution strategy (multi-worker: one process per host, "
                           "each with its TF_CONFIG)", choices=("mirrored", "multi-worker"))
    skip_bad_rows: bool = option(False, "skip and count bad rows instead of failing")
    prefix_copies: int = option(None, "also train on a copy of each example longer than N "
                                "tokens, cut to N as --maxlen cuts, with its label: short "
                                "texts to learn from where the training texts are long (0: "
                                "none; default: the model's for the task, else 0)",
                                NON_NEGATIVE_INT, metavar="N")


@dataclasses.dataclass(kw_only=True)
class NerOptions(FinetuneOptions):
    """``kerasbert train --task ner``: a named-entity tagger (CRF) on the sequence output."""

    SUMMARY = ("a named-entity tagger (BERT + CRF); without --train it takes the shipped "
               "People's Daily split")
    FILES = ("CoNLL (a token and its BIO, IOB1 or BIOES tag per line) or JSONL (text and "
             "entities at character offsets)")
    TEXTS = ("texts to tag (--input: plain text, a text per line; TSV, CSV or JSONL with a "
             "'text' column; or a tagged file)")
    SHIPPED = "ner_file"

    task: str = task_option("ner")
    no_crf: bool = option(False, "a softmax tagger instead of the CRF")


@dataclasses.dataclass(kw_only=True)
class QaOptions(FinetuneOptions):
    """``kerasbert train --task qa``: span question answering (start and end of the answer)."""

    SUMMARY = ("span question answering; without --train it takes the shipped Chinese QA set")
    FILES = "SQuAD v1.1 / v2.0 JSON (CMRC 2018 and DRCD too)"
    TEXTS = ("QUESTION CONTEXT pairs: a question, then the text to answer it from (--input: "
             "SQuAD JSON, JSONL with 'question' and 'context', or a question, a tab and its "
             "context per line)")
    SHIPPED = "qa_file"

    task: str = task_option("qa")


@dataclasses.dataclass(kw_only=True)
class Seq2SeqOptions(FinetuneOptions):
    """``kerasbert train --task seq2seq``: text generation (source to target), UniLM on a
    BERT-family model and its MLM head, or a T5 encoder-decoder (``t5``, ``t5.1.1``,
    ``mt5.1.1``) with its SentencePiece model (``sp_model``)."""

    SUMMARY = ("text generation, source to target (UniLM on a BERT-family model, or a T5 "
               "encoder-decoder with --sp-model); without --train it takes the shipped "
               "Chinese answer-generation set")
    FILES = "JSONL, one {\"source\": ..., \"target\": ...} object per line"
    TEXTS = ("source texts to generate from (--input: JSONL with 'source', or plain text, a "
             "source per line)")
    SHIPPED = "seq2seq_file"

    task: str = task_option("seq2seq")
    max_new_tokens: int = option(32, "the most tokens generated per source, the closing "
                                 "[SEP] (T5: </s>) included", COUNT)
    num_beams: int = option(1, "beam search width of the generation (1: greedy)", COUNT)
    sp_model: str = option(None, "SentencePiece .model file of a T5 family (t5, t5.1.1, "
                           "mt5.1.1), its tokenizer instead of --vocab", metavar="FILE",
                           input="file")


#: Each ``--task``, by name, and its options class; the task itself is the module of that
#: name in :mod:`kerasbert.tasks`. A new task is a module there and one line here.
TASK_OPTIONS = {"classification": ClassificationOptions, "ner": NerOptions, "qa": QaOptions,
                "seq2seq": Seq2SeqOptions}
TASKS = tuple(TASK_OPTIONS)


@dataclasses.dataclass(kw_only=True)
class TrainOptions(ClassificationOptions, NerOptions, QaOptions, Seq2SeqOptions):
    """Any task's options in one class, as earlier versions took them (``task`` picks the
    task). :func:`for_task` turns them into the task's own class, refusing a value the task
    would not use."""

    SUMMARY, FILES, TEXTS, SHIPPED = (ClassificationOptions.SUMMARY, ClassificationOptions.FILES,
                                      ClassificationOptions.TEXTS, ClassificationOptions.SHIPPED)

    def resolved(self):
        return for_task(self).resolved()


def for_task(options, flags=False):
    """``options`` as their task's own class (:data:`TASK_OPTIONS`).

    Args:
        options: a :class:`FinetuneOptions` of any class (:class:`TrainOptions` too).
        flags: name options as command-line flags (``--grad-accum``), else as fields.

    Raises:
        OptionError: an unknown task, or a value other than the default in a field the task
            does not have: ``invalid flag in --strategy: --task ner does not use it``.

    Example:
        >>> type(for_task(TrainOptions(output="runs/x", task="ner"))).__name__
        'NerOptions'
    """
    if options.task not in TASK_OPTIONS:
        raise OptionError(f"invalid value {options.task!r} in {flag('task') if flags else 'task'}"
                          f": must be one of {', '.join(TASK_OPTIONS)}")
    target = TASK_OPTIONS[options.task]
    if type(options) is target:
        return options
    names = {field.name for field in dataclasses.fields(target)}
    for field in dataclasses.fields(options):
        if field.name not in names and getattr(options, field.name) != field.default:
            name = flag(field.name) if flags else field.name
            users = [task for task, kind in TASK_OPTIONS.items()
                     if field.name in {f.name for f in dataclasses.fields(kind)}]
            raise OptionError(f"invalid {'flag' if flags else 'option'} in {name}: --task "
                              f"{options.task} does not use it (only --task "
                              f"{' and --task '.join(users)})")
    return target(**{name: getattr(options, name) for name in names})


def model_defaults(config_path, task=None):
    """The fine-tuning defaults in ``finetune_defaults.json`` beside a config ({} if none),
    for ``task`` where the file gives that task its own.

    The file is a JSON object of options (:data:`MODEL_DEFAULT_KEYS`: ``lr``, ``epochs``,
    ``patience``, ``maxlen``, ``batch_size``) for every task,
    and under ``"tasks"`` the values one task uses instead:
    ``{"lr": 1e-4, "tasks": {"ner": {"lr": 3e-4, "epochs": 10}}}``.

    Raises:
        OptionError: the file is not such an object, or a value breaks its option's rule.

    Example:
        >>> from kerasbert import shipped
        >>> config = os.path.join(shipped.model_dir(), "bert_config.json")
        >>> model_defaults(config)["lr"], model_defaults(config, "ner")["lr"]
        (0.0001, 0.0003)
    """
    path = os.path.join(os.path.dirname(os.fspath(config_path)), MODEL_DEFAULTS_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise OptionError(f"defaults in {path}: not readable JSON ({error})") from None
    keys = ", ".join(MODEL_DEFAULT_KEYS)
    tasks = found.get("tasks", {}) if isinstance(found, dict) else None
    if (not isinstance(found, dict) or not set(found) <= {*MODEL_DEFAULT_KEYS, "tasks"}
            or not isinstance(tasks, dict) or not set(tasks) <= set(TASKS)
            or not all(isinstance(values, dict) and set(values) <= set(MODEL_DEFAULT_KEYS)
                       for values in tasks.values())):
        raise OptionError(f"defaults in {path}: must be a JSON object with only {keys}, and "
                          f"under \"tasks\" an object of those per task ({', '.join(TASKS)})")
    for name in (None, *tasks):
        values = {key: value for key, value in found.items() if key != "tasks"}
        values.update(tasks.get(name, {}))
        kind = TASK_OPTIONS[name or "classification"]
        own = {field.name for field in dataclasses.fields(kind)}
        unused = sorted(set(values) - own)
        if name is not None and set(tasks[name]) & set(unused):
            raise OptionError(f"defaults in {path}: {', '.join(unused)} under \"tasks\", "
                              f"\"{name}\": --task {name} does not use it")
        try:
            validate(kind(output="-", **{key: values[key] for key in values if key in own}))
        except OptionError as error:
            raise OptionError(f"defaults in {path}: {error}") from None
    return {**{key: value for key, value in found.items() if key != "tasks"},
            **tasks.get(task, {})}


def describe_defaults(options):
    """One line naming the options a run takes from its model's defaults (those not given),
    or None: ``lr 0.0003, epochs 10, patience 3: the defaults of kerasbert-zh-small for
    --task ner (its finetune_defaults.json)``."""
    resolved = options.resolved()
    found = model_defaults(resolved.config, resolved.task)
    taken = [key for key in MODEL_DEFAULT_KEYS
             if hasattr(options, key) and getattr(options, key) is None and key in found]
    if not taken:
        return None
    model = os.path.basename(os.path.dirname(os.path.abspath(resolved.config)))
    return (f"{', '.join(f'{key} {getattr(resolved, key):g}' for key in taken)}: the defaults of "
            f"{model} for --task {resolved.task} (its {MODEL_DEFAULTS_FILE})")


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


def choices_of(meta):
    """The choices of a field's metadata (None: any value)."""
    choices = meta.get("choices")
    return choices() if callable(choices) else choices


def flag(name):
    """The command-line flag of a field: ``batch_size`` → ``--batch-size``."""
    return "--" + name.replace("_", "-")


def validate(options, flags=False):
    """Checks every field of ``options`` against its rule.

    Args:
        options: a :class:`RunOptions` dataclass.
        flags: name options as command-line flags (``--batch-size``), else as fields.

    Raises:
        OptionError: ``invalid value -4 in --batch-size: must be an integer of at least 1``.
    """
    for field in dataclasses.fields(options):
        meta, value = field.metadata, getattr(options, field.name)
        name = flag(field.name) if flags else field.name
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
    if getattr(options, "accept_changed", False) and not getattr(options, "resume", False):
        raise OptionError(f"invalid option in {name('accept_changed')}: only with "
                          f"{name('resume')} (a new run records its inputs as they are)")


def integer(text):
    """argparse type: an integer (its name shows in argparse's messages)."""
    return int(text)


def number(text):
    """argparse type: a number."""
    return float(text)


def add_arguments(parser, options_class, only=None):
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
        parser.add_argument(
            flag(field.name), type={int: integer, float: number}.get(kind, str),
            default=field.default, required=bool(meta.get("required")), help=help_text,
            choices=choices_of(meta), nargs=meta.get("nargs"), metavar=meta.get("metavar"))


def add_task_arguments(parser):
    """The flags of ``kerasbert train``: those every task takes, then a group per task
    (:data:`TASK_OPTIONS`) with the flags only it takes, its summary and its files."""
    add_arguments(parser, FinetuneOptions)
    shared = {field.name for field in dataclasses.fields(FinetuneOptions)}
    for name, kind in TASK_OPTIONS.items():
        own = {field.name for field in dataclasses.fields(kind)} - shared
        group = parser.add_argument_group(
            f"--task {name}", f"{kind.SUMMARY[0].upper()}{kind.SUMMARY[1:]}. Files: {kind.FILES}."
            + ("" if own else " No flags of its own."))
        add_arguments(group, kind, only=own)


def from_arguments(options_class, arguments):
    """An ``options_class`` from an ``argparse`` namespace (fields it does not have ignored)."""
    names = {field.name for field in dataclasses.fields(options_class)}
    return options_class(**{k: v for k, v in vars(arguments).items() if k in names})
