//! What runs as PID 1 in eto's pods, so that a platform's SIGTERM does not end the training
//! before it has checkpointed.
//!
//! An eviction, a drain, a node shutdown or a deletion sends SIGTERM to each container's PID 1
//! at once, before eto can post any notice. A worker's PID 1 is usually `sshd`, which exits on
//! SIGTERM and closes the SSH sessions the training processes run in; a launcher's is
//! `horovodrun`, which stops its workers. Either way the training dies within a second and the
//! pod's grace period goes unused.
//!
//! So eto runs the first container's command under a small POSIX shell, [`SCRIPT`], as PID 1.
//! It runs the command and passes on its exit status. On SIGTERM it does not stop the command:
//! it writes a `Reclaim` notice (reason `Terminating`, deadline the end of the grace period) to
//! `/run/eto/notice` (or `/tmp/eto/notice` where `/run` is not writable), which eto's notice
//! helper reads along with `/etc/edl/notice`, and it waits until the command has no process
//! left under it (a worker's training sessions have ended) or has exited (a launcher's
//! `horovodrun` has finished), at most until 3 seconds before the grace period ends; then it
//! stops the command with SIGTERM. It needs `/bin/sh`, `date`, `sleep` and `/proc`, which
//! every image that runs `sshd` or `horovodrun` has.
//!
//! The grace period is the template's `terminationGracePeriodSeconds`, or, when the template
//! leaves it unset, `elasticPolicy.checkpointGraceSeconds`: the time eto gives a checkpoint
//! anyway. The command is wrapped only where eto knows it: the template's `command`, or the
//! SSH daemon eto runs in a worker without one; a container that runs its image's entry point
//! is left alone. `elasticPolicy.checkpointOnTermination: false` turns this off, and an MPIJob
//! without `elasticPolicy` never has it, as under mpi-operator.

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::set_env;

/// The environment variable that tells [`SCRIPT`] the pod's grace period, in seconds.
pub const GRACE_ENV: &str = "ETO_TERMINATION_GRACE_SECONDS";

/// The name [`SCRIPT`] runs under (`$0`), as `ps` shows it.
const NAME: &str = "eto-pid1";

/// eto's PID 1, for `sh -c`; the command follows as its arguments (see the module
/// documentation).
pub const SCRIPT: &str = r#"# eto's PID 1: runs the command and keeps its training processes through a SIGTERM until
# they have checkpointed and exited, or the grace period ends (eto's documentation: "How a job
# runs", "Graceful termination").
stopping=
trap 'stopping=1' TERM INT HUP
"$@" &
child=$!
wait "$child"
status=$?
if [ -z "$stopping" ] || ! kill -0 "$child" 2>/dev/null; then
  exit "$status"
fi
grace=${ETO_TERMINATION_GRACE_SECONDS:-30}
now=$(date +%s)
stop_at=$((now + grace - 3))
since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
deadline=$(date -u -d "@$((now + grace))" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
for dir in ${ETO_TERMINATION_NOTICE_DIRS:-/run/eto /tmp/eto}; do
  if mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; then
    printf '{"kind":"Reclaim","reason":"Terminating","since":"%s",%s"message":"this pod is being terminated (SIGTERM): save what it must and exit"}\n' \
      "$since" "${deadline:+\"deadline\":\"$deadline\",}" > "$dir/notice.new" &&
      mv "$dir/notice.new" "$dir/notice" && break
  fi
done
echo "eto: SIGTERM: the training processes are told ($dir/notice); waiting up to $((grace - 3))s for them to exit" >&2
idle=0
while kill -0 "$child" 2>/dev/null && [ "$(date +%s)" -lt "$stop_at" ]; do
  busy=0
  for stat in /proc/[0-9]*/stat; do
    { read -r line < "$stat"; } 2>/dev/null || continue
    set -- ${line##*) }
    if [ "$1" != Z ] && [ "$2" = "$child" ]; then busy=1; break; fi
  done
  if [ "$busy" = 0 ]; then idle=$((idle + 1)); else idle=0; fi
  [ "$idle" -ge 2 ] && break
  sleep 1
done
kill -TERM "$child" 2>/dev/null
wait "$child"
"#;

/// Runs the first container of `spec` under [`SCRIPT`] when it has a command (see the module
/// documentation), with the grace period `grace_seconds` unless the template set one.
pub fn hold_on_sigterm(spec: &mut PodSpec, grace_seconds: i64) {
    let grace = *spec
        .termination_grace_period_seconds
        .get_or_insert(grace_seconds);
    let Some(first) = spec.containers.first_mut() else {
        return;
    };
    wrap(first);
    set_env(first, GRACE_ENV, &grace.to_string());
}

fn wrap(container: &mut Container) {
    let Some(command) = container.command.take().filter(|c| !c.is_empty()) else {
        return;
    };
    let wrapper = ["/bin/sh", "-c", SCRIPT, NAME].map(String::from);
    container.command = Some(wrapper.into_iter().chain(command).collect());
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_command_runs_under_the_script_with_the_grace_period() {
        let mut spec: PodSpec = serde_json::from_value(json!({"containers": [
            {"name": "worker", "image": "i", "command": ["/usr/sbin/sshd", "-De"], "args": ["-p", "22"]},
            {"name": "sidecar", "image": "s", "command": ["sleep", "1d"]}]}))
        .unwrap();
        hold_on_sigterm(&mut spec, 300);
        let first = &spec.containers[0];
        assert_eq!(
            first.command.as_deref().unwrap()[..2],
            ["/bin/sh".to_string(), "-c".into()]
        );
        assert_eq!(
            first.command.as_deref().unwrap()[3..],
            ["eto-pid1", "/usr/sbin/sshd", "-De"].map(String::from),
            "the command follows as the script's arguments"
        );
        assert_eq!(first.args, Some(vec!["-p".into(), "22".into()]));
        assert_eq!(spec.termination_grace_period_seconds, Some(300));
        assert_eq!(first.env.as_ref().unwrap()[0].value.as_deref(), Some("300"));
        assert_eq!(
            spec.containers[1].command,
            Some(vec!["sleep".into(), "1d".into()]),
            "only the first container"
        );

        // The template's own grace period stands; an entry point is left alone.
        let mut spec: PodSpec = serde_json::from_value(json!({"terminationGracePeriodSeconds": 45,
            "containers": [{"name": "launcher", "image": "i", "args": ["train"]}]}))
        .unwrap();
        hold_on_sigterm(&mut spec, 300);
        assert_eq!(spec.containers[0].command, None);
        assert_eq!(spec.termination_grace_period_seconds, Some(45));
        assert_eq!(
            spec.containers[0].env.as_ref().unwrap()[0].value.as_deref(),
            Some("45")
        );
    }
}
