//! What the operator may do in the cluster: the one list the Helm chart's RBAC must match
//! (a test renders the chart and compares). Each grant names the code that needs it.

use crate::Kind;

/// Verbs on resources of one API group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resources, subresources as `resource/subresource`.
    pub resources: Vec<String>,
    /// Verbs.
    pub verbs: &'static [&'static str],
}

/// A grant of `verbs` on `resources` of `group`.
fn grant(group: &'static str, resources: &[&str], verbs: &'static [&'static str]) -> Grant {
    Grant {
        group,
        resources: resources
            .iter()
            .map(|resource| resource.to_string())
            .collect(),
        verbs,
    }
}

/// The operator's ClusterRole: [`job_grants`], then what the jobs' children and requests
/// need. Children are written by server-side apply: a `patch` request, which kube-apiserver
/// authorizes as `create` when the object does not exist yet, so both verbs are needed.
/// Batch Jobs and generated Secrets are created with `create`.
pub fn cluster_grants() -> Vec<Grant> {
    let mut grants = job_grants();
    grants.extend([
        // ScaleIn and ScaleOut requests: watched; the job is added to their owners; status written.
        grant(
            "kai.alibabacloud.com",
            &["scaleins", "scaleouts"],
            &["list", "watch", "patch"],
        ),
        grant(
            "kai.alibabacloud.com",
            &["scaleins/status", "scaleouts/status"],
            &["patch"],
        ),
        // An MPIJob's launcher Job: created once per run, deleted when the run ends; `get` (by
        // metadata, as for every child below) to tell one of another owner that holds its name
        // (see crate::ownership).
        grant(
            "batch",
            &["jobs"],
            &["get", "list", "watch", "create", "delete"],
        ),
        // Workers, launchers (a PyTorchJob's Master) and the Services of the workers (of each of a
        // PyTorchJob's pods): applied, and deleted when lost or done.
        grant(
            "",
            &["pods", "services"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        // Requests to training pods through the API server's pod proxy: `get` for the kubeai
        // SDK's stop signal (crate::kubeai_stop) and a rendezvous store's report
        // (crate::group_report), `create` (POST) for the store's orders (crate::group_orders).
        grant("", &["pods/proxy"], &["get", "create"]),
        // The job's ConfigMap; `get` because the launcher's Role grants it (a Role can only grant
        // what its writer holds).
        grant(
            "",
            &["configmaps"],
            &["get", "list", "watch", "create", "patch"],
        ),
        grant(
            "",
            &["serviceaccounts"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // SSH key pairs: eto's own are watched and created; one a job names is read by metadata.
        grant("", &["secrets"], &["get", "list", "watch", "create"]),
        // A TrainingJob launcher's Role and RoleBinding.
        grant(
            "rbac.authorization.k8s.io",
            &["roles", "rolebindings"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // A PyTorchJob's HorizontalPodAutoscaler (v1's, from `elasticPolicy.metrics`): watched,
        // applied, deleted when the job suspends or ends or drops its metrics.
        grant(
            "autoscaling",
            &["horizontalpodautoscalers"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        // A job's PodGroup when a gang scheduler is configured (Volcano's or scheduler-plugins'
        // API, see crate::pod_groups): watched, applied, deleted when the job suspends or ends.
        grant(
            "scheduling.volcano.sh",
            &["podgroups"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        grant(
            "scheduling.x-k8s.io",
            &["podgroups"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        // Events: one create per decision, never updated (crate::events).
        grant("events.k8s.io", &["events"], &["create"]),
        // The runtimes TrainJobs name, read at each of their reconciles.
        grant(
            "trainer.kubeflow.org",
            &["trainingruntimes", "clustertrainingruntimes"],
            &["get"],
        ),
    ]);
    grants
}

/// The jobs of every kind eto serves: watched; deleted after `ttlSecondsAfterFinished`;
/// status written by apply.
fn job_grants() -> Vec<Grant> {
    Kind::ALL
        .into_iter()
        .flat_map(|kind| {
            let plural = kind.plural();
            [
                grant(kind.group(), &[plural], &["list", "watch", "delete"]),
                grant(kind.group(), &[&format!("{plural}/status")], &["patch"]),
            ]
        })
        .collect()
}

/// A ClusterRole of its own (Nodes are cluster-scoped, so a namespace's RoleBinding cannot
/// grant them) for the advance warnings of node losses (see `eto_engine::node_warnings`):
/// the Node watch of [`crate::caches`]. Without node warnings it is not needed.
pub fn node_grants() -> Vec<Grant> {
    vec![grant("", &["nodes"], &["list", "watch"])]
}

/// The Role in the operator's namespace for leader election (see [`crate::leader`]): the
/// lease manager reads, creates and patches the Lease; standbys watch it.
pub fn lease_grants() -> Vec<Grant> {
    vec![grant(
        "coordination.k8s.io",
        &["leases"],
        &["get", "list", "watch", "create", "patch"],
    )]
}
