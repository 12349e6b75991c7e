"""Parameter-efficient fine-tuning: full fine-tuning against LoRA, kerasbert beside peft.

Chinese BERT-base shapes (random weights: the figures do not depend on the values), a
two-label classifier on the first token, the adapters of rank 8 on the queries and values
(LoRA's paper, peft's default for BERT), batches of 8 x 128 and 2 x 512 tokens without
padding. Each implementation trains in its own process:

* ``kerasbert-full``: :func:`kerasbert.add_cls_classifier`, every weight trained with
  :func:`kerasbert.training.optimizer.make_optimizer` (AdamW), Keras ``train_on_batch``;
* ``kerasbert-lora``: the same after :func:`kerasbert.enable_lora` (rank 8, query and
  value): the base frozen, the adapters and the classifier trained;
* ``kerasbert-int8-lora``: the encoder quantized to int8 by :func:`kerasbert.quantize`
  first, then the classifier and the adapters (QLoRA's recipe with Keras's int8);
* ``hf-torch-full``: ``BertForSequenceClassification`` on CPU torch, ``torch.optim.AdamW``;
* ``hf-peft-lora``: the same model under peft's ``LoraConfig(r=8, target_modules=["query",
  "value"], modules_to_save=["classifier"])``, its first-token head made the same way.

For each: the trainable parameters, the median step of ``repeats`` timed updates after
``warmup`` untimed ones, the process's peak resident memory (which holds the weights, the
optimizer's slots and the activations) and the size of what the run has to keep: the whole
model's weights for full fine-tuning, the adapters and the head for LoRA (kerasbert's
``adapters.lora.h5``, peft's ``adapter_model.safetensors``).
"""

import os
import resource
import tempfile

import numpy as np

from bench import peers
from bench.runner import run_worker, selected, timed, why_missing

SHAPES = ((8, 128), (2, 512))
RANK, TARGETS, LABELS = 8, ("query", "value"), 2

IMPLEMENTATIONS = {
    "kerasbert-full": "kerasbert, every weight trained",
    "kerasbert-lora": f"kerasbert, LoRA r={RANK} on query and value, the head in full",
    "kerasbert-int8-lora": f"kerasbert, int8 encoder (Keras) + LoRA r={RANK}",
    "hf-torch-full": "Hugging Face torch, every weight trained",
    "hf-peft-lora": f"Hugging Face torch + peft LoRA r={RANK} on query and value",
}


def _batch(batch, length, vocab_size, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, vocab_size, (batch, length)).astype("int32")
    return tokens, np.zeros_like(tokens), (np.arange(batch) % LABELS).astype("int32")


def _peak_mb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def kerasbert_worker(shape, mode, warmup, repeats):
    """One kerasbert classifier of ``mode`` (full, lora, int8-lora) trained at ``shape``."""
    import keras

    import kerasbert
    from kerasbert.models.lora import save_adapters
    from kerasbert.training.optimizer import make_optimizer

    config = peers.read_config()
    batch, length = shape
    keras.utils.set_random_seed(0)
    bert = kerasbert.build_transformer_model(config)
    if mode == "int8-lora":
        kerasbert.quantize(bert, "int8")
    model = kerasbert.add_cls_classifier(bert, num_labels=LABELS)
    if mode != "full":
        kerasbert.enable_lora(model, RANK, TARGETS)
    model.compile(optimizer=make_optimizer(model, 1e-4, 1000, 0.1, 0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=False))
    tokens, segments, labels = _batch(batch, length, config["vocab_size"])
    step_ms = timed(lambda: model.train_on_batch([tokens, segments], labels), warmup,
                    repeats)["median_ms"]
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    with tempfile.TemporaryDirectory() as folder:
        if mode == "full":  # the weights alone (save_weights adds the optimizer's slots)
            path = os.path.join(folder, "model.weights.h5")
            keras.Model(model.inputs, model.outputs).save_weights(path)
        else:
            path = os.path.join(folder, "adapters.lora.h5")
            save_adapters(model, path)
        kept = os.path.getsize(path)
    return {"label": IMPLEMENTATIONS[f"kerasbert-{mode}"], "step_ms": step_ms,
            "trainable": trainable, "parameters": model.count_params(),
            "peak_mb": _peak_mb(), "kept_mb": round(kept / 2**20, 2),
            "keras": keras.__version__}


def hf_worker(shape, mode, warmup, repeats):
    """``BertForSequenceClassification`` trained in full or with peft's LoRA at ``shape``."""
    torch = peers._require("torch")
    transformers = peers._require("transformers")
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    config = transformers.BertConfig(**peers.read_config(), num_labels=LABELS)
    model = transformers.BertForSequenceClassification(config)
    label = IMPLEMENTATIONS[f"hf-{mode}"]
    if mode == "peft-lora":
        peft = peers._require("peft")
        model = peft.get_peft_model(model, peft.LoraConfig(
            r=RANK, lora_alpha=RANK, target_modules=list(TARGETS), lora_dropout=0.0,
            modules_to_save=["classifier"]))
        label += f" (peft {peft.__version__})"
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    tokens, segments, labels = (torch.from_numpy(a).long() for a in
                                _batch(*shape, config.vocab_size))

    def step():
        optimizer.zero_grad()
        loss = model(input_ids=tokens, token_type_ids=segments, labels=labels).loss
        loss.backward()
        optimizer.step()

    step_ms = timed(step, warmup, repeats)["median_ms"]
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        kept = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)
                   if name.endswith((".safetensors", ".bin")))
    return {"label": f"{label}, transformers {transformers.__version__}, torch "
                     f"{torch.__version__}", "step_ms": step_ms, "trainable": trainable,
            "parameters": sum(p.numel() for p in model.parameters()),
            "peak_mb": _peak_mb(), "kept_mb": round(kept / 2**20, 2)}


def _worker(name):
    if name.startswith("hf-"):
        mode = name.removeprefix("hf-")
        return lambda shape, warmup, repeats: hf_worker(tuple(shape), mode, warmup, repeats)
    mode = name.removeprefix("kerasbert-")
    return lambda shape, warmup, repeats: kerasbert_worker(tuple(shape), mode, warmup, repeats)


WORKERS = {name: _worker(name) for name in IMPLEMENTATIONS}


def run(options, log):
    """Trains each implementation at each shape, each in its own process; the section."""
    names = selected(options, IMPLEMENTATIONS)
    warmup, repeats = max(2, options.warmup), max(3, options.repeats // 2)
    results = {}
    for batch, length in SHAPES:
        key = f"{batch}x{length}"
        for name in names:
            log(f"lora: {name} at {key}")
            results.setdefault(name, {})[key] = run_worker(
                "lora", name, {"shape": [batch, length], "warmup": warmup,
                               "repeats": repeats}, options, log, timeout=1800)
    return {"results": results, "tables": [_table(results, key) for key in
                                           (f"{b}x{n}" for b, n in SHAPES)]}


def _table(results, key):
    rows = []
    full = {family: results.get(f"{family}-full", {}).get(key, {}).get("step_ms")
            for family in ("kerasbert", "hf-torch")}
    peft = results.get("hf-peft-lora", {}).get(key, {}).get("step_ms")
    for name, by_shape in results.items():
        result = by_shape[key]
        missing = why_missing(result)
        if missing:
            rows.append({"name": name, "label": missing})
            continue
        rows.append({
            "name": name, "label": result["label"], "trainable": result["trainable"],
            "trainable_pct": round(100 * result["trainable"] / result["parameters"], 2),
            "step_ms": result["step_ms"],
            "vs_full": _ratio(full["hf-torch" if name.startswith("hf") else "kerasbert"],
                              result["step_ms"]),
            "vs_peft": _ratio(peft, result["step_ms"]),
            "peak_mb": result["peak_mb"], "kept_mb": result["kept_mb"]})
    return {"title": f"Fine-tuning Chinese BERT-base shapes at {key}: full against LoRA",
            "columns": [("label", "implementation"), ("trainable", "trainable"),
                        ("trainable_pct", "% trained"), ("step_ms", "step ms"),
                        ("vs_full", "vs its full fine-tuning"), ("vs_peft", "vs peft"),
                        ("peak_mb", "peak MB"), ("kept_mb", "kept MB")], "rows": rows}


def _ratio(reference, value):
    """How many times faster ``value`` is than ``reference`` (None without both)."""
    return round(reference / value, 2) if reference and value else None


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("lora")
