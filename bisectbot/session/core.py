"""The :class:`Session`: one ``bisectbot run``, composed of collaborators and driving them.

It builds one :class:`~bisectbot.session.probing.prober.Prober` (probe cache, the one ledger
writer), one :class:`~bisectbot.session.rounds.loop.RoundLoop` (a stage's search in rounds) and
the stages, each handed what it needs; :meth:`Session.run` calls the stages in order and
puts their results together. A new stage is a class taking the prober, the loop and the
recipe, returning its :class:`bisectbot.models.StageResult`; it is built in
:meth:`Session.__init__` and called at its place in :meth:`Session.run`.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ..components import diff_images
from ..ledger import Ledger
from ..models import RunResult, Status
from ..pins import parse_pins
from ..recipe import GitSource, Recipe
from ..run.base import CandidateRunner
from ..sources.git import GitRepo
from .probing.executor import Echo, Executor
from .probing.oracles import oracle_notes
from .probing.prober import Prober
from .replay import LogLine
from .result import finish_result, new_result
from .rounds.loop import RoundLoop
from .sources import CandidateSource, GitCandidates
from .stages.components import ComponentStage
from .stages.descent import DescentStage
from .stages.drift import DriftStage
from .stages.first import Stage1
from .stages.merges import MergeStage
from .stages.minimize import MinimizeStage
from .stages.settle import settle
from .stages.triage import Triage


class Session:
    """One ``bisectbot run``. ``echo`` receives progress lines (None: silent).

    ``replay``, ``human``, ``executor`` and ``retry_errors`` go to the :class:`Prober` (see
    there: replayed and maintainers' verdicts, the caching policy). ``base_dir`` resolves
    relative repository paths of the recipe (its directory). ``prefetch`` False: no
    candidate is prepared ahead (a runner whose prepare is costly to waste, a release
    download, opts out with ``supports_prefetch = False``).

    Collaborators: ``prober``, ``loop``, and the stages ``stage1``, ``drift``, ``merge``,
    ``triage``, ``components``, ``descent`` (through dependency pins, issue 26), ``minimize``
    (inside the culprit, ``bisect.minimize``, issue 42).
    """

    def __init__(self, recipe: Recipe, ledger: Ledger, runner: CandidateRunner, *,
                 echo: Echo | None = None, replay: list[LogLine] | None = None,
                 base_dir: Path | None = None, prefetch: bool = True, recipe_path: str = "",
                 human: list[LogLine] | None = None, executor: Executor | None = None,
                 retry_errors: bool = False):
        self.recipe = recipe
        self.recipe_path = recipe_path or f"{recipe.name}.yaml"
        self.ledger = ledger
        self.runner = runner
        self.echo: Echo = echo or (lambda s: None)
        self.prober = Prober(recipe, ledger, runner, echo=self.echo, replay=replay, human=human,
                             executor=executor, retry_errors=retry_errors)
        self.loop = RoundLoop(self.prober, recipe, echo=self.echo,
                              prefetch=prefetch and getattr(runner, "supports_prefetch", True),
                              recipe_path=self.recipe_path)
        self.stage1 = Stage1(self.prober, self.loop, recipe, base_dir=base_dir)
        self.drift = DriftStage(self.loop, recipe)
        self.merge = MergeStage(self.loop, echo=self.echo)
        self.triage = Triage(self.prober, recipe, echo=self.echo)
        self.descent = DescentStage(self.loop.search, recipe, repos=_git_repos(runner), base_dir=base_dir,
                                    echo=self.echo)
        self.components = ComponentStage(self.prober, self.loop, recipe, echo=self.echo,
                                         repo_of=self.descent.repo_of)  # one clone per component
        self.minimize = MinimizeStage(self.prober, recipe, echo=self.echo, base_dir=base_dir)

    # ------------------------------------------------------------------ what callers read and set
    @property
    def session_id(self) -> str:
        """The ledger session of the last stage that ran."""
        return self.prober.session_id

    @property
    def round_no(self) -> int:
        """Rounds (batches of probes) so far, cached ones included."""
        return self.prober.round_no

    @property
    def oracle(self) -> Any:
        """The run's reference while it is up (issue 18), else None."""
        return self.prober.oracle

    @oracle.setter
    def oracle(self, value: Any) -> None:
        self.prober.oracle = value

    @property
    def log_resume(self) -> bool:
        """False: a resumed session logs no ``resume`` event (replays of a round plan or import)."""
        return self.loop.log_resume

    @log_resume.setter
    def log_resume(self, value: bool) -> None:
        self.loop.log_resume = value

    # ------------------------------------------------------------------ the run
    def run(self, good: str | None = None, bad: str | None = None,
            source: CandidateSource | None = None) -> RunResult:
        """Stage 1 over the recipe's source (plus the component stage when possible), triage, result.
        A recipe's reference (issue 18) is up from the start of stage 1 to the end of the run."""
        with ExitStack() as stack:
            return self._run(good, bad, source, stack)

    def _run(self, good: str | None, bad: str | None, source: CandidateSource | None,
             stack: ExitStack) -> RunResult:
        r = self.recipe
        good, bad, source = self.stage1.ends(good, bad, source)
        result = new_result(r)
        if "=" in good or "=" in bad:
            old, new = parse_pins(good), parse_pins(bad)
            result.stages = self.components.run(old, new)
        else:
            st, source = self.stage1.run(good, bad, source, stack)
            s1 = st
            result.stages.append(st)
            finding, note = self.drift.run(st, self.loop.last_bisection)
            if finding is not None:
                result.findings.append(finding)
            if note is not None:
                result.notes.append(note)
            branch = self.merge.run(st, source)
            if branch is not None:  # the culprit merge's branch commit (issue 12)
                result.stages.append(branch)
                st = branch
            lg, fb = st.last_good, st.first_bad
            if r.triage and fb is not None and st.status in (Status.CULPRIT, Status.RANGE):
                # before any commit bisection (issue 6): which toggles make the problem disappear
                result.triage = self.triage.run(fb)
            if st.status is Status.CULPRIT and r.bisect.second_stage and lg and fb:
                if isinstance(source, GitCandidates) and r.bisect.components and isinstance(r.source, GitSource):
                    # issue 26: a first bad that only moves pins leads into the pinned component
                    more, result.chain = self.descent.after_commits(st, source.component, source.repo,
                                                                    r.source.runtime_paths)
                    result.stages += more
                elif lg.meta.get("commits") and fb.meta.get("commits"):
                    result.stages += self.components.run(dict(lg.meta["commits"]), dict(fb.meta["commits"]),
                                                         stage1_done=True)
                elif lg.meta.get("image") and fb.meta.get("image") and r.bisect.components:
                    a, b = self.components.image_pair(lg, fb, result)
                    got = self.descent.after_images(st, diff_images(a, b), str(fb.meta["image"]))
                    if got is not None:  # the two nightlies differ only in pinned components (issue 26)
                        more, result.chain = got
                        result.stages += more
                    else:
                        result.stages += self.components.from_images(lg, fb, result)
            if self.stage1.deferred:  # stage 1's verification: the commit stage's ends, else re-probes now
                settle(s1, result.stages[result.stages.index(s1) + 1:], self.prober, self.loop.echo)
        final = result.final
        assert final is not None
        if (r.triage and not result.triage and final.first_bad is not None
                and final.status in (Status.CULPRIT, Status.RANGE)):  # component-pair runs
            result.triage = self.triage.run(final.first_bad)
        m = r.bisect.minimize
        if m is not None and m.enabled and final.status is Status.CULPRIT:  # issue 42: inside the culprit
            result.minimized = self.minimize.run(final, m.max_probes)
        p = self.prober
        result = finish_result(result, r, recipe_path=self.recipe_path, session_id=p.session_id,
                               all_cached=p.fresh_probes == 0 and not p.replayed)
        result.notes[:0] = oracle_notes(r, final, p.oracle)  # decode path, noise (issue 18)
        return result


def _git_repos(runner: CandidateRunner) -> dict[str, GitRepo]:
    """The runner's clones by component when it has :class:`GitRepo` ones (the local runner)."""
    repos = getattr(runner, "repos", None) or {}
    return {k: v for k, v in repos.items() if isinstance(v, GitRepo)} if isinstance(repos, dict) else {}
