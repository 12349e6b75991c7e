"""bert4keras 0.11.5's position and segment keywords of ``build_transformer_model``:
``custom_position_ids`` (an ``Input-Position``), ``hierarchical_position`` (a 16-position
table read for 40 tokens) and ``shared_segment_embeddings`` (segments through
``Embedding-Token``).

One bert4keras process builds each case on a tiny config, draws random weights, writes its
checkpoint and runs a padded batch; kerasbert builds with the same keywords, must have the
same inputs, layers and counts, load that checkpoint strictly and give the same outputs at
real tokens.
"""

import json

import keras
import numpy as np
import pytest

from conftest import TINY
from kerasbert import BertConfig, build_transformer_model
from kerasbert.inference.generation import generate
from kerasbert.models.audit import audit_model
from peers import run_bert4keras
from test_generation import wide_weights

CONFIG = {**TINY, "max_position_embeddings": 16}
CASES = {
    "custom_position_ids": ("bert", {"custom_position_ids": True}),
    "hierarchical_position": ("bert", {"hierarchical_position": True, "with_mlm": "linear"}),
    "hierarchical_alpha_custom_ids": ("bert", {"hierarchical_position": 0.25,
                                               "custom_position_ids": True}),
    "shared_segment_embeddings": ("bert", {"shared_segment_embeddings": True}),
    "roformer_custom_position_ids": ("roformer", {"custom_position_ids": True}),
    "gpt_hierarchical_custom_ids": ("gpt", {"hierarchical_position": True,
                                            "custom_position_ids": True}),
}
TOLERANCE = 1e-5
SHORT, LONG = 12, 40  # LONG: past the 16 positions of the table


def batch(case):
    """``[tokens, segments(, positions)]``: two rows, the second padded."""
    rng = np.random.default_rng(len(case))
    hierarchical = "hierarchical" in case
    length = LONG if hierarchical else SHORT
    tokens = rng.integers(1, CONFIG["vocab_size"], (2, length)).astype("int32")
    tokens[1, length * 2 // 3:] = 0
    segments = np.zeros_like(tokens)
    segments[:, length // 2:] = 1
    if case == "shared_segment_embeddings":
        # Segment ids are token ids here; bert4keras hides segment 0 past the first
        # position from attention (see test_shared_segments_leave_segment_zero_visible).
        segments = rng.integers(1, 4, tokens.shape).astype("int32")
        segments[:, 0] = 0
    segments[tokens == 0] = 0
    if not CASES[case][1].get("custom_position_ids"):
        return [tokens, segments]
    # Not 0, 1, 2...: offset rows, and past the table where it is hierarchical.
    top = 200 if hierarchical else CONFIG["max_position_embeddings"]
    positions = np.sort(rng.integers(0, top, tokens.shape), axis=1).astype("int32")
    return [tokens, segments, positions]


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's inputs, layers, checkpoint and outputs for each case, in one process."""
    root = tmp_path_factory.mktemp("positions")
    (root / "bert_config.json").write_text(json.dumps(CONFIG))
    jobs = {}
    for case, (model, keywords) in CASES.items():
        (root / case).mkdir()
        jobs[case] = {"dir": str(root / case), "model": model, "keywords": keywords,
                      "batch": [x.tolist() for x in batch(case)]}
    out = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 saves with TF 1's Session and Saver, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras.backend import K
        from bert4keras.models import build_transformer_model

        config = {json.dumps(str(root / "bert_config.json"))}
        out = {{}}
        for case, job in json.loads({json.dumps(json.dumps(jobs))}).items():
            K.clear_session()
            bert = build_transformer_model(config, model=job["model"],
                                           return_keras_model=False, **job["keywords"])
            rng = np.random.default_rng(0)
            K.batch_set_value([(w, rng.normal(0, 0.2, K.int_shape(w)).astype("float32"))
                               for w in bert.model.trainable_weights])
            bert.save_weights_as_checkpoint(job["dir"] + "/bert_model.ckpt")
            inputs = [np.array(x) for x in job["batch"]]
            result = bert.model.predict(inputs, verbose=0)
            found = {{"inputs": [x.name.split(":")[0] for x in bert.model.inputs],
                     "layers": [[l.name, int(l.count_params())] for l in bert.model.layers],
                     "params": int(bert.model.count_params()), "outputs": result.tolist()}}
            if case == "shared_segment_embeddings":
                # A token of segment 0 (position 1) changed: does position 3 see it?
                inputs[1][:, 1] = 0
                other = [x.copy() for x in inputs]
                other[0][:, 1] = other[0][:, 1] % 99 + 1
                found["segment_zero_seen"] = bool(np.abs(
                    bert.model.predict(inputs, verbose=0)[:, 3]
                    - bert.model.predict(other, verbose=0)[:, 3]).max() > 1e-6)
            out[case] = found
        print(json.dumps(out))
    """)
    return {case: {**out[case], "dir": job["dir"]} for case, job in jobs.items()}


def build(case, checkpoint=None, **kwargs):
    model, keywords = CASES[case]
    return build_transformer_model(CONFIG, checkpoint, model=model, **keywords, **kwargs)


@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_inputs_layers_and_counts_match_bert4keras(theirs, case):
    model = build(case)
    assert [x.name for x in model.inputs] == theirs[case]["inputs"]
    ours = [[layer.name, layer.count_params()] for layer in model.layers]
    assert sorted(map(tuple, ours)) == sorted(map(tuple, theirs[case]["layers"]))
    assert model.count_params() == theirs[case]["params"]


@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_outputs_match_bert4keras_on_its_checkpoint(theirs, case):
    bert = build(case, f"{theirs[case]['dir']}/bert_model.ckpt", return_keras_model=False)
    assert bert.load_report.ok and not bert.load_report.unused
    inputs = batch(case)
    ours = bert.model.predict(inputs, verbose=0)
    real = inputs[0] != 0  # padding rows differ by design
    np.testing.assert_allclose(ours[real], np.asarray(theirs[case]["outputs"])[real],
                               atol=TOLERANCE, rtol=0)


@pytest.mark.peer
def test_shared_segments_leave_segment_zero_visible(theirs):
    """bert4keras passes Embedding-Token's padding mask on from the segment ids, so its
    tokens of segment 0 (past the first) are hidden from attention; kerasbert tells padding
    by the token ids alone."""
    assert theirs["shared_segment_embeddings"]["segment_zero_seen"] is False
    model = build("shared_segment_embeddings", dropout_rate=0)
    tokens, segments = batch("shared_segment_embeddings")
    segments[:, 1] = 0
    other = tokens.copy()
    other[:, 1] = other[:, 1] % 99 + 1
    changed = np.abs(model.predict([tokens, segments], verbose=0)[:, 3]
                     - model.predict([other, segments], verbose=0)[:, 3])
    assert changed.max() > 1e-4


def test_shared_segments_audit_without_a_segment_table():
    model = build("shared_segment_embeddings")
    assert "Embedding-Segment" not in [layer.name for layer in model.layers]
    rows = audit_model(model, BertConfig.from_dict(CONFIG))
    assert all(row.ok for row in rows)
    # BERT's 6,368 without the 2·16 of Embedding-Segment.
    assert sum(row.expected for row in rows) == model.count_params() == 6_336


def test_hierarchical_positions_equal_the_table_within_it_and_go_past_it():
    plain = build_transformer_model(CONFIG, dropout_rate=0)
    hierarchical = build_transformer_model(CONFIG, hierarchical_position=True, dropout_rate=0)
    hierarchical.set_weights(plain.get_weights())
    tokens, segments = batch("hierarchical_position")
    np.testing.assert_allclose(hierarchical.predict([tokens[:, :16], segments[:, :16]], verbose=0),
                               plain.predict([tokens[:, :16], segments[:, :16]], verbose=0),
                               atol=1e-5)
    assert hierarchical.predict([tokens, segments], verbose=0).shape == (2, LONG, 16)
    # A fixed length past the table is accepted up to its square.
    build_transformer_model(CONFIG, hierarchical_position=True, sequence_length=256)
    with pytest.raises(ValueError, match=r"sequence_length \(257\).*256 positions"):
        build_transformer_model(CONFIG, hierarchical_position=True, sequence_length=257)
    with pytest.raises(ValueError, match=r"sequence_length \(17\).*max_position_embeddings"):
        build_transformer_model(CONFIG, sequence_length=17)


def test_a_saved_model_keeps_its_options_in_safe_mode(tmp_path):
    model = build_transformer_model(CONFIG, hierarchical_position=0.25, custom_position_ids=True,
                                    shared_segment_embeddings=True)
    inputs = batch("hierarchical_alpha_custom_ids")
    path = str(tmp_path / "positions.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(loaded.predict(inputs, verbose=0),
                                  model.predict(inputs, verbose=0))
    assert loaded.get_layer("Embedding-Position").hierarchical == 0.25
    assert loaded.get_layer("Embedding-Token-Segment").first_mask_only


@pytest.mark.parametrize("keywords, message", [
    ({"model": "nezha", "custom_position_ids": True},
     r"custom_position_ids=True: model='nezha' has relative positions"),
    ({"model": "gpt2", "custom_position_ids": True},
     r"custom_position_ids=True: model='gpt2' takes token ids alone"),
    ({"model": "roformer", "hierarchical_position": True},
     r"hierarchical_position=True: model='roformer' has rotary positions"),
    ({"model": "t5", "shared_segment_embeddings": True},
     r"shared_segment_embeddings: not a keyword of model='t5'"),
    ({"type_vocab_size": 0, "shared_segment_embeddings": True},
     r"shared_segment_embeddings=True: model='bert' has no segment input"),
    ({"hierarchical_position": 1}, r"hierarchical_position \(1\): must be True"),
])
def test_options_a_family_gives_no_meaning_are_refused_by_name(keywords, message):
    with pytest.raises(ValueError, match=message):
        build_transformer_model(CONFIG, **keywords)


def test_decoding_refuses_a_model_that_takes_its_positions():
    model = build_transformer_model(CONFIG, application="lm", custom_position_ids=True)
    with pytest.raises(ValueError, match=r"Input-Position.*without custom_position_ids"):
        generate(model, [[2, 5, 7]], max_new_tokens=2)


@pytest.mark.parametrize("family, keywords", [
    ("bert", {"application": "unilm", "shared_segment_embeddings": True}),
    ("gpt2", {"hierarchical_position": True}),
])
def test_decoding_through_the_caches_gives_what_the_whole_model_gives(family, keywords):
    model = wide_weights(build_transformer_model(CONFIG, model=family, **keywords))
    prompts, segments = [[5, 17, 33, 9, 41], [44, 8]], [[0, 0, 0, 1, 1], [0, 0]]
    # GPT-2: past its 16 positions; BERT: within them.
    kwargs = dict(max_new_tokens=14) if family == "gpt2" else dict(max_new_tokens=10,
                                                                   segment_ids=segments)
    greedy = generate(model, prompts, **kwargs)
    assert greedy == generate(model, prompts, use_cache=False, **kwargs)
    assert [len(row) for row in greedy] == [kwargs["max_new_tokens"]] * 2
