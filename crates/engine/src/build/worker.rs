//! Worker pods.

use eto_api::training_job::NodeCooldown;
use eto_api::well_known::{
    JOB_ROLE_LABEL, NOTICE_ANNOTATION, REPLICA_INDEX_LABEL, RUN_LABEL, WORKER_ROLE,
};
use k8s_openapi::api::core::v1::{DownwardAPIVolumeSource, Pod, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{DISCOVERY_DIR, Job, NOTICE_VOLUME, SSHD_COMMAND, annotation_file, merged, ssh_mount};
use crate::{cooldown, names, notice};

/// Worker `index` of `job`: the worker template with eto's labels (template labels and
/// annotations kept), `restartPolicy: Never` (eto, not the kubelet, replaces workers, under a new
/// name), the host name `<job>-worker-<index>` in the subdomain of the job's headless Service,
/// the SSH key pair in every container, the job's notice in `/etc/edl/notice` of every container
/// (see [`crate::notice`]), an SSH daemon as the first container's command when the template
/// gives none, and a preference against the nodes `in_cooldown` (see [`crate::cooldown`]).
pub fn worker_pod(job: Job<'_>, index: u32, in_cooldown: &[NodeCooldown]) -> Pod {
    let template = &job.job.spec.et_replica_specs.worker.template;
    let template_metadata = template.metadata.clone().unwrap_or_default();
    let name = names::worker(job.name(), index);
    let mut labels = job.labels();
    labels.insert(JOB_ROLE_LABEL.into(), WORKER_ROLE.into());
    labels.insert(REPLICA_INDEX_LABEL.into(), index.to_string());
    labels.insert(RUN_LABEL.into(), job.run.to_string());
    let annotations = merged(
        template_metadata.annotations.as_ref(),
        notice::annotations(job.notice),
    );
    let metadata = ObjectMeta {
        labels: Some(merged(template_metadata.labels.as_ref(), labels)),
        annotations: Some(annotations).filter(|a| !a.is_empty()),
        ..job.metadata(name.clone())
    };
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.restart_policy = Some("Never".into());
    spec.hostname = Some(name);
    spec.subdomain = Some(names::worker_service(job.name()));
    if let Some(first) = spec.containers.first_mut()
        && first.command.as_ref().is_none_or(Vec::is_empty)
    {
        first.command = Some(SSHD_COMMAND.iter().map(ToString::to_string).collect());
    }
    cooldown::avoiding(&mut spec, in_cooldown);
    let volumes = spec.volumes.get_or_insert_default();
    volumes.push(job.ssh_volume());
    volumes.push(Volume {
        name: NOTICE_VOLUME.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            default_mode: Some(0o444),
            items: Some(vec![annotation_file("notice", NOTICE_ANNOTATION, 0o444)]),
        }),
        ..Volume::default()
    });
    for container in &mut spec.containers {
        let mounts = container.volume_mounts.get_or_insert_default();
        mounts.push(ssh_mount());
        mounts.push(VolumeMount {
            name: NOTICE_VOLUME.into(),
            mount_path: DISCOVERY_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}
