"""Command reproducer: real subprocesses, exit-code contract, threshold search over the size."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bisectbot.errors import BadInput
from bisectbot.models import Outcome
from bisectbot.recipe import ReproducerSpec
from bisectbot.reproduce.command import command_outcome, run_argv, search_threshold_command

PY = sys.executable


def _script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "kernel_check.py"
    p.write_text("import os, signal, sys, time\nsize = int(sys.argv[1])\n" + body)
    return p


@pytest.mark.parametrize("body,outcome,reason", [
    ("sys.exit(0)", Outcome.OK, ""),
    ("print('max abs err 3.1e+02', file=sys.stderr); sys.exit(1)", Outcome.GARBAGE, "exit 1"),
    ("sys.exit(124)", Outcome.GARBAGE, "exit 124"),
    ("sys.exit(125)", Outcome.INCONCLUSIVE, "skip"),
    ("os.kill(os.getpid(), signal.SIGSEGV)", Outcome.GARBAGE, "crash (SIGSEGV)"),
    ("time.sleep(30)", Outcome.GARBAGE, "timeout"),
])
def test_exit_status_contract(tmp_path, body, outcome, reason):
    s = _script(tmp_path, body)
    run = run_argv([PY, str(s), "{size}"], 1000, None, timeout_s=2)
    o, why = command_outcome(run)
    assert o == outcome and why.startswith(reason)
    if "stderr" in body:
        assert "max abs err" in run.stderr_tail
    if reason == "timeout":
        assert run.timed_out and run.returncode is None and run.duration_s < 10


def test_crash_can_be_skip_and_missing_command_is_error(tmp_path):
    s = _script(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    run = run_argv([PY, str(s), "{size}"], 1, None, timeout_s=10)
    assert command_outcome(run, crash="skip")[0] == Outcome.INCONCLUSIVE
    run = run_argv(["/nonexistent/kernel-check", "{size}"], 1, None, timeout_s=10)
    assert run.returncode == 127 and command_outcome(run)[0] == Outcome.ERROR


def test_source_placeholder(tmp_path):
    (tmp_path / "marker.txt").write_text("tree")
    run = run_argv([PY, "-c", "import sys; print(open(sys.argv[1]).read(), sys.argv[2])", "{source}/marker.txt",
                    "{size}"], 77, tmp_path, timeout_s=10)
    assert run.returncode == 0 and run.stdout_tail.strip() == "tree 77"
    with pytest.raises(BadInput, match="no source tree"):
        run_argv(["x", "{source}"], 1, None, timeout_s=1)


@pytest.mark.parametrize("T", [2500, 25000, 100000])
def test_command_threshold_search_finds_T_in_fresh_processes(tmp_path, T):
    # a process's identity: its pid (in the candidates' PID namespace every run is pid 2) and its
    # start time in clock ticks since boot (/proc/self/stat field 22, one clock for every namespace)
    s = _script(tmp_path, "print('pid', os.getpid(), open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]); "
                          f"sys.exit(0 if size < {T} else 1)")
    spec = ReproducerSpec(kind="command", command=[PY, str(s), "{size}"], min_size=2000, max_size=120000,
                          tolerance_tokens=32)
    pids = []

    def run(size):
        r = run_argv(spec.command, size, None, spec.command_timeout_s)
        pids.append(" ".join(r.stdout_tail.split()[-2:]))
        return r

    res = search_threshold_command(run, spec)
    assert res.status == "garbage" and res.last_ok < T <= res.first_garbage
    assert (res.first_garbage - res.last_ok) / res.last_ok <= 0.03 and res.requests <= 10
    assert len(set(pids)) == len(pids)  # a fresh process per run
    assert res.reasons == ["exit 1"]
    row = next(r for r in res.table if r.size == res.first_garbage)
    assert row.evidence["returncode"] == 1


def test_command_crash_above_threshold_is_bad_with_reason(tmp_path):
    s = _script(tmp_path, "os.kill(os.getpid(), signal.SIGSEGV) if size >= 25000 else sys.exit(0)")
    spec = ReproducerSpec(kind="command", command=[PY, str(s), "{size}"], min_size=2000, max_size=60000)
    res = search_threshold_command(lambda n: run_argv(spec.command, n, None, 30), spec)
    assert res.status == "garbage" and res.last_ok < 25000 <= res.first_garbage
    assert res.reasons == ["crash (SIGSEGV)"]


def test_command_that_cannot_run_is_error(tmp_path):
    spec = ReproducerSpec(kind="command", command=["/nonexistent/check", "{size}"])
    res = search_threshold_command(lambda n: run_argv(spec.command, n, None, 10), spec)
    assert res.status == "error" and "cannot run" in res.error and res.requests == 1


def test_probe_cli_runs_a_command_recipe_without_a_server(tmp_path):
    import json
    import subprocess

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "limit.txt").write_text("25000")
    check = tmp_path / "check.py"
    check.write_text("import sys\nlimit = int(open(sys.argv[2] + '/limit.txt').read())\n"
                     "print('max abs err', 0 if int(sys.argv[1]) < limit else 312.5)\n"
                     "sys.exit(0 if int(sys.argv[1]) < limit else 1)\n")
    recipe = tmp_path / "kernel.yaml"
    recipe.write_text(f"name: kernel\nsource: {{kind: git, repo: .}}\nregress: command\nreproducer:\n"
                      f"  kind: command\n  command: [{PY!r}, {str(check)!r}, '{{size}}', '{{source}}']\n"
                      f"  min_size: 2000\n  max_size: 120000\n")
    base = [PY, "-m", "bisectbot", "--json", "probe", "--recipe", str(recipe)]
    p = subprocess.run(base + ["--source", str(tmp_path / "src")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    res = json.loads(p.stdout)
    assert res["status"] == "garbage" and res["last_ok"] < 25000 <= res["first_garbage"]
    assert res["reasons"] == ["exit 1"] and res["endpoint"].startswith("command: ")
    p = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--source" in p.stderr


def test_probe_table_of_an_inline_script_names_it_and_counts_command_runs(tmp_path):
    """Issue 41, item 11: ``probe --recipe`` with an inline ``python3 -c`` script titled its table
    with the script whole (its newlines shown as ``\\x0a``) and counted "chat requests" for
    command runs. The title names the script by its length; the summary counts command runs.
    The title is one line however narrow the terminal and however long the interpreter's path (CI's
    longer path once folded it at the table's width): tried at 60 and 200 columns."""
    import json
    import subprocess

    script = "import sys\nsize = int(sys.argv[1])\nsys.exit(1 if size >= 9000 else 0)\n"
    recipe = tmp_path / "inline.yaml"
    recipe.write_text(f"name: inline\nsource: {{kind: git, repo: .}}\nregress: command\nreproducer:\n"
                      f"  kind: command\n  command: [{json.dumps(PY)}, '-c', {json.dumps(script)}, '{{size}}']\n"
                      f"  min_size: 2000\n  max_size: 16000\n")
    for columns in ("60", "200"):
        p = subprocess.run([PY, "-m", "bisectbot", "probe", "--recipe", str(recipe)], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "COLUMNS": columns})
        assert p.returncode == 1, p.stdout + p.stderr
        title = f"probe of command: {PY} -c '<script, 3 lines>' {{size}}"
        assert "\\x0a" not in p.stdout and title in p.stdout.splitlines(), (columns, p.stdout)
        assert "command runs," in p.stdout and "chat requests" not in p.stdout, p.stdout


def test_ctrl_c_during_a_probe_prints_the_interval_so_far(tmp_path):
    """Issue 41, item 11: Ctrl-C in ``probe`` printed "aborted" and nothing of the sizes already
    answered. Each size takes 0.4 s here (OK below 9000 tokens); SIGINT after ~2.5 s: the bot says
    what the answered sizes show, then "interrupted", exit EXIT_INTERRUPTED."""
    import json
    import signal
    import subprocess
    import time

    from bisectbot.errors import EXIT_INTERRUPTED

    script = "import sys, time\ntime.sleep(0.4)\nsys.exit(1 if int(sys.argv[1]) >= 9000 else 0)\n"
    recipe = tmp_path / "slow.yaml"
    recipe.write_text(f"name: slow\nsource: {{kind: git, repo: .}}\nregress: command\nreproducer:\n"
                      f"  kind: command\n  command: [{json.dumps(PY)}, '-c', {json.dumps(script)}, '{{size}}']\n"
                      f"  min_size: 1000\n  max_size: 64000\n  tolerance: 0.001\n  tolerance_tokens: 1\n")
    p = subprocess.Popen([PY, "-m", "bisectbot", "probe", "--recipe", str(recipe)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    seen = ""
    while time.monotonic() < deadline and seen.count("\nprobe ") + seen.startswith("probe ") < 3:
        line = p.stderr.readline()
        if not line:
            break
        seen += line
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    err = seen + err
    assert p.returncode == EXIT_INTERRUPTED, (p.returncode, err)
    assert "interrupted after" in err and ("OK up to" in err or "garbage from" in err), err
