"""An elastic Horovod training loop that checkpoints when eto asks it to.

Run by the launcher of a TrainingJob, for example:

  horovodrun -np 2 --min-np 2 --max-np 8 \
      --host-discovery-script /etc/edl/discover_hosts.sh python train_elastic.py

Before each batch the loop calls eto_notice.check_alive(). When eto posts a notice (the
job is suspending because too few workers are left, or this worker's node is going away),
rank 0 saves a checkpoint and every rank exits. When the job resumes, the new run loads
that checkpoint: eto_notice.is_resume() says so, and the latest checkpoint is loaded
anyway, whichever run this is.
"""

import glob
import os
import sys

import horovod.torch as hvd
import torch

import eto_notice

CHECKPOINTS = os.environ.get("CHECKPOINT_DIR", "/checkpoints")
EPOCHS = 90


def latest_checkpoint():
    paths = sorted(glob.glob(os.path.join(CHECKPOINTS, "epoch-*.pt")))
    return paths[-1] if paths else None


def save_checkpoint(state):
    if hvd.rank() == 0:
        os.makedirs(CHECKPOINTS, exist_ok=True)
        path = os.path.join(CHECKPOINTS, f"epoch-{state.epoch:04d}.pt")
        torch.save(
            {"model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
             "epoch": state.epoch, "batch": state.batch},
            path,
        )


def train(state, loader, loss_fn):
    for state.epoch in range(state.epoch, EPOCHS):
        for state.batch, (data, target) in enumerate(loader):
            if not eto_notice.check_alive():
                # eto suspends the job (or reclaims this node) at eto_notice.deadline().
                save_checkpoint(state)
                sys.exit(0)
            state.optimizer.zero_grad()
            loss = loss_fn(state.model(data), target)
            loss.backward()
            state.optimizer.step()
            if state.batch % 100 == 0:
                state.commit()
        save_checkpoint(state)


def main():
    hvd.init()
    model = torch.nn.Linear(784, 10)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size()),
        named_parameters=model.named_parameters(),
    )
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, epoch=0, batch=0)
    checkpoint = latest_checkpoint()
    if checkpoint is not None:
        saved = torch.load(checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state.epoch = saved["epoch"]
        print(f"loaded {checkpoint}; resumed run: {eto_notice.is_resume()}")
    data = torch.randn(6400, 784)
    target = torch.randint(0, 10, (6400,))
    loader = torch.utils.data.DataLoader(list(zip(data, target)), batch_size=64)
    hvd.elastic.run(train)(state, loader, torch.nn.functional.cross_entropy)


if __name__ == "__main__":
    main()
