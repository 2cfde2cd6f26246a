"""Data shipped inside the wheel -- the default patch stack, the runner profiles and the
example recipes -- and the one lookup order used for each of them.

The wheel carries the repository's ``patches/``, ``runners/`` and ``recipes/`` directories
as ``bisectbot/_shipped/<kind>/`` (copied by ``setup.py`` at build time, read through
:mod:`importlib.resources`). In a source checkout or an editable install the repository's
own top-level directories are the shipped default.

Lookup order (the first hit wins; documented in the README, "Where data is found"):

1. the command-line flag (``--stack FILE``, ``--profile NAME|FILE``, a recipe path);
2. the environment variable (``BISECTBOT_PATCHES_DIR``, ``BISECTBOT_RUNNERS``,
   ``BISECTBOT_RECIPES``);
3. next to the recipe: ``<recipe dir>/<kind>/`` and ``<recipe dir>/../<kind>/`` (the
   checkout layout, ``recipes/`` beside ``patches/`` and ``runners/``);
4. the current directory: ``./<kind>/``;
5. the shipped default.

A recipe without ``patches:`` never needs a stack: callers only look one up when the
recipe names patch ids. Errors are :class:`bisectbot.errors.BadInput` (exit 2) naming the
flag and the environment variable that would fix them.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from .errors import BadInput

__all__ = [
    "ENV", "FLAG", "find_recipe", "find_stack", "runner_search_path", "shipped_dir", "shipped_recipes",
]

#: Environment variable per kind of data.
ENV = {"patches": "BISECTBOT_PATCHES_DIR", "runners": "BISECTBOT_RUNNERS", "recipes": "BISECTBOT_RECIPES"}
#: Command-line flag per kind of data (what an error message tells the user to pass).
FLAG = {"patches": "--stack FILE", "runners": "--profile NAME|FILE", "recipes": "a RECIPE path"}

_KINDS = tuple(ENV)


def shipped_dir(kind: str) -> Path | None:
    """The shipped ``patches``, ``runners`` or ``recipes`` directory: inside the installed wheel
    (``bisectbot/_shipped/<kind>``), else the repository's ``<kind>/`` next to the package (a
    source checkout or an editable install); None when neither exists."""
    if kind not in _KINDS:
        raise ValueError(f"unknown kind of shipped data {kind!r} (one of {', '.join(_KINDS)})")
    res = resources.files("bisectbot") / "_shipped" / kind
    if res.is_dir():
        return Path(str(res))
    repo = Path(__file__).resolve().parent.parent / kind
    return repo if repo.is_dir() else None


def _near(recipe_path: str | Path | None, kind: str) -> list[Path]:
    if recipe_path is None:
        return []
    d = Path(recipe_path).resolve().parent
    out = [d / kind, d.parent / kind]
    return list(dict.fromkeys(out))


def _env_dirs(kind: str) -> list[Path]:
    return [Path(p) for p in os.environ.get(ENV[kind], "").split(os.pathsep) if p]


def find_stack(flag: str | Path | None = None, recipe_path: str | Path | None = None) -> Path:
    """The patch stack file (``stack.yaml``) by the lookup order of this module.

    ``flag`` is ``--stack FILE`` (a file, or a directory holding ``stack.yaml``); the variable is
    ``$BISECTBOT_PATCHES_DIR`` (a directory). A flag or variable that names a missing file is an
    error, not a reason to fall through. Raises :class:`BadInput` when nothing is found.
    """
    if flag is not None:
        p = Path(flag)
        p = p / "stack.yaml" if p.is_dir() else p
        if not p.is_file():
            raise BadInput(f"patch stack {p} (from --stack) does not exist; give --stack FILE (a stack.yaml or "
                           f"its directory) or leave it out to use {ENV['patches']} or the shipped stack")
        return p
    env = os.environ.get(ENV["patches"])
    if env:
        p = Path(env) / "stack.yaml"
        if not p.is_file():
            raise BadInput(f"patch stack {p} (from {ENV['patches']}={env}) does not exist; set {ENV['patches']} "
                           f"to a directory holding stack.yaml, unset it for the shipped stack, or give --stack FILE")
        return p
    tried = [d / "stack.yaml" for d in _near(recipe_path, "patches")] + [Path.cwd() / "patches" / "stack.yaml"]
    shipped = shipped_dir("patches")
    if shipped is not None:
        tried.append(shipped / "stack.yaml")
    for p in tried:
        if p.is_file():
            return p
    raise BadInput(f"no patch stack found (looked for {', '.join(str(p) for p in tried)}); "
                   f"give {FLAG['patches']} or set {ENV['patches']}=DIR (a directory holding stack.yaml)")


def runner_search_path(recipe_path: str | Path | None = None) -> list[Path]:
    """Directories searched for ``<name>.yaml`` runner profiles, in order: ``$BISECTBOT_RUNNERS``
    (``:``-separated), ``runners/`` next to the recipe and one level up, ``./runners``, the
    shipped profiles."""
    dirs = _env_dirs("runners") + _near(recipe_path, "runners") + [Path.cwd() / "runners"]
    shipped = shipped_dir("runners")
    if shipped is not None:
        dirs.append(shipped)
    return list(dict.fromkeys(dirs))


def shipped_recipes() -> list[Path]:
    """The example recipes shipped with bisectbot (``recipes/*.yaml``), sorted by name."""
    d = shipped_dir("recipes")
    return sorted(d.glob("*.yaml")) if d is not None else []


def find_recipe(arg: str | Path) -> Path:
    """A recipe argument: a path is returned as given (reading it reports a missing file as
    ``FILE:1:1: (file): cannot read``); a bare name that is no file here (``demo`` or ``demo.yaml``)
    is looked up in ``$BISECTBOT_RECIPES``, ``./recipes`` and the shipped recipes.

    Raises :class:`BadInput` naming what was tried when a bare name matches nothing.
    """
    p = Path(arg)
    if p.is_file() or p.parent != Path("."):
        return p
    name = p.name if p.suffix in (".yaml", ".yml") else f"{p.name}.yaml"
    tried = [p]
    dirs = _env_dirs("recipes") + [Path.cwd() / "recipes"]
    shipped = shipped_dir("recipes")
    if shipped is not None:
        dirs.append(shipped)
    for d in dirs:
        c = d / name
        tried.append(c)
        if c.is_file():
            return c
    import difflib

    names = sorted({c.stem for d in dirs if d.is_dir() for c in [*d.glob("*.yaml"), *d.glob("*.yml")]})
    close = difflib.get_close_matches(Path(name).stem, names, n=1)  # a misspelling (cutoff 0.6), not any name
    raise BadInput(f"recipe {arg!s} not found (looked for {', '.join(str(t) for t in dict.fromkeys(tried))})"
                   + (f"; did you mean {close[0]!r}?" if close else "")
                   + f"; give a recipe path or set {ENV['recipes']}=DIR; shipped examples: "
                   f"{', '.join(r.stem for r in shipped_recipes()) or 'none'}")
