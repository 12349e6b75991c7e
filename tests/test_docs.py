"""The documentation site builds without a warning, renders in a browser, and the README stays
a front door.

``mkdocs build --strict`` (the settings are in mkdocs.yml) turns every warning into a failure: a
link to a page that does not exist, an anchor that no heading makes, a page under docs/ left out
of the nav, and in the API reference (docs/api/, generated from the docstrings by mkdocstrings)
an object that does not exist, a cross-reference or a Sphinx role (in any docstring of the
package) that names none, or a parameter a docstring names that the signature lacks. The
pages' code runs in tests/test_readme.py.
"""

import functools
import http.server
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_LINES = 200  # the rest lives in docs/
# The API reference's pages: kerasbert's names, and bert4keras's six module names.
API_PAGES = {"kerasbert": "kerasbert", "backend": "kerasbert.backend",
             "layers": "kerasbert.layers", "models": "kerasbert.models",
             "optimizers": "kerasbert.optimizers", "snippets": "kerasbert.snippets",
             "tokenizers": "kerasbert.tokenizers"}


def mkdocs():
    """The mkdocs command beside this Python (the venv's), else on PATH, else None."""
    beside = os.path.join(os.path.dirname(sys.executable), "mkdocs")
    return beside if os.path.exists(beside) else shutil.which("mkdocs")


def build_site(site):
    """Builds the site into ``site`` in strict mode; fails the test on any warning."""
    command = mkdocs()
    # mkdocs is a test dependency (setup.cfg), so a missing one fails rather than skips.
    assert command is not None, "mkdocs is not installed: pip install -e '.[test]'"
    result = subprocess.run(
        [command, "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"), capture_output=True, text=True,
        timeout=300, check=False)
    output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0 and not warnings, output
    assert (site / "index.html").exists()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs") / "site"
    build_site(folder)
    return folder


def test_the_site_builds_strictly_without_a_warning(site):
    assert (site / "api" / "kerasbert" / "index.html").exists()


def test_the_api_reference_documents_every_public_name(site):
    """Every name of ``kerasbert.__all__``, and every public function and class each of
    bert4keras's six modules defines, has its entry (a function without a docstring would be
    left out silently); a name that is another's alias (``LionV2 = Lion``) is said on the page,
    its object documented under its own name."""
    missing = []
    for page, module_name in API_PAGES.items():
        module = importlib.import_module(module_name)
        with open(site / "api" / page / "index.html", encoding="utf-8") as f:
            html = f.read()
        documented = set(re.findall(r'id="(kerasbert[\w.]*)"', html))
        if page == "kerasbert":
            names = {name: getattr(module, name) for name in module.__all__}
        else:
            names = {name: value for name, value in vars(module).items()
                     if not name.startswith("_")
                     and (inspect.isclass(value) or inspect.isfunction(value))
                     and value.__module__ == module_name}
        for name, value in sorted(names.items()):
            own = getattr(value, "__name__", name)
            if name != own and page != "kerasbert":  # an alias: said in the page's text
                if f"{module_name}.{own}" not in documented or f"<code>{name}</code>" not in html:
                    missing.append(f"{module_name}.{name} (alias of {own})")
            elif f"{module_name}.{name}" not in documented:
                missing.append(f"{module_name}.{name}")
    assert missing == [], "names the API reference (docs/api/) leaves out"


def test_the_readme_is_a_front_door():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_LINES, \
        f"README.md has {len(lines)} lines; move sections into docs/ (at most {README_LINES})"


def pages():
    """Every Markdown page under docs/, as the nav names it (``api/models.md``)."""
    docs = os.path.join(ROOT, "docs")
    return sorted(os.path.relpath(os.path.join(folder, name), docs).replace(os.sep, "/")
                  for folder, _, names in os.walk(docs) for name in names
                  if name.endswith(".md"))


def test_every_picture_a_page_shows_exists():
    """A missing picture is no warning of mkdocs, even in strict mode."""
    docs = os.path.join(ROOT, "docs")
    missing = []
    for page in pages():
        with open(os.path.join(docs, page), encoding="utf-8") as f:
            for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)", f.read()):
                path = os.path.join(docs, os.path.dirname(page), target)
                if not os.path.isfile(path):
                    missing.append(f"{page}: {target}")
    assert missing == []


def test_every_page_is_in_the_nav():
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        config = f.read()
    assert "api/kerasbert.md" in pages()
    assert [page for page in pages() if f": {page}" not in config] == []


# ------------------------------------------------------------------ the pages in a browser
# Headless Chromium (Debian's `chromium`; `make test` installs it as it does Graphviz), with
# nothing that reaches outside the machine: no sync, updates, QUIC or background requests.
BROWSERS = ("chromium", "chromium-browser")
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync")
WINDOW = (1280, 2000)


def browser():
    """The Chromium on PATH; None outside CI where there is none (a skip). Under CI (``CI``
    set, as every CI service does) a missing one fails: `make test` installs it."""
    found = next(filter(None, map(shutil.which, BROWSERS)), None)
    if found is None and os.environ.get("CI"):
        pytest.fail("Chromium is not installed: 'make test' installs it as root "
                    "(apt-get install chromium)")
    if found is None:
        pytest.skip("Chromium is not installed: sudo apt-get install chromium (Debian/Ubuntu)")
    return found


def in_browser(command, url, *options):
    """One headless Chromium on ``url``, with a fresh empty profile; its stdout."""
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [command, *BROWSER_FLAGS, f"--user-data-dir={profile}", *options, url],
            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{url}: {result.stderr[-2000:]}"
    return result.stdout


@pytest.fixture
def served(site):
    """The built site on 127.0.0.1 (a free port), as a browser reads it from a server."""
    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def title(html):
    return re.search(r"<title>(.*?)</title>", html, re.S).group(1).strip()


@pytest.mark.slow
def test_every_page_renders_in_a_real_browser(site, served, tmp_path):
    """Each page of the nav, served and rendered by headless Chromium: its screenshot is a
    page (many colours, text on it, the theme's coloured header, so the CSS loaded) and its
    DOM after the scripts ran holds the page's title and heading, with the theme's script
    run (``<html class="... js">``, which the served page marks ``no-js``).

    Why slow: every page of the site is loaded and drawn by a real browser, as a reader
    meets it."""
    from PIL import Image

    command = browser()
    failures = []
    for page in pages():
        path = "" if page == "index.md" else page[:-len(".md")].removesuffix("/index") + "/"
        with open(site / path / "index.html", encoding="utf-8") as f:
            served_title = title(f.read())
        shot = tmp_path / f"{path.strip('/').replace('/', '-') or 'index'}.png"
        # One browser writes the screenshot and prints the DOM, both after the scripts ran.
        dom = in_browser(command, served + path, "--dump-dom", f"--screenshot={shot}",
                         "--window-size={},{}".format(*WINDOW))
        heading = re.search(r"<h1[^>]*>(.*?)</h1>", dom, re.S)
        if title(dom) != served_title or heading is None or \
                not re.sub(r"<[^>]+>", "", heading.group(1)).strip():
            failures.append(f"{page}: no title {served_title!r} or no heading in its DOM")
        if not re.search(r'<html[^>]*class="[^"]*\bjs\b', dom):
            failures.append(f"{page}: the theme's script did not run")
        for source in re.findall(r'<img[^>]*\ssrc="([^"]+)"', dom):
            try:
                with urllib.request.urlopen(urllib.parse.urljoin(served + path, source),
                                            timeout=30) as reply:
                    assert reply.read(8)
            except (OSError, AssertionError) as error:
                failures.append(f"{page}: its picture {source} does not load: {error}")
        with Image.open(shot) as picture:
            rgb = picture.convert("RGB")
        colours = rgb.getcolors(maxcolors=WINDOW[0] * WINDOW[1])
        inked = sum(count for count, colour in colours if sum(colour) < 600)
        header = rgb.getpixel((WINDOW[0] // 2, 24))  # the header bar, in the theme's colour
        if rgb.size != WINDOW or len(colours) < 64 or inked < 0.01 * WINDOW[0] * WINDOW[1] \
                or sum(header) > 600:
            failures.append(f"{page}: the screenshot is no rendered page: {rgb.size}, "
                            f"{len(colours)} colours, {inked} dark pixels, header {header}")
    assert failures == [], "\n".join(failures)
