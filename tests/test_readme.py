r"""The code in README.md and docs/*.md runs as written.

Every fenced ``python`` block, and every ``bash`` block whose commands are all ``kerasbert ...``
or ``python ...``, runs in a fresh process from a temporary copy of the repository (so what a
block writes, such as ``out/`` or ``runs/``, never lands in the checkout), with this
environment's ``python`` and ``kerasbert`` first on ``PATH``. A block that cannot run here
(a download, a Google checkpoint, a long training) carries a comment just before its fence::

    <!-- not run: needs the Google checkpoint (400 MB download) -->

and is reported as skipped with that reason (``pytest -ra`` lists them). Any other block that
fails, fails the test. A comment just after a block says what its output must show, a regular
expression per line, each searched for in what the block prints::

    <!-- prints: "entities": \[\{"type" -->
"""

import dataclasses
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCUMENTS = ["README.md"] + sorted(
    os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "docs", "*.md")))
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>.+?)\s*-->", re.DOTALL)
PRINTS = re.compile(r"<!--\s*prints:\s*(?P<patterns>.+?)\s*-->", re.DOTALL)
COMMANDS = ("kerasbert ", "python ")
TIMEOUT = 300  # seconds per block
# Left out of the copy: what git ignores in this checkout, when it is not a git checkout.
NOT_COPIED = (".git", ".venv", "venv", "runs", "out", "build", "dist", "__pycache__",
              "*.egg-info", ".pytest_cache", ".hypothesis", ".ruff_cache")


@dataclasses.dataclass
class Block:
    document: str
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    not_run: str = None  # the reason, when the block is marked
    prints: tuple = ()  # regular expressions its output must match

    @property
    def name(self):
        return f"{self.document}:{self.line}"


def read_blocks(document):
    """The ``python`` and ``bash`` blocks of a Markdown file, with their ``not run`` reasons."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as f:
        tokens = MarkdownIt().parse(f.read())
    blocks = []
    for previous, token, following in zip([None] + tokens, tokens, tokens[1:] + [None]):
        language = token.info.split()[0] if token.type == "fence" and token.info else ""
        if language not in ("python", "bash"):
            continue
        marker = (NOT_RUN.search(previous.content)
                  if previous is not None and previous.type == "html_block" else None)
        shows = (PRINTS.search(following.content)
                 if following is not None and following.type == "html_block" else None)
        patterns = tuple(line.strip() for line in shows["patterns"].splitlines()
                         if line.strip()) if shows else ()
        blocks.append(Block(document, token.map[0] + 1, language, token.content,
                            marker["reason"] if marker else None, patterns))
    return blocks


def shell_commands(code):
    """The commands of a bash block: continuation lines joined, comments and blanks dropped."""
    joined = re.sub(r"\\\n", " ", code)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def why_not_run(block):
    """The reason a block is not run, or None."""
    if block.not_run:
        return f"not run: {block.not_run}"
    first = FIRST_OF.get((block.language, block.code), block)
    if first is not block:
        return f"the same code as {first.name}, which runs it"
    if block.language == "bash":
        others = [c for c in shell_commands(block.code) if not c.startswith(COMMANDS)]
        if others:
            return f"runs commands other than kerasbert / python: {others[0]!r}"
    return None


BLOCKS = [block for document in DOCUMENTS for block in read_blocks(document)]
# A block shown on two pages (the README's tour repeats a page's commands) runs once, where it
# first appears; what it runs is the same code in the same fresh copy of the repository.
FIRST_OF = {}
for _block in BLOCKS:
    FIRST_OF.setdefault((_block.language, _block.code), _block)


def copy_of_repository(target):
    """The checkout's files (what git tracks or would track) copied under ``target``."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(*NOT_COPIED))
        return target
    # With the package's bytecode (make test writes it), as a checkout that has run before
    # holds it: each block's process would compile the package again otherwise.
    compiled = [os.path.relpath(path, ROOT) for path in glob.glob(
        os.path.join(ROOT, "kerasbert", "**", "__pycache__", "*.pyc"), recursive=True)]
    for name in filter(None, listed + compiled):
        source = os.path.join(ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.join(target, os.path.dirname(name)), exist_ok=True)
            shutil.copy2(source, os.path.join(target, name))
    return target


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: f"{block.name}-{block.language}")
def test_block_runs_as_written(block, tmp_path):
    """Why slow: a block runs as the page writes it, in a fresh process; the README's NER and
    QA tour and the seq2seq quick run in docs/generation.md train on the shipped data, then
    evaluate, predict and export, each command a process of its own."""
    reason = why_not_run(block)
    if reason:
        pytest.skip(f"{block.name} ({block.language}): {reason}")
    workdir = copy_of_repository(tmp_path / "repository")
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
               TF_CPP_MIN_LOG_LEVEL="3")
    if block.language == "python":
        command = [sys.executable, "-c", block.code]
    else:
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    try:
        result = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                                timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.name} ran over {TIMEOUT} s; if it is meant to be slow, mark it "
                    f"'<!-- not run: <why> -->' just before its fence:\n{block.code}")
    if result.returncode != 0:
        pytest.fail(f"{block.name} ({block.language}) exited {result.returncode}:\n{block.code}"
                    f"--- stderr (end) ---\n{result.stderr[-3000:]}", pytrace=False)
    # What every page that shows this code says it prints.
    patterns = {pattern for other in BLOCKS if (other.language, other.code) ==
                (block.language, block.code) for pattern in other.prints}
    missing = [pattern for pattern in sorted(patterns) if not re.search(pattern, result.stdout)]
    if missing:
        pytest.fail(f"{block.name} printed nothing that matches {missing}:\n"
                    f"{result.stdout[-3000:]}", pytrace=False)


def test_the_readme_has_code_that_runs():
    readme = [block for block in BLOCKS if block.document == "README.md"]
    assert any(block.language == "python" and not why_not_run(block) for block in readme)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_mark_sits_by_a_block(document):
    """Each ``not run`` comment is right before a block and each ``prints`` right after one."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as f:
        text = f.read()
    mine = [block for block in BLOCKS if block.document == document]
    assert len(NOT_RUN.findall(text)) == sum(1 for block in mine if block.not_run), \
        f"{document}: a '<!-- not run: ... -->' comment is not right before a python/bash block"
    assert len(PRINTS.findall(text)) == sum(1 for block in mine if block.prints), \
        f"{document}: a '<!-- prints: ... -->' comment is not right after a python/bash block"
