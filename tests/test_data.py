import numpy as np
import pytest

from kerasbert.training.data import DataError, label_ids, read_examples


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
    (b"label\ttext\npos\t\xe5\xbe\x88\nneg\t\xff\xfe\n", "line 3: invalid UTF-8 byte 0xff"),
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
    with pytest.raises(DataError, match=r"line 1: no column 'text' in the header "
                                        r"\(columns: label, sentence\)"):
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
