"""``bisectbot report test-request`` and ``report try-reply`` (issue 42): a maintainer's ``/bisectbot test``
read from the contract-validated fake GitHub and resolved into a diff pinned by SHA, running no candidate
(the act test runs them through try.yml; these are the refusals and the kinds of argument, cheaply).

Kind: *a comment that asks the bot to fetch or run something*. Parameters an input fixes, each varied:
who wrote it (a maintainer, a stranger), where (the bot's issue, someone else's), the argument's kind
(ref, pull request with and without sha=, patch URL), the URL's shape (https, http to a non-loopback
host, a query, a redirect), the patch host's reply (too large, an error), and whether a token could reach
the patch host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.night.conftest import GH_REPO, TOKEN, fake_github  # noqa: F401

COMPONENT = "vllm-project/vllm"


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "BISECTBOT_GITHUB_TOKEN")}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "bisectbot", "--json", "report", *args], capture_output=True,
                          text=True, env=e, timeout=120)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def world(fake_github, tmp_path: Path):  # noqa: F811
    src = tmp_path / "vllm-src"
    (src / "vllm").mkdir(parents=True)
    _git(src, "init", "-q", "-b", "main")
    (src / "vllm" / "a.py").write_text("x = 1\n")
    _git(src, "add", "-A")
    _git(src, "commit", "-q", "-m", "base")
    _git(src, "checkout", "-q", "-b", "fix")
    (src / "vllm" / "a.py").write_text("x = 2\n")
    _git(src, "commit", "-q", "-am", "fix")
    _git(src, "update-ref", "refs/pull/3/head", "HEAD")
    _git(src, "checkout", "-q", "main")
    fake_github.add_repo(COMPONENT, git=src)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "r", "source": {"kind": "registry", "registry": "127.0.0.1:5000", "repository": "a/b"},
        "bisect": {"components": {"vllm": {"repo": f"https://github.com/{COMPONENT}"}}},
        "report": {"github": {"repo": GH_REPO, "api_url": fake_github.base_url}}}))
    issue = fake_github.add_issue(GH_REPO, "[bisectbot] r: garbage", "x", labels=["bisectbot"],
                                  author=fake_github.bot_login)
    env = {"BISECTBOT_GITHUB_TOKEN": TOKEN, "BISECTBOT_BOT_LOGIN": fake_github.bot_login}
    return {"recipe": recipe, "issue": issue["number"], "env": env, "src": src, "fake": fake_github}


def _ask(world, tmp_path: Path, body: str, author: str = "maint", association: str = "MEMBER", issue: int = 0,
         name: str = "out"):
    fake = world["fake"]
    n = issue or world["issue"]
    c = fake.add_comment(GH_REPO, n, body, author=author, association=association)
    out = tmp_path / name
    p = _cli("test-request", "--recipe", str(world["recipe"]), "--issue", str(n), "--comment", str(c["id"]),
             "--out", str(out), env=world["env"])
    return p, out, c


def test_a_ref_and_a_pull_request_resolve_to_diffs_pinned_by_sha(world, tmp_path: Path) -> None:
    fix = _git(world["src"], "rev-parse", "fix")
    p, out, _ = _ask(world, tmp_path, "/bisectbot test fix", name="ref")
    assert p.returncode == 0, p.stderr
    req = json.loads((out / "request.json").read_text())
    assert req["kind"] == "ref" and req["sha"] == fix and req["base"] == "main"
    assert "+x = 2" in (out / "change.diff").read_text()
    p, out, _ = _ask(world, tmp_path, "/bisectbot test #3", name="pr")
    assert p.returncode == 0 and json.loads((out / "request.json").read_text())["sha"] == fix, p.stderr


def test_a_patch_url_is_fetched_without_the_token(world, tmp_path: Path, httpserver, monkeypatch) -> None:
    diff = "--- a/vllm/a.py\n+++ b/vllm/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 3\n"
    seen: list[dict[str, str]] = []

    def handler(request):
        from werkzeug import Response

        seen.append(dict(request.headers))
        return Response(diff, content_type="text/x-diff")

    httpserver.expect_request("/fix.diff").respond_with_handler(handler)
    url = httpserver.url_for("/fix.diff").replace("localhost", "127.0.0.1")
    netrc = tmp_path / "netrc"  # hostile pass: a netrc credential for the host went out with the request
    netrc.write_text("machine 127.0.0.1 login bot password SECRET_NETRC_123\ndefault login x password SECRET_DEFAULT\n")
    netrc.chmod(0o600)
    world["env"]["NETRC"] = str(netrc)
    p, out, _ = _ask(world, tmp_path, f"/bisectbot test {url}")
    assert p.returncode == 0, p.stderr
    assert (out / "change.diff").read_text() == diff
    assert seen and not any(k.lower() == "authorization" for h in seen for k in h), seen
    assert TOKEN not in json.dumps(seen) and TOKEN not in (out / "request.json").read_text()


@pytest.mark.parametrize("body, why", [
    ("/bisectbot test http://example.com/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://example.com/fix.diff?x=1", "usage: /bisectbot test"),
    ("/bisectbot test https://example.com/fix.txt", "usage: /bisectbot test"),
    ("/bisectbot test main..evil", "usage: /bisectbot test"),
    ("/bisectbot test pr=3 sha=deadbeef", "usage: /bisectbot test"),
    ("/bisectbot test", "usage: /bisectbot test"),
    ("/bisectbot test https://10.0.0.1/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://169.254.169.254/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://localhost:8080/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://2130706433/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test HTTPS://example.com/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://0x7f.0.0.1/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://0xa9.0xfe.0xa9.0xfe/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://metadata.google.internal/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://kubernetes.default.svc/fix.diff", "usage: /bisectbot test"),
    ("/bisectbot test https://foo.localhost/fix.diff", "usage: /bisectbot test"),
])
def test_malformed_requests_are_refused_and_nothing_is_written(world, tmp_path: Path, body: str, why: str) -> None:
    p, out, _ = _ask(world, tmp_path, body)
    assert p.returncode != 0 and why in p.stdout + p.stderr, p.stdout + p.stderr
    assert not out.exists()


def test_a_stranger_or_an_issue_the_bot_did_not_file_is_refused(world, tmp_path: Path) -> None:
    p, out, _ = _ask(world, tmp_path, "/bisectbot test fix", author="drive-by", association="NONE")
    assert p.returncode != 0 and "not a maintainer" in p.stdout + p.stderr and not out.exists()
    p, out, _ = _ask(world, tmp_path, "/bisectbot test fix", author=world["fake"].bot_login, association="MEMBER",
                     name="own")
    assert p.returncode != 0 and "the bot's own" in p.stdout + p.stderr and not out.exists()
    other = world["fake"].add_issue(GH_REPO, "[bisectbot] r: planted", "x", author="someone")
    p, out, _ = _ask(world, tmp_path, "/bisectbot test fix", issue=other["number"])
    assert p.returncode != 0 and "not filed by the bot" in p.stdout + p.stderr and not out.exists()


def test_a_patch_host_that_redirects_or_sends_too_much_is_an_error(world, tmp_path: Path, httpserver) -> None:
    httpserver.expect_request("/moved.diff").respond_with_data("", status=302, headers={"Location": "http://x/"})
    httpserver.expect_request("/huge.diff").respond_with_data("+" * (9 * 1024 * 1024))
    for path, why in (("/moved.diff", "HTTP 302"), ("/huge.diff", "")):
        url = httpserver.url_for(path).replace("localhost", "127.0.0.1")
        p, out, _ = _ask(world, tmp_path, f"/bisectbot test {url}", name=path.strip("/"))
        assert p.returncode != 0 and why in p.stdout + p.stderr and not out.exists(), p.stdout + p.stderr


def test_the_answer_is_posted_once_to_a_maintainer(world, tmp_path: Path) -> None:
    fake = world["fake"]
    c = fake.add_comment(GH_REPO, world["issue"], "/bisectbot test fix", author="maint", association="MEMBER")
    doc = {"kind": "try", "answer": "partly", "words": "partly: the threshold moved from 3,000 to 5,000 prompt tokens",
           "candidate": {"ref": "sha256:x", "label": "nightly_main_20260504"}, "on_from": "the newest nightly",
           "session": "abc", "change": {"source": "ref fix", "sha256": "0" * 64, "files": ["vllm/a.py"]},
           "before": {"verdict": "bad", "threshold": [2990, 3010], "reason": "garbage"},
           "after": {"verdict": "bad", "threshold": [4990, 5010], "reason": "garbage"}, "prompts": []}
    f = tmp_path / "try.json"
    f.write_text(json.dumps(doc))
    args = ["try-reply", str(f), "--recipe", str(world["recipe"]), "--issue", str(world["issue"]),
            "--comment", str(c["id"])]
    p = _cli(*args, env=world["env"])
    assert p.returncode == 0 and json.loads(p.stdout)["action"] == "commented", p.stderr
    again = _cli(*args, env=world["env"])
    assert json.loads(again.stdout)["action"] == "unchanged", again.stderr
    bodies = [x["body"] for x in fake.comments_of(GH_REPO, world["issue"]) if f"bisectbot:ack={c['id']}" in x["body"]]
    assert len(bodies) == 1 and "**partly**" in bodies[0] and "3,000 to 5,000" in bodies[0]
