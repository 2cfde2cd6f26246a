"""Issue 37, item 4: a healthy reasoning model served without a reasoning parser thinks in
``content`` (with or without ``<think>`` markers); the thinking grows with the document and at long
prompts outgrows ``max_tokens`` before any answer. That is "cut before answering": asked again with
more room, then INCONCLUSIVE -- never GARBAGE. Real engine processes (``think_in_content``: 60
thinking tokens per 1,000 prompt tokens), through ``bisectbot probe``; on main (3832fe5) both read
"GARBAGE from ~16K prompt tokens" on a healthy server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bisectbot.demo.engine import start_engine

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]


def _probe(url: str, *args: str) -> tuple[int, dict]:
    p = subprocess.run(PROBE + ["--endpoint", url, "--min-size", "2000", "--needles", "2", *args],
                       capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, json.loads(p.stdout)


@pytest.mark.parametrize("style", ["tags", "plain"])
def test_thinking_cut_by_max_tokens_is_asked_again_with_more_room(style):
    # 30K prompt tokens: 1,800 thinking tokens > max_tokens 1000, < the 4,000 of the second ask
    with start_engine(threshold=None, think_in_content=style) as e:
        rc, res = _probe(e.url, "--max-size", "30000")
    assert rc == 0 and res["status"] == "ok", (res["status"], res["table"][-1])
    assert not any(r["outcome"] == "GARBAGE" for r in res["table"])


@pytest.mark.parametrize("style", ["tags", "plain"])
def test_thinking_longer_than_every_ask_is_inconclusive_not_garbage(style):
    # max_tokens 150, then 600: 1,800 thinking tokens fit in neither
    with start_engine(threshold=None, think_in_content=style) as e:
        rc, res = _probe(e.url, "--max-size", "30000", "--max-tokens", "150")
    assert not any(r["outcome"] == "GARBAGE" for r in res["table"]), [(r["prompt_tokens"], r["outcome"])
                                                                        for r in res["table"]]
    assert res["status"] in ("inconclusive", "ok") and rc != 1, res["status"]
    cut = [r for r in res["table"] if r["outcome"] == "INCONCLUSIVE"]
    assert cut and all("cut before answering" in " ".join(r["reasons"]) for r in cut), cut


def test_a_collapse_cut_by_max_tokens_is_still_garbage():
    with start_engine(threshold=12000, garbage_kinds=["salad"]) as e:
        rc, res = _probe(e.url, "--max-size", "30000", "--max-tokens", "150")
    assert rc == 1 and res["status"] == "garbage", res["status"]
