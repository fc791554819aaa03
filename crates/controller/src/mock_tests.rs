//! Each write path of a reconcile against a mock API server that checks the method, the path
//! (with `fieldManager=eto&force=true` for server-side apply) and the body of every request.

use std::sync::Arc;
use std::time::Duration;

use eto_api::TrainingJob;
use eto_engine::job::{JobRef, Kind};
use eto_engine::kind::training_job::status::from_engine;
use eto_engine::plan::{Child, Observed, SecretPresence, plan};
use eto_engine::scaling::ScalerKind;
use http::{Request, Response};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use kube::client::Body;
use kube::runtime::reflector::store::Writer;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::context::GangSettings;
use crate::context::{Context, Stores};
use crate::metrics::Metrics;
use crate::reconcile::reconcile;
use crate::resources::POD_GROUPS;
use crate::scale_requests;
use crate::testing::{listed, listed_index, listed_pods};

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
#[derive(Clone, Default)]
struct Cached {
    pods: Vec<Pod>,
    services: Vec<Service>,
    config_maps: Vec<ConfigMap>,
    secrets: Vec<Secret>,
    service_accounts: Vec<ServiceAccount>,
    roles: Vec<Role>,
    role_bindings: Vec<RoleBinding>,
    autoscalers: Vec<HorizontalPodAutoscaler>,
    jobs: Vec<TrainingJob>,
    launcher_jobs: Vec<BatchJob>,
    scale_outs: Vec<DynamicObject>,
    scale_ins: Vec<DynamicObject>,
    gang: Option<GangSettings>,
}

impl Cached {
    /// What exists after `plan` was carried out from nothing.
    fn after(plan: &eto_engine::Plan) -> Self {
        let mut cached = Self::default();
        cached.absorb(plan);
        cached
    }

    /// Adds what `plan` creates (pods it updates keep their status).
    fn absorb(&mut self, plan: &eto_engine::Plan) {
        for child in plan.apply.clone() {
            match child {
                Child::Pod(pod) => {
                    if !self
                        .pods
                        .iter()
                        .any(|p| p.metadata.name == pod.metadata.name)
                    {
                        self.pods.push(*pod);
                    }
                }
                Child::PodMetadata(change) => {
                    let pod = self
                        .pods
                        .iter_mut()
                        .find(|p| p.metadata.name.as_ref() == Some(&change.name))
                        .expect("metadata changes are of existing pods");
                    change.apply_to(&mut pod.metadata);
                }
                Child::Service(service) => self.services.push(*service),
                Child::ConfigMap(config_map) => self.config_maps.push(*config_map),
                Child::ServiceAccount(account) => self.service_accounts.push(*account),
                Child::Role(role) => self.roles.push(*role),
                Child::RoleBinding(binding) => self.role_bindings.push(*binding),
                Child::PodGroup(_) => {}
                Child::Autoscaler(autoscaler) => self.autoscalers.push(*autoscaler),
                Child::LauncherJob(mut launcher) => {
                    launcher.metadata.uid = Some("launcher-job-uid".into());
                    self.launcher_jobs.push(*launcher);
                }
            }
        }
        self.secrets.extend(plan.create_ssh_secret.clone());
    }

    /// Every pod runs, ready, on a node.
    fn all_ready(&mut self) {
        for pod in &mut self.pods {
            pod.spec.as_mut().expect("pods have specs").node_name = Some("node-a".into());
            pod.status = Some(
                serde_json::from_value(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}))
                    .expect("a pod status"),
            );
        }
    }

    /// `job` and these children, as the engine sees them.
    fn plan_for(&self, job: &TrainingJob) -> eto_engine::Plan {
        self.plan_reading(job, None)
    }

    /// `job` and these children, as the engine sees them with `report` read.
    fn plan_reading(
        &self,
        job: &TrainingJob,
        report: Option<&eto_engine::group_report::GroupReport>,
    ) -> eto_engine::Plan {
        let observed = Observed {
            job: JobRef::new(job),
            launcher_job: None,
            pods: self.pods.iter().collect(),
            departed: Vec::new(),
            worker_service: self.services.first(),
            pod_services: Vec::new(),
            config_map: self.config_maps.first(),
            service_account: self.service_accounts.first(),
            role: self.roles.first(),
            role_binding: self.role_bindings.first(),
            ssh_secret: SecretPresence::Present,
            scalers: &[],
            taken: &[],
            rejected_pod: None,
            gang: eto_engine::gang::Gang::Off,
            pod_group: None,
            node_warnings: &[],
            group_report: report,
            earlier_progress: None,
            autoscaler: None,
        };
        plan(&observed, now())
    }

    fn context(self, client: Client) -> Arc<Context> {
        Arc::new(self.bare_context(client))
    }

    /// [`Self::context`], not yet shared, for a test to change.
    fn bare_context(self, client: Client) -> Context {
        // A store stays ready once its first list is done, so the writers may go.
        let writers = (
            listed_pods(self.pods),
            listed(Writer::default(), self.services),
            listed(Writer::default(), self.config_maps),
            listed(Writer::default(), self.secrets),
            listed(Writer::default(), self.service_accounts),
            listed(Writer::default(), self.roles),
            listed(Writer::default(), self.role_bindings),
        );
        let scale_ins_by_job = listed_index(crate::observe::selected_job, &self.scale_ins);
        let scale_outs_by_job = listed_index(crate::observe::selected_job, &self.scale_outs);
        let stores = Stores {
            jobs: [
                listed(
                    Writer::new(Kind::TRAINING_JOB.api_resource()),
                    self.jobs
                        .iter()
                        .map(|job| (*dynamic(job)).clone())
                        .collect(),
                )
                .as_reader(),
                listed(Writer::new(Kind::MPI_JOB.api_resource()), Vec::new()).as_reader(),
                listed(Writer::new(Kind::PYTORCH_JOB.api_resource()), Vec::new()).as_reader(),
                listed(Writer::new(Kind::TRAIN_JOB.api_resource()), Vec::new()).as_reader(),
            ],
            launcher_jobs: listed(Writer::default(), self.launcher_jobs).as_reader(),
            pods: writers.0.0,
            services: writers.1.as_reader(),
            config_maps: writers.2.as_reader(),
            secrets: writers.3.as_reader(),
            service_accounts: writers.4.as_reader(),
            roles: writers.5.as_reader(),
            role_bindings: writers.6.as_reader(),
            autoscalers: listed(Writer::default(), self.autoscalers).as_reader(),
            scale_ins: listed(
                Writer::new(crate::resources::request_resource(ScalerKind::ScaleIn)),
                self.scale_ins,
            )
            .as_reader(),
            scale_outs: listed(
                Writer::new(crate::resources::request_resource(ScalerKind::ScaleOut)),
                self.scale_outs,
            )
            .as_reader(),
            scale_ins_by_job,
            scale_outs_by_job,
            pod_groups: Writer::new(crate::pod_groups::resource(
                &eto_engine::pod_group::GangScheduler::Volcano,
            ))
            .as_reader(),
            pod_groups_resource: crate::pod_groups::resource(
                &eto_engine::pod_group::GangScheduler::Volcano,
            ),
            warned_nodes: crate::warned_nodes::WarnedNodes::default(),
            changes: tokio::sync::watch::channel(()).0,
        };

        Context {
            pod_proxy: None,
            node_warnings: None,
            events: crate::events::EventPublisher::new(client.clone(), "eto", Some("test")),
            client,
            stores,
            clock: Arc::new(now),
            metrics: Arc::new(Metrics::default()),
            // These caches never change: a reconcile that wrote would wait in vain.
            cache_wait: Duration::ZERO,
            reconcile_timeout: crate::reconcile::RECONCILE_TIMEOUT,
            retries: crate::retries::Retries::default(),
            progress_reads: crate::progress_reads::ProgressReads::default(),
            gang: self.gang,
        }
    }
}

/// The first plan of `job`, and the caches as they are once it was carried out.
fn first_reconcile(job: &TrainingJob) -> (eto_engine::Plan, Cached) {
    let first = plan(&Observed::without_children(JobRef::new(job)), now());
    let cached = Cached::after(&first);
    (first, cached)
}

/// A job whose workers and launcher run, with its status, and the caches that show it.
fn running_job() -> (TrainingJob, Cached) {
    let mut job = job();
    let (first, mut cached) = first_reconcile(&job);
    job.status = first.status.map(from_engine);
    cached.all_ready();
    let launched = cached.plan_for(&job);
    cached.absorb(&launched);
    job.status = launched.status.map(from_engine).or(job.status);
    cached.all_ready();
    let running = cached.plan_for(&job);
    job.status = running.status.map(from_engine).or(job.status);
    let phase = job.status.as_ref().and_then(|s| s.phase);
    assert_eq!(phase, Some(eto_api::job_status::JobPhase::Running));
    (job, cached)
}

/// A ScaleOut of `count` workers for the job `mnist`, as a user creates it.
fn scale_out(name: &str, job: &str, count: u32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "ScaleOut",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "resourceVersion": "20", "creationTimestamp": "2027-01-15T07:00:00Z"},
        "spec": {"selector": {"name": job}, "toAdd": {"count": count}},
    }))
    .expect("a dynamic object")
}

fn mock() -> (Client, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), handle)
}

/// A job of any kind as the job caches hold it.
fn dynamic(job: &impl serde::Serialize) -> Arc<DynamicObject> {
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

/// Expects a metadata-only read of `path` and answers that nothing is there.
async fn expect_absent(handle: &mut Handle, path: &str) {
    let (request, send) = handle
        .next_request()
        .await
        .unwrap_or_else(|| panic!("expected GET {path}, got nothing"));
    assert_eq!(
        format!("{} {}", request.method(), request.uri()),
        format!("GET {path}")
    );
    assert_eq!(
        request.headers()["accept"],
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    );
    send.send_response(failure(404, "NotFound", "not found"));
}

/// Expects a look-up of `path` (absent) and then its server-side apply; returns the body.
async fn expect_checked_apply(handle: &mut Handle, path: &str) -> Value {
    expect_absent(handle, path).await;
    expect(handle, "PATCH", &format!("{path}{APPLY}"), None).await
}

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
    let reconcile = tokio::spawn(reconcile(Kind::TRAINING_JOB, dynamic(&job), ctx));

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

    // Objects created once per job are looked up first (one of another owner would not be in
    // the caches); pods are not (see crate::ownership).
    for (path, looked_up) in [
        (
            "/api/v1/namespaces/default/serviceaccounts/mnist-launcher",
            true,
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/mnist-launcher",
            true,
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/mnist-launcher",
            true,
        ),
        ("/api/v1/namespaces/default/services/mnist-workers", true),
        ("/api/v1/namespaces/default/pods/mnist-worker-0", false),
        ("/api/v1/namespaces/default/pods/mnist-worker-1", false),
        ("/api/v1/namespaces/default/configmaps/mnist-config", true),
    ] {
        let body = if looked_up {
            expect_checked_apply(&mut handle, path).await
        } else {
            expect(&mut handle, "PATCH", &format!("{path}{APPLY}"), None).await
        };
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
    job.status = first.status.clone().map(from_engine);
    let (client, mut handle) = mock();
    let ctx = cached.context(client);
    reconcile(Kind::TRAINING_JOB, dynamic(&job), Arc::clone(&ctx))
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
    status.phase = Some(eto_api::job_status::JobPhase::Succeeded);
    status.completion_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    job.status = Some(from_engine(status));
    let (client, mut handle) = mock();
    let ctx = cached.context(client);
    let reconcile = tokio::spawn(reconcile(Kind::TRAINING_JOB, dynamic(&job), ctx));
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
        assert_eq!(
            options.get("gracePeriodSeconds"),
            None,
            "their own grace period"
        );
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
    let reconcile = tokio::spawn(reconcile(Kind::TRAINING_JOB, dynamic(&job), ctx));
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
        expect_checked_apply(&mut handle, path).await;
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
    let reconcile = tokio::spawn(reconcile(
        Kind::TRAINING_JOB,
        dynamic(&job()),
        Arc::clone(&ctx),
    ));
    expect(
        &mut handle,
        "POST",
        "/api/v1/namespaces/default/secrets?&fieldManager=eto",
        None,
    )
    .await;
    expect_absent(
        &mut handle,
        "/api/v1/namespaces/default/serviceaccounts/mnist-launcher",
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

#[tokio::test]
async fn a_scale_out_is_owned_and_its_status_written_after_its_pod_and_before_the_jobs() {
    let (job, mut cached) = running_job();
    cached.scale_outs.push(scale_out("grow", "mnist", 1));
    let (client, mut handle) = mock();
    let ctx = cached.context(client);
    let reconcile = tokio::spawn(reconcile(Kind::TRAINING_JOB, dynamic(&job), ctx));

    let pod = "/api/v1/namespaces/default/pods/mnist-worker-2";
    expect(&mut handle, "PATCH", &format!("{pod}{APPLY}"), None).await;
    let request = "/apis/kai.alibabacloud.com/v1alpha1/namespaces/default/scaleouts/grow";
    let owned = expect(&mut handle, "PATCH", &format!("{request}{APPLY}"), None).await;
    assert_eq!(
        owned,
        json!({"apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "ScaleOut",
            "metadata": {"name": "grow", "ownerReferences": [{"apiVersion": "kai.alibabacloud.com/v1alpha1",
                "kind": "TrainingJob", "name": "mnist", "uid": "0b1c7a2e-0000-4000-8000-00000000beef"}]}})
    );
    let status = expect(
        &mut handle,
        "PATCH",
        &format!("{request}/status{APPLY}"),
        None,
    )
    .await;
    assert_eq!(status["kind"], "ScaleOut");
    assert_eq!(status["status"]["phase"], "Scaling");
    assert_eq!(status["status"]["addPods"], json!(["mnist-worker-2"]));

    let job_status = expect_status_apply(&mut handle, &job).await;
    assert_eq!(job_status["status"]["phase"], "Scaling");
    assert_eq!(
        job_status["status"]["currentScaler"],
        "ScaleOut:default/grow"
    );
    let reasons = [
        expect_event(&mut handle).await["reason"].clone(),
        expect_event(&mut handle).await["reason"].clone(),
    ];
    assert_eq!(reasons, [json!("ScalingStarted"), json!("WorkersCreated")]);
    reconcile
        .await
        .expect("the reconcile task")
        .expect("the reconcile succeeds");
}

/// The request controller for ScaleOuts, over `cached`, and what it asks the job controller.
fn scale_outs(
    client: Client,
    cached: Cached,
) -> (
    Arc<scale_requests::Requests>,
    futures::channel::mpsc::UnboundedReceiver<kube::runtime::reflector::ObjectRef<DynamicObject>>,
) {
    let (poke, poked) = futures::channel::mpsc::unbounded();
    let listed = crate::first_lists::Listed::default();
    listed.mark(crate::resources::JOBS);
    let requests = Arc::new(scale_requests::Requests {
        kind: ScalerKind::ScaleOut,
        resource: crate::resources::request_resource(ScalerKind::ScaleOut),
        job_resource: ApiResource::erase::<TrainingJob>(&()),
        shared: cached.context(client),
        poke,
        listed,
    });
    (requests, poked)
}

#[tokio::test]
async fn a_request_for_an_existing_job_asks_for_its_reconcile_and_writes_nothing() {
    let (client, mut handle) = mock();
    let mut cached = Cached::default();
    cached.jobs.push(job());
    let (requests, mut poked) = scale_outs(client, cached);
    let request = Arc::new(scale_out("grow", "mnist", 1));
    scale_requests::reconcile(request, Arc::clone(&requests))
        .await
        .expect("the request is handled");
    let job = poked.try_recv().expect("a reconcile was asked for");
    assert_eq!(
        (job.name.as_str(), job.namespace.as_deref()),
        ("mnist", Some("default"))
    );
    drop(requests);
    assert!(handle.next_request().await.is_none(), "no request was sent");
}

#[tokio::test]
async fn a_request_for_a_job_that_does_not_exist_fails_with_a_warning_on_it() {
    let (client, mut handle) = mock();
    let (requests, _poked) = scale_outs(client, Cached::default());
    let request = Arc::new(scale_out("grow", "gone", 1));
    let handled = tokio::spawn(scale_requests::reconcile(request, requests));
    let path = "/apis/kai.alibabacloud.com/v1alpha1/namespaces/default/scaleouts/grow/status";
    let status = expect(&mut handle, "PATCH", &format!("{path}{APPLY}"), None).await;
    assert_eq!(status["status"]["phase"], "Failed");
    let failed = condition(&status, "ScaleFailed");
    assert_eq!(failed["reason"], "JobNotFound");
    assert_eq!(
        failed["message"],
        "spec.selector.name: TrainingJob gone does not exist in namespace default"
    );
    let event = expect_event(&mut handle).await;
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "ScaleFailed");
    assert_eq!(event["regarding"]["kind"], "ScaleOut");
    assert_eq!(event["regarding"]["name"], "grow");
    let action = handled
        .await
        .expect("the request task")
        .expect("the request is handled");
    assert_eq!(action, kube::runtime::controller::Action::await_change());
}

#[tokio::test]
async fn a_request_is_not_judged_before_the_job_cache_has_listed() {
    let (client, mut handle) = mock();
    let (requests, mut poked) = scale_outs(client, Cached::default());
    let waiting = scale_requests::Requests {
        listed: crate::first_lists::Listed::default(),
        kind: requests.kind,
        resource: requests.resource.clone(),
        job_resource: requests.job_resource.clone(),
        shared: Arc::clone(&requests.shared),
        poke: requests.poke.clone(),
    };
    let request = Arc::new(scale_out("grow", "gone", 1));
    let action = scale_requests::reconcile(request, Arc::new(waiting))
        .await
        .expect("the request is handled");
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(scale_requests::LISTING_RETRY)
    );
    drop(requests);
    assert!(poked.try_recv().is_err(), "no job reconcile asked for");
    assert!(
        handle.next_request().await.is_none(),
        "the request is not failed"
    );
}

const MPI_JOB: &str = r#"
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: pi
  namespace: default
  uid: 5e0f9b1c-0000-4000-8000-0000000000a1
  generation: 1
  resourceVersion: "9"
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: mpioperator/mpi-pi:openmpi
            command: ["mpirun", "-n", "2", "/home/mpiuser/pi"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: mpioperator/mpi-pi:openmpi
"#;

fn mpi_job() -> eto_api::MPIJob {
    serde_saphyr::from_str(MPI_JOB).expect("the fixture is an MPIJob")
}

/// Answers every request until the client hangs up: a read of a path in `existing` with its
/// metadata, any other read with `404 NotFound`, a write with an echo of its body. Returns the
/// requests as `METHOD URI` with their bodies.
async fn serve_all(handle: Handle, existing: Vec<(&str, Value)>) -> Vec<(String, Value)> {
    serve(handle, existing, None).await
}

/// [`serve_all`], refusing a write of the path `rejected` with `422 Invalid`.
async fn serve(
    mut handle: Handle,
    existing: Vec<(&str, Value)>,
    rejected: Option<&str>,
) -> Vec<(String, Value)> {
    let mut seen = Vec::new();
    while let Some((request, send)) = handle.next_request().await {
        // A JSON merge patch is marked; server-side applies are the unmarked PATCH lines.
        let merge = request
            .headers()
            .get("content-type")
            .is_some_and(|t| t == "application/merge-patch+json");
        let mut line = format!("{} {}", request.method(), request.uri());
        if merge {
            line.push_str(" (merge patch)");
        }
        let read = request.method() == "GET";
        let path = request.uri().path().to_string();
        let bytes = request
            .into_body()
            .collect_bytes()
            .await
            .expect("a readable body");
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let found = existing.iter().find(|(held, _)| *held == path);
        send.send_response(match (read, found) {
            (true, Some((_, metadata))) => {
                let object = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": metadata});
                Response::builder()
                    .status(200)
                    .body(Body::from(object.to_string().into_bytes()))
                    .expect("a response")
            }
            (true, None) => failure(404, "NotFound", "not found"),
            (false, _) if rejected == Some(path.as_str()) => {
                failure(422, "Invalid", "spec.containers[0].image: Required value")
            }
            (false, _) => Response::builder()
                .status(200)
                .body(Body::from(bytes.to_vec()))
                .expect("a response"),
        });
        seen.push((line, body));
    }
    seen
}

/// [`serve_all`] on an API server without children.
async fn echo_all(handle: Handle) -> Vec<(String, Value)> {
    serve_all(handle, Vec::new()).await
}

/// Reconciles `object`, a job of `kind`, over `cached`, against an API server that accepts
/// every write ([`echo_all`]); returns the requests it received.
async fn reconciled_accepting(
    cached: Cached,
    kind: Kind,
    object: Arc<DynamicObject>,
) -> Vec<(String, Value)> {
    let (client, handle) = mock();
    let ctx = cached.context(client);
    let served = tokio::spawn(echo_all(handle));
    reconcile(kind, object, ctx)
        .await
        .expect("the reconcile succeeds");
    served.await.expect("the mock server")
}

#[tokio::test]
async fn a_new_mpi_job_gets_an_ssh_auth_secret_workers_a_launcher_job_and_its_status() {
    let (client, handle) = mock();
    let ctx = Cached::default().context(client);
    let job = mpi_job();
    let served = tokio::spawn(echo_all(handle));
    reconcile(Kind::MPI_JOB, dynamic(&job), ctx)
        .await
        .expect("the reconcile succeeds");
    let requests = served.await.expect("the mock server");
    let lines: Vec<&str> = requests.iter().map(|(line, _)| line.as_str()).collect();
    assert_eq!(
        lines,
        [
            "POST /api/v1/namespaces/default/secrets?&fieldManager=eto",
            "GET /api/v1/namespaces/default/services/pi",
            "PATCH /api/v1/namespaces/default/services/pi?&force=true&fieldManager=eto",
            "PATCH /api/v1/namespaces/default/pods/pi-worker-0?&force=true&fieldManager=eto",
            "PATCH /api/v1/namespaces/default/pods/pi-worker-1?&force=true&fieldManager=eto",
            "GET /api/v1/namespaces/default/configmaps/pi-config",
            "PATCH /api/v1/namespaces/default/configmaps/pi-config?&force=true&fieldManager=eto",
            "POST /apis/batch/v1/namespaces/default/jobs?&fieldManager=eto",
            "PATCH /apis/kubeflow.org/v2beta1/namespaces/default/mpijobs/pi/status?&force=true&fieldManager=eto",
            "POST /apis/events.k8s.io/v1/namespaces/default/events?",
            "POST /apis/events.k8s.io/v1/namespaces/default/events?",
        ]
    );
    let secret = &requests[0].1;
    assert_eq!(secret["type"], "kubernetes.io/ssh-auth");
    let keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["ssh-privatekey", "ssh-publickey"]);
    let launcher = &requests[7].1;
    assert_eq!(launcher["metadata"]["name"], "pi-launcher");
    assert_eq!(
        launcher["metadata"]["ownerReferences"][0]["uid"],
        "5e0f9b1c-0000-4000-8000-0000000000a1"
    );
    assert_eq!(launcher["spec"]["backoffLimit"], 0);
    let status = &requests[8].1;
    assert_eq!(
        (&status["apiVersion"], &status["kind"]),
        (&json!("kubeflow.org/v2beta1"), &json!("MPIJob"))
    );
    assert_eq!(condition(status, "Created")["reason"], "MPIJobCreated");
    assert_eq!(status["status"]["observedGeneration"], 1);
}

#[tokio::test]
async fn an_mpi_job_managed_by_another_controller_gets_no_request() {
    let (client, handle) = mock();
    let ctx = Cached::default().context(client);
    let mut job = mpi_job();
    job.spec.run_policy = Some(eto_api::mpi_job::RunPolicy {
        managed_by: Some("kubeflow.org/mpi-operator".into()),
        ..eto_api::mpi_job::RunPolicy::default()
    });
    let served = tokio::spawn(echo_all(handle));
    reconcile(Kind::MPI_JOB, dynamic(&job), ctx)
        .await
        .expect("the reconcile succeeds");
    assert_eq!(served.await.expect("the mock server"), []);
}

#[tokio::test]
async fn the_launcher_jobs_pod_gets_the_ready_hosts_as_a_metadata_merge_patch() {
    let mut job = mpi_job();
    let first = plan(&Observed::without_children(JobRef::new(&job)), now());
    let mut cached = Cached::after(&first);
    job.status = first.status.map(|status| {
        serde_json::from_value(
            serde_json::to_value(eto_engine::kind::ApiStatus::of(Kind::MPI_JOB, "pi", status))
                .expect("statuses serialize"),
        )
        .expect("an MPIJob status")
    });
    // The Job controller started the launcher's pod from its template; every pod runs.
    let template_labels = cached.launcher_jobs[0]
        .spec
        .as_ref()
        .and_then(|spec| spec.template.metadata.as_ref())
        .and_then(|metadata| metadata.labels.clone());
    cached.pods.push(
        serde_json::from_value(json!({
            "metadata": {"name": "pi-launcher-x7k2p", "namespace": "default",
                "labels": template_labels,
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi-launcher",
                    "uid": "launcher-job-uid", "controller": true}]},
            "spec": {"containers": [{"name": "launcher", "image": "mpioperator/mpi-pi:openmpi"}]},
        }))
        .expect("a pod"),
    );
    cached.all_ready();
    let requests = reconciled_accepting(cached, Kind::MPI_JOB, dynamic(&job)).await;
    let (_, annotated) = requests
        .iter()
        .find(|(line, _)| {
            line == "PATCH /api/v1/namespaces/default/pods/pi-launcher-x7k2p?&fieldManager=eto (merge patch)"
        })
        .unwrap_or_else(|| panic!("no patch of the launcher pod among {requests:#?}"));
    assert_eq!(
        annotated
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect::<Vec<_>>()),
        Some(vec!["metadata"]),
        "only metadata is patched"
    );
    assert_eq!(
        annotated["metadata"]["annotations"]["eto.dev/hostfile"],
        "pi-worker-0.pi.default.svc:1\npi-worker-1.pi.default.svc:1\n"
    );
}

#[tokio::test]
async fn a_configmap_of_the_jobs_name_held_by_another_owner_is_reported_not_written() {
    let (client, handle) = mock();
    let ctx = Cached::default().context(client);
    let job = job();
    let config_map = "/api/v1/namespaces/default/configmaps/mnist-config";
    let held = json!({"name": "mnist-config", "namespace": "default", "uid": "uid-cm",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
            "uid": "uid-web", "controller": true}]});
    let served = tokio::spawn(serve_all(handle, vec![(config_map, held)]));
    reconcile(Kind::TRAINING_JOB, dynamic(&job), ctx)
        .await
        .expect("the reconcile succeeds, reporting the taken name");
    let requests = served.await.expect("the mock server");
    let writes: Vec<&str> = requests
        .iter()
        .map(|(line, _)| line.as_str())
        .filter(|line| !line.starts_with("GET "))
        .collect();
    assert!(
        !writes.iter().any(|line| line.contains("/configmaps/")),
        "the ConfigMap is never written: {writes:#?}"
    );
    assert!(
        !writes
            .iter()
            .any(|line| line.contains("/pods/mnist-launcher")),
        "no launcher mounts someone else's ConfigMap: {writes:#?}"
    );
    let (_, status) = requests
        .iter()
        .find(|(line, _)| line.contains("/trainingjobs/mnist/status"))
        .expect("the status is written");
    let stalled = condition(status, "Stalled");
    assert_eq!(stalled["status"], "True");
    assert_eq!(stalled["reason"], "NameTaken");
    let message = stalled["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ConfigMap mnist-config (controlled by Deployment/web)"),
        "{message}"
    );
    let (_, event) = requests
        .iter()
        .find(|(line, body)| line.contains("/events") && body["reason"] == "NameTaken")
        .expect("a NameTaken event");
    assert_eq!(event["type"], "Warning");
}

#[tokio::test]
async fn a_worker_missing_from_the_cache_is_read_before_it_is_taken_for_deleted() {
    let (mut job, mut cached) = running_job();
    // One worker is enough: its peer's loss leaves the group trained on, not suspended.
    job.spec.et_replica_specs.worker.min_replicas = Some(1);
    cached
        .pods
        .retain(|pod| pod.metadata.name.as_deref() != Some("mnist-worker-1"));
    let worker = "/api/v1/namespaces/default/pods/mnist-worker-1";

    // It still exists (created by another operator, or the cache lags): nothing is written.
    let (client, handle) = mock();
    let ctx = cached.clone().context(client);
    let served = tokio::spawn(serve_all(
        handle,
        vec![(
            worker,
            json!({"name": "mnist-worker-1", "namespace": "default"}),
        )],
    ));
    reconcile(Kind::TRAINING_JOB, dynamic(&job), ctx)
        .await
        .expect("the reconcile waits for the cache");
    let requests = served.await.expect("the mock server");
    let lines: Vec<&str> = requests.iter().map(|(line, _)| line.as_str()).collect();
    assert_eq!(lines, [format!("GET {worker}")]);

    // It is gone: the loss is planned (the status lists it on the blacklist).
    let requests = reconciled_accepting(cached, Kind::TRAINING_JOB, dynamic(&job)).await;
    assert_eq!(requests[0].0, format!("GET {worker}"));
    let (_, status) = requests
        .iter()
        .find(|(line, _)| line.contains("/trainingjobs/mnist/status"))
        .expect("the status is written");
    assert_eq!(status["status"]["blacklist"][0]["pod"], "mnist-worker-1");
    assert_eq!(status["status"]["blacklist"][0]["reason"], "Deleted");
}

/// The first reconcile of a job of seven workers whose worker `rejected` the API server
/// refuses as invalid: the indices of the workers written, whether the reconcile succeeded,
/// and every request.
async fn first_reconcile_of_seven_workers(
    rejected: Option<usize>,
) -> (Vec<usize>, bool, Vec<(String, Value)>) {
    let job: TrainingJob =
        serde_saphyr::from_str(&JOB.replace("replicas: 2", "replicas: 7")).expect("a job");
    let (client, handle) = mock();
    let ctx = Cached::default().context(client);
    let rejected =
        rejected.map(|index| format!("/api/v1/namespaces/default/pods/mnist-worker-{index}"));
    let served = tokio::spawn(async move { serve(handle, Vec::new(), rejected.as_deref()).await });
    let result = reconcile(Kind::TRAINING_JOB, dynamic(&job), ctx).await;
    let requests = served.await.expect("the mock server");
    let workers = requests
        .iter()
        .filter_map(|(line, _)| {
            let index = line.strip_prefix("PATCH /api/v1/namespaces/default/pods/mnist-worker-")?;
            index.split('?').next()?.parse().ok()
        })
        .collect();
    (workers, result.is_ok(), requests)
}

#[tokio::test]
async fn new_workers_go_out_in_doubling_batches_and_a_rejected_one_ends_them_with_one_condition() {
    // Batches of one, two and four: [0], [1, 2], [3, 4, 5, 6].
    for (rejected, attempted) in [
        (None, 0..7),
        (Some(0), 0..1),
        (Some(2), 0..3),
        (Some(5), 0..7),
    ] {
        let (mut workers, succeeded, requests) = first_reconcile_of_seven_workers(rejected).await;
        workers.sort_unstable();
        assert_eq!(
            workers,
            attempted.collect::<Vec<_>>(),
            "refusing worker {rejected:?}: no pod is written after the batch with the refusal"
        );
        assert!(
            succeeded,
            "refusing worker {rejected:?}: the job reports it instead"
        );
        let statuses: Vec<&Value> = requests
            .iter()
            .filter(|(line, _)| line.contains("/trainingjobs/mnist/status"))
            .map(|(_, body)| body)
            .collect();
        assert_eq!(statuses.len(), 1, "one status write: {requests:#?}");
        let events: Vec<&Value> = requests
            .iter()
            .filter(|(line, _)| line.contains("/events"))
            .map(|(_, body)| &body["reason"])
            .collect();
        let stalled = condition(statuses[0], "Stalled");
        match rejected {
            None => {
                assert_eq!(stalled["status"], "False");
                assert_eq!(events, [&json!("WorkersCreated")]);
            }
            Some(index) => {
                assert_eq!(stalled["status"], "True", "refusing worker {index}");
                assert_eq!(stalled["reason"], "PodRejected");
                let message = stalled["message"].as_str().unwrap_or_default();
                assert!(
                    message.contains(&format!("rejected pod mnist-worker-{index}: "))
                        && message.contains("spec.containers[0].image: Required value"),
                    "{message}"
                );
                assert_eq!(
                    events,
                    [&json!("PodRejected")],
                    "one event, about the refusal"
                );
                assert!(
                    statuses[0]["status"]["targetWorkers"]
                        .as_array()
                        .is_none_or(Vec::is_empty),
                    "no worker is recorded as the job's"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_running_launcher_shown_new_hosts_gets_a_merge_patch_of_its_metadata_only() {
    use crate::cache_trim::Trim;

    let (job, mut cached) = running_job();
    // The caches hold pods as the watches trim them: no spec but the node.
    for pod in &mut cached.pods {
        pod.trim();
    }
    let failed = cached
        .pods
        .iter_mut()
        .find(|p| p.metadata.name.as_deref() == Some("mnist-worker-1"))
        .expect("worker 1");
    failed.status = Some(
        serde_json::from_value(json!({"phase": "Failed", "containerStatuses": [{
            "name": "worker", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}))
        .expect("a pod status"),
    );
    let requests = reconciled_accepting(cached, Kind::TRAINING_JOB, dynamic(&job)).await;
    let launcher = "/api/v1/namespaces/default/pods/mnist-launcher";
    let writes: Vec<&(String, Value)> = requests
        .iter()
        .filter(|(line, _)| line.contains(launcher))
        .collect();
    assert_eq!(
        writes.len(),
        1,
        "one write of the launcher among {requests:#?}"
    );
    let (line, body) = writes[0];
    assert_eq!(
        line,
        &format!("PATCH {launcher}?&fieldManager=eto (merge patch)")
    );
    assert_eq!(
        body,
        &json!({"metadata": {"annotations": {
            "eto.dev/hostfile": "mnist-worker-0.mnist-workers:1\n",
            "eto.dev/deepspeed-hostfile": "mnist-worker-0.mnist-workers slots=1\n",
        }}})
    );
}

/// Caches of an operator set to gang-schedule with Volcano, whose PodGroup API is served when
/// `served`.
fn volcano(served: bool) -> Cached {
    let listed = crate::first_lists::Listed::default();
    if served {
        listed.mark(POD_GROUPS);
    }
    Cached {
        gang: Some(GangSettings {
            scheduler: eto_engine::pod_group::GangScheduler::Volcano,
            listed,
        }),
        ..Cached::default()
    }
}

#[tokio::test]
async fn with_volcano_the_pod_group_is_applied_before_the_pods_that_join_it() {
    let requests = reconciled_accepting(volcano(true), Kind::MPI_JOB, dynamic(&mpi_job())).await;
    let lines: Vec<&str> = requests.iter().map(|(line, _)| line.as_str()).collect();
    let group = lines
        .iter()
        .position(|line| {
            *line
                == "PATCH /apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/pi?&force=true&fieldManager=eto"
        })
        .unwrap_or_else(|| panic!("no PodGroup apply in {lines:#?}"));
    let first_pod = lines
        .iter()
        .position(|line| line.contains("/pods/"))
        .expect("workers are created");
    assert!(group < first_pod, "{lines:#?}");
    let body = &requests[group].1;
    assert_eq!(
        (&body["apiVersion"], &body["kind"]),
        (&json!("scheduling.volcano.sh/v1beta1"), &json!("PodGroup"))
    );
    assert_eq!(body["spec"]["minMember"], 3, "two workers and the launcher");
    assert_eq!(body["metadata"]["ownerReferences"][0]["kind"], "MPIJob");
    let worker = &requests[first_pod].1;
    assert_eq!(worker["spec"]["schedulerName"], "volcano");
    assert_eq!(
        worker["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
        "pi"
    );
}

#[tokio::test]
async fn without_the_pod_group_api_no_pod_is_created_and_the_job_says_why() {
    let requests = reconciled_accepting(volcano(false), Kind::MPI_JOB, dynamic(&mpi_job())).await;
    assert!(
        !requests
            .iter()
            .any(|(line, _)| line.contains("/pods/") || line.contains("podgroups")),
        "{requests:#?}"
    );
    let (_, status) = requests
        .iter()
        .find(|(line, _)| line.ends_with("/mpijobs/pi/status?&force=true&fieldManager=eto"))
        .expect("the status is written");
    assert_eq!(condition(status, "Ready")["reason"], "GangSchedulerMissing");
}

#[tokio::test]
async fn pods_whose_checkpoint_window_ended_are_deleted_with_a_short_grace_period() {
    let (mut job, cached) = running_job();
    // A Suspend notice whose deadline has passed, with the launcher still running.
    let since = now() - jiff::SignedDuration::from_secs(301);
    let status = job.status.as_mut().expect("a status");
    status.notice = Some(eto_api::job_status::Notice {
        kind: eto_api::job_status::NoticeKind::Suspend,
        reason: "Suspended".into(),
        since: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(since),
        deadline: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            since + jiff::SignedDuration::from_secs(300),
        )),
        message: "suspending".into(),
    });
    job.spec.suspend = Some(true);
    let (client, handle) = mock();
    let ctx = cached.context(client);
    let served = tokio::spawn(serve_all(handle, Vec::new()));
    reconcile(Kind::TRAINING_JOB, dynamic(&job), ctx)
        .await
        .expect("the reconcile succeeds");
    let requests = served.await.expect("the mock server");
    let deletions: Vec<(&str, &Value)> = requests
        .iter()
        .filter(|(line, _)| line.starts_with("DELETE /api/v1/namespaces/default/pods/"))
        .map(|(line, body)| (line.as_str(), body))
        .collect();
    assert_eq!(deletions.len(), 3, "{requests:?}");
    for (line, options) in deletions {
        assert_eq!(options["gracePeriodSeconds"], 5, "{line}");
        assert_eq!(options["propagationPolicy"], "Background", "{line}");
    }
}

const PYTORCH_JOB: &str = r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: ddp
  namespace: default
  uid: 7a2c0d3e-0000-4000-8000-0000000000b2
  generation: 1
  resourceVersion: "9"
spec:
  elasticPolicy:
    minReplicas: 1
    maxReplicas: 3
    metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 80
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.5.1
            command: ["torchrun", "train.py"]
"#;

fn pytorch_job() -> eto_api::PyTorchJob {
    serde_saphyr::from_str(PYTORCH_JOB).expect("the fixture is a PyTorchJob")
}

const AUTOSCALER: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/ddp";

#[tokio::test]
async fn a_pytorch_job_with_metrics_applies_its_autoscaler_after_checking_the_name() {
    let job = pytorch_job();
    let requests = reconciled_accepting(Cached::default(), Kind::PYTORCH_JOB, dynamic(&job)).await;
    let lines: Vec<&str> = requests.iter().map(|(line, _)| line.as_str()).collect();
    let read = format!("GET {AUTOSCALER}");
    let apply = format!("PATCH {AUTOSCALER}?&force=true&fieldManager=eto");
    let at = |line: &str| lines.iter().position(|l| *l == line);
    let (Some(read_at), Some(apply_at)) = (at(&read), at(&apply)) else {
        panic!("no look-up and apply of the autoscaler: {lines:#?}");
    };
    let status_at = lines
        .iter()
        .position(|line| line.contains("/pytorchjobs/ddp/status"))
        .expect("a status write");
    assert!(read_at < apply_at && apply_at < status_at, "{lines:#?}");
    let body = &requests[apply_at].1;
    assert_eq!(
        (&body["apiVersion"], &body["kind"]),
        (&json!("autoscaling/v2"), &json!("HorizontalPodAutoscaler"))
    );
    assert_eq!(
        body["spec"]["scaleTargetRef"],
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ddp"})
    );
    assert_eq!(
        (&body["spec"]["minReplicas"], &body["spec"]["maxReplicas"]),
        (&json!(1), &json!(3))
    );
    assert_eq!(
        body["metadata"]["ownerReferences"][0]["uid"],
        "7a2c0d3e-0000-4000-8000-0000000000b2"
    );
}

#[tokio::test]
async fn a_suspended_pytorch_job_deletes_its_autoscaler() {
    let mut job = pytorch_job();
    let first = plan(&Observed::without_children(JobRef::new(&job)), now());
    let cached = Cached::after(&first);
    assert_eq!(cached.autoscalers.len(), 1, "the first plan applies it");
    job.spec.run_policy = Some(eto_api::pytorch_job::RunPolicy {
        suspend: Some(true),
        ..Default::default()
    });
    let requests = reconciled_accepting(cached, Kind::PYTORCH_JOB, dynamic(&job)).await;
    let lines: Vec<&str> = requests.iter().map(|(line, _)| line.as_str()).collect();
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with(&format!("DELETE {AUTOSCALER}"))),
        "{lines:#?}"
    );
}

/// The progress the helper in a training pod serves: `step`, reached `at` seconds after
/// [`now`], in a stretch that began at step 1 at [`now`].
fn served_progress(step: i64, at: i64) -> Value {
    let after = |seconds: i64| (now() + jiff::SignedDuration::from_secs(seconds)).to_string();
    json!({"step": step, "at": after(at), "first_step": 1, "first_at": after(0)})
}

#[tokio::test]
async fn steps_read_but_not_written_count_once_the_pod_that_served_them_is_silent() {
    let (mut job, mut cached) = running_job();
    for pod in &mut cached.pods {
        if pod
            .metadata
            .name
            .as_deref()
            .is_some_and(|name| name.contains("-worker-"))
        {
            pod.spec.as_mut().expect("pods have specs").containers[0].ports = Some(vec![
                serde_json::from_value(json!({"name": "eto-progress", "containerPort": 29411}))
                    .expect("a port"),
            ]);
        }
    }
    // The ledger recorded the first step.
    let report: eto_engine::group_report::GroupReport =
        eto_engine::group_report::read_progress(&served_progress(1, 0).to_string())
            .expect("a report");
    let recorded = cached.plan_reading(&job, Some(&report));
    job.status = recorded.status.map(from_engine).or(job.status);
    let latest = |status: &Value| status["status"]["goodput"]["latest"]["step"].clone();
    assert_eq!(latest(&json!({"status": &job.status})), json!(1));

    let (client, mut handle) = mock();
    let (proxy, mut proxy_handle) = mock();
    let mut ctx = cached.bare_context(client);
    ctx.pod_proxy = Some(proxy);
    ctx.clock = Arc::new(|| now() + jiff::SignedDuration::from_secs(20));
    let ctx = Arc::new(ctx);
    let progress = "/api/v1/namespaces/default/pods/mnist-worker-0:29411/proxy/progress";

    // Step 37 is read 20 s later, reached 18 s after the record: kept in memory, nothing
    // written.
    let first = tokio::spawn(reconcile(
        Kind::TRAINING_JOB,
        dynamic(&job),
        Arc::clone(&ctx),
    ));
    expect(
        &mut proxy_handle,
        "GET",
        progress,
        Some(served_progress(37, 18)),
    )
    .await;
    tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .expect("a reconcile that writes nothing ends in time")
        .expect("the reconcile task")
        .expect("the reconcile succeeds");

    // The helper is gone with its process: the steps up to the read are trained.
    let second = tokio::spawn(reconcile(
        Kind::TRAINING_JOB,
        dynamic(&job),
        Arc::clone(&ctx),
    ));
    let (_, send) = proxy_handle
        .next_request()
        .await
        .expect("the helper is asked again");
    send.send_response(failure(503, "ServiceUnavailable", "connection refused"));
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        expect_status_apply(&mut handle, &job),
    )
    .await
    .expect("the status is written in time");
    assert_eq!(
        latest(&status),
        json!(37),
        "{}",
        status["status"]["goodput"]
    );
    second
        .await
        .expect("the reconcile task")
        .expect("the reconcile succeeds");
}
