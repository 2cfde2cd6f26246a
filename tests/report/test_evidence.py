"""Issue 25, input 1: the report shows the garbage itself. Beside the culprit, the first bad's
failing reply stands next to the last good's reply to the same prompt (the same requested size),
with the reasons; for ``regress: diverges`` both greedy continuations and the reference's, with the
figures. Before, "Logs and model output" showed one excerpt per candidate, its smallest size and
outcome OK (``_excerpts`` deduplicated on a row key the rows do not have).

Five report kinds, each a real ``bisectbot`` process over real parts: ``demo``, ``demo --subtle``,
an own prefill recipe over an engine history, a flaky engine (the bug shows in 60 % of replies,
``reproducer.repeats``), and a nightly run in containers (real dockerd, the local registry,
nightlies made by tests/containers/nightly_factory.py). What the report shows is checked against
what ``result.json`` recorded, read independently here, and, for each kind, in the HTML GitHub's
Markdown rules make of ``report.md`` and ``issue.md`` (the issue also as a screenshot).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from bisectbot.cli.demo_cmd import concrete_recipe
from bisectbot.demo.history import make_history
from bisectbot.models import Candidate, CandidateKind, ProbeResult, RunResult, StageResult, Status, Verdict
from bisectbot.report.markdown import render_markdown
from bisectbot.sanitize import sanitize
from tests.containers.conftest import REGISTRY
from tests.report.report_helpers import make_result


def bb(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "BISECTBOT_GITHUB_TOKEN",
                                                          "BISECTBOT_STATE")}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=timeout)


def section(text: str, title: str) -> str:
    m = re.search(rf"^### {re.escape(title)}.*?\n(.*?)(?=^### |\Z)", text, re.S | re.M)
    assert m, f"no section {title!r} in:\n{text[:4000]}"
    return m.group(1)


def table(block: str, first_col: str) -> dict[str, list[str]]:
    """The rows of the first Markdown table in ``block`` whose header's first cell is ``first_col``
    (row label -> cells; ``\\|`` inside a cell is kept)."""
    rows: dict[str, list[str]] = {}
    lines = block.splitlines()
    start = next(i for i, ln in enumerate(lines) if re.match(rf"\|\s*{re.escape(first_col)}\s*\|", ln))
    rows["_head"] = _cells(lines[start])[1:]
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        cells = _cells(ln)
        rows[cells[0]] = cells[1:]
    return rows


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def expected_pair(result: dict[str, Any]) -> tuple[dict, dict, dict, dict]:
    """From result.json alone: (first bad, last good, its failing row, the last good's row at the same
    requested size), the smallest requested size where the first bad is GARBAGE and the last good OK."""
    final = result["stages"][-1]
    fb, lg = final["first_bad"], final["last_good"]
    rows = {c["ref"]: [r for p in final["probes"] + [p for s in result["stages"][:-1] for p in s["probes"]]
                       if p["candidate"]["ref"] == c["ref"] for r in p["table"]] for c in (fb, lg)}
    ok = {r["requested"]: r for r in rows[lg["ref"]] if r["outcome"] == "OK"}
    # the most telling failing reply: one with text before an empty one, then the smallest size (issue 41 item 8)
    bad = sorted((r for r in rows[fb["ref"]] if r["outcome"] == "GARBAGE" and r["requested"] in ok),
                 key=lambda r: (not str(r.get("excerpt") or "").strip(), r["requested"]))
    assert bad, "the two ends never answered the same prompt differently"
    return fb, lg, bad[0], ok[bad[0]["requested"]]


def check_evidence(out: Path, diverges: bool = False) -> dict[str, list[str]]:
    result = json.loads((out / "result.json").read_text())
    fb, lg, bad_row, ok_row = expected_pair(result)
    for name in ("report.md", "issue.md"):
        text = (out / name).read_text()
        refs = name == "issue.md"  # #123 is neutralised only in what GitHub renders

        def san(v: str, limit: int) -> str:
            return sanitize(v, limit, refs=refs)  # noqa: B023

        block = section(text, "What went wrong")
        t = table(block, "")
        head = t["_head"]
        for c, cell, end in ((lg, head[0], "Last good"), (fb, head[1], "First bad")):
            # a commit by its SHA, a nightly by its tag
            assert cell.startswith(end) and (c["ref"][:12] in cell or san(c.get("label", ""), 60) in cell), (name, head)
        req = bad_row["requested"]
        assert t["prompt tokens (requested / measured)"] == [f"{req} / {ok_row['prompt_tokens']}",
                                                              f"{req} / {bad_row['prompt_tokens']}"], (name, t)
        assert t["outcome"] == ["OK", "**GARBAGE**"], (name, t)
        # an empty reply (a garbage kind) reads "(empty reply)" in the table
        assert t["reply"] == [san(ok_row["excerpt"], 400) or "(empty reply)",
                              san(bad_row["excerpt"], 400) or "(empty reply)"], (name, t)
        assert t["reasons"][0] == "—" and t["reasons"][1] == san("; ".join(bad_row["reasons"]), 300), (name, t)
        assert f"same prompt: the reproducer's prompt of {req} tokens" in block
        # the garbage and the healthy reply are not the same text (a real difference is shown)
        assert bad_row["excerpt"] != ok_row["excerpt"]
        if diverges:
            d = table(block[block.index("Greedy continuations"):], "")
            ref = bad_row["evidence"]["reference"]
            assert d["_head"] == ["reference", "last good", "first bad"]
            assert d["continuation"] == [san(ref["reference_continuation"], 400),
                                         san(ok_row["evidence"]["reference"]["continuation"], 400),
                                         san(ref["continuation"], 400)], d
            assert d["continuation"][1] != d["continuation"][2]
            assert d["first diverging word"][2] == f"{ref['first_divergence']} of {ref['tokens']}", d
            assert d["normalised edit distance"][2] == f"{ref['edit_distance']:.3f}", d
            assert d["prompt logprobs \\|Δ\\| mean (nats)"][2] == f"{ref['logprob_mean']:.4f}", d
            assert "tolerance: edit distance" in block
        if any(str(r.get("excerpt") or "").strip() for p in result["stages"][-1]["probes"]
               if p["candidate"]["ref"] == fb["ref"] for r in p["table"] if r["outcome"] == "GARBAGE"):
            assert t["reply"][1] != "(empty reply)", (name, t)
        # <details><summary> is an HTML block: GitHub shows a Markdown escape there as typed (issue 41 item 8)
        for line in text.splitlines():
            if line.startswith("<details><summary>"):
                inner = line[len("<details><summary>"):line.index("</summary>")]
                assert not re.search(r"\\[\\`*_\[\]|~#>!+=-]", inner), (name, line)
        # the per-candidate excerpts show the first bad's garbage, not only its smallest OK size
        logs = section(text, "Logs and model output")
        assert "(GARBAGE)</summary>" in logs.split("</details>")[0], logs[:1500]
        as_github_renders(out, name)
    return t


def as_github_renders(out: Path, name: str) -> None:
    """``out/name`` rendered to HTML as GitHub renders Markdown (tests/report/test_html.py: CommonMark +
    GFM tables): the evidence table is a real table with one cell per end, the outcomes are OK and
    GARBAGE, nothing active comes through; the issue is looked at as an image in the tests'
    artefacts (``$BISECTBOT_TEST_ARTIFACTS/issue25-html/<kind>/``), checked not blank."""
    from tests.report.test_html import Doc, screenshot, to_html

    html = to_html((out / name).read_text())
    doc = Doc()
    doc.feed(html)
    evidence = next(t for t in doc.tables if t and t[0] and t[0][0] == "" and t[0][1].startswith("Last good"))
    assert all(len(row) == 3 for row in evidence), (name, evidence)
    rows = {row[0]: row[1:] for row in evidence}
    assert rows["outcome"] == ["OK", "GARBAGE"] and rows["reply"][0] != rows["reply"][1], (name, rows)
    assert not any(tag == "script" or k.startswith("on") or v.strip().lower().startswith("javascript:")
                   for tag, k, v in doc.attrs), name
    if name != "issue.md":
        return
    kind = json.loads((out / "result.json").read_text())["recipe"]
    art = Path(os.environ.get("BISECTBOT_TEST_ARTIFACTS") or out) / "issue25-html" / kind
    art.mkdir(parents=True, exist_ok=True)
    png = screenshot(html, art / "issue")
    if png is not None:
        from PIL import Image

        assert Image.open(png).convert("L").getextrema()[0] < 100, f"blank screenshot {png}"


@pytest.mark.slow
def test_demo_report_shows_the_culprits_garbage_beside_the_last_goods_reply(tmp_path) -> None:
    r = bb("demo", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    check_evidence(tmp_path / "out")


@pytest.mark.slow
def test_subtle_demo_shows_both_continuations_and_the_figures(tmp_path) -> None:
    r = bb("demo", "--subtle", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    check_evidence(tmp_path / "out", diverges=True)


def _own_recipe(tmp: Path, hist_path: Path, name: str, **changes: Any) -> Path:
    data = concrete_recipe(hist_path, tmp / "out")
    data["name"] = name
    data["triage"] = []
    data["report"].pop("github", None)
    for k, v in changes.items():
        data[k].update(v) if isinstance(v, dict) else data.__setitem__(k, v)
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return p


@pytest.mark.slow
def test_own_prefill_recipe_report_shows_the_garbage(tmp_path) -> None:
    """A user's own recipe over an engine history: other sizes, another question, two needles."""
    hist = make_history(tmp_path / "h", commits=14, seed=4)
    recipe = _own_recipe(tmp_path, hist.path, "own-prefill",
                         reproducer={"sizes": [400, 3000, 12000], "min_size": 400, "max_size": 12000,
                                     "needles": 2, "question": "What is 3+4? Answer in one sentence.",
                                     "expected_answer": "7"})
    r = bb("--state", str(tmp_path / "state"), "run", str(recipe), "--runner", "local", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((tmp_path / "out" / "result.json").read_text())["stages"][-1]["first_bad"]["ref"] == hist.culprit
    check_evidence(tmp_path / "out")


@pytest.mark.slow
def test_flaky_engine_report_shows_the_garbage(tmp_path) -> None:
    """The bug shows in 60 % of replies above the threshold (``flaky: 0.4``); each probe repeats a
    size 3 times (bad if any reply is garbage) and the search is noisy (``bisect.flake``)."""
    hist = make_history(tmp_path / "h", commits=12, seed=6, engine_settings={"flaky": 0.4})
    recipe = _own_recipe(tmp_path, hist.path, "flaky-engine", reproducer={"repeats": 3},
                         bisect={"flake": {"false_positive": 0.0, "false_negative": 0.05}})
    r = bb("--state", str(tmp_path / "state"), "run", str(recipe), "--runner", "local", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    check_evidence(tmp_path / "out")


@pytest.mark.slow
@pytest.mark.docker
def test_nightly_run_in_containers_report_shows_the_garbage(tmp_path, require_docker) -> None:
    """Three nightlies in the local registry (tests/containers/nightly_factory.py): the third answers
    garbage above 3000 prompt tokens; ``bisectbot run`` bisects the nightlies in containers."""
    from tests.containers.baseimage import ensure_base_image
    from tests.containers.nightly_factory import SERVER_COMMAND, NightlySpec, push_nightlies

    repo = f"bisectbot-test/evidence-{uuid.uuid4().hex[:8]}"
    specs = [NightlySpec(f"nightly_main_2026040{i}", vllm_version=f"0.19.1rc1.dev{i}+g{i:07d}ab",
                         garbage_above=1_000_000 if i < 3 else 3000) for i in (1, 2, 3)]
    pushed = push_nightlies(specs, repo, base=ensure_base_image())
    try:
        recipe = tmp_path / "nightly.yaml"
        recipe.write_text(yaml.safe_dump({
            "name": "evidence-nightly", "model": "demo", "runner": "cpu",
            "source": {"kind": "registry", "registry": REGISTRY, "repository": repo,
                       "tag_pattern": "nightly_main_*", "insecure": True},
            "server": {"command": SERVER_COMMAND, "port": 8000, "health_timeout_s": 60},
            "reproducer": {"sizes": [1000, 6000], "min_size": 1000, "max_size": 6000, "tolerance": 0.5,
                           "tolerance_tokens": 1000, "question": "What is 2+2? Answer in one sentence.",
                           "expected_answer": "4", "max_tokens": 64},
            "regress": "garbage",
            "bisect": {"good": specs[0].tag, "bad": specs[-1].tag},
            "report": {"dir": str(tmp_path / "out")},
        }, sort_keys=False))
        r = bb("--state", str(tmp_path / "state"), "run", str(recipe), cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        check_evidence(tmp_path / "out")
        # input 4: what changed between the last good and the first bad nightly, linked
        report = (tmp_path / "out" / "report.md").read_text()
        assert "What changed between the last good and the first bad nightly" in report, report[:3000]
        row = next(ln for ln in report.splitlines() if ln.startswith("| vllm (changed) |"))
        assert "0.19.1rc1.dev2+g0000002ab" in row and "0.19.1rc1.dev3+g0000003ab" in row, row
        assert "(https://github.com/vllm-project/vllm/compare/0000002ab...0000003ab)" in row, row
    finally:
        subprocess.run(["docker", "rmi", "-f", *[p.ref for p in pushed], *[p.pinned for p in pushed]],
                       capture_output=True)


# ------------------------------------------------------------------ the next members of the kind (rendering)


def test_hostile_reply_in_the_evidence_table_is_one_sanitised_cell() -> None:
    """The reply sits in a table cell: a pipe cannot open a new cell, HTML and mentions stay text."""
    res = make_result(reply="<script>x</script> @someone fixes #12 | forged cell \u202e [l](javascript:x)", n_probes=8)
    for for_issue in (False, True):
        block = section(render_markdown(res, for_issue=for_issue), "What went wrong")
        t = table(block, "")
        assert len(t["reply"]) == 2, t
        bad = t["reply"][1]
        assert "&lt;script&gt;" in bad and "@&#8203;someone" in bad and "\\u202e" in bad, bad
        assert "<script>" not in block and "[l](javascript" not in block
        assert t["outcome"] == ["OK", "**GARBAGE**"] and t["reply"][0] == "The answer is 4."


def _pair(kind: str, regress: str, rows: tuple[dict, dict], extra: tuple[dict, dict] = ({}, {})) -> RunResult:
    a = Candidate(CandidateKind.COMMIT, "a" * 40, "a" * 12 + " older", "app")
    b = Candidate(CandidateKind.COMMIT, "b" * 40, "b" * 12 + " newer", "app")
    probes = [ProbeResult(a, Verdict.GOOD, table=[rows[0]] if rows[0] else [], extra=extra[0]),
              ProbeResult(b, Verdict.BAD, table=[rows[1]] if rows[1] else [], extra=extra[1])]
    st = StageResult("commits", "app", Status.CULPRIT, [a, b], probes, last_good=a, first_bad=b, culprits=[b],
                     confidence=0.99)
    return RunResult("r", kind, Status.CULPRIT, [st], regress=regress)


@pytest.mark.parametrize("empty", ["", "   \n", None])
def test_a_failing_reply_with_text_is_shown_before_an_empty_one(empty) -> None:
    """Issue 41 item 8: the first bad answered an empty reply at 2000 tokens and garbage with text at
    4000; the last good answered both sizes OK. The table shows the garbage (the same prompt at 4000),
    not "(empty reply)"; with only empty failing replies the empty one is still shown."""
    a = Candidate(CandidateKind.COMMIT, "a" * 40, "a" * 12 + " older", "app")
    b = Candidate(CandidateKind.COMMIT, "b" * 40, "b" * 12 + " newer", "app")
    empty_row = {"requested": 2000, "prompt_tokens": 2001, "outcome": "GARBAGE", "reasons": ["empty reply"]}
    if empty is not None:
        empty_row["excerpt"] = empty
    worded = {"requested": 4000, "prompt_tokens": 4003, "outcome": "GARBAGE", "excerpt": "zxq zxq zxq zxq",
              "reasons": ["repeat-run"]}
    oks = [{"requested": n, "prompt_tokens": n + 1, "outcome": "OK", "excerpt": f"The answer at {n}."}
           for n in (2000, 4000)]
    for bad_rows, want in (([empty_row, worded], "zxq zxq zxq zxq"), ([empty_row], "(empty reply)")):
        probes = [ProbeResult(a, Verdict.GOOD, table=oks), ProbeResult(b, Verdict.BAD, table=bad_rows)]
        st = StageResult("commits", "app", Status.CULPRIT, [a, b], probes, last_good=a, first_bad=b, culprits=[b],
                         confidence=0.99)
        t = table(section(render_markdown(RunResult("r", "regression", Status.CULPRIT, [st])), "What went wrong"), "")
        size = 4000 if len(bad_rows) == 2 else 2000
        assert t["reply"] == [f"The answer at {size}.", want], t
        assert t["prompt tokens (requested / measured)"][1].startswith(f"{size} / "), t


def test_summary_lines_carry_no_markdown_escapes() -> None:
    """Issue 41 item 8: a commit subject like "[Perf] speed_up *x*" in a <summary> line (an HTML block,
    where GitHub renders no Markdown) read "\\[Perf\\] speed\\_up"; HTML stays escaped, mentions inert."""
    a = Candidate(CandidateKind.COMMIT, "a" * 40, "a" * 12 + " older", "app")
    b = Candidate(CandidateKind.COMMIT, "b" * 40, "b" * 12 + " [Perf] speed_up *x* <b>@bob #12", "app")
    rows = ({"requested": 8000, "prompt_tokens": 8003, "outcome": "OK", "excerpt": "fine"},
            {"requested": 8000, "prompt_tokens": 8003, "outcome": "GARBAGE", "excerpt": "!!!!"})
    probes = [ProbeResult(a, Verdict.GOOD, table=[rows[0]]), ProbeResult(b, Verdict.BAD, table=[rows[1]])]
    st = StageResult("commits", "app", Status.CULPRIT, [a, b], probes, last_good=a, first_bad=b, culprits=[b],
                     confidence=0.99)
    for for_issue in (False, True):
        text = render_markdown(RunResult("r", "regression", Status.CULPRIT, [st]), for_issue=for_issue)
        lines = [ln for ln in text.splitlines() if ln.startswith("<details><summary>") and "[Perf]" in ln]
        assert lines, text
        for ln in lines:
            assert "speed_up *x*" in ln and "&lt;b&gt;" in ln and "@&#8203;bob" in ln and "\\" not in ln, ln
            assert "#&#8203;12" in ln if for_issue else "#12" in ln, ln


def test_fix_bisection_shows_the_last_brokens_garbage_beside_the_first_fixed() -> None:
    res = _pair("fix", "success", ({"requested": 8000, "prompt_tokens": 8003, "outcome": "GARBAGE",
                                     "excerpt": "!!!!!!!!", "reasons": ["repeat-run: flood of '!'"]},
                                    {"requested": 8000, "prompt_tokens": 8003, "outcome": "OK",
                                     "excerpt": "The answer is 4."}))
    text = render_markdown(res)
    block = section(text, "What went wrong")
    assert "### What went wrong: the last broken's reply beside the first fixed's\n" in text
    t = table(block, "")
    assert t["_head"][0].startswith("Last broken") and t["_head"][1].startswith("First fixed"), t
    assert t["outcome"] == ["**GARBAGE**", "OK"] and t["reply"] == ["\\!!!!!!!!", "The answer is 4."], t


def test_command_reproducer_shows_both_runs_exit_codes_and_output_tails() -> None:
    res = _pair("regression", "command", ({}, {}),
                ({"returncode": 0, "stdout_tail": "all 12 checks passed\n"},
                 {"returncode": 1, "stderr_tail": "AssertionError: logits differ at 20481\n"}))
    text = render_markdown(res)
    block = section(text, "What went wrong")
    assert "### What went wrong: the first bad's run beside the last good's\n" in text
    t = table(block, "")
    assert t["exit code"] == ["0", "1"] and t["verdict"] == ["good", "bad"], t
    assert "all 12 checks passed" in block and "AssertionError: logits differ at 20481" in block
