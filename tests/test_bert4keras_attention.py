"""bert4keras 0.11.5's attention options: RealFormer's residual attention scores, attention
caches, recomputation.

One bert4keras interpreter builds each tiny BERT below (``residual_attention_scores=True``
as an encoder and as UniLM; ``attention_caches`` whose tensors are extra Inputs), draws
random weights, writes a checkpoint and predicts padded batches. kerasbert must build the
same layers under the same names, load that checkpoint strictly and give the same outputs
at real tokens. bert4keras 0.11.5 cannot add its boolean UniLM mask to the scores (a
TypeError in the ``Add`` it makes): its oracle makes that mask additive, as the scores
need. Recomputation (``recompute=True``, ``RECOMPUTE=1``) must give the same gradients with
less memory.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY
from kerasbert import build_transformer_model
from kerasbert.models.layers import MultiHeadSelfAttention
from peers import run_bert4keras, run_python

CONFIG = {**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
TOLERANCE = 1e-5
LENGTH, CACHED = 12, 5  # tokens of a batch, positions of a cache
CACHES = {"Transformer-0-MultiHeadSelfAttention": ("Input-Cache-Key-0", "Input-Cache-Value-0"),
          "Transformer-1-MultiHeadSelfAttention": ("Input-Cache-1", "Input-Cache-1")}
CASES = {"encoder": {"residual_attention_scores": True},
         "unilm": {"residual_attention_scores": True, "application": "unilm",
                   "with_mlm": "linear"},
         "cached": {}}


def batch(case):
    """Two rows of ``LENGTH`` (9 and 5 real tokens, two segments) and, cached, the caches'
    values (one array per cache Input, in the order of :data:`CACHES`)."""
    rng = np.random.default_rng(3)
    tokens = rng.integers(1, CONFIG["vocab_size"], (2, LENGTH)).astype("int32")
    tokens[0, 9:], tokens[1, 5:] = 0, 0
    segments = np.zeros_like(tokens)
    segments[0, 4:9], segments[1, 3:5] = 1, 1
    found = [tokens, segments]
    if case == "cached":
        found += [rng.normal(0, 1, (2, CACHED, CONFIG["hidden_size"])).astype("float32")
                  for _ in cache_inputs()]
    return found


def cache_inputs():
    """The names of the cache Inputs, each once, in their order of first use."""
    return list(dict.fromkeys(name for pair in CACHES.values() for name in pair))


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's layer names, checkpoint and outputs of each case, in one interpreter."""
    root = tmp_path_factory.mktemp("attention")
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    jobs = {}
    for case, keywords in CASES.items():
        (root / case).mkdir()
        jobs[case] = {"dir": str(root / case), "keywords": keywords,
                      "batch": [array.tolist() for array in batch(case)]}
    out = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 saves with TF 1's Session and Saver, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K, keras
        from bert4keras.layers import Lambda
        from bert4keras.models import BERT, UniLM_Mask, build_transformer_model

        class AdditiveUniLM(UniLM_Mask, BERT):
            # UniLM's mask as an additive bias: 0.11.5's boolean mask cannot be added to
            # the scores by the Add it makes for residual scores (a TypeError).
            def compute_attention_bias(self, inputs=None):
                if self.attention_bias is None:
                    def unilm_bias(s):
                        ranks = K.cumsum(s, axis=1)
                        allowed = K.cast(ranks[:, None, :] <= ranks[:, :, None], K.floatx())
                        return (allowed - 1) * 1e12
                    self.attention_bias = self.apply(inputs=self.inputs[1], layer=Lambda,
                                                     function=unilm_bias,
                                                     name="Attention-UniLM-Mask")
                return self.attention_bias

        config = {json.dumps(str(root / "bert_config.json"))}
        caches, names = {json.dumps(CACHES)}, {json.dumps(cache_inputs())}
        out = {{}}
        for case, job in json.loads({json.dumps(json.dumps(jobs))}).items():
            K.clear_session()
            keywords = dict(job["keywords"])
            if keywords.pop("application", None) == "unilm":
                keywords["model"] = AdditiveUniLM
            if case == "cached":
                made = {{name: keras.layers.Input(shape=(None, {CONFIG["hidden_size"]}),
                                                  name=name) for name in names}}
                keywords["attention_caches"] = {{layer: [made[k], made[v]]
                                                for layer, (k, v) in caches.items()}}
                keywords["additional_input_layers"] = [made[name] for name in names]
            bert = build_transformer_model(config, return_keras_model=False, **keywords)
            layers = [layer.name for layer in bert.model.layers]
            rng = np.random.default_rng(0)
            K.batch_set_value([(weight, rng.normal(0, 0.3, K.int_shape(weight)).astype("float32"))
                               for weight in bert.model.trainable_weights])
            bert.save_weights_as_checkpoint(job["dir"] + "/bert_model.ckpt")
            result = bert.model.predict([np.array(x, dtype="float32" if i > 1 else "int32")
                                         for i, x in enumerate(job["batch"])], verbose=0)
            out[case] = {{"layers": layers, "inputs": [x.name for x in bert.model.inputs],
                         "outputs": result.tolist()}}
        print(json.dumps(out))
    """)
    return {case: {**out[case], "dir": job["dir"]} for case, job in jobs.items()}


def ours(case, checkpoint=None):
    """kerasbert's model of ``case`` (its caches: new Inputs named as bert4keras's)."""
    keywords = dict(CASES[case])
    if case == "cached":
        made = {name: keras.Input((None, CONFIG["hidden_size"]), name=name)
                for name in cache_inputs()}
        keywords["attention_caches"] = {layer: (made[k], made[v])
                                        for layer, (k, v) in CACHES.items()}
    return build_transformer_model(CONFIG, checkpoint, **keywords)


@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_layer_names_match_bert4keras(theirs, case):
    model = ours(case)
    assert sorted(layer.name for layer in model.layers) == sorted(theirs[case]["layers"])
    assert [x.name for x in model.inputs] == [
        name.split(":")[0] for name in theirs[case]["inputs"]]


@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_outputs_match_bert4keras_at_real_tokens(theirs, case):
    model = ours(case, f"{theirs[case]['dir']}/bert_model.ckpt")
    inputs = batch(case)
    found = model.predict(inputs, verbose=0)
    real = inputs[0] != 0  # padding rows differ by design
    np.testing.assert_allclose(found[real], np.asarray(theirs[case]["outputs"])[real],
                               atol=TOLERANCE, rtol=0)
    if case != "cached":  # the scores passed on matter: without them the outputs differ
        keywords = {**CASES[case], "residual_attention_scores": False}
        plain = build_transformer_model(CONFIG, f"{theirs[case]['dir']}/bert_model.ckpt",
                                        **keywords)
        assert np.abs(plain.predict(inputs, verbose=0) - found)[real].max() > 100 * TOLERANCE


def test_residual_scores_change_the_outputs_and_a_saved_model_keeps_them(tmp_path):
    plain = build_transformer_model(CONFIG, application="unilm", with_mlm="linear")
    rng = np.random.default_rng(0)  # weights large enough for scores that matter
    plain.set_weights([rng.normal(0, 0.3, w.shape).astype("float32")
                       for w in plain.get_weights()])
    residual = ours("unilm")
    residual.set_weights(plain.get_weights())
    inputs = batch("unilm")
    found = residual.predict(inputs, verbose=0)
    assert np.abs(found - plain.predict(inputs, verbose=0)).max() > 1e-3
    for case, model in (("unilm", residual), ("cached", ours("cached"))):
        path = str(tmp_path / f"{case}.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
        np.testing.assert_array_equal(loaded.predict(batch(case), verbose=0),
                                      model.predict(batch(case), verbose=0))
    layer = loaded.get_layer("Transformer-0-MultiHeadSelfAttention")
    # Its keys and values are the caches put in front of the states: keyword arguments.
    node = next(entry for entry in loaded.get_config()["layers"]
                if entry["name"] == layer.name)["inbound_nodes"][0]
    keywords = node["kwargs"]
    assert {"keys", "values"} <= set(keywords) and not layer.return_scores


@pytest.mark.parametrize("family", ["albert", "nezha", "roformer", "gpt2"])
def test_residual_scores_build_and_train_in_other_families(family):
    config = {**TINY, "type_vocab_size": 0} if family == "gpt2" else TINY
    model = build_transformer_model(config, model=family, residual_attention_scores=True)
    layers = [layer for layer in model.layers if isinstance(layer, MultiHeadSelfAttention)]
    assert layers and all(layer.return_scores for layer in layers)
    tokens = batch("encoder")[0]
    inputs = tokens if len(model.inputs) == 1 else [tokens, np.zeros_like(tokens)]
    with tf.GradientTape() as tape:
        loss = keras.ops.mean(model(inputs, training=True) ** 2)
    gradients = tape.gradient(loss, model.trainable_weights)
    assert all(gradient is not None for gradient in gradients)


@pytest.mark.parametrize("keywords, message", [
    ({"model": "t5", "residual_attention_scores": True},
     "residual_attention_scores: not supported by model='t5'"),
    ({"model": "gau_alpha", "residual_attention_scores": True},
     "residual_attention_scores: not supported by model='gau_alpha'"),
    ({"model": "roformer", "attention_caches": "cache"},
     "attention_caches: not supported by model='roformer'"),
    ({"application": "unilm", "attention_caches": "cache"},
     "attention_caches: not supported with application='unilm'"),
    ({"attention_caches": {"Transformer-7-MultiHeadSelfAttention": "cache"}},
     "names 'Transformer-7-MultiHeadSelfAttention', which is no attention layer"),
    ({"attention_caches": {"Transformer-0-MultiHeadSelfAttention": (np.ones((1, 2, 16)),) * 2}},
     "a cache is a symbolic tensor"),
])
def test_attention_options_are_refused_by_name_where_they_cannot_apply(keywords, message):
    keywords = dict(keywords)
    if keywords.get("attention_caches") == "cache":
        cache = keras.Input((None, CONFIG["hidden_size"]))
        keywords["attention_caches"] = {"Transformer-0-MultiHeadSelfAttention": (cache, cache)}
    config = {**TINY, "type_vocab_size": 0} if keywords.get("model") == "t5" else TINY
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        build_transformer_model(config, **keywords)


def gradients(model, inputs):
    """The loss and the gradients of one training step (a traced function, as in ``fit``)."""

    @tf.function
    def step(inputs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(inputs, training=True) ** 2)
        return loss, [tf.convert_to_tensor(gradient)
                      for gradient in tape.gradient(loss, model.trainable_weights)]

    return step(inputs)


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_recomputed_layers_give_the_same_loss_and_gradients(dropout, monkeypatch):
    config = {**CONFIG, "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    found = []
    for recompute in (None, False):  # None: as RECOMPUTE says
        monkeypatch.setenv("RECOMPUTE", "1")
        keras.utils.set_random_seed(1)  # the same dropout masks in both
        model = build_transformer_model(config, residual_attention_scores=True,
                                        application="unilm", with_mlm="linear",
                                        recompute=recompute)
        rng = np.random.default_rng(0)  # the same weights in both, large enough to matter
        model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32")
                           for w in model.get_weights()])
        attention = model.get_layer("Transformer-1-MultiHeadSelfAttention")
        assert attention.recompute is (recompute is None)
        assert model.get_layer("Transformer-1-FeedForward").recompute is (recompute is None)
        found.append(gradients(model, batch("unilm")))
    (loss, recomputed), (plain_loss, plain) = found
    assert float(loss) == pytest.approx(float(plain_loss), abs=1e-6)
    for ours_, theirs_ in zip(recomputed, plain):
        np.testing.assert_allclose(ours_.numpy(), theirs_.numpy(), atol=1e-6, rtol=0)
    monkeypatch.setenv("RECOMPUTE", "maybe")
    with pytest.raises(ValueError, match="RECOMPUTE='maybe'"):
        build_transformer_model(CONFIG)


#: One training step of a 6-layer model on 2 x 512 tokens, with recomputation or without
#: (``sys.argv[1]``), alone in its process: the peak of TensorFlow's CPU allocator during
#: the step (bytes), and its seconds. Where TensorFlow keeps no allocator statistics, the
#: rise of the process's peak resident memory over the step instead ("rss": Linux's VmHWM,
#: reset before the step; ``ru_maxrss`` would start from the parent's peak).
MEMORY = """
    import json, sys, time
    import numpy as np
    import tensorflow as tf
    from kerasbert import build_transformer_model

    def resident(key="VmRSS"):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    try:
        tf.config.experimental.reset_memory_stats("CPU:0")
        reading = "allocator"
    except ValueError:  # no allocator statistics on this CPU
        reading = "rss"
    config = dict(vocab_size=100, hidden_size=64, num_hidden_layers=6, num_attention_heads=8,
                  intermediate_size=256, max_position_embeddings=512, type_vocab_size=0,
                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    tokens = np.random.default_rng(0).integers(1, 100, (2, 512)).astype("int32")
    model = build_transformer_model(config, recompute=sys.argv[1] == "recompute")

    @tf.function
    def step(tokens):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(tokens, training=True) ** 2)
        return tape.gradient(loss, model.trainable_weights)

    step.get_concrete_function(tf.TensorSpec(tokens.shape, tf.int32))
    if reading == "allocator":
        tf.config.experimental.reset_memory_stats("CPU:0")
        base = tf.config.experimental.get_memory_info("CPU:0")["current"]
    else:  # a short step first: the thread pools' and allocator's first memory is not the step's
        step(tokens[:, :32])
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak resident memory starts again from the current
        base = resident()
    start = time.perf_counter()
    step(tokens)
    seconds = time.perf_counter() - start
    peak = (tf.config.experimental.get_memory_info("CPU:0")["peak"] if reading == "allocator"
            else resident("VmHWM"))
    print(json.dumps({"reading": reading, "peak": peak - base, "seconds": seconds}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("onednn", ["1", "0"])
def test_recomputation_lowers_the_peak_memory_of_a_training_step(onednn):
    """Why slow: two fresh interpreters (one model's step alone in each) build and trace a
    6-layer model on 512 tokens: 25 to 45 s. TensorFlow keeps allocator statistics on the
    CPU only on its oneDNN path, on by default only on CPUs with AVX-512 VNNI/BF16 or AMX:
    with ``TF_ENABLE_ONEDNN_OPTS=1`` the allocator's peak is read on every CPU kind; with
    ``0`` (the default of other CPUs) the process's resident memory."""
    recomputed, plain = (run_python(MEMORY, args=[way], TF_ENABLE_ONEDNN_OPTS=onednn)
                         for way in ("recompute", "plain"))
    assert recomputed["reading"] == plain["reading"] == ("allocator" if onednn == "1" else "rss")
    # Measured: 166 MB against 69 MB in the allocator (the attention weights of 5 layers not
    # kept).
    assert recomputed["peak"] < 0.6 * plain["peak"], (recomputed, plain)


def test_recompute_grad_recomputes_a_decorated_call_under_recompute(monkeypatch):
    from kerasbert import backend

    class Square(keras.layers.Layer):
        def build(self, input_shape):
            self.scale = self.add_weight(shape=(), initializer="ones")

        def call(self, inputs, mask=None):
            return inputs[0] * inputs[1] * self.scale

    monkeypatch.setattr(backend, "do_recompute", True)
    recomputed = type("Recomputed", (Square,), {"call": backend.recompute_grad(Square.call)})
    x = tf.constant([[1.0, 2.0]])
    found = []
    for layer in (Square(), recomputed()):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(layer([x, x + 1]))
        found.append(tape.gradient(y, [x, layer.scale.value]))
    for ours_, theirs_ in zip(*found):
        np.testing.assert_array_equal(ours_.numpy(), theirs_.numpy())
    monkeypatch.setattr(backend, "do_recompute", False)
    assert backend.recompute_grad(Square.call) is Square.call
