//! The HTTP face of the simulated API server: Kubernetes' REST paths, verbs, query parameters
//! and content types, over the semantics of [`crate::operations`].

pub mod discovery;
pub mod events_view;
pub mod faults;
pub mod latency;
pub mod pod_proxy;
pub mod protobuf;
pub mod routes;
pub mod table;
pub mod watch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};

use self::faults::{ApiFaults, FaultAction};
use self::latency::ListLatency;
use self::routes::{Target, Verb};
use self::watch::{Rendering, WatchRequest};
use crate::errors::ApiError;
use crate::http::{Body, full, streamed};
use crate::merge::patch::PatchType;
use crate::options::{
    DeleteOptions, FieldValidation, Propagation, Subresource, WriteOptions, Written,
};
use crate::resources::{ResourceId, ResourceType, events_k8s_io};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::Store;

/// Serves the Kubernetes API over a [`Store`].
#[derive(Clone)]
pub struct ApiServer {
    /// The stored state.
    pub store: Arc<Store>,
    /// Where the pod proxy leads.
    pub pod_ports: Arc<pod_proxy::PodPorts>,
    /// Injected faults.
    pub faults: Arc<ApiFaults>,
    /// How long lists take.
    pub list_latency: ListLatency,
}

/// A parsed request.
struct Call {
    method: Method,
    target: Target,
    query: HashMap<String, String>,
    accept: String,
    content_type: String,
    user_agent: String,
    body: Bytes,
}

impl Call {
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true" | "1"))
    }

    fn write_options(&self) -> Result<WriteOptions, ApiError> {
        let manager = match self.param("fieldManager") {
            Some(manager) => manager.to_string(),
            None => self
                .user_agent
                .split('/')
                .next()
                .filter(|m| !m.is_empty())
                .unwrap_or("unknown")
                .to_string(),
        };
        let field_validation = match self.param("fieldValidation") {
            None | Some("Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "invalid fieldValidation: {other}"
                )));
            }
        };
        Ok(WriteOptions {
            manager,
            dry_run: self.param("dryRun") == Some("All"),
            field_validation,
        })
    }

    /// The body as JSON: JSON, YAML, or (for built-in resources) protobuf.
    fn json_body(&self, resource: &ResourceType) -> Result<Value, ApiError> {
        if protobuf::is_protobuf(&self.content_type) && !resource.custom {
            return protobuf::decode(&self.body).map_err(|error| match error {
                protobuf::ProtobufError::UnknownKind { .. } => {
                    unknown_format(&["application/json", "application/yaml"])
                }
                other => ApiError::BadRequest(other.to_string()),
            });
        }
        if self.content_type.contains("protobuf") || self.content_type.contains("cbor") {
            // As kube-apiserver: custom resources have no protobuf form, and CBOR is off.
            let mut accepted = vec!["application/json", "application/yaml"];
            if !resource.custom {
                accepted.push(protobuf::MEDIA_TYPE);
            }
            return Err(unknown_format(&accepted));
        }
        if let Ok(value) = serde_json::from_slice(&self.body) {
            return Ok(value);
        }
        if self.content_type.contains("yaml") {
            let text =
                std::str::from_utf8(&self.body).map_err(|e| ApiError::BadRequest(e.to_string()))?;
            return serde_saphyr::from_str(text)
                .map_err(|e| ApiError::BadRequest(format!("invalid YAML: {e}")));
        }
        Err(ApiError::BadRequest(
            "the request body is not valid JSON".into(),
        ))
    }

    fn selectors(&self) -> Result<(LabelSelector, FieldSelector), ApiError> {
        let labels = LabelSelector::parse(self.param("labelSelector").unwrap_or_default());
        let fields = FieldSelector::parse(self.param("fieldSelector").unwrap_or_default());
        match (labels, fields) {
            (Ok(labels), Ok(fields)) => Ok((labels, fields)),
            (Err(error), _) | (_, Err(error)) => Err(ApiError::BadRequest(error.to_string())),
        }
    }

    fn wants_table(&self) -> bool {
        table::wanted(&self.accept)
    }
}

/// kube-apiserver's refusal of a body in a media type it does not accept.
fn unknown_format(accepted: &[&str]) -> ApiError {
    ApiError::UnsupportedMediaType(format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        accepted.join(", ")
    ))
}

fn json_response(code: StatusCode, value: &Value, warnings: &[String]) -> Response<Body> {
    let mut response = Response::builder()
        .status(code)
        .header("Content-Type", "application/json");
    for warning in warnings {
        response = response.header("Warning", format!("299 - {warning:?}"));
    }
    response
        .body(full(serde_json::to_vec(value).unwrap_or_default()))
        .unwrap_or_else(|_| Response::new(full("")))
}

fn error_response(error: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(code, &error.to_status(), &[]);
    if code == StatusCode::TOO_MANY_REQUESTS {
        response
            .headers_mut()
            .insert("Retry-After", http::HeaderValue::from_static("1"));
    }
    response
}

fn injected(code: u16) -> ApiError {
    let (reason, message) = match code {
        429 => (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        403 => (
            "Forbidden",
            "the request is forbidden (injected): the user cannot perform this verb on this resource",
        ),
        _ => (
            "InternalError",
            "an error on the server (injected) has prevented the request from succeeding",
        ),
    };
    ApiError::Injected {
        code,
        reason: reason.into(),
        message: message.into(),
    }
}

/// The stored resource behind a requested one, and how to show its objects.
struct Resolved {
    resource: Arc<ResourceType>,
    events_v1: bool,
}

impl Resolved {
    fn show(&self, object: &Value) -> Value {
        if self.events_v1 {
            events_view::from_core(object)
        } else {
            object.clone()
        }
    }

    fn store(&self, object: Value) -> Value {
        if self.events_v1 {
            events_view::to_core(&object)
        } else {
            object
        }
    }
}

impl ApiServer {
    /// Answers one HTTP request.
    pub async fn handle(&self, request: http::Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let path = parts.uri.path().to_string();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) => {
                return error_response(&ApiError::BadRequest(format!(
                    "cannot read the body: {error}"
                )));
            }
        };
        let header = |name: http::header::HeaderName| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let query = parts
            .uri
            .query()
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        let target = self
            .store
            .read(|state| routes::route(&path, &state.registry));
        let call = Call {
            method: parts.method,
            target,
            query,
            accept: header(http::header::ACCEPT),
            content_type: header(http::header::CONTENT_TYPE),
            user_agent: header(http::header::USER_AGENT),
            body,
        };
        let verb = Verb::of(&call.method, &call.target, call.flag("watch"));
        for action in self.faults.take(call.method.as_str(), &path, verb) {
            match action {
                FaultAction::Fail(code) => return error_response(&injected(code)),
                FaultAction::Delay(delay) => tokio::time::sleep(delay).await,
            }
        }
        match self.dispatch(call).await {
            Ok(response) => response,
            Err(error) => error_response(&error),
        }
    }

    async fn dispatch(&self, call: Call) -> Result<Response<Body>, ApiError> {
        let ok = |value: Value| Ok(json_response(StatusCode::OK, &value, &[]));
        match (&call.method, &call.target) {
            (&Method::GET, Target::Version) => ok(discovery::version()),
            (&Method::GET, Target::Health) => Ok(Response::new(full("ok"))),
            (&Method::GET, Target::CoreVersions) => ok(discovery::core_versions()),
            (&Method::GET, Target::Groups) => {
                ok(self.store.read(|s| discovery::groups(&s.registry)))
            }
            (&Method::GET, Target::Group(group)) => self
                .store
                .read(|s| discovery::group(&s.registry, group))
                .map_or(Err(ApiError::NoSuchResource), ok),
            (&Method::GET, Target::OpenApiIndex) => {
                ok(self.store.read(|s| discovery::openapi_index(&s.registry)))
            }
            (&Method::GET, Target::OpenApiDocument { group, version }) => self
                .store
                .read(|s| discovery::openapi_document(&s.registry, group, version))
                .map_or(Err(ApiError::NoSuchResource), ok),
            (&Method::GET, Target::ResourceList { group, version }) => self
                .store
                .read(|s| discovery::resource_list(&s.registry, group, version))
                .map_or(Err(ApiError::NoSuchResource), ok),
            (
                _,
                Target::Collection {
                    resource,
                    version,
                    namespace,
                },
            ) => {
                let resolved = self.resolve(resource, version)?;
                match call.method {
                    Method::GET if call.flag("watch") => {
                        self.watch(&call, &resolved, namespace.clone())
                    }
                    Method::GET => {
                        let (response, objects) =
                            self.list(&call, &resolved, namespace.as_deref())?;
                        tokio::time::sleep(self.list_latency.of(objects)).await;
                        Ok(response)
                    }
                    Method::POST => self.create(&call, &resolved, namespace.as_deref()),
                    Method::DELETE => {
                        self.delete_collection(&call, &resolved, namespace.as_deref())
                    }
                    _ => Err(ApiError::MethodNotAllowed(format!(
                        "{} is not allowed on a collection",
                        call.method
                    ))),
                }
            }
            (
                _,
                Target::Object {
                    resource,
                    version,
                    namespace,
                    name,
                    subresource,
                },
            ) => {
                let resolved = self.resolve(resource, version)?;
                self.object(&call, &resolved, namespace, name, subresource.as_deref())
            }
            (
                method,
                Target::PodProxy {
                    namespace,
                    target,
                    path,
                },
            ) => {
                pod_proxy::proxy(
                    &self.store,
                    &self.pod_ports,
                    method,
                    namespace,
                    target,
                    path,
                )
                .await
            }
            _ => Err(ApiError::NoSuchResource),
        }
    }

    fn resolve(&self, resource: &ResourceId, version: &str) -> Result<Resolved, ApiError> {
        self.store.read(|state| {
            let served = state
                .registry
                .get(resource)
                .filter(|r| r.version == version)
                .ok_or(ApiError::NoSuchResource)?;
            if *resource == events_k8s_io() {
                let core = state
                    .registry
                    .get(&ResourceId::new("", "events"))
                    .ok_or(ApiError::NoSuchResource)?;
                return Ok(Resolved {
                    resource: Arc::clone(core),
                    events_v1: true,
                });
            }
            Ok(Resolved {
                resource: Arc::clone(served),
                events_v1: false,
            })
        })
    }

    /// Answers a list; returns the response and the number of objects in it.
    fn list(
        &self,
        call: &Call,
        resolved: &Resolved,
        namespace: Option<&str>,
    ) -> Result<(Response<Body>, usize), ApiError> {
        let (labels, fields) = call.selectors()?;
        let limit = call
            .param("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let after = call.param("continue").map(decode_continue).transpose()?;
        let resource = &resolved.resource;
        let (items, rv, remaining) = self.store.read(|state| {
            let mut matching = state
                .list(&resource.id, namespace)
                .filter(|(key, _)| {
                    after
                        .as_ref()
                        .is_none_or(|after| (&key.namespace, &key.name) > (&after.0, &after.1))
                })
                .filter(|(_, object)| {
                    labels.matches(object["metadata"].get("labels")) && fields.matches(object)
                })
                .map(|(key, object)| (key.clone(), Arc::clone(object)));
            let items: Vec<_> = match limit {
                Some(limit) => matching.by_ref().take(limit).collect(),
                None => matching.by_ref().collect(),
            };
            (items, state.resource_version(), matching.count())
        });
        let rv = rv.to_string();
        let mut metadata = json!({"resourceVersion": rv});
        if remaining > 0
            && let Some((last, _)) = items.last()
        {
            metadata["continue"] = json!(encode_continue(&last.namespace, &last.name));
            metadata["remainingItemCount"] = json!(remaining);
        }
        if call.wants_table() {
            let shown: Vec<Value> = items
                .iter()
                .map(|(_, object)| resolved.show(object))
                .collect();
            let refs: Vec<&Value> = shown.iter().collect();
            let mut table = table::table(
                resource,
                &refs,
                &rv,
                call.param("includeObject") == Some("Object"),
            );
            // kubectl get pages through Tables too (500 rows at a time).
            table["metadata"] = metadata;
            return Ok((json_response(StatusCode::OK, &table, &[]), refs.len()));
        }
        let (api_version, kind) = if resolved.events_v1 {
            ("events.k8s.io/v1".to_string(), "EventList".to_string())
        } else {
            (resource.api_version(), format!("{}List", resource.kind))
        };
        let items: Vec<Value> = items
            .iter()
            .map(|(_, object)| resolved.show(object))
            .collect();
        let objects = items.len();
        let list =
            json!({"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": items});
        Ok((json_response(StatusCode::OK, &list, &[]), objects))
    }

    fn watch(
        &self,
        call: &Call,
        resolved: &Resolved,
        namespace: Option<String>,
    ) -> Result<Response<Body>, ApiError> {
        let (labels, fields) = call.selectors()?;
        let resource_version = match call.param("resourceVersion") {
            None | Some("0") => None,
            Some(rv) => Some(
                rv.parse::<u64>()
                    .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {rv:?}")))?,
            ),
        };
        let timeout = call
            .param("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(1800);
        let rendering = if call.wants_table() {
            Rendering::Table
        } else if resolved.events_v1 {
            Rendering::EventsV1
        } else {
            Rendering::Native
        };
        let request = WatchRequest {
            resource: Arc::clone(&resolved.resource),
            namespace,
            labels,
            fields,
            resource_version,
            send_initial_events: call.flag("sendInitialEvents"),
            bookmarks: call.flag("allowWatchBookmarks"),
            timeout: Duration::from_secs(timeout),
            rendering,
        };
        let (sink, chunks) = tokio::sync::mpsc::channel(256);
        tokio::spawn(watch::run(
            Arc::clone(&self.store),
            request,
            sink,
            self.faults.watch_token(),
        ));
        let content_type = "application/json";
        Response::builder()
            .status(StatusCode::OK)
            .header("Content-Type", content_type)
            .header("Transfer-Encoding", "chunked")
            .body(streamed(chunks))
            .map_err(|e| ApiError::BadRequest(e.to_string()))
    }

    fn create(
        &self,
        call: &Call,
        resolved: &Resolved,
        namespace: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        let options = call.write_options()?;
        let body = resolved.store(call.json_body(&resolved.resource)?);
        let namespace = namespace
            .map(String::from)
            .or_else(|| body["metadata"]["namespace"].as_str().map(String::from))
            .unwrap_or_else(|| "default".into());
        let written = self
            .store
            .write(|state| state.create(&resolved.resource, &namespace, body, &options))?;
        Ok(written_response(resolved, &written, StatusCode::CREATED))
    }

    fn delete_collection(
        &self,
        call: &Call,
        resolved: &Resolved,
        namespace: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        let (labels, fields) = call.selectors()?;
        let options = delete_options(call, &resolved.resource)?;
        let resource = &resolved.resource;
        let deleted = self.store.write(|state| {
            let keys: Vec<_> = state
                .list(&resource.id, namespace)
                .filter(|(_, o)| labels.matches(o["metadata"].get("labels")) && fields.matches(o))
                .map(|(key, _)| key.clone())
                .collect();
            keys.iter()
                .filter_map(|key| {
                    state
                        .delete(resource, &key.namespace, &key.name, &options)
                        .ok()
                })
                .map(|(object, _)| resolved.show(&object))
                .collect::<Vec<_>>()
        });
        let kind = format!("{}List", resource.kind);
        Ok(json_response(
            StatusCode::OK,
            &json!({"kind": kind, "apiVersion": resource.api_version(), "metadata": {}, "items": deleted}),
            &[],
        ))
    }

    fn object(
        &self,
        call: &Call,
        resolved: &Resolved,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        let resource = &resolved.resource;
        let is_pod = resource.id == ResourceId::new("", "pods");
        let sub = match subresource {
            None => None,
            Some("status") if resource.status_subresource => Some(Subresource::Status),
            Some("scale") if resource.scale.is_some() => Some(Subresource::Scale),
            Some("log") if is_pod && call.method == Method::GET => {
                self.store.read(|s| s.fetch(resource, namespace, name))?;
                let text =
                    format!("eto-sim: pod {name} runs no real containers, so it has no logs\n");
                return Ok(Response::builder()
                    .header("Content-Type", "text/plain")
                    .body(full(text))
                    .unwrap_or_else(|_| Response::new(full(""))));
            }
            Some("binding") if is_pod && call.method == Method::POST => {
                return self.bind(call, resolved, namespace, name);
            }
            Some("eviction") if is_pod && call.method == Method::POST => {
                let options = eviction_options(call, resource)?;
                self.store.write(|state| {
                    // As kube-apiserver does (PodDisruptionConditions, GA in 1.31): a pod that
                    // has not ended is marked before it is deleted with the eviction's options.
                    let pod = state.fetch(resource, namespace, name)?;
                    let ended = matches!(
                        pod["status"]["phase"].as_str(),
                        Some("Succeeded" | "Failed")
                    );
                    if !ended && !options.dry_run {
                        let marked = crate::nodes::conditions::disruption_target(
                            &pod,
                            "EvictionByEvictionAPI",
                            "Eviction API: evicting",
                        );
                        state.replace(
                            resource,
                            namespace,
                            name,
                            marked,
                            Some(Subresource::Status),
                            &WriteOptions::internal("kube-apiserver"),
                        )?;
                    }
                    state.delete(resource, namespace, name, &options)
                })?;
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
                return Ok(json_response(StatusCode::CREATED, &status, &[]));
            }
            Some(_) => return Err(ApiError::NoSuchResource),
        };
        match call.method {
            Method::GET => {
                if sub == Some(Subresource::Scale) {
                    return Ok(json_response(
                        StatusCode::OK,
                        &self
                            .store
                            .read(|s| s.get_scale(resource, namespace, name))?,
                        &[],
                    ));
                }
                let object = self.store.read(|s| s.fetch(resource, namespace, name))?;
                if call.wants_table() {
                    let shown = resolved.show(&object);
                    let rv = object["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default();
                    return Ok(json_response(
                        StatusCode::OK,
                        &table::table(resource, &[&shown], rv, false),
                        &[],
                    ));
                }
                Ok(json_response(StatusCode::OK, &resolved.show(&object), &[]))
            }
            Method::PUT => {
                let options = call.write_options()?;
                let body = call.json_body(resource)?;
                if sub == Some(Subresource::Scale) {
                    let scale = self.store.write(|state| {
                        state.replace_scale(resource, namespace, name, &body, &options)
                    })?;
                    return Ok(json_response(StatusCode::OK, &scale, &[]));
                }
                let body = resolved.store(body);
                let written = self
                    .store
                    .write(|state| state.replace(resource, namespace, name, body, sub, &options))?;
                Ok(written_response(resolved, &written, StatusCode::OK))
            }
            Method::PATCH => {
                let options = call.write_options()?;
                let patch_type =
                    PatchType::from_content_type(&call.content_type).ok_or_else(|| {
                        let mut accepted = vec![
                            "application/json-patch+json",
                            "application/merge-patch+json",
                        ];
                        if !resource.custom {
                            accepted.push("application/strategic-merge-patch+json");
                        }
                        accepted.push("application/apply-patch+yaml");
                        unknown_format(&accepted)
                    })?;
                let force = call.flag("force");
                if patch_type == PatchType::Apply && call.param("fieldManager").is_none() {
                    return Err(ApiError::BadRequest(
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into(),
                    ));
                }
                let body = call.json_body(resource)?;
                let written = if resolved.events_v1 {
                    // Patch the events.k8s.io view, store the core form.
                    self.store.write(|state| {
                        let stored = state.fetch(resource, namespace, name)?;
                        let view = events_view::from_core(&stored);
                        let patched = match patch_type {
                            PatchType::Json => crate::merge::patch::json_patch(&view, &body)
                                .map_err(ApiError::BadRequest)?,
                            PatchType::Merge => crate::merge::patch::merge_patch(&view, &body),
                            PatchType::Strategic => {
                                crate::merge::patch::strategic_merge_patch(&view, &body)
                            }
                            PatchType::Apply => crate::merge::patch::merge_patch(&view, &body),
                        };
                        state.replace(
                            resource,
                            namespace,
                            name,
                            events_view::to_core(&patched),
                            None,
                            &options,
                        )
                    })?
                } else {
                    self.store.write(|state| {
                        state.patch(
                            resource, namespace, name, patch_type, &body, sub, &options, force,
                        )
                    })?
                };
                if sub == Some(Subresource::Scale) {
                    let scale = self
                        .store
                        .read(|state| state.scale_after(resource, &written))?;
                    return Ok(json_response(StatusCode::OK, &scale, &written.warnings));
                }
                let code = if written.created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                Ok(written_response(resolved, &written, code))
            }
            Method::DELETE if sub.is_none() => {
                let options = delete_options(call, resource)?;
                let (object, gone) = self
                    .store
                    .write(|state| state.delete(resource, namespace, name, &options))?;
                if gone && !is_pod {
                    let status = json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": {"name": name, "group": resource.id.group, "kind": resource.id.plural, "uid": object["metadata"]["uid"]}
                    });
                    return Ok(json_response(StatusCode::OK, &status, &[]));
                }
                Ok(json_response(StatusCode::OK, &resolved.show(&object), &[]))
            }
            _ => Err(ApiError::MethodNotAllowed(format!(
                "{} is not allowed here",
                call.method
            ))),
        }
    }

    fn bind(
        &self,
        call: &Call,
        resolved: &Resolved,
        namespace: &str,
        name: &str,
    ) -> Result<Response<Body>, ApiError> {
        let binding = call.json_body(&resolved.resource)?;
        let node = binding["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if node.is_empty() {
            return Err(ApiError::BadRequest("target.name is required".into()));
        }
        let options = call.write_options()?;
        self.store.write(|state| {
            crate::nodes::bind(state, &resolved.resource, namespace, name, &node, &options)
        })?;
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
        Ok(json_response(StatusCode::CREATED, &status, &[]))
    }
}

fn written_response(resolved: &Resolved, written: &Written, code: StatusCode) -> Response<Body> {
    json_response(code, &resolved.show(&written.object), &written.warnings)
}

/// The options of a delete. Without a `propagationPolicy` (or `orphanDependents`), `batch/v1`
/// Jobs orphan their pods, as kube-apiserver keeps doing for that legacy group; everything else
/// is collected in the background.
fn delete_options(call: &Call, resource: &ResourceType) -> Result<DeleteOptions, ApiError> {
    let body: Value = if call.body.is_empty() {
        json!({})
    } else {
        call.json_body(resource)?
    };
    let propagation = call
        .param("propagationPolicy")
        .or_else(|| body["propagationPolicy"].as_str());
    let propagation = match propagation {
        None if body["orphanDependents"] == true => Propagation::Orphan,
        None if body["orphanDependents"].is_null()
            && resource.id.group == "batch"
            && resource.id.plural == "jobs" =>
        {
            Propagation::Orphan
        }
        None | Some("Background") => Propagation::Background,
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "invalid propagationPolicy {other:?}"
            )));
        }
    };
    let grace_period_seconds = call
        .param("gracePeriodSeconds")
        .and_then(|g| g.parse::<i64>().ok())
        .or_else(|| body["gracePeriodSeconds"].as_i64());
    Ok(DeleteOptions {
        propagation,
        grace_period_seconds,
        uid: body["preconditions"]["uid"].as_str().map(String::from),
        resource_version: body["preconditions"]["resourceVersion"]
            .as_str()
            .map(String::from),
        dry_run: call.param("dryRun") == Some("All")
            || body["dryRun"]
                .as_array()
                .is_some_and(|d| d.iter().any(|v| v == "All")),
    })
}

/// The delete options of an Eviction (`policy/v1`): its `deleteOptions`, with the request's
/// `dryRun`.
fn eviction_options(call: &Call, resource: &ResourceType) -> Result<DeleteOptions, ApiError> {
    let body: Value = if call.body.is_empty() {
        json!({})
    } else {
        call.json_body(resource)?
    };
    let delete = &body["deleteOptions"];
    Ok(DeleteOptions {
        grace_period_seconds: delete["gracePeriodSeconds"].as_i64(),
        uid: delete["preconditions"]["uid"].as_str().map(String::from),
        resource_version: delete["preconditions"]["resourceVersion"]
            .as_str()
            .map(String::from),
        dry_run: call.param("dryRun") == Some("All")
            || delete["dryRun"]
                .as_array()
                .is_some_and(|d| d.iter().any(|v| v == "All")),
        ..DeleteOptions::default()
    })
}

fn encode_continue(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let invalid = || ApiError::BadRequest("invalid continue token".into());
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(invalid)
        })
        .collect::<Result<_, _>>()?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (namespace, name) = text.split_once('/').ok_or_else(invalid)?;
    Ok((namespace.to_string(), name.to_string()))
}
