#!/usr/bin/python3
"""PyTorch peer of hpod-train for bench/train_bench.py: the llama2.c "15M" Llama
in plain PyTorch 1.13 (Debian's python3-torch; run it with /usr/bin/python3),
fp32, random tokens, timed like hpod-train (warm-up steps left out).

Model (training-building-blocks.md section 8, as llama2.c's model.py): dim 288,
6 layers, 6 heads (head_dim 48), vocab 4096, SwiGLU hidden 768, tied
embedding/classifier, RMSNorm eps 1e-5, RoPE theta 10000 in HF's rotate_half
convention (as hpod-train), causal attention with an explicit -inf mask (1.13
has no fused SDPA), no biases; init N(0, 0.02), wo/w3 N(0, 0.02/sqrt(2L)).
AdamW lr 5e-4, betas (0.9, 0.95), weight decay 0.1, gradient clipping to global
norm 1.0 (hpod-train's default, --grad-clip 0 turns it off); seq 256, batch 8.

Threads: --threads N sets torch.set_num_threads(N) (torch's OpenMP pool for the
elementwise ops); OpenBLAS, which PyTorch 1.13 calls for every matmul through
libblas.so.3, takes its thread count from OPENBLAS_NUM_THREADS, read once at
load, so the driver sets it before python starts (section 3: torch 2 + OpenBLAS
1 is the best 2-thread setting; 2 + 2 oversubscribes 2 vCPUs).

Prints one JSON line: tokens_per_s, ms_per_step (mean over timed steps) and
the fwd/bwd/optimizer split, the settings, the losses.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    dim = 288
    n_layers = 6
    n_heads = 6
    vocab_size = 4096
    hidden_dim = 768  # int(2 * 4 * dim / 3) rounded up to a multiple of 32
    norm_eps = 1e-5
    rope_theta = 10000.0
    max_seq_len = 256


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, seq_len, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    freqs = torch.outer(torch.arange(seq_len).float(), inv)  # [T, hd/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # HF: the halves share a frequency
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads = c.n_heads
        self.head_dim = c.dim // c.n_heads
        self.wq = nn.Linear(c.dim, c.dim, bias=False)
        self.wk = nn.Linear(c.dim, c.dim, bias=False)
        self.wv = nn.Linear(c.dim, c.dim, bias=False)
        self.wo = nn.Linear(c.dim, c.dim, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # As llama2.c's model.py does on its non-flash path.
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores + mask[:, :, :t, :t]
        scores = F.softmax(scores.float(), dim=-1).type_as(q)
        out = torch.matmul(scores, v)
        return self.wo(out.transpose(1, 2).contiguous().view(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.w1 = nn.Linear(c.dim, c.hidden_dim, bias=False)
        self.w2 = nn.Linear(c.hidden_dim, c.dim, bias=False)
        self.w3 = nn.Linear(c.dim, c.hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.feed_forward = FeedForward(c)
        self.attention_norm = RMSNorm(c.dim, c.norm_eps)
        self.ffn_norm = RMSNorm(c.dim, c.norm_eps)

    def forward(self, x, cos, sin, mask):
        h = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_embeddings = nn.Embedding(c.vocab_size, c.dim)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.dim, c.norm_eps)
        self.output = nn.Linear(c.dim, c.vocab_size, bias=False)
        self.output.weight = self.tok_embeddings.weight  # tied
        cos, sin = rope_tables(c.dim // c.n_heads, c.max_seq_len, c.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.full((1, 1, c.max_seq_len, c.max_seq_len), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("w3.weight") or name.endswith("wo.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, tokens, targets):
        t = tokens.shape[1]
        h = self.tok_embeddings(tokens)
        cos, sin = self.cos[:t], self.sin[:t]
        for layer in self.layers:
            h = layer(h, cos, sin, self.mask)
        logits = self.output(self.norm(h))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def matmul_params(c):
    per_layer = 4 * c.dim * c.dim + 3 * c.dim * c.hidden_dim
    return c.n_layers * per_layer + c.dim * c.vocab_size


def flops_per_token(c, seq_len):
    # 6 * matmul parameters + 6 * L * T * d (attention scores and values),
    # as section 8 counts (45.6 MFLOP/token for the 15M shape at T = 256).
    return 6 * matmul_params(c) + 6 * c.n_layers * seq_len * c.dim


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads(N)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="steps before timing")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0 = off")
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    c = Config()
    model = Transformer(c)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.95),
                            weight_decay=0.1, eps=1e-8)
    n_params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator().manual_seed(args.seed)
    b, t = args.batch_size, args.seq_len

    losses, fwd, bwd, upd, step_s = [], [], [], [], []
    for i in range(args.warmup + args.steps):
        # Random tokens, a fresh batch each step (as --data synthetic).
        seq = torch.randint(0, c.vocab_size, (b, t + 1), generator=gen)
        x, y = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        t0 = time.perf_counter()
        loss = model(x, y)
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        t3 = time.perf_counter()
        losses.append(loss.item())
        if i >= args.warmup:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            upd.append(t3 - t2)
            step_s.append(t3 - t0)

    total = sum(step_s)
    tokens = b * t * len(step_s)
    fpt = flops_per_token(c, t)
    out = {
        "tokens_per_s": tokens / total if total > 0 else None,
        "ms_per_step": 1e3 * total / len(step_s) if step_s else None,
        "fwd_ms": 1e3 * sum(fwd) / max(1, len(fwd)),
        "bwd_ms": 1e3 * sum(bwd) / max(1, len(bwd)),
        "opt_ms": 1e3 * sum(upd) / max(1, len(upd)),
        "min_ms_per_step": 1e3 * min(step_s) if step_s else None,
        "steps": len(step_s),
        "warmup": args.warmup,
        "tokens_per_step": b * t,
        "torch_threads": torch.get_num_threads(),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "num_params": n_params,
        "flops_per_token": fpt,
        "gflops_per_s": fpt * tokens / total / 1e9 if total > 0 else None,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "torch": torch.__version__,
        "grad_clip": args.grad_clip,
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
