"""Does reading past 512 positions help? Fine-tuning on texts whose label sits at their end.

``python -m bench long-quality`` fine-tunes the shipped ``kerasbert-zh-small`` (512 positions)
twice on the same long examples (:mod:`bench.long_texts`: 512 tokens of news, then a review
that decides the label), same steps, same seed, and scores both on the dev examples:

* ``truncated``: ``maxlen`` 512, keeping the head of each text, as a BERT checkpoint reads;
  it never sees a review, so it should score at chance;
* ``hierarchical``: ``maxlen`` 1024, ``hierarchical_position=True`` (positions past 512
  built from the checkpoint's 512, as bert4keras does).

Each run is a worker of its own (a fresh process, one after the other). Not run by default:
about fifteen minutes on two cores.
"""

import os
import time

from bench.runner import run_worker, selected, why_missing

# 3 epochs of 1,600 texts of ~600 tokens, batch 8 (600 steps): about eight minutes a run on
# two quiet cores. 400 dev texts: a standard error of 0.025 at chance.
SETTINGS = {"train_count": 1600, "dev_count": 400, "epochs": 3, "batch_size": 8,
            "learning_rate": 1e-4, "seed": 0}
RUNS = {
    "truncated": ("maxlen 512, head kept (the checkpoint's positions)", {"maxlen": 512}),
    "hierarchical": ("maxlen 1024, hierarchical_position=True",
                     {"maxlen": 1024, "hierarchical": True}),
}


def classifier(config, checkpoint, hierarchical, labels, learning_rate, run_eagerly=False):
    """BERT with a softmax Dense on [CLS], compiled with Adam and cross-entropy."""
    import keras

    from kerasbert.models import build_transformer_model

    bert = build_transformer_model(config, checkpoint, hierarchical_position=hierarchical or None)
    cls = keras.layers.Dropout(0.1, name="CLS-Dropout")(bert.output[:, 0])
    probabilities = keras.layers.Dense(labels, activation="softmax", name="CLS-Dense")(cls)
    model = keras.Model(bert.inputs, probabilities)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                  run_eagerly=run_eagerly)
    return model


def encoded(examples, tokenizer, maxlen):
    """``([token_ids, segment_ids], label ids)`` of ``examples``, head kept, padded to the
    longest row (at most ``maxlen``)."""
    import numpy as np

    from bench.long_texts import LABELS

    token_ids, segment_ids = tokenizer.encode_batch([e.text for e in examples], maxlen=maxlen)
    labels = np.array([LABELS.index(e.label) for e in examples], dtype=np.int32)
    return [token_ids, segment_ids], labels


def finetune(maxlen, hierarchical=False, model_dir=None, config=None, train_split="train",
             dev_split="dev", train_count=320, dev_count=200, prefix_tokens=512,
             max_review_tokens=96, epochs=3, batch_size=8, learning_rate=1e-4, seed=0,
             run_eagerly=False):
    """Fine-tunes a classifier on long examples and scores it on the dev ones.

    Args:
        maxlen: tokens read per text, [CLS] and [SEP] included; the rest is cut.
        hierarchical: build with ``hierarchical_position=True``.
        model_dir: the folder of ``bert_config.json``, ``vocab.txt`` and the checkpoint
            (default: the shipped ``kerasbert-zh-small``).
        config: a dict of ``bert_config.json`` keys to build instead, randomly initialised
            (the tokenizer stays ``model_dir``'s).
        train_split, dev_split: the shipped splits the examples come from.
        train_count, dev_count, prefix_tokens, max_review_tokens: see
            :func:`bench.long_texts.long_examples`.
        epochs, batch_size, learning_rate, seed: of the training.
        run_eagerly: no traced steps (for a tiny model, tracing takes longer than training).

    Returns:
        ``{"label", "dev_accuracy", "chance", "train_loss" (per epoch), "seconds", ...}``.
    """
    import keras

    from bench.long_texts import long_examples
    from kerasbert import Tokenizer, shipped

    started = time.perf_counter()
    model_dir = model_dir or shipped.model_dir()
    tokenizer = Tokenizer(os.path.join(model_dir, "vocab.txt"))
    draw = {"prefix_tokens": prefix_tokens, "max_review_tokens": max_review_tokens, "seed": seed}
    train = encoded(long_examples(train_split, train_count, tokenizer, **draw), tokenizer, maxlen)
    dev = encoded(long_examples(dev_split, dev_count, tokenizer, **draw), tokenizer, maxlen)
    keras.utils.set_random_seed(seed)
    model = classifier(config or os.path.join(model_dir, "bert_config.json"),
                       None if config else os.path.join(model_dir, "bert_model.ckpt"),
                       hierarchical, labels=2, learning_rate=learning_rate,
                       run_eagerly=run_eagerly)
    history = model.fit(*train, batch_size=batch_size, epochs=epochs, shuffle=True, verbose=0)
    _, accuracy = model.evaluate(*dev, batch_size=batch_size * 4, verbose=0)
    return {"label": f"maxlen {maxlen}" + (", hierarchical" if hierarchical else ""),
            "dev_accuracy": round(float(accuracy), 4),
            "chance": round(float(max(dev[1].mean(), 1 - dev[1].mean())), 4),
            "train_loss": [round(float(x), 4) for x in history.history["loss"]],
            "train_tokens": list(train[0][0].shape), "dev_tokens": list(dev[0][0].shape),
            "seconds": round(time.perf_counter() - started, 1)}


WORKERS = {"finetune": finetune}


def run(options, log):
    """The suite: each run of :data:`RUNS` in turn, then one table."""
    results = {}
    for name in selected(options, RUNS):
        label, kwargs = RUNS[name]
        log(f"long_quality: fine-tuning {name} ({label})")
        results[name] = {**run_worker("long_quality", "finetune", {**kwargs, **SETTINGS},
                                      options, log, timeout=1800), "label": label}
    rows = []
    for name, result in results.items():
        missing = why_missing(result)
        rows.append({"name": name, "label": missing or result["label"]} if missing else
                    {"name": name, "label": result["label"],
                     "dev_accuracy": result["dev_accuracy"], "chance": result["chance"],
                     "loss": " -> ".join(f"{x:.3f}" for x in result["train_loss"]),
                     "seconds": result["seconds"]})
    columns = [("name", "run"), ("label", "what it reads"), ("dev_accuracy", "dev accuracy"),
               ("chance", "chance"), ("loss", "train loss by epoch"), ("seconds", "s")]
    return {"results": {**results, "settings": SETTINGS},
            "tables": [{"title": "Long texts, label at the end: dev accuracy",
                        "columns": columns, "rows": rows}]}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("long_quality")
