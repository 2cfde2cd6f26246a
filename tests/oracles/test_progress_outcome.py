"""Issue 37, input 9: under ``regress: diverges`` the per-request progress line (``bisectbot run``'s
lines, :func:`bisectbot.progress.request`) printed the candidate's own text classification ("OK") for
the size that the comparison then decided bad. Now it prints the outcome that decides, and the size's
``evidence.reference`` holds it (``outcome``) beside the classifier's own (``text_outcome``). Real
engine processes; the search as ``bisectbot run`` drives it (progress sink enabled)."""

from __future__ import annotations

import re

from bisectbot import progress
from bisectbot.recipe import ReproducerSpec
from bisectbot.reproduce.reference import Noise, reference_client, search_with_reference

QUESTION = "Summarize the document in two sentences."


def test_progress_line_prints_the_outcome_that_decides(engine_factory):
    bad = engine_factory(threshold=12000, subtle=True, max_model_len=65536)
    good = engine_factory(threshold=None, grounded=True, max_model_len=65536)
    spec = ReproducerSpec(sizes=[4000, 16000], question=QUESTION, expected_answer=None,
                          reference={"endpoint": good.url})
    lines: list[str] = []
    progress.enable(lines.append)
    try:
        res = search_with_reference(bad.url, reference_client(spec.reference), spec, Noise(),
                                    diverges_bad=True, garbage_bad=False)
    finally:
        progress.enable(None)
    row = [r for r in res.table if r.size > 12000][0]
    assert row.outcome.value == "GARBAGE"
    line = [x for x in lines if re.search(r"requested 16000 tokens", x)]
    assert line and ": GARBAGE" in line[0] and "text alone: OK" in line[0], lines
    assert not any(re.search(r"requested 16000 tokens.*: OK \(", x) for x in lines), lines
    ref = row.evidence["reference"]
    assert ref["text_outcome"] == "OK" and ref["outcome"] == "GARBAGE" and ref["diverges"]
