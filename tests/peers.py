"""Runs peer libraries as oracles in their own interpreter, or replays what they answered.

bert4keras 0.11.5 needs Keras 2 (``tf-keras``) and must never share a process with Keras 3;
transformers 4.57's pipelines run from ``.oracles/transformers4``. Both are pinned, so the
same question always gets the same answer: each answer is recorded in
``tests/fixtures/peers/`` and replayed, which saves a fresh TensorFlow process (5-15 s) per
question. ``KERASBERT_PEERS`` chooses:

- ``replay`` (the default): a call whose script, arguments, standard input and input files
  (every file under a test's temporary folder or this checkout that the call names, byte for
  byte) are those of a recording gets the recorded answer, and the files the peer wrote then
  are written again; any other call runs the peer live. A change on kerasbert's side that
  alters what the peer reads (a checkpoint written differently) therefore meets the live peer.
- ``live``: every call runs the peer (``make test-peers``), and where a recording exists its
  answer must equal the live one (numbers within 1e-4 relative: another CPU may round the
  last bits otherwise), so a stale recording is noticed.
- ``record``: every call runs the peer and records its answer (``python tests/record_peers.py``
  rewrites the folder from the peers and removes recordings no test asks for).

Every call goes through :func:`bench.worker.run_python`, the one "fresh interpreter, JSON on
its last line" helper of the tests and the benchmarks.
"""

import base64
import gzip
import hashlib
import json
import math
import os
import re
import tempfile
import textwrap

from bench.runner import worker_env
from bench.worker import ROOT
from bench.worker import run_python as run_worker_python

RECORDINGS = os.path.join(ROOT, "tests", "fixtures", "peers")
TRANSFORMERS4 = os.path.join(ROOT, ".oracles", "transformers4")
MODES = ("replay", "live", "record")
# pytest's temporary folders (one per run, and one per worker under xdist): the part of a
# path that changes from run to run.
_TMP = re.compile(re.escape(os.path.realpath(tempfile.gettempdir()))
                  + r"/pytest-of-[^/]+/pytest-\d+(?:/popen-gw\d+)?")
_PATH = re.compile(r"(?:%s|%s)/[^\s\"'\\,;)\]}]*" % (_TMP.pattern, re.escape(ROOT)))
# A recorded name is made of the path with the counter pytest adds to a folder's name left
# out (``inputs0`` or ``inputs3`` by the order tests ran in).
_COUNTER = re.compile(r"(<tmp>/[^/\s\"']*?)\d+(?=[/\s\"']|$)")


def mode():
    value = os.environ.get("KERASBERT_PEERS", "replay")
    if value not in MODES:
        raise ValueError(f"KERASBERT_PEERS={value!r}: expected one of {', '.join(MODES)}")
    return value


def run_bert4keras(script, timeout=600, args=(), stdin=None, live=False):
    """Runs ``script`` under bert4keras (tf_keras) and returns the JSON it prints last.

    The script sees ``from bert4keras...`` working and prints one JSON line at its end.
    ``live=True`` always asks the peer (the default run's one live check of it).

    Raises:
        bench.worker.WorkerError (a RuntimeError): the script failed; with its stderr tail.
    """
    return ask("bert4keras", script, dict(args=args, stdin=stdin, timeout=timeout,
                                          env=worker_env(tf_keras=True)), live)


def run_transformers4(script, timeout=600, args=(), stdin=None, live=False, **env_overrides):
    """Runs ``script`` with transformers 4.57 first on its path (``.oracles/transformers4``,
    installed by the Makefile) and returns the JSON it prints last."""
    path = os.pathsep.join(filter(None, [TRANSFORMERS4, os.environ.get("PYTHONPATH")]))
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": path, **env_overrides}
    return ask("transformers4", script, dict(args=args, stdin=stdin, timeout=timeout, env=env),
               live)


def have_transformers4():
    """True when the transformers 4.57 oracle is installed (``make test`` installs it)."""
    return os.path.isdir(os.path.join(TRANSFORMERS4, "transformers"))


def run_python(script, timeout=600, args=(), stdin=None, cwd=None, **env_overrides):
    """Runs ``script`` in a fresh Keras 3 interpreter (from the repository root unless
    ``cwd`` is given) and returns the JSON it prints last; never recorded."""
    options = {"cwd": cwd} if cwd is not None else {}
    return run_worker_python(script, args=args, stdin=stdin, timeout=timeout,
                             env={"TF_CPP_MIN_LOG_LEVEL": "3", **env_overrides}, **options)


def ask(peer, script, options, live=False):
    """The peer's answer to ``script`` run with ``options`` (of :func:`run_python`);
    ``live=True``: asked every time, never recorded."""
    script = textwrap.dedent(script)
    if live:
        return run_worker_python(script, **options)
    question = json.dumps([peer, script, [str(a) for a in options["args"]], options["stdin"]])
    # In the order of their normal spelling: the checkout's place must not change the key.
    paths = sorted(set(_PATH.findall(question)), key=_normal)
    watched = [_watched(path) for path in paths]
    key = hashlib.sha256("\n".join([_normal(question)] + [
        f"{_normal(path)} {_digest(folder, name)}" for path, (folder, name) in
        zip(paths, watched)]).encode()).hexdigest()[:24]
    recording = os.path.join(RECORDINGS, f"{peer}-{key}.json.gz")
    current = mode()
    found = current == "replay" and os.path.exists(recording)
    _log("replayed" if found else "asked", recording)
    if found:
        return _replay(recording, watched)
    before = [_files(folder, name) for folder, name in watched]
    answer = run_worker_python(script, **options)
    if current == "live" and os.path.exists(recording):
        with gzip.open(recording, "rt") as f:
            recorded = json.load(f)["answer"]
        if not _same(answer, recorded):
            raise AssertionError(f"{peer} answered otherwise than {recording} records: run "
                                 "tests/record_peers.py and look at what changed")
    if current == "record":
        written = []
        for index, ((folder, name), old) in enumerate(zip(watched, before)):
            for relative, digest in sorted(_files(folder, name).items()):
                # TF 1's MetaGraph beside a bert4keras checkpoint: large, and read by no test.
                if old.get(relative) != digest and not relative.endswith(".meta"):
                    with open(os.path.join(folder, relative), "rb") as f:
                        content = f.read().replace(_tmp_bytes(folder), b"<tmp>")
                    written.append([index, relative, base64.b64encode(content).decode()])
        os.makedirs(RECORDINGS, exist_ok=True)
        temporary = recording + ".tmp"
        with gzip.open(temporary, "wt") as f:
            json.dump({"peer": peer, "question": script.strip()[:400], "answer": answer,
                       "written": written}, f)
        os.replace(temporary, recording)
    return answer


def _same(a, b):
    """JSON values equal, numbers within 1e-4 relative (1e-6 absolute)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not (
            isinstance(a, bool) or isinstance(b, bool)):
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _log(what, recording):
    """One line per call in ``$KERASBERT_PEERS_LOG`` when it is set (record_peers.py reads it
    to keep the recordings some test uses)."""
    log = os.environ.get("KERASBERT_PEERS_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{what} {os.path.basename(recording)}\n")


def _replay(recording, watched):
    with gzip.open(recording, "rt") as f:
        recorded = json.load(f)
    for index, relative, content in recorded["written"]:
        folder = watched[index][0]
        target = os.path.join(folder, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(base64.b64decode(content).replace(b"<tmp>", _tmp_bytes(folder)))
    return recorded["answer"]


def _normal(text):
    return _COUNTER.sub(r"\1", _TMP.sub("<tmp>", text).replace(ROOT, "<root>"))


def _tmp_bytes(folder):
    found = _TMP.match(folder)
    return found.group(0).encode() if found else b"<tmp>"


def _watched(path):
    """(folder, name): the folder whose files a path stands for, and the name filter: a
    folder stands for its tree; a file or a prefix (``.../bert_model.ckpt``) for the files of
    its folder that start with its name. Files of this checkout count alone."""
    path = path.rstrip("/")
    if os.path.isdir(path) and not path.startswith(ROOT + "/"):
        return path, ""
    return os.path.dirname(path), os.path.basename(path)


def _files(folder, name):
    """{relative path: sha256} of the files ``(folder, name)`` stands for."""
    found = {}
    if not os.path.isdir(folder):
        return found
    if folder == ROOT or folder.startswith(ROOT + "/"):
        names = [name] if os.path.isfile(os.path.join(folder, name)) else []
        walk = [(folder, [], names)]
    else:
        walk = os.walk(folder)
    for directory, _, names in walk:
        for each in names:
            relative = os.path.relpath(os.path.join(directory, each), folder)
            if not relative.startswith(name):
                continue
            with open(os.path.join(directory, each), "rb") as f:
                content = f.read().replace(_tmp_bytes(folder), b"<tmp>")
            found[relative] = hashlib.sha256(content).hexdigest()
    return found


def _digest(folder, name):
    return hashlib.sha256(json.dumps(sorted(_files(folder, name).items())).encode()).hexdigest()
