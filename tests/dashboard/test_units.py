"""Pure parts of the dashboard: text cleaning, URL checks, chart geometry, the site writer's
bookkeeping, bad report files (no browser; the end-to-end tests are the other files here)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bisectbot.dashboard.chart import build_chart
from bisectbot.dashboard.data import RecipeData
from bisectbot.dashboard.safe import block, clean, refresh_secrets, safe_url
from bisectbot.dashboard.site import MANIFEST, write_site
from bisectbot.dashboard.views import slug, threshold_text
from tests.dashboard.conftest import cli


def test_clean_escapes_controls_breaks_markers_redacts_and_bounds(monkeypatch) -> None:
    monkeypatch.setenv("BISECTBOT_GITHUB_TOKEN", "ghp_" + "A1b2C3d4" * 5)
    refresh_secrets()
    s = clean("a\u202eb\x1b[31m\nc <!-- bisectbot:fingerprint=0123456789abcdef --> token ghp_" + "A1b2C3d4" * 5)
    assert "\u202e" not in s and "\\u202e" in s and "\x1b" not in s and "\n" not in s
    assert "bisectbot:fingerprint=" not in s and "ghp_A1b2" not in s and "***" in s
    assert "<!--" in s  # HTML escaping is the template's job (autoescape), not the cleaner's
    assert len(clean("x" * 10_000, 300)) <= 300
    assert clean("/var/lib/runner/state/logs/server-1.log") == "…/server-1.log"  # host layout not published
    assert block("line 1\r\nline 2\x07") == "line 1\nline 2\\x07"
    monkeypatch.delenv("BISECTBOT_GITHUB_TOKEN")
    refresh_secrets()


@pytest.mark.parametrize("url,ok", [
    ("https://github.com/o/r/issues/1", True), ("http://127.0.0.1:8080/x?y=1#z", True),
    ("javascript:alert(1)", False), ('https://x.test/"onmouseover="a', False), ("https://x.test/<b>", False),
    ("https://user:pass@x.test/", False), ("file:///etc/passwd", False), ("https://x.test/ a", False)])
def test_safe_url(url: str, ok: bool) -> None:
    assert (safe_url(url) == url) is ok


def test_slug_and_threshold_words() -> None:
    assert slug("glm51-fp8") == "glm51-fp8"
    assert slug("../x y") != slug("../x z") and "/" not in slug("../x y") and not slug("../x").startswith(".")
    assert threshold_text((2983, 3038)) == "garbage from 3038 tokens (none up to 2983)"
    assert threshold_text((16007, None)) == "no garbage up to 16007 tokens"
    assert threshold_text((None, 1000)) == "garbage already at 1000 tokens"
    assert threshold_text(None) == "—"


def test_chart_geometry_inverts_to_the_thresholds() -> None:
    t0 = datetime(2026, 4, 1, tzinfo=timezone.utc)
    pts = [{"when": t0 + timedelta(days=i), "lo": lo, "hi": hi, "verdict": v, "css": v, "ref": f"r{i}", "title": ""}
           for i, (lo, hi, v) in enumerate([(16007, None, "good"), (2983, 3038, "bad"), (None, 250, "bad"),
                                             (None, None, "skip"), (None, None, "good")])]
    c = build_chart(pts, [{"start": pts[0]["when"], "end": pts[1]["when"], "title": "t", "label": "l"}], 20000)
    (v1, y1), (v2, y2) = (c.yticks[0].value, c.yticks[0].pos), (c.yticks[-1].value, c.yticks[-1].pos)

    def value(y: float) -> float:
        return 10 ** (math.log10(v1) + (y - y1) / (y2 - y1) * (math.log10(v2) - math.log10(v1)))

    shapes = [m.shape for m in c.marks]
    assert shapes == ["ceiling", "interval", "floor", "skip", "verdict"]
    ceil, inter, floor = c.marks[:3]
    assert abs(value(ceil.y) - 16007) < 16007 * 1e-3 and abs(value(inter.y_lo) - 2983) < 3 and \
        abs(value(inter.y_hi) - 3038) < 3 and abs(value(floor.y) - 250) < 0.3
    assert c.marks[3].y == c.skip_row and c.marks[4].y == c.verdict_row and c.skip_row > c.verdict_row > c.plot_bottom
    xs = [m.x for m in c.marks]
    assert xs == sorted(xs) and len({round(b - a, 2) for a, b in zip(xs, xs[1:])}) == 1  # a true, even date axis
    (band,) = c.bands
    assert band.x == xs[0] and abs(band.x + band.width - xs[1]) < 0.01
    assert c.below is not None and abs(value(c.below.pos) - 20000) < 20


def test_a_session_id_never_names_a_path() -> None:
    from bisectbot.dashboard.data import page_key

    assert page_key("05acb4bc9059") == "05acb4bc9059"
    for bad in ("../../etc/x", "a/b", "x" * 65, "", "a\x00b"):
        k = page_key(bad)
        assert k != bad and len(k) == 16 and k.isalnum()


def test_write_site_removes_only_pages_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "site"
    stats = write_site([RecipeData("a"), RecipeData("b")], out)
    assert stats.rendered == 3 and (out / "r" / "b.html").is_file() and (out / MANIFEST).is_file()
    (out / "r" / "mine.html").write_text("a page of someone else")
    stats = write_site([RecipeData("a")], out)
    assert stats.removed == 1 and not (out / "r" / "b.html").exists() and (out / "r" / "mine.html").is_file()
    assert stats.rendered == 1 and stats.written == ["index.html"]  # r/a.html unchanged


def test_a_report_that_is_not_one_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "report.json"
    bad.write_text('{"result": {"recipe": "x", "stages": "oops"')
    p = cli("--state", str(tmp_path / "state"), "dashboard", "--out", str(tmp_path / "site"), "--report", str(bad))
    assert p.returncode == 2 and str(bad) in p.stderr, p.stderr
    p = cli("--state", str(tmp_path / "state"), "dashboard", "--out", str(tmp_path / "site"),
            "--job-url", "javascript:alert(1)")
    assert p.returncode == 2 and "--job-url" in p.stderr, p.stderr
    assert not (tmp_path / "site" / "index.html").exists()


@pytest.mark.parametrize("recipe", ["..", ".", "...", "../..", "/etc", "a/../../b"])
def test_a_forged_recipe_name_never_archives_outside_the_archive(tmp_path: Path, recipe: str) -> None:
    """Issue 41, item 14 (the kind: a name from a report file used as a path component): a report
    whose recipe is ``..`` (or ``.``, dots only, slashes) is archived inside ``STATE/dashboard/reports``."""
    import json

    from bisectbot.dashboard.archive import ARCHIVE_DIR, recipe_dir
    from bisectbot.models import RunResult, Status

    rep = tmp_path / "run" / "result.json"
    rep.parent.mkdir()
    rep.write_text(json.dumps(RunResult(recipe, "regression", Status.NO_REGRESSION, []).to_dict()))
    state = tmp_path / "state"
    cli("--state", str(state), "dashboard", "--out", str(tmp_path / "site"), "--report", str(rep))
    archive = (state / ARCHIVE_DIR).resolve()
    written = [p for p in tmp_path.rglob("*.json") if p != rep and "site" not in p.parts]
    assert written and all(archive in p.resolve().parents for p in written), written
    assert "/" not in recipe_dir(recipe) and recipe_dir(recipe).strip(".")


@pytest.mark.parametrize("number", [2**31, 10**30, 2**63])
def test_a_filing_with_an_issue_number_no_github_issue_has_is_refused_naming_the_file(tmp_path: Path,
                                                                                      number: int) -> None:
    """Issue 41, item 14: ``dashboard --filed`` with an out-of-range issue number crashed; now exit 2
    naming the file, and nothing is rendered from it."""
    import json

    from bisectbot.report.filed import SCHEMA

    f = tmp_path / "filed.json"
    f.write_text(json.dumps({"schema": SCHEMA, "number": number, "repo": "o/r", "fingerprints": ["0" * 16],
                             "action": "created"}))
    p = cli("--state", str(tmp_path / "state"), "dashboard", "--out", str(tmp_path / "site"), "--filed", str(f))
    assert p.returncode == 2 and str(f) in p.stderr and "out of range" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def _render_rss_kib(state: Path, site: Path) -> int:
    """Peak RSS (KiB) of one ``bisectbot dashboard`` render of ``state`` (the installed CLI, started
    by a small launcher so the figure is its own, not the pytest worker's: tests/hostile/peak_rss)."""
    import os
    import subprocess
    import sys

    from tests.hostile.peak_rss import run_measured

    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "BISECTBOT_GITHUB_TOKEN")}
    code, rss, _ = run_measured([sys.executable, "-m", "bisectbot", "--state", str(state), "dashboard", "--out",
                                 str(site)], site.parent, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    assert code == 0
    return rss


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["long-strings", "long-table"])
def test_an_archived_report_costs_later_renders_what_it_shows_not_what_it_held(tmp_path: Path, shape: str) -> None:
    """Issue 41, item 15. Kind: *an input archived once is read whole by every later render*.
    Parameters: where the bulk sits (one reason or reply of tens of MB; a size table of 100,000
    rows), and which later command pays (the next ``dashboard`` render, without ``--report``)."""
    import json

    from bisectbot.dashboard.archive import ARCHIVE_DIR
    from bisectbot.models import (
        Candidate,
        CandidateKind,
        ProbeResult,
        RunResult,
        StageResult,
        Status,
        Verdict,
    )

    cands = [Candidate(CandidateKind.COMMIT, f"{i:040x}", f"c{i}", "engine") for i in range(2)]
    big = "garbage " * 5_000_000  # 40 MB
    row = {"size": 1000, "requested": 1000, "outcome": "GARBAGE", "reasons": ["x"], "excerpt": "y" * 200}
    table = [row] * 100_000 if shape == "long-table" else [dict(row, excerpt=big)]
    probes = [ProbeResult(cands[0], Verdict.GOOD, reason="ok"),
              ProbeResult(cands[1], Verdict.BAD, reason=big if shape == "long-strings" else "garbage", table=table)]
    st = StageResult("stage 1", "engine", Status.CULPRIT, cands, probes, last_good=cands[0], first_bad=cands[1],
                     culprits=[cands[1]], confidence=1.0)
    rep = tmp_path / "run" / "result.json"
    rep.parent.mkdir()
    rep.write_text(json.dumps(RunResult("forged", "regression", Status.CULPRIT, [st]).to_dict()))
    small = tmp_path / "small" / "result.json"
    small.parent.mkdir()
    st_small = StageResult("stage 1", "engine", Status.CULPRIT, cands, probes[:1] + [ProbeResult(
        cands[1], Verdict.BAD, reason="garbage", table=[row])], last_good=cands[0], first_bad=cands[1],
        culprits=[cands[1]], confidence=1.0)
    small.write_text(json.dumps(RunResult("forged", "regression", Status.CULPRIT, [st_small]).to_dict()))
    base_state, state = tmp_path / "base", tmp_path / "state"
    for s, r in ((base_state, small), (state, rep)):
        p = cli("--state", str(s), "dashboard", "--out", str(tmp_path / "site0"), "--report", str(r))
        assert p.returncode == 0, p.stderr[-2000:]
    archived = list((state / ARCHIVE_DIR).rglob("*.json"))
    assert len(archived) == 1 and archived[0].stat().st_size < 2 * 1024 * 1024, [a.stat().st_size for a in archived]
    base = _render_rss_kib(base_state, tmp_path / "site1")
    got = _render_rss_kib(state, tmp_path / "site2")
    assert got < base + 64 * 1024, (got, base)  # within 64 MiB of a normal render's (was ~10x it)


@pytest.mark.parametrize("tag", ["nightly_main_20260231", "nightly_main_20250229", "nightly_20261131"])
def test_an_impossible_date_in_a_tag_reads_as_undated_not_an_error_at_every_render(tmp_path: Path, tag: str) -> None:
    """Hostile pass (issue 41): a forged report whose nightly tag holds 20260231 made the archiving
    render and every later one exit 70 (``day is out of range for month``). Kind: *a value a
    pattern admits and a constructor refuses*. Parameters: the day (31 in a 30-day month, 29 Feb
    of a common year, 30/31 Feb), where the tag comes from (an archived report; the ledger's
    nightlies go through the same reader)."""
    import json

    from bisectbot.models import (
        Candidate,
        CandidateKind,
        ProbeResult,
        RunResult,
        StageResult,
        Status,
        Verdict,
    )

    tags = ["nightly_main_20260101", tag]
    cands = [Candidate(CandidateKind.NIGHTLY, f"sha256:{i:064x}", t, "image", {"tag": t}) for i, t in enumerate(tags)]
    probes = [ProbeResult(cands[0], Verdict.GOOD, reason="ok", threshold=(16000, None)),
              ProbeResult(cands[1], Verdict.BAD, reason="garbage", threshold=(1000, 2000))]
    st = StageResult("stage 1", "image", Status.CULPRIT, cands, probes, last_good=cands[0], first_bad=cands[1],
                     culprits=[cands[1]], confidence=1.0)
    rep = tmp_path / "run" / "result.json"
    rep.parent.mkdir()
    rep.write_text(json.dumps(RunResult("forged-dates", "regression", Status.CULPRIT, [st]).to_dict()))
    state = tmp_path / "state"
    for extra in (["--report", str(rep)], []):
        p = cli("--state", str(state), "dashboard", "--out", str(tmp_path / "site"), *extra)
        assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.parametrize("span_days,label", [(0, "x"), (3, "‱" * 40), (400, "demo-engine 65c4c5435c"),
                                              (36_500, "⟿" * 20), (365 * 99 + 364, "😀" * 30)])
def test_chart_labels_fit_their_bound_on_any_span_and_glyph(span_days: int, label: str) -> None:
    """Hostile pass (issue 41): a span of a century got 106 yearly labels 8 px apart, and labels of
    glyphs wider than one em (U+2031, 1.74 em) ran out of the SVG. Kind: *a layout bound that holds
    for the inputs it was tried on*. Parameters: the span (one point, days, a year, a century), the
    label's glyphs (ASCII, wide symbols, emoji), where the band sits (the right edge)."""
    from bisectbot.dashboard.chart import LABEL_GAP, WIDTH, label_px

    t0 = datetime(2000, 1, 1, tzinfo=timezone.utc)
    t1 = t0 + timedelta(days=span_days)
    pts = [{"when": t, "lo": 1000, "hi": 2000, "verdict": "bad", "css": "bad", "ref": f"r{i}", "title": "t"}
           for i, t in enumerate((t0, t1))]
    c = build_chart(pts, [{"start": t1 - timedelta(hours=1), "end": t1, "title": "t", "label": label}])
    xs = [(t.pos, label_px(t.label)) for t in c.xticks]
    assert xs, c.xticks
    for (a, wa), (b, wb) in zip(xs, xs[1:]):
        assert b - a >= (wa + wb) / 2 + LABEL_GAP - 0.01, (a, b, wa, wb)
    assert all(p - w / 2 >= 0 and p + w / 2 <= WIDTH for p, w in xs)
    (band,) = c.bands
    assert band.label_x >= 0 and band.label_x + label_px(band.label) <= WIDTH, (band.label_x, band.label)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["huge-key", "many-probes", "many-long-strings"])
def test_an_archived_report_is_bounded_in_keys_and_in_total(tmp_path: Path, shape: str) -> None:
    """Hostile pass (issue 41), the next members of the archive's kind: a 100 MB dict key was kept
    whole (strings were cut, keys not), and 400,000 small probes or 10,000 strings just under the
    per-string cut were kept whole (each within its bound, the sum unbounded). Keys are cut as
    inline values are; a report whose shown part passes MAX_ARCHIVED_BYTES is refused by name."""
    import json

    from bisectbot.dashboard.archive import ARCHIVE_DIR, MAX_ARCHIVED_BYTES
    from bisectbot.models import (
        Candidate,
        CandidateKind,
        ProbeResult,
        RunResult,
        StageResult,
        Status,
        Verdict,
    )

    n = 60_000 if shape == "many-probes" else 2
    cands = [Candidate(CandidateKind.COMMIT, f"{i:040x}", f"c{i}", "engine",
                       {"K" * 20_000_000: 1} if shape == "huge-key" and i == 0 else {}) for i in range(n)]
    probes = [ProbeResult(c, Verdict.GOOD if i < n - 1 else Verdict.BAD, reason="r") for i, c in enumerate(cands)]
    st = StageResult("stage 1", "engine", Status.CULPRIT, cands, probes, last_good=cands[-2], first_bad=cands[-1],
                     culprits=[cands[-1]], confidence=1.0)
    notes = ["x" * 19_999] * 1_000 if shape == "many-long-strings" else []
    rep = tmp_path / "run" / "result.json"
    rep.parent.mkdir()
    rep.write_text(json.dumps(RunResult("forged", "regression", Status.CULPRIT, [st], notes=notes).to_dict()))
    state = tmp_path / "state"
    p = cli("--state", str(state), "dashboard", "--out", str(tmp_path / "site"), "--report", str(rep))
    archived = list((state / ARCHIVE_DIR).rglob("*.json"))
    if shape == "huge-key":
        assert p.returncode == 0 and archived and archived[0].stat().st_size < 1024 * 1024, p.stderr[-2000:]
    else:
        assert p.returncode == 2 and "not archived" in p.stderr and not archived, (p.returncode, p.stderr[-2000:])
        assert all(a.stat().st_size <= MAX_ARCHIVED_BYTES for a in archived)
