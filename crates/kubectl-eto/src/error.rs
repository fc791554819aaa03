//! What can go wrong in a command, each case with the message a user reads.

/// A failed command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or has no usable context.
    #[error("cannot load the kubeconfig: {0}")]
    Kubeconfig(String),
    /// No job of that name.
    #[error("no {} named {name:?} in namespace {namespace:?}", kinds_served())]
    JobNotFound {
        /// Namespace searched.
        namespace: String,
        /// Name asked for.
        name: String,
    },
    /// `hosts` of a job whose workers are not listed in host discovery.
    #[error(
        "{kind} {namespace}/{name} has no host discovery: only a job whose launcher reads a hostfile has one ({})",
        kinds_with_discovery()
    )]
    NoHostDiscovery {
        /// The job's kind.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The CRD of no kind eto serves is installed.
    #[error(
        "none of eto's APIs is installed in this cluster (no CustomResourceDefinition {}); install eto's CRDs first",
        crds_served()
    )]
    NoCrdInstalled,
    /// The CRD of a kind is not installed.
    #[error(
        "the {kind} API is not installed in this cluster (no CustomResourceDefinition {crd}); install eto's CRDs first"
    )]
    CrdMissing {
        /// The kind.
        kind: &'static str,
        /// The CRD's name.
        crd: &'static str,
    },
    /// The API server refused the request for lack of permission.
    #[error("forbidden: you may not {verb} {resource}{}: {message}", in_namespace(.namespace))]
    Forbidden {
        /// The verb refused, as RBAC names it.
        verb: &'static str,
        /// The resource, as RBAC names it.
        resource: String,
        /// The namespace, if the request had one.
        namespace: Option<String>,
        /// The API server's message.
        message: String,
    },
    /// The API server returned a job eto's types do not fit (a CRD installed without
    /// validation, or by another version of eto).
    #[error("cannot read a {resource} object: {message}")]
    Undecodable {
        /// The resource.
        resource: String,
        /// What does not fit, naming the field.
        message: String,
    },
    /// The request is not allowed by the job's own rules.
    #[error("{0}")]
    Refused(String),
    /// Any other answer of the API server, or no answer.
    #[error("cannot {verb} {resource}: {source}")]
    Api {
        /// The verb.
        verb: &'static str,
        /// The resource.
        resource: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
    /// Output could not be written.
    #[error("cannot write the output: {0}")]
    Output(String),
}

/// The kinds eto serves, for a message: `TrainingJob, MPIJob, PyTorchJob or TrainJob`.
fn kinds_served() -> String {
    let names = eto_engine::job::Kind::ALL.map(|kind| kind.vocabulary().name);
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The CRDs of the kinds eto serves: `trainingjobs.kai.alibabacloud.com, ...`.
fn crds_served() -> String {
    eto_engine::job::Kind::ALL
        .map(|kind| kind.vocabulary().resource)
        .join(", ")
}

/// The kinds whose launcher reads host discovery: `TrainingJob, MPIJob`.
fn kinds_with_discovery() -> String {
    let kinds = eto_engine::job::Kind::ALL
        .into_iter()
        .filter(|kind| kind.vocabulary().coordinator.reads_host_discovery);
    kinds
        .map(|kind| kind.vocabulary().name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn in_namespace(namespace: &Option<String>) -> String {
    namespace
        .as_ref()
        .map(|namespace| format!(" in namespace {namespace:?}"))
        .unwrap_or_default()
}

/// What a request was: its verb and resource as RBAC names them, and its namespace.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// `get`, `list`, `patch`, ...
    pub verb: &'static str,
    /// For example `trainingjobs.kai.alibabacloud.com` or `pods`.
    pub resource: &'a str,
    /// The namespace, if the request had one.
    pub namespace: Option<&'a str>,
}

impl Request<'_> {
    /// Turns the failure of this request into the error a user reads.
    pub fn failed(&self, source: kube::Error) -> Error {
        match &source {
            kube::Error::Api(status) if status.code == 403 => Error::Forbidden {
                verb: self.verb,
                resource: self.resource.to_string(),
                namespace: self.namespace.map(String::from),
                message: status.message.clone(),
            },
            _ => Error::Api {
                verb: self.verb,
                resource: self.resource.to_string(),
                source,
            },
        }
    }
}

/// Whether `error` says the resource (or its whole API) does not exist.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_that_list_kinds_list_every_kind_eto_serves() {
        let missing = Error::JobNotFound {
            namespace: "team".into(),
            name: "x".into(),
        };
        assert_eq!(
            missing.to_string(),
            "no TrainingJob, MPIJob, PyTorchJob or TrainJob named \"x\" in namespace \"team\""
        );
        assert_eq!(
            Error::NoCrdInstalled.to_string(),
            "none of eto's APIs is installed in this cluster (no CustomResourceDefinition \
             trainingjobs.kai.alibabacloud.com, mpijobs.kubeflow.org, pytorchjobs.kubeflow.org, \
             trainjobs.trainer.kubeflow.org); \
             install eto's CRDs first"
        );
        let no_discovery = Error::NoHostDiscovery {
            kind: "PyTorchJob",
            namespace: "team".into(),
            name: "ddp".into(),
        };
        assert!(
            no_discovery.to_string().ends_with(
                "only a job whose launcher reads a hostfile has one (TrainingJob, MPIJob)"
            ),
            "{no_discovery}"
        );
    }
}
