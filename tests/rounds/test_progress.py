"""Issue 24, input 7: long work shows progress -- through ``bisectbot run`` over a real git history.

Each probe line carries its elapsed time; from the second probe on an ETA from the measured
probe times and the probes left; a build command is a phase with its duration; in GitHub Actions
the step summary holds the progress so far, and the final summary follows it.
"""

from __future__ import annotations

import re

import yaml


def test_run_prints_phases_and_an_eta_and_keeps_the_step_summary(tmp_path, kit) -> None:
    hist = kit.make_history(tmp_path / "repo", 12, 7)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    data = yaml.safe_load(recipe.read_text())
    data["server"] = {"build_command": ["python3", "-c", "import time; time.sleep(0.3)"]}
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    summary = tmp_path / "summary.md"
    r = kit.cli("--state", str(tmp_path / "state"), "run", str(recipe), "--no-prefetch",
                env={"CHECK_SLEEP": "0.2", "GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 0, r.stderr
    probe_lines = [ln for ln in r.stderr.splitlines() if re.match(r"^\[\d+\] ", ln)]
    assert len(probe_lines) >= 4, r.stderr
    assert "ETA" not in probe_lines[0] or "measured" in probe_lines[0]
    assert all("elapsed" in ln for ln in probe_lines)
    assert any(re.search(r"ETA ~[\d.]+ s \(\d+ probes? x [\d.]+ s measured\)", ln) for ln in probe_lines[1:-1]), \
        probe_lines
    assert re.search(r"^probe .+ \[[\d.]+ s\]: build done in [\d.]+ s$", r.stderr, re.M), r.stderr[:3000]
    text = summary.read_text()
    assert text.startswith("### bisectbot: progress") and text.count("\n- \\[") >= 4  # sanitised Markdown
    assert "### bisectbot:" in text.split("### bisectbot: progress", 1)[1]  # the final summary after it
