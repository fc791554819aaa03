//! TorchFT replica groups (`elasticPolicy.replicaGroups`): a PyTorchJob whose Workers train
//! as fault-tolerant replica groups, coordinated step by step by a Lighthouse eto runs.
//!
//! A replica group is `podsPerGroup` Worker pods (one by default) that train as one torchrun
//! group (their processes `nprocPerNode` each), told of the Lighthouse (`TORCHFT_LIGHTHOUSE`),
//! of their group id (`REPLICA_GROUP_ID`) and of the number of group ids
//! (`NUM_REPLICA_GROUPS`, the job's `maxReplicas`). A group of one pod runs
//! `torchrun --standalone`; a group of several forms torchrun's static rendezvous of its own
//! (`PET_NNODES` the group's size, `PET_NODE_RANK` the pod's rank in it, `PET_MASTER_ADDR` its
//! rank 0 pod, `<pod>.<job>-workers`, and `PET_MASTER_PORT` the Workers' port). The training
//! code's TorchFT `Manager` joins each step's quorum at the Lighthouse; a group that stops
//! heartbeating is left out of the next quorum, and the others train on without a restart.
//! So a group is the unit of loss: a lost pod takes the other pods of its group with it (see
//! [`crate::target_workers`]), eto replaces them all under new names (as it replaces any
//! Worker whose name is never reused) and gives the new pods the lost group's id, the lowest
//! id no live group holds in full, so that data shards stay where they were; the new group
//! heals from a live one. A pod whose training fails ends rather than restarting in place
//! (see [`never_restarted_in_place`]), and its group goes the same way. `minReplicas`,
//! `maxReplicas` and the Worker replicas count groups; below `minReplicas` the job suspends
//! as every elastic job does.
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
use crate::job::JobContext;

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
/// connection: so a Manager finds a replaced Lighthouse (see `plan/run/coordinator_replacement.rs`) if
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

/// The label holding a Worker's rank in its replica group (0 to `podsPerGroup` - 1).
pub const RANK_LABEL: &str = "eto.dev/group-rank";

/// The variable holding a Worker's replica group id.
pub const GROUP_ID_ENV: &str = "REPLICA_GROUP_ID";

/// `REPLICA_GROUP_ID` in a spare's pod: not a number, so that training code that does not
/// wait for its id in [`GROUP_FILE`] stops at once with an error that shows this value,
/// rather than training as a group it is not (TorchFT's own `train_ddp.py` would take group 0).
pub const SPARE_GROUP_ID: &str = "spare";

/// The file beside the notice (`/etc/edl/replica-group`) that shows a Worker's group id: its
/// [`GROUP_LABEL`], empty while it waits as a spare. A spare's training reads its id there
/// once eto gives it one, since its environment cannot change.
pub const GROUP_FILE: &str = "replica-group";

/// The downward-API file [`GROUP_FILE`].
pub fn group_file() -> k8s_openapi::api::core::v1::DownwardAPIVolumeFile {
    crate::downward_api::label_file(GROUP_FILE, GROUP_LABEL, 0o444)
}

/// The replica groups of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaGroups {
    /// The job's name.
    pub job: String,
    /// The pods of each group.
    pub pods_per_group: u32,
    /// The port of a group's rank 0 pod, where a group of several pods forms (the Workers'
    /// `pytorchjob-port`).
    pub group_port: i32,
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
            pods_per_group: groups
                .pods_per_group
                .and_then(|size| u32::try_from(size).ok())
                .unwrap_or(1)
                .max(1),
            group_port: defaulted.worker.as_ref()?.port,
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

    /// What every Worker is told, beside its own place (see [`give_place`]): the Lighthouse,
    /// the number of group ids, its group's torchrun (`PET_NNODES` the group's size; one pod
    /// runs alone, `PET_STANDALONE=1`; several meet at their rank 0 pod's `PET_MASTER_PORT`),
    /// and how long its Manager keeps asking for a quorum (see [`QUORUM_RETRIES`]).
    pub fn variables(&self) -> Vec<EnvVar> {
        let mut variables = vec![
            var("TORCHFT_LIGHTHOUSE", self.lighthouse_url()),
            var("NUM_REPLICA_GROUPS", self.ids),
            var("PET_NNODES", self.pods_per_group),
        ];
        if self.pods_per_group == 1 {
            variables.push(var("PET_STANDALONE", 1));
        } else {
            variables.push(var("PET_MASTER_PORT", self.group_port));
        }
        variables.extend([
            var(QUORUM_TIMEOUT_ENV, QUORUM_TIMEOUT_SECONDS),
            var(QUORUM_RETRIES_ENV, QUORUM_RETRIES),
        ]);
        variables
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

/// Makes a Worker's pod end when its training fails (`restartPolicy: Never`), whatever the
/// Worker replica's policy, which decides instead whether eto replaces the group (see
/// [`crate::target_workers`]). A container the kubelet restarts in place cannot rejoin its
/// group: the others of a group of several pods are past their torchrun's rendezvous, and
/// while they heartbeat the Lighthouse waits for a group that never joins, holding up every
/// other group; and a pod that fails on a faulty node would fail there again, never
/// blacklisted nor its node cooled down.
pub fn never_restarted_in_place(spec: &mut PodSpec) {
    spec.restart_policy = Some("Never".into());
}

/// The group id of Worker `pod`, as its label holds it.
pub fn group_of(pod: &Pod) -> Option<u32> {
    label(pod, GROUP_LABEL)
}

/// The rank of Worker `pod` in its group, as its label holds it (0 where it holds none: a
/// group of one pod).
fn rank_of(pod: &Pod) -> u32 {
    label(pod, RANK_LABEL).unwrap_or(0)
}

fn label(pod: &Pod, key: &str) -> Option<u32> {
    pod.metadata.labels.as_ref()?.get(key)?.parse().ok()
}

/// Where a new Worker trains: its group, its rank in it, and the index of the group's rank 0
/// Worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The group id.
    pub id: u32,
    /// The rank in the group.
    pub rank: u32,
    /// The index of the group's rank 0 Worker.
    pub first: u32,
}

/// Where the Workers of a target train: the spares that take a group's place now, and the
/// places of the new Workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seating {
    /// The waiting spares (by index) that take a group id now: the id each takes.
    pub promoted: BTreeMap<u32, u32>,
    /// The place of each new Worker (by index) that trains in a group; a new Worker without
    /// one waits as a spare.
    pub new: BTreeMap<u32, Place>,
}

/// Seats the Workers of `target`, which holds `groups` groups of `size` pods beside its
/// spares: the Workers whose pods (among `pods`, by index) hold a place keep it; each group
/// the target holds and no live Worker does takes the lowest id free, given first to a
/// waiting spare (a ready pod of a group of one without an id, lowest index first), then to
/// the new Workers of `created`. Each new Worker, lowest index first, takes the lowest rank
/// free in the lowest id open to it (a group cut short, or one of the free ids); one left
/// without a place waits as a spare. So a lost group's id passes to its replacement, and a
/// spare takes it at once when one waits.
pub fn seat(
    size: u32,
    groups: u32,
    target: &[u32],
    created: &[u32],
    pods: &BTreeMap<u32, &Pod>,
) -> Seating {
    // The Workers of each group id: by rank, their index.
    let mut members: BTreeMap<u32, BTreeMap<u32, u32>> = BTreeMap::new();
    let mut spares = Vec::new();
    for index in target.iter().filter(|index| !created.contains(index)) {
        let Some(pod) = pods.get(index) else { continue };
        match group_of(pod) {
            Some(id) => {
                members.entry(id).or_default().insert(rank_of(pod), *index);
            }
            None if size == 1 && waits_as_spare(pod) => spares.push(*index),
            None => {}
        }
    }
    let open = (groups as usize).saturating_sub(members.len());
    let mut free: Vec<u32> = (0..)
        .filter(|id| !members.contains_key(id))
        .take(open)
        .collect();
    let mut seating = Seating::default();
    let taken_by_spares = spares.len().min(free.len());
    for (spare, id) in spares.into_iter().zip(free.drain(..taken_by_spares)) {
        seating.promoted.insert(spare, id);
        members.entry(id).or_default().insert(0, spare);
    }
    let mut assigned = Vec::new();
    for &index in created {
        let cut_short = members
            .iter()
            .find(|(_, group)| group.len() < size as usize)
            .map(|(id, _)| *id);
        let Some(id) = cut_short.into_iter().chain(free.first().copied()).min() else {
            break;
        };
        free.retain(|free| *free != id);
        let group = members.entry(id).or_default();
        let rank = (0..).find(|rank| !group.contains_key(rank)).unwrap_or(0);
        group.insert(rank, index);
        assigned.push((index, id, rank));
    }
    // Every group that took a new Worker has its rank 0: the lowest rank free goes first.
    seating.new = assigned
        .into_iter()
        .map(|(index, id, rank)| {
            let first = members[&id].get(&0).copied().unwrap_or(index);
            (index, Place { id, rank, first })
        })
        .collect();
    seating
}

/// Whether `pod`, a Worker without a group id, waits as a spare that can take a group's
/// place: it runs, ready (so neither being deleted nor finished), and is not disrupted.
fn waits_as_spare(pod: &Pod) -> bool {
    crate::pods::is_ready(pod) && !crate::pods::is_disrupted(pod)
}

/// The labels a spare's pod takes with group id `id`.
pub fn promoted_labels(id: u32) -> BTreeMap<String, String> {
    BTreeMap::from([(GROUP_LABEL.to_string(), id.to_string())])
}

/// The Workers among `pods` (by index) that wait as spares of a job whose groups have one
/// pod: those without a group id.
pub fn spares_among(groups: &ReplicaGroups, pods: &BTreeMap<u32, &Pod>) -> BTreeSet<u32> {
    if groups.pods_per_group != 1 {
        return BTreeSet::new();
    }
    pods.iter()
        .filter(|(_, pod)| group_of(pod).is_none())
        .map(|(index, _)| *index)
        .collect()
}

/// Gives Worker `pod` of `groups` its place `place`: its labels, and in its training container
/// `REPLICA_GROUP_ID` and, in a group of several pods, `PET_NODE_RANK` and `PET_MASTER_ADDR`
/// (the group's rank 0 pod in the Workers' Service), unless the container sets them itself.
pub fn give_place(pod: &mut Pod, groups: &ReplicaGroups, place: Place) {
    let labels = pod.metadata.labels.get_or_insert_default();
    labels.insert(GROUP_LABEL.into(), place.id.to_string());
    let mut variables = vec![var(GROUP_ID_ENV, place.id)];
    if groups.pods_per_group > 1 {
        labels.insert(RANK_LABEL.into(), place.rank.to_string());
        variables.extend([
            var("PET_NODE_RANK", place.rank),
            var(
                "PET_MASTER_ADDR",
                format!(
                    "{}.{}",
                    crate::names::worker(&groups.job, place.first),
                    service_name(&groups.job)
                ),
            ),
        ]);
    }
    if let Some(container) = pod.spec.as_mut().and_then(training_container) {
        super::env::add_to_container(container, &variables);
    }
}

/// Makes new Worker `pod` wait as a spare: `REPLICA_GROUP_ID` is [`SPARE_GROUP_ID`] in its
/// training container, unless the container sets it itself.
pub fn wait_as_spare(pod: &mut Pod) {
    if let Some(container) = pod.spec.as_mut().and_then(training_container) {
        super::env::add_to_container(container, &[var(GROUP_ID_ENV, SPARE_GROUP_ID)]);
    }
}

/// The group of each Worker among `pods` (by index) of a job whose groups have several pods;
/// empty for groups of one pod, which stand alone.
pub fn groups_of_several(groups: &ReplicaGroups, pods: &BTreeMap<u32, &Pod>) -> BTreeMap<u32, u32> {
    if groups.pods_per_group == 1 {
        return BTreeMap::new();
    }
    pods.iter()
        .filter_map(|(index, pod)| Some((*index, group_of(pod)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn worker(index: u32, place: Option<(u32, u32)>) -> Pod {
        let labels = place
            .map(|(id, rank)| json!({GROUP_LABEL: id.to_string(), RANK_LABEL: rank.to_string()}));
        serde_json::from_value(json!({"metadata": {
            "name": format!("ddp-worker-{index}"), "labels": labels
        }}))
        .unwrap()
    }

    fn groups(pods_per_group: u32) -> ReplicaGroups {
        ReplicaGroups {
            job: "ddp".into(),
            pods_per_group,
            group_port: 23456,
            port: 29510,
            min: 0,
            ids: 4,
            heartbeat_timeout_ms: DEFAULT_HEARTBEAT_TIMEOUT_MS,
            join_timeout_ms: None,
            quorum_tick_ms: None,
        }
    }

    /// A case's name, the group size, the target, the Workers created, and the places they
    /// get: (index, id, rank, first).
    type Case<'a> = (
        &'a str,
        u32,
        &'a [u32],
        &'a [u32],
        &'a [(u32, u32, u32, u32)],
    );

    fn check_places(pods: &[(u32, Pod)], cases: &[Case<'_>]) {
        let by_index: BTreeMap<u32, &Pod> = pods.iter().map(|(i, p)| (*i, p)).collect();
        for (name, size, target, created, expected) in cases {
            let groups = (target.len() as u32).div_ceil(*size);
            let places = seat(*size, groups, target, created, &by_index).new;
            let expected: BTreeMap<u32, Place> = expected
                .iter()
                .map(|&(index, id, rank, first)| (index, Place { id, rank, first }))
                .collect();
            assert_eq!(places, expected, "{name}");
        }
    }

    #[test]
    fn new_groups_take_the_lowest_ids_no_live_group_holds() {
        let pods = [
            (0, worker(0, Some((0, 0)))),
            (2, worker(2, Some((2, 0)))),
            (5, worker(5, None)),
        ];
        check_places(
            &pods,
            &[
                (
                    "a lost group's id passes on",
                    1,
                    &[0, 2, 3],
                    &[3],
                    &[(3, 1, 0, 3)],
                ),
                (
                    "two new groups",
                    1,
                    &[0, 2, 3, 4],
                    &[3, 4],
                    &[(3, 1, 0, 3), (4, 3, 0, 4)],
                ),
                (
                    "a pod without a label holds none",
                    1,
                    &[0, 5, 6],
                    &[6],
                    &[(6, 1, 0, 6)],
                ),
                (
                    "the first groups",
                    1,
                    &[7, 8],
                    &[7, 8],
                    &[(7, 0, 0, 7), (8, 1, 0, 8)],
                ),
            ],
        );
    }

    /// A ready Worker `index` waiting as a spare (no group id), or being deleted.
    fn spare(index: u32, deleted: bool) -> Pod {
        let mut pod = worker(index, None);
        pod.status = serde_json::from_value(json!({
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]
        }))
        .unwrap();
        if deleted {
            pod.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
            );
        }
        pod
    }

    #[test]
    fn a_waiting_spare_takes_a_missing_groups_id_before_new_workers() {
        let pods = [
            (0, worker(0, Some((0, 0)))),
            (2, worker(2, Some((2, 0)))),
            (3, spare(3, false)),
            (5, spare(5, false)),
            (6, worker(6, None)),
            (7, spare(7, true)),
        ];
        let by_index: BTreeMap<u32, &Pod> = pods.iter().map(|(i, p)| (*i, p)).collect();
        let place = |id: u32, index: u32| Place {
            id,
            rank: 0,
            first: index,
        };
        // (name, groups, target, created, promoted, new places)
        type SpareCase<'a> = (
            &'a str,
            u32,
            &'a [u32],
            &'a [u32],
            &'a [(u32, u32)],
            &'a [(u32, Place)],
        );
        let cases: &[SpareCase<'_>] = &[
            (
                "group 1 lost: the spare takes id 1, its replacement waits as the next spare",
                3,
                &[0, 2, 3, 4],
                &[4],
                &[(3, 1)],
                &[],
            ),
            (
                "a group added: the spare takes the new id",
                4,
                &[0, 2, 3, 4, 5],
                &[4],
                &[(3, 1), (5, 3)],
                &[],
            ),
            (
                "a lost group and a second spare: the lowest index goes first",
                3,
                &[0, 2, 3, 5, 8],
                &[8],
                &[(3, 1)],
                &[],
            ),
            (
                "no group missing: the spares wait",
                2,
                &[0, 2, 3, 8],
                &[8],
                &[],
                &[],
            ),
            (
                "a spare not ready or going does not take a place: the new Worker does",
                3,
                &[0, 2, 6, 7, 8],
                &[8],
                &[],
                &[(8, place(1, 8))],
            ),
        ];
        for (name, groups, target, created, promoted, new) in cases {
            let seating = seat(1, *groups, target, created, &by_index);
            assert_eq!(
                seating,
                Seating {
                    promoted: promoted.iter().copied().collect(),
                    new: new.iter().copied().collect(),
                },
                "{name}"
            );
        }
        let groups = groups(1);
        assert_eq!(
            spares_among(&groups, &by_index),
            BTreeSet::from([3, 5, 6, 7])
        );
        assert_eq!(
            promoted_labels(1),
            BTreeMap::from([(GROUP_LABEL.to_string(), "1".to_string())])
        );
    }

    #[test]
    fn groups_of_two_fill_their_ranks_and_meet_at_their_first_pod() {
        // Group 0 is whole (0 and 1); group 1 lost both its pods; group 2 has only rank 1.
        let pods = [
            (0, worker(0, Some((0, 0)))),
            (1, worker(1, Some((0, 1)))),
            (7, worker(7, Some((2, 1)))),
        ];
        check_places(
            &pods,
            &[
                (
                    "the first groups",
                    2,
                    &[0, 1, 2, 3],
                    &[0, 1, 2, 3],
                    &[(0, 0, 0, 0), (1, 0, 1, 0), (2, 1, 0, 2), (3, 1, 1, 2)],
                ),
                (
                    "a lost group's id passes to both new pods",
                    2,
                    &[0, 1, 8, 9],
                    &[8, 9],
                    &[(8, 1, 0, 8), (9, 1, 1, 8)],
                ),
                (
                    "a group cut short is completed under its id",
                    2,
                    &[0, 1, 7, 8, 9, 10],
                    &[8, 9, 10],
                    &[(8, 1, 0, 8), (9, 1, 1, 8), (10, 2, 0, 10)],
                ),
            ],
        );
    }

    #[test]
    fn a_group_of_several_pods_forms_at_its_first_pod() {
        let template = || -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": "ddp-worker-9"},
                "spec": {"containers": [{"name": "pytorch"}]}
            }))
            .unwrap()
        };
        let env = |pod: &Pod| -> Vec<(String, String)> {
            let container = &pod.spec.as_ref().unwrap().containers[0];
            container
                .env
                .iter()
                .flatten()
                .map(|var| (var.name.clone(), var.value.clone().unwrap_or_default()))
                .collect()
        };
        let pair = |name: &str, value: &str| (name.to_string(), value.to_string());
        let place = Place {
            id: 1,
            rank: 1,
            first: 8,
        };
        let mut pod = template();
        give_place(&mut pod, &groups(2), place);
        assert_eq!(
            env(&pod),
            [
                pair(GROUP_ID_ENV, "1"),
                pair("PET_NODE_RANK", "1"),
                pair("PET_MASTER_ADDR", "ddp-worker-8.ddp-workers")
            ]
        );
        assert_eq!((group_of(&pod), rank_of(&pod)), (Some(1), 1));
        let names = |groups: &ReplicaGroups| -> Vec<String> {
            groups.variables().into_iter().map(|var| var.name).collect()
        };
        assert!(names(&groups(2)).contains(&"PET_MASTER_PORT".to_string()));
        assert!(!names(&groups(2)).contains(&"PET_STANDALONE".to_string()));
        assert!(names(&groups(1)).contains(&"PET_STANDALONE".to_string()));

        let mut alone = template();
        give_place(
            &mut alone,
            &groups(1),
            Place {
                id: 3,
                rank: 0,
                first: 9,
            },
        );
        assert_eq!(env(&alone), [pair(GROUP_ID_ENV, "3")]);
        assert_eq!(alone.metadata.labels.unwrap().get(RANK_LABEL), None);

        let members = [
            (0, worker(0, Some((0, 0)))),
            (1, worker(1, Some((0, 1)))),
            (2, worker(2, None)),
        ];
        let by_index: BTreeMap<u32, &Pod> = members.iter().map(|(i, p)| (*i, p)).collect();
        assert_eq!(
            groups_of_several(&groups(2), &by_index),
            BTreeMap::from([(0, 0), (1, 0)])
        );
        assert!(groups_of_several(&groups(1), &by_index).is_empty());
    }

    #[test]
    fn the_lighthouse_gets_the_minimum_and_only_the_timeouts_set() {
        let mut groups = groups(1);
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
        give_place(
            &mut pod,
            &groups(1),
            Place {
                id: 1,
                rank: 0,
                first: 3,
            },
        );
        assert_eq!(group_of(&pod), Some(1));
        let env = pod.spec.unwrap().containers[0].env.clone().unwrap();
        assert_eq!(env.len(), 1);
        assert_eq!(env[0].value.as_deref(), Some("7"));
    }
}
