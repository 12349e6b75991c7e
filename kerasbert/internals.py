"""Every private Keras and TensorFlow hook kerasbert uses, checked when it is imported.

kerasbert's fast paths and its fixes to distributed training rest on parts of Keras and
TensorFlow that are not public API: a tensor's padding mask, the optimizer's Adam moments,
variables created without a value, the methods ``fit`` calls to build a model and to clip
and sum gradients, TensorFlow's XLA context. They are reached here and nowhere else (a test
reads the package to keep it so), each through one small function. At import each hook is
checked: that it exists with the expected signature, and that the Keras code kerasbert
relies on still calls it. A Keras that changed one fails here, with the hook and both
versions named, rather than training on without the fix.

The switch: ``KERASBERT_FAST=0`` in the environment (read at import), or
``with fast_paths(False):`` in code, turns every fast path off and kerasbert trains with
Keras's own forms: Keras's dropout draw and Adam update, GELU's derivative by autodiff,
products of every row (padding's too) in ``MatMul`` + ``AddV2``, weights drawn before a
checkpoint is assigned over them, and ``fit`` under a distribution strategy as Keras runs
it. Where a hook of a newer Keras fails the check, ``KERASBERT_FAST=0`` lets kerasbert run
without it. The padding mask is needed either way.

Example:
    >>> from kerasbert import internals
    >>> internals.fast_paths_enabled()
    True
    >>> with internals.fast_paths(False):
    ...     internals.fast_paths_enabled()
    False
"""

import contextlib
import dataclasses
import inspect
import os
import types

import keras

#: The Keras releases kerasbert is tested with, [first, last) as (major, minor); setup.cfg's
#: requirement is :data:`KERAS_REQUIREMENT` (a test keeps the two equal).
KERAS_TESTED = ((3, 8), (3, 16))
KERAS_REQUIREMENT = "keras>={}.{},<{}.{}".format(*KERAS_TESTED[0], *KERAS_TESTED[1])
#: The environment variable of the switch: 0 turns the fast paths off, 1 (the default) on.
SWITCH = "KERASBERT_FAST"
_PENDING = "uninitialized_variables"  # Keras's list of deferred variables


class KerasInternalsError(ImportError):
    """A private Keras or TensorFlow hook kerasbert needs is missing or has changed."""


try:
    from keras.src.backend import get_keras_mask  # noqa: F401  (re-exported: layers read masks)
    from keras.src.backend.common import global_state, stateless_scope, variables
    from keras.src.trainers import epoch_iterator
    from keras.src.trainers.data_adapters import array_data_adapter, array_slicing, data_adapter
except ImportError as missing:
    raise KerasInternalsError(
        f"kerasbert needs private Keras modules that Keras {keras.__version__} does not have "
        f"({missing}); kerasbert is tested with {KERAS_REQUIREMENT}: install one "
        f"(pip install '{KERAS_REQUIREMENT}')") from missing


# --------------------------------------------------------------------------- the hooks
@dataclasses.dataclass(frozen=True)
class Hook:
    """One private hook: where it is, the parameters it must take, and the Keras
    functions that must still call it (or set it, for an attribute)."""

    name: str
    find: object  # () -> the function (None for an attribute alone)
    parameters: tuple = None  # the function's parameter names; None: not checked
    used_by: tuple = ()  # ((what, () -> a Keras function), ...) whose code names `attribute`
    attribute: object = None  # the name (or names) the functions of `used_by` must use
    fast: bool = True  # False: needed with the fast paths off too


def _hooks():
    """The hooks of the installed backend (TensorFlow's are checked only there)."""
    hooks = [
        Hook("keras.src.backend.get_keras_mask", lambda: get_keras_mask, ("x",), fast=False),
        Hook("keras.src.backend.common.global_state.get_global_attribute",
             lambda: global_state.get_global_attribute, ("name", "default", "set_to_default")),
        Hook("keras.src.backend.common.global_state.set_global_attribute",
             lambda: global_state.set_global_attribute, ("name", "value")),
        Hook("keras.src.backend.common.stateless_scope.in_stateless_scope",
             lambda: stateless_scope.in_stateless_scope, ()),
        Hook("keras.src.backend.common.variables.AutocastScope",
             lambda: variables.AutocastScope.__init__, ("self", "dtype"), fast=False),
        Hook(f"Keras's list of deferred variables {_PENDING!r}",
             lambda: variables.register_uninitialized_variable, ("variable",),
             used_by=(("register_uninitialized_variable",
                       lambda: variables.register_uninitialized_variable),),
             attribute=_PENDING),
        Hook("keras.Variable._initialize", lambda: keras.Variable._initialize, ("self", "value")),
        Hook("keras.Variable._deferred_initialize", lambda: keras.Variable._deferred_initialize,
             ("self",)),
        Hook("keras.Variable._value and ._initializer", lambda: None,
             used_by=(("Variable.__init__", lambda: variables.Variable.__init__),),
             attribute=("_value", "_initializer")),
        Hook("keras.optimizers.Optimizer._get_variable_index",
             lambda: keras.optimizers.Optimizer._get_variable_index, ("self", "variable")),
        Hook("keras.optimizers.AdamW._momentums and ._velocities", lambda: None,
             used_by=(("AdamW.build", lambda: keras.optimizers.AdamW.build),),
             attribute=("_momentums", "_velocities")),
        Hook("keras.src.trainers.data_adapters.array_data_adapter.can_convert_arrays",
             lambda: array_data_adapter.can_convert_arrays, ("arrays",)),
        Hook("keras.src.trainers.data_adapters.array_slicing.train_validation_split",
             lambda: array_slicing.train_validation_split, ("arrays", "validation_split")),
        Hook("keras.src.trainers.data_adapters.array_data_adapter.ArrayDataAdapter",
             lambda: array_data_adapter.ArrayDataAdapter.__init__,
             ("self", "x", "y", "sample_weight", "batch_size", "steps", "shuffle",
              "class_weight")),
        Hook("ArrayDataAdapter.get_tf_dataset and .num_batches", lambda: None,
             used_by=(("ArrayDataAdapter.get_tf_dataset",
                       lambda: array_data_adapter.ArrayDataAdapter.get_tf_dataset),),
             attribute=("_batch_size", "_num_samples", "_shuffle")),
    ]
    if keras.backend.backend() != "tensorflow":
        return hooks
    import tensorflow as tf

    return hooks + [
        Hook("tf.__internal__.get_enclosing_xla_context",
             lambda: tf.__internal__.get_enclosing_xla_context, ()),
        Hook("keras.Model._maybe_symbolic_build", lambda: keras.Model._maybe_symbolic_build,
             ("self", "iterator", "data_batch"),
             used_by=(("Model.fit", lambda: keras.Model.fit),
                      ("Model.evaluate", lambda: keras.Model.evaluate)),
             attribute="_maybe_symbolic_build"),
        Hook("keras.Model._symbolic_build", lambda: keras.Model._symbolic_build,
             ("self", "iterator", "data_batch")),
        Hook("the epoch iterator's data_adapter.get_tf_dataset",
             lambda: data_adapter.DataAdapter.get_tf_dataset, ("self",),
             used_by=(("EpochIterator.__init__", lambda: epoch_iterator.EpochIterator.__init__),),
             attribute="data_adapter"),
        Hook("keras.optimizers.AdamW._clip_gradients",
             lambda: keras.optimizers.AdamW._clip_gradients, ("self", "grads"),
             used_by=(("Optimizer._backend_apply_gradients",
                       lambda: keras.optimizers.AdamW._backend_apply_gradients),),
             attribute="_clip_gradients"),
        Hook("keras.optimizers.AdamW._all_reduce_sum_gradients",
             lambda: keras.optimizers.AdamW._all_reduce_sum_gradients,
             ("self", "grads_and_vars"),
             used_by=(("Optimizer._backend_update_step",
                       lambda: keras.optimizers.AdamW._backend_update_step),),
             attribute="_all_reduce_sum_gradients"),
    ]


def _names_in(function):
    """Every name the code of ``function`` (and of the functions defined in it) uses."""
    names, codes = set(), [inspect.unwrap(function).__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        names.update(c for c in code.co_consts if isinstance(c, str))
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def _problem(hook):
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
    attributes = (hook.attribute,) if isinstance(hook.attribute, str) else hook.attribute
    for where, function in hook.used_by:
        try:
            names = _names_in(function())
        except AttributeError as missing:
            return f"{where} is missing ({missing})"
        lost = [name for name in attributes if name not in names]
        if lost:
            return f"{where} no longer uses {', '.join(lost)}"
    return None


def versions():
    """``"Keras 3.15.1, TensorFlow 2.21.0"``: the installed versions, for messages."""
    text = f"Keras {keras.__version__}"
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        text += f", TensorFlow {tf.__version__}"
    return text


def check(fast=None):
    """Checks every hook against the installed Keras and TensorFlow.

    Args:
        fast: whether the fast paths' hooks are needed too (None: the switch's state).

    Raises:
        KerasInternalsError: naming each hook that is missing or changed, both versions,
            the Keras releases kerasbert is tested with and what to do.
    """
    fast = fast_paths_enabled() if fast is None else fast
    problems = [(hook, problem) for hook in _hooks() if fast or not hook.fast
                for problem in [_problem(hook)] if problem]
    if not problems:
        return
    lines = [f"- {hook.name}: {problem}" for hook, problem in problems]
    advice = f"install a Keras that kerasbert is tested with (pip install '{KERAS_REQUIREMENT}')"
    if all(hook.fast for hook, _ in problems):
        advice += (f", or set {SWITCH}=0 to run with Keras's own forms, without kerasbert's "
                   "fast paths")
    raise KerasInternalsError(
        f"kerasbert needs private Keras/TensorFlow hooks that {versions()} changed:\n"
        + "\n".join(lines) + f"\nkerasbert is tested with {KERAS_REQUIREMENT}; {advice}.")


# --------------------------------------------------------------------------- the switch
def switch_from_environment(environ=os.environ):
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


def fast_paths_enabled():
    """Whether kerasbert's fast paths are on (``KERASBERT_FAST``, :func:`fast_paths`)."""
    return _fast


@contextlib.contextmanager
def fast_paths(enabled):
    """Turns the fast paths on or off inside the block, and back as they were after it.

    The switch is read when each fast form is chosen: a feed-forward layer's GELU when the
    layer is made, products, dropout and the Adam update when Keras traces a step, the
    distribution fixes by :func:`kerasbert.training.distribute.fit_under`, deferred weights
    by ``build_transformer_model``. So build, compile and train inside the block.

    Raises:
        KerasInternalsError: turning them on where the installed Keras lacks a hook.

    Example:
        >>> with fast_paths(False):
        ...     fast_paths_enabled()
        False
    """
    global _fast
    if enabled:
        check(fast=True)
    before, _fast = _fast, bool(enabled)
    try:
        yield
    finally:
        _fast = before


# ------------------------------------------------------------------ what kerasbert reaches
def in_xla_context():
    """Whether the code being traced is compiled by XLA (TensorFlow)."""
    import tensorflow as tf

    return tf.__internal__.get_enclosing_xla_context() is not None


def autocast(dtype):
    """The scope in which Keras variables read as ``dtype`` (floating ones), as they do
    inside a layer's ``__call__`` under a mixed policy: for code that reads a layer's
    weights outside it (the decoding loop's cached steps)."""
    return variables.AutocastScope(dtype)


def in_stateless_scope():
    """Whether a ``keras.StatelessScope`` is open."""
    return stateless_scope.in_stateless_scope()


def pending_variables():
    """Keras's list of deferred variables, initialized when a stateless scope closes."""
    return global_state.get_global_attribute(_PENDING) or []


def set_pending_variables(pending):
    """Replaces Keras's list of deferred variables with ``pending``."""
    global_state.set_global_attribute(_PENDING, list(pending))


def is_deferred(variable):
    """True for a variable made in ``StatelessScope(initialize_variables=False)`` and
    not given a value yet."""
    return getattr(variable, "_value", True) is None


def create_from_value(variable, value):
    """Creates the deferred ``variable`` from ``value`` (one allocation); its initializer
    is dropped, so it is never drawn."""
    variable._initialize(value)
    variable._initializer = None


def initialize_deferred(variable):
    """Gives the deferred ``variable`` its initializer's value."""
    variable._deferred_initialize()


def are_arrays(arrays):
    """Whether every leaf of the nest ``arrays`` is an array Keras's ``fit`` slices
    (NumPy, a tensor, a pandas frame; None leaves allowed)."""
    return array_data_adapter.can_convert_arrays(arrays)


def split_for_validation(arrays, validation_split):
    """``(train, validation)``: Keras ``fit``'s ``validation_split`` of the nest ``arrays``
    (the last rows are the validation ones)."""
    return array_slicing.train_validation_split(arrays, validation_split=validation_split)


def endless_array_batches(x, y, sample_weight, batch_size, shuffle, class_weight=None):
    """``(dataset, steps)``: the batches Keras's ``fit`` makes of arrays for one epoch (its
    order, shuffled again each pass when ``shuffle``, its last partial batch, its class
    weights), repeated without end, and how many make an epoch."""
    adapter = array_data_adapter.ArrayDataAdapter(
        x, y, sample_weight=sample_weight, batch_size=batch_size, shuffle=shuffle,
        class_weight=class_weight)
    return adapter.get_tf_dataset().repeat(), adapter.num_batches


def adam_slots(optimizer, variable):
    """``(first moment, second moment)``: the Keras variables an Adam ``optimizer`` keeps
    for ``variable``."""
    index = optimizer._get_variable_index(variable)
    return optimizer._momentums[index], optimizer._velocities[index]


# Distribution fixes: methods replaced on one model or optimizer (never on the class).
_MARK = "_kerasbert_hook"


def _install(owner, name, replacement):
    setattr(replacement, _MARK, name)
    setattr(owner, name, replacement)


def build_from_element_spec(model, strategy):
    """Makes ``fit`` / ``evaluate`` build ``model`` under ``strategy`` from the dataset's
    ``element_spec`` (shapes and dtypes) instead of from a batch drawn from the data."""
    def build(iterator=None, data_batch=None):
        if iterator is not None:
            data_batch = iterator.data_adapter.get_tf_dataset().element_spec
        with strategy.scope():
            model._symbolic_build(data_batch=data_batch)

    _install(model, "_maybe_symbolic_build", build)


def clip_after_sum(optimizer):
    """Makes ``optimizer`` clip the gradient summed over the replicas, once, instead of
    each replica's part before the sum (its own clipping, moved)."""
    if installed_hooks(optimizer):
        return  # already moved: the methods it holds are ours
    clip, sum_over_replicas = optimizer._clip_gradients, optimizer._all_reduce_sum_gradients

    def sum_then_clip(grads_and_vars):
        grads_and_vars = sum_over_replicas(grads_and_vars)
        grads = clip([g for g, _ in grads_and_vars])
        return list(zip(grads, [v for _, v in grads_and_vars]))

    _install(optimizer, "_clip_gradients", lambda grads: grads)  # each replica's part: not here
    _install(optimizer, "_all_reduce_sum_gradients", sum_then_clip)


def installed_hooks(owner):
    """The names of the methods kerasbert replaced on ``owner`` (a model or optimizer)."""
    return sorted(name for name, value in vars(owner).items() if hasattr(value, _MARK))


def remove_hooks(owner):
    """Gives ``owner`` Keras's own methods back; returns the names removed."""
    removed = installed_hooks(owner)
    for name in removed:
        del vars(owner)[name]  # functions are not tracked: no Keras bookkeeping to undo
    return removed


check()
