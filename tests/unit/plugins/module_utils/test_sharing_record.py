# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The configure-only role's record of earlier values, and the undo planned from it (the live round trip, byte for byte:
tests/integration/test_gpu_sharing.py)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia import sharing_record as sr

PATCH = {"spec": {"devicePlugin": {"config": {"name": "device-plugin-configs", "default": "default"}}, "mig": {"strategy": "mixed"},
                  "migManager": {"config": {"name": "gpushare-mig-parted-config", "default": "all-disabled"}}}}
POLICY = {"metadata": {"name": "cluster-policy"},
          "spec": {"mig": {"strategy": "single"}, "migManager": {"config": {"name": "default-mig-parted-config", "default": "all-disabled"}},
                   "driver": {"enabled": True}}}


def node(name, labels=None, allocatable=None):
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "status": {"allocatable": dict(allocatable or {})}}


def managed(key):
    return key.startswith("nvidia.com/gpu.") or key == "nvidia.com/mig.strategy"


NODES = [node("a", {"nvidia.com/gpu.product": "P", "kubernetes.io/os": "linux", "nvidia.com/mig.strategy": "single"},
              {"cpu": "8", "nvidia.com/gpu": "2"}),
         node("b", {"nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success"}, {"nvidia.com/gpu": "2"})]
ENTRIES = [{"name": "a", "gpus": 2, "product": "P", "config": "shared"}, {"name": "b", "gpus": 2, "mig": {"product": "Q", "profile": "1g.10gb"}}]


def first_record(configmaps=None):
    return sr.extend(None, POLICY, PATCH, "patch", configmaps or {"dp": (None, ["default", "shared"]), "mp": (None, ["config.yaml"])},
                     NODES, ENTRIES, managed)


def test_an_absent_parent_is_recorded_at_the_level_that_was_absent():
    fields = first_record()["policy"]["fields"]
    assert fields == [[["devicePlugin"], None], [["mig", "strategy"], "single"], [["migManager", "config", "name"], "default-mig-parted-config"],
                      [["migManager", "config", "default"], "all-disabled"]]


def test_nodes_record_their_labels_and_what_they_advertised():
    nodes = first_record()["nodes"]
    assert nodes["a"] == {"gpus": 2, "product": "P", "resources": {"nvidia.com/gpu": "2"}, "baseline": True,
                          "labels": {"nvidia.com/gpu.product": "P", "nvidia.com/mig.strategy": "single"},
                          "owned": {"nvidia.com/device-plugin.config": None, "nvidia.com/mig.config": None, "nvidia.com/mig.config.state": None}}
    assert nodes["b"]["product"] == "Q" and nodes["b"]["owned"]["nvidia.com/mig.config"] == "all-disabled"


def test_a_later_run_never_overwrites_what_the_first_recorded():
    record = first_record()
    changed_policy = {"spec": PATCH["spec"]}
    later_nodes = [node("a", {"nvidia.com/device-plugin.config": "shared"}, {"nvidia.com/gpu": "8"}), node("c", {}, {"nvidia.com/gpu": "4"})]
    later = sr.extend(record, changed_policy, PATCH, "patch", {"dp": ({"default": "x", "shared": "y"}, ["default", "shared", "mps"])},
                      later_nodes, ENTRIES + [{"name": "c", "gpus": 4, "product": "P", "config": "shared"}], managed)
    assert later["policy"] == record["policy"]
    assert later["configmaps"]["dp"] == {"created": True}
    assert later["nodes"]["a"] == record["nodes"]["a"]
    # a node the cluster did not have at the first run: recorded when first configured, its labels put back by the undo,
    # but what it advertised before the collection's ClusterPolicy cannot be known: no wait for it
    assert later["nodes"]["c"]["resources"] == {"nvidia.com/gpu": "4"} and later["nodes"]["c"]["baseline"] is False
    plan = sr.undo_plan(later, changed_policy, None, {}, later_nodes)
    assert "c" in plan["node_labels"] and "c" not in plan["expected"] and "a" in plan["expected"]
    assert record["nodes"].keys() == {"a", "b"}, "extend changed its argument"


def test_keys_written_into_a_configmap_the_role_did_not_create_keep_their_earlier_values():
    record = first_record({"dp": ({"default": "theirs", "other": "kept"}, ["default", "shared"])})
    assert record["configmaps"]["dp"] == {"created": False, "keys": {"default": "theirs", "shared": None}}
    plan = sr.undo_plan(record, POLICY, None, {"dp": {"default": "ours", "shared": "ours", "other": "kept"}}, NODES)
    assert plan["configmaps_patch"] == {"dp": {"default": "theirs", "shared": None}}
    assert plan["configmaps_delete"] == []


def test_undo_puts_back_the_policy_labels_and_configmaps():
    record = first_record()
    now = [node("a", {"nvidia.com/device-plugin.config": "shared"}, {"nvidia.com/gpu": "8"}),
           node("b", {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success"}, {"nvidia.com/mig-1g.10gb": "14"})]
    plan = sr.undo_plan(record, {"spec": PATCH["spec"]}, None, {"dp": {}, "mp": {}}, now)
    assert plan["policy_patch"] == {"spec": {"devicePlugin": None, "mig": {"strategy": "single"},
                                             "migManager": {"config": {"name": "default-mig-parted-config", "default": "all-disabled"}}}}
    assert plan["configmaps_delete"] == ["dp", "mp"]
    assert plan["node_labels"]["a"] == {"nvidia.com/device-plugin.config": None, "nvidia.com/mig.config": None, "nvidia.com/mig.config.state": None}
    assert plan["expected"]["a"] == {"resources": {"nvidia.com/gpu": "2"}, "labels": {"nvidia.com/gpu.product": "P", "nvidia.com/mig.strategy": "single"}}
    # b had all-disabled: its MIG manager is asked for it again and waited for before its label goes back
    assert plan["mig_reset"] == [{"name": "b", "gpus": 2, "product": "Q"}]


def test_a_node_gone_from_the_cluster_is_skipped_and_a_configmap_gone_is_not_deleted():
    plan = sr.undo_plan(first_record(), POLICY, None, {"mp": {}}, [NODES[0]])
    assert list(plan["node_labels"]) == ["a"] and list(plan["expected"]) == ["a"]
    assert plan["configmaps_delete"] == ["mp"]


def test_helm_values_are_recorded_and_put_back_with_the_others_kept():
    values = {"driver": {"enabled": False}, "mig": {"strategy": "single"}}
    record = sr.extend(None, POLICY, PATCH, "helm", {}, [], [], managed, values, {"name": "gpu-operator", "namespace": "gpu-operator"})
    assert record["policy"]["via"] == "helm" and record["policy"]["release"] == {"name": "gpu-operator", "namespace": "gpu-operator"}
    configured = sr.merged_values(values, PATCH["spec"])
    assert configured["driver"] == {"enabled": False} and configured["devicePlugin"]["config"]["name"] == "device-plugin-configs"
    configured["toolkit"] = {"enabled": True}  # changed by someone else since: kept
    plan = sr.undo_plan(record, POLICY, configured, {}, [])
    assert plan["values"] == {"driver": {"enabled": False}, "mig": {"strategy": "single"}, "toolkit": {"enabled": True}}
    assert plan["policy_patch"] is None and plan["release"]["name"] == "gpu-operator"


def test_the_record_text_is_stable_and_read_back():
    record = first_record()
    text = sr.dump(record)
    assert sr.dump(sr.load({sr.RECORD_KEY: text})) == text
    assert sr.load(None) == sr.load({}) == {"version": 1, "policy": None, "configmaps": {}, "nodes": {}}


@pytest.mark.parametrize("text, problem", [("{", "is not JSON"), (json.dumps({"version": 9}), "is not a version 1 record")])
def test_a_damaged_record_is_refused_naming_it(text, problem):
    with pytest.raises(sr.RecordError) as error:
        sr.load({sr.RECORD_KEY: text}, "ConfigMap gpushare-sharing-record")
    assert str(error.value).startswith("ConfigMap gpushare-sharing-record record.json: " + problem)
    assert "Fix:" in str(error.value)


def test_helm_release_and_chart_version():
    owned = {"metadata": {"annotations": {"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"}}}
    assert sr.helm_release(owned) == {"name": "gpu-operator", "namespace": "gpu-operator"}
    assert sr.helm_release({"metadata": {"annotations": {"meta.helm.sh/release-name": "x"}}}) is None
    assert sr.chart_version("gpu-operator-v25.3.0", "nvidia/gpu-operator") == "v25.3.0"
    assert sr.chart_version("gpu-operator-lab-0.1.0", "/charts/gpu-operator-lab") is None
    with pytest.raises(sr.RecordError, match="installed from other-1.0"):
        sr.chart_version("other-1.0", "nvidia/gpu-operator")


def test_the_first_run_records_every_gpu_node_so_one_that_joins_a_pool_later_is_put_back_as_it_was():
    idle = node("idle", {"nvidia.com/gpu.count": "4", "nvidia.com/mig.strategy": "single"}, {"nvidia.com/gpu": "4"})
    cpu = node("cpu-only", {"kubernetes.io/os": "linux"}, {"cpu": "8"})
    record = sr.extend(None, POLICY, PATCH, "patch", {}, NODES + [idle, cpu], ENTRIES, managed)
    assert sorted(record["nodes"]) == ["a", "b", "idle"]
    assert record["nodes"]["idle"]["baseline"] is True and record["nodes"]["idle"]["gpus"] == 4
    joined = node("idle", {"nvidia.com/gpu.count": "4", "nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "4"})
    later = sr.extend(record, {"spec": PATCH["spec"]}, PATCH, "patch", {}, [joined], [{"name": "idle", "gpus": 4, "product": "P", "config": "shared"}],
                      managed)
    assert later["nodes"]["idle"]["labels"] == {"nvidia.com/gpu.count": "4", "nvidia.com/mig.strategy": "single"}
    assert later["nodes"]["idle"]["product"] == "P"


# --------------------------------------------------------------------------- a record the undo can trust

RELEASE = {"meta.helm.sh/release-name": "gpu-operator", "meta.helm.sh/release-namespace": "gpu-operator"}
OWNED_CONFIGMAPS = {"dp": None, "mp": ["config.yaml"]}


def sealed(text, policy=None, current=None, annotations=None):
    """``policy`` (POLICY by default) carrying the seal the role writes before it writes ``text`` over ``current``."""
    policy = json.loads(json.dumps(POLICY if policy is None else policy))
    policy["metadata"]["annotations"] = dict(annotations or {}, **{sr.SEAL_ANNOTATION: sr.seal(current, text)})
    return policy


def planted(**changes):
    """A record text as the role writes it, with ``changes`` (dotted paths) made by someone else."""
    record = first_record()
    for path, value in changes.items():
        node = record
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return sr.dump(record)


def refusal(text, policy, configmaps=None):
    with pytest.raises(sr.RecordError) as error:
        sr.load({sr.RECORD_KEY: text}, "ConfigMap gpushare-sharing-record", policy, OWNED_CONFIGMAPS if configmaps is None else configmaps)
    message = str(error.value)
    assert "Fix:" in message
    return message


def test_a_record_the_role_wrote_loads_under_its_seal_and_undoes_as_before():
    text = sr.dump(first_record())
    policy = sealed(text)
    record = sr.load({sr.RECORD_KEY: text}, "ConfigMap r", policy, OWNED_CONFIGMAPS)
    assert sr.dump(record) == text
    assert sr.undo_plan(record, policy, None, {"dp": {}, "mp": {}}, NODES) == sr.undo_plan(first_record(), policy, None, {"dp": {}, "mp": {}}, NODES)


def test_a_record_planted_before_the_first_run_carries_no_seal_and_is_refused():
    message = refusal(planted(**{"policy.fields": [[["driver", "repository"], "evil.example.com/nvidia"]]}), POLICY)
    assert message.startswith("ConfigMap gpushare-sharing-record record.json: carries no seal")
    assert "gpushare.k8s/sharing-record" in message


def test_a_record_edited_after_the_role_wrote_it_is_refused_by_its_digest():
    text = sr.dump(first_record())
    edited = text.replace('"single"', '"mixed"')
    assert edited != text
    assert "was changed after the collection wrote it" in refusal(edited, sealed(text))


def test_the_record_of_a_run_stopped_between_the_seal_and_the_record_write_is_still_read():
    earlier = sr.dump(first_record())
    later = planted(**{"nodes.a.gpus": 4})
    policy = sealed(later, current=earlier)  # the seal of the write that did not happen
    assert sr.load({sr.RECORD_KEY: earlier}, "r", policy, OWNED_CONFIGMAPS)["nodes"]["a"]["gpus"] == 2


def test_an_unchanged_record_keeps_its_seal_so_a_rerun_writes_nothing():
    text = sr.dump(first_record())
    policy = sealed(text)
    assert sr.seal(text, text, policy) == policy["metadata"]["annotations"][sr.SEAL_ANNOTATION]
    assert json.loads(sr.seal(text, text + " "))["previous"] == json.loads(policy["metadata"]["annotations"][sr.SEAL_ANNOTATION])["sha256"]


@pytest.mark.parametrize("changes, field, problem", [
    ({"policy.fields": [[["driver", "repository"], "evil.example.com/nvidia"]]}, "policy.fields[0]", "never sets"),
    ({"policy.fields": [[["devicePlugin", "env"], [{"name": "X", "value": "y"}]]]}, "policy.fields[0]", "never sets"),
    ({"policy.fields": [[["devicePlugin", "config"], {"name": "theirs"}]]}, "policy.fields[0]", "recorded only as absent"),
    ({"policy.fields": [[["mig", "strategy"], {"nested": "object"}]]}, "policy.fields[0]", "hold a name or a strategy"),
    ({"configmaps.unrelated-config": {"created": True}}, "configmaps", "which the collection does not write"),
    ({"configmaps.mp": {"created": False, "keys": {"other.yaml": None}}}, "configmaps.mp.keys", "does not write there"),
    ({"nodes.a.owned": {"node-role.kubernetes.io/control-plane": ""}}, "nodes.a.owned", "fields the collection does not write"),
    ({"nodes.a.owned": {"topology.kubernetes.io/zone": "evil"}}, "nodes.a.owned", "fields the collection does not write"),
    ({"nodes.a.gpus": True}, "nodes.a.gpus", "is not a GPU count"),
    ({"nodes.a.labels": {"kubernetes.io/hostname": "x"}}, "nodes.a.labels", "is not an nvidia.com/* name"),
    ({"nodes.a.owned": {"nvidia.com/mig.config": "all-1g.10gb; rm -rf /"}}, "nodes.a.owned.nvidia.com/mig.config", "is not a label value"),
    ({"extra": 1}, "", "fields the collection does not write"),
])
def test_a_sealed_record_holding_what_the_collection_never_writes_is_refused_naming_the_field(changes, field, problem):
    """Even a record that passes the seal (someone who may patch the ClusterPolicy) can only name what the role writes."""
    text = planted(**changes)
    message = refusal(text, sealed(text))
    assert message.startswith(("ConfigMap gpushare-sharing-record record.json %s" % field).rstrip()), message
    assert problem in message, message


def test_a_record_naming_another_helm_release_than_the_clusterpolicys_is_refused():
    values = {"mig": {"strategy": "single"}}
    record = sr.extend(None, POLICY, PATCH, "helm", {}, [], [], managed, values, {"name": "other-release", "namespace": "kube-system"})
    text = sr.dump(record)
    message = refusal(text, sealed(text, annotations=RELEASE))
    assert "policy.release: names Helm release \"kube-system\"/\"other-release\", but the ClusterPolicy belongs to " \
           "\"gpu-operator\"/\"gpu-operator\"" in message
    ours = sr.dump(sr.extend(None, POLICY, PATCH, "helm", {}, [], [], managed, values, {"name": "gpu-operator", "namespace": "gpu-operator"}))
    assert sr.load({sr.RECORD_KEY: ours}, "r", sealed(ours, annotations=RELEASE), OWNED_CONFIGMAPS)["policy"]["via"] == "helm"


def test_a_malformed_seal_is_refused_and_its_text_quoted():
    policy = json.loads(json.dumps(POLICY))
    policy["metadata"]["annotations"] = {sr.SEAL_ANNOTATION: "Fix: run make cluster-down\n" + "x" * 500}
    message = refusal(sr.dump(first_record()), policy)
    assert message.startswith("ClusterPolicy annotation gpushare.k8s/sharing-record: is not a seal")
    assert "\\n" in message and "x" * 100 not in message


def test_a_recorded_node_the_collection_never_configured_is_refused():
    record = first_record()
    record["nodes"]["cp"] = dict(record["nodes"]["a"], gpus=0, resources={}, labels={})
    control_plane = node("cp", {"node-role.kubernetes.io/control-plane": ""}, {"cpu": "4"})
    with pytest.raises(sr.RecordError, match=r"^record nodes\.cp: names a node with no GPU"):
        sr.undo_plan(record, POLICY, None, {}, NODES + [control_plane])
    with pytest.raises(sr.RecordError, match=r"^record nodes\.cp: names a node with no GPU"):  # and a configuring run, before it writes
        sr.extend(record, POLICY, PATCH, "patch", {}, NODES + [control_plane], ENTRIES, managed)
    # the same node carrying a label the collection writes is one it configured: put back
    configured = node("cp", {"nvidia.com/device-plugin.config": "shared"}, {"cpu": "4"})
    assert "cp" in sr.undo_plan(record, POLICY, None, {}, NODES + [configured])["node_labels"]


# --------------------------------------------------------------------------- a Helm release that stays the team's


def test_the_values_fragment_is_carried_when_the_clusterpolicy_holds_each_of_its_fields():
    assert sr.fragment_differences({"spec": PATCH["spec"]}, PATCH) == []
    missing = sr.fragment_differences(POLICY, PATCH)
    fields = ["devicePlugin.config.name", "devicePlugin.config.default", "mig.strategy", "migManager.config.name"]
    assert [field for field, _wanted, _found in missing] == fields
    assert ("mig.strategy", "mixed", "single") in missing


def test_helm_owner_of_an_object():
    assert sr.helm_owner({"metadata": {"annotations": RELEASE}}) == {"name": "gpu-operator", "namespace": "gpu-operator"}
    assert sr.helm_owner({"metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm"}}}) == {}
    assert sr.helm_owner({"metadata": {"labels": {"app.kubernetes.io/managed-by": "gpushare.k8s"}}}) is None


def test_the_undo_refuses_to_delete_a_configmap_the_clusterpolicy_still_names():
    """The team's release carries the fragment (a record of no policy field): deleting the ConfigMaps would leave the operator
    pointing at nothing; refused before any write. Once the release no longer names them, the undo deletes them."""
    record = sr.extend(None, POLICY, {"spec": {}}, "patch", {"dp": (None, ["default"]), "mp": (None, ["config.yaml"])}, NODES, ENTRIES,
                       managed)
    assert record["policy"] == {"via": "patch", "fields": []}
    carried = {"spec": {"devicePlugin": {"config": {"name": "dp", "default": "default"}}, "migManager": {"config": {"name": "mp"}}}}
    with pytest.raises(sr.RecordError, match=r'^ClusterPolicy spec\.devicePlugin\.config\.name: names ConfigMap "dp", which the undo would '):
        sr.undo_plan(record, carried, None, {"dp": {}, "mp": {}}, NODES)
    plan = sr.undo_plan(record, POLICY, None, {"dp": {}, "mp": {}}, NODES)
    assert plan["configmaps_delete"] == ["dp", "mp"] and plan["policy_patch"] is None
    # a record of the fields the collection patched puts the pointers back first: no refusal
    by_patch = sr.extend(None, POLICY, carried, "patch", {"dp": (None, ["default"]), "mp": (None, ["config.yaml"])}, NODES, ENTRIES, managed)
    patched = sr.undo_plan(by_patch, carried, None, {"dp": {}, "mp": {}}, NODES)
    assert patched["configmaps_delete"] == ["dp", "mp"] and patched["policy_patch"]["spec"]["devicePlugin"] is None
