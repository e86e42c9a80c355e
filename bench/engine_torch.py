"""PyTorch CPU reference for bench/engine.ts: the same Llama-style decoder (RMSNorm, RoPE with
HF rotate_half, GQA, SwiGLU, tied embeddings), the same SFT train step (forward, backward,
torch.optim.AdamW) and the same batched greedy decode with a KV cache, at a given thread count.

Usage: /usr/bin/python3 bench/engine_torch.py '<json>' where json has config (HF names),
threads, train {batch, length, steps}, decode [{batch, prompt, new}], repeats.
Prints one JSON object with tokens/s per measurement.
"""
import json
import math
import sys
import time

import torch
import torch.nn.functional as F


class Decoder(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, f = c["hidden_size"], c["intermediate_size"]
        self.h, self.hkv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.embed = torch.nn.Embedding(c["vocab_size"], d)
        self.layers = torch.nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = torch.nn.Module()
            layer.ln1 = torch.nn.Parameter(torch.ones(d))
            layer.q = torch.nn.Linear(d, self.h * self.hd, bias=c["attention_bias"])
            layer.k = torch.nn.Linear(d, self.hkv * self.hd, bias=c["attention_bias"])
            layer.v = torch.nn.Linear(d, self.hkv * self.hd, bias=c["attention_bias"])
            layer.o = torch.nn.Linear(self.h * self.hd, d, bias=False)
            layer.ln2 = torch.nn.Parameter(torch.ones(d))
            layer.gate = torch.nn.Linear(d, f, bias=False)
            layer.up = torch.nn.Linear(d, f, bias=False)
            layer.down = torch.nn.Linear(f, d, bias=False)
            self.layers.append(layer)
        self.norm = torch.nn.Parameter(torch.ones(d))
        inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.register_buffer("inv_freq", inv)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"]) * w

    def rope(self, x, pos):  # x (B, h, T, D), pos (B, T)
        ang = pos[:, None, :, None].float() * self.inv_freq  # (B, 1, T, D/2)
        cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
        x1, x2 = x.chunk(2, -1)
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def forward(self, ids, pos, past=None):  # ids (B, T); past: list of (k, v) (B, Hkv, P, D)
        b, t = ids.shape
        x = self.embed(ids)
        present = []
        for i, l in enumerate(self.layers):
            a = self.rms(x, l.ln1)
            q = self.rope(l.q(a).view(b, t, self.h, self.hd).transpose(1, 2), pos)
            k = self.rope(l.k(a).view(b, t, self.hkv, self.hd).transpose(1, 2), pos)
            v = l.v(a).view(b, t, self.hkv, self.hd).transpose(1, 2)
            if past is not None:
                k, v = torch.cat([past[i][0], k], 2), torch.cat([past[i][1], v], 2)
            present.append((k, v))
            g = self.h // self.hkv
            kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            s = q @ kk.transpose(-1, -2) / math.sqrt(self.hd)  # (B, H, T, K)
            kl = k.shape[2]
            mask = torch.ones(t, kl, dtype=torch.bool).tril(kl - t)
            s = s.masked_fill(~mask, -1e9)
            o = (s.softmax(-1) @ vv).transpose(1, 2).reshape(b, t, -1)
            x = x + l.o(o)
            m = self.rms(x, l.ln2)
            x = x + l.down(F.silu(l.gate(m)) * l.up(m))
        return self.rms(x, self.norm) @ self.embed.weight.T, present


def main():
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    c = spec["config"]
    model = Decoder(c)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "train": [], "decode": {}}

    tr = spec["train"]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    ids = torch.randint(3, c["vocab_size"], (tr["batch"], tr["length"] + 1))
    pos = torch.arange(tr["length"])[None].expand(tr["batch"], -1)

    def step():
        logits, _ = model(ids[:, :-1], pos)
        loss = F.cross_entropy(logits.reshape(-1, c["vocab_size"]), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()
    for _ in range(spec["repeats"]):
        t0 = time.perf_counter()
        for _ in range(tr["steps"]):
            step()
        out["train"].append(tr["batch"] * tr["length"] * tr["steps"] / (time.perf_counter() - t0))

    with torch.no_grad():
        for d in spec["decode"]:
            prompt = torch.randint(3, c["vocab_size"], (d["batch"], d["prompt"]))

            def gen():
                p = torch.arange(d["prompt"])[None].expand(d["batch"], -1)
                logits, past = model(prompt, p)
                tok = logits[:, -1].argmax(-1, keepdim=True)
                for i in range(d["new"] - 1):
                    logits, past = model(tok, torch.full((d["batch"], 1), d["prompt"] + i), past)
                    tok = logits[:, -1].argmax(-1, keepdim=True)

            gen()
            rates = []
            for _ in range(spec["repeats"]):
                t0 = time.perf_counter()
                gen()
                rates.append(d["batch"] * d["new"] / (time.perf_counter() - t0))
            out["decode"][str(d["batch"])] = rates
    print(json.dumps(out))


if __name__ == "__main__":
    main()
