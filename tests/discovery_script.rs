//! The discovery script, run by a real shell as Horovod runs it.

use std::path::Path;
use std::process::Command;

use eto_engine::discovery::{DISCOVER_HOSTS_SCRIPT, Host, hostfile};

/// Runs the script with its hostfile path pointed into `dir`; returns stdout and success.
fn run(dir: &Path) -> (String, bool) {
    let hostfile_path = dir.join("hostfile");
    let script =
        DISCOVER_HOSTS_SCRIPT.replace("/etc/edl/hostfile", hostfile_path.to_str().unwrap());
    let script_path = dir.join("discover_hosts.sh");
    std::fs::write(&script_path, script).unwrap();
    let output = Command::new("/bin/sh").arg(&script_path).output().unwrap();
    (
        String::from_utf8(output.stdout).unwrap(),
        output.status.success(),
    )
}

#[test]
fn the_script_succeeds_with_no_hostfile_yet_and_prints_nothing() {
    let dir = std::env::temp_dir().join(format!("eto-discovery-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(run(&dir), (String::new(), true));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_script_prints_exactly_the_hostfile() {
    let dir = std::env::temp_dir().join(format!("eto-discovery-hosts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hosts = [
        Host {
            name: "job-worker-0.job-workers".into(),
            slots: 8,
        },
        Host {
            name: "job-worker-3.job-workers".into(),
            slots: 8,
        },
    ];
    std::fs::write(dir.join("hostfile"), hostfile(&hosts)).unwrap();
    let (output, success) = run(&dir);
    assert!(success);
    // Horovod splits each line on ':' into host and slots.
    let parsed: Vec<(&str, u32)> = output
        .lines()
        .map(|line| {
            let (host, slots) = line.split_once(':').unwrap();
            (host, slots.parse().unwrap())
        })
        .collect();
    assert_eq!(
        parsed,
        [
            ("job-worker-0.job-workers", 8),
            ("job-worker-3.job-workers", 8)
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
