"""``--mixed-precision float16`` (and ``bfloat16``) for every task, the old switch's runs,
and the choice of 16-bit policy on a machine with or without a GPU.

Every task trains a tiny model in float16 (emulated, slowly, by the CPU) on a few dozen
rows cut from its shipped dataset: the loss falls, the loss scale stays finite, steps are
applied, and the saved weights are float32. The tasks no other file trains in bfloat16 do
so here too.
"""

import dataclasses
import importlib
import itertools
import json
import math
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from conftest import TINY
from kerasbert import build_transformer_model, save_weights_as_checkpoint, shipped
from kerasbert.tasks import options_class
from kerasbert.tasks.base import train
from kerasbert.training.options import (
    FinetuneOptions,
    OptionError,
    precision,
    running_precision,
    validate,
)

TRAIN_ROWS, DEV_ROWS = 48, 8
# Each task's run: small batches and a high rate, so a tiny model's loss falls in two epochs.
RUN = {"epochs": 2, "batch_size": 8, "maxlen": 32, "lr": 1e-2, "patience": 0, "seed": 1,
       "mixed_precision": "float16", "grad_accum": 2}


# ---------------------------------------------------------------------------- the inputs
def _cut_lines(source, target, rows, header=False):
    with open(source, encoding="utf-8") as f:
        lines = list(itertools.islice(f, rows + header))
    target.write_text("".join(lines), encoding="utf-8")
    return str(target)


def _cut_conll(source, target, sentences):
    with open(source, encoding="utf-8") as f:
        text = f.read(200_000)
    target.write_text("\n\n".join(text.split("\n\n")[:sentences]) + "\n", encoding="utf-8")
    return str(target)


def _cut_squad(source, target, paragraphs):
    with open(source, encoding="utf-8") as f:
        squad = json.load(f)
    squad["data"] = [dict(squad["data"][0], paragraphs=squad["data"][0]["paragraphs"][:paragraphs])]
    target.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    return str(target)


def _split(task, split, folder, rows):
    path = shipped.data_file(options_class(task).SHIPPED, split)
    target = folder / f"{task}-{os.path.basename(path)}"
    if task == "ner":
        return _cut_conll(path, target, rows)
    if task == "qa":  # a paragraph holds about ten questions
        return _cut_squad(path, target, max(1, rows // 8))
    return _cut_lines(path, target, rows, header=task in ("classification", "similarity"))


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """A tiny BERT (random weights) over the shipped model's vocabulary."""
    root = tmp_path_factory.mktemp("fp16-model")
    vocab = os.path.join(shipped.model_dir(), "vocab.txt")
    with open(vocab, encoding="utf-8") as f:
        size = sum(1 for _ in f)
    config = dict(TINY, vocab_size=size)
    (root / "bert_config.json").write_text(json.dumps(config))
    keras.utils.set_random_seed(0)
    save_weights_as_checkpoint(build_transformer_model(config, with_pool=True, with_mlm=True),
                               str(root / "bert_model.ckpt"))
    return {"config": str(root / "bert_config.json"),
            "checkpoint": str(root / "bert_model.ckpt"), "vocab": vocab}


class Scale(keras.callbacks.Callback):
    """Keeps the loss scale and the count of applied updates after each epoch."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_epoch_end(self, epoch, logs=None):
        optimizer = self.model.optimizer
        self.seen.append((float(optimizer.dynamic_scale.numpy()),
                          int(optimizer.iterations.numpy())))


def _train_float16(task, model_files, tmp_path, **changes):
    scale = Scale()
    options = options_class(task)(
        output=str(tmp_path / task), **model_files, **{**RUN, **changes},
        train=_split(task, "train", tmp_path, TRAIN_ROWS),
        dev=_split(task, "dev", tmp_path, DEV_ROWS))
    summary = train(options, callbacks=[scale], verbose=0)
    return options, summary, scale.seen


def _losses(output):
    with open(os.path.join(output, "history.csv"), encoding="utf-8") as f:
        rows = [line.split(",") for line in f.read().split()]
    column = rows[0].index("loss")
    return [float(row[column]) for row in rows[1:]]


def _check_float16_run(options, seen):
    losses = _losses(options.output)
    assert losses[-1] < losses[0], f"{options.task}: the loss did not fall: {losses}"
    final_scale, updates = seen[-1]
    assert math.isfinite(final_scale) and final_scale >= 1, seen
    # Keras counts the updates applied; a skipped one is not counted. The first steps may
    # overflow at the initial scale (2 ** 15) and be skipped.
    assert updates > 0, f"{options.task}: every step skipped: {seen}"
    saved = json.loads(open(os.path.join(options.output, "train_config.json")).read())
    assert saved["mixed_precision"] == "float16"
    model = keras.saving.load_model(os.path.join(options.output, "model.keras"))
    assert {weight.dtype for weight in model.weights} == {"float32"}
    assert any(layer.dtype_policy.name == "mixed_float16" for layer in model.layers)
    import tensorflow as tf

    checkpoint = os.path.join(options.output, "bert_model.ckpt")
    dtypes = {tf.train.load_checkpoint(checkpoint).get_variable_to_dtype_map()[name]
              for name, _ in tf.train.list_variables(checkpoint)}
    assert dtypes == {tf.float32}


# ----------------------------------------------------------------------- every task trains
@pytest.mark.parametrize("task", ["classification", "ner", "qa", "similarity", "seq2seq"])
def test_a_float16_run_trains_with_loss_scaling_and_saves_float32(task, model_files, tmp_path):
    # A seq2seq run generates its dev set after each epoch: a few tokens, within 32 positions.
    changes = {"maxlen": 24, "max_new_tokens": 4} if task == "seq2seq" else {}
    options, _, seen = _train_float16(task, model_files, tmp_path, **changes)
    _check_float16_run(options, seen)
    run = importlib.import_module(f"kerasbert.tasks.{task}.task").Run(options.output)
    assert run.evaluate(options.dev)
    if task == "classification":  # the export's graph casts float16 back to float32
        run.export(str(tmp_path / "served"))
        assert list((tmp_path / "served").rglob("saved_model.pb"))


# bfloat16 runs of the tasks no other file trains in bfloat16: classification's is in
# test_finetune.py, seq2seq's and T5's in test_seq2seq.py and test_seq2seq_t5.py.
@pytest.mark.parametrize("task", ["ner", "qa", "similarity"])
def test_a_bfloat16_run_trains_and_saves_float32(task, model_files, tmp_path):
    from kerasbert.hardware import has_fast_bfloat16

    options = options_class(task)(
        output=str(tmp_path / task), **model_files, **{**RUN, "mixed_precision": "bfloat16"},
        train=_split(task, "train", tmp_path, TRAIN_ROWS),
        dev=_split(task, "dev", tmp_path, DEV_ROWS))
    train(options, verbose=0)
    losses = _losses(options.output)
    assert losses[-1] < losses[0], f"{task}: the loss did not fall: {losses}"
    model = keras.saving.load_model(os.path.join(options.output, "model.keras"))
    assert {weight.dtype for weight in model.weights} == {"float32"}
    # Without bfloat16 units the run falls back to float32 (kerasbert.hardware).
    policy = "mixed_bfloat16" if has_fast_bfloat16() else "float32"
    assert any(layer.dtype_policy.name == policy for layer in model.layers)
    run = importlib.import_module(f"kerasbert.tasks.{task}.task").Run(options.output)
    assert run.evaluate(options.dev)


def test_a_float16_t5_run_trains_with_loss_scaling_and_saves_float32(tmp_path):
    import sentencepiece

    from kerasbert.tasks.seq2seq.task import read_pairs
    from kerasbert.text.pieces import SentencePieceText

    pairs = read_pairs(shipped.data_file("peoples_daily_seq2seq", "train"))[:200]
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter([text for pair in pairs for text in (pair.source, pair.target)]),
        model_prefix=str(tmp_path / "spiece"), vocab_size=2000, hard_vocab_limit=False,
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1, minloglevel=2)
    sp_model = str(tmp_path / "spiece.model")
    config = {"vocab_size": SentencePieceText(sp_model).vocab_size, "hidden_size": 16,
              "num_hidden_layers": 1, "num_attention_heads": 2, "attention_head_size": 8,
              "intermediate_size": 32, "hidden_act": ["gelu", "linear"],
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
              "model_type": "t5.1.1"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    keras.utils.set_random_seed(0)
    t5 = build_transformer_model(str(tmp_path / "config.json"), return_keras_model=False)
    t5.save_weights_as_checkpoint(str(tmp_path / "model.ckpt"))
    files = {"config": str(tmp_path / "config.json"), "checkpoint": str(tmp_path / "model.ckpt"),
             "vocab": None, "sp_model": sp_model}
    options, _, seen = _train_float16("seq2seq", files, tmp_path, max_new_tokens=4)
    _check_float16_run(options, seen)


def test_under_two_replicas_the_inner_optimizer_clips_the_summed_gradient():
    """Under a mirrored strategy the clipping moves after the sum of the replicas' parts
    (:func:`kerasbert.training.distribute.fit_under`): in a LossScaleOptimizer, onto the
    inner optimizer, which clips the unscaled gradient."""
    from peers import run_python

    got = run_python("""
        import json, sys, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        sys.path.insert(0, "tests")
        from conftest import TINY
        from kerasbert import build_transformer_model, internals
        from kerasbert.models.heads import add_cls_classifier
        from kerasbert.training import distribute
        from kerasbert.training.optimizer import make_optimizer
        strategy = distribute.make_strategy("mirrored")
        with strategy.scope():
            model = add_cls_classifier(build_transformer_model(
                dict(TINY), dtype="mixed_float16"), 2)
            model.compile(optimizer=make_optimizer(model, 1e-3, 10),
                          loss="sparse_categorical_crossentropy")
            distribute.fit_under(model, strategy)
        print(json.dumps([type(model.optimizer).__name__, strategy.num_replicas_in_sync,
                          internals.installed_hooks(model.optimizer.inner_optimizer)]))
    """)
    assert got == ["LossScaleOptimizer", 2, ["_all_reduce_sum_gradients", "_clip_gradients"]]


# ------------------------------------------------------------------- the option's values
def test_the_old_switch_reads_as_bfloat16_and_values_are_refused_by_name():
    assert precision(True) == "bfloat16" and precision(False) is None
    assert FinetuneOptions(output="x", mixed_precision=True).mixed_precision == "bfloat16"
    assert FinetuneOptions(output="x", mixed_precision=False).mixed_precision is None
    with pytest.raises(OptionError, match=r"invalid value 'fp16' in mixed_precision: must be "
                                          r"one of bfloat16, float16"):
        validate(FinetuneOptions(output="x", task="classification", mixed_precision="fp16"))


def _parsed(*flags):
    from kerasbert.cli.main import make_parser
    from kerasbert.tasks.options import options_from_arguments

    parser = make_parser()
    arguments = parser.parse_args(["train", "--output", "x", *flags])
    return options_from_arguments(arguments).mixed_precision


def test_a_bare_flag_means_bfloat16_and_a_value_chooses():
    assert _parsed() is None
    assert _parsed("--mixed-precision") == "bfloat16"
    assert _parsed("--mixed-precision", "--epochs", "1") == "bfloat16"
    assert _parsed("--mixed-precision", "float16") == "float16"
    assert _parsed("--mixed-precision=bfloat16") == "bfloat16"


@pytest.mark.parametrize("value", ["fp16", "float32", "true"])
def test_a_misspelt_value_is_refused_by_the_command_line(value, tmp_path):
    probe = ("import sys, kerasbert_cli\n"
             "sys.exit(kerasbert_cli.main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", probe, "train", "--output", "out",
                           "--mixed-precision", value], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": os.path.dirname(
                              os.path.dirname(os.path.abspath(__file__)))})
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"kerasbert train: invalid value '{value}' in --mixed-precision: choose from "
        "'bfloat16', 'float16'"]
    assert not os.listdir(tmp_path)


def test_an_old_runs_switch_evaluates_and_resumes_as_bfloat16(finished_run, tmp_path):
    """A run saved with ``"mixed_precision": true`` (before float16 was offered) opens as a
    bfloat16 run, and ``--resume`` compares its options as today's."""
    import shutil

    from kerasbert.tasks.classification.task import Run
    from kerasbert.training.fingerprints import record_outputs
    from kerasbert.training.rundir import RunDirectory

    output, _ = finished_run
    old = tmp_path / "old"
    shutil.copytree(output, old)
    path = old / "train_config.json"
    saved = json.loads(path.read_text())
    path.write_text(json.dumps(dict(saved, mixed_precision=True, output=str(old))))
    record_outputs(str(old), "metrics.json")
    run = Run(str(old))
    assert run.options.mixed_precision == "bfloat16"
    assert run.evaluate(saved["test"])["accuracy"] > 0.9
    assert [row["label"] for row in run.predict(["好好好这个", "差差差这个"])] == [
        "positive", "negative"]
    # As train() compares them: the precision this machine runs.
    options = running_precision(dataclasses.replace(run.options, output=str(old),
                                                    mixed_precision="bfloat16"))
    RunDirectory(str(old), "train_config.json", "metrics.json")._check_same_options(options)
    with pytest.raises(Exception,
                       match=r"mixed_precision \(('bfloat16'|None) -> 'float16'\)"):
        RunDirectory(str(old), "train_config.json", "metrics.json")._check_same_options(
            dataclasses.replace(options, mixed_precision="float16"))


# ----------------------------------------------------------- the policy a machine runs
@pytest.mark.parametrize("policy, flags, gpus, expected, warned", [
    ("mixed_bfloat16", {"avx2"}, (), "float32", "no hardware bfloat16"),
    ("mixed_bfloat16", {"avx512_bf16"}, (), "mixed_bfloat16", None),
    # A GPU computes the model: the CPU's flags choose nothing.
    ("mixed_bfloat16", {"avx2"}, ["/physical_device:GPU:0"], "mixed_bfloat16", None),
    ("bfloat16", {"avx2"}, ["/physical_device:GPU:0"], "bfloat16", None),
    ("mixed_float16", {"avx512_bf16"}, (), "mixed_float16", "emulated"),
    ("mixed_float16", {"avx2"}, ["/physical_device:GPU:0"], "mixed_float16", None),
    (None, {"avx2"}, (), None, None),
])
def test_the_policy_follows_the_device(policy, flags, gpus, expected, warned, caplog):
    from kerasbert import hardware

    with caplog.at_level("WARNING", logger="kerasbert"):
        assert hardware.compute_policy(policy, "--mixed-precision", flags=frozenset(flags),
                                       gpus=gpus) == expected
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == (warned is not None), messages
    if warned:
        assert warned in messages[0] and "--mixed-precision" in messages[0]


def test_a_visible_gpu_keeps_a_bfloat16_run_on_a_cpu_without_bfloat16(monkeypatch,
                                                                    tiny_config_path):
    from kerasbert import hardware
    from kerasbert.models import names
    from kerasbert.tasks.classification.options import ClassificationOptions
    from kerasbert.tasks.classification.task import build_classifier

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))
    monkeypatch.setattr(hardware, "visible_gpus", lambda: ["/physical_device:GPU:0"])
    options = ClassificationOptions(output="unused", config=str(tiny_config_path),
                                    mixed_precision="bfloat16").resolved()
    model = build_classifier(running_precision(options), 2)
    assert model.get_layer(names.attention_name(0)).dtype_policy.name == "mixed_bfloat16"


def test_a_run_records_the_precision_that_ran(monkeypatch, tiny_run_inputs, tmp_path, capsys):
    """``--mixed-precision bfloat16`` on a CPU without bfloat16 units runs in float32, says so
    once, and records float32 (null) in train_config.json; the same command resumes it, as
    it does an older run that recorded bfloat16 where it ran float32."""
    from kerasbert import hardware
    from kerasbert.cli.main import main
    from kerasbert.models import names
    from kerasbert.tasks.classification.task import Run
    from kerasbert.training.rundir import RunDirectory

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    monkeypatch.setattr(hardware, "visible_gpus", lambda: [])
    output = tmp_path / "run"
    argv = ["train", "--output", str(output), "--epochs", "1", "--maxlen", "16",
            "--mixed-precision", "bfloat16",
            *(f"--{key}={value}" for key, value in tiny_run_inputs.items())]
    assert main(argv) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "bfloat16" in line]
    assert warnings == ["kerasbert train: warning: --mixed-precision: this CPU has no hardware "
                        "bfloat16 (AVX-512 BF16, AMX or ARM BF16), where mixed_bfloat16 runs "
                        "slower than float32; running in float32"]
    saved = json.loads((output / "train_config.json").read_text())
    assert saved["mixed_precision"] is None
    model = Run(str(output)).model
    assert model.get_layer(names.attention_name(0)).dtype_policy.name == "float32"
    asked = running_precision(dataclasses.replace(Run(str(output)).options,
                                                  mixed_precision="bfloat16"), warn=False)
    directory = RunDirectory(str(output), "train_config.json", "metrics.json")
    directory._check_same_options(asked)  # what --resume compares
    (output / "train_config.json").write_text(json.dumps(dict(saved, mixed_precision="bfloat16")))
    directory._check_same_options(asked)


def test_dropout_draws_floats_where_a_gpu_computes(monkeypatch):
    """A GPU has few kernels for the 16-bit draws of the CPU's dropout: there it draws a
    float per element, from the same seed the same mask (a recomputed layer's)."""
    from kerasbert import hardware
    from kerasbert.models.kernels import Dropout

    monkeypatch.setattr(hardware, "visible_gpus", lambda: ["/physical_device:GPU:0"])
    layer = Dropout(0.25, seed=3)
    x = keras.ops.ones((64, 256), "float16")
    seed = layer.next_seed()
    first, again = (np.asarray(layer.seeded(seed)(x, training=True)) for _ in range(2))
    np.testing.assert_array_equal(first, again)
    assert 0.23 < float(np.mean(first == 0)) < 0.27
    assert set(np.unique(first)) == {0, np.float16(1 / 0.75)}


def test_the_vocabulary_softmax_and_the_scores_stay_float32(tiny_config):
    """The MLM head's softmax in float32: in float16 the small probabilities round to 0."""
    from kerasbert.models import names

    bert = build_transformer_model(tiny_config, with_mlm=True, dtype="mixed_float16")
    assert bert.get_layer(names.MLM_ACTIVATION).compute_dtype == "float32"
    assert bert.outputs[0].dtype == "float32"
    ids = np.ones((2, 8), "int32")
    probabilities = np.asarray(bert([ids, np.zeros_like(ids)]))
    assert np.isfinite(probabilities).all() and probabilities.min() > 0
