"""Labelled files and corpora: what each format accepts, and the one-line error for what it refuses.

The rules are those of docs/data_formats.md: CSV is RFC 4180, TSV has no quoting, JSONL holds
one object per line with string texts, labels are stripped, texts are kept as written.
"""

import logging

import pytest

from kerasbert.pretraining.corpus import read_corpus
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.training.data import DataError, Examples, keep_known_labels, label_ids, read_examples


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def error_of(path, exception=DataError, **kwargs):
    with pytest.raises(exception) as caught:
        read_examples(path, **kwargs)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


# --- CSV: RFC 4180 -------------------------------------------------------------------------

def test_csv_quoted_newline_is_one_row_and_later_lines_stay_right(tmp_path):
    path = write(tmp_path, "a.csv",
                 'label,text\npos,"第一行\n第二行"\nneg,"a, b"\nneg,"say ""hi"""\n')
    examples = read_examples(path)
    assert examples.texts == ["第一行\n第二行", "a, b", 'say "hi"']
    assert examples.labels == ["pos", "neg", "neg"]
    assert examples.lines == [2, 4, 5]


def test_csv_quoted_newline_with_skip_bad_rows_is_no_garbage_row(tmp_path):
    path = write(tmp_path, "a.csv", 'label,text\npos,"one\ntwo"\nneg,three\n')
    examples = read_examples(path, skip_bad_rows=True)
    assert examples.texts == ["one\ntwo", "three"] and examples.skipped == []


def test_csv_bad_record_after_a_multi_line_record_names_its_first_line(tmp_path):
    path = write(tmp_path, "a.csv", 'label,text\npos,"a\nb\nc"\nneg,"d\ne",extra\npos,f\n')
    assert f"bad row in {path}, line 5: 3 columns where the header has 2" == error_of(path)
    examples = read_examples(path, skip_bad_rows=True)
    assert examples.lines == [2, 7] and examples.skipped == [
        (5, "3 columns where the header has 2")]


def test_csv_unclosed_quote_is_a_bad_row_not_the_rest_of_the_file(tmp_path):
    path = write(tmp_path, "a.csv", 'label,text\npos,good\nneg,"never closed\npos,x\n')
    assert "a.csv, line 3: a quoted field is never closed" in error_of(path)
    examples = read_examples(path, skip_bad_rows=True)
    assert examples.texts == ["good"] and [line for line, _ in examples.skipped] == [3]


def test_csv_text_after_a_closing_quote_is_a_bad_row_and_reading_goes_on(tmp_path):
    path = write(tmp_path, "a.csv", 'label,text\npos,"quoted"tail\nneg,fine\n')
    assert "a.csv, line 2: text after the closing quote of a field" in error_of(path)
    examples = read_examples(path, skip_bad_rows=True)
    assert examples.texts == ["fine"] and examples.lines == [3]


def test_csv_header_names_are_stripped_and_rows_of_empty_fields_skipped(tmp_path):
    path = write(tmp_path, "a.csv", "label, text\npos, 好\n,\nneg,差\n")
    examples = read_examples(path)
    assert examples.texts == [" 好", "差"] and examples.lines == [2, 4]


def test_duplicate_text_column_in_the_header_is_refused(tmp_path):
    path = write(tmp_path, "a.csv", "label,text,text\npos,a,b\n")
    assert error_of(path) == f"header row in {path}, line 1: column 'text' appears 2 times"


# --- line endings ---------------------------------------------------------------------------

@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_every_line_ending_counts_lines(tmp_path, ending):
    content = ending.join(["label\ttext", "pos\t好", "", "neg\t差", "neg\t", ""])
    path = write(tmp_path, "a.tsv", content)
    assert f"bad row in {path}, line 5: empty 'text'" == error_of(path)
    examples = read_examples(path, skip_bad_rows=True)
    assert examples.texts == ["好", "差"] and examples.lines == [2, 4]


@pytest.mark.parametrize("ending", ["\r", "\r\n"])
def test_csv_keeps_a_quoted_line_break_as_written(tmp_path, ending):
    path = write(tmp_path, "a.csv", f'label,text{ending}pos,"a{ending}b"{ending}neg,c{ending}')
    examples = read_examples(path)
    assert examples.texts == [f"a{ending}b", "c"] and examples.lines == [2, 4]


def test_other_unicode_separators_are_text_not_line_ends(tmp_path):
    text = "a\u2028b\x0cc\x85d\x1ee"  # str.splitlines would cut here
    path = write(tmp_path, "a.tsv", f"label\ttext\npos\t{text}\nneg\t\n")
    assert "a.tsv, line 3: empty 'text'" in error_of(path)
    assert read_examples(path, skip_bad_rows=True).texts == [text]


def test_a_bom_before_the_header_is_ignored(tmp_path):
    for name, body in [("a.tsv", "label\ttext\npos\t好\n"), ("a.csv", "label,text\npos,好\n"),
                       ("a.jsonl", '{"label": "pos", "text": "好"}\n')]:
        examples = read_examples(write(tmp_path, name, "\ufeff" + body))
        assert (examples.texts, examples.labels) == (["好"], ["pos"]), name


# --- TSV: no quoting ------------------------------------------------------------------------

def test_tsv_keeps_quotes_exactly(tmp_path):
    path = write(tmp_path, "a.tsv",
                 'label\ttext\npos\t"引号" 开头\nneg\t"unclosed\npos\ta ""b""\n')
    examples = read_examples(path)
    assert examples.texts == ['"引号" 开头', '"unclosed', 'a ""b""']
    assert examples.lines == [2, 3, 4]


@pytest.mark.parametrize("name", ["big.tsv", "big.csv"])
def test_a_one_megabyte_field_reads(tmp_path, name):
    text = "长" * (1 << 20)
    sep = "\t" if name.endswith("tsv") else ","
    examples = read_examples(write(tmp_path, name, f"label{sep}text\npos{sep}{text}\n"))
    assert examples.texts == [text]


# --- JSONL ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, got", [
    ('["a", "b"]', "got a list"),
    ("3", "got a number (3)"),
    ("null", "got null"),
    ('{"a": 1}', "got an object"),
    ("true", "got a boolean (true)"),
])
def test_jsonl_text_must_be_a_string(tmp_path, value, got):
    path = write(tmp_path, "a.jsonl",
                 f'{{"label": "pos", "text": "ok"}}\n{{"label": "pos", "text": {value}}}\n')
    assert error_of(path) == f"bad row in {path}, line 2: 'text' must be a string, {got}"
    assert read_examples(path, skip_bad_rows=True).texts == ["ok"]


def test_jsonl_pair_text_must_be_a_string(tmp_path):
    path = write(tmp_path, "p.jsonl", '{"label": "1", "q": "a", "p": 7}\n')
    assert "p.jsonl, line 1: 'p' must be a string, got a number (7)" in error_of(
        path, text_column="q", pair_column="p")


def test_jsonl_integer_label_is_its_digits(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"label": 1, "text": "a"}\n{"label": 0, "text": "b"}\n')
    examples = read_examples(path)
    assert examples.labels == ["1", "0"]
    assert label_ids(examples, ["0", "1"]).tolist() == [1, 0]


@pytest.mark.parametrize("value, got", [
    ('["pos"]', "a list"), ("1.5", "a number (1.5)"), ("false", "a boolean (false)"),
    ('{"x": 1}', "an object"),
])
def test_jsonl_other_label_types_are_bad_rows(tmp_path, value, got):
    path = write(tmp_path, "x.jsonl", f'{{"label": {value}, "text": "a"}}\n')
    assert error_of(path) == (f"bad row in {path}, line 1: the label must be a string or an "
                              f"integer, got {got}")


def test_jsonl_bad_lines_are_named(tmp_path):
    path = write(tmp_path, "a.jsonl", '\n{"label": "a", "text": "x"}\n["a", "b"]\n{"label": \n'
                 '{"text": "y"}\n')
    examples = read_examples(path, skip_bad_rows=True)
    assert examples.lines == [2]
    assert examples.skipped == [
        (3, "not a JSON object (got a list)"),
        (4, "invalid JSON (Expecting value at column 11)"),
        (5, "column 'label' is missing (columns: text)")]


def test_lone_surrogate_in_jsonl_is_a_bad_row_but_a_surrogate_pair_is_a_character(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"label": "pos", "text": "ok \\ud83d\\ude00"}\n'
                 '{"label": "pos", "text": "bad \\ud800"}\n')
    assert error_of(path) == (f"bad row in {path}, line 2: 'text' holds a lone surrogate escape "
                              "\\ud800 in JSON (half of a UTF-16 pair, not a character)")
    assert read_examples(path, skip_bad_rows=True).texts == ["ok \U0001F600"]


def test_lone_surrogate_in_a_label_but_not_in_an_unused_field(tmp_path):
    path = write(tmp_path, "a.jsonl", '{"label": "\\udfff", "text": "a"}\n')
    assert "line 1: 'label' holds a lone surrogate escape \\udfff in JSON" in error_of(path)
    unused = write(tmp_path, "b.jsonl", '{"label": "x", "text": "a", "note": "\\ud800"}\n')
    assert read_examples(unused).texts == ["a"]


# --- labels and texts -----------------------------------------------------------------------

def test_labels_are_stripped_and_merged_spellings_warned_once(tmp_path, caplog):
    path = write(tmp_path, "x.tsv", "label\ttext\npos \ta\npos\tb\n pos\tc\npos \td\nneg\te\n")
    with caplog.at_level(logging.WARNING, logger="kerasbert.training.data"):
        examples = read_examples(path)
    assert examples.labels == ["pos", "pos", "pos", "pos", "neg"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "kerasbert.training.data"]
    assert warnings == [(f"labels in {path}: 'pos', ' pos' and 'pos ' are read as one label "
                         "'pos' (surrounding spaces are stripped)")]


def test_a_label_with_one_spelling_is_stripped_without_warning(tmp_path, caplog):
    path = write(tmp_path, "x.csv", 'label,text\n"pos ",a\n"neg\t",b\n')
    with caplog.at_level(logging.WARNING, logger="kerasbert.training.data"):
        assert read_examples(path).labels == ["pos", "neg"]
    assert not [r for r in caplog.records if r.name == "kerasbert.training.data"]


def test_texts_are_kept_as_written_but_blank_ones_refused(tmp_path):
    path = write(tmp_path, "a.tsv", "label\ttext\npos\t  空格 \nneg\t \u3000 \n")
    assert "a.tsv, line 3: empty 'text'" in error_of(path)
    assert read_examples(path, skip_bad_rows=True).texts == ["  空格 "]


# --- bytes ----------------------------------------------------------------------------------

def test_undecodable_bytes_name_the_line_in_every_format(tmp_path):
    cases = {"a.tsv": (b"label\ttext\npos\tok\nneg\t\xc4\xe3\xba\xc3\n", 0xc4),  # GBK
             "a.csv": (b'label,text\npos,ok\nneg,"two\nlines \xff"\n', 0xff),
             "a.jsonl": (b'{"label": "pos", "text": "ok"}\n\n{"label": "neg", "text": "\xfe"}\n',
                         0xfe)}
    for name, (content, byte) in cases.items():
        path = write(tmp_path, name, content)
        assert error_of(path) == (f"bad row in {path}, line 3: invalid UTF-8 byte "
                                  f"0x{byte:02x} (the file must be UTF-8)")
        assert read_examples(path, skip_bad_rows=True).texts == ["ok"]


def test_a_header_that_is_not_utf8_is_a_file_error_even_when_skipping(tmp_path):
    path = write(tmp_path, "gbk.tsv", "标签\ttext\npos\tok\n".encode("gbk"))
    assert error_of(path, skip_bad_rows=True) == (
        f"header row in {path}, line 1: invalid UTF-8 byte 0xb1 (the file must be UTF-8)")


# --- files ----------------------------------------------------------------------------------

def test_file_level_errors_are_one_line_naming_the_path(tmp_path):
    folder = tmp_path / "train.tsv"
    folder.mkdir()
    assert error_of(folder) == (f"data file in {folder}: is a directory, expected a "
                                ".tsv/.csv/.jsonl file")
    missing = tmp_path / "none.csv"
    assert error_of(missing, FileNotFoundError) == f"data file in {missing}: no such file"
    odd = write(tmp_path, "a.txt", "x")
    assert error_of(odd) == (f"data file in {odd}: unknown file type '.txt', expected a "
                             ".tsv/.csv/.jsonl file (a .txt file, one text per line, is read "
                             "by predict only: it has no labels)")
    odd = write(tmp_path, "a.text", "x")
    assert error_of(odd) == (f"data file in {odd}: unknown file type '.text', expected a "
                             ".tsv/.csv/.jsonl file")
    empty = write(tmp_path, "e.csv", "\n\n")
    assert error_of(empty).startswith(f"data file in {empty}: the file is empty")
    no_column = write(tmp_path, "c.tsv", "label\tsentence\npos\t好\n")
    assert error_of(no_column) == (f"header row in {no_column}, line 1: no column 'text' in "
                                   "the header (columns: label, sentence); to read other "
                                   "columns, name them with --text-column, --pair-column or "
                                   "--label-column")


def test_skip_bad_rows_counts_each_problem_and_all_bad_is_an_error(tmp_path):
    path = write(tmp_path, "a.tsv",
                 "label\ttext\npos\t好\n\t无标签\nneg\t\nneg\t差\t多\nneg\t坏\n")
    examples = read_examples(path, skip_bad_rows=True)
    assert examples.texts == ["好", "坏"] and examples.lines == [2, 6]
    assert examples.skipped == [(3, "missing label in column 'label'"), (4, "empty 'text'"),
                                (5, "3 columns where the header has 2")]
    bad = write(tmp_path, "b.tsv", "label\ttext\npos\t\n\tx\n")
    assert error_of(bad, skip_bad_rows=True) == (
        f"data file in {bad}: no usable rows (2 skipped: empty 'text': 1 row (line 2); missing "
        "label in column 'label': 1 row (line 3))")


def test_files_to_predict_need_no_labels(tmp_path):
    path = write(tmp_path, "p.jsonl", '{"text": "a"}\n{"text": "b", "label": ""}\n'
                 '{"text": "c", "label": ["x"]}\n')
    examples = read_examples(path, require_labels=False)
    assert examples.texts == ["a", "b", "c"] and examples.labels == [None, None, None]


# --- helpers for fine-tuning ----------------------------------------------------------------

@pytest.fixture
def dev(tmp_path):
    path = write(tmp_path, "dev.tsv", "label\ttext\npos\t好\nmaybe\t一般\n\t空\nneg\t差\n")
    return read_examples(path, skip_bad_rows=True)


def test_keep_known_labels_raises_naming_the_row(dev):
    with pytest.raises(DataError) as caught:
        keep_known_labels(dev, ["neg", "pos"])
    assert str(caught.value) == (f"bad row in {dev.path}, line 3: label 'maybe' was not seen in "
                                 "training (known: neg, pos)")


def test_keep_known_labels_skips_and_counts_without_changing_its_input(dev):
    kept = keep_known_labels(dev, ["neg", "pos"], skip_bad_rows=True)
    assert (kept.texts, kept.labels, kept.lines) == (["好", "差"], ["pos", "neg"], [2, 5])
    assert kept.path == dev.path
    assert kept.skipped == [(3, "label 'maybe' was not seen in training (known: neg, pos)"),
                            (4, "missing label in column 'label'")]
    assert len(dev) == 3 and len(dev.skipped) == 1
    with pytest.raises(DataError, match=r"dev.tsv: no usable rows \(4 skipped: label 'pos' was "
                                        r"not seen in training: 1 row \(line 2\); "):
        keep_known_labels(dev, ["other"], skip_bad_rows=True)


def test_head_keeps_path_lines_and_skipped(dev):
    first = dev.head(2)
    assert (first.texts, first.lines, first.path) == (["好", "一般"], [2, 3], dev.path)
    assert first.skipped == dev.skipped and first.skipped is not dev.skipped
    assert len(dev.head(10)) == 3


def test_examples_from_texts(tmp_path):
    examples = Examples.from_texts(["a", "b"], pairs=["c", "d"])
    assert (examples.texts, examples.pairs, examples.labels, examples.lines) == (
        ["a", "b"], ["c", "d"], [None, None], [1, 2])
    assert Examples.from_texts(["a"]).pairs == [None]
    with pytest.raises(TypeError, match="not a single str"):
        Examples.from_texts("abc")
    with pytest.raises(ValueError, match="got 2 texts but 1 pairs"):
        Examples.from_texts(["a", "b"], pairs=["c"])


# --- tokenizer ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_tokenizer():
    return Tokenizer({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "好": 5})


@pytest.mark.parametrize("call, message", [
    (lambda t: t.tokenize("ab\ud800"), "text contains a lone surrogate U+D800 at character 2"),
    (lambda t: t.encode("a", "好\udc80"),
     "second_text contains a lone surrogate U+DC80 at character 1 (or the byte 0x80, not "
     "UTF-8, as Python keeps such bytes)"),
    (lambda t: t.encode_batch(["a", "\udfff"]),
     "texts[1] contains a lone surrogate U+DFFF at character 0"),
    (lambda t: t.encode_batch(["a"], pairs=["x\ud801"]),
     "pairs[0] contains a lone surrogate U+D801 at character 1"),
    (lambda t: t.rematch("\ud800", ["[CLS]"]),
     "text contains a lone surrogate U+D800 at character 0"),
])
def test_tokenizer_names_a_lone_surrogate(tiny_tokenizer, call, message):
    with pytest.raises(ValueError) as caught:
        call(tiny_tokenizer)
    assert str(caught.value) == message + ", not valid Unicode"


def test_tokenizer_takes_astral_characters(tiny_tokenizer):
    assert tiny_tokenizer.tokenize("a \U0001F600好") == ["[CLS]", "a", "[UNK]", "好", "[SEP]"]


# --- pretraining corpus ---------------------------------------------------------------------

def test_corpus_reads_cr_only_files_and_names_bad_files(tmp_path):
    plain = write(tmp_path, "c.txt", "一\r 二 \r\r三")
    assert read_corpus([plain]) == ["一", "二", "三"]
    bad = write(tmp_path, "b.txt", b"ok\n\xff\xfe\n")
    with pytest.raises(DataError) as caught:
        read_corpus([plain, bad])
    assert str(caught.value) == (f"bad line in {bad}, line 2: invalid UTF-8 byte 0xff (the file "
                                 "must be UTF-8)")
    with pytest.raises(FileNotFoundError) as caught:
        read_corpus([tmp_path / "none.txt"])
    assert str(caught.value) == f"corpus file in {tmp_path / 'none.txt'}: no such file"
    with pytest.raises(DataError, match=r"corpus file in .*: is a directory, expected a text "
                                        r"file or a \.tsv/\.csv/\.jsonl file"):
        read_corpus([tmp_path])
    empty = write(tmp_path, "e.txt", " \r\n\r\n")
    with pytest.raises(DataError, match=r"corpus file in .*e\.txt: no text"):
        read_corpus([empty])


def test_corpus_tables_use_the_same_reader(tmp_path):
    path = write(tmp_path, "c.csv", 'text\r"多\r行"\r单行\r')
    assert read_corpus([path]) == ["多\r行", "单行"]
