"""LoRA runs of ``kerasbert train --lora RANK``: every task trains adapters beside a frozen
checkpoint and keeps only them and its head; later commands read the base again, checked by
its fingerprint; export merges the adapters; a killed run resumes bit for bit."""

import json
import os
import shutil
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from conftest import BAD, GOOD, NEUTRAL, TINY, make_rows, write_tsv  # noqa: E402
from kerasbert.cli.main import main  # noqa: E402
from kerasbert.training.rundir import ADAPTERS_FILE, MODEL_FILE  # noqa: E402
from test_kills import TRAIN, kill_at, make_inputs, run_to_end  # noqa: E402
from test_ner import FILLER, GIVEN, PLACES, SUFFIXES, SURNAMES, tagged_sentences  # noqa: E402
from test_qa import squad_file  # noqa: E402
from test_seq2seq import pairs_file  # noqa: E402
from test_similarity import tiny_pairs, write_pairs  # noqa: E402

pytestmark = pytest.mark.slow  # real training runs

SMALL = ["--epochs", "1", "--batch-size", "16", "--lr", "1e-2", "--maxlen", "24",
         "--seed", "1", "--patience", "0"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """One tiny checkpoint (random weights, MLM head and pooler) whose vocabulary covers
    every task's data below."""
    import keras

    from kerasbert import build_transformer_model, save_weights_as_checkpoint

    root = tmp_path_factory.mktemp("lora-base")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "谁", "？"] + sorted(
        set(GOOD + BAD + NEUTRAL + SURNAMES + GIVEN + PLACES + SUFFIXES + FILLER) - {"谁", "？"})
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(TINY, vocab_size=len(vocab))
    (root / "bert_config.json").write_text(json.dumps(config))
    keras.utils.set_random_seed(0)
    save_weights_as_checkpoint(build_transformer_model(config, with_pool=True, with_mlm=True),
                               str(root / "bert_model.ckpt"))
    return root


TASK_FILES = {
    "classification": lambda root, name, n, seed: write_tsv(root / f"{name}.tsv",
                                                           make_rows(n, seed)),
    "ner": lambda root, name, n, seed: _text(root / f"{name}.txt", tagged_sentences(n, seed)),
    "qa": lambda root, name, n, seed: squad_file(root / f"{name}.json", n, seed),
    "similarity": lambda root, name, n, seed: write_pairs(root / f"{name}.tsv",
                                                         tiny_pairs(n, seed)),
    "seq2seq": lambda root, name, n, seed: pairs_file(root / f"{name}.jsonl", n, seed),
}
PREDICT = {"classification": ["好棒"], "ner": ["我在京市看张明的"], "qa": ["谁？", "我看张明的"],
           "similarity": ["好棒", "赞爱"], "seq2seq": ["我看张明的谁？"]}


def _text(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def task_flags(base, root, task):
    root.mkdir(parents=True, exist_ok=True)
    files = {name: TASK_FILES[task](root, name, n, seed)
             for name, n, seed in (("train", 64, 1), ("dev", 16, 2), ("test", 16, 3))}
    return ["--task", task, "--config", str(base / "bert_config.json"),
            "--checkpoint", str(base / "bert_model.ckpt"), "--vocab", str(base / "vocab.txt"),
            *[f"--{name}={path}" for name, path in files.items()],
            *(["--max-new-tokens", "4"] if task == "seq2seq" else [])]


@pytest.mark.parametrize("task", list(TASK_FILES))
def test_every_task_trains_lora_keeps_adapters_and_head_and_predicts(base, tmp_path, capsys,
                                                                     task):
    """Why slow: one real training run per task."""
    from kerasbert.models.lora import adapter_variables
    from kerasbert.tasks import open_run

    output = tmp_path / "run"
    assert main(["train", *task_flags(base, tmp_path / "data", task), *SMALL, "--lora", "2",
                 "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert f"{ADAPTERS_FILE}" in printed and "LoRA rank 2 on the base" in printed
    names = set(os.listdir(output))
    assert ADAPTERS_FILE in names and MODEL_FILE not in names
    assert not any(name.startswith("bert_model.ckpt") for name in names), names
    saved = json.loads((output / "train_config.json").read_text())
    assert saved["lora"] == 2 and saved["checkpoint"] == str(base / "bert_model.ckpt")
    run = open_run(output)
    assert not adapter_variables(run.model)  # merged into the kernels
    assert main(["predict", "--model", str(output), *PREDICT[task]]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])


def test_a_lora_run_is_small_its_merged_model_equals_the_adapted_one_and_it_exports(
        base, tmp_path, capsys):
    """Why slow: a real training run and two SavedModel exports."""
    import keras

    from kerasbert.models.lora import adapter_variables, load_adapted, merged_model
    from kerasbert.models.saved import register_model_objects
    from kerasbert.tasks import open_run

    output = tmp_path / "run"
    assert main(["train", *task_flags(base, tmp_path / "data", "classification"), *SMALL,
                 "--lora", "4", "--lora-targets", "all", "--output", str(output)]) == 0
    capsys.readouterr()
    import h5py

    with h5py.File(output / ADAPTERS_FILE) as file:  # adapters and the head, nothing else
        kept = json.loads(file.attrs["paths"])
    assert all("lora_kernel" in path or path.startswith("dense_output/") for path in kept)
    assert len(kept) == 2 * 6 * TINY["num_hidden_layers"] + 2
    register_model_objects()
    adapted = load_adapted(output / ADAPTERS_FILE, base / "bert_model.ckpt")
    assert len(adapter_variables(adapted)) == 2 * 6 * TINY["num_hidden_layers"]
    # The adapters learnt: B starts at zeros.
    assert any(np.abs(keras.ops.convert_to_numpy(v)).max() > 0
               for v in adapter_variables(adapted) if "lora_kernel_b" in v.path)
    run = open_run(output)
    ids = np.array([[2, 9, 10, 11, 3, 0, 0]] * 2)
    inputs = [ids, np.zeros_like(ids)]
    unmerged = adapted.predict(inputs, verbose=0)
    np.testing.assert_allclose(run.model.predict(inputs, verbose=0), unmerged, atol=1e-6)
    np.testing.assert_allclose(merged_model(adapted).predict(inputs, verbose=0), unmerged,
                               atol=1e-6)
    # model.save merges too (Keras): the .keras file predicts the same.
    adapted.save(tmp_path / "merged.keras")
    reloaded = keras.saving.load_model(tmp_path / "merged.keras")
    np.testing.assert_allclose(reloaded.predict(inputs, verbose=0), unmerged, atol=1e-6)

    assert main(["export", "--model", str(output), "--to", str(tmp_path / "served")]) == 0
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "int8"),
                 "--quantize", "int8"]) == 0
    capsys.readouterr()
    import tensorflow as tf

    texts = tf.constant(["好棒赞", "差烂坏糟", "这个东西"])
    float_out = tf.saved_model.load(str(tmp_path / "served" / "1"))
    int8_out = tf.saved_model.load(str(tmp_path / "int8" / "1"))
    exported = [model.signatures["classify"] for model in (float_out, int8_out)]
    assert main(["predict", "--model", str(output), "好棒赞", "差烂坏糟", "这个东西"]) == 0
    predicted = [json.loads(line)["probability"] for line in capsys.readouterr().out.splitlines()]
    floats, int8s = ({key: value.numpy() for key, value in signature(text=texts).items()}
                     for signature in exported)
    key = "probabilities"
    np.testing.assert_allclose(floats[key].max(axis=-1), predicted, atol=1e-5)
    np.testing.assert_allclose(int8s[key], floats[key], atol=0.05)
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "onnx"),
                 "--format", "onnx", "--quantize", "int8"]) == 2
    assert capsys.readouterr().err == (
        "kerasbert export: invalid flag in --quantize: only with --format saved_model, not "
        "--format onnx (onnx: --int8)\n")


def test_a_changed_or_missing_base_is_refused_in_one_line(base, tmp_path, capsys):
    """Why slow: a real training run."""
    copied = tmp_path / "base"
    shutil.copytree(base, copied)
    output = tmp_path / "run"
    flags = task_flags(copied, tmp_path / "data", "classification")
    assert main(["train", *flags, *SMALL, "--lora", "2", "--output", str(output)]) == 0
    data = copied / "bert_model.ckpt.data-00000-of-00001"
    content = bytearray(data.read_bytes())
    content[-1] ^= 1
    data.write_bytes(bytes(content))
    capsys.readouterr()
    for command in (["predict", "--model", str(output), "好"],
                    ["evaluate", "--model", str(output), "--data", flags[-1].split("=")[1]],
                    ["export", "--model", str(output), "--to", str(tmp_path / "x")]):
        assert main(command) == 2
        assert capsys.readouterr().err == (
            f"kerasbert {command[0]}: base checkpoint in {data}: changed (same size, "
            f"{len(content)} bytes, other content) since the LoRA run trained on it; the run "
            "holds only its adapters and head, which fit that checkpoint alone: put the run's "
            "own checkpoint back, or pass --accept-changed to use this one\n")
    assert not (tmp_path / "x").exists()
    assert main(["predict", "--model", str(output), "--accept-changed", "好"]) == 0
    capsys.readouterr()
    data.unlink()
    assert main(["predict", "--model", str(output), "--accept-changed", "好"]) == 2
    assert capsys.readouterr().err.startswith(
        f"kerasbert predict: base checkpoint in {data}: removed since the LoRA run trained on "
        "it;")


def test_lora_options_are_checked_before_anything_is_written(base, tmp_path, capsys):
    output = tmp_path / "run"
    flags = task_flags(base, tmp_path / "data", "classification")
    no_checkpoint = [flag for i, flag in enumerate(flags)
                     if flag != "--checkpoint" and flags[i - 1] != "--checkpoint"]
    for extra, error in (
            (["--lora-targets", "query"],
             "invalid option in --lora-targets: only with --lora (the adapters' rank)"),
            (["--lora", "0"], "invalid value 0 in --lora: must be an integer of at least 1"),
            (["--lora", "2", "--lora-targets", "querry"],
             "invalid value 'querry' in --lora-targets: must be some of query, key, value, "
             "attention_output, intermediate, output, or all alone")):
        assert main(["train", *flags, *extra, "--output", str(output)]) == 2
        assert capsys.readouterr().err == f"kerasbert train: {error}\n"
    assert main(["train", *no_checkpoint, "--lora", "2", "--output", str(output)]) == 2
    assert capsys.readouterr().err == (
        "kerasbert train: invalid option in --lora: LoRA adapts a pretrained checkpoint, and "
        "this run has none; pass --checkpoint, or train every weight without --lora\n")
    assert not output.exists()


def test_a_killed_lora_run_resumes_bit_exact(tmp_path):
    """Why slow: three real processes: an uninterrupted run, one killed with SIGKILL after
    its first epoch's backup, and the resume."""
    import h5py

    inputs = make_inputs(str(tmp_path / "inputs"))
    args = ["train", *inputs, *TRAIN, "--lora", "2"]
    reference, output = str(tmp_path / "reference"), str(tmp_path / "run")
    code, stderr = run_to_end([*args, "--output", reference])
    assert code == 0, stderr
    kill_at([*args, "--output", output], "epoch-end@2")
    code, stderr = run_to_end([*args, "--output", output, "--resume"])
    assert code == 0, stderr
    with h5py.File(os.path.join(output, ADAPTERS_FILE)) as got, \
            h5py.File(os.path.join(reference, ADAPTERS_FILE)) as want:
        assert got.attrs["paths"] == want.attrs["paths"]
        for name in want:
            assert np.array_equal(got[name][()], want[name][()]), name
    for name in ("history.json", "metrics.json"):
        with open(os.path.join(output, name)) as a, open(os.path.join(reference, name)) as b:
            assert json.load(a) == json.load(b), name
