"""Elastic Horovod training under eto, as a user writes it.

The launcher of a TrainingJob runs it (an MPIJob's reads /etc/mpi/discover_hosts.sh instead):

  horovodrun -np 3 --min-np 2 --max-np 4 \
      --host-discovery-script /etc/edl/discover_hosts.sh python3 /opt/eto/train_elastic.py

- Synthetic regression data and a small network; on the CPU with Gloo, or on this process's
  GPU when there is one (Horovod uses NCCL for it when it was built with NCCL).
- `hvd.elastic.run` with a committed `TorchState`: when eto adds or removes a worker in host
  discovery, Horovod re-forms the ring at the next commit and training goes on at the new size.
- A checkpoint every CHECKPOINT_EVERY steps, and when eto posts a notice (see eto_notice.py):
  a `Reclaim` notice (a pod of the job goes away while the job runs on) makes rank 0 save once
  and training goes on; a `Suspend` notice (the whole job stops) makes rank 0 save and every
  rank exit. The ranks all-reduce what they see each step, so they all stop in the same step,
  whichever pod saw the notice first.
- At start every rank loads the latest checkpoint, if there is one: a resumed run (eto's
  `Resume` notice, ETO_RESUME=true) goes on from where the last one saved. The load is marked
  with `eto_notice.restoring()`, and every step is told to eto with `eto_notice.progress()`,
  with the ring's size: the job's goodput ledger (`status.goodput`) then knows which of its
  time trained, and counts the step that took a re-formation of the ring as re-formation
  however quickly Horovod reset.

It prints one line per event, `eto-example: event=<name> key=value ...`, which eto's
end-to-end tests read: start, step (at each commit), reset, checkpoint, stop and done.

Environment: CHECKPOINT_DIR (/checkpoints), TRAIN_STEPS (1000), COMMIT_EVERY (10),
CHECKPOINT_EVERY (50), STEP_SECONDS (0.1: how long a step takes at least, so that a run is
long enough to watch), STEP_LOG (unset: a file to which rank 0 appends a line per step,
`step=<n> at=<unix seconds> who=<host>-<pid>`, and one whenever the ranks re-formed without
restarting, `reset at=<unix seconds> who=<host>-<pid>`: the training's own record of its
progress, against which eto's benchmarks check the job's goodput ledger).
"""

import glob
import os
import socket
import sys
import time

import horovod.torch as hvd
import torch

import eto_notice

CHECKPOINTS = os.environ.get("CHECKPOINT_DIR", "/checkpoints")
TRAIN_STEPS = int(os.environ.get("TRAIN_STEPS", "1000"))
COMMIT_EVERY = int(os.environ.get("COMMIT_EVERY", "10"))
CHECKPOINT_EVERY = int(os.environ.get("CHECKPOINT_EVERY", "50"))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "0.1"))
STEP_LOG = os.environ.get("STEP_LOG")
BASE_LR = 0.01

# How urgent a notice is; the ranks agree on the most urgent any of them sees.
RECLAIM, SUSPEND = 1, 2


def report(event, **fields):
    """One event line; rank 0's only, except where every rank has something to say."""
    values = " ".join(f"{key}={value}" for key, value in fields.items())
    print(f"eto-example: event={event} {values}", flush=True)


def latest_checkpoint():
    paths = sorted(glob.glob(os.path.join(CHECKPOINTS, "step-*.pt")))
    return paths[-1] if paths else None


def save_checkpoint(state, reason):
    """Rank 0 writes the model, the optimizer and the step, atomically."""
    if hvd.rank() != 0:
        return
    os.makedirs(CHECKPOINTS, exist_ok=True)
    path = os.path.join(CHECKPOINTS, f"step-{state.step:08d}.pt")
    partial = f"{path}.partial"
    torch.save(
        {
            "model": state.model.state_dict(),
            "optimizer": state.optimizer.state_dict(),
            "step": state.step,
        },
        partial,
    )
    os.replace(partial, path)
    report("checkpoint", step=state.step, reason=reason, size=hvd.size())


def log_line(head):
    """Appends `head` to the step log, with the time and this process."""
    with open(STEP_LOG, "a") as logged:
        logged.write(f"{head} at={time.time():.3f} who={socket.gethostname()}-{os.getpid()}\n")


def notice_level():
    current = eto_notice.notice()
    kind = current.get("kind") if current else None
    return {"Suspend": SUSPEND, "Reclaim": RECLAIM}.get(kind, 0)


def agreed_notice_level():
    """The most urgent notice any rank sees, the same on every rank."""
    level = notice_level()
    seen = torch.tensor([float(level >= RECLAIM), float(level >= SUSPEND)])
    total = hvd.allreduce(seen, op=hvd.Sum, name="eto.notice")
    if total[1] > 0:
        return SUSPEND
    return RECLAIM if total[0] > 0 else 0


def main():
    torch.set_num_threads(1)
    hvd.init()
    device = "cpu"
    if torch.cuda.is_available():
        torch.cuda.set_device(hvd.local_rank())
        device = "cuda"
    torch.manual_seed(1234)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    true_weights = torch.randn(16, 1, generator=torch.Generator().manual_seed(7)).to(device)

    # Loaded before the elastic state is made: it records the state it is given, and its first
    # sync goes back to that.
    checkpoint = latest_checkpoint()
    step = 0
    if checkpoint is not None:
        with eto_notice.restoring():
            saved = torch.load(checkpoint, map_location=device)
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            step = saved["step"]
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=step)
    report(
        "start",
        rank=hvd.rank(),
        size=hvd.size(),
        step=state.step,
        checkpoint=os.path.basename(checkpoint) if checkpoint else "none",
        resume=str(eto_notice.is_resume()).lower(),
        host=socket.gethostname(),
    )

    def on_reset():
        for group in optimizer.param_groups:
            group["lr"] = BASE_LR * hvd.size()
        if hvd.rank() == 0:
            report("reset", size=hvd.size(), step=state.step)
            if STEP_LOG:
                log_line("reset")

    state.register_reset_callbacks([on_reset])
    # The highest notice level rank 0 has saved for; a notice is saved for once.
    saved_for = {"level": 0}

    @hvd.elastic.run
    def train(state):
        while state.step < TRAIN_STEPS:
            started = time.monotonic()
            level = agreed_notice_level()
            if level > saved_for["level"]:
                saved_for["level"] = level
                save_checkpoint(state, "Suspend" if level == SUSPEND else "Reclaim")
            if level == SUSPEND:
                if hvd.rank() == 0:
                    report("stop", step=state.step, reason="Suspend", size=hvd.size())
                sys.exit(0)
            generator = torch.Generator().manual_seed(state.step * 1000 + hvd.rank())
            inputs = torch.randn(64, 16, generator=generator).to(device)
            targets = inputs @ true_weights
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
            state.step += 1
            eto_notice.progress(state.step, total=TRAIN_STEPS, members=hvd.size())
            if STEP_LOG and hvd.rank() == 0:
                log_line(f"step={state.step}")
            if state.step % CHECKPOINT_EVERY == 0:
                save_checkpoint(state, "periodic")
            if state.step % COMMIT_EVERY == 0:
                average = hvd.allreduce(loss.detach(), name="loss").item()
                if hvd.rank() == 0:
                    report("step", step=state.step, size=hvd.size(), loss=f"{average:.4f}")
                state.commit()
            time.sleep(max(0.0, STEP_SECONDS - (time.monotonic() - started)))

    train(state)
    save_checkpoint(state, "done")
    if hvd.rank() == 0:
        report("done", step=state.step, size=hvd.size())


if __name__ == "__main__":
    main()
