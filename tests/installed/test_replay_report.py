"""Issue 25, input 6: ``bisect replay`` says what it did. The replayed report names the log and the
session it came from and never claims that the culprit and its predecessor were re-probed when
nothing was probed; an empty log is refused (it silently resumed the old session)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def bb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # the sandbox's writable paths stay (tests/conftest: the candidate's CHECK_LOG lies in tmp_path,
    # which the candidate's private /tmp would otherwise hide): every other setting of the bot goes
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BISECTBOT_", "GITHUB_", "GH_")) or k == "BISECTBOT_SANDBOX_WRITABLE"}
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_replayed_report_names_its_session_and_claims_no_probe(tmp_path) -> None:
    r = bb("demo", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    state, recipe = tmp_path / "out" / "work" / "state", tmp_path / "out" / "work" / "demo-engine-prefill.yaml"
    first = json.loads((tmp_path / "out" / "result.json").read_text())
    log = bb("--state", str(state), "bisect", "log", cwd=tmp_path)
    assert log.returncode == 0, log.stderr
    (tmp_path / "session.log").write_text(log.stdout)
    session = log.stdout.split("# bisectbot session ", 1)[1].split(":", 1)[0]

    r = bb("--state", str(state), "bisect", "replay", str(recipe), "session.log", "--out", "replayed", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    report = (tmp_path / "replayed" / "report.md").read_text()
    assert f"replayed from session.log of session {session}: its verdicts were taken as given; nothing was probed" \
        in report, report[-3000:]
    assert "were re-probed" not in report
    # "verified" defined once (issue 35): a verdict the log gave is not one this run measured
    assert "re-measured" not in report and "verified in this run" not in report, report[-3000:]
    assert "taken from the replay log, not measured" in report, report[-3000:]
    assert ", verified" not in r.stdout and "ends from the replay log, not re-measured" in r.stdout, r.stdout[-2000:]
    replayed = json.loads((tmp_path / "replayed" / "result.json").read_text())
    assert replayed["stages"][-1]["first_bad"]["ref"] == first["stages"][-1]["first_bad"]["ref"]

    # an empty log: refused, nothing resumed
    (tmp_path / "empty.log").write_text("# nothing here\n\n")
    r = bb("--state", str(state), "bisect", "replay", str(recipe), "empty.log", "--out", "again", cwd=tmp_path)
    assert r.returncode == 2 and "empty.log: no verdict lines" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "again").exists()


CHECK = """\
import os, sys
with open(os.environ["CHECK_LOG"], "a") as fh:
    fh.write(open("n.txt").read().strip() + "\\n")
sys.exit(1 if os.path.exists("BUG") else 0)
"""


def _history(repo: Path, n: int, culprit: int) -> list[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()

    repo.mkdir()
    git("init", "-q", "-b", "main")
    (repo / "check.py").write_text(CHECK)
    shas = []
    for i in range(n):
        (repo / "n.txt").write_text(f"{i}\n")
        if i == culprit:
            (repo / "BUG").write_text("planted\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"change {i}")
        shas.append(git("rev-parse", "HEAD"))
    return shas


def test_a_line_dropped_from_the_log_is_probed_again_not_taken_from_the_ledger(tmp_path, monkeypatch) -> None:
    import yaml

    n, culprit = 24, 15
    shas = _history(tmp_path / "repo", n, culprit)
    runs = tmp_path / "runs.log"  # every run of the reproducer, by commit index
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "replay-drop", "source": {"kind": "git", "repo": str(tmp_path / "repo")},
        "reproducer": {"kind": "command", "command": [sys.executable, "check.py"]}, "regress": "command",
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")},
        "env_passthrough": ["CHECK_LOG"]}))
    monkeypatch.setenv("CHECK_LOG", str(runs))
    state = str(tmp_path / "state")
    r = bb("--state", state, "run", str(recipe), "--no-prefetch", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    log = bb("--state", state, "bisect", "log", cwd=tmp_path).stdout
    lines = log.splitlines()
    verdicts = [i for i, ln in enumerate(lines) if ln.split(" ", 1)[0] in ("good", "bad")]
    # drop a mid-search probe (not an end, not the culprit or its predecessor)
    ends = {shas[0], shas[-1], shas[culprit], shas[culprit - 1]}
    drop = next(i for i in verdicts if lines[i].split()[1] not in ends)
    dropped = lines[drop].split()[1]
    (tmp_path / "dropped.log").write_text("\n".join(ln for i, ln in enumerate(lines) if i != drop) + "\n")
    runs.write_text("")

    r = bb("--state", state, "bisect", "replay", str(recipe), "dropped.log", "--out", "replayed", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    # the dropped candidate ran again (the ledger holds its verdict from the first run), nothing else did
    assert runs.read_text().split() == [str(shas.index(dropped))], runs.read_text()
    res = json.loads((tmp_path / "replayed" / "result.json").read_text())
    final = res["stages"][-1]
    assert final["first_bad"]["ref"] == shas[culprit]
    fresh = [p for p in final["probes"] if p["candidate"]["ref"] == dropped]
    assert fresh and all(p["reason"] != "from the replay log" for p in fresh)
    report = (tmp_path / "replayed" / "report.md").read_text()
    session = log.split("# bisectbot session ", 1)[1].split(":", 1)[0]
    assert (f"replayed from dropped.log of session {session}: its verdicts were taken as given; "
            "1 probe run for candidates the log lacks") in report, report[-3000:]
    # the culprit and its predecessor came from the log: the report does not say they were re-probed
    assert "were re-probed" not in report
    assert "verdicts come from the log (not re-probed)" in report

    # the same replay again (a re-run, or after an interruption): its own probe is not run a third time
    runs.write_text("")
    r = bb("--state", state, "bisect", "replay", str(recipe), "dropped.log", "--out", "again", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert runs.read_text().split() == [], runs.read_text()


def test_an_edited_log_is_a_session_of_its_own_and_its_log_says_what_it_did(tmp_path, monkeypatch) -> None:
    """New-user pass (issue 41): a second replay of an edited log was taken for the first replay's
    session ("finished before: its probes come from the ledger"), and ``bisect log`` of that session
    then disagreed with the report. Kind: *a session identity that leaves out an input that changes
    what the session decides*; the replay log's verdict lines are now part of it (an interrupted
    replay of the same log still resumes its session)."""
    import yaml

    n, culprit = 24, 15
    shas = _history(tmp_path / "repo", n, culprit)
    runs = tmp_path / "runs.log"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "replay-edit", "source": {"kind": "git", "repo": str(tmp_path / "repo")},
        "reproducer": {"kind": "command", "command": [sys.executable, "check.py"]}, "regress": "command",
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")},
        "env_passthrough": ["CHECK_LOG"]}))
    monkeypatch.setenv("CHECK_LOG", str(runs))
    state = str(tmp_path / "state")
    assert bb("--state", state, "run", str(recipe), "--no-prefetch", cwd=tmp_path).returncode == 0
    log = bb("--state", state, "bisect", "log", cwd=tmp_path).stdout
    (tmp_path / "whole.log").write_text(log)
    r = bb("--state", state, "bisect", "replay", str(recipe), "whole.log", "--out", "replay1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    first = json.loads((tmp_path / "replay1" / "result.json").read_text())["session_id"]

    lines = log.splitlines()
    ends = {shas[0], shas[-1], shas[culprit], shas[culprit - 1]}
    mid = [i for i, ln in enumerate(lines) if ln.split(" ", 1)[0] in ("good", "bad") and ln.split()[1] not in ends]
    dropped = lines[mid[0]].split()[1]
    (tmp_path / "edited.log").write_text("\n".join(ln for i, ln in enumerate(lines) if i != mid[0]) + "\n")
    runs.write_text("")
    r = bb("--state", state, "bisect", "replay", str(recipe), "edited.log", "--out", "replay2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "finished before" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]
    second = json.loads((tmp_path / "replay2" / "result.json").read_text())["session_id"]
    assert second and second != first
    assert runs.read_text().split() == [str(shas.index(dropped))], runs.read_text()
    # the session's own log holds the probe this replay ran, as the report does
    slog = bb("--state", state, "bisect", "log", second, cwd=tmp_path).stdout
    assert any(ln.startswith(("good " + dropped, "bad " + dropped)) and "from the replay log" not in ln
               for ln in slog.splitlines()), slog
    # the same edited log again: the same session, answered from it, nothing probed
    runs.write_text("")
    r = bb("--state", state, "bisect", "replay", str(recipe), "edited.log", "--out", "replay3", cwd=tmp_path)
    assert r.returncode == 0 and runs.read_text() == "", (r.stdout + r.stderr)[-2000:]
    assert json.loads((tmp_path / "replay3" / "result.json").read_text())["session_id"] == second
