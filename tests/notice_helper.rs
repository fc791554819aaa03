//! `python/eto_notice.py`, the helper training code uses to read eto's notices, against notice
//! files written exactly as eto writes them.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use eto_api::job_status::{Notice, NoticeKind};
use eto_tests::workspace_root;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

fn python() -> Command {
    let probe = Command::new("python3").arg("--version").output();
    assert!(
        probe.is_ok_and(|out| out.status.success()),
        "python3 is needed to test python/eto_notice.py; install it (Debian: apt-get install python3)"
    );
    Command::new("python3")
}

/// What `script` prints, run with the helper importable and its environment set by `set`;
/// the script must succeed.
fn script_prints(script: &str, set: impl FnOnce(&mut Command)) -> Vec<u8> {
    let mut command = python();
    command
        .args(["-c", script])
        .arg(workspace_root().join("python"));
    set(&mut command);
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// What the helper reports with eto's notice file holding `content` and the notice eto's PID 1
/// writes on SIGTERM holding `termination` (each absent for `None`), and the launcher
/// environment `resume`.
fn helper(
    case: &str,
    content: Option<&str>,
    termination: Option<&str>,
    resume: Option<&str>,
) -> Value {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("notice-helper");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(case);
    let termination_file = dir.join(format!("{case}.termination"));
    for (path, content) in [(&file, content), (&termination_file, termination)] {
        let _ = std::fs::remove_file(path);
        if let Some(content) = content {
            std::fs::write(path, content).unwrap();
        }
    }
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import eto_notice
deadline = eto_notice.deadline()
print(json.dumps({
    "alive": eto_notice.check_alive(),
    "resume": eto_notice.is_resume(),
    "deadline": deadline.isoformat() if deadline else None,
    "kind": (eto_notice.notice() or {}).get("kind"),
}))
"#;
    let printed = script_prints(script, |command| {
        command
            .env("ETO_NOTICE_FILE", &file)
            .env("ETO_TERMINATION_NOTICE_FILE", &termination_file)
            .env_remove("ETO_RESUME");
        if let Some(resume) = resume {
            command.env("ETO_RESUME", resume);
        }
    });
    serde_json::from_slice(&printed).unwrap_or_else(|error| panic!("{case}: {error}"))
}

fn notice(kind: NoticeKind, deadline: Option<i64>) -> String {
    let at = |second| Time(jiff::Timestamp::from_second(second).unwrap());
    eto_engine::notice::render(&Notice {
        kind,
        reason: "BelowMinWorkers".into(),
        since: at(1_800_000_000),
        deadline: deadline.map(at),
        message: "what happens".into(),
    })
}

#[test]
fn the_helper_reads_every_notice_as_eto_writes_it() {
    let suspend = notice(NoticeKind::Suspend, Some(1_800_000_300));
    let reclaim = notice(NoticeKind::Reclaim, None);
    let resume = notice(NoticeKind::Resume, None);
    let cases = [
        (
            "no file",
            None,
            None,
            json!({"alive": true, "resume": false, "deadline": null, "kind": null}),
        ),
        (
            "empty file: no notice",
            Some(""),
            None,
            json!({"alive": true, "resume": false, "deadline": null, "kind": null}),
        ),
        (
            "suspend",
            Some(suspend.as_str()),
            None,
            json!({"alive": false, "resume": false, "deadline": "2027-01-15T08:05:00+00:00", "kind": "Suspend"}),
        ),
        (
            "reclaim",
            Some(reclaim.as_str()),
            None,
            json!({"alive": false, "resume": false, "deadline": null, "kind": "Reclaim"}),
        ),
        (
            "resume notice",
            Some(resume.as_str()),
            None,
            json!({"alive": true, "resume": true, "deadline": null, "kind": "Resume"}),
        ),
        (
            "resumed launcher",
            Some(""),
            Some("true"),
            json!({"alive": true, "resume": true, "deadline": null, "kind": null}),
        ),
        (
            "first run's launcher",
            Some(""),
            Some("false"),
            json!({"alive": true, "resume": false, "deadline": null, "kind": null}),
        ),
        (
            "garbage: training goes on",
            Some("{not json"),
            None,
            json!({"alive": true, "resume": false, "deadline": null, "kind": null}),
        ),
    ];
    for (case, content, env, expected) in cases {
        let file_name = case.replace([' ', ':', '\''], "-");
        assert_eq!(helper(&file_name, content, None, env), expected, "{case}");
    }
}

#[test]
fn a_pods_own_termination_notice_counts_unless_the_jobs_is_more_urgent() {
    let suspend = notice(NoticeKind::Suspend, Some(1_800_000_300));
    let resume = notice(NoticeKind::Resume, None);
    // What eto's PID 1 writes on SIGTERM (crates/engine/src/builders/termination.rs).
    let terminating = r#"{"kind":"Reclaim","reason":"Terminating","since":"2027-01-15T08:00:00Z","deadline":"2027-01-15T08:00:30Z","message":"this pod is being terminated (SIGTERM): save what it must and exit"}"#;
    let cases = [
        (
            "terminating alone",
            None,
            json!({"alive": false, "resume": false, "deadline": "2027-01-15T08:00:30+00:00", "kind": "Reclaim"}),
        ),
        (
            "terminating in a resumed run",
            Some(resume.as_str()),
            json!({"alive": false, "resume": false, "deadline": "2027-01-15T08:00:30+00:00", "kind": "Reclaim"}),
        ),
        (
            "terminating while the job suspends",
            Some(suspend.as_str()),
            json!({"alive": false, "resume": false, "deadline": "2027-01-15T08:05:00+00:00", "kind": "Suspend"}),
        ),
    ];
    for (case, eto, expected) in cases {
        let file_name = case.replace(' ', "-");
        assert_eq!(
            helper(&file_name, eto, Some(terminating), None),
            expected,
            "{case}"
        );
    }
}

#[test]
fn the_example_training_loops_are_valid_python() {
    for (script, reads) in [
        (
            "horovod/train_elastic.py",
            ["eto_notice.notice()", "eto_notice.is_resume()"],
        ),
        (
            "horovod/train_kubeai.py",
            ["kubeai.init()", "kubeai.check_alive()"],
        ),
        (
            "torchft/train_ft.py",
            [
                "eto_notice.replica_group()",
                "eto_notice.fault_tolerant_ddp(manager, model)",
            ],
        ),
    ] {
        let example = workspace_root().join("examples").join(script);
        let output = python()
            .args(["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"])
            .arg(&example)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = std::fs::read_to_string(example).unwrap();
        for call in reads {
            assert!(text.contains(call), "{script} calls {call}");
        }
    }
}

#[test]
fn a_checkpoint_notice_is_answered_once_with_the_step_and_the_notices_time() {
    let (url, received) = collecting_store("/saved");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("notice-helper");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("checkpoint");
    std::fs::write(&file, notice(NoticeKind::Checkpoint, Some(1_800_000_030))).unwrap();
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import eto_notice
before = eto_notice.checkpoint_requested()
heard = eto_notice.saved(12)
after = eto_notice.checkpoint_requested()
eto_notice.wait_for_change(poll_seconds=0.01, timeout_seconds=0.05)
print(json.dumps({"before": before, "heard": heard, "after": after,
                  "alive": eto_notice.check_alive(), "kind": eto_notice.notice_kind()}))
"#;
    let printed = script_prints(script, |command| {
        command
            .env("ETO_NOTICE_FILE", &file)
            .env("ETO_TERMINATION_NOTICE_FILE", dir.join("none"))
            .env("ETO_SAVED_URL", &url)
            .env("HOSTNAME", "ddp-worker-0");
    });
    let printed: Value = serde_json::from_slice(&printed).unwrap();
    assert_eq!(
        printed,
        json!({"before": true, "heard": true, "after": false, "alive": true, "kind": "Checkpoint"}),
        "asked once, answered, and training is not stopped"
    );
    let received = received.lock().unwrap().clone();
    let [(asked, _), (request_line, body)] = received.as_slice() else {
        panic!("two requests: {received:?}");
    };
    assert!(
        asked.starts_with("GET /saved "),
        "whether the group saved already: {asked}"
    );
    assert!(request_line.starts_with("POST /saved "), "{request_line}");
    assert_eq!(
        *body,
        json!({"pod": "ddp-worker-0", "step": 12, "since": "2027-01-15T08:00:00Z"})
    );
}

/// A store that records what the training code says it saved (in `state["saved"]`) and
/// shows it in its report, as eto's store does, counting the reports asked for (in
/// `state["reports"]`), in the script's own process; `ETO_SAVED_URL` points at it.
const RECORDING_STORE: &str = r#"
import json, os, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
state = {"saved": [], "reports": 0}
class Store(BaseHTTPRequestHandler):
    def do_POST(self):
        state["saved"].append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.answer({"recorded": True})
    def do_GET(self):
        state["reports"] += 1
        self.answer({"saved": state["saved"], "rendezvous": None, "orders": None})
    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Store)
threading.Thread(target=server.serve_forever, daemon=True).start()
os.environ["ETO_SAVED_URL"] = f"http://127.0.0.1:{server.server_port}/saved"
"#;

#[test]
fn a_process_started_after_its_group_saved_for_the_checkpoint_notice_is_not_asked_again() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("notice-helper");
    std::fs::create_dir_all(&dir).unwrap();
    // The notice's own time, as eto renders it, and another.
    let (its, other) = ("2027-01-15T08:00:00Z", "2027-01-15T07:59:00Z");
    // (the notice, the time of the save the store recorded, asked to save, reports read)
    let cases = [
        (NoticeKind::Checkpoint, its, false, 1),
        (NoticeKind::Checkpoint, other, true, 1),
        (NoticeKind::Suspend, its, true, 0),
        (NoticeKind::Reclaim, its, true, 0),
    ];
    for (kind, saved_at, asked, reports) in cases {
        let file = dir.join(format!("restarted-{kind:?}"));
        std::fs::write(&file, notice(kind, Some(1_800_000_030))).unwrap();
        let script = format!(
            r#"
import json, sys
sys.path.insert(0, sys.argv[1])
{RECORDING_STORE}
state["saved"].append({{"pod": "ddp-worker-0", "step": 12, "since": "{saved_at}"}})
import eto_notice
first = eto_notice.checkpoint_requested()
again = eto_notice.checkpoint_requested()
print(json.dumps({{"asked": [first, again], "reports": state["reports"]}}))
"#
        );
        let printed = script_prints(&script, |command| {
            command
                .env("ETO_NOTICE_FILE", &file)
                .env("ETO_TERMINATION_NOTICE_FILE", dir.join("none"));
        });
        let printed: Value = serde_json::from_slice(&printed).unwrap();
        assert_eq!(
            printed,
            json!({"asked": [asked, asked], "reports": reports}),
            "{kind:?}, a save recorded at {saved_at}"
        );
    }
}

#[test]
fn under_etos_store_a_sigterm_asks_to_save_and_the_process_leaves_once_it_did() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("notice-helper");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        r#"
import json, os, signal, sys, time
sys.path.insert(0, sys.argv[1])
{RECORDING_STORE}
import eto_notice
before = eto_notice.checkpoint_requested()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.05)
asked = eto_notice.asking_notice(timeout_seconds=0)
heard = eto_notice.saved(7)
print(json.dumps({{"before": before, "terminating": eto_notice.terminating(),
                  "kind": asked["kind"], "reason": asked["reason"], "heard": heard,
                  "saved": state["saved"], "alive": eto_notice.check_alive()}}), flush=True)
eto_notice.wait_for_change(poll_seconds=0.01, timeout_seconds=5)
print("still here", flush=True)
"#
    );
    let started = jiff::Timestamp::now();
    let printed = script_prints(&script, |command| {
        command
            .env("ETO_NOTICE_FILE", dir.join("none"))
            .env("ETO_TERMINATION_NOTICE_FILE", dir.join("none"))
            .env("HOSTNAME", "ddp-worker-1");
    });
    let text = String::from_utf8(printed).unwrap();
    let mut lines = text.lines();
    let printed: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(lines.next(), None, "wait_for_change ended the process");
    let since = printed["saved"][0]["since"].as_str().unwrap().to_string();
    assert_eq!(
        printed,
        json!({"before": false, "terminating": true, "kind": "Reclaim", "reason": "Terminating",
               "heard": true, "saved": [{"pod": "ddp-worker-1", "step": 7, "since": since}],
               "alive": false}),
        "the signal is a notice of this process, answered like eto's"
    );
    let since: jiff::Timestamp = since.parse().unwrap();
    assert!(
        since.as_second() >= started.as_second() && since.subsec_nanosecond() == 0,
        "dated in whole seconds from the signal: {since}"
    );
}

#[test]
fn a_process_waiting_for_the_change_leaves_when_sigterm_comes() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("notice-helper");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("checkpoint-then-sigterm");
    std::fs::write(&file, notice(NoticeKind::Checkpoint, Some(1_800_000_030))).unwrap();
    // Saved for eto's notice, it waits for the change; then torchrun stops it (the group
    // re-forms) or its pod is deleted.
    let script = format!(
        r#"
import os, signal, sys, threading, time
sys.path.insert(0, sys.argv[1])
{RECORDING_STORE}
import eto_notice
eto_notice.checkpoint_requested()
eto_notice.saved(3)
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
eto_notice.wait_for_change(poll_seconds=0.01, timeout_seconds=60)
print("still here", flush=True)
"#
    );
    let started = std::time::Instant::now();
    let printed = script_prints(&script, |command| {
        command
            .env("ETO_NOTICE_FILE", &file)
            .env("ETO_TERMINATION_NOTICE_FILE", dir.join("none"))
            .env("HOSTNAME", "ddp-worker-1");
    });
    assert_eq!(String::from_utf8_lossy(&printed), "", "it left");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "at the signal, not at its timeout"
    );
}

#[test]
fn a_process_that_heard_sigterm_but_does_not_come_to_its_next_step_ends_as_sigterm_ends_it() {
    // Stuck (in a collective whose peer is gone, here a sleep): Python's handler may never
    // run, the helper's watch ends it after its least wait for the next step.
    let script = format!(
        r#"
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
{RECORDING_STORE}
import eto_notice
eto_notice.checkpoint_requested()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)
print("still here", flush=True)
"#
    );
    let started = std::time::Instant::now();
    let ended = python()
        .args(["-c", &script])
        .arg(workspace_root().join("python"))
        .output()
        .unwrap();
    assert_eq!(
        ended.status.code(),
        Some(128 + 15),
        "{}",
        String::from_utf8_lossy(&ended.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&ended.stdout), "");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "ended by the watch, not by the end of its sleep"
    );
}

#[test]
fn sigterm_keeps_its_own_meaning_without_etos_store_or_with_the_trainings_handler() {
    let ended = python()
        .args([
            "-c",
            "import os, signal, sys, time\nsys.path.insert(0, sys.argv[1])\nimport eto_notice\neto_notice.checkpoint_requested()\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(5)\n",
        ])
        .arg(workspace_root().join("python"))
        .env_remove("ETO_SAVED_URL")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(ended.status.signal(), Some(15), "Python's default: it ends");

    let script = format!(
        r#"
import json, os, signal, sys, time
sys.path.insert(0, sys.argv[1])
{RECORDING_STORE}
heard = []
signal.signal(signal.SIGTERM, lambda *_: heard.append(True))
import eto_notice
eto_notice.checkpoint_requested()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.05)
print(json.dumps({{"own": heard, "terminating": eto_notice.terminating(),
                  "asked": eto_notice.checkpoint_requested()}}))
"#
    );
    let printed = script_prints(&script, |_| {});
    assert_eq!(
        serde_json::from_slice::<Value>(&printed).unwrap(),
        json!({"own": [true], "terminating": false, "asked": false}),
        "the training's own handler stands"
    );
}

#[test]
fn a_rank_whose_pod_shows_the_notice_later_waits_for_it_before_it_answers() {
    use std::io::{BufRead, BufReader, Write};
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("notice-helper");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("later");
    let _ = std::fs::remove_file(&file);
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import eto_notice
print("none yet" if eto_notice.asking_notice(timeout_seconds=0.2) is None else "early", flush=True)
sys.stdin.readline()
shown = eto_notice.asking_notice(timeout_seconds=10)
print(shown and shown["kind"], flush=True)
"#;
    let mut child = python()
        .args(["-c", script])
        .arg(workspace_root().join("python"))
        .env("ETO_NOTICE_FILE", &file)
        .env("ETO_TERMINATION_NOTICE_FILE", dir.join("none"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "none yet");
    // The helper now waits; the pod shows the notice a moment after another rank saw it.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    std::fs::write(&file, notice(NoticeKind::Checkpoint, None)).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "Checkpoint");
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_spare_is_ready_and_waits_for_the_group_id_eto_gives_it_or_leaves_when_told() {
    use std::io::{BufRead, BufReader, Write};
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("notice-helper");
    std::fs::create_dir_all(&dir).unwrap();
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
import eto_notice
print(eto_notice.replica_group(timeout_seconds=0.2), flush=True)
sys.stdin.readline()
print(eto_notice.replica_group(timeout_seconds=10), flush=True)
"#;
    // (case, REPLICA_GROUP_ID, file after the first answer, notice then, first and second answer)
    let cases = [
        ("given", Some("2"), "", None, ["2", "2"]),
        ("spare", Some("spare"), "3\n", None, ["None", "3"]),
        (
            "spare told to leave",
            None,
            "",
            Some(NoticeKind::Reclaim),
            ["None", "None"],
        ),
    ];
    for (case, given, group, then, answers) in cases {
        let group_file = dir.join(format!("{case}.group"));
        let notice_file = dir.join(format!("{case}.notice"));
        for path in [&group_file, &notice_file] {
            std::fs::write(path, "").unwrap();
        }
        let ready_file = dir.join(format!("{case}.ready")).join("ready");
        let _ = std::fs::remove_dir_all(ready_file.parent().unwrap());
        let mut command = python();
        command
            .args(["-c", script])
            .arg(workspace_root().join("python"))
            .env("ETO_GROUP_FILE", &group_file)
            .env("ETO_NOTICE_FILE", &notice_file)
            .env("ETO_READY_FILE", &ready_file)
            .env("ETO_TERMINATION_NOTICE_FILE", dir.join("none"))
            .env_remove("REPLICA_GROUP_ID")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        if let Some(given) = given {
            command.env("REPLICA_GROUP_ID", given);
        }
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), answers[0], "{case}");
        // Set up and waiting or with its id: the pod's readiness probe passes from now on.
        assert!(ready_file.exists(), "{case}: the ready file is created");
        // The spare waits now; eto gives it an id, or its node's reclaim comes first.
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        std::fs::write(&group_file, group).unwrap();
        if let Some(kind) = then {
            std::fs::write(&notice_file, notice(kind, None)).unwrap();
        }
        assert_eq!(lines.next().unwrap().unwrap(), answers[1], "{case}");
        assert!(child.wait().unwrap().success(), "{case}");
    }
}

#[test]
fn the_fault_tolerant_hook_hands_ddp_the_bucket_whatever_befell_the_allreduce() {
    // Stand-ins for torch and torchft, shaped as torchft 0.2.0's Manager answers: a failed
    // allreduce (its work's wait() says False, and the managed future holds no chain), an
    // allreduce skipped after an earlier failure (a finished plain future), a good one (a
    // managed future whose `_fut` is the end of its chain).
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
class Future:
    def set_result(self, value):
        self.value = value
torch = types.ModuleType("torch")
torch.futures = types.SimpleNamespace(Future=Future)
torchft = types.ModuleType("torchft")
ddp = types.ModuleType("torchft.ddp")
class DistributedDataParallel:
    def __init__(self, manager, module, **kwargs):
        self.hook = self._comm_hook
        self.kwargs = kwargs
ddp.DistributedDataParallel = DistributedDataParallel
sys.modules.update({"torch": torch, "torchft": torchft, "torchft.ddp": ddp})
import eto_notice
class Bucket:
    def buffer(self):
        return "bucket"
class Work:
    def __init__(self, ok, future):
        self.ok, self.future = ok, future
    def wait(self):
        return self.ok
    def get_future(self):
        return self.future
class Manager:
    def __init__(self, work):
        self.work = work
    def allreduce(self, tensor):
        return self.work
chain = Future()
cases = {
    "failed": Work(False, types.SimpleNamespace(_fut=None)),
    "skipped": Work(True, Future()),
    "good": Work(True, types.SimpleNamespace(_fut=chain)),
}
for name, work in cases.items():
    wrapped = eto_notice.fault_tolerant_ddp(Manager(work), "model", bucket_cap_mb=1)
    assert wrapped.kwargs == {"bucket_cap_mb": 1}
    future = wrapped.hook(Manager(work), Bucket())
    shown = "chain" if future is chain else future.value
    print(f"{name}={shown}")
"#;
    let printed = script_prints(script, |_| {});
    assert_eq!(
        String::from_utf8_lossy(&printed).trim(),
        "failed=bucket\nskipped=bucket\ngood=chain"
    );
}

/// The request lines and JSON bodies a local port received, in order.
type Received = std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>;

/// The request lines and bodies (`null` for none) of the requests sent to a local port, as
/// they come, and the port's URL with `path`. Each is answered `{"recorded":true}`.
fn collecting_store(path: &str) -> (String, Received) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}{path}", listener.local_addr().unwrap());
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = std::sync::Arc::clone(&bodies);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut reader = BufReader::new(stream.unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            // Recorded before the answer: a client that heard it finds it here.
            let body = if body.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&body).unwrap()
            };
            kept.lock().unwrap().push((request_line, body));
            let mut stream = reader.into_inner();
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n{\"recorded\":true}")
                .unwrap();
        }
    });
    (url, bodies)
}

/// What `script` prints as JSON, run as rank 0 with the helper importable and `place` (a
/// variable naming where reports go) set.
fn rank_zero_prints(script: &str, place: (&str, &str)) -> Value {
    let printed = script_prints(script, |command| {
        command.env(place.0, place.1).env("RANK", "0");
    });
    serde_json::from_slice(&printed).unwrap()
}

#[test]
fn progress_reports_reach_the_store_as_eto_reads_them_and_a_step_back_starts_a_stretch() {
    let (saved_url, bodies) = collecting_store("/saved");
    let script = r#"
import json, sys, time
sys.path.insert(0, sys.argv[1])
import eto_notice
for step in range(1, 6):
    eto_notice.progress(step, total=100)
    time.sleep(0.01)
first = eto_notice.flush()
with eto_notice.restoring():
    time.sleep(0.05)
eto_notice.progress(3, total=100)
eto_notice.progress(4, total=100)
print(json.dumps({"flushed": [first, eto_notice.flush()]}))
"#;
    let printed = rank_zero_prints(script, ("ETO_SAVED_URL", &saved_url));
    assert_eq!(printed, json!({"flushed": [true, true]}));
    let bodies = bodies.lock().unwrap().clone();
    assert!(
        bodies
            .iter()
            .all(|(line, _)| line.starts_with("POST /progress ")),
        "{bodies:?}"
    );
    assert!(
        bodies.len() <= 4,
        "sent a few times, not per step: {bodies:?}"
    );
    let reports: Vec<eto_engine::goodput::ReportedProgress> = bodies
        .iter()
        .map(|(_, body)| serde_json::from_value(body.clone()).expect("reads as eto reads it"))
        .collect();
    let before = reports
        .iter()
        .rev()
        .find(|report| report.first_step == Some(1))
        .expect("the first stretch was sent");
    assert_eq!((before.step, before.total), (5, Some(100)));
    let last = reports.last().unwrap();
    assert_eq!(
        (last.step, last.first_step),
        (4, Some(3)),
        "back to 3: a new stretch"
    );
    let (before_at, first_at) = (before.at.unwrap(), last.first_at.unwrap());
    assert!(first_at > before_at);
    let ended = last
        .ended
        .expect("the new stretch tells where the one before ended");
    assert_eq!(
        (ended.step, ended.at, ended.first_step, Some(ended.first_at)),
        (5, before_at, 1, before.first_at)
    );
    let restored = last.restored.expect("the load was said");
    assert!(restored.from >= before_at && restored.to <= first_at);
    assert!(restored.to.duration_since(restored.from).as_millis() >= 50);
}

#[test]
fn a_change_of_the_groups_training_together_starts_a_stretch() {
    let (url, bodies) = collecting_store("/progress");
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import eto_notice
for step, members in [(1, 3), (2, 3), (3, 2), (4, 2)]:
    eto_notice.progress(step, members=members)
print(json.dumps({"flushed": eto_notice.flush()}))
"#;
    let printed = rank_zero_prints(script, ("ETO_PROGRESS_URL", &url));
    assert_eq!(printed, json!({"flushed": true}));
    let bodies = bodies.lock().unwrap().clone();
    let (_, last) = bodies.last().expect("sent");
    let last: eto_engine::goodput::ReportedProgress = serde_json::from_value(last.clone()).unwrap();
    assert_eq!(
        (last.step, last.first_step),
        (4, Some(3)),
        "3 was trained by two groups, 2 by three: {bodies:?}"
    );
    let ended = last.ended.expect("where the three groups' stretch ended");
    assert_eq!((ended.first_step, ended.step), (1, 2));
}

#[test]
fn only_rank_zero_reports() {
    let (url, bodies) = collecting_store("/progress");
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import eto_notice
eto_notice.progress(1)
print(json.dumps({"flushed": eto_notice.flush(timeout_seconds=0.2)}))
"#;
    let printed = script_prints(script, |command| {
        command
            .env("ETO_PROGRESS_URL", &url)
            .env_remove("RANK")
            .env("HOROVOD_RANK", "1");
    });
    let printed: Value = serde_json::from_slice(&printed).unwrap();
    assert_eq!(printed, json!({"flushed": false}), "nothing to send");
    assert!(bodies.lock().unwrap().is_empty());
}
