"""What the dashboard shows, read from the ledger (read only) and the archive of run reports.

Shapes (plain dataclasses, built by :func:`collect`):

* :class:`SessionData` -- one ledger session (one stage's search): its events, its probes (each
  event joined with the stored :class:`~bisectbot.models.ProbeResult`: size table, patches) and
  its ``bisectbot bisect log`` text.
* :class:`Point` -- one probed candidate on a recipe's time axis: a nightly at its date (the
  ``YYYYMMDD`` of its tag, else the registry's push time, else when the ledger first saw it), or,
  for a recipe over commits or releases, each night's newest candidate (a stage-1 session's bad
  end) at the time the session started. Thresholds in prompt tokens.
* :class:`Bisection` -- one run's chain of stages (from its archived report) or, for a run no
  report was archived for, its stage-1 session alone; with the range it found, the culprit, the
  issue filed for its fingerprint (the ledger's ``github`` table) and the job log URL.
* :class:`RecipeData` -- all of one recipe, plus the patch stack's state per candidate.

A probe event names its candidate by ref; the stored result is found by ref among the ledger's
probes with the same verdict, threshold and signature (probe keys are hashes that include the
runner's build key, which the ledger does not keep).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..ledger import Ledger
from ..models import Candidate, CandidateKind, ProbeResult, RunResult, StageResult, Status, Verdict
from ..report.evidence import measure_text
from ..report.fingerprint import fingerprint
from ..report.history import NightlyResult, problem_present
from .archive import ArchivedRun
from .safe import MAX_TABLE_ROWS

STAGE1 = "stage 1"
"""The stage name of a run's first search (:mod:`bisectbot.session.stages.first`)."""

_DATE_IN_TAG = re.compile(r"(?<!\d)(20\d\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?!\d)")


def _tag_time(text: str) -> datetime | None:
    """Midnight UTC of the ``YYYYMMDD`` date a tag holds, None for none or an impossible one
    (``20260231``: the pattern's ranges admit it; a forged or mistyped tag reads as undated, never
    as an error at every later render, hostile pass of issue 41)."""
    m = _DATE_IN_TAG.search(text or "")
    if not m:
        return None
    try:
        return datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=timezone.utc)
    except ValueError:
        return None


_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def parse_time(s: str | None) -> datetime | None:
    """An ISO 8601 time (``Z`` or offset; naive means UTC) as an aware UTC datetime; None if unparsable."""
    if not s:
        return None
    try:
        t = datetime.fromisoformat(str(s).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


@dataclass
class StoredProbe:
    """The parts of a stored probe result the site shows (size table, patches, logs)."""

    verdict: str
    threshold: tuple[int | None, int | None] | None
    signature: str
    reason: str
    table: list[dict[str, Any]]
    patches: list[dict[str, Any]]
    log_paths: list[str]
    #: a measured value's median, spread and count (``regress: slower``, issue 39), ``""`` for other probes
    measure: str = ""


@dataclass
class ProbeRow:
    """One ``probe`` event of a session (``threshold`` in prompt tokens), with its stored result."""

    index: int
    ref: str
    label: str
    attempt: int
    verdict: str
    effective: str
    reason: str
    signature: str
    threshold: tuple[int | None, int | None] | None
    duration_s: float
    origin: str
    phase: str
    at: str
    stored: StoredProbe | None = None


@dataclass
class SessionData:
    """One ledger session: ``stage``/``component`` from its state, ``candidates`` (refs, good end
    first), ``culprits`` (refs) and ``confidence`` from its ``result`` event, ``log`` the
    ``bisectbot bisect log`` text."""

    id: str
    recipe: str
    stage: str
    component: str
    status: str
    good: str
    bad: str
    created: str
    updated: str
    candidates: list[str]
    culprits: list[str]
    confidence: float
    message: str
    probes: list[ProbeRow]
    row: dict[str, Any] = field(default_factory=dict, repr=False)
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)
    labels: dict[str, str] = field(default_factory=dict)

    def label(self, ref: str) -> str:
        return self.labels.get(ref) or ref

    @property
    def log(self) -> str:
        """The session's ``bisectbot bisect log`` text (built when a page that shows it is rendered)."""
        from ..session import format_log

        return format_log(self.row, self.events)

    def fingerprint(self) -> str:
        """What a page showing this session depends on: its row and how many events it has."""
        return f"{self.id}|{self.updated}|{self.status}|{len(self.events)}|{sum(p.stored is not None for p in self.probes)}"


@dataclass
class Point:
    """One candidate on the time axis. ``when`` is UTC; ``dated_by`` says where the date came from
    (``tag``, ``registry``, ``first seen``, ``run``)."""

    ref: str
    label: str
    when: datetime
    dated_by: str
    verdict: str
    threshold: tuple[int | None, int | None] | None
    reason: str
    session: str
    runs: int
    tag: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    nightly: bool = False


@dataclass
class StageView:
    """One stage of a bisection: from the report (``result``) and/or its ledger session."""

    name: str
    component: str
    status: str
    culprits: list[tuple[str, str]]
    last_good: tuple[str, str] | None
    first_bad: tuple[str, str] | None
    confidence: float
    message: str
    session: SessionData | None
    report_probes: list[ProbeResult] = field(default_factory=list)


@dataclass
class Bisection:
    """One run's chain of stages; ``key`` names its page (``b/<key>.html``)."""

    key: str
    recipe: str
    kind: str
    regress: str
    status: str
    stages: list[StageView]
    created: str
    fingerprint: str = ""
    issue: dict[str, Any] | None = None
    job_url: str = ""
    from_report: bool = False
    lg_when: datetime | None = None
    fb_when: datetime | None = None

    def inputs(self) -> str:
        """What this bisection's page shows, as a cheap key (ledger rows by their update time and
        event counts, the archived report by its key): the page's input hash is taken over it."""
        parts = [self.key, self.status, self.job_url, repr(self.issue), repr(self.lg_when), repr(self.fb_when)]
        for st in self.stages:
            parts.append(f"{st.name}|{st.status}|{st.culprits}|{st.session.fingerprint() if st.session else '-'}")
        return "\n".join(parts)

    @property
    def final(self) -> StageView:
        return self.stages[-1]

    @property
    def first(self) -> StageView:
        return self.stages[0]

    def culprit_text(self) -> str:
        """``component ref-or-label`` of the final stage's culprit(s), or ``""``."""
        st = self.final
        if not st.culprits or st.status not in ("culprit", "range"):
            return ""
        names = ", ".join(lbl or ref for ref, lbl in st.culprits[:3]) + (" …" if len(st.culprits) > 3 else "")
        if not st.component or names.startswith(st.component + " "):  # a release label names its package
            return names
        return f"{st.component} {names}"


@dataclass
class PatchColumn:
    ref: str
    label: str
    cells: dict[str, dict[str, Any]]


@dataclass
class RecipeData:
    """Everything of one recipe. ``kind`` is ``regression`` or ``fix``; ``threshold_below`` tokens."""

    name: str
    kind: str = "regression"
    regress: str = ""
    threshold_below: int | None = None
    max_size: int | None = None
    points: list[Point] = field(default_factory=list)
    bisections: list[Bisection] = field(default_factory=list)
    sessions: list[SessionData] = field(default_factory=list)
    patch_ids: list[str] = field(default_factory=list)
    patch_columns: list[PatchColumn] = field(default_factory=list)

    def history(self, since: datetime | None = None) -> NightlyResult:
        """The tested points (oldest first) as a :class:`NightlyResult` (streak, flips)."""
        probes = [ProbeResult(Candidate(CandidateKind.NIGHTLY, p.ref, p.label), Verdict(p.verdict),
                              threshold=p.threshold)
                  for p in self.points if since is None or p.when >= since]
        return NightlyResult(recipe=self.name, probes=probes, kind=self.kind, regress=self.regress,
                             threshold_below=self.threshold_below, max_size=self.max_size)

    def present(self, p: Point) -> bool | None:
        """Does point ``p`` show the tracked problem (None: skip)?"""
        return problem_present(ProbeResult(Candidate(CandidateKind.NIGHTLY, p.ref), Verdict(p.verdict)), self.kind)


# ---------------------------------------------------------------------------------------------- reading
def _stored_index(ledger: Ledger) -> dict[str, list[StoredProbe]]:
    idx: dict[str, list[StoredProbe]] = {}
    for p in ledger.probes():
        rows = [{k: r.get(k) for k in ("requested", "prompt_tokens", "outcome", "excerpt", "reasons", "requests")}
                for r in (p.table or [])[:MAX_TABLE_ROWS] if isinstance(r, dict)]
        idx.setdefault(p.candidate.ref, []).append(StoredProbe(
            p.verdict.value, p.threshold, p.signature, p.reason, rows, list(p.patches or []), list(p.log_paths),
            measure_text(p) if "measure" in p.extra else ""))
    return idx


def _match(stored: list[StoredProbe], verdict: str, threshold: Any, signature: str) -> StoredProbe | None:
    thr = tuple(threshold) if threshold else None
    for s in stored:
        if s.verdict == verdict and (tuple(s.threshold) if s.threshold else None) == thr and s.signature == signature:
            return s
    return None


def _sessions(ledger: Ledger, stored: dict[str, list[StoredProbe]]) -> list[SessionData]:
    out = []
    for s in ledger.sessions():
        events = ledger.events(s["id"])
        state = s.get("state") or {}
        probes, labels = [], {}
        culprits, confidence, message = list(state.get("culprits") or []), 0.0, ""
        for ev in events:
            d = ev["data"]
            if ev["kind"] == "probe" and isinstance(d, dict) and d.get("ref"):
                thr = d.get("threshold")
                thr_t = (thr[0], thr[1]) if isinstance(thr, list) and len(thr) == 2 else None
                row = ProbeRow(int(d.get("index") or 0), str(d["ref"]), str(d.get("label") or ""),
                               int(d.get("attempt") or 1), str(d.get("verdict") or ""),
                               str(d.get("effective") or d.get("verdict") or ""), str(d.get("reason") or ""),
                               str(d.get("signature") or ""), thr_t, float(d.get("duration_s") or 0.0),
                               str(d.get("origin") or ""), str(d.get("phase") or ""), ev["at"])
                row.stored = _match(stored.get(row.ref, []), row.verdict, thr_t, row.signature)
                probes.append(row)
                if row.label:
                    labels.setdefault(row.ref, row.label)
            elif ev["kind"] == "result" and isinstance(d, dict):
                culprits = list(d.get("culprits") or culprits)
                confidence = float(d.get("confidence") or 0.0)
                message = str(d.get("message") or "")
        out.append(SessionData(
            s["id"], s["recipe"], str(state.get("stage") or STAGE1), str(state.get("component") or ""),
            s["status"], s.get("good") or "", s.get("bad") or "", s["created"], s["updated"],
            [str(c) for c in state.get("candidates") or []], culprits, confidence, message, probes,
            s, events, labels))
    return out


def _nightly_info(ledger: Ledger) -> dict[str, dict[str, Any]]:
    """digest -> {tag, when, dated_by, versions}: the dated tag wins over a moving one."""
    info: dict[str, dict[str, Any]] = {}
    for n in ledger.nightlies():
        tagged = _tag_time(n["tag"])
        if tagged:
            when, by = tagged, "tag"
        elif parse_time(n.get("last_updated")):
            when, by = parse_time(n["last_updated"]), "registry"
        else:
            when, by = parse_time(n["first_seen"]), "first seen"
        comp = {k: str(v) for k, v in (n.get("components") or {}).items() if v}
        old = info.get(n["digest"])
        if old is None or (by == "tag" and old["dated_by"] != "tag"):
            info[n["digest"]] = {"tag": n["tag"], "when": when, "dated_by": by, "versions": comp or
                                 (old or {}).get("versions", {})}
        elif comp and not old["versions"]:
            old["versions"] = comp
    for digest, d in info.items():
        if not d["versions"]:
            img = ledger.get_image_info(digest) or {}
            d["versions"] = {c: str((img.get(c) or {}).get("version")) for c in ("vllm", "aiter", "torch")
                             if isinstance(img.get(c), dict) and (img.get(c) or {}).get("version")}
    return info


def _issue(ledger: Ledger, fps: list[str], github_url: str) -> dict[str, Any] | None:
    for fp in fps:
        if not fp:
            continue
        row = ledger.github_issue(fp)
        if row and row.get("number") and _REPO.fullmatch(str(row.get("repo") or "")):
            return {"number": int(row["number"]), "repo": row["repo"], "state": row["state"],
                    "url": f"{github_url.rstrip('/')}/{row['repo']}/issues/{int(row['number'])}", "fingerprint": fp}
    return None


def page_key(session_id: str) -> str:
    """A session id as a file name: itself when it is ``[A-Za-z0-9_-]{1,64}`` (bisectbot's ids are 12
    hex), else 16 hex of its SHA-256 (an id from an edited ledger never names a path)."""
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", session_id):
        return session_id
    import hashlib

    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _cand(ref: str, label: str, component: str) -> Candidate:
    return Candidate(CandidateKind.COMMIT, ref, label, component)


def _stage_from_session(s: SessionData) -> StageView:
    lg = fb = None
    if s.culprits and s.culprits[0] in s.candidates:
        i = s.candidates.index(s.culprits[0])
        j = s.candidates.index(s.culprits[-1]) if s.culprits[-1] in s.candidates else i
        if i > 0:
            lg = (s.candidates[i - 1], s.label(s.candidates[i - 1]))
        fb = (s.candidates[j], s.label(s.candidates[j]))
    return StageView(s.stage, s.component, s.status, [(c, s.label(c)) for c in s.culprits], lg, fb,
                     s.confidence, s.message, s)


def _ledger_fingerprint(recipe: str, kind: str, st: StageView) -> str:
    """The fingerprint a run ending in stage ``st`` files under (without its report: the identity
    rebuilt from the session; HMAC'd under ``$BISECTBOT_MARKER_KEY`` like the filing step)."""
    status = Status(st.status) if st.status in {s.value for s in Status} else Status.INCONCLUSIVE
    stage = StageResult(st.name, st.component, status,
                        last_good=_cand(*st.last_good, st.component) if st.last_good else None,
                        first_bad=_cand(*st.first_bad, st.component) if st.first_bad else None,
                        culprits=[_cand(r, lbl, st.component) for r, lbl in st.culprits])
    return fingerprint(RunResult(recipe=recipe, kind=kind, status=status, stages=[stage]))


def _find_session(sessions: list[SessionData], recipe: str, st: StageResult, session_id: str = "") -> SessionData | None:
    """The ledger session of an archived run's stage ``st``: the one the report names
    (``session_id``, the run's final stage's) where it is among the sessions of that stage and
    ends, else the newest of those. A replay or a later run over the same ends is a session of
    its own (new-user pass, issue 41: the demo's archived report showed a replay's session)."""
    if not st.candidates:
        return None
    good, bad = st.candidates[0].ref, st.candidates[-1].ref
    hits = [s for s in sessions if s.recipe == recipe and s.stage == st.name and s.good == good and s.bad == bad]
    named = [s for s in hits if session_id and s.id == session_id]
    if named:
        return named[0]
    return max(hits, key=lambda s: s.updated) if hits else None


def _from_report(run: ArchivedRun, sessions: list[SessionData]) -> Bisection:
    r = run.result
    stages = []
    for st in r.stages:
        sess = _find_session(sessions, r.recipe, st, r.session_id)

        def lab(c: Candidate | None) -> tuple[str, str] | None:
            return (c.ref, c.label) if c else None

        stages.append(StageView(st.name, st.component, st.status.value, [(c.ref, c.label) for c in st.culprits],
                                lab(st.last_good), lab(st.first_bad), st.confidence, st.message, sess,
                                list(st.probes)))
    created = stages[0].session.created if stages and stages[0].session else run.archived
    return Bisection(f"r-{run.key}", r.recipe, r.kind, r.regress, r.status.value, stages, created,
                     fingerprint=run.fingerprint or fingerprint(r), job_url=run.job_url, from_report=True)


def collect(ledger: Ledger, runs: list[ArchivedRun], recipes: dict[str, Any] | None = None,
            github_url: str = "https://github.com") -> list[RecipeData]:
    """Read everything the site shows, one :class:`RecipeData` per recipe (sorted by name).

    ``recipes`` maps recipe names to loaded :class:`bisectbot.recipe.Recipe` objects (kind,
    ``threshold-below``, ``max_size``); without one, a recipe's kind and regress mode come from its
    newest archived report, else from its newest ledger session (which records the recipe's
    ``regress``), else it is read as a regression. ``github_url`` is the web address
    issue links start with (``https://github.com``, or a GitHub Enterprise server)."""
    recipes = recipes or {}
    stored = _stored_index(ledger)
    sessions = _sessions(ledger, stored)
    nightly = _nightly_info(ledger)
    names = sorted({s.recipe for s in sessions} | {r.result.recipe for r in runs} | set(recipes))
    out = []
    for name in names:
        rd = RecipeData(name)
        rec = recipes.get(name)
        mine_runs = [r for r in runs if r.result.recipe == name]
        if rec is not None:
            rd.kind = "fix" if rec.regress.is_fix else "regression"
            rd.regress = str(rec.regress)
            rd.threshold_below = int(rec.regress.arg) if rec.regress.mode == "threshold-below" else None
            rd.max_size = getattr(rec.reproducer, "max_size", None)
        elif mine_runs or any((s.row.get("state") or {}).get("regress") for s in sessions if s.recipe == name):
            if mine_runs:
                rd.kind, rd.regress = mine_runs[-1].result.kind or "regression", mine_runs[-1].result.regress
            else:  # the newest session's question (a ledger without reports and without the recipe)
                st = max((s for s in sessions if s.recipe == name and (s.row.get("state") or {}).get("regress")),
                         key=lambda s: s.updated).row["state"]
                rd.kind, rd.regress = str(st.get("kind") or "regression"), str(st["regress"])
            if rd.regress.startswith("threshold-below:"):
                try:
                    rd.threshold_below = int(rd.regress.split(":", 1)[1])
                except ValueError:
                    rd.threshold_below = None
        rd.sessions = [s for s in sessions if s.recipe == name]
        _points(rd, nightly, mine_runs)
        _bisections(rd, mine_runs, ledger, github_url)
        _patches(rd, nightly)
        out.append(rd)
    return out


def _points(rd: RecipeData, nightly: dict[str, dict[str, Any]], runs: list[ArchivedRun] | None = None) -> None:
    """The recipe's points: every stage-1 session's probes in this ledger, then the stage-1 probes of the
    archived reports ``runs`` for candidates no session of this ledger probed. (The dashboard's ledger
    is the ledger runner's; a night bisected on a GPU runner reaches it only as its report artifact.)"""
    by_ref: dict[str, Point] = {}
    stage1 = [s for s in rd.sessions if s.stage == STAGE1]
    for s in stage1:
        for pr in s.probes:
            info = nightly.get(pr.ref)
            if info is None and pr.ref != s.bad:
                continue  # a commit or release inside a bisection: not a night of its own
            when, by = (info["when"], info["dated_by"]) if info else (parse_time(s.created), "run")
            if when is None:
                continue
            p = by_ref.get(pr.ref)
            if p is None:
                by_ref[pr.ref] = Point(pr.ref, (info or {}).get("tag") or pr.label or pr.ref, when, by, pr.verdict,
                                       pr.threshold, pr.reason, s.id, 1, (info or {}).get("tag", ""),
                                       dict((info or {}).get("versions") or {}), info is not None)
            else:
                p.runs += 1
                if p.verdict == "skip" and pr.verdict != "skip":  # a later run tested it after all
                    p.verdict, p.threshold, p.reason, p.session = pr.verdict, pr.threshold, pr.reason, s.id
    from_ledger = set(by_ref)
    for run in runs or []:
        for st in run.result.stages[:1]:
            if st.name != STAGE1 or not st.candidates:
                continue
            for pr in st.probes:
                c = pr.candidate
                info = nightly.get(c.ref)
                if c.ref in from_ledger or (info is None and c.kind is not CandidateKind.NIGHTLY
                                            and c.ref != st.candidates[-1].ref):
                    continue  # this ledger's session has it; or a candidate inside a bisection
                tagged = _tag_time(c.label or "")
                if info:
                    when, by = info["when"], info["dated_by"]
                elif tagged:
                    when, by = tagged, "tag"
                else:
                    when, by = parse_time(run.archived), "run"
                if when is None:
                    continue
                p = by_ref.get(c.ref)
                if p is None:
                    by_ref[c.ref] = Point(c.ref, (info or {}).get("tag") or c.label or c.ref, when, by, pr.verdict.value,
                                          pr.threshold, pr.reason, f"r-{run.key}", 1, (info or {}).get("tag", ""),
                                          dict((info or {}).get("versions") or {}),
                                          info is not None or c.kind is CandidateKind.NIGHTLY)
                elif p.session == f"r-{run.key}":
                    continue  # the same report probed it twice (verification): one night
                else:
                    p.runs += 1
                    if p.verdict == "skip" and pr.verdict.value != "skip":
                        p.verdict, p.threshold, p.reason, p.session = (pr.verdict.value, pr.threshold, pr.reason,
                                                                       f"r-{run.key}")
    rd.points = sorted(by_ref.values(), key=lambda p: (p.when, p.label))


def _bisections(rd: RecipeData, runs: list[ArchivedRun], ledger: Ledger, github_url: str) -> None:
    out: list[Bisection] = []
    covered: set[str] = set()
    for run in runs:
        b = _from_report(run, rd.sessions)
        covered |= {st.session.id for st in b.stages if st.session is not None and st.name == STAGE1}
        out.append(b)
    for s in rd.sessions:
        if s.stage != STAGE1 or s.id in covered:
            continue
        st = _stage_from_session(s)
        out.append(Bisection(f"s-{page_key(s.id)}", rd.name, rd.kind, rd.regress, s.status, [st], s.created,
                             fingerprint=_ledger_fingerprint(rd.name, rd.kind, st)))
    when = {p.ref: p.when for p in rd.points}
    for b in out:
        fps = [b.fingerprint]
        if not b.from_report:
            fps.append(_ledger_fingerprint(rd.name, rd.kind, b.final))
        b.issue = _issue(ledger, fps, github_url)
        first = b.first
        if first.last_good and first.first_bad:
            b.lg_when, b.fb_when = when.get(first.last_good[0]), when.get(first.first_bad[0])
    rd.bisections = sorted(out, key=lambda b: (b.created, b.key))


def _patches(rd: RecipeData, nightly: dict[str, dict[str, Any]]) -> None:
    """Patch state per stage-1 candidate (releases, nightlies) that a probe applied the stack to."""
    order: dict[str, int] = {}
    for s in sorted((s for s in rd.sessions if s.stage == STAGE1), key=lambda s: -len(s.candidates)):
        for i, ref in enumerate(s.candidates):
            order.setdefault(ref, i)
    cols: dict[str, PatchColumn] = {}
    ids: list[str] = []
    for s in rd.sessions:
        if s.stage != STAGE1:
            continue
        for pr in s.probes:
            if pr.stored is None or not pr.stored.patches:
                continue
            col = cols.setdefault(pr.ref, PatchColumn(pr.ref, (nightly.get(pr.ref) or {}).get("tag") or pr.label
                                                      or pr.ref, {}))
            for rec in pr.stored.patches:
                if not isinstance(rec, dict) or not rec.get("id"):
                    continue
                pid = str(rec["id"])
                if pid not in ids:
                    ids.append(pid)
                col.cells.setdefault(pid, {"state": str(rec.get("state") or ""),
                                           "label": str(rec.get("label") or rec.get("state") or ""),
                                           "detail": str(rec.get("detail") or "")})

    def key(c: PatchColumn) -> tuple:
        info = nightly.get(c.ref)
        if info:
            return (0, info["when"].timestamp(), c.label)
        return (1, order.get(c.ref, 10 ** 9), c.label)

    rd.patch_ids = ids
    rd.patch_columns = sorted(cols.values(), key=key)


def upstream_since(rd: RecipeData, patch_id: str) -> str | None:
    """The label of the first candidate from which on every probed candidate has ``patch_id``
    already upstream (None when the newest probed one still needs it)."""
    seen = [c for c in rd.patch_columns if patch_id in c.cells]
    since = None
    for c in reversed(seen):
        if c.cells[patch_id]["state"] != "already-upstream":
            break
        since = c.label
    return since


__all__ = ["Bisection", "Point", "PatchColumn", "ProbeRow", "RecipeData", "SessionData", "StageView",
           "StoredProbe", "collect", "parse_time", "upstream_since"]
