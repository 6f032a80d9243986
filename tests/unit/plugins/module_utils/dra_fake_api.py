# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fake of module_utils.dra.ResourceSliceApi: Nodes and ResourceSlices in dicts, writes recorded, failures injectable."""

from __future__ import annotations

import copy

from ansible_collections.gpushare.k8s.plugins.module_utils.dra.devices import DraApiError


class FakeApi:
    def __init__(self, nodes=("dra-node-0", "dra-node-1", "dra-node-2"), real=(), slices=()):
        self.nodes = [{"metadata": {"name": n, "uid": "uid-" + n, "annotations": {} if n in real else {"kwok.x-k8s.io/node": "fake"}}}
                      for n in list(nodes) + list(real)]
        self.slices = {s["metadata"]["name"]: copy.deepcopy(s) for s in slices}
        self.writes = []
        self.fail_next = []
        self.version = 0

    def list_nodes(self):
        return copy.deepcopy(self.nodes)

    def list_slices(self, driver):
        return [copy.deepcopy(s) for s in self.slices.values() if s["spec"]["driver"] == driver]

    def list_pool(self, driver, pool):
        return [s for s in self.list_slices(driver) if s["spec"]["pool"]["name"] == pool]

    def _write(self, verb, name):
        self.writes.append((verb, name))
        if self.fail_next:
            raise self.fail_next.pop(0)

    def _store(self, body):
        self.version += 1
        self.slices[body["metadata"]["name"]] = dict(copy.deepcopy(body), metadata=dict(body["metadata"], resourceVersion=str(self.version)))

    def create(self, body):
        self._write("create", body["metadata"]["name"])
        self._store(body)

    def replace(self, body):
        self._write("replace", body["metadata"]["name"])
        if self.slices[body["metadata"]["name"]]["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise DraApiError(409, "the object has been modified")
        self._store(body)

    def delete(self, name):
        self._write("delete", name)
        self.slices.pop(name, None)
