#!/usr/bin/env python3
"""Write a tiny random-weight LLaMA model in GGUF for the llama-server interop tests.

Usage: make_model.py OUT.gguf [--embd N] [--layers N] [--heads N] [--kv-heads N]
                     [--ff N] [--ctx N] [--seed N] [--f32]

The model is deterministic (numpy's PCG64 seeded with --seed), so the same
arguments give the same bytes. What it holds:

- an SPM ("llama") vocabulary: <unk>, <s> (bos), </s> (eos), the 256 byte
  fallback tokens <0x00>..<0xFF>, "▁", single letters and digits, every
  lowercase letter pair, and a few hundred English words with each of their
  "▁"-prefixed prefixes. A word's prefixes score by length and letter pairs
  below them, so llama.cpp's SPM merge builds each listed word left to right
  into one token; other text falls back to pairs, letters and bytes. The
  words of loadlaw's synthetic prompts are all in the list (about one token
  per word).
- LLaMA weights (f16 matrices, f32 norms): token_embd, output_norm, output,
  and per block attn_norm, attn_q/k/v, attn_output, ffn_norm, ffn_gate/up/down.

The weights are random except for one channel: residual channel 0 holds a
constant in every token's embedding, the blocks neither read it (the
attn_norm and ffn_norm weights are 0 there) nor write it (row 0 of
attn_output and ffn_down is 0), so after output_norm it is a large positive
value at every position. The output rows of the special and byte tokens read
only that channel, with a negative weight, so their logits sit ~100 below the
others: the model never emits eos, control or byte tokens. Every generated
token is then printable ASCII that decodes on its own, and a streaming server
sends one chunk per token (no partial UTF-8 held back, no "<" to start a stop
string or a tag).
"""

import argparse
import os
import sys

import numpy as np

try:
    import gguf
except ImportError:  # the caller installs it; say what is missing
    sys.stderr.write("make_model.py: the gguf package is not importable\n")
    sys.exit(77)

SPACE = "\u2581"  # SentencePiece's word-boundary mark

# loadlaw's synthetic prompt words (scenarios/prompts.c), then common English.
WORDS = """
the model server decode token batch latency kernel memory cache attention request
stream throughput query head layer weight tensor prefill step time scale law fit
profile trace engine answer think about why how when every number grows slowly
quickly measure explain compare write short story river mountain city light
a an and or but if then else of to in on at by for with from as is are was were be
been being have has had do does did not no yes this that these those it its they
them their there here what which who whom whose where while until because so than
too very can could will would shall should may might must one two three four five
six seven eight nine ten first last next new old good great small large long little
big high low right left same other many much more most some any each all both few
own only just also even still again once never always often sometimes now later
before after over under between into through during without within along across
around against up down out off away back then soon today tomorrow yesterday year
day night week month morning evening world life people man woman child children
family friend house home school work job money water fire air earth sun moon star
sky sea ocean lake forest tree flower grass road street car train plane ship boat
door window room table chair book page word letter line name place country state
system program computer data file code test run build start stop open close read
send receive make take give get go come see look find know want need use try call
ask tell say said show keep let put mean seem help turn move live believe bring
happen hold begin end play stand lose pay meet include continue set learn change
lead understand watch follow create speak spend grow offer remember love consider
appear buy wait serve die add expect stay fall reach kill remain suggest raise pass
sell require report decide pull question problem part point fact group case hand
eye face side week company area government information power form level order
value result reason idea story kind force music color voice
""".split()

PUNCT = list(".,;:!?'-()")


def build_vocab():
    """Tokens, scores and types of the SPM vocabulary (see the module doc)."""
    T = gguf.TokenType
    toks, scores, types = [], [], []
    seen = set()

    def add(text, score, ttype):
        if text in seen:
            return
        seen.add(text)
        toks.append(text)
        scores.append(float(score))
        types.append(int(ttype))

    add("<unk>", 0.0, T.UNKNOWN)
    add("<s>", 0.0, T.CONTROL)
    add("</s>", 0.0, T.CONTROL)
    for b in range(256):
        add("<0x%02X>" % b, 0.0, T.BYTE)
    add(SPACE, -1.0, T.NORMAL)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    singles = letters + [c.upper() for c in letters] + [str(d) for d in range(10)] + PUNCT
    for c in singles:
        add(c, -2.0, T.NORMAL)
        add(SPACE + c, 2.0, T.NORMAL)
    # Word prefixes: longer scores higher, so a listed word merges left to
    # right before any letter pair inside it gets the chance.
    for w in WORDS:
        for k in range(2, len(w) + 1):
            add(SPACE + w[:k], float(k + 1), T.NORMAL)
    # Letter pairs for text outside the list: below every word prefix.
    for a in letters:
        for b in letters:
            add(a + b, -10.0, T.NORMAL)
    return toks, scores, types


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=12)
    ap.add_argument("--ff", type=int, default=2048)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--f32", action="store_true", help="f32 matrices (default f16)")
    a = ap.parse_args()
    if a.embd % a.heads or a.heads % a.kv_heads:
        ap.error("--embd must be a multiple of --heads, and --heads of --kv-heads")

    rng = np.random.Generator(np.random.PCG64(a.seed))
    wdt = np.float32 if a.f32 else np.float16
    d, f, hd = a.embd, a.ff, a.embd // a.heads
    dkv = hd * a.kv_heads
    toks, scores, types = build_vocab()
    V = len(toks)
    n_blocked = 3 + 256  # specials and bytes: never generated

    def mat(rows, cols, std):
        # numpy shape (rows, cols) = GGUF ne (cols, rows): rows are outputs.
        return (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(wdt)

    w = gguf.GGUFWriter(a.out + ".tmp", "llama")
    w.add_name("loadlaw-interop-tiny-llama")
    w.add_description("random weights for load tests; its text means nothing")
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if a.f32 else gguf.LlamaFileType.MOSTLY_F16)
    w.add_vocab_size(V)
    w.add_context_length(a.ctx)
    w.add_embedding_length(d)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(f)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)

    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)

    # Embeddings: unit-variance channels 1.., channel 0 a constant sqrt(d).
    emb = rng.standard_normal((V, d), dtype=np.float32)
    emb[:, 0] = np.sqrt(d)
    w.add_tensor("token_embd.weight", emb.astype(wdt))

    norm_in = np.ones(d, dtype=np.float32)
    norm_in[0] = 0.0  # the blocks never see channel 0
    for i in range(a.layers):
        p = "blk.%d." % i
        w.add_tensor(p + "attn_norm.weight", norm_in.copy())
        w.add_tensor(p + "attn_q.weight", mat(d, d, 1.0 / np.sqrt(d)))
        w.add_tensor(p + "attn_k.weight", mat(dkv, d, 1.0 / np.sqrt(d)))
        w.add_tensor(p + "attn_v.weight", mat(dkv, d, 1.0 / np.sqrt(d)))
        wo = mat(d, d, 0.5 / np.sqrt(d))
        wo[0, :] = 0  # nor write it
        w.add_tensor(p + "attn_output.weight", wo)
        w.add_tensor(p + "ffn_norm.weight", norm_in.copy())
        w.add_tensor(p + "ffn_gate.weight", mat(f, d, 1.0 / np.sqrt(d)))
        w.add_tensor(p + "ffn_up.weight", mat(f, d, 1.0 / np.sqrt(d)))
        down = mat(d, f, 0.5 / np.sqrt(f))
        down[0, :] = 0
        w.add_tensor(p + "ffn_down.weight", down)

    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    out = mat(V, d, 2.0 / np.sqrt(d))
    out[:, 0] = 0
    out[:n_blocked, :] = 0
    out[:n_blocked, 0] = -10.0  # channel 0 after output_norm is ~+10: logit ~ -100
    w.add_tensor("output.weight", out)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(a.out + ".tmp", a.out)
    nparam = V * d * 2 + a.layers * (2 * d * d + 2 * dkv * d + 3 * d * f)
    print("%s: vocab %d, embd %d, layers %d, heads %d/%d, ff %d, ctx %d, %.1fM params (%s)"
          % (a.out, V, d, a.layers, a.heads, a.kv_heads, f, a.ctx, nparam / 1e6,
             "f32" if a.f32 else "f16"))


if __name__ == "__main__":
    main()
