"""The component-commit stage: from a first-bad nightly (or component pair) to one component's commit.

When the last-good and first-bad candidates of stage 1 name their component commits
(``meta["commits"]``, or the versions inside two nightly images), the *attribution*
probes mixed pairs (one component new, the others old) to find the component whose
change alone is bad; that component's first-parent commits are then bisected with the
others pinned (:meth:`ComponentStage.run`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...bisect import attribute_components, plausibility_flags
from ...errors import BadInput
from ...models import Candidate, ProbeResult, RunResult, StageResult, Status, Verdict
from ...recipe import Recipe
from ...verdict.record import measured_now
from ..probing.executor import Echo
from ..probing.prober import Prober
from ..rounds.loop import RoundLoop


class ComponentStage:
    """Attribution (mixed pairs probed through ``prober``) and the component commit bisection
    (through ``loop``); ``echo`` receives the attribution's lines. ``repo_of(component)`` gives a
    configured component's :class:`~bisectbot.sources.git.GitRepo` (a URL cloned into the cache;
    the session passes :meth:`DescentStage.repo_of`, so one clone serves both)."""

    def __init__(self, prober: Prober, loop: RoundLoop, recipe: Recipe, *, echo: Echo,
                 repo_of: Callable[[str], Any] | None = None):
        self.prober = prober
        self.loop = loop
        self.recipe = recipe
        self.echo = echo
        self.repo_of = repo_of or self._open

    def run(self, old: dict[str, str], new: dict[str, str], *, stage1_done: bool = False,
                   repos: dict[str, Any] | None = None, base: Candidate | None = None,
                   bad_base: Candidate | None = None, base_probe: ProbeResult | None = None) -> list[StageResult]:
        """Attribute a regression between two component tuples, then bisect the guilty component.

        ``old``/``new`` map component -> commit (last-good and first-bad). When several
        components changed, the mixed pairs (one component new, the others old) are probed
        first (:func:`bisectbot.bisect.attribute_components`): the component whose change
        alone is bad is bisected over its first-parent commits with the others pinned at
        ``old``; when none is bad alone but one is *needed* (the others new without it are
        good, e.g. new vLLM needs new aiter's API), it is bisected with the others pinned at
        ``new``. ``repos`` maps components to
        :class:`bisectbot.sources.git.GitRepo` (default: the runner's ``repos``). ``base`` is
        the last-good nightly when the components live in images: candidates then carry
        ``meta["base"]`` (that image) for overlay builds, and ``ref`` is the overlaid commit.
        ``bad_base`` is the first-bad nightly: when the others must be pinned at the bad end
        (the guilty component needs their new versions), the guilty component's commits are
        overlaid onto that image instead (its own files rolled back or forward from the
        first-bad commit), so the others stay at their bad-end versions. Without it such a
        stage is refused with a message. ``base_probe``: stage 1's probe of ``base`` in this run;
        the commit stage's good end, an empty overlay on that image (its commit is the image's), is the
        same build, so that probe counts as one measurement of it
        (:meth:`bisectbot.bisect.Bisection.measured_before`).
        """
        from ...models import CandidateKind

        repos = repos or getattr(self.prober.runner, "repos", {})
        changed = [c for c in new if old.get(c) != new[c]]
        if not changed:
            return [StageResult("components", "", Status.NO_REGRESSION,
                                message="no component changed between last-good and first-bad")]

        base_img = base.meta.get("image") if base is not None else None
        bad_img = bad_base.meta.get("image") if bad_base is not None else None

        def combo(commits: dict[str, str], label: str, overlay: str | None = None) -> Candidate:
            if base_img and overlay:  # an overlay of one component's commit on the last-good image
                return Candidate(CandidateKind.COMMIT, commits[overlay], label, overlay,
                                 {"commits": commits, "base": base_img, "base_commit": old.get(overlay)})
            ref = ",".join(f"{k}={v}" for k, v in sorted(commits.items()))
            return Candidate(CandidateKind.COMMIT, ref, label, "+".join(sorted(commits)), {"commits": commits})

        stages: list[StageResult] = []
        guilty = changed
        if len(changed) > 1:
            att = StageResult("attribution", "+".join(changed), Status.INCONCLUSIVE)
            self.prober.start("attribution", combo(old, "").ref, combo(new, "").ref)
            self.prober.prior_events()
            ends = [] if stage1_done else [(combo(old, "all old"), Verdict.GOOD), (combo(new, "all new"), Verdict.BAD)]
            mixes = [(combo({**old, x: new[x]}, f"new {x} + old {', '.join(c for c in changed if c != x)}", x),
                      None) for x in changed]
            alone: dict[str, Verdict] = {}
            for (cand, expect), x in zip(ends + mixes, [None] * len(ends) + changed):
                res, origin = self.prober.probe(cand)
                att.probes.append(res)
                self.prober.event("probe", {"ref": cand.ref, "label": cand.label, "verdict": res.verdict.value,
                                      "reason": res.reason, "signature": res.signature, "origin": origin,
                                      "phase": "attribution", "duration_s": round(res.duration_s, 3)})
                self.echo(f"attribution {cand.label}: {res.verdict.value}; {res.reason}")
                if expect is not None and res.verdict is not expect:
                    att.status = Status.BOUNDARY_FAILED
                    att.message = f"{cand.label} is {res.verdict.value}, expected {expect.value}"
                    return [att]
                if x is not None:
                    alone[x] = res.verdict
            # the rule (issue 12): bad alone -> others pinned old; needed (removing it is good)
            # -> others pinned at the bad end; else no decision
            decision = attribute_components(changed, alone)
            att.message = decision.reason
            if decision.component is None:
                return [att]
            if decision.exact:
                att.status = Status.CULPRIT
            guilty = [decision.component]
            pin_new = decision.pin == "new"
            if pin_new and base_img and not bad_img:  # overlays on the last-good image keep the others old
                att.status = Status.INCONCLUSIVE
                att.message += ("; overlay builds on the last-good image cannot pin the others at the bad end: "
                                "bisect with --good/--bad component pins instead")
                return [att]
            att.confidence = 1.0 if att.status is Status.CULPRIT else 0.0
            stages.append(att)
        else:
            pin_new = False
        g = guilty[0]
        repo = repos[g]
        commits = repo.commits(old[g], new[g], first_parent=True)
        pinned = {k: v for k, v in (new if pin_new else old).items() if k != g}
        extra = {"base": base_img, "base_commit": old[g]} if base_img else {}
        if base_img and pin_new:  # the others at the bad end: overlay g's commits onto the first-bad image
            extra = {"base": bad_img, "base_commit": new[g]}
        cands = [Candidate(c.kind, c.ref, c.label, g, {**c.meta, "commits": {g: c.ref, **pinned}, **extra})
                 for c in commits]

        def flags(cul: Candidate, pred: Candidate) -> list[str]:
            src = self.recipe.bisect.components.get(g)
            return plausibility_flags(runtime_paths=src.runtime_paths if src else (),
                                      **repo.plausibility_inputs(cul.ref, pred.ref))

        measured = {}
        if (base_probe is not None and base_img and not pin_new and cands and cands[0].ref == old[g]
                and base_probe.verdict is Verdict.GOOD and measured_now(base_probe)):
            measured[0] = base_probe  # the good end is the last-good nightly's build: nothing overlaid on it
        stages.append(self.loop.search(f"{g} commits", cands, g, flags, measured=measured))
        return stages

    def image_pair(self, lg: Candidate, fb: Candidate, result: RunResult) -> tuple[dict[str, Any], dict[str, Any]]:
        """The :func:`bisectbot.components.image_info` of the last-good and first-bad nightlies
        (cached in the ledger by digest); their vLLM/aiter/torch versions go to ``result.environment``."""
        from ...components import image_info

        ledger = self.prober.ledger  # image introspection is cached there by digest
        a = image_info(str(lg.meta["image"]), ledger)
        b = image_info(str(fb.meta["image"]), ledger)
        for comp in ("vllm", "aiter", "torch"):
            if (a.get(comp) or {}).get("version"):
                result.environment[f"{comp} (last good)"] = str(a[comp]["version"])
            if (b.get(comp) or {}).get("version"):
                result.environment[f"{comp} (first bad)"] = str(b[comp]["version"])
        return a, b

    def from_images(self, lg: Candidate, fb: Candidate, result: RunResult) -> list[StageResult]:
        """Diff the last-good and first-bad nightlies; bisect the changed components' commits.

        Components without a git source in ``recipe.bisect.components``, without a commit
        range in the images, or whose repository cannot be cloned or lacks the commits (GitHub
        down: the night keeps its nightly result) are reported in the notes, not bisected.
        """
        from ...components import diff_images

        a, b = self.image_pair(lg, fb, result)
        old: dict[str, str] = {}
        new: dict[str, str] = {}
        for ch in diff_images(a, b):
            if not ch.changed:
                continue
            if ch.component not in self.recipe.bisect.components or not ch.range:
                result.notes.append(f"{ch.component} changed ({ch.old} -> {ch.new}) but has no commit stage"
                                    f"{': ' + ch.note if ch.note else ''}")
                continue
            old[ch.component], new[ch.component] = ch.range
        if not old:
            return []
        repos: dict[str, Any] = {}
        for c in list(old):  # clone (a URL) and resolve refs (tags, short SHAs) to full commits
            try:
                repos[c] = self.repo_of(c)
                old[c], new[c] = repos[c].resolve(old[c]), repos[c].resolve(new[c])
            except BadInput as e:  # unreachable or unknown upstream: the nightly result still stands
                # (no stage over the others either: the one left out may be the guilty one)
                result.notes.append(f"{c} changed ({old[c]} -> {new[c]}) but its commits cannot be bisected: {e}; "
                                    "no commit stage ran")
                self.echo(f"{c}: no commit stage: {e}")
                return []
        lg_probe = next((p for st in result.stages for p in reversed(st.probes) if p.candidate.ref == lg.ref), None)
        return self.run(old, new, stage1_done=True, repos=repos, base=lg, bad_base=fb, base_probe=lg_probe)

    def _open(self, component: str) -> Any:
        from ...sources.git import GitRepo, local_repo

        return GitRepo(local_repo(self.recipe.bisect.components[component].repo), component)
