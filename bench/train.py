"""Training speed: samples/s of a classifier fine-tuned with Keras ``fit`` and its peers.

The small config of the embedded default (``kerasbert-zh-small``: L4 H256 A4 I1024),
batch 16, sequences cut at 128 tokens, real review texts from the shipped training
split, two labels, dropout 0.1, an Adam-family optimizer at 1e-4. Every implementation
trains on the same examples in its own process:

* ``bert4keras``: its ``build_transformer_model`` + first token + Dense, tf-keras ``fit``;
* ``keras-hub``: ``BertBackbone`` in ``BertTextClassifier`` (pooled output + Dense),
  Keras ``fit`` with its default ``jit_compile`` (which is off on a CPU);
* ``hf-torch``: ``BertForSequenceClassification`` with ``torch.optim.AdamW``, a plain loop;
  ``hf-torch-bf16`` the same under ``torch.autocast("cpu", dtype=torch.bfloat16)``;
* ``kerasbert``: :func:`kerasbert.add_cls_classifier` +
  :func:`kerasbert.training.optimizer.make_optimizer`, Keras ``fit``, every batch padded to 128
  like the peers;

and kerasbert's options one at a time: ``kerasbert-bucketed`` (the batches of
``kerasbert train``: grouped by length, cut to their longest row), ``kerasbert-xla``
(``jit_compile=True``), ``kerasbert-bf16`` (``mixed_bfloat16``, ``--mixed-precision``)
and both of the fast ones together (``kerasbert-bucketed-bf16``). ``kerasbert-padding`` (and
``kerasbert-bucketed-padding``, ``kerasbert-bf16-padding``) computes the products of padding
in training as well, as the peers do, where kerasbert computes those of the real tokens only
(:func:`kerasbert.models.kernels.token_rows`). ``kerasbert-keras-kernels``
(and ``-bf16``) trains with Keras's own dropout, autodiff's GELU derivative and Keras's
Adam update instead of :mod:`kerasbert.models.kernels` and the fused ``ApplyAdam``: what
those are worth.

Each worker first trains a few warm-up batches (tracing, compiling), then times
``epochs`` passes over the same ``samples`` examples; every pass records its seconds and
the cores it kept busy (process CPU time over wall time), and the speed is the median
pass's.

The Keras 3 implementations get their batches from one endless ``tf.data`` pipeline with
``steps_per_epoch``, as ``kerasbert train`` feeds ``fit``. Given arrays (or any finite
dataset), Keras 3's own ``fit`` makes a new data iterator at every epoch, and tearing the old
one down stalls the pass with one core idle (tf-keras, under bert4keras, does not stall).
``kerasbert-arrays`` gives a kerasbert model's ``fit`` the arrays (it feeds them through one
endless pipeline itself, :mod:`kerasbert.models.model`), ``kerasbert-arrays-keras`` the same
arrays under Keras's own ``fit``. ``kerasbert-forfit`` and ``bert4keras-forfit`` run
bert4keras's classification example as its scripts write it: the library's
``build_transformer_model``, a first-token head, its ``Adam``, and ``fit`` on a
``DataGenerator``'s ``forfit()`` with batches padded to their longest row.
"""

import os
import tempfile
import time

import numpy as np

from bench.runner import Skipped, require, run_worker, selected, why_missing
from bench.worker import ROOT

MODEL = os.path.join(ROOT, "kerasbert", "resources", "kerasbert-zh-small")
CONFIG = os.path.join(MODEL, "bert_config.json")
TRAIN_FILE = os.path.join(ROOT, "kerasbert", "resources", "reviews", "train.tsv")
BATCH, MAXLEN, LEARNING_RATE = 16, 128, 1e-4
DEFAULTS = {"samples": 160, "warmup_batches": 4, "epochs": 8}

# name -> (what it is, runs under tf_keras); kerasbert variants first.
IMPLEMENTATIONS = {
    "kerasbert": ("kerasbert, fit, padded to 128", False),
    "kerasbert-padding": ("kerasbert, fit, padded to 128, products of padding computed", False),
    "kerasbert-arrays": ("kerasbert, fit on arrays (one endless pipeline)", False),
    "kerasbert-arrays-keras": ("the same under Keras's own fit (a new iterator per epoch)",
                               False),
    "kerasbert-forfit": ("kerasbert's drop-in: a DataGenerator's forfit(), batches padded "
                         "to their longest row", False),
    "kerasbert-bucketed": ("kerasbert, fit, length-grouped batches", False),
    "kerasbert-bucketed-padding": ("the same, products of padding computed", False),
    "kerasbert-xla": ("kerasbert, fit, jit_compile=True", False),
    "kerasbert-bf16": ("kerasbert, fit, mixed_bfloat16", False),
    "kerasbert-bf16-padding": ("kerasbert, fit, mixed_bfloat16, products of padding computed",
                               False),
    "kerasbert-bucketed-bf16": ("kerasbert, fit, length-grouped batches, mixed_bfloat16", False),
    "kerasbert-keras-kernels": ("kerasbert with Keras's dropout, GELU derivative, Adam update",
                                False),
    "kerasbert-keras-kernels-bf16": ("the same, mixed_bfloat16", False),
    "bert4keras": ("bert4keras", True),
    "bert4keras-forfit": ("bert4keras, its DataGenerator's forfit()", True),
    "keras-hub": ("keras-hub", False),
    "hf-torch": ("Hugging Face torch", False),
    "hf-torch-bf16": ("Hugging Face torch, bf16 autocast", False),
}


def prepare(path, samples, warmup_batches, seed=0):
    """Worker: tokenizes the texts once, for all implementations, into ``path`` (.npz).

    The timed examples are ``samples`` reviews drawn with ``seed``; the warm-up
    batches are others. Token ids are padded to ``MAXLEN``.
    """
    from kerasbert.text.tokenizer import Tokenizer
    from kerasbert.training import data

    rows = data.read_examples(TRAIN_FILE)
    order = np.random.default_rng(seed).permutation(len(rows))[:samples + warmup_batches * BATCH]
    tokenizer = Tokenizer(os.path.join(MODEL, "vocab.txt"))
    tokens, segments = tokenizer.encode_batch([rows.texts[i] for i in order], maxlen=MAXLEN)
    pad = MAXLEN - tokens.shape[1]
    tokens, segments = (np.pad(a, ((0, 0), (0, pad))).astype("int32") for a in (tokens, segments))
    labels = data.label_ids(rows, sorted(set(rows.labels)))[order]
    np.savez(path, tokens=tokens, segments=segments, labels=labels, samples=samples)
    lengths = np.count_nonzero(tokens[:samples], axis=1)
    return {"path": path, "mean_tokens": round(float(lengths.mean()), 1),
            "median_tokens": int(np.median(lengths)), "truncated": int((lengths == MAXLEN).sum())}


def _load(path):
    arrays = np.load(path)
    samples = int(arrays["samples"])
    timed = tuple(arrays[k][:samples] for k in ("tokens", "segments", "labels"))
    warmup = tuple(arrays[k][samples:] for k in ("tokens", "segments", "labels"))
    return timed, warmup


class _EpochTimer:
    """Seconds and busy cores of each pass: ``begin()`` and ``end()`` around it, or
    ``callback`` in a Keras ``fit`` (Keras 3 or tf-keras, whichever ``keras`` is)."""

    def __init__(self, keras=None):
        timer = self
        self.seconds, self.cores = [], []
        if keras is not None:
            class Callback(keras.callbacks.Callback):
                def on_epoch_begin(self, epoch, logs=None):
                    timer.begin()

                def on_epoch_end(self, epoch, logs=None):
                    timer.end()

            self.callback = Callback()

    def begin(self):
        self._wall, self._cpu = time.perf_counter(), _cpu_seconds()

    def end(self):
        wall = time.perf_counter() - self._wall
        self.seconds.append(wall)
        self.cores.append((_cpu_seconds() - self._cpu) / wall)


def _cpu_seconds():
    times = os.times()
    return times.user + times.system


def _fit_timed(keras, model, timed, warmup, epochs, make_dataset=None, inputs=None,
               arrays=False, keras_fit=False, snippets=None):
    """Warm-up batches first, then ``epochs`` timed passes; returns the timer.

    Args:
        timed, warmup: ``(tokens, segments, labels)`` arrays.
        make_dataset: arrays -> an endless ``tf.data`` pipeline of batches; default: the
            arrays' padded rows in order, batch after batch, repeated.
        inputs: ``(tokens, segments) -> what the model takes``; default ``[tokens, segments]``.
        arrays: give ``fit`` the arrays themselves.
        keras_fit: with ``arrays``, call Keras's own ``Model.fit`` (an iterator per epoch)
            rather than the model's.
        snippets: a ``snippets`` module (bert4keras's or kerasbert's): feed ``fit`` its
            ``DataGenerator``'s ``forfit()``, batches padded to their longest row.
    """
    inputs = inputs or (lambda tokens, segments: [tokens, segments])
    timer = _EpochTimer(keras)
    if arrays:
        fit = (lambda *a, **k: keras.Model.fit(model, *a, **k)) if keras_fit else model.fit
        fit(inputs(*warmup[:2]), warmup[2], batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        fit(inputs(*timed[:2]), timed[2], batch_size=BATCH, epochs=epochs, shuffle=False,
            verbose=0, callbacks=[timer.callback])
        return timer
    if snippets is not None:
        for arrays_, epochs_, callbacks in ((warmup, 1, []), (timed, epochs, [timer.callback])):
            generator = _data_generator(snippets, arrays_)
            model.fit(generator.forfit(), steps_per_epoch=len(generator), epochs=epochs_,
                      verbose=0, callbacks=callbacks)
        return timer
    if make_dataset is None:
        import tensorflow as tf

        def make_dataset(arrays):
            features = inputs(*arrays[:2])
            features = tuple(features) if isinstance(features, list) else features
            return tf.data.Dataset.from_tensor_slices((features, arrays[2])).batch(
                BATCH).repeat().prefetch(tf.data.AUTOTUNE)

    model.fit(make_dataset(warmup), epochs=1, steps_per_epoch=len(warmup[2]) // BATCH,
              verbose=0)
    model.fit(make_dataset(timed), epochs=epochs, steps_per_epoch=-(-len(timed[2]) // BATCH),
              verbose=0, callbacks=[timer.callback])
    return timer


def _data_generator(snippets, arrays):
    """A bert4keras-style ``DataGenerator`` of ``snippets`` over the rows of ``arrays``, in
    order, each batch cut to its longest row with ``sequence_padding``."""
    tokens, segments, labels = arrays
    rows = [(t[:n], s[:n], y) for t, s, y, n in
            zip(tokens, segments, labels, np.count_nonzero(tokens, axis=1))]

    class Generator(snippets.DataGenerator):
        def __iter__(self, random=False):
            batch_tokens, batch_segments, batch_labels = [], [], []
            for is_end, (token_ids, segment_ids, label) in self.sample(random):
                batch_tokens.append(token_ids)
                batch_segments.append(segment_ids)
                batch_labels.append([label])
                if len(batch_tokens) == self.batch_size or is_end:
                    yield ([snippets.sequence_padding(batch_tokens),
                            snippets.sequence_padding(batch_segments)],
                           snippets.sequence_padding(batch_labels))
                    batch_tokens, batch_segments, batch_labels = [], [], []

    return Generator(rows, BATCH)


def _first_token_classifier(keras, bert):
    """bert4keras's classification example's head: first token, dropout, Dense(2)."""
    first = keras.layers.Lambda(lambda x: x[:, 0])(bert.output)
    first = keras.layers.Dropout(0.1)(first)
    output = keras.layers.Dense(2, activation="softmax")(first)
    return keras.models.Model(bert.inputs, output)


def _result(label, timer, samples, extra=None):
    median = float(np.median(timer.seconds))
    return {"label": label, "epoch_seconds": [round(x, 3) for x in timer.seconds],
            "epoch_cores": [round(x, 2) for x in timer.cores],
            "samples_per_s": round(samples / median, 1),
            "best_samples_per_s": round(samples / min(timer.seconds), 1), **(extra or {})}


def _use_keras_kernels():
    """Makes kerasbert train with Keras's own dropout, GELU derivative and Adam update."""
    import keras

    from kerasbert.models import kernels, layers
    from kerasbert.training import optimizer

    layers.training_activation = lambda activation: activation
    kernels.Dropout.call = keras.layers.Dropout.call
    optimizer.AdamW.update_step = keras.optimizers.AdamW.update_step


def _computing_padding():
    """Makes kerasbert's layers compute the products of padding in training, as before."""
    from kerasbert.models import layers

    layers.token_rows = lambda mask: None


def kerasbert(path, epochs, bucketed=False, jit_compile=False, dtype_policy=None, arrays=False,
              keras_kernels=False, padding=False, keras_fit=False, **_):
    """kerasbert's classifier under Keras ``fit``, as ``kerasbert train`` builds it."""
    import keras

    import kerasbert as package
    from kerasbert import add_cls_classifier, build_transformer_model
    from kerasbert.tasks.base import step_compilation
    from kerasbert.training import batches
    from kerasbert.training.optimizer import make_optimizer

    if keras_kernels:
        _use_keras_kernels()
    if padding:
        _computing_padding()

    keras.utils.set_random_seed(0)
    timed, warmup = _load(path)
    model = add_cls_classifier(build_transformer_model(CONFIG, dtype=dtype_policy), 2)
    steps = (len(timed[2]) // BATCH) * epochs + len(warmup[2]) // BATCH
    model.compile(optimizer=make_optimizer(model, LEARNING_RATE, steps),
                  loss="sparse_categorical_crossentropy",
                  jit_compile=step_compilation(jit_compile))  # as kerasbert train compiles
    make_dataset = None
    if bucketed:  # the batches of `kerasbert train`: length-grouped, cut to the longest row
        def make_dataset(arrays):
            return batches.make_dataset(*arrays, batch_size=BATCH, seed=0)
    timer = _fit_timed(keras, model, timed, warmup, epochs, make_dataset, arrays=arrays,
                       keras_fit=keras_fit)
    return _result(f"kerasbert {package.__version__}, keras {keras.__version__}", timer,
                   len(timed[2]))


def kerasbert_forfit(path, epochs, **_):
    """bert4keras's classification example on kerasbert's drop-in modules: its
    ``build_transformer_model``, a first-token head, Adam, a ``DataGenerator``'s
    ``forfit()``."""
    import kerasbert as package
    from kerasbert import snippets
    from kerasbert.backend import keras
    from kerasbert.models import build_transformer_model
    from kerasbert.optimizers import Adam

    keras.utils.set_random_seed(0)
    timed, warmup = _load(path)
    model = _first_token_classifier(keras, build_transformer_model(CONFIG))
    model.compile(optimizer=Adam(LEARNING_RATE), loss="sparse_categorical_crossentropy")
    timer = _fit_timed(keras, model, timed, warmup, epochs, snippets=snippets)
    return _result(f"kerasbert {package.__version__}, keras {keras.__version__}", timer,
                   len(timed[2]))


def bert4keras(path, epochs, forfit=False, **_):
    """bert4keras 0.11.5 on tf-keras: encoder, first token, Dense(2), Adam, ``fit`` on the
    arrays, or with ``forfit`` on its ``DataGenerator``'s ``forfit()``."""
    if os.environ.get("TF_KERAS") != "1":
        raise Skipped("bert4keras must run with TF_KERAS=1 TF_USE_LEGACY_KERAS=1")
    import tensorflow as tf

    if forfit:  # its optimizers subclass Keras 2's OptimizerV2: tf.keras's legacy one today
        tf.keras.optimizers.Optimizer = tf.keras.optimizers.legacy.Optimizer
    try:
        import bert4keras as package
        from bert4keras import snippets
        from bert4keras.backend import keras
        from bert4keras.models import build_transformer_model
        from bert4keras.optimizers import Adam
    except ImportError as error:
        raise Skipped(f"bert4keras is not installed ({error})") from None

    tf.random.set_seed(0)
    timed, warmup = _load(path)
    model = _first_token_classifier(keras, build_transformer_model(CONFIG))
    if forfit:  # as its examples do
        model.compile(optimizer=Adam(LEARNING_RATE), loss="sparse_categorical_crossentropy")
        timer = _fit_timed(keras, model, timed, warmup, epochs, snippets=snippets)
    else:
        model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE),
                      loss="sparse_categorical_crossentropy")
        timer = _fit_timed(keras, model, timed, warmup, epochs, arrays=True)
    label = f"bert4keras {package.__version__} (tf_keras, tensorflow {tf.__version__})"
    return _result(label, timer, len(timed[2]))


def keras_hub(path, epochs, jit_compile="auto", **_):
    """keras-hub's ``BertTextClassifier`` (no preprocessor) under Keras ``fit``."""
    try:
        import keras_hub as hub
    except ImportError as error:
        raise Skipped(f"keras_hub is not installed ({error})") from None
    import json

    import keras

    keras.utils.set_random_seed(0)
    with open(CONFIG, encoding="utf-8") as f:
        config = json.load(f)
    backbone = hub.models.BertBackbone(
        vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        max_sequence_length=config["max_position_embeddings"],
        num_segments=config["type_vocab_size"], dropout=0.1)
    classifier = hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)
    classifier.compile(optimizer=keras.optimizers.AdamW(LEARNING_RATE),
                       loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                       jit_compile=jit_compile)
    timed, warmup = _load(path)

    def inputs(tokens, segments):  # keras-hub takes a dict with an explicit padding mask
        return {"token_ids": tokens, "segment_ids": segments, "padding_mask": tokens != 0}

    timer = _fit_timed(keras, classifier, timed, warmup, epochs, inputs=inputs)
    return _result(f"keras-hub {hub.__version__}, jit_compile={jit_compile}", timer,
                   len(timed[2]))


def hf_torch(path, epochs, autocast=False, **_):
    """Hugging Face ``BertForSequenceClassification`` on CPU torch, AdamW, a plain loop;
    ``autocast``: the forward pass and loss under ``torch.autocast`` in bfloat16 (float32
    weights and optimizer, as torch's mixed precision does)."""
    try:
        import torch
        import transformers
    except ImportError as error:
        raise Skipped(f"torch/transformers are not installed ({error})") from None
    import json

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count())
    with open(CONFIG, encoding="utf-8") as f:
        config = transformers.BertConfig(**json.load(f), num_labels=2)
    model = transformers.BertForSequenceClassification(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    timed, warmup = _load(path)

    def one_pass(arrays):
        tokens, segments, labels = (torch.from_numpy(a).long() for a in arrays)
        for start in range(0, len(labels), BATCH):
            batch = slice(start, start + BATCH)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = model(input_ids=tokens[batch], token_type_ids=segments[batch],
                             attention_mask=(tokens[batch] != 0).long(),
                             labels=labels[batch]).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    one_pass(warmup)
    timer = _EpochTimer()
    for _ in range(epochs):
        timer.begin()
        one_pass(timed)
        timer.end()
    mode = ", bf16 autocast" if autocast else ""
    return _result(f"transformers {transformers.__version__}, torch {torch.__version__}{mode}",
                   timer, len(timed[2]))


WORKERS = {
    "prepare": prepare,
    "kerasbert": kerasbert,
    "kerasbert-padding": lambda **o: kerasbert(**o, padding=True),
    "kerasbert-arrays": lambda **o: kerasbert(**o, arrays=True),
    "kerasbert-arrays-keras": lambda **o: kerasbert(**o, arrays=True, keras_fit=True),
    "kerasbert-forfit": kerasbert_forfit,
    "kerasbert-bucketed": lambda **o: kerasbert(**o, bucketed=True),
    "kerasbert-bucketed-padding": lambda **o: kerasbert(**o, bucketed=True, padding=True),
    "kerasbert-xla": lambda **o: kerasbert(**o, jit_compile=True),
    "kerasbert-bf16": lambda **o: kerasbert(**o, dtype_policy="mixed_bfloat16"),
    "kerasbert-bf16-padding": lambda **o: kerasbert(**o, dtype_policy="mixed_bfloat16",
                                                    padding=True),
    "kerasbert-bucketed-bf16": lambda **o: kerasbert(**o, bucketed=True,
                                                     dtype_policy="mixed_bfloat16"),
    "kerasbert-keras-kernels": lambda **o: kerasbert(**o, keras_kernels=True),
    "kerasbert-keras-kernels-bf16": lambda **o: kerasbert(**o, keras_kernels=True,
                                                          dtype_policy="mixed_bfloat16"),
    "bert4keras": bert4keras,
    "bert4keras-forfit": lambda **o: bert4keras(**o, forfit=True),
    "keras-hub": keras_hub,
    "hf-torch": hf_torch,
    "hf-torch-bf16": lambda **o: hf_torch(**o, autocast=True),
}


def run(options, log):
    """Times every implementation, each in its own process; returns the section.

    ``options``: ``only`` (implementations, of :data:`IMPLEMENTATIONS`), ``max_wait`` and
    ``rounds`` (default 1): how many times each implementation runs, taking turns, so that a
    burst of load from elsewhere falls on all of them; each keeps its fastest round. The
    data and passes are :data:`DEFAULTS`, the same for every implementation.
    """
    names = selected(options, IMPLEMENTATIONS)
    rounds = options.rounds or 1
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-train-") as folder:
        log("train: tokenizing the review texts")
        prepared = require(run_worker("train", "prepare", {
            "path": os.path.join(folder, "batches.npz"), "samples": DEFAULTS["samples"],
            "warmup_batches": DEFAULTS["warmup_batches"]}, options, log), "preparing the data")
        for round_ in range(rounds):
            for name in names:
                log(f"train: {name}" + (f" (round {round_ + 1} of {rounds})" if rounds > 1 else ""))
                results[name] = _faster(results.get(name), run_worker(
                    "train", name, {"path": prepared["path"], "epochs": DEFAULTS["epochs"]},
                    options, log, tf_keras=IMPLEMENTATIONS[name][1]))
    return {"results": results, "data": prepared, "rounds": rounds,
            "tables": [_table(results, prepared, rounds)]}


def _faster(kept, new):
    """The round with more samples/s (a round without figures never wins)."""
    if kept is None or why_missing(kept):
        return new
    if why_missing(new) or new["samples_per_s"] <= kept["samples_per_s"]:
        return kept
    return new


FP32_PEERS = ("bert4keras", "keras-hub", "hf-torch")


def _table(results, prepared, rounds=1):
    def speed(name):
        result = results.get(name, {})
        return None if why_missing(result) else result.get("samples_per_s")

    base = speed("kerasbert")
    fastest = max((speed(name) for name in FP32_PEERS if speed(name)), default=None)
    rows = []
    for name, result in results.items():
        if why_missing(result):
            rows.append({"name": name, "label": why_missing(result)})
            continue
        seconds = result["epoch_seconds"]
        rows.append({"name": name, "label": result["label"], "samples_per_s": speed(name),
                     "passes": f"{min(seconds):.2f}–{max(seconds):.2f}",
                     "cores": f"{min(result['epoch_cores']):.2f}–{max(result['epoch_cores']):.2f}",
                     "vs_kerasbert": round(speed(name) / base, 2) if base else None,
                     "vs_fastest": round(speed(name) / fastest, 2) if fastest else None})
    title = (f"Training, L4 H256 A4 I1024, batch {BATCH} x {MAXLEN}, {DEFAULTS['samples']} review "
             f"texts (mean {prepared['mean_tokens']} tokens), median of {DEFAULTS['epochs']} "
             "passes" + (f", the faster of {rounds} rounds" if rounds > 1 else ""))
    columns = [("name", "implementation"), ("samples_per_s", "samples/s"),
               ("passes", "pass s (min–max)"), ("cores", "busy cores (min–max)"),
               ("vs_kerasbert", "÷ kerasbert"), ("vs_fastest", "÷ fastest fp32 peer"),
               ("label", "version / mode")]
    return {"title": title, "columns": columns, "rows": rows}


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("train")
