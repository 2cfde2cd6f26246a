"""Every reply of a remote service read within time and size bounds, whatever client library reads
it (hostile pass of issue 41, after the GitHub transport): the registry client and the package
index (``pypi_simple``) read through :class:`bisectbot.bounded.LimitedAdapter`.

Kind: *a client that reads a remote reply whole, bounded only per read*. Parameters: the service
(an OCI registry, a PEP 503/691 index), the shape (a gzip bomb: ~1 MB on the wire, 1 GiB decoded;
a body that dribbles a byte a second), and which process reads it (the installed CLI, its own peak
RSS; the client in-process with a short deadline for the time bound).
"""

from __future__ import annotations

import socket
import time
import zlib

import pytest

from tests.hostile.rawserver import cli_with_rusage, hostile

pytestmark = [pytest.mark.slow]

def _gzip_bomb(decoded: int) -> bytes:
    """``decoded`` bytes of JSON (a list of spaces), gzip-compressed a MiB at a time (the test
    process never holds the decoded size: a forked CLI would inherit it in its peak RSS)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    out = [z.compress(b"[")]
    block = b" " * (1 << 20)
    for _ in range(decoded >> 20):
        out.append(z.compress(block))
    out.append(z.compress(b"]") + z.flush())
    return b"".join(out)


_BOMB = _gzip_bomb(1 << 30)  # 1 GiB of JSON, ~1 MB on the wire


def bomb(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                 b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(_BOMB) + _BOMB)


def dribble(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[")
    for _ in range(1000):
        time.sleep(0.5)
        conn.sendall(b" ")


@pytest.mark.parametrize("service", ["registry", "index"])
def test_a_gzip_bomb_stops_at_the_cap_in_the_installed_cli(service: str) -> None:
    with hostile(bomb) as (url, arrivals):
        host = url.split("//", 1)[1]
        args = (["nightlies", "list", "--registry", host, "--insecure", "--repository", "a/b"] if service == "registry"
                else ["patches", "check", "--pypi", "vllm==0.19.1", "--index-url", f"{url}/simple/"])
        code, err, wall, rss_kib = cli_with_rusage(args, timeout=240)
    assert code != 0 and "internal error" not in err, (code, err[-2000:])
    assert "byte limit" in err, err[-2000:]
    assert len(arrivals) == 1, arrivals  # a refused size is not asked again
    assert rss_kib < 400 * 1024, rss_kib  # KiB (the whole 1 GiB decoded took 2.1 GB)


def test_a_dribbling_registry_reply_ends_at_the_deadline(monkeypatch) -> None:
    from bisectbot.errors import RegistryError
    from bisectbot.sources import registry

    monkeypatch.setattr(registry, "REPLY_DEADLINE_S", 2.0)
    with hostile(dribble) as (url, arrivals):
        client = registry.RegistryClient(url.split("//", 1)[1], insecure=True, max_attempts=2, sleep=lambda s: None)
        t0 = time.monotonic()
        with pytest.raises(RegistryError, match="no complete reply within 2 s"):
            client.tags("a/b")
        wall = time.monotonic() - t0
    assert wall < 2 * 2.0 + 2, wall
    assert len(arrivals) == 2, arrivals


def test_a_dribbling_index_page_ends_at_the_deadline(monkeypatch) -> None:
    from bisectbot.sources import releases

    monkeypatch.setattr(releases, "TIMEOUT_S", 2.0)
    with hostile(dribble) as (url, arrivals):
        t0 = time.monotonic()
        with pytest.raises(releases.SourceError, match="no complete reply within 2 s"):
            releases._project_page.__wrapped__("vllm", f"{url}/simple/")  # one attempt: no retry waits
        wall = time.monotonic() - t0
    assert wall < 2.0 + 2, wall
