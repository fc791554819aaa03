//! What the operator may do in the cluster: the one list the Helm chart's RBAC must match
//! (a test renders the chart and compares). Each grant names the code that needs it.

/// Verbs on resources of one API group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resources, subresources as `resource/subresource`.
    pub resources: &'static [&'static str],
    /// Verbs.
    pub verbs: &'static [&'static str],
}

/// The operator's ClusterRole. Children are written by server-side apply: a `patch`
/// request, which kube-apiserver authorizes as `create` when the object does not exist yet,
/// so both verbs are needed. Batch Jobs and generated Secrets are created with `create`.
pub const CLUSTER_GRANTS: &[Grant] = &[
    // Jobs: watched; deleted after ttlSecondsAfterFinished; status written by apply.
    Grant {
        group: "kai.alibabacloud.com",
        resources: &["trainingjobs"],
        verbs: &["list", "watch", "delete"],
    },
    Grant {
        group: "kai.alibabacloud.com",
        resources: &["trainingjobs/status"],
        verbs: &["patch"],
    },
    // ScaleIn and ScaleOut requests: watched; the job is added to their owners; status written.
    Grant {
        group: "kai.alibabacloud.com",
        resources: &["scaleins", "scaleouts"],
        verbs: &["list", "watch", "patch"],
    },
    Grant {
        group: "kai.alibabacloud.com",
        resources: &["scaleins/status", "scaleouts/status"],
        verbs: &["patch"],
    },
    Grant {
        group: "kubeflow.org",
        resources: &["mpijobs", "pytorchjobs"],
        verbs: &["list", "watch", "delete"],
    },
    Grant {
        group: "kubeflow.org",
        resources: &["mpijobs/status", "pytorchjobs/status"],
        verbs: &["patch"],
    },
    // An MPIJob's launcher Job: created once per run, deleted when the run ends; `get` (by
    // metadata, as for every child below) to tell one of another owner that holds its name
    // (see crate::ownership).
    Grant {
        group: "batch",
        resources: &["jobs"],
        verbs: &["get", "list", "watch", "create", "delete"],
    },
    // Workers, launchers (a PyTorchJob's Master) and the Services of the workers (of each of a
    // PyTorchJob's pods): applied, and deleted when lost or done.
    Grant {
        group: "",
        resources: &["pods", "services"],
        verbs: &["get", "list", "watch", "create", "patch", "delete"],
    },
    // The kubeai SDK's stop signal, sent to training pods through the API server's pod proxy
    // (crate::kubeai): `get` of a pod's port, nothing else.
    Grant {
        group: "",
        resources: &["pods/proxy"],
        verbs: &["get"],
    },
    // The job's ConfigMap; `get` because the launcher's Role grants it (a Role can only grant
    // what its writer holds).
    Grant {
        group: "",
        resources: &["configmaps"],
        verbs: &["get", "list", "watch", "create", "patch"],
    },
    Grant {
        group: "",
        resources: &["serviceaccounts"],
        verbs: &["get", "list", "watch", "create", "patch"],
    },
    // SSH key pairs: eto's own are watched and created; one a job names is read by metadata.
    Grant {
        group: "",
        resources: &["secrets"],
        verbs: &["get", "list", "watch", "create"],
    },
    // A TrainingJob launcher's Role and RoleBinding.
    Grant {
        group: "rbac.authorization.k8s.io",
        resources: &["roles", "rolebindings"],
        verbs: &["get", "list", "watch", "create", "patch"],
    },
    // A PyTorchJob's HorizontalPodAutoscaler (v1's, from `elasticPolicy.metrics`): watched,
    // applied, deleted when the job suspends or ends or drops its metrics.
    Grant {
        group: "autoscaling",
        resources: &["horizontalpodautoscalers"],
        verbs: &["get", "list", "watch", "create", "patch", "delete"],
    },
    // A job's PodGroup when a gang scheduler is configured (Volcano's or scheduler-plugins'
    // API, see crate::pod_groups): watched, applied, deleted when the job suspends or ends.
    Grant {
        group: "scheduling.volcano.sh",
        resources: &["podgroups"],
        verbs: &["get", "list", "watch", "create", "patch", "delete"],
    },
    Grant {
        group: "scheduling.x-k8s.io",
        resources: &["podgroups"],
        verbs: &["get", "list", "watch", "create", "patch", "delete"],
    },
    // Events: one create per decision, never updated (crate::events).
    Grant {
        group: "events.k8s.io",
        resources: &["events"],
        verbs: &["create"],
    },
];

/// A ClusterRole of its own (Nodes are cluster-scoped, so a namespace's RoleBinding cannot
/// grant them) for the advance warnings of node losses (see `eto_engine::node_warnings`):
/// the Node watch of [`crate::caches`]. Without node warnings it is not needed.
pub const NODE_GRANTS: &[Grant] = &[Grant {
    group: "",
    resources: &["nodes"],
    verbs: &["list", "watch"],
}];

/// The Role in the operator's namespace for leader election (see [`crate::leader`]): the
/// lease manager reads, creates and patches the Lease; standbys watch it.
pub const LEASE_GRANTS: &[Grant] = &[Grant {
    group: "coordination.k8s.io",
    resources: &["leases"],
    verbs: &["get", "list", "watch", "create", "patch"],
}];
