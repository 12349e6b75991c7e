import json

import keras
import numpy as np
import pytest

from kerasbert.training.data import DataError, label_ids, read_examples
from kerasbert.training.optimizer import WarmupLinearDecay, make_optimizer


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize("name, content", [
    ("a.tsv", "label\ttext\npos\t很好\nneg\t太差了\n"),
    ("a.csv", 'label,text\npos,很好\nneg,"太差了, 真的"\n'),
    ("a.jsonl", '{"label": "pos", "text": "很好"}\n\n{"label": "neg", "text": "太差了"}\n'),
])
def test_formats_by_extension(tmp_path, name, content):
    examples = read_examples(write(tmp_path, name, content))
    assert examples.labels == ["pos", "neg"]
    assert examples.texts[0] == "很好"


def test_sentence_pairs_and_other_column_names(tmp_path):
    path = write(tmp_path, "p.tsv", "y\tq\tp\n1\t今天天气\t明天下雨\n")
    examples = read_examples(path, text_column="q", pair_column="p", label_column="y")
    assert (examples.texts, examples.pairs, examples.labels) == (["今天天气"], ["明天下雨"], ["1"])


@pytest.mark.parametrize("content, problem", [
    ("label\ttext\npos\t很好\nneg\t\n", "line 3: empty 'text'"),
    ("label\ttext\npos\t很好\n\t不错\n", "line 3: missing label"),
    ("label\ttext\npos\t很好\nneg\t差\t多余\n", "line 3: 3 columns where the header has 2"),
    (b"label\ttext\npos\t\xe5\xbe\x88\nneg\t\xff\xfe\n", "line 3: undecodable bytes"),
])
def test_bad_rows_name_file_line_and_problem(tmp_path, content, problem):
    path = write(tmp_path, "bad.tsv", content)
    with pytest.raises(DataError) as error:
        read_examples(path)
    assert str(path) in str(error.value) and problem in str(error.value)
    examples = read_examples(path, skip_bad_rows=True)
    assert len(examples) == 1 and len(examples.skipped) == 1 and examples.skipped[0][0] == 3


def test_missing_column_is_a_file_error_even_when_skipping(tmp_path):
    path = write(tmp_path, "a.tsv", "label\tsentence\npos\t好\n")
    with pytest.raises(DataError, match=r"line 1: no column 'text' in the header \(columns: label, sentence\)"):
        read_examples(path, skip_bad_rows=True)


def test_bad_json_line_and_unknown_extension(tmp_path):
    with pytest.raises(DataError, match="line 2: invalid JSON"):
        read_examples(write(tmp_path, "a.jsonl", '{"label": "a", "text": "x"}\n{"label": \n'))
    with pytest.raises(DataError, match="unknown file type"):
        read_examples(write(tmp_path, "a.txt", "x"))


def test_unseen_label_names_file_and_line(tmp_path):
    examples = read_examples(write(tmp_path, "dev.tsv", "label\ttext\npos\t好\nmaybe\t一般\n"))
    with pytest.raises(DataError, match=r"dev.tsv, line 3: label 'maybe' was not seen in training"):
        label_ids(examples, ["neg", "pos"])
    np.testing.assert_array_equal(label_ids(examples.__class__(["a"], [None], ["pos"], "x", [2]),
                                            ["neg", "pos"]), [1])


def test_shipped_split_reads_cleanly():
    examples = read_examples("kerasbert/resources/reviews/dev.tsv")
    assert len(examples) == 1736 and not examples.skipped


def test_schedule_shape_and_serialization():
    schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=110)
    values = [float(schedule(step)) for step in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(values, [0, 5e-5, 1e-4, 5e-5, 0, 0], atol=1e-12)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert again.get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupLinearDecay(1e-4, warmup_steps=20, total_steps=10)


def test_optimizer_skips_decay_on_norms_and_biases(tiny_config):
    from kerasbert import build_transformer_model

    model = build_transformer_model(tiny_config)
    optimizer = make_optimizer(model, 1e-4, total_steps=100, gradient_accumulation=2)
    optimizer.build(model.trainable_variables)
    decayed = [v.path for v in model.trainable_variables if optimizer._use_weight_decay(v)]
    assert decayed and all(len(v.shape) == 2 for v in model.trainable_variables
                           if v.path in decayed)
    assert not any("gamma" in p or "bias" in p or "beta" in p for p in decayed)
    assert optimizer.gradient_accumulation_steps == 2


def test_accumulated_run_follows_the_schedule_in_updates(tiny_config):
    """Keras evaluates a schedule at the batch count; with 2 batches per update the rate at
    update k must still be the schedule's value at step k (warm-up 2 updates, end at 10)."""
    from kerasbert import build_transformer_model

    model = build_transformer_model(tiny_config)
    optimizer = make_optimizer(model, 1e-3, total_steps=10, warmup=0.2, gradient_accumulation=2)
    optimizer.build(model.trainable_variables)
    expected = WarmupLinearDecay(1e-3, warmup_steps=2, total_steps=10)
    for update in (0, 1, 2, 6, 10):
        optimizer._iterations.assign(2 * update)  # the batch count Keras keeps
        assert int(optimizer.iterations) == update
        np.testing.assert_allclose(float(optimizer.learning_rate), float(expected(update)),
                                   atol=1e-9)


def test_atomic_writes_leave_no_temporary_and_normal_permissions(tmp_path):
    import os

    from kerasbert.training.reports import write_json

    write_json(tmp_path / "metrics.json", {"accuracy": 1.0})
    assert os.listdir(tmp_path) == ["metrics.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(tmp_path / "metrics.json").st_mode & 0o777 == 0o666 & ~umask
