"""Rendering: sanitising untrusted text, the body limit, Markdown/JSON/issue/chart/summary files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_helpers import commit, make_result, nightly

from bisectbot.models import ProbeResult, RunResult, Status, Verdict
from bisectbot.report import (
    GITHUB_BODY_LIMIT,
    NightlyResult,
    code_block,
    fingerprint,
    load_result,
    marker,
    render_issue,
    render_json,
    render_markdown,
    sanitize,
    write_report,
)
from bisectbot.report.fingerprint import find_fingerprints, identity
from bisectbot.sanitize import github_length, redact, truncate_text

HOSTILE = "Sure! @someone look at #123 <script>alert('x')</script> \x00\x07\x1b[31mred\x1b[0m \u202eevil | ** _"


def _outside_code(md: str) -> str:
    """The Markdown with fenced code blocks removed (what GitHub renders as Markdown/HTML)."""
    out, fence = [], None
    for line in md.splitlines():
        m = re.match(r"^(`{3,})", line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip() == fence:
                fence = None
            continue
        out.append(line)
    assert fence is None, "unclosed code fence"
    return "\n".join(out)


def test_sanitize_neutralises_mentions_refs_html_and_control_bytes():
    s = sanitize(HOSTILE, 1000)
    assert "@someone" not in s and "@&#8203;someone" in s
    assert "#123" not in s and "#&#8203;123" in s
    assert "<script>" not in s and "&lt;script&gt;" in s
    assert not any(ord(ch) < 0x20 or ch == "\u202e" for ch in s)
    assert "\\\\x00" in s and "\\\\x1b" in s and "\\\\u202e" in s  # shown, not dropped
    assert "\\|" in s and "\\*\\*" in s and "\\_" in s
    assert "\n" not in sanitize("a\nb\r\nc", 100)


@pytest.mark.parametrize("limit", [1, 5, 20, 100, 1000])
def test_sanitize_caps_length_without_cutting_an_entity(limit):
    s = sanitize("@x <y> " * 500, limit)
    assert len(s) <= limit
    assert not re.search(r"&[#a-z0-9]*$", s.replace("… [", "").split("…")[0][-8:] if "…" in s else "")
    with pytest.raises(ValueError):
        sanitize("x", 0)


def test_code_block_cannot_be_closed_from_inside():
    text = "```\n<script>@x</script>\n````\x07"
    block = code_block(text, 200)
    fence = block.split("\n")[0]
    assert fence == "`````" and block.endswith("\n`````")
    assert "\\x07" in block
    assert len(code_block("y" * 10_000, 500)) <= 500


def test_truncate_keeps_the_chosen_end():
    t = "".join(f"line {i}\n" for i in range(1000))
    assert truncate_text(t, 300, "tail").rstrip().endswith("line 999")
    assert truncate_text(t, 300, "head").startswith("line 0")
    assert len(truncate_text(t, 300, "both")) <= 300


def test_redact_removes_token_shapes_and_registered_secrets(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz0123")
    text = "key ghp_0123456789abcdefghijABCDEFGHIJ012345 and hf_abcdefghijklmnopqrstuvwxyz0123 Authorization: token xyz"
    r = redact(text)
    assert "ghp_0123" not in r and "hf_abc" not in r and "xyz" not in r


def test_hostile_200kb_model_output_renders_safely_within_the_limit(tmp_path):
    reply = HOSTILE + ("word salad @everyone #42 <img src=x onerror=alert(1)> \x01\x02 " * 4000)
    assert len(reply) > 200_000
    log = tmp_path / "server.log"
    log.write_text(("INFO serving <b>@team</b> #7\n" * 8000) + "ERROR: the end of the log\n")
    result = make_result(reply=reply, n_probes=300, log_paths=[str(log)])
    for p in result.stages[-1].probes:
        p.reason = reply  # 200 KB reasons too
    result.notes.append(reply)
    body = render_markdown(result, for_issue=True)
    assert github_length(body) <= GITHUB_BODY_LIMIT
    assert body.startswith(marker(fingerprint(result)))
    rendered = _outside_code(body)
    assert "@everyone" not in rendered and "@someone" not in rendered and "@team" not in rendered
    assert "<script>" not in rendered and "<img" not in rendered and "<b>" not in rendered
    assert not re.search(r"(?<!&)#\d", rendered.replace("\\#&#8203;", ""))
    assert not any(ord(ch) < 0x20 and ch != "\n" for ch in body)
    # the important parts survive; the least important were cut first
    assert "### Culprit" in body and "### Reproduce" in body and "### Environment" in body
    assert "bisectbot run recipes/glm51.yaml" in body
    assert "probes omitted" in body or "characters cut" in body
    # a small limit still works and keeps the culprit
    small = render_markdown(result, limit=8000)
    assert github_length(small) <= 8000 and "050505050" in small


def test_excerpts_are_collapsed_and_logs_keep_their_tail(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("noise\n" * 50_000 + "Traceback: ZeroDivisionError in pa_mqa_logits\n")
    result = make_result(n_probes=8, log_paths=[str(log)])
    body = render_markdown(result)
    assert "<details><summary>" in body and "ZeroDivisionError in pa_mqa_logits" in body


def test_blame_refused_on_low_confidence_or_flags():
    low = make_result(n_probes=8, confidence=0.5)
    title, body = render_issue(low)
    assert "between" in title and "confidence 0.50 is below 0.66" in body
    flagged = make_result(n_probes=8, flags=["merge commit"])
    assert "plausibility flags: merge commit" in render_markdown(flagged)
    rng = make_result(n_probes=8, status=Status.RANGE)
    assert "Culprit range" in render_markdown(rng)


def test_fingerprint_identity_is_stable_and_distinguishes_culprits():
    a, b = make_result(culprit=5), make_result(culprit=5)
    assert fingerprint(a) == fingerprint(b) and re.fullmatch(r"[0-9a-f]{16}", fingerprint(a))
    assert fingerprint(make_result(culprit=6)) != fingerprint(a)
    assert fingerprint(make_result(recipe="other")) != fingerprint(a)
    assert identity(a).startswith("glm51-prefill|regression|vllm|culprit:")
    assert find_fingerprints("x " + marker(fingerprint(a))) == [fingerprint(a)]
    with pytest.raises(ValueError):
        marker("not-hex")


def test_nightly_streak_fields():
    verdicts = "GGBGBBSB"  # S = skip (untestable)
    probes = [nightly(i + 1, {"G": Verdict.GOOD, "B": Verdict.BAD, "S": Verdict.SKIP}[v], (20000, 21000))
              for i, v in enumerate(verdicts)]
    st = NightlyResult("r", probes).streak()
    assert st.failing and st.length == 3 and st.first_bad == "nightly_main_20260405"
    assert st.last_good == "nightly_main_20260404" and st.flips == 3 and st.newest == "nightly_main_20260408"
    assert not NightlyResult("r", probes[:2]).streak().failing


def test_write_report_files_chart_and_step_summary(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("previous step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    hist = NightlyResult("glm51-prefill", [nightly(i, Verdict.GOOD if i < 4 else Verdict.BAD,
                                                   (32000, None) if i < 4 else (20480, 20992)) for i in range(1, 8)]
                         + [nightly(8, Verdict.SKIP, None)], threshold_below=20000, max_size=32000)
    result = make_result(n_probes=8)
    paths = write_report(result, tmp_path / "out", hist)
    assert paths.markdown.read_text().count("![threshold over nightlies](threshold.png)") == 1
    assert [p.name for p in paths.charts] == ["threshold.png", "threshold.svg"]
    assert paths.charts[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in paths.charts[1].read_text()
    data = json.loads(paths.json.read_text())
    assert data["fingerprint"] == fingerprint(result) and data["nightly"]["streak"]["length"] == 4
    issue = paths.issue.read_text()
    assert issue.startswith("# [bisectbot] ") and marker(fingerprint(result)) in issue
    s = summary.read_text()
    assert s.startswith("previous step\n") and "### bisectbot: glm51-prefill" in s and "report.md" in s
    assert paths.step_summary == summary
    # round trip through the JSON file
    again, hist2 = load_result(paths.json)
    assert fingerprint(again) == fingerprint(result) and hist2 is not None and len(hist2.probes) == 8


def test_no_chart_without_thresholds(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    hist = NightlyResult("r", [nightly(1, Verdict.SKIP, None)])
    res = make_result(n_probes=2)
    for st in res.stages:  # no probe measured a threshold: neither the nightly nor the run's chart
        for p in st.probes:
            p.threshold = None
    paths = write_report(res, tmp_path, hist)
    assert paths.charts == [] and paths.step_summary is None


def test_minimal_result_renders():
    r = RunResult(recipe="demo", kind="fix", status=Status.NO_REGRESSION)
    md = render_markdown(r)
    assert "Fix bisection" in md and "no-regression" in md
    js = json.loads(render_json(r))
    assert js["result"]["recipe"] == "demo" and js["blame"]["ok"] is False


def test_load_result_bad_input_is_one_clear_line(tmp_path):
    from bisectbot.errors import BadInput

    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    with pytest.raises(BadInput, match=r"r.json:1:2: not JSON"):
        load_result(bad)
    bad.write_text(json.dumps({"recipe": "x"}))
    with pytest.raises(BadInput, match="not a RunResult"):
        load_result(bad)
    with pytest.raises(BadInput, match="cannot read"):
        load_result(tmp_path / "missing.json")


def test_probe_table_rows_and_links():
    result = make_result(n_probes=8)
    md = render_markdown(result)
    assert "| 20480–20992 |" in md and "OK up to 32000" in md
    assert f"[{commit(5).ref[:12]}](https://github.com/vllm-project/vllm/commit/{commit(5).ref})" in md
    assert "[dev5](https://github.com/dev5)" in md and "@dev5" not in md
    p = ProbeResult(candidate=commit(1), verdict=Verdict.BAD, threshold=(None, 4096))
    result.stages[-1].probes = [p]
    assert "bad at all sizes ≤ 4096" in render_markdown(result)


def test_report_files_written_where_asked(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    paths = write_report(make_result(), tmp_path / "a" / "b")
    assert all(p.exists() and p.is_absolute() for p in paths.all())


def test_cross_references_neutralised_for_github_kept_in_local_report():
    result = make_result(n_probes=8)
    result.stages[-1].message = "first-bad: vllm 1.9 (demo-workspace conflict: hunk #1 FAILED at 12); @someone"
    local = render_markdown(result)
    assert "**first-bad: vllm 1.9 (demo-workspace conflict: hunk #1 FAILED at 12); @&#8203;someone**" in local
    _, issue = render_issue(result)
    assert "hunk #1" not in issue and "hunk \\#&#8203;1" in issue and "@someone" not in issue


def test_issue_body_has_no_host_paths_local_report_keeps_them():
    from bisectbot.report import render_issue

    result = make_result(n_probes=3)
    p = result.stages[-1].probes[0]
    p.reason = "server exited (log: /var/lib/bisectbot/state/logs/glm/server-abc-1234.log)"
    _, body = render_issue(result)
    assert "/var/lib/bisectbot" not in body and "…/server-abc-1234.log" in body
    assert "https://github.com/" in body  # links are not paths
    assert "/var/lib/bisectbot/state/logs/glm/server-abc-1234.log" in render_markdown(result)


def test_flagged_culprit_report_never_says_no_single_culprit_above_the_table():
    # issue 12 input 7: a single culprit that will not be blamed is still a culprit
    flagged = make_result(n_probes=8, flags=["docs-tests-only"])
    md = render_markdown(flagged)
    assert "### Culprit\n" in md and "no single culprit" not in md.lower()
    assert "not blamed: plausibility flags: the change touches only docs/tests" in md
