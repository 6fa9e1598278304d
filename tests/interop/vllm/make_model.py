#!/usr/bin/env python3
"""Write a small random-weight Llama in Hugging Face format for the vLLM interop test.

Usage: make_model.py OUT_DIR [--embd N] [--layers N] [--heads N] [--kv-heads N]
                     [--ff N] [--vocab N] [--ctx N] [--seed N]

The default size, 24.6M parameters (100 MB in float32), makes vLLM's CPU
backend on one core take ~9 ms per decode step at N = 1 and ~30 ms at N = 16:
the step is then mostly the model's arithmetic and memory traffic, not
Python's per-step overhead, which on a 2-core machine shared with other work
moved a 5.5M-parameter model's 3-8 ms steps by 10-20% from level to level.

OUT_DIR gets config.json, generation_config.json, model.safetensors (float32),
tokenizer.json and tokenizer_config.json (with a chat template): what
`vllm serve OUT_DIR` loads with HF_HUB_OFFLINE=1. Run it with the Python of
scripts/vllm_env.sh (numpy, safetensors and tokenizers come with vLLM).

The tokenizer is a byte-level BPE trained with the `tokenizers` package on
text already on the machine: loadlaw's synthetic prompt words
(scenarios/prompts.c, repeated so that each becomes one token) and Debian's
license texts (/usr/share/common-licenses, where present). Training and
weights are deterministic (numpy's PCG64 seeded with --seed), so the same
machine gives the same model on every run.

The weights are random except for one channel, as in ../make_model.py:
residual channel 0 holds a constant in every token's embedding, the blocks
neither read it (the input and post-attention norms are 0 there) nor write
it (row 0 of o_proj and down_proj is 0), so after the final norm it is a
large positive value at every position. The lm_head rows of the tokens the
model must never emit read only that channel, with a negative weight, so
their logits sit ~100 below the others. The model may emit only whole
words (a space, then letters; a token the tokenizer makes of its own
text), so:
- each generated token is text on its own: vLLM streams one chunk per
  token and never holds back an incomplete UTF-8 character, and no end of
  sequence (a special token) cuts a request short;
- the output's text tokenizes back into the ids decode chose, so
  `loadlaw check-decode`, which sends the text back as a prompt, can score
  every request (with sub-word tokens a random model's outputs re-tokenize
  differently in ~9 requests of 10).
"""

import argparse
import json
import os
import re
import sys

try:
    import numpy as np
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError as e:  # the caller runs it with vLLM's environment
    sys.stderr.write("make_model.py: %s (run it with scripts/vllm_env.sh's python)\n" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS_C = os.path.join(HERE, "..", "..", "..", "scenarios", "prompts.c")
LICENSES = "/usr/share/common-licenses"
SPECIALS = ["<s>", "</s>", "<|im_start|>", "<|im_end|>"]
# ChatML: the opening the server's prefix cache sees in every request.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def corpus():
    """The training text: the prompt words many times, then the licenses."""
    text = []
    try:
        with open(PROMPTS_C) as f:
            src = f.read()
        m = re.search(r"k_vocab\[\]\s*=\s*\{(.*?)\};", src, re.S)
        words = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    except OSError:
        words = []
    if words:
        text.extend([" ".join(words)] * 200)
    if os.path.isdir(LICENSES):
        for name in sorted(os.listdir(LICENSES)):
            p = os.path.join(LICENSES, name)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, errors="replace") as f:
                    text.append(f.read())
    if not text:
        sys.exit("make_model.py: no training text (neither %s nor %s)" % (PROMPTS_C, LICENSES))
    return text


def train_tokenizer(vocab):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def blocked_ids(tok):
    """Ids of every token but whole words: a space, then letters, a token
    that the tokenizer makes of its own text. The pre-tokenizer splits text
    at each such space, so any run of them tokenizes back into the same ids."""
    word = re.compile(r" [A-Za-z]+")
    out = []
    for i in range(tok.get_vocab_size()):
        text = tok.decode([i], skip_special_tokens=False)
        if not word.fullmatch(text) or tok.encode(text).ids != [i]:
            out.append(i)
    return out


def write_tokenizer(tok, out, ctx):
    tok.save(os.path.join(out, "tokenizer.json"))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
           "pad_token": "</s>", "model_max_length": ctx, "clean_up_tokenization_spaces": False,
           "chat_template": CHAT_TEMPLATE}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def weights(a, V, blocked, rng):
    """The Llama tensors by their Hugging Face names (rows are outputs)."""
    d, f, hd = a.embd, a.ff, a.embd // a.heads
    dkv = hd * a.kv_heads

    def mat(rows, cols, std):
        return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std)

    t = {}
    emb = rng.standard_normal((V, d), dtype=np.float32)
    emb[:, 0] = np.sqrt(d)  # the constant channel
    t["model.embed_tokens.weight"] = emb
    norm_in = np.ones(d, dtype=np.float32)
    norm_in[0] = 0.0  # the blocks never see channel 0
    for i in range(a.layers):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = norm_in.copy()
        t[p + "self_attn.q_proj.weight"] = mat(d, d, 1.0 / np.sqrt(d))
        t[p + "self_attn.k_proj.weight"] = mat(dkv, d, 1.0 / np.sqrt(d))
        t[p + "self_attn.v_proj.weight"] = mat(dkv, d, 1.0 / np.sqrt(d))
        wo = mat(d, d, 0.5 / np.sqrt(d))
        wo[0, :] = 0  # nor write it
        t[p + "self_attn.o_proj.weight"] = wo
        t[p + "post_attention_layernorm.weight"] = norm_in.copy()
        t[p + "mlp.gate_proj.weight"] = mat(f, d, 1.0 / np.sqrt(d))
        t[p + "mlp.up_proj.weight"] = mat(f, d, 1.0 / np.sqrt(d))
        down = mat(d, f, 0.5 / np.sqrt(f))
        down[0, :] = 0
        t[p + "mlp.down_proj.weight"] = down
    t["model.norm.weight"] = np.ones(d, dtype=np.float32)
    head = mat(V, d, 2.0 / np.sqrt(d))
    head[:, 0] = 0
    head[blocked, :] = 0
    head[blocked, 0] = -10.0  # channel 0 after the final norm is ~+10: logit ~ -100
    t["lm_head.weight"] = head
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--embd", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--ff", type=int, default=1536)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    if a.embd % a.heads or a.heads % a.kv_heads:
        ap.error("--embd must be a multiple of --heads, and --heads of --kv-heads")
    os.makedirs(a.out, exist_ok=True)

    tok = train_tokenizer(a.vocab)
    V = tok.get_vocab_size()
    blocked = blocked_ids(tok)
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    write_tokenizer(tok, a.out, a.ctx)
    rng = np.random.Generator(np.random.PCG64(a.seed))
    t = weights(a, V, blocked, rng)
    save_file(t, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
           "hidden_size": a.embd, "intermediate_size": a.ff, "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
           "head_dim": a.embd // a.heads, "max_position_embeddings": a.ctx,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": False, "torch_dtype": "float32",
           "bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"]}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"]}, f)
    nparam = sum(v.size for v in t.values())
    print("%s: vocab %d (%d never emitted), embd %d, layers %d, heads %d/%d, ff %d, ctx %d, "
          "%.1fM params (float32)" % (a.out, V, len(blocked), a.embd, a.layers, a.heads,
                                      a.kv_heads, a.ff, a.ctx, nparam / 1e6))


if __name__ == "__main__":
    main()
