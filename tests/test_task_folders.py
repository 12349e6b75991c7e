"""A task is one folder: no module outside ``kerasbert/tasks/<name>/`` names the task, and a
further task is its folder and one line of the registry.

The code is read with ``ast``: its imports, and its strings (docstrings and comments are
prose and do not count; a string the code uses does: ``"ner"``, ``"--task qa"``,
``"kerasbert.tasks.seq2seq.export"``).
"""

import ast
import os
import re
import subprocess
import sys

import pytest

from kerasbert.tasks import TASKS, get_task, options_class

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "kerasbert")

#: Modules outside a task's folder allowed to name it, each with its reason.
ALLOWED = {
    **{("kerasbert/tasks/__init__.py", task): "the registry: one line a task" for task in TASKS},
    ("kerasbert/__init__.py", "qa"): "the public API re-exports QuestionAnswerer and "
                                     "add_span_head",
}


def modules():
    """``{path relative to the root: source}`` of every module of the package (the data's
    own build scripts in resources/ left out)."""
    found = {}
    for folder, _, names in os.walk(PACKAGE):
        if "resources" in os.path.relpath(folder, PACKAGE).split(os.sep):
            continue
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    found[os.path.relpath(path, ROOT).replace(os.sep, "/")] = f.read()
    return found


def docstrings(tree):
    """The string nodes that are docstrings (of the module, a class or a function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def names_of_tasks(source):
    """``{task: [what names it]}``: the tasks a module's code names, by import or string."""
    tree = ast.parse(source)
    prose = docstrings(tree)
    said = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            said += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            said += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in prose):
            said.append(node.value)
    found = {}
    for task in TASKS:
        pattern = re.compile(rf"^{task}$|--task {task}\b|kerasbert\.tasks\.{task}\b")
        hits = [word for word in said if pattern.search(word)]
        if hits:
            found[task] = hits
    return found


def test_no_module_outside_a_task_folder_names_the_task():
    outside = {}
    for path, source in modules().items():
        for task, hits in names_of_tasks(source).items():
            if not path.startswith(f"kerasbert/tasks/{task}/") and (path, task) not in ALLOWED:
                outside[f"{path}: {task}"] = hits
    assert outside == {}


def test_the_check_finds_a_task_named_by_string_or_import():
    assert names_of_tasks('TASK = "ner"\n') == {"ner": ["ner"]}
    assert names_of_tasks('import kerasbert.tasks.qa.export\n') == {
        "qa": ["kerasbert.tasks.qa.export"]}
    assert names_of_tasks('from kerasbert.tasks import seq2seq\n') == {
        "seq2seq": ["kerasbert.tasks.seq2seq"]}
    assert names_of_tasks('help = f"try --task ner {x}"\n') == {"ner": ["try --task ner "]}
    assert names_of_tasks('def f():\n    """--task ner, as "ner"."""\n') == {}


@pytest.mark.parametrize("task", TASKS)
def test_each_task_is_a_folder_with_its_options_and_its_task(task):
    folder = os.path.join(PACKAGE, "tasks", task)
    assert {"__init__.py", "options.py", "task.py"} <= set(os.listdir(folder))
    assert options_class(task).__module__ == f"kerasbert.tasks.{task}.options"
    assert get_task(task).__module__ == f"kerasbert.tasks.{task}.task"


def test_the_command_line_help_reads_every_task_without_tensorflow():
    """``kerasbert train --help`` lists each task's group from its options.py and loads no
    TensorFlow (the registry and the options import none)."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, kerasbert_cli\n"
         "try:\n    kerasbert_cli.main(['train', '--help'])\nexcept SystemExit:\n    pass\n"
         "print('tensorflow' in sys.modules, file=sys.stderr)"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr
    for task in TASKS:
        assert f"--task {task}:" in done.stdout
