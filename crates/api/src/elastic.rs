//! eto's elastic settings, which every kind it serves takes in its `elasticPolicy`.
//
// Doc comments on items in this module become CRD descriptions and so `kubectl explain`
// text: they are written for users. Developer notes belong in `//` comments. What a field
// means beyond this for one kind is added to that kind's schema by its module
// (`descriptions::extend`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How eto waits for, replaces, suspends and resumes a job's workers, shared by every kind:
/// "the minimum" below is the fewest workers the job runs with, and "the launcher" the pod
/// whose end is the run's. A kind whose fields mean more for it says so in its own schema
/// (see the kinds' modules).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ElasticPolicy {
    /// Seconds the job may wait for the minimum of ready workers before its launcher
    /// starts (counted from the start of the job, or of the run after a restart). When they
    /// are not ready by then, the job fails with reason `WaitingResourceTimeout` and a message
    /// with the ready, pending and needed counts, and its pods are deleted. Workers above the
    /// minimum never count against it: they may stay pending, the job runs without them and
    /// they join as they become ready. Defaults to the value of the
    /// `job-supervisor.kube-ai.io/max-wait-time` annotation (Arena's `--max-wait-time`); when
    /// neither is set, or either is 0, the job waits as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_wait_seconds: Option<i32>,

    /// Whether a running job whose ready workers stay below the minimum for
    /// `belowMinSeconds` is suspended: eto posts a checkpoint notice, waits
    /// `checkpointGraceSeconds` or until the launcher exits, deletes the launcher and the
    /// workers (the launcher exiting meanwhile is part of the suspend, not a failure), and asks
    /// for new workers at once; once the minimum of them are ready a new launcher
    /// resumes the training from its checkpoint. Workers lost for certain (their pods
    /// disrupted, deleted, or gone with their nodes) that leave too few get the notice at
    /// once, without `belowMinSeconds`. A launcher that fails while the job is below its
    /// minimum, before or after the notice, completes the suspend too: no failure, no
    /// restart counted. When false the job keeps running with fewer workers, as Horovod
    /// allows, and a launcher failure is a failure. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_below_min_workers: Option<bool>,

    /// Seconds ready workers may stay below the minimum (a flapping pod, a replacement
    /// about to start, a NotReady node) before a running job is suspended; not waited when
    /// workers lost for certain take it below. Defaults to 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub below_min_seconds: Option<i32>,

    /// Seconds the training processes get to write a checkpoint after eto posts a suspend
    /// notice, before their pods are deleted (earlier if the launcher exits). Defaults to 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub checkpoint_grace_seconds: Option<i32>,

    /// Whether eto also sends every pod of the job the stop signal of Alibaba's `kubeai` SDK
    /// when it posts the pod a `Suspend` or `Reclaim` notice: `GET /stop` on `kubeaiPort`,
    /// after which the SDK's `kubeai.check_alive()` returns false, so that training code
    /// written for ACK's elastic training checkpoints unchanged. Sent once per pod and notice,
    /// through the API server's pod proxy, to running pods only; the notice file is written
    /// either way, and the suspend never waits for an answer. A pod opts in by itself with
    /// the annotation `job-supervisor.kube-ai.io/managed-by-job-supervisor: "true"` on its
    /// template. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeai_stop: Option<bool>,

    /// The port the `kubeai` SDK listens on in the training processes, for its stop signal
    /// (see `kubeaiStop`). Defaults to 9009, the SDK's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub kubeai_port: Option<i32>,

    /// Seconds a worker removed from a running job (by a ScaleIn, or by lowering
    /// its replicas) is given to leave the training gracefully. It leaves host discovery
    /// at once, so Horovod takes it out at its next commit and re-forms the ring without it
    /// instead of seeing a crash; its pod is deleted when this time is over, when the pod has
    /// stopped by itself, or when the launcher is no longer running, whichever comes first.
    /// Workers that were not in host discovery yet are deleted at once. Defaults to 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub drain_seconds: Option<i32>,

    /// Seconds during which a node where a worker of the job failed (its containers exited
    /// with an error; not an eviction, a disruption or a deletion) is avoided by the job's new
    /// workers. Each worker created while nodes are in cooldown gets a preferred node affinity
    /// term of weight 100 with `matchFields` `metadata.name NotIn [those nodes]`: the scheduler
    /// places it elsewhere when another node fits, and on a node in cooldown when none does, so
    /// a worker never waits only for a cooldown to end. Running workers are not moved. The
    /// nodes in cooldown are listed in `status.nodesInCooldown`. 0 turns the cooldown off.
    /// Defaults to 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub blacklist_cooldown_seconds: Option<i32>,

    /// Whether the launcher prefers nodes that are not spot capacity. A launcher asks for no
    /// GPU, so a scheduler may place it on a spot node, and a run whose launcher is reclaimed
    /// must resume from its checkpoint. Unless the launcher's template sets a node affinity
    /// of its own, eto gives it a preferred (never required) node affinity term against the
    /// spot labels of Karpenter (`karpenter.sh/capacity-type: spot`), EKS
    /// (`eks.amazonaws.com/capacityType: SPOT`), GKE (`cloud.google.com/gke-spot: "true"`,
    /// `cloud.google.com/gke-preemptible: "true"`), AKS
    /// (`kubernetes.azure.com/scalesetpriority: spot`) and ACK
    /// (`node.alibabacloud.com/spot-strategy: SpotWithPriceLimit` or `SpotAsPriceGo`): where
    /// only spot nodes fit, the launcher still goes there. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_avoids_spot: Option<bool>,

    /// Whether the first container of every pod runs its command under eto's PID 1, a small
    /// POSIX shell that keeps the training processes through a SIGTERM (an eviction, a drain,
    /// a node shutdown, a deletion) until they have checkpointed and exited: it writes a
    /// `Reclaim` notice (reason `Terminating`) to `/run/eto/notice` (or `/tmp/eto/notice`),
    /// which eto's notice helper reads, waits until nothing runs under the command any more
    /// (or the command exits), at most until 3 seconds before the grace period ends, then
    /// stops the command. Only a command eto knows is wrapped: the template's `command`, or
    /// the SSH daemon eto runs in a worker without one; the image needs `/bin/sh`. When the
    /// template leaves `terminationGracePeriodSeconds` unset, eto sets it to
    /// `checkpointGraceSeconds`. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_on_termination: Option<bool>,
}
