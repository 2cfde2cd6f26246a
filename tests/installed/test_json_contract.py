"""One JSON contract (issue 14): with ``--json`` -- before or after the subcommand -- every command
writes exactly one JSON document to stdout, on success and on error
(``{"error": {"kind", "message"}, "exit_code"}``); progress goes to stderr. Network failures:
DNS failures and refused connections fail within seconds with exit code 5 ("upstream
unreachable"), transient errors are retried visibly, and a dry run works offline from the ledger."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GLM = ROOT / "recipes" / "glm51-fp8-sparse-mla-prefill.yaml"
EXIT_UNREACHABLE = 5


def bb(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "BISECTBOT_GITHUB_TOKEN")}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=timeout)


def one_document(r: subprocess.CompletedProcess) -> object:
    """stdout is exactly one JSON document; an error document has the contract's shape and exit code."""
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        raise AssertionError(f"stdout is not one JSON document ({e}):\n{r.stdout[:2000]}\nstderr:\n{r.stderr[-2000:]}") from None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):  # (a probe result has an "error" text)
        assert set(doc) == {"error", "exit_code"}, doc
        assert set(doc["error"]) == {"kind", "message"}, doc
        assert doc["error"]["kind"] and doc["error"]["message"], doc
        assert doc["exit_code"] == r.returncode != 0, (doc, r.returncode)
    return doc


@pytest.fixture
def history(tmp_path):
    """A small engine history and a git recipe over it (the demo's, made concrete)."""
    from bisectbot.demo.history import make_history

    hist = make_history(tmp_path / "engine-history", commits=8, seed=1)
    data = yaml.safe_load((ROOT / "recipes" / "demo.yaml").read_text())
    data["source"]["repo"] = str(hist.path)
    data["report"] = {"dir": str(tmp_path / "out")}
    rec = tmp_path / "demo.yaml"
    rec.write_text(yaml.safe_dump(data))
    return rec


def offline_recipe(tmp_path: Path) -> Path:
    """The GLM recipe pointed at a registry that refuses connections (127.0.0.1:1)."""
    data = yaml.safe_load(GLM.read_text())
    data["source"] = {"kind": "registry", "registry": "127.0.0.1:1", "repository": "rocm/vllm-dev",
                      "tag_pattern": "nightly_main_*", "insecure": True}
    p = tmp_path / "offline.yaml"
    p.write_text(yaml.safe_dump(data))
    # next to it, the checkout's stack (the recipe names patches) -- found by the lookup order
    return p


def test_every_subcommand_writes_one_json_document(tmp_path, history):
    state = tmp_path / "state"
    empty = tmp_path / "empty"
    empty.mkdir()
    result = tmp_path / "nope.json"
    cases: list[tuple[list[str], set[int]]] = [
        (["patches", "list"], {0}),
        (["patches", "check", "--source", str(empty)], {0}),
        (["patches", "apply", "--source", str(empty)], {0}),
        (["recipe", "validate", str(GLM), str(history)], {0}),
        (["recipe", "validate", str(tmp_path / "missing.yaml")], {2}),
        (["recipe", "schema"], {0}),
        (["recipe", "list"], {0}),
        (["recipe", "init", "x", "--model", "m", "--repo", str(tmp_path / "nowhere")], {0}),
        (["launch", str(history), "no-such-ref"], {2}),
        (["runner", "check", "--profile", str(ROOT / "runners" / "cpu.yaml")], {0, 1}),
        (["run", str(history), "--dry-run"], {0}),
        (["run", str(tmp_path / "missing.yaml")], {2}),
        (["bisect", "plan", str(history)], {0}),
        (["bisect", "log"], {2}),
        (["bisect", "replay", str(history), str(tmp_path / "no-log.txt")], {2}),
        (["probe", "--endpoint", "http://127.0.0.1:1", "--sizes", "100"], {4}),
        (["nightlies", "list", "--registry", "127.0.0.1:1", "--repository", "a/b", "--insecure"], {EXIT_UNREACHABLE}),
        (["nightlies", "record", "--registry", "127.0.0.1:1", "--repository", "a/b", "--insecure"],
         {EXIT_UNREACHABLE}),
        (["nightlies", "show", "127.0.0.1:1/a/b:nope"], {1, 2, EXIT_UNREACHABLE}),
        (["nightlies", "diff", "127.0.0.1:1/a/b:x", "127.0.0.1:1/a/b:y"], {1, 2, EXIT_UNREACHABLE}),
        (["build", "--recipe", str(history), "--base", "127.0.0.1:1/a/b:nope"], {1, 2, EXIT_UNREACHABLE}),
        (["report", "render", str(result)], {2}),
        (["report", "file", str(result), "--repo", "o/r"], {2}),
        (["report", "commands", "--repo", "o/r", "--api-url", "http://127.0.0.1:1"], {1, 2, EXIT_UNREACHABLE}),
        (["round", "import", str(history), "--session", "nope", str(result)], {2}),
        (["dashboard", "--out", str(tmp_path / "site")], {0}),
        (["try", str(history), "--patch", str(tmp_path / "missing.diff")], {2}),
        (["report", "try-reply", str(tmp_path / "missing.json"), "--recipe", str(history), "--issue", "1",
          "--comment", "2"], {2}),
        (["no-such-command"], {2}),
        (["run", "--no-such-option"], {2}),
    ]
    seen = set()
    for i, (args, codes) in enumerate(cases):
        # --json before the subcommand on even cases, at the end on odd ones
        argv = ["--state", str(state), "--json", *args] if i % 2 == 0 else ["--state", str(state), *args, "--json"]
        r = bb(*argv, cwd=empty, timeout=180)
        doc = one_document(r)
        assert r.returncode in codes, (args, r.returncode, r.stdout[-1500:], r.stderr[-1500:])
        seen.add(args[0])
    from bisectbot.cli import cli

    assert set(cli.commands) - {"demo"} <= seen | {"demo"}, set(cli.commands) - seen
    assert doc  # noqa: F821 (last one)


def test_json_after_the_subcommand_equals_before(tmp_path, history):
    a = bb("--json", "bisect", "plan", str(history), cwd=tmp_path)
    b = bb("bisect", "plan", str(history), "--json", cwd=tmp_path)
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    da, db = one_document(a), one_document(b)
    assert da == db
    assert da["kind"] == "range" and len(da["candidates"]) == 8 and da["plan"][0].startswith("plan: 8 candidates")
    # the plan's time line as data (issue 40, new-user pass): nothing measured yet, so no seconds
    est = da["estimate"]
    assert est["probes"] > 0 and est["per_probe_s"] is None and est["total_s"] is None and est["measured"] == 0, est


@pytest.mark.slow
def test_json_demo_prints_one_document(tmp_path):
    r = bb("--json", "demo", "--no-keep", "--out", str(tmp_path / "out"), cwd=tmp_path, timeout=600)
    doc = one_document(r)
    assert r.returncode == 0, r.stderr[-3000:]
    assert doc["demo"]["ok"] is True and doc["result"]["status"] == "culprit" and doc["exit_code"] == 0
    assert "demo: found the planted regression" in r.stderr  # the human lines went to stderr


def test_probe_dead_endpoint_exits_4_with_one_document(tmp_path):
    r = bb("probe", "--endpoint", "http://127.0.0.1:1", "--json", cwd=tmp_path)
    doc = one_document(r)
    assert r.returncode == 4 and doc["status"] == "error"


# ----------------------------------------------------------------------------- network failures

@pytest.mark.parametrize("registry", ["127.0.0.1:1", "no-such-host.invalid"])
def test_unreachable_registry_fails_within_seconds_with_exit_5(tmp_path, registry):
    # "within seconds" is a hang bound (the subprocess timeout), not a speed target: the
    # behaviour under test is that nothing is retried, which the stderr check below asserts
    r = bb("--state", str(tmp_path / "s"), "--json", "nightlies", "list", "--registry", registry,
           "--repository", "a/b", "--insecure", cwd=tmp_path, timeout=90)
    doc = one_document(r)
    assert r.returncode == EXIT_UNREACHABLE, r.stderr
    assert doc["error"]["kind"] == "upstream-unreachable"
    reason = "connection refused" if registry.startswith("127.") else "name resolution failed"
    assert reason in doc["error"]["message"]
    assert "retrying" not in r.stderr  # nothing to retry: no silent (or loud) five attempts


@pytest.mark.parametrize("image", ["no-such-host.invalid/rocm/vllm-dev:nightly_main_20260412",
                                   "127.0.0.1:1/bisectbot-fixrepro/none:nightly_main_20260412"])
def test_unreachable_registry_is_exit_5_for_nightlies_show(tmp_path, image):
    # newuser (log 20:59): offline 'nightlies show rocm/vllm-dev:...' exited 1 with Docker's raw
    # 'dial tcp: lookup ... no such host'; the real Docker daemon pulls here (Go's error texts)
    r = bb("--state", str(tmp_path / "s"), "--json", "nightlies", "show", image, cwd=tmp_path, timeout=120)
    doc = one_document(r)
    assert r.returncode == EXIT_UNREACHABLE, (r.stdout, r.stderr)
    assert doc["error"]["kind"] == "upstream-unreachable"
    reason = "connection refused" if image.startswith("127.") else "name resolution failed"
    assert reason in doc["error"]["message"] and "dial tcp" not in doc["error"]["message"]


def test_top_level_help_lists_every_exit_code():
    import re

    from bisectbot import errors

    r = bb("--help", cwd=ROOT)
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_") and isinstance(v, int)}
    listed = {int(m) for m in re.findall(r"^\s+(\d+)\s+\S", r.stdout.split("Exit codes:")[1].split("\n\n")[0], re.M)}
    assert codes == listed, (sorted(codes), sorted(listed))
    assert {0, 1, 2, 3, 4, 5, 6, 130} <= codes


def test_unreachable_upstream_is_exit_5_for_run_and_bisect_plan(tmp_path):
    rec = offline_recipe(tmp_path)
    for args in (["run", str(rec), "--dry-run"], ["bisect", "plan", str(rec)],
                 ["run", str(rec), "--dry-run", "--good", "nightly_main_20260401", "--bad", "nightly_main_20260403"]):
        r = bb("--state", str(tmp_path / "empty-state"), *args, cwd=tmp_path)
        assert r.returncode == EXIT_UNREACHABLE, (args, r.stdout, r.stderr)
        assert "unreachable" in r.stderr


def test_dry_run_works_offline_from_the_ledger(tmp_path):
    from bisectbot.ledger import Ledger
    from bisectbot.sources.registry import TagInfo, record

    state = tmp_path / "state"
    led = Ledger(state)
    tags = [f"nightly_main_202604{d:02d}" for d in range(1, 7)]
    record(led, [TagInfo("rocm/vllm-dev", t, "sha256:" + f"{i:064x}", f"2026-04-{i + 1:02d}T00:00:00Z")
                 for i, t in enumerate(tags)])
    led.close()
    rec = offline_recipe(tmp_path)
    r = bb("--state", str(state), "--json", "run", str(rec), "--dry-run", "--good", tags[0], "--bad", tags[-1],
           cwd=tmp_path)
    doc = one_document(r)
    assert r.returncode == 0, r.stderr
    assert [c["ref"] for c in doc["candidates"]][0] in (tags[0], "sha256:" + f"{0:064x}") or doc["candidates"]
    assert len(doc["candidates"]) == 6
    assert "ledger" in r.stderr  # it says where the tags came from


class _Flaky(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):  # noqa: N802
        type(self).hits += 1
        if type(self).hits <= 2:
            self.send_response(503)
            self.send_header("Retry-After", "1")
            self.end_headers()
            return
        body = json.dumps({"name": "a/b", "tags": ["nightly_1", "nightly_2"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, *a):
        pass


def test_transient_errors_are_retried_visibly(tmp_path):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        r = bb("--state", str(tmp_path / "s"), "nightlies", "list", "--registry", f"127.0.0.1:{srv.server_port}",
               "--repository", "a/b", "--pattern", "nightly_*", "--insecure", cwd=tmp_path)
    finally:
        srv.shutdown()
    assert "retrying 2/5 in 1 s" in r.stderr, r.stderr
    assert "retrying 3/5 in 1 s" in r.stderr, r.stderr


class _Busy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def test_github_unreachable_is_exit_5_at_once_and_retries_are_visible(tmp_path, caplog, monkeypatch):
    import logging

    monkeypatch.setenv("BISECTBOT_BOT_LOGIN", "bot")
    from bisectbot.errors import GitHubError, UpstreamUnreachable
    from bisectbot.recipe import GitHubTarget
    from bisectbot.report.github import GitHubClient

    env = {"GITHUB_TOKEN": "x" * 20, "BISECTBOT_BOT_LOGIN": "bot"}
    for url, reason in (("http://127.0.0.1:1", "connection refused"), ("http://no-such-host.invalid",
                                                                      "name resolution failed")):
        # "at once" means no retry loop (asserted on stderr); the subprocess timeout only bounds a hang
        r = bb("--json", "report", "commands", "--repo", "o/r", "--api-url", url, cwd=tmp_path, env=env,
               timeout=90)
        doc = one_document(r)
        assert r.returncode == EXIT_UNREACHABLE and doc["error"]["kind"] == "upstream-unreachable", r.stderr
        assert reason in doc["error"]["message"]
        assert "retrying" not in r.stderr
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        client = GitHubClient(GitHubTarget(repo="o/r", api_url=f"http://127.0.0.1:{srv.server_port}"), "t" * 20,
                              retries=2, backoff_factor=0.01)
        with caplog.at_level(logging.WARNING), pytest.raises((GitHubError, UpstreamUnreachable)):
            client.repo  # noqa: B018
    finally:
        srv.shutdown()
    text = caplog.text
    assert "HTTP 502; retrying 2/3" in text and "HTTP 502; retrying 3/3" in text, text
