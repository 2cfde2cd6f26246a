"""Issue 25, "also wanted by users of the anchors": ``bisectbot launch RECIPE REF`` (mozregression's
``--launch``), ``recipe list`` / ``recipe init``, and ``--help`` examples that name recipes by name.

``launch`` runs through the real CLI with the local runner over a real git history of the
reference engine: the candidate is built as a probe builds it, its server answers on the printed
endpoint until Ctrl-C, then it is stopped and its worktree removed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from bisectbot.cli.demo_cmd import concrete_recipe
from bisectbot.demo.history import make_history
from bisectbot.shipped import shipped_dir, shipped_recipes

INSTALLED = os.environ.get("BISECTBOT_TEST_INSTALLED") == "1"


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("BISECTBOT_", "GITHUB_", "GH_")) or k == "BISECTBOT_TEST_INSTALLED"}


def bb(*args: str, cwd: Path, timeout: float = 300, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bisectbot", *args], cwd=cwd, env={**env(), **(extra_env or {})},
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    d = tmp_path_factory.mktemp("launch")
    hist = make_history(d / "engine-history", commits=8, seed=1)
    data = concrete_recipe(hist.path, d / "out")
    data["report"].pop("github", None)
    rec = d / "engine.yaml"
    rec.write_text(yaml.safe_dump(data, sort_keys=False))
    return d, hist, rec


def chat(base: str, text: str, timeout: float = 30) -> dict:
    body = json.dumps({"model": "demo/engine-7b", "max_tokens": 64, "temperature": 0,
                       "messages": [{"role": "user", "content": text}]}).encode()
    req = urllib.request.Request(f"{base}/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


@pytest.mark.slow
def test_launch_serves_one_candidate_until_ctrl_c(engine) -> None:
    d, hist, rec = engine
    state = d / "state"
    short = hist.shas[hist.good][:10]  # any name git resolves; the full SHA is what it prints
    p = subprocess.Popen([sys.executable, "-m", "bisectbot", "--state", str(state), "launch", str(rec), short],
                         cwd=d, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 240
        endpoint = None
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith("endpoint: "):
                endpoint = line.split(": ", 1)[1].strip()
            if line.startswith("probe: "):
                break
        assert endpoint and re.fullmatch(r"http://127\.0\.0\.1:\d+", endpoint), "\n".join(lines) + p.stderr.read()
        # the printed curl line is what a maintainer pastes; the server it names answers it
        curl = next(ln for ln in lines if ln.startswith("try: curl "))
        assert f"{endpoint}/v1/chat/completions" in curl
        reply = chat(endpoint, "What is 2+2? Answer in one sentence.")
        assert "4" in reply["choices"][0]["message"]["content"], reply
        time.sleep(1.0)
        assert p.poll() is None, "launch did not keep the server up"
        chat(endpoint, "still there?")
        worktrees = list((state / "worktrees").rglob("engine.json"))
        assert worktrees, "no prepared worktree while it serves"
        p.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err[-2000:]
    assert hist.shas[hist.good] in err and "as a probe would" in err, err[-2000:]
    assert "stopped; worktree and server cleaned up" in err
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        chat(endpoint, "gone?", timeout=5)
    assert not list((state / "worktrees").rglob("engine.json")), "the candidate's worktree was left behind"


def test_launch_of_an_unbuildable_candidate_fails_clearly(engine) -> None:
    d, hist, rec = engine
    assert hist.unbuildable, "the history plans unbuildable commits"
    bad = hist.shas[hist.unbuildable[0]]
    r = bb("--state", str(d / "state-unbuildable"), "launch", str(rec), bad, "--for", "1", cwd=d)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert f"cannot prepare {bad}" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = bb("--state", str(d / "state-unbuildable"), "launch", str(rec), "no-such-ref", cwd=d)
    assert r.returncode == 2 and "no-such-ref" in r.stderr, r.stderr[-2000:]


def test_recipe_list_shows_the_shipped_examples_from_anywhere(tmp_path) -> None:
    r = bb("--json", "recipe", "list", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    names = [x["name"] for x in doc["recipes"]]
    assert names and set(names) == {p.stem for p in shipped_recipes()}
    assert {"demo", "glm51-fp8-sparse-mla-prefill", "vllm-workspace-fix-retirement"} <= set(names)
    where = shipped_dir("recipes")
    assert where is not None and Path(doc["dir"]) == where
    if INSTALLED:  # package data of the wheel, not the checkout
        assert "site-packages" in where.parts, where
    for x in doc["recipes"]:
        assert Path(x["path"]).is_file() and Path(x["path"]).parent == where and x["description"], x
    text = bb("recipe", "list", cwd=tmp_path).stdout
    assert all(n in text for n in names)
    # every listed name is a RECIPE argument anywhere
    r = bb("recipe", "validate", *names, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.count(": ok") == len(names), r.stderr
    assert not list(tmp_path.iterdir()), "recipe list/validate wrote into the current directory"


def test_recipe_init_writes_what_validate_accepts(tmp_path, engine) -> None:
    d, hist, _ = engine
    r = bb("recipe", "init", "qwen3-prefill", "--model", "Qwen/Qwen3-8B", "--image",
           "rocm/vllm-dev:nightly_main_20260412", "--tp", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "qwen3.yaml").write_text(r.stdout)
    data = yaml.safe_load(r.stdout)
    # the header names no file the command did not write (new-user pass: it named qwen3-prefill.yaml
    # while the README's example redirects to qwen3.yaml)
    assert "qwen3-prefill.yaml" not in r.stdout.splitlines()[0], r.stdout.splitlines()[0]
    assert data["source"] == {"kind": "registry", "registry": "registry-1.docker.io", "repository": "rocm/vllm-dev",
                              "tag_pattern": "nightly_main_*", "hub_api": "https://hub.docker.com"}
    assert data["model"] == "Qwen/Qwen3-8B" and data["tp"] == 2 and data["regress"] == "garbage"
    v = bb("recipe", "validate", "qwen3.yaml", cwd=tmp_path)
    assert v.returncode == 0 and "qwen3.yaml: ok" in v.stdout, v.stderr
    # no profile mount here (cpu): the recipe mounts the Hugging Face cache itself
    assert data["server"]["mounts"] == ["~/.cache/huggingface:/root/.cache/huggingface"]

    # on the shipped MI355X profile, which mounts the runner's shared $HF_HOME there, the recipe mounts
    # nothing of its own (issue 41 item 1: its mount replaced the runner's cache) and validates ok
    r = bb("recipe", "init", "qwen3-mi355x", "--model", "Qwen/Qwen3-8B", "--image",
           "rocm/vllm-dev:nightly_main_20260412", "--runner", "mi355x", "--out", "mi.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "mounts" not in yaml.safe_load((tmp_path / "mi.yaml").read_text())["server"]
    v = bb("recipe", "validate", "mi.yaml", cwd=tmp_path)
    assert v.returncode == 0 and "mount" not in v.stdout + v.stderr, v.stdout + v.stderr
    # and the mount it used to write is refused by validate, naming the line, the field and the fix
    text = (tmp_path / "mi.yaml").read_text().replace(
        "  health_timeout_s: 1800", '  health_timeout_s: 1800\n  mounts: ["~/.cache/huggingface:/root/.cache/huggingface"]')
    (tmp_path / "mi2.yaml").write_text(text)
    v = bb("recipe", "validate", "mi2.yaml", cwd=tmp_path, extra_env={"HF_HOME": "/var/lib/bisectbot/hf"})
    assert v.returncode == 2 and "mi2.yaml:" in v.stderr and "server.mounts[0]" in v.stderr, v.stderr
    assert "mount clash" in v.stderr and "/var/lib/bisectbot/hf" in v.stderr and "remove this mount" in v.stderr

    # from a repository: the reference engine's history, planned over its real commits
    out = tmp_path / "engine.yaml"
    r = bb("recipe", "init", "my-engine", "--model", "demo/engine-7b", "--repo", str(hist.path), "--good", "v0.4.0",
           "--bad", "main", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    v = bb("recipe", "validate", str(out), cwd=tmp_path)
    assert v.returncode == 0, v.stderr
    plan = bb("--json", "run", str(out), "--dry-run", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["plan"][0].startswith(f"plan: {len(hist.shas)} candidates")
    # never over an existing file; a bad name is refused with what a name may hold
    again = bb("recipe", "init", "my-engine", "--model", "m", "--repo", str(hist.path), "--out", str(out), cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr, again.stderr
    bad = bb("recipe", "init", "My Engine", "--model", "m", "--repo", "x", cwd=tmp_path)
    assert bad.returncode == 2 and "lower case" in bad.stderr, bad.stderr
    both = bb("recipe", "init", "x", "--model", "m", "--repo", "x", "--image", "a/b:c", cwd=tmp_path)
    assert both.returncode == 2 and "one of --image" in both.stderr


def test_help_examples_name_recipes_by_name_not_checkout_paths() -> None:
    """No ``--help`` example names a recipe by a checkout path (``recipes/x.yaml`` is not there after
    ``pip install``); each recipe name it uses is a shipped recipe. (``dashboard --recipes DIR`` and
    ``recipe validate recipes/*.yaml`` name a directory of one's own recipes: not a shipped one.)"""
    from tests.installed.test_help import command_path, commands, examples, help_text, words

    shipped = {p.stem for p in shipped_recipes()}
    problems = []
    recipe_first = {("run",), ("launch",), ("bisect", "replay"), ("bisect", "plan"), ("round", "plan"),
                    ("round", "probe"), ("round", "import")}
    for path, _ in commands():
        for ex in examples(help_text(path)):
            for argv in words(ex):
                for i, a in enumerate(argv):
                    if re.search(r"(^|/)recipes/[^ ]+\.ya?ml$", a):
                        problems.append(f"{' '.join(path)}: {a} (a checkout path): {ex}")
                    if a == "--recipe" and i + 1 < len(argv):
                        name = argv[i + 1]
                        if "/" not in name and not name.endswith((".yaml", ".yml")) and name not in shipped:
                            problems.append(f"{' '.join(path)}: --recipe {name} is no shipped recipe: {ex}")
                cmd = command_path(argv)
                if cmd in recipe_first:
                    at = max(i for i, a in enumerate(argv) if a == cmd[-1])
                    name = argv[at + 1] if at + 1 < len(argv) else ""
                    if "/" not in name and not name.endswith((".yaml", ".yml")) and name not in shipped:
                        problems.append(f"{' '.join(path)}: RECIPE {name!r} is no shipped recipe: {ex}")
    assert not problems, "\n".join(problems)


ENGINE_PATCH = """\
--- a/engine.json
+++ b/engine.json
@@ -1,3 +1,3 @@
 {
-  "model": "stock-model",
+  "model": "patched-model",
   "threshold": 100000
"""


@pytest.mark.slow
def test_launch_applies_the_recipes_patch_stack_as_a_probe_does(tmp_path) -> None:
    """The patch stack is part of what launch prepares: the served model id comes from a file the
    recipe's required patch rewrites in the candidate's checkout (the source repository stays as it is)."""
    repo = tmp_path / "repo"
    (repo / "vllm").mkdir(parents=True)
    (repo / "vllm" / "engine.json").write_text('{\n  "model": "stock-model",\n  "threshold": 100000\n}\n')
    genv = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "engine config"]):
        subprocess.run(["git", *args], cwd=repo, env=genv, check=True, capture_output=True)
    pdir = tmp_path / "patches"
    (pdir / "model").mkdir(parents=True)
    (pdir / "model" / "v1.patch").write_text(ENGINE_PATCH)
    (pdir / "stack.yaml").write_text(yaml.safe_dump({"version": 1, "patches": [{
        "id": "model-name", "package": "vllm", "path": "engine.json", "required": True,
        "variants": [{"id": "v1", "diff": "model/v1.patch"}]}]}))
    rec = tmp_path / "patched.yaml"
    rec.write_text(yaml.safe_dump({
        "name": "patched-launch", "model": "patched-model", "source": {"kind": "git", "repo": str(repo)},
        "server": {"command": [sys.executable, "-m", "bisectbot.demo.engine", "--config", "vllm/engine.json",
                               "--port", "{port}"], "health_timeout_s": 60},
        "patches": ["model-name"], "report": {"dir": str(tmp_path / "out")}}))
    p = subprocess.Popen([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "state"), "--json", "launch",
                          str(rec), "main"], cwd=tmp_path, env={**env(), "BISECTBOT_PATCHES_DIR": str(pdir)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        text = ""  # --json: one document, written once the server is up
        while True:
            line = p.stdout.readline()
            assert line, p.stderr.read()[-2000:]
            text += line
            if line == "}\n":  # the document's closing brace (nested ones are indented)
                break
        doc = json.loads(text)
        assert doc["endpoint"] and doc["patches"][0]["id"] == "model-name", doc
        assert doc["patches"][0]["state"] == "applies", doc
        with urllib.request.urlopen(f"{doc['endpoint']}/v1/models", timeout=30) as resp:
            models = json.loads(resp.read())
        assert [m["id"] for m in models["data"]] == ["patched-model"], models
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err[-2000:]
    assert '"stock-model"' in (repo / "vllm" / "engine.json").read_text()  # the repository is untouched


@pytest.mark.parametrize("args", [[], ["--recipe", "demo"], ["0123456789ab"]])
def test_bisect_log_on_an_empty_state_directory_says_so_and_creates_nothing(tmp_path, args) -> None:
    """Issue 41, item 11: a read-only command on a state directory nothing has run in is a clear
    error (exit 2, the directory named) and leaves no empty ledger behind (with or without the
    directory itself, with a session id or a recipe name)."""
    for state in (tmp_path / "absent", tmp_path / "empty"):
        if state.name == "empty":
            state.mkdir()
        p = bb("--state", str(state), "bisect", "log", *args, cwd=tmp_path)
        assert p.returncode == 2, p.stdout + p.stderr
        assert f"no ledger in {state}" in p.stderr and "Traceback" not in p.stderr
        assert not (state / "ledger.sqlite3").exists()


@pytest.mark.parametrize("case", ["unknown-id", "missing-patches-dir", "diff-without-hunk"])
def test_dry_run_loads_the_patch_stack_as_run_does(tmp_path, case) -> None:
    """Issue 41, item 2: the docs tell users to check a new recipe with ``run --dry-run``; what ``run``
    refuses before its first probe (an unknown patch id, a $BISECTBOT_PATCHES_DIR that does not exist,
    a diff with no hunk) the plan refuses too: exit 2, the file and the field named."""
    import shutil

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True, capture_output=True)
    for i in range(3):
        (repo / "f").write_text(str(i))
        for cmd in (["add", "f"], ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", f"c{i}"]):
            subprocess.run(["git", "-C", str(repo), *cmd], check=True, capture_output=True)
    first = subprocess.run(["git", "-C", str(repo), "rev-list", "--max-parents=0", "HEAD"], capture_output=True,
                           text=True, check=True).stdout.strip()
    pid = "no-such-patch" if case == "unknown-id" else "aiter-chunkq-clamp"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: dry\nsource: {{kind: git, repo: {repo}}}\nreproducer: {{kind: command, command: [sh, -c, "
                      f"'exit 0']}}\nregress: command\npatches: [{pid}]\n")
    extra: dict[str, str] = {}
    if case == "missing-patches-dir":
        extra["BISECTBOT_PATCHES_DIR"] = str(tmp_path / "nowhere")
    elif case == "diff-without-hunk":
        pd = tmp_path / "pd"
        shutil.copytree(shipped_dir("patches"), pd)
        for d in (pd / "aiter-chunkq-clamp").iterdir():
            d.write_text("--- a/x.py\n+++ b/x.py\n")
        extra["BISECTBOT_PATCHES_DIR"] = str(pd)
    p = subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(tmp_path / "st"), "run", str(recipe),
                        "--good", first, "--bad", "HEAD", "--dry-run"], cwd=tmp_path, env={**env(), **extra},
                       capture_output=True, text=True, timeout=120)
    want = {"unknown-id": "unknown patch id 'no-such-patch'", "missing-patches-dir": "does not exist",
            "diff-without-hunk": "no unified-diff hunk found"}[case]
    assert p.returncode == 2 and want in p.stderr and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "plan" not in p.stdout.lower()


def test_dry_run_estimates_the_time_from_this_recipes_measured_probes(tmp_path) -> None:
    """Issue 40: the plan says how long, from the probes this ledger measured for the same recipe on
    this host and runner (the median), or that there is no estimate yet; another recipe's probes in the
    same ledger do not count."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True, capture_output=True)
    for i in range(9):
        if i >= 6:
            (repo / "bad").write_text("1")
        (repo / "f").write_text(str(i))
        for cmd in (["add", "-A"], ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", f"c{i}"]):
            subprocess.run(["git", "-C", str(repo), *cmd], check=True, capture_output=True)
    shas = subprocess.run(["git", "-C", str(repo), "rev-list", "--reverse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.split()
    state = tmp_path / "st"

    def recipe(name: str) -> Path:  # (another reproducer for the other recipe: its verdicts are no cache of this one's)
        f = tmp_path / f"{name}.yaml"
        f.write_text(f"name: {name}\nsource: {{kind: git, repo: {repo}}}\nreproducer: {{kind: command, command: "
                     f"[sh, -c, 'sleep 0.{3 if name == 'est' else 2}; test ! -f bad']}}\nregress: command\n"
                     f"bisect: {{good: {shas[0]}, bad: {shas[-1]}}}\nreport: {{dir: {tmp_path / name}}}\n")
        return f

    def bb_(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bisectbot", "--state", str(state), *args], cwd=tmp_path,
                              env=env(), capture_output=True, text=True, timeout=300)

    plan = bb_("run", str(recipe("est")), "--dry-run")
    assert plan.returncode == 0 and "time: no estimate: this ledger holds no probe of this recipe" in plan.stdout, plan
    other = bb_("run", str(recipe("other")), "--runner", "local")  # another recipe's probes: not this one's
    assert other.returncode == 0, other.stdout + other.stderr
    assert "time: no estimate" in bb_("run", str(recipe("est")), "--dry-run").stdout
    ran = bb_("run", str(recipe("est")), "--runner", "local")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    res = json.loads((tmp_path / "est" / "result.json").read_text())
    n = sum(1 for st in res["stages"] for p in st["probes"])
    line = next(ln for ln in bb_("run", str(recipe("est")), "--dry-run").stdout.splitlines() if ln.startswith("time:"))
    assert re.match(r"time: ~[\d.]+ s for ~\d+ probes at [\d.]+ s each \(the median of (\d+) probes of this "
                    r"recipe", line), line
    assert int(re.search(r"median of (\d+) probes", line).group(1)) == n, (line, n)
    # each probe slept 0.3 s: the line says tenths below 10 s (it said "at 0 s each" for a total of 2 s), takes no
    # reference's start into account where the recipe has none, and says probes the ledger holds take none
    assert float(re.search(r"at ([\d.]+) s each", line).group(1)) >= 0.3, line
    assert "reference" not in line and "probes the ledger already holds take none" in line, line
