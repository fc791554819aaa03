//! The form of TorchFT training eto documents (`eto_notice.fault_tolerant_ddp`), run on this
//! machine as local processes: replica groups around a real Lighthouse, with the torch and
//! torchft of `ETO_TORCHFT_PYTHON` (a `python3` beside which `torchft_lighthouse` is
//! installed, as a virtualenv has it): `ETO_TORCHFT_PYTHON=<venv>/bin/python3 cargo test -p
//! eto-tests --test integration torchft_local:: -- --ignored --nocapture --test-threads 1`.
//!
//! - A group that dies inside an allreduce (it exits in its communication hook, so that the
//!   others wait on its share of the bucket) costs the other groups nothing in the documented
//!   form: they skip the step and train on. With TorchFT's own `DistributedDataParallel` of
//!   torchft 0.2.0 the same loss ends their training (`assert fut._fut`); the test says which
//!   happened, and holds 0.2.0 to it.
//! - A benchmark prints the step time of the documented form beside TorchFT's
//!   `DistributedDataParallel` and its `PureDistributedDataParallel` (one allreduce per
//!   gradient tensor), on a model of many parameter tensors.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eto_tests::workspace_root;

/// One replica group's training, as TorchFT's examples write it, in the form `FORM` names:
/// `eto` (`eto_notice.fault_tolerant_ddp`), `torchft` (torchft's `DistributedDataParallel`)
/// or `pure` (torchft's `PureDistributedDataParallel`). A model of `LAYERS` linear layers
/// (two parameter tensors each), one thread, steps back to back, `TOTAL_STEPS` of them. The
/// group whose `DIE_AFTER` is set exits (code 9) inside its first allreduce once it trained
/// that many steps in a quorum of `GROUPS`, before it sends anything. Prints each step with
/// the quorum's size and the time.
const GROUP: &str = r#"
import os, sys, time
from datetime import timedelta
import torch
torch.set_num_threads(1)
from torch import nn, optim
from torch.distributed import TCPStore
from torchft import Manager, Optimizer, ProcessGroupGloo
from torchft.ddp import DistributedDataParallel, PureDistributedDataParallel
sys.path.insert(0, os.environ["ETO_HELPER_DIR"])
import eto_notice
group = int(os.environ["GROUP"])
form = os.environ["FORM"]
total = int(os.environ["TOTAL_STEPS"])
die_after = int(os.environ.get("DIE_AFTER", "-1"))
groups = int(os.environ["GROUPS"])
port = int(os.environ["STORE_PORT"])
store = TCPStore("127.0.0.1", port, None, True, timedelta(seconds=60), wait_for_workers=False)
torch.manual_seed(0)
layers = []
for _ in range(int(os.environ["LAYERS"])):
    layers += [nn.Linear(64, 64), nn.ReLU()]
model = nn.Sequential(*layers, nn.Linear(64, 8))
opt = optim.AdamW(model.parameters())
def load_state_dict(state):
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
def state_dict():
    return {"model": model.state_dict(), "optim": opt.state_dict()}
manager = Manager(pg=ProcessGroupGloo(timeout=timedelta(seconds=5)), min_replica_size=1,
    load_state_dict=load_state_dict, state_dict=state_dict, replica_id=f"local_{group}",
    timeout=timedelta(seconds=10), store_addr="127.0.0.1", store_port=port, rank=0,
    world_size=1, lighthouse_addr=os.environ["TORCHFT_LIGHTHOUSE"], hostname="127.0.0.1")
full_steps = 0
if die_after >= 0:
    allreduce = manager.allreduce
    def dying_allreduce(tensor, *args, **kwargs):
        if full_steps >= die_after:
            print(f"dies group={group} step={manager.current_step()} at={time.time():.3f}", flush=True)
            os._exit(9)
        return allreduce(tensor, *args, **kwargs)
    manager.allreduce = dying_allreduce
if form == "eto":
    ddp = eto_notice.fault_tolerant_ddp(manager, model)
elif form == "pure":
    ddp = PureDistributedDataParallel(manager, model)
else:
    ddp = DistributedDataParallel(manager, model)
optimizer = Optimizer(manager, opt)
while manager.current_step() < total:
    optimizer.zero_grad()
    ddp(torch.randn(32, 64)).sum().backward()
    optimizer.step()
    full_steps += manager.num_participants() == groups
    print(f"step group={group} step={manager.current_step()} quorum={manager.num_participants()} at={time.time():.3f}", flush=True)
print(f"done group={group}", flush=True)
manager.shutdown(wait=False)
"#;

/// The `python3` of torch and torchft.
fn python() -> PathBuf {
    let path = std::env::var_os("ETO_TORCHFT_PYTHON")
        .map(PathBuf::from)
        .expect("ETO_TORCHFT_PYTHON names a python3 with torch 2.7 or later and torchft");
    assert!(path.exists(), "{} does not exist", path.display());
    path
}

/// A scratch directory of this module, empty.
fn scratch(case: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("torchft-local")
        .join(case);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A Lighthouse and its groups; every process is killed when it is dropped.
struct Groups {
    dir: PathBuf,
    lighthouse: Child,
    groups: Vec<Child>,
}

impl Groups {
    /// A Lighthouse (a quorum of one group at least, a heartbeat timeout of 1 s, as eto's
    /// example sets it) and `count` groups of the form `form`; `dies` says which group dies in
    /// an allreduce, and after how many steps in a quorum of all.
    fn start(
        dir: &Path,
        form: &str,
        count: usize,
        layers: u32,
        total: u32,
        dies: Option<(usize, u32)>,
    ) -> Groups {
        let python = python();
        let port = eto_tests::free_port();
        let lighthouse = Command::new(python.with_file_name("torchft_lighthouse"))
            .args([
                "--min_replicas",
                "1",
                "--quorum_tick_ms",
                "100",
                "--join_timeout_ms",
                "100",
            ])
            .args([
                "--heartbeat_timeout_ms",
                "1000",
                "--bind",
                &format!("[::]:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("lighthouse.log")).unwrap())
            .spawn()
            .expect("torchft_lighthouse starts");
        std::fs::write(dir.join("group.py"), GROUP).unwrap();
        let groups = (0..count)
            .map(|group| {
                let mut command = Command::new(&python);
                command
                    .arg(dir.join("group.py"))
                    .env("GROUP", group.to_string())
                    .env("GROUPS", count.to_string())
                    .env("FORM", form)
                    .env("TOTAL_STEPS", total.to_string())
                    .env("LAYERS", layers.to_string())
                    .env("STORE_PORT", eto_tests::free_port().to_string())
                    .env("TORCHFT_LIGHTHOUSE", format!("http://127.0.0.1:{port}"))
                    .env("ETO_HELPER_DIR", workspace_root().join("python"))
                    .stdout(std::fs::File::create(dir.join(format!("group-{group}.log"))).unwrap())
                    .stderr(std::fs::File::create(dir.join(format!("group-{group}.err"))).unwrap());
                if let Some((_, after)) = dies.filter(|(dying, _)| *dying == group) {
                    command.env("DIE_AFTER", after.to_string());
                }
                command.spawn().expect("the group's python starts")
            })
            .collect();
        Groups {
            dir: dir.to_path_buf(),
            lighthouse,
            groups,
        }
    }

    /// What group `group` printed.
    fn log(&self, group: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("group-{group}.log"))).unwrap_or_default()
    }

    /// What group `group` wrote to its standard error.
    fn errors(&self, group: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("group-{group}.err"))).unwrap_or_default()
    }

    /// Waits for every group to exit (within `timeout`); their exit codes.
    fn wait(&mut self, timeout: Duration) -> Vec<Option<i32>> {
        let until = Instant::now() + timeout;
        loop {
            let done: Vec<_> = self
                .groups
                .iter_mut()
                .map(|child| child.try_wait().unwrap())
                .collect();
            if done.iter().all(Option::is_some) || Instant::now() > until {
                return done.into_iter().map(|s| s.and_then(|s| s.code())).collect();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        for child in self.groups.iter_mut().chain([&mut self.lighthouse]) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A printed step: its number, the quorum's size and when.
struct Step {
    step: u64,
    quorum: u64,
    at: f64,
}

fn steps(log: &str) -> Vec<Step> {
    log.lines()
        .filter(|line| line.starts_with("step "))
        .filter_map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
            };
            Some(Step {
                step: field("step")?.parse().ok()?,
                quorum: field("quorum")?.parse().ok()?,
                at: field("at")?.parse().ok()?,
            })
        })
        .collect()
}

/// When the dying group said it dies.
fn died_at(log: &str) -> Option<f64> {
    log.lines()
        .find(|line| line.starts_with("dies "))?
        .rsplit_once("at=")?
        .1
        .parse()
        .ok()
}

/// The installed torchft's distribution and version (`torchft 0.2.0`, `torchft-nightly
/// 2026.10.26`).
fn torchft_version() -> String {
    let output = Command::new(python())
        .args(["-c", "import importlib.metadata as m\nfor d in ('torchft-nightly', 'torchft'):\n    try: print(d, m.version(d)); break\n    except m.PackageNotFoundError: pass"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Three groups; group 1 dies inside an allreduce after 20 steps of the three together (the
/// others train 400 steps). What became of groups 0 and 2: whether they finished, and their
/// longest pause between steps after the loss.
fn a_group_dies_in_an_allreduce(form: &str) -> Vec<(bool, Option<f64>, String)> {
    let dir = scratch(&format!("dies-{form}"));
    let mut groups = Groups::start(&dir, form, 3, 2, 400, Some((1, 20)));
    let codes = groups.wait(Duration::from_secs(300));
    let died = died_at(&groups.log(1)).expect("group 1 died in its allreduce");
    [0, 2]
        .into_iter()
        .map(|group| {
            let steps = steps(&groups.log(group));
            assert!(
                steps.iter().any(|s| s.quorum == 3 && s.at < died),
                "group {group} trained with all three before the loss:\n{}",
                groups.log(group)
            );
            let mut last = died;
            let mut longest = None::<f64>;
            for step in steps.iter().filter(|s| s.at > died) {
                longest = Some(longest.unwrap_or(0.0).max(step.at - last));
                last = step.at;
            }
            let finished = codes[group] == Some(0) && groups.log(group).contains("done group=");
            (finished, longest, groups.errors(group))
        })
        .collect()
}

#[test]
#[ignore = "needs torch 2.7 or later and torchft (ETO_TORCHFT_PYTHON)"]
fn a_group_lost_inside_an_allreduce_costs_the_documented_form_nothing() {
    let version = torchft_version();
    for (group, (finished, longest, errors)) in
        [0, 2].into_iter().zip(a_group_dies_in_an_allreduce("eto"))
    {
        println!(
            "{version}, eto_notice.fault_tolerant_ddp: group {group} finished={finished}, longest pause after the loss {longest:?} s"
        );
        assert!(finished, "group {group} trained to the end:\n{errors}");
        assert!(
            longest.is_some_and(|pause| pause < 5.0),
            "group {group} stepped on within seconds: {longest:?}"
        );
    }
    let torchfts = a_group_dies_in_an_allreduce("torchft");
    for (group, (finished, longest, errors)) in [0, 2].into_iter().zip(&torchfts) {
        let asserted = errors.contains("assert fut._fut");
        println!(
            "{version}, torchft.DistributedDataParallel: group {group} finished={finished}, longest pause after the loss {longest:?} s, assert fut._fut: {asserted}"
        );
    }
    if version == "torchft 0.2.0" {
        assert!(
            torchfts
                .iter()
                .all(|(finished, _, errors)| !finished && errors.contains("assert fut._fut")),
            "torchft 0.2.0's own DistributedDataParallel ends the survivors' training here; \
             if it no longer does, the docs' warning about it is out of date"
        );
    }
}

/// Median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[test]
#[ignore = "needs torch 2.7 or later and torchft (ETO_TORCHFT_PYTHON)"]
fn benchmark_the_documented_form_beside_torchfts_ddp() {
    const LAYERS: u32 = 100;
    const STEPS: u32 = 120;
    const WARMUP: u64 = 20;
    let forms = ["torchft", "eto", "pure"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); forms.len()];
    for round in 0..3 {
        // Which form goes first changes from round to round.
        for offset in 0..forms.len() {
            let index = (round + offset) % forms.len();
            let form = forms[index];
            let dir = scratch(&format!("bench-{form}-{round}"));
            let mut groups = Groups::start(&dir, form, 2, LAYERS, STEPS, None);
            groups.wait(Duration::from_secs(600));
            // (The pure form's processes may abort in their exit, after they said so.)
            for group in 0..2 {
                assert!(
                    groups.log(group).contains("done group="),
                    "{form}: group {group} trained to the end: {}",
                    groups.errors(group)
                );
            }
            let steps = steps(&groups.log(0));
            let timed: Vec<&Step> = steps
                .iter()
                .filter(|s| s.step > WARMUP && s.quorum == 2)
                .collect();
            let per_step: Vec<f64> = timed
                .windows(2)
                .map(|w| (w[1].at - w[0].at) * 1000.0)
                .collect();
            assert!(
                per_step.len() > 50,
                "{form}: {} steps timed",
                per_step.len()
            );
            times[index].push(median(per_step));
        }
    }
    println!(
        "{}: two groups, {} parameter tensors, one thread each, median ms per step in 3 rounds:",
        torchft_version(),
        2 * LAYERS + 2
    );
    for (form, times) in forms.iter().zip(&times) {
        let shown: Vec<String> = times.iter().map(|t| format!("{t:.1}")).collect();
        println!("  {form:8} {}", shown.join(" / "));
    }
}
