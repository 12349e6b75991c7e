"""The documentation site builds without a warning, and the README stays a front door.

``mkdocs build --strict`` (the settings are in mkdocs.yml) turns every warning into a failure: a
link to a page that does not exist, an anchor that no heading makes, a page under docs/ left out
of the nav. The pages themselves run in tests/test_readme.py.
"""

import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_LINES = 200  # the rest lives in docs/


def mkdocs():
    """The mkdocs command beside this Python (the venv's), else on PATH, else None."""
    beside = os.path.join(os.path.dirname(sys.executable), "mkdocs")
    return beside if os.path.exists(beside) else shutil.which("mkdocs")


def test_the_site_builds_strictly_without_a_warning(tmp_path):
    command = mkdocs()
    # mkdocs is a test dependency (setup.cfg), so a missing one fails rather than skips.
    assert command is not None, "mkdocs is not installed: pip install -e '.[test]'"
    result = subprocess.run(
        [command, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"), capture_output=True, text=True,
        timeout=300, check=False)
    output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0 and not warnings, output
    assert (tmp_path / "site" / "index.html").exists()


def test_the_readme_is_a_front_door():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_LINES, \
        f"README.md has {len(lines)} lines; move sections into docs/ (at most {README_LINES})"


def test_every_page_is_in_the_nav():
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        config = f.read()
    pages = sorted(name for name in os.listdir(os.path.join(ROOT, "docs"))
                   if name.endswith(".md"))
    assert [page for page in pages if f": {page}" not in config] == []
