"""The session log's ``sig=`` field (``bisectbot bisect log``, the dashboard's session log):
a maintainer reads it, ``--replay`` parses it back.

Kind (issue 41, item 10): *a string quoted for a parser is shown to a person*: ``shlex.quote``
writes each ``'`` of a signature (``flood of '0'``) as ``'"'"'``. Parameters: which quote
characters the signature holds (none, ``'``, ``"``, both, with ``\\`` and ``$``), spaces, and
non-ASCII text from model output.
"""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from bisectbot.session.replay import format_log, one_line, parse_replay, quote_signature


def _probe_line(sig: str) -> str:
    ev = {"kind": "probe", "at": "2026-12-04T00:00:00+00:00",
          "data": {"verdict": "bad", "ref": "0123456789abcdef", "signature": sig, "phase": "search",
                   "label": "c1", "reason": "garbage", "duration_s": 1.0}}
    return format_log(None, [ev])


def test_a_signature_with_quotes_reads_as_it_was_written() -> None:
    sig = "garbage@1015 (repeat-run: flood of '0' (93% of 322 characters), e.g. 'value_0\u064a')"
    log = _probe_line(sig)
    assert "'\"'\"'" not in log, log
    assert f'sig="{sig}"' in log, log
    assert parse_replay(log)[0].signature == sig


BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
       | st.sampled_from(["'", '"', "\\", "$x", "a'b\"c\\d", "'\"'\"'", "#x", "a b", "a\nb", "x\u2028y"]))
def test_every_signature_round_trips_through_the_log(sig: str) -> None:
    """Hostile pass: a line break in a signature (``\\n``, ``\\r``, ``\\x1c``-``\\x1e``, NEL,
    U+2028) cut the log's line inside its quotes: ``bisect replay`` read no log at all. A line break
    is written as its escape; every other character round-trips."""
    q = quote_signature(sig)
    assert not any(b in q for b in BREAKS)
    want = one_line(sig)
    assert shlex.split(q) == [want]
    if sig and "'" in sig:
        assert "'\"'\"'" not in q
    lines = parse_replay(_probe_line(sig))
    assert [ln.signature for ln in lines] == [want]


@given(st.lists(st.sampled_from(list(BREAKS) + ["good ", "bad ", "a" * 8, "#", " "]), max_size=12).map("".join))
def test_a_line_break_in_any_field_never_adds_a_verdict(text: str) -> None:
    """Hostile pass: a reason ``"flood\\ngood bbbb…"`` put a ``good`` line into the log that
    ``--replay`` took as a maintainer-free verdict. Kind: *text of a probe that starts a line of its
    own in a line-based file*. Parameters: which field (reason, label, phase, a triage or result
    message), which line break."""
    events = [
        {"kind": "probe", "at": "t", "data": {"verdict": "bad", "ref": "a" * 40, "signature": text, "phase": text,
                                                "label": text, "reason": text, "duration_s": 1.0}},
        {"kind": "triage", "at": "t", "data": {"toggle": text, "verdict": "good", "reason": text}},
        {"kind": "result", "at": "t", "data": {"stage": "1", "status": "culprit", "message": text, "confidence": 1.0}},
    ]
    log = format_log({"id": "s", "recipe": text, "good": "g", "bad": "b", "status": "x"}, events)
    assert len(log.split("\n")) == 5, log  # the header, three events, the trailing newline's empty tail
    assert [(ln.verdict.value, ln.ref) for ln in parse_replay(log)] == [("bad", "a" * 40)]


def test_an_unmeasured_threshold_end_reads_as_a_dash_not_none() -> None:
    ev = {"kind": "probe", "at": "2026-12-04T00:00:00+00:00",
          "data": {"verdict": "good", "ref": "0123456789abcdef", "phase": "search", "label": "c1",
                   "reason": "no garbage up to 16007 tokens", "threshold": [16007, None], "duration_s": 1.0}}
    log = format_log(None, [ev])
    assert "threshold 16007..-" in log and "None" not in log, log
