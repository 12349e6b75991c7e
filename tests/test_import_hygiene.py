"""``import kerasbert`` changes nothing global: no environment variable, no import finder, no
file descriptor, nothing of Keras; processes without stderr, with another import finder,
a reloaded package and multiprocessing's spawn all work; a saved model loads with
``kerasbert.load_model``. Each case in a fresh interpreter, as a user's script meets it."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAVED = os.path.join(ROOT, "tests", "fixtures", "saved-0.1.0", "mlm.keras")
CLI = os.path.join(os.path.dirname(sys.executable), "kerasbert")
CONFIG = os.path.join(ROOT, "kerasbert", "resources", "kerasbert-zh-small", "bert_config.json")

#: An import finder of another tool (a coverage or profiling hook) that asks every finder
#: after it, as such tools do; put first on ``sys.meta_path``.
OTHER_FINDER = textwrap.dedent("""
    import sys

    class AsksTheOthers:
        def find_spec(self, name, path=None, target=None):
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        return spec
            return None

    sys.meta_path.insert(0, AsksTheOthers())
""")


def python(script, env=None, close_stderr=False):
    """``script`` in a fresh interpreter from the checkout, without the suite's
    ``TF_CPP_MIN_LOG_LEVEL``; its completed process."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("TF_CPP_MIN_LOG_LEVEL", "KERASBERT_DEBUG")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT,
                          env=environment, capture_output=not close_stderr,
                          stdout=subprocess.PIPE if close_stderr else None, text=True,
                          timeout=300, check=False,
                          preexec_fn=(lambda: os.close(2)) if close_stderr else None)


def last_json(done):
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_import_kerasbert_changes_no_environment_finder_descriptor_or_keras_registry():
    found = last_json(python("""
        import json, os, sys
        environ, finders = dict(os.environ), list(sys.meta_path)
        stderr = os.fstat(2)
        import kerasbert

        tokenizer = kerasbert.Tokenizer(kerasbert.shipped.model_dir() + "/vocab.txt")
        found = {"environ": dict(os.environ) == environ, "finders": sys.meta_path == finders,
                 "fd2": os.fstat(2) == stderr,
                 "tf_log_level": os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
                 "ids": len(tokenizer.encode_batch(["好"], maxlen=8)[0][0])}
        import keras
        from keras.src.saving import object_registration

        found["registry"] = type(object_registration.GLOBAL_CUSTOM_OBJECTS) is dict
        print(json.dumps(found))
    """))
    assert found == {"environ": True, "finders": True, "fd2": True, "registry": True,
                     "tf_log_level": None, "ids": 3}


def test_a_saved_model_loads_with_kerasbert_load_model_in_a_fresh_process():
    found = last_json(python(f"""
        import json, sys
        import kerasbert

        before = "tensorflow" in sys.modules
        model = kerasbert.load_model({SAVED!r})
        print(json.dumps({{"before": before, "layers": len(model.layers),
                          "mlm": model.get_layer("MLM-Bias").name}}))
    """))
    assert found == {"before": False, "layers": found["layers"], "mlm": "MLM-Bias"}
    assert found["layers"] > 10


def test_plain_keras_load_model_works_once_the_objects_are_registered():
    found = last_json(python(f"""
        import json
        import keras
        import kerasbert

        try:
            keras.saving.load_model({SAVED!r}, safe_mode=True)
            alone = "loaded"
        except Exception as error:
            alone = "refused" if "kerasbert>" in str(error) else str(error)
        kerasbert.register_saved_objects()
        model = keras.saving.load_model({SAVED!r}, safe_mode=True)
        print(json.dumps({{"alone": alone, "registered": len(model.layers) > 10}}))
    """))
    assert found == {"alone": "refused", "registered": True}


def test_register_saved_objects_imports_every_module_that_registers_one():
    registering = []
    for folder, _, names in os.walk(os.path.join(ROOT, "kerasbert")):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".py") and "register_keras_serializable" in open(
                    path, encoding="utf-8").read():
                registering.append(os.path.relpath(path, ROOT)[:-3].replace(os.sep, "."))
    missing = last_json(python(f"""
        import json, sys
        import kerasbert

        kerasbert.register_saved_objects()
        print(json.dumps([m for m in {sorted(registering)!r} if m not in sys.modules]))
    """))
    assert len(registering) > 5 and missing == []


def test_a_process_without_stderr_imports_kerasbert_and_tensorflow():
    # pythonw, windowed frozen apps and daemons run with sys.stderr None.
    found = last_json(python("""
        import json, sys
        sys.stderr = None
        import kerasbert, tensorflow
        from kerasbert import build_transformer_model

        model = build_transformer_model(dict(vocab_size=50, hidden_size=8,
            num_hidden_layers=1, num_attention_heads=2, intermediate_size=16))
        print(json.dumps(model.count_params()))
    """))
    assert found > 0


def test_a_process_with_file_descriptor_2_closed_imports_kerasbert_and_keras():
    done = python(f"""
        import json
        import kerasbert, keras

        print(json.dumps(len(kerasbert.load_model({SAVED!r}).layers)))
    """, close_stderr=True)
    assert done.returncode == 0 and json.loads(done.stdout.splitlines()[-1]) > 10


def test_another_import_finder_reload_and_the_command_line_together():
    found = last_json(python(OTHER_FINDER + textwrap.dedent(f"""
        import contextlib, importlib, io, json
        import kerasbert

        kerasbert = importlib.reload(kerasbert)
        model = kerasbert.load_model({SAVED!r})
        import kerasbert_cli

        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = kerasbert_cli.main(["audit", {CONFIG!r}])
        print(json.dumps({{"layers": len(model.layers) > 10, "code": code,
                          "audit": "every count matches" in out.getvalue()}}))
    """)))
    assert found == {"layers": True, "code": 0, "audit": True}


def test_multiprocessing_spawn_runs_kerasbert_in_its_children(tmp_path):
    script = tmp_path / "spawned.py"
    script.write_text(textwrap.dedent(f"""
        import json, multiprocessing
        import kerasbert

        def layers(path):
            return len(kerasbert.load_model(path).layers)

        if __name__ == "__main__":
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                print(json.dumps(pool.map(layers, [{SAVED!r}])))
    """))
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])[0] > 10


@pytest.mark.parametrize("finder", [False, True], ids=["alone", "with another finder"])
def test_the_command_keeps_tensorflow_start_up_off_stderr(finder):
    """Quiet start-up is the command's: its stderr has no TensorFlow line, even with another
    import finder before kerasbert's, and TensorFlow's lines come back with --verbose."""
    script = (OTHER_FINDER if finder else "") + textwrap.dedent("""
        import sys
        import kerasbert_cli

        sys.exit(kerasbert_cli.main(sys.argv[1:]))
    """)
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("TF_CPP_MIN_LOG_LEVEL", "KERASBERT_DEBUG")}
    for verbose in ([], ["--verbose"]):
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *verbose,
                               "audit", CONFIG], cwd=ROOT, env=environment,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        assert "every count matches" in done.stdout
        if verbose:
            assert "cuda" in done.stderr.lower() or "onednn" in done.stderr.lower()
        else:
            assert done.stderr == ""
