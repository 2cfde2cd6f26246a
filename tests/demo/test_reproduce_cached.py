"""The report's Reproduce command run on the same state (issue 23, new-user pass findings 1 and 2).

``bisectbot demo`` then the ``bisectbot run`` its ``result.json`` prints, as a new user does: the
second run answers most probes from the ledger, and its report must say so (which probes, measured
when and by which session), must not claim the culprit and its predecessor were re-probed, and its
progress lines must tell requested prompt sizes from measured ones.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import zlib

import pytest


def when_text(iso: str) -> str:
    """The ledger's UTC ISO time (``2026-12-02T05:04:57+00:00``) as the report writes it."""
    assert iso.endswith("+00:00"), iso
    return f"{iso[:10]} {iso[11:19]} UTC"


def _bisectbot(args: list[str], cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("GITHUB_TOKEN", None)
    env.pop("BISECTBOT_STATE", None)
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=cwd)


def _stored(state, cache_key: str) -> tuple[dict, str]:
    """The ledger's own row for ``cache_key``: the stored result and when it was stored."""
    db = sqlite3.connect(state / "ledger.sqlite3")
    try:
        raw, created = db.execute("SELECT result, created FROM probes WHERE cache_key=?", (cache_key,)).fetchone()
    finally:
        db.close()
    return json.loads(zlib.decompress(raw)), created


def _table_rows(md: str) -> list[list[str]]:
    """The rows of the report's probe table (``| # | candidate | ...``), cells stripped."""
    part = md.split("### Probed candidates", 1)[1].split("\n### ", 1)[0]
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in part.splitlines()
            if re.match(r"\|\s*\d+\s*\|", ln)]


@pytest.mark.slow
def test_rerun_of_reproduce_marks_cached_probes_and_labels_requested_vs_measured(tmp_path, kit) -> None:
    out, state = tmp_path / "out", tmp_path / "state"
    first = kit.run_demo("--out", str(out), "--state", str(state), "--seed", "5", "--commits", "12")
    assert first.returncode == 0, first.stdout + first.stderr
    res1 = json.loads((out / "result.json").read_text())
    md1 = (out / "report.md").read_text()
    # a run that measured everything itself: no cache column; it re-probed the culprit and its predecessor
    # (issue 40, flake_unit start: the culprit's second start tests that the bug does not hide from a start)
    assert "ledger cache" not in md1 and "the culprit and its predecessor were re-probed" in md1, md1[-3000:]

    # the Reproduce command, as result.json prints it (it names --state and --out)
    cmd = shlex.split(res1["reproduce"])
    assert cmd[0] == "bisectbot" and "--state" in cmd and "--out" in cmd, cmd
    again = _bisectbot(cmd[1:], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    rdir = out / "reproduce"
    res2 = json.loads((rdir / "result.json").read_text())
    md2, issue2 = (rdir / "report.md").read_text(), (rdir / "issue.md").read_text()
    probes = res2["stages"][-1]["probes"]
    cached = [p for p in probes if p["extra"].get("cached")]
    fresh = [p for p in probes if not p["extra"].get("cached")]
    assert cached and fresh, [p["extra"] for p in probes]  # the bad end's unfocused first probe ran now

    # result.json: each cache hit says when its probe was stored and which session measured it -- the
    # ledger's own row, and the first run's session (not this one's)
    for p in cached:
        stored, created = _stored(state, p["cache_key"])
        assert p["extra"]["cached"] == {"measured_at": created, "session": res1["session_id"]}, p["extra"]
        assert "cached" not in stored["extra"]  # the ledger keeps the measurement, not the mark
    assert res1["session_id"] != res2["session_id"]

    # report.md: a "measured" column, "this run" for the fresh probe, the ledger's time and session otherwise
    rows = _table_rows(md2)
    assert len(rows) == len(probes)
    for row, p in zip(rows, probes):
        if p["extra"].get("cached"):
            when = when_text(p["extra"]["cached"]["measured_at"])
            assert f"ledger cache: measured {when} in session {res1['session_id']}" in row, row
        else:
            assert "this run" in row, row

    # the verification: a re-probe is a measurement of this run (issue 35: the first run's re-probes
    # answered another night's verification from the cache, so a host change between the nights was
    # never measured); the culprit's and its predecessor's last probes ran now, their first came cached
    fb, lg = res2["stages"][-1]["first_bad"]["ref"], res2["stages"][-1]["last_good"]["ref"]
    ends = [next(p for p in reversed(probes) if p["candidate"]["ref"] == ref) for ref in (fb, lg)]
    assert not any(p["extra"].get("cached") for p in ends), [p["extra"] for p in ends]
    note = next(n for n in res2["notes"] if n.startswith("exact search"))
    assert "the culprit and its predecessor were re-probed" in note and "verified from cached verdicts of" not in note, note

    # issue.md's evidence table says which reply was measured now and which came from the cache
    ev = issue2.split("### What went wrong", 1)[1].split("\n### ", 1)[0]
    probe_row = next(ln for ln in ev.splitlines() if ln.startswith("| probe |"))
    assert "ledger cache: measured" in probe_row and "this run" in probe_row, probe_row
    # the triage toggle's verdict came from the cache too, and says so
    assert "ledger cache: measured" in res2["triage"]["no-threshold"], res2["triage"]

    # progress lines: every request names its requested and its measured size; the scope line says
    # its failing size is measured and its focus sizes are requested ones taken from it
    err = again.stderr
    assert not re.search(r"\brequest \d+ tokens:", err), err
    reqs = re.findall(r"requested (\d+) tokens, measured (\d+) \(usage\.prompt_tokens\): (OK|GARBAGE)", err)
    assert reqs and any(a != b for a, b, _ in reqs), err  # the demo engine's counts differ from the asks
    scope = next(ln for ln in err.splitlines() if ln.startswith("scope:"))
    failing = fresh[0]["threshold"][1]
    # issue 35: compared on the bad end's failing prompts themselves (the same text on every candidate)
    assert f"on which the bad end fails from {failing} tokens (measured on the bad end, usage.prompt_tokens)" in scope
    assert "(filler seed 0, " in scope and "the same text on every candidate" in scope, scope
    verdict_line = next(ln for ln in err.splitlines() if ln.startswith("[1] "))
    assert "tokens measured (usage.prompt_tokens)" in verdict_line, verdict_line
    assert re.search(r"\[cache\] measured \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC in session " + res1["session_id"], err), err
