#!/usr/bin/python3
"""Dumps the golden reference for hpod-train's Llama (llm.c's test_gpt2 idea).

Run with Debian's PyTorch:  /usr/bin/python3 tests/golden/llama_golden.py
Writes src/train/model/testdata/llama_golden.{json,bin}. The model below is a
plain-PyTorch transcription of Hugging Face's LlamaForCausalLM (RMSNorm,
rotate_half RoPE, grouped-query causal attention with an explicit -inf mask,
SwiGLU), written independently of the C++ code it checks. For each tiny config
it records: initial weights (ParamSpecs order, HF names), a batch, logits,
loss, every parameter gradient, and 10 AdamW steps (warmup + cosine lr, weight
decay on 2-D parameters only, clip_grad_norm_) of losses, gradient norms and
the final weights. Everything is fp32; the .bin is little-endian float32 and
the JSON index gives each tensor's offset (in floats) and shape.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "src", "train", "model", "testdata")

CONFIGS = [
    # Grouped-query attention (2 query heads per kv head), untied classifier.
    dict(name="gqa_untied", dim=48, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=96,
         hidden_dim=128, rope_theta=10000.0, norm_eps=1e-5, max_seq_len=16,
         tied_embeddings=False, batch=3, seq_len=12, seed=1234, max_norm=1.0),
    # Plain multi-head attention, tied embedding/classifier; a small clip
    # threshold so clip_grad_norm_ actually scales every step.
    dict(name="mha_tied", dim=32, n_layers=2, n_heads=4, n_kv_heads=4, vocab_size=64,
         hidden_dim=48, rope_theta=500000.0, norm_eps=1e-6, max_seq_len=8,
         tied_embeddings=True, batch=2, seq_len=8, seed=4321, max_norm=0.05),
]
TRAIN = dict(steps=10, warmup=3, max_lr=1e-3, min_lr=1e-4, beta1=0.9, beta2=0.95, eps=1e-8,
             weight_decay=0.1)


def param_shapes(c):
    """(name, shape) in hpod's ParamSpecs order."""
    hd = c["dim"] // c["n_heads"]
    q_dim, kv_dim = c["n_heads"] * hd, c["n_kv_heads"] * hd
    out = [("model.embed_tokens.weight", (c["vocab_size"], c["dim"]))]
    for l in range(c["n_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (c["dim"],)),
                (p + "self_attn.q_proj.weight", (q_dim, c["dim"])),
                (p + "self_attn.k_proj.weight", (kv_dim, c["dim"])),
                (p + "self_attn.v_proj.weight", (kv_dim, c["dim"])),
                (p + "self_attn.o_proj.weight", (c["dim"], q_dim)),
                (p + "post_attention_layernorm.weight", (c["dim"],)),
                (p + "mlp.gate_proj.weight", (c["hidden_dim"], c["dim"])),
                (p + "mlp.up_proj.weight", (c["hidden_dim"], c["dim"])),
                (p + "mlp.down_proj.weight", (c["dim"], c["hidden_dim"]))]
    out.append(("model.norm.weight", (c["dim"],)))
    if not c["tied_embeddings"]:
        out.append(("lm_head.weight", (c["vocab_size"], c["dim"])))
    return out


def init_params(c):
    g = torch.Generator().manual_seed(c["seed"])
    params = {}
    for name, shape in param_shapes(c):
        if len(shape) == 1:
            # Gains near 1 but not 1, so the norm-gain gradients are exercised.
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        else:
            std = 0.02
            if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                std = 0.02 / math.sqrt(2 * c["n_layers"])
            t = std * torch.randn(shape, generator=g)
        params[name] = t.float().requires_grad_(True)
    return params


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(c, p, tokens):
    B, T = tokens.shape
    hd = c["dim"] // c["n_heads"]
    H, KV = c["n_heads"], c["n_kv_heads"]
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()  # (T, hd)
    mask = torch.full((T, T), float("-inf")).triu(1)

    x = F.embedding(tokens, p["model.embed_tokens.weight"])
    for l in range(c["n_layers"]):
        pre = f"model.layers.{l}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], c["norm_eps"])
        q = F.linear(h, p[pre + "self_attn.q_proj.weight"]).view(B, T, H, hd).transpose(1, 2)
        k = F.linear(h, p[pre + "self_attn.k_proj.weight"]).view(B, T, KV, hd).transpose(1, 2)
        v = F.linear(h, p[pre + "self_attn.v_proj.weight"]).view(B, T, KV, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd) + mask
        att = torch.softmax(att.float(), dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, H * hd)
        x = x + F.linear(o, p[pre + "self_attn.o_proj.weight"])
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], c["norm_eps"])
        m = F.silu(F.linear(h, p[pre + "mlp.gate_proj.weight"])) * F.linear(
            h, p[pre + "mlp.up_proj.weight"])
        x = x + F.linear(m, p[pre + "mlp.down_proj.weight"])
    x = rms_norm(x, p["model.norm.weight"], c["norm_eps"])
    w_out = p["model.embed_tokens.weight"] if c["tied_embeddings"] else p["lm_head.weight"]
    return F.linear(x, w_out)


def lr_at(step):
    t = TRAIN
    if step < t["warmup"]:
        return t["max_lr"] * (step + 1) / t["warmup"]
    if step >= t["steps"]:
        return t["min_lr"]
    ratio = (step - t["warmup"]) / (t["steps"] - t["warmup"])
    return t["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (t["max_lr"] - t["min_lr"])


class Blob:
    def __init__(self):
        self.chunks, self.size, self.index = [], 0, {}

    def add(self, key, t):
        t = t.detach().float().clone().contiguous()  # snapshot: params train in place
        self.index[key] = {"offset": self.size, "shape": list(t.shape)}
        self.chunks.append(t.reshape(-1))
        self.size += t.numel()


def dump_config(c, blob):
    torch.manual_seed(c["seed"])
    p = init_params(c)
    names = [n for n, _ in param_shapes(c)]
    g = torch.Generator().manual_seed(c["seed"] + 1)
    data = torch.randint(0, c["vocab_size"], (c["batch"], c["seq_len"] + 1), generator=g)
    tokens, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    pre = c["name"] + "/"
    for n in names:
        blob.add(pre + "param/" + n, p[n])

    logits = forward(c, p, tokens)
    loss = F.cross_entropy(logits.view(-1, c["vocab_size"]), targets.view(-1))
    loss.backward()
    blob.add(pre + "logits", logits.view(-1, c["vocab_size"]))
    for n in names:
        blob.add(pre + "grad/" + n, p[n].grad)

    params = [p[n] for n in names]
    decay = [p[n] for n in names if p[n].dim() >= 2]
    no_decay = [p[n] for n in names if p[n].dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": TRAIN["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=TRAIN["max_lr"], betas=(TRAIN["beta1"], TRAIN["beta2"]),
                            eps=TRAIN["eps"], foreach=False)
    losses, norms, lrs = [], [], []
    for step in range(TRAIN["steps"]):
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(forward(c, p, tokens).view(-1, c["vocab_size"]), targets.view(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, c["max_norm"])
        lr = lr_at(step)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        losses.append(loss.item())
        norms.append(norm.item())
        lrs.append(lr)
    for n in names:
        blob.add(pre + "final/" + n, p[n])

    cfg = {k: c[k] for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                             "hidden_dim", "rope_theta", "norm_eps", "max_seq_len",
                             "tied_embeddings")}
    return {"name": c["name"], "config": cfg, "batch": c["batch"], "seq_len": c["seq_len"],
            "max_norm": c["max_norm"], "tokens": tokens.reshape(-1).tolist(),
            "targets": targets.reshape(-1).tolist(), "loss": losses[0], "losses": losses,
            "grad_norms": norms, "lrs": lrs, "param_names": names}


def main():
    torch.set_num_threads(1)
    blob = Blob()
    configs = [dump_config(c, blob) for c in CONFIGS]
    index = {
        "format": "hpod llama golden v1: little-endian float32 .bin; tensors[key] = "
                  "{offset (floats), shape}; keys <config>/{param,grad,final}/<HF name>, "
                  "<config>/logits",
        "generator": f"tests/golden/llama_golden.py, torch {torch.__version__}",
        "train": TRAIN,
        "tolerance": (
            "fp32 on both sides, different summation orders (GEMM blocking, lane-split "
            "reductions, polynomial exp): logits and gradients |ours - torch| <= "
            "1e-5*max|torch tensor| + 1e-4*|torch| per element; loss and the 10 step losses "
            "1e-5 absolute; grad norms 1e-4 relative; final weights 5e-5 absolute (AdamW "
            "moves a weight ~lr per step whatever its gradient, so near-zero gradients turn "
            "rounding noise into step-sized differences; see golden_test.cc)"),
        "configs": configs,
        "tensors": blob.index,
    }
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "llama_golden.bin"), "wb") as f:
        data = torch.cat(blob.chunks).numpy().astype("<f4")
        f.write(data.tobytes())
    with open(os.path.join(OUT_DIR, "llama_golden.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    for c in configs:
        print(f"{c['name']}: loss {c['loss']:.6f} -> {c['losses'][-1]:.6f}, "
              f"grad norms {c['grad_norms'][0]:.4f}..{c['grad_norms'][-1]:.4f}", file=sys.stderr)
    print(f"{blob.size * 4} bytes of tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
