"""BertConfig: Google's ``bert_config.json`` (or Hugging Face ``config.json``) as a dataclass.

Key names are Google's, so a config written back with :meth:`BertConfig.to_json_file`
is read by Google's ``modeling.py``, bert4keras and Hugging Face alike. Keys that
kerasbert does not use (``pooler_fc_size``, ``directionality``, ``architectures``...)
are kept in :attr:`BertConfig.extra` and written back unchanged, except keys that
describe another model family (see :func:`check_family`), which are refused.

:func:`check_vocab_fits` and :func:`check_maxlen` let training code refuse a
vocabulary or a sequence length that does not fit the model before the first step.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import numbers
import os
from collections.abc import Iterable
from typing import Any

import keras

from kerasbert.files import open_input, write_text
from kerasbert.models.families import (
    DEFAULT_FAMILY,
    FAMILIES,
    family_class,
    model_type_of,
    most_specific,
    registered_name,
)

# bert4keras accepts these keyword overrides; they name the same facts as Google's keys.
BERT4KERAS_ALIASES = {
    "max_position": "max_position_embeddings",
    "dropout_rate": "hidden_dropout_prob",
    "attention_dropout_rate": "attention_probs_dropout_prob",
    "segment_vocab_size": "type_vocab_size",
}

# hidden_act values with a meaning of their own; any other name must be a Keras activation.
# "gelu" is the exact erf form (Google, Hugging Face, bert4keras); the others are the tanh form.
APPROXIMATE_GELU_NAMES = ("gelu_new", "gelu_approximate", "gelu_pytorch_tanh", "gelu_fast")


@functools.cache
def model_types() -> tuple[str, ...]:
    """The ``model_type`` values kerasbert builds, each as the family of that name.

    Example:
        >>> model_types()[:3]
        ('bert', 'albert', 'nezha')
    """
    return tuple(dict.fromkeys(family_class(name).model_type for name in FAMILIES
                               if family_class(name).model_type == name))


@functools.cache
def _family_rules() -> tuple[tuple[Any, ...], ...]:
    """Keys whose values describe a model the family cannot build: (key, does the family
    build it?, why another is refused). A key that is absent or null is fine; ``values``
    is the whole config, for rules that compare two keys. The facts each rule reads are
    the family class's (:mod:`kerasbert.models.families`).

    ``model_type`` and factorised embeddings first, then each family's own rules (its
    class's ``config_rules``, on the keys its configs bring), parents before children, then
    Hugging Face's decoder keys: the order of the registry does not change which key a
    config that breaks two rules is refused for.
    """
    factorised = [name for name in FAMILIES if family_class(name).factorised]
    classes = sorted({family_class(name) for name in FAMILIES},
                     key=lambda cls: (len(cls.__mro__), registered_name(cls)))
    # A subclass that keeps its parent's rules holds the same rule objects: listed once.
    own = dict.fromkeys(rule for cls in classes for rule in cls.config_rules)
    return (
        ("model_type", lambda value, values, family: value == model_type_of(family),
         f"kerasbert builds model_type {', '.join(map(repr, model_types()))}, each "
         "with its own build_transformer_model(model=...) or --model (Hugging Face's RoBERTa, "
         "whose positions start after the padding id, is another family)"),
        ("embedding_size", lambda value, values, family: value == values.get("hidden_size")
         or family_class(family).factorised,
         "factorised embeddings (embedding_size other than hidden_size) belong to "
         f"{', '.join(factorised)}; build with one of those model= values"),
        *own,
        ("is_decoder", lambda value, values, family: not value,
         "kerasbert builds encoders with application='encoder', 'lm' or 'unilm' "
         "(build_transformer_model), not Hugging Face's decoder with cross-attention"),
        ("add_cross_attention", lambda value, values, family: not value,
         "kerasbert builds encoders, without cross-attention to another model"),
    )


#: Config keys kerasbert reads beyond :class:`BertConfig`'s fields (a family's own widths,
#: T5's cross-attention bias, RoFormer's Hugging Face rotary values, the alpha of
#: hierarchical positions a long-text run was trained with).
READ_KEYS = ("embedding_size", "attention_head_size", "attention_key_size",
             "max_relative_position", "cross_position_bias", "rotary_value",
             "hierarchical_position")


#: Keys Google's and Hugging Face's config files carry that kerasbert reads nothing from ->
#: why. A config *file* may carry any key (kept in :attr:`BertConfig.extra`, written back
#: unchanged); a config given to ``build_transformer_model`` as a dict may carry these, and
#: keys beginning with ``_`` (Hugging Face's ``_name_or_path``), besides :func:`known_keys`.
IGNORED_KEYS = {
    **dict.fromkeys(("directionality", "pooler_fc_size", "pooler_num_attention_heads",
                     "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type"),
                    "Google's BERT configs: the pooler is one dense layer of hidden_size and "
                    "text direction is the tokenizer's business"),
    **dict.fromkeys(("net_structure_type", "gap_size", "num_memory_blocks",
                     "down_scale_factor"),
                    "Google's ALBERT configs: options of its research code, at their "
                    "defaults in every published model"),
    **dict.fromkeys(("architectures", "transformers_version", "torch_dtype", "dtype",
                     "use_cache", "gradient_checkpointing", "classifier_dropout",
                     "pad_token_id", "bos_token_id", "eos_token_id", "id2label", "label2id",
                     "finetuning_task", "problem_type", "tokenizer_class", "output_past",
                     "output_attentions", "output_hidden_states", "return_dict",
                     "torchscript"),
                    "Hugging Face's configs: its classes, runtime switches and a task's "
                    "labels; token ids are the vocabulary's"),
}


def check_config_keys(values: dict[str, Any], where: str) -> None:
    """Raises for a key of a config given as a dict that kerasbert neither reads nor
    ignores on purpose (:data:`IGNORED_KEYS`): a slip such as ``hiden_size`` would
    otherwise build the config's defaults, another model than the one meant.

    Raises:
        ValueError: ``hiden_size in <where>: unknown key; did you mean hidden_size?``

    Example:
        >>> check_config_keys({"hidden_size": 8, "directionality": "bidi"}, "a dict")
        >>> check_config_keys({"hiden_size": 8}, "a dict")
        Traceback (most recent call last):
        ...
        ValueError: hiden_size in a dict: unknown key; did you mean hidden_size?
    """
    known = known_keys() | set(IGNORED_KEYS) | {"extra"}
    for key in values:
        if key not in known and not str(key).startswith("_"):
            raise ValueError(f"{key} in {where}: unknown key; did you mean "
                             f"{nearest(str(key), known)}?")


def nearest(name: str, known: Iterable[str]) -> str:
    """The name of ``known`` closest to ``name`` (by :mod:`difflib`'s ratio).

    Example:
        >>> nearest("with_poll", ["with_pool", "with_nsp"])
        'with_pool'
    """
    return max(sorted(known), key=lambda candidate: difflib.SequenceMatcher(
        None, name, candidate).ratio())


def known_keys() -> frozenset[str]:
    """Every key a config means something by to kerasbert: :class:`BertConfig`'s fields,
    bert4keras's aliases, the keys the families read and the keys the family rules check.

    Example:
        >>> {"hidden_size", "max_position", "embedding_size", "ln_type"} <= known_keys()
        True
    """
    fields = {field.name for field in dataclasses.fields(BertConfig)} - {
        "extra", "source", "family"}
    return frozenset(fields | set(BERT4KERAS_ALIASES) | set(READ_KEYS)
                     | {rule[0] for rule in _family_rules()})


def family_of_config(values: dict[str, Any]) -> str:
    """The family a config's own keys name: its ``model_type``, else the family whose keys
    it has (each family's ``claims_config``: ALBERT's group keys, brightmart's ``ln_type``,
    factorised embeddings), else the default family (``"bert"``). An unknown ``model_type``
    is left to the checks, which name it.

    Raises:
        ValueError: keys of two unrelated families, and no ``model_type`` to choose.

    Example:
        >>> family_of_config({"model_type": "albert"}), family_of_config({"hidden_size": 8})
        ('albert', 'bert')
    """
    model_type = values.get("model_type")
    if model_type is not None:
        return model_type if model_type in model_types() else DEFAULT_FAMILY
    found = most_specific(name for name in model_types()
                          if family_class(name).claims_config(values))
    if len(found) > 1:
        raise ValueError(f"config keys of several families ({', '.join(found)}) and no "
                         "model_type; name one with model_type or model=")
    return found[0] if found else DEFAULT_FAMILY


REQUIRED_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)


@dataclasses.dataclass
class BertConfig:
    """The architecture of a BERT model, with Google's key names.

    Example:
        >>> config = BertConfig.from_json_file(
        ...     "checkpoints/chinese_L-12_H-768_A-12/bert_config.json")
        >>> config.hidden_size, config.head_size
        (768, 64)
        >>> BertConfig.from_dict({**config.to_dict(), "num_hidden_layers": 2}).num_hidden_layers
        2
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    # Google's modeling.py defaults to 16; published checkpoints and bert4keras use 2.
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    extra: dict = dataclasses.field(default_factory=dict)
    source: str = dataclasses.field(default="<dict>", compare=False, repr=False)
    #: The model family the config is read for (``model=``); not a key of the file.
    family: str = dataclasses.field(default=DEFAULT_FAMILY, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "<dict>",
                  family: str | None = None, **overrides: Any) -> BertConfig:
        """Builds a config from a dict of Google (or Hugging Face) keys.

        Args:
            values: the parsed JSON object.
            source: where the values came from, quoted in error messages.
            family: the ``model=`` it is read for; None: the one the config names
                (:func:`family_of_config`).
            **overrides: keys to replace, Google names or bert4keras aliases
                (``max_position``, ``dropout_rate``, ``attention_dropout_rate``,
                ``segment_vocab_size``).

        Raises:
            ValueError: a required key is missing or a value breaks a rule.
        """
        if not isinstance(values, dict):
            raise ValueError(
                f"config in {source}: must be a JSON object, received {type(values).__name__}"
            )
        merged = dict(values)
        for key, value in overrides.items():
            merged[BERT4KERAS_ALIASES.get(key, key)] = value
        family = family or family_of_config(merged)
        # Before the required keys: another family's config may lack some of them.
        check_family(merged, f"in {source}", family)
        missing = [key for key in REQUIRED_KEYS if key not in merged]
        if missing and "d_model" in merged:
            raise ValueError(f"{missing[0]} in {source}: missing; this is a Hugging Face T5 "
                             "config (d_model, num_layers...): kerasbert convert --from-hf "
                             "writes its Google one")
        if missing:
            raise ValueError(f"missing key(s) in {source}: {', '.join(missing)} "
                             f"{'is' if len(missing) == 1 else 'are'} required")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra", "source"}
        known = {key: merged[key] for key in merged if key in names}
        extra = dict(merged.get("extra") or {})
        extra.update({key: merged[key] for key in merged if key not in names and key != "extra"})
        return cls(**known, extra=extra, source=source, family=family)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike[str], family: str | None = None,
                       **overrides: Any) -> BertConfig:
        """Reads ``bert_config.json`` (Google) or ``config.json`` (Hugging Face).

        Raises:
            FileNotFoundError: no file at ``path``.
            ValueError: ``path`` is a directory, invalid JSON (with line and column), an
                invalid value, or a model of another family (ALBERT, ELECTRA...).
        """
        path = os.fspath(path)
        try:
            with open_input(path, "config", "bert_config.json") as f:
                text = f.read().decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{path} is not UTF-8 text: {error}") from None
        try:
            values = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(
                f"config in {path}: invalid JSON at line {error.lineno}, column {error.colno}: "
                f"{error.msg}"
            ) from None
        return cls.from_dict(values, source=path, family=family, **overrides)

    # ------------------------------------------------------------------ writing
    def to_dict(self) -> dict[str, Any]:
        """The config as Google's JSON object, unknown keys included."""
        values = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("extra", "source", "family")
        }
        return {**values, **self.extra}

    def to_json_file(self, path: str | os.PathLike[str]) -> None:
        """Writes the config as ``bert_config.json`` (atomically)."""
        write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True,
                                    ensure_ascii=False) + "\n")

    def replace(self, **overrides: Any) -> BertConfig:
        """A copy with some keys replaced (Google names or bert4keras aliases)."""
        return BertConfig.from_dict(self.to_dict(), source=self.source, family=self.family,
                                    **overrides)

    # ---------------------------------------------------------------- derived
    @property
    def head_size(self) -> int:
        """``attention_head_size`` where the family's heads may have their own width (T5's
        ``d_kv``), else ``hidden_size / num_attention_heads``."""
        if self.extra.get("attention_head_size") and self._family_attribute("free_head_size"):
            return self.extra["attention_head_size"]
        return self.hidden_size // self.num_attention_heads

    def _family_attribute(self, name: str) -> Any:
        return self.family in FAMILIES and getattr(family_class(self.family), name, False)

    @property
    def embedding_size(self) -> int:
        """The width of the embeddings: ``embedding_size`` (ALBERT, ELECTRA) or the hidden size."""
        return self.extra.get("embedding_size") or self.hidden_size

    @property
    def hierarchical_position(self) -> bool | float | None:
        """``hierarchical_position`` (True or alpha): the model reads its position table
        hierarchically, up to its square (a run trained past its checkpoint's positions
        records it); None where the key is absent, null or false. ``build_transformer_model``
        builds it unless given the keyword."""
        value = self.extra.get("hierarchical_position")
        return None if value is None or value is False else value

    @property
    def max_relative_position(self) -> int:
        """NEZHA's clipping distance of relative positions (64 in its checkpoints)."""
        return self.extra.get("max_relative_position", 64)

    # ------------------------------------------------------------- validation
    def validate(self) -> None:
        """Checks every value; the message names key, value, rule and file."""
        where = f"in {self.source}"
        check_family(self.to_dict(), where, self.family)
        # Messages read "<key> (<value>) in <file>: <rule>".
        for name in REQUIRED_KEYS + ("max_position_embeddings",):
            _check_int(name, getattr(self, name), where, minimum=1)
        _check_int("type_vocab_size", self.type_vocab_size, where, minimum=0)
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = _check_number(name, getattr(self, name), where)
            if not 0 <= value < 1:
                raise ValueError(f"{name} ({value!r}) {where}: must be in [0, 1)")
        for name in ("initializer_range", "layer_norm_eps"):
            value = _check_number(name, getattr(self, name), where)
            if not value > 0:
                raise ValueError(f"{name} ({value!r}) {where}: must be positive")
        if self._family_attribute("free_head_size"):
            _check_int("attention_head_size", self.head_size, where, minimum=1)
        elif self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) {where}: must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if (self.family in FAMILIES and family_class(self.family).position == "rotary"
                and self.head_size % 2):
            raise ValueError(
                f"hidden_size ({self.hidden_size}) {where}: {self.family}'s rotary positions "
                "turn pairs of features, so the head size (hidden_size / num_attention_heads "
                f"= {self.head_size}) must be even")
        gated = (isinstance(self.hidden_act, list) and self.hidden_act
                 and self._family_attribute("gated_activations"))
        for activation in (self.hidden_act if gated else [self.hidden_act]):
            _check_activation(activation, self.hidden_act, where)


def _check_activation(activation: Any, hidden_act: Any, where: str) -> None:
    """Raises unless ``activation`` (``hidden_act`` or one of its list) is known."""
    if not isinstance(activation, str):
        raise ValueError(
            f"hidden_act ({hidden_act!r}) {where}: must be a string such as 'gelu' (a list "
            "of them, a gated feed-forward, is T5's)"
        )
    if activation not in APPROXIMATE_GELU_NAMES:
        try:
            keras.activations.get(activation)
        except (ValueError, TypeError):
            raise ValueError(
                f"hidden_act ({hidden_act!r}) {where}: Unknown activation; use 'gelu' "
                "(exact), "
                f"one of {', '.join(APPROXIMATE_GELU_NAMES)} (tanh approximation), "
                "or a Keras activation name such as 'relu'"
            ) from None


def check_family(values: dict[str, Any], where: str,
                 family: str | type[Any] = DEFAULT_FAMILY) -> None:
    """Raises when a key of ``values`` describes a model ``family`` does not build."""
    for key, builds, why in _family_rules():
        value = values.get(key)
        if value is not None and not builds(value, values, family):
            if key == "model_type" and value in model_types():
                # A family kerasbert builds, but not the one asked for.
                name = family if isinstance(family, str) else family.__name__
                raise ValueError(
                    f"{key} ({value!r}) {where}: another family than model={name!r} "
                    f"(--model {name}), which builds model_type {model_type_of(family)!r}; "
                    f"leave the family out (the config's model_type picks it) or ask for "
                    f"model={value!r}")
            raise ValueError(f"{key} ({value!r}) {where}: not supported yet; {why}")


def check_vocab_fits(config: BertConfig, vocab_size: int,
                     vocab_path: str | os.PathLike[str]) -> None:
    """Raises when a vocabulary has more ids than the model has embedding rows.

    Call it before training: an id past ``config.vocab_size - 1`` otherwise fails
    in the middle of the first epoch. A smaller vocabulary is fine (rows unused).

    Args:
        config: the model's :class:`BertConfig`.
        vocab_size: the number of ids of the vocabulary (``Tokenizer.vocab_size``).
        vocab_path: the ``vocab.txt`` it came from, quoted in the message.

    Raises:
        ValueError: ``vocab in <vocab_path>: 21128 tokens but vocab_size is 100 in
            <config>; ids past 99 have no embedding row``.

    Example:
        >>> from kerasbert.text.tokenizer import Tokenizer
        >>> folder = "checkpoints/chinese_L-12_H-768_A-12"
        >>> config = BertConfig.from_json_file(f"{folder}/bert_config.json")
        >>> vocab = f"{folder}/vocab.txt"
        >>> check_vocab_fits(config, Tokenizer(vocab).vocab_size, vocab)   # 21128 ids: they fit
    """
    if vocab_size > config.vocab_size:
        raise ValueError(
            f"vocab in {os.fspath(vocab_path)}: {vocab_size} tokens but vocab_size is "
            f"{config.vocab_size} in {config.source}; ids past {config.vocab_size - 1} "
            "have no embedding row")


def check_maxlen(config: BertConfig, maxlen: int | None, flag: str = "--maxlen",
                 hierarchical: bool = False) -> None:
    """Raises when sequences of ``maxlen`` tokens would not fit the position table
    (a family with relative or rotary positions has none: any length fits).

    Args:
        config: the model's :class:`BertConfig`.
        maxlen: the longest sequence, in tokens ([CLS] and [SEP] included); None: no limit
            is set, nothing to check.
        flag: what the user called it, quoted in the message.
        hierarchical: the table is read hierarchically (``hierarchical_position``): it
            reaches ``max_position_embeddings`` squared.

    Raises:
        ValueError: ``--maxlen (600) in <config>: exceeds max_position_embeddings (512)``,
            or ``maxlen`` is not a positive integer.

    Example:
        >>> config = BertConfig.from_dict(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32, max_position_embeddings=32, type_vocab_size=2))
        >>> check_maxlen(config, 32)
        >>> check_maxlen(config, 128)
        Traceback (most recent call last):
        ...
        ValueError: --maxlen (128) in <dict>: exceeds max_position_embeddings (32)
    """
    if maxlen is None:
        return
    if isinstance(maxlen, bool) or not isinstance(maxlen, numbers.Integral) or maxlen < 1:
        raise ValueError(f"{flag} ({maxlen!r}): must be a positive integer")
    # NEZHA's relative and RoFormer's rotary positions have no table to run past.
    family = config.family if config.family in FAMILIES else DEFAULT_FAMILY
    if family_class(family).position != "absolute":
        return
    if hierarchical and maxlen > config.max_position_embeddings ** 2:
        raise ValueError(f"{flag} ({maxlen}) in {config.source}: exceeds the "
                         f"{config.max_position_embeddings ** 2} positions hierarchical_position "
                         f"reads (max_position_embeddings {config.max_position_embeddings}, "
                         "squared)")
    if not hierarchical and maxlen > config.max_position_embeddings:
        raise ValueError(f"{flag} ({maxlen}) in {config.source}: exceeds "
                         f"max_position_embeddings ({config.max_position_embeddings})")


def _check_int(name: str, value: Any, where: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"{name} ({value!r}) {where}: must be an integer, received {type(value).__name__}"
        )
    if value < minimum:
        rule = "positive" if minimum == 1 else f"at least {minimum}"
        raise ValueError(f"{name} ({value}) {where}: must be {rule}")


def _check_number(name: str, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} ({value!r}) {where}: must be a finite number")
    return float(value)
