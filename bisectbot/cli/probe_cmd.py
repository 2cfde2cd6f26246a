"""``bisectbot probe``: find the prefill threshold of a server that is already running."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .. import terminal
from ..errors import EXIT_GARBAGE, EXIT_INCONCLUSIVE, EXIT_OK, EXIT_SERVER_ERROR
from ..secrets import secret_env
from .base import Ctx, cli, pass_ctx

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..recipe import ReproducerSpec
    from ..reproduce.search import ThresholdResult

PROBE_EPILOG = """\b
Example:
  python -m bisectbot.demo.engine --port 8000 --threshold 20000 &
  bisectbot probe --endpoint http://127.0.0.1:8000 --min-size 2000 --max-size 120000
  bisectbot --json probe --endpoint http://127.0.0.1:8000 --recipe glm51-fp8-sparse-mla-prefill \\
      --model bisectbot/demo-engine
  bisectbot demo && bisectbot probe --recipe demo-command \\
      --source bisectbot-demo-out/work/engine-history   # reproducer kind: command, run in --source
  bisectbot probe --endpoint http://127.0.0.1:8000 --reference-endpoint http://127.0.0.1:8001 \\
      --noise-endpoint http://127.0.0.1:8002 --prompt-logprobs --control   # fluent-but-wrong output

\b
Exit codes:
  0  no garbage at any size asked (a coarse ladder up to the largest size; the sizes are named)
  1  garbage found at a decided size (the threshold interval, or the undecided part, is printed)
  2  bad input (recipe, sizes, arguments)
  3  inconclusive (no size could be decided)
  4  server error (died, HTTP error, timeout) -- never reported as garbage
  70 internal error (a bug in bisectbot, traceback on stderr) -- never 1
"""


def _sizes(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        sizes = [int(s.strip().lower().replace("k", "000")) for s in value.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated token counts like 2000,8k,32000, got {value!r}") from None
    if not sizes or any(s <= 0 for s in sizes):
        raise click.BadParameter(f"sizes must be positive token counts, got {value!r}")
    return sizes


def exit_code(status: str) -> int:
    """Exit code of ``probe`` for a :class:`ThresholdResult` status."""
    return {"ok": EXIT_OK, "garbage": EXIT_GARBAGE, "all-garbage": EXIT_GARBAGE, "non-monotone": EXIT_GARBAGE,
            "error": EXIT_SERVER_ERROR}.get(status, EXIT_INCONCLUSIVE)


def _summary(r: ThresholdResult, diverges: bool = False) -> str:
    """The last line of ``probe``. ``diverges``: the bad outcome at ``first_garbage`` is a divergence
    from the reference (regress ``diverges``), said as DIVERGES, not GARBAGE (issue 23)."""
    s = r.status
    lo, hi = r.last_ok, r.first_garbage
    if s == "garbage" and diverges and lo is None:
        return f"DIVERGES from the reference at {hi} prompt tokens (decided); no smaller size was decided"
    if s == "garbage" and diverges:
        width = f", {100 * (hi - lo) / lo:.1f}% wide" if lo else ""
        return f"DIVERGES from the reference from {hi} prompt tokens: first diverging size in [{lo}, {hi}]{width}"
    undecided = r.undecided_sizes
    if s == "garbage" and lo is None:
        below = f"undecided at {_sizes_text(undecided)}" if undecided else "no smaller size was decided"
        return (f"GARBAGE at {hi} prompt tokens (decided); below it {below}: the threshold is somewhere "
                f"below {hi}")
    if s == "garbage":
        width = f", {100 * (hi - lo) / lo:.1f}% wide" if lo else ""
        flaky = f" (flaky at {', '.join(map(str, r.flaky))}: see notes)" if r.flaky else ""
        return f"GARBAGE from {hi} prompt tokens: threshold in [{lo}, {hi}]{width}{flaky}"
    if s == "non-monotone":
        above = [x for x in r.ok_sizes if hi is not None and x > hi]
        return (f"GARBAGE, non-monotone: first transition in [{lo}, {hi}] but OK above it"
                + (f" (at {_sizes_text(above)})" if above else ""))
    if s == "all-garbage":
        return f"GARBAGE at every size: bad already at {hi} prompt tokens (the smallest probed)"
    if s == "ok":
        rest = f"; undecided at {_sizes_text(undecided)}" if undecided else ""
        return (f"OK at {_sizes_text(r.ok_sizes)} (the sizes asked; none between them): no garbage at any of "
                f"them{rest}")
    if s == "error":
        return f"ERROR{' (transient: not a verdict, retry later)' if r.transient else ''}: {r.error}"
    why = "; ".join(x.reasons[0] for x in r.table if x.reasons)[:200]
    return f"INCONCLUSIVE: no size could be decided{': ' + why if why else ''}"


def _sizes_text(sizes: list[int]) -> str:
    """``2003, 4001 and 8004 prompt tokens``: measured sizes, each named (issue 37, input 4)."""
    names = [str(x) for x in sizes]
    if len(names) > 1:
        return f"{', '.join(names[:-1])} and {names[-1]} prompt tokens"
    return f"{names[0]} prompt tokens" if names else "no size"


def _says_interval(f: Callable[..., None]) -> Callable[..., None]:
    """Ctrl-C during the threshold search prints what the sizes answered so far (``OK up to X,
    garbage from Y`` prompt tokens; :class:`bisectbot.reproduce.search.SearchInterrupted`) before
    the usual "interrupted" and exit code (issue 41, item 11)."""
    import functools

    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> None:
        from ..reproduce.search import LAST_SEARCH, SearchInterrupted  # here: `--version` imports no pydantic

        LAST_SEARCH[0] = None
        try:
            f(*args, **kwargs)
        except KeyboardInterrupt as e:
            partial = e.partial if isinstance(e, SearchInterrupted) else LAST_SEARCH[0]
            if partial is not None:
                terminal.echo(SearchInterrupted(partial).interval(), err=True)
            raise KeyboardInterrupt from None

    return run


def argv_text(argv: list[str]) -> str:
    """A command line for a title: words joined by spaces (shell-quoted where needed), a word that
    spans lines (an inline ``python3 -c`` script) shown as ``'<script, N lines>'`` -- printed whole,
    its newlines became ``\\x0a`` escapes in the probe table's title (issue 41, item 11)."""
    import shlex

    out = []
    for a in argv:
        if "\n" in a.strip():
            out.append(f"'<script, {len(a.strip().splitlines())} lines>'")
        else:
            out.append(a if a.startswith("{") and a.endswith("}") else shlex.quote(a))
    return " ".join(out)


def _diverged(res: ThresholdResult) -> bool:
    """True when the reasons at the first bad size are a divergence from the reference."""
    return bool(res.reasons) and res.reasons[0].startswith("diverges from the reference")


def _evidence_lines(res: ThresholdResult) -> list[str]:
    """The garbage itself beside a healthy reply (issue 25): the reply at the smallest GARBAGE size
    and at the largest OK size below it (``SizeResult.excerpt``: the reply's first 120 characters),
    each with its size in prompt tokens. Empty when no size was GARBAGE."""
    from ..reproduce.classify import Outcome

    bad = [r for r in res.table if r.outcome == Outcome.GARBAGE and r.excerpt]
    if not bad:
        return []
    first = min(bad, key=lambda r: r.size)
    lines = [f"reply at the first GARBAGE size ({first.size} prompt tokens): {first.excerpt}"]
    ok = [r for r in res.table if r.outcome == Outcome.OK and r.excerpt and r.size < first.size]
    if ok:
        last = max(ok, key=lambda r: r.size)
        lines.append(f"reply at the last OK size ({last.size} prompt tokens): {last.excerpt}")
    return lines


def _print_table(res: ThresholdResult, diverges: bool = False) -> None:
    """The per-size table and the summary. Every string from the server (model id, replies, reasons,
    notes, error messages) passes :mod:`bisectbot.terminal`: a reply made of Rich markup, ANSI
    escapes, carriage returns or bidi controls is printed as visible, inert text (issue 25)."""
    from rich.console import Console
    from rich.table import Table

    from ..secrets import known_secrets, redact

    secs = known_secrets()  # a server may echo the key it was sent: redacted before any cut (issue 41, 11)
    console = Console(highlight=False, soft_wrap=False)
    what = res.endpoint if str(res.endpoint).startswith("command:") else f"{res.endpoint} ({res.model})"
    # The title is a line of its own, soft-wrapped: as the table's title it was folded to the table's
    # width, so a long interpreter path cut a command in two (CI's paths are longer than a laptop's).
    t = Table(show_lines=False)
    for col in ("#", "requested", "prompt_tokens", "outcome", "agree", "s", "reasons / excerpt"):
        t.add_column(col, justify="right" if col not in ("outcome", "reasons / excerpt") else "left")
    style = {"OK": "green", "GARBAGE": "red", "ERROR": "yellow", "INCONCLUSIVE": "magenta"}
    for i, row in enumerate(res.table, 1):
        o = row.outcome.value
        if row.reasons:
            names = [r.split(":", 1)[0] for r in row.reasons]
            detail = row.reasons[0] if len(row.reasons) == 1 else ", ".join(names)
        else:
            detail = row.excerpt
        detail = terminal.inert(redact(detail, secs))  # redact and escape first, then cut: no cut undoes them
        t.add_row(str(i), str(row.requested), str(row.prompt_tokens if row.prompt_tokens is not None else "-"),
                  terminal.text(o, style.get(o, "")), f"{row.agreement:.0%}", f"{row.seconds:.1f}",
                  terminal.text((detail[:70] + "…") if len(detail) > 70 else detail))
    if res.table:
        console.print(terminal.text(f"probe of {what}"), soft_wrap=True)
        console.print(t)
    for line in _evidence_lines(res):
        console.print(terminal.text(redact(line, secs)))
    for n in res.notes:
        console.print(terminal.text(redact(f"note: {n}", secs)))
    unit = "command runs" if str(res.endpoint).startswith("command:") else "chat requests"
    console.print(f"{res.requests} {unit}, {res.wall_s:.1f} s", markup=False)
    if res.reasons:
        console.print(terminal.text(redact("reasons at first garbage size: " + "; ".join(res.reasons), secs)))
    console.print(terminal.text(_summary(res, diverges and _diverged(res))))


@cli.command(epilog=PROBE_EPILOG)
@click.option("--endpoint", default=None, metavar="URL",
              help="Base URL of a running OpenAI-compatible server, e.g. http://127.0.0.1:8000 "
                   "(not needed for a recipe whose reproducer is a command).")
@click.option("--source", "source_dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Source tree substituted for {source} in a command reproducer (default: none).")
@click.option("--model", default=None, help="Model id to ask for (default: the recipe's, else the server's first).")
@click.option("--recipe", "recipe_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Take the reproducer settings (sizes, question, needles, classifier) from this recipe.")
@click.option("--min-size", type=click.IntRange(min=1), default=None, help="Smallest prompt (tokens).")
@click.option("--max-size", type=click.IntRange(min=1), default=None,
              help="Largest prompt (tokens; default: min(server max_model_len - max_tokens - 64, 131072), "
                   "else 32000).")
@click.option("--sizes", callback=_sizes, default=None, help="Fixed ladder swept first, e.g. 2000,8k,32k (tokens).")
@click.option("--tolerance", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="Relative width of the refined interval (default 0.02).")
@click.option("--tolerance-tokens", type=click.IntRange(min=1), default=None,
              help="Absolute width floor of the interval in tokens (default 64).")
@click.option("--needles", type=click.IntRange(0, 10), default=None, help="Needle codes embedded in the prompt.")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="Identical requests per size (bad if any reply is garbage).")
@click.option("--concurrency", type=click.IntRange(min=1), default=None, help="Requests sent at once per size.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="max_tokens of each request.")
@click.option("--accept-reasoning", is_flag=True, default=False,
              help="Judge an answer found only in reasoning_content as the answer (default: INCONCLUSIVE, "
                   "'misrouted' -- a reasoning-parser fault, not corruption).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds per chat request (default: the recipe's server.request_timeout_s, else 600).")
@click.option("--question", default=None, help="The question asked after the document (default: the recipe's).")
@click.option("--no-expected-answer", is_flag=True, default=False,
              help="The question has no checkable answer (e.g. 'Summarize the document in two sentences.').")
@click.option("--reference-endpoint", default=None, metavar="URL",
              help="A known-good server answering the same model: every size is also compared with it (greedy "
                   "continuation; --prompt-logprobs) and divergence beyond the measured noise is bad (issue 18).")
@click.option("--reference-model", default=None, help="Model id on the reference (default: its first model).")
@click.option("--noise-endpoint", default=None, metavar="URL",
              help="A second, different good build: the noise between it and the reference is measured at several "
                   "sizes first and sets the tolerance (default: the recipe's floors, reported as uncalibrated).")
@click.option("--regress", "regress_mode", type=click.Choice(["garbage", "diverges", "garbage,diverges"]),
              default=None, help="What counts as bad with a reference (default: garbage,diverges).")
@click.option("--prompt-logprobs/--no-prompt-logprobs", default=None,
              help="Also compare vLLM prompt_logprobs up to the reference's prompt_logprobs_max_size (default 8192 "
                   "tokens: vLLM materialises prompt logits, a memory risk at long prompts).")
@click.option("--prompt-logprobs-max-size", type=click.IntRange(min=1), default=None,
              help="Largest prompt (tokens) sent with prompt_logprobs (default 8192).")
@click.option("--control/--no-control", "control", default=None,
              help="Run the decode control (short prompt, long exact enumerated list) on the server, calibrated on "
                   "the reference when there is one; prints 'decode path: fine / broken / unusable'.")
@click.option("--stream", "stream", type=click.Choice(["off", "on", "both"]), default=None,
              help="Stream the chat requests (server-sent events reassembled and judged: on), or ask every size "
                   "both ways, a streamed reply that differs from the unstreamed one being a finding itself (both); "
                   "default: the recipe's reproducer.stream, else off.")
@pass_ctx
@_says_interval
def probe(ctx: Ctx, endpoint: str | None, source_dir: Path | None, model: str | None, recipe_path: Path | None,
          min_size: int | None,
          max_size: int | None, sizes: list[int] | None, tolerance: float | None, tolerance_tokens: int | None,
          needles: int | None, repeats: int | None, concurrency: int | None, max_tokens: int | None,
          accept_reasoning: bool, timeout_s: float | None, question: str | None = None,
          no_expected_answer: bool = False, reference_endpoint: str | None = None,
          reference_model: str | None = None, noise_endpoint: str | None = None, regress_mode: str | None = None,
          prompt_logprobs: bool | None = None, control: bool | None = None,
          prompt_logprobs_max_size: int | None = None, stream: str | None = None) -> None:
    """Find the prompt size (tokens) at which a running server's output turns to garbage.

    Sends chat requests with token-sized prompts (filler text, optional needle codes
    and the recipe's question) and classifies every reply: OK, GARBAGE, ERROR or
    INCONCLUSIVE. Bisects in log space between --min-size and --max-size (or sweeps
    --sizes first) down to the tolerance and prints the threshold interval
    [last OK, first GARBAGE] in prompt tokens. A dead server is an ERROR, never GARBAGE.
    A server that wants an API key gets $BISECTBOT_API_KEY as a bearer token.

    With a recipe whose reproducer is a command (kind: command, argv with {size}),
    no server is needed: the command runs once per size in a fresh process
    (exit 0 OK, 1-124 bad, 125 cannot test, crash/timeout bad).
    """
    from pydantic import ValidationError

    from ..recipe import ReproducerSpec, load_recipe
    from ..reproduce.threshold import search_threshold

    base: dict = {}
    recipe_regress: str | None = None  # the recipe's regress with its reference (issue 23)
    passthrough: list[str] = []  # host variables the recipe hands to its command on purpose (issue 13)
    network = "loopback"  # the command's sandbox network: the recipe's server.network (issue 36)
    if recipe_path is not None:
        from ..shipped import find_recipe  # a path, or a shipped recipe's name (as run takes it)

        recipe = load_recipe(find_recipe(recipe_path))  # RecipeError -> one located line per problem, exit 2
        passthrough = list(recipe.env_passthrough)
        network = recipe.server.network
        base = recipe.reproducer.model_dump(exclude_unset=True)  # unset max_size: derived from the server
        model = model or recipe.model or None
        if recipe.regress.mode == "diverges":
            recipe_regress = "garbage,diverges" if recipe.regress.arg == "garbage" else "diverges"
        elif recipe.regress.mode == "garbage":
            recipe_regress = "garbage"
        if timeout_s is None:
            timeout_s = recipe.server.request_timeout_s
    overrides = {"min_size": min_size, "max_size": max_size, "sizes": sizes, "tolerance": tolerance,
                 "tolerance_tokens": tolerance_tokens, "needles": needles, "repeats": repeats,
                 "concurrency": concurrency, "max_tokens": max_tokens, "stream": stream}
    base.update({k: v for k, v in overrides.items() if v is not None})
    if question is not None:
        base["question"] = question
    if no_expected_answer:
        base["expected_answer"] = None
    for url, hint in ((reference_endpoint, "--reference-endpoint"), (noise_endpoint, "--noise-endpoint")):
        if url is not None and not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"expected http://HOST:PORT, got {url!r}", param_hint=hint)
    recipe_ref = dict(base.get("reference") or {})
    if reference_endpoint is None and recipe_ref.get("endpoint"):
        reference_endpoint = str(recipe_ref["endpoint"])  # the recipe's reference (issue 23)
        regress_mode = regress_mode or recipe_regress
        log_ref = f"reference: {reference_endpoint} (the recipe's reproducer.reference)"
    else:
        log_ref = ""
        if reference_endpoint is None and recipe_ref.get("candidate") and ctx.verbosity >= 0:
            terminal.echo("note: the recipe's reference is the bisection's last-good candidate, which probe does not "
                          "start: no comparison (give --reference-endpoint URL)", err=True)
    if noise_endpoint and not reference_endpoint:
        raise click.UsageError("--noise-endpoint needs --reference-endpoint (the noise is measured against it)")
    if reference_endpoint and endpoint:
        from ..reproduce.reference import same_server

        for other, what in ((endpoint, "--endpoint (the candidate)"), (noise_endpoint, "--noise-endpoint")):
            if other and same_server(reference_endpoint, other):
                raise click.UsageError(
                    f"the reference {reference_endpoint} is the same server as {what} {other}: a server compared "
                    "with itself never diverges; give a known-good server of the same model")
    if reference_endpoint:
        ref = {k: v for k, v in dict(base.get("reference") or {}).items() if k not in ("candidate", "endpoint")}
        ref["endpoint"] = reference_endpoint
        if reference_model:
            ref["model"] = reference_model
        if prompt_logprobs is not None:
            ref["prompt_logprobs"] = prompt_logprobs
        if prompt_logprobs_max_size is not None:
            ref["prompt_logprobs_max_size"] = prompt_logprobs_max_size
        base["reference"] = ref
    else:
        base.pop("reference", None)
    if control:
        base["control"] = dict(base.get("control") or {})
    elif control is False:
        base.pop("control", None)
    if accept_reasoning:
        base["classifier"] = {**dict(base.get("classifier") or {}), "accept_reasoning": True}
    if sizes is not None and min_size is None and max_size is None:
        base["min_size"], base["max_size"] = min(sizes), max(sizes)
    try:
        spec = ReproducerSpec.model_validate(base)
    except ValidationError as e:
        msgs = "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
        raise click.UsageError(f"bad reproducer settings: {msgs}") from None

    def log(line: str) -> None:
        if ctx.verbosity >= 0:
            terminal.echo(line, err=True)

    if spec.kind == "command" and endpoint is None:
        from ..reproduce.command import run_argv, search_threshold_command

        argv = list(spec.command or [])
        if any("{source}" in a for a in argv) and source_dir is None:
            raise click.UsageError("the recipe's command uses {source}: give --source DIR")
        res = search_threshold_command(lambda size: run_argv(argv, size, source_dir, spec.command_timeout_s,
                                                             cwd=source_dir, passthrough=passthrough,
                                                             network=network),
                                       spec, log=log)
        res.endpoint = "command: " + argv_text(argv)
        _output(ctx, res)
        return
    if endpoint is None:
        raise click.UsageError("give --endpoint URL (or a --recipe whose reproducer is a command)")
    if not endpoint.startswith(("http://", "https://")):
        raise click.BadParameter(f"expected http://HOST:PORT, got {endpoint!r}", param_hint="--endpoint")
    api_key = secret_env("BISECTBOT_API_KEY")  # sent as a bearer token, never printed
    if spec.reference is None:
        if regress_mode not in (None, "garbage"):
            raise click.UsageError(f"--regress {regress_mode} needs --reference-endpoint")
        res = search_threshold(endpoint, spec, model=model, log=log, timeout_s=timeout_s or 600.0, api_key=api_key)
        extra = {}
        if spec.control is not None and spec.control.enabled:
            extra = _control(endpoint, None, spec, model, api_key, timeout_s or 600.0, log)
        blind = blind_oracles(res, extra)
        if blind:
            res.notes.append(blind)
            extra["text_oracles"] = "blind"
        _output(ctx, res, extra)
        return
    from ..reproduce.reference import probe_with_reference

    if log_ref:
        log(log_ref)
    mode = regress_mode or "garbage,diverges"
    res, extra = probe_with_reference(endpoint, spec, noise_url=noise_endpoint, model=model, api_key=api_key,
                                      timeout_s=timeout_s or 600.0, diverges_bad="diverges" in mode,
                                      garbage_bad="garbage" in mode, log=log)
    _output(ctx, res, extra)


BLIND = "every text oracle is blind here; use a reference"


def blind_oracles(res: ThresholdResult, extra: dict) -> str | None:
    """The note for a server that the text checks alone cannot judge (issue 22), or ``None``:
    GARBAGE already at the smallest size with no OK size at all (and, when it ran, a decode
    control that is not fine either). A model that never answers right -- random weights, a
    tiny model, as on the real-vLLM lane -- and a build broken at every size look the same to
    them; only a comparison with a known-good server (``--reference-endpoint``) tells them apart.
    With a decode control that is broken too, a stray OK reply among the sizes (``non-monotone``: a
    random model's word salad passes the checks by chance) does not make the text checks judges."""
    ctl = (extra.get("control") or {}).get("candidate") or {}
    if ctl and ctl.get("status") == "fine":
        return None  # the decode path answers right: the garbage is about the long prompt
    if not res.table or min(res.table, key=lambda r: r.size).outcome.value != "GARBAGE":
        return None
    stray_ok = res.status == "non-monotone" and ctl.get("status") == "broken"
    if not (res.status == "all-garbage" and not any(r.outcome.value == "OK" for r in res.table)) and not stray_ok:
        return None
    smallest = min((r.size for r in res.table), default=res.min_size)
    why = f"GARBAGE already at the smallest size ({smallest} prompt tokens)"
    if ctl:
        why += f" and the decode control {ctl.get('status')}"
    return (f"{BLIND} (--reference-endpoint URL, a known-good server of the same model): {why}; a model that "
            "never answers right (random weights, a tiny model) and a build broken at every size look the same "
            "to the text checks")


def _control(endpoint: str, good_url: str | None, spec: ReproducerSpec, model: str | None, api_key: str | None,
             timeout_s: float, log: Callable[[str], None]) -> dict:
    from ..reproduce.control import control_pair

    return control_pair(endpoint, good_url, spec, model=model, api_key=api_key, timeout_s=timeout_s, log=log)


def _output(ctx: Ctx, res: ThresholdResult, extra: dict | None = None) -> None:
    extra = extra or {}
    if ctx.json:
        ctx.emit({**res.to_dict(), **extra})
    else:
        _print_table(res, diverges="diverges" in str((extra.get("reference") or {}).get("regress", "")))
        if extra.get("decode_path"):
            terminal.echo(extra["decode_path"]["line"])
    click.get_current_context().exit(exit_code(res.status))
