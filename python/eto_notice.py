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

An empty file means there is no notice.

A pod can also be told by the platform before eto sees it: an eviction, a drain or a node
shutdown sends the pod SIGTERM at once. eto's small PID 1 (see eto's docs/how-a-job-runs.md, "Graceful
termination") then writes a "Reclaim" notice of the same form, reason "Terminating", to
/run/eto/notice (or /tmp/eto/notice where /run is not writable) and keeps the training
processes running until they exit or the pod's grace period ends. notice() reads both and
returns the more urgent: "Suspend", then "Reclaim", then "Resume".

Copy this file next to your training script; it needs nothing beyond the Python standard
library.
"""

import json
import os
from datetime import datetime

NOTICE_FILE = "/etc/edl/notice"
TERMINATION_NOTICE_FILES = ("/run/eto/notice", "/tmp/eto/notice")
URGENCY = {"Suspend": 3, "Reclaim": 2, "Resume": 1}


def notice():
    """The current notice as a dict, or None when there is none.

    The most urgent of eto's notice (the file ETO_NOTICE_FILE names, /etc/edl/notice by
    default) and of the notice eto's PID 1 writes when the pod is being terminated (the
    file ETO_TERMINATION_NOTICE_FILE names, else the first of /run/eto/notice and
    /tmp/eto/notice that exists). A file that cannot be read or does not hold a JSON object
    counts as no notice: training goes on.
    """
    paths = [os.environ.get("ETO_NOTICE_FILE", NOTICE_FILE)]
    termination = os.environ.get("ETO_TERMINATION_NOTICE_FILE")
    paths += [termination] if termination else list(TERMINATION_NOTICE_FILES)
    found = [value for value in map(_read, paths) if value is not None]
    if not found:
        return None
    return max(found, key=lambda value: URGENCY.get(value.get("kind"), 0))


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
