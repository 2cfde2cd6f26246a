"""Issue 25, input 5: the threshold chart tells the truth, checked on what it plots.

The figure :func:`bisectbot.report.chart.figure` returns is the one written to the PNG; its
artists carry gids, and the tests read the plotted points back from them: a true x axis (dates
with the missing night as a gap; commit distance for commits), "no garbage up to N" as an open
up-triangle at N, skips in their own row, the first bad and last good marked, a legend, no fake
0 on a log axis, and the divergence wording for ``regress: diverges``. The last test draws the
chart of a real ``bisectbot demo`` run and checks the PNG's pixels at the culprit's line.
"""

from __future__ import annotations

import json
import subprocess
import sys

import matplotlib
import pytest

from bisectbot.models import Candidate, CandidateKind, ProbeResult, Verdict
from bisectbot.report.chart import chart_data, figure
from bisectbot.report.files import run_thresholds
from bisectbot.report.history import NightlyResult
from bisectbot.report.load import load_result

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def nightly(day: int, verdict: Verdict, thr) -> ProbeResult:
    tag = f"nightly_main_202611{day:02d}"
    return ProbeResult(Candidate(CandidateKind.NIGHTLY, f"sha256:{day:064x}", tag, "image", {"tag": tag}), verdict,
                       threshold=thr)


def artists(fig, gid: str) -> list:
    return [a for ax in fig.axes for a in (*ax.lines, *ax.collections, *ax.patches) if a.get_gid() == gid]


def points(fig, gid: str) -> list[tuple[float, float]]:
    out = []
    for a in artists(fig, gid):
        if hasattr(a, "get_xdata"):
            out += list(zip(map(float, a.get_xdata()), map(float, a.get_ydata())))
    return out


@pytest.fixture
def nights() -> NightlyResult:
    # 11-02 has no nightly; 11-04 is untestable; 11-05 turned bad
    probes = [nightly(1, Verdict.GOOD, (16000, None)), nightly(3, Verdict.GOOD, (16000, None)),
              nightly(4, Verdict.SKIP, None), nightly(5, Verdict.BAD, (2000, 3000)),
              nightly(6, Verdict.BAD, (None, 250))]
    return NightlyResult(recipe="r", probes=probes, max_size=16000)


def test_nightlies_on_a_date_axis_with_open_markers_skips_apart_and_the_boundary(nights) -> None:
    data = chart_data(nights, first_bad=nights.probes[3].candidate.ref, last_good=nights.probes[1].candidate.ref)
    fig = figure(data)
    try:
        main, skip_row = fig.axes[0], fig.axes[1]
        day = {d: float(__import__("datetime").date(2026, 11, d).toordinal()) for d in range(1, 7)}
        # "no garbage up to 16000": open up-triangles at 16000 (not a threshold of 16000)
        ok = artists(fig, "ok-up-to")
        assert points(fig, "ok-up-to") == [(day[1], 16000.0), (day[3], 16000.0)]
        assert ok[0].get_marker() == "^" and ok[0].get_markerfacecolor() == "none"
        # the missing 11-02 is a gap of two days on the axis
        assert day[3] - day[1] == 2.0
        # the measured interval: a bar from 2000 (last OK) up to the dot at 3000 (first garbage)
        assert points(fig, "threshold") == [(day[5], 3000.0)]
        segs = [s.tolist() for c in artists(fig, "interval") for s in c.get_segments()]
        assert segs == [[[day[5], 2000.0], [day[5], 3000.0]]]
        # garbage at every size: an open down-triangle at the smallest size, never at 0
        assert points(fig, "bad-from") == [(day[6], 250.0)]
        # the skip sits in its own row, not on the threshold axis
        assert [a.axes for a in artists(fig, "skip")] == [skip_row]
        assert points(fig, "skip") == [(day[4], 0.0)]
        assert not any(y == 0 for gid in ("ok-up-to", "threshold", "bad-from") for _, y in points(fig, gid))
        # culprit and boundary
        assert points(fig, "first-bad")[0][0] == day[5] and points(fig, "last-good")[0][0] == day[3]
        assert artists(fig, "boundary")
        legend = [t.get_text() for t in main.get_legend().get_texts()]
        for want in ("no garbage up to N", "garbage already at N", "first bad (culprit)", "last good",
                     "skip (untestable)", "bar: last OK → first garbage (dot)"):
            assert any(want in t for t in legend), (want, legend)
        # log axis (250..16000 spans 64x): its bottom is above 0 and below the smallest value
        assert main.get_yscale() == "log"
        lo, hi = main.get_ylim()
        assert 0 < lo < 250 and hi > 16000
        assert "garbage threshold" in main.get_ylabel()
        assert [t.get_text() for t in skip_row.get_xticklabels()][:2] == ["2026-11-01", "2026-11-03"]
        assert_every_text_inside(fig)
    finally:
        plt.close(fig)


def assert_every_text_inside(fig) -> None:
    """Every text the figure draws (legend entries, title, axis and tick labels, the boundary's
    annotations) lies inside the figure as the Agg renderer draws it: the PNG is what an issue
    embeds (new-user pass, issue 41: the legend's longest entry was cut at the figure's edge)."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = fig.bbox
    ticks = set()  # tick labels outside an axis' view are kept by matplotlib but not drawn
    for ax in fig.axes:
        for axis, (lo, hi) in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                for label in (tick.label1, tick.label2):
                    ticks.add(id(label))
                    if lo <= tick.get_loc() <= hi:
                        ticks.discard(id(label))
    for t in fig.findobj(matplotlib.text.Text):
        if not t.get_visible() or not t.get_text() or id(t) in ticks:
            continue
        b = t.get_window_extent(r)
        assert box.x0 - 0.5 <= b.x0 and b.x1 <= box.x1 + 0.5 and box.y0 - 0.5 <= b.y0 and b.y1 <= box.y1 + 0.5, \
            (t.get_text(), b, box)


def test_commits_are_placed_by_their_distance_in_the_range_and_diverges_is_named(nights) -> None:
    cands = [Candidate(CandidateKind.COMMIT, f"{i:040x}", f"{i:010x} change {i}", "vllm") for i in range(100)]
    probes = [ProbeResult(cands[i], v, threshold=t) for i, v, t in
              ((0, Verdict.GOOD, (8000, None)), (50, Verdict.BAD, (3000, 4000)), (25, Verdict.GOOD, (8000, None)),
               (37, Verdict.BAD, (3000, 4000)), (31, Verdict.GOOD, (8000, None)), (32, Verdict.BAD, (3000, 4000)))]
    probes.sort(key=lambda p: int(p.candidate.ref, 16))
    run = NightlyResult(recipe="r", probes=probes, regress="garbage, diverges", max_size=8000)
    data = chart_data(run, "probed candidates", positions={c.ref: i for i, c in enumerate(cands)},
                      first_bad=cands[32].ref, last_good=cands[31].ref)
    fig = figure(data)
    try:
        assert [x for x, _ in points(fig, "ok-up-to")] == [0.0, 25.0, 31.0]  # commit distance, not slots
        assert [x for x, _ in points(fig, "threshold")] == [32.0, 37.0, 50.0]
        assert points(fig, "first-bad")[0][0] == 32.0 and points(fig, "last-good")[0][0] == 31.0
        assert fig.axes[0].get_yscale() == "linear" and fig.axes[0].get_ylim()[0] == 0
        assert "divergence" in fig.axes[0].get_ylabel()
        assert "commit index" in fig.axes[1].get_xlabel()
    finally:
        plt.close(fig)


def _commits(n: int, at: list[int], bad_from: int) -> tuple[NightlyResult, dict[str, int]]:
    cands = [Candidate(CandidateKind.COMMIT, f"{i:040x}", f"{i:010x} change {i}", "vllm") for i in range(n)]
    probes = [ProbeResult(cands[i], Verdict.BAD if i >= bad_from else Verdict.GOOD,
                          threshold=(1415, 1920) if i >= bad_from else (16000, None)) for i in sorted(set(at))]
    return NightlyResult(recipe="r", probes=probes, max_size=16000), {c.ref: i for i, c in enumerate(cands)}


def _days(days: list[int]) -> NightlyResult:
    import datetime as dt

    base = dt.date(2026, 9, 1)
    probes = []
    for k, d in enumerate(sorted(set(days))):
        tag = f"nightly_main_{(base + dt.timedelta(days=d)).strftime('%Y%m%d')}"
        probes.append(ProbeResult(Candidate(CandidateKind.NIGHTLY, f"sha256:{d:064x}", tag, "image", {"tag": tag}),
                                  Verdict.BAD if k >= len(set(days)) // 2 else Verdict.GOOD,
                                  threshold=(1415, 1920) if k >= len(set(days)) // 2 else (16000, None)))
    return NightlyResult(recipe="r", probes=probes, max_size=16000)


# Kind (issue 41, item 10): *one tick label per probed position collides when two positions are
# close*. Parameters: the axis (commit index, nightly date), how many probes, how close, the span,
# the labels' length (2 to 4 digits, ISO dates).
@pytest.mark.parametrize("world", [
    ("index", 36, [0, 9, 14, 15, 17, 18, 19, 20, 35]),       # the report of item 10: 14|15, 19|20
    ("index", 5000, [0, 1250, 2500, 3125, 3126, 3127, 4999]),  # 4-digit neighbours
    ("index", 200, list(range(0, 200, 3))),                    # > 40 probes
    ("index", 3, [0, 1, 2]),
    ("date", 60, [0, 1, 2, 30, 31, 59]),                       # adjacent nights in a long span
    ("date", 400, list(range(0, 400, 9))),
    ("date", 5, [0, 1, 2, 3, 4]),
])
def test_no_two_x_tick_labels_overlap_and_each_probe_stays_placed(world) -> None:
    kind, n, at = world
    if kind == "index":
        run, positions = _commits(n, at, at[len(at) // 2])
        data = chart_data(run, "probed candidates", positions=positions)
    else:
        run = _days(at)
        data = chart_data(run)
    fig = figure(data)
    try:
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        ax = fig.axes[1]
        boxes = list((t.get_window_extent(r), t.get_text()) for t in ax.get_xticklabels()
                       if t.get_visible() and t.get_text() and ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1])
        boxes.sort(key=lambda b: b[0].x0)
        assert len(boxes) >= 2, boxes
        for (a, ta), (b, tb) in zip(boxes, boxes[1:]):
            assert a.x1 <= b.x0, f"tick labels {ta!r} and {tb!r} overlap: {a} {b}"
        assert_every_text_inside(fig)
        xs = sorted(x for gid in ("ok-up-to", "threshold") for x, _ in points(fig, gid))
        assert len(xs) == len(set(at))
    finally:
        plt.close(fig)


@pytest.mark.slow
def test_demo_chart_png_marks_the_culprit_at_its_commit_index(tmp_path) -> None:
    """A real demo run: the chart's first-bad line stands at the culprit's index in the range, and
    the PNG written beside the report has that line's colour in the column the figure puts it; the
    issue says where the PNG is, or, with the dashboard's address, embeds it from there
    (:func:`published_chart_is_embedded`)."""
    r = subprocess.run([sys.executable, "-m", "bisectbot", "demo", "--out", "out"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "out"
    result, _ = load_result(out / "result.json")
    assert_png_is_the_results_chart(out / "threshold.png", result)
    report = (out / "report.md").read_text()
    assert "![threshold over probed candidates](threshold.png)" in report
    assert json.loads((out / "result.json").read_text())["stages"][-1]["first_bad"]["ref"] == result.final.first_bad.ref
    # no dashboard address: the issue says where the PNG is instead of an image it cannot show
    issue = (out / "issue.md").read_text()
    assert "The threshold chart is `threshold.png` in the run's artifacts, beside `report.md`" in issue
    assert "![threshold" not in issue
    published_chart_is_embedded(tmp_path)


def assert_png_is_the_results_chart(png_path, result) -> None:
    """The PNG at ``png_path`` plots ``result``: the figure of its data puts the first-bad line at
    the culprit's index in the range, and the PNG has that line's red in the pixel column the
    figure puts it at (same size as the figure)."""
    final = result.final
    index = final.position_map()[final.first_bad.ref]
    run = run_thresholds(result)
    data = chart_data(run, "probed candidates", positions=final.position_map(),
                      first_bad=final.first_bad.ref, last_good=final.last_good.ref)
    assert data.first_bad_x == index and data.last_good_x == final.position_map()[final.last_good.ref]
    assert {p.kind for p in data.points} >= {"interval", "ok-up-to"}
    fig = figure(data)
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        # where the first-bad line is drawn, in PNG pixels (origin top-left)
        x_px, _ = ax.transData.transform((index, 0))
        y0, y1 = ax.bbox.y0, ax.bbox.y1
        width, height = fig.canvas.get_width_height()
    finally:
        plt.close(fig)
    from PIL import Image

    png = Image.open(png_path).convert("RGB")
    assert png.size == (width, height)
    col = round(x_px)
    reds = [png.getpixel((c, int(height - y))) for c in (col - 1, col, col + 1)
            for y in range(int(y0) + 5, int(y1) - 5, 7)]
    assert sum(1 for r_, g, b in reds if r_ > 180 and g < 120 and b < 120) > 5, "no red first-bad line in the PNG"


def published_chart_is_embedded(tmp_path) -> None:
    """GitHub's API takes no uploads: with ``report.pages_url`` the issue embeds the chart from the
    dashboard's site, and ``bisectbot dashboard --report`` publishes that very PNG at that address.
    Checked over HTTP (the site served by a real server at the configured address) and on the
    PNG's pixels (the report's first bad at its index), after the demo in ``tmp_path/out`` and a run
    of its recipe (its verdicts from the demo's ledger)."""
    import hashlib
    import os
    import re
    import socket
    import time
    import urllib.request

    import yaml

    work = tmp_path / "out" / "work"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pages = f"http://127.0.0.1:{port}/bisectbot"
    data = yaml.safe_load((work / "demo-engine-prefill.yaml").read_text())
    data["report"] = {"dir": str(tmp_path / "night"), "pages_url": pages}
    recipe = tmp_path / "night.yaml"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BISECTBOT_"))}

    def bot(*args: str) -> subprocess.CompletedProcess:
        p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(work / "state"), *args], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        return p

    bot("run", str(recipe))  # the demo's verdicts come from its ledger
    night = tmp_path / "night"
    png = (night / "threshold.png").read_bytes()
    url = f"{pages}/charts/demo-engine-prefill/{hashlib.sha256(png).hexdigest()[:16]}.png"
    issue = (night / "issue.md").read_text()
    assert f"![threshold over probed candidates]({url})" in issue, issue[:3000]
    assert "in the run's artifacts" not in issue
    assert "![threshold over probed candidates](threshold.png)" in (night / "report.md").read_text()
    # what is filed is what issue.md shows (the body is rendered again when filing)
    bot("report", "file", str(night / "result.json"), "--repo", "octo-org/vllm", "--dry-run")
    filed = next(night.glob("issue-*.md")).read_text()
    assert f"![threshold over probed candidates]({url})" in filed, filed[:3000]
    # a bad address is refused before anything runs
    bad = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(work / "state"), "run", str(recipe)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**env, "BISECTBOT_PAGES_URL": "javascript:alert(1)"})
    assert bad.returncode == 0  # the recipe's own address wins over the environment's
    data["report"].pop("pages_url")
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    bad = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(work / "state"), "run", str(recipe)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**env, "BISECTBOT_PAGES_URL": "javascript:alert(1)"})
    assert bad.returncode == 2 and "BISECTBOT_PAGES_URL" in bad.stderr, bad.stderr[-2000:]

    # the Pages job: the dashboard archives tonight's report and publishes its chart
    root = tmp_path / "serve"
    bot("dashboard", "--out", str(root / "bisectbot"), "--report", str(night))
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                               str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        src = re.search(r"!\[threshold over probed candidates\]\((http://[^)]+)\)", issue).group(1)
        for _ in range(100):
            try:
                with urllib.request.urlopen(src, timeout=5) as resp:
                    served = resp.read()
                    kind = resp.headers.get("Content-Type")
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError(f"{src} not served")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert served == png and kind == "image/png"
    result, _ = load_result(night / "result.json")
    published = tmp_path / "published.png"
    published.write_bytes(served)
    assert_png_is_the_results_chart(published, result)
