"""Session logs and replay files: ``good|bad|skip REF [sig=SIGNATURE] [agree=N]  # comment`` lines
(``agree=N``: the probe's verdict held N agreeing measurements, issue 40).

:func:`format_log` writes a session's events as such a log (``bisectbot bisect log``);
:func:`parse_replay` reads one back (``--replay``, maintainers' verdicts).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput
from ..models import Candidate, Verdict

#: ``ProbeResult.extra`` key of a replayed verdict's ``agree=N`` (:attr:`LogLine.measurements`).
REPLAY_MEASUREMENTS = "replay_measurements"


@dataclass
class LogLine:
    """One verdict line of a session log: ``good|bad|skip REF [sig=SIGNATURE]  # comment``."""

    verdict: Verdict
    ref: str
    signature: str = ""
    note: str = ""  # why this verdict is forced (e.g. "maintainer verdict by alice in #12")
    #: agreeing measurements the logged probe held (``agree=N``, issue 40: a role verified inside its probe);
    #: a replay feeds the search the same count, so it makes the same decisions without probing
    measurements: int = 1

    def matches(self, c: Candidate) -> bool:
        """True when this line names candidate ``c``: its full ref, a SHA prefix (>= 7 characters)
        or its label (tag, version) or the label's first word (short SHA)."""
        r = self.ref
        if r == c.ref or (len(r) >= 7 and c.ref.startswith(r)):
            return True
        return bool(c.label) and (r == c.label or r == c.label.split()[0])



def _stage(name: object) -> str:
    """A stage's name as logged: ``stage 1`` stays ``stage 1`` (never ``stage stage 1``); a bare name
    such as ``vllm commits`` is kept as it is."""
    text = str(name or "?")
    return text if text.startswith("stage") or not text.isdigit() else f"stage {text}"

_LINE_BREAKS = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
                for c in (0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)}
"""Every character :meth:`str.splitlines` breaks a line at, as its escape."""


def one_line(text: str) -> str:
    """``text`` with every line break (:data:`_LINE_BREAKS`: ``\\n``, ``\\r``, form feed, the
    separators ``\\x1c``-``\\x1e``, NEL, U+2028/9) written as its escape: a reason or a signature
    from a probe (a server's error text, a round's verdict file) stays on its verdict line and
    never starts a line of its own that ``--replay`` would read as a verdict (hostile pass, issue 41)."""
    return text.translate(_LINE_BREAKS)


def quote_signature(sig: str) -> str:
    """``sig`` as one shell word that reads as it is written: bare when no character needs
    quoting, in single quotes when it holds none, else in double quotes with only ``"`` and
    ``\\`` escaped (the two POSIX :func:`shlex.split` unescapes there). :func:`shlex.quote` writes a quote inside a reason (``flood of '0'``)
    as ``'"'"'``, which a maintainer reading the log cannot read. :func:`parse_replay` (POSIX
    :func:`shlex.split`) reads every form back to ``sig``."""
    sig = one_line(sig)
    plain = shlex.quote(sig)
    if plain == sig or "'" not in sig:
        return plain
    return '"' + "".join("\\" + ch if ch in '"\\' else ch for ch in sig) + '"'


def parse_replay(text: str, name: str = "<replay>") -> list[LogLine]:
    """Parse a ``bisectbot bisect log`` file. BadInput names the line of a malformed entry."""
    out: list[LogLine] = []
    for no, raw in enumerate(text.split("\n"), 1):  # format_log writes no other line break
        raw = raw.removesuffix("\r")  # a file saved with CRLF
        try:
            parts = shlex.split(raw, comments=True)
        except ValueError as e:
            raise BadInput(f"{name}:{no}: cannot parse: {e}") from None
        if not parts:
            continue
        if parts[0] not in ("good", "bad", "skip") or len(parts) < 2:
            raise BadInput(f"{name}:{no}: expected 'good|bad|skip REF [sig=SIGNATURE]', got {raw.strip()!r}")
        sig = next((p[4:] for p in parts[2:] if p.startswith("sig=")), "")
        agree = next((p[6:] for p in parts[2:] if p.startswith("agree=")), "1")
        if not agree.isdigit() or not 1 <= int(agree) <= 1000:
            raise BadInput(f"{name}:{no}: agree={agree!r}: expected the number of agreeing measurements (1-1000)")
        out.append(LogLine(Verdict(parts[0]), parts[1], sig, measurements=int(agree)))
    return out


def format_log(session: dict[str, Any] | None, events: list[dict[str, Any]]) -> str:
    """A session's events as a readable log whose verdict lines ``--replay`` accepts."""
    lines: list[str] = []
    if session:
        lines.append(f"# bisectbot session {session['id']}: recipe {session['recipe']}, "
                     f"good {session.get('good')}, bad {session.get('bad')}, status {session['status']}")
    for ev in events:
        d, kind = ev["data"], ev["kind"]
        if kind == "start":
            lines.append(f"# {ev['at']} {_stage(d.get('stage'))}: {d.get('n')} candidates, "
                         f"{'noisy' if d.get('noisy') else 'exact'} search")
        elif kind == "resume":
            lines.append(f"# {ev['at']} resumed ({d.get('cached', 0)} probes already done)")
        elif kind == "probe":
            sig = f" sig={quote_signature(d['signature'])}" if d.get("signature") and d.get("verdict") != "skip" else ""
            thr = d.get("threshold")
            thr_s = (f" threshold {'-' if thr[0] is None else thr[0]}..{'-' if thr[1] is None else thr[1]}"
                     if thr else "")  # "-": that end was not measured (as the progress lines write it)
            eff = f" (used as {d['effective']})" if d.get("effective") and d["effective"] != d["verdict"] else ""
            n = d.get("measurements")
            sig += f" agree={n}" if isinstance(n, int) and n > 1 else ""
            lines.append(f"{d['verdict']} {d['ref']}{sig}  # [{d.get('phase', '')}] {d.get('label', '')}: "
                         f"{d.get('reason', '')}{thr_s}{eff} ({d.get('duration_s', 0):.1f}s)")
        elif kind == "prefetch":
            lines.append(f"# prefetch in {_stage(d.get('stage'))}: {d.get('ahead', 0)} prepared ahead, "
                         f"{d.get('used', 0)} used, {d.get('wasted', 0)} wasted, {d.get('cancelled', 0)} cancelled")
        elif kind == "triage":
            lines.append(f"# triage {d.get('toggle')}: {d.get('verdict')} ({d.get('reason', '')})")
        elif kind == "result":
            lines.append(f"# {ev['at']} result of {_stage(d.get('stage'))}: {d.get('status')} "
                         f"{d.get('culprits', '')} confidence {d.get('confidence', 0):.1%} {d.get('message', '')}")
        else:
            lines.append(f"# {ev['at']} {kind}: {json.dumps(d, sort_keys=True)}")
    return "\n".join(one_line(ln) for ln in lines) + "\n"  # one event, one line, whatever it holds
