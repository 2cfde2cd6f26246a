"""Oracles beyond the text classifier inside a bisection (issue 18).

* :func:`reference_up` -- with ``reproducer.reference: {candidate: last-good}`` the
  bisection's good end is prepared and its server started beside the candidates (the
  runner picks another GPU slot) and kept up for the whole search; with ``{endpoint: URL}``
  that server is the reference. Before the search the noise between two *different* good
  builds is measured at several sizes: the good end against the build before it
  (``reference.calibrate_with``, default the good end's parent commit for git sources) for
  ``last-good``, or the good end against the endpoint. Without a second build the floors
  apply and the report says so.
* one candidate's threshold search with the comparison and the decode control is
  :func:`bisectbot.reproduce.oracle.reproduce`.
* :func:`oracle_notes` -- the report's lines: ``decode path: fine / broken / unusable`` next
  to the threshold (the control of the first bad, calibrated on the good end's) and the
  noise calibration table.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...errors import BadInput
from ...models import Candidate, ProbeResult, StageResult
from ...recipe import Recipe
from ...reproduce.oracle import Oracle
from ...run.base import CandidateRunner, PrepareFailed
from .executor import build_key

log = logging.getLogger(__name__)


ROUNDS_UNCALIBRATED = ("not calibrated: each round probe compares its candidate with the reference on its own "
                       "runner and measures no noise, so the floors apply")
"""The report's noise note of a round session's endpoint reference (what its probes measured)."""


def _partner(recipe: Recipe, good: Candidate, source: Any) -> tuple[Candidate | None, str]:
    """The second good build for the calibration with ``last-good``: ``(candidate, why-not)``."""
    ref = recipe.reproducer.reference
    assert ref is not None
    want = ref.calibrate_with or (f"{good.ref}^" if recipe.source.kind == "git" else None)
    if want is None:
        return None, "no build before the good end is known for this source (set reference.calibrate_with)"
    try:
        cands = source.candidates(want, good.ref)
    except Exception as e:  # noqa: BLE001 - a root commit has no parent: reported, floors apply
        if not ref.calibrate_with and "unknown commit" in str(e):  # issue 23: say what it means
            return None, (f"no second good build: the good end {good.label or good.ref[:12]} is the root commit, "
                          "there is nothing before it to calibrate against (set reference.calibrate_with); "
                          "the floors apply")
        return None, f"no second good build ({want}: {str(e).splitlines()[0][:160] if str(e) else type(e).__name__})"
    if len(cands) < 2:
        return None, f"no second good build ({want} is the good end itself)"
    return cands[0], ""


def _calibrate_against(runner: CandidateRunner, recipe: Recipe, reference: Any, partner: Candidate,
                       label: str, echo: Any) -> Any:
    from ...reproduce.client import Client
    from ...reproduce.reference import Noise, calibrate, calibration_sizes

    spec = recipe.reproducer
    prepared = runner.prepare(partner)
    if isinstance(prepared, PrepareFailed):
        return Noise(between=label, notes=[f"calibration build {partner.label or partner.ref} failed: "
                                           f"{prepared.reason[:200]}; the floors apply"])
    try:
        with runner.server(prepared) as srv:
            other = Client(srv.base_url, model=recipe.model or None, timeout_s=recipe.server.request_timeout_s)
            return calibrate(other, reference, spec, calibration_sizes(spec, spec.min_size, spec.max_size), label,
                             log=echo)
    except Exception as e:  # noqa: BLE001 - a calibration failure is reported, the floors apply
        return Noise(between=label, notes=[f"calibration failed: {type(e).__name__}: {str(e)[:200]}; the floors apply"])
    finally:
        runner.release(prepared)


@contextmanager
def reference_up(session: Any, good: Candidate, source: Any) -> Iterator[Oracle | None]:
    """Start the run's reference (see the module docstring) for the duration of the block and
    set ``session.oracle``; yields ``None`` when the recipe has none. Raises :class:`BadInput`
    when the good end cannot serve as the reference (it does not build or never gets healthy)."""
    from ...reproduce.client import Client
    from ...reproduce.reference import Noise, reference_client

    recipe: Recipe = session.recipe
    ref = recipe.reproducer.reference
    echo = session.echo
    if ref is None or recipe.reproducer.kind != "prefill" or recipe.regress.mode not in ("garbage", "diverges"):
        yield None
        return
    runner: CandidateRunner = session.runner
    timeout = recipe.server.request_timeout_s
    if getattr(getattr(session, "executor", None), "runs_probes", True) is False:
        # the planner of a round session (issue 23, input 7): its probes run elsewhere, each against the
        # endpoint with the floors (reproduce above); nothing is built, served or calibrated here, and
        # the report says what the probes measured. A last-good reference is refused before this
        # (bisectbot.recipe.fanout_problems).
        if not ref.endpoint:
            raise BadInput("reference candidate: last-good cannot serve planned rounds (use 'bisectbot run' "
                           "or reference.endpoint)")
        session.oracle = Oracle(reference_client(ref, timeout_s=timeout), Noise(notes=[ROUNDS_UNCALIBRATED]),
                                ref.endpoint)
        try:
            yield session.oracle
        finally:
            session.oracle = None
        return
    cleanup = getattr(runner, "cleanup_stale", None)
    if callable(cleanup):
        cleanup()  # before the reference starts: the round loop skips it while a reference is up
    if ref.endpoint:
        client = reference_client(ref, timeout_s=timeout)
        prepared = runner.prepare(good)
        label = f"the good end {good.label or good.ref} and the reference {ref.endpoint}"
        if isinstance(prepared, PrepareFailed):
            noise = Noise(between=label, notes=[f"the good end does not build: {prepared.reason[:200]}; "
                                                "the floors apply"])
        else:
            from ...reproduce.reference import calibrate, calibration_sizes

            try:
                with runner.server(prepared) as srv:
                    other = Client(srv.base_url, model=recipe.model or None, timeout_s=timeout)
                    spec = recipe.reproducer
                    noise = calibrate(other, client, spec, calibration_sizes(spec, spec.min_size, spec.max_size),
                                      label, log=echo)
            except Exception as e:  # noqa: BLE001 - reported, the floors apply
                noise = Noise(between=label, notes=[f"calibration failed: {type(e).__name__}: {str(e)[:200]}"])
            finally:
                runner.release(prepared)
        session.oracle = Oracle(client, noise, ref.endpoint)
        try:
            yield session.oracle
        finally:
            session.oracle = None
        return
    profile = getattr(runner, "profile", None)
    slots = list(getattr(profile, "gpu_slots", None) or [])
    need = recipe.bisect.parallel + 1
    if slots and len(slots) < need:
        raise BadInput(f"reference candidate: last-good keeps the good end on a GPU slot for the whole search: "
                       f"runner profile {getattr(profile, 'name', '?')!r} has {len(slots)} slot(s), bisect.parallel "
                       f"{recipe.bisect.parallel} needs {need} (add gpu_slots, lower parallel, or use reference.endpoint)")
    prepared = runner.prepare(good)
    if isinstance(prepared, PrepareFailed):
        raise BadInput(f"reference candidate: last-good: the good end {good.label or good.ref} cannot be "
                       f"prepared: {prepared.reason[:300]}")
    try:
        with runner.server(prepared) as srv:
            echo(f"reference: the good end {good.label or good.ref} serving at {srv.base_url} for the whole search")
            client = Client(srv.base_url, model=recipe.model or None, timeout_s=timeout)
            partner, why = _partner(recipe, good, source)
            if partner is None:
                noise = Noise(between="", notes=[why])
            else:
                noise = _calibrate_against(runner, recipe, client, partner,
                                           f"the good end {good.label or good.ref} and {partner.label or partner.ref}",
                                           echo)
            for line in noise.table(ref):
                echo(line)
            session.oracle = Oracle(client, noise, f"the good end {good.label or good.ref} (last-good reference)",
                                    serves=good.ref, serves_key=build_key(runner, good), prepared=prepared,
                                    base_url=srv.base_url)
            try:
                yield session.oracle
            finally:
                session.oracle = None
    finally:
        runner.release(prepared)


def _control_of(stage: StageResult, c: Candidate | None) -> Any:
    from ...reproduce.control import ControlResult

    if c is None:
        return None
    for p in reversed(stage.probes):
        if p.candidate.ref == c.ref and isinstance(p.extra.get("control"), dict):
            try:
                return ControlResult.from_dict(p.extra["control"])
            except (KeyError, TypeError, ValueError):
                return None
    return None


def oracle_notes(recipe: Recipe, stage: StageResult, oracle: Oracle | None = None) -> list[str]:
    """Report lines: the decode path (first bad's control, calibrated on the good end's) and
    the reference's noise calibration table."""
    out: list[str] = []
    spec = recipe.reproducer
    if spec.control is not None and spec.control.enabled and stage.first_bad is not None:
        from ...reproduce.control import decode_path

        good = _control_of(stage, stage.candidates[0] if stage.candidates else None)
        _, line = decode_path(_control_of(stage, stage.first_bad), good)
        out.append(line + f" (first bad {stage.first_bad.label or stage.first_bad.ref})")
    if spec.reference is not None and oracle is not None:
        out.append(f"reference: {oracle.label}; regress {recipe.regress}")
        out += [line.strip() for line in oracle.noise.table(spec.reference)]
    return out


def probe_control(p: ProbeResult) -> dict[str, Any] | None:
    """The decode-control result stored in a probe, if any."""
    c = p.extra.get("control")
    return c if isinstance(c, dict) else None


__all__ = ["ROUNDS_UNCALIBRATED", "oracle_notes", "probe_control", "reference_up"]
