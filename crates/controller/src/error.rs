//! What can go wrong in a reconcile.

use eto_engine::plan::RejectedPod;

/// A failed reconcile, by the stage that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Applying a child failed.
    #[error("failed to apply {kind} {name}: {source}")]
    Apply {
        /// Kind of the child.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Creating the SSH Secret failed.
    #[error("failed to create the SSH Secret {name}: {source}")]
    CreateSecret {
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Generating the SSH key pair failed.
    #[error("failed to generate an SSH key pair: {0}")]
    GenerateKey(#[source] ssh_key::Error),
    /// Deleting a child failed.
    #[error("failed to delete {kind} {name}: {source}")]
    Delete {
        /// Kind of the child.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing to a ScaleIn or ScaleOut failed.
    #[error("failed to update {kind} {name}: {source}")]
    WriteRequest {
        /// `ScaleIn` or `ScaleOut`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the job's status failed.
    #[error("failed to write the status: {0}")]
    Status(#[source] kube::Error),
    /// Reading a Secret the job names failed.
    #[error("failed to read Secret {name}: {source}")]
    ReadSecret {
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the job at the end of its time to live failed.
    #[error("failed to delete the finished job: {0}")]
    DeleteJob(#[source] kube::Error),
    /// A child's name is held by an object the job does not control (see
    /// [`crate::ownership`]).
    #[error(
        "{} {} is not this job's (controlled by {}); it is neither adopted nor overwritten",
        .0.kind,
        .0.name,
        .0.holder
    )]
    NameTaken(eto_engine::plan::TakenName),
    /// A child's name is still held by an object of another owner that is being deleted (for
    /// example of an earlier job of the same name).
    #[error(
        "{kind} {name} of another owner is still being deleted; its name is free once it is gone"
    )]
    NameInUse {
        /// Kind of the object.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// Reading an object failed.
    #[error("failed to read {kind} {name}: {source}")]
    Read {
        /// Its kind.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// An object could not be serialized.
    #[error("failed to serialize {what}: {source}")]
    Serialize {
        /// What.
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The object has no namespace or name.
    #[error("the object has no namespace or name")]
    MissingIdentity,
    /// The reconcile did not finish in time and was abandoned.
    #[error("the reconcile did not finish within {0:?} and was abandoned")]
    TimedOut(std::time::Duration),
}

impl Error {
    /// The pod this error is the API server's refusal to create, when retrying at once would
    /// not change the answer: the pod is invalid (`422`, `400`) or forbidden (`403`: a
    /// ResourceQuota, Pod Security admission, a webhook). The job is then planned knowing it
    /// (see `eto_engine::plan::RejectedPod`).
    pub fn rejected_pod(&self) -> Option<RejectedPod> {
        match self {
            Self::Apply {
                kind: "Pod",
                name,
                source: kube::Error::Api(status),
            } if matches!(status.code, 400 | 403 | 422) => Some(RejectedPod {
                name: name.clone(),
                message: status.message.clone(),
            }),
            _ => None,
        }
    }

    /// A short, stable label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Apply { .. } => "apply",
            Self::CreateSecret { .. } => "create_secret",
            Self::GenerateKey(_) => "generate_key",
            Self::Delete { .. } => "delete",
            Self::WriteRequest { .. } => "request",
            Self::Status(_) => "status",
            Self::ReadSecret { .. } => "read_secret",
            Self::DeleteJob(_) => "delete_job",
            Self::NameTaken(_) => "name_taken",
            Self::NameInUse { .. } => "name_in_use",
            Self::Read { .. } => "read",
            Self::Serialize { .. } => "serialize",
            Self::MissingIdentity => "missing_identity",
            Self::TimedOut(_) => "timeout",
        }
    }
}
