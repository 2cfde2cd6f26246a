"""The reference engine is a real OpenAI-compatible server process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import requests

from bisectbot.demo.engine import chat_prompt_tokens, start_engine, tokenize
from bisectbot.reproduce.client import Client
from bisectbot.reproduce.prompts import PromptBuilder

Q = "What is 2+2? Answer in one sentence."


def test_tokenizer_is_deterministic_and_shared_with_usage(engine_factory):
    assert tokenize("fn_a(x: int) -> 4.") == ["fn_a", "(", "x", ":", "int", ")", "-", ">", "4", "."]
    e = engine_factory(threshold=10_000)
    msgs = [{"role": "system", "content": "alpha beta, gamma."}, {"role": "user", "content": Q}]
    tok = requests.post(e.url + "/tokenize", json={"messages": msgs}, timeout=5).json()
    assert set(tok) >= {"count", "max_model_len", "tokens"}
    assert tok["count"] == chat_prompt_tokens(msgs) == len(tok["tokens"])
    chat = requests.post(e.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 100}, timeout=5).json()
    assert chat["usage"]["prompt_tokens"] == tok["count"]
    assert " 4" in chat["choices"][0]["message"]["content"]
    assert requests.get(e.url + "/v1/models", timeout=5).json()["data"][0]["id"] == "bisectbot/demo-engine"


def test_garbage_at_and_above_threshold_and_stats(engine_factory):
    e = engine_factory(threshold=3000)
    c = Client(e.url)
    b = PromptBuilder(Q, needles=2, seed=3, tokenize=c.tokenize)
    low, high = b.build(2500), b.build(3500)
    assert low.measured_tokens < 3000 <= high.measured_tokens
    good = c.chat(low.messages, max_tokens=300)
    assert good.ok and all(n in good.content for n in low.needles)
    bad = [c.chat(high.messages, max_tokens=300) for _ in range(2)]
    assert all(r.ok for r in bad)
    assert bad[0].content == bad[1].content  # seeded, deterministic without --flaky
    assert not all(n in bad[0].content for n in high.needles) or bad[0].content != good.content
    st = e.stats()
    assert st["chat_requests"] == 3
    assert st["prompt_tokens"] == [good.prompt_tokens, bad[0].prompt_tokens, bad[1].prompt_tokens]


def test_over_max_model_len_is_vllm_style_400(engine_factory):
    e = engine_factory(threshold=None, max_model_len=1000)
    c = Client(e.url)
    r = c.chat([{"role": "user", "content": "word " * 2000}], max_tokens=10)
    assert r.error_kind == "over-limit" and r.status_code == 400
    assert "maximum context length is 1000" in r.error


def test_reasoning_cut_by_max_tokens(engine_factory):
    e = engine_factory(threshold=None, reasoning=True)
    r = Client(e.url).chat([{"role": "user", "content": Q}], max_tokens=10)
    assert r.finish_reason == "length" and r.content == "" and r.reasoning


def test_broken_config_exits_at_start(tmp_path):
    cfg = tmp_path / "engine.json"
    cfg.write_text(json.dumps({"broken": True}))
    with pytest.raises(RuntimeError, match="exited with code 3"):
        start_engine(config=cfg)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"thresold": 5}))
    p = subprocess.run([sys.executable, "-m", "bisectbot.demo.engine", "--config", str(bad)],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 2 and "unknown setting(s): thresold" in p.stderr


def test_config_file_sets_threshold_and_port_file(tmp_path):
    cfg = tmp_path / "engine.json"
    cfg.write_text(json.dumps({"threshold": 1234, "model": "x/y"}))
    port_file = tmp_path / "port"
    p = subprocess.Popen([sys.executable, "-m", "bisectbot.demo.engine", "--port", "0", "--config", str(cfg),
                          "--port-file", str(port_file)], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        port = int(port_file.read_text())
        assert f":{port} " in line and "threshold=1234" in line
        assert Client(f"http://127.0.0.1:{port}").models() == ["x/y"]
    finally:
        p.kill()
        p.wait()


def test_crash_above_kills_the_process(engine_factory):
    e = engine_factory(threshold=None, crash_above=500)
    r = Client(e.url, retries=1, retry_wait_s=0.1).chat([{"role": "user", "content": "word " * 600}], max_tokens=10)
    assert r.error_kind == "connection"
    e.proc.wait(timeout=10)
    assert e.proc.returncode == 134
