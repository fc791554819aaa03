"""Read the notice eto posts to the pods of a training job.

eto writes a notice to the file /etc/edl/notice of the launcher and of every worker, as
one line of JSON, within about a second of deciding it:

  {"kind": "Suspend", "reason": "BelowMinWorkers", "since": "...", "deadline": "...",
   "message": "..."}

- kind "Suspend": the job is being suspended (too few workers are left, or someone
  suspended it). Save a checkpoint and exit before "deadline": the pods are deleted then,
  or as soon as the launcher exits.
- kind "Reclaim": only in the file of a pod whose node is going away (a spot reclaim, a
  preemption, a drain). Save what this pod must and exit before "deadline" (absent when
  unknown).
- kind "Resume": this run resumes a suspended job. Load the latest checkpoint.
- kind "Checkpoint": (a PyTorchJob whose rendezvous eto hosts) a worker leaves the group
  soon, and torchrun then restarts every worker: save a checkpoint now, say so with
  saved(step), and wait (wait_for_change()); the re-formed group loads it. The worker
  leaves once the training code says it saved, or at "deadline".

An empty file means there is no notice.

A PyTorchJob of replica groups (TorchFT) tells each worker its group id in REPLICA_GROUP_ID.
A spare group (elasticPolicy.spareReplicas) starts without one (REPLICA_GROUP_ID=spare) and
waits: its id appears in /etc/edl/replica-group when eto gives it the place of a lost or
added group. Read the id with
replica_group(), which waits for it, before building the TorchFT Manager:

    group = eto_notice.replica_group()                # a spare waits here, already started
    if group is None:
        sys.exit(0)                                   # told to leave while waiting
    manager = Manager(..., replica_id=f"train_{group}")
    ddp = eto_notice.fault_tolerant_ddp(manager, model)   # not torchft.DistributedDataParallel

replica_group() first creates the file ETO_READY_FILE names (/tmp/eto/ready by default): the
training's slow setup is done and this process can take a group at once. eto counts a spare
as waiting once its pod is ready, so give the container a readiness probe on that file
(exec `test -e /tmp/eto/ready`); without one a spare is ready as soon as its container runs,
while its training still imports torch.

fault_tolerant_ddp() is TorchFT's DistributedDataParallel (gradients reduced in buckets)
whose communication hook survives a group lost in the middle of an allreduce: torchft 0.2.0's
own ends the survivors' training there (AssertionError at `assert fut._fut` in
torchft/ddp.py), which is the common case of a spot reclaim without warning.

With torchrun, every rank polls and all must agree on the step they save at, for example:

    flag = torch.tensor([1.0 if eto_notice.checkpoint_requested() else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)     # every rank, every step
    if flag.item():
        asked = eto_notice.asking_notice()            # once this pod shows it too
        if rank == 0:
            save(step)
            eto_notice.saved(step)                    # one call: the change may go on
        if asked and asked["kind"] == "Suspend":
            sys.exit(0)                               # the job stops: exit
        eto_notice.wait_for_change()                  # torchrun restarts this process

The processes torchrun starts in the re-formed group train on: the "Checkpoint" notice their
group answered may stand a moment longer (until the leaving worker's pod is gone), but it
asks them nothing (see checkpoint_requested()).

A pod can also be told by the platform before eto sees it: an eviction, a drain or a node
shutdown sends the pod SIGTERM at once. eto's small PID 1 (see eto's docs/how-a-job-runs.md, "Graceful
termination") then writes a "Reclaim" notice of the same form, reason "Terminating", to
/run/eto/notice (or /tmp/eto/notice where /run is not writable) and keeps the training
processes running until they exit or the pod's grace period ends. notice() reads both and
returns the most urgent: "Suspend", then "Reclaim", then "Checkpoint", then "Resume".

Under torchrun a PyTorchJob's pod has no such PID 1: torchrun forwards the SIGTERM to the
training processes at once, and sends its own when it re-forms the group. Where eto hosts
the group's rendezvous (ETO_SAVED_URL is set), the helper's first call from the main thread
listens for it (unless the training installed a SIGTERM handler of its own): the signal
becomes a "Reclaim" notice, reason "Terminating", of this process, so that the loop above
saves at the next step (eto asks the other Workers of an evicted one to save with it, and
keeps the group together until it did), and wait_for_change() then ends the process. No
step is trained twice beyond the one in flight. A process that does not come to its next
step in time (stuck in a collective whose peer is gone) ends as SIGTERM would have ended it,
after twice its usual step (see terminating()).

To let eto tell how much of the job's time trained (its goodput, `status.goodput`), call
progress(step) after each step, from every rank or only the first: rank 0 alone reports. Wrap
the loading of a checkpoint in `with eto_notice.restoring():` to have that time counted as
checkpoint time:

    with eto_notice.restoring():
        step = load_checkpoint()
    for step in range(step + 1, steps + 1):
        train_one_step()
        eto_notice.progress(step, total=steps)

Copy this file next to your training script; it needs nothing beyond the Python standard
library.
"""

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone

NOTICE_FILE = "/etc/edl/notice"
GROUP_FILE = "/etc/edl/replica-group"
READY_FILE = "/tmp/eto/ready"
TERMINATION_NOTICE_FILES = ("/run/eto/notice", "/tmp/eto/notice")
URGENCY = {"Suspend": 4, "Reclaim": 3, "Checkpoint": 2, "Resume": 1}
ASKS_TO_SAVE = ("Suspend", "Reclaim", "Checkpoint")
_answered = set()
# Whether eto's store had recorded a save for a notice when this process first saw it.
_group_saves = {}
# The notice this process recorded when it heard SIGTERM (see _hear_sigterm).
_terminated = []


def notice():
    """The current notice as a dict, or None when there is none.

    The most urgent of eto's notice (the file ETO_NOTICE_FILE names, /etc/edl/notice by
    default), of the notice eto's PID 1 writes when the pod is being terminated (the
    file ETO_TERMINATION_NOTICE_FILE names, else the first of /run/eto/notice and
    /tmp/eto/notice that exists), and of the one this process recorded on SIGTERM (see
    terminating()). A file that cannot be read or does not hold a JSON object counts as no
    notice: training goes on.
    """
    _hear_sigterm()
    paths = [os.environ.get("ETO_NOTICE_FILE", NOTICE_FILE)]
    termination = os.environ.get("ETO_TERMINATION_NOTICE_FILE")
    paths += [termination] if termination else list(TERMINATION_NOTICE_FILES)
    found = [value for value in map(_read, paths) if value is not None] + _terminated
    if not found:
        return None
    return max(found, key=lambda value: URGENCY.get(value.get("kind"), 0))


def terminating():
    """True once this process heard SIGTERM while the helper listened for it.

    Where eto hosts the group's rendezvous store (ETO_SAVED_URL is set: an elastic
    PyTorchJob), the helper's first call from the main thread (notice(),
    checkpoint_requested(), ...) makes SIGTERM a notice instead of the end of the process:
    a "Reclaim" notice, reason "Terminating", of this process only. torchrun forwards the
    pod's SIGTERM (an eviction, a drain, a node's shutdown) and sends its own when it
    re-forms the group; either way the training saves at the next step with the rest of the
    group (eto keeps an evicted Worker in the group until it did), and wait_for_change() then
    ends the process. A process that does not come to its next step in time (stuck in a
    collective whose peer is gone) ends as SIGTERM would have ended it, after twice its
    usual step (at least SIGTERM_STEP_SECONDS). A SIGTERM handler of the training's own,
    installed before, stands, and so does Python's default elsewhere.
    """
    return bool(_terminated)


# The least time a process that heard SIGTERM has to come to its next step.
SIGTERM_STEP_SECONDS = 2.0
_listening = []
# Where the main thread is: "training" between steps' notice checks, "saving" once it asked
# for the notice to save for (asking_notice()), with the times of its recent checks.
_phase = {"now": "training", "checks": [], "changed": threading.Event()}


def _hear_sigterm():
    """Listens for SIGTERM (see terminating()), once, where it may."""
    if _listening or not os.environ.get("ETO_SAVED_URL"):
        return
    if threading.current_thread() is not threading.main_thread():
        return
    _listening.append(True)
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        heard, told = socket.socketpair()
        told.setblocking(False)
        if signal.set_wakeup_fd(told.fileno(), warn_on_full_buffer=False) != -1:
            signal.set_wakeup_fd(-1)  # someone else listens (asyncio): leave SIGTERM alone
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        return
    _listening.append((heard, told))
    threading.Thread(target=_watch, args=(heard,), name="eto-sigterm", daemon=True).start()


def _on_sigterm(_signum, _frame):
    _record_sigterm()


def _record_sigterm():
    if _terminated:
        return
    since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    _terminated.append({
        "kind": "Reclaim",
        "reason": "Terminating",
        "since": since,
        "message": "this process heard SIGTERM: save at this step with the group, then it exits",
    })


def _checked(phase):
    """The main thread checked the notice (phase "training") or asked for it ("saving")."""
    now = time.monotonic()
    if phase == "training":
        checks = _phase["checks"]
        checks.append(now)
        del checks[:-21]
    _phase["now"] = phase
    _phase["changed"].set()


def _usual_step():
    checks = _phase["checks"]
    gaps = sorted(b - a for a, b in zip(checks, checks[1:]))
    return gaps[len(gaps) // 2] if gaps else 0.0


def _watch(heard):
    """Hears SIGTERM the moment it comes, even while the main thread is inside a collective
    (where Python's handler cannot run), and ends a process that does not come to its next
    step in time."""
    while True:
        try:
            data = heard.recv(64)
        except OSError:
            return
        if signal.SIGTERM not in data:
            continue
        _record_sigterm()
        if _phase["now"] == "saving":
            continue  # it saves: torchrun's own timeout bounds that
        allowed = max(SIGTERM_STEP_SECONDS, 2.0 * _usual_step())
        ends = time.monotonic() + allowed
        while _phase["now"] != "saving" and time.monotonic() < ends:
            _phase["changed"].clear()
            _phase["changed"].wait(max(0.0, ends - time.monotonic()))
        if _phase["now"] != "saving":
            os._exit(128 + signal.SIGTERM)


def _read(path):
    """The JSON object in file `path`, or None."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read().strip()
    except OSError:
        return None
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check_alive():
    """False once eto asks this job or this pod to save a checkpoint and exit."""
    current = notice()
    return not (current and current.get("kind") in ("Suspend", "Reclaim"))


def deadline():
    """When the pods go, as a timezone-aware datetime, or None when unknown."""
    current = notice()
    value = current and current.get("deadline")
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def is_resume():
    """True when this run resumes a suspended job: load the latest checkpoint.

    The launcher has ETO_RESUME=true (horovodrun passes it on to the training processes),
    and every pod of the run shows a "Resume" notice.
    """
    if os.environ.get("ETO_RESUME") == "true":
        return True
    current = notice()
    return bool(current and current.get("kind") == "Resume")


def replica_group(poll_seconds=0.05, timeout_seconds=None):
    """This worker's replica group id as an int: REPLICA_GROUP_ID where it holds a number,
    else (a spare's is "spare") the id eto gives it in the file ETO_GROUP_FILE names
    (/etc/edl/replica-group by default), waited for. Returns None when a notice asks this pod
    to leave (check_alive() is False) or timeout_seconds pass first.

    It first creates the file ETO_READY_FILE names (/tmp/eto/ready by default), for the
    pod's readiness probe: this process is set up and can take a group.
    """
    _mark_ready()
    given = os.environ.get("REPLICA_GROUP_ID", "")
    if given.isdigit():
        return int(given)
    path = os.environ.get("ETO_GROUP_FILE", GROUP_FILE)
    waited = 0.0
    while True:
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read().strip()
        except OSError:
            text = ""
        if text.isdigit():
            return int(text)
        if not check_alive():
            return None
        if timeout_seconds is not None and waited >= timeout_seconds:
            return None
        time.sleep(poll_seconds)
        waited += poll_seconds


def _mark_ready():
    """Creates the ready file; a file system that refuses it leaves the pod's probe unready,
    as without the helper."""
    path = os.environ.get("ETO_READY_FILE", READY_FILE)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError:
        pass


def notice_kind():
    """The kind of the current notice ("Suspend", "Reclaim", "Checkpoint", "Resume"), or None."""
    current = notice()
    return current.get("kind") if current else None


def checkpoint_requested():
    """True while a notice asks this process to save a checkpoint that it has not answered
    with saved() yet: "Suspend", "Reclaim" or "Checkpoint".

    A "Checkpoint" notice its group answered before this process started (torchrun restarts
    every process as the group re-forms, and the notice stands until the leaving worker's
    pod is gone) asks nothing: where eto hosts the rendezvous (ETO_SAVED_URL), the first
    time a process sees such a notice it asks eto's store whether a save for it was recorded.
    """
    current = notice()
    _checked("training")
    return bool(
        current
        and current.get("kind") in ASKS_TO_SAVE
        and _key(current) not in _answered
        and not _saved_by_group(current)
    )


def _saved_by_group(current):
    """Whether eto's store recorded a save for the "Checkpoint" notice `current`; asked once
    per notice and process, and False when the store does not answer within two seconds."""
    key = _key(current)
    url = os.environ.get("ETO_SAVED_URL")
    if current.get("kind") != "Checkpoint" or not url:
        return False
    if key not in _group_saves:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                report = json.load(answer)
            recorded = report.get("saved") or []
            _group_saves[key] = any(
                isinstance(entry, dict) and entry.get("since") == current.get("since")
                for entry in recorded
            )
        except (OSError, ValueError, AttributeError):
            _group_saves[key] = False
        if _group_saves[key]:
            _answered.add(key)
    return _group_saves[key]


def asking_notice(timeout_seconds=10.0, poll_seconds=0.2):
    """The notice asking this process to save ("Suspend", "Reclaim" or "Checkpoint"), waiting
    up to timeout_seconds for this pod to show it; None if none shows.

    eto's notice reaches the pods of a job a second or so apart: a rank that acts on what
    another rank saw (all ranks agree with an all-reduce) may not show it yet.
    """
    _checked("saving")
    waited = 0.0
    while True:
        current = notice()
        if current and current.get("kind") in ASKS_TO_SAVE:
            return current
        if waited >= timeout_seconds:
            return None
        time.sleep(poll_seconds)
        waited += poll_seconds


def saved(step=None):
    """Says the checkpoint the current notice asked for is saved; returns whether eto heard.

    Marks the notice answered in this process (checkpoint_requested() is then False for it)
    and tells eto through its rendezvous store (ETO_SAVED_URL, set in the pods of a
    PyTorchJob whose rendezvous eto hosts), so that a worker waiting to leave leaves now
    instead of at the notice's deadline. One call from one rank is enough. Waits for this pod
    to show the notice, as asking_notice() does. Without ETO_SAVED_URL, or when the store
    does not answer within two seconds, eto is not told and the change happens at the
    deadline.
    """
    current = asking_notice()
    if not current:
        return False
    _answered.add(_key(current))
    url = os.environ.get("ETO_SAVED_URL")
    if not url:
        return False
    body = json.dumps({
        "pod": os.environ.get("HOSTNAME", ""),
        "step": step,
        "since": current.get("since"),
    }).encode()
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            return 200 <= answer.status < 300
    except (OSError, ValueError):
        return False


def wait_for_change(poll_seconds=0.5, timeout_seconds=None):
    """After a checkpoint a notice asked for: waits while that notice stands (once this pod
    shows it, as asking_notice() waits for). Returns when it is taken down or replaced (the
    change was called off, or another notice came), or after timeout_seconds. Under torchrun
    the change usually comes first: the agent restarts this process, which then loads the
    checkpoint.

    A process that heard SIGTERM (terminating()), before or while it waits, does not
    return: it exits (status 0) at once. The group agreed on the step to save at, and rank 0
    saves it whatever SIGTERM it hears meanwhile; torchrun forms the next group only once
    every process of it has exited, so every process of that group loads the saved step.
    """
    if _terminated:
        sys.exit(0)
    current = asking_notice()
    key = current and _key(current)
    waited = 0.0
    while key is not None:
        if _terminated:
            sys.exit(0)
        now = notice()
        if not now or _key(now) != key:
            return
        if timeout_seconds is not None and waited >= timeout_seconds:
            return
        time.sleep(poll_seconds)
        waited += poll_seconds


def _key(value):
    """What tells notices apart: their kind and when they were posted."""
    return (value.get("kind"), value.get("since"))


# A pause between two steps longer than this many times the usual step, and longer than
# MIN_PAUSE seconds, starts a new stretch of training (the group re-formed under it).
PAUSE_FACTOR = 5.0
MIN_PAUSE = 2.0
# Reports are sent at most this often.
REPORT_EVERY = 0.25
_RANK_VARIABLES = ("RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
_STRETCH_FIELDS = ("step", "at", "first_step", "first_at")
_stretch = {"last": None, "steps": [], "report": None, "restored": None, "sent": None,
            "posted": None, "members": None}
_stretch_lock = threading.Condition()
_sender = []


def progress(step, total=None, members=None):
    """Tells eto this process reached training step `step` (of `total`, when known), trained
    by `members` (the replica groups or processes that trained it together, when the training
    knows: TorchFT's `manager.num_participants()`, Horovod's `hvd.size()`); returns at once,
    without waiting for eto.

    Only rank 0 sends (RANK, HOROVOD_RANK, OMPI_COMM_WORLD_RANK or PMI_RANK; a process
    without any counts as rank 0), so every rank may call it. A step not past the previous
    one (a checkpoint loaded), the first step of the process, or one after a pause longer
    than five usual steps (and two seconds) starts a new stretch of training: eto counts the
    time before it as start-up or re-formation, not as training, and steps below the highest
    reached as trained twice. A change of `members` starts a new stretch too: the step that
    took the group's change is re-formation. A new stretch's reports also tell where the one
    before ended. The report goes to ETO_PROGRESS_URL, else to the rendezvous
    store eto hosts (ETO_SAVED_URL's /progress), from a background thread at most four
    times a second. Without either (Horovod, MPI, a plain script), the first process of the
    pod to call it serves its latest report at GET /progress on port ETO_PROGRESS_PORT
    (29411 by default), whatever its rank; eto reads it through the API server's pod proxy
    from a running pod of the job whose container declares that port, named "eto-progress".
    """
    if _rank() != 0 and _progress_url():
        return
    now = time.time()
    with _stretch_lock:
        last = _stretch["last"]
        steps = _stretch["steps"]
        report = _stretch["report"]
        paused = False
        if last is not None and steps:
            usual = sorted(steps)[len(steps) // 2]
            paused = now - last[1] > max(MIN_PAUSE, PAUSE_FACTOR * usual)
        regrouped = members is not None and _stretch["members"] not in (None, members)
        if members is not None:
            _stretch["members"] = members
        if report is None or last is None or step <= last[0] or paused or regrouped:
            ended = report
            report = {"first_step": step, "first_at": _stamp(now)}
            if ended:
                # eto reads reports now and then: the new stretch tells where the one before
                # ended, so that its last steps still count as trained.
                report["ended"] = {name: ended[name] for name in _STRETCH_FIELDS}
            restored = _stretch["restored"]
            if restored:
                report["restored"] = restored
                _stretch["restored"] = None
            _stretch["steps"] = []
            _stretch["sent"] = None
        else:
            steps.append(now - last[1])
            del steps[:-20]
        report.update({"step": step, "at": _stamp(now)})
        if total is not None:
            report["total"] = int(total)
        _stretch["report"] = report
        _stretch["last"] = (step, now)
        _stretch_lock.notify_all()
    if _progress_url():
        _start_sender()
    else:
        _start_server()


@contextlib.contextmanager
def restoring():
    """Marks the time a checkpoint is being loaded: eto counts it as checkpoint time, with
    the next stretch of training progress() reports."""
    started = time.time()
    try:
        yield
    finally:
        with _stretch_lock:
            _stretch["restored"] = {"from": _stamp(started), "to": _stamp(time.time())}


def _rank():
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def _stamp(seconds):
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _progress_url():
    given = os.environ.get("ETO_PROGRESS_URL")
    if given:
        return given
    saved = os.environ.get("ETO_SAVED_URL", "")
    if saved.endswith("/saved"):
        return saved[: -len("/saved")] + "/progress"
    return None


PROGRESS_PORT = 29411
_server = []


def _start_server():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Progress(BaseHTTPRequestHandler):
        def do_GET(self):
            with _stretch_lock:
                report = dict(_stretch["report"] or {})
            found = self.path == "/progress" and report
            body = json.dumps(report if found else {"error": "no progress"}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with _stretch_lock:
        if _server:
            return
        _server.append(None)
    port = int(os.environ.get("ETO_PROGRESS_PORT", PROGRESS_PORT))
    try:
        server = ThreadingHTTPServer(("0.0.0.0", port), Progress)
    except OSError:
        return  # another process of the pod serves it
    _server[0] = server
    threading.Thread(target=server.serve_forever, name="eto-progress", daemon=True).start()


def _start_sender():
    with _stretch_lock:
        if _sender or not _progress_url():
            return
        thread = threading.Thread(target=_send_reports, name="eto-progress", daemon=True)
        _sender.append(thread)
    thread.start()


def _send_reports():
    url = _progress_url()
    while True:
        with _stretch_lock:
            while _stretch["report"] is None or _stretch["report"] == _stretch["sent"]:
                _stretch_lock.wait()
            report = dict(_stretch["report"])
            _stretch["sent"] = report
        body = json.dumps(report).encode()
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=2):
                pass
        except (OSError, ValueError):
            pass
        with _stretch_lock:
            _stretch["posted"] = report
            _stretch_lock.notify_all()
        time.sleep(REPORT_EVERY)


def flush(timeout_seconds=3.0):
    """Waits until the latest step progress() took has been sent (or tried), at most
    timeout_seconds; returns whether it was. Call it before the process exits."""
    deadline = time.time() + timeout_seconds
    with _stretch_lock:
        if not _sender:
            return False
        while _stretch["posted"] != _stretch["report"]:
            left = deadline - time.time()
            if left <= 0:
                return False
            _stretch_lock.wait(left)
    return True


def fault_tolerant_ddp(manager, module, **kwargs):
    """TorchFT's DistributedDataParallel around `module`, reducing gradients in buckets
    through `manager`, that survives another replica group lost while an allreduce is in
    flight. Use it where TorchFT's examples write torchft.DistributedDataParallel(manager,
    module); `kwargs` go to torch's DistributedDataParallel as with TorchFT's.

    When a peer group dies mid-collective (a spot reclaim without notice, a node crash), the
    Manager records the error and its should_commit() turns the step down; torchft 0.2.0's
    communication hook then fails (`assert fut._fut`) and ends this group's training with the
    lost one. This hook hands DDP the bucket as it is instead: torchft.Optimizer skips the
    step, its gradients are thrown away, and the group trains on in the next quorum. After a
    good allreduce it returns what TorchFT's hook returns, so nothing else changes. torchft
    nightly builds from 2026-10-14 on carry the same fix in their own hook; this one is for
    the releases before. Needs torch and torchft, imported here only.
    """
    import torch
    from torchft.ddp import DistributedDataParallel

    def as_is(tensor):
        done = torch.futures.Future()
        done.set_result(tensor)
        return done

    class FaultTolerantDistributedDataParallel(DistributedDataParallel):
        @staticmethod
        def _comm_hook(state, bucket):
            work = state.allreduce(bucket.buffer())
            # False: the allreduce failed and the Manager knows; the step will not commit.
            if not work.wait():
                return as_is(bucket.buffer())
            # After an earlier failure in the step the Manager does no allreduce, and its
            # work's future is a plain, finished one; otherwise the end of its chain.
            chained = getattr(work.get_future(), "_fut", None)
            return chained if chained is not None else as_is(bucket.buffer())

    return FaultTolerantDistributedDataParallel(manager, module, **kwargs)
