//! A valid job as the builders of its objects take it: the job, its validated spec, and what
//! the plan decided of its run, with the names, labels and metadata every object of the job
//! carries.

use std::collections::BTreeMap;

use eto_api::job_status::{NodeCooldown, Notice};
use eto_api::well_known::{MANAGED_BY_LABEL, MANAGER, RUN_LABEL};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::kind::Kind;
use super::served::JobRef;
use crate::effective_spec::EffectiveSpec;
use crate::pod_group::GangScheduler;

/// The role of a pod in its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The launcher.
    Launcher,
    /// A worker.
    Worker,
}

impl Role {
    /// The value of `kind`'s role label.
    pub fn label_value(self, kind: Kind) -> &'static str {
        match self {
            Self::Launcher => kind.vocabulary().launcher_role,
            Self::Worker => eto_api::well_known::WORKER_ROLE,
        }
    }
}

/// A valid job, as the builders need it: the job, its validated spec, and what this plan
/// decided of its run.
#[derive(Clone, Copy, Debug)]
pub struct JobContext<'a> {
    /// The job.
    pub job_ref: JobRef<'a>,
    /// Its validated spec.
    pub spec: &'a EffectiveSpec,
    /// Its current run (`status.run`), recorded on the pods created now.
    pub run: i32,
    /// The notice its pods show (`status.notice`).
    pub notice: Option<&'a Notice>,
    /// The gang scheduler its pods go to, if the operator uses one.
    pub gang: Option<&'a GangScheduler>,
}

impl<'a> JobContext<'a> {
    /// The job's name.
    pub fn name(&self) -> &'a str {
        self.job_ref.name()
    }

    /// Worker `index` as the job's kind builds it, avoiding the nodes `in_cooldown` and
    /// leaving a node that stopped reporting after a while (see
    /// [`crate::unreachable_nodes`]); `None` if the spec cannot give one (validation reports
    /// why).
    pub fn worker_pod(self, index: u32, in_cooldown: &[NodeCooldown]) -> Option<Pod> {
        let mut pod = (self.kind().vocabulary().worker_pod)(self, index, in_cooldown)?;
        crate::unreachable_nodes::leave_after_a_while(pod.spec.get_or_insert_default());
        Some(pod)
    }

    /// The job's namespace.
    pub fn namespace(&self) -> &'a str {
        self.job_ref.namespace()
    }

    /// The job's kind.
    pub fn kind(&self) -> Kind {
        self.job_ref.kind()
    }

    /// The owner reference every child carries: controller, blocking owner deletion.
    pub fn owner(&self) -> OwnerReference {
        self.job_ref.owner_reference()
    }

    /// The labels on every object of the job: the original operator's job labels and
    /// [`MANAGED_BY_LABEL`].
    pub fn labels(&self) -> BTreeMap<String, String> {
        let kind = self.kind();
        let operator = kind.vocabulary().operator_label;
        BTreeMap::from([
            (operator.0.to_string(), operator.1.to_string()),
            (
                kind.vocabulary().job_name_label.to_string(),
                self.name().to_string(),
            ),
            (MANAGED_BY_LABEL.to_string(), MANAGER.to_string()),
        ])
    }

    /// The labels of a pod of the current run in `role`.
    pub fn pod_labels(&self, role: Role) -> BTreeMap<String, String> {
        let mut labels = self.labels();
        labels.insert(
            self.kind().vocabulary().role_label.to_string(),
            role.label_value(self.kind()).to_string(),
        );
        labels.insert(RUN_LABEL.to_string(), self.run.to_string());
        labels
    }

    /// The headless Service that gives the pods their DNS names: `<job>-workers` for a
    /// TrainingJob, `<job>` for an MPIJob (as mpi-operator names it).
    pub fn service_name(&self) -> String {
        self.kind().service_name(self.name())
    }

    /// The host name of worker `index` as host discovery and the hostfile list it.
    pub fn worker_host(&self, index: u32) -> String {
        self.kind()
            .worker_host(self.name(), self.namespace(), index)
    }

    /// Metadata of pod `name` built from `template`: the template's labels and annotations,
    /// with `labels` and `annotations` (eto's) over them, the job's owner.
    pub fn pod_metadata(
        &self,
        name: String,
        template: Option<&PodTemplateSpec>,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    ) -> ObjectMeta {
        let template_metadata = template.and_then(|template| template.metadata.as_ref());
        let annotations = merged(
            template_metadata.and_then(|m| m.annotations.as_ref()),
            annotations,
        );
        ObjectMeta {
            labels: Some(merged(
                template_metadata.and_then(|m| m.labels.as_ref()),
                labels,
            )),
            annotations: Some(annotations).filter(|a| !a.is_empty()),
            ..self.metadata(name)
        }
    }

    /// Metadata of a child named `name`, with the job's labels and owner.
    pub fn metadata(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace().to_string()),
            labels: Some(self.labels()),
            owner_references: Some(vec![self.owner()]),
            ..ObjectMeta::default()
        }
    }
}

/// Merges `ours` over `theirs` (template labels or annotations): eto's keys win.
pub fn merged(
    theirs: Option<&BTreeMap<String, String>>,
    ours: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged = theirs.cloned().unwrap_or_default();
    merged.extend(ours);
    merged
}
