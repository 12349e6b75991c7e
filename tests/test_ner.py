"""Named-entity recognition: tagged files, WordPiece alignment, and whole runs."""

import json
import random

import pytest

from conftest import TINY
from kerasbert import (
    QuestionAnswerer,
    build_transformer_model,
    save_weights_as_checkpoint,
    shipped,
)
from kerasbert.cli.main import main
from kerasbert.tasks import open_run
from kerasbert.tasks.ner import data as ner_data
from kerasbert.tasks.ner.decoding import EntityReader, token_entities
from kerasbert.tasks.ner.entities import entity_scores
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.training.data import DataError
from peers import run_python

SMALL_VOCAB = f"{shipped.model_dir()}/vocab.txt"
TAGS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER", "B-PROD", "I-PROD"]


# ---------------------------------------------------------------------------- reading files
def test_conll_files_give_character_spans_whatever_the_scheme(tmp_path):
    path = tmp_path / "bioes.txt"
    path.write_text("-DOCSTART- O\n\n张 B-PER\n三 E-PER\n在 O\n京 S-LOC\n\n"
                    "New B-ORG\nYork I-ORG\nTimes I-ORG\nsays O\n", encoding="utf-8")
    first, second = ner_data.read_sentences(path)
    assert (first.text, first.entities) == ("张三在京", [("PER", 0, 2), ("LOC", 3, 4)])
    assert (second.text, second.entities) == ("New York Times says", [("ORG", 0, 14)])


def test_jsonl_files_take_objects_or_triples_and_refuse_overlaps(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps({"text": "我在北京", "entities": [{"start": 2, "end": 4,
                                                               "label": "LOC"}]}) + "\n\n"
                    + json.dumps({"text": "王五", "entities": [[0, 2, "PER"]]}) + "\n",
                    encoding="utf-8")
    assert [(s.text, s.entities) for s in ner_data.read_sentences(path)] == [
        ("我在北京", [("LOC", 2, 4)]), ("王五", [("PER", 0, 2)])]
    path.write_text(json.dumps({"text": "北京市", "entities": [[0, 2, "LOC"], [1, 3, "LOC"]]}))
    with pytest.raises(DataError, match=r"spans.jsonl, line 1: entities overlap at character 1"):
        ner_data.read_sentences(path)


@pytest.mark.parametrize("name, content, message", [
    ("a.txt", "张 B-PER\n三\n", r"bad line in .*a.txt, line 2: expected a token and its tag"),
    ("b.txt", "张 B-PER\n三 X-PER\n", r"bad tag in .*b.txt, line 2: 'X-PER' is not a tag"),
    ("c.jsonl", '{"text": "ab", "entities": [[0, 5, "PER"]]}\n',
     r"bad entity in .*c.jsonl, line 1, entities\[0\]: \[0, 5\) is not a span of the "
     "2-character text"),
    ("d.jsonl", '{"text": "ab"}\n{"text": 3}\n', r"bad row in .*d.jsonl, line 2: expected an "
                                                  "object with a string 'text'"),
    ("e.txt", "\n\n", r"data in .*e.txt: no tagged sentence found"),
])
def test_malformed_files_are_refused_naming_file_and_line(tmp_path, name, content, message):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        ner_data.read_sentences(tmp_path / name)


# ------------------------------------------------------------------------------- alignment
def test_tags_follow_the_tokenizer_through_merged_and_deleted_characters():
    tokenizer = Tokenizer(SMALL_VOCAB)
    # "iPhone8" is one word for WordPiece (an entity of its first 6 characters); the space,
    # the zero-width space and the control character are deleted by the tokenizer.
    text = "iPhone8 在\u200b上海\x07卖"
    sentence = ner_data.Sentence(text, [("PROD", 0, 6), ("LOC", 10, 12)])
    ids, tags, spans, lost = ner_data.token_tags(tokenizer, sentence, 64, TAGS)
    assert lost == 0 and len(ids) == len(tags) == len(spans)
    names = [TAGS[t] for t in tags]
    assert names[0] == names[-1] == "O" and spans[0] is spans[-1] is None  # [CLS], [SEP]
    assert [text[a:b] for (a, b), name in zip(spans[1:-1], names[1:-1]) if name != "O"] == [
        "iP", "ho", "ne", "上", "海"]  # the WordPiece pieces of iPhone, then 上海
    assert names[1:4] == ["B-PROD", "I-PROD", "I-PROD"] and "B-LOC" in names
    # Back to characters: token ends, not the entity's own end, where a token covers more.
    assert token_entities(EntityReader(TAGS), [tags], [spans]) == [[("PROD", 0, 6),
                                                                    ("LOC", 10, 12)]]


def test_entities_cut_off_by_maxlen_or_made_of_deleted_characters_are_counted_lost():
    tokenizer = Tokenizer(SMALL_VOCAB)
    sentence = ner_data.Sentence("北京是中国的首都\u200b", [("LOC", 0, 2), ("LOC", 3, 5),
                                                     ("LOC", 8, 9)])
    *_, lost = ner_data.token_tags(tokenizer, sentence, 5, TAGS)  # [CLS] 北 京 是 [SEP]
    assert lost == 2


def test_every_representable_entity_of_the_shipped_split_comes_back_exactly():
    tokenizer = Tokenizer(SMALL_VOCAB)
    sentences = ner_data.read_sentences(shipped.data_file("peoples_daily", "dev"))
    tags = ner_data.tag_names(sentences)
    assert tags == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    rows = [ner_data.token_tags(tokenizer, sentence, 256, tags) for sentence in sentences]
    assert [lost for *_, lost in rows] == [0] * len(sentences)
    found = token_entities(EntityReader(tags), [row[1] for row in rows], [row[2] for row in rows])
    for sentence, entities in zip(sentences, found):
        assert entities == sentence.entities, sentence.text
    truth = [ner_data.char_tags(s.text, s.entities) for s in sentences]
    assert entity_scores(truth, truth)["micro"]["f1"] == 1.0


# ---------------------------------------------------------------------------- whole runs
SURNAMES, GIVEN, PLACES, SUFFIXES = "张王李赵刘", "明华伟芳", "京沪津渝", "市省县"
FILLER = "的了在是我有和就不人都一上也很到说要去你会着没看好自"


def tagged_sentences(count, seed):
    """Sentences of filler characters with persons (a surname and a given name) and places
    (a name and 市, 省 or 县)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        for _ in range(rng.randint(2, 4)):
            kind = rng.choice(["O", "O", "PER", "LOC"])
            if kind == "PER":
                lines += [f"{rng.choice(SURNAMES)} B-PER", f"{rng.choice(GIVEN)} I-PER"]
            elif kind == "LOC":
                lines += [f"{rng.choice(PLACES)} B-LOC", f"{rng.choice(SUFFIXES)} I-LOC"]
            else:
                lines += [f"{rng.choice(FILLER)} O" for _ in range(rng.randint(1, 3))]
        lines.append("")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def ner_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ner")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(
        set(SURNAMES + GIVEN + PLACES + SUFFIXES + FILLER))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = dict(TINY, vocab_size=len(vocab))
    (root / "bert_config.json").write_text(json.dumps(config))
    save_weights_as_checkpoint(build_transformer_model(config), str(root / "bert_model.ckpt"))
    for name, count, seed in (("train", 320, 1), ("dev", 48, 2), ("test", 64, 3)):
        (root / f"{name}.txt").write_text(tagged_sentences(count, seed), encoding="utf-8")
    return {key: str(root / name) for key, name in (
        ("config", "bert_config.json"), ("checkpoint", "bert_model.ckpt"),
        ("vocab", "vocab.txt"), ("train", "train.txt"), ("dev", "dev.txt"),
        ("test", "test.txt"))}


@pytest.mark.slow
@pytest.mark.parametrize("tagger", ["crf", "softmax"])
def test_a_tagger_learns_entities_and_the_command_line_uses_it(ner_inputs, tmp_path, capsys,
                                                                tagger):
    output = tmp_path / "run"
    flags = ["--no-crf"] if tagger == "softmax" else []
    assert main(["train", "--task", "ner", "--output", str(output), "--epochs", "4",
                 "--batch-size", "16", "--lr", "5e-3", "--maxlen", "24", "--seed", "1",
                 "--patience", "0", *flags,
                 *[f"--{key}={value}" for key, value in ner_inputs.items()]]) == 0
    assert "test entity F1" in capsys.readouterr().out
    summary = json.loads((output / "metrics.json").read_text())
    assert summary["test"]["micro"]["f1"] > 0.9, summary["test"]
    run = open_run(output)
    layers = {layer.name for layer in run.model.layers}
    assert ("CRF" in layers) == (tagger == "crf") and "Tagger-Dense" in layers
    # model.keras loads where only kerasbert is imported, in safe mode (kerasbert.load_model).
    loaded = run_python(f"""
        import json, kerasbert
        model = kerasbert.load_model({str(output / "model.keras")!r})
        print(json.dumps(sorted(layer.name for layer in model.layers)))
    """)
    assert set(loaded) == layers

    assert main(["evaluate", "--model", str(output), "--data", ner_inputs["test"],
                 "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["micro"] == summary["test"]["micro"]
    # The summary's dev scores are the best epoch's, kept from training: those of the model
    # the run saved.
    assert main(["evaluate", "--model", str(output), "--data", ner_inputs["dev"],
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["micro"] == summary["dev"]["micro"]
    assert main(["evaluate", "--model", str(output), "--data", ner_inputs["test"],
                 "--skip-bad-rows"]) == 2
    assert capsys.readouterr().err == (
        "kerasbert evaluate: invalid flag in --skip-bad-rows: a ner run's evaluate reads every "
        "row (only classification runs skip bad rows)\n")
    assert main(["predict", "--model", str(output), "我在京市看张明的"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row == {"text": "我在京市看张明的", "entities": [
        {"type": "LOC", "start": 2, "end": 4, "text": "京市"},
        {"type": "PER", "start": 5, "end": 7, "text": "张明"}]}

    # The exported SavedModel finds the entities predict finds, from raw text, in a process
    # that does not import kerasbert; texts beyond maxlen and with characters the
    # vocabulary lacks included.
    texts = [s.text for s in ner_data.read_sentences(ner_inputs["test"])] + [
        "我在京市看张明的", "", "  ", "张明 and 李华 在 沪市!", "Ｘ京市" * 12,
        "e\u0301张明\u200b京县"]
    assert main(["export", "--model", str(output), "--to", str(tmp_path / "served")]) == 0
    assert "saved_model.pb" in capsys.readouterr().out
    served = run_python(f"""
        import json, sys, tensorflow as tf, tensorflow_text  # noqa: F401 (its ops)
        entities = tf.saved_model.load({str(tmp_path / "served" / "1")!r}).signatures["entities"]
        out = {{key: value.numpy().tolist() for key, value in
               entities(text=tf.constant({texts!r})).items()}}
        for key in ("type", "entity"):
            out[key] = [[item.decode("utf-8") for item in row] for row in out[key]]
        out["kerasbert"] = any(name.startswith("kerasbert") for name in sys.modules)
        out["empty"] = {{key: value.shape.as_list() for key, value in
                        entities(text=tf.constant([], tf.string)).items()}}
        print(json.dumps(out))
    """)
    assert not served["kerasbert"]
    assert served["empty"] == {"type": [0, 0], "entity": [0, 0], "start": [0, 0],
                               "end": [0, 0], "count": [0]}
    expected = run.predict(texts=texts)
    assert run.predict(texts=[]) == []
    assert sum(len(row["entities"]) for row in expected) > len(texts)
    for i, row in enumerate(expected):
        count = served["count"][i]
        got = [{"type": served["type"][i][k], "start": served["start"][i][k],
                "end": served["end"][i][k], "text": served["entity"][i][k]}
               for k in range(count)]
        assert got == row["entities"], row["text"]
        assert served["start"][i][count:] == [-1] * (len(served["start"][i]) - count)
    with pytest.raises(ValueError, match="a ner run; QuestionAnswerer takes a run of "
                                         "kerasbert train --task qa"):
        QuestionAnswerer(str(output))

    # tags.json edited after training: refused as changed, and with --accept-changed the
    # mismatch with the model is named instead of failing inside a batch.
    tags = json.loads((output / "tags.json").read_text())
    (output / "tags.json").write_text(json.dumps(tags + ["B-ORG"]))
    assert main(["predict", "--model", str(output), "张明"]) == 2
    assert "run file in" in capsys.readouterr().err
    assert main(["predict", "--model", str(output), "张明", "--accept-changed"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"kerasbert predict: tags in {output / 'tags.json'}: {len(tags) + 1} tags but the model "
        f"has {len(tags)} outputs; is it the run's own file?")
