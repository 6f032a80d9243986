#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the node_resources task spends its time: the module's own code, without Ansible.

    node_resources_direct.py KUBECONFIG SELECTOR RESOURCE COUNT PARALLELISM

Calls the collection's apply_node_resources (plugins/module_utils/lab/node_status.py) in this
process, exactly as the module does, and prints one JSON line of phase timings: imports,
client set-up, the LIST of the selected Nodes, the concurrent PATCHes (wall, and the sum and
count of the calls, retries included) and the total. The difference to the task time that
Ansible reports is Ansible's share (AnsiballZ start-up, argument handling, result transport).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

T0 = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / ".collections"))

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.auth import build_api_client  # noqa: E402
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.nodes import CoreNodeApi  # noqa: E402
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.node_status import apply_node_resources  # noqa: E402


class TimedApi:
    """CoreNodeApi with a stopwatch on each call."""

    def __init__(self, api):
        self.api = api
        self.lock = threading.Lock()
        self.calls = {"get_node": [0, 0.0], "list_nodes": [0, 0.0], "patch_node_status": [0, 0.0]}
        self.first_patch = None
        self.last_patch = None

    def _timed(self, name, *args):
        start = time.perf_counter()
        try:
            return getattr(self.api, name)(*args)
        finally:
            end = time.perf_counter()
            with self.lock:
                self.calls[name][0] += 1
                self.calls[name][1] += end - start
                if name == "patch_node_status":
                    self.first_patch = start if self.first_patch is None else min(self.first_patch, start)
                    self.last_patch = end if self.last_patch is None else max(self.last_patch, end)

    def get_node(self, name):
        return self._timed("get_node", name)

    def list_nodes(self, label_selector=None):
        return self._timed("list_nodes", label_selector)

    def patch_node_status(self, name, patch):
        return self._timed("patch_node_status", name, patch)


def main(argv):
    kubeconfig, selector, resource, count, parallelism = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4])
    t_imported = time.perf_counter()
    api = TimedApi(CoreNodeApi(build_api_client({"kubeconfig": kubeconfig}, pool_maxsize=parallelism)))
    t_client = time.perf_counter()
    results = apply_node_resources(api, {resource: count}, label_selector=selector, parallelism=parallelism)
    t_done = time.perf_counter()
    payload = json.dumps({"nodes": results, "changed": True})  # what the module hands back to Ansible
    t_json = time.perf_counter()
    print(json.dumps({
        "imports": t_imported - T0,
        "client": t_client - t_imported,
        "list": api.calls["list_nodes"][1],
        "patch_wall": (api.last_patch - api.first_patch) if api.first_patch else 0.0,
        "patch_calls": api.calls["patch_node_status"][0],
        "patch_sum": api.calls["patch_node_status"][1],
        "get_calls": api.calls["get_node"][0],
        "apply": t_done - t_client,
        "result_json": t_json - t_done,
        "result_bytes": len(payload),
        "changed": sum(1 for r in results if r["changed"]),
        "total": t_json - T0,
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
