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
        let getent = self.dir.join("bin/getent");
        std::fs::write(
            &getent,
            format!(
                "#!/bin/sh\n[ \"$1\" = hosts ] || exit 1\n\
                 while read -r name; do [ \"$name\" = \"$2\" ] && echo \"10.88.0.9 $2\" && exit 0; done <{}\n\
                 exit 2\n",
                self.dir.join("dns").display()
            ),
        )
        .unwrap();
        let mut permissions = std::fs::metadata(&getent).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&getent, permissions).unwrap();
        self
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
