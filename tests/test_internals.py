"""The private Keras hooks in one module: checked when first used (a fast path whose hook
changed steps aside), reached from nowhere else, the Keras they are tested with declared in
setup.cfg, and one switch that turns the fast paths off and trains as plain Keras does."""

import ast
import configparser
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import BertConfig, add_cls_classifier, build_transformer_model, internals
from kerasbert.models import deferred, layers
from kerasbert.models.kernels import Dropout
from kerasbert.models.loading import save_weights_as_checkpoint
from kerasbert.training import distribute
from kerasbert.training.optimizer import AdamW, make_optimizer
from tests.conftest import ROOT, TINY

QUIET = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, dropout_rate=0.0)
PADDED = np.array([[2, 5, 6, 7, 3, 0], [2, 8, 3, 0, 0, 0], [2, 9, 10, 11, 12, 3]], "int32")
#: Operations of the traced train step that only the fast paths put there: the 16-bit
#: dropout draw, the rows of real tokens, the fused Adam update.
FAST_OPERATIONS = {"StatelessRandomUniformFullIntV2", "Bitcast", "GatherNd", "ScatterNd",
                   "ResourceApplyAdam"}


# ------------------------------------------------------------------------ the hook checks
@pytest.fixture(autouse=True)
def checked_again():
    """Each test's hooks are checked afresh, and no failed check outlives its test."""
    internals.forget_checks()
    yield
    internals.forget_checks()


def test_every_hook_passes_its_check_on_the_installed_keras():
    internals.check(fast=True)
    hooks = internals._hooks()
    names = [hook.name for hook in hooks]
    for expected in ("keras.src.backend.get_keras_mask", "keras.Model._maybe_symbolic_build",
                     "keras.optimizers.AdamW._clip_gradients",
                     "tf.__internal__.get_enclosing_xla_context"):
        assert expected in names
    assert {hook.path for hook in hooks} == {None, *internals.FAST_PATHS}  # each path has hooks
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(internals.fast_paths_enabled(path) for path in internals.FAST_PATHS)
    with pytest.raises(ValueError, match="no fast path 'adamw'; the paths are deferred, adam"):
        internals.fast_paths_enabled("adamw")


def test_a_hook_with_another_signature_fails_naming_it_and_the_versions(monkeypatch):
    monkeypatch.setattr(keras.Model, "_maybe_symbolic_build", lambda self, iterator: None)
    with pytest.raises(internals.KerasInternalsError) as failed:
        internals.check(fast=True)
    message = str(failed.value)
    assert ("- keras.Model._maybe_symbolic_build: it takes (self, iterator), kerasbert expects "
            "(self, iterator, data_batch)") in message
    assert f"Keras {keras.__version__}, TensorFlow {tf.__version__}" in message
    assert f"pip install '{internals.KERAS_REQUIREMENT}'" in message
    assert "KERASBERT_FAST=0" in message  # a fast path's hook: the switch lets kerasbert run
    internals.check(fast=False)


def test_a_fast_path_whose_hook_changed_steps_aside_with_one_warning(monkeypatch):
    monkeypatch.setattr(keras.Model, "_maybe_symbolic_build", lambda self, iterator: None)
    with pytest.warns(RuntimeWarning) as caught:
        assert not internals.fast_paths_enabled("distribution")
    assert len(caught) == 1
    assert str(caught[0].message) == (
        "kerasbert's fast path 'distribution' (fit under a strategy built from the data's "
        "shapes, clipping after the sum) steps aside: keras.Model._maybe_symbolic_build: it "
        "takes (self, iterator), kerasbert expects (self, iterator, data_batch) in "
        f"Keras {keras.__version__}, TensorFlow {tf.__version__} (kerasbert is tested with "
        f"{internals.KERAS_REQUIREMENT}); Keras's own form is used instead")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: asked again, no second warning
        assert not internals.fast_paths_enabled("distribution")
        assert internals.fast_paths_enabled("adam") and internals.fast_paths_enabled()


def test_a_hook_keras_no_longer_calls_fails(monkeypatch):
    """The hook may still exist while ``fit`` has stopped calling it: the fix would
    silently stop applying, so that fails too."""
    monkeypatch.setattr(keras.Model, "fit", lambda self, x=None, y=None: self.train_step(x))
    with pytest.raises(internals.KerasInternalsError,
                       match=r"keras.Model._maybe_symbolic_build: Model.fit no longer uses "
                             r"_maybe_symbolic_build"):
        internals.check(fast=True)


def test_a_missing_hook_fails_the_check_and_its_path_steps_aside(monkeypatch):
    monkeypatch.delattr(tf.__internal__, "get_enclosing_xla_context")
    with pytest.raises(internals.KerasInternalsError,
                       match=r"tf.__internal__.get_enclosing_xla_context: it is missing"):
        internals.check(fast=True)
    with internals.fast_paths(False):  # without the fast paths the hook is not needed
        internals.check()
        with internals.fast_paths(True):
            with pytest.warns(RuntimeWarning, match=r"'kernels' .* steps aside: "
                                                    r"tf.__internal__.get_enclosing_xla"):
                assert not internals.fast_paths_enabled("kernels")
        assert not internals.fast_paths_enabled()


def test_the_padding_mask_is_needed_with_the_fast_paths_off_too(monkeypatch):
    import keras.src.backend

    monkeypatch.setattr(keras.src.backend, "get_keras_mask", lambda tensor: None)
    with pytest.raises(internals.KerasInternalsError) as failed:
        internals.check(fast=False)
    assert "keras.src.backend.get_keras_mask: it takes (tensor), kerasbert expects (x)" in str(
        failed.value)
    assert "KERASBERT_FAST" not in str(failed.value)  # the switch would not help
    with internals.fast_paths(False), pytest.raises(internals.KerasInternalsError,
                                                    match="get_keras_mask"):
        internals.get_keras_mask(tf.constant([1.0]))  # checked when first used


#: A fresh process: ``import kerasbert`` after ``fit`` was wrapped the way monitoring tools
#: wrap it (no functools.wraps) and the XLA context's hook was removed, then a tiny model
#: fitted under a strategy; prints the warnings and the hooks installed.
WRAPPED = """
import json, warnings
import keras
import numpy as np
import tensorflow as tf

keras_fit = keras.Model.fit
keras.Model.fit = lambda self, *args, **kwargs: keras_fit(self, *args, **kwargs)
del tf.__internal__.get_enclosing_xla_context
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import kerasbert
    from kerasbert import BertConfig, add_cls_classifier, build_transformer_model, internals
    from kerasbert.training import distribute
    from kerasbert.training.optimizer import make_optimizer
    imported = [str(w.message) for w in caught]
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = add_cls_classifier(build_transformer_model(BertConfig.from_dict(TINY)), 2)
        model.compile(optimizer=make_optimizer(model, 1e-2, 10, warmup=0),
                      loss="sparse_categorical_crossentropy")
    distribute.fit_under(model, strategy)
    x = np.array([[2, 5, 6, 3], [2, 8, 3, 0]], "int32")
    history = model.fit((x, np.zeros_like(x)), np.array([0, 1]), epochs=2, verbose=0)
print(json.dumps({"at_import": imported, "hooks": internals.installed_hooks(model),
                  "warnings": [str(w.message) for w in caught if "fast path" in str(w.message)],
                  "loss": history.history["loss"]}))
"""


@pytest.mark.slow
def test_import_works_with_fit_wrapped_and_a_hook_gone_and_those_paths_step_aside():
    from peers import run_python

    result = run_python(f"TINY = {TINY!r}\n" + WRAPPED, timeout=300)
    assert result["at_import"] == []
    assert result["hooks"] == []  # Keras's own build: the wrapped fit hides whether it calls ours
    assert len(result["warnings"]) == 2, result["warnings"]
    distribution, kernels = sorted(result["warnings"])
    assert kernels.startswith("kerasbert's fast path 'kernels' (products of real tokens' rows, "
                              "16-bit dropout draws, GELU's own derivative) steps aside: "
                              "tf.__internal__.get_enclosing_xla_context: it is missing")
    assert distribution.startswith(
        "kerasbert's fast path 'distribution' (fit under a strategy built from the data's "
        "shapes, clipping after the sum) steps aside: keras.Model._maybe_symbolic_build: "
        "Model.fit no longer uses _maybe_symbolic_build")
    assert f"Keras {keras.__version__}" in kernels
    assert np.isfinite(result["loss"]).all()


# ----------------------------------------------------------- nothing else reaches Keras's privates
def keras_private_names(tiny_config):
    """The private attribute names of Keras's objects: of its classes, and of the
    instances of a compiled, built model (a layer, a variable, the optimizer)."""
    classes = (keras.Model, keras.layers.Layer, keras.layers.Dropout, keras.layers.Dense,
               keras.layers.ReversibleEmbedding, keras.Variable, keras.optimizers.AdamW,
               keras.callbacks.Callback, keras.metrics.Metric, keras.losses.Loss,
               keras.optimizers.schedules.LearningRateSchedule, keras.random.SeedGenerator)
    names = {name for cls in classes for name in dir(cls)}
    model = add_cls_classifier(build_transformer_model(tiny_config), 2)
    model.compile(optimizer=make_optimizer(model, 1e-3, 10), loss="sparse_categorical_crossentropy")
    model.optimizer.build(model.trainable_variables)
    objects = [model, model.optimizer, *model.layers, *model.weights, *model.optimizer.variables]
    names.update(name for thing in objects for name in vars(thing))
    return {name for name in names if name.startswith("_") and not name.endswith("__")}


def package_sources():
    for folder, _, files in os.walk(os.path.join(ROOT, "kerasbert")):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(folder, name)
    yield os.path.join(ROOT, "kerasbert_cli.py")


def test_only_the_internals_module_reaches_private_keras(tiny_config):
    private = keras_private_names(tiny_config)
    assert {"_maybe_symbolic_build", "_momentums", "_value", "_tracker"} <= private
    exempt = os.path.join(ROOT, "kerasbert", "internals.py")
    found = []
    for path in package_sources():
        if path == exempt:
            continue
        where = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{where}:{node.lineno} imports {module}" for module in modules
                      if module.startswith(("keras.src", "tensorflow.python"))]
            if isinstance(node, ast.Attribute) and (node.attr in private
                                                    or node.attr == "__internal__"):
                found.append(f"{where}:{node.lineno} reads .{node.attr}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in private):
                found.append(f"{where}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
    assert not found, "only kerasbert/internals.py may reach Keras's private parts:\n" + "\n".join(
        found)


# ------------------------------------------------------------------- the Keras it is tested with
def test_setup_cfg_bounds_keras_to_the_releases_the_internals_are_checked_on():
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "setup.cfg"), encoding="utf-8")
    requirements = [line.strip() for line in config["options"]["install_requires"].splitlines()]
    keras_lines = [line for line in requirements if line.split(">")[0].split("<")[0] == "keras"]
    assert keras_lines == [internals.KERAS_REQUIREMENT]
    first, end = internals.KERAS_TESTED
    assert first < end
    installed = tuple(int(part) for part in keras.__version__.split(".")[:2])
    assert first <= installed < end, f"Keras {keras.__version__} outside {keras_lines[0]}"
    with open(os.path.join(ROOT, "constraints.txt"), encoding="utf-8") as f:
        pinned = [line.split("==")[1] for line in f if line.startswith("keras==")]
    assert len(pinned) == 1 and first <= tuple(int(p) for p in pinned[0].split(".")[:2]) < end


def test_the_switch_reads_the_environment():
    assert internals.switch_from_environment({}) is True
    assert internals.switch_from_environment({"KERASBERT_FAST": "1"}) is True
    assert internals.switch_from_environment({"KERASBERT_FAST": "0"}) is False
    with pytest.raises(ValueError, match=r"KERASBERT_FAST='off' must be 0 .* or 1"):
        internals.switch_from_environment({"KERASBERT_FAST": "off"})


# --------------------------------------------------------------------------------- the switch
def tiny_classifier(fast, dropout_rate=0.1, **config):
    """The tiny model with a classifier, compiled BERT's way, seeded: the same weights
    whatever the switch."""
    with internals.fast_paths(fast):
        keras.utils.set_random_seed(0)
        model = add_cls_classifier(build_transformer_model(
            BertConfig.from_dict(dict(TINY, **config))), 2, dropout_rate=dropout_rate)
        model.compile(optimizer=make_optimizer(model, 1e-2, 10, warmup=0),
                      loss="sparse_categorical_crossentropy")
    return model


def train_step_operations(model):
    x = (tf.constant(PADDED), tf.zeros_like(PADDED))
    step = tf.function(model.train_step).get_concrete_function((x, tf.constant([0, 1, 0])))
    definition = step.graph.as_graph_def()
    types = {node.op for node in definition.node}
    types.update(node.op for function in definition.library.function
                 for node in function.node_def)
    return types


def test_with_the_fast_paths_off_the_train_step_holds_keras_operations_only():
    with internals.fast_paths(False):
        model = tiny_classifier(False)
        plain = train_step_operations(model)
    assert not FAST_OPERATIONS & plain
    assert "StatelessRandomUniformV2" in plain  # Keras's own dropout draw, a float each
    feed_forward = model.get_layer("Transformer-0-FeedForward")
    assert feed_forward.training_activation_fn is feed_forward.activation_fn  # autodiff GELU
    with internals.fast_paths(True):
        model = tiny_classifier(True)
        assert FAST_OPERATIONS <= train_step_operations(model)
    feed_forward = model.get_layer("Transformer-0-FeedForward")
    assert feed_forward.training_activation_fn is not feed_forward.activation_fn


def test_with_the_fast_paths_off_training_gives_the_weights_of_the_fast_paths():
    """Without dropout, four steps on a padded batch end at the same weights to 1e-5
    (float32 rounding of the fused Adam update, the written-out GELU derivative, the
    products of real tokens only)."""
    x = (PADDED, np.zeros_like(PADDED))
    y = np.array([0, 1, 0])
    weights = {}
    for fast in (True, False):
        model = tiny_classifier(fast, **QUIET)
        with internals.fast_paths(fast):
            for _ in range(4):
                model.train_on_batch(x, y)
        weights[fast] = [w.numpy() for w in model.weights]
    start = [w.numpy() for w in tiny_classifier(True, **QUIET).weights]
    assert max(np.abs(a - b).max() for a, b in zip(weights[True], start)) > 1e-2  # it trained
    for fast, plain in zip(weights[True], weights[False]):
        np.testing.assert_allclose(fast, plain, rtol=0, atol=1e-5)


def test_with_the_fast_paths_off_dropout_and_adamw_are_keras_own_to_the_bit():
    x = tf.constant(np.random.default_rng(0).normal(size=(8, 40)).astype("float32"))
    with internals.fast_paths(False):
        ours = Dropout(0.3, seed=4)(x, training=True)
    np.testing.assert_array_equal(ours.numpy(),
                                  keras.layers.Dropout(0.3, seed=4)(x, training=True).numpy())

    rng = np.random.default_rng(1)
    start = [rng.normal(size=(30, 20)).astype("float32"), np.zeros(20, "float32")]
    gradients = [[rng.normal(size=w.shape).astype("float32") for w in start] for _ in range(5)]
    finals = []
    for cls in (keras.optimizers.AdamW, AdamW):
        variables = [keras.Variable(w) for w in start]
        optimizer = cls(learning_rate=1e-2, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
        with internals.fast_paths(False):
            for step in gradients:
                optimizer.apply([tf.constant(g) for g in step], variables)
        finals.append([v.numpy() for v in variables])
    for theirs, ours in zip(*finals):
        np.testing.assert_array_equal(ours, theirs)


def test_with_the_fast_paths_off_fit_under_a_strategy_installs_no_hook():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    installed = {}
    for fast in (True, False):
        with strategy.scope():
            model = tiny_classifier(fast, **QUIET)
        with internals.fast_paths(fast):
            distribute.fit_under(model, strategy)
            data = tf.data.Dataset.from_tensor_slices(
                ((PADDED, np.zeros_like(PADDED)), np.array([0, 1, 0]))).batch(3)
            model.fit(data, epochs=1, verbose=0, shuffle=False)
        installed[fast] = internals.installed_hooks(model)
    assert installed == {True: ["_maybe_symbolic_build"], False: []}
    assert internals.remove_hooks(model) == [] and internals.installed_hooks(model) == []


def test_clipping_after_the_sum_is_installed_once_and_removed():
    optimizer = keras.optimizers.AdamW(global_clipnorm=1.0)
    internals.clip_after_sum(optimizer)
    internals.clip_after_sum(optimizer)  # a second call keeps Keras's clipping, not ours
    assert internals.installed_hooks(optimizer) == ["_all_reduce_sum_gradients",
                                                    "_clip_gradients"]
    grads = [tf.constant([3.0, 4.0])]
    assert optimizer._clip_gradients(grads) is grads  # each replica's part: left as it is
    # Outside a replica context the sum is the gradient itself, then clipped to norm 1.
    (clipped, _), = optimizer._all_reduce_sum_gradients([(grads[0], None)])
    np.testing.assert_allclose(clipped.numpy(), [0.6, 0.8], rtol=1e-6)
    assert internals.remove_hooks(optimizer) == ["_all_reduce_sum_gradients", "_clip_gradients"]
    assert internals.installed_hooks(optimizer) == []


def test_with_the_fast_paths_off_a_checkpoint_is_assigned_over_drawn_weights(tmp_path):
    """Nothing is deferred; the model holds what the checkpoint holds, as with them on."""
    keras.utils.set_random_seed(0)
    prefix = str(tmp_path / "bert_model.ckpt")
    save_weights_as_checkpoint(build_transformer_model(dict(TINY)), prefix)
    built = {}
    for fast in (True, False):
        with internals.fast_paths(fast):
            with deferred.deferred_weights() as made:
                layers.FeedForward(intermediate_size=8).build((None, 4))
            assert bool(made) is fast
            deferred.forget(made)
            built[fast] = build_transformer_model(dict(TINY), prefix)
    for a, b in zip(built[True].weights, built[False].weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not internals.pending_variables()
