"""A temporary git history of the reference engine with one planted prefill regression.

:func:`make_history` writes a real git repository (through one ``git fast-import``)
whose commits look like a small serving project's: an engine configuration
``engine.json`` read by ``python -m bisectbot.demo.engine --config build/engine.json``,
a ``build.py`` that validates the configuration and writes ``build/engine.json``,
documentation, tests, a changelog and CI files. At commit ``first_bad`` the engine's
prefill threshold (prompt tokens) drops from well above the demo's probe sizes
(:data:`HIGH_RANGE`) to well below them (:data:`LOW_THRESHOLD`), so every probe of a
commit from there on returns garbage. A few commits do not build (an unknown setting
or a JSON syntax error, fixed by the next commit) and one commit's engine exits at
start (``"broken": true``, reverted by the next commit): those are ``skip`` verdicts.

The placement of the untestable commits is chosen by simulating the search
(:class:`bisectbot.bisect.Bisection`) so that the bisection actually meets them;
they are never the culprit or its predecessor. Authors, dates and subjects are
drawn from ``seed``: the same arguments give the same commit SHAs.

Used by ``bisectbot demo`` and by tests that need an engine history.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: Threshold (prompt tokens) of the engine before the culprit: drawn from this range per config change.
HIGH_RANGE = (48000, 72000)
#: Threshold (prompt tokens) from the culprit on: below the smallest demo probe size (2000 tokens).
LOW_THRESHOLD = 1000
#: Threshold (prompt tokens) from the culprit on in a ``subtle`` history: above the decode
#: control's ~1K-token prompt, below the demo's 8000-token probe.
SUBTLE_THRESHOLD = 5000
#: Tag on the first commit (the known-good end of the demo recipe).
GOOD_TAG = "v0.4.0"
#: Branch holding the history; its tip is the known-bad end.
BRANCH = "main"
#: Epoch seconds of the first commit (2026-03-02 09:00 UTC); later commits follow hours apart.
BASE_TIME = 1772442000

AUTHORS = [
    ("Mira Okafor", "mira.okafor@example.com"),
    ("Jonas Lindqvist", "jonas.lindqvist@example.com"),
    ("Priya Raman", "priya.raman@example.org"),
    ("Chen Wei", "wei.chen@example.net"),
    ("Lucía Fernández", "lucia.fernandez@example.com"),
    ("Tomasz Nowak", "tnowak@example.org"),
    ("Aiko Tanaka", "aiko.tanaka@example.com"),
    ("Samuel Osei", "sam.osei@example.net"),
]

BUILD_PY = '''\
"""Build step of the demo engine: validate engine.json and write build/engine.json."""
import json
import os
import sys

from bisectbot.demo.engine import DEFAULTS

try:
    with open("engine.json", encoding="utf-8") as fh:
        cfg = json.load(fh)
except json.JSONDecodeError as e:
    print(f"engine.json:{e.lineno}:{e.colno}: {e.msg}")
    sys.exit(1)
unknown = sorted(set(cfg) - set(DEFAULTS))
if unknown:
    print(f"engine.json: unknown setting(s): {', '.join(unknown)}")
    sys.exit(1)
os.makedirs("build", exist_ok=True)
with open(os.path.join("build", "engine.json"), "w", encoding="utf-8") as fh:
    json.dump(cfg, fh, indent=2)
print("built build/engine.json")
'''

README = """\
# demo-engine

A tiny OpenAI-compatible serving engine used by the bisectbot demo.

    python3 build.py
    python3 -m bisectbot.demo.engine --config build/engine.json --port 8000
"""

CI = """\
name: ci
on: [push, pull_request]
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: python3 build.py
"""

TEST_PY = """\
import json


def test_config_loads():
    cfg = json.load(open("engine.json"))
    assert cfg["model"]
"""

# (subject, file kind) of ordinary commits: docs/tests/ci/changelog edits and config tweaks
# that keep the threshold where it is (above or below).
ORDINARY = [
    ("[Docs] Clarify --max-model-len in the serving guide", "docs"),
    ("[Docs] Add a troubleshooting section for long prompts", "docs"),
    ("[Docs] Fix typos in the quickstart", "docs"),
    ("[Docs] Document the /tokenize endpoint", "docs"),
    ("[Docs] Mention the health endpoint in the deployment guide", "docs"),
    ("[CI] Pin the checkout action", "ci"),
    ("[CI] Run the build on pull requests only once", "ci"),
    ("[Test] Cover chat prompts with several messages", "test"),
    ("[Test] Check the usage block of chat replies", "test"),
    ("[Test] Add a regression test for empty prompts", "test"),
    ("[Misc] Update the changelog", "changelog"),
    ("[Misc] Tidy up the README", "readme"),
    ("[Perf] Tune the prefill chunk budget", "config"),
    ("[Core] Raise the default context length", "config-len"),
    ("[Sampler] Change the default sampling seed", "config-seed"),
    ("[Perf] Rebalance prefill and decode scheduling", "config"),
    ("[Bugfix] Handle trailing whitespace in chat templates", "docs"),
    ("[Frontend] Accept content parts in chat messages", "test"),
    ("[Kernel] Use a larger tile for the attention prefill", "config"),
    ("[Model] Register the demo-7b alias", "docs"),
    ("[Bugfix] Count template tokens per message", "test"),
    ("[Core] Log the scheduler budget at start", "changelog"),
    ("[Perf] Overlap tokenization with scheduling", "config"),
    ("[Docs] Explain the threshold of long-context prefill", "docs"),
    ("[Docs] Add an FAQ entry about context limits", "docs"),
    ("[CI] Cache pip downloads", "ci"),
    ("[Test] Test the models endpoint", "test"),
    ("[Misc] Bump the version to 0.4.1.dev0", "changelog"),
    ("[Perf] Shrink the prefill warm-up", "config"),
    ("[Bugfix] Return 400 for prompts over the context length", "test"),
    ("[Docs] Add a metrics section", "docs"),
    ("[Frontend] Report max_model_len in /v1/models", "test"),
    ("[CI] Add a lint job", "ci"),
    ("[Kernel] Retune the decode block size", "config"),
    ("[Docs] Describe the build step", "readme"),
    ("[Test] Cover the tokenize endpoint with chat messages", "test"),
    ("[Misc] Update the changelog for 0.4.1", "changelog"),
    ("[Perf] Avoid a copy of the prompt in the scheduler", "config"),
    ("[Docs] Fix a broken link in the serving guide", "docs"),
    ("[Bugfix] Keep the sampling seed across restarts", "changelog"),
]
CULPRIT_SUBJECT = "[Perf] Reuse the prefill workspace across sub-chunks"
UNBUILDABLE = [
    ("[Config] Add a kv-cache layout option", "unknown-key",
     "[Config] Drop kv_cache_layout again: not wired up yet"),
    ("[Config] Group the sampling settings", "syntax",
     "[Build] Fix the engine.json syntax"),
    ("[Config] Add a prefix-caching switch", "unknown-key2",
     "[Config] Remove prefix_caching until the engine supports it"),
]
BROKEN = ("[Scheduler] Enable async scheduling by default",
          'Revert "[Scheduler] Enable async scheduling by default"')


@dataclass
class EngineHistory:
    """The repository :func:`make_history` wrote.

    ``shas`` are the commits oldest first (``shas[0]`` is tagged :data:`GOOD_TAG`, the tip
    is :data:`BRANCH`); ``first_bad`` is the index of the culprit; ``unbuildable`` and
    ``broken`` are indices of commits whose build fails / whose engine exits at start.
    """

    path: Path
    shas: list[str] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)
    first_bad: int = 0
    good: int = 0  # index of the commit tagged GOOD_TAG (1 in a subtle history: commit 0 is the build before it)
    unbuildable: list[int] = field(default_factory=list)
    broken: list[int] = field(default_factory=list)
    thresholds: list[int | None] = field(default_factory=list)

    @property
    def culprit(self) -> str:
        """SHA of the first bad commit."""
        return self.shas[self.first_bad]

    @property
    def last_good(self) -> str:
        """SHA of the commit before the culprit."""
        return self.shas[self.first_bad - 1]

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "shas": self.shas, "subjects": self.subjects, "first_bad": self.first_bad,
                "culprit": self.culprit, "unbuildable": self.unbuildable, "broken": self.broken,
                "good": GOOD_TAG, "bad": BRANCH}


def _visited(n: int, k: int, skips: set[int], stop: int) -> list[int]:
    """Interior indices the search probes (truth: bad from ``k``; ``skips`` untestable), in order."""
    from ..bisect import Bisection
    from ..models import Verdict

    b = Bisection(n)
    out: list[int] = []
    while not b.done and len(out) < stop:
        batch = b.next_probes(1)
        if not batch:
            break
        i = batch[0]
        v = Verdict.SKIP if i in skips else Verdict.BAD if i >= k else Verdict.GOOD
        b.feed(i, v)
        if 0 < i < n - 1 and i not in out:
            out.append(i)
    return out


def plan_untestable(n: int, k: int, rng: random.Random, n_unbuildable: int = 2,
                    keep: frozenset[int] = frozenset()) -> tuple[list[int], list[int]]:
    """Indices (unbuildable, broken) for a history of ``n`` commits with the culprit at ``k``.

    The first unbuildable commit and the broken one are commits the search visits; the
    others are random. None is 0, ``n-1``, ``k-1``, ``k``, and each leaves room for its fix
    commit (the next index, which is never untestable).
    """
    forbidden = {0, n - 1, n - 2, k - 1, k} | set(keep)

    def ok(i: int, taken: set[int]) -> bool:
        return i not in forbidden and i not in taken and i - 1 not in taken and i + 1 not in taken

    taken: set[int] = set()
    unbuildable: list[int] = []
    broken: list[int] = []
    for i in _visited(n, k, set(), 8):
        if ok(i, taken):
            unbuildable.append(i)
            taken.add(i)
            break
    for i in _visited(n, k, taken, 12):
        if ok(i, taken):
            broken.append(i)
            taken.add(i)
            break
    pool = [i for i in range(1, n - 1) if ok(i, taken)]
    rng.shuffle(pool)
    for i in pool:
        if len(unbuildable) >= n_unbuildable:
            break
        if ok(i, taken):
            unbuildable.append(i)
            taken.add(i)
    return sorted(unbuildable), broken


def _fast_import_stream(commits: list[tuple[str, tuple[str, str], int, dict[str, str]]], good: int = 0) -> bytes:
    out: list[bytes] = []
    for i, (subject, (name, email), when, files) in enumerate(commits, 1):
        msg = subject.encode() + b"\n"
        ident = f"{name} <{email}> {when} +0000".encode()
        out += [b"commit refs/heads/" + BRANCH.encode() + b"\n", f"mark :{i}\n".encode(),
                b"author " + ident + b"\n", b"committer " + ident + b"\n",
                f"data {len(msg)}\n".encode(), msg]
        if i > 1:
            out.append(f"from :{i - 1}\n".encode())
        out.append(b"deleteall\n")
        for path, text in sorted(files.items()):
            data = text.encode()
            out += [f"M 100644 inline {path}\n".encode(), f"data {len(data)}\n".encode(), data, b"\n"]
        out.append(b"\n")
    out += [f"reset refs/tags/{GOOD_TAG}\n".encode(), f"from :{good + 1}\n\n".encode()]
    return b"".join(out)


def make_history(path: str | Path, commits: int = 40, seed: int = 1, first_bad: int | None = None,
                 unbuildable: list[int] | None = None, broken: list[int] | None = None,
                 engine_settings: dict[str, object] | None = None, subtle: bool = False) -> EngineHistory:
    """Write the engine history into ``path`` (created; must not exist or be empty).

    ``subtle`` (issue 18): every commit's engine runs in the ``subtle`` mode of
    :mod:`bisectbot.demo.oracles` (above its threshold replies stay fluent but are built from
    the wrong part of the prompt -- invisible to the text classifier) with its own ``numerics``
    (every commit is a numerically different build), and the culprit's threshold is
    :data:`SUBTLE_THRESHOLD`, above the decode control's ~1K-token prompt. :data:`GOOD_TAG` then
    tags commit 1, so the good end has a good build before it (commit 0) for the noise calibration.

    ``commits`` >= 8 commits; the culprit index ``first_bad`` defaults to a seeded choice
    in the middle third; ``unbuildable``/``broken`` default to :func:`plan_untestable`.
    ``engine_settings`` are extra engine settings written into every commit's
    ``engine.json`` (e.g. ``{"terse": 0.5}``: healthy commits sometimes answer tersely).
    Raises ``ValueError`` on impossible arguments and ``subprocess.CalledProcessError``
    when git fails.
    """
    if commits < 8:
        raise ValueError(f"the demo history needs at least 8 commits, got {commits}")
    rng = random.Random(seed)
    n = commits
    k = first_bad if first_bad is not None else rng.randint(n // 3, (2 * n) // 3)
    if not 1 <= k <= n - 1:
        raise ValueError(f"first_bad must be in 1..{n - 1}, got {k}")
    if unbuildable is None or broken is None:
        ub, br = plan_untestable(n, k, rng, keep=frozenset({1}) if subtle else frozenset())
        unbuildable = ub if unbuildable is None else unbuildable
        broken = br if broken is None else broken
    bad_set = set(unbuildable) | set(broken)
    if k in bad_set or (k - 1) in bad_set:
        raise ValueError("the culprit and its predecessor must be testable")

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, object] = {"model": "demo/engine-7b", "max_model_len": 65536, "seed": 7,
                              "threshold": rng.randint(*HIGH_RANGE)}
    cfg.update(engine_settings or {})
    low_threshold = SUBTLE_THRESHOLD if subtle else LOW_THRESHOLD
    if subtle:
        cfg.update(subtle=True, numerics=0)
    files = {"README.md": README, "build.py": BUILD_PY, ".github/workflows/ci.yml": CI,
             "tests/test_config.py": TEST_PY, "CHANGELOG.md": "# Changelog\n\n## 0.4.0\n\n- first release\n",
             "docs/serving.md": "# Serving\n\nStart the engine with a JSON config.\n"}
    hist = EngineHistory(path, first_bad=k, unbuildable=sorted(unbuildable), broken=sorted(broken))
    ordinary = ORDINARY[:]
    rng.shuffle(ordinary)
    unbuildable_kinds = UNBUILDABLE[:]
    stream: list[tuple[str, tuple[str, str], int, dict[str, str]]] = []
    pending_fix: str | None = None
    when = BASE_TIME
    for i in range(n):
        low = i >= k
        c = dict(cfg)
        raw: str | None = None
        if i == 0:
            subject = "Initial import of the demo engine"
        elif pending_fix is not None:
            subject, pending_fix = pending_fix, None
        elif i == k:
            subject = CULPRIT_SUBJECT
            cfg["threshold"] = low_threshold
            c = dict(cfg)
        elif i in unbuildable:
            subj, kind, fix = unbuildable_kinds.pop(0) if unbuildable_kinds else UNBUILDABLE[0]
            subject, pending_fix = subj, fix
            if kind == "unknown-key":
                c["kv_cache_layout"] = "NHD"
            elif kind == "unknown-key2":
                c["prefix_caching"] = True
            else:
                raw = json.dumps(c, indent=2)[:-2] + ",\n}\n"  # a trailing comma
        elif i in broken:
            subject, pending_fix = BROKEN
            c["broken"] = True
        else:
            subject, kind = ordinary[(i - 1) % len(ordinary)]
            if kind == "docs":
                files["docs/serving.md"] += f"\n{subject.split('] ', 1)[-1]}.\n"
            elif kind == "ci":
                files[".github/workflows/ci.yml"] += f"# {subject}\n"
            elif kind == "test":
                files["tests/test_config.py"] += f"\n\ndef test_{i}():\n    assert True  # {subject}\n"
            elif kind == "changelog":
                files["CHANGELOG.md"] += f"- {subject}\n"
            elif kind == "readme":
                files["README.md"] += "\nSee docs/serving.md for the options.\n"
            elif kind == "config-len":
                cfg["max_model_len"] = 131072
            elif kind == "config-seed":
                cfg["seed"] = int(cfg["seed"]) + 1  # type: ignore[call-overload]
            else:  # a config tweak that moves the threshold, but keeps it on its side
                if not low:
                    cfg["threshold"] = rng.randint(*HIGH_RANGE)
                else:
                    cfg["threshold"] = rng.randint(low_threshold // 2, low_threshold)
            c = dict(cfg)
        if subtle and raw is None:
            c["numerics"] = i  # each commit a numerically different build (same text)
        files_i = dict(files)
        files_i["engine.json"] = raw if raw is not None else json.dumps(c, indent=2) + "\n"
        hist.subjects.append(subject)
        hist.thresholds.append(None if (i in unbuildable or i in broken) else int(c["threshold"]))  # type: ignore[call-overload]
        stream.append((subject, AUTHORS[rng.randrange(len(AUTHORS))], when, files_i))
        when += rng.randint(1800, 5 * 3600)

    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    run = lambda *a, **kw: subprocess.run(["git", *a], cwd=path, env=env, check=True,  # noqa: E731
                                          capture_output=True, **kw)
    run("init", "-q", "-b", BRANCH)
    hist.good = 1 if subtle else 0
    run("fast-import", "--quiet", input=_fast_import_stream(stream, hist.good))
    run("reset", "-q", "--hard", BRANCH)
    hist.shas = run("rev-list", "--reverse", BRANCH, text=True).stdout.split()
    if len(hist.shas) != n:  # pragma: no cover - git misbehaving
        raise RuntimeError(f"expected {n} commits in {path}, git has {len(hist.shas)}")
    return hist


__all__ = ["BRANCH", "GOOD_TAG", "HIGH_RANGE", "LOW_THRESHOLD", "SUBTLE_THRESHOLD", "EngineHistory", "make_history",
           "plan_untestable"]
