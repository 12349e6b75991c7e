"""kerasbert.models against bert4keras 0.11.5's models: the class decorators
``extend_with_language_model`` / ``extend_with_unified_language_model`` and the mask mixins,
on the families, give bert4keras's layers and outputs on bert4keras's own checkpoint.

bert4keras (in its own interpreter, once) builds each case from the same config, draws
random weights, writes them as a checkpoint and runs a padded batch with two segments;
kerasbert builds the same case from ``kerasbert.models`` and loads that checkpoint strictly.
A case's class is one expression over the models module (``M``), the same text for both.
"""

import json

import numpy as np
import pytest

import kerasbert.models as M
from conftest import TINY
from peers import run_bert4keras
from test_families import SEGMENTS, TOKENS, TOLERANCE

# case -> (config changes, the model class as an expression of M, build keywords).
CASES = {
    "unilm(BERT)": ({}, "M.extend_with_unified_language_model(M.BERT)", {"with_mlm": "linear"}),
    "lm(BERT)": ({}, "M.extend_with_language_model(M.BERT)", {"with_mlm": "linear"}),
    "lm(RoFormer)": ({}, "M.extend_with_language_model(M.RoFormer)", {"with_mlm": "linear"}),
    "unilm(NEZHA)": ({}, "M.extend_with_unified_language_model(M.NEZHA)",
                     {"with_mlm": "linear"}),
    "lm(ALBERT)": ({"embedding_size": 8}, "M.extend_with_language_model(M.ALBERT)",
                   {"with_mlm": "linear"}),
    "unilm(GPT)": ({}, "M.extend_with_unified_language_model(M.GPT)",
                   {"final_activation": "linear"}),
    # The outer decorator's mask wins; application= wins over a decorator's.
    "lm(unilm(BERT))": ({}, "M.extend_with_language_model(M.extend_with_unified_language_model("
                            "M.BERT))", {"with_mlm": "linear"}),
    "lm(BERT)+application=unilm": ({}, "M.extend_with_language_model(M.BERT)",
                                   {"with_mlm": "linear", "application": "unilm"}),
    "class(LM_Mask, BERT)": ({}, "type('MyLM', (M.LM_Mask, M.BERT), {})", {"with_mlm": "linear"}),
}
MASK_LAYERS = ("Attention-LM-Mask", "Attention-UniLM-Mask")


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's layers, checkpoint and outputs of every case, in one interpreter."""
    root = tmp_path_factory.mktemp("dropin-models")
    jobs = {}
    for number, (case, (changes, expression, keywords)) in enumerate(CASES.items()):
        directory = root / str(number)
        directory.mkdir()
        (directory / "bert_config.json").write_text(json.dumps({**TINY, **changes}))
        jobs[case] = {"dir": str(directory), "expression": expression, "keywords": keywords}
    out = run_bert4keras(f"""
        import json
        import numpy as np
        import tensorflow as tf
        # bert4keras 0.11.5 saves with TF 1's Session and Saver, in graph mode.
        tf.compat.v1.disable_eager_execution()
        tf.Session, tf.train.Saver = tf.compat.v1.Session, tf.compat.v1.train.Saver
        from bert4keras import models as M
        from bert4keras.backend import K
        jobs = json.loads({json.dumps(json.dumps(jobs))})
        out = {{}}
        for case, job in jobs.items():
            K.clear_session()  # a new graph per model: one graph of them all slows each step
            bert = M.build_transformer_model(job["dir"] + "/bert_config.json",
                                             model=eval(job["expression"]),
                                             return_keras_model=False, **job["keywords"])
            rng = np.random.default_rng(0)
            K.batch_set_value([(w, rng.normal(0, 0.2, K.int_shape(w)).astype("float32"))
                               for w in bert.model.trainable_weights])
            bert.save_weights_as_checkpoint(job["dir"] + "/bert_model.ckpt")
            outputs = bert.model.predict([np.array({TOKENS}), np.array({SEGMENTS})], verbose=0)
            out[case] = {{"layers": [[layer.name, int(layer.count_params())]
                                     for layer in bert.model.layers],
                          "outputs": outputs.tolist()}}
        print(json.dumps(out))
    """)
    return {case: {**out[case], "dir": job["dir"]} for case, job in jobs.items()}


@pytest.mark.peer
@pytest.mark.parametrize("case", list(CASES))
def test_a_decorated_family_equals_bert4keras_on_its_checkpoint(theirs, case):
    _, expression, keywords = CASES[case]
    directory = theirs[case]["dir"]
    bert = M.build_transformer_model(f"{directory}/bert_config.json",
                                     f"{directory}/bert_model.ckpt", model=eval(expression),
                                     return_keras_model=False, **keywords)
    assert bert.load_report.ok and not bert.load_report.unused
    ours = [[layer.name, layer.count_params()] for layer in bert.model.layers]
    assert sorted(map(tuple, ours)) == sorted(map(tuple, theirs[case]["layers"]))
    assert [n for n, _ in ours if n in MASK_LAYERS] == [
        n for n, _ in theirs[case]["layers"] if n in MASK_LAYERS]
    tokens, segments = np.array(TOKENS, "int32"), np.array(SEGMENTS, "int32")
    outputs = bert.model.predict([tokens, segments], verbose=0)
    real = tokens > 0
    np.testing.assert_allclose(outputs[real], np.array(theirs[case]["outputs"])[real],
                               atol=TOLERANCE, rtol=TOLERANCE)


def test_the_names_of_bert4keras_models_are_there():
    from kerasbert.models.families.albert import ALBERTUnshared

    assert M.ALBERT_Unshared is ALBERTUnshared
    assert {"BERT", "ALBERT", "NEZHA", "RoFormer", "RoFormerV2", "ELECTRA", "GPT",
            "GPT2", "GPT2_ML", "T5", "T5_Base", "T5_Encoder", "T5_Decoder", "Transformer",
            "build_transformer_model"} <= set(M.__all__)
    assert M.extend_with_language_model(M.RoFormer).__mro__[1] is M.LM_Mask


def test_what_kerasbert_does_not_build_is_refused_by_name():
    with pytest.raises(ImportError, match="kerasbert.models.data_parallel .*not provided"):
        exec("from kerasbert.models import data_parallel", {})
    with pytest.raises(ValueError, match="model='electra' cannot be built with "
                                         "application='lm'"):
        M.build_transformer_model(TINY, model=M.extend_with_language_model(M.ELECTRA))
