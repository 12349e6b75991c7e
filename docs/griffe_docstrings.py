"""How the API reference reads kerasbert's docstrings (a Griffe extension, see mkdocs.yml).

The docstrings are Google style as Python's own tools read them (doctest runs every example,
tests/test_docstrings.py), with three habits Griffe's Google parser takes otherwise; each is
rewritten here, before parsing, so that no docstring changes for the site's sake:

- ``Example:`` opens the examples (Griffe knows only ``Examples:``, and would render the
  ``>>>`` lines as Markdown, where an output like ``['beta', 'gamma']`` reads as a link);
- Sphinx roles (``:func:`load_checkpoint```) become code: Markdown has no roles. Each must
  name an object first: one of the package as Python finds it from the docstring (its scope,
  its module's imports, a full ``kerasbert.`` path, a relative ``.module``), or one outside
  it (the standard library, builtins, the dependencies below). A role that names nothing is
  a warning, so the strict build fails on it;
- ``a, b: text`` in Args documents several parameters at once; Griffe checks each name
  against the signature only when it stands alone, so each gets its own entry;
- ``Example::`` and an indented block is reST's literal block (code that is shown, not run):
  it becomes a fenced Python block.
"""

import builtins
import re
import sys
import textwrap

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_ROLE = re.compile(r":(?:func|class|data|mod|meth|attr|exc|obj):`(~?)([^`]+)`")
_ARGS = re.compile(r"^(\s*)(Args|Arguments|Parameters):\s*$")
_GROUP = re.compile(r"^(\s+)(\*{0,2}\w+(?:,\s*\*{0,2}\w+)+):\s(.*)$")
_LITERAL = re.compile(r"^(\s*)(\S.*)::\s*$")
# Where a role may point outside the package: what its modules import, by their usual names.
_OUTSIDE = {"keras", "tf", "tensorflow", "np", "numpy", "tokenizers", "sentencepiece",
            "transformers", "bert4keras", "onnxruntime", "tf2onnx", "ai_edge_litert",
            "huggingface_hub", "sklearn", "matplotlib", "seqeval", "filelock", "platformdirs",
            "tqdm", "requests", "safetensors", "h5py"}


def _role(match: re.Match) -> str:
    name = match.group(2)
    return f"``{name.rsplit('.', 1)[-1] if match.group(1) else name}``"


def _split_groups(text: str) -> str:
    """``a, b: text`` in an Args section -> ``a: text`` and ``b: see ``a``.``."""
    out: list[str] = []
    section = entry = None  # the indents of the Args heading and of its entries, inside it
    pending: list[str] = []  # the other names of a group, added once its description ends
    for line in text.split("\n"):
        indent, blank = len(line) - len(line.lstrip()), not line.strip()
        if pending and (blank or indent <= entry):
            out.extend(pending)
            pending = []
        if section is not None and not blank and indent <= section:
            section = entry = None  # the next section (or text) begins
        heading = _ARGS.match(line)
        if heading:
            section, entry = len(heading.group(1)), None
        elif section is not None and not blank:
            entry = indent if entry is None else entry
            group = _GROUP.match(line) if indent == entry else None
            if group:
                first, *others = [name.strip() for name in group.group(2).split(",")]
                line = f"{group.group(1)}{first}: {group.group(3)}"
                pending = [f"{group.group(1)}{name}: see ``{first}``." for name in others]
        out.append(line)
    return "\n".join(out + pending)


def _literal_blocks(text: str) -> str:
    """``Title::``, a blank line and an indented block -> ``Title:`` and a fenced block."""
    lines, out, index = text.split("\n"), [], 0
    while index < len(lines):
        line, index = lines[index], index + 1
        title = _LITERAL.match(line)
        if not title or index >= len(lines) or lines[index].strip():
            out.append(line)
            continue
        indent = len(title.group(1))
        block = []
        while index < len(lines) and (not lines[index].strip() or
                                      len(lines[index]) - len(lines[index].lstrip()) > indent):
            block.append(lines[index])
            index += 1
        while block and not block[-1].strip():
            index -= 1  # the blank lines after the block stay where they were
            block.pop()
        body = textwrap.dedent("\n".join(block[1:])).split("\n")
        margin = title.group(1)
        out += [f"{margin}{title.group(2)}:", "", f"{margin}```python",
                *[f"{margin}{line}" if line else "" for line in body], f"{margin}```"]
    return "\n".join(out)


def _member(root: griffe.Object, dotted: str):
    """``root``'s member at the dotted path, or None."""
    for part in dotted.split("."):
        # A class's inherited methods count: `Tokenizer.rematch` is the engine's.
        members = getattr(root, "all_members", None) or getattr(root, "members", {})
        if part not in members:
            return None
        root = members[part]
    return root


def _names_something(obj: griffe.Object, package: griffe.Module, target: str) -> bool:
    target = target.strip().removesuffix("()")
    if target.startswith("."):  # relative to the package the docstring is in
        module = obj.module
        start = module if module.is_init_module else module.parent
        return _member(start, target.lstrip(".")) is not None
    first = target.split(".")[0]
    if first in _OUTSIDE or first in sys.stdlib_module_names or hasattr(builtins, first):
        return True
    if first == package.name:
        return target == first or _member(package, target.split(".", 1)[1]) is not None
    node = obj
    while node is not None:  # the docstring's scope, from the object out to the package
        if _member(node, target) is not None:
            return True
        imported = node.imports.get(first) if node.is_module else None
        if imported is not None:
            return _names_something(node, package, imported + target[len(first):])
        node = node.parent
    return False


class GoogleDocstrings(griffe.Extension):
    """Rewrites each docstring as the module docstring above says, before it is parsed."""

    def __init__(self) -> None:
        super().__init__()
        self.roles: list[tuple[griffe.Object, str]] = []

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is None:
            return
        self.roles += [(obj, match.group(2)) for match in _ROLE.finditer(obj.docstring.value)]
        text = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
        obj.docstring.value = _literal_blocks(_split_groups(_ROLE.sub(_role, text)))

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        """Once the whole package is read: every role names something."""
        for obj, target in self.roles:
            if obj.package is pkg and not _names_something(obj, pkg, target):
                griffe.logger.warning(f"{obj.relative_filepath}:{obj.docstring.lineno}: "
                                      f"{obj.path}'s docstring names {target}, which is not "
                                      "found from there")
