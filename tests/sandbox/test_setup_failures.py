"""A sandbox that could not be set up is the host, never the candidate's outcome (stop of issues 34-37).

The CI run of that stop failed twice the same way: ``bwrap: Can't bind mount /oldroot/ on /newroot/:
Unable to apply mount flags: remount "/newroot/var/lib/docker/overlay2/<id>-init/merged": Invalid
argument``. bwrap binds the host's ``/`` with every mount below it, lists them and remounts each
read-only; Docker, creating a container for another test, mounted and unmounted its init layer in
between (on a host whose ``/`` propagates mounts). bwrap exited 1 before the candidate ran, and the
bot read that exit as the candidate's: "build failed (exit 1)" made the demo's good end a skip
(boundary-failed), and a server that "exited with code 1" a skip in the fan-out run.

Kind: bwrap never reaches the candidate's command -- whatever the cause -- and that is read as what
the candidate did. Parameters the CI input fixed, and the members here that vary each:

* the cause: a host mount changing under a shared ``/`` (transient: a mount churn in a private
  mount namespace, the real race), or a state of the host (persistent: a device the operator names
  that vanished) -- :func:`test_a_mount_churn_under_a_shared_root_changes_no_verdict`,
  :func:`test_a_setup_that_never_succeeds_stops_the_run_and_records_nothing`;
* the step: a build, a server, a command reproducer (the demo builds, serves and probes; the command
  history runs a command per probe), and ``bisectbot probe``'s own run (:func:`run_argv`);
* which side speaks: bwrap's words printed by the candidate itself, with its exit 1, are the
  candidate's outcome and are not retried (:func:`test_a_candidate_that_prints_bwraps_words_is_judged_on_its_exit`);
* exec: a command the sandbox cannot exec is exit 127 as from a shell, not a setup failure.

The signal is not a text: the launcher writes on a pipe once the sandbox is set up, before it execs the
command, and the candidate never holds that pipe (:class:`bisectbot.sandbox.Launch`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import yaml

from bisectbot import sandbox
from bisectbot.errors import HostFailure
from bisectbot.reproduce.command import run_argv
from tests.bisect.conftest import git

PY = sys.executable

CHURN = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    d = sys.argv[1].encode()
    os.makedirs(d, exist_ok=True)
    while True:
        libc.mount(b"none", d, b"tmpfs", 0, None)
        libc.umount2(d, 0)
""")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BISECTBOT_SANDBOX", "GITHUB_TOKEN", "BISECTBOT_STATE")}
    return env


def _needs_root_namespaces() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a mount churn under a shared / needs root and unshare(1) (CI runs as root)")
    if shutil.which("bwrap") is None:
        pytest.fail("bwrap is required here (scripts/test-all.sh installs bubblewrap)")


def _in_churn(tmp: Path, script: str, timeout: float) -> subprocess.CompletedProcess:
    """Run the shell ``script`` in a mount namespace of its own whose ``/`` is shared (as on a host
    where systemd makes it so), while one process mounts and unmounts a tmpfs below it as fast as
    the kernel allows. The churn stays in that namespace: nothing of the host's mounts changes."""
    churn = tmp / "churn.py"
    churn.write_text(CHURN)
    wrapper = textwrap.dedent(f"""
        set -u
        mount --make-rshared /
        {PY} -I -S {churn} {tmp}/churn-dir &
        CHURN=$!
        sleep 0.3
        set +e
        {script}
        rc=$?
        kill $CHURN; wait $CHURN 2>/dev/null
        umount {tmp}/churn-dir 2>/dev/null
        exit $rc
    """)
    return subprocess.run(["unshare", "-m", "--propagation", "unchanged", "bash", "-c", wrapper],
                          capture_output=True, text=True, env=_env(), timeout=timeout)


def test_the_churn_breaks_a_bare_bwrap_setup(tmp_path: Path) -> None:
    """The premise of the churn tests: without the bot, bwrap's setup fails under it (measured
    12 of 100 with one churner; the tests below could not fail if this were 0)."""
    _needs_root_namespaces()
    loop = ("f=0; for i in $(seq 150); do bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid -- true "
            "2>>" + str(tmp_path / "err") + " || f=$((f+1)); done; echo failed=$f")
    p = _in_churn(tmp_path, loop, timeout=300)
    failed = int(p.stdout.strip().rsplit("failed=", 1)[-1])
    assert failed > 0, p.stdout + p.stderr
    assert "Unable to apply mount flags" in (tmp_path / "err").read_text()


@pytest.mark.slow
def test_a_mount_churn_under_a_shared_root_changes_no_verdict(tmp_path: Path) -> None:
    """The demo (a build, a server and HTTP probes per candidate), ``bisectbot probe``'s own command
    runs and the sandbox's check before any candidate (:func:`bisectbot.sandbox.require`), under the
    churn: every verdict is the candidate's, and the demo names its culprit."""
    _needs_root_namespaces()
    out, state = tmp_path / "out", tmp_path / "state"
    runs = tmp_path / "runs.py"
    runs.write_text(textwrap.dedent(f"""
        import json
        from bisectbot import sandbox
        from bisectbot.reproduce.command import run_argv
        for _ in range(40):  # the check before any candidate runs meets the same race (rounds, this session)
            sandbox._checked = None
            sandbox.require()
        codes = [run_argv(["sh", "-c", "exit $(( {{size}} % 4 ))"], n, None, 60, cwd={str(tmp_path)!r}).returncode
                 for n in range(60)]
        print(json.dumps(codes))
    """))
    p = _in_churn(tmp_path, f"{PY} {runs} > {tmp_path}/codes.json || exit 9\n"
                            f"{PY} -m bisectbot demo --out {out} --state {state} --seed 5 --commits 12",
                  timeout=900)
    codes = json.loads((tmp_path / "codes.json").read_text())
    assert codes == [n % 4 for n in range(60)], codes
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "bwrap" not in p.stdout + p.stderr


def _command_history(tmp: Path) -> tuple[Path, list[str]]:
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(6):
        (repo / "state.txt").write_text("bad\n" if i >= 4 else "good\n")
        (repo / "n.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return repo, shas


def _command_recipe(tmp: Path, repo: Path, shas: list[str]) -> Path:
    recipe = tmp / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "setup-failures", "source": {"kind": "git", "repo": str(repo)}, "regress": "command",
        "reproducer": {"kind": "command", "command": [
            "sh", "-c", "test \"$(cat state.txt)\" = good"]},
        "bisect": {"good": shas[0], "bad": shas[-1]}, "report": {"dir": str(tmp / "out")}}))
    return recipe


def test_a_setup_that_never_succeeds_stops_the_run_and_records_nothing(tmp_path: Path) -> None:
    """Persistent member: the operator names a device node for candidates
    (``BISECTBOT_SANDBOX_DEVICES``) that vanished -- a dangling link, so every setup fails with
    "Can't find source path". The run stops as the host (exit 1, the bwrap message), and once the
    device is back the same state directory bisects from scratch: no probe was recorded as a skip."""
    if shutil.which("bwrap") is None:
        pytest.fail("bwrap is required here (scripts/test-all.sh installs bubblewrap)")
    if not os.access("/dev", os.W_OK):
        pytest.skip("needs a writable /dev for the vanished device's link (CI runs as root)")
    repo, shas = _command_history(tmp_path)
    recipe = _command_recipe(tmp_path, repo, shas)
    link = Path("/dev") / f"bisectbot-gone-{uuid.uuid4().hex[:8]}"
    os.symlink("/nonexistent-device-node", link)
    state = tmp_path / "state"
    argv = [PY, "-m", "bisectbot", "--state", str(state), "--json", "run", str(recipe), "--runner", "local",
            "--out", str(tmp_path / "out")]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                           env={**_env(), "BISECTBOT_SANDBOX_DEVICES": str(link)})
    finally:
        link.unlink()
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    assert "could not be set up" in p.stderr and "Can't find source path" in p.stderr, p.stderr[-3000:]
    assert "culprit" not in p.stdout.lower()
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=_env())
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    doc = json.loads(again.stdout)
    final = (doc.get("result") or doc).get("stages", [{}])[-1]
    assert (final.get("first_bad") or {}).get("ref") == shas[4], doc.get("status")


def test_every_attempt_of_a_failed_setup_is_made_then_the_host_is_named(tmp_path: Path) -> None:
    """:func:`bisectbot.sandbox.launched` with a real bwrap whose setup always fails: one attempt
    per :data:`bisectbot.sandbox.SETUP_DELAYS_S` and one more, then :class:`HostFailure` with
    bwrap's words; the waits are the documented ones."""
    exe = shutil.which("bwrap")
    if exe is None:
        pytest.fail("bwrap is required here (scripts/test-all.sh installs bubblewrap)")
    if not sandbox.enabled():
        pytest.skip("BISECTBOT_SANDBOX=off in this environment")
    attempts: list[int] = []
    waits: list[float] = []

    def start(launch: sandbox.Launch | None) -> subprocess.CompletedProcess:
        assert launch is not None
        attempts.append(1)
        return subprocess.run([exe, "--ro-bind", "/", "/", "--ro-bind", str(tmp_path / "missing"), "/x", "--",
                               PY, "-I", "-S", "-c", sandbox._LAUNCH, str(launch.fd), "true"],
                              capture_output=True, text=True, pass_fds=launch.pass_fds)

    with pytest.raises(HostFailure, match="could not be set up in 8 attempts.*Can't find source path") as e:
        sandbox.launched(start, lambda r: r.stderr, what="a test", sleep=waits.append)
    assert isinstance(e.value, sandbox.SandboxSetupFailed)
    assert len(attempts) == len(sandbox.SETUP_DELAYS_S) + 1 and waits == list(sandbox.SETUP_DELAYS_S)


@pytest.mark.parametrize("words", [
    "bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount \"/newroot/x\": "
    "Invalid argument",
    "bwrap: execvp foo: No such file or directory",
    "bwrap: Creating new namespace failed: Resource temporarily unavailable",
])
def test_a_candidate_that_prints_bwraps_words_is_judged_on_its_exit(tmp_path: Path, words: str) -> None:
    """The candidate's own exit 1 with bwrap's words on stderr is its outcome: run once, exit 1 --
    neither retried as a setup failure (it would stop the night) nor turned into 127."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "words.txt").write_text(words + "\n")
    r = run_argv(["sh", "-c", "echo x >> count; cat words.txt >&2; exit 1"], 10, tree, 60, cwd=tree)
    assert r.returncode == 1 and words in r.stderr_tail
    assert (tree / "count").read_text() == "x\n"


def test_a_command_the_sandbox_cannot_exec_is_127_as_from_a_shell(tmp_path: Path) -> None:
    """A script whose interpreter does not exist: the sandbox is set up, the launcher's exec fails
    (ENOENT) -- exit 127 with the reason, as from a shell, and no retry."""
    if not sandbox.enabled():
        pytest.skip("BISECTBOT_SANDBOX=off in this environment")
    tree = tmp_path / "tree"
    tree.mkdir()
    prog = tree / "check.sh"
    prog.write_text("#!/nonexistent/interpreter\nexit 0\n")
    prog.chmod(0o755)
    r = run_argv(["./check.sh"], 10, tree, 60, cwd=tree)
    assert r.returncode == 127, r
    assert "cannot run './check.sh' inside the candidates' sandbox: No such file or directory" in r.stderr_tail, r
