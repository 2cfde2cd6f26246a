"""Rounds: a stage's search as plan -> batch of probes -> verdicts fed back.

* :mod:`.loop` -- :class:`~bisectbot.session.rounds.loop.RoundLoop`, the round loop of one stage;
* :mod:`.plan` -- ``bisectbot round`` commands: plan a round from the ledger, import verdict files;
* :mod:`.verdict_file` -- verdict files on disk: written redacted with their digest, read back checked.
"""
