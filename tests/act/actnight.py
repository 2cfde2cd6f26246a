"""Shared pieces of the act tests: the test's recipe, its nightlies, the event payloads."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.act.actkit import run_act
from tests.containers.nightly_factory import SERVER_COMMAND, NightlySpec
from tests.night.conftest import GH_REPO, TOKEN

RECIPE = "act-night"
"""The deployment's recipe name (recipes/act-night.yaml); also the issue title's prefix."""


def spec(n: int, garbage_above: int) -> NightlySpec:
    """Nightly ``n`` of the reference engine, answering garbage above ``garbage_above`` prompt tokens."""
    return NightlySpec(f"nightly_main_202605{n:02d}", vllm_version=f"0.19.1rc1.dev{n}+g{n:07d}ab",
                       garbage_above=garbage_above)


def recipe_text(registry: str, repository: str, good: str, api_url: str, name: str = RECIPE, extra: str = "") -> str:
    """The deployment's recipe: nightlies of ``registry/repository`` from ``good`` on, the reference
    engine's server, sizes 1000 and 6000 prompt tokens, issues on the fake GitHub at ``api_url``."""
    cmd = ", ".join(f'"{x}"' for x in SERVER_COMMAND)
    return f"""\
name: {name}
model: demo
source: {{kind: registry, registry: "{registry}", repository: {repository}, tag_pattern: "nightly_main_*",
          insecure: true}}
server: {{command: [{cmd}], port: 8000, health_timeout_s: 60, request_timeout_s: 60}}
runner: cpu
reproducer: {{min_size: 1000, max_size: 6000, sizes: [1000, 6000]}}
regress: garbage
bisect:
  good: {good}{extra}
report:
  github: {{repo: {GH_REPO}, labels: [bisectbot], api_url: "{api_url}"}}
"""


def cleanup(pushed) -> None:
    """Remove the pushed nightlies and the images built on them (by base digest: only ours)."""
    built = [i for p in pushed for i in subprocess.run(
        ["docker", "images", "-q", "--filter", f"label=org.bisectbot.base-digest={p.digest}"],
        capture_output=True, text=True).stdout.split()]
    subprocess.run(["docker", "rmi", "-f", *sorted(set(built)), *[x for p in pushed for x in (p.ref, p.pinned)]],
                   capture_output=True)


def act(deploy: Path, workflow: str, event: str, payload: dict, tmp_path: Path, state: Path, name: str,
        bot_login: str = "bisectbot-app", api_url: str | None = None, env: dict[str, str] | None = None,
        shared_venv: bool = True, variables: dict[str, str] | None = None):
    """One act run; what the upload-artifact stand-in copied lands in ``tmp_path/artifacts/<name>``."""
    art = tmp_path / "artifacts" / name
    art.mkdir(parents=True)
    run = run_act(deploy, workflow, event, payload, tmp=tmp_path, token=TOKEN, state=state, artifacts=art,
                  bot_login=bot_login, api_url=api_url, env=env, shared_venv=shared_venv, variables=variables)
    print(f"act {workflow} {event} ({name}): rc {run.returncode} in {run.seconds:.0f} s; steps {run.step_seconds()}")
    return run, art


def comment_payload(fake, number: int, comment: dict) -> dict:
    """An ``issue_comment`` (created) event payload for ``comment`` on issue ``number``, as GitHub sends it."""
    issue = fake.repos[GH_REPO].issues[number]
    owner, name = GH_REPO.split("/")
    return {"action": "created", "issue": issue, "comment": comment,
            "repository": {"full_name": GH_REPO, "name": name, "owner": {"login": owner}, "default_branch": "main"},
            "sender": comment["user"]}


