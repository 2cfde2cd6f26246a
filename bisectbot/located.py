"""Load YAML into a pydantic model with every error located as ``FILE:LINE:COL: field.path: message``.

Shared by recipes, patch stacks and runner profiles: the YAML is composed once to learn
where each node sits, then validated; pydantic's error locations are mapped back to the
node they came from (unknown keys point at the key, other errors at the value).
"""

from __future__ import annotations

from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
Marks = dict[tuple, tuple[int, int]]


class LocatedErrors(Exception):
    """One or more located problems; ``problems`` holds one ``FILE:LINE:COL: field: message`` each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def mark_tree(node: yaml.Node) -> Any:
    """Turn a composed YAML node into (value, marks) where marks maps loc tuples to (line, col)."""
    marks: dict[tuple, tuple[int, int]] = {}

    def walk(n: yaml.Node, loc: tuple) -> None:
        marks[loc] = (n.start_mark.line + 1, n.start_mark.column + 1)
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = k.value
                marks[loc + (key, "__key__")] = (k.start_mark.line + 1, k.start_mark.column + 1)
                walk(v, loc + (key,))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                walk(v, loc + (i,))

    walk(node, ())
    return marks


def locate(marks: dict[tuple, tuple[int, int]], loc: tuple, unknown_key: bool) -> tuple[int, int]:
    if unknown_key and loc + ("__key__",) in marks:
        return marks[loc[:-1] + (loc[-1], "__key__")]
    # pydantic adds union tags (e.g. 'registry') into loc; drop parts until we find a node
    while loc:
        if loc in marks:
            return marks[loc]
        # try dropping a discriminator tag in the middle
        for i in range(len(loc)):
            cand = loc[:i] + loc[i + 1 :]
            if cand in marks:
                return marks[cand]
        loc = loc[:-1]
    return marks.get((), (1, 1))


def strip_tags(loc: tuple, data: Any) -> tuple:
    """Drop pydantic's discriminated-union tags (``registry``/``pypi``/``git``) from an error loc."""
    out: list = []
    cur = data
    for p in loc:
        if isinstance(cur, dict) and p not in cur and p in ("registry", "pypi", "git"):
            continue
        out.append(p)
        if isinstance(cur, dict):
            cur = cur.get(p)
        elif isinstance(cur, list) and isinstance(p, int) and p < len(cur):
            cur = cur[p]
        else:
            cur = None
    return tuple(out)


def field_path(loc: tuple, data: Any) -> str:
    parts: list[str] = []
    cur = data
    for p in loc:
        if isinstance(cur, dict) and p in cur:
            parts.append(str(p))
            cur = cur[p]
        elif isinstance(cur, list) and isinstance(p, int) and p < len(cur):
            parts.append(f"[{p}]")
            cur = cur[p]
        elif isinstance(p, str) and p in ("registry", "pypi", "git") and isinstance(cur, dict):
            continue  # discriminator tag
        else:
            parts.append(str(p))
            cur = None
    out = ""
    for part in parts:
        out += part if part.startswith("[") or not out else "." + part
    return out or "(top level)"


def compose(text: str, filename: str, what: str = "fields") -> tuple[dict[str, Any], Marks]:
    """Parse YAML ``text``; return the data (a mapping) and the position of every node.

    Raises :class:`LocatedErrors` for a YAML syntax error (parser's own line/column) or a
    document that is not a mapping (``what`` names what the mapping should hold).
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = (e.problem or str(e)).strip()
        if e.context:
            msg = f"{msg} ({e.context.strip()})"
        raise LocatedErrors([f"{filename}:{line}:{col}: (yaml): {msg}"]) from None
    if node is None or not isinstance(data, dict):
        raise LocatedErrors([f"{filename}:1:1: (top level): expected a mapping of {what}"])
    return data, mark_tree(node)


def where(marks: Marks, data: Any, loc: tuple, filename: str, unknown: bool = False) -> str:
    """``FILE:LINE:COL: field.path`` of an error location."""
    loc = strip_tags(tuple(loc), data)
    line, col = locate(marks, loc, unknown)
    return f"{filename}:{line}:{col}: {field_path(loc, data)}"


def validate(model: type[M], data: dict[str, Any], marks: Marks, filename: str) -> M:
    """Validate ``data`` as ``model``; raises :class:`LocatedErrors` listing every problem."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            unknown = err["type"] == "extra_forbidden"
            msg = "unknown field" if unknown else err["msg"].removeprefix("Value error, ")
            problems.append(f"{where(marks, data, tuple(err['loc']), filename, unknown)}: {msg}")
        raise LocatedErrors(problems) from None


def load_located(model: type[M], text: str, filename: str, what: str = "fields") -> M:
    """:func:`compose` then :func:`validate`."""
    data, marks = compose(text, filename, what)
    return validate(model, data, marks, filename)
