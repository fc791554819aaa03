//! Each write path of a reconcile against a mock API server that checks the method, the path
//! (with `fieldManager=eto&force=true` for server-side apply) and the body of every request.

use std::sync::Arc;
use std::time::Duration;

use eto_api::TrainingJob;
use eto_engine::plan::{Child, Observed, SecretPresence, plan};
use http::{Request, Response};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::store::Writer;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::context::{Context, Stores};
use crate::metrics::Metrics;
use crate::reconcile::reconcile;
use crate::testing::listed;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

const JOB: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: mnist
  namespace: default
  uid: 0b1c7a2e-0000-4000-8000-00000000beef
  generation: 1
  resourceVersion: "7"
spec:
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: horovod/horovod:0.28.1
    worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
"#;

fn job() -> TrainingJob {
    serde_saphyr::from_str(JOB).expect("the fixture is a TrainingJob")
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000).expect("a valid time")
}

/// The caches, as the watchers would have filled them.
#[derive(Default)]
struct Cached {
    pods: Vec<Pod>,
    services: Vec<Service>,
    config_maps: Vec<ConfigMap>,
    secrets: Vec<Secret>,
    service_accounts: Vec<ServiceAccount>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
}

impl Cached {
    /// What exists after `plan` was carried out from nothing.
    fn after(plan: &eto_engine::Plan) -> Self {
        let mut cached = Self::default();
        for child in plan.apply.clone() {
            match child {
                Child::Pod(pod) => cached.pods.push(*pod),
                Child::Service(service) => cached.services.push(*service),
                Child::ConfigMap(config_map) => cached.config_maps.push(*config_map),
                Child::ServiceAccount(account) => cached.service_accounts.push(*account),
                Child::Role(role) => cached.roles.push(*role),
                Child::RoleBinding(binding) => cached.role_bindings.push(*binding),
            }
        }
        cached.secrets.extend(plan.create_ssh_secret.clone());
        cached
    }

    fn context(self, client: Client) -> Arc<Context> {
        // A store stays ready once its first list is done, so the writers may go.
        let writers = (
            listed(Writer::default(), self.pods),
            listed(Writer::default(), self.services),
            listed(Writer::default(), self.config_maps),
            listed(Writer::default(), self.secrets),
            listed(Writer::default(), self.service_accounts),
            listed(Writer::default(), self.roles),
            listed(Writer::default(), self.role_bindings),
        );
        let stores = Stores {
            jobs: listed(
                Writer::new(ApiResource::erase::<TrainingJob>(&())),
                Vec::new(),
            )
            .as_reader(),
            pods: writers.0.as_reader(),
            services: writers.1.as_reader(),
            config_maps: writers.2.as_reader(),
            secrets: writers.3.as_reader(),
            service_accounts: writers.4.as_reader(),
            roles: writers.5.as_reader(),
            role_bindings: writers.6.as_reader(),
            changes: tokio::sync::watch::channel(()).0,
        };

        let reporter = Reporter {
            controller: "eto".into(),
            instance: Some("test".into()),
        };
        Arc::new(Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            stores,
            clock: Arc::new(now),
            metrics: Arc::new(Metrics::default()),
            // These caches never change: a reconcile that wrote would wait in vain.
            cache_wait: Duration::ZERO,
            reconcile_timeout: crate::reconcile::RECONCILE_TIMEOUT,
        })
    }
}

/// The first plan of `job`, and the caches as they are once it was carried out.
fn first_reconcile(job: &TrainingJob) -> (eto_engine::Plan, Cached) {
    let nothing = Observed {
        job,
        pods: Vec::new(),
        worker_service: None,
        config_map: None,
        service_account: None,
        role: None,
        role_binding: None,
        ssh_secret: SecretPresence::Missing,
    };
    let first = plan(&nothing, now());
    let cached = Cached::after(&first);
    (first, cached)
}

fn mock() -> (Client, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), handle)
}

fn dynamic(job: &TrainingJob) -> Arc<DynamicObject> {
    Arc::new(
        serde_json::from_value(serde_json::to_value(job).expect("jobs serialize"))
            .expect("a dynamic object"),
    )
}

/// Takes the next request, checks its method and path, answers with `answer` (or an echo of
/// the request body) and returns the body.
async fn expect(handle: &mut Handle, method: &str, path: &str, answer: Option<Value>) -> Value {
    let (request, send) = handle
        .next_request()
        .await
        .unwrap_or_else(|| panic!("expected {method} {path}, got nothing"));
    assert_eq!(
        format!("{} {}", request.method(), request.uri()),
        format!("{method} {path}")
    );
    let bytes = request
        .into_body()
        .collect_bytes()
        .await
        .expect("a readable body");
    let body: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).expect("a JSON body")
    };
    let reply = answer.unwrap_or_else(|| body.clone());
    send.send_response(
        Response::builder()
            .status(200)
            .body(Body::from(serde_json::to_vec(&reply).expect("JSON")))
            .expect("a response"),
    );
    body
}

const APPLY: &str = "?&force=true&fieldManager=eto";

/// Expects the server-side apply of `job`'s status, answers with the job and returns the body.
async fn expect_status_apply(handle: &mut Handle, job: &TrainingJob) -> Value {
    let path = format!(
        "/apis/kai.alibabacloud.com/v1alpha1/namespaces/default/trainingjobs/mnist/status{APPLY}"
    );
    let reply = serde_json::to_value(job).expect("jobs serialize");
    expect(handle, "PATCH", &path, Some(reply)).await
}

/// Expects an Event to be created and returns it.
async fn expect_event(handle: &mut Handle) -> Value {
    expect(
        handle,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events?",
        None,
    )
    .await
}

/// The condition of `type_` in a status body.
fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
}

/// A failure `Status` answer, as the API server sends it.
fn failure(code: u16, reason: &str, message: &str) -> Response<Body> {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": message});
    Response::builder()
        .status(code)
        .body(Body::from(serde_json::to_vec(&status).expect("JSON")))
        .expect("a response")
}

#[tokio::test]
async fn a_new_job_gets_its_secret_children_status_and_events_in_order() {
    let (client, mut handle) = mock();
    let ctx = Cached::default().context(client);
    let job = job();
    let reconcile = tokio::spawn(reconcile(dynamic(&job), ctx));

    let secret = expect(
        &mut handle,
        "POST",
        "/api/v1/namespaces/default/secrets?&fieldManager=eto",
        None,
    )
    .await;
    assert_eq!(secret["metadata"]["name"], "mnist-ssh");
    let keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["config", "id_rsa", "id_rsa.pub"]);

    for path in [
        "/api/v1/namespaces/default/serviceaccounts/mnist-launcher",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/mnist-launcher",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/mnist-launcher",
        "/api/v1/namespaces/default/services/mnist-workers",
        "/api/v1/namespaces/default/pods/mnist-worker-0",
        "/api/v1/namespaces/default/pods/mnist-worker-1",
        "/api/v1/namespaces/default/configmaps/mnist-config",
    ] {
        let body = expect(&mut handle, "PATCH", &format!("{path}{APPLY}"), None).await;
        assert_eq!(
            body["metadata"]["ownerReferences"][0]["uid"], "0b1c7a2e-0000-4000-8000-00000000beef",
            "{path}"
        );
    }

    let status = expect_status_apply(&mut handle, &job).await;
    assert_eq!(status["apiVersion"], "kai.alibabacloud.com/v1alpha1");
    assert_eq!(status["kind"], "TrainingJob");
    assert_eq!(status["status"]["phase"], "Created");
    assert_eq!(
        status["status"]["targetWorkers"],
        json!(["mnist-worker-0", "mnist-worker-1"])
    );

    let event = expect_event(&mut handle).await;
    assert_eq!(event["reason"], "WorkersCreated");
    assert_eq!(event["regarding"]["name"], "mnist");
    assert_eq!(event["reportingController"], "eto");

    reconcile
        .await
        .expect("the reconcile task")
        .expect("the reconcile succeeds");
}

#[tokio::test]
async fn a_reconcile_with_nothing_to_change_sends_no_request() {
    let mut job = job();
    let (first, cached) = first_reconcile(&job);
    job.status = first.status.clone();
    let (client, mut handle) = mock();
    let ctx = cached.context(client);
    reconcile(dynamic(&job), Arc::clone(&ctx))
        .await
        .expect("the reconcile succeeds");
    drop(ctx);
    assert!(handle.next_request().await.is_none(), "no request was sent");
}

#[tokio::test]
async fn a_finished_job_deletes_its_workers_and_service() {
    let mut job = job();
    let (first, cached) = first_reconcile(&job);
    let mut status = first.status.clone().expect("a status");
    status.phase = Some(eto_api::training_job::JobPhase::Succeeded);
    status.completion_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    job.status = Some(status);
    let (client, mut handle) = mock();
    let ctx = cached.context(client);
    let reconcile = tokio::spawn(reconcile(dynamic(&job), ctx));
    for path in [
        "/api/v1/namespaces/default/pods/mnist-worker-0",
        "/api/v1/namespaces/default/pods/mnist-worker-1",
        "/api/v1/namespaces/default/services/mnist-workers",
    ] {
        let options = expect(
            &mut handle,
            "DELETE",
            &format!("{path}?"),
            Some(json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})),
        )
        .await;
        assert_eq!(options["propagationPolicy"], "Background");
    }
    let status = expect_status_apply(&mut handle, &job).await;
    assert_eq!(condition(&status, "Ready")["status"], "True");
    reconcile
        .await
        .expect("the reconcile task")
        .expect("the reconcile succeeds");
}

#[tokio::test]
async fn a_provided_ssh_secret_is_checked_by_metadata_and_never_created() {
    let mut job = job();
    job.metadata.annotations = Some(
        [(
            "arena.kubeflow.org/ssh-secret".to_string(),
            "team-keys".to_string(),
        )]
        .into(),
    );
    let (client, mut handle) = mock();
    let ctx = Cached::default().context(client);
    let reconcile = tokio::spawn(reconcile(dynamic(&job), ctx));
    let (request, send) = handle.next_request().await.expect("a request");
    assert_eq!(
        format!("{} {}", request.method(), request.uri()),
        "GET /api/v1/namespaces/default/secrets/team-keys"
    );
    assert_eq!(
        request.headers()["accept"],
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    );
    send.send_response(failure(404, "NotFound", "secrets \"team-keys\" not found"));
    // The supporting objects are applied; no pod, no Secret.
    for path in [
        "/api/v1/namespaces/default/serviceaccounts/mnist-launcher",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/mnist-launcher",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/mnist-launcher",
        "/api/v1/namespaces/default/services/mnist-workers",
    ] {
        expect(&mut handle, "PATCH", &format!("{path}{APPLY}"), None).await;
    }
    let status = expect_status_apply(&mut handle, &job).await;
    assert_eq!(condition(&status, "Ready")["reason"], "SSHSecretNotFound");
    let event = expect_event(&mut handle).await;
    assert_eq!(event["type"], "Warning");
    reconcile
        .await
        .expect("the reconcile task")
        .expect("the reconcile succeeds");
}

#[tokio::test]
async fn a_failed_write_fails_the_reconcile_before_the_status() {
    let (client, mut handle) = mock();
    let ctx = Cached::default().context(client);
    let reconcile = tokio::spawn(reconcile(dynamic(&job()), Arc::clone(&ctx)));
    expect(
        &mut handle,
        "POST",
        "/api/v1/namespaces/default/secrets?&fieldManager=eto",
        None,
    )
    .await;
    let (_, send) = handle.next_request().await.expect("the first apply");
    send.send_response(failure(422, "Invalid", "invalid"));
    let error = reconcile
        .await
        .expect("the reconcile task")
        .expect_err("the reconcile fails");
    assert_eq!(error.category(), "apply");
    drop(ctx);
    assert!(
        handle.next_request().await.is_none(),
        "nothing after the failed write"
    );
}
