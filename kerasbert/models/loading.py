"""Google BERT checkpoints in and out: strict loading and saving back, by the mapping table.

Every weight is matched by layer name *and* weight attribute to one Google variable
name, never by position (Keras 3 ``LayerNormalization`` creates ``gamma`` before
``beta``; bert4keras's positional table lists ``beta`` first). A model whose layer names
carry a prefix (``Predecessor-Embedding-Token``, bert4keras's ``prefix=``) is read by the
same table, under the same Google names. With ``autoresize=True`` a weight of another
shape is resized (:func:`resize_weight`) rather than refused.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import weakref
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeAlias

import keras
import numpy as np
from numpy.typing import DTypeLike

from kerasbert.checkpoints.io import (
    CheckpointError,
    DictSource,
    FileSource,
    count_non_finite,
    is_float_dtype,
    open_source,
    write_checkpoint,
)
from kerasbert.checkpoints.keep_tokens import KeepTokens
from kerasbert.models import names
from kerasbert.models.checkpoint_names import (
    POSITION_EMBEDDINGS,
    TRANSPOSED_VARIABLES,
    is_vocabulary_variable,
)
from kerasbert.models.deferred import set_value
from kerasbert.models.families import (
    DEFAULT_FAMILY,
    FAMILIES,
    family_class,
    model_type_of,
    most_specific,
)
from kerasbert.models.layers import (
    FeedForward,
    MultiHeadSelfAttention,
    ProjectionOwner,
    model_layers,
)

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Target:
    """One model weight and the Google variable it is stored as.

    Attributes:
        layer: the layer's name in the model (with its prefix).
        attribute: the weight's attribute on the layer (``"query_kernel"``).
        name: the Google variable name.
        variable: the weight.
        owner: the layer itself (whose kind decides how a resized weight is scaled).
        resized: the checkpoint's value has another shape and is resized on loading.
    """

    layer: str
    attribute: str
    name: str
    variable: keras.Variable
    owner: Any = None
    resized: bool = False


#: A weight whose stored shape does not fit: ``(name, model shape, checkpoint shape, hint)``.
Mismatch: TypeAlias = tuple[str, tuple[int, ...], tuple[int, ...], str]



def table(family: str | type[Any]) -> Callable[[int], dict[str, dict[str, str]]]:
    """``family``'s table maker: ``num_hidden_layers -> {layer: {attribute: Google name}}``
    (its class's ``checkpoint_table``, :mod:`kerasbert.models.families`)."""
    return family_class(family).checkpoint_table


def table_family(model: keras.Model, available: Collection[str] = (),
                 family: str | None = None, prefix: str | None = None) -> str:
    """Whose variable names ``model``'s weights are stored under: ``family`` if given,
    else the family whose layers the model has (ALBERT's shared layer, ELECTRA's
    discriminator: each family's ``claims_layers``), else the family the checkpoint's names
    say (``available``: ELECTRA's ``electra/...``, ALBERT's shared names for a factorised
    model with one layer per index: each family's ``claims_checkpoint``), else BERT's.
    The layers are read by their names without ``prefix`` (None: :func:`layer_prefix`).

    Every registered family is asked, in no order: where several fit, the most specific
    is meant (a GPT-2 model has GPT's ``LM-Activation`` too, and a subclass of GPT wins;
    :func:`kerasbert.models.families.most_specific`), so the order of
    :data:`~kerasbert.models.families.FAMILIES` never changes the answer.

    Raises:
        ValueError: ``family`` is not registered, the model has the layers of two
            unrelated families (one table cannot load it; ``family`` says which), or
            several models of different prefixes and none without (``prefix`` says which).

    Example:
        >>> from kerasbert import build_transformer_model
        >>> table_family(build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32, embedding_size=8), model="albert"))
        'albert'
    """
    if family is not None:
        if family not in FAMILIES:
            raise ValueError(f"family={family!r} is not one of {', '.join(FAMILIES)}")
        return family
    layers = _layers_by_name(model, prefix)
    asks: tuple[tuple[str, Callable[[type[Any]], bool]], ...] = (
        ("layers", lambda cls: cls.claims_layers(layers)),
        ("checkpoint's names", lambda cls: cls.claims_checkpoint(layers, available)))
    for what, claims in asks:
        found = most_specific(name for name in FAMILIES if claims(family_class(name)))
        if len(found) > 1:
            raise ValueError(f"model {model.name!r}: its {what} fit several families "
                             f"({', '.join(found)}); pass family= to say whose names its "
                             "weights are stored under")
        if found:
            return found[0]
    return DEFAULT_FAMILY


def model_targets(model: keras.Model, family: str | None = None,
                  available: Collection[str] = (),
                  mapping: dict[str, dict[str, str]] | None = None,
                  prefix: str | None = None) -> list[Target]:
    """Every weight of ``model`` that has a Google name, as :class:`Target` rows.

    Layers are found by name, also inside nested models; the number of encoder
    layers is the model's own; the table is ``mapping`` if given (``{layer: {attribute:
    Google name}}``, bert4keras's layer names), else :func:`table_family`'s. A layer is
    looked up with ``prefix`` before its name (None: :func:`layer_prefix`'s).

    Raises:
        CheckpointError: no layer of ``model`` has a Google name.
        ValueError: ``prefix`` is None and the model holds models of several prefixes.
    """
    prefix = layer_prefix(model) if prefix is None else prefix
    layers = _layers_by_name(model, prefix)
    targets = []
    if mapping is None:
        cls = family_class(table_family(model, available, family, prefix))
        mapping = cls.checkpoint_table(cls.count_layers(layers))
    for layer_name, weights in mapping.items():
        layer = layers.get(layer_name)
        for attribute, name in weights.items():
            variable = getattr(layer, attribute, None) if layer is not None else None
            if variable is not None:
                targets.append(Target(prefix + layer_name, attribute, name, variable, layer))
    if not targets:
        raise CheckpointError(
            f"Model {model.name} has no layer with a Google variable name (such as "
            f"{prefix}{names.EMBEDDING_TOKEN}); build it with kerasbert.build_transformer_model")
    return targets


def layer_prefix(model: keras.Model) -> str:
    """What ``model``'s layer names begin with (bert4keras's ``prefix=``): what comes before
    ``Embedding-Token``; "" where a layer is named ``Embedding-Token`` or none ends so.

    Raises:
        ValueError: the model holds models of several prefixes (BERT-of-Theseus'
            ``Predecessor-`` and ``Successor-``) and none without: naming them.

    Example:
        >>> from kerasbert import build_transformer_model
        >>> layer_prefix(build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32), prefix="Successor-"))
        'Successor-'
    """
    found = sorted({name[:-len(names.EMBEDDING_TOKEN)] for name in _layers_by_name(model, "")
                    if name.endswith(names.EMBEDDING_TOKEN)})
    if not found or "" in found:
        return ""
    if len(found) > 1:
        raise ValueError(f"model {model.name!r} holds the layers of models prefixed "
                         f"{', '.join(map(repr, found))}; pass prefix= to say whose weights")
    return found[0]


def _layers_by_name(model: keras.Model, prefix: str | None = None) -> dict[str, keras.layers.Layer]:
    """``{name: layer}`` of ``model``'s layers, nested models' included; with ``prefix``
    (None: :func:`layer_prefix`'s), only those named with it, by the rest of their name."""
    found: dict[str, keras.layers.Layer] = {}
    for layer in model_layers(model):
        found.setdefault(layer.name, layer)
    if prefix is None:
        prefix = layer_prefix(model)
    return {name[len(prefix):]: layer for name, layer in found.items()
            if name.startswith(prefix)} if prefix else found


@dataclasses.dataclass
class LoadReport:
    """What :func:`load_checkpoint` did, variable by variable (Google names).

    Attributes:
        checkpoint: where the weights came from.
        loaded: variables assigned to the model.
        missing: variables the model needs that the checkpoint lacks.
        unused: checkpoint variables the model has no place for (optimizer slots,
            layers beyond ``num_hidden_layers``, heads not built...).
        mismatched: ``(name, model shape, checkpoint shape, hint)`` for each misfit.
        resized: loaded variables whose shape was changed to the model's (``autoresize``).
    """

    checkpoint: str
    loaded: list[str]
    missing: list[str]
    unused: list[str]
    mismatched: list[Mismatch]
    resized: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.mismatched

    def __str__(self) -> str:
        resized = f" ({len(self.resized)} resized)" if self.resized else ""
        return (f"{self.checkpoint}: {len(self.loaded)} loaded{resized}, "
                f"{len(self.missing)} missing, {len(self.mismatched)} mismatched, "
                f"{len(self.unused)} unused")


def load_checkpoint(model: keras.Model,
                    checkpoint: str | os.PathLike[str] | dict[str, np.ndarray],
                    strict: bool = True, keep_tokens: Sequence[int] | None = None,
                    compound_tokens: Sequence[Any] | None = None, streaming: bool = False,
                    family: str | None = None,
                    mapping: dict[str, dict[str, str]] | None = None,
                    prefix: str | None = None, autoresize: bool = False) -> LoadReport:
    """Loads a Google BERT checkpoint into a model built by kerasbert, by name.

    Everything is read and checked before the first assignment, so a load that
    fails leaves the model as it was (unless ``streaming``, below). Half-precision
    variables are cast.

    Args:
        model: a ``keras.Model`` with kerasbert's layer names (heads and a classifier
            on top are fine; unmapped layers are left alone).
        checkpoint: a prefix (``.../bert_model.ckpt``), a directory holding one, one
            of its files, or a dict ``{Google name: array}``.
        strict: raise on any missing variable or shape mismatch (default); if False,
            load what fits and report the rest.
        keep_tokens: checkpoint token ids whose rows of ``word_embeddings`` and
            ``cls/predictions/output_bias`` are kept, in this order.
        compound_tokens: extra rows appended after those, each the average of the
            rows of a list of ids, or of ``(ids, weights)``; as in bert4keras the ids
            count in the vocabulary after ``keep_tokens``.
        streaming: read, check and assign the variables a group at a time (about
            :data:`STREAM_BYTES`), so that the checkpoint is never held whole beside the
            model's weights: half the peak memory. A truncated data file or a damaged
            tensor found part-way then leaves the model partly loaded, so this is for a
            model that is discarded on failure (``build_transformer_model`` uses it).
            The index checks (names, shapes, dtypes) still come first.
        family: whose names to read (default: :func:`table_family` of the model).
        mapping: the table itself, ``{layer: {attribute: Google name}}`` by bert4keras's
            layer names (without ``prefix``); default: the family's.
        prefix: what the model's layer names begin with (bert4keras's ``prefix=``);
            None: :func:`layer_prefix`'s answer.
        autoresize: a variable of another shape but the same rank is resized to the
            model's (:func:`resize_weight`, bert4keras's ``autoresize_weights=True``).

    Returns:
        A :class:`LoadReport`.

    Raises:
        FileNotFoundError: no checkpoint at ``checkpoint``.
        CheckpointError (a ValueError): a corrupt or truncated file (named), a bad
            token id, a variable that is not float or holds NaN or inf, a checkpoint of
            another model family (ALBERT, ELECTRA...), or with ``strict`` a missing
            variable or a shape mismatch (named, with both shapes and a hint). The
            first line of the message says what is wrong, in which file.

    Example:
        The shipped small checkpoint holds an MLM head, which a model without one leaves unused:

        >>> from kerasbert import build_transformer_model
        >>> small = "kerasbert/resources/kerasbert-zh-small"
        >>> bert = build_transformer_model(f"{small}/bert_config.json")
        >>> report = load_checkpoint(bert, f"{small}/bert_model.ckpt")
        >>> len(report.loaded), report.missing, report.unused[:1]
        (69, [], ['cls/predictions/output_bias'])
    """
    source = open_source(checkpoint)
    available = source.shapes()
    vocabulary = KeepTokens(keep_tokens, compound_tokens, source.description)
    targets, missing, mismatched = [], [], []
    owners: dict[str, str] = {}
    prefix = layer_prefix(model) if prefix is None else prefix
    family = table_family(model, available, family, prefix)
    for target in model_targets(model, family, mapping=mapping, prefix=prefix):
        owners.setdefault(target.name, f"{target.layer}.{target.attribute}")
        if target.name not in available:
            missing.append(target.name)
            continue
        stored = available[target.name]
        expected = tuple(target.variable.shape)
        loaded = _loaded_shape(target.name, stored, vocabulary)
        target.resized = autoresize and loaded != expected
        if loaded != expected and not (autoresize and _resizable(loaded, expected)):
            mismatched.append((target.name, expected, stored, _hint(target.name, expected, loaded)
                               + _resize_hint(loaded, expected, autoresize)))
        else:
            targets.append(target)
    _check_dtypes(source, [name for name in owners if name in available])
    # Another family's variables never load into a BERT, strict or not: what would
    # load (a pooler, the position table) is not worth a model that runs wrongly.
    other = _other_family(available, family) if missing or mismatched else None
    if other or (strict and (missing or mismatched)):
        raise CheckpointError(_failure_message(source.description, missing, mismatched,
                                               available, owners, other, family))

    groups = _groups(targets) if streaming else [targets]
    damaged = []
    for group in groups:
        values = source.read_all([target.name for target in group])
        damaged += _non_finite(group, values)
        if not damaged:  # after damage: only read on, to name every damaged tensor
            for target, value in zip(group, values):
                set_value(target.variable, _prepare(target, value, vocabulary))
                _FROM_CHECKPOINT[id(target.variable)] = target.variable
        del values
    if damaged:
        raise CheckpointError(
            f"non-finite values in {source.description}: {_listing(damaged)}; these weights "
            "are damaged (was the checkpoint saved from a run that diverged?)")
    used = {target.name for target in targets} | {row[0] for row in mismatched}
    report = LoadReport(
        checkpoint=source.description,
        loaded=list(dict.fromkeys(target.name for target in targets)),
        missing=missing,
        unused=sorted(set(available) - used),
        mismatched=mismatched,
        resized=list(dict.fromkeys(target.name for target in targets if target.resized)),
    )
    # Non-strict loads that skipped something say so even where the report is not kept.
    (logger.info if report.ok else logger.warning)("%s", report)
    return report


#: The variables a checkpoint was loaded into, by id (each kept only while it lives).
_FROM_CHECKPOINT: weakref.WeakValueDictionary[int, keras.Variable] = (
    weakref.WeakValueDictionary())


def loaded_from_checkpoint(model: keras.Model) -> list[keras.Variable]:
    """The variables of ``model`` that :func:`load_checkpoint` gave a checkpoint's values:
    its pretrained base, without the heads added after the load (a span head, a
    classifier), in ``model.weights`` order."""
    return [variable for variable in model.weights if id(variable) in _FROM_CHECKPOINT
            and _FROM_CHECKPOINT[id(variable)] is variable]


def _check_dtypes(source: DictSource | FileSource, names: Sequence[str]) -> None:
    dtypes = source.dtypes()
    wrong = [f"{name} ({dtypes[name]})" for name in names if not is_float_dtype(dtypes[name])]
    if wrong:
        raise CheckpointError(
            f"non-float variables in {source.description}: {_listing(wrong)}; the model's "
            "weights need float values (float16, bfloat16, float32 or float64)")


def _non_finite(targets: Sequence[Target], values: Sequence[Any]) -> list[str]:
    # On the tensors already read: one pass each, no second read of the file.
    wrong = []
    for target, value in zip(targets, values):
        nan, inf = count_non_finite(value)
        if nan or inf:
            counts = " and ".join(f"{n} {kind}" for n, kind in ((nan, "NaN"), (inf, "inf")) if n)
            wrong.append(f"{target.name} ({counts})")
    return wrong


#: Bytes of checkpoint a streaming load reads at once (one RestoreV2): large enough that
#: the per-read cost is small, small beside a BERT-base's 400 MB.
STREAM_BYTES = 64 * 2**20


def _groups(targets: Sequence[Target]) -> list[list[Target]]:
    """``targets`` cut into runs of about :data:`STREAM_BYTES` (a larger tensor alone)."""
    groups: list[list[Target]] = [[]]
    size = 0
    for target in targets:
        nbytes = math.prod(target.variable.shape) * 4
        if groups[-1] and size + nbytes > STREAM_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(target)
        size += nbytes
    return groups


def _listing(items: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _loaded_shape(name: str, stored: tuple[int, ...],
                  vocabulary: KeepTokens) -> tuple[int, ...]:
    if name in TRANSPOSED_VARIABLES:
        stored = stored[::-1]
    if is_vocabulary_variable(name) and stored:
        vocabulary.check(stored[0])
        return (vocabulary.size(stored[0]),) + stored[1:]
    return stored


def _prepare(target: Target, value: Any, vocabulary: KeepTokens) -> Any:
    if target.name in TRANSPOSED_VARIABLES:
        value = np.asarray(value).T
    if is_vocabulary_variable(target.name) and vocabulary.changes_rows:
        value = vocabulary.apply(np.asarray(value))
    if target.resized:
        value = resize_weight(np.asarray(value), tuple(target.variable.shape), target.owner,
                              target.variable)
    if keras.backend.standardize_dtype(value.dtype) != target.variable.dtype:
        value = keras.ops.cast(value, target.variable.dtype)  # half-precision checkpoints
    return value


def orthogonally_resize(a: np.ndarray, new_shape: Sequence[int], window: int = 2) -> np.ndarray:
    """``a`` resized to ``new_shape``: a grown axis repeats blocks of ``window`` entries, a
    shrunk one is cut; the result keeps ``a``'s Frobenius norm (bert4keras's function).

    Raises:
        ValueError: ``new_shape`` has another rank, or a grown axis is not a multiple of
            ``window``.

    Example:
        >>> orthogonally_resize(np.array([[3.0, 4.0]]), (1, 1))
        array([[5.]])
    """
    if a.ndim != len(new_shape):
        raise ValueError(f"new_shape={tuple(new_shape)} must have a.ndim={a.ndim} axes")
    norm = np.linalg.norm(a)
    for axis, (old, new) in enumerate(zip(a.shape, new_shape)):
        times = -(-new // old)
        if times > 1:
            if old % window:
                raise ValueError(f"axis {axis} of size {old} is not a multiple of "
                                 f"window={window}")
            blocks = a.reshape(a.shape[:axis] + (old // window, window) + a.shape[axis + 1:])
            a = np.repeat(blocks, times, axis=axis).reshape(
                a.shape[:axis] + (old * times,) + a.shape[axis + 1:])
    a = a[tuple(slice(n) for n in new_shape)]
    # Zeros (a bias never trained) stay zeros, where bert4keras's division gives NaN.
    return a / np.linalg.norm(a) * norm if norm else a


#: Grown axes repeat blocks of this many entries (:func:`orthogonally_resize`'s window).
RESIZE_WINDOW = 2


def _resizable(stored: tuple[int, ...], expected: tuple[int, ...]) -> bool:
    """Whether :func:`orthogonally_resize` takes ``stored`` to ``expected``."""
    return len(stored) == len(expected) and all(
        new <= old or old % RESIZE_WINDOW == 0 for old, new in zip(stored, expected))


def _resize_hint(stored: tuple[int, ...], expected: tuple[int, ...], autoresize: bool) -> str:
    if not autoresize:
        return ""
    if len(stored) != len(expected):
        return f" (autoresize: {len(stored)} axes cannot become {len(expected)})"
    return (f" (autoresize: a grown axis must have a multiple of {RESIZE_WINDOW} entries in "
            "the checkpoint)")


def resize_weight(value: np.ndarray, shape: tuple[int, ...], layer: Any,
                  variable: Any = None) -> np.ndarray:
    """A checkpoint value of another shape as the weight ``variable`` of ``layer`` (of
    ``shape``) takes it, as bert4keras's ``autoresize_weights=True`` does:
    :func:`orthogonally_resize`, then a factor that keeps the layer's outputs of the scale
    they had.

    The factor depends on the weight's place among the layer's weights (bert4keras counts
    them in the order they are made). In self-attention with scaled scores, the query's and
    key's kernel and bias grow by ``(new / old width) ** 0.25`` each, so that their product
    grows as the ``1 / sqrt(head_size)`` before the softmax shrinks. In a feed-forward
    block, the inner product's weights by ``sqrt(new / old inner width)`` and the outer
    product's by ``sqrt(old / new first axis)``; with ``relu`` (or ``leaky_relu``) all by the
    latter. Other layers' weights are only resized.

    Args:
        value: the checkpoint's value (transposed and keep_tokens' rows taken already).
        shape: the model weight's shape.
        layer: the layer that holds the weight (or None: no factor).
        variable: the weight (where it is among ``layer``'s weights).

    Returns:
        the resized value.
    """
    old = value.shape
    value = orthogonally_resize(value, shape, RESIZE_WINDOW)
    place = next((i for i, weight in enumerate(getattr(layer, "trainable_weights", ()))
                  if weight is variable), None)
    if place is None:
        return value
    biases = 2 if getattr(layer, "use_bias", False) else 0
    if isinstance(layer, MultiHeadSelfAttention):
        # Query then key, each a kernel and maybe a bias; scores unscaled (T5): no factor.
        if layer.scaled and place < 2 + biases:
            value = value * (shape[-1] / old[-1]) ** 0.25
    elif isinstance(layer, FeedForward):
        inner = 1 + biases // 2 - (2 if layer.activation in ("relu", "leaky_relu") else 0)
        value = value * (np.sqrt(shape[-1] / old[-1]) if place < inner
                         else np.sqrt(old[0] / shape[0]))
    return value


# The config key behind the first axis of a variable, for mismatch hints.
_FIRST_AXIS_KEYS = {
    POSITION_EMBEDDINGS: "max_position_embeddings",
    "bert/embeddings/token_type_embeddings": "type_vocab_size",
}


def _hint(name: str, expected: tuple[int, ...], found: tuple[int, ...]) -> str:
    key = "vocab_size" if is_vocabulary_variable(name) else _FIRST_AXIS_KEYS.get(name)
    if key and expected[:1] != found[:1]:
        hint = f"{key} in the config ({expected[0]}) vs the checkpoint ({found[0]})"
        if key == "vocab_size":
            hint += "; keep_tokens selects a smaller vocabulary"
        return hint
    if "intermediate" in name or ("/output/dense/kernel" in name and "attention" not in name):
        return "intermediate_size or hidden_size in the config differs from the checkpoint's"
    return ("hidden_size in the config differs from the checkpoint's "
            "(is it the right bert_config.json?)")


# Variable names that mark a checkpoint of a family kerasbert does not build: (the family
# with its article, None, pattern).
NOT_BUILT: tuple[tuple[str, None, str], ...] = ()
# Where BERT's encoder layers begin: a checkpoint with them that does not load is named by
# what the model's family says of BERT's checkpoints.
_BERT_LAYER = "bert/encoder/layer_0/"
# The kinds of a family's positions (its class's ``position``), in the order a message lists
# families by them.
_POSITION_ORDER = ("absolute", "rotary", "relative")


def other_families() -> tuple[tuple[str, str | None, str], ...]:
    """``(what, model=, pattern)`` of each family whose checkpoint names tell it apart: the
    registered ones under their own name (their ``model_type``) whose class has a
    ``checkpoint_pattern`` of its own (t5.1.1 keeps T5's: T5 is named), then
    :data:`NOT_BUILT`."""
    built = []
    for name in FAMILIES:
        cls = family_class(name)
        pattern = cls.checkpoint_pattern
        if pattern and cls.model_type == name and not any(
                getattr(base, "checkpoint_pattern", None) == pattern for base in cls.__mro__[1:]):
            built.append((cls.checkpoint_description, name, pattern))
    return tuple(built) + NOT_BUILT


def _other_family(available: Collection[str], family: str) -> tuple[str, str | None] | None:
    """What another family's checkpoint looks like, for the message: ``(what, model=)``;
    None where it looks like ``family``'s own.

    A family's own pattern names it, never ``family`` or one it subclasses; where the names
    fit several, the most specific (GPT-2's names are GPT's and its own). Then what the
    family's attributes say: BERT's layers in a model that names them
    (``names_bert_checkpoints``), and BERT's names without a position table in a model with
    one: a family whose positions are computed.
    """
    cls = family_class(family)
    matches: dict[str | None, tuple[str, str]] = {}
    for what, loads_as, pattern in other_families():
        if loads_as is not None and (loads_as == model_type_of(family)
                                     or issubclass(cls, family_class(loads_as))):
            continue
        found = next((found for found in (re.match(pattern, name) for name in sorted(available))
                      if found), None)
        if found:
            matches.setdefault(loads_as, (what, found.group(0)))
    meant = most_specific(name for name in matches if name is not None)
    if meant or None in matches:
        # Of unrelated families (no real checkpoint is both), the one whose names come first.
        loads_as = min(meant, key=lambda name: matches[name][1]) if meant else None
        what, prefix = matches[loads_as]
        return f"{what} checkpoint ({prefix}...)", loads_as
    bert_layers = any(name.startswith(_BERT_LAYER) for name in available)
    if cls.names_bert_checkpoints and bert_layers:
        return (f"{family_class(DEFAULT_FAMILY).checkpoint_description} checkpoint "
                f"({_BERT_LAYER}...)", DEFAULT_FAMILY)
    if cls.position != "absolute" or POSITION_EMBEDDINGS in available or not bert_layers:
        return None
    computed = _computed_positions()
    if not computed:
        return None
    descriptions = [family_class(name).checkpoint_description for name in computed]
    what = " or ".join([descriptions[0]] + [text.split(" ", 1)[1] for text in descriptions[1:]])
    return (f"{what} checkpoint ({_BERT_LAYER}... but no {POSITION_EMBEDDINGS})",
            "' or '".join(computed))


def _computed_positions() -> list[str]:
    """The families (under their own names) whose checkpoints keep BERT's names but hold no
    position table, their positions computed; listed by :data:`_POSITION_ORDER`."""
    found = [name for name in FAMILIES if family_class(name).model_type == name
             and family_class(name).checkpoint_pattern is None
             and family_class(name).position != "absolute"]
    return sorted(found, key=lambda name: (_POSITION_ORDER.index(family_class(name).position),
                                           name))


def _failure_message(where: str, missing: list[str], mismatched: list[Mismatch],
                     available: Collection[str], owners: dict[str, str],
                     other: tuple[str, str | None] | None = None,
                     family: str = DEFAULT_FAMILY) -> str:
    if other:
        what, loads_as = other
        article = "an" if family[0] in "aeiou" else "a"
        first = f"checkpoint in {where}: looks like {what}, not {article} {family} checkpoint"
        first += (f"; build the model with model='{loads_as}'" if loads_as
                  else "; kerasbert does not build that family")
    else:
        first = (f"checkpoint in {where}: does not fit the model "
                 f"({_summary(missing, mismatched, available)})")
    lines = [first]
    for name, expected, stored, hint in mismatched:
        lines.append(f"  shape mismatch for {name}: the model ({owners[name]}) has {expected}, "
                     f"the checkpoint has {stored}: {hint}")
    if missing:
        lines.append(f"  {len(missing)} variable(s) missing: {_listing(missing)}")
    if not other:
        lines.append("  (strict=False loads what fits and reports the rest)")
    return "\n".join(lines)


def _summary(missing: list[str], mismatched: list[Mismatch],
             available: Collection[str]) -> str:
    """The first line's gist: the first mismatch and what the missing variables mean."""
    parts = []
    if mismatched:
        name, _, _, hint = mismatched[0]
        parts.append(f"{len(mismatched)} shape mismatch(es), e.g. {name}: {hint}")
    if missing:
        parts.append(f"{len(missing)} variable(s) missing, e.g. {missing[0]}: "
                     f"{_missing_hint(missing, available)}")
    return "; ".join(parts)


def _missing_hint(missing: list[str], available: Collection[str]) -> str:
    if any(name.endswith(".ATTRIBUTES/VARIABLE_VALUE") for name in available):
        return ("this is an object-based checkpoint (written by model.save_weights or "
                "tf.train.Checkpoint), not a Google one; write with save_weights_as_checkpoint")
    layers = {name.split("/")[2] for name in available if name.startswith("bert/encoder/layer_")}
    if any(name.startswith("bert/encoder/layer_") for name in missing):
        return f"the checkpoint has {len(layers)} encoder layers; lower num_hidden_layers"
    if all(name.startswith("cls/squad/") for name in missing):
        return ("the checkpoint has no span QA head (cls/squad/...); load the encoder "
                "before add_span_head")
    if all(name.startswith(("cls/", "bert/pooler/")) for name in missing):
        return ("the checkpoint has no such head (pooler / NSP / MLM); "
                "build without with_pool / with_nsp / with_mlm")
    return "is this a BERT checkpoint? names in it start with " + ", ".join(
        sorted({name.split("/")[0] for name in available})[:5])


def save_weights_as_checkpoint(model: keras.Model, filename: str | os.PathLike[str],
                               dtype: DTypeLike | None = None, family: str | None = None,
                               mapping: dict[str, dict[str, str]] | None = None,
                               prefix: str | None = None) -> list[str]:
    """Writes the model's weights as a Google checkpoint (``bert/...`` names).

    The files are readable by ``tf.train.load_checkpoint``, Google's BERT code,
    bert4keras and :func:`load_checkpoint`. Weights without a Google name (a
    classifier head) are not written. The write is atomic (see
    :func:`kerasbert.checkpoints.io.write_checkpoint`).

    Args:
        model: a kerasbert model.
        filename: the checkpoint prefix, e.g. ``"out/bert_model.ckpt"``.
        dtype: cast every weight to this NumPy dtype (e.g. ``"float16"``); default: keep.
        family: whose names to write (``"electra"``, ``"albert_unshared"``...); default:
            :func:`table_family` of the model.
        mapping: the table itself, ``{layer: {attribute: Google name}}`` (a
            :class:`Transformer`'s ``variable_mapping()``); default: the family's.
        prefix: what the model's layer names begin with (bert4keras's ``prefix=``);
            None: :func:`layer_prefix`'s answer. The Google names are the same.

    Returns:
        The sorted list of variable names written.

    Raises:
        CheckpointError: an ``albert_unshared`` model whose layers no longer hold the same
            weights (ALBERT's names store one shared set).
        kerasbert.disk_space.NoSpace: the disk has no room for the checkpoint; nothing is
            written.

    Example:
        >>> import os, tempfile
        >>> from kerasbert import build_transformer_model
        >>> bert = build_transformer_model(dict(
        ...     vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        ...     intermediate_size=32, max_position_embeddings=32, type_vocab_size=2))
        >>> filename = os.path.join(tempfile.mkdtemp(), "bert_model.ckpt")
        >>> save_weights_as_checkpoint(bert, filename)[:1]
        ['bert/embeddings/LayerNorm/beta']
    """
    variables: dict[str, np.ndarray] = {}
    owners: dict[str, str] = {}
    for target in model_targets(model, family, mapping=mapping, prefix=prefix):
        stored = (target.owner.stored_weight(target.attribute)
                  if isinstance(target.owner, ProjectionOwner) else target.variable)
        value = keras.ops.convert_to_numpy(stored)
        if target.name in TRANSPOSED_VARIABLES:
            value = value.T
        value = value if dtype is None else value.astype(dtype)
        if target.name in variables and not np.array_equal(variables[target.name], value):
            raise CheckpointError(
                f"{target.layer}.{target.attribute} and {owners[target.name]} differ, but "
                f"both are stored as {target.name}: an unshared ALBERT fine-tuned apart "
                "cannot be written under ALBERT's shared names")
        variables[target.name], owners[target.name] = value, f"{target.layer}.{target.attribute}"
    write_checkpoint(variables, filename)
    return sorted(variables)
