"""A small llama-family GGUF written without gguf-py: given key/values (a
vocabulary's tokenizer.* keys) plus the llama hyperparameters amn's GGUF to
Hugging Face conversion needs, token_embd (vocabulary rows of n_embd, F32,
seeded) and output_norm. Used by hf_pre_tokenizers.py and by
fixtures/hf/vocab/gen_pre_fixtures.py."""
import random
import struct

U32, I32, F32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9


def _str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _value(t, v):
    if t == U32:
        return struct.pack("<I", v)
    if t == I32:
        return struct.pack("<i", v)
    if t == F32:
        return struct.pack("<f", v)
    if t == BOOL:
        return struct.pack("<B", 1 if v else 0)
    if t == STRING:
        return _str(v)
    raise ValueError("type %d" % t)


def kv_bytes(key, t, v, elem=None):
    out = _str(key) + struct.pack("<I", t)
    if t == ARRAY:
        out += struct.pack("<IQ", elem, len(v)) + b"".join(_value(elem, x) for x in v)
    else:
        out += _value(t, v)
    return out


def write(path, kvs, n_vocab, n_embd=8, seed=0):
    """kvs: (key, type, value[, elem type]) tuples after the llama keys."""
    head = [("general.architecture", STRING, "llama"), ("general.file_type", U32, 0),
            ("llama.block_count", U32, 0), ("llama.embedding_length", U32, n_embd),
            ("llama.attention.head_count", U32, 1), ("llama.context_length", U32, 64),
            ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)]
    kv = b"".join(kv_bytes(*k) for k in head + list(kvs))
    rng = random.Random(seed)
    embd = struct.pack("<%df" % (n_vocab * n_embd),
                       *(rng.uniform(-1, 1) for _ in range(n_vocab * n_embd)))
    norm = struct.pack("<%df" % n_embd, *([1.0] * n_embd))
    tensors = [("token_embd.weight", (n_embd, n_vocab), embd), ("output_norm.weight", (n_embd,), norm)]
    info, data = b"", b""
    for name, ne, raw in tensors:
        info += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        info += struct.pack("<IQ", 0, len(data))
        data += raw + b"\0" * (-len(raw) % 32)
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(head) + len(kvs)) + kv + info
    out += b"\0" * (-len(out) % 32)
    with open(path, "wb") as f:
        f.write(out + data)


def bpe_gguf(path, tokens, types, merges, pre, n_embd=1):
    """A BPE (gpt2) vocabulary under tokenizer.ggml.pre = pre."""
    kvs = [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, pre),
           ("tokenizer.ggml.tokens", ARRAY, tokens, STRING),
           ("tokenizer.ggml.token_type", ARRAY, types, I32),
           ("tokenizer.ggml.merges", ARRAY, merges, STRING)]
    write(path, kvs, len(tokens), n_embd=n_embd)


def toy_gguf(path, pre):
    """Three tokens and one merge: enough for a tokenizer.json."""
    bpe_gguf(path, ["a", "b", "ab"], [1, 1, 1], ["a b"], pre, n_embd=8)


def tokenizer_json_vocab(tj):
    """A tokenizer.json's vocabulary and merges as GGUF arrays (special
    added tokens control, others user-defined, as the converter types them)."""
    vocab = tj["model"]["vocab"]
    n = max(list(vocab.values()) + [a["id"] for a in tj["added_tokens"]]) + 1
    toks, types = ["[PAD%d]" % i for i in range(n)], [1] * n
    for k, v in vocab.items():
        toks[v] = k
    for a in tj["added_tokens"]:
        toks[a["id"]], types[a["id"]] = a["content"], 3 if a["special"] else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return toks, types, merges


def read_str(path, key):
    """A string key/value of a GGUF (None when absent): enough of the format
    to find one key in amn's own output."""
    with open(path, "rb") as f:
        b = f.read()
    n_kv = struct.unpack_from("<Q", b, 16)[0]
    at = 24
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t, at):
        if t == STRING:
            return at + 8 + struct.unpack_from("<Q", b, at)[0]
        if t == ARRAY:
            et, n = struct.unpack_from("<IQ", b, at)
            at += 12
            if et in sizes:
                return at + n * sizes[et]
            for _ in range(n):
                at = skip(et, at)
            return at
        return at + sizes[t]

    for _ in range(n_kv):
        kl = struct.unpack_from("<Q", b, at)[0]
        k = b[at + 8:at + 8 + kl].decode()
        at += 8 + kl
        t = struct.unpack_from("<I", b, at)[0]
        at += 4
        if k == key and t == STRING:
            n = struct.unpack_from("<Q", b, at)[0]
            return b[at + 8:at + 8 + n].decode("utf-8")
        at = skip(t, at)
    return None
