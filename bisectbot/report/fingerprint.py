"""Issue identity: a fingerprint of (recipe id, regression kind, culprit or range).

The fingerprint goes into a hidden marker ``<!-- bisectbot:fingerprint=<fp> -->`` in the body
of the issue; re-detection searches for it and comments instead of filing a duplicate.

Markers are honoured only in bodies and comments written by the bot's own account (see
:mod:`.github`); untrusted text has its markers removed by the sanitiser
(:func:`neutralise_markers`). With ``$BISECTBOT_MARKER_KEY`` set (a repository secret), the
fingerprint is an HMAC-SHA-256 of the identity under that key, so an outsider cannot predict the
marker of a future result and plant it ahead of the bot (issue 13).
"""

from __future__ import annotations

import hashlib
import hmac
import re

from ..models import RunResult
from ..sanitize import neutralise_markers  # noqa: F401  (re-exported beside the markers it breaks)

MARKER_PREFIX = "<!-- bisectbot:fingerprint="
_MARKER_RE = re.compile(r"<!-- bisectbot:fingerprint=([0-9a-f]{16}) -->")


def identity(result: RunResult) -> str:
    """The readable string the fingerprint hashes: ``recipe|kind|component|culprit-or-range``.

    Culprits are the final stage's ``culprits`` refs (comma-joined, in order); without them the
    range ``last_good..first_bad`` of the final stage; without a stage, the first bad nightly
    named in ``result.environment['first_bad']`` or the status.
    """
    final = result.final
    if final is not None and final.culprits:
        what = "culprit:" + ",".join(c.ref for c in final.culprits)
        comp = final.component
    elif final is not None and (final.first_bad or final.last_good):
        lg = final.last_good.ref if final.last_good else ""
        fb = final.first_bad.ref if final.first_bad else ""
        what = f"range:{lg}..{fb}"
        comp = final.component
    else:
        what = "first-bad:" + result.environment.get("first_bad", result.status.value)
        comp = ""
    return "|".join([result.recipe, result.kind or "regression", comp, what])


MARKER_KEY_ENV = "BISECTBOT_MARKER_KEY"
"""Environment variable holding the optional HMAC key of fingerprints (a repository secret)."""


def fingerprint(result: RunResult) -> str:
    """16 lower-case hex characters: SHA-256 of :func:`identity`, or HMAC-SHA-256 under
    ``$BISECTBOT_MARKER_KEY`` when set. Stable across runs and machines (with the same key)."""
    data = identity(result).encode("utf-8")
    from ..secrets import secret_env

    key = secret_env(MARKER_KEY_ENV)
    if key:
        return hmac.new(key.encode("utf-8"), data, hashlib.sha256).hexdigest()[:16]
    return hashlib.sha256(data).hexdigest()[:16]


def marker(fp: str) -> str:
    """The hidden HTML comment carrying ``fp`` (invisible in the rendered issue)."""
    if not re.fullmatch(r"[0-9a-f]{16}", fp):
        raise ValueError(f"not a bisectbot fingerprint: {fp!r}")
    return f"{MARKER_PREFIX}{fp} -->"


def find_fingerprints(body: str | None) -> list[str]:
    """All fingerprints marked in an issue body (usually zero or one). The caller checks the author."""
    return _MARKER_RE.findall(body or "")
