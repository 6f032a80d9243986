# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark-only callback: write per-task timings of a playbook run as JSON.

Enabled by benchmarks/run.py with ANSIBLE_CALLBACK_PLUGINS=benchmarks/callback_plugins and
ANSIBLE_CALLBACKS_ENABLED=bench_timings; the file goes to $BENCH_TIMINGS_FILE. Like
ansible.posix.profile_tasks (a task lasts until the next one starts), plus what the
benchmark needs to aggregate: the role that owns each task, the top-level role of the play
that caused it (include_role chains are followed), the action, the number of loop items,
and when the process started (so start-up time before the first task is visible).
Not part of the collection's runtime: galaxy.yml build_ignore does not need it because it
lives under benchmarks/.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: bench_timings
type: aggregate
short_description: per-task timings as JSON for benchmarks/run.py
description:
  - Writes one JSON document to the file named by the environment variable C(BENCH_TIMINGS_FILE).
requirements:
  - enable in callbacks_enabled
"""


def _process_start():
    """Wall-clock time this process started, from /proc (Linux); None elsewhere."""
    try:
        with open("/proc/self/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of stat(5), counted after "(comm)"
        with open("/proc/stat") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _roles(task):
    """(own role, outermost role) of a task; include_role chains are followed upwards."""
    own = task._role.get_name() if getattr(task, "_role", None) else None
    outer = own
    node = task
    seen = 0
    while node is not None and seen < 100:
        seen += 1
        role = getattr(node, "_parent_role", None) or getattr(node, "_role", None)
        if role is not None:
            outer = role.get_name()
            # a role pulled in by include_role: its parent role is the caller
            parent = getattr(role, "_parents", None)
            if parent:
                outer = parent[-1].get_name()
        node = getattr(node, "_parent", None)
    return own, outer


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timings"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = os.environ.get("BENCH_TIMINGS_FILE")
        self._data = {"process_start": _process_start(), "callback_loaded": time.time(), "tasks": []}
        self._current = None

    def _close(self, now):
        if self._current is not None:
            self._current["end"] = now
            self._current = None

    def v2_playbook_on_start(self, playbook):
        self._data["playbook_start"] = time.time()

    def v2_playbook_on_play_start(self, play):
        self._data.setdefault("play_start", time.time())

    def _start(self, task, handler=False):
        now = time.time()
        self._close(now)
        own, outer = _roles(task)
        self._current = {
            "name": task.get_name(),
            "action": task.action,
            "role": own,
            "top_role": outer,
            "handler": handler,
            "start": now,
            "end": None,
            "items": 0,
        }
        self._data["tasks"].append(self._current)

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task, handler=True)

    def _item(self, result):
        if self._current is not None:
            self._current["items"] += 1

    v2_runner_item_on_ok = _item
    v2_runner_item_on_failed = _item
    v2_runner_item_on_skipped = _item

    def v2_playbook_on_stats(self, stats):
        now = time.time()
        self._close(now)
        self._data["stats_time"] = now
        if self._path:
            with open(self._path, "w") as handle:
                json.dump(self._data, handle)
