"""Running probes for a session: the cache and the one ledger writer, executors, prefetch.

* :mod:`.prober` -- :class:`~bisectbot.session.probing.prober.Prober`: the probe cache and
  the one writer of a run's ledger rows; builds the stage's
  :class:`~bisectbot.run.probe.ProbeContext`;
* :mod:`.executor` -- :func:`~bisectbot.session.probing.executor.run_probe` (one probe
  anywhere) and the executors that run a round's batch;
* :mod:`.prefetch` -- prepare the candidates the next step can need while one is probed;
* :mod:`.oracles` -- the run's reference server kept up beside the candidates (issue 18);
* :mod:`.withheld` -- host variables that never reach the candidates.
"""
