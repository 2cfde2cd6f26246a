"""Class 1 of issue 13: the bot's secrets never reach a candidate, and one redactor cleans every
text it stores or prints.

The bisection runs for real: a git history of the reference engine, the CLI in a subprocess, a
command reproducer that prints its whole environment on stdout and stderr and writes it to a file.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import zlib
from pathlib import Path

import yaml

from bisectbot.secrets import BASE_ENV, candidate_env, is_secret_name, redact, redact_data
from tests.bisect.conftest import make_engine_repo, run_cli, write_recipe

GH_TOKEN_VALUE = "ghp_HOSTILEtoken000111222333444555666777"
PLAIN_TOKEN = "plain-secret-with-no-known-shape-4242"  # only the redactor's knowledge can catch it
API_KEY = "sk-local-api-key-98765-abcdef"

DUMP_ENV = """\
import json, os, sys
env = dict(os.environ)
text = json.dumps(env, sort_keys=True)
print("ENV " + text)
print("ENV " + text, file=sys.stderr)
with open(os.environ["ENV_DUMP"], "a") as fh:
    fh.write(text + "\\n")
cfg = json.load(open("engine.json"))
sys.exit(1 if cfg["threshold"] < 10000 else 0)
"""


def _files_containing(root: Path, needle: str, skip: set[Path] = frozenset()) -> list[str]:
    hits = []
    raw = needle.encode()
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink() and p not in skip and raw in p.read_bytes():
            hits.append(str(p))
    return hits


def _ledger_text(state: Path) -> str:
    """Every cell of every table of the ledger(s) under ``state``, decompressed where it is zlib
    (probe rows are stored compressed: a byte scan of the file would not see a token in them)."""
    out = []
    dbs = list(state.rglob("*.sqlite3"))
    assert dbs, f"no ledger under {state}"
    for db in dbs:
        con = sqlite3.connect(db)
        try:
            for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'"):
                for row in con.execute(f'SELECT * FROM "{table}"'):
                    for cell in row:
                        if isinstance(cell, bytes):
                            try:
                                cell = zlib.decompress(cell)
                            except zlib.error:
                                pass
                            cell = cell.decode("utf-8", "replace")
                        out.append(str(cell))
        finally:
            con.close()
    return "\n".join(out)


def _bisect_with_env_dump(tmp_path: Path, extra_env: dict[str, str], **recipe_extra) -> tuple:
    repo = make_engine_repo(tmp_path / "repo", n=8, k=5)
    check = tmp_path / "dump_env.py"
    check.write_text(DUMP_ENV)
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out", mode="command", **recipe_extra)
    data = yaml.safe_load(rec.read_text())
    data["reproducer"]["command"] = [sys.executable, str(check)]
    data["env_passthrough"] = ["ENV_DUMP", *recipe_extra.get("env_passthrough", [])]
    rec.write_text(yaml.safe_dump(data, sort_keys=False))
    dump = tmp_path / "env-dump.jsonl"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {"ENV_DUMP": str(dump), "TMPDIR": str(tmpdir), "ENGINE_STARTS": "/dev/null", **extra_env}
    p = run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--out", str(tmp_path / "out"), env=env)
    return repo, p, dump


def test_token_reaches_no_candidate_and_no_output(tmp_path: Path) -> None:
    env = {"BISECTBOT_GITHUB_TOKEN": GH_TOKEN_VALUE, "GITHUB_TOKEN": PLAIN_TOKEN, "GH_TOKEN": PLAIN_TOKEN + "-gh",
           "BISECTBOT_API_KEY": API_KEY, "SOME_SERVICE_PASSWORD": "hunter2-hunter2"}
    repo, p, dump = _bisect_with_env_dump(tmp_path, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert repo.shas[5] in p.stdout
    envs = [json.loads(line) for line in dump.read_text().splitlines()]
    assert envs, "the reproducer never ran"
    for seen in envs:
        for name in env:
            assert name not in seen, f"{name} reached the candidate"
        assert "ENV_DUMP" in seen and "PATH" in seen  # passthrough and build basics do arrive
    ledger = _ledger_text(tmp_path / "state")
    assert repo.shas[5] in ledger and "ENV " in ledger  # the rows are read: the printed env is in them
    for secret in env.values():
        assert secret not in p.stdout + p.stderr
        assert secret not in dump.read_text()
        # outputs, report, result.json, logs, worktree leftovers, ledger (SQLite + WAL)
        assert _files_containing(tmp_path, secret) == []
        assert secret not in ledger


def test_passthrough_secret_reaches_the_reproducer_but_is_redacted_everywhere(tmp_path: Path) -> None:
    # a reproducer that needs a credential gets it by name; what it prints is still redacted
    secret = "vendor-credential-0123456789"
    repo, p, dump = _bisect_with_env_dump(tmp_path, {"VENDOR_API_TOKEN": secret},
                                          env_passthrough=["VENDOR_API_TOKEN"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert all(json.loads(line).get("VENDOR_API_TOKEN") == secret for line in dump.read_text().splitlines())
    assert secret not in p.stdout + p.stderr
    assert _files_containing(tmp_path, secret, skip={dump}) == []
    ledger = _ledger_text(tmp_path / "state")
    assert "VENDOR_API_TOKEN" in ledger and secret not in ledger
    result = (tmp_path / "out" / "result.json").read_text()
    assert "***" in result  # the printed environment is in the evidence, redacted


def test_candidate_env_is_an_allow_list() -> None:
    host = {"PATH": "/usr/bin", "HOME": "/root", "LC_ALL": "C", "GITHUB_TOKEN": "x" * 40, "AWS_SECRET_ACCESS_KEY": "y" * 30,
            "RANDOM_HOST_VAR": "1", "HTTPS_PROXY": "http://user:pw@proxy:3128", "NO_PROXY": "localhost",
            "ACTIONS_RUNTIME_TOKEN": "z" * 30}
    env = candidate_env({"HIP_VISIBLE_DEVICES": "0"}, {"VLLM_X": "1"}, None, environ=host, passthrough=["RANDOM_HOST_VAR"])
    assert env == {"PATH": "/usr/bin", "HOME": "/root", "LC_ALL": "C", "NO_PROXY": "localhost",
                   "RANDOM_HOST_VAR": "1", "HIP_VISIBLE_DEVICES": "0", "VLLM_X": "1"}
    assert not [n for n in BASE_ENV if is_secret_name(n)]


def test_redactor_knows_every_secret(monkeypatch) -> None:
    monkeypatch.setenv("GH_TOKEN", "gh-token-without-shape")
    monkeypatch.setenv("BISECTBOT_API_KEY", "apikey-without-shape")
    monkeypatch.setenv("MY_DEPLOY_PASSWORD", "deploy-pass-1234")
    text = ("token gh-token-without-shape key apikey-without-shape pw deploy-pass-1234 "
            "shape github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz "
            "Authorization: Bearer abc.def.ghi url https://bot:p4ssw0rd@example.com/x")
    out = redact(text)
    for s in ("gh-token-without-shape", "apikey-without-shape", "deploy-pass-1234", "github_pat_", "abc.def.ghi",
              "p4ssw0rd"):
        assert s not in out
    assert redact_data({"a": ["gh-token-without-shape", 3], "gh-token-without-shape": None}) == {"a": ["***", 3],
                                                                                               "***": None}
    # ordinary short values and names that merely contain a word are not secrets
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    assert redact("false positives") == "false positives"


def test_cli_errors_and_tracebacks_are_redacted(tmp_path: Path) -> None:
    # a recipe file whose *name* carries the token: the error line names the file, the token is masked
    secret = "ghp_" + "Q" * 36
    bad = tmp_path / f"{secret}.yaml"
    bad.write_text("name: [unclosed\n")
    p = run_cli("recipe", "validate", str(bad), env={"GITHUB_TOKEN": secret})
    assert p.returncode == 2
    assert secret not in p.stdout + p.stderr and "***" in p.stdout + p.stderr


def test_probe_command_reproducer_gets_the_allow_listed_environment(tmp_path: Path) -> None:
    # the same class through `probe --recipe` (no bisection): the command sees only what it is given
    dump = tmp_path / "env.jsonl"
    script = tmp_path / "dump.py"
    script.write_text("import json, os\nopen(os.environ['ENV_DUMP'], 'a').write(json.dumps(dict(os.environ)) + '\\n')\n")
    rec = tmp_path / "r.yaml"
    rec.write_text(yaml.safe_dump({
        "name": "envdump", "source": {"kind": "git", "repo": str(tmp_path)}, "env_passthrough": ["ENV_DUMP"],
        "reproducer": {"kind": "command", "command": [sys.executable, str(script)], "sizes": [1000],
                       "min_size": 1000, "max_size": 1000}, "regress": "command"}))
    p = run_cli("probe", "--recipe", str(rec), env={"ENV_DUMP": str(dump), "GITHUB_TOKEN": GH_TOKEN_VALUE,
                                                     "BISECTBOT_API_KEY": API_KEY})
    assert p.returncode == 0, p.stdout + p.stderr
    seen = json.loads(dump.read_text().splitlines()[0])
    assert "ENV_DUMP" in seen and "GITHUB_TOKEN" not in seen and "BISECTBOT_API_KEY" not in seen


def test_server_logs_are_redacted_as_they_stream(tmp_path: Path) -> None:
    # the prefill path: the candidate's *server* prints its environment into its log (an artifact)
    secret = "server-side-credential-55555"
    repo = make_engine_repo(tmp_path / "repo", n=6, k=3)
    rec = write_recipe(tmp_path / "r.yaml", repo, tmp_path / "out")
    data = yaml.safe_load(rec.read_text())
    wrapper = ("import os, sys, runpy, json; print('SERVER-ENV ' + json.dumps(dict(os.environ)), flush=True); "
               "sys.argv = ['serve.py'] + sys.argv[1:]; runpy.run_path('serve.py', run_name='__main__')")
    data["server"]["command"] = [sys.executable, "-c", wrapper, "--port", "{port}"]
    data["env_passthrough"] = [*data["env_passthrough"], "VENDOR_API_TOKEN"]
    rec.write_text(yaml.safe_dump(data, sort_keys=False))
    p = run_cli("--state", str(tmp_path / "state"), "run", str(rec), "--out", str(tmp_path / "out"),
                env={"VENDOR_API_TOKEN": secret, "GITHUB_TOKEN": GH_TOKEN_VALUE, "ENGINE_STARTS": "/dev/null",
                     "TMPDIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr
    logs = [f.read_text(errors="replace") for f in (tmp_path / "state").rglob("server-*.log")]
    assert logs and any("SERVER-ENV" in t and "VENDOR_API_TOKEN" in t for t in logs)
    assert not any(secret in t or "GITHUB_TOKEN" in t for t in logs)
    assert _files_containing(tmp_path, secret) == [] and _files_containing(tmp_path, GH_TOKEN_VALUE) == []


# ------------------------------------------------ attacker's inputs (log.md 20:56-21:01): more of class 1

def test_query_string_credentials_are_redacted() -> None:
    for url in ("http://127.0.0.1:1/?api_key=querysecret12345",
                "https://gw.example/openai/deployments/x/chat?api-version=2024&api-key=querysecret12345",
                "https://h/v1?access_token=querysecret12345&x=1",
                "https://h/v1?token=querysecret12345",
                "https://h/v1?foo=1&key=querysecret12345#frag",
                "https://bucket.s3/x?X-Amz-Signature=querysecret12345"):
        out = redact(f"could not reach {url}: refused")
        assert "querysecret12345" not in out, url
        assert "***" in out
    assert redact("https://h/v1?api-version=2024-02-01") == "https://h/v1?api-version=2024-02-01"


def test_percent_encoded_and_json_forms_of_a_known_secret_are_redacted(monkeypatch) -> None:
    monkeypatch.setenv("BISECTBOT_GITHUB_TOKEN", "s3cr3t+tok/en=XYZ123abc")
    for form in ("s3cr3t%2Btok%2Fen%3DXYZ123abc", "s3cr3t%2btok%2fen%3dXYZ123abc", "s3cr3t%2Btok/en%3DXYZ123abc"):
        assert "XYZ123abc" not in redact(f"GET /x?t={form} failed"), form
    from bisectbot.secrets import register_secret
    register_secret('runtime"sec ret\\77')
    assert redact("u=runtime%22sec%20ret%5C77 q=runtime%22sec+ret%5C77") == "u=*** q=***"
    assert redact(json.dumps({"k": 'runtime"sec ret\\77'})) == '{"k": "***"}'


def test_url_password_holding_an_at_sign_is_redacted() -> None:
    out = redact("clone https://u:pa@ss-secret-part@host/repo.git failed")
    assert "ss-secret-part" not in out and "pa@" not in out
    assert "host/repo.git" in out


def test_authorization_header_in_json_form_is_redacted() -> None:
    for text in ('{"Authorization": "Bearer hdrsecret-1234567"}', "{'authorization': 'token hdrsecret-1234567'}",
                 "Proxy-Authorization: Basic hdrsecret-1234567"):
        assert "hdrsecret-1234567" not in redact(text), text


def test_probe_endpoint_query_credential_is_not_printed() -> None:
    # the attacker's exact command: a dead server named by a URL with ?api_key=
    p = run_cli("--json", "probe", "--endpoint", "http://127.0.0.1:1/?api_key=querysecret12345", "--timeout", "2",
                "--sizes", "100", "--min-size", "50", "--max-size", "300", timeout=120)
    assert p.returncode != 0
    assert "querysecret12345" not in p.stdout + p.stderr
    assert "127.0.0.1:1" in p.stdout + p.stderr  # the error still names the endpoint


def test_pip_index_credentials_do_not_reach_candidates() -> None:
    host = {"PATH": "/usr/bin", "PIP_INDEX_URL": "https://user:pipsecretpw@pypi.corp/simple",
            "PIP_EXTRA_INDEX_URL": "https://a:pw2secret@x.corp/simple https://__token__@y.corp/simple?token=tksecret99"}
    env = candidate_env(environ=host)
    assert env["PIP_INDEX_URL"] == "https://pypi.corp/simple"
    assert "pw2secret" not in env["PIP_EXTRA_INDEX_URL"] and "__token__" not in env["PIP_EXTRA_INDEX_URL"]
    assert "tksecret99" not in env["PIP_EXTRA_INDEX_URL"]
    assert env["PIP_EXTRA_INDEX_URL"].startswith("https://x.corp/simple https://y.corp/simple")
    plain = {"PIP_INDEX_URL": "https://pypi.org/simple"}
    assert candidate_env(environ=plain) == plain


def test_secret_named_values_in_logs_are_redacted() -> None:
    # more of the kind: a server under test logs its own arguments (vLLM prints its non-default
    # args as a dict), a command line or a gateway header carries a key the bot never held
    cases = {
        "non-default args: {'model': '/m', 'api_key': 'sk-unknown-777', 'port': 8000}": "sk-unknown-777",
        '{"api_key": "sk-unk-888", "n": 1}': "sk-unk-888",
        "vllm serve /m --api-key sk-abc999 --port 8000": "sk-abc999",
        "--hf-token=hfshort12345": "hfshort12345",
        "X-Api-Key: abc123456": "abc123456",
        "client_secret='cs-1234567'": "cs-1234567",
    }
    for text, secret in cases.items():
        assert secret not in redact(text), text
    for benign in ('"max_tokens": 512', "max_tokens: 100", "tokenizer_mode=auto", "--tokenizer /m",
                   '{"prompt_tokens": 7, "completion_tokens": 9}'):
        assert redact(benign) == benign


def test_url_with_a_token_as_user_is_redacted() -> None:
    # more of the kind: index URLs carry a token as the whole user part (Gemfury, GitLab deploy tokens)
    out = redact("Looking in indexes: https://AbCdEf0123456789xyz@pypi.fury.io/acme/")
    assert "AbCdEf0123456789xyz" not in out and "pypi.fury.io/acme/" in out
    assert redact("ssh://git@github.com/o/r.git") == "ssh://git@github.com/o/r.git"  # a plain user name stays


def test_a_piece_of_a_known_secret_left_by_a_cut_is_redacted(monkeypatch) -> None:
    """Issue 41, item 11 (the kind: text cut before it was redacted, so the whole secret is no longer in
    it): a known secret cut at either edge of the text -- at the end, with or without an ellipsis or
    trailing space, at the start, at any cut length from MIN_FRAGMENT_LEN up -- is redacted; shorter
    pieces, and text that merely shares a common word with the secret, are left."""
    from bisectbot.secrets import MIN_FRAGMENT_LEN

    key = "zq" + "x7a9" * 12  # no token shape: only the known value can find it
    monkeypatch.setenv("BISECTBOT_API_KEY", key)
    for k in (MIN_FRAGMENT_LEN, 16, len(key) - 1):
        for tail in ("", "…", "...", " ", "… "):
            shown = redact(f"your key is Bearer {key[:k]}{tail}")
            assert key[:MIN_FRAGMENT_LEN] not in shown and shown.endswith(f"***{tail}"), (k, tail, shown)
        shown = redact(f"{key[-k:]} was the end of it")
        assert key[-MIN_FRAGMENT_LEN:] not in shown and shown.startswith("***"), (k, shown)
    assert redact(f"x {key[:MIN_FRAGMENT_LEN - 1]}") == f"x {key[:MIN_FRAGMENT_LEN - 1]}"
    assert redact("the zq key is fine") == "the zq key is fine"
    assert redact(f"a {key[:20]} b") == f"a {key[:20]} b"  # inside the text, not at a cut: not a cut piece
    shown = redact(f"reply: your key is {key[:30]}…; reason: repetition")  # a cut marked inside a longer line
    assert key[:MIN_FRAGMENT_LEN] not in shown and "***…; reason" in shown, shown


def test_a_known_secret_interrupted_by_invisible_characters_is_redacted(monkeypatch) -> None:
    """Issue 41, item 16 (the kind: characters that print as nothing, or as a line break, inside a
    secret hide it from a plain search): a line break (LF, CRLF), an ANSI colour or OSC sequence, a
    zero-width space, a byte-order mark or a soft hyphen inside the key, at any position, and the key's
    base64 wrapped at 76 columns (as ``base64`` prints it) are all redacted, the interrupting characters
    with it; the text around it stays."""
    import base64

    key = "zq" + "x7a9" * 12
    monkeypatch.setenv("BISECTBOT_API_KEY", key)
    for sep in ("\n", "\r\n", "\x1b[31m", "\x1b]0;title\x07", "\u200b", "\ufeff", "\u00ad"):
        for at in (1, 9, len(key) // 2, len(key) - 1):
            shown = redact(f"before {key[:at]}{sep}{key[at:]} after")
            assert shown == "before *** after", (repr(sep), at, shown)
    blob = base64.b64encode(b"user:" + key.encode() + b":more").decode()
    wrapped = "\n".join(blob[i:i + 76] for i in range(0, len(blob), 76))
    shown = redact(f"Authorization-ish: {wrapped}")
    squeezed = shown.replace("\n", "")
    assert "***" in shown and not any(c in squeezed for c in _base64_cores_of(key)), shown
    assert redact_data({"log": f"x {key[:5]}\n{key[5:]} y"}) == {"log": "x *** y"}


def _base64_cores_of(value: str) -> set[str]:
    from bisectbot.secrets import _base64_cores

    return _base64_cores(value)
