//! The run's launcher: what is observed of it, and the objects it needs (its kind builds
//! them, see [`crate::job::launcher`]): created once the run may start it, kept showing the
//! hosts of discovery and the job's notice while it runs.

use std::collections::BTreeMap;

use eto_api::well_known::{HOSTFILE_ANNOTATION, NOTICE_ANNOTATION};
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::builders;
use crate::conditions;
use crate::discovery::{self, Host};
use crate::disruption::{self, Disruption};
use crate::effective_spec::{LauncherStart, SshSecretSource};
use crate::job::launcher::{LauncherInputs, RunningLauncher};
use crate::plan::observed::needs_apply;
use crate::plan::{Child, SecretPresence};
use crate::pod_metadata::PodMetadata;
use crate::{names, node_warnings, notice, pods};

use super::{Run, suspension, template_change};

/// The launcher of the current run, as observed.
#[derive(Clone, Debug)]
pub(super) struct Launcher<'o> {
    /// Its pod: a TrainingJob's launcher pod, the newest pod of an MPIJob's launcher Job.
    pub(super) pod: Option<&'o Pod>,
    /// `Pending`, `Running`, `Succeeded` or `Failed`: the pod's phase, or the outcome of the
    /// launcher Job.
    pub(super) phase: &'o str,
    /// Why the launcher Job failed, when it says so.
    pub(super) job_failure: Option<&'o str>,
    /// How the platform took the launcher, or is taking it (see [`crate::disruption`]): its
    /// pod (of an MPIJob, any pod of its launcher Job in this run) is disrupted, was ended by
    /// its node, or is being deleted, as is an MPIJob's launcher Job.
    pub(super) disruption: Option<Disruption>,
}

impl Launcher<'_> {
    /// Whether it runs (being deleted or not: until it exits, its training can checkpoint).
    pub(super) fn is_running(&self) -> bool {
        self.phase == "Running"
    }
}

/// Whether the condition `type_` of a batch Job holds.
fn job_condition(job: &BatchJob, type_: &str) -> bool {
    job.status
        .iter()
        .flat_map(|status| status.conditions.iter().flatten())
        .any(|condition| condition.type_ == type_ && condition.status == "True")
}

impl<'o> Run<'_, 'o> {
    /// Whether the run's launcher, which starts only once the run has its minimum, runs.
    pub(super) fn launcher_waited(&self) -> bool {
        self.context.spec.launcher_start == LauncherStart::WhenMinReady
            && self.launcher().is_some_and(|l| l.is_running())
    }

    /// The launcher of the current run, if it exists.
    pub(super) fn launcher(&self) -> Option<Launcher<'o>> {
        if self.context.job_ref.coordinator().runs_in_a_batch_job {
            let job = self
                .observed
                .launcher_job
                .filter(|job| !self.is_of_earlier_run(&job.metadata))?;
            let role_label = self.context.kind().vocabulary().role_label;
            let of_run = || {
                self.observed
                    .pods
                    .iter()
                    .copied()
                    .filter(|p| {
                        pods::label(p, role_label)
                            == Some(self.context.kind().vocabulary().launcher_role)
                    })
                    .filter(|p| !self.is_stale(p))
            };
            // The Job replaces a pod the platform took (its pod failure policy ignores
            // the loss): the loss still ends the run.
            let disruption = if job.metadata.deletion_timestamp.is_some() {
                Some(Disruption {
                    reason: "Deleted".into(),
                    node: None,
                    ended: false,
                })
            } else {
                of_run().find_map(disruption::of)
            };
            let pod = of_run().max_by(|a, b| {
                let created = |p: &Pod| p.metadata.creation_timestamp.clone();
                created(a)
                    .cmp(&created(b))
                    .then_with(|| a.metadata.name.cmp(&b.metadata.name))
            });
            let failure = job
                .status
                .iter()
                .flat_map(|status| status.conditions.iter().flatten())
                .find(|condition| condition.type_ == "Failed" && condition.status == "True");
            let phase = if job_condition(job, "Complete") {
                "Succeeded"
            } else if failure.is_some() {
                "Failed"
            } else {
                pod.map_or("Pending", pods::phase)
            };
            Some(Launcher {
                pod,
                phase,
                job_failure: failure.and_then(|f| f.message.as_deref().or(f.reason.as_deref())),
                disruption,
            })
        } else {
            let name = self.context.job_ref.launcher_name();
            let pod = self
                .observed
                .pods
                .iter()
                .copied()
                .find(|p| p.metadata.name.as_deref() == Some(&name) && !self.is_stale(p))?;
            Some(Launcher {
                pod: Some(pod),
                phase: pods::phase(pod),
                job_failure: None,
                disruption: disruption::of(pod),
            })
        }
    }

    pub(super) fn apply_supporting_objects(&mut self) {
        let job = self.context;
        let observed = self.observed;
        let plan = &mut self.planner.plan;
        for child in (job.job_ref.kind().vocabulary().supporting_objects)(job) {
            if observed.needs_apply(&child) {
                plan.apply.push(child);
            }
        }
        if observed.ssh_secret == SecretPresence::Missing
            && job.spec.ssh_secret == SshSecretSource::Generated
        {
            plan.create_ssh_secret = Some(builders::ssh_secret(job));
        }
    }

    /// The ready workers `hosts`, after the launcher when it trains too.
    pub(super) fn with_launcher_as_worker(&self, hosts: Vec<Host>) -> Vec<Host> {
        let launcher = (self.context.kind().vocabulary().launcher_host)(self.job());
        launcher.into_iter().chain(hosts).collect()
    }

    /// Every worker of the target as a host, ready or not, after the launcher when it trains
    /// too.
    pub(super) fn target_hosts(&self) -> Vec<Host> {
        let name = self.name();
        let workers = self
            .planner
            .status
            .target_workers
            .iter()
            .filter_map(|worker| names::worker_index(name, worker))
            .map(|index| Host {
                name: self.context.worker_host(index),
                slots: self.context.spec.slots_per_worker,
            })
            .collect();
        self.with_launcher_as_worker(workers)
    }

    /// Whether a pod named `name` exists, of any run.
    pub(super) fn pod_exists(&self, name: &str) -> bool {
        self.observed
            .pods
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(name))
    }

    pub(super) fn discovery_and_launcher(&mut self, hosts: &[Host]) {
        let min = self.context.spec.workers.min as usize;
        let name = self.context.job_ref.launcher_name();
        if self.launcher().is_some()
            && !conditions::is_true(
                &self.planner.status.conditions,
                conditions::LAUNCHER_CREATED,
            )
        {
            // Created by an operator that stopped before recording it.
            let message = format!("{} {name} exists", self.context.job_ref.launcher_called());
            self.planner.condition(
                conditions::LAUNCHER_CREATED,
                true,
                "LauncherCreated",
                &message,
            );
        }
        // What the launcher would be if created now, and whether an earlier one (of any run)
        // still holds its name.
        let avoided = node_warnings::avoided(&self.planner.warned);
        let target = self.target_hosts();
        let inputs = LauncherInputs {
            ready: hosts,
            target: &target,
            avoided: &avoided,
        };
        let built = (self.context.kind().vocabulary().launcher_objects)(self.job(), inputs);
        if let Some(config_map) = built.config_map {
            self.apply_config_map(config_map);
        }
        let Some(desired) = built.launcher else {
            return;
        };
        if let Some(launcher) = self.launcher() {
            if let Some(pod) = launcher.pod.filter(|p| !pods::is_finished(p)) {
                self.update_running_launcher(pod, &desired, built.running, hosts);
            }
            return;
        }
        let old_launcher_present = match desired {
            Child::LauncherJob(_) => self.observed.launcher_job.is_some(),
            _ => self.pod_exists(&name),
        };
        // A lost Lighthouse is created again within the run (see coordinator_replacement.rs).
        let replaced_within_the_run = self.context.job_ref.coordinator().groups_stand_alone;
        let may_create = (replaced_within_the_run && !self.coordinator_waits())
            || !conditions::is_true(
                &self.planner.status.conditions,
                conditions::LAUNCHER_CREATED,
            );
        let workers_allow = match self.context.spec.launcher_start {
            LauncherStart::WhenMinReady => hosts.len() >= min,
            LauncherStart::AtStartup => true,
        };
        if may_create && workers_allow && !old_launcher_present {
            let mut desired = desired;
            let digest = self.coordinator_template_digest();
            match &mut desired {
                Child::Pod(pod) => template_change::stamp(&mut pod.metadata, digest),
                Child::LauncherJob(job) => {
                    if let Some(template) = job.spec.as_mut().map(|spec| &mut spec.template) {
                        template_change::stamp(template.metadata.get_or_insert_default(), digest);
                    }
                }
                _ => {}
            }
            self.planner.plan.apply.push(desired);
            self.resumed_after_loss(hosts.len());
            let message = format!(
                "{} {name} created with {}{}",
                self.context.job_ref.launcher_called(),
                suspension::workers(
                    u32::try_from(hosts.len()).unwrap_or(u32::MAX),
                    "worker",
                    "workers"
                ),
                self.context.kind().hosts_listed_suffix()
            );
            self.planner.condition(
                conditions::LAUNCHER_CREATED,
                true,
                "LauncherCreated",
                &message,
            );
            self.planner
                .event(false, "LauncherCreated", "Create", message);
        }
    }

    pub(super) fn apply_config_map(&mut self, config_map: k8s_openapi::api::core::v1::ConfigMap) {
        if needs_apply(&config_map, self.observed.config_map) {
            self.planner
                .plan
                .apply
                .push(Child::ConfigMap(Box::new(config_map)));
        }
    }

    /// Changes the launcher pod `pod`, which runs, as its kind says (`running`): toward the
    /// launcher as it would be created now (`desired`), or only the annotations of the ready
    /// `hosts` and the job's notice.
    pub(super) fn update_running_launcher(
        &mut self,
        pod: &Pod,
        desired: &Child,
        running: RunningLauncher,
        hosts: &[Host],
    ) {
        match (running, desired) {
            (RunningLauncher::Relabelled, Child::Pod(desired)) => {
                if let Some(change) = metadata_change(&desired.metadata, pod) {
                    self.planner.plan.apply.push(change);
                }
            }
            (RunningLauncher::Annotated, _) => {
                self.annotate_launcher_pod(pod, &discovery::hostfile(hosts));
            }
            _ => {}
        }
    }

    /// Shows the ready hosts and the job's notice on a launcher pod the job does not control
    /// (an MPIJob's launcher Job's), applying only these annotations to it.
    pub(super) fn annotate_launcher_pod(&mut self, pod: &Pod, ready_hosts: &str) {
        let mut annotations =
            BTreeMap::from([(HOSTFILE_ANNOTATION.to_string(), ready_hosts.to_string())]);
        annotations.extend(notice::annotations(
            notice::for_pod(
                pod,
                self.notice.as_ref(),
                &self.planner.warned,
                self.planner.now,
            )
            .as_ref(),
        ));
        let desired = ObjectMeta {
            annotations: Some(annotations),
            ..ObjectMeta::default()
        };
        if let Some(change) = metadata_change(&desired, pod) {
            self.planner.plan.apply.push(change);
        }
    }
}

/// The change that makes `observed` show the labels and annotations of `desired` (eto's pod):
/// a value eto sets that the pod lacks or has otherwise, or a notice the pod shows that eto no
/// longer wants. `None` when it shows them already.
pub(super) fn metadata_change(desired: &ObjectMeta, observed: &Pod) -> Option<Child> {
    PodMetadata::change(desired, &observed.metadata, &[NOTICE_ANNOTATION]).map(Child::PodMetadata)
}
