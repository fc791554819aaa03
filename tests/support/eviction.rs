//! A pod evicted as `kubectl drain` evicts it: through the Eviction API, which marks the pod
//! `DisruptionTarget` and then deletes it with its grace period.
//!
//! kube's `Api::evict` writes its options as `delete_options`, which kube-apiserver ignores;
//! kubectl's body, written here, names them `deleteOptions`.

/// Evicts pod `name` of `namespace`, with `grace` seconds for its containers if given (else
/// its own grace period); returns the API server's answer.
pub async fn evict(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    grace: Option<i64>,
) -> serde_json::Value {
    let mut eviction = serde_json::json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace}});
    if let Some(grace) = grace {
        eviction["deleteOptions"] = serde_json::json!({"gracePeriodSeconds": grace});
    }
    let request = http::Request::post(format!(
        "/api/v1/namespaces/{namespace}/pods/{name}/eviction"
    ))
    .header("Content-Type", "application/json")
    .body(serde_json::to_vec(&eviction).expect("an eviction serializes"))
    .expect("a request");
    client
        .request(request)
        .await
        .expect("the API server takes the eviction")
}
