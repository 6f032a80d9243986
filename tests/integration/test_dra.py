# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA lab (playbooks/dra.yml) on a fresh lab cluster of its own, beside the device-plugin lab.

One module-scoped setup: a fresh cluster (its DRA nodes created by playbooks/cluster.yml from the inventory),
a slice of another driver on a DRA node, ``--check --diff`` (nothing written), the real run. Then: a re-run
changes nothing; every sharing model as the scheduler allocated it, read from ResourceClaim status; the Pending
cases with the scheduler's reason, bound after the release; the quota refusal; the report; the request check on
claims; and the device-plugin lab applied after the DRA lab, then the DRA lab applied again after the device-plugin
lab, the device-plugin lab's own checks (the molecule scenario's verify.yml) passing each time.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

import conftest
from conftest import REPO
from lab_helpers import unique, wait_for
from reliability import OwnCluster, playbook, tail

# A cluster of its own, named after the one the run was given (gpushare-it-dra for the default cluster).
CLUSTER = "gpushare-it-dra" if conftest.CLUSTER == "gpushare" else f"{conftest.CLUSTER}-dra"
DRA = yaml.safe_load((REPO / "inventory" / "group_vars" / "all" / "dra.yml").read_text())
DRIVER = DRA["gpushare_dra_driver"]
NS, TEAM_NS = DRA["gpushare_dra_namespace"], DRA["gpushare_dra_team_namespace"]
DRA_NODES = [node["name"] for node in DRA["gpushare_dra_nodes"]]
WHOLE, SHARED, MIG = "dra-node-0", "dra-node-1", "dra-node-2"
TAINT = DRA["gpushare_dra_node_taints"][0]
GROUP, VERSION = "resource.k8s.io", "v1"
FOREIGN = "dra-node-0-example.com-0"


def recap(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith("localhost")]
    assert lines, tail(proc)
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", lines[-1])}


def digest(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


class Cluster:
    """The test cluster's API, as the tests read it."""

    def __init__(self, own: OwnCluster):
        api = config.new_client_from_config(config_file=str(own.kubeconfig))
        self.own = own
        self.core = client.CoreV1Api(api)
        self.resource = client.ResourceV1Api(api)

    def raw(self, method, *args, **kwargs):
        return json.loads(method(*args, _preload_content=False, **kwargs).data)

    def slices(self, driver=DRIVER):
        return self.raw(self.resource.list_resource_slice, field_selector=f"spec.driver={driver}")["items"]

    def claims(self, namespace=NS):
        return {c["metadata"]["name"]: c for c in self.raw(self.resource.list_namespaced_resource_claim, namespace)["items"]}

    def pod(self, name, namespace=NS):
        return self.raw(self.core.read_namespaced_pod, name, namespace)

    def pod_claim(self, name, namespace=NS):
        """The ResourceClaim a Pod holds (its own, a template's, or the bridge's implicit one)."""
        pod = self.pod(name, namespace)
        status = pod.get("status", {})
        names = [c.get("resourceClaimName") for c in pod["spec"].get("resourceClaims", [])]
        names += [c["resourceClaimName"] for c in status.get("resourceClaimStatuses", [])]
        names += [status.get("extendedResourceClaimStatus", {}).get("resourceClaimName")]
        [name] = [n for n in names if n]
        return self.raw(self.resource.read_namespaced_resource_claim, name, namespace)

    def events(self, pod, namespace=NS):
        return [e for e in self.raw(self.core.list_namespaced_event, namespace)["items"] if e["involvedObject"].get("name") == pod]

    def delete_pod_and_claim(self, name, namespace=NS):
        self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        self.resource.delete_namespaced_resource_claim(name, namespace)

    def reset_dra(self):
        """Remove what the DRA lab made (namespaces, classes, slices), so it runs again on a cluster without it."""
        for namespace in (NS, TEAM_NS):
            try:
                self.core.delete_namespace(namespace)
            except ApiException as exc:
                assert exc.status == 404, exc
        for name in ("gpu.nvidia.com", "mig.nvidia.com", "shared.gpu.nvidia.com"):
            try:
                self.resource.delete_device_class(name)
            except ApiException as exc:
                assert exc.status == 404, exc
        for item in self.slices():
            self.resource.delete_resource_slice(item["metadata"]["name"])
        wait_for(lambda: not {NS, TEAM_NS} & {n.metadata.name for n in self.core.list_namespace().items}, timeout=90, what="DRA namespaces gone")


def results(claim):
    return claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])


def scheduled(pod):
    return next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})


def devices_by_name(cluster, node):
    return {d["name"]: d for s in cluster.slices() if s["spec"]["pool"]["name"] == node for d in s["spec"].get("devices", [])}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    own = OwnCluster(CLUSTER).up()
    cluster = Cluster(own)
    root = tmp_path_factory.mktemp("dra") / "gpushare"
    variables = own.lab_vars(root)
    # Another driver's slice on a DRA node: the module must never touch it.
    foreign = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": FOREIGN},
               "spec": {"driver": "example.com", "nodeName": WHOLE, "pool": {"name": WHOLE, "generation": 7, "resourceSliceCount": 1},
                        "devices": [{"name": "fpga-0"}]}}
    cluster.resource.create_resource_slice(foreign)
    check = playbook("playbooks/dra.yml", variables, extra_args=["--check", "--diff"])
    after_check = {"slices": [s["metadata"]["name"] for s in cluster.slices()],
                   "classes": [c.metadata.name for c in cluster.resource.list_device_class().items],
                   "namespaces": {n.metadata.name for n in cluster.core.list_namespace().items}, "root": root.exists()}
    started = time.monotonic()
    first = playbook("playbooks/dra.yml", variables)
    seconds = time.monotonic() - started
    yield {"cluster": cluster, "root": root, "vars": variables, "check": check, "after_check": after_check, "first": first,
           "seconds": seconds}
    own.down()


def test_check_mode_on_a_fresh_cluster_writes_nothing(lab):
    proc = lab["check"]
    assert proc.returncode == 0, tail(proc)
    assert recap(proc)["changed"] > 0
    assert "gpu-0-mig-3g40gb-4" in proc.stdout and "dra-node-2-gpu.nvidia.com-1" in proc.stdout  # the diff shows the slices
    assert lab["after_check"] == {"slices": [], "classes": [], "root": False,
                                  "namespaces": lab["after_check"]["namespaces"] - {NS, TEAM_NS}}


def test_the_first_run_publishes_every_pool_and_writes_the_lab_files(lab):
    assert lab["first"].returncode == 0, tail(lab["first"])
    cluster = lab["cluster"]
    pools = {}
    for item in cluster.slices():
        pools.setdefault(item["spec"]["pool"]["name"], []).append(item)
    assert sorted(pools) == sorted(DRA_NODES)
    assert [len(pools[n]) for n in DRA_NODES] == [1, 1, 2]
    assert {s["spec"]["pool"]["generation"] for p in pools.values() for s in p} == {1}
    files = set(digest(lab["root"]))
    assert {"k8s/dra-device-classes.yaml", "k8s/dra-shared-claim.yaml", "k8s/dra-mig-next.yaml", "k8s/dra-bridge-gpu.yaml",
            "k8s/dra-quota.yaml", "k8s/dra-team-over.yaml", "bin/check-request.sh", "out/dra-placement.txt",
            "out/dra-sharing.txt", "out/dra-quota-denied.txt"} <= files
    # Another driver's slice on the same node is untouched.
    [other] = cluster.slices("example.com")
    assert other["metadata"]["name"] == FOREIGN and other["spec"]["pool"]["generation"] == 7


def test_a_second_run_changes_nothing(lab):
    before = digest(lab["root"])
    generations = {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in lab["cluster"].slices()}
    proc = playbook("playbooks/dra.yml", lab["vars"])
    assert proc.returncode == 0, tail(proc)
    assert recap(proc)["changed"] == 0, [line for line in proc.stdout.splitlines() if line.startswith(("TASK", "changed"))]
    assert digest(lab["root"]) == before
    assert {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in lab["cluster"].slices()} == generations


def test_the_mig_node_publishes_every_profile_sharing_the_gpus_counters(lab):
    cluster = lab["cluster"]
    [counters] = [s for s in cluster.slices() if s["spec"]["pool"]["name"] == MIG and "sharedCounters" in s["spec"]]
    assert counters["spec"]["sharedCounters"][0]["counters"]["compute-slices"]["value"] == "7"
    devices = devices_by_name(cluster, MIG)
    profiles = sorted({d["attributes"]["profile"]["string"] for d in devices.values()})
    assert profiles == ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"] and len(devices) == 18
    assert all(d["consumesCounters"][0]["counterSet"] == "gpu-0-counter-set" for d in devices.values())
    shared = devices_by_name(cluster, SHARED)["gpu-0"]
    assert shared["allowMultipleAllocations"] is True
    assert shared["capacity"]["memory"]["requestPolicy"] == {"default": "20Gi", "validValues": ["20Gi"]}


def test_a_claim_shared_by_several_pods(lab):
    cluster = lab["cluster"]
    claim = cluster.claims()["one-gpu"]
    [result] = results(claim)
    holders = sorted(ref["name"] for ref in claim["status"]["reservedFor"])
    assert holders == ["shared-claim-0", "shared-claim-1", "shared-claim-2"]
    assert {cluster.pod(name)["spec"]["nodeName"] for name in holders} == {result["pool"]} == {WHOLE}


def test_per_pod_claims_from_a_template_take_one_share_each(lab):
    cluster = lab["cluster"]
    per_device = {}
    for index in range(5):
        claim = cluster.pod_claim(f"share-{index}")
        [result] = results(claim)
        assert result["pool"] == SHARED and result["consumedCapacity"] == {"memory": "20Gi"} and result.get("shareID")
        per_device.setdefault(result["device"], []).append(claim["metadata"]["name"])
    assert len({n for names in per_device.values() for n in names}) == 5
    assert sorted(len(names) for names in per_device.values())[-1] <= 4 and len(per_device) == 2


def test_first_available_takes_a_mig_slice_then_a_share(lab):
    cluster = lab["cluster"]
    [first] = results(cluster.pod_claim("fallback-0"))
    [second] = results(cluster.pod_claim("fallback-1"))
    assert (first["request"], first["pool"], first["device"]) == ("gpu/mig", MIG, "gpu-0-mig-1g10gb-0")
    assert (second["request"], second["pool"]) == ("gpu/shared", SHARED)


def test_mig_claims_fill_the_gpu_exactly_and_the_next_one_is_pending(lab):
    cluster = lab["cluster"]
    held = {}
    for name in ("fallback-0", "mig-3g-40gb", "mig-2g-20gb", "mig-1g-10gb"):
        [result] = results(cluster.pod_claim(name))
        held[result["device"]] = name
    devices = devices_by_name(cluster, MIG)
    assert sum(int(devices[d]["consumesCounters"][0]["counters"]["compute-slices"]["value"]) for d in held) == 7
    slices = [c for d in held for c in devices[d]["consumesCounters"][0]["counters"] if c.startswith("memory-slice-")]
    assert len(slices) == len(set(slices)) == 8  # 1 + 4 + 2 + 1: every memory slice, none twice
    pending = cluster.pod("mig-next")
    assert not pending["spec"].get("nodeName") and scheduled(pending)["reason"] == "Unschedulable"
    assert not results(cluster.claims()["mig-next"])
    messages = [e["message"] for e in cluster.events("mig-next") if e["reason"] == "FailedScheduling"]
    assert any("cannot allocate all claims" in m for m in messages), messages


def test_an_unchanged_extended_resource_pod_is_served_through_the_bridge(lab):
    cluster = lab["cluster"]
    pod = cluster.pod("bridge-gpu")
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"} and "resourceClaims" not in pod["spec"]
    mapping = pod["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert mapping[0]["resourceName"] == "nvidia.com/gpu"
    claim = cluster.pod_claim("bridge-gpu")
    [result] = results(claim)
    assert result["pool"] == pod["spec"]["nodeName"] == WHOLE
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.nvidia.com"


def test_the_team_quota_refuses_a_claim_at_admission(lab):
    text = (lab["root"] / "out" / "dra-quota-denied.txt").read_text()
    assert "exceeded quota: dra-quota" in text and "gpu.nvidia.com.deviceclass.resource.k8s.io/devices" in text
    cluster = lab["cluster"]
    assert sorted(cluster.claims(TEAM_NS)) == ["team-claim-1", "team-claim-2"]
    with pytest.raises(ApiException) as refused:
        cluster.resource.create_namespaced_resource_claim(TEAM_NS, {"metadata": {"name": "one-more"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
    assert refused.value.status == 403 and "exceeded quota: dra-quota" in refused.value.body


def test_the_coverage_quota_refuses_what_the_team_quota_does_not_count(lab):
    """dra-quota counts devices of class gpu.nvidia.com and the nvidia.com/gpu that class serves (its
    extendedResourceName). Beside it, the collection's gpushare-gpu-coverage gives the team the same 2 of every other
    class the DRA nodes' devices fall in and of every other extended resource a Pod of the team can be given on this
    cluster (the device-plugin nodes' names): 3 MIG devices or 3 shares are refused at admission. The quota system
    counts a claim through gpu.nvidia.com as requests.nvidia.com/gpu too (measured: the team's two claims use 2 of it),
    so whole GPUs are one share of 2 however the team asks: with its two claims in place, even a Pod asking for one
    nvidia.com/gpu is refused. Expectations written by hand from inventory/."""
    cluster = lab["cluster"]
    coverage = cluster.core.read_namespaced_resource_quota("gpushare-gpu-coverage", TEAM_NS)
    assert coverage.spec.hard == {"mig.nvidia.com.deviceclass.resource.k8s.io/devices": "2", "shared.gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2",
                                  "requests.nvidia.com/mig-1g.10gb": "2"}
    team_hard = cluster.core.read_namespaced_resource_quota("dra-quota", TEAM_NS).spec.hard
    assert team_hard == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2", "requests.nvidia.com/gpu": "2"}
    for device_class in ("mig.nvidia.com", "shared.gpu.nvidia.com"):
        key = f"{device_class}.deviceclass.resource.k8s.io/devices"
        with pytest.raises(ApiException) as refused:
            cluster.resource.create_namespaced_resource_claim(TEAM_NS, {"metadata": {"name": "three"}, "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 3}}]}}})
        assert refused.value.status == 403
        assert f"exceeded quota: gpushare-gpu-coverage, requested: {key}=3, used: {key}=0, limited: {key}=2" in refused.value.body
    pod = {"metadata": {"name": "one-gpu"}, "spec": {"containers": [{"name": "cuda", "image": "registry.k8s.io/pause:3.10",
                                                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    with pytest.raises(ApiException) as refused:
        cluster.core.create_namespaced_pod(TEAM_NS, pod)
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert ("exceeded quota: dra-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, "
            "limited: requests.nvidia.com/gpu=2") in message, message


def test_the_report_names_who_holds_each_device(lab):
    report = (lab["root"] / "out" / "dra-placement.txt").read_text().splitlines()
    assert "  gpu-0 = gpu-dra/shared-claim-0, gpu-dra/shared-claim-1, gpu-dra/shared-claim-2" in report
    assert "  gpu-1 = gpu-dra/bridge-gpu" in report
    assert "  gpu-0: 7 of 7 compute slices allocated" in report and "  gpu-0-mig-1g10gb-0 = gpu-dra/fallback-0" in report
    assert any(line.startswith("  gpu-0 = gpu-dra/share-0") and line.endswith("(4 of 4 shares)") for line in report), report
    assert any(line.startswith("Pending gpu-dra/mig-next:") and "cannot allocate all claims" in line for line in report), report
    table = (lab["root"] / "out" / "dra-sharing.txt").read_text()
    assert table.startswith("| | Device plugin (the lab) | DRA (the DRA lab) |") and "`firstAvailable`" in table


def test_the_request_check_and_the_scheduler_refuse_a_claim_for_two_shares(lab, tmp_path):
    two_shares = {"deviceClassName": "shared.gpu.nvidia.com", "capacity": {"requests": {"memory": "40Gi"}}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "two-shares", "namespace": NS},
             "spec": {"devices": {"requests": [{"name": "share", "exactly": two_shares}]}}}
    manifest = tmp_path / "two-shares.yaml"
    manifest.write_text(yaml.safe_dump(claim))
    check = subprocess.run([str(lab["root"] / "bin" / "check-request.sh"), str(manifest)], capture_output=True, text=True, check=False)
    assert (check.returncode, check.stdout) == (1, "OVER=two-shares/share=2\n"), check.stderr
    cluster = lab["cluster"]
    cluster.resource.create_namespaced_resource_claim(NS, claim)
    cluster.core.create_namespaced_pod(NS, {"metadata": {"name": "two-shares"}, "spec": {
        "tolerations": [dict(TAINT, operator="Equal")], "resourceClaims": [{"name": "share", "resourceClaimName": "two-shares"}],
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "share"}]}}]}})
    pod = wait_for(lambda: scheduled(cluster.pod("two-shares")).get("reason") == "Unschedulable" and cluster.pod("two-shares"),
                   timeout=30, what="the scheduler's verdict on two-shares")
    assert not pod["spec"].get("nodeName") and "cannot allocate all claims" in scheduled(pod)["message"]
    cluster.delete_pod_and_claim("two-shares")


def test_the_pending_mig_claim_is_allocated_once_a_slice_is_released(lab):
    cluster = lab["cluster"]
    cluster.delete_pod_and_claim("mig-1g-10gb")
    pod = wait_for(lambda: cluster.pod("mig-next")["spec"].get("nodeName") and cluster.pod("mig-next"), timeout=60,
                   what="mig-next bound after mig-1g-10gb was released")
    [result] = results(cluster.pod_claim("mig-next"))
    assert pod["spec"]["nodeName"] == result["pool"] == MIG and result["device"].startswith("gpu-0-mig-1g10gb-")


def test_the_device_plugin_lab_after_the_dra_lab_then_the_dra_lab_again(lab, tmp_path):
    cluster = lab["cluster"]
    # An unchanged nvidia.com/gpu Pod with no toleration never lands on a DRA node, although the bridge class exists:
    # with no device-plugin node advertising the name yet, it waits.
    probe = unique("plain")
    cluster.core.create_namespaced_pod(NS, {"metadata": {"name": probe}, "spec": {"containers": [
        {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    pod = wait_for(lambda: scheduled(cluster.pod(probe)).get("reason") == "Unschedulable" and cluster.pod(probe), timeout=30,
                   what=f"the scheduler's verdict on {probe}")
    assert "untolerated taint" in scheduled(pod)["message"] and not pod["spec"].get("nodeName")
    cluster.core.delete_namespaced_pod(probe, NS, grace_period_seconds=0)

    # The device-plugin lab on a cluster that runs the DRA lab: its Pods are created with the bridge in place.
    root = tmp_path / "gpushare"
    lab_vars = cluster.own.lab_vars(root)
    proc = playbook("playbooks/lab.yml", lab_vars)
    assert proc.returncode == 0, tail(proc)
    plain = cluster.pod("plain-gpu", "gpu-share")["spec"]["nodeName"]
    assert plain in ("lab-node-0", "lab-node-1")

    # Then the other order: the DRA lab applied afresh on a cluster that runs the device-plugin lab.
    cluster.reset_dra()
    proc = playbook("playbooks/dra.yml", lab["vars"])
    assert proc.returncode == 0, tail(proc)
    assert cluster.pod("plain-gpu", "gpu-share")["spec"]["nodeName"] == plain
    on_dra = [f"{p.metadata.namespace}/{p.metadata.name}" for p in cluster.core.list_pod_for_all_namespaces().items
              if p.spec.node_name in DRA_NODES and p.metadata.namespace != NS]
    assert on_dra == []
    # The device-plugin lab's own checks (the molecule scenario's verify.yml) pass with both labs applied.
    proc = playbook(REPO / "extensions" / "molecule" / "default" / "verify.yml", lab_vars)
    assert proc.returncode == 0, tail(proc)
