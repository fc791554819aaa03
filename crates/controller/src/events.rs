//! Events about jobs and scaling requests: each decision the engine plans becomes one
//! `events.k8s.io/v1` Event, and nothing of it is kept once it is written.
//!
//! kube-runtime's `Recorder` keeps every event it wrote for six minutes, and writes an event
//! whose type, reason, action and object repeat a kept one as a count on the kept one (an
//! event series), which keeps the first note. eto's planner already reports each decision
//! once (a stall once per reason and message), so an event that repeats a reason is a new
//! decision with a note of its own: a scale-out's `WorkersCreated`, naming the new workers,
//! would show as the start's `WorkersCreated` counted twice. Keeping the events also cost
//! memory in proportion to the jobs started in the last minutes.
//!
//! # Guarantees
//! - One create per event, named `<object>.<nanoseconds in hex>` (as client-go names
//!   events), in the object's namespace.
//! - `reportingController` is eto's manager name; `reportingInstance` is the operator's
//!   instance name (its pod name) if it has one, else the manager name, cut to the 128 bytes
//!   kube-apiserver accepts.
//! - The note fits the 1,024 bytes kube-apiserver accepts: a longer one (the names of a
//!   hundred new workers) is cut at a character boundary and ends in ` ...`, instead of the
//!   whole event being refused. The log line of the decision keeps the whole note.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::events::EventType;

/// The longest note kube-apiserver accepts on an event with an `eventTime`, in bytes.
pub const NOTE_LIMIT: usize = 1024;

/// The longest `reportingInstance` kube-apiserver accepts, in bytes.
pub const INSTANCE_LIMIT: usize = 128;

/// What ends a note that was cut to [`NOTE_LIMIT`].
const CUT_MARK: &str = " ...";

/// Writes events as one reporting controller.
#[derive(Clone)]
pub struct EventPublisher {
    client: Client,
    controller: String,
    instance: String,
}

impl EventPublisher {
    /// Events from `controller` (its `instance`, if it has one) written with `client`.
    pub fn new(client: Client, controller: &str, instance: Option<&str>) -> Self {
        Self {
            client,
            controller: controller.into(),
            instance: cut(instance.unwrap_or(controller), INSTANCE_LIMIT).into(),
        }
    }

    /// Writes one event of `type_` about `regarding`.
    ///
    /// # Errors
    /// The API server refused the event or could not be reached.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let object = regarding.name.as_deref().unwrap_or(&self.controller);
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(
                match type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            reason: Some(reason.into()),
            action: Some(action.into()),
            note: Some(fit_note(note)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        };
        Api::<Event>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &event)
            .await
            .map(drop)
    }
}

/// `note` if it fits [`NOTE_LIMIT`], else as much of it as fits with [`CUT_MARK`].
fn fit_note(note: String) -> String {
    if note.len() <= NOTE_LIMIT {
        note
    } else {
        format!("{}{CUT_MARK}", cut(&note, NOTE_LIMIT - CUT_MARK.len()))
    }
}

/// The longest start of `text` of at most `limit` bytes that ends on a character boundary.
fn cut(text: &str, limit: usize) -> &str {
    &text[..text.floor_char_boundary(limit)]
}

#[cfg(test)]
mod tests {
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::*;

    fn job() -> ObjectReference {
        ObjectReference {
            api_version: Some("kai.alibabacloud.com/v1alpha1".into()),
            kind: Some("TrainingJob".into()),
            name: Some("mnist".into()),
            namespace: Some("team-a".into()),
            uid: Some("uid-mnist".into()),
            ..ObjectReference::default()
        }
    }

    #[tokio::test]
    async fn every_event_is_created_with_its_own_note_even_when_its_reason_repeats() {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let publisher = EventPublisher::new(Client::new(service, "default"), "eto", None);
        let notes = [
            "created workers mnist-worker-0, mnist-worker-1",
            "created worker mnist-worker-2",
        ];
        let server = tokio::spawn(async move {
            let mut bodies = Vec::new();
            for _ in notes {
                let (request, send) = handle.next_request().await.expect("a request");
                assert_eq!(
                    format!("{} {}", request.method(), request.uri()),
                    "POST /apis/events.k8s.io/v1/namespaces/team-a/events?"
                );
                let bytes = request.into_body().collect_bytes().await.expect("a body");
                let body: Value = serde_json::from_slice(&bytes).expect("JSON");
                send.send_response(
                    Response::builder()
                        .status(201)
                        .body(Body::from(bytes.to_vec()))
                        .expect("a response"),
                );
                bodies.push(body);
            }
            bodies
        });
        for note in notes {
            publisher
                .publish(
                    &job(),
                    EventType::Normal,
                    "WorkersCreated",
                    "Create",
                    note.into(),
                )
                .await
                .expect("the event is written");
        }
        let bodies = server.await.expect("the server answered");
        for (body, note) in bodies.iter().zip(notes) {
            let name = body["metadata"]["name"].as_str().expect("a name");
            assert!(name.starts_with("mnist."), "{name}");
            assert_eq!(
                [
                    &body["type"],
                    &body["reason"],
                    &body["action"],
                    &body["note"]
                ],
                [
                    &json!("Normal"),
                    &json!("WorkersCreated"),
                    &json!("Create"),
                    &json!(note)
                ]
            );
            assert_eq!(body["regarding"]["uid"], "uid-mnist");
            assert_eq!(body["reportingController"], "eto");
            assert_eq!(body["reportingInstance"], "eto");
            assert_eq!(body["series"], Value::Null);
        }
        assert_ne!(bodies[0]["metadata"]["name"], bodies[1]["metadata"]["name"]);
    }

    #[test]
    fn a_note_longer_than_the_api_server_accepts_is_cut_at_a_character_boundary() {
        let names = (0..128)
            .map(|index| format!("mnist-worker-{index}"))
            .collect::<Vec<_>>()
            .join(", ");
        let created = format!("created workers {names}");
        // One byte, then two bytes each: byte 1,020 is in the middle of a character.
        let accented = format!("a{}", "é".repeat(NOTE_LIMIT));
        let cases = [
            ("short", "created workers mnist-worker-0".to_string(), None),
            ("exactly the limit", "x".repeat(NOTE_LIMIT), None),
            (
                "128 workers",
                created.clone(),
                Some(&created[..NOTE_LIMIT - 4]),
            ),
            (
                "multi-byte",
                accented.clone(),
                Some(&accented[..NOTE_LIMIT - 5]),
            ),
        ];
        for (case, note, cut_to) in cases {
            let fitted = fit_note(note.clone());
            assert!(fitted.len() <= NOTE_LIMIT, "{case}: {} bytes", fitted.len());
            match cut_to {
                None => assert_eq!(fitted, note, "{case}"),
                Some(start) => assert_eq!(fitted, format!("{start} ..."), "{case}"),
            }
        }
    }

    #[tokio::test]
    async fn a_long_instance_name_is_cut_to_what_the_api_server_accepts() {
        let (service, _handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let long = "eto-operator-".repeat(20);
        let publisher = EventPublisher::new(client.clone(), "eto", Some(&long));
        assert_eq!(publisher.instance, long[..INSTANCE_LIMIT]);
        let unnamed = EventPublisher::new(client, "eto", None);
        assert_eq!(unnamed.instance, "eto");
    }
}
