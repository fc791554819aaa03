//! Workers that join a running group of an elastic PyTorchJob whose rendezvous eto hosts start
//! their training together: one re-formed group for a batch, not one per worker.
//!
//! torchrun stops every worker and re-forms the group each time an agent arrives at the
//! rendezvous, unless it arrives within the group's last call. Workers created together (a
//! scale-out of k, k replacements after a node's loss) rarely start together: one is
//! scheduled, pulled and started seconds or minutes after another. So a worker created into a
//! running group runs its command behind a gate ([`gate_command`]): it waits until eto
//! writes `go` to its file `/etc/edl/start` (the pod's annotation [`START_ANNOTATION`]
//! through the downward API), and eto opens the gates of the waiting workers ([`opened`]):
//!
//! - all at once, when every waiting worker's pod runs (each is at its gate: the batch is
//!   ready);
//! - one by one, for a worker that has waited [`BATCH_WAIT`] since its creation and runs, so
//!   that a pod that stays pending (no capacity, a slow pull) holds the others no longer.
//!
//! Workers of a run's first group start at once (their gate is open from their creation):
//! torchrun's rendezvous gathers them itself. The gate bounds itself too: a worker whose
//! gate stays shut [`GATE_LIMIT_SECONDS`] (eto away) starts anyway. Only a container whose
//! `command` the template writes is gated; one that runs its image's entry point starts at
//! once, as nothing can wrap it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, Pod};

use crate::pods;

/// The annotation whose value `go` opens a worker's gate.
pub use eto_api::well_known::START_ANNOTATION;

/// The value that opens the gate.
pub const GO: &str = "go";

/// How long a waiting worker that runs waits for the others of its batch.
pub const BATCH_WAIT: Duration = Duration::from_secs(30);

/// How long the gate waits for eto at most.
pub const GATE_LIMIT_SECONDS: u32 = 120;

/// The file the gate reads, through the job's notice volume.
pub const START_FILE: &str = "start";

/// The command around a container's own: waits for `/etc/edl/start` to hold something, at
/// most [`GATE_LIMIT_SECONDS`], then runs the container's command (its first word as `$0`,
/// the rest and the container's `args` as `"$@"`).
fn gate_script() -> String {
    format!(
        "# eto: start with the workers created with this one (eto's docs/pytorchjob.md)\n\
         waited=0\n\
         while [ ! -s /etc/edl/{START_FILE} ] && [ \"$waited\" -lt {GATE_LIMIT_SECONDS} ]; do sleep 1; waited=$((waited + 1)); done\n\
         exec \"$0\" \"$@\""
    )
}

/// The file the gate reads, [`START_FILE`] beside the notice, holding the pod's annotation
/// [`START_ANNOTATION`].
pub fn start_file() -> DownwardAPIVolumeFile {
    crate::downward_api::annotation_file(START_FILE, START_ANNOTATION, 0o444)
}

/// Puts `container`'s command behind the gate, if the container names its command.
pub fn gate_command(container: &mut Container) {
    let Some(command) = container.command.take().filter(|c| !c.is_empty()) else {
        return;
    };
    let mut gated = vec!["/bin/sh".to_string(), "-c".to_string(), gate_script()];
    gated.extend(command);
    container.command = Some(gated);
}

/// Whether `pod`'s gate is open.
pub fn is_open(pod: &Pod) -> bool {
    pods::annotation(pod, START_ANNOTATION) == Some(GO)
}

/// Whether `pod` waits at its shut gate: its container runs the gate, the training has not
/// started, and it is not going.
pub fn waits_at_gate(pod: &Pod) -> bool {
    pods::phase(pod) == "Running" && !is_open(pod) && !pods::is_terminating(pod)
}

/// The gates to open now among the `waiting` workers (live worker pods of the run whose gate
/// is shut), and when to look again if some stay shut; see the module documentation.
pub fn opened<'p>(
    waiting: &[&'p Pod],
    now: jiff::Timestamp,
) -> (Vec<&'p Pod>, Option<jiff::Timestamp>) {
    let runs = |pod: &&Pod| pods::phase(pod) == "Running";
    if waiting.iter().all(runs) {
        return (waiting.to_vec(), None);
    }
    let waited_enough = |pod: &&Pod| {
        pod.metadata
            .creation_timestamp
            .as_ref()
            .is_none_or(|created| crate::time::after(created.0, BATCH_WAIT) <= now)
    };
    let opened = waiting
        .iter()
        .copied()
        .filter(|pod| runs(pod) && waited_enough(pod))
        .collect();
    let next = waiting
        .iter()
        .filter(|pod| !waited_enough(pod))
        .filter_map(|pod| pod.metadata.creation_timestamp.as_ref())
        .map(|created| crate::time::after(created.0, BATCH_WAIT))
        .min();
    (opened, next)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn pod(name: &str, phase: &str, created: i64) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": at(created).to_string()},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    fn names(pods: &[&Pod]) -> Vec<String> {
        pods.iter()
            .filter_map(|pod| pod.metadata.name.clone())
            .collect()
    }

    #[test]
    fn a_batch_starts_together_once_every_worker_of_it_runs() {
        let (a, b) = (pod("w-3", "Running", 0), pod("w-4", "Pending", 0));
        let (opened_now, next) = opened(&[&a, &b], at(5));
        assert!(opened_now.is_empty(), "w-4 is not at its gate yet");
        assert_eq!(next, Some(at(30)));
        let b = pod("w-4", "Running", 0);
        let (opened_now, next) = opened(&[&a, &b], at(6));
        assert_eq!(names(&opened_now), ["w-3", "w-4"]);
        assert_eq!(next, None);
    }

    #[test]
    fn a_worker_that_stays_pending_holds_the_others_no_longer_than_the_batch_wait() {
        let (a, b) = (pod("w-3", "Running", 0), pod("w-4", "Pending", 0));
        let (opened_now, next) = opened(&[&a, &b], at(30));
        assert_eq!(names(&opened_now), ["w-3"]);
        assert_eq!(next, None, "w-4 opens as soon as it runs");
        let late = pod("w-5", "Pending", 20);
        let (opened_now, next) = opened(&[&a, &late], at(30));
        assert_eq!(names(&opened_now), ["w-3"]);
        assert_eq!(next, Some(at(50)));
    }

    #[test]
    fn the_gate_runs_the_containers_own_command_and_args_once_open() {
        let mut container: Container = serde_json::from_value(json!({
            "name": "pytorch", "command": ["torchrun", "--nproc-per-node=1"], "args": ["train.py"]
        }))
        .unwrap();
        gate_command(&mut container);
        let command = container.command.unwrap();
        assert_eq!(&command[..2], ["/bin/sh", "-c"]);
        assert!(command[2].contains("/etc/edl/start"), "{}", command[2]);
        assert_eq!(&command[3..], ["torchrun", "--nproc-per-node=1"]);
        assert_eq!(container.args.unwrap(), ["train.py"]);

        let mut entry_point: Container =
            serde_json::from_value(json!({"name": "pytorch", "args": ["train.py"]})).unwrap();
        gate_command(&mut entry_point);
        assert_eq!(entry_point.command, None, "nothing to wrap");
    }

    #[test]
    fn the_gate_opens_on_go_and_bounds_itself_in_a_real_shell() {
        let dir = std::env::temp_dir().join(format!("eto-gate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = gate_script()
            .replace("/etc/edl", dir.to_str().unwrap())
            .replace(&GATE_LIMIT_SECONDS.to_string(), "1");
        std::fs::write(dir.join(START_FILE), GO).unwrap();
        let output = std::process::Command::new("/bin/sh")
            .args(["-c", &script, "echo", "started", "with"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "started with\n");
        std::fs::remove_file(dir.join(START_FILE)).unwrap();
        let output = std::process::Command::new("/bin/sh")
            .args(["-c", &script, "echo", "anyway"])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "anyway\n",
            "after its limit"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
