"""A PyTorch DDP training job as users bring it to a HyperPod-style cluster.

One process per rank, launched by `srun` (SLURM_PROCID/SLURM_NTASKS) or by
`torchrun` (RANK/WORLD_SIZE): gloo on CPU, NCCL on GPUs. A small next-character
model over a text file on /fsx; every --save-interval steps rank 0 writes a
checkpoint (model, optimizer, step) atomically to --ckpt-dir, and a restarted
job resumes from the newest one. Each step's batch depends only on (seed,
step), so a resumed run sees the same data as an undisturbed one.

The two goodput lines (hpod_goodput) make `hpod describe-job-goodput` split
each failure into detection, replacement, restart, checkpoint load and steps
re-run; without them hpod reports what the supervisor and the recovery saw.
"""
import argparse
import glob
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import hpod_goodput  # <prefix>/share/hpod/python, or beside this script
except ImportError:
    hpod_goodput = None


def env_int(*names, default=0):
    for n in names:
        if os.environ.get(n):
            return int(os.environ[n])
    return default


class CharModel(nn.Module):
    def __init__(self, vocab, dim, context):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim * context, 4 * dim), nn.GELU(),
                                 nn.Linear(4 * dim, vocab))

    def forward(self, x):
        return self.mlp(self.embed(x).flatten(1))


def latest_checkpoint(ckpt_dir):
    found = sorted(glob.glob(os.path.join(ckpt_dir, "step-*.pt")),
                   key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))
    return found[-1] if found else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="/fsx/data/corpus.txt")
    p.add_argument("--ckpt-dir", default="/fsx/runs/pytorch/checkpoints")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--save-interval", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--context", type=int, default=16)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--log-interval", type=int, default=10)
    args = p.parse_args()

    rank = env_int("RANK", "SLURM_PROCID")
    world = env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
    local_rank = env_int("LOCAL_RANK", "SLURM_LOCALID")
    os.environ.setdefault("MASTER_PORT", "29511")
    if "MASTER_ADDR" not in os.environ:
        sys.exit("train_ddp.py: set MASTER_ADDR (the first node: "
                 "scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.set_num_threads(1)
    t0 = time.time()
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    rendezvous_s = time.time() - t0

    with open(args.data, "rb") as f:
        text = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    torch.manual_seed(args.seed)
    model = CharModel(256, args.dim, args.context).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    step = 0
    t0 = time.time()
    ckpt = latest_checkpoint(args.ckpt_dir)
    if ckpt:
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
    load_s = time.time() - t0 if ckpt else 0.0
    ddp = DDP(model, device_ids=[local_rank] if cuda else None)
    if rank == 0:
        os.makedirs(args.ckpt_dir, exist_ok=True)
    # The supervisor names the ledger under --auto-resume; else it sits beside the
    # checkpoints, as hpod-train's does.
    ledger = hpod_goodput.Ledger(
        path=os.environ.get("HPOD_GOODPUT_FILE") or os.path.join(args.ckpt_dir, "goodput.jsonl"),
        rank=rank) if hpod_goodput else None
    if ledger:
        ledger.start(resumed_step=step, world_size=world, checkpoint_load_s=load_s,
                     rendezvous_s=rendezvous_s)
    if rank == 0:
        print("train_ddp: %d ranks (%s), %s" % (
            world, "nccl" if cuda else "gloo",
            "resumed from %s" % os.path.basename(ckpt) if ckpt else "fresh start"), flush=True)
    loss_fn = nn.CrossEntropyLoss()
    while step < args.steps:
        t = time.time()
        # The batch of (seed, step, rank): the same after a resume.
        g = torch.Generator().manual_seed(args.seed * 1000003 + step * 1009 + rank)
        starts = torch.randint(0, len(text) - args.context - 1, (args.batch_size,), generator=g)
        idx = starts[:, None] + torch.arange(args.context + 1)
        chunk = text[idx].to(device)
        loss = loss_fn(ddp(chunk[:, :-1]), chunk[:, -1])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if ledger:
            ledger.step(step, time.time() - t)
        if rank == 0 and step % args.log_interval == 0:
            print("step %d loss=%.4f" % (step, loss.item()), flush=True)
        if step % args.save_interval == 0 or step == args.steps:
            if rank == 0:
                t = time.time()
                path = os.path.join(args.ckpt_dir, "step-%d.pt" % step)
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                            "step": step}, path + ".tmp")
                os.replace(path + ".tmp", path)  # a checkpoint is whole or absent
                for old in sorted(glob.glob(os.path.join(args.ckpt_dir, "step-*.pt")))[:-2]:
                    if old != path:
                        os.unlink(old)
                if ledger:
                    ledger.checkpoint(step, time.time() - t)
            dist.barrier()
    # Every rank's final loss, averaged: the figure a resumed run must reach too.
    final = loss.detach().clone()
    dist.all_reduce(final)
    if rank == 0:
        print("final_loss=%.6f step=%d" % (final.item() / world, step), flush=True)
    if ledger:
        ledger.end(step)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
