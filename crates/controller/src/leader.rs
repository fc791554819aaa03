//! Leader election: several operator replicas, one of which reconciles.
//!
//! Every replica competes for one `coordination.k8s.io/v1` Lease through kube-lease-manager.
//! The holder runs the controller; the others stand by with no watch, no cache and no write,
//! and take the Lease when it is released or expires.
//!
//! # Guarantees
//! - **A leader stops writing before another replica can start.** Another replica may take
//!   the Lease once `lease_duration` has passed since its last renewal. The leader checks its
//!   own Lease every [`CHECK_EVERY`]: when it does not see a renewal of its own younger than
//!   `renew_deadline` (the API server is unreachable, or the Lease names someone else), it
//!   drops the controller at once (every reconcile and request in flight is cancelled, nothing
//!   waits for a grace period) and [`run_elected`] returns [`RunError::LostLease`]. Settings
//!   are refused unless `renew_deadline + CHECK_EVERY < lease_duration`, so the leader has
//!   stopped before the Lease can expire, as long as the clocks of the replicas' nodes differ
//!   by less than the remaining margin (kube-lease-manager's grace period).
//! - **A shutdown hands over at once.** On the shutdown signal the controller finishes (see
//!   [`crate::run()`]), then the Lease is released, so a standby takes over without waiting for
//!   it to expire.
//! - A leader that lost its Lease does not try again in the same process: the operator exits
//!   and restarts as a standby, with fresh caches.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;

use crate::context::Clock;
use crate::controllers::{RunError, Settings, run};
use crate::metrics::Metrics;

/// How often the leader reads its Lease to confirm it still holds it.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Who competes for which Lease, and its timings.
#[derive(Clone, Debug)]
pub struct Election {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease (the operator's own).
    pub namespace: String,
    /// This replica's identity, unique among the replicas (the pod name).
    pub identity: String,
    /// How long a Lease not renewed stays the holder's: after it, another replica may take it.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without seeing its renewal; must be shorter than
    /// `lease_duration` by more than [`CHECK_EVERY`].
    pub renew_deadline: Duration,
}

impl Election {
    /// The default timings: a 15 s Lease renewed every 3 s, given up after 9 s without a
    /// renewal.
    pub fn new(lease_name: String, namespace: String, identity: String) -> Self {
        Self {
            lease_name,
            namespace,
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(9),
        }
    }

    /// The seconds of kube-lease-manager's settings: the Lease duration, and how long before
    /// its expiry the holder renews it (a third of the renew deadline after each renewal).
    fn lease_seconds(&self) -> Result<(u64, u64), RunError> {
        let duration = self.lease_duration.as_secs();
        let deadline = self.renew_deadline.as_secs();
        if deadline == 0 || self.renew_deadline + CHECK_EVERY >= self.lease_duration {
            return Err(RunError::Election(format!(
                "the renew deadline ({}s) must be at least 1s and shorter than the lease duration ({duration}s) by more than {}s",
                deadline,
                CHECK_EVERY.as_secs()
            )));
        }
        let renew_every = (deadline / 3).max(1);
        Ok((duration, duration - renew_every))
    }
}

/// Runs the controller (see [`crate::run()`]) while this replica holds the Lease of `election`;
/// stands by until then. Returns when `shutdown` resolves (after releasing the Lease), or with
/// [`RunError::LostLease`] as soon as leadership is lost.
///
/// # Errors
/// Invalid timings, a Lease that cannot be read or created, the controller's own errors, and
/// a lost Lease.
pub async fn run_elected(
    client: Client,
    settings: Settings,
    election: Election,
    metrics: Arc<Metrics>,
    clock: Clock,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), RunError> {
    let (duration, grace) = election.lease_seconds()?;
    let build = || async {
        LeaseManagerBuilder::new(client.clone(), &election.lease_name)
            .with_namespace(&election.namespace)
            .with_identity(&election.identity)
            .with_duration(duration)
            .with_grace(grace)
            .with_field_manager(format!("eto-{}", election.identity))
            .build()
            .await
            .map_err(|error| {
                RunError::Election(format!(
                    "cannot use Lease {}/{}: {error}",
                    election.namespace, election.lease_name
                ))
            })
    };
    let mut manager = build().await?;
    let shutdown = shutdown.shared();
    metrics.leader.set(0);
    tracing::info!(lease = %election.lease_name, identity = %election.identity, "standing by until this replica holds the lease");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &election.namespace);
    loop {
        // The lease manager sleeps until the holder's lease expires; a release (a leader
        // shutting down) wakes the standby at once.
        let acquired = tokio::select! {
            () = shutdown.clone() => return Ok(()),
            held = manager.changed() => held,
            () = released_by_another(&leases, &election) => {
                // The lease manager keeps what it last read; a new one reads the release.
                manager = build().await?;
                continue;
            }
        };
        match acquired {
            Ok(true) => break,
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, "cannot take part in leader election; retrying");
                tokio::time::sleep(CHECK_EVERY).await;
            }
        }
    }
    // From here the lease manager renews the Lease in its own task.
    let (mut leading, watcher) = manager.watch().await;
    metrics.leader.set(1);
    tracing::info!(lease = %election.lease_name, identity = %election.identity, "this replica leads");
    let controller = run(
        client.clone(),
        settings,
        Arc::clone(&metrics),
        clock,
        shutdown,
    );
    let lost = async {
        tokio::select! {
            _ = leading.wait_for(|held| !*held) => "the lease manager reports another holder".to_string(),
            reason = unconfirmed(&client, &election) => reason,
        }
    };
    let result = tokio::select! {
        result = controller => result,
        reason = lost => {
            metrics.leader.set(0);
            tracing::error!(lease = %election.lease_name, %reason, "lost the lease; stopped at once");
            return Err(RunError::LostLease(reason));
        }
    };
    metrics.leader.set(0);
    // Dropping the receiver makes the lease manager release the Lease.
    drop(leading);
    match watcher.await {
        Ok(Ok(_)) => tracing::info!(lease = %election.lease_name, "released the lease"),
        Ok(Err(error)) => {
            tracing::warn!(%error, "could not release the lease; it expires by itself")
        }
        Err(error) => tracing::warn!(%error, "the lease manager ended abnormally"),
    }
    result
}

/// The holder of `lease`, if any.
fn holder(lease: Option<&Lease>) -> Option<&str> {
    lease?.spec.as_ref()?.holder_identity.as_deref()
}

/// Resolves once another replica has held the Lease and then released it.
async fn released_by_another(leases: &Api<Lease>, election: &Election) {
    let name = election.lease_name.as_str();
    let me = election.identity.as_str();
    let held_by_another = await_condition(leases.clone(), name, |lease: Option<&Lease>| {
        holder(lease).is_some_and(|holder| holder != me)
    });
    if held_by_another.await.is_err() {
        return std::future::pending().await;
    }
    let released = await_condition(leases.clone(), name, |lease: Option<&Lease>| {
        holder(lease).is_none()
    });
    if released.await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Resolves, with the reason, once the leader has not seen its own renewal for the renew
/// deadline.
async fn unconfirmed(client: &Client, election: &Election) -> String {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &election.namespace);
    let mut confirmed = jiff::Timestamp::now();
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        match leases.get(&election.lease_name).await {
            Ok(lease) => {
                let spec = lease.spec.unwrap_or_default();
                if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
                    return format!(
                        "the lease is held by {}",
                        spec.holder_identity.as_deref().unwrap_or("nobody")
                    );
                }
                if let Some(renewed) = spec.renew_time {
                    confirmed = confirmed.max(renewed.0);
                }
            }
            Err(error) => tracing::warn!(%error, "cannot read the lease to confirm leadership"),
        }
        let since = jiff::Timestamp::now().duration_since(confirmed);
        if since.as_secs_f64() > election.renew_deadline.as_secs_f64() {
            return format!(
                "no renewal seen for {:.0}s (renew deadline {}s)",
                since.as_secs_f64(),
                election.renew_deadline.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn election(duration: u64, deadline: u64) -> Election {
        Election {
            lease_duration: Duration::from_secs(duration),
            renew_deadline: Duration::from_secs(deadline),
            ..Election::new("eto".into(), "eto-system".into(), "a".into())
        }
    }

    #[test]
    fn timings_leave_the_leader_time_to_stop_before_its_lease_expires() {
        assert_eq!(election(15, 9).lease_seconds().ok(), Some((15, 12)));
        assert_eq!(election(8, 2).lease_seconds().ok(), Some((8, 7)));
        for (duration, deadline) in [(15, 14), (15, 15), (15, 0), (5, 9)] {
            assert!(
                election(duration, deadline).lease_seconds().is_err(),
                "{duration}s / {deadline}s"
            );
        }
    }
}
