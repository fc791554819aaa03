//! What eto puts into a PyTorchJob's pods, run on this machine under a real torchrun of
//! PyTorch 2.12 or later (the harness's pods have Debian's 1.13):
//! `ETO_TORCHRUN=<path to torchrun> cargo test -p eto-tests --test integration torchrun_local::
//! -- --ignored`. Its `python3` (beside it) serves the store.
//!
//! - The rendezvous store's program, from the store pod eto builds, serves two agents started
//!   with the environment eto gives Workers (only the endpoint points at this machine): they
//!   form one group as its clients, and the store's report shows their rendezvous. A
//!   progress report of a restarted process is kept with where the stretch before it ended.
//!   An agent left waiting beside a round that formed with the most agents it takes becomes
//!   a spare, so that the group does not restart for it; agents in the wait list join a
//!   forming round at once, the one left over a spare. Once a round formed, a forming round
//!   waits for an expected agent never at the rendezvous at most `join_wait`, for a member
//!   away for a moment as long as its last call runs, and not for one whose heartbeats
//!   stopped, even when torchrun's agents took it out before the store did.
//! - torchrun's SIGTERM path: an eviction, a drain or a node shutdown sends SIGTERM to
//!   torchrun, which forwards it to the training processes and kills them after its shutdown
//!   timeout. eto gives an elastic Worker `terminationGracePeriodSeconds =
//!   checkpointGraceSeconds` and that timeout a little less, so that training code saving on
//!   SIGTERM has the time: with the environment eto puts into a Worker, a save that takes 6 s
//!   finishes, and the same save is cut with a shorter timeout.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use eto_api::PyTorchJob;
use eto_engine::job::JobContext;
use eto_engine::job::JobRef;
use eto_engine::kind::pytorch_job::objects::{SHUTDOWN_TIMEOUT_ENV, store_pod};
use eto_tests::poll::until;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// How long the training code takes to save after SIGTERM.
const SAVE_SECONDS: u64 = 6;

/// Training code that saves on SIGTERM, taking [`SAVE_SECONDS`], and says when it is ready.
const SAVES_ON_SIGTERM: &str = r#"
import os, signal, sys, time
def save(signum, frame):
    time.sleep(float(os.environ["SAVE_SECONDS"]))
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
open(os.environ["READY_FILE"], "w").close()
while True:
    time.sleep(0.1)
"#;

/// Writes, as torchrun's c10d backend does, a rendezvous whose round 5 formed with
/// `ddp-worker-0` to `-2` and where `ddp-worker-3` waits for the next round; `argv`: the
/// store's port and the run's id.
const A_FULL_ROUND_AND_ONE_WAITING: &str = r#"
import base64, pickle, sys
from datetime import datetime, timedelta, timezone
from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState
port, run_id = int(sys.argv[1]), sys.argv[2]
state = _RendezvousState()
state.round, state.complete = 5, True
nodes = [_NodeDesc(f"ddp-worker-{index}", 100 + index, 0) for index in range(4)]
for rank, node in enumerate(nodes[:3]):
    state.participants[node] = rank
state.wait_list.add(nodes[3])
for node in nodes:
    state.last_heartbeats[node] = datetime.now(timezone.utc)
store = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10))
store.set("torch.rendezvous." + run_id, base64.b64encode(pickle.dumps(state)))
"#;

/// Writes, as torchrun's c10d backend does, a rendezvous whose round 6 forms: `ddp-worker-0`
/// and `-1` joined it and its last call runs, and `ddp-worker-2` and `-3` wait in the wait
/// list, each until its next look; `argv`: the store's port and the run's id.
const A_FORMING_ROUND_AND_TWO_WAITING: &str = r#"
import base64, pickle, sys
from datetime import datetime, timedelta, timezone
from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState
port, run_id = int(sys.argv[1]), sys.argv[2]
state = _RendezvousState()
state.round, state.complete = 6, False
state.deadline = datetime.now(timezone.utc) + timedelta(seconds=30)
nodes = [_NodeDesc(f"ddp-worker-{index}", 100 + index, 0) for index in range(4)]
for node in nodes[:2]:
    state.participants[node] = 0
state.wait_list.update(nodes[2:])
for node in nodes:
    state.last_heartbeats[node] = datetime.now(timezone.utc)
store = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10))
store.set("torch.rendezvous." + run_id, base64.b64encode(pickle.dumps(state)))
"#;

/// Training code that joins the group and all-reduces once.
const ALL_REDUCE: &str = r#"
import torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([1.0])
dist.all_reduce(total)
print(f"rank={dist.get_rank()} world={dist.get_world_size()} sum={total.item():.0f}", flush=True)
dist.destroy_process_group()
"#;

fn torchrun() -> PathBuf {
    let path = std::env::var_os("ETO_TORCHRUN")
        .map(PathBuf::from)
        .expect("ETO_TORCHRUN names a torchrun of PyTorch 2.12 or later");
    assert!(path.exists(), "{} does not exist", path.display());
    path
}

/// Where the scratch directory of `case` is.
fn scratch_path(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("torchrun-local")
        .join(case)
}

/// The scratch directory of `case`, empty.
fn scratch(case: &str) -> PathBuf {
    let dir = scratch_path(case);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An elastic PyTorchJob whose rendezvous eto hosts, of one or two Workers, with `policy`
/// merged into its `elasticPolicy`.
fn elastic_job(policy: Value) -> PyTorchJob {
    let mut value = json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": "default", "uid": "u-1"},
        "spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 2},
            "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "pytorch", "command": ["torchrun", "train.py"]}
            ]}}}}
        }
    });
    json_patch::merge(&mut value, &json!({"spec": {"elasticPolicy": policy}}));
    serde_json::from_value(value).unwrap()
}

/// The store's pod and Worker 0 as eto builds them for `job`.
fn pods_of(job: &PyTorchJob) -> (Pod, Pod) {
    let spec = JobRef::new(job).validate().unwrap();
    let built = JobContext {
        job_ref: JobRef::new(job),
        spec: &spec,
        run: 0,
        notice: None,
        gang: None,
    };
    let store = store_pod(built, &[]).expect("eto hosts the rendezvous");
    (store, built.worker_pod(0, &[]).unwrap())
}

/// The environment of the first container of `pod`, as `(name, value)`.
fn env_of(pod: &Pod) -> Vec<(String, String)> {
    pod.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .filter_map(|var| Some((var.name.clone(), var.value.clone()?)))
        .collect()
}

/// A port nothing listens on, with the one after it free too (the store's report).
fn free_port_pair() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port < u16::MAX && TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

/// The answer of the store's report to `GET /report` on `port`, if it answers.
fn report(port: u16) -> Option<Value> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /report HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    serde_json::from_str(answer.split("\r\n\r\n").nth(1)?).ok()
}

/// eto's store program running on this machine, stopped when dropped (a failed test's too,
/// so that none holds its ports after it).
struct RunningStore(Child);

impl Drop for RunningStore {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the store's command as `store` runs it, with torchrun's python3 first on the PATH,
/// once it answers its report on `port + 1`; what it prints goes to `dir`.
async fn start_store(store: &Pod, dir: &Path, port: u16) -> RunningStore {
    let command = store.spec.as_ref().unwrap().containers[0]
        .command
        .clone()
        .unwrap();
    let bin = torchrun().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let store = Command::new(&command[0])
        .args(&command[1..])
        .env("PATH", &path)
        .stdout(std::fs::File::create(dir.join("store.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("store.err")).unwrap())
        .spawn()
        .expect("the store starts");
    let store = RunningStore(store);
    until("the store answers", Duration::from_secs(60), async || {
        report(port + 1)
    })
    .await;
    store
}

/// Posts `body` to `path` of the store's report on `port`; returns its status line.
fn post(port: u16, path: &str, body: &Value) -> String {
    let body = body.to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

/// Runs `script` (written to `dir`) under torchrun with `env`; its output goes to `log`.
fn start_torchrun(dir: &Path, script: &str, env: &[(String, String)], log: &str) -> Child {
    std::fs::write(dir.join("train.py"), script).unwrap();
    Command::new(torchrun())
        .arg("train.py")
        .current_dir(dir)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdout(std::fs::File::create(dir.join(log)).unwrap())
        .stderr(std::fs::File::create(dir.join(format!("{log}.err"))).unwrap())
        .spawn()
        .expect("torchrun starts")
}

#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn the_store_eto_runs_serves_torchrun_agents_as_its_clients_and_reports_their_group() {
    let port = free_port_pair();
    let mut job = elastic_job(json!({"rdzvPort": port}));
    job.spec.nproc_per_node = Some("1".into());
    let (store, worker) = pods_of(&job);
    let dir = scratch("store");
    let _store = start_store(&store, &dir, port).await;
    // Each agent with a Worker's environment, its store reached on this machine.
    let mut env = env_of(&worker);
    for (name, value) in &mut env {
        if name == "PET_RDZV_ENDPOINT" {
            *value = format!("127.0.0.1:{port}");
        }
    }
    assert!(
        env.iter()
            .any(|(name, value)| name == "PET_RDZV_CONF" && value.contains("is_host=false")),
        "{env:?}"
    );
    let agents: Vec<Child> = (0..2)
        .map(|agent| {
            let agent_dir = dir.join(format!("agent-{agent}"));
            std::fs::create_dir_all(&agent_dir).unwrap();
            start_torchrun(&agent_dir, ALL_REDUCE, &env, "out")
        })
        .collect();
    for mut agent in agents {
        let status = tokio::task::spawn_blocking(move || agent.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "an agent failed: see {}", dir.display());
    }
    let printed: Vec<String> = (0..2)
        .map(|agent| std::fs::read_to_string(dir.join(format!("agent-{agent}/out"))).unwrap())
        .collect();
    println!("agents printed: {printed:?}");
    for out in &printed {
        assert!(out.contains("world=2 sum=2"), "{out}");
    }
    // A group that finished closes its rendezvous, and the store, which looks every second,
    // says for how long.
    let rendezvous = until(
        "the store has seen it closed",
        Duration::from_secs(10),
        async || {
            let rendezvous = report(port + 1)?["rendezvous"].clone();
            (rendezvous["closed_for"].as_f64()? >= 1.0).then_some(rendezvous)
        },
    )
    .await;
    println!("the store reports: {rendezvous}");
    assert_eq!(rendezvous["participants"], 2, "{rendezvous}");
    assert_eq!(rendezvous["round"], 0, "one rendezvous");
    assert_eq!(rendezvous["closed"], true, "{rendezvous}");
    let members = rendezvous["members"]
        .as_array()
        .expect("the round's members");
    assert_eq!(members.len(), 2, "{rendezvous}");
    assert!(
        members.iter().all(
            |member| member["host"].as_str().is_some_and(|host| !host.is_empty())
                && member["heartbeat_age"].as_f64().is_some()
        ),
        "each named, with the age of its last heartbeat: {rendezvous}"
    );
}

#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn the_store_tells_where_the_stretch_before_a_restarted_process_ended() {
    let port = free_port_pair();
    let (store, _) = pods_of(&elastic_job(json!({"rdzvPort": port})));
    let _store = start_store(&store, &scratch("store-progress"), port).await;
    let before = stretch(40, 40, 1, 1);
    let progress = || report(port + 1).unwrap()["progress"].clone();
    assert!(post(port + 1, "/progress", &before).contains(" 200 "));
    assert_eq!(
        progress().get("ended"),
        None,
        "the first stretch follows none"
    );
    // torchrun restarted the processes: the new one starts a stretch of its own, unaware.
    let restarted = stretch(31, 59, 31, 59);
    post(port + 1, "/progress", &restarted);
    assert_eq!(progress()["ended"], before, "{}", progress());
    let next = stretch(35, 63, 31, 59);
    post(port + 1, "/progress", &next);
    assert_eq!(progress()["step"], 35);
    assert_eq!(
        progress()["ended"],
        before,
        "kept while the stretch goes on"
    );
}

/// eto's orders to a store of at least two agents and at most `max_nodes`, with `departed`
/// hosts, expecting none, and no expiry of its own.
fn store_orders(departed: &[&str], max_nodes: u32) -> Value {
    json!({"departed": departed, "expected": [], "min_nodes": 2, "max_nodes": max_nodes,
           "dead_after": 0})
}

/// Starts eto's store for a job of three Workers at most (its report on the port returned
/// plus one), gives it `orders` if some are given, then writes the job's rendezvous with
/// `state` (see [`write_rendezvous`]); returns the store, its port and the run's id.
async fn store_holding(
    case: &str,
    orders: Option<&Value>,
    state: &str,
) -> (RunningStore, u16, String) {
    let port = free_port_pair();
    let (store, worker) = pods_of(&elastic_job(json!({"rdzvPort": port, "maxReplicas": 3})));
    let run_id = env_of(&worker)
        .into_iter()
        .find_map(|(name, value)| (name == "PET_RDZV_ID").then_some(value))
        .expect("eto names the run's rendezvous");
    let store = start_store(&store, &scratch(case), port).await;
    if let Some(orders) = orders {
        assert!(post(port + 1, "/orders", orders).contains(" 200 "));
    }
    write_rendezvous(port, &run_id, state);
    (store, port, run_id)
}

/// Writes the rendezvous of run `run_id` to the store on `port` with `state`, a script that
/// writes one as torchrun's c10d backend does (its `argv`: the store's port and the run's id).
fn write_rendezvous(port: u16, run_id: &str, state: &str) {
    let python = torchrun().parent().unwrap().join("python3");
    let wrote = Command::new(&python)
        .args(["-c", state, &port.to_string(), run_id])
        .status()
        .expect("python3 beside torchrun runs");
    assert!(wrote.success());
}

#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn an_agent_waiting_beside_a_full_round_becomes_a_spare() {
    let (_store, port, _) =
        store_holding("store-full-round", None, A_FULL_ROUND_AND_ONE_WAITING).await;
    let rendezvous = || report(port + 1).unwrap()["rendezvous"].clone();
    // Room for a fourth agent: it waits for the next round, as torchrun has it.
    assert!(post(port + 1, "/orders", &store_orders(&[], 4)).contains(" 200 "));
    let found = rendezvous();
    assert_eq!(
        (&found["waiting"], &found["spares"]),
        (&json!(1), &json!(0)),
        "{found}"
    );
    // Three at most: it has no place in the next round either, and waits as a spare.
    post(port + 1, "/orders", &store_orders(&[], 3));
    let found = rendezvous();
    assert_eq!(
        (&found["waiting"], &found["spares"], &found["round"]),
        (&json!(0), &json!(1), &json!(5)),
        "{found}"
    );
    assert_eq!(
        found["others"][0]["host"], "ddp-worker-3",
        "the round is left as it formed: {found}"
    );
}

#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn agents_in_the_wait_list_join_a_forming_round_at_once_and_one_left_over_is_a_spare() {
    // The orders first: the store acts on a forming round within a twentieth of a second.
    let (_store, port, _) = store_holding(
        "store-forming-round",
        Some(&store_orders(&[], 3)),
        A_FORMING_ROUND_AND_TWO_WAITING,
    )
    .await;
    let found = until("the round formed", Duration::from_secs(5), async || {
        let found = report(port + 1)?["rendezvous"].clone();
        (found["complete"] == json!(true)).then_some(found)
    })
    .await;
    let hosts = |list: &str| -> Vec<String> {
        let mut hosts: Vec<String> = found[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|member| member["host"].as_str().unwrap().to_string())
            .collect();
        hosts.sort();
        hosts
    };
    assert_eq!(
        (hosts("members"), &found["round"]),
        (
            vec![
                "ddp-worker-0".to_string(),
                "ddp-worker-1".into(),
                "ddp-worker-2".into()
            ],
            &json!(6)
        ),
        "the first waiting agent fills the round, which forms: {found}"
    );
    assert_eq!(
        (&found["waiting"], &found["spares"], hosts("others")),
        (&json!(0), &json!(1), vec!["ddp-worker-3".to_string()]),
        "nobody is left waiting beside the full round: {found}"
    );
}

#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn an_agent_taken_out_stays_out_when_it_comes_back_after_the_orders_forgot_it() {
    let (_store, port, run_id) = store_holding(
        "store-departed",
        Some(&store_orders(&["ddp-worker-3"], 4)),
        A_FULL_ROUND_AND_ONE_WAITING,
    )
    .await;
    let rendezvous = || report(port + 1).unwrap()["rendezvous"].clone();
    let found = rendezvous();
    assert_eq!(
        (&found["waiting"], &found["participants"]),
        (&json!(0), &json!(3)),
        "the departed agent left, the round stays: {found}"
    );
    // eto names a departed host only while it sees its pod; the pod is gone from the API (a
    // force deletion) while its agent still runs, and that agent waits at the rendezvous
    // again, as it would for the next round (there is room for a fourth).
    assert!(post(port + 1, "/orders", &store_orders(&[], 4)).contains(" 200 "));
    write_rendezvous(port, &run_id, A_FULL_ROUND_AND_ONE_WAITING);
    let found = rendezvous();
    assert_eq!(
        (&found["waiting"], &found["spares"], &found["participants"]),
        (&json!(0), &json!(0), &json!(3)),
        "it is taken out again at the store's next look: {found}"
    );
}

/// Writes, as torchrun's c10d backend does, a rendezvous whose round 6 forms after round 5
/// formed: `ddp-worker-0` and `-1` joined it, and its last call runs 30 s more; `argv`: the
/// store's port and the run's id.
const A_FORMING_ROUND_OF_TWO: &str = r#"
import base64, pickle, sys
from datetime import datetime, timedelta, timezone
from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState
port, run_id = int(sys.argv[1]), sys.argv[2]
state = _RendezvousState()
state.round, state.complete = 6, False
state.deadline = datetime.now(timezone.utc) + timedelta(seconds=30)
for index in range(2):
    node = _NodeDesc(f"ddp-worker-{index}", 100 + index, 0)
    state.participants[node] = 0
    state.last_heartbeats[node] = datetime.now(timezone.utc)
store = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10))
store.set("torch.rendezvous." + run_id, base64.b64encode(pickle.dumps(state)))
"#;

/// Prints the seconds left of the forming round's last call of run `argv[2]` in the store on
/// port `argv[1]` (negative: it ended; `inf`: none runs).
const LAST_CALL_LEFT: &str = r#"
import base64, pickle, sys
from datetime import datetime, timedelta, timezone
from torch.distributed import TCPStore
port, run_id = int(sys.argv[1]), sys.argv[2]
store = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10))
state = pickle.loads(base64.b64decode(store.get("torch.rendezvous." + run_id)))
if state.deadline is None:
    print("inf")
else:
    now = datetime.now(timezone.utc) if state.deadline.tzinfo else datetime.utcnow()
    print((state.deadline - now).total_seconds())
"#;

/// The seconds left of the last call of the round that forms in run `run_id`.
fn last_call_left(port: u16, run_id: &str) -> f64 {
    let python = torchrun().parent().unwrap().join("python3");
    let read = Command::new(&python)
        .args(["-c", LAST_CALL_LEFT, &port.to_string(), run_id])
        .output()
        .expect("python3 beside torchrun runs");
    assert!(read.status.success(), "{read:?}");
    String::from_utf8_lossy(&read.stdout)
        .trim()
        .parse()
        .expect("seconds")
}

/// Once a round formed, the store's forming round waits for an expected agent never at the
/// rendezvous (a Worker whose training starts) at most `join_wait`, and for one that was a
/// member and is away (restarting with the group) as long as the last call runs.
#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn a_forming_round_waits_for_a_starting_agent_at_most_join_wait() {
    let (_store, port, run_id) =
        store_holding("store-join-wait", None, A_FULL_ROUND_AND_ONE_WAITING).await;
    assert_eq!(
        report(port + 1).unwrap()["rendezvous"]["complete"],
        json!(true)
    );
    let order = |expected: &[&str]| {
        let orders = json!({"departed": [], "expected": expected, "min_nodes": 2,
                            "max_nodes": 4, "dead_after": 0, "join_wait": 8});
        assert!(post(port + 1, "/orders", &orders).contains(" 200 "));
    };
    let named = Instant::now();
    order(&["ddp-worker-0", "ddp-worker-1", "ddp-worker-7"]);
    write_rendezvous(port, &run_id, A_FORMING_ROUND_OF_TWO);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        last_call_left(port, &run_id) > 20.0,
        "ddp-worker-7 is waited for"
    );
    let ended = until(
        "the last call ends without ddp-worker-7",
        Duration::from_secs(20),
        async || (last_call_left(port, &run_id) <= 0.0).then(|| named.elapsed()),
    )
    .await;
    assert!(
        ended >= Duration::from_secs(7) && ended < Duration::from_secs(14),
        "join_wait (8 s) after the orders named it: {ended:?}"
    );

    // ddp-worker-2 was a member of round 5 and is not at the rendezvous now (restarting for
    // the group): it is waited for, past join_wait.
    order(&["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"]);
    write_rendezvous(port, &run_id, A_FORMING_ROUND_OF_TWO);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        last_call_left(port, &run_id) > 10.0,
        "ddp-worker-2 is waited for, past join_wait"
    );
}

/// Writes, as torchrun's c10d backend does, a rendezvous whose round 5 formed with
/// `ddp-worker-0` to `-2` (the last heartbeat of `-2` 5 s old), waits until the store on the report port `argv[1] + 1` has read it,
/// and then writes what the agents write when they drop `ddp-worker-2`, whose heartbeats
/// stopped, before the store took it out: round 6 forms with `ddp-worker-0` and `-1`, its
/// last call runs 30 s more; `argv`: the store's port and the run's id.
const A_ROUND_THE_AGENTS_LEFT_WITHOUT_ONE: &str = r#"
import base64, json, pickle, sys, urllib.request
from datetime import datetime, timedelta, timezone
from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState
port, run_id = int(sys.argv[1]), sys.argv[2]
store = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10))
nodes = [_NodeDesc(f"ddp-worker-{index}", 100 + index, 0) for index in range(3)]
formed = _RendezvousState()
formed.round, formed.complete = 5, True
for rank, node in enumerate(nodes):
    formed.participants[node] = rank
    formed.last_heartbeats[node] = datetime.now(timezone.utc)
formed.last_heartbeats[nodes[2]] -= timedelta(seconds=5)  # its heartbeats stopped 5 s ago
store.set("torch.rendezvous." + run_id, base64.b64encode(pickle.dumps(formed)))
# The store reads the rendezvous to answer its report.
report = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port + 1}/report"))
assert report["rendezvous"]["round"] == 5, report
forming = _RendezvousState()
forming.round, forming.complete = 6, False
forming.deadline = datetime.now(timezone.utc) + timedelta(seconds=30)
for node in nodes[:2]:
    forming.participants[node] = 0
    forming.last_heartbeats[node] = datetime.now(timezone.utc)
store.set("torch.rendezvous." + run_id, base64.b64encode(pickle.dumps(forming)))
"#;

/// torchrun's agents drop an agent whose heartbeats stopped (`_sanitize`) and re-form; when
/// they do so before the store looks, the store's forming round does not wait for that agent
/// as for one away for a moment: it counts as taken out once its last heartbeat the store saw
/// is older than `dead_after`, and the last call ends.
#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn a_forming_round_does_not_wait_for_an_agent_torchruns_agents_dropped() {
    // ddp-worker-2's last heartbeat is 5 s old, the others' fresh: it counts as taken out
    // 5 s after the agents dropped it; the others would, with nobody beating for them, 10 s.
    let dead_after = 10;
    let orders = json!({"departed": [], "expected": ["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"],
                        "min_nodes": 2, "max_nodes": 3, "dead_after": dead_after, "join_wait": 8});
    let (_store, port, run_id) = store_holding(
        "store-dropped-by-agents",
        Some(&orders),
        A_ROUND_THE_AGENTS_LEFT_WITHOUT_ONE,
    )
    .await;
    let wrote = Instant::now();
    assert!(
        last_call_left(port, &run_id) > 20.0,
        "ddp-worker-2's last heartbeat is fresh: it may be away for a moment"
    );
    let ended = until(
        "the last call ends without ddp-worker-2",
        Duration::from_secs(20),
        async || (last_call_left(port, &run_id) <= 0.0).then(|| wrote.elapsed()),
    )
    .await;
    println!("the last call ended {ended:?} after the agents dropped ddp-worker-2");
    assert!(
        ended >= Duration::from_secs(4),
        "not before its last heartbeat is dead_after ({dead_after} s) old: {ended:?}"
    );
    let log =
        std::fs::read_to_string(scratch_path("store-dropped-by-agents").join("store.out")).unwrap();
    assert!(
        log.contains("ddp-worker-2 left (no heartbeat for 10 s; the agents took it out)"),
        "{log}"
    );
}

/// A progress report as eto's helper sends it, of a stretch from step `first_step` at second
/// `first_at` of a minute to step `step` at second `at`.
fn stretch(step: i64, at: u32, first_step: i64, first_at: u32) -> Value {
    let time = |second: u32| {
        format!(
            "2027-01-15T08:{:02}:{:02}.000000Z",
            second / 60,
            second % 60
        )
    };
    json!({"step": step, "at": time(at), "first_step": first_step, "first_at": time(first_at)})
}

/// The grace period and the environment eto gives Worker 0 of an elastic job whose
/// rendezvous it hosts, with `checkpointGraceSeconds: 20`.
fn workers_shutdown_settings() -> (i64, String) {
    let (_, worker) = pods_of(&elastic_job(json!({"checkpointGraceSeconds": 20})));
    let timeout = env_of(&worker)
        .into_iter()
        .find(|(name, _)| name == SHUTDOWN_TIMEOUT_ENV)
        .map(|(_, value)| value)
        .expect("eto sets torchrun's shutdown timeout");
    let grace = worker
        .spec
        .unwrap()
        .termination_grace_period_seconds
        .unwrap();
    (grace, timeout)
}

/// Runs [`SAVES_ON_SIGTERM`] under a standalone torchrun with
/// `TORCH_ELASTIC_SHUTDOWN_TIMEOUT=shutdown_timeout`, sends torchrun SIGTERM once the training
/// runs, and returns whether the training saved and how long torchrun took to exit.
async fn stopped(case: &str, shutdown_timeout: &str) -> (bool, Duration) {
    let dir = scratch(case);
    let ready = dir.join("ready");
    let env = [
        ("PET_STANDALONE", "1".to_string()),
        ("PET_NPROC_PER_NODE", "1".to_string()),
        (SHUTDOWN_TIMEOUT_ENV, shutdown_timeout.to_string()),
        ("SAVE_SECONDS", SAVE_SECONDS.to_string()),
        ("READY_FILE", ready.display().to_string()),
    ]
    .map(|(name, value)| (name.to_string(), value));
    let mut child = start_torchrun(&dir, SAVES_ON_SIGTERM, &env, "out");
    until("the training runs", Duration::from_secs(120), async || {
        ready.exists().then_some(())
    })
    .await;
    let terminated = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    let elapsed = terminated.elapsed();
    let saved = std::fs::read_to_string(dir.join("out"))
        .unwrap()
        .contains("saved");
    (saved, elapsed)
}

#[tokio::test]
#[ignore = "needs torchrun of PyTorch 2.12 or later (ETO_TORCHRUN)"]
async fn torchrun_gives_training_that_saves_on_sigterm_the_time_eto_sets() {
    let (grace, timeout) = workers_shutdown_settings();
    assert_eq!((grace, timeout.as_str()), (20, "10"));
    let (saved, took) = stopped("eto", &timeout).await;
    println!(
        "eto's settings (grace {grace} s, {SHUTDOWN_TIMEOUT_ENV}={timeout}): saved={saved}, torchrun exited {took:?} after SIGTERM"
    );
    assert!(saved, "the save of {SAVE_SECONDS} s finished");
    let (saved, took) = stopped("short", "2").await;
    println!("{SHUTDOWN_TIMEOUT_ENV}=2: saved={saved}, torchrun exited {took:?} after SIGTERM");
    assert!(!saved, "a shorter timeout cuts the save: torchrun reads it");
}
