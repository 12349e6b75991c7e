"""Long texts: the memory and speed of fine-tuning at 512 to 4,096 tokens, and what fits.

A classifier ([CLS] -> Dense(2), Adam at 1e-4, dropout 0.1) is fine-tuned on random token
ids: one warm-up step (tracing), then ``STEPS`` timed steps. Two shapes: ``small`` (the
embedded ``kerasbert-zh-small``, L4 H256 A4 I1024) and ``base`` (Chinese BERT-base's shapes,
L12 H768 A12 I3072, vocabulary 21,128, random weights). Five ways of training:

* ``kerasbert``: :func:`kerasbert.build_transformer_model` + :func:`kerasbert.add_cls_classifier`,
  ``train_on_batch``; past 512 tokens with ``hierarchical_position=True`` (the 512 positions
  of the checkpoint, stretched);
* ``kerasbert-recompute``: the same with ``recompute=True`` (bert4keras's ``RECOMPUTE=1``);
* ``hf-torch``: ``transformers.BertForSequenceClassification`` on CPU torch with
  ``max_position_embeddings`` set to the length (it has no hierarchical positions: its
  table past 512 is new weights, not the checkpoint's);
* ``hf-torch-checkpointing``: the same after ``model.gradient_checkpointing_enable()``;
* ``hf-torch-checkpointing-eager``: the same with ``attn_implementation="eager"``. By default
  transformers runs attention through torch's ``scaled_dot_product_attention``; eager
  attention holds the length x length scores as kerasbert's does, so this way tells what
  that kernel saves from the rest of the memory.

Every cell (shape, way, length, batch) runs in a fresh process, so its peak resident memory
(``ru_maxrss``) is its own. A watchdog thread in the cell stops it once its resident memory
passes ``CAP_GB`` ("does not fit") or its time passes ``CELL_SECONDS`` ("too slow"), with the
peak so far. A cell is not run once a cell no longer and no larger (a smaller batch at its
length, a shorter length at its batch...) did not fit or was too slow. The two ways that save
memory run first, over both shapes, then the plain ways. Each cell's result is logged as one
JSON line as it ends (``long: cell {...}``), so an interrupted run still leaves its figures.

``--shapes`` and ``--batches`` run part of the grid. ``--quick`` runs a tiny model (L2 H32)
at 64 and 128 tokens, batch 1, in about a minute: the protocol, not figures.
"""

import json
import os
import resource
import sys
import threading
import time

from bench.runner import Skipped, load_average, machine, run_worker
from bench.worker import ROOT, WorkerError  # noqa: F401 (WorkerError: see _cell_result)

SMALL_CONFIG = os.path.join(ROOT, "kerasbert", "resources", "kerasbert-zh-small",
                            "bert_config.json")
BASE_CONFIG = {"vocab_size": 21128, "hidden_size": 768, "num_hidden_layers": 12,
               "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
               "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
               "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
               "layer_norm_eps": 1e-12}
TINY_CONFIG = {**BASE_CONFIG, "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
               "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
LENGTHS, BATCHES = (512, 1024, 2048, 4096), (1, 2, 4, 8)
QUICK_LENGTHS, QUICK_BATCHES = (64, 128), (1,)
STEPS, LEARNING_RATE = 2, 1e-4
CAP_GB, CELL_SECONDS = 20.0, 240.0
QUICK_CELL_SECONDS = 120.0
MIN_AVAILABLE_MB = 768.0  # below this much free memory on the machine, a cell stops

# name -> what it is; the ways run in this order, those that save memory first.
WAYS = {
    "kerasbert-recompute": "kerasbert, recompute=True",
    "hf-torch-checkpointing": "Hugging Face torch, gradient_checkpointing_enable()",
    "kerasbert": "kerasbert",
    "hf-torch": "Hugging Face torch",
    "hf-torch-checkpointing-eager": "Hugging Face torch, gradient_checkpointing_enable(), "
                                    "eager attention",
}
SAVING = ("kerasbert-recompute", "hf-torch-checkpointing")
STOPPED = ("does_not_fit", "too_slow")


def _config(shape):
    """The Google-style config dict of ``shape`` (small, base or tiny)."""
    if shape == "small":
        with open(SMALL_CONFIG, encoding="utf-8") as f:
            return json.load(f)
    return dict({"base": BASE_CONFIG, "tiny": TINY_CONFIG}[shape])


def _rss_mb():
    """This process's resident memory now, in MiB (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _available_mb():
    """The machine's available memory now (MemAvailable), in MiB; None where /proc is missing."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _peak_mb():
    """This process's peak resident memory so far, in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Watchdog:
    """Stops the cell from a thread: past ``cap_mb`` resident or ``seconds`` of wall time it
    prints the cell's JSON line (``does_not_fit`` / ``too_slow``, with the peak so far) and
    ends the process at once, since the main thread may be inside one long kernel.

    The machine's other processes share its memory: when less than ``MIN_AVAILABLE_MB`` is
    left the cell stops too (``does_not_fit``, saying so) rather than wake the kernel's
    out-of-memory killer, which might pick another process.
    """

    def __init__(self, cap_mb, seconds, figures):
        self.cap_mb, self.seconds, self.figures = cap_mb, seconds, figures
        self.start = time.monotonic()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        while True:
            rss, elapsed = _rss_mb(), time.monotonic() - self.start
            if rss > self.cap_mb:
                self._stop("does_not_fit", f"resident memory passed {self.cap_mb / 1024:.0f} GiB")
            available = _available_mb()
            if available is not None and available < MIN_AVAILABLE_MB:
                self._stop("does_not_fit", f"the machine ran out of memory at {rss / 1024:.1f} "
                                           "GiB resident")
            if elapsed > self.seconds:
                self._stop("too_slow", f"not done after {self.seconds:.0f} s")
            time.sleep(0.02)

    def _stop(self, key, reason):
        line = {**self.figures, key: reason, "peak_mb": round(_peak_mb(), 1),
                "seconds": round(time.monotonic() - self.start, 1)}
        sys.stdout.write("\n" + json.dumps(line) + "\n")
        sys.stdout.flush()
        os._exit(0)


def _batch(config, length, batch, seed=0):
    """Random token ids (no padding, [CLS] id 101 first where the vocabulary has it),
    segment ids all 0, and labels of 0 and 1."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = config["vocab_size"]
    tokens = rng.integers(1, vocab, size=(batch, length)).astype("int32")
    tokens[:, 0] = min(101, vocab - 1)
    return tokens, np.zeros_like(tokens), (np.arange(batch) % 2).astype("int32")


#: Why a cell has no ``tf_allocator_peak_mb`` (its peak resident memory is still measured).
NO_ALLOCATOR_STATISTICS = ("TensorFlow keeps no allocator statistics on this CPU: its oneDNN "
                           "path is off (TensorFlow's default on CPUs without AVX-512 VNNI/BF16 "
                           "or AMX; TF_ENABLE_ONEDNN_OPTS=1 turns it on)")


def _tf_allocator_peak():
    """``{"tf_allocator_peak_mb": MiB}``: TensorFlow's CPU allocator peak, or where TensorFlow
    does not track it ``{"tf_allocator_peak_mb": None, "tf_allocator_missing": why}``."""
    import tensorflow as tf

    try:
        peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
    except ValueError:  # the allocator keeps no statistics
        return {"tf_allocator_peak_mb": None, "tf_allocator_missing": NO_ALLOCATOR_STATISTICS}
    return {"tf_allocator_peak_mb": round(peak / 2**20, 1)}


def _timed_steps(step):
    """One warm-up ``step()``, then ``STEPS`` timed; returns (warm-up s, per-step seconds)."""
    start = time.perf_counter()
    step()
    warmup = time.perf_counter() - start
    seconds = []
    for _ in range(STEPS):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return warmup, seconds


def _figures(label, batch, warmup, seconds, losses):
    seconds = sorted(seconds)
    median = seconds[len(seconds) // 2]
    return {"label": label, "warmup_s": round(warmup, 2),
            "step_seconds": [round(x, 3) for x in seconds],
            "samples_per_s": round(batch / median, 3), "losses": losses,
            "peak_mb": round(_peak_mb(), 1)}


def kerasbert_cell(shape, length, batch, recompute=False, cap_gb=CAP_GB,
                   seconds=CELL_SECONDS):
    """Worker: one kerasbert cell; hierarchical positions past the config's positions."""
    watchdog = _Watchdog(cap_gb * 1024, seconds, {"label": "kerasbert"})
    import keras

    import kerasbert as package
    from kerasbert import add_cls_classifier, build_transformer_model

    keras.utils.set_random_seed(0)
    config = _config(shape)
    past = length > config["max_position_embeddings"]
    encoder = build_transformer_model(config, hierarchical_position=past or None,
                                      recompute=recompute)
    model = add_cls_classifier(encoder, 2)
    model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE),
                  loss="sparse_categorical_crossentropy")
    tokens, segments, labels = _batch(config, length, batch)
    losses = []

    def step():
        loss = model.train_on_batch([tokens, segments], labels)
        losses.append(round(float(loss[0] if isinstance(loss, list) else loss), 4))

    warmup, times = _timed_steps(step)
    label = (f"kerasbert {package.__version__}, keras {keras.__version__}"
             + (", hierarchical positions" if past else ""))
    watchdog.figures["label"] = label
    return {**_figures(label, batch, warmup, times, losses), **_tf_allocator_peak()}


def hf_cell(shape, length, batch, checkpointing=False, attention=None, cap_gb=CAP_GB,
            seconds=CELL_SECONDS):
    """Worker: one Hugging Face torch cell, ``max_position_embeddings`` set to the length;
    ``attention``: transformers' ``attn_implementation`` (None: its default)."""
    watchdog = _Watchdog(cap_gb * 1024, seconds, {"label": "hf-torch"})
    try:
        import torch
        import transformers
    except ImportError as error:
        raise Skipped(f"torch/transformers are not installed ({error})") from None

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count())
    config = _config(shape)
    positions = max(config["max_position_embeddings"], length)
    model = transformers.BertForSequenceClassification(transformers.BertConfig(
        **{**config, "max_position_embeddings": positions}, num_labels=2,
        attn_implementation=attention)).train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    tokens, segments, labels = (torch.from_numpy(a).long()
                                for a in _batch(config, length, batch))
    losses = []

    def step():
        loss = model(input_ids=tokens, token_type_ids=segments, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(round(float(loss), 4))

    warmup, times = _timed_steps(step)
    label = (f"transformers {transformers.__version__}, torch {torch.__version__}"
             + f", {model.config._attn_implementation} attention"
             + (f", {positions} position embeddings" if positions > 512 else ""))
    watchdog.figures["label"] = label
    return _figures(label, batch, warmup, times, losses)


WORKERS = {
    "kerasbert": kerasbert_cell,
    "kerasbert-recompute": lambda **o: kerasbert_cell(**o, recompute=True),
    "hf-torch": hf_cell,
    "hf-torch-checkpointing": lambda **o: hf_cell(**o, checkpointing=True),
    "hf-torch-checkpointing-eager": lambda **o: hf_cell(**o, checkpointing=True,
                                                        attention="eager"),
}


def _cell_result(way, kwargs, options, log):
    """Runs one cell's worker; a process the system killed (out of memory) does not fit."""
    result = run_worker("long", way, kwargs, options, log,
                        timeout=kwargs["seconds"] + 120)
    failed = result.get("failed", "")
    if "status -9" in failed:
        return {"does_not_fit": "killed by the system (out of memory)"}
    if "timed out" in failed:
        return {"too_slow": failed}
    return result


def _blocked(done, length, batch):
    """Whether a cell no longer nor larger than ``(length, batch)`` did not fit or was too
    slow: then this one would not fit, or be slower, too."""
    return any(any(key in result for key in STOPPED)
               and cell_length <= length and cell_batch <= batch
               for (cell_length, cell_batch), result in done.items())


def run(options, log):
    quick = options.quick
    shapes = ("tiny",) if quick else ("small", "base")
    lengths, batches = (QUICK_LENGTHS, QUICK_BATCHES) if quick else (LENGTHS, BATCHES)
    unknown = [shape for shape in options.shapes if shape not in shapes]
    if unknown:
        raise Skipped(f"--shapes {' '.join(unknown)}: choose from {', '.join(shapes)}")
    shapes = tuple(shape for shape in shapes if not options.shapes or shape in options.shapes)
    chosen = tuple(batch for batch in batches if not options.batches or batch in options.batches)
    if not chosen:
        raise Skipped(f"--batches {' '.join(map(str, options.batches))} names none of "
                      f"{', '.join(map(str, batches))}")
    batches = chosen
    seconds = QUICK_CELL_SECONDS if quick else CELL_SECONDS
    ways = [name for name in WAYS if not options.only or name in options.only]
    if not ways:
        raise Skipped(f"--only {' '.join(options.only)} names none of its ways "
                      f"({', '.join(WAYS)})")
    results = {}
    # The ways that save memory first, over both shapes, then the plain ways: a run cut short
    # still has the comparison the suite is for.
    for group in (SAVING, [way for way in WAYS if way not in SAVING]):
        for shape in shapes:
            for way in [way for way in ways if way in group]:
                _run_way(shape, way, lengths, batches, seconds, options, log, results)
    return {"results": results, "machine": machine(), "load_average_at_end": load_average(),
            "cap_gb": CAP_GB, "cell_seconds": seconds, "steps": STEPS,
            "tables": [table for shape in shapes
                       for table in _tables(results, shape, ways, lengths, batches)]}


def _run_way(shape, way, lengths, batches, seconds, options, log, results):
    """Runs one way's cells at ``shape``, shortest and smallest first, into ``results``."""
    done = {}
    for length in lengths:
        for batch in batches:
            if _blocked(done, length, batch):
                continue
            kwargs = {"shape": shape, "length": length, "batch": batch, "cap_gb": CAP_GB,
                      "seconds": seconds}
            done[(length, batch)] = result = _cell_result(way, kwargs, options, log)
            key = f"{shape}/{way}/{length}x{batch}"
            results[key] = result
            log(f"long: cell {json.dumps({'cell': key, **result})}")


def from_log(lines, quick=False):
    """The section of a run cut short, from its ``long: cell {...}`` log lines.

    Example::

        with open("out/long.log", encoding="utf-8") as f:
            section = from_log(f)
        print_section({"suite": "long", **section})
    """
    results = {}
    for line in lines:
        _, marker, cell = line.partition("long: cell ")
        if marker:
            result = json.loads(cell)
            results[result.pop("cell")] = result
    shapes = ("tiny",) if quick else ("small", "base")
    lengths, batches = (QUICK_LENGTHS, QUICK_BATCHES) if quick else (LENGTHS, BATCHES)
    return {"results": results,
            "tables": [table for shape in shapes
                       for table in _tables(results, shape, list(WAYS), lengths, batches)]}


def _state(result):
    """A cell's text: samples/s and peak GiB, or why it has none."""
    if result is None:
        return "not run"
    if "does_not_fit" in result:
        return "does not fit"
    if "too_slow" in result:
        peak = result.get("peak_mb")
        return "too slow" + (f" (peak {peak / 1024:.1f} GiB so far)" if peak else "")
    if "skipped" in result or "failed" in result:
        return next(f"{k}: {result[k]}" for k in ("skipped", "failed") if k in result)
    return f"{result['samples_per_s']:.3g}/s, {result['peak_mb'] / 1024:.2f} GiB"


def _longest(cell, way, lengths, batch):
    """The longest length with figures at ``batch``, and why the next one has none:
    ``"2,048 (4,096: too slow)"``; ``"none (512: does not fit)"``."""
    fitted = [length for length in lengths
              if (cell(way, length, batch) or {}).get("samples_per_s") is not None]
    longest = max(fitted) if fitted else None
    following = [length for length in lengths if longest is None or length > longest]
    if not following:
        return f"{longest:,}"
    why = _state(cell(way, following[0], batch)).split(" (")[0]
    head = f"{longest:,}" if longest else "none"
    return f"{head} ({following[0]:,}: {why})"


def _tables(results, shape, ways, lengths, batches):
    """Per shape: every cell, and the longest length that fits per way and batch."""
    def cell(way, length, batch):
        return results.get(f"{shape}/{way}/{length}x{batch}")

    shape_name = {"small": "kerasbert-zh-small (L4 H256 A4 I1024)",
                  "base": "Chinese BERT-base shapes (L12 H768 A12 I3072, random weights)",
                  "tiny": "tiny (L2 H32 A2 I64)"}[shape]
    columns = [("way", "way"), ("length", "tokens")] + [(f"b{b}", f"batch {b}") for b in batches]
    rows = [{"way": way, "length": length,
             **{f"b{b}": _state(cell(way, length, b)) for b in batches}}
            for way in ways for length in lengths]
    fits = [{"way": way, **{f"b{batch}": _longest(cell, way, lengths, batch)
                            for batch in batches}}
            for way in ways]
    note = (f"cap {CAP_GB:.0f} GiB resident, peak resident memory per fresh process; "
            "Hugging Face has no hierarchical positions: its position table is set to the length")
    return [{"title": f"Long texts, {shape_name}: samples/s and peak memory ({note})",
             "columns": columns, "rows": rows},
            {"title": f"Long texts, {shape_name}: the longest length that fits and runs "
                      f"in time, per batch",
             "columns": [("way", "way")] + [(f"b{b}", f"batch {b}") for b in batches],
             "rows": fits}]


if __name__ == "__main__":
    from bench.cli import run_alone

    run_alone("long")
