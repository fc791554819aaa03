//! What the launcher's host discovery shows: Horovod's `host:slots` hostfile, the DeepSpeed
//! hostfile and the discovery script.
//!
//! # How the launcher sees changes within seconds
//! The launcher mounts a projected volume at `/etc/edl`: `discover_hosts.sh` comes from the
//! job's ConfigMap, and `hostfile` from the launcher pod's own annotation
//! [`eto_api::well_known::HOSTFILE_ANNOTATION`] through the downward API. When the hosts
//! change, eto rewrites that annotation. An update of the pod object makes the kubelet sync
//! the pod at once, and a sync rewrites the downward-API files from the pod object it just
//! received, atomically. The new hostfile therefore travels in the same update that makes
//! the kubelet act: there is no second cache (as with a ConfigMap volume, which the kubelet
//! otherwise refreshes only on its periodic sync, a minute or more) and no race between the
//! two. eto never needs `pods/exec`.
//!
//! Limits: the delay is the kubelet's reaction to a pod update (typically well under a
//! second; under heavy kubelet load it can be longer, and the periodic sync still corrects
//! it); pod annotations are limited to 256 KiB in total, about 5,000 workers.

use std::fmt::Write;

use eto_api::mpi_job::MpiImplementation;

/// A discovery script that prints the `host:slots` lines of `$hostfile` on which Horovod can
/// start a process (see [`DISCOVER_HOSTS_SCRIPT`]).
macro_rules! discovery_script {
    ($hostfile:literal) => {
        concat!(
            "#!/bin/sh
# Prints the workers that are ready for training, one host:slots line each, from the hostfile
# eto keeps current. A new worker is left out until Horovod can start a process on it: until
# its name resolves (its DNS record follows its pod by a moment) and its SSH server takes the
# launcher's login (sshd starts after the pod runs, once its host keys are made). A host whose
# login still fails 30 s after its name resolved is printed anyway (its SSH port may be one
# only horovodrun's options name). Hosts printed once are remembered (eto never reuses a
# worker's name). Without getent or ssh that check is left out. Stays cheap and always
# succeeds.
hostfile=",
            $hostfile,
            "
[ -r \"$hostfile\" ] || exit 0
resolved=${TMPDIR:-/tmp}/eto-resolved-hosts
waiting=${TMPDIR:-/tmp}/eto-waiting-hosts
known=$(cat \"$resolved\" 2>/dev/null)
check=
command -v getent >/dev/null 2>&1 && check=1
login=
command -v ssh >/dev/null 2>&1 && login=1
now=$(date +%s 2>/dev/null)
case $now in ''|*[!0-9]*) now=0 ;; esac
while IFS= read -r line || [ -n \"$line\" ]; do
  host=${line%%:*}
  [ -n \"$host\" ] || continue
  case \"
$known
\" in
    *\"
$host
\"*) ;;
    *)
      if [ -n \"$check\" ]; then
        getent hosts \"$host\" >/dev/null 2>&1 || continue
      fi
      if [ -n \"$login\" ]; then
        since=
        if [ -r \"$waiting\" ]; then
          while read -r name at; do
            [ \"$name\" = \"$host\" ] && since=$at && break
          done <\"$waiting\"
        fi
        case $since in *[!0-9]*) since= ;; esac
        [ -n \"$since\" ] || { since=$now; echo \"$host $now\" >>\"$waiting\" 2>/dev/null; }
        if [ $((now - since)) -lt 30 ] &&
          ! ssh -n -o BatchMode=yes -o ConnectTimeout=2 -o StrictHostKeyChecking=no \\
            -o UserKnownHostsFile=/dev/null \"$host\" true >/dev/null 2>&1; then
          continue
        fi
      fi
      [ -n \"$check$login\" ] && echo \"$host\" >>\"$resolved\" 2>/dev/null
      ;;
  esac
  echo \"$line\"
done <\"$hostfile\"
exit 0
"
        )
    };
}

/// The discovery script Horovod runs (`--host-discovery-script /etc/edl/discover_hosts.sh`).
/// Horovod runs it every second and stops the job if its first run fails, so it stays cheap
/// and always succeeds. It prints the hostfile's lines on which Horovod can start a process.
/// A worker is ready before then: its DNS record is published a moment later (the
/// EndpointSlice controller and the cluster's DNS follow the pod, longer on a busy control
/// plane), and its SSH server listens only once its host keys are made. Horovod that adds a
/// host it cannot reach waits for the process it could not start until its rendezvous times
/// out (30 s), and then takes that for a failure of every rank: the launcher fails. So a host
/// is printed once its name resolves and an SSH login to it (`ssh HOST true`, with the client,
/// configuration and options Horovod uses) succeeds, or once it has waited 30 s for that
/// login, in case its SSH port is one only `horovodrun --ssh-port` names.
pub const DISCOVER_HOSTS_SCRIPT: &str = discovery_script!("/etc/edl/hostfile");

/// The discovery script of an MPIJob's launcher (`/etc/mpi/discover_hosts.sh`, where
/// mpi-operator's is). Unlike mpi-operator's it prints `host:slots`, which Horovod prefers to
/// `--slots-per-host`, and it follows the workers within seconds; like
/// [`DISCOVER_HOSTS_SCRIPT`] it leaves out hosts Horovod cannot reach yet.
pub const MPI_DISCOVER_HOSTS_SCRIPT: &str = discovery_script!("/etc/mpi/ready_hosts");

/// A host of the discovery data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Resolvable host name.
    pub name: String,
    /// Processes it runs.
    pub slots: u32,
}

/// Horovod's hostfile: one `host:slots` line per host, in the given order.
pub fn hostfile(hosts: &[Host]) -> String {
    hosts.iter().fold(String::new(), |mut out, host| {
        let _ = writeln!(out, "{}:{}", host.name, host.slots);
        out
    })
}

/// DeepSpeed's hostfile: one `host slots=n` line per host.
pub fn deepspeed_hostfile(hosts: &[Host]) -> String {
    hosts.iter().fold(String::new(), |mut out, host| {
        let _ = writeln!(out, "{} slots={}", host.name, host.slots);
        out
    })
}

/// An MPI hostfile in `implementation`'s format, as mpirun reads it: `host slots=n` for Open
/// MPI, `host:n` for Intel MPI and MPICH.
pub fn mpi_hostfile(hosts: &[Host], implementation: MpiImplementation) -> String {
    match implementation {
        MpiImplementation::OpenMpi => deepspeed_hostfile(hosts),
        MpiImplementation::Intel | MpiImplementation::Mpich => hostfile(hosts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostfiles_list_hosts_in_order() {
        let hosts = [
            Host {
                name: "a.svc".into(),
                slots: 8,
            },
            Host {
                name: "b.svc".into(),
                slots: 8,
            },
        ];
        assert_eq!(hostfile(&hosts), "a.svc:8\nb.svc:8\n");
        assert_eq!(deepspeed_hostfile(&hosts), "a.svc slots=8\nb.svc slots=8\n");
        assert_eq!(hostfile(&[]), "");
    }

    #[test]
    fn mpi_hostfiles_follow_the_implementation() {
        let hosts = [Host {
            name: "pi-worker-0.pi.default.svc".into(),
            slots: 2,
        }];
        assert_eq!(
            mpi_hostfile(&hosts, MpiImplementation::OpenMpi),
            "pi-worker-0.pi.default.svc slots=2\n"
        );
        for implementation in [MpiImplementation::Intel, MpiImplementation::Mpich] {
            assert_eq!(
                mpi_hostfile(&hosts, implementation),
                "pi-worker-0.pi.default.svc:2\n"
            );
        }
        assert_eq!(
            MPI_DISCOVER_HOSTS_SCRIPT.replace("/etc/mpi/ready_hosts", "/etc/edl/hostfile"),
            DISCOVER_HOSTS_SCRIPT
        );
    }

    #[test]
    fn the_script_reads_the_hostfile_and_always_succeeds() {
        // What it prints is run by a real shell in tests/discovery_script.rs.
        assert!(DISCOVER_HOSTS_SCRIPT.starts_with("#!/bin/sh\n"));
        assert!(DISCOVER_HOSTS_SCRIPT.contains("\nhostfile=/etc/edl/hostfile\n"));
        assert!(DISCOVER_HOSTS_SCRIPT.ends_with("\nexit 0\n"));
    }
}
