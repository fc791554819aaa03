//! The discovery script, run by a real shell as Horovod runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use eto_engine::discovery::{DISCOVER_HOSTS_SCRIPT, Host, hostfile};

/// A scratch directory holding the hostfile, the script, a `getent` that resolves the names
/// listed in `dns` (one per line) and the script's `TMPDIR`.
struct Launcher {
    dir: PathBuf,
}

impl Launcher {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("eto-discovery-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        // The script's PATH holds this directory alone: `cat`, and `getent` where a test
        // installs one.
        let cat = ["/usr/bin/cat", "/bin/cat"]
            .into_iter()
            .find(|cat| Path::new(cat).exists())
            .expect("cat");
        std::os::unix::fs::symlink(cat, dir.join("bin/cat")).unwrap();
        let script = DISCOVER_HOSTS_SCRIPT
            .replace("/etc/edl/hostfile", dir.join("hostfile").to_str().unwrap());
        std::fs::write(dir.join("discover_hosts.sh"), script).unwrap();
        std::fs::write(dir.join("dns"), "").unwrap();
        Self { dir }
    }

    /// Installs a `getent hosts NAME` that succeeds for the names in the file `dns`.
    fn with_getent(self) -> Self {
        self.install(
            "getent",
            &format!(
                "#!/bin/sh\n[ \"$1\" = hosts ] || exit 1\n\
                 while read -r name; do [ \"$name\" = \"$2\" ] && echo \"10.88.0.9 $2\" && exit 0; done <{}\n\
                 exit 2\n",
                self.dir.join("dns").display()
            ),
        );
        self
    }

    /// Installs an `ssh` whose login succeeds to the hosts listed in the file `sshd`, one per
    /// line, and that logs each host it is asked for to `logins`. As the real client does, it
    /// reads its standard input unless given `-n`.
    fn with_ssh(self) -> Self {
        self.install(
            "ssh",
            &format!(
                "#!/bin/sh\ncase \" $* \" in *\" -n \"*) ;; *) cat >/dev/null ;; esac\n\
                 host=; last=\n\
                 for arg; do host=$last; last=$arg; done\n\
                 [ \"$last\" = true ] || exit 254\n\
                 echo \"$host\" >>{logins}\n\
                 while read -r name; do [ \"$name\" = \"$host\" ] && exit 0; done <{sshd}\n\
                 exit 255\n",
                logins = self.dir.join("logins").display(),
                sshd = self.dir.join("sshd").display(),
            ),
        );
        self.write("sshd", "");
        self
    }

    /// Installs a `date +%s` that tells the seconds in the file `clock`.
    fn with_clock(self, seconds: u64) -> Self {
        self.install(
            "date",
            &format!(
                "#!/bin/sh\nread -r now <{}\necho \"$now\"\n",
                self.dir.join("clock").display()
            ),
        );
        self.write("clock", &seconds.to_string());
        self
    }

    fn install(&self, name: &str, script: &str) {
        let path = self.dir.join("bin").join(name);
        std::fs::write(&path, script).unwrap();
        let mut permissions = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&path, permissions).unwrap();
    }

    /// The hosts the script tried to log in to, in order.
    fn logins(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("logins"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    fn write(&self, file: &str, text: &str) {
        std::fs::write(self.dir.join(file), text).unwrap();
    }

    /// Runs the script as Horovod does; returns stdout and success.
    fn discover(&self) -> (String, bool) {
        let output = Command::new("/bin/sh")
            .arg(self.dir.join("discover_hosts.sh"))
            .env("PATH", self.dir.join("bin"))
            .env("TMPDIR", &self.dir)
            .output()
            .unwrap();
        (
            String::from_utf8(output.stdout).unwrap(),
            output.status.success(),
        )
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn hosts(names: &[&str]) -> String {
    let hosts: Vec<Host> = names
        .iter()
        .map(|name| Host {
            name: (*name).into(),
            slots: 8,
        })
        .collect();
    hostfile(&hosts)
}

#[test]
fn the_script_succeeds_with_no_hostfile_yet_and_prints_nothing() {
    let launcher = Launcher::new("empty").with_getent();
    assert_eq!(launcher.discover(), (String::new(), true));
}

#[test]
fn the_script_prints_the_hosts_whose_names_resolve() {
    let launcher = Launcher::new("hosts").with_getent();
    launcher.write(
        "hostfile",
        &hosts(&["job-worker-0.job-workers", "job-worker-3.job-workers"]),
    );
    launcher.write(
        "dns",
        "job-worker-0.job-workers\njob-worker-3.job-workers\n",
    );
    let (output, success) = launcher.discover();
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
}

#[test]
fn a_host_whose_name_does_not_resolve_yet_is_left_out_until_it_does() {
    let launcher = Launcher::new("unpublished").with_getent();
    launcher.write(
        "hostfile",
        &hosts(&["job-worker-0.job-workers", "job-worker-4.job-workers"]),
    );
    launcher.write("dns", "job-worker-0.job-workers\n");
    assert_eq!(
        launcher.discover(),
        ("job-worker-0.job-workers:8\n".to_string(), true)
    );

    // Its record is published: the next run prints it.
    launcher.write(
        "dns",
        "job-worker-0.job-workers\njob-worker-4.job-workers\n",
    );
    assert_eq!(
        launcher.discover(),
        (
            "job-worker-0.job-workers:8\njob-worker-4.job-workers:8\n".to_string(),
            true
        )
    );

    // A name that resolved once is not looked up again (a slow DNS does not drop it).
    launcher.write("dns", "");
    assert_eq!(
        launcher.discover().0,
        "job-worker-0.job-workers:8\njob-worker-4.job-workers:8\n"
    );
}

#[test]
fn without_getent_every_host_is_printed() {
    let launcher = Launcher::new("no-getent");
    launcher.write("hostfile", &hosts(&["a.job-workers", "b.job-workers"]));
    assert_eq!(
        launcher.discover(),
        ("a.job-workers:8\nb.job-workers:8\n".to_string(), true)
    );
}

#[test]
fn a_host_whose_ssh_server_does_not_take_the_login_yet_is_left_out_until_it_does() {
    let launcher = Launcher::new("sshd-starting").with_getent().with_ssh();
    let names = [
        "job-worker-0.job-workers",
        "job-worker-3.job-workers",
        "job-worker-4.job-workers",
    ];
    launcher.write("hostfile", &hosts(&names));
    launcher.write("dns", &format!("{}\n", names.join("\n")));
    launcher.write(
        "sshd",
        "job-worker-0.job-workers\njob-worker-4.job-workers\n",
    );
    // worker-3's pod runs and its name resolves, but its sshd still makes its host keys: Horovod
    // would fail to start its process there. The hosts after it are still read.
    assert_eq!(
        launcher.discover(),
        (
            hosts(&["job-worker-0.job-workers", "job-worker-4.job-workers"]),
            true
        )
    );

    launcher.write("sshd", &format!("{}\n", names.join("\n")));
    assert_eq!(launcher.discover(), (hosts(&names), true));

    // Hosts printed once are not logged in to again: a login that fails later (an sshd that
    // stops taking new logins under load) does not drop a host Horovod already trains on.
    let logins = launcher.logins();
    launcher.write("sshd", "");
    assert_eq!(launcher.discover(), (hosts(&names), true));
    assert_eq!(launcher.logins(), logins);
    assert_eq!(
        logins,
        [
            "job-worker-0.job-workers",
            "job-worker-3.job-workers",
            "job-worker-4.job-workers",
            "job-worker-3.job-workers",
        ]
    );
}

#[test]
fn a_host_whose_login_fails_for_30_s_after_its_name_resolved_is_printed_anyway() {
    // Its sshd may listen on a port only `horovodrun --ssh-port` names: Horovod gets to try.
    let launcher = Launcher::new("sshd-elsewhere")
        .with_getent()
        .with_ssh()
        .with_clock(1_000);
    launcher.write("hostfile", &hosts(&["job-worker-5.job-workers"]));
    launcher.write("dns", "");
    assert_eq!(launcher.discover(), (String::new(), true));
    // The wait begins when its name resolves.
    launcher.write("clock", "1100");
    launcher.write("dns", "job-worker-5.job-workers\n");
    assert_eq!(launcher.discover(), (String::new(), true));
    launcher.write("clock", "1129");
    assert_eq!(launcher.discover(), (String::new(), true));
    launcher.write("clock", "1130");
    assert_eq!(
        launcher.discover(),
        (hosts(&["job-worker-5.job-workers"]), true)
    );
    assert_eq!(launcher.logins().len(), 2);
}
