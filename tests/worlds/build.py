"""Materialise a generated world (:mod:`tests.worlds.generator`) and run ``bisectbot run`` on it.

:func:`materialise` writes a git repository (one commit per world commit, by ``git fast-import``:
fixed dates, so the same world has the same SHAs) and the recipe file. :func:`run_world` runs the
installed ``bisectbot run ... --json`` once per night (local runner, the world's own state and out
directories, ``$WORLD_ENV`` of the night) and :func:`score` compares the last night's result with
the world's truth. Nothing here imports ``bisectbot``: the bot is a process.

Every commit holds the same scripts (below) and its own ``world.json``; server worlds add
``engine.json`` (the reference engine's settings: ``python -m bisectbot.demo.engine`` is the
candidate's server). Scripts that keep state across runs (per-run flakiness, transient build
failures) write to ``$WORLD_RW``, a directory made writable in the sandbox
(``BISECTBOT_SANDBOX_WRITABLE``) and handed over with ``env_passthrough``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .generator import CONFIDENCE, World

CHECK = """\
import json, os, random, sys
c = json.load(open("world.json"))
if c.get("skip"):
    print("cannot test this commit (exit 125)")
    sys.exit(125)
env = os.environ.get("WORLD_ENV", "")
size = int(sys.argv[1]) if len(sys.argv) > 1 else None
bad = bool(c.get("bad"))
if size is not None:
    if c.get("crash_above") is not None and size >= c["crash_above"] and env != c.get("env_bad"):
        print("Segmentation fault (core dumped)", file=sys.stderr)
        sys.exit(3)
    t, band = c.get("threshold"), c.get("band")
    bad = (t is not None and size >= t) or bool(band and band[0] <= size < band[1])
if c.get("env_bad") is not None and env == c["env_bad"]:
    bad = True
if c.get("drift_after") is not None:  # the host changes during the night: runs counted across commits
    path = os.path.join(os.environ["WORLD_RW"], "host-runs")
    runs = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(runs + 1))
    bad = bad or runs >= c["drift_after"]
p = c.get("hit", 1.0) if bad else c.get("fp", 0.0)  # the chance this run fails
if 0.0 < p < 1.0:
    path = os.path.join(os.environ["WORLD_RW"], "runs-%d" % c["i"])
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    bad = random.Random("%s-%d-%d" % (c["seed"], c["i"], n)).random() < p
if bad:
    print("garbage at %s tokens" % size if size else "the bug shows", file=sys.stderr)
sys.exit(1 if bad else 0)
"""

BUILD = """\
import json, os, sys
c = json.load(open("world.json"))
if c.get("build") == "fail":
    print("error: compilation failed: undefined reference to `paged_attention_v2'")
    sys.exit(1)
if c.get("build") == "transient":
    mark = os.path.join(os.environ["WORLD_RW"], "built-%d" % c["i"])
    if not os.path.exists(mark):
        open(mark, "w").write("x")
        print("ERROR: HTTP error 429 while getting https://files.pythonhosted.org/packages/torch.whl: "
              "Too Many Requests (retry later)")
        sys.exit(1)
print("built")
"""

SERVE = """\
import json, os, random, sys
from bisectbot.demo.engine import main
config = "engine.json"
e = json.load(open(config))
hit = e.pop("start_hit", None)
if hit is not None:  # the bug shows on a share of server starts: decided once per start
    path = os.path.join(os.environ["WORLD_RW"], "starts-%d" % e["seed"])
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    if random.Random("start-%d-%d" % (e["seed"], n)).random() >= hit:
        e["threshold"] = None
    config = os.path.join(os.environ["WORLD_RW"], "engine-%d-%d.json" % (e["seed"], n))
    json.dump(e, open(config, "w"))
sys.exit(main(["--config", config] + sys.argv[1:]))
"""


PIN_CHECK = """\
import json, os, sys
holder, comp = sys.argv[1], sys.argv[2]
c = json.load(open(os.path.join(holder, "world.json")))
bad = bool(c.get("bad")) or open(os.path.join(comp, "bug.txt")).read().strip() == "1"
if bad:
    print("the bug shows", file=sys.stderr)
sys.exit(1 if bad else 0)
"""

#: The first lines of vllm-project/vllm docker/Dockerfile.rocm_base (as tests/bisect/test_pin_descent.py).
PIN_DOCKERFILE = """\
ARG BASE_IMAGE=rocm/dev-ubuntu-22.04:7.2.1-complete
ARG AITER_BRANCH="{tag}"
ARG AITER_REPO="https://github.com/ROCm/aiter.git"

FROM ${{BASE_IMAGE}} AS base
FROM base AS build_aiter
ARG AITER_BRANCH
RUN git clone --recursive https://github.com/ROCm/aiter.git && cd aiter && git checkout ${{AITER_BRANCH}}
"""


def pin_tag(i: int) -> str:
    """The tag of component commit ``i`` (``v0.1.<i>``; a requirements pin is ``0.1.<i>``)."""
    return f"v0.1.{i}"


def _commit(i: int, when: int, message: str, parents: list[int], files: dict[str, str]) -> bytes:
    """One ``git fast-import`` commit on ``refs/heads/main``: mark ``i + 1``, committed at ``when``
    (seconds, fixed: the same world has the same SHAs), the first of ``parents`` (indices) its parent
    and the others merged (none: a root commit), holding exactly ``files``."""
    def data(b: bytes) -> bytes:
        return b"data %d\n" % len(b) + b + b"\n"

    out = [b"commit refs/heads/main\n", b"mark :%d\n" % (i + 1), b"committer t <t@example.com> %d +0000\n" % when,
           data(message.encode()), b"from :%d\n" % (parents[0] + 1) if parents else b"deleteall\n"]
    out += [b"merge :%d\n" % (extra + 1) for extra in parents[1:]]
    for name, text in files.items():
        out += [f"M 100644 inline {name}\n".encode(), data(text.encode())]
    return b"".join(out)


def _pin_streams(world: World) -> tuple[bytes, bytes]:
    """fast-import streams of a pin world: the component (tags on every commit) and the holder."""
    comp: list[bytes] = []
    for i, c in enumerate(world.params["component"]):
        comp.append(_commit(i, 1_750_000_000 + 60 * i, f"aiter change {i}", [i - 1] if i else [],
                            {"v.txt": f"a{i}\n", "aiter/ops.py": f"X = {i}\n", "bug.txt": "1\n" if c["bad"] else "0\n"}))
    for i in range(len(world.params["component"])):
        comp.append(f"reset refs/tags/{pin_tag(i)}\nfrom :{i + 1}\n\n".encode())
    holder: list[bytes] = []
    for i, c in enumerate(world.commits):
        tag = pin_tag(c["pin"])
        if world.params["pin_file"] == "requirements":
            files = {"requirements/rocm.txt": f"numba == 0.65.0\namd-aiter=={tag.lstrip('v')}\n"}
        else:
            files = {"docker/Dockerfile.rocm_base": PIN_DOCKERFILE.format(tag=tag)}
        files["world.json"] = json.dumps({"i": i, "seed": world.seed, "bad": c["bad"]}, sort_keys=True) + "\n"
        files["docs/notes.md"] = f"{i}\n"
        if not c["bump"] or c["mixed"]:
            files["vllm/attention.py"] = f"X = {i}\n"
        message = f"[ROCm] Bump AITER to {tag}" if c["bump"] else f"vllm change {i}"
        holder.append(_commit(i, 1_760_000_000 + 60 * i, message, [i - 1] if i else [], files))
    return b"".join(comp), b"".join(holder)


def _import(repo: Path, stream: bytes, marks: Path) -> list[str]:
    """``git init`` + ``git fast-import`` of ``stream`` into ``repo``: the SHAs in mark order."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    subprocess.run(["git", "fast-import", "--quiet", f"--export-marks={marks}"], cwd=repo,
                   input=stream, check=True, env=env)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=repo, check=True, env=env)
    by_mark = dict(line.split() for line in marks.read_text().splitlines())
    return [by_mark[f":{i + 1}"] for i in range(len(by_mark))]


@dataclass
class Materialised:
    """Where a world lies: repository, recipe, per-night out directories, state and rw directories."""

    root: Path
    repo: Path
    recipe: Path
    state: Path
    rw: Path
    shas: list[str] = field(default_factory=list)


def _fast_import_stream(world: World) -> bytes:
    scripts = {"check.py": CHECK, "build.py": BUILD, "serve.py": SERVE}
    chunks: list[bytes] = []
    for i, c in enumerate(world.commits):
        files = dict(scripts)
        settings = {k: v for k, v in c.items() if k not in ("engine", "parents")}
        files["world.json"] = json.dumps({"i": i, "seed": world.seed, **settings}, sort_keys=True) + "\n"
        if "engine" in c:
            files["engine.json"] = json.dumps({"seed": i, "threshold": None, **c["engine"]}, sort_keys=True) + "\n"
        # parents: the previous commit (a linear history), or the listed indices (merge worlds)
        chunks.append(_commit(i, 1_760_000_000 + 60 * i, f"c{i}", c.get("parents", [i - 1] if i else []), files))
    return b"".join(chunks)


def _fill(obj: Any, subs: dict[str, str]) -> Any:
    if isinstance(obj, str):
        return subs.get(obj, obj)
    if isinstance(obj, list):
        return [_fill(x, subs) for x in obj]
    if isinstance(obj, dict):
        return {k: _fill(v, subs) for k, v in obj.items()}
    return obj


def materialise(world: World, root: Path, python: str = sys.executable) -> Materialised:
    """Write ``world`` under ``root``: ``repo/`` (git), ``recipe.yaml``, ``state/``, ``rw/``."""
    root.mkdir(parents=True, exist_ok=True)
    repo = root / "repo"
    subs = {"@REPO@": str(repo), "@OUT@": str(root / "out"), "@PY@": python}
    if "component" in world.params:  # a pin world: the component's repository, then the holder's
        comp_stream, holder_stream = _pin_streams(world)
        comp = _import(root / "aiter", comp_stream, root / "marks-aiter")
        shas = _import(repo, holder_stream, root / "marks") + comp  # holder indices first, then n + j
        (root / "check.py").write_text(PIN_CHECK)
        subs.update({"@COMPONENT@": str(root / "aiter"), "@CHECK@": str(root / "check.py")})
    else:
        shas = _import(repo, _fast_import_stream(world), root / "marks")  # world.commits' order
    night = world.nights[-1]
    subs.update({"@GOOD@": shas[night.good], "@BAD@": shas[night.bad]})
    recipe = root / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(_fill(world.recipe, subs), sort_keys=False))
    (root / "rw").mkdir(exist_ok=True)
    (root / "world.json").write_text(json.dumps(world.to_dict(), indent=1))
    return Materialised(root, repo, recipe, root / "state", root / "rw", shas)


@dataclass
class Outcome:
    """One world's run: the bot's last-night status, what it named, and how that compares with truth.

    ``category``: ``right`` (the culprit the truth allows), ``confident-wrong`` (a culprit the truth
    does not allow, at the recipe's confidence or above), ``wrong-unconfident`` (the same below it),
    ``range-ok`` / ``range-wrong`` (a range that holds / misses the truth), ``no-culprit`` (an
    inconclusive, no-regression or boundary-failed result), ``error`` (no result).
    """

    seed: int
    shape: str
    truth_kind: str
    truth: list[int]
    status: str
    named: int | None
    confidence: float | None
    category: str
    probes: int
    log2n: int
    wall_s: float
    line: str = ""
    exit_codes: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return dict(self.__dict__)


def bisectbot_command() -> list[str]:
    """The installed CLI: ``bisectbot`` next to this Python, else ``python -m bisectbot``."""
    exe = Path(sys.executable).with_name("bisectbot")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "bisectbot"]


def run_world(world: World, root: Path, timeout_s: float = 900) -> Outcome:
    """Materialise ``world`` under ``root`` and run every night of it through ``bisectbot run``."""
    t0 = time.monotonic()
    m = materialise(world, root)
    result: dict[str, Any] = {}
    codes: list[int] = []
    stderr = ""
    for i, night in enumerate(world.nights):
        env = {**os.environ, "WORLD_ENV": night.env, "WORLD_RW": str(m.rw),
               "BISECTBOT_SANDBOX_WRITABLE": str(m.rw)}
        env.pop("BISECTBOT_STATE", None)
        out = root / f"out{i}"
        argv = [*bisectbot_command(), "--state", str(m.state), "--json", "run", str(m.recipe),
                "--good", m.shas[night.good], "--bad", m.shas[night.bad], "--out", str(out)]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s,
                               stdin=subprocess.DEVNULL)
            codes.append(p.returncode)
            stderr = p.stderr
            try:
                result = json.loads(p.stdout)
            except ValueError:
                result = {"error": {"message": (p.stdout + p.stderr)[-400:]}}
        except subprocess.TimeoutExpired:
            codes.append(124)
            result = {"error": {"message": f"timed out after {timeout_s} s"}}
        (root / f"night{i}.stderr").write_text(stderr)
    return score(world, m.shas, result, codes, time.monotonic() - t0, stderr)


def _line(result: dict[str, Any]) -> str:
    """The bot's answer in one line: status, the first bad it names, confidence, message."""
    final = (result.get("stages") or [{}])[-1]
    parts = [str(final.get("status") or result.get("status"))]
    if final.get("first_bad"):
        parts.append(str(final["first_bad"].get("label", "")))
    if final.get("confidence") is not None:
        parts.append(f"confidence {float(final['confidence']):.3f}")
    if final.get("message"):
        parts.append(str(final["message"]))
    return " ".join(" | ".join(parts).split())[:400]


def score(world: World, shas: list[str], result: dict[str, Any], codes: list[int], wall_s: float,
          stderr: str = "") -> Outcome:
    """Compare the last night's ``result`` (``run --json``) with ``world.truth``."""
    truth = world.truth
    night = world.nights[-1]
    index = {s: i for i, s in enumerate(shas)}
    n_cand = max(1, night.bad - night.good)
    log2n = math.ceil(math.log2(n_cand)) if n_cand > 1 else 0
    stages = result.get("stages") or []
    probes = sum(1 for st in stages for p in st.get("probes") or []
                 if not (p.get("extra") or {}).get("cached"))
    base = dict(seed=world.seed, shape=world.shape, truth_kind=truth.kind, truth=truth.culprits,
                probes=probes, log2n=log2n, wall_s=round(wall_s, 2), exit_codes=codes)
    if "error" in result or not stages:
        msg = str((result.get("error") or {}).get("message", ""))
        return Outcome(status="error", named=None, confidence=None, category="error",
                       line=" ".join(msg.split())[-300:], **base)
    final = stages[-1]
    status = str(final.get("status") or result.get("status"))
    conf = final.get("confidence")
    named = index.get((final.get("first_bad") or {}).get("ref", ""))
    line = _line(result)
    if status == "culprit":
        if named in truth.culprits and truth.kind in ("culprit", "ambiguous"):
            cat = "right"
        elif conf is not None and conf >= CONFIDENCE:
            cat = "confident-wrong"
        else:
            cat = "wrong-unconfident"
    elif status == "range":
        listed = {index.get(c.get("ref", "")) for c in final.get("culprits") or []}
        want = set(truth.culprits) if truth.kind in ("culprit", "range") else (
            {truth.introduced} if truth.introduced is not None else set())
        cat = "range-ok" if want and want <= listed else "range-wrong"
    else:
        cat = "no-culprit"
    return Outcome(status=status, named=named, confidence=conf, category=cat, line=line, **base)


def expected_ok(world: World, outcome: Outcome) -> bool:
    """What the suite asks of a world: the right culprit where one is identifiable; elsewhere no
    culprit named at the confidence that the truth does not allow (a range must hold the truth)."""
    if world.truth.identifiable:
        return outcome.category == "right"
    return outcome.category in ("right", "range-ok", "no-culprit", "wrong-unconfident")
