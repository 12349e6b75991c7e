"""Presets and their downloads, without the internet: a local HTTP server serves a tiny
Google zip and a tiny Hugging Face repository (the hub's headers, for ``huggingface_hub``
with ``HF_ENDPOINT`` pointed at it), and breaks in the ways a real download breaks.

The test writes its own preset table (``KERASBERT_PRESETS``) whose URLs are the server's;
the shipped table's published URLs are never contacted.
"""

import hashlib
import http.server
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile

import numpy as np
import pytest

from conftest import ROOT, TINY
from kerasbert.models.convert import WEIGHTS_FILES, convert_hf_to_google, download_preset
from kerasbert.presets import table
from kerasbert.presets.download import DownloadError, download

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class Server(http.server.ThreadingHTTPServer):
    """Serves ``files`` (path -> bytes) with ETag, Content-Length and Range; ``drop``: paths
    whose next full GET breaks off half-way; ``slow``: paths sent 4 KB at a time, slowly."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files, self.etags, self.drop, self.slow, self.log = {}, {}, set(), set(), []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request, client_address):
        # A client that hangs up in the middle of a file (a full disk, a killed download) is
        # what the tests make happen: not reported.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def add(self, path, data, etag=None):
        self.files[path] = data
        self.etags[path] = etag or hashlib.md5(data).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.answer(body=False)

    def do_GET(self):
        self.answer(body=True)

    def answer(self, body):
        server, path = self.server, self.path.split("?")[0]
        server.log.append((self.command, path, self.headers.get("Range")))
        if path not in server.files:
            self.send_response(404)
            if "/resolve/" in path:  # as the hub says a repository lacks a file
                self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data, etag = server.files[path], server.etags[path]
        start = 0
        wanted = self.headers.get("Range")
        if wanted and self.headers.get("If-Range", f'"{etag}"') == f'"{etag}"':
            start = int(wanted.split("=")[1].split("-")[0])
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if not body:
            return
        if path in server.drop and not start:
            server.drop.discard(path)
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        step = 4096 if path in server.slow else len(data)
        for at in range(start, len(data), step):
            self.wfile.write(data[at:at + step])
            if path in server.slow:
                self.wfile.flush()
                time.sleep(0.05)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny Google checkpoint folder, and its zip; a tiny Hugging Face repository."""
    import keras

    from kerasbert import build_transformer_model, save_weights_as_checkpoint
    from test_convert import hf_directory, hf_weights

    root = tmp_path_factory.mktemp("tiny")
    folder = root / "tiny_L-2_H-16"
    folder.mkdir()
    (folder / "bert_config.json").write_text(json.dumps(TINY))
    (folder / "vocab.txt").write_text("".join(f"token{i}\n" for i in range(TINY["vocab_size"])))
    keras.utils.set_random_seed(0)
    save_weights_as_checkpoint(build_transformer_model(dict(TINY)),
                               str(folder / "bert_model.ckpt"))

    def zipped(leave_out=()):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name in sorted(os.listdir(folder)):
                if name not in leave_out:
                    archive.write(folder / name, f"tiny_L-2_H-16/{name}")
        return buffer.getvalue()

    weights = hf_weights(np.random.default_rng(0))
    hub = hf_directory(root / "hub", weights)
    return {"folder": folder, "zip": zipped(), "no_config": zipped({"bert_config.json"}),
            "hub": hub, "tf_model.h5": keras_h5(root / "tf_model.h5", weights)}


def keras_h5(path, weights):
    """``weights`` (PyTorch names) as transformers' TFBertForPreTraining saves them: one
    group per Keras layer, TensorFlow names, kernels transposed."""
    import h5py

    def tf_name(name):
        parts = name.split(".")
        last = {"weight": "kernel", "bias": "bias"}[parts[-1]]
        if parts[-2] in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            last = "weight" if parts[-2] == "word_embeddings" else "embeddings"
        elif parts[-2] == "LayerNorm":
            last = {"kernel": "gamma", "bias": "beta"}[last]
        scope = {"bert": "bert", "cls": "mlm___cls" if "predictions" in name else "nsp___cls"}
        parts[0] = scope[parts[0]]
        text = re.sub(r"\.(\d+)\.", r"_._\1/", ".".join(parts[:-1]))
        return f"tf_bert_for_pre_training/{text.replace('.', '/')}/{last}:0", last == "kernel"

    layers = {}
    for name, value in weights.items():
        if name.startswith(("bert.", "cls.")) and name != "bert.embeddings.position_ids" \
                and name != "cls.predictions.decoder.bias":
            tf, transpose = tf_name(name)
            layers.setdefault(tf.split("/")[1], {})[tf] = value.T if transpose else value
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = [layer.encode() for layer in layers]
        for layer, values in layers.items():
            f.create_group(layer).attrs["weight_names"] = [name.encode() for name in values]
            for name, value in values.items():
                f[layer].create_dataset(name, data=value)
    return path.read_bytes()


@pytest.fixture
def server(tiny_model, tmp_path, monkeypatch):
    """The server, a table of presets on it (KERASBERT_PRESETS), an empty cache."""
    served = Server()
    thread = threading.Thread(target=served.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    served.add("/tiny.zip", tiny_model["zip"])
    served.add("/drop/tiny.zip", tiny_model["zip"])
    served.add("/slow/tiny.zip", tiny_model["zip"])
    served.slow.add("/slow/tiny.zip")
    served.add("/no_config.zip", tiny_model["no_config"])
    for repo in ("org/tiny", "org/tampered"):
        for name in ("config.json", "vocab.txt", "model.safetensors"):
            data = (tiny_model["hub"] / name).read_bytes()
            etag = hashlib.sha256(data).hexdigest() if name.endswith("safetensors") else None
            served.add(f"/{repo}/resolve/main/{name}", data, etag)
    served.etags["/org/tampered/resolve/main/model.safetensors"] = "f" * 64
    for repo in ("org/tf-only", "org/no-weights"):
        for name in ("config.json", "vocab.txt"):
            served.add(f"/{repo}/resolve/main/{name}", (tiny_model["hub"] / name).read_bytes())
    data = tiny_model["tf_model.h5"]
    served.add("/org/tf-only/resolve/main/tf_model.h5", data, hashlib.sha256(data).hexdigest())
    url = served.url
    presets = {
        "tiny": {"zip": f"{url}/tiny.zip", "family": "bert", "licence": "Apache-2.0",
                 "finetune": {"lr": 5e-5, "epochs": 2}},
        "tiny-drop": {"zip": f"{url}/drop/tiny.zip", "family": "bert"},
        "tiny-slow": {"zip": f"{url}/slow/tiny.zip", "family": "bert"},
        "tiny-sha": {"zip": f"{url}/tiny.zip", "family": "bert", "sha256": "0" * 64},
        "tiny-404": {"zip": f"{url}/gone.zip", "family": "bert"},
        "tiny-no-config": {"zip": f"{url}/no_config.zip", "family": "bert"},
        "tiny-refused": {"zip": f"http://127.0.0.1:{_closed_port()}/tiny.zip", "family": "bert"},
        "tiny-hub": {"hf": "org/tiny", "family": "bert"},
        "tiny-tampered": {"hf": "org/tampered", "family": "bert"},
        "tiny-tf-only": {"hf": "org/tf-only", "family": "bert"},
        "tiny-no-weights": {"hf": "org/no-weights", "family": "bert"},
    }
    path = tmp_path / "presets.json"
    path.write_text(json.dumps({"presets": presets}))
    monkeypatch.setenv("KERASBERT_PRESETS", str(path))
    monkeypatch.setenv("KERASBERT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_ENDPOINT", url)
    served.table = str(path)
    served.home = tmp_path / "home"
    yield served
    served.shutdown()
    served.server_close()


def _closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _checkpoint(prefix):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_untouched(server, name):
    """Nothing of ``name`` in presets/: no folder, no temporary beside it."""
    presets = server.home / "presets"
    assert not os.path.exists(presets / name)
    assert [n for n in (os.listdir(presets) if presets.exists() else ()) if name in n] == []


def test_a_zip_preset_downloads_once_and_builds(server, tiny_model):
    from kerasbert import build_transformer_model

    folder = download("tiny", progress=False)
    assert folder == str(server.home / "presets" / "tiny")
    assert {"bert_config.json", "vocab.txt", "bert_model.ckpt.index", "preset.json",
            "finetune_defaults.json"} <= set(os.listdir(folder))
    assert json.load(open(os.path.join(folder, "finetune_defaults.json"))) == {
        "lr": 5e-5, "epochs": 2}
    assert not os.path.exists(server.home / "downloads" / "tiny")  # the zip is gone
    gets = len(server.log)
    assert download("tiny") == folder and len(server.log) == gets  # cached: no request
    model = build_transformer_model("tiny")  # a preset's name, anywhere a model is asked for
    original = _checkpoint(tiny_model["folder"] / "bert_model.ckpt")
    word = model.get_layer("Embedding-Token").get_weights()[0]
    np.testing.assert_array_equal(word, original["bert/embeddings/word_embeddings"])


def test_a_dropped_connection_resumes_to_the_right_file(server, tiny_model):
    server.drop.add("/drop/tiny.zip")
    with pytest.raises(DownloadError, match=r"preset tiny-drop in http://127\.0\.0\.1:\d+/drop/"
                                            r"tiny\.zip: .*run again to resume"):
        download("tiny-drop", progress=False)
    assert_untouched(server, "tiny-drop")
    part = server.home / "downloads" / "tiny-drop" / "tiny.zip.part"
    got = part.stat().st_size
    assert 0 < got < len(tiny_model["zip"])
    folder = download("tiny-drop", progress=False)
    assert server.log[-1] == ("GET", "/drop/tiny.zip", f"bytes={got}-")  # resumed, not again
    assert (open(os.path.join(folder, "bert_model.ckpt.index"), "rb").read()
            == (tiny_model["folder"] / "bert_model.ckpt.index").read_bytes())


@pytest.mark.parametrize("name, why", [
    ("tiny-sha", r"checksum mismatch: sha256 [0-9a-f]{64}, expected 0{64}"),
    ("tiny-404", r"HTTP 404"),
    ("tiny-no-config", r"the zip lacks bert_config\.json"),
    ("tiny-refused", r"no connection or the download broke off"),
])
def test_a_failed_download_names_the_preset_and_url_and_leaves_the_cache(server, name, why):
    url = table.get(name).zip
    with pytest.raises(DownloadError, match=rf"^preset {name} in {url}: {why}"):
        download(name, progress=False)
    assert_untouched(server, name)
    # A refused checksum or zip is removed: the next try starts over; no folder is left
    # empty (an offline try leaves nothing to resume).
    if name in ("tiny-sha", "tiny-no-config", "tiny-refused"):
        assert not os.path.exists(server.home / "downloads" / name)
    assert not os.path.exists(server.home / "presets")


@pytest.mark.parametrize("damage", ["flipped byte", "missing index", "missing vocab"])
def test_a_damaged_cached_preset_is_named_and_downloaded_again(server, tiny_model, damage,
                                                                caplog, capsys):
    from kerasbert.cli.main import main

    folder = download("tiny", progress=False)
    name = {"flipped byte": "bert_model.ckpt.data-00000-of-00001",
            "missing index": "bert_model.ckpt.index", "missing vocab": "vocab.txt"}[damage]
    path = os.path.join(folder, name)
    good = open(path, "rb").read()
    if damage == "flipped byte":
        data = bytearray(good)
        data[len(data) // 2] ^= 1
        open(path, "wb").write(bytes(data))
    else:
        os.remove(path)
    capsys.readouterr()
    assert main(["presets"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("tiny "))
    assert "damaged (downloaded again on use)" in row
    gets = len(server.log)
    with caplog.at_level("WARNING"):
        assert download("tiny", progress=False) == folder
    why = ("changed since it was downloaded (its size or SHA-256)" if damage == "flipped byte"
           else "is missing")
    assert f"preset tiny in {folder}: {name} {why}; downloading it again" in caplog.text
    assert len(server.log) > gets  # fetched again
    assert open(path, "rb").read() == good
    assert not [n for n in os.listdir(server.home / "presets") if n != "tiny"]


def test_the_command_line_says_a_failure_in_one_line(server, capsys):
    from kerasbert.cli.main import main

    assert main(["download", "tiny-404"]) == 2
    err = capsys.readouterr().err
    assert err == f"kerasbert download: preset tiny-404 in {server.url}/gone.zip: HTTP 404 " \
                  "Not Found\n"
    assert main(["download", "--quiet", "tiny"]) == 0
    assert capsys.readouterr().out == f"{server.home / 'presets' / 'tiny'}\n"
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "family", "size", "licence", "source", "cached"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["tiny"][-1] == "yes" and rows["tiny-404"][-1] == "no"


def test_train_takes_a_preset_for_model(server):
    from kerasbert.tasks.classification.options import ClassificationOptions
    from kerasbert.training.options import OptionError

    resolved = ClassificationOptions(model="tiny", output="runs/x").resolved()
    folder = server.home / "presets" / "tiny"
    assert (resolved.model, resolved.config, resolved.checkpoint, resolved.lr,
            resolved.epochs) == ("bert", str(folder / "bert_config.json"),
                                 str(folder / "bert_model.ckpt"), 5e-5, 2)
    with pytest.raises(OptionError, match="conflicting options in --model and --config"):
        ClassificationOptions(model="tiny", config="x.json", output="runs/x").resolved()


def test_a_hub_repository_is_converted_once(server, tiny_model):
    folder = download_preset("tiny-hub", progress=False)
    assert {"bert_config.json", "vocab.txt", "bert_model.ckpt.index"} <= set(os.listdir(folder))
    reference = server.home.parent / "reference" / "bert_model.ckpt"
    convert_hf_to_google(tiny_model["hub"], reference)
    got, expected = _checkpoint(os.path.join(folder, "bert_model.ckpt")), _checkpoint(reference)
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])
    assert not os.path.exists(server.home / "downloads" / "tiny-hub")


def test_a_hub_repository_with_tensorflow_weights_only_is_converted_from_them(server,
                                                                            tiny_model):
    """Many hub repositories hold ``tf_model.h5`` (and ``pytorch_model.bin``) and no
    ``model.safetensors``: the same weights give the same checkpoint."""
    folder = download_preset("tiny-tf-only", progress=False)
    reference = server.home.parent / "reference" / "bert_model.ckpt"
    convert_hf_to_google(tiny_model["hub"], reference)
    got, expected = _checkpoint(os.path.join(folder, "bert_model.ckpt")), _checkpoint(reference)
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    asked = [path for _, path, _ in server.log if path.startswith("/org/tf-only/")]
    assert "/org/tf-only/resolve/main/model.safetensors" in asked
    assert "/org/tf-only/resolve/main/tf_model.h5" in asked

    with pytest.raises(DownloadError, match=rf"^preset tiny-no-weights in {server.url}/org/"
                                            r"no-weights: no weights: the repository holds "
                                            r"neither model\.safetensors nor tf_model\.h5$"):
        download_preset("tiny-no-weights", progress=False)
    assert_untouched(server, "tiny-no-weights")


def test_a_hub_repository_needs_the_converter_it_is_given(server, tiny_model):
    """The presets package knows no model: a Hugging Face preset is converted by what the
    caller passes, and refused by name, before any request, when nothing is passed."""
    with pytest.raises(ValueError, match=r"^preset 'tiny-hub' in .*: the Hugging Face "
                                         r"repository org/tiny is converted .* no converter"):
        download("tiny-hub", progress=False)
    assert server.log == [] and not os.path.exists(server.home / "presets")
    calls = []

    def convert(folder, prefix):
        calls.append(sorted(n for n in os.listdir(folder) if not n.startswith(".")))
        convert_hf_to_google(folder, prefix)

    folder = download("tiny-hub", progress=False, convert=convert, weights_files=WEIGHTS_FILES)
    assert calls == [["config.json", "model.safetensors", "vocab.txt"]]
    assert download_preset("tiny-hub") == folder and len(calls) == 1  # cached: no conversion


def test_a_hub_file_whose_sha256_differs_is_refused(server):
    with pytest.raises(DownloadError, match=rf"^preset tiny-tampered in {server.url}/org/tampered/"
                                            r"resolve/main/model\.safetensors: checksum mismatch"):
        download_preset("tiny-tampered", progress=False)
    assert_untouched(server, "tiny-tampered")


def test_two_downloads_of_one_preset_make_one_good_copy(server, tiny_model):
    results, errors = [], []

    def fetch():
        try:
            results.append(download("tiny-slow", progress=False))
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=fetch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(set(results)) == 1 and len(results) == 2
    assert [entry for entry in server.log if entry[0] == "GET"] == [
        ("GET", "/slow/tiny.zip", None)]  # the second waited, then found it cached
    assert (open(os.path.join(results[0], "bert_model.ckpt.index"), "rb").read()
            == (tiny_model["folder"] / "bert_model.ckpt.index").read_bytes())


@pytest.mark.slow
def test_a_killed_download_command_resumes(server, tiny_model):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, "-m", "kerasbert.cli.main", "download", "tiny-slow"]
    part = server.home / "downloads" / "tiny-slow" / "tiny.zip.part"
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and (not part.exists() or part.stat().st_size < 8192):
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    got = part.stat().st_size
    assert 0 < got < len(tiny_model["zip"])
    assert_untouched(server, "tiny-slow")
    result = subprocess.run(command + ["--quiet"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, f"{server.home / 'presets' / 'tiny-slow'}\n")
    ranges = [r for method, path, r in server.log if method == "GET" and r]
    assert len(ranges) == 1 and int(ranges[0].split("=")[1].rstrip("-")) >= got
    assert ((server.home / "presets" / "tiny-slow" / "bert_model.ckpt.index").read_bytes()
            == (tiny_model["folder"] / "bert_model.ckpt.index").read_bytes())


def test_a_full_disk_is_one_line_and_the_download_resumes_once_there_is_room(
        server, tiny_model, tmp_path, monkeypatch, capsys):
    """The cache on a small tmpfs: the zip does not fit, the command says so in one line and
    leaves no preset folder; with room made, the next run resumes the same bytes."""
    from kerasbert.cli.main import main
    from test_disk_full import resize, tmpfs

    size = len(tiny_model["zip"])
    assert size > 16 * 1024  # more than the disk below holds
    with tmpfs(tmp_path / "small", "8k") as home:
        monkeypatch.setenv("KERASBERT_HOME", str(home))
        server.home = home
        assert main(["download", "--quiet", "tiny"]) == 2
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and re.fullmatch(
            r"kerasbert download: preset tiny in http://127\.0\.0\.1:\d+/tiny\.zip: cannot "
            r"write .*tiny\.zip\.part: No space left on device", error[0]), error
        assert_untouched(server, "tiny")
        part = home / "downloads" / "tiny" / "tiny.zip.part"
        got = part.stat().st_size
        assert 0 < got < size
        resize(home, f"{4 * size // 1024 + 256}k")
        folder = download("tiny", progress=False)
        assert server.log[-1][2] == f"bytes={got}-"  # resumed, not fetched again
        for name in ("bert_config.json", "vocab.txt", "bert_model.ckpt.index"):
            assert (tiny_model["folder"] / name).read_bytes() == open(
                os.path.join(folder, name), "rb").read()
