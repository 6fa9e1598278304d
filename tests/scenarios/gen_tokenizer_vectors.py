#!/usr/bin/env python3
"""gen_tokenizer_vectors.py: regenerate the tokenizer test data (not run by the tests).

Trains a small byte-level BPE tokenizer.json with the reference `tokenizers`
package (pip install tokenizers): a Llama-3-style Split regex pre-tokenizer
(\\p{L} / \\p{N} classes, contractions, lookahead) followed by ByteLevel, a
ByteLevel decoder and one added special token. Writes, next to this script:
  data/tokenizer.json          merges as [a, b] pairs (tokenizers >= 0.20)
  data/tokenizer_legacy.json   the same model with merges as "a b" strings
  data/tokenizer_vectors.json  [{"text": ..., "ids": [...]}] from the reference
test_tokenizer.c requires identical ids for every text from both files.
"""
import json
import os
import random

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
SPECIAL = "<|endoftext|>"
# Llama 3's pre-tokenizer pattern (the kind DeepSeek and Qwen use too).
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# The words scenarios/prompts.c draws synthetic prompts from, plus some others.
WORDS = ("the model server decode token batch latency kernel memory cache attention request "
         "stream throughput query head layer weight tensor prefill step time scale law fit "
         "profile trace engine answer think about why how when every number grows slowly "
         "quickly measure explain compare write short story river mountain city light "
         "it's don't they're we've I'm you'll he'd café naïve résumé").split()


def corpus():
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randint(3, 20)
        s = " ".join(rng.choice(WORDS) for _ in range(n))
        if rng.random() < 0.3:
            s += ", %d." % rng.randint(0, 99999)
        if rng.random() < 0.2:
            s += "\n\n"
        yield s.capitalize()


def texts():
    return [
        "",
        "hello",
        "the model server decodes a batch of tokens",
        "Hello, world! How are you?",
        "The answer is 42.",
        "1234567890 and 3.14159",
        "  leading spaces",
        "trailing spaces   ",
        "a    b\t\tc",
        "line one\nline two\n\nline four\r\n",
        "\n\n\n",
        "it's don't they're we've I'm you'll he'd",
        "IT'S DON'T THEY'RE",
        "café naïve résumé Ünïcödé",
        "日本語のテキスト",
        "中文 和 English 混合",
        "emoji 🙂🚀 test 👨‍👩‍👧",
        "special " + SPECIAL + " in the middle",
        SPECIAL,
        SPECIAL + SPECIAL + "x",
        "<|endoftext",
        "punctuation!!! ??? ... --- ***",
        "x=1; y=[2,3]; z={'a': 4}",
        "def f(x):\n    return x + 1\n",
        "tabs\tand\ttabs",
        "mixed123numbers456abc",
        "    ",
        " ",
        "Ελληνικά και русский текст",
        "measure throughput and latency every step of the prefill",
    ]


def main():
    os.makedirs(DATA, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, special_tokens=[SPECIAL],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    path = os.path.join(DATA, "tokenizer.json")
    tok.save(path)
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    # The older form of the same merges, as many published tokenizer.json files have.
    j["model"]["merges"] = [m if isinstance(m, str) else m[0] + " " + m[1] for m in j["model"]["merges"]]
    with open(os.path.join(DATA, "tokenizer_legacy.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    ref = Tokenizer.from_file(path)
    vec = []
    for t in texts():
        ids = ref.encode(t, add_special_tokens=False).ids
        assert ref.decode(ids, skip_special_tokens=False) == t, t
        vec.append({"text": t, "ids": ids})
    with open(os.path.join(DATA, "tokenizer_vectors.json"), "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(v, ensure_ascii=False) for v in vec) + "\n]\n")
    print("merges:", len(j["model"]["merges"]), "vocab:", len(j["model"]["vocab"]), "texts:", len(vec))


if __name__ == "__main__":
    main()
