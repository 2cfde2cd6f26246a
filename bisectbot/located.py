"""Load YAML into a pydantic model with every error located as ``FILE:LINE:COL: field.path: message``.

Shared by recipes, patch stacks and runner profiles: the YAML is composed once to learn
where each node sits, then validated; pydantic's error locations are mapped back to the
node they came from (unknown keys point at the key, other errors at the value).

Hostile files are refused with a located error, never a traceback or an exhausted host
(issue 13): more than :data:`MAX_YAML_BYTES` bytes, bytes that are not UTF-8, nesting deeper
than :data:`MAX_DEPTH`, more than :data:`MAX_ALIASES` aliases or a document that would expand
to more than :data:`MAX_NODES` nodes through them (billion laughs), duplicate keys, and integers
beyond 64 bits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
Marks = dict[tuple, tuple[int, int]]

MAX_YAML_BYTES = 1024 * 1024
"""Largest recipe/stack/profile file read (bytes); real ones are a few KB."""
MAX_DEPTH = 32
"""Deepest nesting of mappings and sequences."""
MAX_ALIASES = 64
"""Most ``*alias`` references in one document."""
MAX_NODES = 100_000
"""Most nodes of the document with every alias expanded (what validation would walk)."""
MAX_INT = 2**63 - 1
"""Largest integer magnitude accepted anywhere (larger is never a size, count or port)."""


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


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting and alias floods while composing."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(self.peek_event().start_mark, f"more than {MAX_ALIASES} aliases")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(self.peek_event().start_mark, f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Refused(Exception):
    def __init__(self, mark: Any, msg: str):
        super().__init__(msg)
        self.mark = mark
        self.msg = msg


def _pos(mark: Any) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def _check_tree(node: yaml.Node) -> None:
    """Expanded size (aliases counted each time), duplicate keys, integer magnitude."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        sizes[id(n)] = 1  # a recursive alias counts once (PyYAML refuses them anyway)
        total = 1
        if isinstance(n, yaml.MappingNode):
            seen: dict[Any, yaml.Node] = {}
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else id(k)
                if key in seen and key != "<<":
                    first = seen[key].start_mark
                    raise _Refused(k.start_mark, f"duplicate key {k.value!r} (first at line {first.line + 1}, "
                                                 f"column {first.column + 1})")
                seen[key] = k
                total += size(k) + size(v)
        elif isinstance(n, yaml.SequenceNode):
            total += sum(size(v) for v in n.value)
        elif n.tag == "tag:yaml.org,2002:int":
            digits = n.value.lstrip("+-").replace("_", "")
            if len(digits) > 19:
                raise _Refused(n.start_mark, f"integer {n.value[:24]}… is too large (limit {MAX_INT})")
        sizes[id(n)] = total
        if total > MAX_NODES:
            raise _Refused(n.start_mark, f"expands to more than {MAX_NODES} nodes through aliases")
        return total

    size(node)


def read_regular(path: str | Path, limit: int) -> bytes:
    """Read at most ``limit`` + 1 bytes of a **regular** file (issue 13: bounded input).

    A FIFO, device (``/dev/zero``), socket or directory is refused before it is opened for
    reading, so nothing blocks on a FIFO or reads an endless device. Raises :class:`OSError`
    (``strerror`` says why); the caller compares the length with ``limit``.
    """
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    finally:
        os.close(fd)


def read_text(path: str | Path, what: str = "(file)") -> str:
    """Read a YAML file as UTF-8 text, at most :data:`MAX_YAML_BYTES` bytes.

    Raises :class:`LocatedErrors` (``FILE:LINE:COL: (file): ...``) when it cannot be read, is too
    large or is not UTF-8 (the position of the first bad byte).
    """
    p = Path(path)
    try:
        raw = read_regular(p, MAX_YAML_BYTES)
    except OSError as e:
        raise LocatedErrors([f"{p}:1:1: {what}: cannot read: {e.strerror or e}"]) from None
    if len(raw) > MAX_YAML_BYTES:
        raise LocatedErrors([f"{p}:1:1: {what}: larger than {MAX_YAML_BYTES} bytes"])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        before = raw[: e.start]
        line = before.count(b"\n") + 1
        col = e.start - (before.rfind(b"\n") + 1) + 1
        raise LocatedErrors([f"{p}:{line}:{col}: {what}: not UTF-8 (byte 0x{raw[e.start]:02x})"]) from None


def compose(text: str, filename: str, what: str = "fields") -> tuple[dict[str, Any], Marks]:
    """Parse YAML ``text``; return the data (a mapping) and the position of every node.

    Raises :class:`LocatedErrors` for a YAML syntax error (parser's own line/column), a document
    that is not a mapping (``what`` names what the mapping should hold), and the hostile shapes
    listed in the module docstring (size, depth, aliases, duplicate keys, huge integers).
    """
    if len(text) > MAX_YAML_BYTES:
        raise LocatedErrors([f"{filename}:1:1: (yaml): larger than {MAX_YAML_BYTES} characters"])
    try:
        loader = _LimitedLoader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_tree(node)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except _Refused as e:
        line, col = _pos(e.mark)
        raise LocatedErrors([f"{filename}:{line}:{col}: (yaml): {e.msg}"]) from None
    except RecursionError:
        raise LocatedErrors([f"{filename}:1:1: (yaml): nested too deeply"]) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = (e.problem or str(e)).strip()
        if e.context:
            msg = f"{msg} ({e.context.strip()})"
        raise LocatedErrors([f"{filename}:{line}:{col}: (yaml): {msg}"]) from None
    except (yaml.YAMLError, ValueError, TypeError) as e:  # e.g. an unhashable key, a bad timestamp
        raise LocatedErrors([f"{filename}:1:1: (yaml): {type(e).__name__}: {str(e).splitlines()[0][:200]}"]) from None
    if node is None or not isinstance(data, dict):
        raise LocatedErrors([f"{filename}:1:1: (top level): expected a mapping of {what}"])
    return data, mark_tree(node)


def where(marks: Marks, data: Any, loc: tuple, filename: str, unknown: bool = False) -> str:
    """``FILE:LINE:COL: field.path`` of an error location."""
    loc = strip_tags(tuple(loc), data)
    line, col = locate(marks, loc, unknown)
    return f"{filename}:{line}:{col}: {field_path(loc, data)}"


class FieldError(ValueError):
    """A validator's error about one field of the model it checks, for a cross-field rule.

    ``loc``: the field's path below the validated model, e.g. ``("regress",)`` or
    ``("reproducer", "command")``; :func:`validate` reports the problem at that field's
    ``FILE:LINE:COL`` (the first of them present in the file) instead of the model's start.
    """

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = tuple(loc)


def _field_loc(err: Any, data: Any) -> tuple:
    """The location of one pydantic error: a :class:`FieldError`'s field below the model's
    location when that field is in ``data`` (else the model's location)."""
    loc = tuple(err["loc"])
    exc = (err.get("ctx") or {}).get("error")
    extra = getattr(exc, "loc", None)
    if not isinstance(exc, FieldError) or not extra:
        return loc
    node = data
    for key in strip_tags(loc, data) + tuple(extra):
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return loc
    return loc + tuple(extra)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, lists, dicts, Annotated)."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def unknown_field_hint(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """What to say after "unknown field" at ``loc`` (a validation error's location in ``model``):
    `` (did you mean 'NAME'?)`` for the closest known field of the mapping it stands in
    (:func:`difflib.get_close_matches`, its default cutoff 0.6: a misspelling, not any field), else
    `` (known: a, b, ...)``; empty when the mapping's model cannot be found."""
    import difflib

    models: list[type[BaseModel]] = [model]
    for key in loc[:-1]:
        if isinstance(key, int):
            continue
        nxt: list[type[BaseModel]] = []
        for m in models:
            f = m.model_fields.get(str(key))
            if f is not None:
                nxt += _models_in(f.annotation)
        if not nxt:  # a dict key (a component's name) or a tag of a union: stay at these models
            continue
        models = nxt
    known = sorted({name for m in models for name in m.model_fields})
    if not known:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"


def field_description(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """The ``description`` of the field at ``loc`` (a validation error's location in ``model``: through
    nested models, list indices, dict keys and union tags), or ``""``."""
    models: list[type[BaseModel]] = [model]
    for i, key in enumerate(loc):
        if isinstance(key, int):
            continue
        fields = [m.model_fields[str(key)] for m in models if str(key) in m.model_fields]
        if not fields:
            continue  # a dict key or a union's tag: stay at these models
        if i == len(loc) - 1:
            return str(fields[0].description or "")
        models = [m for f in fields for m in _models_in(f.annotation)] or models
    return ""


def validate(model: type[M], data: dict[str, Any], marks: Marks, filename: str) -> M:
    """Validate ``data`` as ``model``; raises :class:`LocatedErrors` listing every problem
    (a :class:`FieldError` at its field's position)."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            unknown = err["type"] == "extra_forbidden"
            msg = ("unknown field" + unknown_field_hint(model, tuple(err["loc"])) if unknown
                   else err["msg"].removeprefix("Value error, "))
            said = field_description(model, tuple(err["loc"])) if err["type"] == "string_pattern_mismatch" else ""
            if said:  # a regular expression says less to a reader than the field's own words
                msg = f"expected {said}; got {err.get('input')!r}"
            problems.append(f"{where(marks, data, _field_loc(err, data), filename, unknown)}: {msg}")
        raise LocatedErrors(problems) from None


def load_located(model: type[M], text: str, filename: str, what: str = "fields") -> M:
    """:func:`compose` then :func:`validate`."""
    data, marks = compose(text, filename, what)
    return validate(model, data, marks, filename)
