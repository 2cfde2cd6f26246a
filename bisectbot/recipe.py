"""Recipes: one YAML file per tracked problem, validated by pydantic.

A recipe says *what* to probe (image source: registry tags, package releases or a
git range), *how* to start the server (command, env, runner profile), which
patch stack to apply, how to reproduce (sizes in prompt **tokens**, question,
expected answer, classifier thresholds), what counts as bad (regress mode),
the bisect range and where to report.

Errors are reported as ``FILE:LINE:COL: field.path: message``, one line each,
with line/column taken from the YAML node the field came from
(:class:`bisectbot.errors.RecipeError`, exit code 2).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from .confine import check_mount
from .errors import RecipeError
from .located import FieldError, LocatedErrors, compose, load_located, read_text, where

MAX_PROMPT_TOKENS = 16_777_216
"""Largest prompt size (tokens) a recipe or ``probe`` may ask for: above the longest context of any
served model today (10M tokens, Llama 4 Scout); larger values are typos or attacks (issue 13)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------------- sources


class RegistrySource(_Model):
    """Nightly images from an OCI registry (e.g. ``rocm/vllm-dev`` tags ``nightly_main_*``)."""

    kind: Literal["registry"] = "registry"
    registry: str = Field("registry-1.docker.io", description="registry host[:port]")
    repository: str = Field(..., description="e.g. rocm/vllm-dev")
    tag_pattern: str = Field("nightly*", description="fnmatch pattern over tags, e.g. nightly_main_*")
    hub_api: str | None = Field(
        None, description="Docker Hub tags API base (https://hub.docker.com) for last_updated dates; None = OCI only"
    )
    insecure: bool = Field(False, description="plain HTTP (local test registries on 127.0.0.1)")


class PyPISource(_Model):
    """Releases of a package on the configured package index."""

    kind: Literal["pypi"] = "pypi"
    package: str
    index_url: str | None = Field(None, description="PEP 503 simple index; default: pip's configuration")
    min_version: str | None = None
    max_version: str | None = None
    include_prereleases: bool = False


class CommitWheels(_Model):
    """Prebuilt wheels per commit (issue 40): a commit stage installs a commit's wheel instead of building
    it from source, as cargo-bisect-rustc installs CI artefacts. The layout is vLLM's
    (``docs/real-vllm.md``): a PEP 503 index per commit, ``https://wheels.vllm.ai/{commit}/`` (CUDA, CPU)
    or ``https://wheels.vllm.ai/rocm/{commit}/rocm721/`` (ROCm), whose project page ``<index>/<package>/``
    lists that commit's wheels. A commit without one (the index answers 404, or no wheel this Python can
    install) is built from source as before, and the probe says which."""

    index: str = Field(..., pattern=r"^(https?|file)://[^\s?#]*\{commit\}[^\s?#]*$",
                       description="per-commit PEP 503 index URL with {commit} (the full 40-hex SHA) in its path; "
                                   "no query or fragment (the project's page is appended to the path)")
    package: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                         description="the distribution to install from it (vllm): letters, digits, '.', '_' "
                                     "and '-', starting with a letter or digit, no spaces")
    dependencies_index: str | None = Field(
        None, description="where the wheel's dependencies come from (uv's --index-url; unset: uv's default)")


class GitSource(_Model):
    """Commits of a git repository (first-parent between good and bad).

    ``first_parent: false`` descends into merges: the first-parent chain is bisected, and
    when the culprit is a merge, its second parent's chain from the merge base to the
    branch tip is bisected next; the report names the merge and the branch commit.
    """

    kind: Literal["git"] = "git"
    repo: str = Field(..., description="path or URL of the repository")
    component: str = Field("", description="component name (vllm, aiter, ...); default: repo name")
    first_parent: bool = True
    runtime_paths: list[str] = Field(
        default_factory=list, description="paths that ship at runtime; a culprit outside them is flagged"
    )
    pin_names: list[str] = Field(
        default_factory=list,
        description="other names other repositories pin this component under (a pip name such as amd-aiter, a "
                    "Dockerfile ARG prefix such as AITER, a submodule path such as 3rdparty/composable_kernel); "
                    "the component name itself and bisectbot.pins.ALIASES always count (issue 26)")
    wheels: CommitWheels | None = Field(
        None, description="prebuilt wheels per commit, installed instead of a source build where a commit has one "
                          "(the local runner; issue 40)")
    github: GitHubTarget | None = Field(
        None, description="where an issue naming a culprit in this component is filed (an aiter culprit found "
                          "through a vLLM pin bump goes to aiter's repository); default: report.github")


Source = Annotated[RegistrySource | PyPISource | GitSource, Field(discriminator="kind")]


# --------------------------------------------------------------------------- server / run


def _no_nul(v: str) -> str:
    """An argv word or environment value: the kernel's ``execve`` takes C strings, so a NUL byte
    cannot reach the process (Python raises ``ValueError: embedded null byte`` at every start)."""
    if "\x00" in v:
        raise ValueError(f"a NUL byte (\\x00) at character {v.index(chr(0))} of {v[:60]!r}: no process argument or "
                         "environment value can hold one")
    return v


Arg = Annotated[str, AfterValidator(_no_nul)]
"""One word of a command (argv) or an environment value: any text but a NUL byte."""


#: Default ``server.build_timeout_s`` (seconds): 4 hours. Users report from-source vLLM builds of
#: "more than 10 minutes" on ROCm (vllm-project/vllm#8336) to "at least 3 hours" with the
#: flash-attention kernels (vllm-project/vllm#13281); ROCm/vllm#230 raised its own CI build timeout for
#: weaker machines. Before it existed the build was killed at ``health_timeout_s`` (issue 41, item 3).
BUILD_TIMEOUT_S = 4 * 3600.0


class ServerSpec(_Model):
    """How to start the OpenAI-compatible server of a candidate.

    ``command`` is an argv list; ``{port}``, ``{model}``, ``{tp}`` and ``{source}`` are
    substituted. ``health_timeout_s`` is seconds (a 754B model may take 40 minutes); the build
    command has its own limit, ``build_timeout_s`` (seconds, :data:`BUILD_TIMEOUT_S`).
    """

    command: list[Arg] = Field(default_factory=list)
    env: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], Arg] = Field(
        default_factory=dict, description="environment of the server; names are shell variable names (the "
        "report's Reproduce lines set them in a shell)")
    port: int = Field(8000, ge=1, le=65535)
    health_timeout_s: float = Field(2400.0, gt=0)
    request_timeout_s: float = Field(600.0, gt=0)
    mounts: list[str] = Field(default_factory=list, description="HOST:CONTAINER[:ro] bind mounts; both sides "
                              "absolute, never the host's /, a system directory, the Docker socket or a home")
    build_command: list[Arg] | None = Field(
        None, description="command that builds a candidate's source tree; non-zero exit = skip"
    )
    build_timeout_s: float = Field(
        BUILD_TIMEOUT_S, gt=0, description="seconds the build command may run before its process group is "
        "killed and the candidate is a skip ('build failed (timed out after N s, server.build_timeout_s)'); "
        "default 4 hours: a from-source vLLM build takes from ~10 minutes (ROCm, vllm#8336) to over 3 hours "
        "(with its flash-attention kernels, vllm#13281)")
    keyed_caches: bool = Field(
        True, description="give each candidate the compile and JIT caches of its own key (vLLM's torch.compile "
        "cache, Inductor, Triton, aiter's JIT modules: bisectbot.run.caches), writable to it and unseen by every "
        "other key's candidates, so a later start of the same build (or, for aiter, of the same nightly) skips the "
        "compile (issue 40); false: none")
    network: Literal["loopback", "host"] = Field(
        "loopback", description="network of the local runner's sandboxed candidate processes (build command, "
        "server, command reproducer): 'loopback' (default), their own network namespace with only a private lo "
        "(the bot reaches the server through a forwarder); 'host', the host's network (a build that downloads "
        "wheels). README, 'Sandbox'")

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, v: list[str]) -> list[str]:
        seen: dict[str, str] = {}
        for m in v:
            check_mount(m)  # ConfinementError is a ValueError: located by the loader
            target = posixpath.normpath(m.split(":")[1])
            if target in seen:  # Docker: 400 "Duplicate mount point" for every candidate (issue 24, input 1)
                raise ValueError(f"mounts {seen[target]!r} and {m!r} both mount the container path {target}")
            seen[target] = m
        return v


# --------------------------------------------------------------------------- reproducer


class ClassifierSettings(_Model):
    """Thresholds of the garbage classifiers (see ``bisectbot.reproduce.classify``).

    ``unique_ratio_min`` 0.15 is the classic check from the original hand reproducer
    (issue 3); the others are tuned on ``tests/data/outputs``.
    """

    unique_ratio_min: float = Field(0.15, ge=0, le=1)
    window_words: int = Field(50, ge=5)
    window_unique_ratio_min: float = Field(0.2, ge=0, le=1)
    compression_ratio_max: float = Field(24.0, gt=0)
    control_char_share_max: float = Field(0.02, ge=0, le=1)
    max_repeat_run: int = Field(25, ge=2)
    min_reply_tokens: int = Field(3, ge=0)
    needle_recall_min: float = Field(
        1.0, ge=0, le=1, description="share of needle codes that must be retrieved exactly"
    )
    function_word_share_min: float = Field(
        0.10, ge=0, le=1, description="prose of >= 20 words with a smaller share of function words is word salad"
    )
    accept_reasoning: bool = Field(
        False, description="judge an answer found only in reasoning_content as the answer (default: such a "
        "reply is INCONCLUSIVE, reason 'misrouted': a reasoning-parser routing fault, issue 11)"
    )


class ReferenceSpec(_Model):
    """``reproducer.reference``: a known-good engine the candidate is compared with (issue 18).

    Exactly one of ``candidate`` (``last-good``: the bisection's good end, started beside
    the candidate on another slot and up for the whole search) or ``endpoint`` (a running
    OpenAI-compatible server: another backend, a CUDA deployment). Comparisons (see
    :mod:`bisectbot.reproduce.reference`): greedy continuation of ``continuation_tokens``
    tokens (temperature 0, the reproducer's seed) -- first diverging token and normalised
    edit distance -- and, when ``prompt_logprobs`` is on, vLLM's ``prompt_logprobs`` up to
    ``prompt_logprobs_max_size`` prompt tokens (vLLM materialises logits for every prompt
    position: a memory risk at long prompts). A candidate diverges only beyond
    ``margin`` times the noise measured between two different good builds, and never
    below the floors ``edit_distance_floor`` / ``logprob_floor`` (mean absolute
    difference, nats).
    """

    candidate: Literal["last-good"] | None = None
    endpoint: str | None = Field(None, pattern=r"^https?://",
                                 description="an http:// or https:// URL of a known-good OpenAI-compatible server")
    model: str | None = Field(None, description="model id on the reference endpoint; default its first model")
    continuation_tokens: int = Field(32, ge=4, le=512, description="greedy tokens compared")
    prompt_logprobs: bool = Field(False, description="also compare vLLM prompt_logprobs (opt-in)")
    prompt_logprobs_max_size: int = Field(8192, ge=1, description="largest prompt (tokens) sent with prompt_logprobs")
    margin: float = Field(4.0, ge=1, description="divergence = beyond margin x measured noise")
    edit_distance_floor: float = Field(0.2, gt=0, le=1)
    logprob_floor: float = Field(0.05, gt=0, description="nats, mean absolute difference")
    logprob_window_floor: float = Field(
        0.2, gt=0, description="nats, mean absolute difference over the worst 16 consecutive prompt positions "
        "(issue 37): 4x logprob_floor -- the margin's factor -- because a 16-position mean averages out far "
        "less noise than a mean over the whole prompt; calibration raises it to margin x the measured window")
    calibration_sizes: list[int] = Field(
        default_factory=list, description="prompt sizes (tokens) of the noise calibration; default 4 log-spaced "
        "sizes from min_size to max_size")
    calibrate_with: str | None = Field(
        None, description="candidate ref of the second good build for the noise calibration with "
        "candidate: last-good (default: the commit before the good end for git sources)")

    @model_validator(mode="after")
    def _one(self) -> ReferenceSpec:
        if (self.candidate is None) == (self.endpoint is None):
            raise ValueError("reference needs exactly one of 'candidate: last-good' or 'endpoint: URL'")
        return self


class ControlSpec(_Model):
    """``reproducer.control``: the decode control (issue 18; see :mod:`bisectbot.reproduce.control`).

    A short prompt (``prompt_tokens``, ~1K) asks for a long enumerated list (``items``
    numbered lines) that is checked exactly; it separates a broken decode path from a
    broken prefill. Calibrated on the good end: when the good end is not "fine" the
    control is reported "unusable", never "broken".
    """

    enabled: bool = True
    prompt_tokens: int = Field(1000, ge=50)
    items: int = Field(500, ge=10, le=5000, description="numbered lines asked for")
    max_tokens: int | None = Field(None, description="default 4 x items + 64")


#: The built-in load's metrics (:mod:`bisectbot.reproduce.load`, which measures them) and which way each
#: is better: throughputs (per second) higher, latencies (seconds) lower.
LOAD_METRICS: dict[str, str] = {
    "output_throughput": "higher", "request_throughput": "higher",
    "ttft_p50": "lower", "ttft_p90": "lower", "itl_p50": "lower", "itl_p90": "lower", "e2e_p50": "lower",
}


def min_rank_p(n: int) -> float:
    """The smallest two-sided p-value of a Mann-Whitney test of ``n`` samples against ``n`` (all of
    one side below all of the other, no ties): ``2 / C(2n, n)``."""
    import math

    return min(1.0, 2.0 / math.comb(2 * n, n))


class MeasureSpec(_Model):
    """A measured-value reproducer's sampling (``regress: slower``, issue 39).

    Each probe runs the reproducer ``samples`` times (a command: one fresh process per sample,
    whose last stdout line is a number or a JSON object of named numbers), judges the candidate
    against the two ends' samples by a Mann-Whitney rank test
    (:mod:`bisectbot.verdict.measured`), and draws ``samples`` more while neither end is told
    apart, up to ``max_samples``. ``alpha`` is the two-sided p-value below which two sets of
    samples differ; why 0.01 is enough is in :data:`bisectbot.verdict.measured.ALPHA`.
    """

    metric: str | None = Field(None, description="the JSON key measured (a command; unset: the bare number, or "
                               "the only key), or the built-in load's metric (default output_throughput)")
    better: Literal["higher", "lower"] | None = Field(
        None, description="which way the metric is better: higher (throughput) or lower (latency, seconds); "
        "unset: the load metric's own way, else higher")
    samples: int = Field(10, ge=2, le=1000, description="samples per batch (each end keeps its first batch, so "
                         "every comparison is at least samples against samples: it must be able to reach p < alpha)")
    max_samples: int = Field(30, ge=3, le=10000, description="samples per probe at most (the budget)")
    alpha: float = Field(0.01, gt=0, lt=0.5, description="two-sided p-value below which samples differ")

    @model_validator(mode="after")
    def _check(self) -> MeasureSpec:
        if self.max_samples < self.samples:
            raise FieldError(("max_samples",), f"max_samples ({self.max_samples}) is below samples ({self.samples})")
        if min_rank_p(self.samples) >= self.alpha:
            # every comparison is at least samples against samples (an end keeps its first batch): a rank test
            # of fewer can never reach p < alpha, so no candidate could ever be judged
            need = next(n for n in range(self.samples, 10_000) if min_rank_p(n) < self.alpha)
            raise FieldError(("samples",), f"{self.samples} against {self.samples} samples cannot reach p < "
                             f"{self.alpha:g}: the smallest two-sided p of a rank test of {self.samples} against "
                             f"{self.samples} is {min_rank_p(self.samples):.2g}; set samples to at least {need}")
        return self

    def direction(self) -> str:
        """``better`` as set, else the built-in load metric's own way (``bisectbot.reproduce.load.LOAD_METRICS``:
        latencies lower), else ``higher``."""
        return self.better or LOAD_METRICS.get(self.metric or "", "higher")


class LoadSpec(_Model):
    """The built-in load of ``reproducer.kind: load`` (issue 39; :mod:`bisectbot.reproduce.load`): one
    sample is ``requests`` streamed chat completions, ``concurrency`` at a time, of about
    ``prompt_tokens`` prompt tokens and ``output_tokens`` generated tokens each (tokens)."""

    requests: int = Field(8, ge=1, le=10000)
    concurrency: int = Field(4, ge=1, le=1024)
    prompt_tokens: int = Field(256, ge=1, le=MAX_PROMPT_TOKENS)
    output_tokens: int = Field(64, ge=1, le=MAX_PROMPT_TOKENS)


class ReproducerSpec(_Model):
    """Prefill-threshold reproducer settings. All sizes are prompt **tokens**."""

    kind: Literal["prefill", "command", "load"] = "prefill"
    sizes: list[Annotated[int, Field(gt=0, le=MAX_PROMPT_TOKENS)]] = Field(
        default_factory=list, description="fixed ladder swept first (tokens)")
    min_size: int = Field(2000, gt=0, le=MAX_PROMPT_TOKENS, description="smallest prompt (tokens)")
    max_size: int = Field(32000, gt=0, le=MAX_PROMPT_TOKENS, description="largest prompt (tokens)")
    tolerance: float = Field(0.02, gt=0, lt=1, description="relative width of the refined interval")
    tolerance_tokens: int = Field(64, ge=1, description="absolute width floor of the interval (tokens); 64 keeps "
                                  "a 1.5K threshold within 3 % (issue 11)")
    question: str = "What is 2+2? Answer in one sentence."
    expected_answer: str | None = "4"
    needles: int = Field(0, ge=0, le=10, description="needle codes embedded in the prompt")
    max_tokens: int = Field(1000, gt=0, le=MAX_PROMPT_TOKENS)
    temperature: float = Field(0.0, ge=0)
    seed: int = 0
    repeats: int = Field(1, ge=1)
    concurrency: int = Field(1, ge=1)
    classifier: ClassifierSettings = Field(default_factory=ClassifierSettings)
    command: list[Arg] | None = Field(
        None, description="command reproducer argv; {size} and {source} are substituted"
    )
    command_timeout_s: float = Field(600.0, gt=0)
    measure: MeasureSpec | None = Field(None, description="a measured-value reproducer's sampling "
                                        "(regress: slower; defaults when unset)")
    load: LoadSpec | None = Field(None, description="kind load: the built-in load each sample runs against the "
                                  "server (defaults when unset)")
    command_crash: Literal["bad", "skip"] = Field(
        "bad", description="verdict of a command run killed by a signal or timed out"
    )
    reference: ReferenceSpec | None = Field(None, description="compare with a known-good engine (issue 18)")
    control: ControlSpec | None = Field(None, description="decode control on the ends of the bisection (issue 18)")
    stream: Literal["off", "on", "both"] = Field(
        "off", description="chat requests streamed (SSE deltas reassembled and judged: 'on'), or each size asked "
        "both ways with a divergence between the two greedy replies a finding of its own ('both'; issue 37)")

    @model_validator(mode="after")
    def _check(self) -> ReproducerSpec:
        if self.min_size > self.max_size:
            raise FieldError(("min_size",), f"min_size ({self.min_size}) is larger than max_size ({self.max_size})")
        if self.kind == "command" and not self.command:
            raise FieldError(("kind",), "kind 'command' needs a 'command' argv")
        return self


# --------------------------------------------------------------------------- regress mode

REGRESS_MODES = (
    "garbage",
    "diverges",
    "threshold-below",
    "error",
    "success",
    "command",
    "patch-upstream",
    "patch-conflict",
    "slower",
)
_NEEDS_ARG = {"threshold-below", "patch-upstream", "patch-conflict"}


class Regress(_Model):
    """What counts as *bad*.

    Written in YAML as a word (``garbage``, ``diverges``, ``error``, ``success``, ``command``),
    ``[garbage, diverges]`` / ``"garbage, diverges"`` (either makes a candidate bad; stored as
    mode ``diverges`` with arg ``garbage``) or a one-key mapping (``threshold-below: 20000`` tokens, ``patch-upstream: <patch id>``,
    ``patch-conflict: <patch id>``). ``success`` is a fix bisection (predicate inverted).
    ``slower`` is a performance regression: the reproducer measures a number
    (``reproducer.measure``) and a candidate is bad when its samples are told apart from the good
    end's and not from the bad end's (:mod:`bisectbot.verdict.measured`).
    """

    mode: Literal[
        "garbage", "diverges", "threshold-below", "error", "success", "command", "patch-upstream", "patch-conflict",
        "slower",
    ] = "garbage"
    arg: str | int | None = None

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, v: Any) -> Any:
        if isinstance(v, str) and "," in v:
            v = [x.strip() for x in v.split(",")]
        if isinstance(v, list):
            modes = sorted(str(x).strip() for x in v)
            if modes == ["diverges", "garbage"]:
                return {"mode": "diverges", "arg": "garbage"}
            if modes in (["diverges"], ["garbage"]):
                return {"mode": modes[0]}
            raise ValueError("a list of regress modes may only combine 'garbage' and 'diverges'")
        if isinstance(v, str):
            if ":" in v:
                mode, _, arg = v.partition(":")
                v = {mode.strip(): arg.strip()}
            else:
                return {"mode": v.strip()}
        if isinstance(v, dict) and v and "mode" not in v:
            if len(v) != 1:
                raise ValueError(f"expected one of {', '.join(REGRESS_MODES)} or a one-key mapping")
            ((mode, arg),) = v.items()
            return {"mode": mode, "arg": arg}
        return v

    @model_validator(mode="after")
    def _arg(self) -> Regress:
        if self.mode == "diverges" and self.arg not in (None, "", "garbage"):
            raise ValueError(f"'diverges' combines only with 'garbage', got {self.arg!r}")
        if self.mode == "diverges" and self.arg == "":
            self.arg = None
        if self.mode in _NEEDS_ARG and self.arg in (None, ""):
            raise ValueError(f"regress mode '{self.mode}' needs a value, e.g. '{self.mode}: ...'")
        if self.mode == "threshold-below":
            try:
                self.arg = int(self.arg)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise ValueError(f"threshold-below needs a token count, got {self.arg!r}") from None
            if not 0 < self.arg <= MAX_PROMPT_TOKENS:
                raise ValueError(f"threshold-below must be a token count between 1 and {MAX_PROMPT_TOKENS}, "
                                 f"got {self.arg}")
        return self

    @property
    def is_fix(self) -> bool:
        """True for a fix bisection (looking for the first *good* candidate)."""
        return self.mode == "success"

    @property
    def uses_reference(self) -> bool:
        """True when divergence from ``reproducer.reference`` makes a candidate bad."""
        return self.mode == "diverges"

    def __str__(self) -> str:
        if self.mode == "diverges":
            return "garbage, diverges" if self.arg == "garbage" else "diverges"
        return self.mode if self.arg is None else f"{self.mode}: {self.arg}"


# --------------------------------------------------------------------------- bisect / triage / report


class FlakeRates(_Model):
    """Flake rates **per probe**, after the repeats of a probe are combined one-sidedly (the
    probe is bad if any run is bad; :func:`bisectbot.bisect.combine_repeats`). A verdict
    carries information only while ``false_positive + false_negative < 1``."""

    false_positive: float = Field(0.0, ge=0, lt=1, description="P(bad verdict | candidate good), per probe")
    false_negative: float = Field(0.0, ge=0, lt=1, description="P(good verdict | candidate bad), per probe")

    @model_validator(mode="after")
    def _informative(self) -> FlakeRates:
        if self.false_positive + self.false_negative >= 1:
            raise ValueError(f"false_positive + false_negative = {self.false_positive + self.false_negative:g} "
                             ">= 1: such a verdict carries no information; raise reproducer.repeats")
        return self


class MinimizeSpec(_Model):
    """``bisect.minimize`` (issue 42): after a verified culprit, the smallest subset of its files, then
    hunks, that still fails on top of its predecessor (ddmin, :mod:`bisectbot.bisect.minimize`).
    ``true`` is ``{enabled: true}``."""

    enabled: bool = True
    max_probes: int | None = Field(
        None, ge=1, le=500, description="probe budget of each ddmin (files, then hunks); unset: "
        "2 * ceil(log2 parts) + 2, the cost of one failing part (bisectbot.bisect.minimize.budget_for)")

    @model_validator(mode="before")
    @classmethod
    def _flag(cls, v: Any) -> Any:
        return {"enabled": v} if isinstance(v, bool) else v


class BisectSpec(_Model):
    """Bisect range and search settings."""

    good: str | None = Field(None, description="known-good candidate (tag, version, commit)")
    bad: str | None = Field(None, description="known-bad candidate")
    flake: FlakeRates | None = Field(
        None, description="per-probe flake rates; unset: exact, or with reproducer.repeats > 1 derived "
                          "from the bad end's hit rate")
    flake_unit: Literal["start", "request"] = Field(
        "start", description="what a flaky verdict is independent across: 'start' (default: a build can be bad for a "
        "whole server start or not at all, e.g. kernels autotuned at start-up, so requests of one start are one "
        "measurement, and such a flake hides a bug but never shows one: the predecessor is re-probed, and the "
        "culprit too until the run has seen a build fail in two starts, the test that the bug does not hide from "
        "a start) or 'request' (each request, or each run of a command, is "
        "its own draw: two agreeing requests of the probe the search made -- GARBAGE on two prompts; OK on every "
        "prompt the bad end failed, two or more -- verify its role without a second server start). Issue 40; "
        "bisectbot.verdict.agreement")
    confidence: float = Field(0.99, gt=0.5, lt=1)
    max_rounds: int = Field(40, ge=1, le=1000, description="hard cap on the rounds of one round session "
                            "(bisect.executor: actions); 'round plan' fails past it (issue 24)")
    blame_confidence: float = Field(
        0.66, ge=0, le=1, description="below this the GitHub step refuses to blame (issue 6)"
    )
    max_probes: int | None = Field(
        None, ge=1, description="probe budget; unset: 3x the information bound at the flake rates + 4")
    drift: bool = Field(False, description="when the threshold moves inside the bad range, a second search "
                                           "finds the candidate where it moved")
    parallel: int = Field(1, ge=1, description="candidates probed at once (free runner slots)")
    executor: Literal["local", "actions"] = Field(
        "local", description="where the workflows bisect: 'local' (the nightly/bisect job itself) or 'actions' "
        "(hand the bisection to .github/workflows/bisect-fanout.yml: one job per probe, rounds of "
        "bisect.parallel probes; issue 17)")
    verify: bool = True
    second_stage: bool = True
    minimize: MinimizeSpec | None = Field(
        None, description="after a verified culprit, the smallest part of it that still fails (true, or "
        "{max_probes: N}); `bisectbot run --minimize` turns it on for one run (issue 42)")
    components: dict[str, GitSource] = Field(
        default_factory=dict, description="git sources of components for the commit stage (vllm, aiter)"
    )


class TriageToggle(_Model):
    """An environment or argument change tried on the first bad candidate."""

    name: str
    env: dict[str, Arg] = Field(default_factory=dict)
    args: list[Arg] = Field(default_factory=list)


class GitHubTarget(_Model):
    repo: str = Field(..., pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
                      description="a GitHub repository as OWNER/NAME (vllm-project/vllm)")
    labels: list[str] = Field(default_factory=lambda: ["bisectbot"])
    assignees: list[str] = Field(default_factory=list)
    mentions: list[str] = Field(default_factory=list)
    close_when_fixed: bool = False
    api_url: str = "https://api.github.com"
    bot_login: str | None = Field(
        None, pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$",
        description="the GitHub login the bot posts as -- letters, digits and '-', at most 39, a bot's ending "
        "[bot] -- (its markers and acknowledgements are trusted only from "
        "this account); default $BISECTBOT_BOT_LOGIN. GitHub Actions' GITHUB_TOKEN posts as github-actions[bot]")


PAGES_URL = r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%-]+)*/?$"
"""A dashboard address: plain http(s), a host, an optional port and path (no query, no quotes)."""


class ReportSpec(_Model):
    dir: str = Field("bisectbot-out", description="output directory for Markdown/JSON/charts")
    github: GitHubTarget | None = None
    pages_url: str | None = Field(
        None, pattern=PAGES_URL,
        description="where the dashboard is published (GitHub Pages: https://OWNER.github.io/REPO): the issue "
                    "embeds the threshold chart from <pages_url>/charts/<recipe>/<hash>.png, which "
                    "`bisectbot dashboard --report` publishes; default $BISECTBOT_PAGES_URL, else none "
                    "(the issue says where the PNG is)")


# --------------------------------------------------------------------------- recipe


class Recipe(_Model):
    """One tracked problem. See ``recipes/*.yaml`` for complete examples."""

    name: str = Field(..., pattern=r"^[a-z0-9][a-z0-9._-]*$",
                      description="the recipe's name: lower-case letters, digits, '.', '_' and '-', starting with a "
                                  "letter or digit (it names files, ledger sessions and dashboard pages)")
    description: str = ""
    model: str = Field("", description="model id served, e.g. zai-org/GLM-5.1-FP8")
    tp: int = Field(1, ge=1, description="tensor-parallel size")
    source: Source
    server: ServerSpec = Field(default_factory=ServerSpec)
    runner: str = Field("cpu", description="runner profile name (runners/<name>.yaml)")
    nightly: bool = Field(False, description="run by the nightly workflow's 'all' (.github/workflows/nightly.yml)")
    patches: list[str] = Field(default_factory=list, description="patch ids from patches/stack.yaml, in order")
    reproducer: ReproducerSpec = Field(default_factory=ReproducerSpec)
    regress: Regress = Field(default_factory=Regress)
    bisect: BisectSpec = Field(default_factory=BisectSpec)
    triage: list[TriageToggle] = Field(default_factory=list)
    report: ReportSpec = Field(default_factory=ReportSpec)
    env_passthrough: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(
        default_factory=list,
        description="host environment variables passed to candidates (builds, servers, command "
        "reproducers) on purpose; everything else but a few build basics is withheld (issue 13)")

    @model_validator(mode="after")
    def _command_regress(self) -> Recipe:
        """``reproducer.kind: command`` implies ``regress: command`` unless ``regress`` is set (issue 14):
        the command's exit code is the verdict, not a garbage classification."""
        if self.reproducer.kind == "command" and "regress" not in self.model_fields_set:
            self.regress = Regress(mode="command")
        return self

    @model_validator(mode="after")
    def _oracles(self) -> Recipe:
        if self.regress.mode == "diverges" and self.reproducer.reference is None:
            raise FieldError(("regress",), "regress 'diverges' needs reproducer.reference ({candidate: last-good} "
                             "or {endpoint: URL})")
        if self.regress.mode == "diverges" and self.reproducer.kind != "prefill":
            raise FieldError(("regress",), "regress 'diverges' needs a prefill reproducer (a server to compare)")
        if self.regress.mode == "slower":
            self._measured()
        elif self.reproducer.measure is not None:
            raise FieldError(("reproducer", "measure"), f"reproducer.measure samples a measured value: it needs "
                             f"'regress: slower', not '{self.regress}'")
        elif self.reproducer.kind == "load":
            raise FieldError(("reproducer", "kind"), f"the built-in load measures a number: it needs "
                             f"'regress: slower', not '{self.regress}'")
        if self.source.kind == "pypi" and self.regress.mode not in ("patch-upstream", "patch-conflict"):
            self._releases()
        self._commit_wheels()
        return self

    def _commit_wheels(self) -> None:
        """What per-commit wheels cannot do (issue 40, :mod:`bisectbot.run.commit_wheels`): carry the
        patch stack (it is applied to a source tree), or stand for a component's commits (a component
        of ``bisect.components`` is overlaid on an image or checked out beside the source)."""
        for name, comp in self.bisect.components.items():
            if comp.wheels is not None:
                raise FieldError(("bisect", "components", name, "wheels"), "per-commit wheels are installed for "
                                 "the recipe's own git source (source.wheels), not for a component")
        wheels = getattr(self.source, "wheels", None)
        if wheels is not None and self.patches:
            raise FieldError(("patches",), "a commit installed from its prebuilt wheel (source.wheels) cannot carry "
                             "the patch stack, which is applied to a source tree: drop source.wheels or patches")
        if wheels is not None and self.regress.mode in ("patch-upstream", "patch-conflict"):
            raise FieldError(("source", "wheels"), "a patch question reads the source tree: drop source.wheels")

    def _releases(self) -> None:
        """What a release run cannot do (issue 39; :mod:`bisectbot.run.release`'s run mode): apply
        ``patches`` (a release from the index runs as published), or serve a prefill reproducer without
        ``server.command`` (a release is served by the recipe's command from its environment)."""
        if self.patches:
            raise FieldError(("patches",), "a release from the package index runs as published; patching it "
                             "is not supported (bisect a git source with the patch stack, or ask a patch question: "
                             "regress patch-upstream / patch-conflict)")
        if self.reproducer.kind != "command" and not self.server.command:
            raise FieldError(("reproducer", "kind"), "a release is served by server.command from its environment "
                             "(e.g. [vllm, serve, '{model}', --port, '{port}']): set server.command, or use "
                             "reproducer.kind: command")

    def _measured(self) -> None:
        """What ``regress: slower`` needs (issue 39): a command that prints the measured value
        (one fresh process per sample), without ``{size}`` (no threshold is searched), nor
        ``repeats`` (samples are drawn by ``reproducer.measure``), nor ``bisect.drift``."""
        rp = self.reproducer
        if rp.kind not in ("command", "load"):
            raise FieldError(("reproducer", "kind"), "regress 'slower' measures a number: set reproducer.kind: load "
                             "(the built-in load against the server) or command (a command whose last stdout line "
                             "is a number or a JSON object of numbers; reproducer.measure.metric names the key)")
        if rp.kind == "load":
            if rp.measure is not None and rp.measure.metric not in (None, *LOAD_METRICS):
                raise FieldError(("reproducer", "measure", "metric"), f"the built-in load measures "
                                 f"{', '.join(LOAD_METRICS)}, not {rp.measure.metric!r}")
            if not self.server.command and self.source.kind in ("git", "pypi"):
                raise FieldError(("server", "command"), "reproducer.kind: load runs against the candidate's "
                                 "server: set server.command")
            if rp.load is None:
                rp.load = LoadSpec()
        at = next((i for i, a in enumerate(rp.command or []) if "{size}" in a), None)
        if at is not None:
            raise FieldError(("reproducer", "command", at), "regress 'slower' searches no threshold: '{size}' "
                             "would reach the command as literal text; drop it")
        if rp.repeats > 1:
            raise FieldError(("reproducer", "repeats"), "regress 'slower' draws samples, not repeats: set "
                             "reproducer.measure.samples (and max_samples) instead")
        if self.bisect.drift:
            raise FieldError(("bisect", "drift"), "drift follows a threshold; regress 'slower' measures none")
        if rp.measure is None:
            rp.measure = MeasureSpec()
        if rp.kind == "load" and rp.measure.metric is None:
            rp.measure.metric = "output_throughput"

    @field_validator("patches")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        dup = sorted({p for p in v if v.count(p) > 1})
        if dup:
            raise ValueError(f"patch listed twice: {', '.join(dup)}")
        return v

    # Fields that can change a verdict; report target, description, range do not.
    _VERDICT_FIELDS = ("model", "tp", "server", "runner", "patches", "reproducer", "regress")

    def verdict_hash(self) -> str:
        """Stable SHA-256 (hex, 16 chars) of the fields that change a verdict.

        Feeds the probe cache key: editing the report target or the bisect range keeps
        cached probes; editing the question, sizes or server command does not.
        """
        data = self.model_dump(mode="json", include=set(self._VERDICT_FIELDS))
        for key in ("reference", "control", "measure", "load"):  # absent oracles keep the hashes of older recipes
            if data["reproducer"].get(key) is None:
                data["reproducer"].pop(key, None)
        if data["reproducer"].get("stream") == "off":  # the default keeps the hashes of older recipes
            data["reproducer"].pop("stream", None)
        if data.get("server", {}).get("network") == "loopback":  # likewise the sandbox's default network
            data["server"].pop("network", None)
        data.get("server", {}).pop("keyed_caches", None)  # caches keyed by content change no verdict
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- loading with line numbers


def parse_recipe(text: str, filename: str = "<recipe>") -> Recipe:
    """Parse recipe YAML text; a registry source is rewritten to the runner's mirror when
    ``$BISECTBOT_REGISTRY_MIRROR`` covers its registry (:mod:`bisectbot.mirror`).

    Raises :class:`RecipeError` listing every problem as ``FILE:LINE:COL: field: message``;
    :class:`~bisectbot.errors.BadInput` (exit 2) for a malformed ``$BISECTBOT_REGISTRY_MIRROR``.
    """
    try:
        recipe = load_located(Recipe, text, filename, "recipe fields")
    except LocatedErrors as e:
        raise RecipeError(e.problems) from None
    from .mirror import mirrored_source

    recipe.source = mirrored_source(recipe.source)  # the runner's $BISECTBOT_REGISTRY_MIRROR, if any
    return recipe


def check_patch_ids(recipe: Recipe, known: list[str], text: str, filename: str = "<recipe>") -> list[str]:
    """Cross-check ``recipe.patches`` against the ids of the patch stack.

    Returns one ``FILE:LINE:COL: patches[i]: unknown patch id ...`` line per unknown id
    (empty list when all are known).
    """
    data, marks = compose(text, filename)
    out = []
    for i, pid in enumerate(recipe.patches):
        if pid not in known:
            out.append(f"{where(marks, data, ('patches', i), filename)}: unknown patch id {pid!r} "
                       f"(known: {', '.join(known) or 'none'})")
    return out


def bisection_problems(recipe: Recipe, text: str, filename: str = "<recipe>") -> list[str]:
    """What makes a valid recipe unable to bisect as written: one ``FILE:LINE:COL: field:
    message`` line each (empty list when none). ``bisectbot run`` refuses such a recipe
    (exit 2); ``recipe validate`` prints the lines as warnings (``probe --recipe`` may use it).

    * ``reproducer.command`` holds ``{size}`` under ``regress: command`` (which
      ``reproducer.kind: command`` implies): only a threshold search substitutes ``{size}``,
      so every probe would run the command with the literal text ``{size}``.
    * ``bisect.drift: true`` under ``regress: command``: a verdict from an exit code has no
      threshold that could move, so the second search would never run.
    """
    if recipe.regress.mode != "command":
        return []
    argv = recipe.reproducer.command or []
    at = next((i for i, a in enumerate(argv) if "{size}" in a), None)
    if at is None and not recipe.bisect.drift:
        return []
    data, marks = compose(text, filename)
    out: list[str] = []
    if at is not None:
        rd = data.get("reproducer") if isinstance(data.get("reproducer"), dict) else {}
        cmd = rd.get("command") if isinstance(rd, dict) else None
        loc = ("reproducer", "command", at) if isinstance(cmd, list) and at < len(cmd) else ("reproducer", "command")
        implied = "" if "regress" in data else " (implied by reproducer.kind: command)"
        out.append(f"{where(marks, data, loc, filename)}: '{{size}}' is substituted only by a threshold search; "
                   f"under regress: command{implied} the command would get the literal text '{{size}}'. "
                   "Set 'regress: garbage' (bad: the command fails from some size on; the threshold is measured) "
                   "or drop {size}")
    bd = data.get("bisect")
    if recipe.bisect.drift and isinstance(bd, dict) and "drift" in bd:
        out.append(f"{where(marks, data, ('bisect', 'drift'), filename)}: drift needs a threshold search "
                   "(regress: garbage or threshold-below with a prefill reproducer or a command with {size}); "
                   "under regress: command the verdict is an exit code and no threshold can move")
    return out


def fanout_problems(recipe: Recipe, text: str, filename: str = "<recipe>") -> list[str]:
    """What a bisection in planned rounds (``bisectbot round plan|probe|import``, the fan-out of
    bisect-fanout.yml) cannot do that ``bisectbot run`` can: one ``FILE:LINE:COL: field: message``
    line each (empty list when none). ``round plan`` and ``round probe`` refuse such a recipe
    (exit 2) before any candidate is built; ``recipe validate`` prints the lines as warnings.

    * ``reproducer.reference: {candidate: last-good}`` (issue 23, input 7): the good end must serve
      beside every candidate for the whole search, which only one process holding the runner's
      slots does (``bisectbot run``); a round probe runs one candidate and nothing beside it, so
      each probe's threshold search would be an error and every candidate a skip.
    * ``regress: slower`` (issue 39): every candidate is judged against the ends' samples, which the
      one process running the search holds (:class:`bisectbot.verdict.measured.Baseline`); a round
      probe has no ends' samples, so every probe would be a skip.
    """
    if recipe.regress.mode == "slower":
        data, marks = compose(text, filename)
        return [f"{where(marks, data, ('regress',), filename)}: 'slower' judges each candidate's samples against "
                "the ends' samples, which only the process running the whole search holds; a planned round's probe "
                "(bisectbot round, bisect-fanout.yml) has none, so every probe would be a skip. Bisect this recipe "
                "with 'bisectbot run RECIPE' (bisect.parallel runs probes side by side there)"]
    ref = recipe.reproducer.reference
    if ref is None or ref.candidate != "last-good" or recipe.reproducer.kind != "prefill":
        return []
    data, marks = compose(text, filename)
    rd = data.get("reproducer") if isinstance(data.get("reproducer"), dict) else {}
    refd = rd.get("reference") if isinstance(rd, dict) else None
    loc = (("reproducer", "reference", "candidate") if isinstance(refd, dict) and "candidate" in refd
           else ("reproducer", "reference"))
    return [f"{where(marks, data, loc, filename)}: 'last-good' keeps the good end serving beside each candidate "
            "for the whole search; a planned round's probe (bisectbot round, bisect-fanout.yml) runs one candidate "
            "with no reference beside it, so every probe would be a skip. Bisect this recipe with "
            "'bisectbot run RECIPE' on one runner (it starts the good end on another GPU slot), or set "
            "reproducer.reference: {endpoint: URL} (a known-good server every runner reaches)"]


def _recipe_text(p: Path) -> str:
    """The text of recipe file ``p`` (size-limited, UTF-8 checked). Raises :class:`RecipeError`."""
    try:
        return read_text(p)
    except LocatedErrors as e:
        raise RecipeError(e.problems) from None


def load_recipe(path: str | Path) -> Recipe:
    """Load and validate a recipe file. Raises :class:`RecipeError` (exit code 2)."""
    p = Path(path)
    return parse_recipe(_recipe_text(p), str(p))


def load_bisection_recipe(path: str | Path) -> Recipe:
    """:func:`load_recipe` for a bisection (``run``, ``bisect replay``, ``round``): also refuses
    the :func:`bisection_problems` of the recipe. Raises :class:`RecipeError` (exit code 2)."""
    p = Path(path)
    text = _recipe_text(p)
    recipe = parse_recipe(text, str(p))
    problems = bisection_problems(recipe, text, str(p))
    if problems:
        raise RecipeError(problems)
    return recipe


def recipe_schema() -> dict[str, Any]:
    """JSON Schema of a recipe (for editors: yaml-language-server)."""
    return Recipe.model_json_schema()


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(s: str) -> str:
    """File-name-safe form of a string."""
    return _SAFE.sub("_", s).strip("_") or "x"
