"""Independent PyTorch reference of the vision tower + projector (SigLIP's vision transformer
with HF parameter names, LLaVA's projector), for tests/workers/model/vision_torch_test.ts.

stdin: JSON {config (DecoderConfig with vision_config), params {name: flat list}, images
[{width, height, rgb: [bytes]}]}. stdout: JSON (N*P, D) image embeddings, float64.
Resize: F.interpolate(mode="nearest-exact") (PIL-style centre sampling); the patch embedding
is the stride-p Conv2d SigLIP uses.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
spec = json.load(sys.stdin)
c = spec["config"]
v = c["vision_config"]
p = {k: torch.tensor(x, dtype=torch.float64) for k, x in spec["params"].items()}
shapes = {
    "vision_tower.embeddings.patch_embedding.weight": (
        v["hidden_size"], v["num_channels"], v["patch_size"], v["patch_size"]),
    "vision_tower.embeddings.position_embedding.weight": (-1, v["hidden_size"]),
}


def w(name):
    t = p[name]
    return t.reshape(shapes[name]) if name in shapes else t


def act(x, name):
    if name == "gelu_pytorch_tanh":
        return F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu(x)
    return x * torch.sigmoid(1.702 * x)


def linear(x, name):
    bias = w(name + ".bias")
    return F.linear(x, w(name + ".weight").reshape(bias.shape[0], -1), bias)


def ln(x, name):
    return F.layer_norm(x, x.shape[-1:], w(name + ".weight"), w(name + ".bias"), v["layer_norm_eps"])


s = v["image_size"]
pixels = []
for img in spec["images"]:
    t = torch.tensor(img["rgb"], dtype=torch.float64).reshape(img["height"], img["width"], 3)
    t = t.permute(2, 0, 1).unsqueeze(0)  # (1, 3, H, W)
    t = F.interpolate(t, size=(s, s), mode="nearest-exact")
    pixels.append(t / 127.5 - 1)
x = torch.cat(pixels)  # (N, 3, S, S)
x = F.conv2d(x, w("vision_tower.embeddings.patch_embedding.weight"),
             w("vision_tower.embeddings.patch_embedding.bias"), stride=v["patch_size"])
x = x.flatten(2).transpose(1, 2)  # (N, P, Dv)
x = x + w("vision_tower.embeddings.position_embedding.weight")
n, np_, dv = x.shape
h = v["num_attention_heads"]
e = dv // h
for i in range(v["num_hidden_layers"]):
    pre = f"vision_tower.encoder.layers.{i}"
    a = ln(x, pre + ".layer_norm1")
    q, k, vv = (linear(a, f"{pre}.self_attn.{m}_proj").reshape(n, np_, h, e).transpose(1, 2)
                for m in ("q", "k", "v"))
    att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(e), dim=-1)
    o = (att @ vv).transpose(1, 2).reshape(n, np_, dv)
    x = x + linear(o, pre + ".self_attn.out_proj")
    m = ln(x, pre + ".layer_norm2")
    x = x + linear(act(linear(m, pre + ".mlp.fc1"), v["hidden_act"]), pre + ".mlp.fc2")
x = ln(x, "vision_tower.post_layernorm")
y = linear(act(linear(x, "multi_modal_projector.linear_1"), v["projector_hidden_act"]),
           "multi_modal_projector.linear_2")
json.dump(y.reshape(n * np_, -1).tolist(), sys.stdout)
