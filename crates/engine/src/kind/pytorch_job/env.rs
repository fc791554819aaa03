//! The environment of a PyTorchJob's pods: training-operator v1's contract, so that images and
//! commands written for v1 (`torchrun` reading its `PET_` variables, scripts reading
//! `MASTER_ADDR`, `RANK` and `WORLD_SIZE`) run unchanged.
//!
//! Every container gets, in this order:
//! - `PYTHONUNBUFFERED=1`;
//! - with a Master: `MASTER_PORT` and `PET_MASTER_PORT` (the Master's `pytorchjob-port`),
//!   `MASTER_ADDR` and `PET_MASTER_ADDR` (`<job>-master-0`), `WORLD_SIZE` (every pod of the
//!   job, times `nprocPerNode` when it is a number), `RANK` and `PET_NODE_RANK` (0 for the
//!   Master, `index + 1` for worker `index`);
//! - `PET_NPROC_PER_NODE` (`spec.nprocPerNode`, `auto` by default);
//! - without `elasticPolicy`: `PET_NNODES`, every pod of the job;
//! - with it: `PET_RDZV_ENDPOINT` (`rdzvHost`, else `<job>-worker-0`, and `rdzvPort`, else
//!   the Workers' `pytorchjob-port`), `PET_RDZV_BACKEND` (`c10d` by default),
//!   `PET_NNODES=<min>:<max>`, and where set `PET_MAX_RESTARTS`, `PET_NPROC_PER_NODE` (the
//!   deprecated field), `PET_RDZV_ID`, `PET_RDZV_CONF` and `PET_STANDALONE`.
//!
//! When eto hosts the rendezvous (see [`super::rendezvous`]), an elastic job's agents are
//! told of eto's store instead: `PET_RDZV_ENDPOINT=<job>-rdzv.<job>-workers:<port>`,
//! `PET_RDZV_BACKEND=c10d`, the run's own `PET_RDZV_ID`, and `PET_RDZV_CONF` starting with
//! `is_host=false` (unless the job's `rdzvConf` sets `is_host` itself), so that no agent
//! hosts the store, followed by a long `join_timeout` for a job with spares (see
//! [`crate::spares::JOIN_TIMEOUT`]) unless `rdzvConf` sets one; and `ETO_SAVED_URL`, where the
//! training code says it saved the checkpoint a notice asked for (see
//! [`crate::group_report`]). Three more keep the group alive through the loss of any Worker,
//! and quick to re-form, on every torch torchrun has:
//! - `PET_MAX_RESTARTS=100` where `maxRestarts` is unset (torchrun's own default is 0). A
//!   Worker's loss fails the training processes of every other Worker (their collective
//!   operations break), and each agent spends one restart on it: with none to spend, the
//!   agent exits, and an agent that exits for any reason but a signal closes the rendezvous
//!   for every other one, ending the run. 100 is what v1's own elastic examples set.
//! - `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`. Since torch 2.5 the agent of group rank 0 hosts,
//!   by default, the store its workers form their process group with, and the other agents
//!   keep its address from round to round (pytorch#167302): once that pod goes, the
//!   survivors' workers dial a store that no longer exists at every restart and never train
//!   again. With the variable, workers form their process group on a store of rank 0's own
//!   worker, found through the rendezvous, as torch 1.x always did (which ignores it).
//! - `PET_MONITOR_INTERVAL=0.1`: how often an agent looks at its training processes and at
//!   agents waiting to join. torch 2.x's default; torch 1.x's is 5 s, which adds up to 5 s to
//!   every re-formation (a failed peer, eto's word that the group re-forms, see
//!   [`crate::group_orders`]). Each look reads the rendezvous at most once a second.
//!
//! Two departures from v1, both where v1 broke what its users wrote: a variable the container
//! sets itself is kept, not followed by eto's (v1 appended its own after it, so Arena's
//! `PET_NPROC_PER_NODE` from `--nproc-per-node` lost to `auto`); and `standalone: true` gives
//! `PET_STANDALONE=1`, which torchrun reads as true (v1's empty value makes torchrun fail
//! while it parses its arguments).

use eto_api::pytorch_job::PyTorchReplicaType;
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};

use super::rendezvous::RunRendezvous;
use super::replica_groups::ReplicaGroups;
use super::{Defaulted, pod_name};

/// The variables pod `index` of `type_` of job `job` gets, in v1's order; `hosted` is the
/// rendezvous eto hosts for the pod's run, if it does.
pub fn variables(
    job: &str,
    defaulted: &Defaulted<'_>,
    type_: PyTorchReplicaType,
    index: u32,
    hosted: Option<&RunRendezvous>,
) -> Vec<EnvVar> {
    let mut variables = vec![var("PYTHONUNBUFFERED", "1")];
    if let Some(master) = &defaulted.master {
        let address = pod_name(job, PyTorchReplicaType::Master, 0);
        let rank = match type_ {
            PyTorchReplicaType::Master => 0,
            PyTorchReplicaType::Worker => index + 1,
        };
        let processes = defaulted
            .nproc_per_node
            .as_deref()
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(1);
        let world_size = defaulted.total_replicas() * processes;
        variables.extend([
            var("MASTER_PORT", master.port),
            var("PET_MASTER_PORT", master.port),
            var("MASTER_ADDR", &address),
            var("PET_MASTER_ADDR", &address),
            var("WORLD_SIZE", world_size),
            var("RANK", rank),
            var("PET_NODE_RANK", rank),
        ]);
    }
    if let Some(nproc) = &defaulted.nproc_per_node {
        variables.push(var("PET_NPROC_PER_NODE", nproc));
    }
    let Some(elastic) = &defaulted.elastic else {
        variables.push(var("PET_NNODES", defaulted.total_replicas()));
        return variables;
    };
    let policy = elastic.policy;
    if let Some(groups) = ReplicaGroups::of_defaulted(job, defaulted) {
        variables.extend(groups.variables());
        if let Some(restarts) = policy.max_restarts {
            variables.push(var("PET_MAX_RESTARTS", restarts));
        }
        if let Some(nproc) = policy.n_proc_per_node {
            variables.push(var("PET_NPROC_PER_NODE", nproc));
        }
        return variables;
    }
    let endpoint = match hosted {
        Some(hosted) => hosted.endpoint.clone(),
        None => {
            let host = policy
                .rdzv_host
                .clone()
                .unwrap_or_else(|| pod_name(job, PyTorchReplicaType::Worker, 0));
            let port = policy
                .rdzv_port
                .or(defaulted.worker.as_ref().map(|w| w.port))
                .unwrap_or(eto_api::pytorch_job::DEFAULT_PORT);
            format!("{host}:{port}")
        }
    };
    variables.extend([
        var("PET_RDZV_ENDPOINT", endpoint),
        var(
            "PET_RDZV_BACKEND",
            policy.rdzv_backend.as_deref().unwrap_or("c10d"),
        ),
        var("PET_NNODES", format!("{}:{}", elastic.min, elastic.max)),
    ]);
    let restarts = policy.max_restarts.or(hosted.map(|_| HOSTED_MAX_RESTARTS));
    if let Some(restarts) = restarts {
        variables.push(var("PET_MAX_RESTARTS", restarts));
    }
    if let Some(nproc) = policy.n_proc_per_node {
        variables.push(var("PET_NPROC_PER_NODE", nproc));
    }
    if let Some(id) = hosted.map(|h| &h.id).or(policy.rdzv_id.as_ref()) {
        variables.push(var("PET_RDZV_ID", id));
    }
    let sets = |key: &str| {
        policy
            .rdzv_conf
            .iter()
            .flatten()
            .any(|entry| entry.key.as_deref() == Some(key))
    };
    let not_host = (hosted.is_some() && !sets("is_host")).then(|| "is_host=false".to_string());
    let spares = policy.spare_replicas.is_some_and(|spares| spares > 0);
    let spares_wait = (hosted.is_some() && spares && !sets("join_timeout"))
        .then(|| format!("join_timeout={}", crate::spares::JOIN_TIMEOUT.as_secs()));
    let conf: Vec<String> = not_host
        .into_iter()
        .chain(spares_wait)
        .chain(policy.rdzv_conf.iter().flatten().map(|entry| {
            format!(
                "{}={}",
                entry.key.as_deref().unwrap_or_default(),
                entry.value.as_deref().unwrap_or_default()
            )
        }))
        .collect();
    if !conf.is_empty() {
        variables.push(var("PET_RDZV_CONF", conf.join(",")));
    }
    if policy.standalone == Some(true) {
        variables.push(var("PET_STANDALONE", "1"));
    }
    if let Some(hosted) = hosted {
        variables.push(var("ETO_SAVED_URL", &hosted.saved_url));
        variables.push(var(UNSHARED_STORE_ENV, "1"));
        variables.push(var(MONITOR_INTERVAL_ENV, HOSTED_MONITOR_INTERVAL));
    }
    variables
}

/// The restarts torchrun's agents of a run eto hosts may spend where `maxRestarts` is unset
/// (see the module documentation).
pub const HOSTED_MAX_RESTARTS: i32 = 100;

/// The variable of torchrun's `--monitor-interval` (see the module documentation).
pub const MONITOR_INTERVAL_ENV: &str = "PET_MONITOR_INTERVAL";

/// The seconds between two looks of an agent at its training processes where the container
/// sets none: torch 2.x's own default.
pub const HOSTED_MONITOR_INTERVAL: &str = "0.1";

/// The variable that makes torch 2.5 and later form the workers' process group on a store of
/// rank 0's worker rather than of its agent (see the module documentation).
pub const UNSHARED_STORE_ENV: &str = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE";

/// Appends `variables` to every container of `spec` (not its init containers, as with v1),
/// after the container's own; a variable a container sets itself is left as it set it.
pub fn add_to(spec: &mut PodSpec, variables: &[EnvVar]) {
    for container in &mut spec.containers {
        add_to_container(container, variables);
    }
}

/// Appends `variables` to `container`'s, after its own; a variable it sets itself is left as
/// it set it.
pub fn add_to_container(container: &mut Container, variables: &[EnvVar]) {
    let env = container.env.get_or_insert_default();
    let own: Vec<String> = env.iter().map(|var| var.name.clone()).collect();
    env.extend(
        variables
            .iter()
            .filter(|var| !own.contains(&var.name))
            .cloned(),
    );
}

/// A variable `name` with `value`.
pub fn var(name: &str, value: impl ToString) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Container;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::super::tests::job;
    use super::*;

    fn names_and_values(variables: &[EnvVar]) -> Vec<(String, String)> {
        variables
            .iter()
            .map(|var| (var.name.clone(), var.value.clone().unwrap_or_default()))
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn a_master_and_two_workers_get_v1s_worked_example() {
        let job = job(json!({"pytorchReplicaSpecs": {
            "Master": {"replicas": 1},
            "Worker": {"replicas": 2}
        }}));
        let defaulted = Defaulted::of(&job);
        let expected = |rank: &str| {
            pairs(&[
                ("PYTHONUNBUFFERED", "1"),
                ("MASTER_PORT", "23456"),
                ("PET_MASTER_PORT", "23456"),
                ("MASTER_ADDR", "ddp-master-0"),
                ("PET_MASTER_ADDR", "ddp-master-0"),
                ("WORLD_SIZE", "3"),
                ("RANK", rank),
                ("PET_NODE_RANK", rank),
                ("PET_NPROC_PER_NODE", "auto"),
                ("PET_NNODES", "3"),
            ])
        };
        let cases = [
            (PyTorchReplicaType::Master, 0, "0"),
            (PyTorchReplicaType::Worker, 0, "1"),
            (PyTorchReplicaType::Worker, 1, "2"),
        ];
        for (type_, index, rank) in cases {
            assert_eq!(
                names_and_values(&variables("ddp", &defaulted, type_, index, None)),
                expected(rank),
                "{type_:?} {index}"
            );
        }
    }

    #[test]
    fn world_size_counts_processes_when_nproc_per_node_is_a_number() {
        let cases = [
            ("4", "12"),
            ("auto", "3"),
            ("gpu", "3"),
            ("cpu", "3"),
            ("1", "3"),
        ];
        for (nproc, world) in cases {
            let job = job(json!({"nprocPerNode": nproc, "pytorchReplicaSpecs": {
                "Master": {"replicas": 1},
                "Worker": {"replicas": 2}
            }}));
            let variables = variables(
                "ddp",
                &Defaulted::of(&job),
                PyTorchReplicaType::Worker,
                0,
                None,
            );
            let value = |name: &str| {
                variables
                    .iter()
                    .find(|var| var.name == name)
                    .and_then(|var| var.value.clone())
            };
            assert_eq!(value("WORLD_SIZE").as_deref(), Some(world), "{nproc}");
            assert_eq!(value("PET_NPROC_PER_NODE").as_deref(), Some(nproc));
            assert_eq!(value("PET_NNODES").as_deref(), Some("3"));
        }
    }

    #[test]
    fn workers_without_a_master_get_no_master_address_rank_or_world_size() {
        let job = job(json!({"pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}));
        assert_eq!(
            names_and_values(&variables(
                "ddp",
                &Defaulted::of(&job),
                PyTorchReplicaType::Worker,
                2,
                None
            )),
            pairs(&[
                ("PYTHONUNBUFFERED", "1"),
                ("PET_NPROC_PER_NODE", "auto"),
                ("PET_NNODES", "4"),
            ])
        );
    }

    #[test]
    fn an_elastic_job_gets_torchruns_rendezvous_settings() {
        let job = job(json!({
            "elasticPolicy": {
                "minReplicas": 1, "maxReplicas": 3, "maxRestarts": 5, "rdzvId": "run",
                "rdzvConf": [{"key": "join_timeout", "value": "60"}, {"key": "read_timeout", "value": "30"}],
                "standalone": true
            },
            "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "torch", "ports": [{"name": "pytorchjob-port", "containerPort": 29400}]}
            ]}}}}
        }));
        assert_eq!(
            names_and_values(&variables(
                "ddp",
                &Defaulted::of(&job),
                PyTorchReplicaType::Worker,
                1,
                None
            )),
            pairs(&[
                ("PYTHONUNBUFFERED", "1"),
                ("PET_NPROC_PER_NODE", "auto"),
                ("PET_RDZV_ENDPOINT", "ddp-worker-0:29400"),
                ("PET_RDZV_BACKEND", "c10d"),
                ("PET_NNODES", "1:3"),
                ("PET_MAX_RESTARTS", "5"),
                ("PET_RDZV_ID", "run"),
                ("PET_RDZV_CONF", "join_timeout=60,read_timeout=30"),
                ("PET_STANDALONE", "1"),
            ])
        );
        let custom = super::super::tests::job(json!({
            "elasticPolicy": {"rdzvHost": "store", "rdzvPort": 1234, "rdzvBackend": "etcd", "nProcPerNode": 2},
            "pytorchReplicaSpecs": {"Worker": {"replicas": 2}}
        }));
        let variables = names_and_values(&variables(
            "ddp",
            &Defaulted::of(&custom),
            PyTorchReplicaType::Worker,
            0,
            None,
        ));
        assert_eq!(
            variables,
            pairs(&[
                ("PYTHONUNBUFFERED", "1"),
                ("PET_RDZV_ENDPOINT", "store:1234"),
                ("PET_RDZV_BACKEND", "etcd"),
                ("PET_NNODES", "2:2"),
                ("PET_NPROC_PER_NODE", "2"),
            ])
        );
    }

    fn run_rendezvous() -> RunRendezvous {
        RunRendezvous {
            endpoint: "ddp-rdzv.ddp-workers:29400".into(),
            id: "uid-0".into(),
            saved_url: "http://ddp-rdzv.ddp-workers:29401/saved".into(),
        }
    }

    /// The variables of worker 0 of a job of two Workers with `elasticPolicy` `policy`.
    fn worker_variables(policy: &serde_json::Value, hosted: Option<&RunRendezvous>) -> Vec<EnvVar> {
        let job = job(json!({
            "elasticPolicy": policy,
            "pytorchReplicaSpecs": {"Worker": {"replicas": 2}}
        }));
        variables(
            "ddp",
            &Defaulted::of(&job),
            PyTorchReplicaType::Worker,
            0,
            hosted,
        )
    }

    #[test]
    fn a_hosted_run_keeps_its_group_through_a_lost_worker_on_every_torch() {
        let hosted = run_rendezvous();
        // (elasticPolicy, hosted by eto, PET_MAX_RESTARTS, TORCH_DISABLE_SHARE_RDZV_TCP_STORE)
        let cases = [
            (json!({}), true, Some("100"), Some("1")),
            (json!({"maxRestarts": 3}), true, Some("3"), Some("1")),
            (json!({"maxRestarts": 0}), true, Some("0"), Some("1")),
            (json!({}), false, None, None),
            (json!({"maxRestarts": 3}), false, Some("3"), None),
        ];
        for (policy, is_hosted, restarts, unshared) in cases {
            let variables = worker_variables(&policy, is_hosted.then_some(&hosted));
            let value = |name: &str| {
                variables
                    .iter()
                    .find(|var| var.name == name)
                    .and_then(|var| var.value.as_deref())
            };
            assert_eq!(value("PET_MAX_RESTARTS"), restarts, "{policy} {is_hosted}");
            assert_eq!(value(UNSHARED_STORE_ENV), unshared, "{policy} {is_hosted}");
            assert_eq!(
                value(MONITOR_INTERVAL_ENV),
                unshared.map(|_| HOSTED_MONITOR_INTERVAL),
                "{policy} {is_hosted}"
            );
        }
    }

    #[test]
    fn spares_wait_a_year_at_the_rendezvous_unless_rdzv_conf_says_otherwise() {
        let hosted = run_rendezvous();
        let own = json!([{"key": "join_timeout", "value": "900"}]);
        // (elasticPolicy, hosted by eto, PET_RDZV_CONF)
        let cases = [
            (json!({}), true, "is_host=false"),
            (json!({"spareReplicas": 0}), true, "is_host=false"),
            (
                json!({"spareReplicas": 1}),
                true,
                "is_host=false,join_timeout=31536000",
            ),
            (
                json!({"spareReplicas": 1, "rdzvConf": own}),
                true,
                "is_host=false,join_timeout=900",
            ),
        ];
        for (policy, is_hosted, conf) in cases {
            let variables = worker_variables(&policy, is_hosted.then_some(&hosted));
            let found = variables
                .iter()
                .find(|var| var.name == "PET_RDZV_CONF")
                .and_then(|var| var.value.as_deref());
            assert_eq!(found, Some(conf), "{policy}");
        }
    }

    #[test]
    fn a_variable_a_container_sets_itself_is_kept() {
        let mut spec = PodSpec {
            containers: vec![Container {
                name: "pytorch".into(),
                env: Some(vec![var("PET_NPROC_PER_NODE", "8")]),
                ..Container::default()
            }],
            init_containers: Some(vec![Container {
                name: "fetch".into(),
                ..Container::default()
            }]),
            ..PodSpec::default()
        };
        add_to(
            &mut spec,
            &[
                var("PYTHONUNBUFFERED", "1"),
                var("PET_NPROC_PER_NODE", "auto"),
            ],
        );
        assert_eq!(
            names_and_values(spec.containers[0].env.as_ref().unwrap()),
            pairs(&[("PET_NPROC_PER_NODE", "8"), ("PYTHONUNBUFFERED", "1")])
        );
        assert_eq!(spec.init_containers.as_ref().unwrap()[0].env, None);
    }
}
