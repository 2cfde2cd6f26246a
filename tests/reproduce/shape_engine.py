"""The reference engine with issue 27's reply shapes, run as its own process.

``python shape_engine.py --shape SHAPE --shape-from TOKENS [engine flags...]`` serves
:mod:`bisectbot.demo.engine` unchanged (its ``Engine``, handler and settings; the engine's own
threshold is off) except that every chat reply to a prompt of at least ``--shape-from`` prompt
tokens is rewritten into SHAPE: a correct answer (the arithmetic asked, every needle code of the
prompt) carried in one of the shapes of issue 27's public reports, with ``usage`` and
``finish_reason`` as a server producing it would send them. Below ``--shape-from`` the engine
answers correctly. :func:`start_shape_engine` starts it and waits for ``/health``.

Shapes (:data:`SHAPES`): ``sp-markers`` (SentencePiece word marks left in the text),
``bpe-markers`` (byte-level BPE space/newline marks), ``flood`` (the answer, then
``--flood`` whitespace until ``max_tokens``, ``finish_reason: length``), ``loop`` (the answer,
then a 13-token sentence repeated until ``max_tokens``), ``tail-salad`` (the answer, then 13
salad words), ``unicode-rule`` (the answer between rules of ``━``, a legitimate layout),
``cjk-loop`` (a Chinese answer, then a clause repeated without punctuation until ``max_tokens``),
``mojibake`` (the answer's UTF-8 read as Windows-1252), ``unit-loop`` (issue 37: the answer,
then ``--unit`` -- any string, its separator included or none -- repeated ``--repeats`` times;
``--cut``: finish ``length``, as at a ``max_tokens`` cut).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bisectbot.demo import engine as demo
from bisectbot.reproduce.rawtext import misdecoded

SHAPES = ("sp-markers", "bpe-markers", "flood", "loop", "tail-salad", "unicode-rule", "cjk-loop", "mojibake",
          "unit-loop")
#: 13 tokens of the engine's tokenizer (12 words and a full stop).
LOOP_SENTENCE = "I hope this answer helps you understand the codes in the document."
SALAD = "ward Officer blessed Chronicle slot Manuel pigment referral Fab gaz whilst boutique Kyle".split()
CJK_CLAUSE = "我们可以看到这个问题的答案非常简单"


def answer_text(messages: list[dict[str, Any]]) -> str:
    """The correct short answer to the engine's prompt: the arithmetic result and every needle code."""
    user = demo.message_text(messages[-1].get("content")) if messages else ""
    every = " ".join(demo.message_text(m.get("content")) for m in messages)
    needles = list(dict.fromkeys(demo.NEEDLE_RE.findall(every)))
    m = re.search(r"(\d+)\s*\+\s*(\d+)", user)
    out = f"{m.group(1)} plus {m.group(2)} equals {int(m.group(1)) + int(m.group(2))}." if m else "Yes."
    return out + (f" The codes are {' and '.join(needles)}." if needles else "")


def shaped(shape: str, messages: list[dict[str, Any]], max_tokens: int, flood: str,
           loop: tuple[str, int, bool] = ("", 0, False)) -> tuple[str, int, str]:
    """(content, completion_tokens, finish_reason) of one reply in ``shape``; ``loop`` is the
    unit-loop shape's (unit, repeats, cut)."""
    ans = answer_text(messages)
    n = len(demo.tokenize(ans))
    if shape == "unit-loop":
        unit, repeats, cut = loop
        text = ans + " " + unit * repeats
        return text, n + max(1, len(unit) * repeats // 4), "length" if cut else "stop"  # ~4 characters a token
    if shape == "sp-markers":
        return "".join("\u2581" + w for w in ans.split(" "))[1:], n, "stop"
    if shape == "bpe-markers":
        return ans.replace(". ", ".\n").replace(" ", "\u0120").replace("\n", "\u010a"), n, "stop"
    if shape == "mojibake":
        return misdecoded(ans.replace(" equals ", " equals \u2013 ").replace("codes are", "codes are \u201c")), n, "stop"
    if shape == "flood":  # one completion token per whitespace unit, as a BPE server counts a newline
        return ans + flood * max(0, max_tokens - n), max_tokens, "length"
    if shape == "tail-salad":
        return ans + " " + " ".join(SALAD), n + len(SALAD), "stop"
    if shape == "unicode-rule":
        rule = "\u2501" * 32
        return f"{rule}\n{ans}\n{rule}", n + 2, "stop"
    if shape == "cjk-loop":
        head = "2加2等于4。" + "".join(f"第{i + 1}个访问码是{c}。" for i, c in
                                       enumerate(demo.NEEDLE_RE.findall(" ".join(
                                           demo.message_text(m.get("content")) for m in messages))))
        text = head + CJK_CLAUSE * max_tokens  # one completion token per character, cut at max_tokens
        return text[:max(max_tokens, len(head))], max_tokens, "length"
    if shape == "loop":
        text, count, _ = demo._truncate(ans + (" " + LOOP_SENTENCE) * (max_tokens // 13 + 2), max_tokens)
        return text, count, "length"
    raise ValueError(f"unknown shape {shape!r}")


class ShapeEngine(demo.Engine):
    """The demo engine; replies to prompts of at least ``shape_from`` tokens come out in ``shape``."""

    def __init__(self, settings: dict[str, Any], shape: str, shape_from: int, flood: str,
                 loop: tuple[str, int, bool] = ("", 0, False)):
        super().__init__(settings)
        self.shape, self.shape_from, self.flood, self.loop = shape, shape_from, flood, loop

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        code, reply = super().chat(body)
        usage = reply.get("usage") if code == 200 else None
        if not usage or usage["prompt_tokens"] < self.shape_from:
            return code, reply
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        content, ntok, finish = shaped(self.shape, body["messages"], max_tokens, self.flood, self.loop)
        choice = reply["choices"][0]
        choice["message"]["content"], choice["finish_reason"] = content, finish
        usage.update(completion_tokens=ntok, total_tokens=usage["prompt_tokens"] + ntok)
        return code, reply


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--shape", choices=SHAPES, required=True)
    p.add_argument("--shape-from", type=int, required=True, help="prompt tokens from which replies are shaped")
    p.add_argument("--flood", default='"\\n"', help="the whitespace unit of the flood shape (a JSON string)")
    p.add_argument("--unit", default='""', help="the unit-loop shape's unit (a JSON string)")
    p.add_argument("--repeats", type=int, default=0, help="the unit-loop shape's repeats")
    p.add_argument("--cut", action="store_true", help="the unit-loop shape ends with finish_reason length")
    a, rest = p.parse_known_args(argv)
    settings, args = demo.load_settings(rest)
    settings["threshold"] = None  # the engine's own garbage is off: only the shape is under test
    engine = ShapeEngine(settings, a.shape, a.shape_from, json.loads(a.flood),
                         (json.loads(a.unit), a.repeats, a.cut))
    server = ThreadingHTTPServer((args.host, args.port), demo.make_handler(engine))
    server.daemon_threads = True
    if args.port_file:
        Path(args.port_file + ".tmp").write_text(str(server.server_address[1]))
        os.replace(args.port_file + ".tmp", args.port_file)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


def start_shape_engine(shape: str, shape_from: int, flood: str = "\n", timeout_s: float = 20.0, unit: str = "",
                       repeats: int = 0, cut: bool = False) -> demo.EngineProcess:
    """Start this module in its own process on a free port; returns the engine's
    :class:`~bisectbot.demo.engine.EngineProcess` once ``/health`` answers (``RuntimeError`` with
    its output otherwise). ``shape_from`` is prompt tokens; ``flood`` the flood shape's unit."""
    tmp = tempfile.TemporaryDirectory(prefix="bisectbot-shape-engine-")
    port_file, log_path = os.path.join(tmp.name, "port"), os.path.join(tmp.name, "engine.log")
    argv = [sys.executable, os.path.abspath(__file__), "--shape", shape, "--shape-from", str(shape_from),
            "--flood", json.dumps(flood), "--unit", json.dumps(unit), "--repeats", str(repeats),
            "--port", "0", "--port-file", port_file] + (["--cut"] if cut else [])
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(port_file):
            e = demo.EngineProcess(proc, int(Path(port_file).read_text()), log_path, tmp)
            try:
                with urllib.request.urlopen(e.url + "/health", timeout=2):  # noqa: S310 - local URL
                    return e
            except OSError:
                pass
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=10)
    out = Path(log_path).read_text(errors="replace")[-500:]
    tmp.cleanup()
    raise RuntimeError(f"shape engine did not come up: {out}")


if __name__ == "__main__":
    sys.exit(main())
