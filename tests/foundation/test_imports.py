"""Heavy libraries are imported only where used (issue 15): ``bisectbot --version`` and rendering a
report must not load the GitHub client, Docker, matplotlib, pydantic or numpy. Checked on the modules
a real child process ends up with, not on timings."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = {"github", "docker", "matplotlib", "pydantic", "numpy", "jinja2", "git"}

REPORT = """
import json, sys
try:
    {code}
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def _modules(code: str) -> set[str]:
    p = subprocess.run([sys.executable, "-c", REPORT.format(code=code)], capture_output=True, text=True, timeout=120)
    assert "MODULES " in p.stderr, p.stderr[-2000:]
    return set(json.loads(p.stderr.rsplit("MODULES ", 1)[1]))


def test_version_imports_no_heavy_library() -> None:
    mods = _modules("from bisectbot.cli import main; main(['--version'])")
    assert "bisectbot.cli.run_cmd" in mods
    assert not {m for m in mods if m.split(".")[0] in HEAVY}


def test_report_rendering_does_not_import_the_github_client() -> None:
    mods = _modules("from bisectbot.report import write_report, fingerprint, sanitize, NightlyResult")
    assert "bisectbot.report.markdown" in mods
    assert not {m for m in mods if m.split(".")[0] in ("github", "docker")}
    assert "github" in _modules("from bisectbot.report import file_or_update")  # filing does load it
