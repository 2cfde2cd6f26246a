"""The searches of a night, in the order a run meets them.

* :mod:`.first` -- stage 1: bisect the recipe's source (git range, nightlies, releases) between its ends;
* :mod:`.components` -- from a first-bad nightly to one component's commit;
* :mod:`.descent` -- when a first-bad only moves pins, bisect the pinned component;
* :mod:`.merges` -- when the first-parent search names a merge, search its branch;
* :mod:`.drift` -- where did the threshold move inside the bad range;
* :mod:`.triage` -- which ``recipe.triage`` toggles make the problem disappear.

Each stage is a collaborator handed to the session (:class:`bisectbot.session.core.Session`),
with its own constructor state; none decides a verdict (:mod:`bisectbot.verdict` does).
"""
