"""Issue 23, input 7: the reference is doubted, not trusted blindly. Every test drives real
reference-engine processes through the installed ``bisectbot probe`` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

PROBE = [sys.executable, "-m", "bisectbot", "--json", "probe"]
QUESTION = "Summarize the document in two sentences."
T = 12000


def _probe(*args: str, timeout: float = 300) -> tuple[int, dict, str]:
    p = subprocess.run(PROBE + list(args), capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    return p.returncode, doc, p.stderr


def test_a_garbage_reference_makes_the_comparison_inconclusive_not_garbage(engine_factory):
    healthy = engine_factory(threshold=None, grounded=True, max_model_len=65536)
    garbage_ref = engine_factory(threshold=1, garbage_kinds=["loop"], max_model_len=65536)
    rc, doc, err = _probe("--endpoint", healthy.url, "--question", QUESTION, "--no-expected-answer",
                          "--min-size", "2000", "--max-size", "30000", "--reference-endpoint", garbage_ref.url)
    assert rc == 3, (rc, err)  # inconclusive, never "garbage found"
    assert doc["status"] == "inconclusive", doc
    reasons = [x for r in doc["table"] for x in r["reasons"]]
    assert reasons and all(x.startswith("reference unusable: its own reply is GARBAGE") for x in reasons), reasons
    assert any("--prompt-logprobs" in x for x in reasons), reasons


def test_a_degenerate_reference_still_serves_through_prompt_logprobs(engine_factory):
    """The reference's continuation is one word repeated; its prompt logprobs still compare the
    prefill: the planted bug is bracketed (the continuation's edit distance is not used)."""
    bad = engine_factory(threshold=T, subtle=True, numerics=1, max_model_len=65536)
    degenerate = engine_factory(threshold=1, garbage_kinds=["loop"], numerics=2, max_model_len=65536)
    rc, doc, err = _probe("--endpoint", bad.url, "--question", QUESTION, "--no-expected-answer",
                          "--min-size", "2000", "--max-size", "16000", "--reference-endpoint", degenerate.url,
                          "--prompt-logprobs", "--prompt-logprobs-max-size", "16384", "--regress", "diverges")
    assert rc == 1, (rc, err)
    assert doc["last_ok"] < T <= doc["first_garbage"], doc
    ok_rows = [r for r in doc["table"] if r["outcome"] == "OK"]
    assert ok_rows and all("judged on prompt logprobs only" in r["evidence"]["reference"]["note"] for r in ok_rows)


def test_the_candidate_as_its_own_reference_is_refused(engine_factory):
    bad = engine_factory(threshold=4000, max_model_len=65536)
    for ref in (bad.url, bad.url.replace("127.0.0.1", "localhost") + "/v1/"):
        rc, _, err = _probe("--endpoint", bad.url, "--max-size", "8000", "--reference-endpoint", ref)
        assert rc == 2, (rc, err)
        assert "is the same server as --endpoint" in err, err


def test_a_noise_build_that_answers_garbage_makes_the_calibration_unusable(engine_factory):
    bad = engine_factory(threshold=T, subtle=True, numerics=1, max_model_len=65536)
    good = engine_factory(threshold=None, grounded=True, numerics=2, max_model_len=65536)
    noisy = engine_factory(threshold=1, max_model_len=65536)
    rc, doc, err = _probe("--endpoint", bad.url, "--question", QUESTION, "--no-expected-answer",
                          "--min-size", "2000", "--max-size", "30000", "--reference-endpoint", good.url,
                          "--noise-endpoint", noisy.url)
    noise = doc["reference"]["noise"]
    assert noise["unusable"].startswith("calibration unusable: edit distance"), noise
    assert "above the ceiling 0.5" in err, err
    assert rc == 1 and doc["last_ok"] < T <= doc["first_garbage"], (rc, doc.get("status"), err)  # floors applied


def test_probe_with_a_recipe_uses_the_recipes_reference(engine_factory, tmp_path: Path):
    bad = engine_factory(threshold=T, subtle=True, max_model_len=65536)
    good = engine_factory(threshold=None, grounded=True, max_model_len=65536)
    r = tmp_path / "r.yaml"
    r.write_text(yaml.safe_dump({
        "name": "ref", "source": {"kind": "git", "repo": str(tmp_path)}, "server": {"command": ["true"]},
        "reproducer": {"min_size": 2000, "max_size": 30000, "question": QUESTION, "expected_answer": None,
                       "reference": {"endpoint": good.url}},
        "regress": "diverges", "bisect": {"good": "a", "bad": "b"}}))
    rc, doc, err = _probe("--endpoint", bad.url, "--recipe", str(r))
    assert rc == 1, (rc, err)
    assert doc["reference"]["endpoint"] == good.url and doc["reference"]["regress"] == "diverges", doc
    assert good.stats()["chat_requests"] > 0
    assert doc["last_ok"] < T <= doc["first_garbage"], doc


def test_a_dribbling_reference_is_cut_off_at_the_request_deadline(engine_factory):
    bad = engine_factory(threshold=4000, max_model_len=65536)
    slow = engine_factory(threshold=None, max_model_len=65536, dribble=["/v1/chat/completions"], dribble_s=1.5)
    rc, doc, err = _probe("--endpoint", bad.url, "--sizes", "2000", "--timeout", "3",
                          "--reference-endpoint", slow.url, timeout=90)
    assert rc == 4, (rc, err)  # a server error, not a verdict
    assert "no complete reply within 3 s" in doc["error"], doc


def test_a_divergence_is_said_as_diverges_in_words(engine_factory):
    """Issue 23 ("Also"): under regress diverges the summary says DIVERGES, and the diverging
    position is counted in words (not the server's model tokens)."""
    bad = engine_factory(threshold=T, subtle=True, max_model_len=65536)
    good = engine_factory(threshold=None, grounded=True, max_model_len=65536)
    p = subprocess.run([sys.executable, "-m", "bisectbot", "probe", "--endpoint", bad.url, "--question", QUESTION,
                        "--no-expected-answer", "--sizes", "4000,16000", "--reference-endpoint", good.url,
                        "--regress", "diverges", "--tolerance", "0.5"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "DIVERGES from the reference from" in p.stdout and "GARBAGE from" not in p.stdout, p.stdout
    assert "first diverging word" in p.stdout and "(words and punctuation)" in p.stdout, p.stdout


def test_a_min_size_above_the_servers_limit_is_noted(engine_factory):
    e = engine_factory(threshold=None, max_model_len=16384)
    rc, doc, err = _probe("--endpoint", e.url, "--min-size", "20000")
    assert any(n.startswith("min_size 20000 is above the largest usable size") for n in doc["notes"]), doc["notes"]
