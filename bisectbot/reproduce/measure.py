"""One sample of a measured-value reproducer (``regress: slower``, issue 39): the number a command printed.

The command prints its measurement on its **last non-empty stdout line**, either a bare number
(``17.67``) or a JSON object of named numbers (``{"throughput": 17.67, "ttft_ms": 210}``) of which
``reproducer.measure.metric`` names the one judged (unset: the only key). Everything above that
line is the command's own output and is ignored. Units are the command's: the report shows the
metric's name and never converts it.
"""

from __future__ import annotations

import json
import math
import sys

__all__ = ["MeasureError", "parse_sample"]

#: Characters of the offending line quoted in an error (the output is the candidate's data).
QUOTE_CHARS = 80
#: The largest magnitude taken as a sample: a quarter of the largest float, so that the sum of two
#: samples (a median of an even count) and a shift against another median stay finite.
MAX_VALUE = sys.float_info.max / 4


class MeasureError(ValueError):
    """The command's output holds no measurement: the message says what it printed instead."""


def _quote(line: str) -> str:
    """``line`` cut to :data:`QUOTE_CHARS`, as a JSON string (quoted, every control character escaped)."""
    return json.dumps(line[:QUOTE_CHARS]) + ("..." if len(line) > QUOTE_CHARS else "")


def parse_sample(stdout: str, metric: str | None = None, tail_limit: int | None = None) -> tuple[float, str]:
    """``(value, metric name)`` from a command's stdout (see the module doc); the name is
    ``metric``, the JSON key used, or ``"value"`` for a bare number without ``metric``.

    Raises :class:`MeasureError` for empty output, a last line that is neither a number nor a JSON
    object, a missing or ambiguous key, or a value that is not a finite number. ``tail_limit``: the
    characters of output the runner kept (its tail); a last line that fills it was cut, and is said so.
    """
    lines = [ln.strip() for ln in (stdout or "").splitlines() if ln.strip()]
    if not lines:
        raise MeasureError("the command printed nothing on stdout: its last line must be the measured number "
                           "or a JSON object of numbers")
    last = lines[-1]
    try:
        value: object = float(last)
        name = metric or "value"
    except ValueError:
        try:
            value, name = _from_json(last, metric)
        except MeasureError as e:
            if tail_limit is not None and len(lines) == 1 and len(stdout or "") >= tail_limit:
                raise MeasureError(f"the last stdout line is longer than the {tail_limit} characters kept of a "
                                   "command's output: print the number, or a short JSON object, last") from e
            raise
    try:
        v = float(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer of hundreds of digits
        v = math.inf
    if not math.isfinite(v) or abs(v) > MAX_VALUE:
        raise MeasureError(f"{_quote(name)} is not a finite number a median can be taken of "
                           f"({_quote(str(value)[:40])})")
    return v, name


def _from_json(last: str, metric: str | None) -> tuple[object, str]:
    """``(value, key)`` of the JSON object on ``last``; :class:`MeasureError` as :func:`parse_sample` says."""
    try:
        data = json.loads(last)
    except ValueError:
        raise MeasureError(f"the last stdout line is neither a number nor a JSON object: {_quote(last)}") from None
    if not isinstance(data, dict):
        raise MeasureError(f"the last stdout line is JSON but not an object of numbers: {_quote(last)}")
    numeric = sorted(k for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
    if metric is None:
        if len(numeric) != 1:
            raise MeasureError(f"the JSON object has {len(numeric)} numeric keys "
                               f"({', '.join(_quote(k) for k in numeric[:8]) or 'none'}): name one in "
                               "reproducer.measure.metric")
        metric = numeric[0]
    if metric not in data:
        raise MeasureError(f"the JSON object has no key {_quote(metric)} (reproducer.measure.metric); its keys: "
                           f"{', '.join(_quote(str(k)) for k in list(data)[:8]) or 'none'}")
    value = data[metric]
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise MeasureError(f"{_quote(metric)} is not a number: {_quote(json.dumps(value))}")
    return value, metric
