"""A task is one folder: its options class holds only its flags, the command line takes
everything task-specific from the task (help, printouts, what predict takes), and a flag
a task does not use is refused by name."""

import contextlib
import dataclasses
import io

import pytest

from kerasbert.cli.main import main
from kerasbert.tasks import TASKS, get_task, open_run, options_class, run_task
from kerasbert.tasks.base import Task
from kerasbert.tasks.ner.options import NerOptions
from kerasbert.tasks.qa.options import QaOptions
from kerasbert.training.options import FinetuneOptions

TASK_OPTIONS = {name: options_class(name) for name in TASKS}


def fields(kind):
    return {field.name for field in dataclasses.fields(kind)}


@pytest.mark.parametrize("name", list(TASK_OPTIONS))
def test_every_registered_task_is_a_folder_with_its_task_and_run(name):
    task = get_task(name)
    assert isinstance(task, Task) and task.name == name
    assert task.__module__ == f"kerasbert.tasks.{name}.task"
    assert task.run_class.__module__ == task.__module__ and task.monitor
    assert issubclass(TASK_OPTIONS[name], FinetuneOptions) and TASK_OPTIONS[name].FILES


def test_each_task_has_only_its_own_flags_and_the_shared_ones_work_for_all():
    own = {name: fields(kind) - fields(FinetuneOptions) for name, kind in TASK_OPTIONS.items()}
    assert own == {"classification": {"text_column", "pair_column", "label_column",
                                       "strategy", "skip_bad_rows", "prefix_copies"},
                   "ner": {"no_crf"}, "qa": set(),
                   "seq2seq": {"max_new_tokens", "num_beams", "sp_model"}, "similarity": set()}
    assert {"grad_accum", "mixed_precision", "jit_compile"} <= fields(FinetuneOptions)
    ner = NerOptions(output="x", grad_accum=8, mixed_precision="float16")
    assert (ner.task, ner.grad_accum, ner.mixed_precision) == ("ner", 8, "float16")
    with pytest.raises(TypeError, match="strategy"):
        NerOptions(output="x", strategy="mirrored")
    assert type(QaOptions(output="x").resolved()) is QaOptions


def help_of(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(out.getvalue().split())


def test_help_speaks_of_every_task():
    train = help_of("train")
    for name, kind in TASK_OPTIONS.items():
        assert f"--task {name}:" in train and " ".join(kind.FILES.split()) in train
    assert "--no-crf" in train.split("--task ner:")[1]
    assert "QUESTION CONTEXT pairs" in help_of("predict")
    assert "SQuAD" in help_of("evaluate") and "CoNLL" in help_of("evaluate")


@pytest.mark.slow
def test_a_run_is_opened_by_its_task_and_its_printouts_come_from_it(finished_run, capsys):
    output, summary = finished_run
    assert run_task(output).name == "classification"
    assert type(open_run(output).options).__name__ == "ClassificationOptions"
    assert main(["evaluate", "--model", str(output), "--data", summary["skipped_rows"]
                 and list(summary["skipped_rows"])[-1]]) == 0
    assert capsys.readouterr().out.startswith("examples 64  accuracy")


@pytest.mark.parametrize("indent", [None, 2])
def test_a_squad_file_given_as_labelled_rows_is_named_as_such(tmp_path, indent):
    import json

    from kerasbert.training.data import DataError, read_examples

    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": []}]},
                               indent=indent), encoding="utf-8")
    with pytest.raises(DataError, match=r"dev.json: a SQuAD JSON file .* span question answering "
                                         r"reads it$"):
        read_examples(path)
