"""Generated worlds (issue 35, item 7): histories whose truth is known, for ``bisectbot run``.

A *world* is a linear git history of ``n`` commits; commit ``i`` carries ``world.json`` (its
settings, below), the same ``check.py`` (a command reproducer), ``build.py`` (the build command)
and ``serve.py`` (a reference-engine server) in every commit -- :mod:`tests.worlds.build` writes
them. Each world comes with the recipe that asks the question and the **truth**: the commit that
introduced the behaviour the bad end shows, when the question can name one, or why it cannot.

This module is pure (seed -> :class:`World`) and imports nothing from ``bisectbot``: the truth is
computed here from the settings and the question, never from the bot's own rules.

The question (issue 35, item 1): a candidate is **bad** when it fails one of the prompts (sizes)
on which the bad end fails, **good** when it answers every one of them OK, otherwise a **skip**
(untestable: exit 125, a failed build, a server that never starts, a crash or a context limit
at the sizes that matter). Size-less command reproducers: bad = exit 1..124, good = 0, skip = 125.
From the per-commit verdicts (index 0 is the good end, ``n - 1`` the bad end):

* the bad end not bad -> no culprit ("no-regression" or "bad end untestable");
* the good end not good -> no culprit ("older than the range" or "good end untestable");
* every good -> bad transition between testable commits is a candidate answer; exactly one, with
  the last good right before the first bad, is an **identifiable culprit**; skips between them
  make it a **range** (the true culprit inside it); several transitions (a revert, then the bug
  again) make it **ambiguous** (naming one of the transitions is right, any other commit wrong).

Settings of a commit (``world.json``; absent keys mean "no"):

* ``bad`` (size-less command: the bug shows), ``skip`` (exit 125), ``hit`` (probability that a
  run of a bad commit shows the bug, per run; 1.0 = deterministic), ``fp`` (probability that a run
  of a good commit fails all the same: two-sided noise);
* ``threshold`` / ``band`` (``[lo, hi)``) / ``crash_above`` (sized command ``check.py {size}``:
  exit 1 at or above ``threshold`` or inside ``band``; exit 3 "Segmentation fault" at or above
  ``crash_above``, checked first);
* ``env_bad`` (a value of ``$WORLD_ENV`` under which the commit is bad whatever else holds: the
  host changed between nights);
* ``build`` (``"fail"``: the build prints an error and exits 1; ``"transient"``: the first build
  of the commit prints ``HTTP 429 Too Many Requests`` and exits 1, later builds succeed);
* ``drift_after`` (the host changes during the night: from that many runs of ``check.py``, counted
  across commits in ``$WORLD_RW``, every run fails);
* ``pin`` / ``bump`` / ``mixed`` (pin worlds: the component commit a holder commit pins, whether it
  moves the pin, and whether that move also changes a runtime path; the component's commits are
  ``params['component']``, a second repository);
* ``engine`` (server worlds: the reference engine's settings: ``threshold``, ``max_model_len``,
  ``crash_above``, ``broken``, ``truncate_to``; ``start_hit``: the share of server starts on which
  a bad commit's bug shows, decided per start by ``serve.py``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

#: The recipe's target confidence (``bisect.confidence``); a culprit named at or above it counts.
CONFIDENCE = 0.99
#: Sized command worlds ask sizes in [MIN_SIZE, MAX_SIZE] (tokens, only a number for a command).
MIN_SIZE, MAX_SIZE = 1000, 32000
#: Server worlds (reference engine): smaller prompts keep a probe cheap on 2 cores.
SERVER_MIN, SERVER_MAX, SERVER_MAX_TOKENS = 500, 6000, 128


@dataclass
class Night:
    """One ``bisectbot run`` of a world: its ends (commit indices) and ``$WORLD_ENV``."""

    good: int
    bad: int
    env: str = "a"


@dataclass
class Truth:
    """What the question can answer for the last night of a world.

    ``kind``: ``culprit`` (identifiable: ``culprits == [k]``), ``range`` (skips hide the culprit;
    ``culprits`` every index an honest range must contain, ``introduced`` the true one),
    ``ambiguous`` (several good -> bad transitions; ``culprits`` each of them), or a kind that
    names nothing: ``no-regression``, ``older-than-range``, ``untestable-end``.
    """

    kind: str
    culprits: list[int]
    why: str
    verdicts: list[str]
    introduced: int | None = None

    @property
    def identifiable(self) -> bool:
        """True when exactly one commit can be named."""
        return self.kind == "culprit"


@dataclass
class World:
    """A generated history: per-commit settings, the recipe (with placeholders), nights and truth.

    Recipe placeholders, filled by :func:`tests.worlds.build.materialise`: ``@REPO@``, ``@OUT@``,
    ``@PY@`` (the Python that runs candidates), ``@GOOD@``/``@BAD@`` (commit SHAs of the night).
    """

    seed: int
    shape: str
    params: dict[str, Any]
    commits: list[dict[str, Any]]
    recipe: dict[str, Any]
    nights: list[Night]
    truth: Truth
    needs_rw: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (``truth.identifiable`` included)."""
        d = asdict(self)
        d["truth"]["identifiable"] = self.truth.identifiable
        return d


@dataclass
class Shape:
    """A kind of world: its sentence, its maker, and whether it starts servers (slow)."""

    name: str
    sentence: str
    make: Callable[[random.Random], tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]]
    server: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- recipes


def command_recipe(sized: bool, repeats: int = 1, flake: dict[str, float] | None = None) -> dict[str, Any]:
    """The recipe of a command world: ``check.py`` (with ``{size}`` when ``sized``)."""
    rep: dict[str, Any] = {"kind": "command", "command": ["@PY@", "check.py"], "command_timeout_s": 30}
    if sized:
        rep["command"].append("{size}")
        rep.update(min_size=MIN_SIZE, max_size=MAX_SIZE)
    if repeats > 1:
        rep["repeats"] = repeats
    bisect: dict[str, Any] = {"good": "@GOOD@", "bad": "@BAD@", "confidence": CONFIDENCE}
    if flake:
        bisect["flake"] = flake
    return {
        "name": "world",
        "source": {"kind": "git", "repo": "@REPO@"},
        "server": {"build_command": ["@PY@", "build.py"]},
        "reproducer": rep,
        "regress": "garbage" if sized else "command",
        "bisect": bisect,
        "report": {"dir": "@OUT@"},
        "env_passthrough": ["WORLD_ENV", "WORLD_RW"],
    }


def server_recipe() -> dict[str, Any]:
    """The recipe of a server world: the reference engine behind ``serve.py``, a threshold search."""
    return {
        "name": "world",
        "source": {"kind": "git", "repo": "@REPO@"},
        "server": {"command": ["@PY@", "serve.py", "--port", "{port}"], "build_command": ["@PY@", "build.py"],
                   "health_timeout_s": 30, "request_timeout_s": 60},
        "reproducer": {"min_size": SERVER_MIN, "max_size": SERVER_MAX, "max_tokens": SERVER_MAX_TOKENS},
        "regress": "garbage",
        "bisect": {"good": "@GOOD@", "bad": "@BAD@", "confidence": CONFIDENCE},
        "report": {"dir": "@OUT@"},
        "env_passthrough": ["WORLD_ENV", "WORLD_RW"],
    }


def pin_recipe() -> dict[str, Any]:
    """The recipe of a pin world: the holder ``vllm`` with component ``aiter``; ``check.py`` (next
    to the repositories, not in them) reads both checkouts, as a build reads the pin."""
    return {
        "name": "world",
        "source": {"kind": "git", "repo": "@REPO@", "component": "vllm", "runtime_paths": ["vllm/"]},
        "reproducer": {"kind": "command", "command": ["@PY@", "@CHECK@", "{source:vllm}", "{source:aiter}"],
                       "command_timeout_s": 30},
        "regress": "command",
        "bisect": {"good": "@GOOD@", "bad": "@BAD@", "confidence": CONFIDENCE,
                   "components": {"vllm": {"repo": "@REPO@", "runtime_paths": ["vllm/"]},
                                  "aiter": {"repo": "@COMPONENT@", "runtime_paths": ["aiter/"]}}},
        "report": {"dir": "@OUT@"},
    }


# ----------------------------------------------------------------------------- truth


def _sizes(lo: int, hi: int) -> list[int]:
    """A fine log grid over [lo, hi] (2 % steps): the continuous question, sampled."""
    out, s = [], float(lo)
    while s < hi:
        out.append(int(s))
        s *= 1.02
    return [*out, hi]


def sized_exit(c: dict[str, Any], size: int, env: str) -> int:
    """The exit code ``check.py {size}`` gives for commit settings ``c`` (a deterministic bug)."""
    if c.get("skip"):
        return 125
    if c.get("env_bad") is not None and env == c["env_bad"]:
        return 1
    if c.get("crash_above") is not None and size >= c["crash_above"]:
        return 3
    t, band = c.get("threshold"), c.get("band")
    if (t is not None and size >= t) or (band and band[0] <= size < band[1]):
        return 1
    return 0


def _buildable(c: dict[str, Any]) -> bool:
    return c.get("build") != "fail"


def verdicts_sized(commits: list[dict[str, Any]], good: int, bad: int, env: str) -> list[str] | None:
    """Per-commit verdicts of a sized command world (``None``: the sampled question is ambiguous).

    The bad end's failing sizes F (exit 1); a commit is bad when it exits 1 on a size of F, good
    when it exits 0 on every size of F, a skip otherwise. A world in which a commit exits 1 on
    under a third of F, or crashes on part of F, depends on which sizes a search samples: refused.
    """
    grid = _sizes(MIN_SIZE, MAX_SIZE)
    end = commits[bad]
    if not _buildable(end):
        return ["skip" if not _buildable(c) else "?" for c in commits[good:bad + 1]]
    f = [s for s in grid if sized_exit(end, s, env) == 1]
    out = []
    for c in commits[good:bad + 1]:
        if not _buildable(c) or c.get("skip"):
            out.append("skip")
            continue
        if not f:
            out.append("good" if all(sized_exit(c, s, env) == 0 for s in grid) else "?")
            continue
        codes = [sized_exit(c, s, env) for s in f]
        ones = codes.count(1)
        if ones and ones * 3 < len(f):
            return None
        if ones:
            out.append("bad")
        elif all(x == 0 for x in codes):
            out.append("good")
        elif all(x == 3 for x in codes):
            out.append("skip")
        else:
            return None
    return out


def verdicts_plain(commits: list[dict[str, Any]], good: int, bad: int, env: str) -> list[str]:
    """Per-commit verdicts of a size-less command world."""
    out = []
    for c in commits[good:bad + 1]:
        if not _buildable(c) or c.get("skip"):
            out.append("skip")
        elif c.get("bad") or (c.get("env_bad") is not None and env == c["env_bad"]):
            out.append("bad")
        else:
            out.append("good")
    return out


def verdicts_server(commits: list[dict[str, Any]], good: int, bad: int) -> list[str] | None:
    """Per-commit verdicts of a server world: the engine's garbage threshold and context limit.

    A prompt of s tokens can be asked when ``s + max_tokens`` (and a chat template's few tokens)
    fits ``max_model_len``; the bad end fails from its threshold T to the top of the range. A
    commit is bad when it answers garbage there, good when it answers OK everywhere there, a skip
    when it never starts or cannot be asked at T. A limit near T (the answer would depend on the
    sizes sampled) refuses the world.
    """
    t_end = commits[bad]["engine"].get("threshold")
    out = []
    for c in commits[good:bad + 1]:
        e = c["engine"]
        if e.get("broken") or not _buildable(c):
            out.append("skip")
            continue
        room = e.get("max_model_len", 131072) - SERVER_MAX_TOKENS - 64
        if e.get("truncate_to") is not None:  # a longer prompt is cut silently: it is never asked
            room = min(room, int(e["truncate_to"]))
        t = e.get("threshold")
        if t_end is not None and room < SERVER_MAX:
            if room > t_end / 1.3:
                return None
            out.append("skip")  # cannot be asked where the bad end fails
        elif t is not None and t <= SERVER_MAX:
            out.append("bad")
        else:
            out.append("good")
    return out


def truth_of(verdicts: list[str], introduced: int | None) -> Truth:
    """The answer the question allows, from the per-commit verdicts (``?`` refuses the world)."""
    if verdicts[-1] != "bad":
        kind = "untestable-end" if verdicts[-1] == "skip" else "no-regression"
        return Truth(kind, [], f"the bad end is {verdicts[-1]}: nothing to bisect", verdicts, introduced)
    if verdicts[0] != "good":
        kind = "untestable-end" if verdicts[0] == "skip" else "older-than-range"
        return Truth(kind, [], f"the good end is {verdicts[0]}: the behaviour is older than the range",
                     verdicts, introduced)
    transitions: list[tuple[int, int]] = []  # (last good, first bad)
    last_good = 0
    prev = "good"
    for i, v in enumerate(verdicts):
        if v == "skip":
            continue
        if v == "bad" and prev == "good":
            transitions.append((last_good, i))
        if v == "good":
            last_good = i
        prev = v
    if len(transitions) == 1:
        g, k = transitions[0]
        if k == g + 1:
            return Truth("culprit", [k], f"c{k} is the only good->bad transition", verdicts, introduced)
        inside = list(range(g + 1, k + 1))
        return Truth("range", inside, f"only skips between last good c{g} and first bad c{k}: "
                     f"the culprit is one of c{g + 1}..c{k}", verdicts, introduced)
    firsts = [k for _, k in transitions]
    return Truth("ambiguous", firsts, "several good->bad transitions: "
                 + ", ".join(f"c{g}->c{k}" for g, k in transitions), verdicts, introduced)


# ----------------------------------------------------------------------------- shapes


def _n(rng: random.Random, lo: int = 6, hi: int = 48) -> int:
    return rng.randint(lo, hi)


def shape_step(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    n = _n(rng)
    k = rng.randint(1, n - 1)
    return [{"bad": i >= k} for i in range(n)], {"n": n, "k": k}, command_recipe(False)


def shape_skips(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    n = _n(rng, 8)
    k = rng.randint(1, n - 1)
    cs: list[dict[str, Any]] = [{"bad": i >= k} for i in range(n)]
    inner = list(range(1, n - 1))
    skips = set(rng.sample(inner, rng.randint(1, max(1, len(inner) // 4))))
    near = rng.choice(["before", "at", "both", "none"])
    if near in ("before", "both") and k - 1 >= 1:
        skips.add(k - 1)
    if near in ("at", "both") and k <= n - 2:
        skips.add(k)
    for i in skips:
        cs[i]["skip"] = True
    return cs, {"n": n, "k": k, "skips": sorted(skips), "near": near}, command_recipe(False)


def shape_build(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    n = _n(rng, 8)
    k = rng.randint(1, n - 1)
    cs: list[dict[str, Any]] = [{"bad": i >= k} for i in range(n)]
    fails = set(rng.sample(range(1, n - 1), rng.randint(0, max(1, (n - 2) // 5))))
    transient = set(rng.sample(range(0, n), rng.randint(1, 3)))
    if rng.random() < 0.5:
        transient.add(k)  # a transient failure at the culprit itself
    for i in fails:
        cs[i]["build"] = "fail"
    for i in transient - fails:
        cs[i]["build"] = "transient"
    return cs, {"n": n, "k": k, "fail": sorted(fails), "transient": sorted(transient - fails)}, command_recipe(False)


def shape_flaky(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    n = _n(rng, 8, 32)
    k = rng.randint(1, n - 1)
    h = rng.choice([0.3, 0.5, 0.7, 0.9])
    r = rng.choice([3, 5])
    rates = rng.random() < 0.5
    flake = {"false_positive": 0.01, "false_negative": round((1 - h) ** r + 0.01, 4)} if rates else None
    cs = [{"bad": i >= k, "hit": h} for i in range(n)]
    return cs, {"n": n, "k": k, "hit": h, "repeats": r, "rates": rates}, command_recipe(False, r, flake)


def shape_noise(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Two-sided noise (issue 35, input 4): good builds fail a share ``fp`` of runs and bad ones pass a
    share ``1 - h``; ``reproducer.repeats`` 3 as the README recommends, with the true two-sided
    ``bisect.flake`` rates (per probe: any of ``r`` runs failing) or without them."""
    n = _n(rng, 8, 32)
    k = rng.randint(1, n - 1)
    h = rng.choice([0.9, 0.97, 1.0])
    fp = rng.choice([0.03, 0.07, 0.1])
    r = 3
    rates = rng.random() < 0.5
    flake = {"false_positive": round(1 - (1 - fp) ** r + 0.01, 4),
             "false_negative": round((1 - h) ** r + 0.01, 4)} if rates else None
    cs = [{"bad": i >= k, "hit": h, "fp": fp} for i in range(n)]
    return cs, {"n": n, "k": k, "hit": h, "fp": fp, "repeats": r, "rates": rates}, command_recipe(False, r, flake)


def shape_growing(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """A flaky bug whose hit rate changes once over the range (issue 12's hostile input, three rates;
    issue 35's step-up kind): it enters at k showing in a share h1 of runs and shows in h2 from j > k
    (a second change makes it worse, or better); repeats 5, with or without rates. The question's
    first bad is k (a run that fails is the bug): naming j is wrong. Rising: h1 from 0.08 (a bug
    below the bot's floor ``bisectbot.bisect.MIN_HIT_RATE`` until a second trigger lands: the step-up
    kind, which once named j at 0.99+) to 0.4, h2 0.8-1.0. Falling: h1 0.8-1.0, h2 0.2-0.4 (at or
    above the floor: the bad end is what the night tests first, and a bad end below the floor is a
    "not bad" end, honestly)."""
    n = _n(rng, 10, 32)
    k = rng.randint(1, n - 3)
    j = rng.randint(k + 1, n - 1)
    if rng.random() < 0.75:
        h1, h2 = rng.choice([0.08, 0.15, 0.2, 0.3, 0.4]), rng.choice([0.8, 0.9, 1.0])
    else:
        h1, h2 = rng.choice([0.8, 0.9, 1.0]), rng.choice([0.2, 0.3, 0.4])
    r = 5
    rates = rng.random() < 0.3
    flake = {"false_positive": 0.01, "false_negative": round((1 - min(h1, h2)) ** r + 0.01, 4)} if rates else None
    cs = [{"bad": i >= k, "hit": (h2 if i >= j else h1)} for i in range(n)]
    return cs, {"n": n, "k": k, "changes_at": j, "h1": h1, "h2": h2, "repeats": r, "rates": rates}, \
        command_recipe(False, r, flake)


def shape_merge(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """A branch forked at main commit f and merged at main commit m; the bug enters on main at k or
    on the branch at its commit j. ``source.first_parent`` true (the default: the merge is the
    culprit of a branch bug) or false (the bot descends into the branch and names its commit).

    Commits are listed in creation order (a parent before its child): main 0..f, the branch, main
    f+1..end; ``parents`` holds a commit's parent indices (first parent first). ``params['chain']``
    is the first-parent chain from the good end to the bad end."""
    n = _n(rng, 6, 24)  # main commits
    b = rng.randint(2, 10)  # branch commits
    f = rng.randint(0, n - 3)
    m = rng.randint(f + 1, n - 1)  # main index of the merge
    on_branch = rng.random() < 0.6
    j = rng.randint(0, b - 1) if on_branch else None
    k = None if on_branch else rng.choice([i for i in range(1, n) if i != m] or [1])
    first_parent = rng.random() < 0.5
    order: list[tuple[str, int]] = [("main", i) for i in range(f + 1)] + [("branch", i) for i in range(b)] \
        + [("main", i) for i in range(f + 1, n)]
    at = {key: idx for idx, key in enumerate(order)}
    cs: list[dict[str, Any]] = []
    for side, i in order:
        if side == "branch":
            parents = [at[("main", f)] if i == 0 else at[("branch", i - 1)]]
            bad = j is not None and i >= j
        else:
            parents = [] if i == 0 else [at[("main", i - 1)]]
            if i == m:
                parents.append(at[("branch", b - 1)])
            bad = (k is not None and i >= k) or (j is not None and i >= m)
        cs.append({"bad": bad, "parents": parents})
    chain = [at[("main", i)] for i in range(n)]
    recipe = command_recipe(False)
    recipe["source"]["first_parent"] = first_parent
    params = {"n": n, "branch": b, "fork": f, "merge": m, "k": None if k is None else at[("main", k)],
              "branch_bug": None if j is None else at[("branch", j)], "first_parent": first_parent, "chain": chain,
              "merge_index": at[("main", m)]}
    return cs, params, recipe


def shape_revert(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    n = _n(rng, 10)
    k = rng.randint(1, n - 5)
    j = rng.randint(k + 1, n - 3)  # the revert
    again = rng.randint(j + 1, n - 1)  # the bug re-enters (at the bad end at the latest)
    cs = [{"bad": (k <= i < j) or i >= again} for i in range(n)]
    return cs, {"n": n, "k": k, "revert": j, "again": again}, command_recipe(False)


def shape_threshold(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Sized command: the bug appears at k with threshold t1, drifts to t2 at d (either way)."""
    n = _n(rng, 6, 40)
    k = rng.randint(1, n - 1)
    t1 = int(math.exp(rng.uniform(math.log(MIN_SIZE * 1.5), math.log(MAX_SIZE / 1.5))))
    d = rng.randint(k, n - 1) if rng.random() < 0.6 else None
    t2 = int(math.exp(rng.uniform(math.log(MIN_SIZE * 1.5), math.log(MAX_SIZE / 1.5)))) if d else t1
    cs = [{"threshold": None if i < k else (t2 if d is not None and i >= d else t1)} for i in range(n)]
    return cs, {"n": n, "k": k, "t1": t1, "drift_at": d, "t2": t2}, command_recipe(True)


def shape_band(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Sized command: garbage only in a band of sizes; older commits may have another band."""
    n = _n(rng, 6, 40)
    k = rng.randint(1, n - 1)
    lo = int(math.exp(rng.uniform(math.log(MIN_SIZE * 1.3), math.log(MAX_SIZE / 3))))
    hi = min(MAX_SIZE + 1, int(lo * rng.uniform(1.8, 4)))
    other = None
    if rng.random() < 0.5 and lo > MIN_SIZE * 2.2:  # an older, disjoint band below: good for this question
        olo = int(MIN_SIZE * 1.1)
        other = [olo, int(min(lo / 1.3, olo * 1.8))]
    cs = [{"band": [lo, hi] if i >= k else other} for i in range(n)]
    return cs, {"n": n, "k": k, "band": [lo, hi], "older_band": other}, command_recipe(True)


def shape_crash(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Sized command: commits in a window crash (exit 3) above (or below) the bug's threshold."""
    n = _n(rng, 8, 40)
    k = rng.randint(1, n - 1)
    t = int(math.exp(rng.uniform(math.log(MIN_SIZE * 2), math.log(MAX_SIZE / 4))))
    a = rng.randint(1, n - 2)
    b = rng.randint(a, n - 2)
    above = rng.random() < 0.6
    c = int(t * rng.uniform(1.5, 3)) if above else int(t / rng.uniform(1.4, 1.9))
    cs = [{"threshold": t if i >= k else None, "crash_above": c if a <= i <= b else None} for i in range(n)]
    return cs, {"n": n, "k": k, "threshold": t, "crash": [a, b], "crash_above": c, "above": above}, command_recipe(True)


def shape_envdrift(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Two nights: night 1 over c0..cm finds no regression; before night 2 the host changes
    ($WORLD_ENV a -> b) and every commit turns bad; night 2 bisects cm..c(n-1)."""
    n = _n(rng, 10, 30)
    m = rng.randint(3, n - 4)
    real = rng.random() < 0.3  # control: a harmless host change and a real culprit in night 2
    k = rng.randint(m + 1, n - 1) if real else None
    cs = [{"bad": k is not None and i >= k, "env_bad": None if real else "b"} for i in range(n)]
    return cs, {"n": n, "night1": [0, m], "night2": [m, n - 1], "real_culprit": k}, command_recipe(False)


def shape_hostdrift(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The host changes *during* the night (a driver or package update between two probes): from
    the r-th run of the reproducer on, every commit fails (``drift_after``: runs of ``check.py``
    counted across the night in ``$WORLD_RW``); with or without a real culprit k before it. No
    commit but k can be named: the verdicts before and after the change answer different
    questions, and which commits fall on which side depends on the search's order."""
    n = _n(rng, 8, 40)
    r = rng.randint(1, max(2, math.ceil(math.log2(n)) + 3))
    k = rng.randint(1, n - 1) if rng.random() < 0.4 else None
    cs = [{"bad": k is not None and i >= k, "drift_after": r} for i in range(n)]
    return cs, {"n": n, "k": k, "drift_after": r}, command_recipe(False)


def shape_server_step(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Reference engine: garbage from threshold t1 at commit k, drifting to t2 at d."""
    n = _n(rng, 5, 24)
    k = rng.randint(1, n - 1)
    t1 = rng.randint(SERVER_MIN * 2, SERVER_MAX // 2)
    d = rng.randint(k, n - 1) if rng.random() < 0.4 else None
    t2 = rng.randint(SERVER_MIN * 2, SERVER_MAX // 2) if d is not None else t1
    cs = [{"engine": {"threshold": None if i < k else (t2 if d is not None and i >= d else t1)}} for i in range(n)]
    return cs, {"n": n, "k": k, "t1": t1, "drift_at": d, "t2": t2}, server_recipe()


def shape_server_ctx(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Reference engine: a window of commits (the oldest, or some inside the range) serves a
    max_model_len below the failing size; the bug enters before, inside or after it."""
    n = _n(rng, 6, 20)
    t = rng.randint(SERVER_MIN * 4, SERVER_MAX // 2)
    a = 0 if rng.random() < 0.4 else rng.randint(1, n - 2)
    m = rng.randint(a + 1, n - 1)  # commits a..m-1 have the small limit
    k = rng.randint(0 if a else 1, n - 1)
    small = int(t / rng.uniform(1.4, 2))
    cs = [{"engine": {"threshold": t if i >= k else None, "max_model_len": small if a <= i < m else 131072}}
          for i in range(n)]
    return cs, {"n": n, "k": k, "threshold": t, "small_limit": [a, m], "limit": small}, server_recipe()


def shape_server_truncate(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Reference engine: a window of commits silently truncates prompts (drops their front) to a
    length below the failing size and answers OK; the bug enters before, inside or after it."""
    n = _n(rng, 6, 20)
    t = rng.randint(SERVER_MIN * 4, SERVER_MAX // 2)
    a = rng.randint(1, n - 2)
    m = rng.randint(a + 1, n - 1)  # commits a..m-1 truncate
    k = rng.randint(1, n - 1)
    keep = int(t / rng.uniform(1.4, 2.5))
    cs = [{"engine": {"threshold": t if i >= k else None, **({"truncate_to": keep} if a <= i < m else {})}}
          for i in range(n)]
    return cs, {"n": n, "k": k, "threshold": t, "truncating": [a, m], "keep": keep}, server_recipe()


def shape_server_sampling(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Reference engine: from commit s the server's default sampling turns penalised (a
    ``repetition_penalty`` in the model's generation config, vllm#12622), which makes a reply that
    leaves sampling to the server word salad. The probe's requests pin every sampling field (the
    request contract of ``bisectbot.reproduce.client.PINNED_SAMPLING``), so the question is
    unchanged by it: the truth is the bug's commit k alone (or none)."""
    n = _n(rng, 5, 20)
    k = rng.randint(1, n - 1)
    s = rng.randint(1, n - 1)
    t = rng.randint(SERVER_MIN * 2, SERVER_MAX // 2)
    field_ = rng.choice([{"repetition_penalty": 1.3}, {"presence_penalty": 1.5}, {"frequency_penalty": 0.8}])
    cs = [{"engine": {"threshold": t if i >= k else None, **({"sampling_defaults": field_} if i >= s else {})}}
          for i in range(n)]
    return cs, {"n": n, "k": k, "threshold": t, "sampling_from": s, "defaults": field_}, server_recipe()


def shape_server_flaky(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Reference engine whose bug shows on a share h of server starts (whole starts, not requests:
    memory layout, autotuning); the recipe with or without the true bisect.flake false_negative."""
    n = _n(rng, 5, 20)
    k = rng.randint(1, n - 1)
    t = rng.randint(SERVER_MIN * 2, SERVER_MAX // 2)
    h = rng.choice([0.5, 0.7, 0.9])
    rates = rng.random() < 0.5
    recipe = server_recipe()
    if rates:
        recipe["bisect"]["flake"] = {"false_positive": 0.01, "false_negative": round(1 - h + 0.01, 4)}
    cs = [{"engine": {"threshold": t if i >= k else None, "start_hit": h}} for i in range(n)]
    return cs, {"n": n, "k": k, "threshold": t, "start_hit": h, "rates": rates}, recipe


def shape_server_start(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Reference engine: some commits never start (broken) or do not build, some next to the culprit."""
    n = _n(rng, 6, 20)
    k = rng.randint(1, n - 1)
    t = rng.randint(SERVER_MIN * 2, SERVER_MAX // 2)
    broken = set(rng.sample(range(1, n - 1), rng.randint(0, max(1, (n - 2) // 4)))) if n > 2 else set()
    if rng.random() < 0.4 and k - 1 >= 1:
        broken.add(k - 1)
    cs: list[dict[str, Any]] = [{"engine": {"threshold": t if i >= k else None, "broken": i in broken}}
                                for i in range(n)]
    return cs, {"n": n, "k": k, "threshold": t, "broken": sorted(broken)}, server_recipe()


def shape_pin(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """A pin bump (issue 35: "pin bumps"; the GLM-5.1 case's shape): a holder history (vLLM) of n
    commits pins a component (aiter, m commits tagged ``v0.1.<i>``) by a Dockerfile ``ARG
    AITER_BRANCH`` or a requirements line ``amd-aiter==0.1.<i>``; holder commit b moves the pin from
    tag o to tag w (a pure bump, or one mixed with a runtime change that the bot must not descend
    through; w < o: a downgrade, which brings a bug only when the component had fixed it); a
    second bump b2 > b may move it on to w2 > w. The bug enters in the component at j (inside
    o..w: the descent names it; at or before o: the good end is bad already; past the pins: never
    reached) or in the holder at k.

    ``commits`` are the holder's (``pin``: the component index it pins); ``params['component']``
    the component's (``bad``); the truth's indices count the holder's commits first, then the
    component's (component commit j is ``n + j``)."""
    n = _n(rng, 6, 24)
    m = rng.randint(8, 30)
    o = rng.randint(0, m - 5)
    w = rng.randint(o + 2, m - 3)
    b = rng.randint(1, n - 1)
    second = rng.random() < 0.3 and b < n - 1
    b2, w2 = (rng.randint(b + 1, n - 1), rng.randint(w + 1, m - 1)) if second else (None, None)
    down = not second and rng.random() < 0.15
    mixed = rng.random() < 0.25
    where = rng.choice(["inside", "inside", "inside", "before", "after", "holder"])
    j = k = None
    fixed = None
    if down:  # the component had a bug in o' .. o-1 that the old pin (o) is past: moving back to w < o
        o, w = w, o  # the holder pins o (the later tag), then w (the earlier one)
        where = rng.choice(["inside", "holder"])
        if where == "inside":  # bad in [j, fixed): the earlier tag w is bad, the later o good
            j = rng.randint(0, w)
            fixed = rng.randint(w + 1, o)
    elif where == "inside":
        j = rng.randint(o + 1, w2 if w2 is not None else w)
    elif where == "before":
        j = rng.randint(0, o)
    elif where == "after":
        last = w2 if w2 is not None else w
        j = rng.randint(last + 1, m - 1) if last < m - 1 else None
    if where == "holder":
        k = rng.randint(1, n - 1)
    pin_file = rng.choice(["docker", "requirements"])

    def pin(i: int) -> int:
        return w2 if b2 is not None and i >= b2 else w if i >= b else o

    # a holder bug is a runtime change: entering at a bump, it makes that bump a mixed one
    cs = [{"bad": k is not None and i >= k, "pin": pin(i), "bump": i in (b, b2),
           "mixed": (mixed and i == b) or (i == k and i in (b, b2))} for i in range(n)]
    comp = [{"bad": j is not None and i >= j and (fixed is None or i < fixed)} for i in range(m)]
    params = {"n": n, "m": m, "old": o, "new": w, "bump": b, "bump2": b2, "new2": w2, "downgrade": down,
              "mixed": mixed, "where": where, "j": j, "fixed": fixed, "k": k, "pin_file": pin_file,
              "component": comp}
    return cs, params, pin_recipe()


def _pin_truth(commits: list[dict[str, Any]], params: dict[str, Any]) -> Truth:
    """The truth of a pin world: the holder's verdicts (a commit is bad when it or the component
    commit it pins is bad). A pure forward bump named by them is descended: the truth is the
    component's answer over the two pins (indices ``n + i``); a mixed bump or a downgrade is not
    descended (a downgrade brings back what a later component commit fixed: no component commit
    introduced it), so the holder commit is the answer."""
    comp = params["component"]
    v = ["bad" if c["bad"] or comp[c["pin"]]["bad"] else "good" for c in commits]
    t = truth_of(v, params["k"])
    n = len(commits)
    if t.kind != "culprit":
        return t
    (c,) = t.culprits
    before, after = commits[c - 1]["pin"], commits[c]["pin"]
    pure = commits[c]["bump"] and not commits[c]["mixed"] and not commits[c]["bad"]
    if not pure or after <= before:
        return t
    cv = ["bad" if x["bad"] else "good" for x in comp[before:after + 1]]
    ct = truth_of(cv, None)
    culprits = [n + before + i for i in ct.culprits]
    return Truth(ct.kind, culprits, f"c{c} only bumps the pin a{before} -> a{after}; in the component: {ct.why} "
                 f"(component positions from a{before})", v, None if params["j"] is None else n + params["j"])


def _merge_truth(commits: list[dict[str, Any]], params: dict[str, Any]) -> Truth:
    """The truth of a merge world: the first-parent chain's verdicts; a branch bug is named by the
    merge (``first_parent`` true) or by its branch commit (false: the bot descends into the merge)."""
    chain = params["chain"]
    v = ["bad" if commits[i]["bad"] else "good" for i in chain]
    t = truth_of(v, None)
    culprits = [chain[c] for c in t.culprits]
    if t.kind == "culprit" and culprits == [params["merge_index"]] and not params["first_parent"]:
        culprits = [params["branch_bug"]]
    intro = params["k"] if params["k"] is not None else params["branch_bug"]
    why = f"first-parent chain {chain}: {t.why} (chain positions); commit(s) {culprits}"
    return Truth(t.kind, culprits, why, v, intro)


SHAPES: dict[str, Shape] = {s.name: s for s in [
    Shape("server-truncate", "reference engine: a window of commits silently truncates prompts below the "
          "failing size (varies n, k, threshold, the window, the kept length)", shape_server_truncate, server=True),
    Shape("server-sampling", "reference engine: the server's default sampling turns penalised at commit s "
          "(requests that leave sampling to the server get word salad); the bug enters at k (varies n, k, s, "
          "the penalty field)", shape_server_sampling, server=True),
    Shape("server-flaky", "reference engine whose bug shows on a share h of server starts, with or "
          "without bisect.flake rates (varies n, k, threshold, h, rates)", shape_server_flaky, server=True),
    Shape("step", "size-less command, deterministic: exit 0 before commit k, 1 from k (varies n, k)",
          shape_step),
    Shape("skips", "size-less command with exit-125 commits, some right before or at the culprit "
          "(varies n, k, the skipped commits, their place next to k)", shape_skips),
    Shape("build", "size-less command; some commits do not build, others fail their first build with "
          "a transient HTTP 429, the culprit sometimes among them (varies n, k, failing and transient builds)",
          shape_build),
    Shape("flaky", "size-less command whose bug shows in a share h of runs, reproducer.repeats r, with "
          "or without bisect.flake rates (varies n, k, h, r, rates)", shape_flaky),
    Shape("noise", "size-less command with two-sided noise: good builds fail a share fp of runs, bad "
          "ones pass a share 1-h; repeats 3, with or without the true bisect.flake rates (varies n, k, h, "
          "fp, rates)", shape_noise),
    Shape("merge", "size-less command over a history with a merge: the bug enters on main or on the "
          "merged branch; first_parent true or false (varies main length, branch length, fork, merge, "
          "where the bug enters, first_parent)", shape_merge),
    Shape("revert", "size-less command: the bug enters at k, is reverted at j, and re-enters later "
          "or only at the bad end (varies n, k, j, the re-entry)", shape_revert),
    Shape("threshold", "command with {size}: exit 1 from threshold t1 at commit k, drifting to t2 at "
          "commit d (up or down) (varies n, k, t1, d, t2)", shape_threshold),
    Shape("band", "command with {size}: exit 1 only inside a band of sizes from k; older commits "
          "may fail in another, disjoint band (good for this question) (varies n, k, band, older band)",
          shape_band),
    Shape("crash", "command with {size}: a window of commits crashes (exit 3) above the bug's "
          "threshold or below it (varies n, k, threshold, window, crash size)", shape_crash),
    Shape("envdrift", "two nights: night 1 finds no regression, then a host change breaks every "
          "commit (or, as a control, is harmless and a real culprit follows) (varies n, night ends, k)",
          shape_envdrift),
    Shape("server-step", "reference engine: garbage from threshold t1 at commit k, drifting to t2 at d "
          "(varies n, k, t1, d, t2)", shape_server_step, server=True),
    Shape("server-ctx", "reference engine: early commits serve a max_model_len below the failing size; "
          "the bug enters before or after the limit rises (varies n, k, threshold, limit, where it rises)",
          shape_server_ctx, server=True),
    Shape("server-start", "reference engine: broken (never healthy) commits, sometimes right before "
          "the culprit (varies n, k, threshold, broken commits)", shape_server_start, server=True),
    Shape("pin", "a holder (vLLM) pins a component (aiter) by a Dockerfile ARG or a requirements line; one "
          "commit bumps the pin (pure, or mixed with a runtime change); the bug enters in the component inside "
          "the bump's range, before it, after it, or in the holder (varies n, m, the tags, the bump, pure or "
          "mixed, where the bug enters, the pin file)", shape_pin),
    Shape("hostdrift", "size-less command; the host changes during the night: from the r-th reproducer run "
          "on every commit fails, with or without a real culprit k (varies n, r, k)", shape_hostdrift),
    Shape("growing", "size-less command whose flaky bug enters at k in a share h1 of runs and shows in h2 from "
          "j: rising from below the bot's floor, or falling (varies n, k, j, h1, h2, the direction, rates)",
          shape_growing),
]}

#: Shapes that start no server: fast, the default mix of the benchmark.
COMMAND_SHAPES = [s for s, v in SHAPES.items() if not v.server]
SERVER_SHAPES = [s for s, v in SHAPES.items() if v.server]


def generate(seed: int, shapes: list[str] | None = None) -> World:
    """The world of ``seed``: its shape is drawn from ``shapes`` (default: every shape), then its
    parameters; worlds whose answer would depend on sampling details are redrawn."""
    names = list(shapes or SHAPES)
    unknown = sorted(set(names) - set(SHAPES))
    if unknown:
        raise ValueError(f"unknown shape(s): {', '.join(unknown)} (known: {', '.join(SHAPES)})")
    rng = random.Random(f"world:{seed}")
    shape = SHAPES[names[seed % len(names)]] if len(names) > 1 else SHAPES[names[0]]
    for _ in range(200):
        commits, params, recipe = shape.make(rng)
        n = len(commits)
        nights = [Night(0, n - 1)]
        env = "a"
        if shape.name == "envdrift":
            a, b = params["night1"][1], params["night2"]
            nights = [Night(0, a, "a"), Night(b[0], b[1], "b")]
            env = "b"
        night = nights[-1]
        if shape.name == "merge":
            truth = _merge_truth(commits, params)
            return World(seed, shape.name, params, commits, recipe, nights, truth, False)
        if shape.name == "hostdrift":  # only the real culprit may be named; without one, nothing
            k = params["k"]
            truth = (Truth("ambiguous", [k], f"the host changes after {params['drift_after']} runs; c{k} is the "
                           "real culprit", [], k) if k is not None else
                     Truth("host-drift", [], f"the host changes after {params['drift_after']} runs: no commit "
                           "introduced the failure", [], None))
            return World(seed, shape.name, params, commits, recipe, nights, truth, True)
        if shape.name == "pin":
            return World(seed, shape.name, params, commits, recipe, nights, _pin_truth(commits, params), False)
        if shape.name in ("threshold", "band", "crash"):
            v = verdicts_sized(commits, night.good, night.bad, env)
        elif shape.server:
            v = verdicts_server(commits, night.good, night.bad)
        else:
            v = verdicts_plain(commits, night.good, night.bad, env)
        if v is None or "?" in v:
            continue
        intro = params.get("k")
        truth = truth_of(v, None if intro is None else intro - night.good)
        truth = Truth(truth.kind, [c + night.good for c in truth.culprits], truth.why, truth.verdicts,
                      intro)
        needs_rw = shape.name in ("flaky", "noise", "build", "growing")
        return World(seed, shape.name, params, commits, recipe, nights, truth, needs_rw)
    raise RuntimeError(f"seed {seed}: no unambiguous world of shape {shape.name} in 200 draws")
