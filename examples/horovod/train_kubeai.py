"""Training code written for Alibaba's elastic training (ACK, Arena), run under eto unchanged.

It is the loop of Alibaba's own example: `kubeai.init()` after `hvd.init()`, the latest
checkpoint restored at start, and before every batch `kubeai.check_alive()`; when it turns
False, save a checkpoint and `sys.exit(-1)`. The pods opt in to eto's stop signal with the
annotation `job-supervisor.kube-ai.io/managed-by-job-supervisor: "true"`: when eto posts a
`Suspend` or `Reclaim` notice it sends `GET /stop` to port 9009, where `kubeai.init()`
listens in each training process (see eto's README, "Coming from ACK").

  horovodrun -np 3 --min-np 2 --max-np 4 \
      --host-discovery-script /etc/edl/discover_hosts.sh python3 /opt/eto/train_kubeai.py

Prints the same `eto-example: event=...` lines as train_elastic.py (start, step, reset,
checkpoint, stop, done), and takes the same environment.
"""

import glob
import os
import socket
import sys
import time

import horovod.torch as hvd
import kubeai.elastic as kubeai
import torch

CHECKPOINTS = os.environ.get("CHECKPOINT_DIR", "/checkpoints")
TRAIN_STEPS = int(os.environ.get("TRAIN_STEPS", "1000"))
COMMIT_EVERY = int(os.environ.get("COMMIT_EVERY", "10"))
CHECKPOINT_EVERY = int(os.environ.get("CHECKPOINT_EVERY", "50"))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "0.1"))


def report(event, **fields):
    values = " ".join(f"{key}={value}" for key, value in fields.items())
    print(f"eto-example: event={event} {values}", flush=True)


def save_checkpoint(state, reason):
    if hvd.rank() != 0:
        return
    os.makedirs(CHECKPOINTS, exist_ok=True)
    path = os.path.join(CHECKPOINTS, f"step-{state.step:08d}.pt")
    torch.save(
        {"model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
         "step": state.step},
        f"{path}.partial",
    )
    os.replace(f"{path}.partial", path)
    report("checkpoint", step=state.step, reason=reason, size=hvd.size())


def main():
    torch.set_num_threads(1)
    hvd.init()
    # Serves the stop signal on 0.0.0.0:9009 in this process.
    kubeai.init()
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    true_weights = torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
    # Restore the latest checkpoint, before the elastic state records the state it starts from.
    paths = sorted(glob.glob(os.path.join(CHECKPOINTS, "step-*.pt")))
    step = 0
    if paths:
        saved = torch.load(paths[-1])
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=step)
    report("start", rank=hvd.rank(), size=hvd.size(), step=state.step,
           checkpoint=os.path.basename(paths[-1]) if paths else "none",
           host=socket.gethostname())

    def on_reset():
        if hvd.rank() == 0:
            report("reset", size=hvd.size(), step=state.step)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.step < TRAIN_STEPS:
            started = time.monotonic()
            # Before every batch: is this training still wanted?
            if kubeai.check_alive() == False:  # noqa: E712 (the SDK's documented form)
                save_checkpoint(state, "kubeai")
                if hvd.rank() == 0:
                    report("stop", step=state.step, reason="kubeai", size=hvd.size())
                sys.exit(-1)
            generator = torch.Generator().manual_seed(state.step * 1000 + hvd.rank())
            inputs = torch.randn(64, 16, generator=generator)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), inputs @ true_weights)
            loss.backward()
            optimizer.step()
            state.step += 1
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
