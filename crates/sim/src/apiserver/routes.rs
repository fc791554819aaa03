//! Kubernetes API paths, parsed.

use crate::resources::{Registry, ResourceId};

/// What a request path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez`.
    Health,
    /// `/api`.
    CoreVersions,
    /// `/api/v1` or `/apis/<group>/<version>`.
    ResourceList {
        /// The group, empty for core.
        group: String,
        /// The version.
        version: String,
    },
    /// `/apis`.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`.
    OpenApiDocument {
        /// The group, empty for core.
        group: String,
        /// The version.
        version: String,
    },
    /// A collection: `.../<plural>`, optionally in a namespace.
    Collection {
        /// The resource.
        resource: ResourceId,
        /// The version in the path.
        version: String,
        /// The namespace, `None` for all namespaces or cluster-scoped resources.
        namespace: Option<String>,
    },
    /// One object, or a subresource of it.
    Object {
        /// The resource.
        resource: ResourceId,
        /// The version in the path.
        version: String,
        /// The namespace, empty for cluster-scoped resources.
        namespace: String,
        /// The object name.
        name: String,
        /// `status`, `scale`, `log`, ... or `None` for the object itself.
        subresource: Option<String>,
    },
    /// Nothing served here.
    Unknown,
    /// `.../namespaces/<ns>/pods/<name>[:<port>]/proxy/<path>`: a request to a pod's port.
    PodProxy {
        /// The pod's namespace.
        namespace: String,
        /// `name` or `name:port`.
        target: String,
        /// The path at the pod.
        path: String,
    },
}

/// The Kubernetes verb of a request on a resource, as RBAC and audit logs name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// `GET` of one object (or of a subresource).
    Get,
    /// `GET` of a collection.
    List,
    /// `GET` of a collection with `watch=true`.
    Watch,
    /// `POST` to a collection (or to a subresource such as `binding` or `eviction`).
    Create,
    /// `PUT` of an object.
    Update,
    /// `PATCH` of an object, server-side apply included.
    Patch,
    /// `DELETE` of an object.
    Delete,
    /// `DELETE` of a collection.
    #[serde(rename = "deletecollection")]
    DeleteCollection,
}

impl Verb {
    /// The verb of `method` on `target`, `None` where the target is no resource.
    pub fn of(method: &http::Method, target: &Target, watch: bool) -> Option<Self> {
        use http::Method;
        let collection = match target {
            Target::Collection { .. } => true,
            Target::Object { .. } | Target::PodProxy { .. } => false,
            _ => return None,
        };
        Some(match (method, collection) {
            (&Method::GET, true) if watch => Self::Watch,
            (&Method::GET, true) => Self::List,
            (&Method::GET, false) => Self::Get,
            (&Method::POST, _) => Self::Create,
            (&Method::PUT, _) => Self::Update,
            (&Method::PATCH, _) => Self::Patch,
            (&Method::DELETE, true) => Self::DeleteCollection,
            (&Method::DELETE, false) => Self::Delete,
            _ => return None,
        })
    }
}

impl std::str::FromStr for Verb {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        serde_json::from_value(serde_json::Value::String(text.to_ascii_lowercase())).map_err(|_| {
            format!(
                "unknown verb {text:?}: expected get, list, watch, create, update, patch, delete or deletecollection"
            )
        })
    }
}

/// Parses `path` against the served resources.
pub fn route(path: &str, registry: &Registry) -> Target {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segments.as_slice() {
        ["version"] => Target::Version,
        ["healthz" | "readyz" | "livez", ..] => Target::Health,
        ["api"] => Target::CoreVersions,
        ["openapi", "v3"] => Target::OpenApiIndex,
        ["openapi", "v3", "api", version] => Target::OpenApiDocument {
            group: String::new(),
            version: (*version).to_string(),
        },
        ["openapi", "v3", "apis", group, version] => Target::OpenApiDocument {
            group: (*group).to_string(),
            version: (*version).to_string(),
        },
        ["apis"] => Target::Groups,
        ["apis", group] => Target::Group((*group).to_string()),
        ["api", version] => Target::ResourceList {
            group: String::new(),
            version: (*version).to_string(),
        },
        ["apis", group, version] => Target::ResourceList {
            group: (*group).to_string(),
            version: (*version).to_string(),
        },
        ["api", version, rest @ ..] => resource_target("", version, rest, registry),
        ["apis", group, version, rest @ ..] => resource_target(group, version, rest, registry),
        _ => Target::Unknown,
    }
}

fn resource_target(group: &str, version: &str, rest: &[&str], registry: &Registry) -> Target {
    let namespaced_plural = |plural: &str| {
        registry
            .get(&ResourceId::new(group, plural))
            .is_some_and(|resource| resource.namespaced)
    };
    let object =
        |plural: &str, namespace: &str, name: &str, subresource: Option<&&str>| Target::Object {
            resource: ResourceId::new(group, plural),
            version: version.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            subresource: subresource.map(|s| (*s).to_string()),
        };
    match rest {
        ["namespaces", namespace, "pods", target, "proxy", path @ ..] if group.is_empty() => {
            Target::PodProxy {
                namespace: (*namespace).to_string(),
                target: (*target).to_string(),
                path: path.join("/"),
            }
        }
        // `/api/v1/namespaces/<name>/status` is a subresource of the namespace itself.
        ["namespaces", namespace, plural] if group.is_empty() && !namespaced_plural(plural) => {
            object("namespaces", "", namespace, Some(plural))
        }
        ["namespaces", _, plural, ..] if group.is_empty() && !namespaced_plural(plural) => {
            Target::Unknown
        }
        ["namespaces", namespace, plural] => Target::Collection {
            resource: ResourceId::new(group, plural),
            version: version.to_string(),
            namespace: Some((*namespace).to_string()),
        },
        ["namespaces", namespace, plural, name] => object(plural, namespace, name, None),
        ["namespaces", namespace, plural, name, subresource] => {
            object(plural, namespace, name, Some(subresource))
        }
        [plural] => Target::Collection {
            resource: ResourceId::new(group, plural),
            version: version.to_string(),
            namespace: None,
        },
        [plural, name] => object(plural, "", name, None),
        [plural, name, subresource] => object(plural, "", name, Some(subresource)),
        _ => Target::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
    ) -> Target {
        Target::Object {
            resource: ResourceId::new(group, plural),
            version: if group.is_empty() {
                "v1".into()
            } else {
                "v1alpha1".into()
            },
            namespace: namespace.into(),
            name: name.into(),
            subresource: subresource.map(Into::into),
        }
    }

    #[test]
    fn verbs_follow_the_method_and_whether_a_collection_or_an_object_is_named() {
        let registry = Registry::builtin();
        let pods = route("/api/v1/namespaces/team/pods", &registry);
        let pod = route("/api/v1/namespaces/team/pods/p", &registry);
        let binding = route("/api/v1/namespaces/team/pods/p/binding", &registry);
        let cases = [
            (&pods, http::Method::GET, false, Some(Verb::List)),
            (&pods, http::Method::GET, true, Some(Verb::Watch)),
            (&pods, http::Method::POST, false, Some(Verb::Create)),
            (
                &pods,
                http::Method::DELETE,
                false,
                Some(Verb::DeleteCollection),
            ),
            (&pod, http::Method::GET, false, Some(Verb::Get)),
            (&pod, http::Method::PUT, false, Some(Verb::Update)),
            (&pod, http::Method::PATCH, false, Some(Verb::Patch)),
            (&pod, http::Method::DELETE, false, Some(Verb::Delete)),
            (&binding, http::Method::POST, false, Some(Verb::Create)),
            (&Target::Version, http::Method::GET, false, None),
        ];
        for (target, method, watch, verb) in cases {
            assert_eq!(
                Verb::of(&method, target, watch),
                verb,
                "{method} {target:?}"
            );
        }
        assert_eq!("deletecollection".parse(), Ok(Verb::DeleteCollection));
        assert_eq!("LIST".parse(), Ok(Verb::List));
        assert!("exec".parse::<Verb>().is_err());
    }

    #[test]
    fn paths_name_collections_objects_and_subresources() {
        let registry = Registry::builtin();
        assert_eq!(
            route("/api/v1/namespaces/team/pods", &registry),
            Target::Collection {
                resource: ResourceId::new("", "pods"),
                version: "v1".into(),
                namespace: Some("team".into())
            }
        );
        assert_eq!(
            route("/api/v1/namespaces/team/pods/p", &registry),
            object("", "pods", "team", "p", None)
        );
        assert_eq!(
            route("/api/v1/namespaces/team/pods/p/status", &registry),
            object("", "pods", "team", "p", Some("status"))
        );
        assert_eq!(
            route("/api/v1/namespaces/team", &registry),
            object("", "namespaces", "", "team", None)
        );
        assert_eq!(
            route("/api/v1/namespaces/team/status", &registry),
            object("", "namespaces", "", "team", Some("status"))
        );
        assert_eq!(
            route("/api/v1/nodes/n1/status", &registry),
            object("", "nodes", "", "n1", Some("status"))
        );
        assert_eq!(
            route(
                "/apis/kai.alibabacloud.com/v1alpha1/namespaces/a/trainingjobs/j/scale",
                &registry
            ),
            object(
                "kai.alibabacloud.com",
                "trainingjobs",
                "a",
                "j",
                Some("scale")
            )
        );
        assert_eq!(
            route(
                "/apis/kai.alibabacloud.com/v1alpha1/trainingjobs",
                &registry
            ),
            Target::Collection {
                resource: ResourceId::new("kai.alibabacloud.com", "trainingjobs"),
                version: "v1alpha1".into(),
                namespace: None
            }
        );
        assert_eq!(route("/apis", &registry), Target::Groups);
        assert_eq!(
            route("/api/v1", &registry),
            Target::ResourceList {
                group: String::new(),
                version: "v1".into()
            }
        );
        assert_eq!(route("/nonsense/path", &registry), Target::Unknown);
    }
}
