"""Issue 36, the hostile pass on the first sandbox: next members of kinds already closed.

* The bot's cache (``~/.cache/bisectbot``: repository cache, release files) was read-only to
  candidates only when it existed already; a candidate created it below its writable ``~/.cache``
  and planted a repository whose config ran a command on the host at the next night's fetch.
* ``bwrap`` that disappears mid-run made every later candidate a cached skip "build failed (exit
  127)" (the environment as a verdict); now the sandbox is checked again and the run stops.
* ``LC_DEPLOY_KEY`` reached candidates (every ``LC_*`` name passed); ``?private_token=`` was not a
  credential query parameter; ``~/.cache/huggingface/stored_tokens`` sat readable beside the
  hidden ``token``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bisectbot import sandbox
from bisectbot.sandbox import SandboxUnavailable
from bisectbot.secrets import candidate_env, redact
from tests.bisect.conftest import git

PY = sys.executable


PLANT = r'''
import os, sys
cache = os.environ.get("XDG_CACHE_HOME", "")
try:
    os.makedirs(os.path.join(cache, "bisectbot", "repos", "planted"), exist_ok=True)
    open(os.path.join(cache, "bisectbot", "repos", "planted", "config"), "w").write("[core]\n")
except OSError:
    pass
sys.exit(1 if open("state.txt").read().startswith("bad") else 0)
'''


@pytest.mark.slow
def test_a_candidate_cannot_create_the_bots_cache_and_plant_in_it(tmp_path: Path) -> None:
    cache = tmp_path / "home" / ".cache"
    cache.mkdir(parents=True)  # ~/.cache exists, ~/.cache/bisectbot does not (a fresh runner user)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(6):
        (repo / "state.txt").write_text(f"{'bad' if i >= 3 else 'good'} {i}\n")
        (repo / "plant.py").write_text(PLANT)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"c{i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "plant", "source": {"kind": "git", "repo": str(repo)}, "regress": "command",
        "reproducer": {"kind": "command", "command": [PY, "plant.py"]},
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp_path / "out")}}))
    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_SANDBOX", "BISECTBOT_SANDBOX_WRITABLE")}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(cache))
    p = subprocess.run([PY, "-m", "bisectbot", "--state", str(tmp_path / "state"), "run", str(recipe),
                        "--runner", "local", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert not (cache / "bisectbot" / "repos" / "planted").exists()
    # the same candidate unconfined does plant (the check can fail)
    env["BISECTBOT_SANDBOX"] = "off"
    shutil.rmtree(tmp_path / "out")
    subprocess.run([PY, "-m", "bisectbot", "--state", str(tmp_path / "state2"), "run", str(recipe),
                    "--runner", "local", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                   env=env, timeout=600)
    assert (cache / "bisectbot" / "repos" / "planted" / "config").exists()


def test_bwrap_gone_mid_run_stops_the_run_instead_of_skipping(tmp_path: Path, monkeypatch) -> None:
    real = shutil.which("bwrap")
    if real is None:
        pytest.fail("bwrap is required here (scripts/test-all.sh installs bubblewrap)")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy2(real, bindir / "bwrap")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.delenv("BISECTBOT_SANDBOX", raising=False)
    monkeypatch.setattr(sandbox, "_checked", None)
    tree = tmp_path / "tree"
    tree.mkdir()
    argv, _ = sandbox.wrap(["true"], tree=tree, env={"PATH": "/usr/bin:/bin"})
    assert argv[0] == str(bindir / "bwrap")
    (bindir / "bwrap").unlink()  # removed mid-run; no other bwrap on the reduced PATH below
    monkeypatch.setenv("PATH", str(bindir))
    with pytest.raises(SandboxUnavailable, match="bwrap is not installed"):
        sandbox.wrap(["true"], tree=tree, env={"PATH": "/usr/bin:/bin"})


def test_lc_names_other_than_locales_and_query_tokens_stay_out(tmp_path: Path, monkeypatch) -> None:
    env = candidate_env(environ={"PATH": "/bin", "LC_ALL": "C.UTF-8", "LC_TIME": "C", "LC_DEPLOY_KEY": "k3y",
                                 "PIP_EXTRA_INDEX_URL": "https://g.example/simple?private_token=glpat-abcdef123456"})
    assert env.get("LC_ALL") == "C.UTF-8" and env.get("LC_TIME") == "C" and "LC_DEPLOY_KEY" not in env
    assert "glpat-abcdef123456" not in env.get("PIP_EXTRA_INDEX_URL", "")
    assert "glpat-abcdef123456" not in redact("GET https://g.example/x?page=2&private_token=glpat-abcdef123456")
    assert "s1gn" not in redact("https://storage.example/o?X-Goog-Signature=s1gn&X-Goog-Date=1")


def test_hugging_face_stored_tokens_are_hidden(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    hf = home / ".cache" / "huggingface"
    hf.mkdir(parents=True)
    (hf / "stored_tokens").write_text("[tokens]\nmine = hf_abc\n")
    elsewhere = tmp_path / "hfhome"
    elsewhere.mkdir()
    (elsewhere / "stored_tokens").write_text("x")
    (elsewhere / "token").write_text("hf_x")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(elsewhere))
    hidden = set(sandbox.hidden_paths())
    assert {hf / "stored_tokens", elsewhere / "stored_tokens", elsewhere / "token"} <= hidden
