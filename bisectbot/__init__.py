"""bisectbot: nightly bisection and triage for LLM serving stacks.

The pipeline (see ``shared/design/ARCHITECTURE.md``)::

    recipe -> candidates -> build -> run -> reproduce -> verdict -> bisect -> report
"""

__version__ = "0.1.0"
