"""Reports you can act on (issue 14): a Reproduce command that runs as printed and never overwrites
the report it came from, no Reproduce line pointing at deleted files, fix bisections worded as
last broken / first fixed, ``reproducer.kind: command`` implying ``regress: command``."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report.report_helpers import make_result, nightly

ROOT = Path(__file__).resolve().parents[2]


def bb(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "BISECTBOT_GITHUB_TOKEN",
                                                            "BISECTBOT_STATE")}
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _reproduce_line(report: Path) -> str | None:
    """The bisectbot command of the Reproduce section (issue 25: after the steps without the bot)."""
    m = re.search(r"### Reproduce\n\n(?:.*?\*\*With bisectbot\*\*[^\n]*\n\n)?```sh\n(.*?)\n```", report.read_text(), re.S)
    return m.group(1) if m else None


@pytest.mark.slow
def test_reproduce_command_runs_as_printed_and_keeps_the_report(tmp_path):
    cwd = tmp_path / "here"
    cwd.mkdir()
    r = bb("demo", "--out", "out", cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    report = cwd / "out" / "report.md"
    line = _reproduce_line(report)
    assert line, report.read_text()
    argv = shlex.split(line)
    assert argv[0] == "bisectbot" and "--state" in argv and "--out" in argv
    recipe = Path(argv[argv.index("run") + 1])
    assert recipe.is_absolute() and recipe.is_file()
    state = Path(argv[argv.index("--state") + 1])
    assert state.is_absolute() and state.is_dir()
    new_out = Path(argv[argv.index("--out") + 1])
    assert new_out.is_absolute() and new_out != report.parent and not new_out.exists()
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in report.parent.glob("*.*")}
    # run it as printed, from another directory
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r2 = bb(*argv[1:], cwd=elsewhere)
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert (new_out / "report.md").is_file()
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in report.parent.glob("*.*")}
    assert after == before  # the report it came from is untouched


@pytest.mark.slow
def test_no_keep_leaves_no_dangling_reproduce(tmp_path):
    r = bb("demo", "--no-keep", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "out"
    assert not (out / "work").exists()
    for name in ("report.md", "issue.md"):
        text = (out / name).read_text()
        assert "### Reproduce" not in text, name
        assert "bisectbot demo --keep" in text  # says how to get one
        # no path in the report points at a file that is gone
        for p in re.findall(r"(/[\w./-]+\.(?:yaml|sqlite3))", text):
            assert Path(p).exists(), (name, p)
    # the demo's sizes bracket its engine's threshold: bad verdicts carry one, and the chart is drawn
    report = (out / "report.md").read_text()
    bad_rows = [ln for ln in report.splitlines() if re.match(r"\| \d+ \|.*\| bad \|", ln)]
    assert bad_rows and all(re.search(r"\| bad \| \d+–\d+ \|", ln) for ln in bad_rows), bad_rows
    assert (out / "threshold.png").is_file() and "![threshold over probed candidates](threshold.png)" in report


def test_single_run_gets_a_threshold_chart(tmp_path):
    from bisectbot.report import write_report

    res = make_result()
    paths = write_report(res, tmp_path, None)
    assert [p.name for p in paths.charts] == ["threshold.png", "threshold.svg"]
    assert "threshold over probed candidates" in (tmp_path / "threshold.svg").read_text()
    assert "![threshold over probed candidates](threshold.png)" in (tmp_path / "report.md").read_text()


def test_fix_bisection_speaks_of_last_broken_and_first_fixed():
    from bisectbot.models import Status, Verdict
    from bisectbot.report.comment import render_comment
    from bisectbot.report.files import render_summary
    from bisectbot.report.history import NightlyResult
    from bisectbot.report.markdown import render_markdown

    res = make_result(status=Status.CULPRIT)
    res.kind, res.regress = "fix", "success"
    hist = NightlyResult("glm51-prefill", [nightly(1, Verdict.GOOD, None), nightly(2, Verdict.BAD, None)], kind="fix")
    texts = [render_markdown(res, hist), render_markdown(res, hist, for_issue=True), render_summary(res, hist, []),
             render_comment("redetected", res, None, hist, key="k")]
    for t in texts:
        low = t.lower()
        assert "first good" not in low and "last good" not in low and "first bad" not in low, t
    assert "last broken" in texts[0] and "first fixed" in texts[0]
    assert "First fixed:" in texts[0]
    regression = render_markdown(make_result(), hist)
    assert "last good" in regression and "first bad" in regression


def test_command_reproducer_implies_command_regress(tmp_path):
    import yaml

    from bisectbot.recipe import load_recipe

    base = {"name": "k", "source": {"kind": "git", "repo": "."},
            "reproducer": {"kind": "command", "command": ["true"]}}
    p = tmp_path / "a.yaml"
    p.write_text(yaml.safe_dump(base))
    assert load_recipe(p).regress.mode == "command"
    p.write_text(yaml.safe_dump({**base, "regress": "garbage"}))
    assert load_recipe(p).regress.mode == "garbage"  # set explicitly: kept
    p.write_text(yaml.safe_dump({k: v for k, v in base.items() if k != "reproducer"}))
    assert load_recipe(p).regress.mode == "garbage"  # the prefill default


def _git_history(path: Path, values: list[int]) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    for i, v in enumerate(values):
        (path / "value").write_text(f"{v}\n")
        subprocess.run(["git", "-C", str(path), "add", "value"], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", f"change {i}"], check=True, env=env)
        if i == 0:
            subprocess.run(["git", "-C", str(path), "tag", "v0"], check=True, env=env)


def test_command_reproducer_report_speaks_of_runs_and_exit_codes(tmp_path):
    import yaml

    _git_history(tmp_path / "repo", [0, 1, 2, 3, 4, 5])
    script = ("import sys\nv = int(open('value').read())\nprint('checked value', v)\n"
              "print('value too large' if v >= 3 else 'fine', file=sys.stderr)\nsys.exit(1 if v >= 3 else 0)\n")
    recipe = {"name": "cmd", "source": {"kind": "git", "repo": str(tmp_path / "repo"), "runtime_paths": ["value"]},
              "reproducer": {"kind": "command", "command": [sys.executable, "-c", script]},
              "bisect": {"good": "v0", "bad": "main"}, "report": {"dir": str(tmp_path / "out")}}
    rp = tmp_path / "cmd.yaml"
    rp.write_text(yaml.safe_dump(recipe))
    r = bb("--state", str(tmp_path / "state"), "run", str(rp), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "regress `command`" in text  # implied by reproducer.kind: command
    assert "| exit code |" in text and "runs of the command" in text
    assert "stdout (tail)" in text and "checked value 3" in text
    assert "stderr (tail)" in text and "value too large" in text
    for word in ("tokens", "GARBAGE", "chat request", "TP 1"):
        assert word not in text, word


def test_range_table_gives_one_confidence_for_the_range():
    from bisectbot.models import Status
    from bisectbot.report.markdown import render_markdown

    md = render_markdown(make_result(status=Status.RANGE, confidence=0.9))
    rows = [ln for ln in md.splitlines() if ln.startswith("| `")]
    assert rows and not any(ln.rstrip().endswith("| 0.90 |") for ln in rows), rows
    assert "confidence 0.90 for the range as a whole" in md


def test_progress_reasons_are_never_cut_mid_value():
    from bisectbot.reproduce.search import join_whole

    reasons = ["unique-word ratio 0.03 (min 0.15)", "needles: retrieved 0/2 needles: SHRIKE-8056 missing",
               "known-answer: expected answer '4' missing", "repeat-run: flood of '.' (100% of 200 characters)"]
    out = join_whole(reasons, 100)
    kept = out.split(" (+")[0].split("; ")
    assert all(k in reasons for k in kept) and out.endswith(f"(+{len(reasons) - len(kept)} more)")
    assert join_whole(reasons[:1], 10) == reasons[0]  # one long reason stays whole


def test_ctrl_c_says_how_to_resume(tmp_path):
    import signal
    import time

    import yaml

    _git_history(tmp_path / "repo", [0, 1, 2, 3])
    started = tmp_path / "started"
    script = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)\n"
    recipe = {"name": "slow", "source": {"kind": "git", "repo": str(tmp_path / "repo")},
              "reproducer": {"kind": "command", "command": [sys.executable, "-c", script]},
              "bisect": {"good": "v0", "bad": "main"}, "report": {"dir": str(tmp_path / "out")}}
    rp = tmp_path / "slow.yaml"
    rp.write_text(yaml.safe_dump(recipe))
    env = {k: v for k, v in os.environ.items() if k != "BISECTBOT_STATE"}
    proc = subprocess.Popen([sys.executable, "-m", "bisectbot", "--state", "state", "run", str(rp)], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started.exists()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    line = next((ln for ln in err.splitlines() if "resume with:" in ln), "")
    argv = shlex.split(line.split("resume with:", 1)[1])
    assert argv[:2] == ["bisectbot", "--state"] and Path(argv[2]) == tmp_path / "state"  # absolute
    assert Path(argv[argv.index("run") + 1]) == rp
    # issue 25: the ends pinned as full SHAs (the recipe's "v0" and "main" move; HEAD~80 would too)
    def rev(ref: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path / "repo"), "rev-parse", ref], capture_output=True,
                              text=True, check=True).stdout.strip()

    assert argv[argv.index("--good") + 1] == rev("v0") and argv[argv.index("--bad") + 1] == rev("main"), argv


@pytest.mark.slow
def test_no_verify_skips_the_re_probes_and_says_so(tmp_path):
    import yaml

    _git_history(tmp_path / "repo", [0, 1, 2, 3, 4, 5, 6, 7])
    script = "import sys\nsys.exit(1 if int(open('value').read()) >= 5 else 0)\n"
    recipe = {"name": "nv", "source": {"kind": "git", "repo": str(tmp_path / "repo"), "runtime_paths": ["value"]},
              "reproducer": {"kind": "command", "command": [sys.executable, "-c", script]},
              "bisect": {"good": "v0", "bad": "main"}}
    rp = tmp_path / "nv.yaml"
    rp.write_text(yaml.safe_dump(recipe))
    runs = {}
    for flag in ("--verify", "--no-verify"):
        r = bb("--state", str(tmp_path / flag), "--json", "run", str(rp), flag, "--out", str(tmp_path / flag / "o"),
               cwd=tmp_path)
        assert r.returncode in (0, 3), r.stderr[-2000:]
        import json

        runs[flag] = json.loads(r.stdout)
    n = {f: sum(len(s["probes"]) for s in d["stages"]) for f, d in runs.items()}
    assert n["--no-verify"] < n["--verify"], n
    notes = " ".join(runs["--no-verify"]["notes"])
    assert "not verified" in notes and "culprit verified" not in notes


def test_comment_on_a_command_reproducer_speaks_of_exit_codes():
    from bisectbot.models import ProbeResult, Verdict
    from bisectbot.report.comment import render_comment

    res = make_result()
    res.regress = "command"
    newest = ProbeResult(candidate=res.stages[0].candidates[-1], verdict=Verdict.BAD, reason="command exit 1",
                         extra={"returncode": 1, "stderr_tail": "boom"})
    text = render_comment("redetected", res, newest, None, key="k")
    assert "exit code 1" in text and "threshold" not in text.split("\n", 3)[2]
