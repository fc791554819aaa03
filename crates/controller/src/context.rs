//! What every reconcile gets: the client, the caches, the event publisher, the clock.

use std::sync::Arc;
use std::time::Duration;

use eto_engine::gang::Gang;
use eto_engine::job::Kind;
use eto_engine::node_warnings::Rules as NodeWarningRules;
use eto_engine::pod_group::GangScheduler;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::Store;
use tokio::sync::watch;

use crate::events::EventPublisher;
use crate::first_lists::Listed;
use crate::metrics::Metrics;
use crate::name_index::NameIndex;
use crate::pod_cache::PodCache;
use crate::progress_reads::ProgressReads;
use crate::resources::POD_GROUPS;
use crate::retries::Retries;
use crate::warned_nodes::WarnedNodes;

/// The gang scheduler the operator uses, and whether its PodGroups are served.
#[derive(Clone, Debug)]
pub struct GangSettings {
    /// The scheduler.
    pub scheduler: GangScheduler,
    /// The caches' first lists: the PodGroup API is served once its cache has listed.
    pub listed: Listed,
}

impl GangSettings {
    /// Gang scheduling as jobs are planned with it now.
    pub fn gang(&self) -> Gang<'_> {
        if self.listed.has(&[POD_GROUPS]) {
            Gang::Ready(&self.scheduler)
        } else {
            Gang::Missing(&self.scheduler)
        }
    }
}

/// Where a reconcile reads the time; tests pass a fixed one.
pub type Clock = Arc<dyn Fn() -> jiff::Timestamp + Send + Sync>;

/// The caches: the jobs of each kind, the ScaleIn and ScaleOut requests, and the objects eto
/// creates (those labelled `app.kubernetes.io/managed-by: eto`). The cache of a kind eto does
/// not serve stays empty.
#[derive(Clone)]
pub struct Stores {
    /// The jobs of each kind, as the controller watches them, at [`Kind::index`] (see
    /// [`Stores::jobs`]).
    pub jobs: [Store<DynamicObject>; Kind::COUNT],
    /// The launcher Jobs of MPIJobs.
    pub launcher_jobs: Store<BatchJob>,
    /// Launchers and workers, indexed by controller.
    pub pods: PodCache,
    /// Headless worker Services.
    pub services: Store<Service>,
    /// Discovery ConfigMaps.
    pub config_maps: Store<ConfigMap>,
    /// Generated SSH Secrets.
    pub secrets: Store<Secret>,
    /// Launcher ServiceAccounts.
    pub service_accounts: Store<ServiceAccount>,
    /// Launcher Roles.
    pub roles: Store<Role>,
    /// Launcher RoleBindings.
    pub role_bindings: Store<RoleBinding>,
    /// PyTorchJobs' HorizontalPodAutoscalers.
    pub autoscalers: Store<HorizontalPodAutoscaler>,
    /// ScaleIn requests (all of them: users create them).
    pub scale_ins: Store<DynamicObject>,
    /// ScaleOut requests (all of them).
    pub scale_outs: Store<DynamicObject>,
    /// The names of the ScaleIn requests of each job (see [`crate::observe::selected_job`]).
    pub scale_ins_by_job: NameIndex<DynamicObject>,
    /// The names of the ScaleOut requests of each job.
    pub scale_outs_by_job: NameIndex<DynamicObject>,
    /// The jobs' PodGroups, when the operator uses a gang scheduler (empty otherwise).
    pub pod_groups: Store<DynamicObject>,
    /// The nodes that announced they go away (none when eto reads no node warnings).
    pub warned_nodes: WarnedNodes,
    /// Their resource (of the gang scheduler in use; Volcano's when there is none).
    pub pod_groups_resource: ApiResource,
    /// Sent to after any cache changed; see [`Stores::show`].
    pub changes: watch::Sender<()>,
}

impl Stores {
    /// The cache of the jobs of `kind`.
    pub fn jobs(&self, kind: Kind) -> &Store<DynamicObject> {
        &self.jobs[kind.index()]
    }
}

/// Shared by every reconcile.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The caches.
    pub stores: Stores,
    /// Publishes events on jobs and scaling requests.
    pub events: EventPublisher,
    /// The time.
    pub clock: Clock,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// How long a reconcile waits for the caches to show its writes
    /// ([`crate::freshness::CACHE_WAIT`] when running).
    pub cache_wait: Duration,
    /// How long a reconcile may take before it is abandoned and retried
    /// ([`crate::Settings::reconcile_timeout`]).
    pub reconcile_timeout: Duration,
    /// The failures in a row of each object, for how soon to retry it.
    pub retries: Retries,
    /// The latest progress read of each job (see [`crate::progress_reads`]).
    pub progress_reads: ProgressReads,
    /// The gang scheduler jobs' pods go to, if any.
    pub gang: Option<GangSettings>,
    /// Which node warnings eto acts on (see [`eto_engine::node_warnings`]); `None`: none.
    pub node_warnings: Option<NodeWarningRules>,
    /// The client of the pod proxy, which does not retry (see [`crate::kubeai_stop`]); `None`
    /// sends no `kubeai` stop signals.
    pub pod_proxy: Option<Client>,
}

impl Context {
    /// Gang scheduling as jobs are planned with it now.
    pub fn gang(&self) -> Gang<'_> {
        self.gang.as_ref().map_or(Gang::Off, GangSettings::gang)
    }
}
