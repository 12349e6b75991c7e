"""The one table formatter of bench/: every suite's tables are printed as GitHub markdown here.

A suite returns its tables as data, ``{"title", "columns": [(key, heading), ...], "rows":
[{key: value}, ...]}``, so the JSON report keeps the figures and the screen gets them formatted
alike: floats to two decimals below 10 and one above, integers with thousands separators,
strings as they are (a suite that wants another format passes the cell as a string); a
column of numbers only is right-aligned.
"""


def format_table(columns, rows):
    """A GitHub-markdown table; ``columns`` are ``(key, heading)`` pairs, a missing key is blank.

    Example::

        format_table([("name", "implementation"), ("median_ms", "median ms")],
                     [{"name": "kerasbert", "median_ms": 884.25}])
        # | implementation | median ms |
        # |---|---:|
        # | kerasbert | 884.2 |
    """
    def numeric(key):  # a column of numbers only is right-aligned
        values = [row.get(key) for row in rows if row.get(key) is not None]
        return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                    for v in values)

    lines = ["| " + " | ".join(heading for _, heading in columns) + " |",
             "|" + "|".join("---:" if numeric(key) else "---" for key, _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(format_cell(row.get(key)) for key, _ in columns) + " |")
    return "\n".join(lines)


def format_cell(value):
    """One cell: blank for None, ``1,234`` for integers, ``0.94`` / ``884.2`` for floats."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)
