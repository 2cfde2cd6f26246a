"""Regenerate the labelled classifier corpus (one JSON file per case) in this directory.

Run: ``python tests/data/outputs/make_corpus.py``. Cases are written by hand below
(texts modelled on outputs seen in public vLLM/ROCm garbage reports, see
shared/design/DOMAIN.md, and on legitimate outputs that naive checks flag); a few
long texts are expanded programmatically with a fixed seed. Fields of a case:

* ``id``, ``label`` (``garbage`` | ``ok``), ``kind`` (what the case is about), ``note``
* ``content``, ``reasoning``, ``finish_reason``, ``completion_tokens`` (``null`` = count words)
* ``asked``: ``question``, ``expected_answer`` (or null), ``needles`` (codes embedded in the
  prompt), ``max_tokens``, ``min_reply_tokens`` (how long an answer was asked for)
* ``outcome`` (optional): the exact expected outcome when it is not simply OK/GARBAGE
  (``INCONCLUSIVE`` for a thinking model cut inside its reasoning; label stays ``ok``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from bisectbot.reproduce.rawtext import misdecoded

HERE = Path(__file__).parent
R = random.Random(20261130)
Q4 = "What is 2+2? Answer in one sentence."
NEEDLES = ["KESTREL-4417", "OSPREY-2093", "HERON-7781"]
QN = Q4 + " Also list the access codes of vaults 1 to 3 that the document mentions, exactly as written."
CASES: list[dict] = []


def case(id_, label, kind, content, reasoning="", finish="stop", question=Q4, expected="4", needles=None,
         min_reply=3, max_tokens=1000, completion_tokens=None, outcome=None, note=""):
    CASES.append({
        "id": id_, "label": label, "kind": kind, "note": note, "content": content, "reasoning": reasoning,
        "finish_reason": finish, "completion_tokens": completion_tokens,
        "asked": {"question": question, "expected_answer": expected, "needles": needles or [],
                  "max_tokens": max_tokens, "min_reply_tokens": min_reply},
        **({"outcome": outcome} if outcome else {}),
    })


GOOD4 = "2 + 2 equals 4."
ESSAY_SENTENCES = [
    "Suspension bridges carry their deck on vertical hangers that hang from two main cables.",
    "The cables pass over tall towers and are anchored in massive blocks of concrete at each end.",
    "Engineers in the nineteenth century learned that wind can twist a light deck until it fails.",
    "After the Tacoma Narrows collapse in 1940, designers began to test deck sections in wind tunnels.",
    "A stiffening truss or an aerodynamic box girder keeps the deck from oscillating.",
    "Cable-stayed bridges instead connect the deck directly to the towers with straight stays.",
    "They need less anchorage and are often cheaper for spans between two hundred and nine hundred metres.",
    "Arch bridges push outward on their abutments, so they suit rocky valleys with firm ground.",
    "Romans built stone arches that still stand because every block is held in compression.",
    "Modern steel arches can span more than five hundred metres, as in Chongqing.",
    "Beam bridges are the simplest form: a girder resting on piers, common on highways.",
    "Prestressed concrete lets a beam carry more load by squeezing it before traffic arrives.",
    "Maintenance matters as much as design; corrosion of cables is a slow and hidden threat.",
    "Inspectors now use drones and acoustic sensors to listen for wires snapping inside a cable.",
    "Expansion joints let the deck grow and shrink with temperature without cracking.",
    "Foundations in rivers are built inside caissons, watertight boxes sunk to the bed.",
    "Workers in early caissons suffered decompression sickness, then called caisson disease.",
    "The Brooklyn Bridge, opened in 1883, combined a suspension design with diagonal stays.",
    "Its chief engineer directed the work from a window after the illness left him bedridden.",
    "Today the longest suspension span is in Turkey, crossing the Dardanelles strait.",
    "Seismic design adds dampers and sliding bearings so a bridge can move during an earthquake.",
    "Pedestrian bridges are light and can sway when many people walk in step.",
    "London's Millennium Bridge had to be fitted with dampers for exactly that reason.",
    "Choosing a bridge type is a trade-off between span, ground conditions, cost and appearance.",
    "Good engineering hides most of this effort, so travellers rarely think about what holds them up.",
]

# ------------------------------------------------------------------ garbage
case("g01-control-soup", "garbage", "control-soup",
     "AFC} 8\x10PU\x10}\x07\x1b[ 7\x02q\x03\x10\x10PU}\x1c;\x0e\x0f<\x01\x02\x03 z\x10A}\x19 "
     "\x1aFC}\x108^\x10\x13\x14PU\x10\x15", note="control characters from a corrupted decode")
case("g02-control-soup-long", "garbage", "control-soup",
     "".join(chr(R.choice([R.randrange(1, 31), R.randrange(33, 126)])) for _ in range(400)))
case("g03-control-after-answer", "garbage", "control-soup",
     "2 + 2 equals 4. " + "".join(chr(R.randrange(1, 31)) + R.choice("abcdef{}[]") for _ in range(80)),
     note="on-topic start, then control characters")
case("g04-one-token-the", "garbage", "word-loop", " ".join(["the"] * 800), finish="length")
case("g05-one-token-model", "garbage", "word-loop", "Sure! " + " ".join(["model"] * 300))
case("g06-phrase-loop", "garbage", "word-loop", "I think " * 250, finish="length")
case("g07-sentence-loop", "garbage", "word-loop", "The answer is 4. " * 120, finish="length",
     note="contains the expected answer; repetition of a whole sentence")
case("g08-bang-short", "garbage", "flood", "!!!!!!", note="Qwen3.5 on ROCm answered only !!!!!!")
case("g09-bang-long", "garbage", "flood", "!" * 1000, finish="length")
case("g10-comma-flood", "garbage", "flood", ",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,")
case("g11-question-flood", "garbage", "flood", "2+2= ?????????????????????????????????????????????????????")
case("g12-mixed-script", "garbage", "mixed-script",
     "the кон 的 ص value λ z ש answer 는 of ф 路 Ω data ب 了 ж tokens ம a ש 和 λ")
case("g13-mixed-script-long", "garbage", "mixed-script",
     " ".join(R.choice(["model", "layer", "the", "result", "value", "stream", "answer"]) + " "
              + R.choice("的了是는을의вижфΩλשصب") for _ in range(80)))
case("g14-reasoning-loop-empty-content", "garbage", "reasoning-garbage", "",
     reasoning="Okay, the user asks 2+2. " + "the " * 1000, finish="length", completion_tokens=1000,
     note="content empty; garbage inside the reasoning stream, cut by max_tokens")
case("g15-reasoning-salad", "garbage", "reasoning-garbage", "",
     reasoning=" ".join(R.choice(["quantum", "invoice", "river", "的", "seventeen", "purple", "는", "ledger",
                                  "tensor", "yesterday", "compile", "ocean"]) for _ in range(300)),
     finish="length", completion_tokens=300)
case("g16-reasoning-flood-content-ok", "garbage", "reasoning-garbage", GOOD4,
     reasoning="Let me compute. " + "." * 600, note="answer fine, reasoning collapsed into punctuation")
case("g17-salad-naive-ok", "garbage", "word-salad",
     "Quantum invoice river seventeen purple ledger compiles yesterday ocean tensor banana "
     "orchestra velvet hinge northward saddle pepper kernel lantern mosaic thunder walnut copper "
     "gravel sonnet harbor pixel marble juniper cascade", note="high unique ratio, no answer")
case("g18-salad-cjk", "garbage", "word-salad",
     "River 的 quantum invoice seventeen purple 路 ledger compiles yesterday 는 ocean tensor banana "
     "orchestra velvet 了 hinge northward saddle pepper kernel lantern mosaic thunder walnut copper")
case("g19-salad-with-4", "garbage", "word-salad",
     "4 quantum 的 invoice river 了 seventeen purple 는 ledger compiles yesterday 路 ocean tensor banana "
     "orchestra velvet hinge 和 northward saddle", note="the expected answer appears by chance")
case("g20-salad-needles", "garbage", "word-salad",
     "2 + 2 = 4. Vault codes: quantum invoice river seventeen purple ledger compiles yesterday ocean "
     "tensor banana orchestra velvet hinge.", question=QN, needles=NEEDLES)
case("g21-fffd", "garbage", "fffd-noise",
     "".join(R.choice(["\ufffd", "\ufffd\ufffd", "a", "e", " ", "Ã", "¤"]) for _ in range(300)))
case("g22-fffd-after-answer", "garbage", "fffd-noise",
     "The answer is 4 \ufffd\ufffd\ufffd \ufffd\ufffd x\ufffd\ufffd\ufffd\ufffd \ufffd \ufffd\ufffd\ufffd\ufffd\ufffd"
     " \ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd")
case("g23-digit-chain", "garbage", "digit-collapse",
     "2 + 2 equals 4, because adding two and two gives 2026202620262026202620262026202620262026202620262026"
     "20262026202620262026", finish="length")
case("g24-digit-loop", "garbage", "digit-collapse",
     "Adding the two numbers, the result is 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 "
     "4 4 4 4 4 4 4 4 4 4 4 4", finish="length")
case("g25-random-digits", "garbage", "digit-collapse",
     "Sure, 2 + 2 = 4, and then " + " ".join(R.choice("0123456789") for _ in range(120)), finish="length")
case("g26-identifiers", "garbage", "foreign-identifiers",
     "```python\nclass Config:\n    def __init__(self, other):\n        self.value_는0 = other.value_는0\n"
     "        self.fieldв_1 = other.fieldв_1\n        self.name的x = other.name的x\n"
     "        self.size = other.size\n```\nThe answer is 4.", note="foreign letters inside identifiers")
case("g27-identifiers-rust", "garbage", "foreign-identifiers",
     "The answer is 4.\n```rust\nlet totalسum = a + b;\nlet count_의 = 2;\nfn get用户Name() -> String {}\n```")
case("g28-empty", "garbage", "empty", "", note="nothing at all")
case("g29-empty-length", "garbage", "empty", "   ", finish="stop", completion_tokens=1)
case("g30-wrong-needle", "garbage", "fluent-but-wrong",
     "2 + 2 equals 4. The access codes are: vault 1: KESTREL-4418, vault 2: OSPREY-2093, vault 3: HERON-7781.",
     question=QN, needles=NEEDLES, note="one digit off; only needle retrieval catches it")
case("g31-wrong-needle-2", "garbage", "fluent-but-wrong",
     "The sum is 4.\n\n1. KESTREL-4417\n2. OSPREY-2039\n3. HERON-7781", question=QN, needles=NEEDLES)
case("g32-short-salad", "garbage", "too-short",
     "Sure banana quantum ledger river invoice seventeen purple yesterday ocean compile velvet",
     question="Summarise the document in at least 300 words.", expected=None, min_reply=100,
     note="12-token word salad the classic rule calls OK")
case("g33-short-reply-long-ask", "garbage", "too-short", "The the",
     question="Summarise the document in at least 300 words.", expected=None, min_reply=100)
case("g34-wrong-answer", "garbage", "fluent-but-wrong", "2 + 2 equals 5.")
case("g35-reasoning-loop-content-ok", "garbage", "reasoning-garbage", "The answer is 4.",
     reasoning="Wait, " * 400, note="answer right, reasoning is a loop")
case("g36-collapse-punct", "garbage", "mid-stream-collapse",
     "The document lists many functions and their parameters. 2 + 2 equals 4. In summary the "
     + ". . . , , , . . . , , , " * 30, finish="length")
case("g37-mixed-script-no-answer", "garbage", "mixed-script",
     "Ð½Ðµ Ð¿ Ñ€Ð¸ the Ð²ÐµÑ‚ model 的 of 는 тест 了 ש Ω λ")

# ------------------------------------------------------------------ legitimate
fields = ["id", "name", "email", "created_at", "updated_at", "owner", "status", "priority", "labels",
          "assignee", "milestone", "body", "title", "comments", "reactions", "locked", "url", "html_url",
          "node_id", "state_reason"]
case("k01-rust-clone-fields", "ok", "repetitive-code",
     "The answer is 4. Here is the Clone impl you asked for:\n```rust\nimpl Clone for Issue {\n    fn clone(&self) "
     "-> Self {\n        Self {\n" + "".join(f"            {f}: self.{f}.clone(),\n" for f in fields)
     + "        }\n    }\n}\n```")
case("k02-python-copy-fields", "ok", "repetitive-code",
     "2 + 2 is 4. The copy method:\n```python\ndef copy_from(self, other):\n"
     + "".join(f"    self.{f} = other.{f}\n" for f in fields) + "```")
case("k03-numbers-1-200", "ok", "numeric-list", "Numbers 1 to 200: " + ", ".join(str(i) for i in range(1, 201)),
     question="List the integers from 1 to 200.", expected="200", max_tokens=2000)
case("k04-primes", "ok", "numeric-list", "The primes below 500 are: " + ", ".join(
    str(p) for p in range(2, 500) if all(p % d for d in range(2, int(p ** 0.5) + 1))) + ".",
     question="List the primes below 500.", expected="499")
case("k05-csv", "ok", "csv", "date,region,requests,errors\n" + "\n".join(
    f"2026-11-{d:02d},{r},{R.randrange(1000, 9999)},{R.randrange(0, 9)}" for d in range(1, 31) for r in ("eu", "us")),
     question="Export the table as CSV.", expected=None, min_reply=50)
case("k06-markdown-table-yesno", "ok", "markdown-table",
     "| Feature | MI300X | MI355X |\n|---|---|---|\n" + "\n".join(
         f"| {name} | {R.choice(['yes', 'no'])} | {R.choice(['yes', 'no'])} |" for name in
         ["fp8 kv cache", "sparse MLA", "aiter paged attention", "block size 1", "chunked prefill", "tp 8",
          "eager mode", "cuda graphs", "triton mqa logits", "gluon kernels", "rope scaling", "speculative decode",
          "prefix caching", "lora", "structured output", "tool calls", "reasoning parser", "fp4 weights"]),
     question="Which features work on each GPU? Answer as a table.", expected=None, min_reply=20)
case("k07-markdown-table-numbers", "ok", "markdown-table",
     "2 + 2 = 4. Throughput by prompt size:\n\n| prompt tokens | tok/s | ok |\n| ---: | ---: | :-: |\n" + "\n".join(
         f"| {n} | {R.randrange(100, 999)} | ✅ |" for n in range(2000, 40001, 2000)))
case("k08-enumeration", "ok", "enumeration", "Here are the steps:\n" + "\n".join(
    f"{i}. {s}" for i, s in enumerate(["Pull the image by digest.", "Start the server with --block-size 1.",
                                       "Wait for /health.", "Send the 20K-token prompt.", "Check the reply.",
                                       "Repeat at 40K tokens.", "Record the threshold.", "Stop the server."], 1)),
     question="List the steps to reproduce.", expected=None, min_reply=20)
case("k09-needle-list", "ok", "needle-list", "2 + 2 = 4.\n\n1. KESTREL-4417\n2. OSPREY-2093\n3. HERON-7781",
     question=QN, needles=NEEDLES)
case("k10-needle-sentence", "ok", "needle-list",
     "Two plus two is four. The vault codes, in order, are KESTREL-4417, OSPREY-2093 and HERON-7781.",
     question=QN, needles=NEEDLES, note="number word instead of digit")
case("k11-json-repeated-keys", "ok", "json", "```json\n" + json.dumps(
    [{"id": i, "status": "ok", "retries": 0, "region": "eu"} for i in range(1, 31)], indent=2) + "\n```",
     question="Return the job list as JSON.", expected=None, min_reply=50)
case("k12-paris", "ok", "short-answer", "Paris", question="What is the capital of France? One word.",
     expected="Paris", min_reply=1, completion_tokens=1)
case("k13-12-apples", "ok", "short-answer", "12 apples",
     question="Tom has 7 apples and buys 5 more. How many apples? Answer briefly.", expected="12",
     min_reply=1, completion_tokens=2)
case("k14-just-4", "ok", "short-answer", "4", min_reply=1, completion_tokens=1)
case("k15-one-sentence", "ok", "short-answer", "2 + 2 equals 4.")
case("k16-french", "ok", "non-english", "2 + 2 font 4. C'est une addition très simple.")
case("k17-german", "ok", "non-english", "Die Summe von 2 und 2 ist 4.")
case("k18-chinese", "ok", "non-english", "2加2等于4。这是一个简单的加法问题，答案是4。")
case("k19-japanese", "ok", "non-english", "2たす2は4です。とても簡単な足し算ですね。")
case("k20-russian", "ok", "non-english", "Два плюс два равно 4. Это простое сложение.")
case("k21-korean", "ok", "non-english", "2 더하기 2는 4입니다.")
case("k22-chinese-with-english-terms", "ok", "non-english",
     "答案是4。在Python的list中，你可以用sum函数来计算，例如 sum([2, 2]) 返回 4。使用GPU时也一样。")
case("k23-arabic", "ok", "non-english", "مجموع 2 و 2 هو 4.")
case("k24-essay", "ok", "essay", " ".join(ESSAY_SENTENCES),
     question="Write an essay about bridges.", expected=None, min_reply=200)
es = list(ESSAY_SENTENCES)
R.shuffle(es)
case("k25-essay-long", "ok", "essay", "\n\n".join(" ".join(es[i:i + 5]) for i in range(0, len(es), 5)),
     question="Write an essay about bridges.", expected=None, min_reply=200)
case("k26-thinking-cut", "ok", "thinking-cut", "",
     reasoning="The user asks what 2+2 is. That is basic arithmetic: two plus two. Let me double-check by "
               "counting: one, two, then three, four. So the sum is four. The user also wants one sentence, "
               "so I should answer briefly and clearly. Let me also consider whether they mean string",
     finish="length", completion_tokens=64, max_tokens=64, outcome="INCONCLUSIVE",
     note="max_tokens ended inside the reasoning: not OK, not GARBAGE")
case("k27-thinking-cut-needles", "ok", "thinking-cut", "",
     reasoning="I need to find the vault codes in the document. The first one appears early: KESTREL-4417. "
               "The second is in the middle of the function list, OSPREY-2093. The third one is near the end, "
               "I should scan the last part carefully before",
     finish="length", completion_tokens=60, max_tokens=60, question=QN, needles=NEEDLES, outcome="INCONCLUSIVE")
case("k28-thinking-full", "ok", "thinking", "2 + 2 = 4.",
     reasoning="Simple addition. Two plus two makes four. Answer in one sentence.")
case("k29-multilingual-greetings", "ok", "non-english",
     "2 + 2 = 4. Hello in other languages: Russian Привет, Korean 안녕하세요, Japanese こんにちは, "
     "Arabic مرحبا, Greek Γειά σου, Hebrew שלום, Chinese 你好.", note="many scripts, all legitimate")
case("k30-english-quoting-cities", "ok", "non-english",
     "The answer is 4. The largest cities are Beijing (北京), Shanghai (上海), Guangzhou (广州) and Shenzhen (深圳).")
case("k31-zero-array", "ok", "numeric-list", "2 + 2 = 4. An empty buffer: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0].")
case("k32-big-number", "ok", "numeric-list", "2^100 = 1267650600228229401496703205376, and 2 + 2 = 4.")
case("k33-pi-digits", "ok", "numeric-list", "Pi to 30 decimals is 3.141592653589793238462643383279; 2 + 2 = 4.")
case("k34-banner", "ok", "repetitive-code",
     "2 + 2 = 4.\n```python\n# " + "=" * 60 + "\n# Section: arithmetic\n# " + "=" * 60 + "\nprint(2 + 2)\n```")
case("k35-binary-table", "ok", "numeric-list", "2 + 2 = 4, in binary 0100. Counting in binary:\n" + "\n".join(
    f"{i:2d} = {i:04b}" for i in range(16)))
case("k36-sql", "ok", "repetitive-code",
     "2 + 2 is 4. The insert statements:\n```sql\n" + "\n".join(
         f"INSERT INTO runs (id, status, tokens) VALUES ({i}, 'ok', {i * 2000});" for i in range(1, 26)) + "\n```")
case("k37-yaml-config", "ok", "repetitive-code",
     "4. Here is a runner profile:\n```yaml\ndevices:\n" + "".join(f"  - /dev/dri/renderD{128 + i}\n" for i in range(8))
     + "env:\n  VLLM_ROCM_USE_AITER: '1'\n  HIP_VISIBLE_DEVICES: '0,1,2,3,4,5,6,7'\n```")
case("k38-checklist", "ok", "enumeration", "Checklist (the answer to 2+2 is 4):\n" + "\n".join(
    f"- [x] probe at {n}K tokens: OK" for n in (2, 4, 8, 16, 32)) + "\n- [ ] probe at 64K tokens")
case("k39-long-log", "ok", "log-lines", "2 + 2 = 4. Server log:\n" + "\n".join(
    f"INFO 11-30 10:{m:02d}:{s:02d} [engine.py:{R.randrange(100, 999)}] Avg prompt throughput: "
    f"{R.randrange(1000, 9000)}.{R.randrange(10)} tokens/s, Running: {R.randrange(1, 9)} reqs"
    for m in range(0, 5) for s in range(0, 60, 12)))
case("k40-four-word", "ok", "short-answer", "Four.", min_reply=1, completion_tokens=2)

# ------------------------------------------------------------------ second batch (added before re-tuning)
case("g38-digit-token-flood", "garbage", "flood", "4444444444444444444444444444444444444444444444444444",
     note="one long token of the answer digit")
case("g39-cjk-char-loop", "garbage", "word-loop", "答案是" + "的" * 300, finish="length")
case("g40-line-loop", "garbage", "word-loop", "Answer:\n" * 200, finish="length")
case("g41-hex-noise", "garbage", "control-soup", " ".join("0x00" if R.random() < 0.7 else f"0x{R.randrange(256):02x}"
                                                          for _ in range(300)), finish="length")
case("g42-switch-to-loop", "garbage", "mid-stream-collapse",
     " ".join(ESSAY_SENTENCES[:6]) + " " + "и " * 200, question="Write an essay about bridges.", expected=None,
     min_reply=200, finish="length", note="fluent start, then a Cyrillic one-letter loop")
case("g43-russian-salad", "garbage", "word-salad",
     "Мост облако семнадцать рыба вчера компилятор синий океан тензор банан оркестр бархат петля север седло",
     note="non-English salad; the expected answer is missing")
case("g44-needles-hallucinated", "garbage", "fluent-but-wrong",
     "2 + 2 = 4. The vault codes are FALCON-1234, EAGLE-5678 and HAWK-9012.", question=QN, needles=NEEDLES,
     note="plausible codes that were never in the document")
case("g45-reasoning-fffd", "garbage", "reasoning-garbage", "",
     reasoning="".join(R.choice(["\ufffd", "\ufffd", "x", " ", "\x1b", "q"]) for _ in range(500)),
     finish="length", completion_tokens=500)
case("k41-python-function", "ok", "repetitive-code",
     "The answer is 4. A helper that sums a list:\n```python\ndef total(values: list[int]) -> int:\n"
     "    \"\"\"Return the sum of values.\"\"\"\n    result = 0\n    for value in values:\n"
     "        result += value\n    return result\n\n\nassert total([2, 2]) == 4\n```")
case("k42-markdown-doc", "ok", "essay",
     "# Reproducing the threshold\n\n2 + 2 = 4, and the reproducer checks that.\n\n## Steps\n\n"
     "- Start the server.\n- Send prompts of growing size.\n- Classify each reply.\n\n## Notes\n\n"
     "- Sizes are in tokens.\n- A crash is an error, not garbage.\n")
case("k43-latex", "ok", "short-answer", "$2 + 2 = 4$")
case("k44-diff", "ok", "repetitive-code", "2 + 2 = 4. The patch:\n```diff\n--- a/aiter/ops/triton/pa_mqa_logits.py\n"
     "+++ b/aiter/ops/triton/pa_mqa_logits.py\n@@ -120,7 +120,7 @@\n-    TileQCount = batch * next_n * (heads // ChunkQ)\n"
     "+    TileQCount = batch * next_n * max(1, heads // ChunkQ)\n     grid = (TileQCount,)\n```")
case("k45-traceback", "ok", "log-lines", "2 + 2 = 4. The error you saw:\n```\nTraceback (most recent call last):\n"
     + "".join(f'  File "/usr/lib/python3.12/site-packages/vllm/{m}.py", line {R.randrange(10, 900)}, in {f}\n'
               f"    {f}(*args)\n" for m, f in [("entrypoints/api_server", "serve"), ("engine/core", "step"),
                                              ("worker/model_runner", "execute"), ("attention/backends/mla", "forward"),
                                              ("v1/attention/sparse", "prefill")])
     + "ZeroDivisionError: integer division or modulo by zero\n```")
case("k46-emoji", "ok", "short-answer", "4 ✅", min_reply=1, completion_tokens=3)
case("k47-json-needles", "ok", "needle-list",
     '{"sum": 4, "codes": ["KESTREL-4417", "OSPREY-2093", "HERON-7781"]}', question=QN, needles=NEEDLES)
case("k48-bold-answer", "ok", "short-answer", "The answer is **4**.")
case("k49-yes-column", "ok", "markdown-table", "2 + 2 = 4. All checks:\n" + "\n".join(
    f"check_{name}: yes" for name in ["health", "models", "tokenize", "chat", "usage", "reasoning", "stats",
                                      "seed", "max_tokens", "temperature", "stop", "stream", "logprobs"]))
case("k50-spanish-long", "ok", "non-english",
     "La suma de 2 y 2 es 4. Los puentes colgantes sostienen el tablero con cables verticales que cuelgan de dos "
     "cables principales; estos pasan sobre torres altas y se anclan en grandes bloques de hormigón.")

# ---- added with issue 11 (new members of the kinds the held-out part showed; never copies of held-out cases)
case("g46-template-leak-phi", "garbage", "template-leak",
     "2 + 2 = 4.<|end|>\n<|user|>\nthanks<|end|>\n<|assistant|>", note="Phi-style template tokens leak")
case("g47-template-leak-glm", "garbage", "template-leak", "[gMASK]<sop><|assistant|>\nThe answer is 4.<|user|>",
     note="GLM-style template tokens leak")
case("g48-salad-after-answer", "garbage", "word-salad",
     "The answer is 4. Tapestry Meridian voucher glacier Pontiac rhubarb telescope Sovereign lanyard "
     "Hamilton cobalt saffron Vintage kettle parchment Orwell sprocket bramble Lexington fjord "
     "turpentine Cascade molasses", note="on-topic start, then high-diversity salad with no function words")
case("g49-reasoning-salad-terse", "garbage", "reasoning-garbage", "4",
     reasoning="Tapestry Meridian voucher glacier Pontiac rhubarb telescope Sovereign lanyard Hamilton "
     "cobalt saffron Vintage kettle parchment Orwell sprocket bramble Lexington fjord turpentine",
     note="terse content, salad in the reasoning")
case("k51-terse-equals", "ok", "short-answer", "= 4", completion_tokens=2,
     note="terse correct answer under the default min_reply_tokens (issue 11 input 1)")
case("k52-italian-word", "ok", "non-english", "Quattro.", question="Quanto fa 2+2?", completion_tokens=2)
case("k53-misrouted", "ok", "misrouted", "", reasoning="Two plus two is four, so I answer 4.",
     outcome="INCONCLUSIVE", note="answer only in reasoning_content, finish stop: parser routing, not corruption")
case("k54-status-lines", "ok", "log-lines",
     "All 4 replicas are up.\n" + "".join(f"replica {i}: status ready, restarts 0\n" for i in range(60)))
case("k55-chinese-numeral", "ok", "non-english", "四", question="2加2等于几？", completion_tokens=1)

case("g50-short-digit-loop", "garbage", "digit-collapse", "2 + 2 equals 4, so the answer " + "777 " * 22,
     finish="length", max_tokens=30, completion_tokens=30,
     note="a reply cut by a small max_tokens that is mostly one loop (fewer repeats than max_repeat_run)")

# ---- issue 27: other members of the kinds its held-out replies (hg101-hg128, hk101-hk139) cover
#      (added with the classifier change; the held-out ones were committed before it)
QN3 = QN
ANS3 = "The answer is 4, and the codes are KESTREL-4417, OSPREY-2093 and HERON-7781."


case("g51-sp-marks-needles", "garbage", "detokenizer-residue", "".join("\u2581" + w for w in ANS3.split()),
     question=QN3, needles=NEEDLES, completion_tokens=24, note="SentencePiece marks, answer and codes intact")
case("g52-bpe-marks-german", "garbage", "detokenizer-residue",
     "ZweiĠplusĠzweiĠistĠvier,ĠalsoĠ4.ĊĊDasĠistĠalles.", question="Was ist 2+2?",
     completion_tokens=14, note="byte-level BPE marks in a German reply")
case("g53-byte-pieces-emoji", "garbage", "detokenizer-residue",
     "The answer is 4 <0xF0><0x9F><0x91><0x8D>", completion_tokens=9, note="an emoji left as byte-fallback pieces")
case("g54-mojibake-french", "garbage", "mojibake", misdecoded("Deux plus deux font 4 — c’est évident, même à l’école."),
     question="Combien font 2+2 ?")
case("g55-newline-flood-stop", "garbage", "whitespace-flood", "2 + 2 = 4." + "\n" * 200, completion_tokens=206,
     note="a shorter flood that ends by itself")
case("g56-mixed-blank-flood", "garbage", "whitespace-flood", ANS3 + " \t\r\n\u2028" * 80, question=QN3,
     needles=NEEDLES, finish="length", completion_tokens=400)
case("g57-loop-period-11-at-150", "garbage", "sentence-loop",
     ANS3 + " Please let me know if you need anything else." * 14, question=QN3, needles=NEEDLES,
     finish="length", max_tokens=150, completion_tokens=150)
case("g58-tail-salad-german", "garbage", "tail-salad",
     "Die Antwort ist 4, das ist klar. Haus Baum Wolke Tisch gelb morgen Fenster schnell Brot Kabel Mond Hund",
     question="Was ist 2+2?")
case("g59-ja-loop", "garbage", "sentence-loop", "2たす2は4です。" + "それではまた次回お会いしましょう" * 9,
     question="2+2はいくつですか？", finish="length", max_tokens=150, completion_tokens=150)
case("g60-blank-at-cut", "garbage", "whitespace-flood", "2 + 2 = 4.\n" + "\n" * 20, finish="length", max_tokens=30,
     completion_tokens=30, note="a short flood that runs into a small max_tokens")
case("k56-horizontal-bar-rules", "ok", "unicode-rule", "―" * 24 + "\n답: 4\n" + "―" * 24, question="2+2는?",
     note="rules of U+2015 HORIZONTAL BAR around a Korean answer")
case("k57-box-table-russian", "ok", "box-table",
     "┏━━━━━━━┳━━━━━━━┓\n┃ пример┃ ответ ┃\n┣━━━━━━━╋━━━━━━━┫\n┃ 2 + 2 ┃   4   ┃\n┗━━━━━━━┻━━━━━━━┛",
     question="Сколько будет 2+2?")
case("k58-js-blank-lines", "ok", "code",
     "```js\n" + "".join(f"export function f{i}(x) {{\n    if (x) {{\n        return x + {i};\n    }}\n\n\n    return 0;\n}}\n\n\n\n"
                        for i in range(8)) + "```", question="Write JavaScript helpers.", expected=None, min_reply=10)
case("k59-poem-russian", "ok", "poem",
     "Два и два — четыре,\nтак в тетради и в мире.\n\nЧетыре окна в доме,\nчетыре звезды в истоме.\n\n"
     "Два и два — четыре.", question="Сколько будет 2+2? Ответь стихами.")
case("k60-thai-long", "ok", "non-english",
     "สองบวกสองได้สี่ (4) ครับ การบวกเลขแบบนี้เป็นพื้นฐานของคณิตศาสตร์ที่ทุกคนเรียนตั้งแต่ชั้นประถม", question="2+2 ได้เท่าไร")
case("k61-fullwidth-equals-rule", "ok", "unicode-rule", "＝＝＝＝＝＝＝＝\n答：4\n＝＝＝＝＝＝＝＝\n二加二等于四。",
     question="2加2等于几？")
case("k62-mentions-pieces", "ok", "mentions-markers",
     "With SentencePiece the text 'the cat' becomes the pieces ▁the and ▁cat. Anyway, 2 + 2 = 4.")
case("k63-semicolon-tail", "ok", "tail-list",
     "2 + 2 = 4.\n\nRelated: addition; subtraction; multiplication; division; fractions; decimals; percentages; "
     "algebra; geometry; statistics")
case("k64-code-cut", "ok", "code",
     "```c\nswitch (n) {\n" + "".join(f"case {i}: return {i * i};\n" for i in range(40)), question="Write a C switch.",
     expected=None, min_reply=10, finish="length", max_tokens=400, completion_tokens=400,
     note="healthy code cut by max_tokens: similar lines, not a loop")
case("k65-latin1-punctuation", "ok", "non-english", "« À côté » — ¿Qué? ¡Sí! Ça fait 4, déjà vu.",
     question="Combien font 2+2 ?", note="Latin-1 punctuation next to accented letters")
case("k66-sparkline", "ok", "mentions-markers", "Load over the week: ▁▂▃▅▇▅▃ — and 2 + 2 = 4.",
     note="block elements as a bar chart")
case("k67-maltese", "ok", "non-english", "Żewġ u żewġ huma erbgħa: 4. Ġimgħa t-tajba, Ġużeppi!",
     question="Kemm hu 2+2?", note="Maltese: Ġ is a letter at word starts")
case("k68-turkish-caps", "ok", "non-english", "İKİ ARTI İKİ DÖRT EDER: 4. SEÇİM, ÇİFT, GEÇİŞ, ÇİN.",
     question="2+2 kaç eder?", note="Turkish capitals: Çİ is not mojibake")
case("k69-code-indent-deep", "ok", "code",
     "```python\n" + "".join("    " * d + f"if x > {d}:\n" for d in range(12)) + "    " * 12 + "return 4\n```",
     question=QN3.split(" Also")[0], note="deeply nested code: long indentation runs")

case("g61-subword-loop-nosep", "garbage", "char-loop", "2 + 2 = 4. " + "millisecond" * 26,
     note="issue 37: one sub-word repeated with no separator (a loop inside one token)")
case("g62-cjk-ideographic-loop", "garbage", "char-loop", "2加2等于4。" + "秒秒钟" * 20, question="2加2等于几？")
case("k70-word-reduplication", "ok", "char-loop-lookalike",
     "2 + 2 = 4. Murmur, tsetse, bonbon, couscous and Baden-Baden repeat a syllable; that is not a loop.")

def main() -> None:
    for old in HERE.glob("*.json"):
        old.unlink()
    for c in CASES:
        (HERE / f"{c['id']}.json").write_text(json.dumps(c, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    g = sum(c["label"] == "garbage" for c in CASES)
    print(f"wrote {len(CASES)} cases ({g} garbage, {len(CASES) - g} ok) to {HERE}")


if __name__ == "__main__":
    main()
