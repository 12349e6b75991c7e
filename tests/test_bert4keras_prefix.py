"""bert4keras 0.11.5's model-object keywords ``prefix``, ``layers`` and
``autoresize_weights`` against bert4keras itself.

One bert4keras interpreter builds (a) a ``Predecessor-`` model with a pooler, draws random
weights and writes its checkpoint; (c) a second model on (a)'s ``transformer.layers`` with
an MLM head besides, whose new weights are drawn and whose checkpoint is written too; and
(b) models of other sizes (wider with GELU, narrower with ReLU) that load (a)'s checkpoint
with ``autoresize_weights=True``. Each prints its layers and outputs. kerasbert builds the
same models from the same checkpoints: the same layer names and counts, outputs within
:data:`TOLERANCE`, and (a)'s checkpoint written back bit for bit.
"""

import json

import numpy as np
import pytest

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.models import plot as plotting
from kerasbert.models.audit import audit_model
from kerasbert.models.build import REFUSED
from kerasbert.models.loading import layer_prefix, load_checkpoint, save_weights_as_checkpoint
from peers import run_bert4keras
from test_families import assert_same_checkpoint

TOLERANCE = 1e-5
PREFIX = "Predecessor-"
#: Configs that load (a)'s checkpoint resized: hidden and inner widths grown (GELU), and
#: hidden cut, inner grown (ReLU: bert4keras scales its feed-forward weights otherwise).
RESIZED = {"wider": {**TINY, "hidden_size": 24, "intermediate_size": 48},
           "narrower_relu": {**TINY, "hidden_size": 12, "intermediate_size": 40,
                             "hidden_act": "relu"}}


def batch():
    """Two sequences of 12 (9 and 5 real tokens), two segments."""
    rng = np.random.default_rng(3)
    tokens = rng.integers(1, TINY["vocab_size"], (2, 12)).astype("int32")
    tokens[0, 9:], tokens[1, 5:] = 0, 0
    segments = np.zeros_like(tokens)
    segments[0, 5:9], segments[1, 3:5] = 1, 1
    return [tokens, segments]


def layers_of(model):
    return sorted((layer.name, int(layer.count_params())) for layer in model.layers)


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's checkpoints (in ``dir``), layers and outputs, from one interpreter."""
    root = tmp_path_factory.mktemp("prefix")
    configs = {"tiny": TINY, **RESIZED}
    for name, config in configs.items():
        (root / f"{name}.json").write_text(json.dumps(config))
    tokens, segments = batch()
    out = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 saves with TF 1's Session and Saver, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K
        from bert4keras.models import build_transformer_model

        root = {json.dumps(str(root))}
        x = [np.array({tokens.tolist()}), np.array({segments.tolist()})]
        rng = np.random.default_rng(0)

        def draw(weights):
            K.batch_set_value([(w, rng.normal(0, 0.2, K.int_shape(w)).astype("float32"))
                               for w in weights])

        def layers_of(model):
            return sorted([layer.name, int(layer.count_params())] for layer in model.layers)

        def outputs(model):
            found = model.predict(x)
            return [o.tolist() for o in (found if isinstance(found, list) else [found])]

        out = {{}}
        a = build_transformer_model(root + "/tiny.json", return_keras_model=False,
                                    prefix={PREFIX!r}, with_pool=True)
        draw(a.model.trainable_weights)
        a.save_weights_as_checkpoint(root + "/a/bert_model.ckpt")
        c = build_transformer_model(root + "/tiny.json", return_keras_model=False,
                                    prefix={PREFIX!r}, layers=a.layers, with_pool=True,
                                    with_mlm=True)
        own = set(w.name for w in a.model.trainable_weights)
        draw([w for w in c.model.trainable_weights if w.name not in own])
        c.save_weights_as_checkpoint(root + "/c/bert_model.ckpt")
        out["a"] = {{"layers": layers_of(a.model), "outputs": outputs(a.model)}}
        out["c"] = {{"layers": layers_of(c.model), "outputs": outputs(c.model),
                    "shared": sorted(set(l.name for l in a.model.layers)
                                     & set(l.name for l in c.model.layers))}}
        for name in {sorted(RESIZED)!r}:
            K.clear_session()
            b = build_transformer_model(root + "/" + name + ".json",
                                        root + "/a/bert_model.ckpt", autoresize_weights=True)
            out[name] = {{"layers": layers_of(b), "outputs": outputs(b)}}
        print(json.dumps(out))
    """)
    return {**out, "dir": str(root)}


def mask_padding(outputs, tokens):
    """A sequence output's real tokens only (padding's rows are left to each library)."""
    return np.where((tokens > 0)[..., None], np.asarray(outputs), 0.0)


def prefixed_pair(theirs):
    """kerasbert's (a) and (c), from bert4keras's checkpoints."""
    a = build_transformer_model(TINY, f"{theirs['dir']}/a/bert_model.ckpt",
                                return_keras_model=False, prefix=PREFIX, with_pool=True)
    c = build_transformer_model(TINY, f"{theirs['dir']}/c/bert_model.ckpt",
                                return_keras_model=False, prefix=PREFIX, layers=a.layers,
                                with_pool=True, with_mlm=True)
    return a, c


@pytest.mark.peer
def test_prefixed_and_shared_models_match_bert4keras(theirs, tmp_path):
    a, c = prefixed_pair(theirs)
    assert [list(row) for row in layers_of(a.model)] == theirs["a"]["layers"]
    assert [list(row) for row in layers_of(c.model)] == theirs["c"]["layers"]
    tokens = batch()[0]
    np.testing.assert_allclose(a.model.predict(batch(), verbose=0), theirs["a"]["outputs"][0],
                               atol=TOLERANCE)
    pooled, mlm = c.model.predict(batch(), verbose=0)
    np.testing.assert_allclose(pooled, theirs["c"]["outputs"][0], atol=TOLERANCE)
    np.testing.assert_allclose(mask_padding(mlm, tokens),
                               mask_padding(theirs["c"]["outputs"][1], tokens), atol=TOLERANCE)
    # Every layer of the same name is the same layer, as bert4keras shares them.
    shared = {layer.name for layer in a.model.layers} & {layer.name for layer in c.model.layers}
    assert sorted(shared) == theirs["c"]["shared"]
    assert all(a.model.get_layer(name) is c.model.get_layer(name) for name in shared)
    written = str(tmp_path / "bert_model.ckpt")
    a.save_weights_as_checkpoint(written)
    assert_same_checkpoint(written, f"{theirs['dir']}/a/bert_model.ckpt")


@pytest.mark.peer
@pytest.mark.parametrize("case", sorted(RESIZED))
def test_autoresized_weights_match_bert4keras(theirs, case):
    model = build_transformer_model(RESIZED[case], f"{theirs['dir']}/a/bert_model.ckpt",
                                    return_keras_model=False, autoresize_weights=True)
    assert [list(row) for row in layers_of(model.model)] == theirs[case]["layers"]
    # The pooler is in the checkpoint, not in this model.
    assert model.load_report.unused == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
    assert model.load_report.resized and not model.load_report.mismatched
    tokens = batch()[0]
    np.testing.assert_allclose(mask_padding(model.model.predict(batch(), verbose=0), tokens),
                               mask_padding(theirs[case]["outputs"][0], tokens), atol=TOLERANCE)


@pytest.mark.peer
def test_a_prefixed_model_is_read_by_its_layer_names(theirs, tmp_path):
    """The loader, the writer and the audit find a prefixed model's layers themselves; a
    model holding two prefixes (BERT-of-Theseus) is told which."""
    a, c = prefixed_pair(theirs)
    successor = build_transformer_model({**TINY, "num_hidden_layers": 1}, prefix="Successor-",
                                        with_pool=True)
    assert layer_prefix(a.model) == PREFIX and layer_prefix(successor) == "Successor-"
    report = load_checkpoint(successor, f"{theirs['dir']}/a/bert_model.ckpt", strict=False)
    assert report.missing == [] and "bert/encoder/layer_1/output/dense/bias" in report.unused
    written = str(tmp_path / "bert_model.ckpt")
    assert "bert/encoder/layer_1/output/LayerNorm/beta" in save_weights_as_checkpoint(
        a.model, written)
    rows = audit_model(c.model, c.config, with_pool=True, with_mlm=True)
    assert all(row.actual == row.expected for row in rows), rows
    import keras

    both = keras.Model(a.model.inputs, [a.model.output, successor(a.model.inputs)])
    with pytest.raises(ValueError, match="'Predecessor-', 'Successor-'; pass prefix="):
        load_checkpoint(both, f"{theirs['dir']}/a/bert_model.ckpt")
    assert load_checkpoint(both, f"{theirs['dir']}/a/bert_model.ckpt", prefix="Successor-",
                           strict=False).missing == []


def test_the_keywords_are_built_not_refused():
    assert not {"prefix", "layers", "autoresize_weights"} & set(REFUSED)


def test_autoresize_refuses_what_it_cannot_resize(tmp_path):
    """A grown axis of an odd size is not resized (blocks of two entries repeat): named."""
    odd = build_transformer_model({**TINY, "intermediate_size": 31}, return_keras_model=False)
    path = str(tmp_path / "bert_model.ckpt")
    odd.save_weights_as_checkpoint(path)
    with pytest.raises(ValueError, match=r"intermediate/dense/kernel.*\(16, 40\).*\(16, 31\)"
                                         r".*autoresize: a grown axis"):
        build_transformer_model({**TINY, "intermediate_size": 40}, path,
                                autoresize_weights=True)


@pytest.mark.skipif(not plotting.shutil.which("dot"), reason="Graphviz is not installed")
def test_plot_draws_a_prefixed_model(tmp_path):
    model = build_transformer_model(TINY, prefix=PREFIX, with_pool=True)
    drawn = plotting.plot(model, tmp_path / "prefixed.svg").read_text().replace("&#45;", "-")
    for name in ("Input-Token", "Transformer-1-FeedForward-Norm", "Pooler-Dense"):
        assert f">{PREFIX}{name}" in drawn, name
