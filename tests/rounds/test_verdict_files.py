"""Issue 24, input 3: verdict files carry no secret and cannot be forged, through ``round probe`` and
``round import`` in child processes over a real git history.

* A candidate prints the passed-through ``HF_TOKEN`` (verbatim and base64-encoded): the verdict
  file ``round probe --out`` writes holds neither (the whole document is redacted).
* A bad commit leaves a ``setsid``'d process that waits for its verdict file and rewrites every
  ``"verdict": "bad"`` to ``"good"``: it is dead before the file is written; the file says bad.
* A file whose top-level verdict differs from its probe record, a file changed after the probe
  (its SHA-256 is not the one ``round probe`` reported), a malformed file, a FIFO and an
  oversized file are each refused by name while the good files of the round are recorded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import yaml

TOKEN = "tok-7f3a9c41d2e85b60aa17c3e9"  # no known token shape: only the whole-document redaction finds it

CHECK = r"""
import base64, os, sys, time
tok = os.environ.get("HF_TOKEN", "")
print("HF_TOKEN=" + tok)
print("b64 " + base64.b64encode(("HF_TOKEN=" + tok).encode()).decode())
bad = os.path.exists("BUG")
if bad and os.environ.get("FORGE_OUT"):
    if os.fork() == 0:  # a detached leftover: double fork, new session
        os.setsid()
        if os.fork() == 0:
            with open(os.environ["FORGE_PID"], "w") as fh:
                fh.write(str(os.getpid()))
            out = os.environ["FORGE_OUT"]
            for _ in range(400):
                time.sleep(0.05)
                with open(os.environ["FORGE_PID"] + ".beat", "a") as beat:  # alive, in any pid namespace
                    beat.write(".")
                if os.path.exists(out):
                    time.sleep(0.2)
                    text = open(out).read()
                    open(out, "w").write(text.replace('"verdict": "bad"', '"verdict": "good"'))
                    open(os.environ["FORGE_PID"] + ".done", "w").write("rewritten")
                    break
            os._exit(0)
        os._exit(0)
    os.wait()
    time.sleep(0.3)  # the leftover has written its pid
sys.exit(1 if bad else 0)
"""


def _recipe(tmp_path: Path, kit) -> tuple[Path, object]:
    hist = kit.make_history(tmp_path / "repo", 8, 5)
    recipe = kit.write_recipe(tmp_path / "r.yaml", hist, tmp_path / "out")
    script = tmp_path / "forge_check.py"
    script.write_text(CHECK)
    data = yaml.safe_load(recipe.read_text())
    data["reproducer"]["command"] = [sys.executable, str(script)]
    data["env_passthrough"] = ["HF_TOKEN", "FORGE_OUT", "FORGE_PID"]
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    return recipe, hist


def _beating(beat: Path, window: float = 1.0) -> bool:
    """Whether the leftover still appends to its heartbeat file ``beat`` (every 0.05 s while it
    lives) over ``window`` seconds. Not a pid: inside the sandbox the leftover's pid is one of its
    own pid namespace, which names another process (or none) on the host."""
    size = beat.stat().st_size if beat.exists() else -1
    time.sleep(window)
    return (beat.stat().st_size if beat.exists() else -1) != size


def test_verdict_files_redacted_unforgeable_and_bad_files_refused_by_name(tmp_path, kit) -> None:
    recipe, hist = _recipe(tmp_path, kit)
    state = tmp_path / "state"
    plan = kit.plan(state, recipe, "--slots", "2")
    s = plan["session"]
    assert {p["ref"] for p in plan["probes"]} == {hist.shas[0], hist.shas[-1]}  # the ends first
    vdir = tmp_path / "v"
    files, digests = {}, {}
    for p in plan["probes"]:
        out = vdir / f"{p['ref'][:12]}.json"
        pidfile = tmp_path / f"forger-{p['ref'][:12]}"
        env = {"HF_TOKEN": TOKEN, "FORGE_OUT": str(out), "FORGE_PID": str(pidfile)}
        r = kit.cli("--json", "--state", str(state), "round", "probe", str(recipe), "--session", s, "--ref",
                    p["ref"], "--key", p["key"], "--round", str(plan["round"]), "--attempt", str(p["attempt"]),
                    "--out", str(out), env=env)
        assert r.returncode == 0, r.stderr
        summary = json.loads(r.stdout)
        files[p["ref"]], digests[out.name] = out, summary["sha256"]
        if p["ref"] == hist.shas[-1]:
            assert pidfile.exists(), "the leftover never started: the test means nothing"
            assert not _beating(Path(str(pidfile) + ".beat")), "the setsid'd leftover outlived its probe"
    time.sleep(1.5)  # a surviving forger would have rewritten the file by now
    assert not (tmp_path / f"forger-{hist.shas[-1][:12]}.done").exists()

    bad_file = files[hist.shas[-1]]
    doc = json.loads(bad_file.read_text())
    assert doc["verdict"] == doc["probe"]["verdict"] == "bad"
    for f in files.values():
        text = f.read_text()
        b64 = base64.b64encode(f"HF_TOKEN={TOKEN}".encode()).decode()
        assert TOKEN not in text and b64[12:-4] not in text and "HF_TOKEN=***" in text, text[:2000]

    # forged copies, beside the genuine files
    two = json.loads(bad_file.read_text())
    two["verdict"] = "good"  # the probe record still says bad
    (vdir / "two-verdicts.json").write_text(json.dumps(two))
    # its digest matches (a probe runner could have written it so): the two verdicts alone refuse it
    digests["two-verdicts.json"] = hashlib.sha256((vdir / "two-verdicts.json").read_bytes()).hexdigest()
    edited = vdir / "edited.json"
    e = json.loads(files[hist.shas[0]].read_text())
    e["reason"] = "edited after the probe"
    edited.write_text(json.dumps(e, indent=2, sort_keys=True) + "\n")
    digests["edited.json"] = digests[files[hist.shas[0]].name]
    (vdir / "malformed.json").write_text(json.dumps({**e, "probe": ["not", "a", "record"], "ref": {"x": 1}}))
    os.mkfifo(vdir / "fifo.json")
    (vdir / "huge.json").write_text(" " * (5 * 1024 * 1024) + "{}")
    for n in ("malformed.json", "fifo.json", "huge.json"):
        digests[n] = "0" * 64
    dfile = tmp_path / "digests.txt"
    dfile.write_text("".join(f"{d}  {n}\n" for n, d in digests.items()))

    names = ["two-verdicts.json", "edited.json", "malformed.json", "fifo.json", "huge.json",
             bad_file.name, files[hist.shas[0]].name]
    r = kit.cli("--json", "--state", str(state), "round", "import", str(recipe), "--session", s,
                "--digests", str(dfile), *[str(vdir / n) for n in names], timeout=120)
    assert r.returncode == 2, r.stderr  # some refused
    out = {Path(o["path"]).name: o for o in json.loads(r.stdout)}
    assert out[bad_file.name]["action"] == "recorded" and out[files[hist.shas[0]].name]["action"] == "recorded"
    assert "two verdicts differ" in out["two-verdicts.json"]["message"]
    assert "differs from the probe job's" in out["edited.json"]["message"]
    assert "not a regular file (a FIFO)" in out["fifo.json"]["message"]
    assert "limit of a verdict file" in out["huge.json"]["message"]
    assert out["malformed.json"]["action"] == "refused"
    for n in names[:5]:
        assert out[n]["action"] == "refused" and n in out[n]["message"], out[n]
    assert "Traceback" not in r.stderr

    # what the ledger holds: the genuine verdicts (bad end bad), never the token
    nxt = kit.plan(state, recipe, "--session", s)
    assert nxt["round"] == 2 and not nxt["done"]
    ledger_bytes = b"".join(p.read_bytes() for p in state.rglob("*") if p.is_file())
    assert TOKEN.encode() not in ledger_bytes
