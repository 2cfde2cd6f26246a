"""Issue 23: verdicts that claim only what was tested, through ``bisectbot run`` / ``probe`` on
real git histories of the reference engine (each commit's ``engine.json`` sets its behaviour).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

PY = sys.executable

SERVE = """\
import sys
from bisectbot.demo.engine import main
sys.exit(main(["--config", "engine.json"] + sys.argv[1:]))
"""


def history(kit, path: Path, configs: list[dict], files: list[dict[str, str]] | None = None,
            serve: str = SERVE) -> list[str]:
    """A git history of the reference engine: commit i serves ``configs[i]`` (and writes ``files[i]``)
    through the script ``serve`` (serve.py, the same in every commit)."""
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    (path / "serve.py").write_text(serve)
    shas = []
    for i, cfg in enumerate(configs):
        (path / "engine.json").write_text(json.dumps({"seed": i, **cfg}))
        for rel, text in ((files or [{}] * len(configs))[i] or {}).items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text)
        kit.git(path, "add", "-A")
        kit.git(path, "commit", "-q", "--allow-empty", "-m", f"c{i}")
        shas.append(kit.git(path, "rev-parse", "HEAD"))
    return shas


def recipe(tmp_path: Path, repo: Path, shas: list[str], reproducer: dict | None = None, **extra) -> Path:
    data = {
        "name": "scope",
        "source": {"kind": "git", "repo": str(repo)},
        "server": {"command": [PY, "serve.py", "--port", "{port}"], "health_timeout_s": 30,
                   "request_timeout_s": 60},
        "reproducer": {"min_size": 2000, "max_tokens": 256, **(reproducer or {})},
        "regress": "garbage",
        "bisect": {"good": shas[0], "bad": shas[-1]},
        "report": {"dir": str(tmp_path / "out")},
    }
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(data.get(k), dict):
            data[k].update(v)
        else:
            data[k] = v
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def answered(out: str) -> int:
    """The measured size (tokens) in the run's "(the largest size it answered: N tokens)"."""
    m = re.search(r"\(the largest size it answered: (\d+) tokens\)", out)
    assert m, out
    return int(m.group(1))


def result(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "result.json").read_text())


# ----------------------------------------------------------------- 1: good below the size that matters


def test_good_below_the_failing_size_is_no_culprit(tmp_path, kit) -> None:
    """Old builds serve max_model_len 16384, c3 raises it to 131072; garbage from 20,000 tokens at
    every commit. c0..c2 cannot be asked at the bad end's failing size: never 'c3 is the culprit'."""
    cfgs = [{"threshold": 20000, "max_model_len": 16384 if i < 3 else 131072} for i in range(8)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] != "culprit", out
    assert final["status"] in ("boundary-failed", "range"), out
    failing = re.search(r"the good end is untestable \(skip\): could not be asked at the size where the bad end "
                        r"fails \((\d+) tokens", out)
    assert failing and 20000 <= int(failing.group(1)) < 20100, out
    largest = answered(out)
    assert largest < 16384, out  # c0's context limit; the exact figure depends on the prompt's text
    assert not any(x["ref"] == shas[3] for x in final.get("culprits") or []), out
    # the measurement is cached as it was (good up to `largest`); the search's use of it changed
    p2 = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    assert answered(p2.stdout + p2.stderr) == largest, p2.stdout + p2.stderr


def test_a_build_inside_the_range_that_cannot_reach_the_failing_size_is_a_skip(tmp_path, kit) -> None:
    """Next member: c3..c4 serve only 16384 tokens (c5 restores 131072) and the bug starts at c3.
    Taken as good, they made c5 (the limit restore) the culprit; untestable, the answer is a range."""
    cfgs = [{"threshold": 20000 if i >= 3 else None, "max_model_len": 16384 if i in (3, 4) else 131072}
            for i in range(8)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] == "range", out
    assert {c["ref"] for c in final["culprits"]} >= {shas[3], shas[5]}, out
    assert answered(out) < 16384, out


# ----------------------------------------------------------------- 2: a crash above the threshold


@pytest.mark.parametrize("parallel", [1, 3])
def test_a_crash_above_the_threshold_does_not_hide_the_culprit(tmp_path, kit, parallel) -> None:
    """c3..c7 crash the server on prompts >= 28K; c5 also turns to garbage from 20,000 tokens (the
    bad end c8 has the bug, no crash). Opened at the maximum, c3..c7 were skips and the answer the
    range c3..c8; asked first where the bad end fails, c5 is the culprit and the crash a second finding.
    With 3 probes a round, c4 is probed beside the ends, before the failing sizes are known: its
    crash-skip is probed again asking them first (else the answer was the range c4..c5)."""
    cfgs = [{"threshold": 20000 if i >= 5 else None, "crash_above": 28000 if 3 <= i <= 7 else None}
            for i in range(9)]
    shas = history(kit, tmp_path / "repo", cfgs)
    r = recipe(tmp_path, tmp_path / "repo", shas)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), "--parallel", str(parallel))
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[5], out
    assert final["last_good"]["ref"] == shas[4], out
    assert "second finding above the bad end's failing sizes" in out, out


# ----------------------------------------------------------------- 8: three clean runs of the bad end

FLAKY = """\
import os, random, sys
idx = int(open("idx").read())
d = os.environ["FLAKY_DIR"]
n_file = os.path.join(d, f"runs-{idx}")
n = int(open(n_file).read()) if os.path.exists(n_file) else 0
open(n_file, "w").write(str(n + 1))
rng = random.Random(f"{os.environ['FLAKY_SEED']}-{idx}-{n}")
sys.exit(1 if idx >= BUG_AT and rng.random() < 0.30 else 0)
"""


def _flaky_history(kit, path: Path, bug_at: int, n: int = 12) -> list[str]:
    path.mkdir(parents=True)
    kit.git(path, "init", "-q", "-b", "main")
    (path / "flaky.py").write_text(FLAKY.replace("BUG_AT", str(bug_at)))
    shas = []
    for i in range(n):
        (path / "idx").write_text(str(i))
        kit.git(path, "add", "-A")
        kit.git(path, "commit", "-q", "--allow-empty", "-m", f"c{i}")
        shas.append(kit.git(path, "rev-parse", "HEAD"))
    return shas


def _flaky_recipe(tmp_path: Path, shas: list[str]) -> Path:
    data = {"name": "flaky", "source": {"kind": "git", "repo": str(tmp_path / "repo")},
            "reproducer": {"kind": "command", "command": [PY, "flaky.py"], "repeats": 3, "command_timeout_s": 30},
            "regress": "command", "bisect": {"good": shas[0], "bad": shas[-1]},
            "report": {"dir": str(tmp_path / "out")}, "env_passthrough": ["FLAKY_DIR", "FLAKY_SEED"]}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _seed_missing_first_runs(idx: int, runs: int) -> int:
    import random

    return next(s for s in range(1000)
                if all(random.Random(f"{s}-{idx}-{k}").random() >= 0.30 for k in range(runs)))


def test_a_bad_end_whose_first_runs_miss_is_probed_until_the_bug_shows(tmp_path, kit) -> None:
    """repeats: 3, a bug seen in 30 % of runs, and the bad end's first three runs all miss: the
    run used to end 'no-regression' after them. The bad end is known bad: probed again."""
    shas = _flaky_history(kit, tmp_path / "repo", bug_at=6)
    seed = _seed_missing_first_runs(11, 3)
    r = _flaky_recipe(tmp_path, shas)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r),
                    env={"FLAKY_DIR": str(tmp_path), "FLAKY_SEED": str(seed)})
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] != "no-regression", out
    assert "looked clean (1 probe(s), 3 runs): it is known to fail, probing it again" in out, out
    assert "the bad end showed the bug at probe" in out, out


def test_a_bad_end_that_never_fails_says_how_many_runs_it_took(tmp_path, kit) -> None:
    shas = _flaky_history(kit, tmp_path / "repo", bug_at=99)
    r = _flaky_recipe(tmp_path, shas)
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), env={"FLAKY_DIR": str(tmp_path), "FLAKY_SEED": "1"})
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] == "no-regression", out
    assert "the bad end showed no bug in 21 runs over 7 probes" in final["message"], final["message"]


# ----------------------------------------------------------------- 3: one failed start at an end

SERVE_FLAKY_START = """\
import os, sys
from pathlib import Path
from bisectbot.demo.engine import main
mark = Path(os.environ["START_DIR"]) / ("started-" + open("version.txt").read().strip())
if os.environ.get("START_FAILS") == "429" and not mark.exists():
    mark.write_text("x")
    print("Downloading model weights...", flush=True)
    print("huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
          "https://huggingface.co/api/models/org/model", file=sys.stderr, flush=True)
    sys.exit(1)
if os.environ.get("START_FAILS") == "always-bad-end" and open("version.txt").read().strip() == "v7":
    print("RuntimeError: engine core initialisation failed", file=sys.stderr, flush=True)
    sys.exit(1)
sys.exit(main(["--config", "engine.json"] + sys.argv[1:]))
"""


def _start_history(kit, tmp_path: Path) -> list[str]:
    cfgs = [{"threshold": 4000 if i >= 4 else None} for i in range(8)]
    return history(kit, tmp_path / "repo", cfgs, files=[{"version.txt": f"v{i}\n"} for i in range(8)],
                   serve=SERVE_FLAKY_START)


def test_a_rate_limited_start_at_the_bad_end_is_retried_and_never_cached(tmp_path, kit) -> None:
    shas = _start_history(kit, tmp_path)
    r = recipe(tmp_path, tmp_path / "repo", shas, {"sizes": [2000, 8000], "max_size": 8000},
               env_passthrough=["START_DIR", "START_FAILS"])
    (tmp_path / "starts").mkdir()
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r),
                    env={"START_DIR": str(tmp_path / "starts"), "START_FAILS": "429"})
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[4], out


def test_a_cached_skip_at_the_bad_end_is_probed_once_more_and_the_message_names_retry_errors(tmp_path, kit) -> None:
    shas = _start_history(kit, tmp_path)
    r = recipe(tmp_path, tmp_path / "repo", shas, {"sizes": [2000, 8000], "max_size": 8000},
               env_passthrough=["START_DIR", "START_FAILS"])
    (tmp_path / "starts").mkdir()
    env = {"START_DIR": str(tmp_path / "starts"), "START_FAILS": "always-bad-end"}
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), env=env)
    out = p.stdout + p.stderr
    assert result(tmp_path)["stages"][-1]["status"] == "boundary-failed", out
    assert "--retry-errors" in result(tmp_path)["stages"][-1]["message"], out
    env["START_FAILS"] = ""  # whatever broke the start is gone; the skip is in the cache
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), env=env)
    out = p.stdout + p.stderr
    final = result(tmp_path)["stages"][-1]
    assert "its cached verdict is a skip at an end of the search: probing it again" in out, out
    assert final["status"] == "culprit" and final["first_bad"]["ref"] == shas[4], out


# ----------------------------------------------------------------- 5: a data file called .txt

SERVE_TOKENIZER = """\
import sys
from bisectbot.demo.engine import main
merges = open("tokenizer/merges.txt").read()
extra = ["--threshold", "4000"] if "Ġt he" in merges else []  # a bad merge rule breaks long prompts
sys.exit(main(["--config", "engine.json"] + sys.argv[1:] + extra))
"""


def test_a_tokenizer_data_file_is_runtime_data_not_docs(tmp_path, kit) -> None:
    """c5 changes only tokenizer/merges.txt and breaks the engine: blamed, never 'only docs/tests'."""
    files = [{"tokenizer/merges.txt": "#version: 0.2\nĠ t\nh e\n" if i != 5 else "#version: 0.2\nĠ t\nĠt he\n",
              "README.md": f"release notes {i}\n"} for i in range(8)]
    for i in range(6, 8):
        files[i]["tokenizer/merges.txt"] = files[5]["tokenizer/merges.txt"]
    files[5]["README.md"] = files[4]["README.md"]  # c5 changes merges.txt alone
    shas = history(kit, tmp_path / "repo", [{"threshold": None, "seed": 0}] * 8, files=files, serve=SERVE_TOKENIZER)
    r = recipe(tmp_path, tmp_path / "repo", shas, {"sizes": [2000, 8000], "max_size": 8000})
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r))
    out = p.stdout + p.stderr
    res = result(tmp_path)
    assert res["stages"][-1]["first_bad"]["ref"] == shas[5], out
    assert res["stages"][-1]["flags"] == [], out
    assert any(n.startswith("may blame") for n in res["notes"]), out


# ----------------------------------------------------------------- 4: an exported variable withheld

SERVE_BACKEND = """\
import json, os, sys
from bisectbot.demo.engine import main
bug = json.load(open("bug.json"))["bug"]
extra = ["--threshold", "4000"] if bug and os.environ.get("VLLM_ATTENTION_BACKEND") == "TRITON_ATTN" else []
sys.exit(main(["--config", "engine.json"] + sys.argv[1:] + extra))
"""


def test_an_exported_stack_variable_withheld_from_candidates_is_named_with_the_passthrough_line(tmp_path, kit) -> None:
    """The bug shows only with VLLM_ATTENTION_BACKEND=TRITON_ATTN (vllm#34759), exported in the shell;
    the allow-listed candidate environment drops it: the plan and the no-regression say so."""
    shas = history(kit, tmp_path / "repo", [{"threshold": None, "seed": 0}] * 8, serve=SERVE_BACKEND,
                   files=[{"bug.json": json.dumps({"bug": i >= 4})} for i in range(8)])
    r = recipe(tmp_path, tmp_path / "repo", shas, {"sizes": [2000, 8000], "max_size": 8000})
    env = {"VLLM_ATTENTION_BACKEND": "TRITON_ATTN", "AITER_LOG_MORE": "1", "HF_TOKEN": "hf_notarealtoken12345"}
    line = "env_passthrough: [AITER_LOG_MORE, VLLM_ATTENTION_BACKEND]"
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), "--dry-run", env=env)
    assert p.returncode == 0 and line in p.stdout + p.stderr, p.stdout + p.stderr
    p = kit.run_cli("--state", str(tmp_path / "s"), "run", str(r), env=env)
    out = p.stdout + p.stderr
    res = result(tmp_path)
    assert res["status"] == "no-regression", out
    note = [n for n in res["notes"] if "withheld from the candidates" in n]
    assert note and line in note[0] and "HF_TOKEN" not in note[0], res["notes"]
    assert "the run ended no-regression" in note[0]
    assert "withheld" in (tmp_path / "out" / "report.md").read_text()
    # with the line in the recipe the variable reaches the server and the culprit is found
    r = recipe(tmp_path, tmp_path / "repo", shas, {"sizes": [2000, 8000], "max_size": 8000},
               env_passthrough=["VLLM_ATTENTION_BACKEND"])
    p = kit.run_cli("--state", str(tmp_path / "s2"), "run", str(r), env=env)
    assert result(tmp_path)["stages"][-1]["first_bad"]["ref"] == shas[4], p.stdout + p.stderr
