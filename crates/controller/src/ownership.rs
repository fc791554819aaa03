//! Which objects a job may write: only those it controls.
//!
//! A child's name can be held by an object eto did not create for this job: one made by hand
//! or by another tool, one orphaned by `kubectl delete --cascade=orphan`, or one of an
//! earlier job of the same name that is still being deleted. eto never adopts such an object
//! and never overwrites it:
//! - one the caches show is checked before any write;
//! - a ConfigMap, Service, ServiceAccount, Role or RoleBinding the caches lack is looked up
//!   (metadata only) before it is applied: the caches hold only objects labelled as eto's, so a
//!   foreign one would not be in them;
//! - the SSH Secret and an MPIJob's launcher Job are created, not applied, and an
//!   `AlreadyExists` answer is looked into;
//! - a new pod is applied without a look-up (a job creates many, and each look-up would be a
//!   request): the API server refuses to apply eto's pod over another pod, whose spec cannot
//!   change, and a refusal for a pod the caches lack is looked into.
//!
//! A name held by a foreign object is [`Error::NameTaken`]; the reconcile then plans again
//! knowing it (see [`eto_engine::plan::TakenName`]). A name held by an object being deleted is
//! [`Error::NameInUse`], retried like any failed write.

use eto_engine::plan::TakenName;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use eto_engine::children::Children;
use eto_engine::job::JobRef;

use crate::context::Context;
use crate::error::Error;
use crate::lookups;
use crate::resources::NamespacedObject;

/// The objects that may control a job's children: the job, and for the pods of an MPIJob's
/// launcher, its launcher Job.
#[derive(Clone, Debug)]
pub struct Owner {
    /// The job's uid.
    pub job: String,
    /// The uid of an MPIJob's launcher Job, once it exists.
    pub launcher_job: Option<String>,
}

impl Owner {
    /// The objects that may control the children of `job`: the job, and its launcher Job
    /// among `children`.
    pub fn of(children: &Children, job: JobRef<'_>) -> Self {
        Self {
            job: job.uid().to_string(),
            launcher_job: children
                .launcher_job
                .as_ref()
                .and_then(|launcher| launcher.metadata.uid.clone()),
        }
    }

    /// Whether the object with `metadata` is the job's.
    pub fn controls(&self, metadata: &ObjectMeta) -> bool {
        std::iter::once(self.job.as_str())
            .chain(self.launcher_job.as_deref())
            .any(|uid| eto_engine::job::controlled_by(metadata, uid))
    }

    /// Whether the job may write the existing object `metadata` of `kind`.
    ///
    /// # Errors
    /// [`Error::NameTaken`] when another object holds the name; [`Error::NameInUse`] when that
    /// object is being deleted.
    pub fn may_write(&self, kind: &'static str, metadata: &ObjectMeta) -> Result<(), Error> {
        if self.controls(metadata) {
            return Ok(());
        }
        let name = metadata.name.clone().unwrap_or_default();
        if metadata.deletion_timestamp.is_some() {
            return Err(Error::NameInUse { kind, name });
        }
        Err(Error::NameTaken(TakenName {
            kind,
            name,
            holder: holder(metadata),
        }))
    }

    /// Looks up the object `name` of kind `K` (metadata only) and checks that the job may write
    /// it: absent, or the job's.
    ///
    /// # Errors
    /// As [`Owner::may_write`], or the look-up failed.
    pub async fn check_existing<K>(
        &self,
        ctx: &Context,
        namespace: &str,
        name: &str,
    ) -> Result<(), Error>
    where
        K: NamespacedObject,
    {
        match lookups::read_metadata::<K>(ctx, namespace, name).await? {
            Some(metadata) => self.may_write(K::KIND, &metadata),
            None => Ok(()),
        }
    }
}

/// Who controls the object with `metadata`, as people read it: `Kind/name` of its controller,
/// or `nobody`.
fn holder(metadata: &ObjectMeta) -> String {
    metadata
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))
        .map_or_else(
            || "nobody".to_string(),
            |owner| format!("{}/{}", owner.kind, owner.name),
        )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    use super::*;

    fn owned_by(uid: &str, kind: &str, controller: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some("j-config".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: kind.into(),
                name: "other".into(),
                uid: uid.into(),
                controller: Some(controller),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        }
    }

    fn owner() -> Owner {
        Owner {
            job: "job-uid".into(),
            launcher_job: Some("launcher-uid".into()),
        }
    }

    #[test]
    fn the_job_writes_what_it_or_its_launcher_job_controls() {
        assert!(
            owner()
                .may_write("ConfigMap", &owned_by("job-uid", "TrainingJob", true))
                .is_ok()
        );
        assert!(
            owner()
                .may_write("Pod", &owned_by("launcher-uid", "Job", true))
                .is_ok()
        );
    }

    #[test]
    fn an_object_of_someone_else_or_of_nobody_is_taken() {
        let cases = [
            (
                owned_by("other-uid", "Deployment", true),
                "Deployment/other",
            ),
            // Owned, but not controlled, by the job: still not eto's to overwrite.
            (owned_by("job-uid", "TrainingJob", false), "nobody"),
            (ObjectMeta::default(), "nobody"),
        ];
        for (metadata, holder) in cases {
            match owner().may_write("ConfigMap", &metadata) {
                Err(Error::NameTaken(taken)) => {
                    assert_eq!(taken.kind, "ConfigMap");
                    assert_eq!(taken.holder, holder);
                }
                other => panic!("expected NameTaken for {metadata:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_object_of_someone_else_being_deleted_is_waited_for() {
        let mut metadata = owned_by("old-job-uid", "TrainingJob", true);
        metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert!(matches!(
            owner().may_write("Pod", &metadata),
            Err(Error::NameInUse { kind: "Pod", .. })
        ));
    }
}
