"""Kubeflow's `kubeflow` SDK (TrainerClient) against eto: lists the runtimes, trains a
function with CustomTrainer on two nodes, waits for the TrainJob to complete and reads the
logs of each node. Run by tests/trainer_sdk.rs with the SDK on PYTHONPATH; prints one line
per finding, `sdk-...`, which the Rust test asserts on.

Environment: NAMESPACE, IMAGE (with torchrun), POD_PATCH (JSON: nodeSelector, tolerations).
"""

import json
import os

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainer, TrainerClient
from kubeflow.trainer.options.kubernetes import (
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    PodSpecPatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    TrainingRuntimeSpecPatch,
)


def train_fn():
    import os

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    print(
        f"eto-sdk-train: rank={rank} world={world} sum={int(value.item())} "
        f"node_rank={os.environ['PET_NODE_RANK']}",
        flush=True,
    )
    dist.destroy_process_group()


def main():
    client = TrainerClient(KubernetesBackendConfig(namespace=os.environ["NAMESPACE"]))
    runtimes = sorted(runtime.name for runtime in client.list_runtimes())
    print(f"sdk-runtimes: {','.join(runtimes)}", flush=True)
    runtime = client.get_runtime("torch-distributed")
    print(
        f"sdk-runtime: name={runtime.name} framework={runtime.trainer.framework} "
        f"num_nodes={runtime.trainer.num_nodes}",
        flush=True,
    )
    patch = json.loads(os.environ.get("POD_PATCH") or "{}")
    placement = RuntimePatch(
        training_runtime_spec=TrainingRuntimeSpecPatch(
            template=JobSetTemplatePatch(
                spec=JobSetSpecPatch(
                    replicated_jobs=[
                        ReplicatedJobPatch(
                            name="node",
                            template=JobTemplatePatch(
                                spec=JobSpecPatch(
                                    template=PodTemplatePatch(
                                        spec=PodSpecPatch(
                                            node_selector=patch.get("nodeSelector"),
                                            tolerations=patch.get("tolerations"),
                                        )
                                    )
                                )
                            ),
                        )
                    ]
                )
            )
        )
    )
    name = client.train(
        runtime=runtime,
        trainer=CustomTrainer(func=train_fn, num_nodes=2, image=os.environ["IMAGE"]),
        options=[placement],
    )
    print(f"sdk-submitted: {name}", flush=True)
    job = client.wait_for_job_status(name, status={"Complete"}, timeout=300, polling_interval=2)
    steps = sorted(f"{step.name}={step.status}" for step in job.steps)
    print(f"sdk-complete: {name} status={job.status} steps={','.join(steps)}", flush=True)
    listed = [listed.name for listed in client.list_jobs()]
    print(f"sdk-listed: {name in listed}", flush=True)
    for step in ("node-0", "node-1"):
        for line in client.get_job_logs(name, step=step):
            if "eto-sdk-train:" in line:
                print(f"sdk-log {step}: {line[line.index('eto-sdk-train:'):]}", flush=True)


if __name__ == "__main__":
    main()
