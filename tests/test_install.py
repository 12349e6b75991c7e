"""The wheel, installed as a user installs it, used from a directory far from this checkout.

The wheel is built from the checkout's files and installed into a new virtual environment.
That environment sees only the distributions the wheel declares (its ``Requires-Dist``,
followed through their own requirements), linked from this test environment: a runtime
import that is not declared fails there as it would for a user, without a download. From
a temporary directory it then trains on the shipped default and classifies texts.
"""

import email.parser
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow


def run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}:\n{done.stdout}\n{done.stderr}"
    return done


def checkout_files():
    """The files a clean clone of the checkout holds (tracked, and new ones not ignored)."""
    listed = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT).stdout
    return [path for path in listed.split("\0")
            if path and os.path.isfile(os.path.join(ROOT, path))]


def requirements(dist, extras=()):
    """``dist``'s requirements that apply here (no extras but ``extras``)."""
    found = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in extras or [""]):
            found.append(requirement)
    return found


def closure(names):
    """The installed distributions ``names`` need, their requirements followed."""
    seen, todo = {}, [Requirement(name) for name in names]
    while todo:
        requirement = todo.pop()
        key = canonicalize_name(requirement.name)
        if key in seen:
            continue
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            continue  # e.g. a platform's optional package; pip would not install it either
        seen[key] = dist
        todo.extend(requirements(dist, requirement.extras))
    return seen


def link_distributions(dists, target):
    """A site directory with links to exactly the top-level files of ``dists``."""
    os.makedirs(target)
    for dist in dists.values():
        tops = {str(path).split("/")[0] for path in dist.files or []
                if not str(path).startswith("..")}
        for top in tops:
            source = os.path.join(str(dist.locate_file("")), top)
            link = os.path.join(target, top)
            if os.path.exists(source) and not os.path.lexists(link):
                os.symlink(source, link)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A new venv with the built wheel and only its declared dependencies."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"
    for path in checkout_files():
        os.makedirs(source / os.path.dirname(path), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, path), source / path)
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(root / "wheels"), str(source)])
    wheel = next((root / "wheels").glob("kerasbert-*.whl"))

    venv = root / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)])
    with zipfile.ZipFile(wheel) as archive:
        info = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        declared = email.parser.Parser().parsestr(archive.read(info).decode()).get_all(
            "Requires-Dist")
        names = archive.namelist()
    base = [text for text in declared if "extra ==" not in text]
    link_distributions(closure(base), root / "dependencies")
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    with open(os.path.join(site.stdout.strip(), "dependencies.pth"), "w") as f:
        f.write(str(root / "dependencies") + "\n")
    work = root / "elsewhere"
    work.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "VIRTUAL_ENV")}
    env.update(PIP_NO_INDEX="1", HF_HUB_OFFLINE="1", CI="1", PYTHONNOUSERSITE="1",
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    return {"venv": venv, "python": python, "work": work, "env": env, "names": names,
            "declared": declared}


def test_the_wheel_carries_the_shipped_model_and_review_split(installed):
    names = installed["names"]
    for needed in ("kerasbert/resources/kerasbert-zh-small/bert_model.ckpt.index",
                   "kerasbert/resources/kerasbert-zh-small/bert_model.ckpt.data-00000-of-00001",
                   "kerasbert/resources/kerasbert-zh-small/vocab.txt",
                   "kerasbert/resources/kerasbert-zh-small/finetune_defaults.json",
                   "kerasbert/resources/reviews/train.tsv", "kerasbert/resources/reviews/test.tsv",
                   # PEP 561: type checkers read the installed package's annotations.
                   "kerasbert/py.typed",
                   "kerasbert_cli.py"):
        assert needed in names
    assert not [name for name in names if name.startswith(("tests/", "bench/", "notebooks/"))]


def test_every_runtime_import_is_a_declared_dependency(installed):
    # The venv below also fails on an undeclared import, but only on the paths a run takes.
    import ast

    site = installed["venv"] / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    package = site / "site-packages"
    imported = {}
    for path in [*package.joinpath("kerasbert").rglob("*.py"), package / "kerasbert_cli.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("kerasbert",
                                                                      "kerasbert_cli"):
                    imported.setdefault(top, path.name)
    providers = metadata.packages_distributions()
    declared = {canonicalize_name(Requirement(text).name) for text in installed["declared"]}
    undeclared = {module: where for module, where in imported.items()
                  if not {canonicalize_name(d) for d in providers.get(module, [module])} & declared}
    assert not undeclared, f"imported but not in install_requires or an extra: {undeclared}"


def test_help_from_the_installed_script_is_quick(installed):
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        run([str(installed["venv"] / "bin" / "kerasbert"), "--help"], env=installed["env"],
            cwd=installed["work"])
        seconds.append(time.perf_counter() - start)
    assert min(seconds) < 1.0


def test_train_and_predict_from_another_directory_offline(installed):
    """Why slow: the installed command line trains, evaluates, predicts and exports, each in
    a process of its own outside the checkout, as a user of the wheel runs them."""
    work, env, bin_dir = installed["work"], installed["env"], installed["venv"] / "bin"
    where = run([str(installed["python"]), "-c", "import kerasbert; print(kerasbert.__file__)"],
                env=env, cwd=work).stdout.strip()
    assert where.startswith(str(installed["venv"]))

    run([str(bin_dir / "kerasbert"), "train", "--output", "run", "--epochs", "1",
         "--max-train-examples", "256", "--maxlen", "64"], env=env, cwd=work)
    options = json.loads((work / "run" / "train_config.json").read_text())
    # The defaults came from the installed wheel, and so did the shipped model's rate.
    assert options["config"].startswith(str(installed["venv"]))
    assert options["train"].startswith(str(installed["venv"]))
    assert options["lr"] == 1e-4 and options["weights"] == "checkpoint"
    metrics = json.loads((work / "run" / "metrics.json").read_text())
    assert metrics["test"]["examples"] == 1736

    done = run([str(bin_dir / "kerasbert"), "predict", "--model", "run", "这家店的菜很好吃",
                "服务太差了"], env=env, cwd=work)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["text"] for row in rows] == ["这家店的菜很好吃", "服务太差了"]
    assert all(row["label"] in metrics["labels"] for row in rows)
    assert sorted(os.listdir(work)) == ["run"]
