//! A TrainingJob's launcher pod, as et-operator's launcher runs Horovod.

use std::collections::BTreeMap;

use eto_api::job_status::NodeCooldown;
use eto_api::well_known::{
    DEEPSPEED_HOSTFILE_ANNOTATION, HOSTFILE_ANNOTATION, NOTICE_ANNOTATION, RESUME_ENV,
};
use k8s_openapi::api::core::v1::{
    ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeSource, EnvVar, KeyToPath, Pod,
    ProjectedVolumeSource, Volume, VolumeMount, VolumeProjection,
};

use crate::builders::{
    DEEPSPEED_DIR, DEEPSPEED_VOLUME, DISCOVERY_DIR, DISCOVERY_VOLUME, resume_value,
};
use crate::builders::{join_gang, ssh_mounts, ssh_volume};
use crate::child::Child;
use crate::downward_api::annotation_file;
use crate::job::launcher::{LauncherInputs, LauncherObjects, RunningLauncher};
use crate::job::{JobContext, Role};
use crate::{discovery, names, notice};

use super::objects;

/// Environment the launcher's first container gets unless its template sets it: OpenMPI keeps
/// the hostfile's host names as they are (they resolve only in their full form) and finds the
/// hostfile.
const LAUNCHER_ENV: [(&str, &str); 2] = [
    ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
    ("OMPI_MCA_orte_default_hostfile", "/etc/edl/hostfile"),
];

/// The launcher of TrainingJob `job`: its pod, and the ConfigMap of host discovery it reads,
/// both showing the ready hosts `inputs.ready` (as `/etc/edl/hostfile` and DeepSpeed's
/// hostfile).
pub fn launcher_objects(job: JobContext<'_>, inputs: LauncherInputs<'_>) -> LauncherObjects {
    let hostfile = discovery::hostfile(inputs.ready);
    let deepspeed = discovery::deepspeed_hostfile(inputs.ready);
    LauncherObjects {
        config_map: Some(objects::config_map(job, &hostfile, &deepspeed)),
        launcher: Some(Child::Pod(Box::new(launcher_pod(
            job,
            &hostfile,
            &deepspeed,
            inputs.avoided,
        )))),
        running: RunningLauncher::Relabelled,
    }
}

/// The launcher pod of TrainingJob `job`, showing `hostfile` and `deepspeed_hostfile` to host discovery.
///
/// It is the launcher template with eto's labels, `restartPolicy: Never`, the service account
/// `<job>-launcher`, the SSH key pair in every container, and in its first container
/// `/etc/edl/discover_hosts.sh` and `/etc/edl/hostfile` (see [`crate::discovery`] for how they
/// stay current) and `/job/hostfile` for DeepSpeed; placed as [`crate::builders::place_launcher`] says,
/// away from the nodes `avoided`.
pub fn launcher_pod(
    job: JobContext<'_>,
    hostfile: &str,
    deepspeed_hostfile: &str,
    avoided: &[NodeCooldown],
) -> Pod {
    let template = job.job_ref.coordinator_template();
    let mut annotations = BTreeMap::from([
        (HOSTFILE_ANNOTATION.to_string(), hostfile.to_string()),
        (
            DEEPSPEED_HOSTFILE_ANNOTATION.to_string(),
            deepspeed_hostfile.to_string(),
        ),
    ]);
    annotations.extend(notice::annotations(job.notice));
    let mut metadata = job.pod_metadata(
        names::launcher(job.name()),
        template,
        job.pod_labels(Role::Launcher),
        annotations,
    );
    let mut spec = template
        .and_then(|template| template.spec.clone())
        .unwrap_or_default();
    spec.restart_policy = Some("Never".into());
    spec.service_account_name = Some(names::launcher_rbac(job.name()));
    let volumes = spec.volumes.get_or_insert_default();
    volumes.push(ssh_volume(&job));
    volumes.push(discovery_volume(job.name()));
    volumes.push(annotation_volume(
        DEEPSPEED_VOLUME,
        DEEPSPEED_HOSTFILE_ANNOTATION,
    ));
    for container in &mut spec.containers {
        container
            .volume_mounts
            .get_or_insert_default()
            .extend(ssh_mounts(&job));
    }
    if let Some(first) = spec.containers.first_mut() {
        let mounts = first.volume_mounts.get_or_insert_default();
        for (volume, path) in [
            (DISCOVERY_VOLUME, DISCOVERY_DIR),
            (DEEPSPEED_VOLUME, DEEPSPEED_DIR),
        ] {
            mounts.push(VolumeMount {
                name: volume.into(),
                mount_path: path.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
        }
        let env = first.env.get_or_insert_default();
        let eto_env = LAUNCHER_ENV
            .into_iter()
            .chain([(RESUME_ENV, resume_value(&job))]);
        for (name, value) in eto_env {
            if !env.iter().any(|var| var.name == name) {
                env.push(EnvVar {
                    name: name.into(),
                    value: Some(value.into()),
                    value_from: None,
                });
            }
        }
    }
    crate::builders::place_launcher(&job, &mut spec, avoided);
    crate::builders::hold_on_sigterm(&job, &mut spec);
    join_gang(&job, &mut metadata, &mut spec, Role::Launcher);
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// `/etc/edl`: the discovery script from the job's ConfigMap, the hostfile and the notice from
/// the launcher's own annotations.
fn discovery_volume(job: &str) -> Volume {
    Volume {
        name: DISCOVERY_VOLUME.into(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o444),
            sources: Some(vec![
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: names::config_map(job),
                        items: Some(vec![KeyToPath {
                            key: "discover_hosts.sh".into(),
                            path: "discover_hosts.sh".into(),
                            mode: Some(0o555),
                        }]),
                        optional: None,
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![
                            annotation_file("hostfile", HOSTFILE_ANNOTATION, 0o444),
                            annotation_file("notice", NOTICE_ANNOTATION, 0o444),
                        ]),
                    }),
                    ..VolumeProjection::default()
                },
            ]),
        }),
        ..Volume::default()
    }
}

fn annotation_volume(name: &str, annotation: &str) -> Volume {
    Volume {
        name: name.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            default_mode: Some(0o444),
            items: Some(vec![annotation_file("hostfile", annotation, 0o444)]),
        }),
        ..Volume::default()
    }
}
