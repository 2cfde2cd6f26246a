"""``run --minimize`` (issue 42): the smallest part of a culprit commit that still fails.

After a stage names a culprit commit (verified as the recipe asks), its diff against its
predecessor is split into files (:func:`bisectbot.change.units`) and searched with ddmin
(:mod:`bisectbot.bisect.minimize`): each subset is applied on top of the predecessor as a change
under test (:mod:`bisectbot.change`) and probed through the run's prober -- the same reproducer,
cold prefills, the probe cache and the ledger, and the bisection's verdict rule: the subset is asked
the bad end's failing prompts first and judged on them (:meth:`bisectbot.verdict.scope.Scope.judge`).
A subset that does not apply, build or start is a skip (ddmin's "unresolved"). The files that remain
are then split into hunks and searched again. The subset found is verified as the culprit is
(issue 40): by its own probe when that already holds two agreeing measurements of the recipe's flake
unit (:func:`bisectbot.verdict.agreement.agreeing`: under ``start``, the bad end's failure shown on two
prompts), else by a second start; and the rest of the culprit without it is probed: good means the
subset is the whole cause; bad means the rest fails too (a second cause, as in the seed report's two
bugs in one file).

It says why when the culprit cannot be searched: no culprit commit (a nightly image, a range), a
runner that cannot apply a change (releases, prebuilt wheels), no repository of the component, a
change made only of parts the patch step cannot apply (binary files), one part only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...bisect.minimize import FAIL, PASS, UNRESOLVED, Minimized, budget_for, ddmin, words
from ...change import Change, Unit, compose, from_git, units, unsplittable
from ...errors import BadInput
from ...models import CandidateKind, ProbeResult, StageResult, Status, Verdict
from ...recipe import GitSource, Recipe
from ...verdict.agreement import agreeing
from ...verdict.scope import Scope, learn
from ..probing.executor import Echo
from ..probing.prober import Prober
from ..trial import with_change

__all__ = ["MinimizeStage"]

#: The diff text of the subset found is kept whole up to this many characters in result.json (a
#: minimal part is a few hunks; a subset this large was not reduced much and is shown by its labels).
MAX_DIFF_CHARS = 20_000


class MinimizeStage:
    """ddmin inside a culprit through ``prober``; ``repo_of(component)`` gives the component's git
    repository (None: unknown); ``budget``: probes per ddmin (None: :func:`budget_for` the parts)."""

    def __init__(self, prober: Prober, recipe: Recipe, *, echo: Echo, base_dir: Path | None = None):
        self.prober = prober
        self.recipe = recipe
        self.echo = echo
        self.base_dir = base_dir

    # ------------------------------------------------------------------ where the diff comes from
    def _repo(self, component: str) -> Path | None:
        repos = getattr(self.prober.runner, "repos", None)
        if isinstance(repos, dict) and component in repos:
            r = repos[component]
            return Path(getattr(r, "path", r))
        from ...sources.git import local_repo

        src = self.recipe.bisect.components.get(component)
        if src is None and isinstance(self.recipe.source, GitSource):
            src = self.recipe.source
        return local_repo(src.repo, self.base_dir) if src is not None else None

    def _not(self, why: str, **extra: Any) -> dict[str, Any]:
        self.echo(f"minimize: not searched: {why}")
        return {"searchable": False, "why": why, **extra}

    # ------------------------------------------------------------------ the search
    def run(self, st: StageResult, budget: int | None = None) -> dict[str, Any]:
        """The smallest failing subset of ``st``'s culprit (a dict for ``result.json``'s ``minimized``:
        ``searchable``, ``why`` when not, else ``level``, ``parts``, ``subset`` (unit labels), ``diff``,
        ``minimal``, ``probes``, ``budget``, ``tests``, ``verified``, ``rest``)."""
        fb, lg = st.first_bad, st.last_good
        if st.status is not Status.CULPRIT or fb is None or lg is None:
            return self._not(f"no culprit to search inside (the stage ended {st.status.value})")
        if fb.kind is not CandidateKind.COMMIT or lg.kind is not CandidateKind.COMMIT:
            return self._not(f"the culprit {fb.label or fb.ref[:12]} is a {fb.kind.value}, not a commit: its parts "
                             "are no diff (let the commit stage name a commit)")
        if not getattr(self.prober.runner, "supports_change", False):
            return self._not(f"{type(self.prober.runner).__name__} cannot apply part of a commit (releases and "
                             "prebuilt wheels are installed as published)")
        repo = self._repo(fb.component)
        if repo is None:
            return self._not(f"no git repository of {fb.component!r} to take the culprit's diff from")
        try:
            whole = from_git(repo, lg.ref, fb.ref, component=fb.component,
                             source=f"culprit {fb.ref[:12]} on {lg.ref[:12]}")
        except BadInput as e:
            return self._not(str(e))
        files = units(whole, "files")
        stuck = unsplittable(whole)
        left_out = [u.path for u in files if u.whole == "binary"]
        if len(left_out) == len(files):
            return self._not("every file of the culprit is binary: the patch step cannot apply a part of it",
                             unsplittable=stuck)
        scope = self._scope(st)
        prober = self.prober
        self._results: dict[tuple[str, ...], ProbeResult] = {}  # each tested subset's probe, by its labels
        prober.focus = scope.sizes if scope is not None else ()
        out: dict[str, Any] = {"searchable": True, "culprit": fb.ref, "predecessor": lg.ref,
                               "component": fb.component, "unsplittable": stuck, "tests": []}
        try:
            with prober.executor_for(prefetch=False) as executor:
                def probe(change: Change, attempt: int = 1) -> ProbeResult:
                    c = with_change(lg, change)
                    ((res, _origin),) = prober.probe_batch([(c, attempt)], executor)
                    return scope.judge(res) if scope is not None else res

                if left_out:  # the patch step cannot apply binary files: search the rest, if it fails alone
                    files = [u for u in files if u.path not in left_out]
                    whole = compose(whole, files, f"culprit {fb.ref[:12]} without its binary files")
                    out["binary_left_out"] = left_out
                    res = probe(whole)
                    out["tests"].append({"level": "files", "parts": ["the culprit without its binary files"],
                                         "attempt": 1, "verdict": res.verdict.value, "reason": res.reason[:300]})
                    if res.verdict is not Verdict.BAD:
                        out.update({"searchable": False, "why": (
                            f"without its binary files ({', '.join(left_out)}) the culprit is {res.verdict.value} on "
                            "its predecessor: the cause may be in a part the patch step cannot apply")})
                        out["probes"] = len(out["tests"])
                        self.echo("minimize: not searched: " + out["why"])
                        return out
                chosen_files = self._level(whole, files, "files", budget, probe, out)
                if chosen_files is None:
                    return out
                level_change = compose(whole, chosen_files, f"culprit {fb.ref[:12]}: {len(chosen_files)} of "
                                       f"{len(files)} files")
                hunks = units(level_change, "hunks")
                chosen = chosen_files
                level, parts = "files", files
                if len(hunks) > len(chosen_files):
                    got = self._level(whole, hunks, "hunks", budget, probe, out)
                    if got is None:
                        return out
                    chosen, level, parts = got, "hunks", hunks
                found = compose(whole, chosen, f"culprit {fb.ref[:12]}: {len(chosen)} of {len(parts)} {level}")
                out.update({"level": level, "parts": len(parts), "files": len(files),
                            "hunks_total": len(units(whole, "hunks")),
                            "subset": [u.label() for u in chosen],
                            "diff": found.diff if len(found.diff) <= MAX_DIFF_CHARS else ""})
                last = self._results.get(tuple(u.label() for u in chosen))
                # the culprit itself failed in two starts of this run: the bug shows in every start (agreement)
                shown = sum(1 for p in st.probes if p.candidate.ref == fb.ref and p.verdict is Verdict.BAD) >= 2
                held = (agreeing(self.recipe, last, scope, this_run=True, shows_every_start=shown)
                        if last is not None else None)
                if held is not None and held.count >= 2:  # the verification's standard met in its own probe
                    out["verified"] = "bad"
                    out["verified_by"] = f"its probe: {held.what}"
                elif last is None and len(chosen) == len(parts) and level == "files":
                    out["verified"] = "bad"
                    out["verified_by"] = "the culprit's own verdict (nothing could be left out)"
                else:
                    again = probe(found, attempt=2)
                    out["verified"] = again.verdict.value
                    out["verified_by"] = "a second start"
                    out["tests"].append({"level": level, "parts": [u.label() for u in chosen], "attempt": 2,
                                         "verdict": again.verdict.value, "reason": again.reason[:300]})
                rest_units = [u for u in units(whole, "hunks") if not _covered(u, chosen)]  # binary files aside
                if rest_units:
                    rest = compose(whole, rest_units, f"culprit {fb.ref[:12]} without the subset found")
                    r = probe(rest)
                    out["rest"] = r.verdict.value
                    out["tests"].append({"level": "hunks", "parts": ["the rest of the culprit"], "attempt": 1,
                                         "verdict": r.verdict.value, "reason": r.reason[:300]})
                else:
                    out["rest"] = "empty"
        finally:
            prober.focus = ()
        out["probes"] = sum(1 for t in out["tests"])
        self.echo("minimize: " + words(out))
        return out

    def _scope(self, st: StageResult) -> Scope | None:
        """The bad end's failing prompts (the stage's last candidate's bad probe), which every subset
        is asked first and judged on, as the bisection's candidates were."""
        if not st.candidates:
            return None
        end = st.candidates[-1].ref
        for p in st.probes:
            if p.candidate.ref == end and p.verdict is Verdict.BAD:
                return learn(self.recipe, p, st.candidates[-1].label or end[:12])
        return None

    def _level(self, whole: Change, parts: list[Unit], level: str, budget: int | None, probe: Any,
               out: dict[str, Any]) -> list[Unit] | None:
        """ddmin over ``parts`` (one level); the parts kept, or None when the level could not start."""
        if len(parts) == 1:
            return parts
        b = budget or budget_for(len(parts))
        out.setdefault("budget", {})[level] = b
        self.echo(f"minimize: {len(parts)} {level} of the culprit, ddmin within {b} probes")

        def test(idx: tuple[int, ...]) -> str:
            chosen = [parts[i] for i in idx]
            res = probe(compose(whole, chosen, f"{len(chosen)} of {len(parts)} {level} of the culprit"))
            self._results[tuple(u.label() for u in chosen)] = res
            verdict = FAIL if res.verdict is Verdict.BAD else PASS if res.verdict is Verdict.GOOD else UNRESOLVED
            out["tests"].append({"level": level, "parts": [u.label() for u in chosen], "attempt": 1,
                                 "verdict": res.verdict.value, "reason": res.reason[:300]})
            self.echo(f"minimize: {len(chosen)} of {len(parts)} {level}: {res.verdict.value}; {res.reason[:160]}")
            return verdict

        m: Minimized = ddmin(len(parts), test, b)
        out.setdefault("minimal", {})[level] = m.minimal
        return [parts[i] for i in m.subset]


def _covered(u: Unit, chosen: list[Unit]) -> bool:
    return any(c.path == u.path and (c.hunk is None or c.hunk == u.hunk) for c in chosen)

