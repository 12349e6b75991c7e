"""What bert4keras accepts, kerasbert accepts with bert4keras's meaning: ``topp`` of 1 or
more, a vocabulary without ``[CLS]``, ``[SEP]`` or ``[UNK]``, and ``K.in_train_phase`` in a
layer whose ``call`` takes no ``training``. Each is run as a bert4keras script runs it, the
same text under bert4keras 0.11.5 (recorded answers, ``tests/fixtures/peers/``) and under
kerasbert with only the imports changed."""

import json

import pytest

from peers import run_bert4keras, run_python

#: A decoder over a fixed table of logits (no model): 12 tokens, each step's distribution
#: a function of the last token; ``random_sample`` with ``topp`` >= 1, seeded.
SAMPLING = """
    import json
    import numpy as np
    from bert4keras.snippets import AutoRegressiveDecoder

    table = np.random.RandomState(3).normal(size=(12, 12)) * 2

    class Toy(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="logits")
        def predict(self, inputs, output_ids, states):
            return table[output_ids[:, -1]]

    decoder = Toy(start_id=0, end_id=3, maxlen=12)
    found = {}
    for topp in (1, 1.5, 5):
        np.random.seed(0)
        found[str(topp)] = [ids.tolist() for ids in decoder.random_sample([[1, 2]], 8, topp=topp)]
    np.random.seed(0)
    found["none"] = [ids.tolist() for ids in decoder.random_sample([[1, 2]], 8)]
    try:
        decoder.random_sample([[1, 2]], 2, topk=20)
        found["topk"] = "sampled"
    except Exception as error:
        found["topk"] = type(error).__name__
    print(json.dumps(found))
"""

#: A character vocabulary of digits and letters without [PAD], [UNK], [CLS] or [SEP]; the
#: script sets the unknown id itself, as bert4keras's scripts over such vocabularies do.
CHARACTERS = """
    import json
    from bert4keras.tokenizers import Tokenizer

    token_dict = {c: i for i, c in enumerate("0123456789abcdefghijklmnopqrstuvwxyz")}
    tokenizer = Tokenizer(token_dict)
    tokenizer._token_unk_id = 0
    found = {text: [tokenizer.tokenize(text), tokenizer.encode(text)]
             for text in ("12ab", "3 cd", "4+ef", "5中g", "")}
    found["pair"] = tokenizer.encode("12", "ab", maxlen=4)
    bare = Tokenizer(token_dict, token_start=None, token_end=None)
    bare._token_unk_id = 0
    found["bare"] = bare.encode("7 x 9")
    print(json.dumps(found))
"""

#: BERT-of-Theseus's module choice as bert4keras's example writes it: ``K.in_train_phase``
#: with no ``training``, in a ``call(self, inputs)``. A scale trained one SGD step under
#: ``fit`` (the training branch: twice the input) and read by ``predict`` (the other: three
#: times).
TRAIN_PHASE = """
    import json
    import numpy as np
    from bert4keras.backend import keras, K

    class Phased(keras.layers.Layer):
        def build(self, input_shape):
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")

        def call(self, inputs):
            return K.in_train_phase(inputs * 2 * self.scale, inputs * 3 * self.scale)

    inputs = keras.layers.Input((2,))
    model = keras.models.Model(inputs, Phased()(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x = np.array([[1.0, 2.0]], "float32")
    predicted = model.predict(x, verbose=0).tolist()
    model.fit(x, np.zeros((1, 2), "float32"), epochs=1, verbose=0)
    scale = float(K.get_value(model.layers[-1].scale))
    print(json.dumps({"predicted": predicted, "scale": round(scale, 6),
                      "after": np.round(model.predict(x, verbose=0), 6).tolist()}))
"""


def kerasbert_version(script):
    """The same script under kerasbert: only the imports change."""
    return script.replace("from bert4keras.", "from kerasbert.")


@pytest.mark.peer
@pytest.mark.parametrize("script", [SAMPLING, CHARACTERS, TRAIN_PHASE],
                         ids=["topp of 1 or more", "no special tokens", "in_train_phase"])
def test_kerasbert_answers_as_bert4keras_does(script):
    theirs = run_bert4keras(script)
    ours = run_python(kerasbert_version(script))
    if script is SAMPLING:
        # bert4keras's topk above the vocabulary fails in NumPy's argpartition; kerasbert
        # refuses it by name (tests/test_dropin_snippets.py).
        assert theirs.pop("topk") == "ValueError" and ours.pop("topk") == "ValueError"
    assert json.loads(json.dumps(ours)) == theirs


def test_topp_of_1_or_more_keeps_every_token():
    """bert4keras's cumulative-sum test never fires past 1: every token stays a candidate,
    so each draw is the same as ``topp=1`` and covers the whole vocabulary."""
    found = run_python(kerasbert_version(SAMPLING))
    assert found["1.5"] == found["5"]
    drawn = {token for row in found["5"] for token in row[1:]}
    assert len(drawn) > 5


def test_k_learning_phase_follows_the_call_in_progress():
    """``K.learning_phase()`` inside a layer's call: 1 under ``fit`` and ``training=True``, 0
    under ``predict`` and outside any call (Keras 3 hands the flag of the outermost call
    to every inner layer)."""
    found = run_python("""
        import json
        import numpy as np
        from kerasbert.backend import keras, K

        class Phase(keras.layers.Layer):
            def call(self, inputs):
                return inputs * 0 + K.cast(K.learning_phase(), "float32")

        inputs = keras.layers.Input((1,))
        model = keras.models.Model(inputs, Phase()(inputs))
        x = np.zeros((1, 1), "float32")
        seen = []

        class Record(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                seen.append(float(logs["loss"]))

        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, np.zeros((1, 1), "float32"), verbose=0, callbacks=[Record()])
        print(json.dumps({"predict": float(model.predict(x, verbose=0)[0, 0]),
                          "training": float(model(x, training=True)[0, 0]),
                          "fit_loss": seen[0], "outside": K.learning_phase()}))
    """)
    assert found == {"predict": 0.0, "training": 1.0, "fit_loss": 1.0, "outside": 0}
