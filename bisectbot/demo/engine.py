"""Reference engine: a small OpenAI-compatible HTTP server with a prefill threshold.

It answers coherently below ``threshold`` prompt tokens and returns seeded garbage
at or above it -- the behaviour of the motivating bug (GLM-5.1-FP8 on MI355X turning
to garbage above ~20K prompt tokens), in a real process on real sockets, so the
reproducer, the bisection and the demo can be tested without a GPU.

Run it::

    python -m bisectbot.demo.engine --port 0 --port-file /tmp/port --threshold 20000 \\
        [--flaky 0.1] [--seed 7] [--reasoning] [--config engine.json]

Endpoints (shapes follow vLLM's OpenAI-compatible server):

* ``GET /health`` -> 200 ``{}``
* ``GET /v1/models`` -> ``{"object": "list", "data": [{"id": MODEL, "max_model_len": N, ...}]}``
* ``POST /tokenize`` with ``{"prompt": str}`` or ``{"messages": [...]}`` ->
  ``{"count": int, "max_model_len": int, "tokens": [int, ...]}``
* ``POST /v1/chat/completions`` -> chat completion with ``usage`` and, with
  ``reasoning``, ``message.reasoning_content``. Over ``max_model_len`` -> HTTP 400 with
  vLLM's "maximum context length" message.
* ``GET /stats`` -> ``{"chat_requests": n, "tokenize_requests": m, "prompt_tokens": [...]}``
  (prompt tokens of every chat request served, in order; for "no probe repeated" checks).

Tokens: :func:`tokenize` -- words (``\\w+``) and single punctuation characters, a
deterministic stand-in for a BPE tokenizer shared by ``/tokenize`` and ``usage``.
Chat prompts add :data:`MESSAGE_OVERHEAD` tokens per message plus one for the
assistant turn (like a chat template).

Settings (defaults < ``--config FILE.json`` < explicit command-line flags):
``threshold`` (tokens, default 20000; ``null`` = never garbage), ``flaky`` (probability
0..1 that a reply above the threshold comes out healthy: the bug does not show, one-sided
like real corruption), ``seed``,
``reasoning`` (bool), ``model``, ``max_model_len`` (tokens, default 131072),
``broken`` (true: print an error and exit 3 at start, like a nightly whose server
never comes up), ``crash_above`` (tokens: the process dies while serving a prompt at
least that long, like a GPU fault), ``garbage_kinds`` (subset of :data:`GARBAGE_KINDS`),
``delay_s`` (seconds added to every chat reply), ``answer`` (fixed coherent answer),
``tokenize_endpoint`` (false: no ``/tokenize``, like a server without it),
``report_max_model_len`` (false: ``/v1/models`` omits ``max_model_len``), ``error_above``
(tokens: HTTP 500 for prompts at least that long, like an out-of-memory error), ``truncate_to``
(tokens: a longer prompt silently loses its first tokens until it is that long, and ``usage``
reports the kept count -- ollama#3839's silent truncation, issue 37), ``sampling_defaults`` (an
object, e.g. ``{"repetition_penalty": 1.3}``: values a request that omits those fields gets, as vLLM
fills them from ``generation_config.json``; any penalty away from neutral -- ``repetition_penalty``
!= 1, ``frequency_penalty``/``presence_penalty`` != 0 -- turns every reply into salad, as measured on
real vLLM), ``reject_fields`` (a list: a request carrying one of them is answered HTTP 400
"Unrecognized request argument supplied: NAME", as OpenAI's API and strict gateways do),
``think_in_content`` (``"tags"`` or ``"plain"``: a reasoning model served without a reasoning
parser writes its thinking into ``content`` -- inside ``<think>...</think>`` or bare -- before the
answer, 60 tokens of it per 1,000 prompt tokens, so long prompts outgrow ``max_tokens`` before any
answer; vllm#31045), ``band_to`` (tokens: garbage only from ``threshold`` up to, not including, this
size -- a kernel chosen by size range, as tt-metal#55102's 12K-20K band and aiter's tuned configs),
``cut_sizes`` (a list of ``[from, to)`` prompt-token ranges: there every reply is ``max_tokens`` of hidden
thinking and no visible text, finish ``length`` -- a size no reply decides, whatever the prompt).

Streaming (issue 37): a request with ``"stream": true`` is answered with server-sent events as vLLM
sends them (a role chunk, one ``delta.content``/``reasoning_content`` chunk per word, the
``finish_reason`` chunk, a ``usage`` chunk when ``stream_options.include_usage``, ``data: [DONE]``).
``stream_corrupt`` (true: from ``threshold`` prompt tokens up the streamed deltas lose characters at
delta boundaries -- ``Thaccess codes arKESTREL-4417`` -- while the unstreamed reply stays healthy at
every size, as a fault in delta emission or the stop-string hold-back, vllm#45636), ``stream_fault``
(``"stall"``: a stream stops after half its chunks and sends nothing for ``stream_stall_s`` seconds;
``"flood"``: a stream sends content deltas without end, until the client hangs up).

Prefix cache (issue 37): ``prefix_cache`` (true: prompts are cached in blocks of
:data:`PREFIX_BLOCK` tokens keyed by their whole prefix and the request's ``cache_salt``, as vLLM V1
does; a request reports the tokens served from it in ``usage.prompt_tokens_details.cached_tokens`` and
``GET /metrics`` exposes ``vllm:prefix_cache_queries_total``/``vllm:prefix_cache_hits_total``),
``ignore_cache_salt`` (true: the salt is not part of the key -- a server that ignores it, so a later
prompt that starts like an earlier one is served from the cache).

Odd-but-real servers (issue 11): ``terse`` (probability 0..1 that a coherent reply is
just the answer -- ``4``, one completion token -- as healthy servers sometimes answer),
``misroute`` (true: the coherent answer is sent in ``reasoning_content`` with empty
``content`` and finish ``stop``, a reasoning-parser routing fault), ``tokenize_count``
(a number: ``/tokenize`` always answers this count -- a lying tokenizer; ``"Infinity"``
sends the JSON token ``Infinity``), ``tokenize_scale`` (``/tokenize`` counts times this
factor -- a tokenizer that disagrees with ``usage``), ``transient`` (a list of HTTP statuses answered, one
per chat request, before serving normally, with ``Retry-After: retry_after_s``), and
``script`` (true: ``POST /_script`` with ``{"chat": [raw body, ...], "status": 200,
"tokenize": raw body}`` makes the next chat replies those raw bodies -- any bytes,
valid JSON or not -- for property tests of odd reply shapes); ``raw_reply`` (a string:
every chat request is answered 200 with exactly these bytes, like a server whose replies
have an unexpected shape); ``dribble`` (a list of paths, e.g. ``["/tokenize"]`` or
``["/v1/models"]``: their replies send the headers, then one body byte every ``dribble_s``
seconds -- a stalled server that a per-read timeout never cuts off, issue 13).

Oracles beyond the classifier (issue 18, :mod:`bisectbot.demo.oracles`): ``grounded``
(summaries quote the document), ``subtle`` (above ``threshold`` fluent replies built
from the wrong part of the prompt, and shifted ``prompt_logprobs``), ``numerics`` (a
build's numeric identity: small prompt-logprob noise between builds),
``decode_broken_after`` (numbers generated after that many tokens are off by one), and
the ``prompt_logprobs`` request field.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import oracles

TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
MESSAGE_OVERHEAD = 3
NEEDLE_RE = re.compile(r"\b[A-Z]{3,12}-\d{3,6}\b")
DEFAULTS: dict[str, Any] = {
    "threshold": 20000,
    "flaky": 0.0,
    "seed": 0,
    "reasoning": False,
    "model": "bisectbot/demo-engine",
    "max_model_len": 131072,
    "broken": False,
    "crash_above": None,
    "garbage_kinds": None,
    "delay_s": 0.0,
    "answer": None,
    "tokenize_endpoint": True,
    "report_max_model_len": True,
    "error_above": None,
    "terse": 0.0,
    "misroute": False,
    "tokenize_count": None,
    "tokenize_scale": None,
    "transient": None,
    "retry_after_s": None,
    "script": False,
    "raw_reply": None,
    "dribble": None,
    "dribble_s": 1.5,
    # issue 18 (bisectbot.demo.oracles): reference comparison and decode control
    "grounded": False,
    "subtle": False,
    "numerics": None,
    "decode_broken_after": None,
    # issue 37: odd-but-real servers whose faults are not corruption
    "truncate_to": None,
    "sampling_defaults": None,
    "reject_fields": None,
    "think_in_content": None,
    "band_to": None,
    "cut_sizes": None,
    "tail_logprobs": None,
    "stream_corrupt": False,
    "stream_fault": None,
    "stream_stall_s": 30.0,
    "prefix_cache": False,
    "ignore_cache_salt": False,
}
#: Tokens per prefix-cache block (vLLM's default block size); only whole blocks are cached.
PREFIX_BLOCK = 16
GARBAGE_KINDS = ("flood", "loop", "digits", "salad", "fffd", "control", "empty", "identifiers",
                 "wrong-needle", "reasoning-loop", "template-leak")
#: Chat-template fragments a mismatched template or tokenizer leaks into replies.
TEMPLATE_FRAGMENTS = ("<start_of_turn>user", "<end_of_turn>", "[/INST]", "<|im_end|>", "<|im_start|>assistant",
                      "<|eot_id|>")

_WORDS = ("system kernel tensor cache value block layer token matrix stream vector buffer index "
          "signal module cluster gradient sample weight result batch queue window packet driver").split()
_CJK = "的是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领深近"  # noqa: E501
_FOREIGN = "的是了в и на 는 을 의 ال في"


def tokenize(text: str) -> list[str]:
    """Split ``text`` into tokens: runs of word characters and single punctuation marks."""
    return TOKEN_RE.findall(text)


def token_ids(text: str) -> list[int]:
    """Stable integer ids (CRC-32 of each token modulo 100000)."""
    return [zlib.crc32(t.encode()) % 100000 for t in tokenize(text)]


def message_text(content: Any) -> str:
    """The text of a chat message ``content`` (a string or a list of ``{"type": "text"}`` parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def chat_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Prompt tokens of a chat request: role + content tokens + overhead per message, +1."""
    n = 1
    for m in messages:
        n += len(tokenize(str(m.get("role", "")))) + len(tokenize(message_text(m.get("content")))) + MESSAGE_OVERHEAD
    return n


def _truncate(text: str, max_tokens: int) -> tuple[str, int, bool]:
    """Cut ``text`` after ``max_tokens`` tokens; returns (text, tokens, was_cut)."""
    count = 0
    for m in TOKEN_RE.finditer(text):
        count += 1
        if count == max_tokens:
            cut = text[: m.end()]
            return cut, count, m.end() < len(text.rstrip())
    return text, count, False


_THOUGHTS = ("Let me read the question again and check which part of the document it refers to.",
             "The document lists many functions, so I should scan each section before answering.",
             "I will note every access code I find and keep the order in which they appear.",
             "Before writing the answer I want to be sure nothing later in the text changes it.")


def _thinking(prompt_tokens: int, tags: bool) -> str:
    """Fluent thinking of 60 tokens (:func:`tokenize`) per 1,000 prompt tokens, in ``<think>`` tags or bare."""
    want = prompt_tokens * 60 // 1000
    out: list[str] = []
    n = 0
    while n < want:
        s = _THOUGHTS[len(out) % len(_THOUGHTS)] + f" Step {len(out) + 1} done."
        out.append(s)
        n += len(tokenize(s))
    body = " ".join(out)
    return f"<think>\n{body}\n</think>\n\n" if tags else f"{body}\n\n"


#: Neutral values of the penalties (:func:`_penalised`).
_NEUTRAL = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}


def _penalised(body: dict[str, Any], defaults: dict[str, Any]) -> bool:
    """True when the effective penalties of a request (its own fields, else the server's
    ``defaults``) are not all neutral."""
    for name, neutral in _NEUTRAL.items():
        value = body.get(name, defaults.get(name, neutral))
        try:
            if float(value) != neutral:
                return True
        except (TypeError, ValueError):
            return True
    return False


def _drop_front(messages: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``messages`` without their first ``n`` content tokens (:func:`tokenize`), as a server that
    keeps the end of an over-long prompt does; a message emptied entirely keeps its role."""
    out = []
    for m in messages:
        text = message_text(m.get("content"))
        if n > 0:
            toks = list(TOKEN_RE.finditer(text))
            if len(toks) <= n:
                n -= len(toks)
                text = ""
            else:
                text = text[toks[n].start():]
                n = 0
        out.append({**m, "content": text})
    return out


def prompt_token_list(messages: list[dict[str, Any]]) -> list[str]:
    """The prompt's tokens in order (each message's role, then its content; :func:`tokenize`): what
    the prefix cache keys its blocks by."""
    out: list[str] = []
    for m in messages:
        out += tokenize(str(m.get("role", ""))) + tokenize(message_text(m.get("content")))
    return out


def stream_pieces(text: str) -> list[str]:
    """``text`` cut into the deltas of a stream: one word with the whitespace before it each."""
    return re.findall(r"\s*\S+|\s+$", text)


def corrupt_pieces(pieces: list[str]) -> list[str]:
    """Deltas as a faulty delta emission sends them: every third delta loses its last two characters
    (characters held back at a boundary and never sent): ``The access codes are`` -> ``Thaccess codes ar``."""
    return [p[:-2] if i % 3 == 1 and len(p.strip()) > 1 else p for i, p in enumerate(pieces)]


class Engine:
    """The model: decides the reply for one chat request. Thread-safe request counting."""

    def __init__(self, settings: dict[str, Any]):
        self.s = settings
        self.lock = threading.Lock()
        self.chat_requests = 0
        self.tokenize_requests = 0
        self.prompt_tokens: list[int] = []
        self.transient_left = list(settings.get("transient") or [])
        self.script_chat: list[str] = []
        self.script_status = 200
        self.script_tokenize: str | None = None
        self.cache_blocks: set[int] = set()
        self.cache_queries = 0
        self.cache_hits = 0

    # ------------------------------------------------------------------ answers
    def terse_answer(self, messages: list[dict[str, Any]]) -> str:
        """The shortest correct reply: the arithmetic result alone (``4``), plus the needle codes."""
        user = message_text(messages[-1].get("content")) if messages else ""
        every = " ".join(message_text(m.get("content")) for m in messages)
        needles = list(dict.fromkeys(NEEDLE_RE.findall(every)))
        m = re.search(r"(\d+)\s*([-+*x×])\s*(\d+)", user)
        if self.s.get("answer"):
            head = str(self.s["answer"])
        elif m:
            a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
            head = str(a + b if op == "+" else a - b if op == "-" else a * b)
        else:
            head = "Yes."
        return head + (" " + ", ".join(needles) if needles else "")

    def coherent(self, messages: list[dict[str, Any]]) -> tuple[str, str]:
        """(reasoning, content) of a correct answer: the arithmetic asked and the needles."""
        user = message_text(messages[-1].get("content")) if messages else ""
        every = " ".join(message_text(m.get("content")) for m in messages)
        needles = list(dict.fromkeys(NEEDLE_RE.findall(every)))
        parts: list[str] = []
        if self.s.get("answer"):
            parts.append(str(self.s["answer"]))
        else:
            m = re.search(r"(\d+)\s*([-+*x×])\s*(\d+)", user)
            if m:
                a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
                val = a + b if op == "+" else a - b if op == "-" else a * b
                parts.append(f"{a} {op} {b} equals {val}, so the answer is {val}.")
            else:
                parts.append("I read the whole document carefully and can answer the question.")
        if needles:
            listed = "; ".join(f"code {i + 1}: {c}" for i, c in enumerate(needles))
            parts.append(f"The access codes written in the document are, in order, {listed}.")
        parts.append("The document itself is a long list of function descriptions with their "
                     "parameters and return values, and nothing in it changes this result.")
        reasoning = ""
        if self.s.get("reasoning"):
            reasoning = ("The user wants a short answer. First I check the question, then I scan the "
                         "document for the access codes it mentions and copy them exactly. "
                         f"I found {len(needles)} codes. Now I write the final answer.")
        return reasoning, " ".join(parts)

    def garbage(self, messages: list[dict[str, Any]], rng: random.Random, max_tokens: int) -> tuple[str, str]:
        """(reasoning, content) of a corrupted reply of a kind chosen by ``rng``."""
        every = " ".join(message_text(m.get("content")) for m in messages)
        has_needles = bool(NEEDLE_RE.search(every))
        kinds = list(self.s.get("garbage_kinds") or GARBAGE_KINDS)
        if not has_needles and "wrong-needle" in kinds and len(kinds) > 1:
            kinds.remove("wrong-needle")
        if not self.s.get("reasoning") and "reasoning-loop" in kinds and len(kinds) > 1:
            kinds.remove("reasoning-loop")
        kind = rng.choice(kinds)
        n = max(8, min(max_tokens, 600))
        reasoning = ""
        if kind == "flood":
            content = rng.choice("!,.?#") * n
        elif kind == "loop":
            word = rng.choice(["the", "of", "and", "token", "model"])
            content = " ".join([word] * n)
        elif kind == "digits":
            _, good = self.coherent(messages)
            head = " ".join(good.split()[:8])
            d = rng.choice("0123456789")
            content = head + " " + (d * 3 + " ") * (n // 2)
        elif kind == "salad":
            words = _WORDS + ["quantum", "yesterday", "purple", "invoice", "river", "seventeen"]
            out = []
            for i in range(n // 2):
                out.append(rng.choice(words))
                if i % 7 == 3:
                    out.append(rng.choice(_CJK))
            content = " ".join(out)
        elif kind == "fffd":
            content = "".join(rng.choice(["\ufffd", "\ufffd\ufffd", "a", "e", " ", "Ã", "¤"]) for _ in range(n))
        elif kind == "control":
            content = "".join(chr(rng.choice([rng.randrange(1, 31), rng.randrange(33, 126)])) for _ in range(n))
        elif kind == "empty":
            content = ""
        elif kind == "identifiers":
            foreign = _FOREIGN.split()
            lines = ["```python"]
            for i in range(12):
                lines.append(f"    value_{rng.choice(foreign)}{i} = self.field{rng.choice(foreign)}_{i}")
            lines.append("```")
            content = "\n".join(lines)
        elif kind == "wrong-needle":
            reasoning, content = self.coherent(messages)
            codes = NEEDLE_RE.findall(content)
            if codes:
                code = codes[0]
                last = code[-1]
                wrong = code[:-1] + str((int(last) + 1) % 10)
                content = content.replace(code, wrong)
        elif kind == "template-leak":
            reasoning, good = self.coherent(messages)
            a, b = rng.sample(TEMPLATE_FRAGMENTS, 2)
            content = f"{self.terse_answer(messages)}{a}\n{b}\n{good}"  # the leak early: short max_tokens see it
        else:  # reasoning-loop
            reasoning = " ".join(["the"] * max_tokens)
            content = ""
        return reasoning, content

    # ------------------------------------------------------------------ prefix cache
    def cache_lookup(self, messages: list[dict[str, Any]], salt: Any) -> int:
        """Prompt tokens of ``messages`` served from the prefix cache (whole :data:`PREFIX_BLOCK`-token
        blocks whose entire prefix, and ``salt`` unless ``ignore_cache_salt``, was seen before); the
        prompt's blocks are then cached and the ``/metrics`` counters advance."""
        toks = prompt_token_list(messages)
        key = hash(("salt", None if self.s.get("ignore_cache_salt") else str(salt)))
        hits, matching = 0, True
        with self.lock:
            for b in range(len(toks) // PREFIX_BLOCK):
                key = hash((key, tuple(toks[b * PREFIX_BLOCK:(b + 1) * PREFIX_BLOCK])))
                if matching and key in self.cache_blocks:
                    hits += PREFIX_BLOCK
                else:
                    matching = False
                    self.cache_blocks.add(key)
            self.cache_queries += len(toks)
            self.cache_hits += hits
        return hits

    def metrics_text(self) -> str:
        """``GET /metrics`` (Prometheus text) with vLLM's prefix-cache counters, in tokens."""
        with self.lock:
            q, h = self.cache_queries, self.cache_hits
        name = self.s["model"]
        return ("# TYPE vllm:prefix_cache_queries_total counter\n"
                f'vllm:prefix_cache_queries_total{{model_name="{name}"}} {float(q)}\n'
                "# TYPE vllm:prefix_cache_hits_total counter\n"
                f'vllm:prefix_cache_hits_total{{model_name="{name}"}} {float(h)}\n')

    # ------------------------------------------------------------------ streaming
    def stream_events(self, body: dict[str, Any], reply: dict[str, Any]) -> list[bytes]:
        """The server-sent events of ``reply`` (a chat completion :meth:`chat` made) for a streamed
        request; with ``stream_corrupt`` and a prompt of at least ``threshold`` tokens the content
        deltas are :func:`corrupt_pieces`."""
        choice = reply["choices"][0]
        msg = choice["message"]
        base = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"],
                "model": reply["model"]}

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            return f"data: {json.dumps(chunk)}\n\n".encode()

        ptoks = int(reply["usage"]["prompt_tokens"])
        thr = self.s.get("threshold")
        corrupt = bool(self.s.get("stream_corrupt")) and (thr is None or ptoks >= int(thr))
        out = [event({"role": "assistant", "content": ""})]
        for key in ("reasoning_content", "content"):
            pieces = stream_pieces(msg.get(key) or "")
            if key == "content" and corrupt:
                pieces = corrupt_pieces(pieces)
            out += [event({key: p}) for p in pieces]
        out.append(event({}, choice["finish_reason"]))
        opts = body.get("stream_options")
        if isinstance(opts, dict) and opts.get("include_usage"):
            out.append(f"data: {json.dumps({**base, 'choices': [], 'usage': reply['usage']})}\n\n".encode())
        out.append(b"data: [DONE]\n\n")
        return out

    # ------------------------------------------------------------------ chat
    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, _error("messages must be a non-empty list", "BadRequestError", 400)
        model = body.get("model") or self.s["model"]
        if model != self.s["model"]:
            return 404, _error(f"The model `{model}` does not exist.", "NotFoundError", 404)
        try:
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        except (TypeError, ValueError):
            return 400, _error("max_tokens must be an integer", "BadRequestError", 400)
        with self.lock:
            transient = self.transient_left.pop(0) if self.transient_left else None
        if transient is not None:
            return int(transient), _error("server busy, retry later", "ServiceUnavailableError", int(transient))
        for name in self.s.get("reject_fields") or []:
            if name in body:
                return 400, _error(f"Unrecognized request argument supplied: {name}", "invalid_request_error", 400)
        penalised = _penalised(body, self.s.get("sampling_defaults") or {})
        ptoks = chat_prompt_tokens(messages)
        keep = self.s.get("truncate_to")
        if keep is not None and ptoks > int(keep):
            messages = _drop_front(messages, ptoks - int(keep))
            ptoks = chat_prompt_tokens(messages)
        limit = int(self.s["max_model_len"])
        if ptoks + max_tokens > limit:
            return 400, _error(
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{ptoks + max_tokens} tokens ({ptoks} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.", "BadRequestError", 400)
        with self.lock:
            self.chat_requests += 1
            index = self.chat_requests
            self.prompt_tokens.append(ptoks)
        crash = self.s.get("crash_above")
        if crash is not None and ptoks >= int(crash):
            sys.stderr.write(f"engine: fatal: memory access fault while prefilling {ptoks} tokens\n")
            sys.stderr.flush()
            os._exit(134)
        err = self.s.get("error_above")
        if err is not None and ptoks >= int(err):
            return 500, _error("HIP out of memory. Tried to allocate 18.00 GiB", "InternalServerError", 500)
        delay = float(self.s.get("delay_s") or 0)
        if delay:
            time.sleep(delay)
        thr = self.s.get("threshold")
        bad = thr is not None and ptoks >= int(thr)
        if bad and self.s.get("band_to") is not None and ptoks >= int(self.s["band_to"]):
            bad = False  # a kernel chosen by size range: garbage only in [threshold, band_to)
        flip_rng = random.Random(f"{self.s['seed']}:flaky:{index}")
        if bad and flip_rng.random() < float(self.s.get("flaky") or 0):
            bad = False  # one-sided, like real corruption: the bug sometimes does not show
        logprobs_bad = bad
        if self.s.get("tail_logprobs"):
            bad = False  # only the prompt's tail log-probabilities show it (oracles.extra_fields)
        if self.s.get("stream_corrupt"):
            bad = logprobs_bad = False  # only the streamed deltas show it (stream_events)
        cached = self.cache_lookup(messages, body.get("cache_salt")) if self.s.get("prefix_cache") else None
        special = oracles.reply(self.s, messages, bad, message_text)
        if special is not None:
            reasoning, content = special
        elif penalised:
            rng = random.Random(f"{self.s['seed']}:penalised:{ptoks}")
            reasoning, content = "", " ".join(rng.choice(_WORDS) for _ in range(max(8, min(max_tokens, 200))))
        elif bad:
            rng = random.Random(f"{self.s['seed']}:garbage:{ptoks}:{index if self.s.get('flaky') else 0}")
            reasoning, content = self.garbage(messages, rng, max_tokens)
        elif random.Random(f"{self.s['seed']}:terse:{index}").random() < float(self.s.get("terse") or 0):
            reasoning, content = "", self.terse_answer(messages)
        else:
            reasoning, content = self.coherent(messages)
            if self.s.get("misroute"):
                reasoning, content = (reasoning + " " + content).strip(), ""
        content = oracles.finish(self.s, content)
        if self.s.get("think_in_content") and not bad and not penalised:
            content = _thinking(ptoks, self.s["think_in_content"] == "tags") + content
        r_text, r_tok, r_cut = _truncate(reasoning, max_tokens)
        finish = "stop"
        if r_cut or (reasoning and r_tok >= max_tokens):
            content, c_tok, finish = "", 0, "length"
        else:
            content, c_tok, c_cut = _truncate(content, max_tokens - r_tok)
            if c_cut:
                finish = "length"
        if any(int(a) <= ptoks < int(b) for a, b in self.s.get("cut_sizes") or []):
            r_text, r_tok, content, c_tok, finish = "", 0, "", max_tokens, "length"  # hidden thinking, cut
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if self.s.get("reasoning") or self.s.get("misroute"):
            message["reasoning_content"] = r_text
        created = int(time.time())
        extra = oracles.extra_fields(self.s, body, messages, ptoks, logprobs_bad, message_text)
        return 200, {**extra,
            "id": f"chatcmpl-{index}",
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": ptoks, "completion_tokens": r_tok + c_tok,
                      "total_tokens": ptoks + r_tok + c_tok,
                      **({} if cached is None else {"prompt_tokens_details": {"cached_tokens": cached}})},
        }

    def tokenize_body(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.tokenize_requests += 1
        if isinstance(body.get("messages"), list):
            msgs = body["messages"]
            count = chat_prompt_tokens(msgs)
            ids = token_ids(" ".join(message_text(m.get("content")) for m in msgs))
            ids = ([1] * (count - len(ids)) + ids)[:count]
        elif isinstance(body.get("prompt"), str):
            ids = token_ids(body["prompt"])
            count = len(ids)
        else:
            return 400, _error("expected 'prompt' or 'messages'", "BadRequestError", 400)
        if self.s.get("tokenize_scale") is not None:
            count = round(count * float(self.s["tokenize_scale"]))
        lie = self.s.get("tokenize_count")
        if lie is not None:
            count = float(lie) if isinstance(lie, str) else lie  # "Infinity" -> inf -> JSON Infinity
        return 200, {"count": count, "max_model_len": self.s["max_model_len"], "tokens": ids}


def _error(message: str, typ: str, code: int) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": typ, "param": None, "code": code}


def make_handler(engine: Engine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass

        def _send(self, code: int, data: Any) -> None:
            blob = data if isinstance(data, bytes) else json.dumps(data).encode()
            if self.path.split("?")[0] in (engine.s.get("dribble") or []):
                self._dribble(code, blob)
                return
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(blob)))
            if code in (429, 503) and engine.s.get("retry_after_s") is not None:
                self.send_header("Retry-After", str(engine.s["retry_after_s"]))
            self.end_headers()
            self.wfile.write(blob)

        def _dribble(self, code: int, blob: bytes) -> None:
            """Headers at once, then one byte of ``blob`` every ``dribble_s`` seconds."""
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(blob)))
            self.end_headers()
            try:
                self.wfile.flush()
                for i in range(len(blob)):
                    time.sleep(float(engine.s.get("dribble_s") or 1.5))
                    self.wfile.write(blob[i:i + 1])
                    self.wfile.flush()
            except OSError:  # the client gave up
                self.close_connection = True

        def _stream(self, events: list[bytes]) -> None:
            """Send server-sent ``events`` (no Content-Length; the connection closes after the last),
            with ``stream_fault`` applied."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            fault = engine.s.get("stream_fault")
            try:
                for i, ev in enumerate(events):
                    if fault == "stall" and i == len(events) // 2:
                        time.sleep(float(engine.s.get("stream_stall_s") or 30.0))
                        return
                    self.wfile.write(ev)
                    self.wfile.flush()
                    if fault == "flood" and i == len(events) // 2:
                        delta = json.dumps({"choices": [{"index": 0, "delta": {"content": "the stream goes on "},
                                                         "finish_reason": None}]})
                        blob = f"data: {delta}\n\n".encode() * 256
                        for _ in range(64 * 1024 * 1024 // len(blob)):  # 64 MiB at most, then give up
                            self.wfile.write(blob)
                        return
            except OSError:  # the client gave up
                return

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            path = self.path.split("?")[0]
            if path == "/health":
                self._send(200, {})
            elif path == "/v1/models":
                card = {"id": engine.s["model"], "object": "model", "owned_by": "bisectbot", "root": engine.s["model"]}
                if engine.s.get("report_max_model_len", True):
                    card["max_model_len"] = int(engine.s["max_model_len"])
                self._send(200, {"object": "list", "data": [card]})
            elif path == "/metrics" and engine.s.get("prefix_cache"):
                blob = engine.metrics_text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(blob)))
                self.end_headers()
                self.wfile.write(blob)
            elif path == "/stats":
                with engine.lock:
                    self._send(200, {"chat_requests": engine.chat_requests,
                                     "tokenize_requests": engine.tokenize_requests,
                                     "prompt_tokens": list(engine.prompt_tokens)})
            else:
                self._send(404, _error(f"no route {path}", "NotFoundError", 404))

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            path = self.path.split("?")[0]
            try:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("body is not an object")
            except (ValueError, UnicodeDecodeError) as e:
                self._send(400, _error(f"invalid JSON body: {e}", "BadRequestError", 400))
                return
            if path == "/_script" and engine.s.get("script"):
                with engine.lock:
                    engine.script_chat = [str(x) for x in body.get("chat") or []]
                    engine.script_status = int(body.get("status") or 200)
                    engine.script_tokenize = body.get("tokenize")
                self._send(200, {})
            elif path == "/v1/chat/completions":
                with engine.lock:
                    raw = engine.script_chat.pop(0) if engine.script_chat else engine.s.get("raw_reply")
                    if raw is not None:
                        engine.chat_requests += 1
                if raw is not None:
                    self._send(engine.script_status, raw.encode("utf-8", "surrogatepass"))
                else:
                    code, reply = engine.chat(body)
                    if body.get("stream") and code == 200:
                        self._stream(engine.stream_events(body, reply))
                    else:
                        self._send(code, reply)
            elif path == "/tokenize" and engine.s.get("tokenize_endpoint", True):
                if engine.script_tokenize is not None:
                    self._send(200, str(engine.script_tokenize).encode("utf-8", "surrogatepass"))
                else:
                    self._send(*engine.tokenize_body(body))
            else:
                self._send(404, _error(f"no route {path}", "NotFoundError", 404))

    return Handler


def load_settings(argv: list[str] | None = None) -> tuple[dict[str, Any], argparse.Namespace]:
    """Parse the command line and merge defaults < config file < flags."""
    p = argparse.ArgumentParser(prog="python -m bisectbot.demo.engine", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 = any free port (see --port-file)")
    p.add_argument("--port-file", help="write the real port here once listening")
    p.add_argument("--config", help="JSON file with engine settings (threshold, flaky, broken, ...)")
    p.add_argument("--threshold", type=int, default=None, help="prompt tokens from which replies are garbage")
    p.add_argument("--flaky", type=float, default=None, help="probability that a reply above the threshold comes out healthy")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--reasoning", action="store_true", default=None, help="emit reasoning_content")
    p.add_argument("--model", default=None)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--crash-above", type=int, default=None, help="die while serving a prompt this long")
    p.add_argument("--delay", type=float, default=None, dest="delay_s", help="seconds added to each reply")
    a = p.parse_args(argv)
    s = dict(DEFAULTS)
    if a.config:
        try:
            with open(a.config, encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, ValueError) as e:
            p.error(f"--config {a.config}: {e}")
        if not isinstance(cfg, dict):
            p.error(f"--config {a.config}: expected a JSON object")
        unknown = sorted(set(cfg) - set(DEFAULTS))
        if unknown:
            p.error(f"--config {a.config}: unknown setting(s): {', '.join(unknown)}")
        s.update(cfg)
    for key in ("threshold", "flaky", "seed", "reasoning", "model", "max_model_len", "crash_above", "delay_s"):
        v = getattr(a, key)
        if v is not None:
            s[key] = v
    bad = set(s.get("garbage_kinds") or ()) - set(GARBAGE_KINDS)
    if bad:
        p.error(f"unknown garbage kind(s): {', '.join(sorted(bad))}")
    return s, a


class EngineProcess:
    """A reference engine running in its own process (see :func:`start_engine`).

    ``url`` is ``http://127.0.0.1:PORT``; ``proc`` the :class:`subprocess.Popen`;
    ``log_path`` holds its stdout/stderr. Use as a context manager: the process is
    stopped (terminate, then kill after 5 s) on exit.
    """

    def __init__(self, proc: Any, port: int, log_path: str, tmpdir: Any):
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._tmpdir = tmpdir

    def get(self, path: str, timeout: float = 5.0) -> Any:
        """GET ``path`` and decode the JSON reply."""
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:  # noqa: S310 - local URL
            return json.loads(r.read())

    def stats(self) -> dict[str, Any]:
        """``GET /stats``: ``{"chat_requests", "tokenize_requests", "prompt_tokens"}``."""
        return self.get("/stats")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the engine (a crash, as seen from the client) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Terminate gracefully (kill after 5 s) and clean up the temporary directory."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired; kill below
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def __enter__(self) -> EngineProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_engine(threshold: int | None = 20000, flaky: float = 0.0, seed: int = 0, reasoning: bool = False,
                 config: str | os.PathLike[str] | None = None, extra_args: list[str] | None = None,
                 startup_timeout_s: float = 20.0, **settings: Any) -> EngineProcess:
    """Start ``python -m bisectbot.demo.engine --port 0`` and wait until ``/health`` answers.

    ``threshold`` is prompt tokens (``None`` = never garbage). Any other key of
    :data:`DEFAULTS` (``max_model_len``, ``crash_above``, ``delay_s``, ``model``,
    ``garbage_kinds``, ``broken``...) may be given as a keyword; they are written to a
    temporary JSON config, which ``config`` (a file, loaded first) cannot override.
    Raises :class:`RuntimeError` with the engine's output when it exits or does not
    become healthy within ``startup_timeout_s`` seconds.
    """
    import subprocess
    import tempfile
    import urllib.error
    import urllib.request

    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise TypeError(f"start_engine: unknown setting(s): {', '.join(unknown)}")
    tmp = tempfile.TemporaryDirectory(prefix="bisectbot-engine-")
    port_file = os.path.join(tmp.name, "port")
    log_path = os.path.join(tmp.name, "engine.log")
    argv = [sys.executable, "-m", "bisectbot.demo.engine", "--port", "0", "--port-file", port_file,
            "--flaky", str(flaky), "--seed", str(seed)]
    if config is not None:
        cfg = dict(json.loads(open(config, encoding="utf-8").read()))
    else:
        cfg = {}
    cfg["threshold"] = threshold
    cfg.update(settings)
    cfg_path = os.path.join(tmp.name, "engine.json")
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    argv += ["--config", cfg_path]
    if reasoning:
        argv.append("--reasoning")
    argv += list(extra_args or [])
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    log = open(log_path, "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()
    deadline = time.monotonic() + startup_timeout_s
    port = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = open(log_path, encoding="utf-8", errors="replace").read().strip()
            tmp.cleanup()
            raise RuntimeError(f"engine exited with code {proc.returncode} at start: {out[-500:]}")
        if port is None and os.path.exists(port_file):
            port = int(open(port_file).read().strip())
        if port is not None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        return EngineProcess(proc, port, log_path, tmp)
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=10)
    tmp.cleanup()
    raise RuntimeError(f"engine did not become healthy within {startup_timeout_s} s")


def main(argv: list[str] | None = None) -> int:
    settings, a = load_settings(argv)
    if settings.get("broken"):
        sys.stderr.write("engine: fatal: failed to initialise the model (broken build)\n")
        return 3
    engine = Engine(settings)
    server = ThreadingHTTPServer((a.host, a.port), make_handler(engine))
    server.daemon_threads = True
    port = server.server_address[1]
    if a.port_file:
        tmp = f"{a.port_file}.tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, a.port_file)
    print(f"engine: listening on http://{a.host}:{port} (threshold={settings['threshold']})", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
