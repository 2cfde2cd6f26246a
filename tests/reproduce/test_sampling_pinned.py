"""Issue 37, item 3: every sampling field the reproducer does not vary is sent, the output lists
what was sent, and a server that rejects a pinned field is an ERROR naming it. Real engine
processes (``bisectbot.demo.engine``: ``sampling_defaults`` fills omitted fields like vLLM's
``generation_config.json``; ``reject_fields`` answers HTTP 400 naming the field), through
``bisectbot probe``. On main (3832fe5) the first reads "GARBAGE at every size" and the second OK."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bisectbot.demo.engine import start_engine

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]
ARGS = ["--min-size", "1000", "--max-size", "8000", "--needles", "2"]


def _probe(url: str, *args: str, json_out: bool = True) -> tuple[int, dict | str]:
    argv = PROBE if json_out else [a for a in PROBE if a != "--json"]
    p = subprocess.run(argv + ["--endpoint", url, *args], capture_output=True, text=True, timeout=240)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, (json.loads(p.stdout) if json_out else p.stdout + p.stderr)


@pytest.mark.parametrize("defaults", [{"repetition_penalty": 1.3}, {"presence_penalty": 0.4},
                                      {"frequency_penalty": 0.2, "repetition_penalty": 1.05}])
def test_server_sampling_defaults_do_not_reach_the_replies(defaults):
    with start_engine(threshold=None, sampling_defaults=defaults) as e:
        rc, res = _probe(e.url, *ARGS)
    assert rc == 0 and res["status"] == "ok", (res["status"], res["table"][-1])
    sent = res["sampling"]
    assert sent == {"temperature": 0.0, "seed": 0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
                    "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}, sent
    assert any(n.startswith("sampling sent with every request: temperature 0, seed 0, top_p 1, top_k -1")
               for n in res["notes"]), res["notes"]


def test_the_console_output_lists_what_was_sent():
    with start_engine(threshold=None) as e:
        rc, out = _probe(e.url, *ARGS, json_out=False)
    assert rc == 0
    assert "repetition_penalty 1" in out and "min_p 0" in out and "presence_penalty 0" in out, out


@pytest.mark.parametrize("field", ["min_p", "top_k", "repetition_penalty"])
def test_a_server_that_rejects_a_pinned_field_is_an_error_naming_it(field):
    with start_engine(threshold=None, reject_fields=[field]) as e:
        rc, res = _probe(e.url, *ARGS)
    assert res["status"] == "error" and rc not in (0, 1), (res["status"], res["table"])
    assert f"pinned sampling field '{field}'" in res["error"], res["error"]
    assert not any(r["outcome"] == "GARBAGE" for r in res["table"])
