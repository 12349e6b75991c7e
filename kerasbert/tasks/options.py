"""What every task's options share: :class:`TaskOptions`, and the defaults a run takes where
no value is given: the model's ``finetune_defaults.json`` (for every task, or for one), else
:data:`FALLBACK_DEFAULTS`, and the shipped model and dataset.

Loads no TensorFlow (the command line reads it to make its flags).

Example:
    >>> from kerasbert.tasks.ner.options import NerOptions
    >>> NerOptions(output="runs/ner").resolved().epochs   # kerasbert-zh-small's for NER
    10
"""

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from kerasbert.models.families import FAMILIES
from kerasbert.presets.table import DEFAULT_KEYS as MODEL_DEFAULT_KEYS
from kerasbert.presets.table import DEFAULTS_FILE as MODEL_DEFAULTS_FILE
from kerasbert.tasks import TASKS, options_class
from kerasbert.training.options import (
    BASE_LR,
    FinetuneOptions,
    OptionError,
    add_arguments,
    flag,
    validate,
)

if TYPE_CHECKING:
    import argparse

    from kerasbert.models.config import BertConfig

#: The options whose default depends on the model and the task (those a model folder's
#: finetune_defaults.json may set), and their values for a model that carries none.
FALLBACK_DEFAULTS = {"lr": BASE_LR, "epochs": 3, "patience": 2, "maxlen": 128, "batch_size": 32,
                     "prefix_copies": 0}


@dataclasses.dataclass(kw_only=True)
class TaskOptions(FinetuneOptions):
    """The base of each task's options class (its folder's ``options.py``)."""

    #: The Keras backends ``kerasbert train`` runs this task on; the command line refuses
    #: it by name on any other (docs/backends.md).
    BACKENDS: ClassVar[tuple[str, ...]] = ("tensorflow",)

    def resolved(self: "_Options") -> "_Options":
        """These options ready to run (see :func:`prepare`); themselves if they are."""
        return self if is_resolved(self) else prepare(self)


#: A task's options class: :func:`prepare` and :func:`resolve` give one of the same back.
_Options = TypeVar("_Options", bound=TaskOptions)


def is_resolved(options: TaskOptions) -> bool:
    """Whether ``options`` went through :func:`resolve` (their config is read)."""
    return options.model_config is not None


def prepare(options: _Options, flags: bool = False) -> _Options:
    """``options`` checked, their preset fetched and every default filled in: the one way
    from what a user gave to what a run takes, each step once.

    1. :func:`~kerasbert.training.options.validate` (``flags``: named as command-line
       flags);
    2. :func:`fetch_preset`, where ``model`` names a preset (downloaded on first use);
    3. :func:`resolve`.

    Raises:
        OptionError: a value outside its rule, a preset with its own files given, or a
            defaults file or config that is not readable.
    """
    validate(options, flags=flags)
    return resolve(fetch_preset(options))


def fetch_preset(options: _Options) -> _Options:
    """``options`` with the family, config, checkpoint and vocab of the preset ``model``
    names, downloaded on first use (with its progress); ``options`` themselves where
    ``model`` is a family or None."""
    if not options.model or options.model in FAMILIES:
        return options
    from kerasbert.models.convert import download_preset
    from kerasbert.presets.table import get

    given = [flag(name) for name in ("config", "checkpoint", "vocab") if getattr(options, name)]
    if given:
        raise OptionError(f"conflicting options in --model and {' and '.join(given)}: the preset "
                          f"{options.model} brings its own config, checkpoint and vocab")
    folder = download_preset(options.model)
    return dataclasses.replace(options, model=get(options.model).family,
                               config=os.path.join(folder, "bert_config.json"),
                               checkpoint=os.path.join(folder, "bert_model.ckpt"),
                               vocab=os.path.join(folder, "vocab.txt"))


def resolve(options: _Options) -> _Options:
    """``options`` (a task's options class, checked, ``model`` a family) with every default
    filled in: the shipped model and the task's shipped dataset where none is given, the
    model's fine-tuning defaults for the task (else :data:`FALLBACK_DEFAULTS`) where none is
    given, ``weights`` (``checkpoint`` or ``random``), and the derived ``model_config``
    (:func:`model_config`) and ``defaults_taken``. The config and the defaults file are read
    here and nowhere else in a run."""
    from kerasbert import shipped

    if options.model and options.model not in FAMILIES:
        raise OptionError(f"invalid value {options.model!r} in model: a preset is fetched "
                          "before resolution (prepare, or fetch_preset)")
    values = {field.name: getattr(options, field.name) for field in dataclasses.fields(options)}
    if not options.train:
        values.update({split: getattr(options, split) or shipped.data_file(options.SHIPPED, split)
                       for split in shipped.SPLITS})
    if not values["config"]:
        model_dir = shipped.model_dir()
        values.update(config=os.path.join(model_dir, "bert_config.json"),
                      checkpoint=options.checkpoint or os.path.join(model_dir, "bert_model.ckpt"),
                      vocab=options.vocab or os.path.join(model_dir, "vocab.txt"))
    if not values["dev"]:
        raise OptionError("missing file in --dev: the best epoch is chosen on a dev file")
    if not values["vocab"] and not values.get("sp_model"):
        values["vocab"] = os.path.join(os.path.dirname(values["config"]), "vocab.txt")
    defaults = model_defaults(values["config"], options.task)
    taken = []
    for key, fallback in FALLBACK_DEFAULTS.items():
        if key in values and values[key] is None:  # a task's own options: its fields
            values[key] = defaults.get(key, fallback)
            taken += [key] if key in defaults else []
    if _default_copies_too_long(options, values):  # no text is cut to a longer copy
        values["prefix_copies"] = 0
    values["weights"] = "checkpoint" if values["checkpoint"] else "random"
    if values.get("lora"):
        if not values["checkpoint"]:
            raise OptionError("invalid option in --lora: LoRA adapts a pretrained checkpoint, "
                              "and this run has none; pass --checkpoint, or train every weight "
                              "without --lora")
        # A LoRA run reads its base again wherever evaluate and predict run.
        values["checkpoint"] = os.path.abspath(values["checkpoint"])
    values["defaults_taken"] = tuple(key for key in MODEL_DEFAULT_KEYS if key in taken)
    values["model_config"] = model_config(values["config"], values["model"], values["maxlen"],
                                          options.LONG_TEXTS)
    return type(options)(**values)


def model_config(path: str, family: str | None, maxlen: int | None,
                 long_texts: bool) -> "BertConfig":
    """The config of a run's model: the file at ``path`` (of ``family``, None: its own), with
    ``hierarchical_position`` (alpha :data:`LONG_TEXT_ALPHA`) added where ``maxlen`` runs
    past its position table on a family that can read the table hierarchically, in a task
    that reads long texts (``long_texts``, its options' ``LONG_TEXTS``). The run's
    ``bert_config.json`` keeps the key, so every later build of the run (resume,
    ``evaluate``, a rebuilt SavedModel) makes the same model.

    Raises:
        ValueError: a bad config (the file named).
    """
    from kerasbert.models.build import takes_hierarchical_position
    from kerasbert.models.config import BertConfig

    config = BertConfig.from_json_file(path, family=family)
    if (config.hierarchical_position is None and long_texts and isinstance(maxlen, int)
            and maxlen > config.max_position_embeddings
            and takes_hierarchical_position(config.family)):
        return config.replace(hierarchical_position=LONG_TEXT_ALPHA)
    return config


#: The alpha of a run's hierarchical positions, bert4keras's ``hierarchical_position=True``.
LONG_TEXT_ALPHA = 0.4


def _default_copies_too_long(options: TaskOptions, values: dict[str, Any]) -> bool:
    """Whether the model's default ``prefix_copies`` is no shorter than the ``maxlen`` the run
    takes (``--maxlen 32`` on a model whose copies are 32 tokens): then there is nothing to
    copy, and the default turns off instead of being refused as a given value is."""
    return bool(getattr(options, "prefix_copies", 0) is None and values.get("prefix_copies")
                and values["prefix_copies"] >= values["maxlen"])


def model_defaults(config_path: str | os.PathLike[str],
                   task: str | None = None) -> dict[str, Any]:
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
        kind = options_class(name or TASKS[0])
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


def describe_defaults(options: TaskOptions) -> str | None:
    """One line naming the options resolved ``options`` took from their model's defaults
    (those not given), or None: ``lr 0.0003, epochs 10, patience 3: the defaults of
    kerasbert-zh-small for --task ner (its finetune_defaults.json)``.

    Raises:
        ValueError: ``options`` are not resolved (``options.resolved()`` first).
    """
    if not is_resolved(options):
        raise ValueError("options not resolved: the defaults they take are found by "
                         "resolution (options.resolved())")
    if not options.defaults_taken:
        return None
    model = os.path.basename(os.path.dirname(os.path.abspath(options.config)))
    return (f"{', '.join(f'{key} {getattr(options, key):g}' for key in options.defaults_taken)}"
            f": the defaults of {model} for --task {options.task} (its {MODEL_DEFAULTS_FILE})")


def saved_options(saved: dict[str, Any]) -> TaskOptions:
    """A run's saved options (a dict) as its task's class, keys of other versions and tasks
    left out (the default task for runs saved before tasks were recorded)."""
    kind = options_class(saved.get("task") or TASKS[0])
    names = {field.name for field in dataclasses.fields(kind)}
    return kind(**{key: value for key, value in saved.items() if key in names})


def add_task_arguments(parser: "argparse.ArgumentParser") -> None:
    """The flags of ``kerasbert train``: ``--task``, those every task takes, then a group
    per task with the flags only it takes, its summary and its files."""
    parser.add_argument("--task", default=TASKS[0], choices=TASKS,
                        help="what to train (each task's own flags are listed under it below)"
                             f" (default: {TASKS[0]})")
    shared = {field.name for field in dataclasses.fields(FinetuneOptions)} - {"task"}
    add_arguments(parser, FinetuneOptions, only=shared)
    for name in TASKS:
        kind = options_class(name)
        own = {field.name for field in dataclasses.fields(kind)} - shared - {"task"}
        group = parser.add_argument_group(
            f"--task {name}", f"{kind.SUMMARY[0].upper()}{kind.SUMMARY[1:]}. Files: {kind.FILES}."
            + ("" if own else " No flags of its own."))
        add_arguments(group, kind, only=own)


def options_from_arguments(arguments: "argparse.Namespace") -> TaskOptions:
    """The options of ``arguments.task`` (an ``argparse`` namespace of ``kerasbert train``)
    as its class.

    Raises:
        OptionError: a flag of another task given: ``invalid flag in --strategy: --task ner
            does not use it (only --task classification)``.
    """
    kind = options_class(arguments.task)
    names = {field.name for field in dataclasses.fields(kind)}
    for name, value in vars(arguments).items():
        users = users_of(name)
        if name not in names and users and value != _default(options_class(users[0]), name):
            raise OptionError(f"invalid flag in {flag(name)}: --task {arguments.task} does "
                              f"not use it (only --task {' and --task '.join(users)})")
    return kind(**{key: value for key, value in vars(arguments).items() if key in names})


def _default(kind: type[TaskOptions], name: str) -> Any:
    return next(field.default for field in dataclasses.fields(kind) if field.name == name)


def users_of(name: str) -> list[str]:
    """The tasks whose options have the field ``name``."""
    return [task for task in TASKS
            if name in {field.name for field in dataclasses.fields(options_class(task))}]
