"""Issue 36: a candidate's network is its own loopback (``bwrap --unshare-net``) unless the recipe
says ``server.network: host``; its server stays reachable by the bot through the bridge.

Through the installed CLI (``bisectbot run``, local runner, a real git history of the reference
engine): every build, server and command reproducer is a hostile wrapper that, before it runs the
engine's own script, connects to a TCP service this test starts on the host (``0.0.0.0``: reached
as 127.0.0.1 and as each non-loopback address of the host) and writes what it got into a loot
directory. With the default network no connection arrives and the bisection over the server
reproducer still names commit k; with ``network: host`` the connections arrive. Each test fails on
main 8153601 (candidates kept the host's network; no ``server.network`` field; no bridge).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

from bisectbot import sandbox
from bisectbot.models import Candidate, CandidateKind
from bisectbot.recipe import load_recipe
from bisectbot.reproduce.client import Client
from bisectbot.run.base import Prepared
from bisectbot.run.local import LocalRunner
from tests.bisect.conftest import make_engine_repo, run_cli, write_recipe

pytestmark = pytest.mark.skipif(not sandbox.enabled(), reason="BISECTBOT_SANDBOX=off: nothing to contain")

HOSTILE = """\
import os, socket, sys
TARGETS = {targets!r}
LOOT = {loot!r}
role = sys.argv[1]
got = []
for host, port in TARGETS:
    try:
        s = socket.create_connection((host, port), timeout=3)
        s.sendall(("HOSTILE " + role + " via " + host + "\\n").encode())
        s.close()
        got.append(host + " connected")
    except OSError as e:
        got.append(host + " " + type(e).__name__)
with open(os.path.join(LOOT, role + "-" + str(os.getpid()) + "-" + os.urandom(4).hex()), "w") as fh:
    fh.write("\\n".join(got))
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def host_addresses() -> list[str]:
    """The host's IPv4 addresses on interfaces other than ``lo``."""
    out = []
    for _, name in socket.if_nameindex():
        if name == "lo":
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
            addr = socket.inet_ntoa(raw[20:24])
            if not addr.startswith("127."):
                out.append(addr)
        except OSError:
            pass
        finally:
            s.close()
    return out


class HostService:
    """A TCP service of the host on ``0.0.0.0:port``, recording every line it is sent."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.settimeout(5)
                try:
                    self.lines.append(c.makefile().readline().strip() or "(connected, nothing sent)")
                except OSError:
                    self.lines.append("(connected)")

    def close(self) -> None:
        self.sock.close()


def hostile_night(tmp: Path, mode: str, network: str | None) -> tuple[str, list[str], list[str], object]:
    """``bisectbot run`` over an engine history (k=4 of 7) whose candidate processes are hostile:
    (stdout+stderr, lines the host service got, what the candidates saw, the repository)."""
    svc = HostService()
    try:
        shared = tmp / "shared"  # the sandbox's /tmp is its own: the script and the loot live in a writable path
        loot = shared / "loot"
        loot.mkdir(parents=True)
        targets = [("127.0.0.1", svc.port)] + [(a, svc.port) for a in host_addresses()]
        script = shared / "hostile_net.py"
        script.write_text(HOSTILE.format(targets=targets, loot=str(loot)))
        repo = make_engine_repo(tmp / "repo", n=7, k=4)
        rec = write_recipe(tmp / "r.yaml", repo, tmp / "out", mode=mode)
        data = yaml.safe_load(rec.read_text())
        py = sys.executable
        srv = data["server"]
        srv["build_command"] = [py, str(script), "build", *srv["build_command"][1:]]
        srv["command"] = [py, str(script), "server", *srv["command"][1:]]
        if mode == "command":
            data["reproducer"]["command"] = [py, str(script), "reproducer", *data["reproducer"]["command"][1:]]
        if network:
            srv["network"] = network
        rec.write_text(yaml.safe_dump(data, sort_keys=False))
        p = run_cli("--state", str(tmp / "state"), "run", str(rec), "--out", str(tmp / "out"),
                    env={"BISECTBOT_SANDBOX_WRITABLE": str(shared), "ENGINE_STARTS": "/dev/null"})
        seen = [f.name.split("-")[0] + ": " + f.read_text().replace("\n", "; ") for f in sorted(loot.iterdir())]
        return p.stdout + p.stderr, list(svc.lines), seen, (p, repo, tmp / "out")
    finally:
        svc.close()


def _culprit(run: object) -> None:
    p, repo, out = run  # type: ignore[misc]
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "culprit" and res["stages"][-1]["first_bad"]["ref"] == repo.shas[4], res["status"]


def test_server_candidate_reaches_no_host_service_and_the_bisection_still_works(tmp_path: Path) -> None:
    # default network: build and server candidates get their own lo; the bot reaches the server
    # through the bridge (health checks and every request of the prefill reproducer)
    log, lines, seen, run = hostile_night(tmp_path, "prefill", None)
    _culprit(run)
    roles = {s.split(":")[0] for s in seen}
    assert roles == {"build", "server"}, (roles, log[-2000:])  # the hostile code did run, every time
    assert lines == [], f"a candidate reached a TCP service of the host: {lines}"
    assert not any(" connected" in s for s in seen), seen


def test_command_reproducer_reaches_no_host_service(tmp_path: Path) -> None:
    log, lines, seen, run = hostile_night(tmp_path, "command", None)
    _culprit(run)
    assert {s.split(":")[0] for s in seen} == {"build", "reproducer"}, (seen, log[-2000:])
    assert lines == [], f"a candidate reached a TCP service of the host: {lines}"


def test_network_host_opens_the_hosts_network(tmp_path: Path) -> None:
    # the recipe's opt-in: the same candidates reach the service, and the bisection still works
    log, lines, seen, run = hostile_night(tmp_path, "prefill", "host")
    _culprit(run)
    assert any(ln.startswith("HOSTILE build via 127.0.0.1") for ln in lines), (lines, seen, log[-2000:])
    assert any(ln.startswith("HOSTILE server via 127.0.0.1") for ln in lines), (lines, seen)
    for addr in host_addresses():
        assert any(ln.endswith(f"via {addr}") for ln in lines), (addr, lines)


def test_recipe_rejects_another_network(tmp_path: Path) -> None:
    repo = make_engine_repo(tmp_path / "repo", n=2, k=1)
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", server={"network": "bridge"})
    p = run_cli("recipe", "validate", str(rec))
    assert p.returncode != 0 and "network" in (p.stdout + p.stderr), p.stdout + p.stderr
    ok = write_recipe(tmp_path / "ok.yaml", repo, tmp_path / "out", server={"network": "host"})
    assert load_recipe(ok).server.network == "host"
    assert load_recipe(write_recipe(tmp_path / "d.yaml", repo, tmp_path / "out")).server.network == "loopback"


# --------------------------------------------------------------------------- the bridge itself


def _forwarder_pids(port: int) -> list[int]:
    """Host pids of the forwarders inside the sandbox serving ``port`` (their command line names
    the bridge's socket and the port)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"{sandbox.BRIDGE_DIR}/{sandbox.ServerBridge.SOCKET}".encode() in argv and str(port).encode() in argv:
            out.append(int(d.name))
    return out


@pytest.fixture
def served(tmp_path: Path):
    repo = make_engine_repo(tmp_path / "repo", n=2, k=1)
    os.environ.setdefault("ENGINE_STARTS", "/dev/null")
    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out"))
    r = LocalRunner(recipe, {"engine": repo.path}, workdir=tmp_path / "wt")
    prepared = r.prepare(Candidate(CandidateKind.COMMIT, repo.shas[0], "c0", "engine"))
    assert isinstance(prepared, Prepared)
    try:
        yield r, prepared
    finally:
        r.release(prepared)


def test_a_dead_forwarder_is_server_trouble_never_a_reply(served) -> None:
    r, prepared = served
    with r.server(prepared) as srv:
        client = Client(srv.base_url, timeout_s=10, retries=1, retry_wait_s=0.1)
        assert client.health()
        ok = client.chat([{"role": "user", "content": "hello there"}], max_tokens=8)
        assert ok.error is None and ok.content, ok
        port = int(srv.base_url.rsplit(":", 1)[1])
        pids = _forwarder_pids(port)
        assert pids, "no forwarder inside the sandbox"
        killed = 0
        for pid in pids:  # one of them may be a fork already gone (the wrapper's intermediate child)
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        assert killed, pids
        time.sleep(0.3)
        assert not client.health()
        dead = client.chat([{"role": "user", "content": "hello again"}], max_tokens=8)
        assert dead.error_kind == "connection" and not dead.content, dead
        with pytest.raises(requests.ConnectionError):
            requests.get(srv.base_url + "/health", timeout=5)


def test_bridge_follows_no_link_a_candidate_plants(served, tmp_path: Path) -> None:
    # the candidate owns the bridge directory: a symbolic link in place of its socket must not
    # lead the bot's requests to another socket of the host
    r, prepared = served
    other = socket.socket(socket.AF_UNIX)
    other_path = tempfile.mktemp(prefix="bb-host-", suffix=".sock", dir="/tmp")
    other.bind(other_path)
    other.listen()
    other.settimeout(1)
    try:
        with r.server(prepared) as srv:
            assert requests.get(srv.base_url + "/health", timeout=5).status_code == 200
            socks = [p for p in Path(tempfile.gettempdir()).glob("bisectbot-net-*/server.sock")
                     if stat.S_ISSOCK(p.lstat().st_mode)]
            assert len(socks) >= 1
            for s in socks:
                s.unlink()
                s.symlink_to(other_path)
            with pytest.raises(requests.ConnectionError):
                requests.get(srv.base_url + "/health", timeout=5)
            with pytest.raises(socket.timeout):
                other.accept()
    finally:
        other.close()
        os.unlink(other_path)
