"""The Reproduce section a maintainer can run without bisectbot and without its state (issue 25,
input 3), in the spirit of syzbot's "C reproducer".

Three parts:

* **The server** of the first bad candidate (and how to get the last good's), by the *candidate's*
  kind, not the recipe's source (a descent's candidates are commits of a component even when the
  recipe's source is a registry): for a commit of the source's own repository the clone, the
  ``git checkout`` of the full SHA, the recipe's build command and its server command with its
  environment; for a registry nightly ``docker run`` of the image by digest; for a component commit
  overlaid on a nightly (issue 38) the component's clone at that commit, a two-line Dockerfile that
  copies its package over the nightly's installed one (found in the image with
  ``importlib.util.find_spec``, which does not import it), ``docker build`` and ``docker run``; for a
  release the ``pip install`` of that version. ``{port}`` becomes ``"${PORT:-8000}"``; the recipe's
  ``server.mounts`` become ``-v`` flags (the runner profile's mounts are the host's: a note says so).
* **The request**: the exact chat request body the reproducer sent at the failing size
  (``request.json``: model, messages, ``max_tokens``, ``temperature``, ``seed``), rebuilt from the
  prompt generator's arguments recorded with the probe (filler seed, filler words, question, needle
  count: :func:`bisectbot.reproduce.prompts.build_messages` is a pure function of them), and
  ``make_request.py``, a standalone copy of that generator (Python standard library only) which
  prints the same JSON; a one-line ``curl`` sends it. Then the reply expected (the last good's)
  and the reply seen (the first bad's), with the reasons.
* **With bisectbot**: ``bisectbot run RECIPE --good SHA --bad SHA`` with full SHAs/digests (never
  ``HEAD~80``) and the recipe by name when it is shipped, else by file name with its text beside.

:func:`facts` (at the end of a run, where the recipe is known) records what the section needs in
``RunResult.reproduction``; :func:`kit` builds the section from a result (``report render`` of a
saved ``result.json`` gives the same section).
"""

from __future__ import annotations

import inspect
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..models import Candidate, RunResult, StageResult, Status

RECIPE_TEXT_CHARS = 12_000
"""A recipe's text longer than this (characters) is not copied into the result (a real one is ~3K)."""
_PYTHON = re.compile(r"^/.*/python(3(\.\d+)?)?$")


def facts(recipe: Any, recipe_path: Path | str) -> dict[str, Any]:
    """What the Reproduce section needs from ``recipe`` (a :class:`bisectbot.recipe.Recipe`) loaded
    from ``recipe_path``: its name, whether it is a shipped recipe (then the name is enough), the
    file name and text, the source, server and reproducer settings. JSON-ready."""
    from ..shipped import shipped_dir
    from ..sources.git import without_credentials

    path = Path(recipe_path).resolve()
    shipped = shipped_dir("recipes")
    is_shipped = shipped is not None and path.parent == shipped.resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        text = ""
    src = recipe.source.model_dump(mode="json")
    rep = recipe.reproducer
    return {
        "recipe": recipe.name, "shipped": is_shipped, "file": path.name,
        "text": text if len(text) <= RECIPE_TEXT_CHARS else "",
        "source": {k: src.get(k) for k in ("kind", "repo", "component", "registry", "repository", "package")
                   if src.get(k) is not None}
        | ({"index": without_credentials(str(src["index_url"]))} if src.get("index_url") else {})
        | ({"wheels": {k: without_credentials(str(v)) if k.endswith("index") else v
                       for k, v in src["wheels"].items() if v is not None}} if src.get("wheels") else {}),
        "server": {"command": list(recipe.server.command), "env": dict(recipe.server.env), "port": recipe.server.port,
                   "build_command": list(recipe.server.build_command or []),
                   "mounts": list(getattr(recipe.server, "mounts", None) or [])},
        "reproducer": {"kind": rep.kind, "question": rep.question, "needles": rep.needles, "seed": rep.seed,
                       "max_tokens": rep.max_tokens, "temperature": rep.temperature,
                       "expected_answer": rep.expected_answer, "command": list(rep.command or []),
                       # issue 39: a measured value's sampling and load (the Reproduce section says how to measure)
                       "measure": ({**rep.measure.model_dump(mode="json"), "better": rep.measure.direction()}
                                   if rep.measure is not None else None),
                       "load": rep.load.model_dump(mode="json") if rep.load is not None else None},
        "model": recipe.model, "tp": recipe.tp, "patches": list(recipe.patches),
        "repos": _repos(recipe),
        # the package directory of a component in its repository: its key in bisect.components, as
        # the container runner's overlay builds take it (bisectbot.build.Overlay.path_in_repo)
        "packages": {name: name for name in (recipe.bisect.components or {})},
    }


def _repos(recipe: Any) -> dict[str, str]:
    """Component name -> repository URL (credentials removed): the recipe's git source and its
    ``bisect.components``."""
    from ..sources.git import without_credentials

    out: dict[str, str] = {}
    src = recipe.source
    if getattr(src, "kind", "") == "git" and getattr(src, "repo", ""):
        name = src.component or Path(str(src.repo)).name.removesuffix(".git")
        out[name] = without_credentials(str(src.repo))
    for name, comp in (recipe.bisect.components or {}).items():
        out[comp.component or name] = without_credentials(str(comp.repo))
        out.setdefault(name, without_credentials(str(comp.repo)))
    return out


@dataclass
class Kit:
    """The Reproduce section's parts (plain text; the template fences and sanitises them).

    ``server``: shell lines that start the first bad's server; ``good_hint``: how to get the last
    good's instead (a verb phrase: ``check out SHA (label)``, ``run DIGEST (label)``, ``build SHA (label)``); ``request``: the chat request body (None when the probe did not record the
    prompt's arguments); ``make_request``: the standalone generator script; ``send``: the one-line
    ``curl``; ``expected``/``seen``: the last good's and first bad's replies; ``bot``: the
    bisectbot command; ``recipe_file``/``recipe_text``: the recipe to save beside it (empty for a
    shipped recipe, which goes by name)."""

    server: list[str] = field(default_factory=list)
    good_hint: str = ""
    #: a command reproducer: the shell line that runs it in the candidate (no server to start)
    run_command: str = ""
    #: a measured value (issue 39): what to compare, in words
    measured: str = ""
    notes: list[str] = field(default_factory=list)
    request: dict[str, Any] | None = None
    make_request: str = ""
    send: str = ""
    size: int | None = None
    prompt_tokens: int | None = None
    expected: str = ""
    expected_from: str = ""
    seen: str = ""
    seen_from: str = ""
    reasons: str = ""
    bot: str = ""
    recipe_file: str = ""
    recipe_text: str = ""

    def request_json(self) -> str:
        """``request.json`` as written next to the report (indented, UTF-8 kept)."""
        return json.dumps(self.request, indent=1, sort_keys=True, ensure_ascii=False) + "\n" if self.request else ""


def _argv_text(argv: list[str], model: str, tp: int, host_python: bool = True) -> str:
    """A recipe argv as one shell line: ``{port}`` -> ``"${PORT:-8000}"``, ``{model}``/``{tp}`` filled, an
    absolute Python interpreter (the demo fills in the bot's own) shown as ``python3`` on the host
    (``host_python``; in a container the image's own path is kept)."""
    out = []
    for i, a in enumerate(argv):
        if i == 0 and host_python and _PYTHON.match(a):
            out.append("python3")
            continue
        a = a.replace("{model}", model).replace("{tp}", str(tp))
        if "{port}" in a or "{source}" in a:  # double quotes: the shell fills in $PORT / $PWD
            a = a.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
            out.append('"' + a.replace("{port}", "${PORT:-8000}").replace("{source}", "$PWD") + '"')
        else:
            out.append(shlex.quote(a))
    return " ".join(out)


#: Names that may appear unquoted in the generated lines (a package path, a module, a component).
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$")
#: Environment names whose values the Reproduce lines never print: the maintainer's own environment
#: supplies them (``-e NAME`` / ``NAME="$NAME"``).
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
#: The heredoc delimiter of the generated files (no recorded value can be a line equal to it: every
#: value in those files is checked against :data:`_NAME` or is an image reference by digest).
_EOF = "BISECTBOT_EOF"
_IMAGE_BY_DIGEST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*@sha256:[0-9a-f]{64}$")
#: Run inside the image: copy the overlay's files over the installed package (found with
#: importlib.util.find_spec, which does not import it) and delete what the commit deleted -- the
#: build's own overlay step (bisectbot.build._apply_overlay).
OVERLAY_SCRIPT = """\
import importlib.util, os, sys, tarfile
pkg, mod = sys.argv[1], sys.argv[2]
dest = importlib.util.find_spec(mod).submodule_search_locations[0]
def target(name):
    return os.path.join(dest, name[len(pkg) + 1:])
with tarfile.open("/tmp/overlay/overlay.tar") as tar:
    for m in tar.getmembers():
        if m.isfile():
            os.makedirs(os.path.dirname(target(m.name)), exist_ok=True)
            with open(target(m.name), "wb") as f:
                f.write(tar.extractfile(m).read())
for name in open("/tmp/overlay/deleted.txt").read().splitlines():
    if name and os.path.lexists(target(name)):
        os.remove(target(name))
"""


def _comment(text: str) -> str:
    """A label as a shell comment: one line, printable."""
    return " ".join(re.sub(r"[\x00-\x1f\x7f]", " ", text).split())[:160]


def _env_pairs(env: dict[str, Any], docker: bool) -> str:
    """``-e NAME=VALUE`` (docker) or ``NAME=VALUE`` (host) for each valid name, quoted; secret-like
    names without their value (the maintainer's environment supplies it)."""
    out = []
    for k, v in sorted(env.items()):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)):
            continue  # the recipe refuses such names; an old result file may still hold one
        if _SECRET_NAME.search(k):
            out.append(f"-e {k}" if docker else f'{k}="${k}"')
        else:
            out.append(f"-e {shlex.quote(f'{k}={v}')}" if docker else shlex.quote(f"{k}={v}"))
    return " ".join(out)


def _mount_flag(m: str) -> str:
    """``-v HOST:CONTAINER[:MODE]`` quoted; a leading ``~/`` stays outside the quotes so the shell
    expands it as the runner did."""
    if m.startswith("~/"):
        return f'-v "$HOME"/{shlex.quote(m[2:])}'
    return f"-v {shlex.quote(m)}"


def _server_lines(f: dict[str, Any], cand: Candidate, label: str) -> tuple[list[str], list[str], str]:
    """Shell lines that start ``cand``'s server, notes, and the verb phrase that gets the last good's
    instead (``check out SHA`` / ``run DIGEST`` / ``build SHA`` / ``install VERSION``); see the module
    doc. No lines (and a note why) where plain shell lines cannot build what the bot built."""
    src, srv = f.get("source") or {}, f.get("server") or {}
    model, tp = str(f.get("model") or ""), int(f.get("tp") or 1)
    kind = src.get("kind")
    ref = cand.ref
    meta = cand.meta if isinstance(cand.meta, dict) else {}
    label = _comment(label)
    repos = f.get("repos") or {}
    notes: list[str] = []
    commits = meta.get("commits") if isinstance(meta.get("commits"), dict) else {}
    several = len(commits) > 1 or "{source:" in " ".join(map(str, srv.get("build_command") or []))
    if cand.kind.value == "commit" and several:
        return [], [f"the {label} candidate is several repositories at once ("
                    + ", ".join(f"{k} {str(v)[:12]}" for k, v in sorted(commits.items()))
                    + "): use the bisectbot command below, which checks each out where the build reads it"], "check out"
    if kind == "registry" and cand.kind.value == "commit":
        return _overlay_lines(f, cand, meta, label, repos, model, tp)
    wheel = _wheel_of(cand)
    if wheel is not None and isinstance(src.get("wheels"), dict):
        return _wheel_lines(src["wheels"], wheel, srv, label, model, tp, notes)
    if kind == "git" or cand.kind.value == "commit":
        repo = repos[cand.component] if cand.component in repos else src.get("repo", "")
        if not repo:
            return [], [f"no repository recorded for component {cand.component!r}"], "check out"
        lines = [f"git clone -- {shlex.quote(str(repo))} candidate && cd candidate",
                 f"git checkout --detach {shlex.quote(ref)}   # {label}"]
        if srv.get("build_command"):
            lines.append(_argv_text(list(srv["build_command"]), model, tp))
        env = _env_pairs(srv.get("env") or {}, docker=False)
        lines.append(f"{env} {_argv_text(list(srv.get('command') or []), model, tp)}".strip())
        if _uses_bisectbot(srv):
            notes.append(_BOT_PYTHON_NOTE)
        return lines, _stack_note(f, notes), "check out"
    if kind == "registry":
        image = str(meta.get("image") or "") or f"{src.get('registry', '')}/{src.get('repository', '')}@{ref}".lstrip("/")
        notes.append(_PROFILE_NOTE)
        return [_docker_run(srv, image, model, tp) + f"   # {label}"], _stack_note(f, notes), "run"
    if kind == "pypi":
        env = _env_pairs(srv.get("env") or {}, docker=False)
        index = str(src.get("index") or "")
        lines = [f"python3 -m venv candidate && . candidate/bin/activate   # {label}",
                 "pip install " + (f"--index-url {shlex.quote(index)} " if index else "")
                 + shlex.quote(f"{src.get('package') or src.get('component') or ''}=={ref}"),
                 f"{env} {_argv_text(list(srv.get('command') or []), model, tp)}".strip()]
        return lines, _stack_note(f, notes), "install"
    return [], [], "check out"


def _wheel_of(cand: Candidate) -> tuple[str, str] | None:
    """``(wheel file name, per-commit index URL)`` when ``cand`` was installed from a prebuilt wheel
    (``meta["built_from"]``, set by :func:`kit` from its probe: ``prebuilt wheel FILE from URL (...)``)."""
    meta = cand.meta if isinstance(cand.meta, dict) else {}
    m = re.match(r"prebuilt wheel (\S+\.whl) from (\S+)", str(meta.get("built_from") or ""))
    return (m.group(1), m.group(2)) if m else None


def _wheel_lines(wheels: dict[str, Any], wheel: tuple[str, str], srv: dict[str, Any], label: str, model: str,
                 tp: int, notes: list[str]) -> tuple[list[str], list[str], str]:
    """Lines that install the prebuilt wheel a candidate was probed from (issue 40: the commit is not
    built from source) and start its server: a virtualenv, ``pip install --only-binary :all:`` of that
    version from the commit's index (its dependencies from ``dependencies_index`` or pip's default)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    name, index = wheel
    try:
        dist, version = parse_wheel_filename(name)[:2]
    except InvalidWheelFilename:
        return [], [f"the candidate was installed from {name}, whose name is no wheel's"], "install the wheel of"
    deps = str(wheels.get("dependencies_index") or "")
    env = _env_pairs(srv.get("env") or {}, docker=False)
    lines = [f"python3 -m venv candidate && . candidate/bin/activate   # {label}",
             "pip install --only-binary :all: " + (f"--index-url {shlex.quote(deps)} " if deps else "")
             + f"--extra-index-url {shlex.quote(index)} {shlex.quote(f'{dist}=={version}')}"]
    if srv.get("command"):
        lines.append(f"{env} {_argv_text(list(srv['command']), model, tp)}".strip())
    notes.append(f"installed from the prebuilt wheel {name}, as the bot probed it; the commit was not built")
    return lines, notes, "install the prebuilt wheel of"


_BOT_PYTHON_NOTE = ("this server is bisectbot's own reference engine, bisectbot.demo.engine, which ships with "
                    "bisectbot: run these lines with a python3 that has bisectbot installed, after pip install "
                    "bisectbot or in the virtualenv that ran the bot")


def _uses_bisectbot(srv: dict[str, Any]) -> bool:
    """True when the server or build command runs a ``bisectbot`` module (``-m bisectbot.demo.engine``):
    the lines then need an interpreter that has the bot, whatever ``python3`` is on the reader's host."""
    argv = [str(a) for k in ("command", "build_command") for a in (srv.get(k) or [])]
    return any(a == "bisectbot" or a.startswith("bisectbot.") for a in argv)


_PROFILE_NOTE = ("plus the runner profile's docker flags (devices, groups, shm), mounts (the model cache) and "
                 "environment on a GPU host")


def _stack_note(f: dict[str, Any], notes: list[str]) -> list[str]:
    if f.get("patches"):
        notes.append("the bot applied its patch stack (" + ", ".join(map(str, f["patches"])) + ") to each candidate "
                     "before serving it; these lines do not, so a bug the stack works around shows here too")
    return notes


def _overlay_lines(f: dict[str, Any], cand: Candidate, meta: dict[str, Any], label: str, repos: dict[str, str],
                   model: str, tp: int) -> tuple[list[str], list[str], str]:
    """A component commit overlaid on a nightly: the files changed between the image's commit and
    this one, and the deletions, applied as the bot's build did (:data:`OVERLAY_SCRIPT`)."""
    srv = f.get("server") or {}
    base, base_commit = str(meta.get("base") or ""), str(meta.get("base_commit") or "")
    repo = repos.get(cand.component, "")
    pkg = str((f.get("packages") or {}).get(cand.component) or cand.component)
    mod = PurePosixPath(pkg).name
    refusals = [(not (base and _IMAGE_BY_DIGEST.match(base)), "no image by digest recorded as its base"),
                (not (re.fullmatch(r"[0-9a-f]{7,40}", base_commit) and re.fullmatch(r"[0-9a-f]{7,40}", cand.ref)),
                 "no commit recorded for the base image"),
                (not repo, f"no repository recorded for component {cand.component!r}"),
                (not (_NAME.match(pkg) and _NAME.match(mod)), f"package path {pkg!r} is not a plain path"),
                (bool(srv.get("build_command")), "it was built from source by server.build_command")]
    why = next((reason for refused, reason in refusals if refused), "")
    if why:
        return [], [f"the {label} candidate cannot be rebuilt by plain shell lines here ({why}): use the bisectbot "
                    "command below"], "build"
    lines = [f"git clone -- {shlex.quote(str(repo))} candidate && cd candidate",
             f"git checkout --detach {cand.ref}   # {label}",
             f"git diff --no-renames --name-only --diff-filter=d {base_commit} {cand.ref} -- {pkg}/ > changed.txt",
             f"git diff --no-renames --name-only --diff-filter=D {base_commit} {cand.ref} -- {pkg}/ > deleted.txt",
             "tar -cf overlay.tar -T changed.txt",
             f"cat > overlay.py <<'{_EOF}'", *OVERLAY_SCRIPT.splitlines(), _EOF,
             f"cat > Dockerfile.bisectbot <<'{_EOF}'",
             f"FROM {base}",
             "COPY overlay.tar deleted.txt overlay.py /tmp/overlay/",
             f"RUN python3 /tmp/overlay/overlay.py {pkg} {mod} && rm -rf /tmp/overlay",
             _EOF,
             "docker build -f Dockerfile.bisectbot -t bisectbot-candidate .",
             _docker_run(srv, "bisectbot-candidate", model, tp)]
    notes = [f"{cand.component} at that commit overlaid on the image {base}: the package files that differ from "
             f"the image's own commit {base_commit[:12]}, deletions included, as the bot built it",
             _PROFILE_NOTE]
    return lines, _stack_note(f, notes), "build"


def _docker_run(srv: dict[str, Any], image: str, model: str, tp: int) -> str:
    """``docker run`` of ``image`` with the recipe's port (published on 127.0.0.1 only, as the runner
    does), environment, mounts and server command (an interpreter path is the image's, kept)."""
    envs = _env_pairs(srv.get("env") or {}, docker=True)
    vols = " ".join(_mount_flag(str(m)) for m in srv.get("mounts") or [])
    port = int(srv.get("port") or 8000)
    argv = [a.replace("{port}", str(port)) for a in srv.get("command") or []]
    return " ".join(x for x in ["docker run --rm", f"-p 127.0.0.1:\"${{PORT:-8000}}\":{port}", envs, vols,
                                shlex.quote(image), _argv_text(argv, model, tp, host_python=False)] if x)


def make_request_script(body: dict[str, Any], seed: int, words: int, question: str, needles: int) -> str:
    """A standalone Python script (standard library only) that prints ``body`` as JSON, its
    ``messages`` rebuilt by a copy of :mod:`bisectbot.reproduce.prompts`' generator."""
    from ..reproduce import prompts

    src = inspect.getsource(prompts)
    start = src.index("_NEEDLE_WORDS = ")
    end = src.index("@dataclass\nclass Prompt")
    parts = [src[start:end].rstrip(), "_WORD_CACHE: dict[int, tuple[list[str], list[int]]] = {}",
             inspect.getsource(prompts.filler_words).rstrip(), inspect.getsource(prompts.preamble).rstrip(),
             inspect.getsource(prompts.build_messages).rstrip()]
    rest = {k: v for k, v in body.items() if k != "messages"}
    return "\n".join([
        '"""Prints the chat request of a bisectbot report as JSON: python3 make_request.py > request.json',
        "(a copy of bisectbot.reproduce.prompts' generator: the prompt is a function of these arguments)."
        '"""',
        "from __future__ import annotations",
        "", "import hashlib", "import json", "import random", "import sys", "from typing import Any", "", "",
        "\n\n\n".join(parts), "", "",
        f"SEED, WORDS, NEEDLES = {seed!r}, {words!r}, {needles!r}",
        f"QUESTION = {question!r}",
        f"REQUEST = {json.dumps(rest, ensure_ascii=True)}",
        "",
        'if __name__ == "__main__":',
        "    codes = needle_codes(SEED, NEEDLES) if NEEDLES else []",
        '    json.dump({**REQUEST, "messages": build_messages(SEED, WORDS, QUESTION, codes)}, sys.stdout, indent=1,',
        "              sort_keys=True, ensure_ascii=False)",
        '    sys.stdout.write("\\n")',
        "",
    ])


def _seed_of(row: dict[str, Any], default: int) -> int:
    conf = str((row.get("evidence") or {}).get("confirmation") or "")
    m = re.fullmatch(r"seed (\d+)", conf)
    return int(m.group(1)) if m else default


def kit(result: RunResult) -> Kit | None:
    """The Reproduce section of ``result`` (None when the run recorded no reproduction facts:
    an old ``result.json``, or a run without a final range)."""
    from .evidence import culprit_evidence, is_command_result

    f = result.reproduction
    final = result.final
    if not f or final is None or final.first_bad is None:
        return None
    from .words import ends_words

    k = Kit()
    fb, lg = _with_built_from(final, final.first_bad), final.last_good
    ends = ends_words(result.kind, result.regress)  # first fixed / last broken in a fix bisection (issue 41, 7)
    k.server, k.notes, verb = _server_lines(f, fb, f"{ends['first']}: {fb.label or fb.ref}")
    if lg is not None and k.server:
        k.good_hint = f"{verb} {lg.ref} ({lg.label or ends['last']})"
    rep = f.get("reproducer") or {}
    m = rep.get("measure") if isinstance(rep.get("measure"), dict) else None
    if rep.get("kind") == "command" and rep.get("command"):
        import shlex

        k.run_command = " ".join(shlex.quote(str(a)) for a in rep["command"])
    if m is not None:
        what = m.get("metric") or "the number on its last stdout line"
        k.measured = (f"{m.get('samples')} times or more on each candidate, and compare the medians of {what} "
                      f"({m.get('better') or 'higher'} is better)")
        if rep.get("kind") == "load" and isinstance(rep.get("load"), dict):
            ld = rep["load"]
            k.measured = (f"measure {what} of {ld.get('requests')} streamed chat requests of about "
                          f"{ld.get('prompt_tokens')} prompt and {ld.get('output_tokens')} generated tokens, "
                          f"{ld.get('concurrency')} at a time, {m.get('samples')} times or more against each "
                          "candidate's server, and compare the medians (bisectbot's built-in load does this)")
    ev = culprit_evidence(result, command=is_command_result(result))
    if ev is not None and not ev.command:
        bad_row = _row_of(result, ev.bad.candidate.ref, ev.bad.requested, "GARBAGE")
        words = (bad_row.get("evidence") or {}).get("prompt_words") if bad_row else None
        if isinstance(words, int):
            from ..reproduce.client import sampling_fields
            from ..reproduce.prompts import build_messages, needle_codes

            seed = _seed_of(bad_row or {}, int(rep.get("seed") or 0))
            n = int(rep.get("needles") or 0)
            question = str(rep.get("question") or "")
            body: dict[str, Any] = {"model": result.model or f.get("model") or "", "messages": [],
                                    "max_tokens": int(rep.get("max_tokens") or 256),
                                    **sampling_fields(float(rep.get("temperature") or 0.0), int(rep.get("seed") or 0))}
            body["messages"] = build_messages(seed, words, question, needle_codes(seed, n) if n else [])
            k.request = body
            k.make_request = make_request_script(body, seed, words, question, n)
            k.send = ("curl -s http://127.0.0.1:\"${PORT:-8000}\"/v1/chat/completions -H 'Content-Type: application/json' "
                      "-d @request.json | python3 -c 'import json,sys; m=json.load(sys.stdin)[\"choices\"][0][\"message\"]; "
                      "print(m.get(\"content\") or m.get(\"reasoning_content\") or \"\")'")
        k.size, k.prompt_tokens = ev.bad.requested, ev.bad.prompt_tokens
        k.seen, k.seen_from = ev.bad.text, ev.bad.candidate.label or ev.bad.candidate.ref
        k.reasons = "; ".join(ev.bad.reasons)
        if ev.good is not None:
            k.expected = ev.good.text
            k.expected_from = ev.good.candidate.label or ev.good.candidate.ref
    k.bot = bot_command(result)
    if not f.get("shipped"):
        k.recipe_file, k.recipe_text = str(f.get("file") or ""), str(f.get("text") or "")
    return k


def _with_built_from(final: StageResult, cand: Candidate) -> Candidate:
    """``cand`` with ``meta["built_from"]`` of its last probe in ``final`` (a prebuilt wheel or a source build,
    :mod:`bisectbot.run.commit_wheels`), unchanged when its probes said nothing of it."""
    import dataclasses

    said = next((p.extra.get("built_from") for p in reversed(final.probes)
                 if p.candidate.ref == cand.ref and isinstance(p.extra, dict) and p.extra.get("built_from")), None)
    if not said:
        return cand
    return dataclasses.replace(cand, meta={**(cand.meta if isinstance(cand.meta, dict) else {}), "built_from": said})


def _row_of(result: RunResult, ref: str, requested: int | None, outcome: str) -> dict[str, Any] | None:
    for st in result.stages:
        for p in st.probes:
            if p.candidate.ref != ref:
                continue
            for r in p.table:
                if r.get("requested", r.get("size")) == requested and r.get("outcome") == outcome:
                    return r
    return None


def reproduce_ends(final: StageResult) -> tuple[Candidate | None, Candidate | None]:
    """The ``--good``/``--bad`` of the report's Reproduce command: the last good and first bad,
    except for an inconclusive search, whose last good/first bad are a best guess (maybe never
    probed; a run between them would "verify" the guess from cached noisy verdicts): then the
    stage's own range, which repeats the search."""
    if final.status is Status.INCONCLUSIVE and len(final.candidates) >= 2:
        return final.candidates[0], final.candidates[-1]
    return final.last_good, final.first_bad


def bot_command(result: RunResult) -> str:
    """``bisectbot run RECIPE --good REF --bad REF --out reproduce``: the recipe by name when it is
    shipped, else by its file name; the final range's ends as full SHAs (or digests), never
    symbolic refs; no ``--state`` (a bot user's own ledger)."""
    f = result.reproduction
    final = result.final
    if final is None:
        return ""
    rg, rb = reproduce_ends(final)
    if rg is None or rb is None:
        return ""
    recipe = str(f.get("recipe") if f.get("shipped") else f.get("file") or f.get("recipe") or result.recipe)
    return shlex.join(["bisectbot", "run", recipe, "--good", rg.ref, "--bad", rb.ref, "--out", "reproduce"])


__all__ = ["Kit", "bot_command", "facts", "kit", "make_request_script", "reproduce_ends"]
