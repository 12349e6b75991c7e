"""Attention masks as values, bert4keras's Transformer object, and its keywords.

A language model's target must not leak: changing token t may change no output before t.
The object ``return_keras_model=False`` gives has bert4keras's attributes and is subclassed
as bert4keras users do. Every keyword of bert4keras 0.11.5's ``build_transformer_model`` and
of its model classes either builds or is refused by name (bert4keras asked in its own
process, as an oracle).
"""

import os
import re

import keras
import numpy as np
import pytest

from conftest import TINY
from kerasbert import PrefixLM, build_transformer_model
from kerasbert.models.build import FIXED, REFUSED
from kerasbert.models.families.bert import BERT
from peers import run_bert4keras

TOKENS = np.array([[2, 11, 12, 13, 3, 21, 22, 23, 3, 0, 0]], "int32")
SEGMENTS = np.array([[0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0]], "int32")
REAL = 9  # tokens before the padding


def outputs(model, tokens):
    return np.asarray(model.predict([tokens, SEGMENTS], verbose=0))


@pytest.mark.parametrize("application, first_free", [
    ("lm", 0),          # every token is a target
    ("unilm", 5),       # the source (segment 0) sees all of itself
    (PrefixLM(3), 3),   # the first three tokens see each other
])
def test_a_later_token_changes_no_output_before_it(application, first_free):
    model = build_transformer_model({**TINY, "hidden_dropout_prob": 0,
                                     "attention_probs_dropout_prob": 0},
                                    application=application, with_mlm="linear")
    before = outputs(model, TOKENS)
    for position in range(max(first_free, 1), REAL):
        changed = TOKENS.copy()
        changed[0, position] = 50
        after = outputs(model, changed)
        np.testing.assert_array_equal(after[0, :position], before[0, :position],
                                      err_msg=f"{application}: token {position} leaked")
        assert not np.allclose(after[0, position], before[0, position])
    if first_free:  # inside the bidirectional part, a later token is seen
        changed = TOKENS.copy()
        changed[0, first_free - 1] = 50
        assert not np.allclose(outputs(model, changed)[0, 0], before[0, 0])


def test_the_encoder_is_bidirectional_and_a_language_model_gets_the_mlm_head():
    encoder = build_transformer_model(TINY)
    assert "Attention-LM-Mask" not in [layer.name for layer in encoder.layers]
    lm = build_transformer_model(TINY, application="lm")
    assert lm.get_layer("Attention-LM-Mask") is not None
    assert lm.output.shape[-1] == TINY["vocab_size"]  # MLM-Activation, as bert4keras
    assert lm.count_params() == build_transformer_model(TINY, with_mlm=True).count_params()


def test_a_language_model_is_not_given_a_classifier():
    from kerasbert import add_cls_classifier

    with pytest.raises(ValueError, match="ends in LM-Activation .*a GPT is a language model"):
        add_cls_classifier(build_transformer_model(TINY, model="gpt"), num_labels=2)
    with pytest.raises(ValueError, match="ends in MLM-Activation"):
        add_cls_classifier(build_transformer_model(TINY, application="unilm"), num_labels=2)


def test_a_language_model_saves_and_loads_in_safe_mode(tmp_path):
    model = build_transformer_model(TINY, application="unilm", with_mlm="linear")
    path = str(tmp_path / "unilm.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(outputs(loaded, TOKENS), outputs(model, TOKENS))


def test_unknown_applications_and_refused_combinations_are_named():
    with pytest.raises(ValueError, match="^application='seq2seq' is not supported; "
                                         "supported: encoder, lm, unilm"):
        build_transformer_model(TINY, application="seq2seq")
    with pytest.raises(ValueError, match="model='electra' cannot be built with "
                                         "application='unilm'"):
        build_transformer_model({**TINY, "embedding_size": 8}, model="electra",
                                application="unilm")
    with pytest.raises(ValueError, match="application='unilm' reads source and target from "
                                         "the segment ids"):
        build_transformer_model({**TINY, "type_vocab_size": 0}, application="unilm")


def test_the_transformer_object_has_bert4keras_attributes(tmp_path):
    bert = build_transformer_model(TINY, return_keras_model=False)
    assert isinstance(bert.model, keras.Model)
    assert bert.model.output is bert.output
    assert bert.layers["Transformer-1-FeedForward"] is bert.model.get_layer(
        "Transformer-1-FeedForward")
    assert isinstance(bert.initializer, keras.initializers.TruncatedNormal)
    assert (bert.hidden_size, bert.num_hidden_layers, bert.max_position,
            bert.segment_vocab_size) == (16, 2, 32, 2)
    mapping = bert.variable_mapping()
    assert mapping["Embedding-Norm"]["gamma"] == "bert/embeddings/LayerNorm/gamma"
    # apply reuses a layer by its name, and makes a new one under a new name.
    assert bert.apply(name="Embedding-Token") is bert.layers["Embedding-Token"]
    head = bert.apply(inputs=bert.output, layer=keras.layers.Dense, units=3, name="My-Head")
    assert head.shape[-1] == 3 and "My-Head" in bert.layers
    # load / save by the object's table, with its keep_tokens.
    prefix = str(tmp_path / "bert_model.ckpt")
    written = bert.save_weights_as_checkpoint(prefix)
    assert "bert/encoder/layer_1/output/dense/kernel" in written
    assert bert.load_weights_from_checkpoint(prefix).ok


class ClsHead(BERT):
    """A bert4keras-style variant: BERT with its own final layers."""

    def apply_final_layers(self, inputs):
        x = self.apply(inputs=inputs, layer=keras.layers.GlobalAveragePooling1D,
                       name="Mean-Pool")
        return self.apply(inputs=x, layer=keras.layers.Dense, units=3,
                          kernel_initializer=self.initializer, name="My-Classifier")


def test_a_subclass_makes_a_variant_and_loads_a_checkpoint(tmp_path):
    prefix = str(tmp_path / "bert_model.ckpt")
    source = build_transformer_model(TINY, return_keras_model=False)
    source.save_weights_as_checkpoint(prefix)
    variant = build_transformer_model(TINY, prefix, model=ClsHead, return_keras_model=False)
    assert isinstance(variant, ClsHead) and variant.load_report.ok
    assert variant.model.output.shape == (None, 3)
    np.testing.assert_array_equal(
        variant.model.get_layer("Transformer-1-FeedForward").output_kernel.numpy(),
        source.model.get_layer("Transformer-1-FeedForward").output_kernel.numpy())


# Values a bert4keras script would pass for each keyword kerasbert refuses or fixes.
SAMPLE = {"attention_head_size": 4, "attention_key_size": 4}
# Keywords that build with bert4keras's meaning: a value, read back from the object by the
# same name (bert4keras's Transformer attributes).
WORKS = {"vocab_size": 90, "hidden_size": 24, "num_hidden_layers": 1,
         "num_attention_heads": 4, "intermediate_size": 40, "hidden_act": "relu",
         "dropout_rate": 0.2, "attention_dropout_rate": 0.3, "embedding_size": 16,
         "sequence_length": 12, "name": "named", "max_position": 16,
         "segment_vocab_size": 0, "with_pool": "tanh", "with_nsp": True, "with_mlm": "linear",
         "prefix": "Encoder-", "autoresize_weights": True, "hierarchical_position": True,
         "custom_position_ids": True, "shared_segment_embeddings": True,
         "residual_attention_scores": True}
# Keywords checked by what they do (the conditional norms' in test_bert4keras_conditional.py,
# layers in test_bert4keras_prefix.py, attention_caches in test_bert4keras_attention.py).
CHECKED = ("keep_tokens", "compound_tokens", "ignore_invalid_weights", "application",
           "config_path", "checkpoint_path", "model", "return_keras_model", "layer_norm_cond",
           "layer_norm_cond_hidden_size", "layer_norm_cond_hidden_act",
           "additional_input_layers", "layers", "attention_caches")


def bert4keras_keywords():
    """The keywords of bert4keras 0.11.5's build_transformer_model and of the model
    classes it passes them to, asked of bert4keras itself."""
    return set(run_bert4keras("""
        import inspect, json
        from bert4keras import models
        found = set()
        for function in (models.build_transformer_model, models.Transformer.__init__,
                         models.Transformer.build, models.BERT.__init__):
            found |= set(inspect.signature(function).parameters)
        print(json.dumps(sorted(found - {"self", "kwargs"})))
    """))


@pytest.mark.peer
def test_every_bert4keras_keyword_builds_or_is_refused_by_name(tmp_path):
    keywords = bert4keras_keywords()
    assert keywords == set(WORKS) | set(SAMPLE) | set(CHECKED)
    assert set(REFUSED) | set(FIXED) == set(SAMPLE)
    for keyword, value in SAMPLE.items():
        with pytest.raises(ValueError) as error:
            build_transformer_model(TINY, **{keyword: value})
        message = str(error.value)
        assert message.startswith((f"{keyword} ({value!r})", f"{keyword}={value!r}")), message
        assert "not supported" in message and len(message.splitlines()) == 1
    for keyword, value in WORKS.items():
        bert = build_transformer_model(TINY, return_keras_model=False, **{keyword: value})
        assert getattr(bert, keyword) == value, keyword
    # FIXED keywords at the value the config implies build as usual.
    build_transformer_model(TINY, attention_head_size=8, attention_key_size=8)

    prefix = str(tmp_path / "bert_model.ckpt")
    build_transformer_model(TINY, return_keras_model=False).save_weights_as_checkpoint(prefix)
    small = build_transformer_model(config_path=TINY, checkpoint_path=prefix,
                                    keep_tokens=[0, 1, 2, 3], compound_tokens=[[2, 3]],
                                    return_keras_model=False)
    assert small.vocab_size == 5 and small.load_report.ok
    # No MLM head in the checkpoint: initialised with a warning, or refused when strict.
    with pytest.warns(UserWarning, match="cls/predictions"):
        build_transformer_model(TINY, prefix, with_mlm=True)
    with pytest.raises(ValueError, match="cls/predictions"):
        build_transformer_model(TINY, prefix, with_mlm=True, strict=True)
    loose = build_transformer_model(TINY, prefix, with_mlm=True, ignore_invalid_weights=True,
                                    return_keras_model=False)
    assert loose.load_report.missing and not loose.load_report.ok
    assert build_transformer_model(TINY, application="lm").get_layer("Attention-LM-Mask")
    assert build_transformer_model({**TINY, "embedding_size": 8}, model="albert",
                                   return_keras_model=False).layers[
        "Transformer-MultiHeadSelfAttention"]
    assert isinstance(build_transformer_model(TINY, return_keras_model=True), keras.Model)


#: The keywords docs/bert4keras.md's keyword table lists, each with the test file that
#: compares it with bert4keras.
TABLED = {"custom_position_ids", "hierarchical_position", "shared_segment_embeddings",
          "layer_norm_cond", "layer_norm_cond_hidden_size", "layer_norm_cond_hidden_act",
          "additional_input_layers", "prefix", "layers", "autoresize_weights",
          "residual_attention_scores", "attention_caches"}


def test_the_docs_keyword_table_names_a_test_that_checks_each_keyword():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    docs = open(os.path.join(root, "docs", "bert4keras.md"), encoding="utf-8").read()
    table = docs[docs.index("| keyword | what it builds"):].split("\n\n")[0].splitlines()[2:]
    found = set()
    for row in table:
        keywords, _, test_file, largest = (cell.strip() for cell in row.strip("|").split(" | "))
        test = open(os.path.join(root, "tests", test_file.strip("`")), encoding="utf-8").read()
        for keyword in re.findall(r"`(\w+)", keywords):
            assert keyword in test, (keyword, test_file)
            found.add(keyword)
        assert float(largest) <= 1e-5
    assert found == TABLED
