"""Tokenizer speed: kerasbert next to bert4keras, transformers and the `tokenizers` engine.

Encodes every line of a corpus (maxlen 128) with each tokenizer and gives lines/s,
chars/s, the speed relative to the engine called directly, and the share of lines whose
ids equal kerasbert's `encode`. kerasbert and the engine run in one worker process, taking
turns for ``rounds`` rounds (best kept); bert4keras (on tf-keras) and transformers' pure-Python
tokenizer run once each, in processes of their own.

Run from the repository root:

    python -m bench tokenize                       # or python -m bench.tokenize
    python -m bench tokenize --corpus a.txt b.tsv --limit 5000 --no-peers

A `.txt` corpus has one text per line; a `.tsv` one has a header with a `text`
column. Without `--corpus` the first of `../shared/data/sentiment`,
`data/sentiment` and `kerasbert/resources/reviews` (relative to the repository root) that holds
such files is used; if none does, a synthetic corpus drawn from the vocabulary.
"""

if __name__ == "__main__" and not __package__:
    # Run as a file, this folder would come first on sys.path and this module
    # would shadow the standard library's `tokenize`; put the repository root there.
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import json
import os
import random
import sys
import tempfile
import time
import zlib
from array import array

from bench.runner import Skipped, require, run_worker, why_missing
from bench.worker import ROOT

CORPUS_DIRS = ("../shared/data/sentiment", "data/sentiment", "kerasbert/resources/reviews")
VOCAB = os.path.join(ROOT, "checkpoints", "chinese_L-12_H-768_A-12", "vocab.txt")
MAXLEN = 128
ROUNDS = 3
REFERENCE = "kerasbert Tokenizer.encode (loop)"  # the ids every method is compared with


def find_corpus(root=ROOT):
    """The corpus files of the first of `CORPUS_DIRS` (under `root`) that has any, or []."""
    for rel in CORPUS_DIRS:
        folder = os.path.normpath(os.path.join(root, rel))
        if os.path.isdir(folder):
            files = sorted(os.path.join(folder, name) for name in os.listdir(folder)
                           if name.endswith((".txt", ".tsv")))
            if files:
                return files
    return []


def read_corpus(paths):
    """Non-blank texts of the corpus files: kerasbert's own corpus reader (``.txt`` one text a
    line; ``.tsv`` / ``.csv`` / ``.jsonl`` by their ``text`` column)."""
    from kerasbert.pretraining.corpus import read_corpus as read

    return read(paths)


def synthetic_corpus(token_dict, n=20000, seed=0):
    """Review-like lines drawn from the vocabulary's CJK characters, words and punctuation."""
    rng = random.Random(seed)
    cjk = [t for t in token_dict if len(t) == 1 and "\u4e00" <= t <= "\u9fff"]
    words = [t for t in token_dict if t.isascii() and t.isalpha() and len(t) > 2]
    marks = list("，。！？、") + [" "]
    lines = []
    for _ in range(n):
        parts = [rng.choice(cjk) if rng.random() < 0.8 else
                 rng.choice(words) if rng.random() < 0.7 else rng.choice(marks)
                 for _ in range(rng.randint(5, 150))]
        lines.append("".join(parts))
    return lines


def read_tokens(vocab=VOCAB):
    """The tokens of a vocab.txt, in order (plain lines: this runs in the runner's process,
    which must stay free of TensorFlow, so kerasbert is not imported here)."""
    with open(vocab, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def _digest(row):
    return zlib.crc32(array("i", row).tobytes())


def _read_lines(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _method(seconds, rows, pad=None):
    """A method's time and the digest of each line's ids (padding dropped)."""
    rows = rows.tolist() if hasattr(rows, "tolist") else rows
    return {"seconds": seconds,
            "digests": [_digest([i for i in row if i != pad]) for row in rows]}


def _interleaved(methods, rounds):
    """Shortest wall time of each method over `rounds` rounds, taken in turn so that
    load from other processes falls on all of them alike; and each one's last result."""
    best, results = {name: float("inf") for name in methods}, {}
    for _ in range(rounds):
        for name, fn in methods.items():
            start = time.perf_counter()
            results[name] = fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best, results


def reference_engine(vocab, maxlen):
    """The `tokenizers` engine as configured for BERT, with nothing of kerasbert."""
    from tokenizers import Tokenizer as Engine
    from tokenizers import models, normalizers, pre_tokenizers, processors

    engine = Engine(models.WordPiece.from_file(vocab, unk_token="[UNK]"))
    engine.normalizer = normalizers.BertNormalizer(lowercase=True)
    engine.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = engine.token_to_id("[CLS]"), engine.token_to_id("[SEP]")
    engine.post_processor = processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
    engine.enable_truncation(maxlen)
    engine.enable_padding(pad_id=engine.token_to_id("[PAD]"))
    return engine


def slow_bert_tokenizer():
    """transformers' pure-Python BERT tokenizer class (`BertTokenizerLegacy` in 5.x,
    `BertTokenizer` before), or None if transformers is not installed."""
    try:
        from transformers.models.bert import tokenization_bert_legacy as slow
        return slow.BertTokenizerLegacy
    except ImportError:
        pass
    try:
        from transformers.models.bert import tokenization_bert as slow
    except ImportError:
        print("transformers skipped: not installed", file=sys.stderr)
        return None
    return slow.BertTokenizer


def measure_kerasbert(lines_path, rounds=ROUNDS):
    """Worker: kerasbert's Tokenizer and the bare `tokenizers` engine, taking turns."""
    from kerasbert.text.tokenizer import Tokenizer

    lines = _read_lines(lines_path)
    tokenizer = Tokenizer(VOCAB, do_lower_case=True)
    tokenizer.encode_batch(lines[:10], maxlen=MAXLEN)  # build the engine outside the timing
    engine = reference_engine(VOCAB, MAXLEN)
    methods = {
        "kerasbert Tokenizer.encode_batch": lambda: tokenizer.encode_batch(lines, maxlen=MAXLEN)[0],
        REFERENCE: lambda: [tokenizer.encode(x, maxlen=MAXLEN)[0] for x in lines],
        # The least a caller of the engine must do: encode, then read the ids (for
        # single texts every segment id is 0, so no type_ids are needed).
        "tokenizers engine encode_batch": lambda: [e.ids for e in engine.encode_batch(lines)],
        "tokenizers engine encode_batch_fast": lambda: [e.ids for e in
                                                        engine.encode_batch_fast(lines)],
    }
    best, results = _interleaved(methods, rounds)
    pad = tokenizer.token_to_id("[PAD]")
    return {"methods": {name: _method(best[name], results[name], pad) for name in methods}}


def measure_bert4keras(lines_path):
    """Worker: bert4keras's `Tokenizer.encode`, once over the lines (needs TF_KERAS=1)."""
    if os.environ.get("TF_KERAS") != "1":
        raise Skipped("bert4keras must run with TF_KERAS=1 TF_USE_LEGACY_KERAS=1")
    from bert4keras.tokenizers import Tokenizer

    lines = _read_lines(lines_path)
    tokenizer = Tokenizer(VOCAB, do_lower_case=True)
    start = time.perf_counter()
    ids = [tokenizer.encode(line, maxlen=MAXLEN)[0] for line in lines]
    return {"methods": {"bert4keras Tokenizer.encode (loop)":
                        _method(time.perf_counter() - start, ids)}}


def measure_transformers(lines_path):
    """Worker: transformers' pure-Python BERT tokenizer, once over the lines."""
    legacy = slow_bert_tokenizer()
    if legacy is None:
        raise Skipped("transformers is not installed")
    lines = _read_lines(lines_path)
    start = time.perf_counter()
    out = legacy(VOCAB, do_lower_case=True)(lines, max_length=MAXLEN, truncation=True)
    return {"methods": {f"transformers {legacy.__name__}":
                        _method(time.perf_counter() - start, out["input_ids"])}}


WORKERS = {"kerasbert": measure_kerasbert, "bert4keras": measure_bert4keras,
           "transformers": measure_transformers}
PEERS = ("bert4keras", "transformers")


def corpus_lines(options):
    """The lines to encode and where they come from, as ``options`` (corpus, limit) ask."""
    files = list(options.corpus) or find_corpus()
    if files:
        lines = read_corpus(files)
        source = list(options.corpus) or [os.path.relpath(f, ROOT) for f in files]
    else:
        lines, source = synthetic_corpus(read_tokens(), n=options.limit or 20000), ["synthetic"]
    return (lines[:options.limit] if options.limit else lines), source


def run(options, log):
    """Times every tokenizer on the corpus, each library in its own process; returns the section.

    ``options``: ``corpus``, ``limit`` (first N lines), ``rounds`` (default 3, best kept),
    ``peers`` (also bert4keras and transformers), ``max_wait``.
    """
    lines, source = corpus_lines(options)
    rounds = options.rounds or ROUNDS
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-tokenize-") as folder:
        lines_path = os.path.join(folder, "lines.json")
        with open(lines_path, "w", encoding="utf-8") as f:
            json.dump(lines, f, ensure_ascii=False)
        log(f"tokenize: kerasbert and the engine, {len(lines):,} lines")
        results["kerasbert"] = require(run_worker(
            "tokenize", "kerasbert", {"lines_path": lines_path, "rounds": rounds}, options, log),
            "kerasbert's tokenizer")
        for name in PEERS if options.peers else ():
            log(f"tokenize: {name}")
            results[name] = run_worker("tokenize", name, {"lines_path": lines_path}, options, log,
                                       tf_keras=name == "bert4keras")
    methods = {name: method for result in results.values()
               for name, method in result.get("methods", {}).items()}
    rows = _rows(methods, lines)
    missing = {name: result for name, result in results.items() if why_missing(result)}
    summary = {"corpus": source, "lines": len(lines), "chars": sum(map(len, lines)),
               "maxlen": MAXLEN, "rounds": rounds, "cpus": os.cpu_count(), "rows": rows,
               **missing}
    title = (f"Tokenizer speed: {', '.join(source)}: {summary['lines']:,} lines, "
             f"{summary['chars']:,} chars; maxlen {MAXLEN}; best of {rounds} rounds "
             f"(pure-Python peers: 1 run); {summary['cpus']} CPUs")
    table_rows = [_table_row(row) for row in rows]
    table_rows += [{"method": name, "lines_per_s": why_missing(result)}
                   for name, result in missing.items()]
    return {"results": summary,
            "tables": [{"title": title, "columns": COLUMNS, "rows": table_rows}]}


COLUMNS = [("method", "method"), ("lines_per_s", "lines/s"), ("chars_per_s", "chars/s"),
           ("vs_engine", "× engine"), ("same_ids", "same ids as `encode`")]


def _rows(methods, lines):
    """One row per method: speed, speed relative to the fastest engine call, same ids."""
    chars = sum(map(len, lines))
    reference = methods.get(REFERENCE, {}).get("digests")
    engine = [m["seconds"] for name, m in methods.items() if name.startswith("tokenizers")]
    rows = []
    for name, method in methods.items():
        seconds, digests = method["seconds"], method["digests"]
        same = (sum(a == b for a, b in zip(digests, reference)) / len(reference)
                if reference and len(digests) == len(reference) else None)
        rows.append({"method": name, "seconds": seconds, "lines_per_s": len(lines) / seconds,
                     "chars_per_s": chars / seconds,
                     "vs_engine": min(engine) / seconds if engine else None, "same_ids": same})
    return rows


def _table_row(row):
    same = "–" if row["same_ids"] is None else f"{100 * row['same_ids']:.2f} %"
    return {"method": row["method"], "lines_per_s": round(row["lines_per_s"]),
            "chars_per_s": round(row["chars_per_s"]),
            "vs_engine": None if row["vs_engine"] is None else round(row["vs_engine"], 2),
            "same_ids": same}


def main(argv=None):
    """``python -m bench.tokenize [OPTIONS]``: this suite alone; returns its results (the
    ``results`` of :func:`run`, also written by ``--json``)."""
    from bench.cli import run_alone

    return run_alone("tokenize", argv)


if __name__ == "__main__":
    main()
