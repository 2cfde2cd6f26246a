"""The secrets the bot holds, the one redactor that removes them, and what candidates may see.

The bot runs on self-hosted runners with a GitHub token and sometimes a server API key, and it
builds and runs code it does not trust (the commits under test). Two rules follow (issue 13):

* **Candidates get an allow-listed environment** (:func:`candidate_env`): a build, a server
  or a command reproducer sees the few host variables a build needs (:data:`BASE_ENV`:
  ``PATH``, ``HOME``, locale, temp dir, proxies, CA bundles, GPU visibility), then the runner
  profile's ``env``, the recipe's ``env``, the names the recipe passes through on purpose
  (``env_passthrough``), and the bot's own ``BISECTBOT_SOURCE*`` variables -- nothing else of
  the bot's environment, so a token can never reach a candidate by inheritance. A secret-looking
  name in :data:`BASE_ENV` (none today) would still be dropped; a passthrough name is honoured
  as written (the recipe author asked for it).
* **One redactor** (:func:`redact`) replaces every secret value by ``***``: the values of
  :data:`SECRET_ENV` (GitHub tokens, the server API key, Hugging Face tokens, Actions' own
  request tokens), every environment variable whose *name* says token/secret/password/key,
  values registered at run time (:func:`register_secret`), and GitHub / Hugging Face token
  *shapes* even when the bot never held them. It is applied to everything the bot stores or
  prints: its stdout/stderr (:func:`install_stream_redaction`), log records, ``result.json``,
  reports, issue bodies and ledger rows (:func:`redact_data` on the serialised results).

Values shorter than :data:`MIN_SECRET_LEN` characters are not treated as secrets (replacing
``"1"`` everywhere would destroy the output and hide nothing).
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, TextIO

from .terminal import guard, visible

SECRET_ENV: tuple[str, ...] = (
    "BISECTBOT_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",  # the bot's GitHub token (report.github)
    "BISECTBOT_API_KEY",  # bearer token sent to the server under test (probe)
    "BISECTBOT_MARKER_KEY",  # HMAC key of the fingerprint markers (report.fingerprint)
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",  # model downloads
    "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",  # GitHub Actions runner internals
)
"""Variables whose values are secrets whatever their length or shape."""

SECRET_NAME = re.compile(r"(?i)(token|secret|passw(or)?d|api_?key|private_?key|credential)")
"""A variable whose name matches holds a secret (its value is redacted, never passed by default)."""

MIN_SECRET_LEN = 6
"""Shorter values are not redacted (they would match ordinary text)."""

MIN_NAMED_SECRET_LEN = 8
"""Values of variables that are secret only by their *name* (:data:`SECRET_NAME`) are redacted from
this length (``TOKENIZERS_PARALLELISM=false`` is not a secret)."""

BASE_ENV: tuple[str, ...] = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "TEMP", "TMP",
    "LANG", "LANGUAGE", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
    "XDG_CACHE_HOME", "CC", "CXX", "MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL",
    "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "HSA_OVERRIDE_GFX_VERSION",
)
"""Host variables a candidate build or server needs (plus the POSIX locale categories,
:data:`LOCALE_ENV`); nothing else is inherited.
Proxies are passed only when they carry no credentials (``user:pass@`` is dropped); other URLs
(``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``) lose their ``user:pass@`` part."""

LOCALE_ENV = ("LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_MONETARY", "LC_NUMERIC", "LC_TIME",
              "LC_ADDRESS", "LC_IDENTIFICATION", "LC_MEASUREMENT", "LC_NAME", "LC_PAPER", "LC_TELEPHONE")
"""The locale categories of POSIX and glibc (``locale(7)``): the only ``LC_*`` names a candidate
inherits. Any other ``LC_*`` name is a host variable like any other (``LC_DEPLOY_KEY`` reached
candidates in clear: hostile pass); a recipe's ``env_passthrough`` names it on purpose."""

_TOKEN_SHAPES = [
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255})\b"),  # GitHub
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),  # Hugging Face
]
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:token|bearer|basic)\s+)[^\s'\"]+")
# the password may itself hold "@": the credentials run to the LAST "@" before the path/space
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@'\"]+:)[^/\s'\"]+@")
# a token as the whole user part (https://TOKEN@pypi.fury.io/..., https://x-oauth-token@host): long ones only
_URL_USER_TOKEN = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@'\"]{16,}@")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s'\"]+@")
QUERY_SECRET_PARAMS = (
    "api_key", "api-key", "apikey", "access_token", "access-token", "refresh_token", "id_token",
    "token", "auth", "auth_token", "key", "secret", "client_secret", "password", "passwd", "pwd",
    "sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
)
"""Query-string parameters whose values are credentials (Azure OpenAI and other gateways take
``?api-key=``; OAuth ``access_token=``; pre-signed URLs ``sig=``/``X-Amz-Signature=``)."""
_NAMED_SECRET = (r"(?:api[_-]?key|x-api-key|access[_-]?token|auth[_-]?token|refresh[_-]?token|client[_-]?secret"
                 r"|hf[_-]?token|token|secret|password|passwd)")
# {"api_key": "v"}, 'token': 'v', api_key='v' (vLLM logs its non-default args as a Python dict)
_QUOTED_SECRET = re.compile(r"(?i)([\"']" + _NAMED_SECRET + r"[\"']\s*:\s*[\"']|\b" + _NAMED_SECRET
                            + r"\s*=\s*[\"'])[^\"'\s]{4,}")
# --api-key v, --api-key=v, --hf-token v (a server's command line, echoed in its logs)
_FLAG_SECRET = re.compile(r"(?i)(--" + _NAMED_SECRET + r"(?:=|\s+))(?!-)[^\s'\"]+")
# X-Api-Key: v / api-key: v (gateway headers)
_KEY_HEADER = re.compile(r"(?im)^(\s*(?:x-)?api-key:\s*)\S+")
#: Words that make a query parameter a credential wherever they stand in its name (GitLab's
#: ``private_token``, Google's ``X-Goog-Signature``, ``sas_token``, ``db_password``): the kind, not a
#: list of names (hostile pass: ``?private_token=`` was not in :data:`QUERY_SECRET_PARAMS`).
QUERY_SECRET_WORDS = ("token", "secret", "key", "passw", "pwd", "sig", "auth", "credential", "session")
_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:" + "|".join(re.escape(p) for p in QUERY_SECRET_PARAMS)
    + r"|[\w.-]*(?:" + "|".join(QUERY_SECRET_WORDS) + r")[\w.-]*)=)[^&;#\s'\"<>]+")

_registered: set[str] = set()
_held: dict[str, str] = {}  # secrets taken out of os.environ at start-up (take_secrets)


def is_secret_name(name: str) -> bool:
    """True when ``name`` is in :data:`SECRET_ENV` or looks like a secret (:data:`SECRET_NAME`)."""
    return name in SECRET_ENV or bool(SECRET_NAME.search(name))


def _forms(value: str) -> set[str]:
    """``value`` as it may appear in text: verbatim, JSON-escaped, percent-encoded (``quote`` and
    ``quote_plus``, upper- and lower-case hex), base64-encoded (:func:`_base64_cores`)."""
    from urllib.parse import quote, quote_plus

    out = {value, value.replace("\\", "\\\\").replace('"', '\\"')}
    for enc in (quote(value, safe=""), quote_plus(value, safe=""), quote(value)):
        out.add(enc)
        out.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), enc))
    out.update(_base64_cores(value))
    return out


def _base64_cores(value: str) -> set[str]:
    """The base64 text that ``value`` becomes wherever it sits in an encoded stream (a candidate
    printed a walked ``/proc/PID/environ`` base64-encoded, issue 24): for each of the three
    alignments, the characters that depend on ``value``'s bytes alone (16 or more of them)."""
    import base64

    raw = value.encode("utf-8", "surrogateescape")
    cores = set()
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw).decode("ascii")
        core = enc[4 if k else 0:(k + len(raw)) // 3 * 4]
        if len(core) >= 16:
            cores.add(core)
    return cores


def register_secret(value: str | None) -> None:
    """Remember a secret held at run time (a token read from a file, an API key) for :func:`redact`;
    its percent-encoded and JSON-escaped forms are redacted too."""
    if value and len(value) >= MIN_SECRET_LEN:
        _registered.update(_forms(value))


def is_secret_var(name: str, value: str) -> bool:
    """True when the variable ``name=value`` holds a secret: a secret name (:func:`is_secret_name`)
    or a value shaped like a GitHub / Hugging Face token whatever its name."""
    return is_secret_name(name) or any(p.search(value) for p in _TOKEN_SHAPES)


def take_secrets(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Move every secret variable (:func:`is_secret_var`) out of ``environ`` (default ``os.environ``)
    into this process's memory, once, at start-up (issue 36, input 1): from then on no process the
    bot starts -- its git (GitPython's long-lived ``cat-file`` processes included), docker, patch,
    a candidate -- inherits one, whatever environment it is given. The values stay known to
    :func:`redact` and readable by name through :func:`secret_env`. Returns the names taken, sorted."""
    env = os.environ if environ is None else environ
    taken = []
    for k in list(env):
        v = env[k]
        if is_secret_var(k, v):
            _held[k] = env.pop(k)
            if (k in SECRET_ENV and len(v) >= MIN_SECRET_LEN) or len(v) >= MIN_NAMED_SECRET_LEN \
                    or any(p.search(v) for p in _TOKEN_SHAPES):
                register_secret(v)
            taken.append(k)
    if environ is None and taken:
        _wipe_initial_environ(set(taken))
    return sorted(taken)


def _wipe_initial_environ(names: set[str]) -> int:
    """Overwrite the values of ``names`` in this process's *initial* environment block with ``*``.

    ``/proc/PID/environ`` shows the block the kernel wrote at ``exec``, not the live environment:
    removing a variable (``unsetenv``) leaves its value readable there -- by root, and by the same
    uid once the process is dumpable again. The block lies at ``env_start``..``env_end``
    (``/proc/self/stat`` fields 50-51); it is checked against ``/proc/self/environ`` before any byte
    is written. Returns the number of values overwritten (0 where ``/proc`` is missing)."""
    import ctypes

    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # fields 50, 51 of the whole line
        with open("/proc/self/environ", "rb") as fh:
            block = fh.read()
    except (OSError, IndexError, ValueError):
        return 0
    if end - start < len(block) or ctypes.string_at(start, len(block)) != block:
        return 0
    done, off = 0, 0
    for item in block.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq and value and name.decode("utf-8", "replace") in names:
            at = start + off + len(name) + 1
            ctypes.memset(at, ord("*"), len(value))
            done += 1
        off += len(item) + 1
    return done


def secret_env(name: str) -> str | None:
    """The value of the secret variable ``name``: taken at start-up (:func:`take_secrets`), else
    still in ``os.environ`` (library use without the CLI's start-up); None when unset or empty."""
    return _held.get(name) or os.environ.get(name) or None


def host_env(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The host variables among ``names`` that are set, secrets taken at start-up included
    (a recipe's ``env_passthrough``, a profile's ``pass_env``: named on purpose)."""
    env_in = os.environ if environ is None else environ
    out = {}
    for k in names:
        if k in env_in:
            out[k] = env_in[k]
        elif environ is None and k in _held:
            out[k] = _held[k]
    return out


def known_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value the bot holds now, longest first (registered and from the environment)."""
    env = os.environ if environ is None else environ
    found = set(_registered)
    for k, v in env.items():
        if v and ((k in SECRET_ENV and len(v) >= MIN_SECRET_LEN)
                  or (len(v) >= MIN_NAMED_SECRET_LEN and SECRET_NAME.search(k))):
            found.update(_forms(v))
    return sorted(found, key=len, reverse=True)


_INVISIBLE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|[\r\n\u00ad\u200b-\u200f\u2028\u2029\u2060-\u2064\ufeff]")
"""What can stand inside a secret in printed text without being seen: line breaks (base64 wrapped at
76 columns, a log line split), ANSI escape sequences (CSI and OSC), zero-width and bidi marks, the
soft hyphen, the byte-order mark."""


def _redact_interrupted(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every known secret that :data:`_INVISIBLE` characters interrupt replaced by
    ``***`` (the interrupting characters inside it go with it): the secrets are looked for in the text
    with those characters taken out, and each find is mapped back to its span of the original (issue
    41, item 16). Memory: the squeezed copy and one pair per interrupting run, nothing per character."""
    import bisect

    cuts = [(m.start(), m.end()) for m in _INVISIBLE.finditer(text)]
    squeezed = _INVISIBLE.sub("", text)
    finds = []
    for s in secrets:
        start = squeezed.find(s) if s else -1
        while start != -1:
            finds.append((start, start + len(s)))
            start = squeezed.find(s, start + len(s))
    if not finds:
        return text
    # squeezed index -> original index: add the lengths of the runs taken out before it
    before: list[int] = []  # squeezed position of each run
    removed: list[int] = []  # characters taken out up to and including each run
    total = 0
    for a, b in cuts:
        before.append(a - total)
        total += b - a
        removed.append(total)

    def orig(i: int, end: bool) -> int:
        k = bisect.bisect_right(before, i) if not end else bisect.bisect_left(before, i)
        return i + (removed[k - 1] if k else 0)

    spans = sorted({(orig(a, False), orig(b, True)) for a, b in finds}, reverse=True)
    for a, b in spans:
        if "***" not in text[a:b]:
            text = text[:a] + "***" + text[b:]
    return text


MIN_FRAGMENT_LEN = MIN_NAMED_SECRET_LEN
"""Shortest piece of a known secret redacted where a cut left it (:func:`_cut_fragment`): the length
from which a value counts as a secret at all; a shorter piece is as likely ordinary text as a secret's
start."""


def _cut_end(text: str) -> int:
    """Where ``text``'s cut marks end its content: the index before any trailing run of white space,
    ``…`` and ``...`` (scanned backwards, linear in that run; a regular expression anchored at the
    end was quadratic on a reply of 40,000 spaces)."""
    i = len(text)
    while i:
        if text[i - 1].isspace() or text[i - 1] == "…":
            i -= 1
        elif text.endswith("...", 0, i):
            i -= 3
        else:
            break
    return i


def _cut_fragment(text: str, secret: str) -> str:
    """``text`` with a piece of ``secret`` that a cut left at either edge replaced by ``***``: the text
    ends inside the secret (an excerpt cut at N characters, a table cell, optionally followed by ``…``)
    or starts inside it (a tail kept); an ellipsis inside the text marks a cut the same way. A whole
    secret is :func:`redact`'s own case; a piece shorter than :data:`MIN_FRAGMENT_LEN` is left (issue 41, item 11: a probe table showed an echoed key's first 16
    characters, cut before any redaction could see the whole key)."""
    if len(secret) <= MIN_FRAGMENT_LEN or len(text) < MIN_FRAGMENT_LEN:
        return text
    if secret[:MIN_FRAGMENT_LEN] not in text and secret[-MIN_FRAGMENT_LEN:] not in text:
        return text  # every piece it looks for holds the secret's first or last MIN_FRAGMENT_LEN characters
    if "…" in text.rstrip().rstrip("…"):  # an inner ellipsis marks a cut too: each piece's edges are cut edges
        parts = text.split("…")
        return "…".join(_cut_fragment(p, secret) for p in parts)
    end = _cut_end(text)
    core, tail = text[:end], text[end:]
    for k in range(min(len(secret) - 1, len(core)), MIN_FRAGMENT_LEN - 1, -1):
        if core.endswith(secret[:k]):
            core = core[:-k] + "***"
            break
    for k in range(min(len(secret) - 1, len(core)), MIN_FRAGMENT_LEN - 1, -1):
        if core.startswith(secret[-k:]):
            core = "***" + core[k:]
            break
    return core + tail


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every secret replaced by ``***`` (see the module docstring for what is secret).

    Also removes GitHub/Hugging Face token shapes, ``Authorization:`` header values (also in
    their JSON form), the password of ``scheme://user:password@host`` URLs (a password holding
    ``@`` included), a long user part standing alone (``https://TOKEN@host``, 16+ characters) and
    the values of credential query parameters (:data:`QUERY_SECRET_PARAMS`,
    e.g. ``?api_key=``), quoted values of secret-named keys (``{"api_key": "…"}``,
    ``token='…'``), ``--api-key VALUE`` flags and ``X-Api-Key:`` headers. Known secrets are also found percent-encoded and JSON-escaped.
    Non-strings are returned unchanged. ``secrets``: :func:`known_secrets` computed once by a
    caller redacting many strings (default: looked up on each call).
    """
    if not text or not isinstance(text, str):
        return text
    secrets = known_secrets() if secrets is None else list(secrets)
    for s in secrets:
        if s in text:
            text = text.replace(s, "***")
        text = _cut_fragment(text, s)
    if _INVISIBLE.search(text):
        text = _redact_interrupted(text, secrets)
    for pat in _TOKEN_SHAPES:
        text = pat.sub("***", text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + "***", text)
    text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + "***@", text)
    text = _URL_USER_TOKEN.sub(lambda m: m.group(1) + "***@", text)
    text = _QUERY_SECRET.sub(lambda m: m.group(1) + "***", text)
    for pat in (_QUOTED_SECRET, _FLAG_SECRET, _KEY_HEADER):
        text = pat.sub(lambda m: m.group(1) + "***", text)
    return text


def redact_data(data: Any, secrets: list[str] | None = None) -> Any:
    """:func:`redact` applied to every string (keys and values) of a JSON-like structure (a copy);
    the secrets are looked up once per call, not once per string."""
    if secrets is None:
        secrets = list(known_secrets())
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return {redact(k, secrets) if isinstance(k, str) else k: redact_data(v, secrets) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v, secrets) for v in data]
    return data


def _clean_proxy(value: str) -> str | None:
    """``value`` of a proxy variable, or None (not passed) when its URL carries any user part:
    ``user:pass@``, and a token alone as the user (``http://TOKEN@proxy:3128``, hostile pass of
    issue 36) -- a short one included, since no shape tells a token from a user name there."""
    return None if _URL_CREDENTIALS.search(value) or _URL_USERINFO.search(value) else value


def strip_url_credentials(value: str) -> str:
    """``value`` with the ``user[:password]@`` part of every URL in it removed
    (``https://u:p@pypi.corp/simple`` -> ``https://pypi.corp/simple``); query credentials
    (:data:`QUERY_SECRET_PARAMS`) are removed too."""
    value = _URL_USERINFO.sub(lambda m: m.group(1), value)
    return _QUERY_SECRET.sub(lambda m: m.group(1)[:1], value).replace("?&", "?")


def candidate_env(*layers: Mapping[str, str] | None, passthrough: Iterable[str] = (),
                  environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a candidate process (build, server, command reproducer).

    Starts from :data:`BASE_ENV` and the locale variables (:data:`LOCALE_ENV`) of ``environ`` (default
    ``os.environ``), skipping secret-looking names and proxies with credentials and stripping
    ``user:pass@`` from other URLs (pip index URLs); adds each name
    of ``passthrough`` present in ``environ`` (a recipe's ``env_passthrough``: honoured even for
    secret-looking names, the recipe author asked for it); then ``layers`` in order (runner
    profile env, recipe env, triage env, the runner's own ``BISECTBOT_SOURCE*``), later layers
    winning. Values are strings; ``None`` layers are skipped.
    """
    env_in = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for k, v in env_in.items():
        if (k in BASE_ENV or k in LOCALE_ENV) and not is_secret_name(k):
            if k.lower().endswith("_proxy"):
                cleaned = _clean_proxy(v)
                if cleaned is None:
                    continue
            else:  # index URLs (PIP_INDEX_URL, ...): keep the index, not its credentials
                v = strip_url_credentials(v)
            out[k] = v
    out.update(host_env(passthrough, environ))
    for layer in layers:
        for k, v in (layer or {}).items():
            out[str(k)] = str(v)
    from .reaper import marker_env

    out.update(marker_env())  # the probe this process belongs to: killed with it (issue 24, input 2)
    return out


def passthrough_env(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The host variables named by a recipe's ``env_passthrough`` that are set (containers: no
    host basics are added, the image has its own ``PATH``/``HOME``)."""
    return host_env(names, environ)


class RedactingStream(io.TextIOBase):
    """A text stream that passes every write through :func:`redact` (the bot's stdout/stderr),
    then through :func:`bisectbot.terminal.guard` (control, escape and bidi characters shown as
    ``\\xNN``; colour sequences kept only on a terminal, issue 25).

    Writes are redacted one call at a time; ``click.echo`` and :mod:`logging` write each message
    in one call, so a secret is never split across two writes.
    """

    def __init__(self, inner: TextIO):
        self._inner = inner
        try:
            self._tty = bool(inner.isatty())
        except (AttributeError, ValueError, OSError):
            self._tty = False

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self._inner.write(guard(redact(s), keep_sgr=self._tty))
        return len(s)

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._inner, "encoding", "utf-8")

    @property
    def errors(self) -> str:  # type: ignore[override]
        # never None: click would then look for a binary buffer and write around this stream
        return getattr(self._inner, "errors", None) or "strict"


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message of every record (also its arguments) and
    shows its control and bidi characters as ``\\xNN`` (:func:`bisectbot.terminal.visible`: a
    logged server message cannot drive the terminal, issue 25)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a broken format string: leave it to logging's own error handling
            return True
        record.msg = visible(redact(msg))
        record.args = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def install_stream_redaction() -> None:
    """Redact everything this process prints: wrap ``sys.stdout``/``sys.stderr`` (once) and add a
    :class:`RedactingFilter` to the root logger's handlers."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
    root = logging.getLogger()
    for h in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in h.filters):
            h.addFilter(RedactingFilter())
