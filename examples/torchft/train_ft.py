"""Data-parallel training as TorchFT replica groups under eto, in the form eto documents.

Run by examples/pytorchjob-torchft.yaml and examples/trainjob/replica-groups.yaml in the image
examples/torchft/Dockerfile builds: every Worker pod (every node) is one replica group
running `torchrun /workspace/train_ft.py`, with eto_notice.py (python/ in eto's repository)
beside it.
What makes a lost group cost the others nothing:

- eto_notice.replica_group() gives the group id (a spare group waits there for one).
- eto_notice.fault_tolerant_ddp() instead of torchft.DistributedDataParallel: a group lost
  while the others wait in an allreduce with it skips their step instead of ending their
  training (torchft 0.2.0's own wrapper ends it: `assert fut._fut`).
- The group leaves between two steps when its pod goes away (SIGTERM, or eto's Reclaim or
  Suspend notice), so that no collective is in flight with it, saving its checkpoint first.
- Every group saves a checkpoint every CHECKPOINT_EVERY steps, and a group that starts loads
  the newest one any group saved: a group replaced while others live heals from them over the
  network, but when every group was lost at once nothing is left to heal from.

The model and data are stand-ins; put yours in build_model() and batches().
"""

import os
import signal
import socket
import sys
import time
from datetime import timedelta

import torch
from torch import nn, optim
from torchft import Manager, Optimizer, ProcessGroupGloo, ProcessGroupNCCL

import eto_notice

TOTAL_STEPS = int(os.environ.get("TOTAL_STEPS", "10000"))
CHECKPOINT_DIR = os.environ.get("CHECKPOINT_DIR", "/checkpoints")
CHECKPOINT_EVERY = int(os.environ.get("CHECKPOINT_EVERY", "100"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))

leaving = []
signal.signal(signal.SIGTERM, lambda *_: leaving.append(time.time()))


def build_model():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))


def batches(group, groups):
    """This group's shard of the data: the group id picks it, so a replacement under the same
    id reads what the lost group read."""
    generator = torch.Generator().manual_seed(group)
    while True:
        yield torch.randn(32, 64, generator=generator)


device = torch.device(f"cuda:{LOCAL_RANK}" if torch.cuda.is_available() else "cpu")
# The slow part first: a spare group does it while it waits for an id.
model = build_model().to(device)
inner = optim.AdamW(model.parameters())
group = eto_notice.replica_group()
if group is None:
    sys.exit(0)  # told to leave while waiting as a spare
groups = int(os.environ["NUM_REPLICA_GROUPS"])


def state_dict():
    return {"model": model.state_dict(), "optim": inner.state_dict()}


def load_state_dict(state):
    model.load_state_dict(state["model"])
    inner.load_state_dict(state["optim"])


if device.type == "cuda":
    pg = ProcessGroupNCCL(timeout=timedelta(seconds=10))
else:
    pg = ProcessGroupGloo(timeout=timedelta(seconds=5))
manager = Manager(
    pg=pg,
    min_replica_size=1,
    load_state_dict=load_state_dict,
    state_dict=state_dict,
    # eto tells a group that stopped heartbeating by the number this id ends with.
    replica_id=f"train_{group}",
    timeout=timedelta(seconds=10),
)


def newest_checkpoint():
    newest = None
    names = os.listdir(CHECKPOINT_DIR) if os.path.isdir(CHECKPOINT_DIR) else []
    for name in sorted(names):
        if name.startswith("group-") and name.endswith(".pt"):
            path = os.path.join(CHECKPOINT_DIR, name)
            state = torch.load(path, map_location=device, weights_only=False)
            if newest is None or state["manager"]["step"] > newest["manager"]["step"]:
                newest = state
    return newest


def save_checkpoint():
    path = os.path.join(CHECKPOINT_DIR, f"group-{group}.pt")
    state = dict(state_dict(), manager=manager.state_dict())
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


with eto_notice.restoring():  # eto counts the load as checkpoint time
    resumed = newest_checkpoint()
if resumed is not None:
    load_state_dict(resumed)
    manager.load_state_dict(resumed["manager"])
    print(f"resumed: group={group} from_step={manager.current_step()}", flush=True)

ddp = eto_notice.fault_tolerant_ddp(manager, model)
optimizer = Optimizer(manager, inner)
data = batches(group, groups)
print(f"start: group={group} host={socket.gethostname()} torch={torch.__version__}", flush=True)
step = manager.current_step()

while manager.current_step() < TOTAL_STEPS:
    # Between two steps: the next step's quorum starts at zero_grad().
    if leaving or not eto_notice.check_alive():
        # eto's notice (a reclaim, a suspend below the minimum) or the SIGTERM before the pod
        # goes: save where this group is, so that a job that loses every group resumes here.
        if LOCAL_RANK == 0 and os.path.isdir(CHECKPOINT_DIR):
            save_checkpoint()
        print(f"leaving: group={group} step={manager.current_step()}", flush=True)
        manager.shutdown(wait=False)
        sys.exit(0)
    optimizer.zero_grad()
    loss = ddp(next(data).to(device)).square().mean()
    loss.backward()
    optimizer.step()  # skipped when a group was lost in this step's allreduce
    if manager.current_step() > step:  # committed (a step lost with a group is trained again)
        # port eto-progress; a change of the quorum's size is a re-formation, not training
        eto_notice.progress(
            manager.current_step(), total=TOTAL_STEPS, members=manager.num_participants()
        )
    step = manager.current_step()
    if LOCAL_RANK == 0 and os.path.isdir(CHECKPOINT_DIR) and step % CHECKPOINT_EVERY == 0:
        save_checkpoint()
    print(
        f"step: group={group} step={step} quorum={manager.num_participants()} "
        f"loss={loss.item():.4f} at={time.time():.2f}",
        flush=True,
    )

print(f"done: group={group} steps={manager.current_step()}", flush=True)
manager.shutdown(wait=False)
