#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The naive request check the benchmark compares check_request.py with.

    naive_check.py <manifest> [--libyaml]

What one would write first: ``yaml.safe_load_all`` builds every document as Python
objects (all of them kept in a list), then a walk visits every container of every workload
and prints ``OVER=<container>=<count>`` for each one asking for more than 1
``nvidia.com/gpu`` in ``limits`` or ``requests`` (exit 1), or ``OK`` (exit 0). Same kinds,
same container fields and the same output as the collection's check, so the two can be
compared line for line; none of its guards (size, depth, aliases, tags, error messages).
``--libyaml`` loads with ``yaml.CSafeLoader`` instead of the pure-Python default.
"""

from __future__ import annotations

import sys

import yaml

PATHS = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def walk(obj, out):
    if not isinstance(obj, dict):
        return
    kind = obj.get("kind")
    if kind == "List":
        for item in obj.get("items") or []:
            walk(item, out)
        return
    spec = obj
    for key in PATHS.get(kind, ()):
        spec = (spec or {}).get(key)
    if kind not in PATHS or not spec:
        return
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(field) or []:
            resources = container.get("resources") or {}
            count = max(int((resources.get(section) or {}).get("nvidia.com/gpu", 0)) for section in ("limits", "requests"))
            if count > 1:
                out.append("OVER=%s=%d" % (container.get("name"), count))


def main(argv):
    loader = yaml.CSafeLoader if "--libyaml" in argv else yaml.SafeLoader
    path = [a for a in argv if not a.startswith("--")][0]
    with open(path) as handle:
        documents = list(yaml.load_all(handle, Loader=loader)) if loader is not yaml.SafeLoader else list(yaml.safe_load_all(handle))
    out = []
    for document in documents:
        walk(document, out)
    print("\n".join(out) if out else "OK")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
