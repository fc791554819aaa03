//! Requests eto sends to training pods through the API server's pod proxy (the `kubeai`
//! stop signal, see [`crate::kubeai_stop`]; a coordinator's report, see
//! [`crate::group_report`]), and the log lines they leave.
//!
//! kube's client logs an ERROR line for every `5xx` answer. Through the pod proxy a `503` is
//! the pod's answer, not the API server's health: the SDK answers a stop with one, and a
//! rendezvous store that is still starting gives one. Each caller reports what it learned
//! (an Event, a metric, a status) or treats it as no answer, so those lines only alarm the
//! person who reads the log. [`quietly`] marks a request as one to the pod proxy, and
//! [`quiet_answers`] drops kube's line for it; every other log passes.

use std::future::Future;

tokio::task_local! {
    /// Set while a request to a pod through the pod proxy is on its way.
    static PROXYING: ();
}

/// Runs `request`, a request to a pod through the pod proxy, with kube's error line for its
/// `5xx` answer dropped by [`quiet_answers`].
pub async fn quietly<F: Future>(request: F) -> F::Output {
    PROXYING.scope((), request).await
}

/// A log filter that drops the error line kube's client logs for a `5xx` answer to a request
/// sent [`quietly`]. Other logs pass.
pub fn quiet_answers<S>() -> impl tracing_subscriber::layer::Filter<S> {
    tracing_subscriber::filter::dynamic_filter_fn(|metadata, _| {
        !(metadata.target() == "kube_client::client::builder" && PROXYING.try_with(|()| ()).is_ok())
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tracing_subscriber::prelude::*;

    use super::*;

    #[tokio::test]
    async fn kubes_error_line_is_dropped_only_for_a_request_sent_quietly() {
        struct Count(Arc<AtomicUsize>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
            fn on_event(
                &self,
                _: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let logged = Arc::new(AtomicUsize::new(0));
        let subscriber = tracing_subscriber::registry()
            .with(Count(Arc::clone(&logged)).with_filter(quiet_answers()));
        let _default = tracing::subscriber::set_default(subscriber);
        tracing::error!(target: "kube_client::client::builder", "failed with status 503");
        assert_eq!(
            logged.load(Ordering::Relaxed),
            1,
            "an API server's 503 is logged"
        );
        quietly(async {
            tracing::error!(target: "kube_client::client::builder", "failed with status 503");
            tracing::warn!("eto's own line");
        })
        .await;
        assert_eq!(
            logged.load(Ordering::Relaxed),
            2,
            "only eto's own line is added"
        );
    }
}
