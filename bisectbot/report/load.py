"""Reading a report's ``result.json`` back: :func:`load_result` (bounded, shape-checked) and
:func:`run_result_from_dict`.

Used by ``bisectbot report`` commands and the dashboard; the shape check
(:mod:`bisectbot.report.result_file`, pydantic) is imported only here, on first use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import jsonio as _jsonio
from ..models import Candidate, ChainLink, ProbeResult, RunResult, StageResult, Status
from .history import NightlyResult

MAX_RESULT_BYTES = 256 * 1024 * 1024
"""A result file larger than this (bytes) is refused before it is read (a real one is a few MB)."""


def load_result(path: Path) -> tuple[RunResult, NightlyResult | None]:
    """Read a ``RunResult`` JSON (``RunResult.to_dict()`` or :func:`render_json` output).

    Raises :class:`bisectbot.errors.BadInput` with the file and the field on bad input.
    """
    from ..errors import BadInput
    from ..located import read_regular
    from .result_file import check_result_shape

    p = Path(path)
    try:
        raw = read_regular(p, MAX_RESULT_BYTES)
        if len(raw) > MAX_RESULT_BYTES:
            raise BadInput(f"{path}: larger than {MAX_RESULT_BYTES} bytes, not a result file")
        data = _jsonio.loads(raw.decode("utf-8"))
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 (byte {e.start}): not a result file") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    except RecursionError:
        raise BadInput(f"{path}: JSON nested too deeply: not a result file") from None
    except ValueError as e:  # e.g. an integer beyond Python's digit limit
        raise BadInput(f"{path}: not a result file: {str(e)[:120]}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object (a RunResult)")
    nightly = None
    if "result" in data and isinstance(data["result"], dict):
        if isinstance(data.get("nightly"), dict):
            try:
                nightly = NightlyResult.from_dict(data["nightly"])
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise BadInput(f"{path}: nightly: not a nightly history: {type(e).__name__}: {e}") from None
        data = data["result"]
    check_result_shape(data, str(path))
    try:
        return run_result_from_dict(data), nightly
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{path}: not a RunResult: {type(e).__name__}: {e}") from None


def run_result_from_dict(d: dict[str, Any]) -> RunResult:
    """Inverse of ``RunResult.to_dict()`` (models.py has no ``from_dict`` for RunResult)."""
    def cand(x: Any) -> Candidate | None:
        return Candidate.from_dict(x) if x else None

    def stage(s: dict[str, Any]) -> StageResult:
        return StageResult(
            name=s["name"], component=s.get("component", ""), status=Status(s["status"]),
            candidates=[Candidate.from_dict(c) for c in s.get("candidates") or []],
            probes=[ProbeResult.from_dict(p) for p in s.get("probes") or []],
            last_good=cand(s.get("last_good")), first_bad=cand(s.get("first_bad")),
            culprits=[Candidate.from_dict(c) for c in s.get("culprits") or []],
            confidence=float(s.get("confidence") or 0.0), flags=list(s.get("flags") or []),
            message=s.get("message", ""), count=int(s.get("count") or 0),
            positions=[int(i) for i in s.get("positions") or []],
        )

    stages = [stage(s) for s in d.get("stages") or []]
    return RunResult(
        recipe=d["recipe"], kind=d.get("kind", "regression"), status=Status(d["status"]), stages=stages,
        model=d.get("model", ""), tp=int(d.get("tp") or 1), runner=d.get("runner", ""),
        regress=d.get("regress", ""), environment={k: str(v) for k, v in (d.get("environment") or {}).items()},
        patch_stack=list(d.get("patch_stack") or []), triage=dict(d.get("triage") or {}),
        reproduce=d.get("reproduce", ""), notes=list(d.get("notes") or []), session_id=d.get("session_id", ""),
        findings=[stage(s) for s in d.get("findings") or []],
        reproduction=dict(d.get("reproduction") or {}),
        chain=[ChainLink.from_dict(c) for c in d.get("chain") or []],
        pages_url=str(d.get("pages_url") or ""),
        minimized=dict(d.get("minimized") or {}),
    )
