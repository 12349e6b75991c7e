"""Every benchmark suite answers one protocol: ``run(options, log) -> section``.

The workers are stubbed (no model is built, nothing is timed), so these tests check the
plumbing in seconds: each suite the runner lists imports, takes ``(options, log)``, returns
tables that print with rows in them, and the runner reports a missing peer as skipped and a
crash as failed. The subprocess helper every suite uses, ``bench.worker.run_python``, and the
worker module itself are run for real on cheap cases.
"""

import copy
import importlib
import inspect
import json
import os

import pytest

from bench import cli, runner, worker

OPTIONS = runner.Options(warmup=0, repeats=1, rounds=1, limit=50, peers=False, max_wait=0)
TIMING = {"median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0, "repeats": 1}
SHAPES = ("8x128", "1x32", "32x64")
# One stand-in result with every figure a worker or script of bench/ reports.
FIGURES = {
    "label": "stub",
    # forward, ablation, serving
    "timings": {shape: dict(TIMING) for shape in SHAPES + ("1", "8")},
    # generate: the new ids per batch size
    "outputs": {"1": [[5, 6]], "8": [[5, 6]] * 8},
    "max_difference": dict.fromkeys(SHAPES, 1e-6),
    # gemm
    "gflops": {"8x128": 100.0, "1x32": 50.0}, "square_gflops": 200.0,
    # build
    "seconds": 1.5, "peak_mb": 800.0, "params": 102_267_648,
    # bf16: the two policies, then the classifier
    "max_abs": 0.01, "mean_abs": 0.001, "relative_rms": 0.002, "min_sentence_cosine": 0.9999,
    "fp32_vs_hf_max_abs": 1e-6, "run": "runs/demo-stub", "examples": 100, "agreement": 0.99,
    "disagreements": 1, "fp32_accuracy": 0.9, "fast_accuracy": 0.9, "max_abs_probability": 0.01,
    "mode": "bf16",
    # train: its prepare worker, then each implementation; serving's prepare
    "path": "stub.npz", "mean_tokens": 60.0, "median_tokens": 55, "truncated": 3,
    "epoch_seconds": [2.0, 1.9], "epoch_cores": [1.9, 1.8], "samples_per_s": 320.0,
    "folder": "stub",
    # load: the checkpoint writer, then each build + load script
    "checkpoint_mb": 392.0, "build_s": 3.1, "load_s": 0.3, "baseline_mb": 500.0,
    "built_mb": 900.0,
    # lora
    "step_ms": 900.0, "trainable": 296_450, "parameters": 101_973_506, "kept_mb": 1.2,
    # long_quality
    "dev_accuracy": 0.75, "chance": 0.5, "train_loss": [0.7, 0.6],
    # tokenize
    "methods": {"kerasbert Tokenizer.encode (loop)": {"seconds": 0.5, "digests": [1, 2]},
                "tokenizers engine encode_batch_fast": {"seconds": 0.25, "digests": [1, 3]}},
}


class StubPython:
    """Stands in for ``worker.run_python``: records each call, answers with ``answer(call)``."""

    def __init__(self, answer=lambda call: copy.deepcopy(FIGURES)):
        self.answer, self.calls = answer, []

    def __call__(self, code=None, module=None, args=(), env=None, timeout=900, cwd=None,
                 stdin=None):
        if module == "bench.worker":
            call = {"suite": args[0], "name": args[1], "kwargs": json.loads(args[2]), "env": env}
        else:
            call = {"code": code, "args": list(args), "env": env}
        self.calls.append(call)
        return self.answer(call)


@pytest.fixture
def stub(monkeypatch):
    python = StubPython()
    monkeypatch.setattr(worker, "run_python", python)
    return python


@pytest.mark.parametrize("name", runner.ALL_SUITES)
def test_every_suite_takes_options_and_log(name):
    module = importlib.import_module(f"bench.{name}")
    assert list(inspect.signature(module.run).parameters) == ["options", "log"], name


def test_every_module_with_a_run_is_a_listed_suite():
    import pkgutil

    import bench

    modules = [info.name for info in pkgutil.iter_modules(bench.__path__)]
    suites = [name for name in modules if hasattr(importlib.import_module(f"bench.{name}"), "run")]
    assert sorted(suites) == sorted(runner.ALL_SUITES)


def test_every_suite_runs_alone_as_python_m_bench_dot_suite():
    """``python -m bench --help`` offers ``python -m bench.<suite>``: each one answers (a
    module without its main block did nothing, silently)."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in runner.ALL_SUITES:
        done = subprocess.run([sys.executable, "-m", f"bench.{name}", "--help"], cwd=root,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"usage: python -m bench.{name} "), (name, done.stdout)


@pytest.mark.parametrize("name", runner.ALL_SUITES)
def test_every_suite_runs_and_prints_its_tables(name, stub):
    log, written = [], []
    section = importlib.import_module(f"bench.{name}").run(OPTIONS, log.append)
    json.dumps(section["results"])  # the report is JSON
    assert log and all(isinstance(line, str) for line in log)
    assert stub.calls, f"{name} measured nothing through bench.worker.run_python"
    assert section["tables"]
    runner.print_section({"suite": name, **section}, written.append)
    text = "\n".join(written)
    for table in section["tables"]:
        assert table["rows"], table["title"]
        assert f"### {table['title']}" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 2, text  # a heading and at least one row
    assert "skipped:" not in text and "failed:" not in text, text


def test_the_runner_process_stays_free_of_tensorflow():
    # A child's peak memory (load, build) starts from its parent's: the parent must stay small.
    loaded = worker.run_python("""
        import importlib, json, sys
        from bench import cli, runner
        for name in runner.ALL_SUITES:
            importlib.import_module(f"bench.{name}")
        print(json.dumps(sorted(m for m in ("tensorflow", "keras", "kerasbert", "torch")
                                if m in sys.modules)))
    """)
    assert loaded == []


def test_forward_takes_the_gemm_limit_of_the_suite_before_it(stub):
    written = []
    sections = runner.run_suites(["gemm", "forward"], OPTIONS, lambda line: None, written.append)
    assert "limit_ms" in sections["forward"]["tables"][0]
    assert sections["forward"]["tables"][0]["limit_ms"] is not None
    kerasbert = next(row for row in sections["forward"]["tables"][0]["rows"]
                     if row["name"] == "kerasbert")
    assert kerasbert["of_gemm_limit"].endswith("%")
    assert {call["kwargs"]["repeats"] for call in stub.calls if call["suite"] == "forward"} == {1}


def test_train_rounds_take_turns_and_keep_each_implementations_faster_round(monkeypatch):
    speeds = iter([100.0, 90.0, 80.0, 120.0])  # kerasbert, bert4keras, then round 2

    def answer(call):
        figures = copy.deepcopy(FIGURES)
        if call["name"] != "prepare":
            figures["samples_per_s"] = next(speeds)
        return figures

    python = StubPython(answer)
    monkeypatch.setattr(worker, "run_python", python)
    options = runner.Options(only=("kerasbert", "bert4keras"), rounds=2, max_wait=0)
    section = importlib.import_module("bench.train").run(options, lambda line: None)
    assert [call["name"] for call in python.calls] == [
        "prepare", "kerasbert", "bert4keras", "kerasbert", "bert4keras"]
    assert {name: result["samples_per_s"] for name, result in section["results"].items()} == {
        "kerasbert": 100.0, "bert4keras": 120.0}
    assert "the faster of 2 rounds" in section["tables"][0]["title"]


def test_only_picks_implementations_and_a_bert4keras_worker_runs_on_tf_keras(stub):
    options = runner.Options(only=("bert4keras", "kerasbert"), max_wait=0)
    section = importlib.import_module("bench.forward").run(options, lambda line: None)
    assert list(section["results"]) == ["bert4keras", "kerasbert"]
    env = {call["name"]: call["env"] for call in stub.calls}
    assert env["bert4keras"]["TF_KERAS"] == "1" and env["kerasbert"]["TF_KERAS"] is None


def test_only_naming_none_of_a_suite_skips_it(stub):
    options = runner.Options(only=("no-such-thing",), max_wait=0)
    section = runner.run_suite("serving", options, lambda line: None)
    assert "no-such-thing" in section["skipped"] and not stub.calls


def test_a_missing_peer_is_a_skipped_row_not_a_failure(monkeypatch):
    def answer(call):
        if call["name"] == "keras-hub":
            return {"skipped": "keras_hub is not installed"}
        return copy.deepcopy(FIGURES)

    monkeypatch.setattr(worker, "run_python", StubPython(answer))
    section = runner.run_suite("forward", OPTIONS, lambda line: None)
    written = []
    runner.print_section(section, written.append)
    assert "skipped: keras_hub is not installed" in "\n".join(written)
    assert "failed_workers" not in section and "failed" not in section


def test_a_crashed_worker_fails_the_run(monkeypatch, tmp_path):
    def answer(call):
        if call["name"] == "float32":
            raise worker.WorkerError("exited with status 1: MemoryError", "Traceback\nMemoryError")
        return copy.deepcopy(FIGURES)

    monkeypatch.setattr(worker, "run_python", StubPython(answer))
    out = tmp_path / "bench.json"
    status = cli.main(["gemm", "--json", str(out), "--max-wait", "0", "--max-load", "1000"])
    report = json.loads(out.read_text())
    assert status == 1
    assert report["suites"]["gemm"]["failed_workers"] == ["float32"]
    assert "MemoryError" in report["suites"]["gemm"]["results"]["float32"]["failed"]


def test_a_suite_that_raises_is_failed_and_one_that_cannot_run_is_skipped(monkeypatch):
    gemm = importlib.import_module("bench.gemm")

    def broken(options, log):
        raise ValueError("no such shape: 0x0")

    def absent(options, log):
        raise runner.Skipped("tensorflow is not installed")

    log = []
    monkeypatch.setattr(gemm, "run", broken)
    assert runner.run_suite("gemm", OPTIONS, log.append)["failed"] == \
        "ValueError: no such shape: 0x0"
    assert any("Traceback" in line for line in log)
    monkeypatch.setattr(gemm, "run", absent)
    assert runner.run_suite("gemm", OPTIONS, log.append)["skipped"] == \
        "tensorflow is not installed"


def test_the_command_line_names_every_suite():
    text = cli.build_parser().format_help()
    assert all(name in text for name in runner.ALL_SUITES)
    with pytest.raises(SystemExit):
        cli.main(["no-such-suite"])


# --- the subprocess helper and the worker module, for real -----------------------------------


def test_run_python_returns_the_last_json_line(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_TEST_REMOVED", "here")
    value = worker.run_python("""
        import json, os, sys
        print("noise first")
        print(json.dumps([sys.argv[1:], os.environ.get("BENCH_TEST_SET"),
                          os.environ.get("BENCH_TEST_REMOVED"), os.getcwd(), sys.stdin.read()]))
    """, args=[1, "b"], env={"BENCH_TEST_SET": "x", "BENCH_TEST_REMOVED": None}, cwd=tmp_path,
        stdin="input")
    assert value == [["1", "b"], "x", None, str(tmp_path), "input"]


def test_run_python_failures_carry_the_stderr_tail():
    with pytest.raises(worker.WorkerError) as failed:
        worker.run_python("import sys; print('last words', file=sys.stderr); sys.exit(3)")
    assert "status 3" in failed.value.reason and "last words" in failed.value.reason
    with pytest.raises(worker.WorkerError, match="not a JSON line"):
        worker.run_python("print('hello')")
    with pytest.raises(worker.WorkerError, match="timed out after 1 s"):
        worker.run_python("import time; time.sleep(30)", timeout=1)
    with pytest.raises(ValueError, match="code or module"):
        worker.run_python("print(1)", module="bench.worker")


def test_the_worker_module_reports_skipped_and_failed_workers():
    log = []
    # bench.build's bert4keras worker refuses to run outside tf-keras: a skip, not a crash.
    skipped = runner.run_worker("build", "bert4keras", {}, OPTIONS, log.append)
    assert "TF_KERAS=1" in skipped["skipped"]
    failed = runner.run_worker("build", "no-such-worker", {}, OPTIONS, log.append)
    assert "KeyError" in failed["failed"] and any("Traceback" in line for line in log)


# --- long: which cells run, how a cell is stopped, and the quick mode for real ----------------


@pytest.mark.parametrize("onednn", ["1", "0"])
def test_long_says_why_a_cell_has_no_allocator_figure(onednn):
    """Where TensorFlow keeps no CPU allocator statistics (its oneDNN path off, the default
    on CPUs without AVX-512 VNNI/BF16 or AMX) a cell's JSON says so in one line."""
    found = worker.run_python("""
        import json
        from bench.long import _tf_allocator_peak
        print(json.dumps(_tf_allocator_peak()))
    """, env={"TF_ENABLE_ONEDNN_OPTS": onednn, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if onednn == "1":
        assert isinstance(found["tf_allocator_peak_mb"], float) and len(found) == 1
    else:
        assert found["tf_allocator_peak_mb"] is None
        assert found["tf_allocator_missing"].startswith("TensorFlow keeps no allocator")


def test_long_skips_the_cells_a_stopped_one_rules_out(monkeypatch):
    """A cell that did not fit (or was killed by the system) rules out every cell at least as
    long and as large; the fit table keeps what ran."""
    def answer(call):
        kwargs = call["kwargs"]
        if call["name"] == "kerasbert" and kwargs["shape"] == "small":
            if (kwargs["length"], kwargs["batch"]) == (1024, 2):
                return {"does_not_fit": "resident memory passed 20 GiB", "peak_mb": 20480.0}
            if (kwargs["length"], kwargs["batch"]) == (512, 8):
                raise worker.WorkerError("python -m bench.worker exited with status -9: ")
        return copy.deepcopy(FIGURES)

    python = StubPython(answer)
    monkeypatch.setattr(worker, "run_python", python)
    options = runner.Options(only=("kerasbert",), max_wait=0)
    section = importlib.import_module("bench.long").run(options, lambda line: None)
    ran = {(c["kwargs"]["length"], c["kwargs"]["batch"]) for c in python.calls
           if c["kwargs"]["shape"] == "small"}
    assert ran == {(512, 1), (512, 2), (512, 4), (512, 8), (1024, 1), (1024, 2), (2048, 1),
                   (4096, 1)}
    assert "system" in section["results"]["small/kerasbert/512x8"]["does_not_fit"]
    fits = next(table for table in section["tables"] if "longest" in table["title"]
                and "zh-small" in table["title"])["rows"]
    assert fits == [{"way": "kerasbert", "b1": "4,096", "b2": "512 (1,024: does not fit)",
                     "b4": "512 (1,024: not run)", "b8": "none (512: does not fit)"}]
    # A run cut short keeps its figures in the log: the same results come back from it.
    lines = [f"[bench] long: cell {json.dumps({'cell': key, **result})}"
             for key, result in section["results"].items()]
    rebuilt = importlib.import_module("bench.long").from_log(["noise"] + lines)
    assert rebuilt["results"] == section["results"]
    assert any(row.get("way") == "kerasbert" and row.get("b2") == fits[0]["b2"]
               for table in rebuilt["tables"] for row in table["rows"])


def test_long_runs_only_the_shapes_and_batches_asked_for(monkeypatch):
    python = StubPython(lambda call: copy.deepcopy(FIGURES))
    monkeypatch.setattr(worker, "run_python", python)
    options = runner.Options(only=("hf-torch-checkpointing-eager",), shapes=("base",),
                             batches=(1, 8), max_wait=0)
    section = importlib.import_module("bench.long").run(options, lambda line: None)
    assert sorted(section["results"]) == sorted(
        f"base/hf-torch-checkpointing-eager/{length}x{batch}"
        for length in (512, 1024, 2048, 4096) for batch in (1, 8))
    assert {c["name"] for c in python.calls} == {"hf-torch-checkpointing-eager"}
    for wrong in ({"shapes": ("large",)}, {"batches": (3,)}):
        with pytest.raises(runner.Skipped, match="large|3"):
            importlib.import_module("bench.long").run(
                runner.Options(max_wait=0, **wrong), lambda line: None)


def test_long_watchdog_stops_a_cell_past_its_memory_or_time():
    stopped = worker.run_python("""
        import json, time
        from bench import long
        long._Watchdog(long._rss_mb() + 64, 60, {"label": "stub"})
        block = bytearray(256 * 2**20)  # zero-filled: every page touched
        time.sleep(30)
        print(json.dumps("never"))
    """, timeout=60)
    assert stopped["label"] == "stub" and "passed" in stopped["does_not_fit"]
    assert stopped["peak_mb"] > 64
    slow = worker.run_python("""
        import json, time
        from bench import long
        long._Watchdog(1e9, 0.5, {"label": "stub"})
        time.sleep(30)
    """, timeout=60)
    assert "not done after" in slow["too_slow"] and 0.5 <= slow["seconds"] < 30


def test_long_quick_trains_for_real_past_the_position_table():
    """Why slow: two fresh processes import TensorFlow and trace a training step with
    recomputation (10 to 40 s each, as busy as the cores are)."""
    section = importlib.import_module("bench.long").run(
        runner.Options(quick=True, only=("kerasbert-recompute",), max_wait=0), lambda line: None)
    results = section["results"]
    assert sorted(results) == ["tiny/kerasbert-recompute/128x1", "tiny/kerasbert-recompute/64x1"]
    for key, result in results.items():
        assert result["samples_per_s"] > 0 and result["peak_mb"] > 100, (key, result)
        assert len(result["losses"]) == 1 + importlib.import_module("bench.long").STEPS
    # 128 tokens is past the tiny model's 64 positions: kerasbert stretches them.
    assert "hierarchical" in results["tiny/kerasbert-recompute/128x1"]["label"]
    assert "hierarchical" not in results["tiny/kerasbert-recompute/64x1"]["label"]
