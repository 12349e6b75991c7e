"""Runs kerasbert's model library on the Keras backend of its process (``KERAS_BACKEND``),
for tests/test_backends.py, which compares the backends' answers.

``python tests/backend_check.py write ROOT [CASE ...]`` (TensorFlow) draws the weights of
each family's tiny model and saves them as a Google checkpoint in ``ROOT/CASE/``;
``read ROOT [CASE ...]`` (any backend) builds each model from its config, loads its
checkpoint and writes its outputs on fixed inputs to ``ROOT/<backend>.npz``;
``features ROOT`` fine-tunes, evaluates, saves and loads, audits, draws, quantizes and
adapts (LoRA) a classifier and writes what it found to ``ROOT/<backend>-features.json``;
``generate ROOT`` decodes with three tiny decoders in every way and writes the ids to
``ROOT/<backend>-generate.json``; ``data-parallel ROOT`` (JAX, several devices) trains a
classifier under ``keras.distribution.DataParallel`` and on one device and writes what
differs to ``ROOT/<backend>-data-parallel.json``; ``reload ROOT NAME`` predicts with the
model another backend saved as ``ROOT/NAME.keras``.
A case or feature that fails is recorded with its error, so one failure hides no other.
"""

import contextlib
import io
import json
import os
import sys
import traceback

import keras
import numpy as np

import kerasbert
from conftest import TINY
from test_families import CASES as FAMILY_CASES

T5 = {"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
      "attention_head_size": 6, "intermediate_size": 24, "hidden_dropout_prob": 0.1,
      "attention_probs_dropout_prob": 0.1}
#: Each case -> (its config's changes, the builder's keywords): tests/test_families.py's
#: cases, BERT, GAU-alpha and T5's (which start from T5).
CASES = {
    "bert": ({}, {"with_pool": True, "with_mlm": "linear"}),
    **FAMILY_CASES,
    "gau_alpha": ({"hidden_act": "swish", "attention_key_size": 12}, {}),
    "t5": ({"hidden_act": "relu"}, {}),
    "t5.1.1": ({"hidden_act": ["gelu", "linear"]}, {}),
    "mt5.1.1": ({"hidden_act": ["gelu", "linear"]}, {}),
}
TOKENS = np.array([[2, 15, 27, 33, 3, 41, 52, 3, 0, 0], [2, 64, 3, 0, 0, 0, 0, 0, 0, 0]], "int32")
SEGMENTS = np.array([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0] * 10], "int32")
TARGETS = np.array([[0, 12, 33, 4, 0], [0, 61, 0, 0, 0]], "int32")


def family(case):
    """The ``model=`` of ``case`` (``bert+unilm`` is BERT under UniLM's mask)."""
    return case.partition("+")[0]


def config_and_inputs(case):
    """``(config, builder keywords, the model's inputs)`` of ``case``."""
    changes, keywords = CASES[case]
    if family(case) in ("t5", "t5.1.1", "mt5.1.1"):
        return {**T5, **changes}, keywords, [TOKENS[:, :8], TARGETS]
    inputs = TOKENS if family(case) in ("gpt2", "gpt2_ml") else [TOKENS, SEGMENTS]
    return {**TINY, **changes}, keywords, inputs


def write(root, case):
    """Draws ``case``'s weights (normal, stddev 0.2: far from any initializer) and saves
    them as ``ROOT/CASE/model.ckpt`` beside its ``config.json``."""
    config, keywords, _ = config_and_inputs(case)
    folder = os.path.join(root, case)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as file:
        json.dump(config, file)
    # ALBERT's unshared layers are saved as ALBERT's checkpoint is.
    writer = "albert" if case == "albert_unshared" else family(case)
    model = kerasbert.build_transformer_model(os.path.join(folder, "config.json"), model=writer,
                                              return_keras_model=False, **keywords)
    draws = np.random.default_rng(0)
    for weight in model.model.trainable_weights:
        weight.assign(draws.normal(0, 0.2, weight.shape).astype("float32"))
    model.save_weights_as_checkpoint(os.path.join(folder, "model.ckpt"))


def read(root, case):
    """``{CASE/i: output i}`` of ``case``'s model loaded from its checkpoint, and its
    parameter count."""
    _, keywords, inputs = config_and_inputs(case)
    folder = os.path.join(root, case)
    model = kerasbert.build_transformer_model(
        os.path.join(folder, "config.json"), os.path.join(folder, "model.ckpt"),
        model=family(case), **keywords)
    outputs = model.predict(inputs, verbose=0)
    outputs = outputs if isinstance(outputs, list) else [outputs]
    return {f"{case}/{i}": np.asarray(output) for i, output in enumerate(outputs)}, \
        model.count_params()


def examples():
    """``(x, y)``: eight rows of 16 Chinese BERT token ids, and their labels."""
    draws = np.random.default_rng(1)
    x = [draws.integers(1, 21128, (8, 16)).astype("int32"), np.zeros((8, 16), "int32")]
    return x, draws.integers(0, 2, (8,)).astype("int32")


def reload(root, saved):
    """The outputs on :func:`examples` of the model saved as ``ROOT/SAVED.keras``, written to
    ``ROOT/SAVED-on-<backend>.npy``."""
    model = kerasbert.load_model(os.path.join(root, f"{saved}.keras"))
    np.save(os.path.join(root, f"{saved}-on-{keras.backend.backend()}.npy"),
            model.predict(examples()[0], verbose=0))


def classifier(config, dropout_rate=0.1):
    encoder = kerasbert.build_transformer_model(config, num_hidden_layers=2)
    return kerasbert.add_cls_classifier(encoder, 2, dropout_rate=dropout_rate)


def features(root):
    """``{feature: what it gave}`` of a two-layer Chinese BERT-base classifier."""
    config = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "checkpoints", "chinese_L-12_H-768_A-12", "bert_config.json")
    x, y = examples()
    found = {}

    def trained():
        keras.utils.set_random_seed(0)
        model = classifier(config)
        model.compile(optimizer=keras.optimizers.Adam(1e-4),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        before = model.evaluate(x, y, verbose=0)[0]
        for _ in range(4):
            model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
        return model, before, model.evaluate(x, y, verbose=0)[0]

    def fit():
        model, before, after = trained()
        found["model"] = model
        return {"loss_before": before, "loss_after": after}

    def summary():
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            found["model"].summary()
        return [line.strip() for line in text.getvalue().splitlines() if "params" in line]

    def saved():
        path = os.path.join(root, f"{keras.backend.backend()}.keras")
        found["model"].save(path)
        again = kerasbert.load_model(path)
        outputs = found["model"].predict(x, verbose=0)
        np.save(path[:-len(".keras")] + "-here.npy", outputs)
        return float(np.max(np.abs(again.predict(x, verbose=0) - outputs)))

    def checkpoint():
        prefix = os.path.join(root, f"{keras.backend.backend()}-ckpt", "model.ckpt")
        kerasbert.save_weights_as_checkpoint(found["model"], prefix)
        again = kerasbert.build_transformer_model(config, prefix, num_hidden_layers=2)
        encoder = keras.Model(found["model"].inputs,
                              found["model"].get_layer(again.layers[-1].name).output)
        return float(np.max(np.abs(again.predict(x, verbose=0) - encoder.predict(x, verbose=0))))

    def plot():
        path = os.path.join(root, f"{keras.backend.backend()}.png")
        keras.utils.plot_model(found["model"], path)
        return os.path.getsize(path) > 0

    def quantized():
        model = classifier(config)
        reference = model.predict(x, verbose=0)
        kerasbert.quantize(model, "int8")
        return {"difference": float(np.max(np.abs(model.predict(x, verbose=0) - reference))),
                "int8": sum(1 for weight in model.weights if weight.dtype == "int8")}

    def lora():
        model = classifier(config)
        kerasbert.enable_lora(model, 4)
        frozen = [np.array(w) for w in model.non_trainable_weights]
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)
        unchanged = all(np.array_equal(a, np.array(w))
                        for a, w in zip(frozen, model.non_trainable_weights))
        return {"trainable": len(model.trainable_weights), "frozen_unchanged": unchanged}

    for name, feature in [("fit", fit), ("summary", summary), ("save_load", saved),
                          ("checkpoint", checkpoint), ("plot_model", plot),
                          ("quantize", quantized), ("lora", lora)]:
        found[name] = answer(feature)
    found.pop("model", None)
    return found


#: The decoders :func:`generations` asks: GPT-2, BERT under UniLM's mask, T5.
DECODERS = {
    "gpt2": ({"max_position_embeddings": 64}, {"model": "gpt2"}),
    "unilm": ({"max_position_embeddings": 64}, {"application": "unilm", "with_mlm": True}),
    "t5.1.1": (T5, {"model": "t5.1.1"}),
}
PROMPTS = [[5, 6, 7], [9], [11, 12, 13, 14, 15]]


def generations():
    """``{decoder: {way: new ids}}``: each decoder's ids greedy through the cache and
    without it, by beam search, with end ids, and sampled through the cache and without it
    (its weights drawn from one seed, as on every backend)."""
    found = {}
    for name, (changes, keywords) in DECODERS.items():
        config = {**TINY, **changes} if name != "t5.1.1" else changes
        model = kerasbert.build_transformer_model(config, **keywords)
        draws = np.random.default_rng(0)
        for weight in model.trainable_weights:
            weight.assign(draws.normal(0, 0.3, weight.shape).astype("float32"))
        ways = {"greedy": {}, "without_cache": {"use_cache": False}, "beams": {"num_beams": 3},
                "ends": {"end_id": [5, 18, 68], "min_new_tokens": 2},
                "sampled": {"sample": True, "top_k": 5, "top_p": 0.9, "seed": 4},
                "sampled_without_cache": {"sample": True, "top_k": 5, "top_p": 0.9, "seed": 4,
                                          "use_cache": False}}
        found[name] = {way: answer(lambda model=model, options=options: kerasbert.generate(
            model, PROMPTS, max_new_tokens=6, **options)) for way, options in ways.items()}
    return found


def data_parallel():
    """What a tiny classifier trained by ``keras.distribution.DataParallel`` over every
    device of the process gives, beside the same training on one device: the devices, the
    devices a weight and a batch lie on, and the largest difference of the weights after
    four steps (dropout off: the same arithmetic, summed in another order)."""
    from keras.distribution import DataParallel, list_devices

    config = {**TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    draws = np.random.default_rng(2)
    x = [draws.integers(1, 100, (8, 12)).astype("int32"), np.zeros((8, 12), "int32")]
    y = draws.integers(0, 2, (8,)).astype("int32")
    keras.utils.set_random_seed(0)
    start = classifier(config, dropout_rate=0).get_weights()

    def trained():
        model = classifier(config, dropout_rate=0)
        model.set_weights(start)
        # SGD: a step in proportion to the gradient (Adam's would turn a rounding
        # difference of a gradient near zero into a whole step).
        model.compile(optimizer=keras.optimizers.SGD(0.5),
                      loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        return model

    alone = [np.asarray(w) for w in trained().weights]
    devices = list_devices()
    distribution = DataParallel(devices=devices)
    with distribution.scope():
        model = trained()
        batch = distribution.get_data_layout((4, 12)).backend_layout
    weight = model.get_layer("Embedding-Token").embeddings.value
    return {"devices": devices, "weight_devices": len(weight.sharding.device_set),
            "batch_devices": len(batch.device_set),
            "difference": max(float(np.max(np.abs(np.asarray(w) - a)))
                              for w, a in zip(model.weights, alone)),
            "scale": max(float(np.max(np.abs(a))) for a in alone)}


def answer(feature):
    try:
        return {"ok": True, "value": feature()}
    except Exception as error:  # recorded: one failure hides no other
        return {"ok": False, "error": f"{type(error).__name__}: {error}".splitlines()[0],
                "traceback": traceback.format_exc()}


def main(argv):
    action, root, *cases = argv
    backend = keras.backend.backend()
    if action == "reload":
        reload(root, *cases)
        return
    if action in ("features", "generate", "data-parallel"):
        found = {"features": lambda: features(root), "generate": generations,
                 "data-parallel": lambda: answer(data_parallel)}[action]()
        with open(os.path.join(root, f"{backend}-{action}.json"), "w") as file:
            json.dump(found, file, indent=1, default=str)
        return
    arrays, report = {}, {}
    for case in cases or list(CASES):
        if action == "write":
            write(root, case)
            continue
        result = answer(lambda case=case: read(root, case))
        if result["ok"]:
            outputs, result["value"] = result["value"]
            arrays.update(outputs)
        report[case] = result
    if action == "read":
        np.savez(os.path.join(root, f"{backend}.npz"), **arrays)
        with open(os.path.join(root, f"{backend}.json"), "w") as file:
            json.dump(report, file, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
