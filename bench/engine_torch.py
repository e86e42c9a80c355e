"""PyTorch CPU reference for bench/engine.ts: the same Llama-style decoder (RMSNorm, RoPE with
HF rotate_half, GQA, SwiGLU, tied embeddings; Qwen2's QKV bias, Qwen3's per-head q/k RMSNorm,
Llama 3's RoPE frequency scaling), the same SFT train step (forward, backward,
torch.optim.AdamW) and the same batched greedy decode with a KV cache, at a given thread count.

Usage: /usr/bin/python3 bench/engine_torch.py '<json>' (config with HF names, threads,
train {batch, length, prompt?}, lora? {rank, alpha, target_modules}); then one JSON request per
stdin line, {"op": "train", "steps": n} or {"op": "decode", "batch", "prompt", "new"}, each
answered by one line {"rate": tokens/s, "seconds": wall seconds}. With train.prompt, each row is
`prompt` tokens then `length` response tokens and only the response is in the loss (logits are
computed at the response positions only, as HF's logits_to_keep). With lora, the base weights
are frozen and each target projection gets a LoRA adapter (PEFT's init: A Kaiming-uniform, B = 0);
AdamW holds the adapters only.
`--logits` (JSON on stdin: config, params by HF name, ids) prints float64 reference logits; the
model tests use it as an independent check of the ONNX decoder.
"""
import json
import math
import struct
import sys
import time

import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight, self.eps = torch.nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_inv_freq(c):
    """RoPE inverse frequencies (D/2,), float64: theta^(-2i/D) (RoFormer eq. 15), then Llama 3.1's
    scaling when c["rope_scaling"] has rope_type "llama3": wavelengths above L/low_freq_factor
    are divided by factor, below L/high_freq_factor kept, and linearly blended in between on
    s = (L/wavelength - low) / (high - low) (L = original_max_position_embeddings)."""
    hd = c["head_dim"]
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    r = c.get("rope_scaling")
    if not r:
        return inv
    assert r["rope_type"] == "llama3"
    big_l, lo, hi, factor = (r["original_max_position_embeddings"], r["low_freq_factor"],
                             r["high_freq_factor"], r["factor"])
    wavelen = 2 * math.pi / inv
    s = ((big_l / wavelen - lo) / (hi - lo)).clamp(0.0, 1.0)  # 0 below the band, 1 above
    blended = (1 - s) * inv / factor + s * inv
    out = torch.where(wavelen < big_l / hi, inv, blended)
    return torch.where(wavelen > big_l / lo, inv / factor, out)


class Decoder(torch.nn.Module):
    """Llama/Qwen2/Qwen3 decoder whose state_dict keys are Hugging Face's (model.layers.0.…)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        d, f, eps = c["hidden_size"], c["intermediate_size"], c["rms_norm_eps"]
        self.h, self.hkv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        bias = c["attention_bias"]
        self.qk_norm = c.get("architecture") == "Qwen3ForCausalLM"
        self.model = torch.nn.Module()
        self.model.embed_tokens = torch.nn.Embedding(c["vocab_size"], d)
        self.model.layers = torch.nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = torch.nn.Module()
            layer.input_layernorm = RMSNorm(d, eps)
            layer.self_attn = torch.nn.Module()
            layer.self_attn.q_proj = torch.nn.Linear(d, self.h * self.hd, bias=bias)
            layer.self_attn.k_proj = torch.nn.Linear(d, self.hkv * self.hd, bias=bias)
            layer.self_attn.v_proj = torch.nn.Linear(d, self.hkv * self.hd, bias=bias)
            layer.self_attn.o_proj = torch.nn.Linear(self.h * self.hd, d, bias=False)
            if self.qk_norm:  # Qwen3: one RMSNorm over each head's channels
                layer.self_attn.q_norm = RMSNorm(self.hd, eps)
                layer.self_attn.k_norm = RMSNorm(self.hd, eps)
            layer.post_attention_layernorm = RMSNorm(d, eps)
            layer.mlp = torch.nn.Module()
            layer.mlp.gate_proj = torch.nn.Linear(d, f, bias=False)
            layer.mlp.up_proj = torch.nn.Linear(d, f, bias=False)
            layer.mlp.down_proj = torch.nn.Linear(f, d, bias=False)
            self.model.layers.append(layer)
        self.model.norm = RMSNorm(d, eps)
        if not c["tie_word_embeddings"]:
            self.lm_head = torch.nn.Linear(d, c["vocab_size"], bias=False)
        self.register_buffer("inv_freq", rope_inv_freq(c).float(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def rope(self, x, pos):  # x (B, h, T, D), pos (B, T); HF rotate_half convention
        ang = pos[:, None, :, None].to(self.inv_freq.dtype) * self.inv_freq  # (B, 1, T, D/2)
        cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
        x1, x2 = x.chunk(2, -1)
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def forward(self, ids, pos, past=None, key_mask=None, logits_to_keep=0):
        """ids, pos (B, T); past: per layer (k, v) (B, Hkv, P, D); key_mask (B, P+T) bool;
        logits_to_keep > 0: logits of the last that many positions only (B, logits_to_keep, V)."""
        b, t = ids.shape
        x = self.model.embed_tokens(ids)
        present = []
        for i, l in enumerate(self.model.layers):
            at = l.self_attn
            a = l.input_layernorm(x)
            q = at.q_proj(a).view(b, t, self.h, self.hd)
            k = at.k_proj(a).view(b, t, self.hkv, self.hd)
            if self.qk_norm:  # before RoPE
                q, k = at.q_norm(q), at.k_norm(k)
            q = self.rope(q.transpose(1, 2), pos)
            k = self.rope(k.transpose(1, 2), pos)
            v = at.v_proj(a).view(b, t, self.hkv, self.hd).transpose(1, 2)
            if past is not None:
                k, v = torch.cat([past[i][0], k], 2), torch.cat([past[i][1], v], 2)
            present.append((k, v))
            g = self.h // self.hkv  # HF repeat_kv: query head j uses KV head j // g
            kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            s = q @ kk.transpose(-1, -2) / math.sqrt(self.hd)  # (B, H, T, K)
            kl = k.shape[2]
            mask = torch.ones(t, kl, dtype=torch.bool).tril(kl - t)[None, None]
            if key_mask is not None:
                mask = mask & key_mask[:, None, None, :]
            s = s.masked_fill(~mask, -1e9)
            o = (s.softmax(-1) @ vv).transpose(1, 2).reshape(b, t, -1)
            x = x + at.o_proj(o)
            m = l.post_attention_layernorm(x)
            x = x + l.mlp.down_proj(F.silu(l.mlp.gate_proj(m)) * l.mlp.up_proj(m))
        if logits_to_keep > 0:
            x = x[:, -logits_to_keep:]  # (B, K, C)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.c["tie_word_embeddings"] else self.lm_head.weight
        return x @ head.T, present


class LoraLinear(torch.nn.Module):
    """PEFT's LoRA forward on a linear layer: base(x) + (alpha / r) * (x @ A^T) @ B^T."""

    def __init__(self, base, a, b, scale):
        super().__init__()
        self.base, self.a, self.b, self.scale = base, a, b, scale

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.a.T) @ self.b.T


def add_lora(model, lora):
    """Freezes `model` and wraps each target projection of every layer with a trainable adapter
    (A (r, in) Kaiming-uniform a=sqrt(5), B (out, r) zeros, as PEFT); returns the adapter params."""
    for p in model.parameters():
        p.requires_grad_(False)
    scale, adapters = lora["alpha"] / lora["rank"], []
    for layer in model.model.layers:
        for name in lora["target_modules"]:
            parent = layer.mlp if name in ("gate_proj", "up_proj", "down_proj") else layer.self_attn
            base = getattr(parent, name)
            a = torch.nn.Parameter(torch.empty(lora["rank"], base.in_features))
            torch.nn.init.kaiming_uniform_(a, a=math.sqrt(5))
            b = torch.nn.Parameter(torch.zeros(base.out_features, lora["rank"]))
            setattr(parent, name, LoraLinear(base, a, b, scale))
            adapters += [a, b]
    return adapters


def read_safetensors(path):
    """An F32 safetensors file -> {name: float64 tensor} (header: u64 length + JSON; raw data)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", f"{name}: {t['dtype']}"
        start, end = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[start:end]), dtype=torch.float32).view(t["shape"]).double()
    return out


def apply_peft_adapter(model, folder):
    """Wraps every linear named in a PEFT LoRA folder (adapter_config.json, adapter_model.safetensors
    with base_model.model.<module>.lora_A/B.weight names) with its adapter, as PEFT's LoraModel does."""
    with open(f"{folder}/adapter_config.json") as f:
        cfg = json.load(f)
    assert cfg["peft_type"] == "LORA" and cfg["bias"] == "none", cfg
    scale = cfg["lora_alpha"] / cfg["r"]
    tensors = read_safetensors(f"{folder}/adapter_model.safetensors")
    prefix, suffix = "base_model.model.", ".lora_A.weight"
    for name, a in tensors.items():
        if not name.endswith(suffix):
            continue
        path = name[len(prefix):-len(suffix)]  # e.g. model.layers.0.self_attn.q_proj
        assert path.rsplit(".", 1)[1] in cfg["target_modules"], path
        parent, attr = path.rsplit(".", 1)
        module = model.get_submodule(parent)
        b = tensors[name.replace(".lora_A.", ".lora_B.")]
        setattr(module, attr, LoraLinear(getattr(module, attr), a, b, scale))


def reference_logits(spec):
    """{config, params: {hf name: flat list}, ids: [[...]], adapter?: PEFT folder path} -> logits
    (B, T, V) as nested lists (with the LoRA adapter applied when a folder is given)."""
    torch.set_num_threads(1)
    model = Decoder(spec["config"]).double()
    model.inv_freq = rope_inv_freq(spec["config"])  # float64 (.double() keeps buffers' values)
    state = {k: torch.tensor(v, dtype=torch.float64).view(p.shape) for k, v in spec["params"].items()
             for p in [model.state_dict()[k]]}
    model.load_state_dict(state, strict=True)
    if spec.get("adapter"):
        apply_peft_adapter(model, spec["adapter"])
    ids = torch.tensor(spec["ids"])
    pos = torch.arange(ids.shape[1])[None].expand(ids.shape[0], -1)
    with torch.no_grad():
        logits, _ = model(ids, pos)
    return logits.tolist()


def main():
    if sys.argv[1] == "--logits":
        print(json.dumps(reference_logits(json.load(sys.stdin))))
        return
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    c = spec["config"]
    model = Decoder(c)
    tr = spec["train"]
    trainable = add_lora(model, spec["lora"]) if spec.get("lora") else list(model.parameters())
    opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.01)
    prompt, length = tr.get("prompt", 0), tr["length"]
    ids = torch.randint(3, c["vocab_size"], (tr["batch"], prompt + length + (0 if prompt else 1)))
    pos = torch.arange(ids.shape[1] - 1)[None].expand(tr["batch"], -1)

    def train_step():
        # with a prompt: the last `length` positions predict the response (prompt ids[P:])
        logits, _ = model(ids[:, :-1], pos, logits_to_keep=length if prompt else 0)
        targets = ids[:, -length:] if prompt else ids[:, 1:]
        loss = F.cross_entropy(logits.reshape(-1, c["vocab_size"]), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def generate(batch, prompt_len, new):
        prompt = torch.randint(3, c["vocab_size"], (batch, prompt_len))
        with torch.no_grad():
            p = torch.arange(prompt_len)[None].expand(batch, -1)
            logits, past = model(prompt, p)
            tok = logits[:, -1].argmax(-1, keepdim=True)
            for i in range(new - 1):
                logits, past = model(tok, torch.full((batch, 1), prompt_len + i), past)
                tok = logits[:, -1].argmax(-1, keepdim=True)

    # One measurement per request line, so the caller can interleave ours and torch's runs.
    print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "train":
            t0 = time.perf_counter()
            for _ in range(req["steps"]):
                train_step()
            seconds = time.perf_counter() - t0
            rate = tr["batch"] * tr["length"] * req["steps"] / seconds
        else:
            t0 = time.perf_counter()
            generate(req["batch"], req["prompt"], req["new"])
            seconds = time.perf_counter() - t0
            rate = req["batch"] * req["new"] / seconds
        print(json.dumps({"rate": rate, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
