"""Full-size parameter counts (the published figures) and the audit command."""

import contextlib
import io
import json

import keras
import pytest

import reference as ref
from kerasbert import BertConfig, add_cls_classifier, build_transformer_model
from kerasbert.cli.main import main
from kerasbert.models.audit import audit_model, expected_rows, group_totals
from kerasbert.models.deferred import shapes_only

# Counting needs each weight's shape only: the full-size models are built without values
# (0.1 s for BERT-base, against seconds of drawing 100M random numbers).


def summary_text(model):
    lines = []
    model.summary(print_fn=lambda line, **_: lines.append(line), line_length=120)
    return "\n".join(lines)


@pytest.fixture(scope="module")
def chinese_base():
    keras.utils.clear_session()
    with shapes_only():
        return build_transformer_model(ref.CHINESE_BASE, with_pool=True, with_nsp=True,
                                       with_mlm=True)


def test_chinese_base_summary_reproduces_the_published_counts():
    with shapes_only():
        bert = build_transformer_model(ref.CHINESE_BASE)
        model = add_cls_classifier(bert, num_labels=2)
        pooled = build_transformer_model(ref.CHINESE_BASE, with_pool=True)
    assert bert.count_params() == ref.CHINESE_BASE_ENCODER
    for name, count in ref.CHINESE_BASE_LAYERS.items():
        assert bert.get_layer(name).count_params() == count, name
    assert "Total params: 101,678,594" in summary_text(model)
    assert model.count_params() == ref.CHINESE_BASE_CLS2
    assert "Total params: 102,267,648" in summary_text(pooled)


@pytest.mark.slow
def test_drawn_weights_count_as_weights_without_values():
    """Why slow: one BERT-base with its 100M random values drawn, the way a user builds it,
    so that counting without values is shown to count the same."""
    keras.utils.clear_session()
    bert = build_transformer_model(ref.CHINESE_BASE, with_pool=True)
    assert "Total params: 102,267,648" in summary_text(bert)
    assert bert.count_params() == ref.CHINESE_BASE_POOLER


def test_chinese_base_all_heads(chinese_base):
    config = BertConfig.from_json_file(ref.CHINESE_BASE)
    rows = audit_model(chinese_base, config, with_pool=True, with_nsp=True, with_mlm=True)
    assert all(row.ok for row in rows)
    assert chinese_base.count_params() == ref.CHINESE_BASE_ALL_HEADS
    assert sum(row.expected for row in rows) == ref.CHINESE_BASE_ALL_HEADS


def test_chinese_large_without_pooler():
    keras.utils.clear_session()
    with shapes_only():
        model = build_transformer_model(ref.CHINESE_LARGE)
    assert model.count_params() == ref.CHINESE_LARGE_ENCODER
    assert "Total params: 324,472,832" in summary_text(model)


def test_english_uncased_with_pooler_groups():
    keras.utils.clear_session()
    config = BertConfig.from_json_file(ref.ENGLISH_UNCASED)
    with shapes_only():
        model = build_transformer_model(config, with_pool=True)
    rows = audit_model(model, config, with_pool=True)
    groups = group_totals(rows)
    assert groups["embeddings"] == (ref.ENGLISH_UNCASED_EMBEDDINGS,) * 2
    assert groups["encoder"] == (ref.ENGLISH_UNCASED_ENCODER,) * 2
    assert model.count_params() == ref.ENGLISH_UNCASED_POOLER


def test_expected_counts_need_no_model():
    config = BertConfig.from_json_file(ref.CHINESE_BASE)
    total = lambda **kw: sum(row.expected for row in expected_rows(config, **kw))  # noqa: E731
    assert total() == ref.CHINESE_BASE_ENCODER
    assert total(num_labels=2) == ref.CHINESE_BASE_CLS2
    assert total(with_pool=True) == ref.CHINESE_BASE_POOLER
    assert total(with_pool=True, with_nsp=True, with_mlm=True) == ref.CHINESE_BASE_ALL_HEADS


def test_audit_flags_a_model_that_does_not_match_its_config(tiny_config):
    model = build_transformer_model(tiny_config.replace(vocab_size=101), with_pool=True)
    rows = audit_model(model, tiny_config, with_pool=True, num_labels=2)
    bad = {row.layer: (row.expected, row.actual) for row in rows if not row.ok}
    assert bad == {"Embedding-Token": (1600, 1616), "dense_output": (34, None)}


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_audit_command_prints_summary_and_table(tiny_config_path):
    code, out, _ = run_cli("audit", str(tiny_config_path), "--num-labels", "3", "--with-pool")
    assert code == 0
    assert "Total params:" in out and "Embedding-Token" in out
    assert "Pooler-Dense" in out and "every count matches" in out
    code, out, _ = run_cli("audit", str(tiny_config_path), "--with-mlm")
    assert code == 0 and "MLM-Bias" in out


def test_classifier_refuses_a_model_ending_in_a_pretraining_head(tiny_config_path):
    code, _, err = run_cli("audit", str(tiny_config_path), "--num-labels", "2", "--with-mlm")
    assert code == 2 and "ends in MLM-Activation" in err


def test_audit_command_json(tiny_config_path):
    code, out, _ = run_cli("audit", str(tiny_config_path), "--with-nsp", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"]
    assert report["groups"]["nsp"] == {"expected": 34, "actual": 34}
    assert report["total"]["expected"] == report["total"]["actual"]


def test_audit_command_exits_non_zero_on_a_mismatch(tiny_config_path, monkeypatch):
    import kerasbert.models.audit

    original = kerasbert.models.audit.expected_rows

    def off_by_one(*args, **kwargs):
        rows = original(*args, **kwargs)
        rows[0].expected += 1
        return rows

    monkeypatch.setattr(kerasbert.models.audit, "expected_rows", off_by_one)
    code, out, _ = run_cli("audit", str(tiny_config_path))
    assert code == 1 and "MISMATCH" in out


def test_audit_command_reports_a_bad_config(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text('{"vocab_size": 10,')
    code, _, err = run_cli("audit", str(path))
    assert code == 2 and "invalid JSON" in err and str(path) in err


def test_audit_of_a_lora_model_counts_adapters_and_what_trains_per_row():
    """BERT-base with LoRA r=8 on the queries and values: 2·8·(768+768) = 24,576 adapters
    per layer, 294,912 in all, which train with the classifier's 1,538; nothing else does."""
    code, out, _ = run_cli("audit", ref.CHINESE_BASE, "--num-labels", "2", "--lora", "8",
                           "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"]
    assert report["total"]["actual"] == ref.CHINESE_BASE_CLS2 + 12 * 24_576
    assert report["trainable"] == 12 * 24_576 + 1_538
    attention = next(row for row in report["rows"]
                     if row["layer"] == "Transformer-0-MultiHeadSelfAttention")
    assert attention["formula"] == "4·(H·H+H)+2·r·(H+A)"
    assert (attention["expected_trainable"], attention["trainable"]) == (24_576, 24_576)
    assert all(row["trainable"] == 0 for row in report["rows"]
               if row["group"] == "embeddings" or row["layer"].endswith("FeedForward"))
    code, out, _ = run_cli("audit", ref.CHINESE_BASE, "--num-labels", "2", "--lora", "8")
    assert "trainable 296,450 of 101,973,506 (0.29%), frozen 101,677,056" in out
    code, _, err = run_cli("audit", ref.CHINESE_BASE, "--lora-targets", "query")
    assert code == 2 and "invalid option in --lora-targets: only with --lora" in err
