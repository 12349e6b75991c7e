"""Every private Keras and TensorFlow hook kerasbert uses, checked when first used.

kerasbert's fast paths and its fixes to distributed training rest on parts of Keras and
TensorFlow that are not public API: a tensor's padding mask, the optimizer's Adam moments,
variables created without a value, the methods ``fit`` calls to build a model and to clip
and sum gradients, TensorFlow's XLA context. They are reached here and nowhere else (a test
reads the package to keep it so), each through one small function.

Nothing is checked at import: ``import kerasbert`` works under any Keras, with ``fit``
wrapped by a monitoring tool or a hook gone. The first time a fast path is asked for
(:func:`fast_paths_enabled` with its name, one of :data:`FAST_PATHS`), its hooks are
checked: that each exists with the expected signature, and that the Keras code kerasbert
relies on still calls it. A path whose hook is missing or changed steps aside, with one
warning naming the hook and the versions, and kerasbert runs Keras's own form there; the
other paths stay on. The two hooks needed either way (the padding mask, the autocast scope)
raise :class:`KerasInternalsError` when first used instead. :func:`check` checks them all
at once and raises, for a user who wants to know before training.

The switch: ``KERASBERT_FAST=0`` in the environment (read at import), or
``with fast_paths(False):`` in code, turns every fast path off and kerasbert trains with
Keras's own forms: Keras's dropout draw and Adam update, GELU's derivative by autodiff,
products of every row (padding's too) in ``MatMul`` + ``AddV2``, weights drawn before a
checkpoint is assigned over them, and ``fit`` under a distribution strategy as Keras runs
it. The padding mask is needed either way.

Example:
    >>> from kerasbert import internals
    >>> internals.fast_paths_enabled()
    True
    >>> with internals.fast_paths(False):
    ...     internals.fast_paths_enabled("adam")
    False
"""

import contextlib
import dataclasses
import importlib
import inspect
import os
import types
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import keras

#: The Keras releases kerasbert is tested with, [first, last) as (major, minor); setup.cfg's
#: requirement is :data:`KERAS_REQUIREMENT` (a test keeps the two equal).
KERAS_TESTED = ((3, 8), (3, 16))
KERAS_REQUIREMENT = "keras>={}.{},<{}.{}".format(*KERAS_TESTED[0], *KERAS_TESTED[1])
#: The environment variable of the switch: 0 turns the fast paths off, 1 (the default) on.
SWITCH = "KERASBERT_FAST"
#: Each fast path, by the name :func:`fast_paths_enabled` takes, and what it does.
FAST_PATHS = {
    "deferred": "weights created from the checkpoint's values without drawing them first",
    "adam": "the Adam update as one TensorFlow kernel",
    "fit": "fit over arrays as one endless pipeline",
    "distribution": "fit under a strategy built from the data's shapes, clipping after the sum",
    "kernels": "products of real tokens' rows, 16-bit dropout draws, GELU's own derivative",
    "build": "fit's loss, metrics and optimizer state made before its step is traced, so "
             "TensorFlow traces the step once instead of twice",
}
_PENDING = "uninitialized_variables"  # Keras's list of deferred variables


class KerasInternalsError(ImportError):
    """A private Keras or TensorFlow hook kerasbert needs is missing or has changed."""


def _private(module: str) -> types.ModuleType:
    """The private Keras module ``module`` (``keras.src....``); AttributeError naming it
    where the installed Keras has none (a hook's check reads that as missing)."""
    try:
        return importlib.import_module(module)
    except ImportError as missing:
        raise AttributeError(f"module {module} cannot be imported: {missing}") from missing


# --------------------------------------------------------------------------- the hooks
_BACKEND = "keras.src.backend"
_GLOBAL_STATE = "keras.src.backend.common.global_state"
_STATELESS = "keras.src.backend.common.stateless_scope"
_VARIABLES = "keras.src.backend.common.variables"
_ARRAYS = "keras.src.trainers.data_adapters.array_data_adapter"
_SLICING = "keras.src.trainers.data_adapters.array_slicing"
_ADAPTER = "keras.src.trainers.data_adapters.data_adapter"
_EPOCHS = "keras.src.trainers.epoch_iterator"


@dataclasses.dataclass(frozen=True)
class Hook:
    """One private hook: where it is, the parameters it must take, the Keras functions
    that must still call it (or set it, for an attribute), and the fast path it serves."""

    name: str
    find: Callable[[], Any]  # () -> the function (None for an attribute alone)
    parameters: tuple[str, ...] | None = None  # the function's parameter names; None: not checked
    # ((what, () -> a Keras function), ...) whose code names `attribute`
    used_by: tuple[tuple[str, Callable[[], Any]], ...] = ()
    # the name (or names) the functions of `used_by` must use
    attribute: str | tuple[str, ...] | None = None
    path: str | None = None  # the fast path of FAST_PATHS it serves; None: needed by every path


def _hooks() -> list[Hook]:
    """The hooks of the installed backend (TensorFlow's are checked only there)."""
    hooks = [
        Hook("keras.src.backend.get_keras_mask", lambda: _private(_BACKEND).get_keras_mask,
             ("x",)),
        Hook("keras.layers.Dense._kernel", lambda: None,
             used_by=(("Dense.build", lambda: keras.layers.Dense.build),), attribute="_kernel"),
        Hook("keras.src.backend.common.variables.AutocastScope",
             lambda: _private(_VARIABLES).AutocastScope.__init__, ("self", "dtype")),
        Hook("keras.src.backend.common.global_state.get_global_attribute",
             lambda: _private(_GLOBAL_STATE).get_global_attribute,
             ("name", "default", "set_to_default"), path="deferred"),
        Hook("keras.src.backend.common.global_state.set_global_attribute",
             lambda: _private(_GLOBAL_STATE).set_global_attribute, ("name", "value"),
             path="deferred"),
        Hook("keras.src.backend.common.stateless_scope.in_stateless_scope",
             lambda: _private(_STATELESS).in_stateless_scope, (), path="deferred"),
        Hook(f"Keras's list of deferred variables {_PENDING!r}",
             lambda: _private(_VARIABLES).register_uninitialized_variable, ("variable",),
             used_by=(("register_uninitialized_variable",
                       lambda: _private(_VARIABLES).register_uninitialized_variable),),
             attribute=_PENDING, path="deferred"),
        Hook("keras.Variable._initialize", lambda: keras.Variable._initialize, ("self", "value"),
             path="deferred"),
        Hook("keras.Variable._deferred_initialize", lambda: keras.Variable._deferred_initialize,
             ("self",), path="deferred"),
        Hook("keras.Variable._value and ._initializer", lambda: None,
             used_by=(("Variable.__init__", lambda: _private(_VARIABLES).Variable.__init__),),
             attribute=("_value", "_initializer"), path="deferred"),
        Hook("keras.optimizers.Optimizer._get_variable_index",
             lambda: keras.optimizers.Optimizer._get_variable_index, ("self", "variable"),
             path="adam"),
        Hook("keras.optimizers.AdamW._momentums and ._velocities", lambda: None,
             used_by=(("AdamW.build", lambda: keras.optimizers.AdamW.build),),
             attribute=("_momentums", "_velocities"), path="adam"),
        Hook("keras.src.trainers.data_adapters.array_data_adapter.can_convert_arrays",
             lambda: _private(_ARRAYS).can_convert_arrays, ("arrays",), path="fit"),
        Hook("keras.src.trainers.data_adapters.array_slicing.train_validation_split",
             lambda: _private(_SLICING).train_validation_split, ("arrays", "validation_split"),
             path="fit"),
        Hook("keras.src.trainers.data_adapters.array_data_adapter.ArrayDataAdapter",
             lambda: _private(_ARRAYS).ArrayDataAdapter.__init__,
             ("self", "x", "y", "sample_weight", "batch_size", "steps", "shuffle",
              "class_weight"), path="fit"),
        Hook("ArrayDataAdapter.get_tf_dataset and .num_batches", lambda: None,
             used_by=(("ArrayDataAdapter.get_tf_dataset",
                       lambda: _private(_ARRAYS).ArrayDataAdapter.get_tf_dataset),),
             attribute=("_batch_size", "_num_samples", "_shuffle"), path="fit"),
    ]
    if keras.backend.backend() != "tensorflow":
        return hooks
    import tensorflow as tf

    return hooks + [
        Hook("tf.__internal__.get_enclosing_xla_context",
             lambda: tf.__internal__.get_enclosing_xla_context, (), path="kernels"),
        Hook("keras.Model._maybe_symbolic_build", lambda: keras.Model._maybe_symbolic_build,
             ("self", "iterator", "data_batch"),
             used_by=(("Model.fit", lambda: keras.Model.fit),
                      ("Model.evaluate", lambda: keras.Model.evaluate)),
             attribute="_maybe_symbolic_build", path="distribution"),
        Hook("keras.Model._symbolic_build", lambda: keras.Model._symbolic_build,
             ("self", "iterator", "data_batch"), path="distribution"),
        Hook("keras.Model._symbolic_build", lambda: keras.Model._symbolic_build,
             ("self", "iterator", "data_batch"),
             used_by=(("Model._symbolic_build", lambda: keras.Model._symbolic_build),),
             attribute=("optimizer", "_compile_metrics", "_compile_loss"), path="build"),
        Hook("keras.Model._distribute_strategy", lambda: None,
             used_by=(("Model._maybe_symbolic_build", lambda: keras.Model._maybe_symbolic_build),),
             attribute="_distribute_strategy", path="build"),
        Hook("the epoch iterator's data_adapter.get_tf_dataset",
             lambda: _private(_ADAPTER).DataAdapter.get_tf_dataset, ("self",),
             used_by=(("EpochIterator.__init__",
                       lambda: _private(_EPOCHS).EpochIterator.__init__),),
             attribute="data_adapter", path="distribution"),
        Hook("keras.optimizers.AdamW._clip_gradients",
             lambda: keras.optimizers.AdamW._clip_gradients, ("self", "grads"),
             used_by=(("Optimizer._backend_apply_gradients",
                       lambda: keras.optimizers.AdamW._backend_apply_gradients),),
             attribute="_clip_gradients", path="distribution"),
        Hook("keras.optimizers.AdamW._all_reduce_sum_gradients",
             lambda: keras.optimizers.AdamW._all_reduce_sum_gradients,
             ("self", "grads_and_vars"),
             used_by=(("Optimizer._backend_update_step",
                       lambda: keras.optimizers.AdamW._backend_update_step),),
             attribute="_all_reduce_sum_gradients", path="distribution"),
    ]


def _names_in(function: Callable[..., Any]) -> set[str]:
    """Every name the code of ``function`` (and of the functions defined in it) uses."""
    names: set[str] = set()
    codes = [inspect.unwrap(function).__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        names.update(c for c in code.co_consts if isinstance(c, str))
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def _problem(hook: Hook) -> str | None:
    """What is wrong with ``hook`` in the installed Keras, or None."""
    try:
        found = hook.find()
    except AttributeError as missing:
        return f"it is missing ({missing})"
    if hook.parameters is not None:
        try:
            parameters = tuple(inspect.signature(found).parameters)
        except (TypeError, ValueError):
            return f"it is not a function ({found!r})"
        if parameters != hook.parameters:
            return (f"it takes ({', '.join(parameters)}), kerasbert expects "
                    f"({', '.join(hook.parameters)})")
    attributes = (hook.attribute,) if isinstance(hook.attribute, str) else hook.attribute or ()
    for where, function in hook.used_by:
        try:
            names = _names_in(function())
        except (AttributeError, TypeError) as missing:  # TypeError: a callable without code
            return f"{where} is missing or not Keras's own ({missing})"
        lost = [name for name in attributes if name not in names]
        if lost:
            return f"{where} no longer uses {', '.join(lost)}"
    return None


def _problems(paths: Collection[str | None]) -> list[tuple[Hook, str]]:
    """``[(hook, problem), ...]`` of the hooks of ``paths`` (None: the hooks every path
    needs) that the installed Keras breaks."""
    return [(hook, problem) for hook in _hooks() if hook.path in paths
            for problem in [_problem(hook)] if problem]


def versions() -> str:
    """``"Keras 3.15.1, TensorFlow 2.21.0"``: the installed versions, for messages."""
    text = f"Keras {keras.__version__}"
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        text += f", TensorFlow {tf.__version__}"
    return text


def check(fast: bool | None = None) -> None:
    """Checks every hook against the installed Keras and TensorFlow, at once.

    kerasbert checks each hook when it is first used (a fast path steps aside with a
    warning); this is for a user or a test that wants every answer now.

    Args:
        fast: whether the fast paths' hooks are checked too (None: the switch's state).

    Raises:
        KerasInternalsError: naming each hook that is missing or changed, both versions,
            the Keras releases kerasbert is tested with and what to do.
    """
    fast = _fast if fast is None else fast
    problems = _problems({None, *FAST_PATHS} if fast else {None})
    if problems:
        raise _error(problems)


def _error(problems: Sequence[tuple[Hook, str]]) -> KerasInternalsError:
    lines = [f"- {hook.name}: {problem}" for hook, problem in problems]
    advice = f"install a Keras that kerasbert is tested with (pip install '{KERAS_REQUIREMENT}')"
    if all(hook.path for hook, _ in problems):
        advice += (f", or set {SWITCH}=0 to run with Keras's own forms, without kerasbert's "
                   "fast paths (each steps aside by itself, with a warning, when first used)")
    return KerasInternalsError(
        f"kerasbert needs private Keras/TensorFlow hooks that {versions()} changed:\n"
        + "\n".join(lines) + f"\nkerasbert is tested with {KERAS_REQUIREMENT}; {advice}.")


#: path -> the problems of its hooks (None: of the hooks every path needs), found when the
#: path is first used; :func:`forget_checks` empties it.
_checked: dict[str | None, list[tuple[Hook, str]]] = {}


def _required() -> None:
    """Checks, once, the hooks every path needs; raises KerasInternalsError naming them."""
    if None not in _checked:
        _checked[None] = _problems({None})
    if _checked[None]:
        raise _error(_checked[None])


def _path_works(path: str) -> bool:
    """Whether the hooks of the fast path ``path`` pass their check; the first time one
    fails, a warning names it, the versions and the form used instead."""
    if path not in _checked:
        _checked[path] = _problems({path})
        if _checked[path]:
            hooks = "; ".join(f"{hook.name}: {problem}" for hook, problem in _checked[path])
            warnings.warn(
                f"kerasbert's fast path {path!r} ({FAST_PATHS[path]}) steps aside: {hooks} in "
                f"{versions()} (kerasbert is tested with {KERAS_REQUIREMENT}); Keras's own form "
                "is used instead", RuntimeWarning, stacklevel=3)
    return not _checked[path]


def forget_checks() -> None:
    """Forgets which hooks were checked: each is checked again when next used (after
    Keras's classes changed in the same process, as tests do)."""
    _checked.clear()


# --------------------------------------------------------------------------- the switch
def switch_from_environment(environ: Mapping[str, str] = os.environ) -> bool:
    """The switch's state that ``environ`` asks for: ``KERASBERT_FAST`` 0 is off, 1 or
    unset is on.

    Raises:
        ValueError: any other value, named.
    """
    value = environ.get(SWITCH, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{SWITCH}={value!r} must be 0 (Keras's own forms) or 1 "
                         "(kerasbert's fast paths, the default)")
    return value == "1"


_fast = switch_from_environment()


def fast_paths_enabled(path: str | None = None) -> bool:
    """Whether kerasbert's fast paths are on (``KERASBERT_FAST``, :func:`fast_paths`); with
    ``path`` (a name of :data:`FAST_PATHS`), whether that one runs: the switch is on and
    its hooks pass their check in the installed Keras (checked on the first ask; a failed
    one warns once and steps aside).

    Raises:
        ValueError: a ``path`` that is not one of :data:`FAST_PATHS`.
    """
    if path is not None and path not in FAST_PATHS:
        raise ValueError(f"no fast path {path!r}; the paths are {', '.join(FAST_PATHS)}")
    if not _fast:
        return False
    return path is None or _path_works(path)


@contextlib.contextmanager
def fast_paths(enabled: bool) -> Iterator[None]:
    """Turns the fast paths on or off inside the block, and back as they were after it.

    The switch is read when each fast form is chosen: a feed-forward layer's GELU when the
    layer is made, products, dropout and the Adam update when Keras traces a step, the
    distribution fixes by :func:`kerasbert.training.distribute.fit_under`, deferred weights
    by ``build_transformer_model``. So build, compile and train inside the block. Turned
    on, a path whose hooks the installed Keras lacks still steps aside (with its warning).

    Example:
        >>> with fast_paths(False):
        ...     fast_paths_enabled()
        False
    """
    global _fast
    before, _fast = _fast, bool(enabled)
    try:
        yield
    finally:
        _fast = before


# ------------------------------------------------------------------ what kerasbert reaches
def get_keras_mask(x: Any) -> Any:
    """The padding mask Keras keeps on the tensor ``x`` (None where it has none)."""
    _required()
    return _private(_BACKEND).get_keras_mask(x)


def dense_kernel(layer: keras.layers.Layer) -> keras.Variable:
    """A Keras ``Dense`` layer's kernel variable itself: the frozen one under LoRA adapters,
    the integers of a quantized layer (its public ``kernel`` is then the sum with the
    adapters, or the unpacked values)."""
    _required()
    return layer._kernel


def in_xla_context() -> bool:
    """Whether the code being traced is compiled by XLA (TensorFlow)."""
    import tensorflow as tf

    return tf.__internal__.get_enclosing_xla_context() is not None


def autocast(dtype: str) -> Any:
    """The scope in which Keras variables read as ``dtype`` (floating ones), as they do
    inside a layer's ``__call__`` under a mixed policy: for code that reads a layer's
    weights outside it (the decoding loop's cached steps)."""
    _required()
    return _private(_VARIABLES).AutocastScope(dtype)


def in_symbolic_scope() -> bool:
    """Whether Keras is only working out shapes and dtypes (``compute_output_spec``: a loss
    run on placeholders while ``fit`` makes its state ahead of the step), where nothing
    computed is kept. False where the installed Keras has no such scope."""
    try:
        return _private("keras.src.backend.common.symbolic_scope").in_symbolic_scope()
    except AttributeError:
        return False


def training_of_current_call() -> Any:
    """The ``training`` flag of the layer call in progress (True, False, a tensor, or None
    where no call is in progress or none was given). Keras keeps it on the call context it
    hands down from an outer layer's ``__call__`` to the inner ones, also to layers whose
    ``call`` takes no ``training``; None where the installed Keras has no such context."""
    try:
        context = _private(_GLOBAL_STATE).get_global_attribute("current_call_ctx")
    except AttributeError:
        return None
    return getattr(context, "training", None)


def in_stateless_scope() -> bool:
    """Whether a ``keras.StatelessScope`` is open."""
    return _private(_STATELESS).in_stateless_scope()


def pending_variables() -> list[Any]:
    """Keras's list of deferred variables, initialized when a stateless scope closes."""
    return _private(_GLOBAL_STATE).get_global_attribute(_PENDING) or []


def set_pending_variables(pending: Iterable[Any]) -> None:
    """Replaces Keras's list of deferred variables with ``pending``."""
    _private(_GLOBAL_STATE).set_global_attribute(_PENDING, list(pending))


def is_deferred(variable: keras.Variable) -> bool:
    """True for a variable made in ``StatelessScope(initialize_variables=False)`` and
    not given a value yet."""
    return getattr(variable, "_value", True) is None


def create_from_value(variable: keras.Variable, value: Any) -> None:
    """Creates the deferred ``variable`` from ``value`` (one allocation); its initializer
    is dropped, so it is never drawn."""
    variable._initialize(value)
    variable._initializer = None


def initialize_deferred(variable: keras.Variable) -> None:
    """Gives the deferred ``variable`` its initializer's value."""
    variable._deferred_initialize()


def are_arrays(arrays: Any) -> bool:
    """Whether every leaf of the nest ``arrays`` is an array Keras's ``fit`` slices
    (NumPy, a tensor, a pandas frame; None leaves allowed)."""
    return _private(_ARRAYS).can_convert_arrays(arrays)


def split_for_validation(arrays: Any, validation_split: float) -> tuple[Any, Any]:
    """``(train, validation)``: Keras ``fit``'s ``validation_split`` of the nest ``arrays``
    (the last rows are the validation ones)."""
    return _private(_SLICING).train_validation_split(arrays, validation_split=validation_split)


def endless_array_batches(x: Any, y: Any, sample_weight: Any, batch_size: int, shuffle: bool | str,
                          class_weight: dict[int, float] | None = None) -> tuple[Any, int]:
    """``(dataset, steps)``: the batches Keras's ``fit`` makes of arrays for one epoch (its
    order, shuffled again each pass when ``shuffle``, its last partial batch, its class
    weights), repeated without end, and how many make an epoch."""
    adapter = _private(_ARRAYS).ArrayDataAdapter(
        x, y, sample_weight=sample_weight, batch_size=batch_size, shuffle=shuffle,
        class_weight=class_weight)
    return adapter.get_tf_dataset().repeat(), adapter.num_batches


def adam_slots(optimizer: keras.optimizers.Optimizer,
               variable: keras.Variable) -> tuple[keras.Variable, keras.Variable]:
    """``(first moment, second moment)``: the Keras variables an Adam ``optimizer`` keeps
    for ``variable``."""
    index = optimizer._get_variable_index(variable)
    return optimizer._momentums[index], optimizer._velocities[index]


# Distribution fixes: methods replaced on one model or optimizer (never on the class).
_MARK = "_kerasbert_hook"


def _install(owner: object, name: str, replacement: Callable[..., Any]) -> None:
    setattr(replacement, _MARK, name)
    setattr(owner, name, replacement)


def build_from_element_spec(model: keras.Model, strategy: Any) -> None:
    """Makes ``fit`` / ``evaluate`` build ``model`` under ``strategy`` from the dataset's
    ``element_spec`` (shapes and dtypes) instead of from a batch drawn from the data."""
    def build(iterator: Any = None, data_batch: Any = None) -> None:
        if iterator is not None:
            data_batch = iterator.data_adapter.get_tf_dataset().element_spec
        with strategy.scope():
            model._symbolic_build(data_batch=data_batch)

    _install(model, "_maybe_symbolic_build", build)


def build_before_tracing(model: keras.Model, element_spec: Any) -> None:
    """Makes the state ``fit`` adds to the compiled ``model`` (its loss's and metrics'
    variables, the optimizer's slots) from the shapes and dtypes ``element_spec`` of the
    training data, before ``fit`` traces its step.

    Without a distribution strategy Keras makes that state inside the first trace, and
    TensorFlow traces a function that creates variables a second time (the step of
    Chinese BERT-base takes seconds to trace). Under a strategy Keras builds first itself
    (and :func:`build_from_element_spec` builds it there): nothing is done.
    """
    if model._distribute_strategy is None:
        model._symbolic_build(data_batch=element_spec)


def clip_after_sum(optimizer: keras.optimizers.Optimizer) -> None:
    """Makes ``optimizer`` clip the gradient summed over the replicas, once, instead of
    each replica's part before the sum (its own clipping, moved)."""
    if installed_hooks(optimizer):
        return  # already moved: the methods it holds are ours
    clip, sum_over_replicas = optimizer._clip_gradients, optimizer._all_reduce_sum_gradients

    def sum_then_clip(grads_and_vars: Sequence[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        grads_and_vars = sum_over_replicas(grads_and_vars)
        grads = clip([g for g, _ in grads_and_vars])
        return list(zip(grads, [v for _, v in grads_and_vars]))

    _install(optimizer, "_clip_gradients", lambda grads: grads)  # each replica's part: not here
    _install(optimizer, "_all_reduce_sum_gradients", sum_then_clip)


def installed_hooks(owner: object) -> list[str]:
    """The names of the methods kerasbert replaced on ``owner`` (a model or optimizer)."""
    return sorted(name for name, value in vars(owner).items() if hasattr(value, _MARK))


def remove_hooks(owner: object) -> list[str]:
    """Gives ``owner`` Keras's own methods back; returns the names removed."""
    removed = installed_hooks(owner)
    for name in removed:
        del vars(owner)[name]  # functions are not tracked: no Keras bookkeeping to undo
    return removed


def layer_of(tensor: Any) -> Any:
    """The layer (or operation) that made a symbolic Keras tensor, or None (an eager value,
    or a Keras without the record). Keras keeps it as ``tensor._keras_history``."""
    history = getattr(tensor, "_keras_history", None)
    return getattr(history, "operation", None)


def inbound_layers(layer: Any) -> list[Any]:
    """The layers whose outputs ``layer`` was called on in a functional graph, each call's in
    order ([] for an input layer, or a Keras without the record)."""
    return [parent.operation for node in getattr(layer, "_inbound_nodes", ())
            for parent in getattr(node, "parent_nodes", ())]


def model_computing_loss() -> tuple[keras.Model, Any] | None:
    """``(model, y_pred)`` of the innermost ``Model.compute_loss`` running in this thread, or
    None. A loss given to ``compile`` runs inside it (in ``fit``'s traced step, ``evaluate``'s,
    or a ``train_step`` of the user's), where ``y_pred`` is a plain tensor that no longer
    says which model made it; the call stack still does."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "compute_loss":
                model = frame.f_locals.get("self")
                if isinstance(model, keras.Model):
                    return model, frame.f_locals.get("y_pred")
            frame = frame.f_back
        return None
    finally:
        del frame  # a frame held here would keep every caller's locals alive
