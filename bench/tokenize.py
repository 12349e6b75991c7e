"""Tokenizer speed: kerasbert next to bert4keras, transformers and the `tokenizers` engine.

Encodes every line of a corpus (maxlen 128 by default) with each tokenizer and
prints lines/s, chars/s, the speed relative to the engine called directly, and
the share of lines whose ids equal kerasbert's `encode`.

Run from the repository root:

    python -m bench.tokenize                       # corpus found automatically
    python -m bench.tokenize --corpus a.txt b.tsv --json out/tokenize.json

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

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib
from array import array

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS_DIRS = ("../shared/data/sentiment", "data/sentiment", "kerasbert/resources/reviews")
DEFAULT_VOCAB = "checkpoints/chinese_L-12_H-768_A-12/vocab.txt"

# Runs in its own interpreter: bert4keras needs Keras 2 (tf-keras), never Keras 3.
_BERT4KERAS = """
import json, sys, time, zlib
from array import array
from bert4keras.tokenizers import Tokenizer
vocab, lines_path, maxlen = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(lines_path, encoding="utf-8") as f:
    lines = json.load(f)
tokenizer = Tokenizer(vocab, do_lower_case=True)
start = time.perf_counter()
ids = [tokenizer.encode(line, maxlen=maxlen)[0] for line in lines]
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds,
                  "digests": [zlib.crc32(array("i", row).tobytes()) for row in ids]}))
"""


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
    """Non-blank texts of `.txt` files (one per line) and `.tsv` files (`text` column).

    Raises:
        ValueError: a `.tsv` file without a `text` column in its header.
    """
    texts = []
    for path in paths:
        with open(path, encoding="utf-8", newline="") as f:
            if path.endswith(".tsv"):
                reader = csv.DictReader(f, delimiter="\t")
                if "text" not in (reader.fieldnames or ()):
                    raise ValueError(f"{path}: a .tsv corpus needs a 'text' column in its header, "
                                     f"found {reader.fieldnames}")
                texts += [row["text"] for row in reader if row["text"].strip()]
            else:
                texts += [line.rstrip("\r\n") for line in f if line.strip()]
    return texts


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


def _digest(row):
    return zlib.crc32(array("i", row).tobytes())


def _interleaved(methods, repeat):
    """Shortest wall time of each method over `repeat` rounds, taken in turn so that
    load from other processes falls on all of them alike; and each one's last result."""
    best, results = {name: float("inf") for name in methods}, {}
    for _ in range(repeat):
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


def _bert4keras(vocab, lines, maxlen):
    """(seconds, digests) from bert4keras in a subprocess, or None if it cannot run."""
    env = dict(os.environ, TF_KERAS="1", TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    with tempfile.TemporaryDirectory() as tmp:
        lines_path = os.path.join(tmp, "lines.json")
        with open(lines_path, "w", encoding="utf-8") as f:
            json.dump(lines, f, ensure_ascii=False)
        proc = subprocess.run([sys.executable, "-c", _BERT4KERAS, vocab, lines_path, str(maxlen)],
                              env=env, capture_output=True, text=True)
    if proc.returncode:
        print(f"bert4keras skipped: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["seconds"], out["digests"]


def run(lines, vocab, maxlen=128, repeat=3, peers=True):
    """Time every tokenizer on `lines`; returns a list of row dicts."""
    import numpy as np

    from kerasbert.text.tokenizer import Tokenizer

    timings = {}  # name -> (seconds, digests or None)
    if peers:
        # First, before the engine has started its threads in this process.
        b4k = _bert4keras(vocab, lines, maxlen)
        if b4k:
            timings["bert4keras Tokenizer.encode (loop)"] = b4k

    tokenizer = Tokenizer(vocab, do_lower_case=True)
    tokenizer.encode_batch(lines[:10], maxlen=maxlen)  # build the engine outside the timing
    engine = reference_engine(vocab, maxlen)
    pad = tokenizer.token_to_id("[PAD]")
    fast = {
        "kerasbert Tokenizer.encode_batch": lambda: tokenizer.encode_batch(lines, maxlen=maxlen)[0],
        "kerasbert Tokenizer.encode (loop)": lambda: [tokenizer.encode(x, maxlen=maxlen)[0]
                                                      for x in lines],
        # The least a caller of the engine must do: encode, then read the ids (for
        # single texts every segment id is 0, so no type_ids are needed).
        "tokenizers engine encode_batch": lambda: [e.ids for e in engine.encode_batch(lines)],
        "tokenizers engine encode_batch_fast": lambda: [e.ids for e in
                                                        engine.encode_batch_fast(lines)],
    }
    best, results = _interleaved(fast, repeat)
    reference = [_digest(row) for row in results["kerasbert Tokenizer.encode (loop)"]]
    for name, rows in results.items():
        digests = [_digest([i for i in row if i != pad]) for row in
                   (rows.tolist() if isinstance(rows, np.ndarray) else rows)]
        timings[name] = (best[name], digests)
    legacy = slow_bert_tokenizer() if peers else None
    if legacy is not None:
        start = time.perf_counter()
        out = legacy(vocab, do_lower_case=True)(lines, max_length=maxlen, truncation=True)
        seconds = time.perf_counter() - start
        timings[f"transformers {legacy.__name__}"] = (
            seconds, [_digest(row) for row in out["input_ids"]])

    chars = sum(map(len, lines))
    engine_best = min(s for name, (s, _) in timings.items() if name.startswith("tokenizers"))
    rows = []
    for name, (seconds, digests) in timings.items():
        same = np.mean([a == b for a, b in zip(digests, reference)]) if digests else None
        rows.append({"method": name, "seconds": seconds, "lines_per_s": len(lines) / seconds,
                     "chars_per_s": chars / seconds, "vs_engine": engine_best / seconds,
                     "same_ids": None if same is None else float(same)})
    return rows


def format_table(rows):
    """Markdown table of `run`'s rows."""
    out = ["| method | lines/s | chars/s | × engine | same ids as `encode` |",
           "|---|---:|---:|---:|---:|"]
    for r in rows:
        same = "–" if r["same_ids"] is None else f"{100 * r['same_ids']:.2f} %"
        out.append(f"| {r['method']} | {r['lines_per_s']:,.0f} | {r['chars_per_s']:,.0f} | "
                   f"{r['vs_engine']:.2f} | {same} |")
    return "\n".join(out)


def main(argv=None):
    """Command-line entry point; returns the results dict (also written by `--json`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="+", metavar="FILE",
                        help="corpus files (.txt: a text per line, .tsv: 'text' column)")
    parser.add_argument("--vocab", default=DEFAULT_VOCAB, help="vocab.txt (default: %(default)s)")
    parser.add_argument("--maxlen", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs for fast methods")
    parser.add_argument("--limit", type=int, help="use only the first N lines")
    parser.add_argument("--no-peers", action="store_true",
                        help="skip bert4keras and transformers (the slow pure-Python peers)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    vocab = args.vocab if os.path.isabs(args.vocab) or os.path.exists(args.vocab) \
        else os.path.join(ROOT, args.vocab)
    files = args.corpus or find_corpus()
    if files:
        lines = read_corpus(files)
        source = args.corpus or [os.path.relpath(f, ROOT) for f in files]
    else:
        from kerasbert.text.vocab import load_vocab

        lines, source = synthetic_corpus(load_vocab(vocab), n=args.limit or 20000), ["synthetic"]
    lines = lines[:args.limit] if args.limit else lines
    rows = run(lines, vocab, args.maxlen, args.repeat, peers=not args.no_peers)
    result = {"corpus": source, "lines": len(lines), "chars": sum(map(len, lines)),
              "maxlen": args.maxlen, "repeat": args.repeat, "cpus": os.cpu_count(), "rows": rows}
    print(f"corpus: {', '.join(source)}: {result['lines']:,} lines, {result['chars']:,} chars; "
          f"maxlen {args.maxlen}; best of {args.repeat} (pure-Python peers: 1 run); "
          f"{result['cpus']} CPUs")
    print(format_table(rows))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
