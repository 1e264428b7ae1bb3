# The PyTorch twin of bench/torch-speed.ts: the same GPT-2 (learned positions, pre-LN, gelu_new,
# tied head) from the same model.safetensors, timed on the same work. Reads one JSON spec on
# stdin, prints one JSON line. Written for Debian's torch 1.13 (no safetensors package, no SDPA).
import json, math, struct, sys, time
import torch
import torch.nn.functional as F

spec = json.load(sys.stdin)
torch.set_num_threads(spec['threads'])
D, L, NH, V, EPS = spec['n_embd'], spec['n_layer'], spec['n_head'], spec['vocab'], spec['eps']
HD = D // NH


def load_safetensors(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == '__metadata__':
            continue
        assert t['dtype'] == 'F32', (name, t['dtype'])
        a, b = t['data_offsets']
        buf = bytearray(raw[8 + n + a:8 + n + b])
        out[name.removeprefix('transformer.')] = torch.frombuffer(buf, dtype=torch.float32).view(t['shape']).clone()
    return out


W = {k: torch.nn.Parameter(v) for k, v in load_safetensors(spec['weights']).items()}


def attention(x, l, past):
    B, T, _ = x.shape
    p = f'h.{l}.attn.'
    qkv = torch.addmm(W[p + 'c_attn.bias'], x.reshape(B * T, D), W[p + 'c_attn.weight'])  # Conv1D
    q, k, v = (t.reshape(B, T, NH, HD).transpose(1, 2) for t in qkv.split(D, -1))
    if past is not None:
        k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
    a = (q @ k.transpose(-2, -1)) / math.sqrt(HD)
    if T > 1:  # prefill / training: causal over the new positions (decode prompts are unpadded)
        S = k.shape[2]
        a = a.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(S - T + 1), float('-inf'))
    y = (a.softmax(-1) @ v).transpose(1, 2).reshape(B * T, D)
    return torch.addmm(W[p + 'c_proj.bias'], y, W[p + 'c_proj.weight']).view(B, T, D), (k, v)


def forward(ids, past=None):
    B, T = ids.shape
    start = 0 if past is None else past[0][0].shape[2]
    x = W['wte.weight'][ids] + W['wpe.weight'][start:start + T]
    presents = []
    for l in range(L):
        p = f'h.{l}.'
        h = F.layer_norm(x, (D,), W[p + 'ln_1.weight'], W[p + 'ln_1.bias'], EPS)
        y, kv = attention(h, l, None if past is None else past[l])
        presents.append(kv)
        x = x + y
        h = F.layer_norm(x, (D,), W[p + 'ln_2.weight'], W[p + 'ln_2.bias'], EPS).reshape(B * T, D)
        h = F.gelu(torch.addmm(W[p + 'mlp.c_fc.bias'], h, W[p + 'mlp.c_fc.weight']), approximate='tanh')
        x = x + torch.addmm(W[p + 'mlp.c_proj.bias'], h, W[p + 'mlp.c_proj.weight']).view(B, T, D)
    x = F.layer_norm(x, (D,), W['ln_f.weight'], W['ln_f.bias'], EPS)
    return x @ W['wte.weight'].T, presents


def timed(fn, repeats):
    fn()  # warm-up
    secs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        secs.append(time.perf_counter() - t0)
    s, m = sorted(secs), len(secs) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2  # bench/probe.ts's median


def score(ids):
    with torch.inference_mode():
        logits, _ = forward(ids)
        return F.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def decode(prompts, new):
    """Greedy with a KV cache; each token's logprob too (what akbe's decoder returns)."""
    with torch.inference_mode():
        logits, past = forward(prompts)
        out = []
        for i in range(new):
            lp = F.log_softmax(logits[:, -1], -1)
            nxt = lp.argmax(-1, keepdim=True)
            out.append(nxt)
            if i + 1 < new:
                logits, past = forward(nxt, past)
        return torch.cat(out, 1)


score_ids = torch.tensor(spec['score_ids'])
result = {'score_s': timed(lambda: score(score_ids), spec['repeats']),
          'score_logprobs': score(score_ids).reshape(-1).tolist()}
check = torch.tensor(spec['check_prompts'])
with torch.inference_mode():
    result['check_logits'] = forward(check)[0][:, -1].reshape(-1).tolist()
result['check_tokens'] = decode(check, spec['new']).tolist()
result['decode_s'] = {}
for b in spec['batches']:
    prompts = torch.tensor(spec['prompts'][:b])
    result['decode_s'][str(b)] = timed(lambda: decode(prompts, spec['new']), spec['repeats'])

train_ids = torch.tensor(spec['train_ids'])
adv = torch.tensor([1.0 if b % 2 else -1.0 for b in range(train_ids.shape[0])])[:, None]
opt = torch.optim.AdamW(W.values(), lr=1e-4, weight_decay=0.01)


def train_step():
    logits, _ = forward(train_ids)
    logp = F.log_softmax(logits[:, :-1], -1).gather(-1, train_ids[:, 1:, None]).squeeze(-1)
    loss = -(logp * adv).mean()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(W.values(), 1.0)
    opt.step()


result['train_s'] = timed(train_step, spec['repeats'])
print(json.dumps(result))
