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
///
/// A command that starts torchrun's agent itself (`torchrun ...`, or
/// `python -m torch.distributed.run ...`) starts the agent before the wait instead: the
/// interpreter torchrun runs in (the `#!` line of the `torchrun` on the `PATH`) runs
/// [`agent_behind_gate`], which imports torchrun (and torch with it: seconds of a Python
/// start) while the gate is shut, and hands torchrun the command's arguments once it opens.
/// A Worker that waits at its gate while its group saves or trains on then joins the group
/// the moment the gate opens, not an interpreter's start later. Any other command (a shell
/// around torchrun, for one) waits as it is.
fn gate_script() -> String {
    let agent = agent_behind_gate();
    format!(
        "# eto: start with the workers created with this one (eto's docs/pytorchjob.md)\n\
         agent=''\n\
         case \"${{0##*/}}\" in\n\
         torchrun) agent=$(sed -n '1s/^#![[:space:]]*//p' \"$(command -v \"$0\")\" 2>/dev/null) ;;\n\
         python*) [ \"$1\" = -m ] && [ \"$2\" = torch.distributed.run ] && agent=$(command -v \"$0\") ;;\n\
         esac\n\
         case \"$agent\" in *python*) exec $agent -c '{agent}' \"$0\" \"$@\" ;; esac\n\
         waited=0\n\
         while [ ! -s /etc/edl/{START_FILE} ] && [ \"$waited\" -lt {GATE_LIMIT_SECONDS} ]; do sleep 1; waited=$((waited + 1)); done\n\
         exec \"$0\" \"$@\""
    )
}

/// The Python program the gate runs for a command that starts torchrun (its words as
/// `sys.argv[1:]`): imports torchrun's `main`, waits as the gate does (polling every 0.1 s),
/// then runs `main` with the command's arguments, as the `torchrun` script would. Where the
/// import fails, it runs the command itself once the gate opens, so that its own error shows.
/// The working directory is left off the import path: the agent never imports from it.
fn agent_behind_gate() -> String {
    format!(
        r#"import os, sys, time
if sys.path and sys.path[0] == "":
    del sys.path[0]
command = sys.argv[1:]
try:
    from torch.distributed.run import main
except Exception:
    main = None
deadline = time.monotonic() + {GATE_LIMIT_SECONDS}
while time.monotonic() < deadline:
    try:
        if os.path.getsize("/etc/edl/{START_FILE}") > 0:
            break
    except OSError:
        pass
    time.sleep(0.1)
if main is None:
    os.execvp(command[0], command)
module = command[1:3] == ["-m", "torch.distributed.run"]
sys.argv = ["torchrun"] + command[3 if module else 1:]
sys.exit(main())"#
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
    use std::path::{Path, PathBuf};
    use std::process::Command;

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
        let script = gate_script_reading(&dir, 1);
        std::fs::write(dir.join(START_FILE), GO).unwrap();
        let output = Command::new("/bin/sh")
            .args(["-c", &script, "echo", "started", "with"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "started with\n");
        std::fs::remove_file(dir.join(START_FILE)).unwrap();
        let output = Command::new("/bin/sh")
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

    /// The gate's script reading its files in `dir` instead of `/etc/edl`, shut for at most
    /// `limit` seconds.
    fn gate_script_reading(dir: &Path, limit: u32) -> String {
        gate_script()
            .replace("/etc/edl", dir.to_str().unwrap())
            .replace(&GATE_LIMIT_SECONDS.to_string(), &limit.to_string())
    }

    /// A directory holding `bin/torchrun` (a script that says it ran) and a stand-in
    /// `torch.distributed.run` under `with_torch/` (its import leaves the file `imported`, its
    /// `main` prints the arguments it got) and under `broken_torch/` (its import fails), and
    /// the gate's script reading `start` there, shut for at most `limit` seconds.
    fn stand_in_torchrun(case: &str, limit: u32) -> (PathBuf, String) {
        let dir = std::env::temp_dir().join(format!("eto-agent-{case}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let write = |path: &str, text: &str| {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "bin/torchrun",
            "#!/usr/bin/env python3\nimport sys\nprint(\"the script itself\", sys.argv[1:])\n",
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.join("bin/torchrun"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let imported = dir.join("imported");
        write("with_torch/torch/__init__.py", "");
        write("with_torch/torch/distributed/__init__.py", "");
        write(
            "with_torch/torch/distributed/run.py",
            &format!(
                "import sys\nopen({imported:?}, \"w\").close()\n\
                 def main(args=None):\n    print(\"agent\", sys.argv)\n    return 0\n"
            ),
        );
        write(
            "broken_torch/torch/__init__.py",
            "raise ImportError(\"no torch here\")\n",
        );
        let script = gate_script_reading(&dir, limit);
        (dir, script)
    }

    fn gated(dir: &Path, script: &str, torch: &str, command: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            dir.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut gated = Command::new("/bin/sh");
        gated
            .args(["-c", script])
            .args(command)
            .env("PATH", path)
            .env("PYTHONPATH", dir.join(torch))
            .stdout(std::process::Stdio::piped());
        gated
    }

    fn printed(gated: &mut Command) -> String {
        let output = gated.output().expect("sh runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    #[test]
    fn torchruns_agent_starts_before_the_gate_opens_and_gets_the_command_once_it_does() {
        let (dir, script) = stand_in_torchrun("before", 60);
        let command = ["torchrun", "--nproc-per-node=1", "train.py"];
        let mut waiting = gated(&dir, &script, "with_torch", &command)
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while !dir.join("imported").exists() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "torchrun was imported behind the shut gate"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            waiting.try_wait().unwrap().is_none(),
            "the agent waits for the gate"
        );
        std::fs::write(dir.join(START_FILE), GO).unwrap();
        let output = waiting.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "agent ['torchrun', '--nproc-per-node=1', 'train.py']\n"
        );

        let module = [
            "python3",
            "-m",
            "torch.distributed.run",
            "--standalone",
            "t.py",
        ];
        assert_eq!(
            printed(&mut gated(&dir, &script, "with_torch", &module)),
            "agent ['torchrun', '--standalone', 't.py']\n",
            "python -m torch.distributed.run is torchrun too"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_torchrun_whose_import_fails_runs_as_it_is_once_the_gate_opens_or_its_limit_passed() {
        let (dir, script) = stand_in_torchrun("broken", 1);
        assert_eq!(
            printed(&mut gated(
                &dir,
                &script,
                "broken_torch",
                &["torchrun", "a.py"]
            )),
            "the script itself ['a.py']\n",
            "after the gate's limit, the script itself shows what is wrong"
        );
        std::fs::write(dir.join(START_FILE), GO).unwrap();
        let open = std::time::Instant::now();
        assert_eq!(
            printed(&mut gated(
                &dir,
                &script,
                "broken_torch",
                &["torchrun", "b.py"]
            )),
            "the script itself ['b.py']\n"
        );
        assert!(
            open.elapsed() < std::time::Duration::from_secs(1),
            "an open gate does not wait its limit"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
