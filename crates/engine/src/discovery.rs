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

/// A discovery script that prints the `host:slots` lines of `$hostfile` whose host name
/// resolves (see [`DISCOVER_HOSTS_SCRIPT`]).
macro_rules! discovery_script {
    ($hostfile:literal) => {
        concat!(
            "#!/bin/sh
# Prints the workers that are ready for training, one host:slots line each, from the hostfile
# eto keeps current. A worker's DNS name is published a moment after its pod starts: a host
# whose name does not resolve yet is left out until it does, so that Horovod never starts a
# process on a host it cannot reach. Names that resolved once are remembered (eto never reuses
# a worker's name). Without getent every host is printed. Stays cheap and always succeeds.
hostfile=",
            $hostfile,
            "
[ -r \"$hostfile\" ] || exit 0
resolved=${TMPDIR:-/tmp}/eto-resolved-hosts
known=$(cat \"$resolved\" 2>/dev/null)
check=
command -v getent >/dev/null 2>&1 && check=1
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
        echo \"$host\" >>\"$resolved\" 2>/dev/null
      fi
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
/// and always succeeds. It prints the hostfile's lines whose host name resolves: a worker is
/// ready before its DNS record is published (the EndpointSlice controller and the cluster's
/// DNS follow the pod by a moment, longer on a busy control plane), and a host Horovod cannot
/// resolve makes its SSH fail, which real Horovod can take for a failure of every rank.
pub const DISCOVER_HOSTS_SCRIPT: &str = discovery_script!("/etc/edl/hostfile");

/// The discovery script of an MPIJob's launcher (`/etc/mpi/discover_hosts.sh`, where
/// mpi-operator's is). Unlike mpi-operator's it prints `host:slots`, which Horovod prefers to
/// `--slots-per-host`, and it follows the workers within seconds; like
/// [`DISCOVER_HOSTS_SCRIPT`] it leaves out hosts whose name does not resolve yet.
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
