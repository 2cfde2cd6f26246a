"""Runners: turn a candidate into a running server or a finished command.

* :mod:`bisectbot.run.local` -- no Docker: git worktree + patch stack + subprocess (issue 6).
* :mod:`bisectbot.run.container` -- images: build/pull + ``docker run`` (issue 5).

Both implement :class:`bisectbot.run.base.CandidateRunner`.
"""
