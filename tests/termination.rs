//! eto's PID 1 (`eto_engine::builders::termination::SCRIPT`), run by this machine's `/bin/sh` as
//! a pod's first container runs it: the command's exit status passes through; a SIGTERM is
//! written down as a `Reclaim` notice the helper reads, and the command is stopped only once
//! nothing runs under it any more, or when the grace period is nearly over.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use eto_engine::builders::termination::{GRACE_ENV, SCRIPT};
use eto_tests::poll::until;

/// A scratch directory of its own for `case`.
fn scratch(case: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("termination")
        .join(case);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `command` (a shell line) under the script, as eto wraps a container's command, with
/// the grace period `grace` and notices written to `dir`.
fn start(dir: &Path, grace: u32, command: &str) -> Child {
    Command::new("/bin/sh")
        .args(["-c", SCRIPT, "eto-pid1", "/bin/sh", "-c", command])
        .env(GRACE_ENV, grace.to_string())
        .env("ETO_TERMINATION_NOTICE_DIRS", dir)
        .current_dir(dir)
        .spawn()
        .unwrap()
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The pid the command wrote to `file` in `dir`, once it has.
async fn pid_in(dir: &Path, file: &str) -> u32 {
    until(
        &format!("{file} is written"),
        Duration::from_secs(10),
        async || {
            std::fs::read_to_string(dir.join(file))
                .ok()?
                .trim()
                .parse()
                .ok()
        },
    )
    .await
}

async fn exits(child: &mut Child, within: Duration) -> ExitStatus {
    until("the wrapper exits", within, async || {
        child.try_wait().unwrap()
    })
    .await
}

#[tokio::test]
async fn the_commands_exit_status_passes_through() {
    let dir = scratch("status");
    let mut child = start(&dir, 30, "exit 7");
    assert_eq!(
        exits(&mut child, Duration::from_secs(10)).await.code(),
        Some(7)
    );
    assert!(!dir.join("notice").exists(), "no notice without a SIGTERM");
}

#[tokio::test]
async fn a_sigterm_tells_the_training_and_waits_until_it_has_exited() {
    let dir = scratch("waits");
    // Like sshd: a daemon that stays, with a training session under it until the test ends it.
    let mut child = start(
        &dir,
        60,
        "sleep 1000 & echo $! > training.pid; exec sleep 100000",
    );
    let training = pid_in(&dir, "training.pid").await;
    signal(child.id(), "TERM");
    let notice = until(
        "the notice is written",
        Duration::from_secs(10),
        async || std::fs::read_to_string(dir.join("notice")).ok(),
    )
    .await;
    let notice: serde_json::Value = serde_json::from_str(&notice).unwrap();
    assert_eq!(notice["kind"], "Reclaim");
    assert_eq!(notice["reason"], "Terminating");
    let since = notice["since"]
        .as_str()
        .unwrap()
        .parse::<jiff::Timestamp>()
        .unwrap();
    let deadline = notice["deadline"]
        .as_str()
        .unwrap()
        .parse::<jiff::Timestamp>()
        .unwrap();
    assert_eq!(
        deadline.duration_since(since),
        jiff::SignedDuration::from_secs(60)
    );
    // The helper training code calls reads it as a notice for this pod.
    let helper = Command::new("python3")
        .args([
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import eto_notice; print(eto_notice.check_alive(), eto_notice.notice()['reason'])",
        ])
        .arg(eto_tests::workspace_root().join("python"))
        .env("ETO_NOTICE_FILE", dir.join("no-eto-notice"))
        .env("ETO_TERMINATION_NOTICE_FILE", dir.join("notice"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&helper.stdout).trim(),
        "False Terminating"
    );

    // While the training runs, the command is not stopped.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "still waiting for the training"
    );
    // The training saved and exited: the command is stopped within a few seconds.
    let exited = Instant::now();
    signal(training, "KILL");
    exits(&mut child, Duration::from_secs(10)).await;
    println!(
        "the wrapper stopped {:?} after the training exited",
        exited.elapsed()
    );
}

#[tokio::test]
async fn the_grace_period_bounds_the_wait() {
    let dir = scratch("bounded");
    let mut child = start(
        &dir,
        5,
        "sleep 1000 & echo $! > training.pid; exec sleep 100000",
    );
    let training = pid_in(&dir, "training.pid").await;
    let sent = Instant::now();
    signal(child.id(), "TERM");
    exits(&mut child, Duration::from_secs(10)).await;
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_secs(1),
        "it waited for the training ({waited:?})"
    );
    println!("with a 5 s grace period, the wrapper stopped the command after {waited:?}");
    let _ = Command::new("kill")
        .args(["-KILL", &training.to_string()])
        .status();
}
