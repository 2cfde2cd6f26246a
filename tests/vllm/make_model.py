"""Make the lane's tiny random-weight Llama model (runs in the lane venv: torch, transformers, tokenizers).

    python make_model.py TEXT_FILE OUT_DIR [--attn-scale S]

A byte-level BPE tokenizer (8192 tokens) is trained on ``TEXT_FILE`` (local text: no download),
and a ``LlamaForCausalLM`` (hidden 256, 4 layers, 4 heads, head_dim 64, ``max_position_embeddings``
131072) gets seeded random weights; the query and key projections are multiplied by ``S`` (default 6)
so attention is sharp and content-addressed -- the greedy continuation then depends on which
earlier tokens a position can see, which makes a prefill bug visible to a reference comparison.
The chat template lives in ``tokenizer_config.json``. Writes ``OUT_DIR`` (about 9 MB, bfloat16).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
VOCAB = 8192


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--attn-scale", type=float, default=6.0)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([a.text], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 131072
    fast.save_pretrained(out)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = CHAT_TEMPLATE  # older transformers write it to chat_template.jinja only
    cfg_path.write_text(json.dumps(cfg, indent=1))

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, head_dim=64,
                         max_position_embeddings=131072, rope_theta=500000.0, bos_token_id=1, eos_token_id=2,
                         tie_word_embeddings=False, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(a.attn_scale)
            layer.self_attn.k_proj.weight.mul_(a.attn_scale)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))


if __name__ == "__main__":
    main()
