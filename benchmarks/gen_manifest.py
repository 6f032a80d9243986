#!/usr/bin/env python
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a deterministic multi-document manifest for the request-check benchmark.

    gen_manifest.py OUT [--documents 10000] [--seed 6]

A realistic mix of workloads, one per document: Pods (40 %), Deployments (25 %), Jobs (15 %),
CronJobs (10 %), StatefulSets (5 %) and Lists of two Pods (5 %). Each has 1-3 containers, a
third of the Pod specs an init container, half a node selector; GPU counts sit in limits, requests or both, mostly
0 or 1; about 1 % of the containers ask for 2-4 `nvidia.com/gpu` (the offenders). About 650 bytes and 28 lines per document on average,
the size of the lab's own Pod manifests. Only the
standard library is used, so the text is the same on every machine.
"""

from __future__ import annotations

import argparse
import random

KINDS = [("Pod", 40), ("Deployment", 25), ("Job", 15), ("CronJob", 10), ("StatefulSet", 5), ("List", 5)]


def container(rng, name, indent):
    pad = " " * indent
    lines = [
        "%s- name: %s" % (pad, name),
        "%s  image: registry.k8s.io/pause:3.10" % pad,
        "%s  resources:" % pad,
    ]
    roll = rng.random()
    gpus = rng.randint(2, 4) if roll < 0.01 else (1 if roll < 0.6 else 0)
    where = rng.choice(("limits", "requests", "both"))
    for section in ("limits", "requests"):
        lines.append("%s    %s:" % (pad, section))
        lines.append("%s      memory: %dMi" % (pad, rng.choice((128, 256, 512, 1024))))
        if gpus and (where == section or where == "both"):
            lines.append("%s      nvidia.com/gpu: %d" % (pad, gpus))
    return lines


def pod_spec(rng, name, indent):
    pad = " " * indent
    lines = []
    if rng.random() < 0.5:
        lines.append("%snodeSelector: {nvidia.com/device-plugin.config: shared}" % pad)
    if rng.random() < 0.33:
        lines.append("%sinitContainers:" % pad)
        lines += container(rng, "%s-init" % name, indent)
    lines.append("%scontainers:" % pad)
    for index in range(rng.randint(1, 3)):
        lines += container(rng, "%s-c%d" % (name, index), indent)
    return lines


def metadata(name, indent, namespace=True):
    pad = " " * indent
    lines = ["%smetadata:" % pad, "%s  name: %s" % (pad, name)]
    if namespace:
        lines.append("%s  namespace: bench" % pad)
    lines.append("%s  labels: {app: %s}" % (pad, name))
    return lines


def document(rng, index):
    kind = rng.choices([k for k, _weight in KINDS], weights=[w for _kind, w in KINDS])[0]
    name = "w%05d" % index
    if kind == "Pod":
        return ["apiVersion: v1", "kind: Pod"] + metadata(name, 0) + ["spec:"] + pod_spec(rng, name, 2)
    if kind == "List":
        lines = ["apiVersion: v1", "kind: List", "items:"]
        for item in range(2):
            item_name = "%s-%d" % (name, item)
            lines += ["  - apiVersion: v1", "    kind: Pod"] + metadata(item_name, 4) + ["    spec:"] + pod_spec(rng, item_name, 6)
        return lines
    if kind == "CronJob":
        return (
            ["apiVersion: batch/v1", "kind: CronJob"] + metadata(name, 0)
            + ["spec:", "  schedule: \"*/5 * * * *\"", "  jobTemplate:", "    spec:", "      template:"]
            + metadata(name, 8, namespace=False) + ["        spec:"] + pod_spec(rng, name, 10)
        )
    api = "batch/v1" if kind == "Job" else "apps/v1"
    lines = ["apiVersion: %s" % api, "kind: %s" % kind] + metadata(name, 0) + ["spec:"]
    if kind != "Job":
        lines += ["  replicas: %d" % rng.randint(1, 4), "  selector:", "    matchLabels: {app: %s}" % name]
    lines += ["  template:"] + metadata(name, 4, namespace=False) + ["    spec:"] + pod_spec(rng, name, 6)
    return lines


def generate(documents, seed=6):
    rng = random.Random(seed)
    out = []
    for index in range(documents):
        out.append("---")
        out += document(rng, index)
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--documents", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args()
    with open(args.out, "w") as handle:
        handle.write(generate(args.documents, args.seed))


if __name__ == "__main__":
    main()
