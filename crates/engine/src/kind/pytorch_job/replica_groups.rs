//! TorchFT replica groups (`elasticPolicy.replicaGroups`): a PyTorchJob whose Workers train
//! as fault-tolerant replica groups, coordinated step by step by a Lighthouse eto runs.
//!
//! Each Worker is a replica group of its own: one pod running `torchrun --standalone` (its
//! processes `nprocPerNode`), told of the Lighthouse (`TORCHFT_LIGHTHOUSE`), of its group id
//! (`REPLICA_GROUP_ID`) and of the number of group ids (`NUM_REPLICA_GROUPS`, the job's
//! `maxReplicas`). The training code's TorchFT `Manager` joins each step's quorum at the
//! Lighthouse; a group that stops heartbeating is left out of the next quorum, and the others
//! train on without a restart. So a group is the unit of loss: eto replaces a lost group's pod
//! under a new name (as it replaces any Worker whose name is never reused) and gives the new
//! pod the lost group's id, the lowest id no live group holds, so that data shards stay where
//! they were; the new group heals from a live one. `minReplicas`, `maxReplicas` and the Worker
//! replicas count groups; below `minReplicas` the job suspends as every elastic job does.
//!
//! The Lighthouse runs in a pod of its own, `<job>-lighthouse`, from the Workers' image
//! (`torchft_lighthouse`), as the rendezvous store does (see
//! [`super::rendezvous::beside_the_workers`]): placed as launchers are, off spot capacity and
//! warned nodes, with `--min_replicas` the job's `minReplicas`. Its host name is
//! `<job>-lighthouse.<job>-workers`; every Worker's is `<pod>.<job>-workers` too, and each
//! Worker searches that subdomain (`dnsConfig.searches`), since a TorchFT Manager advertises its
//! bare host name to the groups that heal from it.

use std::collections::{BTreeMap, BTreeSet};

use eto_api::PyTorchJob;
use eto_api::job_status::NodeCooldown;
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodDNSConfig, PodSpec};

use super::env::var;
use super::rendezvous::{beside_the_workers, service_name, tcp_port};
use super::{Defaulted, training_container};
use crate::builders::JobContext;

/// The Lighthouse's port unless `lighthouse.port` names another: TorchFT's.
pub const DEFAULT_PORT: i32 = 29510;

/// `--heartbeat_timeout_ms` unless `lighthouse.heartbeatTimeoutMs` sets it: a second, ten of
/// the Managers' heartbeats (TorchFT's own default, 5 s, is the other groups' pause after a
/// loss).
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: i64 = 1000;

/// The variable holding how long a Manager waits for the Lighthouse's answer to a quorum
/// request, in seconds, over all its attempts.
pub const QUORUM_TIMEOUT_ENV: &str = "TORCHFT_QUORUM_TIMEOUT_SEC";

/// `TORCHFT_QUORUM_TIMEOUT_SEC` where the container sets none: five minutes (TorchFT's own is
/// one). A quorum request that fails is tried again [`QUORUM_RETRIES`] times, each after this
/// timeout divided among the attempts (a second here, at least 0.1 s), each on a new
/// connection: so a Manager finds a replaced Lighthouse (see `plan/run/lighthouse_loss.rs`) if
/// it comes within about this time. TorchFT's default is no retry, and then a group whose
/// quorum request failed stands still without ending (TorchFT 0.2.0, checked on the harness).
pub const QUORUM_TIMEOUT_SECONDS: u32 = 300;

/// The variable holding how many times a Manager asks the Lighthouse again for a quorum it
/// did not get.
pub const QUORUM_RETRIES_ENV: &str = "TORCHFT_QUORUM_RETRIES";

/// `TORCHFT_QUORUM_RETRIES` where the container sets none: one attempt a second over
/// [`QUORUM_TIMEOUT_SECONDS`].
pub const QUORUM_RETRIES: u32 = 300;

/// The value of the replica-type label on the Lighthouse's pod.
pub const LIGHTHOUSE_REPLICA_TYPE: &str = "lighthouse";

/// The label holding a Worker's replica group id.
pub const GROUP_LABEL: &str = "eto.dev/replica-group";

/// The variable holding a Worker's replica group id.
pub const GROUP_ID_ENV: &str = "REPLICA_GROUP_ID";

/// The replica groups of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaGroups {
    /// The job's name.
    pub job: String,
    /// The Lighthouse's port.
    pub port: i32,
    /// Fewest groups: the Lighthouse's `--min_replicas`.
    pub min: u32,
    /// Most groups: the number of group ids.
    pub ids: u32,
    /// `--heartbeat_timeout_ms`.
    pub heartbeat_timeout_ms: i64,
    /// `--join_timeout_ms`, if set.
    pub join_timeout_ms: Option<i64>,
    /// `--quorum_tick_ms`, if set.
    pub quorum_tick_ms: Option<i64>,
}

impl ReplicaGroups {
    /// The replica groups of `job`, if it is an elastic job without a Master that sets
    /// `elasticPolicy.replicaGroups`.
    pub fn of(job: &PyTorchJob) -> Option<Self> {
        let name = job.metadata.name.as_deref().unwrap_or_default();
        Self::of_defaulted(name, &Defaulted::of(job))
    }

    /// The replica groups of job `job` whose spec v1 reads as `defaulted` (see [`Self::of`]).
    pub fn of_defaulted(job: &str, defaulted: &Defaulted<'_>) -> Option<Self> {
        let elastic = defaulted.elastic.as_ref()?;
        let groups = elastic.policy.replica_groups.as_ref()?;
        if defaulted.master.is_some() || defaulted.worker.is_none() {
            return None;
        }
        let lighthouse = groups.lighthouse.clone().unwrap_or_default();
        Some(Self {
            job: job.to_string(),
            port: lighthouse.port.unwrap_or(DEFAULT_PORT),
            min: elastic.min,
            ids: elastic.max,
            heartbeat_timeout_ms: lighthouse
                .heartbeat_timeout_ms
                .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT_MS),
            join_timeout_ms: lighthouse.join_timeout_ms,
            quorum_tick_ms: lighthouse.quorum_tick_ms,
        })
    }

    /// The Lighthouse's pod: `<job>-lighthouse`.
    pub fn lighthouse_name(&self) -> String {
        lighthouse_name(&self.job)
    }

    /// Where the Managers find the Lighthouse:
    /// `http://<job>-lighthouse.<job>-workers:<port>`.
    pub fn lighthouse_url(&self) -> String {
        format!(
            "http://{}.{}:{}",
            self.lighthouse_name(),
            service_name(&self.job),
            self.port
        )
    }

    /// The Lighthouse's command line after the program: `--min_replicas`, `--bind` on every
    /// address at the port, and the timeouts set.
    pub fn lighthouse_args(&self) -> Vec<String> {
        let mut args = vec![
            "--min_replicas".to_string(),
            self.min.max(1).to_string(),
            "--bind".to_string(),
            format!("[::]:{}", self.port),
            "--heartbeat_timeout_ms".to_string(),
            self.heartbeat_timeout_ms.to_string(),
        ];
        let optional = [
            ("--join_timeout_ms", self.join_timeout_ms),
            ("--quorum_tick_ms", self.quorum_tick_ms),
        ];
        for (flag, value) in optional {
            if let Some(value) = value {
                args.extend([flag.to_string(), value.to_string()]);
            }
        }
        args
    }

    /// What every Worker is told, beside its own group id: the Lighthouse, the number of group
    /// ids, a torchrun of its own (`PET_STANDALONE=1`, `PET_NNODES=1`), and how long its
    /// Manager keeps asking for a quorum (see [`QUORUM_RETRIES`]).
    pub fn variables(&self) -> Vec<EnvVar> {
        vec![
            var("TORCHFT_LIGHTHOUSE", self.lighthouse_url()),
            var("NUM_REPLICA_GROUPS", self.ids),
            var("PET_NNODES", 1),
            var("PET_STANDALONE", 1),
            var(QUORUM_TIMEOUT_ENV, QUORUM_TIMEOUT_SECONDS),
            var(QUORUM_RETRIES_ENV, QUORUM_RETRIES),
        ]
    }
}

/// The Lighthouse's pod of job `job`: `<job>-lighthouse`.
pub fn lighthouse_name(job: &str) -> String {
    format!("{job}-lighthouse")
}

/// The program that starts the Lighthouse: the console script `torchft_lighthouse` that pip
/// installs beside the image's Python, run by that Python (the script's first line names the
/// interpreter of the environment it was installed in, which an image built from a copy of
/// it may not have).
const LIGHTHOUSE_PROGRAM: &str = r#"script="$(command -v torchft_lighthouse)" || { echo "torchft_lighthouse is not on the image's PATH: install torchft" >&2; exit 127; }
python="$(command -v python3 || command -v python)"
# As PID 1 the Lighthouse would ignore SIGTERM and hold its pod for the whole grace period
# (and a resumed run's new Lighthouse, of the same name, with it): pass SIGTERM on instead.
"$python" "$script" "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
status=0
while kill -0 "$child" 2>/dev/null; do
  wait "$child"
  status=$?
done
exit "$status""#;

/// The Lighthouse's pod of `job`'s current run, placed as a launcher is and away from the
/// nodes `avoided` (see [`beside_the_workers`]); `None` without a Worker template.
pub fn lighthouse_pod(
    job: JobContext<'_>,
    groups: &ReplicaGroups,
    avoided: &[NodeCooldown],
) -> Option<Pod> {
    let mut command = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        LIGHTHOUSE_PROGRAM.to_string(),
        "torchft_lighthouse".to_string(),
    ];
    command.extend(groups.lighthouse_args());
    let container = Container {
        name: LIGHTHOUSE_REPLICA_TYPE.into(),
        command: Some(command),
        ports: Some(vec![tcp_port(LIGHTHOUSE_REPLICA_TYPE, groups.port)]),
        ..Container::default()
    };
    beside_the_workers(
        job,
        groups.lighthouse_name(),
        LIGHTHOUSE_REPLICA_TYPE,
        container,
        avoided,
    )
}

/// Names Worker `pod` of job `job` in `namespace` in the Service that names every pod of the
/// job, and lets it resolve the bare host names of the others, as TorchFT's Managers advertise
/// them: the Service's domain (in `cluster.local`, as mpi-operator assumes too) in its DNS
/// search path.
pub fn name_in_service(spec: &mut PodSpec, job: &str, namespace: &str, pod: &str) {
    let service = service_name(job);
    spec.hostname = Some(pod.to_string());
    spec.subdomain = Some(service.clone());
    spec.dns_config
        .get_or_insert_with(PodDNSConfig::default)
        .searches
        .get_or_insert_default()
        .push(format!("{service}.{namespace}.svc.cluster.local"));
}

/// The group id of Worker `pod`, as its label holds it.
pub fn group_of(pod: &Pod) -> Option<u32> {
    pod.metadata.labels.as_ref()?.get(GROUP_LABEL)?.parse().ok()
}

/// The group id of each new Worker of `created`, beside the Workers of `target` whose pods
/// (among `pods`, by index) hold theirs: the lowest ids no live group holds, lowest first to
/// the lowest index, so that a lost group's id passes to its replacement.
pub fn ids_of_new(
    target: &[u32],
    created: &[u32],
    pods: &BTreeMap<u32, &Pod>,
) -> BTreeMap<u32, u32> {
    let taken: BTreeSet<u32> = target
        .iter()
        .filter(|index| !created.contains(index))
        .filter_map(|index| group_of(pods.get(index)?))
        .collect();
    let free = (0..).filter(|id| !taken.contains(id));
    created.iter().copied().zip(free).collect()
}

/// Gives Worker `pod` group id `id`: its label, and `REPLICA_GROUP_ID` in its training
/// container, unless the container sets it itself.
pub fn give_id(pod: &mut Pod, id: u32) {
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert(GROUP_LABEL.into(), id.to_string());
    if let Some(container) = pod.spec.as_mut().and_then(training_container) {
        super::env::add_to_container(container, &[var(GROUP_ID_ENV, id)]);
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn worker(index: u32, id: Option<u32>) -> Pod {
        let labels = id.map(|id| json!({GROUP_LABEL: id.to_string()}));
        serde_json::from_value(json!({"metadata": {
            "name": format!("ddp-worker-{index}"), "labels": labels
        }}))
        .unwrap()
    }

    #[test]
    fn new_groups_take_the_lowest_ids_no_live_group_holds() {
        let pods = [worker(0, Some(0)), worker(2, Some(2)), worker(5, None)];
        let by_index: BTreeMap<u32, &Pod> = [0, 2, 5].into_iter().zip(pods.iter()).collect();
        /// A case's name, the target, the Workers created, and the ids they get.
        type Case<'a> = (&'a str, &'a [u32], &'a [u32], &'a [(u32, u32)]);
        let cases: [Case<'_>; 4] = [
            ("a lost group's id passes on", &[0, 2, 3], &[3], &[(3, 1)]),
            ("two new groups", &[0, 2, 3, 4], &[3, 4], &[(3, 1), (4, 3)]),
            (
                "a pod without a label holds none",
                &[0, 5, 6],
                &[6],
                &[(6, 1)],
            ),
            ("the first groups", &[7, 8], &[7, 8], &[(7, 0), (8, 1)]),
        ];
        for (name, target, created, expected) in cases {
            let ids = ids_of_new(target, created, &by_index);
            assert_eq!(ids, expected.iter().copied().collect(), "{name}");
        }
    }

    #[test]
    fn the_lighthouse_gets_the_minimum_and_only_the_timeouts_set() {
        let mut groups = ReplicaGroups {
            job: "ddp".into(),
            port: 29510,
            min: 0,
            ids: 4,
            heartbeat_timeout_ms: DEFAULT_HEARTBEAT_TIMEOUT_MS,
            join_timeout_ms: None,
            quorum_tick_ms: None,
        };
        assert_eq!(
            groups.lighthouse_args(),
            [
                "--min_replicas",
                "1",
                "--bind",
                "[::]:29510",
                "--heartbeat_timeout_ms",
                "1000"
            ],
            "TorchFT needs at least one group"
        );
        groups.min = 2;
        groups.join_timeout_ms = Some(20_000);
        groups.quorum_tick_ms = Some(50);
        assert_eq!(
            groups.lighthouse_args()[6..],
            ["--join_timeout_ms", "20000", "--quorum_tick_ms", "50"]
        );
        assert_eq!(groups.lighthouse_args()[1], "2");
    }

    #[test]
    fn a_group_id_the_container_sets_itself_is_kept() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "ddp-worker-3"},
            "spec": {"containers": [{"name": "pytorch", "env": [{"name": GROUP_ID_ENV, "value": "7"}]}]}
        }))
        .unwrap();
        give_id(&mut pod, 1);
        assert_eq!(group_of(&pod), Some(1));
        let env = pod.spec.unwrap().containers[0].env.clone().unwrap();
        assert_eq!(env.len(), 1);
        assert_eq!(env[0].value.as_deref(), Some("7"));
    }
}
