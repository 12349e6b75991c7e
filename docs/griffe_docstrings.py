"""How the API reference reads kerasbert's docstrings (a Griffe extension, see mkdocs.yml).

The docstrings are Google style as Python's own tools read them (doctest runs every example,
tests/test_docstrings.py), with three habits Griffe's Google parser takes otherwise; each is
rewritten here, before parsing, so that no docstring changes for the site's sake:

- ``Example:`` opens the examples (Griffe knows only ``Examples:``, and would render the
  ``>>>`` lines as Markdown, where an output like ``['beta', 'gamma']`` reads as a link);
- Sphinx roles (``:func:`load_checkpoint```) become code: Markdown has no roles;
- ``a, b: text`` in Args documents several parameters at once; Griffe checks each name
  against the signature only when it stands alone, so each gets its own entry.
"""

import re

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_ROLE = re.compile(r":(?:func|class|data|mod|meth|attr|exc|obj):`(~?)([^`]+)`")
_ARGS = re.compile(r"^(\s*)(Args|Arguments|Parameters):\s*$")
_GROUP = re.compile(r"^(\s+)(\*{0,2}\w+(?:,\s*\*{0,2}\w+)+):\s(.*)$")


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


class GoogleDocstrings(griffe.Extension):
    """Rewrites each docstring as the module docstring above says, before it is parsed."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is None:
            return
        text = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
        obj.docstring.value = _split_groups(_ROLE.sub(_role, text))
