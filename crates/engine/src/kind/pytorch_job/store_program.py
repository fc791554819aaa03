# eto's rendezvous store for an elastic PyTorchJob (see rendezvous.rs, which runs this file
# with `python3 -c`): a TCPStore server from the training image's own PyTorch, and beside it an
# HTTP server on the report port.
#
#   GET  /report  the checkpoints the training code said it saved, the run's rendezvous as
#                 torchrun's c10d backend keeps it (members, waiting agents, the latest
#                 re-formations), and the orders eto last gave.
#   POST /saved   the training code saved the checkpoint a notice asked for.
#   POST /progress  the latest step the training reached (eto's helper, `progress(step)`):
#                 {"step", "at", "first_step", "first_at", "total"?, "restored"?, "ended"?};
#                 the newest by "at" is kept and shown in /report, with where the stretch
#                 before it ended ("ended": the sender's, else the one kept before it).
#   POST /orders  eto's orders: {"departed": [host...], "expected": [host...], "min_nodes": n,
#                 "max_nodes": n, "dead_after": s, "join_wait": s}.
#
# Orders speed up what torchrun's own rules would do later, and nothing else. Every 0.2 s
# (0.05 s while a round forms):
# - an agent whose pod is gone ("departed"), or whose heartbeat is older than "dead_after"
#   seconds (torchrun's own expiry, from the job's rdzvConf), leaves the rendezvous, as
#   torchrun drops an agent whose heartbeats stopped (`_sanitize`), with the same epilogue.
#   A host once departed stays out for the store's life, whatever later orders say: eto names
#   a departed host only while it sees it, and an agent lives on until its pod's containers
#   stop (after a force deletion, some time after its pod left the API) and comes back to the
#   rendezvous once taken out. eto never runs a second pod under a Worker's name within a run,
#   and each run has its own store;
# - when an agent leaves a round that formed (taken out so, or by torchrun's agents), the
#   others are told to re-form at once:
#   a placeholder agent waits in the wait list (torchrun's agents restart their training when
#   an agent waits), and leaves it as soon as the round re-opens. Their training may be stuck
#   in a collective with the silent agent, which only its timeout would end;
# - a round that is forming ends its last call once every "expected" agent and every agent
#   waiting to move into it has joined, and it has at least `min_nodes`, by moving its
#   deadline to now: the next agent that looks completes it, as it would once the last call
#   ran out. Once a round has formed, an expected agent that was taken out (its pod gone,
#   or its heartbeat older than "dead_after", whether the store or torchrun's agents took
#   it out) is not waited for unless it came back, and one never there yet
#   (its training starts) is waited for at most "join_wait" seconds from the orders that
#   first named it;
# - agents in the wait list join a forming round at once, once its last call runs (up to
#   "max_nodes", completing it as torchrun's agents do), rather than at their next look, up to
#   a second later, when agents that came after them may have filled it;
# - an agent that waits beside a complete round of "max_nodes" agents becomes a spare (torch
#   1.x has none: it leaves the wait list, and joins it again once the round has room). It
#   came while the group restarted and the round was a member short for a moment; torchrun
#   leaves it waiting once the round formed full, and every agent would restart for it, again
#   and again, another one left over each time.
# Every write is a compare-and-set on the whole state, as the agents' own writes are; a
# closed rendezvous is never touched; any error leaves the state as it was.
import base64, dataclasses, json, pickle, signal, sys, threading, time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from torch.distributed import TCPStore

port, report_port, run_id = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
store = TCPStore("0.0.0.0", port, None, True, timedelta(seconds=300), wait_for_workers=False)
KEY = "torch.rendezvous." + run_id
NULL = "Y2FuaW1hZGFt"  # what torchrun's c10d backend writes before any state
lock = threading.Lock()
looking = threading.Lock()  # one look at the state at a time
saved = []
progress = {}  # the latest step the training reported
orders = {"departed": [], "expected": [], "min_nodes": 1, "max_nodes": 0, "dead_after": 0,
          "join_wait": 0}
departed_for_good = set()  # every host the orders named departed
seen = set()  # every host the rendezvous held in the store's life
silenced = set()  # hosts the store took out (their pods gone, or their heartbeats stopped)
last_beat = {}  # each host's latest heartbeat the store saw, whoever later took it out
named = {}  # expected hosts never at the rendezvous: when the orders first named them
formed = {"once": False}  # whether a round formed in the store's life
PLACEHOLDER = "eto-regroup"  # the host of the agent that makes the others re-form
poked = {"round": None}
closed_at = []
reformations = []  # the latest rounds that formed, oldest first
tracked = {"round": None, "complete": False, "hosts": [], "since": None}


def log(message):
    print("eto: " + message, flush=True)


def host(node):
    # torch 1.x names a node's host fqdn, 2.x addr; eto's pods are named by their first label.
    return (getattr(node, "addr", None) or getattr(node, "fqdn", "") or "").split(".")[0]


def utc_now(like):
    # torch 1.x keeps naive UTC times, 2.x aware ones.
    return datetime.now(timezone.utc) if like is not None and like.tzinfo else datetime.utcnow()


def stamp(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%02dZ" % (moment.microsecond // 10000)


def read():
    # As the backend itself starts: never blocks on a key not written yet.
    raw = store.compare_set(KEY, "", NULL)
    if raw == NULL.encode():
        return None, None
    return raw, pickle.loads(base64.b64decode(raw))


def steer(state, now):
    """Applies the orders to `state`; what it did, in words (nothing: unchanged)."""
    with lock:
        departed = set(departed_for_good)
        expected = set(orders["expected"])
        min_nodes = max(1, int(orders["min_nodes"]))
        max_nodes = int(orders["max_nodes"])
        dead_after = orders["dead_after"]
        join_wait = orders["join_wait"]
        first_named = dict(named)
    if state.closed:
        return []
    done = []
    spares = getattr(state, "redundancy_list", set())
    placeholders = [node for node in state.wait_list if host(node) == PLACEHOLDER]
    if placeholders and (not state.complete or state.round != poked["round"]):
        for node in placeholders:
            state.wait_list.discard(node)
        done.append("the agents re-form round %d" % state.round)
    known = set(state.participants) | set(state.wait_list) | set(spares) | set(state.last_heartbeats)
    for node, beat in state.last_heartbeats.items():
        if last_beat.get(host(node)) is None or beat > last_beat[host(node)]:
            last_beat[host(node)] = beat
    gone = []
    for node in sorted(known, key=host):
        beat = state.last_heartbeats.get(node)
        if host(node) in departed:
            gone.append((node, "its pod is gone"))
        elif dead_after > 0 and beat is not None and (utc_now(beat) - beat).total_seconds() > dead_after:
            gone.append((node, "no heartbeat for %.0f s" % dead_after))
    left_formed_round = False
    for node, why in gone:
        silenced.add(host(node))
        state.last_heartbeats.pop(node, None)
        if node in state.participants:
            del state.participants[node]
            left_formed_round = left_formed_round or state.complete
            if not state.complete and len(state.participants) < min_nodes:
                state.deadline = None
        state.wait_list.discard(node)
        spares.discard(node)
        done.append("%s left (%s)" % (host(node), why))
    # A member may have left the formed round otherwise: torchrun's agents drop a silent one
    # themselves, with the same expiry, and may do so first.
    with lock:
        before = dict(tracked)
    if before["complete"] and state.complete and before["round"] == state.round:
        members = {host(node) for node in state.participants}
        left_formed_round = left_formed_round or bool(set(before["hosts"]) - members)
    if left_formed_round:
        if not state.participants:
            state.complete = False
            state.round += 1
        elif not any(host(node) == PLACEHOLDER for node in state.wait_list):
            # The others may be stuck in a collective with the agent that left: an agent
            # waiting makes theirs restart the training and re-form.
            some = next(iter(state.participants))
            name = "addr" if hasattr(some, "addr") else "fqdn"
            state.wait_list.add(dataclasses.replace(some, **{name: PLACEHOLDER, "pid": 0, "local_id": 0}))
            poked["round"] = state.round
            done.append("the others of round %d are told to re-form" % state.round)
    if not state.complete and state.deadline is not None:
        # The round's last call runs (min_nodes joined): agents in the wait list join it now,
        # as each would at its next look, up to a second later, when the round may have
        # filled with agents that came after them (a spare among them) and left one waiting
        # beside it, for which every member restarts at once. A round this fills forms, and
        # an agent left over becomes a spare below, in the same write.
        moved = False
        for node in sorted(state.wait_list, key=host):
            if max_nodes and len(state.participants) >= max_nodes:
                break
            if host(node) != PLACEHOLDER:
                state.wait_list.discard(node)
                state.participants[node] = 0
                state.last_heartbeats[node] = utc_now(state.deadline)
                moved = True
                done.append("%s joins round %d from the wait list" % (host(node), state.round))
        if moved and max_nodes and len(state.participants) >= max_nodes:
            state.complete = True
            state.deadline = None
            for rank, node in enumerate(sorted(state.participants)):
                state.participants[node] = rank
            done.append("round %d has its %d agents and forms" % (state.round, max_nodes))
    if max_nodes and state.complete and len(state.participants) >= max_nodes:
        for node in sorted(state.wait_list, key=host):
            if host(node) != PLACEHOLDER:
                state.wait_list.discard(node)
                spares.add(node)
                done.append("%s waits as a spare beside round %d, which is full"
                            % (host(node), state.round))
    joined = {host(node) for node in state.participants}
    # Agents waiting to move into the forming round are at the rendezvous: it waits for them.
    waiting = {host(node) for node in state.wait_list} - {PLACEHOLDER}
    present = joined | waiting | {host(node) for node in spares}
    seen.update(present)
    silenced.difference_update(present)  # an agent that came back is here again
    # torchrun's agents may drop an agent whose heartbeats stopped before the store looks: it
    # left all the same, and is not waited for as one away for a moment.
    for name, beat in sorted(last_beat.items()):
        if (dead_after > 0 and name not in present and name not in silenced
                and (utc_now(beat) - beat).total_seconds() > dead_after):
            silenced.add(name)
            done.append("%s left (no heartbeat for %.0f s; the agents took it out)"
                        % (name, dead_after))
    formed["once"] = formed["once"] or state.complete
    if formed["once"]:
        # Once a group formed, a round waits for an expected agent that is here or away for a
        # moment (restarting), not for one the store took out, and for one whose training
        # starts (never here yet) for join_wait at most.
        clock = time.monotonic()
        expected = {h for h in expected if h in present or (h in seen and h not in silenced) or (
            h not in seen and clock - first_named.get(h, clock) < join_wait)}
    required = expected | waiting
    if (not state.complete and state.deadline is not None and expected
            and len(state.participants) >= min_nodes and required <= joined):
        current = utc_now(state.deadline)
        if state.deadline > current:
            state.deadline = current - timedelta(seconds=1)
            done.append("round %d's last call ended: its %d expected agents joined"
                        % (state.round, len(state.participants)))
    return done


def track(state, now):
    """Records when the formed group broke up and when the next one formed."""
    hosts = sorted(host(node) for node in state.participants)
    with lock:
        formed = tracked["complete"]
        moved = formed and (state.round != tracked["round"] or hosts != tracked["hosts"])
        if tracked["since"] is None and (not state.complete or state.wait_list or moved):
            tracked["since"] = now
        if state.complete and not (formed and state.round == tracked["round"]):
            first = not reformations
            before = set() if first else set(reformations[-1]["members"])
            since = None if first else tracked["since"]
            paused = None if since is None else round((now - since).total_seconds(), 1)
            reformations.append({
                "round": state.round, "since": since and stamp(since), "formed": stamp(now),
                "paused": paused, "members": hosts,
                "left": sorted(before - set(hosts)), "joined": sorted(set(hosts) - before)})
            del reformations[:-8]
            log("round %d formed with %s%s" % (state.round, ", ".join(hosts),
                "" if paused is None else ", %.1f s after the group broke up" % paused))
            tracked["since"] = None
        tracked.update(round=state.round, complete=state.complete, hosts=hosts)
        if state.closed and not closed_at:
            closed_at.append(time.monotonic())


def look():
    """Reads the state, applies the orders, records the rounds; the state, or None."""
    with looking:
        return look_once()


def look_once():
    try:
        raw, state = read()
        if state is None:
            return None
        now = datetime.now(timezone.utc)
        done = steer(state, now)
        if done:
            desired = base64.b64encode(pickle.dumps(state)).decode()
            if store.compare_set(KEY, raw.decode(), desired) != desired.encode():
                # An agent wrote first: the next look applies the orders to what it wrote.
                return read()[1]
            for line in done:
                log(line)
        track(state, now)
        return state
    except Exception as error:
        log("the rendezvous could not be read: %r" % (error,))
        return None


def member(node, state):
    beat = state.last_heartbeats.get(node)
    age = None
    if beat is not None:
        age = round((utc_now(beat) - beat).total_seconds(), 1)
    return {"host": host(node), "heartbeat_age": age}


def rendezvous():
    state = look()
    if state is None:
        return None
    spares = getattr(state, "redundancy_list", set())
    waiting = [node for node in state.wait_list if host(node) != PLACEHOLDER]
    found = {"round": state.round, "complete": state.complete, "closed": state.closed,
             "participants": len(state.participants), "waiting": len(waiting),
             "spares": len(spares),
             "members": [member(node, state) for node in state.participants],
             "others": [member(node, state) for node in waiting + list(spares)]}
    with lock:
        found["reformations"] = list(reformations)
        if closed_at:
            found["closed_for"] = round(time.monotonic() - closed_at[0], 1)
    return found


def watch():
    while True:
        state = look()
        # A forming round is looked at more often: agents come to it within a second.
        forming = state is not None and not state.complete and not state.closed
        time.sleep(0.05 if forming else 0.2)


STRETCH = ("step", "at", "first_step", "first_at")


def ended_before(entry, stored):
    """Gives `entry` the end of the stretch before it, when its sender did not: a stretch
    that began after the stored report's step follows the stored stretch (a restarted
    process knows nothing of it); one that goes on with it keeps the end the stored one
    told."""
    if not stored:
        return
    told = entry.get("ended")
    if entry["first_at"] > stored["at"]:
        if not told or told["at"] < stored["at"]:
            entry["ended"] = {name: stored[name] for name in STRETCH}
    elif not told and stored.get("ended"):
        entry["ended"] = stored["ended"]


class Report(BaseHTTPRequestHandler):
    def do_GET(self):
        with lock:
            latest, held, reached = list(saved), dict(orders), dict(progress)
        self.answer(200, {"saved": latest, "rendezvous": rendezvous(), "orders": held,
                          "progress": reached or None})

    def do_POST(self):
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            if self.path == "/orders":
                given = {"departed": [str(h) for h in body.get("departed", [])],
                         "expected": [str(h) for h in body.get("expected", [])],
                         "min_nodes": int(body.get("min_nodes", 1)),
                         "max_nodes": int(body.get("max_nodes", 0)),
                         "dead_after": int(body.get("dead_after", 0)),
                         "join_wait": int(body.get("join_wait", 0))}
            elif self.path == "/progress":
                entry = {"step": int(body["step"]), "at": str(body["at"]),
                         "first_step": int(body["first_step"]), "first_at": str(body["first_at"])}
                if body.get("total") is not None:
                    entry["total"] = int(body["total"])
                if body.get("restored"):
                    entry["restored"] = {"from": str(body["restored"]["from"]),
                                         "to": str(body["restored"]["to"])}
                if body.get("ended"):
                    entry["ended"] = {name: body["ended"][name] for name in STRETCH}
            else:
                entry = {"pod": str(body.get("pod", "")), "step": body.get("step"),
                         "since": str(body["since"])}
        except Exception as error:
            return self.answer(400, {"error": str(error)})
        with lock:
            if self.path == "/orders":
                orders.update(given)
                departed_for_good.update(given["departed"])
                clock = time.monotonic()
                for name in given["expected"]:
                    named.setdefault(name, clock)
            elif self.path == "/progress":
                if not progress or entry["at"] >= progress["at"]:
                    ended_before(entry, progress)
                    progress.clear()
                    progress.update(entry)
            else:
                saved.append(entry)
                del saved[:-16]
        if self.path == "/orders":
            look()
        self.answer(200, {"recorded": True})

    def answer(self, code, value):
        data = json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("0.0.0.0", report_port), Report)
threading.Thread(target=server.serve_forever, daemon=True).start()
threading.Thread(target=watch, daemon=True).start()
log("rendezvous store serving on port %d, its report on %d" % (port, report_port))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)
