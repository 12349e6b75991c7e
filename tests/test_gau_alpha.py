"""GAU-α (``model="gau_alpha"``) against bert4keras 0.11.5's ``GatedAttentionUnit``.

bert4keras 0.11.5 ships the unit but not the model: the published ``GAU_alpha`` class
(ZhuiyiTechnology/GAU-alpha's ``models.py``) is a ``RoFormerV2`` whose layers are units.
The oracle below builds that model on bert4keras's own layers, draws random weights, writes
them in the published names (``GAU_alpha/encoder/layer_0/gau/...``) and runs batches whose
real lengths (20 to 600 tokens) and masks (padding, causal, UniLM) move ``softmax_plus``'s
length scale around its bounds (16 and 512). kerasbert must have the same layers with the
same counts, load that checkpoint strictly, give the same outputs at real tokens, and write
the checkpoint back bit for bit.
"""

import json

import keras
import numpy as np
import pytest

from conftest import TINY
from kerasbert import BertConfig, CheckpointError, build_transformer_model
from kerasbert.models import plot as plotting
from kerasbert.models.audit import audit_model, expected_rows
from kerasbert.models.loading import save_weights_as_checkpoint
from peers import run_bert4keras
from test_families import assert_same_checkpoint

# The published config's keys: swish, and queries and keys (12 wide) narrower than the
# hidden size and unlike hidden_size / num_attention_heads (8).
CONFIG = {**TINY, "hidden_act": "swish", "attention_key_size": 12}
CASES = {"encoder": {"with_mlm": "linear"},
         "lm": {"application": "lm", "with_mlm": "linear"},
         "unilm": {"application": "unilm", "with_mlm": "linear"}}
TOLERANCE = 1e-5
SHORT, LONG = 48, 600  # LONG: past the 512 tokens whose scores softmax_plus leaves as they are
#: Of a batch's positions, every STRIDE[length]-th is recorded and compared (each output
#: depends on every real token it may see): the recording stays small enough to keep.
STRIDE = {SHORT: 3, LONG: 16}


def batches(case):
    """A batch of 48 (20 and 44 real tokens, two segments); the encoder also a long one."""
    rng = np.random.default_rng(1)
    tokens = rng.integers(1, CONFIG["vocab_size"], (2, SHORT)).astype("int32")
    tokens[0, 44:], tokens[1, 20:] = 0, 0
    segments = np.zeros_like(tokens)
    segments[0, 24:44], segments[1, 12:20] = 1, 1
    found = [(tokens, segments)]
    if case == "encoder":
        long_tokens = rng.integers(1, CONFIG["vocab_size"], (2, LONG)).astype("int32")
        long_tokens[1, 300:] = 0
        found.append((long_tokens, np.zeros_like(long_tokens)))
    return found


def recorded(outputs):
    """The positions of a batch that are recorded and compared."""
    return outputs[:, ::STRIDE[outputs.shape[1]]]


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's layers, checkpoint and outputs for each case, in one interpreter."""
    root = tmp_path_factory.mktemp("gau_alpha")
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    jobs = {}
    for case, heads in CASES.items():
        (root / case).mkdir()
        jobs[case] = {"dir": str(root / case), "heads": heads,
                      "batches": [[t.tolist(), s.tolist()] for t, s in batches(case)]}
    out = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 saves with TF 1's Session and Saver, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K
        from bert4keras.layers import Add, Dropout, GatedAttentionUnit, LayerNormalization
        from bert4keras.models import RoFormerV2, build_transformer_model

        class GAU_alpha(RoFormerV2):
            # The published model: each layer one unit, post-norm without weights.
            def apply_main_layers(self, inputs, index):
                name = "Transformer-%d-GatedAttentionUnit" % index
                mask = self.compute_attention_bias(index)
                x = [inputs, self.compute_position_bias(inputs)]
                if mask is not None:
                    x.insert(1, mask)
                x = self.apply(inputs=x, layer=GatedAttentionUnit,
                               arguments={{"a_bias": mask is not None or None,
                                          "p_bias": "rotary"}},
                               units=self.intermediate_size, key_size=self.attention_key_size,
                               activation=self.hidden_act, use_bias=False,
                               normalization="softmax_plus",
                               attention_dropout=self.attention_dropout_rate,
                               kernel_initializer=self.initializer, name=name)
                x = self.apply(inputs=x, layer=Dropout, rate=self.dropout_rate,
                               name=name + "-Dropout")
                x = self.apply(inputs=[inputs, x], layer=Add, name=name + "-Add")
                return self.apply(inputs=x, layer=LayerNormalization, zero_mean=False,
                                  scale=False, offset=False, name=name + "-Norm")

            def variable_mapping(self):
                # The published names, listed in the order 0.11.5's unit makes its weights
                # (i_dense, q, k, o_dense): bert4keras pairs them by position.
                mapping = {{"Embedding-Token": ["bert/embeddings/word_embeddings"],
                           "Embedding-Segment": ["bert/embeddings/token_type_embeddings"]}}
                for i in range(self.num_hidden_layers):
                    scope = "GAU_alpha/encoder/layer_%d/gau/" % i
                    mapping["Transformer-%d-GatedAttentionUnit" % i] = [
                        scope + name for name in ("i_dense/kernel", "q_scaleoffset/gamma",
                                                  "k_scaleoffset/gamma", "o_dense/kernel")]
                return mapping

        config = {json.dumps(str(root / "bert_config.json"))}
        out = {{}}
        for case, job in json.loads({json.dumps(json.dumps(jobs))}).items():
            K.clear_session()
            bert = build_transformer_model(config, model=GAU_alpha, return_keras_model=False,
                                           **job["heads"])
            layers = [[layer.name, int(layer.count_params())] for layer in bert.model.layers]
            rng = np.random.default_rng(0)
            K.batch_set_value([(weight, rng.normal(0, 0.2, K.int_shape(weight)).astype("float32"))
                               for weight in bert.model.trainable_weights])
            bert.save_weights_as_checkpoint(job["dir"] + "/bert_model.ckpt")
            outputs = []
            for tokens, segments in job["batches"]:
                result = bert.model.predict([np.array(tokens), np.array(segments)], verbose=0)
                outputs.append(result[:, ::{STRIDE}[result.shape[1]]].tolist())
            out[case] = {{"layers": layers, "outputs": outputs}}
        print(json.dumps(out))
    """)
    return {case: {**out[case], "dir": job["dir"]} for case, job in jobs.items()}


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_names_and_counts_match_bert4keras(theirs, case):
    model = build_transformer_model(CONFIG, model="gau_alpha", **CASES[case])
    ours = [[layer.name, layer.count_params()] for layer in model.layers]
    assert sorted(map(tuple, ours)) == sorted(map(tuple, theirs[case]["layers"]))


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_outputs_match_bert4keras_on_its_checkpoint_and_save_back_exactly(
        theirs, tmp_path, case):
    prefix = f"{theirs[case]['dir']}/bert_model.ckpt"
    bert = build_transformer_model(CONFIG, prefix, model="gau_alpha", return_keras_model=False,
                                   **CASES[case])
    assert bert.load_report.ok and not bert.load_report.unused
    for (tokens, segments), expected in zip(batches(case), theirs[case]["outputs"]):
        ours = recorded(bert.model.predict([tokens, segments], verbose=0))
        real = recorded(tokens) != 0  # padding rows differ by design
        np.testing.assert_allclose(ours[real], np.asarray(expected)[real], atol=TOLERANCE,
                                   rtol=0)
    # Saved by the Keras model alone: its family and its number of units read from its layers.
    saved = str(tmp_path / "again" / "bert_model.ckpt")
    save_weights_as_checkpoint(bert.model, saved)
    assert_same_checkpoint(saved, prefix)


@pytest.mark.slow
@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_the_audit_formulas_give_bert4keras_counts_layer_by_layer(theirs, case):
    config = BertConfig.from_dict(CONFIG, family="gau_alpha")
    rows = expected_rows(config, with_mlm=True)
    assert {row.layer: row.expected for row in rows} == {
        name: count for name, count in theirs[case]["layers"] if count}
    model = build_transformer_model(config, model="gau_alpha", **CASES[case])
    audited = audit_model(model, config, with_mlm=True)
    assert all(row.ok for row in audited)
    assert sum(row.expected for row in audited) == model.count_params() == 5_136


def test_a_saved_model_loads_in_safe_mode_with_the_same_outputs(tmp_path):
    model = build_transformer_model(CONFIG, model="gau_alpha", application="unilm",
                                    with_mlm="linear")
    tokens, segments = batches("unilm")[0]
    path = str(tmp_path / "gau.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(loaded.predict([tokens, segments], verbose=0),
                                  model.predict([tokens, segments], verbose=0))
    unit = loaded.get_layer("Transformer-1-GatedAttentionUnit")
    assert (unit.units, unit.key_size, unit.activation, unit.attention_mask) == (
        32, 12, "swish", True)


def test_keep_tokens_and_dropout_rate_zero(tmp_path):
    full = build_transformer_model(CONFIG, model="gau_alpha")
    prefix = str(tmp_path / "bert_model.ckpt")
    save_weights_as_checkpoint(full, prefix)
    keep = [0, 1, 2, 3, 10, 20, 30]
    small = build_transformer_model(CONFIG, prefix, model="gau_alpha", keep_tokens=keep,
                                    dropout_rate=0, attention_dropout_rate=0)
    np.testing.assert_array_equal(small.get_layer("Embedding-Token").embeddings.numpy(),
                                  full.get_layer("Embedding-Token").embeddings.numpy()[keep])
    assert not [layer.name for layer in small.layers if "Dropout" in layer.name]
    assert small.get_layer("Transformer-0-GatedAttentionUnit").probability_dropout is None


def test_an_odd_key_size_and_another_family_s_checkpoint_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"^attention_key_size \(7\) in <dict>: must be a "
                                         r"positive even integer"):
        build_transformer_model({**CONFIG, "attention_key_size": 7}, model="gau_alpha")
    prefix = str(tmp_path / "bert_model.ckpt")
    save_weights_as_checkpoint(build_transformer_model(CONFIG, model="gau_alpha"), prefix)
    with pytest.raises(CheckpointError, match=r"looks like a GAU-α checkpoint \(GAU_alpha/"
                                              r"\.\.\.\), not a roformer_v2 checkpoint; build "
                                              r"the model with model='gau_alpha'"):
        build_transformer_model(TINY, prefix, model="roformer_v2")


@pytest.mark.skipif(not plotting.shutil.which("dot"), reason="Graphviz is not installed")
def test_plot_draws_the_units(tmp_path):
    model = build_transformer_model(CONFIG, model="gau_alpha", with_mlm=True)
    picture = plotting.plot(model, tmp_path / "gau_alpha.svg")
    drawn = picture.read_text().replace("&#45;", "-")  # SVG escapes the hyphens
    for name in ("Embedding-Rotary-Position", "Transformer-1-GatedAttentionUnit-Norm",
                 "Output-MLM-Activation"):
        assert f">{name}" in drawn, name
