"""Issue 37, item 2: a server that silently keeps only the last N tokens of a longer prompt
(ollama#3839, #17427) and reports ``usage.prompt_tokens`` N. Equal counts for prompts of clearly
different length are an ERROR naming the limit -- never GARBAGE or non-monotone. Real engine
processes (``bisectbot.demo.engine``, setting ``truncate_to``, no ``/tokenize``), driven through
``bisectbot probe``; on main (3832fe5) the same servers read "GARBAGE, non-monotone" or GARBAGE."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bisectbot.demo.engine import start_engine

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]


def _probe(url: str, *args: str) -> tuple[int, dict]:
    p = subprocess.run(PROBE + ["--endpoint", url, *args], capture_output=True, text=True, timeout=240)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.stdout.strip(), p.stderr
    return p.returncode, json.loads(p.stdout)


@pytest.mark.parametrize("keep,args", [
    (16384, ["--min-size", "2000", "--max-size", "32000", "--needles", "2"]),  # the server
    (6000, ["--sizes", "2000,4000,8000,16000", "--needles", "3"]),  # a fixed ladder, another limit
    (9000, ["--min-size", "1000", "--max-size", "20000", "--needles", "1"]),
])
def test_equal_usage_for_prompts_of_different_length_is_an_error_naming_the_limit(keep, args):
    with start_engine(threshold=None, truncate_to=keep, tokenize_endpoint=False) as e:
        rc, res = _probe(e.url, *args)
    assert res["status"] == "error", (res["status"], [(r["prompt_tokens"], r["outcome"]) for r in res["table"]])
    assert rc not in (0, 1)
    assert "silent truncation" in res["error"] and str(keep) in res["error"], res["error"]
    assert not any(r["outcome"] == "GARBAGE" for r in res["table"]), res["table"]


def test_a_limit_far_below_the_prompt_is_an_error_that_names_it():
    # 30,000 asked, 3,000 kept: the count is implausible for the characters sent (already an ERROR on main)
    with start_engine(threshold=None, truncate_to=3000, tokenize_endpoint=False) as e:
        rc, res = _probe(e.url, "--min-size", "1000", "--max-size", "30000")
    assert res["status"] == "error" and "3000" in res["error"] and "truncat" in res["error"], res["error"]


def test_a_server_that_keeps_everything_is_not_a_plateau():
    with start_engine(threshold=12000, tokenize_endpoint=False) as e:
        rc, res = _probe(e.url, "--min-size", "1000", "--max-size", "30000", "--needles", "2")
    assert rc == 1 and res["status"] == "garbage", res["status"]
    assert res["last_ok"] < 12000 <= res["first_garbage"]
