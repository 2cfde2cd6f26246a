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

from bisectbot.session.replay import format_log, parse_replay, quote_signature


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


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=60)
       | st.sampled_from(["'", '"', "\\", "$x", "a'b\"c\\d", "'\"'\"'", "#x", "a b"]))
def test_every_signature_round_trips_through_the_log(sig: str) -> None:
    q = quote_signature(sig)
    assert shlex.split(q) == ([sig] if sig else [""])
    if sig and "'" in sig:
        assert "'\"'\"'" not in q
    lines = parse_replay(_probe_line(sig))
    assert [ln.signature for ln in lines] == [sig]


def test_an_unmeasured_threshold_end_reads_as_a_dash_not_none() -> None:
    ev = {"kind": "probe", "at": "2026-12-04T00:00:00+00:00",
          "data": {"verdict": "good", "ref": "0123456789abcdef", "phase": "search", "label": "c1",
                   "reason": "no garbage up to 16007 tokens", "threshold": [16007, None], "duration_s": 1.0}}
    log = format_log(None, [ev])
    assert "threshold 16007..-" in log and "None" not in log, log
