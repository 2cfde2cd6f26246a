"""Regenerate the HELD-OUT classifier corpus (one JSON file per case) in this directory.

Run: ``python tests/data/heldout/make_heldout.py``. The held-out part is never used to
fit a threshold: it only measures (``benchmarks/classifier.py`` prints it beside the
tuning part ``tests/data/outputs``). It was committed before the classifier changes of
issue 11, so its figures are an honest estimate of the error rate on unseen replies.

Fields as in the tuning part (see ``tests/data/outputs/README.md``), plus ``lang``
(ISO 639-1 of the reply) and ``source``: ``report-shape`` for a reply paraphrased from
the shape of an output quoted in a public vLLM / llama.cpp / SGLang / ROCm bug report
(not copied text), ``written`` for one written for this corpus.

Questions: arithmetic ("What is 2+2?" in several languages), a capital, days of the
week, a summary of the document (long answer asked: ``min_reply_tokens`` 40), a short
code request, and the needle question.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from bisectbot.reproduce.rawtext import misdecoded

HERE = Path(__file__).parent
R = random.Random(1107)
CASES: list[dict] = []

Q4 = "What is 2+2? Answer in one sentence."
QCAP = "What is the capital of France? Answer in one word."
QWEEK = "How many days are in a week?"
QSUM = "Summarise the document in a few paragraphs."
QCODE = "Write a short Python function that returns the sum of a list of numbers."
NEEDLES = ["PLOVER-5520", "SISKIN-3308", "AVOCET-9164"]
QN = Q4 + " Also list the access codes of vaults 1 to 3 that the document mentions, exactly as written."
Q4_ZH = "2加2等于几？用一句话回答。"
Q4_DE = "Was ist 2+2? Antworte in einem Satz."
Q4_FR = "Combien font 2+2 ? Réponds en une phrase."
Q4_ES = "¿Cuánto es 2+2? Responde en una frase."
Q4_JA = "2+2はいくつですか？一文で答えてください。"
Q4_RU = "Сколько будет 2+2? Ответь одним предложением."
QCAP_ZH = "法国的首都是哪里？"
QCAP_RU = "Какая столица Франции?"


def case(id_, label, kind, content, *, lang="en", source="written", reasoning="", finish="stop", question=Q4,
         expected="4", needles=None, min_reply=3, max_tokens=1000, completion_tokens=None, outcome=None, note=""):
    CASES.append({
        "id": id_, "label": label, "kind": kind, "lang": lang, "source": source, "note": note,
        "content": content, "reasoning": reasoning, "finish_reason": finish, "completion_tokens": completion_tokens,
        "asked": {"question": question, "expected_answer": expected, "needles": needles or [],
                  "max_tokens": max_tokens, "min_reply_tokens": min_reply},
        **({"outcome": outcome} if outcome else {}),
    })


RS = "report-shape"

# =========================================================================== legitimate (label ok)
# ---- terse correct answers (issue 11, input 1): the recipe default min_reply_tokens (3) is kept
case("hk001-digit-only", "ok", "terse", "4", completion_tokens=1, source=RS,
     note="a server answering the one-sentence question with just the digit")
case("hk002-digit-period", "ok", "terse", "4.", completion_tokens=2)
case("hk003-number-word", "ok", "terse", "Four.", completion_tokens=2, source=RS)
case("hk004-number-word-lower", "ok", "terse", "four", completion_tokens=1)
case("hk005-equation", "ok", "terse", "2+2=4", completion_tokens=5)
case("hk006-bold", "ok", "terse", "**4**", completion_tokens=3)
case("hk007-answer-is", "ok", "terse", "The answer is 4.", completion_tokens=5)
case("hk008-paren-word", "ok", "terse", "4 (four)", completion_tokens=4)
case("hk009-paris", "ok", "terse", "Paris", question=QCAP, expected="Paris", completion_tokens=1, source=RS)
case("hk010-paris-period", "ok", "terse", "Paris.", question=QCAP, expected="Paris", completion_tokens=2)
case("hk011-seven", "ok", "terse", "7", question=QWEEK, expected="7", completion_tokens=1)
case("hk012-seven-word", "ok", "terse", "Seven.", question=QWEEK, expected="7", completion_tokens=2, source=RS)
case("hk013-seven-sentence", "ok", "terse", "A week has seven days.", question=QWEEK, expected="7")
case("hk014-no-usage", "ok", "terse", "4", completion_tokens=None, note="server sent no usage block")
case("hk015-latex-boxed", "ok", "math", "$2 + 2 = \\boxed{4}$", source=RS)
case("hk016-exclaim", "ok", "terse", "It's 4!", completion_tokens=4)
# ---- other languages
case("hk020-zh-digit", "ok", "non-english", "2加2等于4。", lang="zh", question=Q4_ZH, completion_tokens=6)
case("hk021-zh-numeral", "ok", "non-english", "二加二等于四。", lang="zh", question=Q4_ZH, completion_tokens=6,
     source=RS, note="the answer written as a Chinese numeral")
case("hk022-zh-capital", "ok", "non-english", "法国的首都是巴黎。", lang="zh", question=QCAP_ZH, expected="巴黎")
case("hk023-zh-terse", "ok", "terse", "巴黎", lang="zh", question=QCAP_ZH, expected="巴黎", completion_tokens=1)
case("hk024-de-sentence", "ok", "non-english", "2 + 2 ist 4.", lang="de", question=Q4_DE)
case("hk025-de-word", "ok", "non-english", "Vier.", lang="de", question=Q4_DE, completion_tokens=2)
case("hk026-fr-sentence", "ok", "non-english", "2 + 2 font 4.", lang="fr", question=Q4_FR)
case("hk027-fr-word", "ok", "non-english", "Quatre.", lang="fr", question=Q4_FR, completion_tokens=2)
case("hk028-es-words", "ok", "non-english", "Dos más dos son cuatro.", lang="es", question=Q4_ES)
case("hk029-ja-digit", "ok", "non-english", "2たす2は4です。", lang="ja", question=Q4_JA)
case("hk030-ru-digit", "ok", "non-english", "2 + 2 = 4.", lang="ru", question=Q4_RU)
case("hk031-ru-word", "ok", "non-english", "Четыре.", lang="ru", question=Q4_RU, completion_tokens=2)
case("hk032-ru-capital", "ok", "non-english", "Столица Франции — Париж.", lang="ru", question=QCAP_RU,
     expected="Париж")
case("hk033-ko", "ok", "non-english", "2 더하기 2는 4입니다.", lang="ko", question="2 더하기 2는 무엇입니까?")
case("hk034-de-week", "ok", "non-english", "Eine Woche hat sieben Tage.", lang="de",
     question="Wie viele Tage hat eine Woche?", expected="7")
# ---- structured answers
case("hk040-md-table", "ok", "markdown-table",
     "| a | b | a+b |\n|---|---|---|\n| 2 | 2 | 4 |\n| 1 | 1 | 2 |\n| 3 | 3 | 6 |\n\nSo 2 + 2 is 4.", source=RS)
case("hk041-json", "ok", "json", '{"question": "2+2", "answer": 4, "unit": null}', source=RS)
case("hk042-json-list", "ok", "json",
     json.dumps([{"step": i, "value": 4, "ok": True} for i in range(1, 26)], indent=1) + "\nThe answer is 4.")
case("hk043-code-python", "ok", "code",
     "```python\ndef total(xs: list[float]) -> float:\n    return sum(xs)\n```", question=QCODE, expected=None,
     min_reply=10, source=RS)
case("hk044-code-repetitive", "ok", "repetitive-code",
     "```go\nfunc (c *Config) Copy() *Config {\n\treturn &Config{\n"
     + "".join(f"\t\tField{i}: c.Field{i},\n" for i in range(40)) + "\t}\n}\n```", question=QCODE, expected=None,
     min_reply=10)
case("hk045-list-1-60", "ok", "numeric-list", ", ".join(str(i) for i in range(1, 61)) + ". And 2 + 2 = 4.")
case("hk046-csv", "ok", "csv",
     "x,y,sum\n" + "\n".join(f"{i},{i},{2 * i}" for i in range(1, 40)) + "\nrow 2 gives 2+2=4", source=RS)
case("hk047-bullets", "ok", "list",
     "- First, take 2.\n- Then add 2.\n- The result is 4.\n- Check: 4 - 2 = 2.", source=RS)
case("hk048-math-steps", "ok", "math",
     "Let a = 2 and b = 2. Then a + b = 2 + 2 = 4. Therefore the sum is 4.", source=RS)
case("hk049-needles", "ok", "needle-list",
     "2 + 2 = 4.\n1. PLOVER-5520\n2. SISKIN-3308\n3. AVOCET-9164", question=QN, needles=NEEDLES, source=RS)
case("hk050-needles-json", "ok", "needle-list",
     '{"answer": 4, "codes": ["PLOVER-5520", "SISKIN-3308", "AVOCET-9164"]}', question=QN, needles=NEEDLES)
case("hk051-needles-terse", "ok", "needle-list", "4; PLOVER-5520, SISKIN-3308, AVOCET-9164", question=QN,
     needles=NEEDLES, completion_tokens=12)
case("hk052-yaml", "ok", "code",
     "answer: 4\n" + "".join(f"replica_{i}:\n  enabled: true\n  weight: 1\n" for i in range(15)))
case("hk053-binary", "ok", "numeric-list",
     "4 in binary is 100. Powers of two: " + " ".join(str(2 ** i) for i in range(0, 40)))
case("hk054-poem-refrain", "ok", "repetitive-prose",
     ("Two and two make four, the teacher said once more.\n" * 2 + "We counted on the floor.\n") * 5, source=RS,
     note="a refrain repeated on purpose")
case("hk055-multi-lang-greet", "ok", "mixed-language",
     "The answer is 4. In other languages: vier (German), quatre (French), cuatro (Spanish), четыре (Russian), "
     "四 (Chinese), 네 (Korean).", source=RS)
case("hk056-zh-long", "ok", "non-english",
     "这份文件列出了许多内部函数及其参数和返回值。" * 1 + "每个函数都描述了它处理的数据结构，例如缓冲区、张量和索引。"
     "文件中还提到了重试次数、阶段编号和异常类型。总的来说，这是一份系统接口的参考说明，内容很长但结构一致。"
     "读者可以据此了解每个模块的职责，以及它们之间如何传递数据。", lang="zh", question="请用几段话总结这份文件。",
     expected=None, min_reply=40, completion_tokens=110)
case("hk057-de-long", "ok", "essay",
     "Das Dokument beschreibt eine lange Reihe interner Funktionen. Jede Funktion nimmt einige Parameter, "
     "verarbeitet einen Puffer, einen Tensor oder eine Tabelle und gibt einen Wert zurück. Häufig werden "
     "Wiederholungen, Stufen und Ausnahmen erwähnt. Insgesamt wirkt es wie eine technische Referenz für ein "
     "Laufzeitsystem, in dem Daten zwischen Modulen weitergereicht werden.", lang="de",
     question="Fasse das Dokument in einigen Absätzen zusammen.", expected=None, min_reply=40)
case("hk058-en-summary", "ok", "essay",
     "The document is a long catalogue of internal functions. Each entry names a function, its parameters and "
     "their types, and says what the function does to a buffer, tensor, table or queue, often with a stage "
     "number or a retry count.\n\nSeveral entries mention exceptions such as ValueError or TimeoutError raised "
     "when a bound is exceeded. Others describe helpers that are called many times per step.\n\nTaken together "
     "it reads like the reference section of a runtime's source documentation.", question=QSUM, expected=None,
     min_reply=40, source=RS)
case("hk059-sql", "ok", "code",
     "```sql\nSELECT 2 + 2 AS answer;  -- 4\n" + "".join(f"INSERT INTO t VALUES ({i}, {i});\n" for i in range(30))
     + "```")
case("hk060-log", "ok", "log",
     "Result: 4\n" + "".join(f"[2026-11-30 10:{i:02d}:00] INFO step {i} ok\n" for i in range(45)), source=RS)
case("hk061-checklist", "ok", "list",
     "The answer is 4.\n" + "".join(f"- [x] check {i} passed\n" for i in range(1, 31)))
case("hk062-thinking-full", "ok", "thinking",
     "2 + 2 = 4.", reasoning="The user asks for 2+2. That is simple arithmetic: two plus two is four. "
     "I will answer in one sentence.", source=RS)
case("hk063-thinking-cut", "ok", "thinking-cut", "",
     reasoning="Let me think about this. The document is long, but the question is only about 2+2. Two plus two "
     "is four. Before answering I should double check whether the document changes anything; it lists "
     "functions, so no. I could also mention", finish="length", max_tokens=60, outcome="INCONCLUSIVE", source=RS)
case("hk064-misrouted", "ok", "misrouted", "",
     reasoning="The question asks for 2+2. The answer is 4. I will state that 2 + 2 equals 4.",
     outcome="INCONCLUSIVE", source=RS,
     note="reasoning parser routed the whole answer into reasoning_content; content empty, finish stop")
case("hk065-misrouted-null", "ok", "misrouted", None,
     reasoning="Simple: 2 plus 2 gives 4. Final answer: 4.", outcome="INCONCLUSIVE")
case("hk066-emoji", "ok", "terse", "4 ✅", completion_tokens=2)
case("hk067-answer-first-long", "ok", "essay",
     "2 + 2 equals 4. " + " ".join(R.sample("Addition is commutative and associative , so the order of the two "
                                             "operands does not matter and grouping does not change the sum of "
                                             "small whole numbers like these".split(), 20)), source=RS)
case("hk068-repeated-key-json", "ok", "json",
     "[" + ", ".join('{"id": %d, "status": "ok", "value": 4}' % i for i in range(30)) + "]")
case("hk069-needle-sentence", "ok", "needle-list",
     "Two plus two is four. Vault 1 holds PLOVER-5520, vault 2 holds SISKIN-3308 and vault 3 holds AVOCET-9164.",
     question=QN, needles=NEEDLES)
case("hk070-fr-capital", "ok", "non-english", "La capitale de la France est Paris.", lang="fr",
     question="Quelle est la capitale de la France ?", expected="Paris")
case("hk071-es-week", "ok", "non-english", "Una semana tiene siete días.", lang="es",
     question="¿Cuántos días tiene una semana?", expected="7")
case("hk072-ja-capital", "ok", "non-english", "フランスの首都はパリです。", lang="ja",
     question="フランスの首都はどこですか？", expected="パリ")

# =========================================================================== garbage (label garbage)
SALAD = ("ward Officer blessed Chronicle slot Manuel pigment referral Fab gaz whilst boutique Kyle spine "
         "marble hurdles Latitude erect turbo sympathetic Appeal cheated Narrative quartz omnip dispatcher "
         "Cherry Clause Rack vicinity ". split())
case("hg001-word-salad", "garbage", "word-salad", " ".join(R.choice(SALAD) for _ in range(90)), source=RS,
     note="high-diversity English word salad after a long prefill")
case("hg002-word-salad-short", "garbage", "word-salad", "ward Officer blessed Chronicle slot Manuel pigment "
     "referral Fab gaz", source=RS)
case("hg003-compound-salad", "garbage", "compound-salad",
     "SkinnerblockchainPHPExceptionPartnerAnnotationRegistry telefonNotificationCenterQuartzlyUIImagePickerCont"
     "rollerDelegate HeaderCodeRackThumbnailRenderingOptionsBuilderFactory", source=RS,
     note="compound-word salad, identifiers glued without spaces")
case("hg004-compound-salad-long", "garbage", "compound-salad",
     " ".join("".join(R.choice(["Skinner", "Chain", "PHP", "Exception", "Partner", "Annot", "Registry", "Quartz",
                                "Delegate", "Factory", "Builder", "Thumb", "Render", "Option"]) for _ in range(6))
              for _ in range(25)), source=RS)
case("hg005-pronoun-loop", "garbage", "pronoun-loop", " ".join(["I"] * 200), source=RS)
case("hg006-pronoun-mix-loop", "garbage", "pronoun-loop",
     " ".join(R.choice(["he", "she", "it", "they", "I", "you", "we"]) for _ in range(240)), source=RS,
     note="a loop over a handful of pronouns in random order")
case("hg007-he-he", "garbage", "pronoun-loop", "The answer is " + "he " * 150, source=RS)
case("hg008-script-mix", "garbage", "mixed-script",
     "The 的 answer 는 to переход this في question 了 is 을 unclear 在 because 의 the и model 是", source=RS)
case("hg009-script-mix-long", "garbage", "mixed-script",
     " ".join(R.choice(["the", "model", "value", "的", "는", "и", "في", "是", "data", "了", "на", "을", "cache"])
              for _ in range(120)), source=RS)
case("hg010-template-gemma", "garbage", "template-leak",
     "4<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>",
     source=RS, note="chat-template tokens in the reply after an engine upgrade")
case("hg011-template-llama2", "garbage", "template-leak", "2 + 2 = 4 [/INST] [INST] What is 2+2? [/INST] 4",
     source=RS)
case("hg012-template-chatml", "garbage", "template-leak",
     "2 + 2 = 4.<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n6", source=RS)
case("hg013-template-llama3", "garbage", "template-leak",
     "2 + 2 = 4.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nthanks<|eot_id|>", source=RS)
case("hg014-template-needles", "garbage", "template-leak",
     "<start_of_turn>model\n4. Codes: PLOVER-5520, SISKIN-3308, AVOCET-9164<end_of_turn>\n<start_of_turn>user",
     question=QN, needles=NEEDLES, source=RS, note="correct answer and both needles wrapped in template tokens")
case("hg015-endoftext", "garbage", "template-leak", "4<|endoftext|><|endoftext|><|endoftext|>Human: hi",
     source=RS)
case("hg016-syllable", "garbage", "syllable-loop", "lalalalalalalalalalalalalalalalalalalalalalala" * 6,
     source=RS, note="one syllable repeated without spaces")
case("hg017-syllable-ada", "garbage", "syllable-loop", "ERSION" * 120, source=RS)
case("hg018-syllable-zh", "garbage", "syllable-loop", "的" * 300, lang="zh", question=Q4_ZH, source=RS)
case("hg019-G-flood", "garbage", "flood", "G" * 500, source=RS)
case("hg020-bang", "garbage", "flood", "!" * 640, finish="length", max_tokens=640, source=RS,
     note="Qwen on ROCm answering only exclamation marks")
case("hg021-at-flood", "garbage", "flood", "@" * 300, source=RS)
case("hg022-newline-flood", "garbage", "flood", "\n" * 400, source=RS)
case("hg023-short-bang", "garbage", "flood", "!!!!!!!!", completion_tokens=8, source=RS)
case("hg024-fffd", "garbage", "fffd-noise", "\ufffd" * 80 + "a\ufffd\ufffd e\ufffd", source=RS)
case("hg025-fffd-mixed", "garbage", "fffd-noise",
     "".join(R.choice(["\ufffd", "Ã", "¤", "â€", " ", "ð\x9f"]) for _ in range(200)), source=RS)
case("hg026-unk", "garbage", "special-tokens", "<unk>" * 120, source=RS)
case("hg027-pad", "garbage", "special-tokens", "<pad> " * 100, source=RS)
case("hg028-reserved", "garbage", "special-tokens",
     "".join(f"<|reserved_special_token_{R.randrange(250)}|>" for _ in range(60)), source=RS)
case("hg029-byte-tokens", "garbage", "special-tokens", "".join(f"<0x{R.randrange(256):02X}>" for _ in range(150)),
     source=RS)
case("hg030-digit-chain", "garbage", "digit-collapse", "2 + 2 = 4" + "4" * 300, source=RS)
case("hg031-digit-spaced", "garbage", "digit-collapse", "The answer is " + " ".join("0" for _ in range(200)),
     source=RS)
case("hg032-decimal-loop", "garbage", "digit-collapse", "0." * 250, source=RS)
case("hg033-slash-star", "garbage", "flood", "/******/" * 60, source=RS)
case("hg034-empty", "garbage", "empty", "", completion_tokens=0, source=RS)
case("hg035-null", "garbage", "empty", None, completion_tokens=0)
case("hg036-whitespace", "garbage", "empty", "   \n\n  ", completion_tokens=3)
case("hg037-reasoning-loop", "garbage", "reasoning-garbage", "", reasoning=" ".join(["the"] * 900),
     finish="length", source=RS)
case("hg038-reasoning-salad", "garbage", "reasoning-garbage", "4",
     reasoning=" ".join(R.choice(SALAD) for _ in range(150)), source=RS,
     note="word salad in the reasoning stream, terse content")
case("hg039-wrong-needle", "garbage", "fluent-but-wrong",
     "2 + 2 = 4. Codes: PLOVER-5520, SISKIN-3309, AVOCET-9164.", question=QN, needles=NEEDLES, source=RS)
case("hg040-wrong-answer", "garbage", "fluent-but-wrong", "Two plus two makes 5.", source=RS)
case("hg041-wrong-capital", "garbage", "fluent-but-wrong", "The capital of France is Lyon.", question=QCAP,
     expected="Paris")
case("hg042-collapse-after-answer", "garbage", "word-loop",
     "2 + 2 equals 4. " + " ".join(["and"] * 400), source=RS)
case("hg043-phrase-loop", "garbage", "word-loop", "I am not sure. " * 120, source=RS)
case("hg044-line-loop", "garbage", "word-loop", "def total(xs):\n" * 80, question=QCODE, expected=None,
     min_reply=10)
case("hg045-de-salad", "garbage", "word-salad",
     " ".join(R.choice("Haus Baum und nicht Straße Wolke Tisch gelb morgen Fenster schnell Brot Kabel Mond über "
                       "Hund".split()) for _ in range(80)), lang="de", question=Q4_DE, source=RS)
case("hg046-ru-salad", "garbage", "word-salad",
     " ".join(R.choice("дом река синий быстро окно хлеб кабель луна собака через стол облако".split())
              for _ in range(80)), lang="ru", question=Q4_RU, source=RS)
case("hg047-zh-salad", "garbage", "word-salad", "".join(R.choice("的是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下")
                                                      for _ in range(200)), lang="zh", question=Q4_ZH, source=RS,
     note="random common characters, no answer")
case("hg048-zh-loop", "garbage", "word-loop", "答案是" * 150, lang="zh", question=Q4_ZH)
case("hg049-fr-loop", "garbage", "word-loop", "la la la " * 120, lang="fr", question=Q4_FR)
case("hg050-ja-flood", "garbage", "flood", "。" * 300, lang="ja", question=Q4_JA)
case("hg051-identifiers", "garbage", "foreign-identifiers",
     "```python\n" + "".join(f"value_{R.choice(['的', '는', 'и', 'في'])}{i} = self.f{R.choice(['的', '는'])}_{i}\n"
                              for i in range(12)) + "```", question=QCODE, expected=None, min_reply=10, source=RS)
case("hg052-short-salad", "garbage", "word-salad", "purple invoice river", completion_tokens=3, source=RS)
case("hg053-one-token", "garbage", "word-salad", "the", completion_tokens=1, source=RS)
case("hg054-control", "garbage", "control-soup",
     "".join(chr(R.choice([R.randrange(1, 31), R.randrange(33, 126)])) for _ in range(300)), source=RS)
case("hg055-summary-salad", "garbage", "word-salad", " ".join(R.choice(SALAD) for _ in range(120)), question=QSUM,
     expected=None, min_reply=40, source=RS)
case("hg056-summary-loop", "garbage", "word-loop", "The document is " + "long " * 300, question=QSUM,
     expected=None, min_reply=40)
case("hg057-summary-short", "garbage", "short-reply-long-ask", "Functions.", question=QSUM, expected=None,
     min_reply=40, completion_tokens=2, source=RS, note="a two-token reply to a request for paragraphs")
case("hg058-needles-missing", "garbage", "fluent-but-wrong", "2 + 2 = 4. The document mentions no codes.",
     question=QN, needles=NEEDLES)
case("hg059-hex-noise", "garbage", "hex-noise", " ".join(f"{R.getrandbits(32):08x}" for _ in range(80)),
     source=RS)
case("hg060-template-only", "garbage", "template-leak", "<|im_start|>assistant\n<|im_start|>assistant\n" * 20,
     source=RS)
case("hg061-reasoning-fffd", "garbage", "reasoning-garbage", "",
     reasoning="\ufffd\ufffd" * 100, finish="length")
case("hg062-ko-loop", "garbage", "word-loop", "네 " * 200, lang="ko", question="2 더하기 2는 무엇입니까?", source=RS)
case("hg063-punct-salad", "garbage", "flood", "".join(R.choice(",.;:!?") for _ in range(400)), source=RS)
case("hg064-es-wrong", "garbage", "fluent-but-wrong", "Dos más dos son cinco.", lang="es", question=Q4_ES)
case("hg065-zh-wrong", "garbage", "fluent-but-wrong", "2加2等于5。", lang="zh", question=Q4_ZH)
case("hg066-number-salad", "garbage", "digit-collapse",
     " ".join(str(R.randrange(10000)) for _ in range(150)), source=RS)
case("hg067-code-collapse", "garbage", "word-loop",
     "```python\ndef total(xs):\n    return " + "sum(" * 150, question=QCODE, expected=None, min_reply=10)
case("hg068-answer-then-salad", "garbage", "word-salad",
     "2 + 2 = 4. " + " ".join(R.choice(SALAD) for _ in range(100)), source=RS,
     note="on-topic start, then high-diversity salad")
case("hg069-answer-then-script-mix", "garbage", "mixed-script",
     "2 + 2 = 4. " + " ".join(R.choice(["是", "는", "и", "في", "the", "to", "的", "на", "of"]) for _ in range(80)),
     source=RS)
case("hg070-template-tool", "garbage", "template-leak",
     "4</s><s>[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>", source=RS)


# =========================================================================== issue 27 (committed before its classifier change)
# The text oracle's blind spots: detokenizer residue, whitespace floods, loops of any period at a
# small max_tokens, salad after a correct answer -- and their legitimate look-alikes (code with many
# blank lines, poems, box-drawn tables, scripts without spaces, non-ASCII rules, CSV, lists).
R27 = random.Random(2707)
N2 = NEEDLES[:2]
QN2 = Q4 + " Also list the access codes of vaults 1 to 2 that the document mentions, exactly as written."
ANS2 = "Two plus two equals 4. The codes are PLOVER-5520 and SISKIN-3308."


def sp_pieces(text: str) -> str:
    """SentencePiece pieces joined without decoding: every word start marked with U+2581."""
    return "".join("\u2581" + w for w in text.split(" "))


def bpe_pieces(text: str) -> str:
    """GPT-2 byte-level BPE pieces joined without decoding: space -> G-dot (U+0120), newline -> C-dot (U+010A)."""
    return text.replace(" ", "\u0120").replace("\n", "\u010a").replace("\t", "\u0109")


# ---- garbage: detokenizer residue
case("hg101-sp-markers", "garbage", "detokenizer-residue", sp_pieces(ANS2)[1:], question=QN2, needles=N2,
     completion_tokens=19, source=RS, note="vllm#29953 shape: SentencePiece word marks left in the text")
case("hg102-sp-markers-spaced", "garbage", "detokenizer-residue", "\u2581The \u2581sum \u2581of \u25812 \u2581and "
     "\u25812 \u2581is \u25814 .", completion_tokens=10, source=RS,
     note="pieces joined with spaces, each still carrying its word mark")
case("hg103-sp-markers-summary", "garbage", "detokenizer-residue", sp_pieces(
     "The document is a long catalogue of internal functions. Each entry names a function, its parameters and "
     "what it does to a buffer, a tensor or a queue. Several entries mention retries and stage numbers.")[1:],
     question=QSUM, expected=None, min_reply=40, completion_tokens=44, source=RS)
case("hg104-sp-partial", "garbage", "detokenizer-residue",
     "Two plus two equals 4.\u2581The\u2581codes\u2581are PLOVER-5520 and\u2581SISKIN-3308.", question=QN2, needles=N2,
     completion_tokens=19, note="only some pieces left undecoded (added tokens decoded apart)")
case("hg105-bpe-markers", "garbage", "detokenizer-residue", bpe_pieces(ANS2.replace(". The", ".\nThe")),
     question=QN2, needles=N2, completion_tokens=19, source=RS,
     note="vllm#16838 / distributed-llama#142 shape: byte-level BPE markers left in the text")
case("hg106-bpe-code", "garbage", "detokenizer-residue",
     bpe_pieces("def total(xs):\n    return sum(xs)\n\nprint(total([1, 2, 3]))\n"), question=QCODE, expected=None,
     min_reply=10, completion_tokens=24, source=RS)
case("hg107-bpe-newlines-only", "garbage", "detokenizer-residue",
     "2 + 2 = 4.\u010a\u010aThe codes are:\u010a- PLOVER-5520\u010a- SISKIN-3308", question=QN2, needles=N2,
     completion_tokens=22, note="spaces decoded, newline pieces left as C-dot")
case("hg108-byte-fallback-newlines", "garbage", "detokenizer-residue",
     "2 + 2 = 4.<0x0A><0x0A>The codes are PLOVER-5520 and SISKIN-3308.<0x0A>", question=QN2, needles=N2,
     completion_tokens=21, source=RS, note="SentencePiece byte-fallback pieces for newlines left in the text")
case("hg109-byte-fallback-cjk", "garbage", "detokenizer-residue", "2加2<0xE7><0xAD><0x89><0xE4><0xBA><0x8E>4。",
     lang="zh", question=Q4_ZH, completion_tokens=10, source=RS,
     note="UTF-8 bytes of two CJK characters left as byte pieces")
case("hg110-mojibake-de", "garbage", "mojibake",
     misdecoded("2 + 2 ist 4 – also vier. Die Codes lauten „PLOVER-5520“ und „SISKIN-3308“. Für beide gilt "
              "dieselbe Größe."), lang="de", question=QN2.replace(Q4, Q4_DE), needles=N2, source=RS,
     note="UTF-8 text decoded as Windows-1252")
case("hg111-mojibake-zh", "garbage", "mojibake", misdecoded("2加2等于4。访问码是PLOVER-5520和SISKIN-3308。"),
     lang="zh", question=Q4_ZH, needles=N2, source=RS)
case("hg112-mojibake-quotes", "garbage", "mojibake",
     misdecoded("Two plus two is 4 — it’s simple. The codes are “PLOVER-5520” and “SISKIN-3308”."), question=QN2,
     needles=N2, source=RS, note="curly quotes and dashes through the wrong codec")
# ---- garbage: whitespace floods
case("hg113-newline-flood-length", "garbage", "whitespace-flood", ANS2 + "\n" * 985, question=QN2, needles=N2,
     finish="length", completion_tokens=1000, source=RS,
     note="vllm#2870 / vllm#8020 shape: a correct answer, then newlines until max_tokens")
case("hg114-space-flood-length", "garbage", "whitespace-flood", ANS2 + " " * 985, question=QN2, needles=N2,
     finish="length", completion_tokens=1000, source=RS)
case("hg115-tab-newline-flood", "garbage", "whitespace-flood", ANS2 + "\n\t" * 490, question=QN2, needles=N2,
     finish="length", completion_tokens=1000, source=RS)
case("hg116-newline-flood-middle", "garbage", "whitespace-flood",
     "2 + 2 = 4." + "\n" * 400 + "The codes are PLOVER-5520 and SISKIN-3308.", question=QN2, needles=N2,
     note="a flood in the middle, no usage block")
case("hg117-ideographic-space-flood", "garbage", "whitespace-flood", "2加2等于4。" + "\u3000" * 600, lang="zh",
     question=Q4_ZH, finish="length", completion_tokens=606)
case("hg118-nbsp-flood", "garbage", "whitespace-flood", ANS2 + "\u00a0" * 500, question=QN2, needles=N2,
     finish="length", completion_tokens=515)
case("hg119-zwsp-flood", "garbage", "whitespace-flood", ANS2 + "\u200b" * 700, question=QN2, needles=N2,
     finish="length", completion_tokens=715, note="zero-width spaces: invisible format characters")
# ---- garbage: loops of any period at a small max_tokens
LOOP13 = " I hope this answer helps you understand the codes in the document."
case("hg120-sentence-loop-200", "garbage", "sentence-loop", (ANS2 + LOOP13 * 15)[:1010], question=QN2, needles=N2,
     finish="length", max_tokens=200, completion_tokens=200, source=RS,
     note="LocalAI#969 shape: a 13-token sentence repeated after a correct answer, cut at max_tokens 200")
case("hg121-sentence-loop-1000", "garbage", "sentence-loop", ANS2 + LOOP13 * 76, question=QN2, needles=N2,
     finish="length", completion_tokens=1000, source=RS)
PARA = (" The document is a list of functions, and each function has parameters, a return value and a short "
        "description of what it does to the data it receives.")
case("hg122-paragraph-loop", "garbage", "sentence-loop", "2 + 2 = 4." + PARA * 6, finish="length", max_tokens=200,
     completion_tokens=200, note="a 31-token paragraph repeated until max_tokens")
case("hg123-zh-loop", "garbage", "sentence-loop", "2加2等于4。" + "我们可以看到这个问题的答案非常简单" * 12,
     lang="zh", question=Q4_ZH, finish="length", max_tokens=200, completion_tokens=200,
     note="a loop in a script without spaces: one clause repeated without punctuation")
case("hg124-code-block-loop", "garbage", "sentence-loop",
     "```python\ndef total(xs):\n    return sum(xs)\n\n" + "# Example usage:\nprint(total([1, 2, 3]))  # 6\n" * 12,
     question=QCODE, expected=None, min_reply=10, finish="length", max_tokens=200, completion_tokens=200)
# ---- garbage: salad after a correct answer
TAIL_SALAD = ("ward Officer blessed Chronicle slot Manuel pigment referral Fab gaz whilst boutique Kyle spine marble "
              "hurdles Latitude erect turbo sympathetic Appeal").split()
case("hg125-tail-salad-13", "garbage", "tail-salad", ANS2 + " " + " ".join(R27.sample(TAIL_SALAD, 13)), question=QN2,
     needles=N2, source=RS, note="ik_llama.cpp#1256 shape: a correct answer, then 13 salad words")
case("hg126-tail-salad-needles3", "garbage", "tail-salad",
     "2 + 2 = 4. The codes are PLOVER-5520, SISKIN-3308 and AVOCET-9164. " + " ".join(R27.sample(TAIL_SALAD, 15))
     + " 的", question=QN, needles=NEEDLES, source=RS)
case("hg127-tail-fragments", "garbage", "tail-salad",
     ANS2 + " ingly ation ousness izing ment wardly ette ique ified ables ically nessed orium", question=QN2,
     needles=N2, note="subword fragments after the answer")
# ---- garbage: formatting characters that are a flood, not a rule
case("hg128-box-flood", "garbage", "flood", "4" + "\u2500" * 900, finish="length", completion_tokens=900,
     note="one box-drawing character until max_tokens: a flood, not a rule")

# ---- legitimate look-alikes (label ok)
FUNCS = "".join(f'def f{i}(x: int) -> int:\n    """Step {i}."""\n    return x + {i}\n\n\n' for i in range(10))
case("hk101-code-blank-lines", "ok", "code", "```python\n" + FUNCS + "def total(xs):\n    return sum(xs)\n```",
     question=QCODE, expected=None, min_reply=10, source=RS, note="PEP 8: two blank lines between functions")
case("hk102-code-blank-groups", "ok", "code",
     "```python\nimport math\n\n\n\nTOTAL = 0\n\n\n\n" + "".join(f"def g{i}():\n    pass\n\n\n\n" for i in range(6))
     + "```\n\n\n", question=QCODE, expected=None, min_reply=10, note="three blank lines between groups")


def nest(d: int) -> object:
    return {"value": 4, "child": nest(d - 1)} if d else {"value": 4}


case("hk103-json-deep-indent", "ok", "json", json.dumps({"answer": 4, "tree": nest(9)}, indent=4),
     note="deeply indented JSON: mostly spaces")
POEM = ("Two and two, the lantern said,\nmake four upon the window ledge;\n\nfour birds asleep, four stars "
        "ahead,\nfour stones along the river's edge.\n\n")
case("hk104-poem-stanzas", "ok", "poem", POEM * 2 + "And four, the lantern said again.\n", source=RS,
     note="a poem: short lines, blank lines between stanzas, a repeated stanza")
case("hk105-poem-indented", "ok", "poem",
     "two\n    and two\n        make\n            four\n\n" * 3 + "(the answer is 4)", note="a concrete poem")
case("hk106-box-table", "ok", "box-table",
     "┌─────┬─────┬───────┐\n│  a  │  b  │  a+b  │\n├─────┼─────┼───────┤\n│  2  │  2  │   4   │\n"
     "│  1  │  3  │   4   │\n└─────┴─────┴───────┘\nSo 2 + 2 = 4.", source=RS)
case("hk107-box-table-double", "ok", "box-table",
     "╔══════════╦════════╗\n║ question ║ answer ║\n╠══════════╬════════╣\n║   2+2    ║   4    ║\n"
     "╚══════════╩════════╝")
case("hk108-zh-needles", "ok", "non-english",
     "2加2等于4。文件中提到的访问码依次是：第一号保险库PLOVER-5520，第二号保险库SISKIN-3308。"
     "文件的其余部分是一长串函数说明，每个函数都有参数和返回值，这些内容不会改变上面的结果。",
     lang="zh", question=QN2, needles=N2, completion_tokens=72, source=RS)
case("hk109-ja-summary", "ok", "non-english",
     "この文書は内部関数の長い一覧です。各項目には関数名、引数、戻り値が書かれており、バッファやテンソル、"
     "キューに対して何をするかが説明されています。多くの項目では再試行の回数や段階の番号、例外の種類にも"
     "触れています。全体としては、ある実行環境のリファレンスのように読めます。", lang="ja",
     question="文書を数段落で要約してください。", expected=None, min_reply=40, completion_tokens=105)
case("hk110-th", "ok", "non-english", "สองบวกสองเท่ากับ 4 ครับ ซึ่งเป็นการบวกเลขง่ายๆที่ไม่ต้องใช้ข้อมูลจากเอกสารเลย",
     lang="th", question="2+2 เท่ากับเท่าไร", completion_tokens=30, source=RS, note="Thai: no spaces between words")
case("hk111-rule-heavy", "ok", "unicode-rule", "━" * 32 + "\nResult\n" + "━" * 32 + "\n2 + 2 = 4\n" + "━" * 32,
     source=RS, note="rules drawn with a non-ASCII box-drawing character on lines of their own")
case("hk112-rule-double", "ok", "unicode-rule",
     "Answer\n" + "═" * 40 + "\nTwo plus two is 4.\n\nCheck\n" + "═" * 40 + "\n4 − 2 = 2 ✓")
case("hk113-rule-zh-dash", "ok", "unicode-rule",
     "答案\n" + "—" * 20 + "\n2加2等于4。\n" + "—" * 20 + "\n说明：这是简单的加法。", lang="zh", question=Q4_ZH,
     note="a rule of em dashes, as Chinese text draws them")
case("hk114-rule-ja-marks", "ok", "unicode-rule",
     "【答え】\n＊＊＊＊＊＊＊＊＊＊\n2たす2は4です。\n・・・・・・・・・・\n以上です。", lang="ja", question=Q4_JA,
     note="full-width asterisks and katakana middle dots as separators")
case("hk115-dinkus", "ok", "unicode-rule",
     "The sum of two and two is four.\n\n⁂\n\nIt does not depend on the document.\n\n✦ ✦ ✦ ✦ ✦\n\n"
     "· · · · · · · · · ·\n\nSo: 4.", note="section breaks drawn with dinkus marks")
case("hk116-wave-dash", "ok", "unicode-rule", "〜〜〜〜〜〜〜〜〜〜〜〜\n２たす２は４（4）です。\n〜〜〜〜〜〜〜〜〜〜〜〜",
     lang="ja", question=Q4_JA)
case("hk117-dot-leaders", "ok", "list",
     "Contents\n1. The question ………………………… 1\n2. The answer …………………………… 4\n3. A check . . . . . . . . . . . . . 5\n"
     "\nThe answer is 4.", note="a table of contents with dot leaders")
case("hk118-csv-empty-cells", "ok", "csv",
     "id,answer,note,,,,,\n" + "".join(f"{i},4,,,,,,\n" for i in range(1, 31)), source=RS,
     note="CSV with many empty cells: runs of commas")
case("hk119-table-empty-rows", "ok", "markdown-table",
     "| x | y | x+y |\n|---|---|---|\n| 2 | 2 | 4 |\n" + "| — | — | — |\n" * 10 + "\nOnly the first row is "
     "filled in: 2 + 2 = 4.", note="a table whose empty rows repeat exactly")
case("hk120-sp-explained", "ok", "mentions-markers",
     "SentencePiece marks the start of a word with ▁ (U+2581), so ▁Two ▁plus are two pieces; decoded, they read "
     "'Two plus'. As for the sum: 2 + 2 = 4.", note="a correct reply that talks about the marker")
case("hk121-bpe-explained", "ok", "mentions-markers",
     "In GPT-2's byte-level BPE a leading space is shown as Ġ and a newline as Ċ: 'Ġfour' is ' four'. "
     "And 2 + 2 = 4.")
case("hk122-byte-explained", "ok", "mentions-markers",
     "A byte-fallback tokenizer writes a newline it has no piece for as <0x0A>. The answer is 4.")
case("hk123-pt-upper", "ok", "non-english",
     "A RESPOSTA É 4. INFORMAÇÃO: DOIS MAIS DOIS SÃO QUATRO, EM SÃO PAULO OU NA CONCEIÇÃO.", lang="pt",
     question="Quanto é 2+2?", note="Portuguese capitals: Ã followed by ASCII letters is not mojibake")
case("hk124-vi", "ok", "non-english", "Hai cộng hai bằng 4. Đây là phép cộng đơn giản, không cần đọc tài liệu.",
     lang="vi", question="2 cộng 2 bằng mấy?", source=RS)
case("hk125-ja-fullwidth-indent", "ok", "non-english",
     "\u3000答えは4です。\n\u3000二たす二は四であり、文書の内容はこの結果に影響しません。", lang="ja",
     question=Q4_JA, note="Japanese paragraphs indented with an ideographic space")
LONGSUM = ("The document is a long reference of internal functions. Each entry names a function and its "
           "parameters and says what it does to a buffer, a tensor, a table or a queue. Most functions are short "
           "helpers that are called once per step; a few of them retry a failed operation up to a fixed number of "
           "times and raise an exception when the bound is exceeded. Stage numbers appear in many entries, which "
           "suggests a pipeline that moves data from one module to the next. The return values are mostly counts, "
           "flags or new buffers, and no entry describes any user interface. Taken together the text reads like "
           "the generated reference section of a runtime library, ")
case("hk126-long-cut", "ok", "essay", LONGSUM + "with the same layout repeated for", question=QSUM, expected=None,
     min_reply=40, finish="length", max_tokens=160, completion_tokens=160,
     note="a healthy summary cut by max_tokens")
case("hk127-trailing-newlines", "ok", "terse", "4\n\n\n", completion_tokens=4)
case("hk128-tags-tail", "ok", "tail-list",
     "2 + 2 = 4.\n\nTags: addition, arithmetic, integers, sum, operands, commutativity, identity, parity, doubling, "
     "counting, numbers, base ten, mental math", note="a keyword list after the answer")
case("hk129-see-also-tail", "ok", "tail-list",
     "The answer is 4.\n\nSee also: Addition · Multiplication · Parity · Peano axioms · Successor function · "
     "Natural numbers · Monoid · Group theory")
case("hk130-explanation-tail", "ok", "essay",
     ANS2 + " Both codes appear once in the document, and I copied them exactly as they are written there.",
     question=QN2, needles=N2)
case("hk131-go-tabs", "ok", "code",
     "```go\npackage main\n\n\nimport \"fmt\"\n\n\nfunc total(xs []int) int {\n\ts := 0\n\tfor _, x := range xs {\n"
     "\t\ts += x\n\t}\n\n\treturn s\n}\n\n\nfunc main() {\n\tfmt.Println(total([]int{2, 2}))\n}\n```",
     question=QCODE, expected=None, min_reply=10)
case("hk132-ascii-diagram", "ok", "diagram",
     "       4\n      / \\\n     /   \\\n    2     2\n\n" + " " * 20 + "(sum tree: 2 + 2 = 4)\n", source=RS)
case("hk133-hidden-reasoning", "ok", "terse", "4", completion_tokens=900,
     note="a server that hides the reasoning but counts its tokens: few visible characters, finish stop")
case("hk134-zh-box-table", "ok", "box-table",
     "┌────┬────┐\n│问题│答案│\n├────┼────┤\n│2+2 │ 4  │\n└────┴────┘", lang="zh", question=Q4_ZH)
case("hk135-emoji-zwj", "ok", "emoji", "👨\u200d👩\u200d👧\u200d👦 A family of 4 — 2 + 2 = 4 ✔\ufe0f 4\ufe0f\u20e3",
     note="zero-width joiners and variation selectors inside emoji")
case("hk136-rtl-marks", "ok", "non-english", "\u200fالجواب هو 4.\u200f 2 + 2 = 4", lang="ar",
     question="كم يساوي 2+2؟", note="right-to-left marks (format characters)")
case("hk137-soft-hyphens", "ok", "non-english",
     "2 + 2 ist 4. Die Donau\u00addampf\u00adschiff\u00adfahrts\u00adgesellschaft und die Haft\u00adpflicht"
     "\u00adversicherung haben damit nichts zu tun.", lang="de", question=Q4_DE, note="soft hyphens inside words")
case("hk138-th-zwsp", "ok", "non-english", "สอง\u200bบวก\u200bสอง\u200bเท่ากับ\u200b4\u200bครับ", lang="th",
     question="2+2 เท่ากับเท่าไร", note="Thai words separated by zero-width spaces")
case("hk139-numbered-list", "ok", "list",
     "2 + 2 = 4.\n" + "".join(f"{i}. Vault {i}: code not listed\n" for i in range(3, 13)) + "1. PLOVER-5520\n"
     "2. SISKIN-3308", question=QN2, needles=N2, note="a list whose lines repeat but for the number")


# ---- issue 37: a loop at every granularity (units inside one token, separators of any kind). Units,
# separators and counts differ from tests/reproduce/test_repetition_kind.py; no constant was chosen on them.
case("hg129-subword-loop-nosep", "garbage", "char-loop", "SPACE z has" + "nanosecond" * 31, source=RS,
     expected=None, question=QSUM, min_reply=3,
     note="random-weight model on an H200: one sub-word repeated without a space (issue 37)")
case("hg130-greek-loop-nosep", "garbage", "char-loop", "2 + 2 = 4. " + "Ωμέγα" * 27, lang="el")
case("hg131-slash-loop", "garbage", "char-loop", "The answer is 4. " + "kv/" * 40, finish="length",
     completion_tokens=1000)
case("hg132-tab-loop", "garbage", "char-loop", "4\t" + "xyzzy\t" * 18)
case("hg133-devanagari-danda-loop", "garbage", "char-loop", "2 + 2 = 4। " + "लगभग।" * 26, lang="hi",
     question="2+2 कितना होता है?")
case("hg134-method-chain-loop", "garbage", "char-loop",
     "```python\nx = " + ".ToString()" * 12 + "\n```", question=QCODE, expected=None, min_reply=3,
     finish="length", completion_tokens=60, note="a call chain repeated until max_tokens inside one line")
case("hg135-double-colon-loop", "garbage", "char-loop", "Four. " + "std::" * 33, lang="en")
case("hk140-pi-digits", "ok", "char-loop-lookalike", "2 + 2 = 4, and pi is 3.14159265358979323846.")
case("hk141-hawaiian-fish", "ok", "char-loop-lookalike",
     "2 + 2 = 4. The state fish of Hawaii is the humuhumunukunukuapuaa; the bonbon and the tutu are 4 words "
     "of other kinds.", note="reduplicated words are not loops")
case("hk142-hex-dump", "ok", "char-loop-lookalike",
     "2 + 2 = 4.\n```\n" + "\n".join(f"{i * 16:08x}: " + " ".join(f"{(i * 7 + j) % 256:02x}" for j in range(16))
                                       for i in range(8)) + "\n```")
case("hk143-cjk-reduplication", "ok", "char-loop-lookalike", "2加2等于4。大家高高兴兴，天天向上，常常练习。",
     lang="zh", question=Q4_ZH)


def main() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for p in HERE.glob("h*.json"):
        p.unlink()
    for c in CASES:
        (HERE / f"{c['id']}.json").write_text(json.dumps(c, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    ok = sum(c["label"] == "ok" for c in CASES)
    print(f"wrote {len(CASES)} cases ({ok} ok, {len(CASES) - ok} garbage, "
          f"{sum(c['source'] == RS for c in CASES)} report shapes) to {HERE}")


if __name__ == "__main__":
    main()
