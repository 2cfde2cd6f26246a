"""One candidate's threshold search with the recipe's oracles (issue 18).

:func:`reproduce` runs the threshold search on one server with the comparison against the
run's reference (regress ``diverges`` / ``garbage, diverges``) and the decode control
(``reproducer.control``: one more short request in the same server session; its result is
part of the probe). :class:`Oracle` is the reference a session keeps up for the whole
search (:func:`bisectbot.session.probing.oracles.reference_up`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..recipe import Recipe

UNCALIBRATED = "not calibrated in this process: the floors apply"
"""The noise note of an endpoint reference a probe contacts without a calibration of its own
(``round probe``: one candidate per process, issue 23, input 7)."""


@dataclass
class Oracle:
    """The reference of a run: ``client`` (a :class:`bisectbot.reproduce.client.Client`),
    ``noise`` (:class:`bisectbot.reproduce.reference.Noise`), ``label`` (what it is)."""

    client: Any
    noise: Any
    label: str
    notes: list[str] = field(default_factory=list)
    #: the candidate (ref and the runner's build key) whose build the reference server is, with that
    #: build's :class:`bisectbot.run.base.Prepared` and the server's URL (``last-good``; empty for an endpoint):
    #: :func:`reference_start` lets that build's first probe use this start instead of another one
    serves: str = ""
    serves_key: str = ""
    prepared: Any = None
    base_url: str = ""


def reference_start(oracle: Oracle | None, candidate_ref: str, build_key: str, attempt: int,
                    toggled: bool) -> Oracle | None:
    """The reference when a probe may run on its server instead of starting one of its own: the
    probe's candidate is the build the reference serves (same ref, same runner build key), it is that
    candidate's first attempt (a verification re-probe, attempt 2+, starts a server of its own: a
    second start of the build) and no triage toggle changes the server's environment or arguments.

    Why no start is lost: a probe of the reference build under ``regress: diverges`` compares that
    build's replies with that build's replies; a second server of the same image would measure the
    same thing (every request carries its own ``cache_salt``, so each prefill is cold on a shared
    server too), and on a night a start is the cost (10--40 minutes on MI355X, issue 40). None
    otherwise."""
    if (oracle is None or not oracle.serves or oracle.prepared is None or toggled or attempt != 1
            or oracle.serves != candidate_ref or oracle.serves_key != build_key):
        return None
    return oracle


def reproduce(recipe: Recipe, url: str, oracle: Oracle | None,
              focus: list[int] | None = None) -> tuple[Any, dict[str, Any]]:
    """The threshold search on the server at ``url`` with the recipe's oracles; returns the
    :class:`bisectbot.reproduce.search.ThresholdResult` and extra probe evidence
    (``control``: the decode control's result dict; ``reference``: label and noise). ``focus``:
    sizes (tokens) asked first (issue 23, :mod:`bisectbot.reproduce.focus`)."""
    from ..reproduce.client import Client
    from ..reproduce.reference import Noise, reference_client, search_with_reference
    from ..reproduce.threshold import search_threshold

    spec = recipe.reproducer
    timeout = recipe.server.request_timeout_s
    extra: dict[str, Any] = {}
    if spec.reference is not None:
        if oracle is None and spec.reference.endpoint:
            oracle = Oracle(reference_client(spec.reference, timeout_s=timeout),
                            Noise(notes=[UNCALIBRATED]), spec.reference.endpoint)
        if oracle is None:
            from ..reproduce.search import ThresholdResult

            tr = ThresholdResult(status="error", error="the reference (last-good) is not running in this process",
                                 endpoint=url)
            return tr, extra
        diverges = recipe.regress.mode == "diverges"
        garbage = recipe.regress.mode != "diverges" or recipe.regress.arg == "garbage"
        tr = search_with_reference(url, oracle.client, spec, oracle.noise, diverges_bad=diverges,
                                   garbage_bad=garbage, model=recipe.model or None, timeout_s=timeout,
                                   focus=focus)
        extra["reference"] = {"label": oracle.label, "noise": oracle.noise.to_dict()}
    else:
        tr = search_threshold(url, spec, model=recipe.model or None, timeout_s=timeout, focus=focus)
    if spec.control is not None and spec.control.enabled and tr.status != "error":
        from ..reproduce.control import run_control

        extra["control"] = run_control(Client(url, model=recipe.model or None, timeout_s=timeout), spec.control,
                                       spec.seed).to_dict()
    return tr, extra
