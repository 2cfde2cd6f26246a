"""Shape check of a ``result.json`` read back from disk (``report render``/``report file``).

A result file is an Actions artifact: it may be truncated, hand-edited or written by another
version. :func:`check_result_shape` validates the JSON against the shape ``RunResult.to_dict()``
writes (unknown keys allowed, missing optional keys defaulted) and raises
:class:`~bisectbot.errors.BadInput` naming the file and the field path of every problem, so the
renderer never meets a value of the wrong type (issue 13, class 10: exit 2, no traceback).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import BadInput
from ..models import CandidateKind, Status, Verdict

MAX_PROBLEMS = 8
"""Problems listed before ``… and N more``."""


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Candidate(_Shape):
    kind: CandidateKind
    ref: str
    label: str = ""
    component: str = ""
    meta: dict[str, Any] = Field(default_factory=dict)


class _Probe(_Shape):
    candidate: _Candidate
    verdict: Verdict
    reason: str = ""
    threshold: tuple[int | None, int | None] | None = None
    signature: str = ""
    table: list[dict[str, Any]] = Field(default_factory=list)
    duration_s: float = 0.0
    log_paths: list[str] = Field(default_factory=list)
    patches: list[dict[str, Any]] = Field(default_factory=list)
    cache_key: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)


class _Stage(_Shape):
    name: str
    component: str = ""
    status: Status
    candidates: list[_Candidate] = Field(default_factory=list)
    probes: list[_Probe] = Field(default_factory=list)
    last_good: _Candidate | None = None
    first_bad: _Candidate | None = None
    culprits: list[_Candidate] = Field(default_factory=list)
    confidence: float = 0.0
    flags: list[str] = Field(default_factory=list)
    message: str = ""
    count: int = Field(0, ge=0)
    positions: list[int] = Field(default_factory=list)


class _Result(_Shape):
    recipe: str
    kind: str = "regression"
    status: Status
    stages: list[_Stage] = Field(default_factory=list)
    model: str = ""
    tp: int = Field(1, ge=1)
    runner: str = ""
    regress: str = ""
    environment: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    patch_stack: list[dict[str, Any]] = Field(default_factory=list)
    triage: dict[str, str] = Field(default_factory=dict)
    reproduce: str = ""
    notes: list[str] = Field(default_factory=list)
    session_id: str = ""
    findings: list[_Stage] = Field(default_factory=list)
    reproduction: dict[str, Any] = Field(default_factory=dict)
    pages_url: str = ""
    minimized: dict[str, Any] = Field(default_factory=dict)


def check_result_shape(data: Any, filename: str) -> None:
    """Raise :class:`BadInput` (``FILE: not a RunResult: field.path: message`` per problem) unless ``data`` has the
    shape of ``RunResult.to_dict()``."""
    try:
        _Result.model_validate(data)
    except ValidationError as e:
        errs = e.errors()
        lines = []
        for err in errs[:MAX_PROBLEMS]:
            loc = ""
            for part in err["loc"]:
                loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
            lines.append(f"{filename}: not a RunResult: {loc or '(top level)'}: {err['msg']}")
        if len(errs) > MAX_PROBLEMS:
            lines.append(f"… and {len(errs) - MAX_PROBLEMS} more")
        raise BadInput("\n".join(lines)) from None
