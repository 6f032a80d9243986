# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The intent vocabulary's params and objects (module_utils/requests/intents.py); expectations written by hand."""
from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.requests import intents

LABEL = "nvidia.com/device-plugin.config"
CONFIGS = {
    "default": {"version": "v1", "flags": {"migStrategy": "none"}},
    "shared": {"version": "v1", "flags": {"migStrategy": "none"},
               "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
    "renamed": {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
    "single": {"version": "v1", "flags": {"migStrategy": "single"}},
}
LAB_NODES = [
    {"name": "lab-node-0", "gpus": 2, "config": "default"},
    {"name": "lab-node-1", "gpus": 2, "config": "shared"},
    {"name": "lab-node-2", "gpus": 2, "mig": {"product": "NVIDIA-A100-SXM4-80GB", "profile": "1g.10gb", "gpus": 1}},
]


def pool(name, config=None, mig=None, labels=None):
    entry = {"name": name, "selector": {"matchLabels": labels or {LABEL: config or name}}}
    entry.update({"config": config} if config else {"mig": mig})
    return entry


def test_lab_pools():
    assert intents.lab_pools(LAB_NODES) == [
        {"name": "default", "selector": {"matchLabels": {LABEL: "default"}}, "config": "default"},
        {"name": "shared", "selector": {"matchLabels": {LABEL: "shared"}}, "config": "shared"},
        {"name": "mig-1g-10gb", "selector": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["lab-node-2"]}]},
         "mig": {"profile": "1g.10gb"}},
    ]


def test_lab_params_data():
    data = intents.params_data(intents.intent_params(intents.lab_pools(LAB_NODES), CONFIGS))
    assert data == {
        "intents": "1g.10gb,isolated,shared,whole",
        "summary": "pools: default gives whole as nvidia.com/gpu; shared gives shared as nvidia.com/gpu (at most 1 per container); "
                   "mig-1g-10gb gives isolated as nvidia.com/mig-1g.10gb, 1g.10gb as nvidia.com/mig-1g.10gb",
        "intent.whole.resource": "nvidia.com/gpu", "intent.whole.max": "", "intent.whole.terms": LABEL + " In default",
        "intent.shared.resource": "nvidia.com/gpu", "intent.shared.max": "1", "intent.shared.terms": LABEL + " In shared",
        "intent.isolated.resource": "nvidia.com/mig-1g.10gb", "intent.isolated.max": "", "intent.isolated.terms": "kubernetes.io/hostname In lab-node-2",
        "intent.1g.10gb.resource": "nvidia.com/mig-1g.10gb", "intent.1g.10gb.max": "", "intent.1g.10gb.terms": "kubernetes.io/hostname In lab-node-2",
        "intent.whole.form": "resource", "intent.shared.form": "resource", "intent.isolated.form": "resource", "intent.1g.10gb.form": "resource",
    }


def test_renamed_shares_and_two_pools_of_one_intent():
    pools = [pool("a", "shared"), pool("b", "shared", labels={"pool": "b", "zone": "x"}), pool("r", "renamed")]
    params = intents.intent_params(pools, CONFIGS)
    # two pools give shared as nvidia.com/gpu, one as nvidia.com/gpu.shared: the name most pools give wins
    assert params["intents"]["shared"] == {"form": "resource", "resource": "nvidia.com/gpu", "max": 1, "pools": ["a", "b"],
                                           "terms": [[[LABEL, "In", "shared"]], [["pool", "In", "b"], ["zone", "In", "x"]]]}
    assert intents.params_data(params)["intent.shared.terms"] == LABEL + " In shared|pool In b;zone In x"
    assert params["pools"][2]["gives"] == [{"intent": "shared", "form": "resource", "resource": "nvidia.com/gpu.shared", "max": None,
                                            "note": "time-slicing x2", "profile": None}]


def test_one_empty_value_stays_apart_from_no_values():
    """A selector's ``values: [""]`` (one empty value, what ``In``/``NotIn`` may name) keeps its value in ``params``
    (a trailing space), and an expression without values has no third part: the policy tells them apart."""
    selector = {"matchLabels": {"pool": ""}, "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": [""]},
                                                                  {"key": "gpu", "operator": "Exists"}]}
    params = intents.intent_params([{"name": "a", "selector": selector, "config": "default"}], CONFIGS)
    assert params["intents"]["whole"]["terms"] == [[["pool", "In", ""], ["zone", "NotIn", ""], ["gpu", "Exists"]]]
    assert intents.params_data(params)["intent.whole.terms"] == "pool In ;zone NotIn ;gpu Exists"


def test_isolated_is_the_smallest_profile_and_me_keys():
    pools = [pool("big", mig={"profile": "3g.40gb"}), pool("small", mig={"profile": "1g.10gb+me"})]
    data = intents.params_data(intents.intent_params(pools, CONFIGS))
    assert data["intent.isolated.resource"] == "nvidia.com/mig-1g.10gb.me"
    assert data["intent.1g.10gb_me.resource"] == "nvidia.com/mig-1g.10gb.me"
    assert data["intent.3g.40gb.resource"] == "nvidia.com/mig-3g.40gb"
    assert "intent.whole.resource" not in data


def test_mig_strategy_on_a_config_pool_gives_nothing():
    params = intents.intent_params([pool("s", "single")], CONFIGS)
    assert params["intents"] == {}
    assert params["pools"] == [{"name": "s", "gives": []}]


@pytest.mark.parametrize("pools, configs, path", [
    ([], CONFIGS, "intent_admission_pools"),
    ([pool("x", "missing")], CONFIGS, "intent_admission_pools[0] (x).config"),
    ([{"name": "e", "selector": {}, "config": "default"}], CONFIGS, "intent_admission_pools[0] (e).selector"),
    ([pool("m", mig={"layout": "all-1g.10gb"})], CONFIGS, "intent_admission_pools[0] (m).mig"),
    ([pool("m", mig={"profile": "1x"})], CONFIGS, "intent_admission_pools[0] (m).mig.profile"),
])
def test_bad_pools(pools, configs, path):
    with pytest.raises(ValueError) as error:  # IntentError, or the MIG model's MigError
        intents.intent_params(pools, configs)
    assert str(error.value).startswith(path + ":"), str(error.value)


@pytest.mark.parametrize("settings, path", [
    ({}, "intent_admission_namespaces"),
    ({"namespaces": ["a"], "namespace_selector": {"matchLabels": {"a": "b"}}}, "intent_admission_namespaces"),
    ({"namespaces": ["A_"]}, "intent_admission_namespaces"),
    ({"namespaces": ["a"], "name": "Bad"}, "intent_admission_name"),
    ({"namespaces": ["a"], "failure_policy": "Maybe"}, "intent_admission_failure_policy"),
    ({"namespace_selector": {"bogus": 1}}, "intent_admission_namespace_selector"),
])
def test_bad_settings(settings, path):
    with pytest.raises(intents.IntentError) as error:
        intents.intent_settings(settings)
    assert str(error.value).startswith(path + ":"), str(error.value)


def test_objects():
    params = intents.intent_params(intents.lab_pools(LAB_NODES), CONFIGS)
    mutating, mbinding, validating, vbinding = intents.intent_objects(params, {"namespaces": ["team-b", "team-a"]})
    assert [o["kind"] for o in (mutating, mbinding, validating, vbinding)] == [
        "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    for policy in (mutating, validating):
        assert policy["metadata"] == {"name": "gpushare-gpu-intent"}
        assert "paramKind" not in policy["spec"]
        assert policy["spec"]["variables"][0] == {"name": "params", "expression": (
            '{"intent.1g.10gb.form": "resource", "intent.1g.10gb.max": "", "intent.1g.10gb.resource": "nvidia.com/mig-1g.10gb", '
            '"intent.1g.10gb.terms": "kubernetes.io/hostname In lab-node-2", "intent.isolated.form": "resource", "intent.isolated.max": "", '
            '"intent.isolated.resource": "nvidia.com/mig-1g.10gb", "intent.isolated.terms": "kubernetes.io/hostname In lab-node-2", '
            '"intent.shared.form": "resource", "intent.shared.max": "1", "intent.shared.resource": "nvidia.com/gpu", "intent.shared.terms": "%s In shared", '
            '"intent.whole.form": "resource", "intent.whole.max": "", "intent.whole.resource": "nvidia.com/gpu", "intent.whole.terms": "%s In default", '
            '"intents": "1g.10gb,isolated,shared,whole", "summary": "pools: default gives whole as nvidia.com/gpu; '
            'shared gives shared as nvidia.com/gpu (at most 1 per container); mig-1g-10gb gives isolated as nvidia.com/mig-1g.10gb, '
            '1g.10gb as nvidia.com/mig-1g.10gb"}') % (LABEL, LABEL)}
    for binding in (mbinding, vbinding):
        assert binding["spec"]["policyName"] == "gpushare-gpu-intent"
        assert binding["spec"]["matchResources"] == {"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}]}}
    assert vbinding["spec"]["validationActions"] == ["Deny"]
    # the last validation refuses a Pod asking by a served intent that no mutation rewrote
    assert validating["spec"]["validations"][-1]["expression"].startswith('!((variables.key + ".resource") in variables.params) || (')
    assert "MutatingAdmissionPolicy gpushare-gpu-intent " in validating["spec"]["validations"][-1]["messageExpression"]
    # the containers (limits, or a claim), the node affinity, a claim's tolerations
    assert [m["patchType"] for m in mutating["spec"]["mutations"]] == ["ApplyConfiguration", "JSONPatch", "JSONPatch"]
    assert mutating["spec"]["matchConditions"][0]["expression"] == (
        'has(object.metadata.annotations) && "gpushare.k8s/gpu" in object.metadata.annotations')


def test_selector_binding():
    params = intents.intent_params(intents.lab_pools(LAB_NODES), CONFIGS)
    selector = {"matchLabels": {"gpu": "yes"}}
    binding = intents.intent_objects(params, {"namespace_selector": selector})[1]
    assert binding["spec"]["matchResources"] == {"namespaceSelector": selector}


# --- DRA pools -------------------------------------------------------------------------------------------------------

DRA_LABELS = {"gpushare.k8s/gpu-manager": "dra"}
DRA_TAINTS = [{"key": "gpushare.k8s/gpu-manager", "value": "dra", "effect": "NoSchedule"}]
DRA_NODES = [
    {"name": "dra-node-0", "gpus": 2},
    {"name": "dra-node-1", "gpus": 2, "shared": {"replicas": 4}},
    {"name": "dra-node-2", "gpus": 1, "mig": True},
]
A100 = "NVIDIA-A100-SXM4-80GB"
TOLERATION = {"key": "gpushare.k8s/gpu-manager", "operator": "Equal", "value": "dra", "effect": "NoSchedule"}


def dra_pool(name, hosts, dra):
    return {"name": name, "selector": {"matchLabels": dict(DRA_LABELS), "matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": hosts}]}, "dra": dra, "tolerations": [dict(TOLERATION)]}


DRA_POOLS = [
    dra_pool("dra-whole", ["dra-node-0"], {"class": "gpu.nvidia.com"}),
    dra_pool("dra-shared", ["dra-node-1"], {"class": "shared.gpu.nvidia.com"}),
    dra_pool("dra-mig", ["dra-node-2"], {"class": "mig.nvidia.com", "profile": "1g.10gb"}),
]


def test_dra_pools_from_the_inventory():
    assert intents.dra_pools(DRA_NODES, A100, DRA_LABELS, DRA_TAINTS) == DRA_POOLS


def test_dra_params_data():
    data = intents.params_data(intents.intent_params(DRA_POOLS, {}), "gpu-intent-dra")
    terms = "gpushare.k8s/gpu-manager In dra;kubernetes.io/hostname In dra-node-%d"
    tolerations = "gpushare.k8s/gpu-manager Equal dra NoSchedule"
    assert data == {
        "intents": "1g.10gb,isolated,shared,whole",
        "summary": "pools: dra-whole gives whole as a gpu.nvidia.com claim; "
                   "dra-shared gives shared as a shared.gpu.nvidia.com claim (at most 1 per container); "
                   "dra-mig gives isolated as a mig.nvidia.com claim for 1g.10gb, 1g.10gb as a mig.nvidia.com claim for 1g.10gb",
        "intent.whole.form": "claim", "intent.whole.resource": "gpu.nvidia.com", "intent.whole.max": "",
        "intent.whole.terms": terms % 0, "intent.whole.template": "gpu-intent-dra-whole", "intent.whole.tolerations": tolerations,
        "intent.shared.form": "claim", "intent.shared.resource": "shared.gpu.nvidia.com", "intent.shared.max": "1",
        "intent.shared.terms": terms % 1, "intent.shared.template": "gpu-intent-dra-shared", "intent.shared.tolerations": tolerations,
        "intent.isolated.form": "claim", "intent.isolated.resource": "mig.nvidia.com", "intent.isolated.max": "",
        "intent.isolated.terms": terms % 2, "intent.isolated.template": "gpu-intent-dra-isolated", "intent.isolated.tolerations": tolerations,
        "intent.1g.10gb.form": "claim", "intent.1g.10gb.resource": "mig.nvidia.com", "intent.1g.10gb.max": "",
        "intent.1g.10gb.terms": terms % 2, "intent.1g.10gb.template": "gpu-intent-dra-1g-10gb", "intent.1g.10gb.tolerations": tolerations,
    }


def test_device_plugin_form_wins_over_dra():
    params = intents.intent_params(intents.lab_pools(LAB_NODES) + DRA_POOLS, CONFIGS)
    assert {intent: entry["form"] for intent, entry in params["intents"].items()} == {
        "whole": "resource", "shared": "resource", "isolated": "resource", "1g.10gb": "resource"}
    assert params["intents"]["whole"]["pools"] == ["default"]
    # a DRA pool giving what no device-plugin pool gives still serves it as a claim
    params = intents.intent_params([pool("shared", "shared"), DRA_POOLS[0]], CONFIGS)
    assert params["intents"]["shared"]["form"] == "resource"
    assert params["intents"]["whole"] == {
        "form": "claim", "resource": "gpu.nvidia.com", "max": None, "pools": ["dra-whole"], "profile": None,
        "terms": [[["gpushare.k8s/gpu-manager", "In", "dra"], ["kubernetes.io/hostname", "In", "dra-node-0"]]],
        "tolerations": [["gpushare.k8s/gpu-manager", "Equal", "dra", "NoSchedule"]]}


def test_mig_product_gives_its_smallest_profile_and_exists_tolerations():
    mig = {"name": "m", "selector": {"matchLabels": {"a": "b"}}, "dra": {"class": "mig.nvidia.com", "product": A100},
           "tolerations": [{"key": "t", "operator": "Exists"}, {"operator": "Exists", "effect": "NoExecute"}]}
    big = {"name": "big", "selector": {"matchLabels": {"a": "c"}}, "dra": {"class": "mig.nvidia.com", "profile": "3g.40gb"}}
    data = intents.params_data(intents.intent_params([big, mig], {}))
    assert data["intent.isolated.template"] == "gpushare-gpu-intent-isolated"
    assert data["intent.isolated.terms"] == "a In b"  # the smallest profile's pool
    assert data["intent.isolated.tolerations"] == "t Exists  | Exists  NoExecute"
    assert data["intent.3g.40gb.template"] == "gpushare-gpu-intent-3g-40gb"
    assert data["intent.3g.40gb.tolerations"] == ""


def test_templates():
    params = intents.intent_params(DRA_POOLS, {})
    templates = intents.intent_templates(params, {"name": "gi", "namespaces": ["team-b", "team-a"]})
    assert [(t["metadata"]["namespace"], t["metadata"]["name"]) for t in templates] == [
        ("team-a", "gi-1g-10gb"), ("team-b", "gi-1g-10gb"), ("team-a", "gi-isolated"), ("team-b", "gi-isolated"),
        ("team-a", "gi-shared"), ("team-b", "gi-shared"), ("team-a", "gi-whole"), ("team-b", "gi-whole")]
    assert templates[2] == {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gi-isolated", "namespace": "team-a", "annotations": {"gpushare.k8s/gpu": "isolated"},
                     "labels": {"app.kubernetes.io/managed-by": "gpushare.k8s", "gpushare.k8s/intent-policy": "gi"}},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]}}},
    }
    assert templates[6]["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]
    # device-plugin pools only: no template
    assert intents.intent_templates(intents.intent_params(intents.lab_pools(LAB_NODES), CONFIGS), {"namespaces": ["a"]}) == []


def test_dra_objects_carry_the_claim_and_tolerations():
    params = intents.intent_params(DRA_POOLS, {})
    mutating = intents.intent_objects(params, {"name": "gi", "namespaces": ["a"]})[0]
    names = [v["name"] for v in mutating["spec"]["variables"]]
    assert names[-3:] == ["form", "tolerations", "claims"]
    # a count of N: N claims from the one template, gpushare-gpu, gpushare-gpu-1, ...
    assert mutating["spec"]["variables"][-1]["expression"] == (
        'lists.range(int(variables.count)).map(i, i == 0 ? "gpushare-gpu" : "gpushare-gpu-" + string(i))')
    assert '"intent.whole.template": "gi-whole"' in mutating["spec"]["variables"][0]["expression"]
    apply = mutating["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    assert ('variables.claims.map(n, Object.spec.resourceClaims{name: n, '
            'resourceClaimTemplateName: variables.params[variables.key + ".template"]})') in apply
    assert 'claims: variables.claims.map(n, Object.spec.containers.resources.claims{name: n})' in apply
    assert '"/spec/tolerations/-"' in mutating["spec"]["mutations"][2]["jsonPatch"]["expression"]


@pytest.mark.parametrize("settings, path, words", [
    ({"namespace_selector": {"matchLabels": {"gpu": "yes"}}}, "intent_admission_namespaces", "DRA pools (dra-mig, dra-shared, dra-whole)"),
    ({"namespaces": ["a"], "name": "x" * 64}, "intent_admission_name", "longer than 63"),
])
def test_dra_refusals_of_settings(settings, path, words):
    params = intents.intent_params(DRA_POOLS, {})
    for build in (intents.intent_objects, intents.intent_templates):
        with pytest.raises(intents.IntentError) as error:
            build(params, settings)
        assert str(error.value).startswith(path + ":") and words in str(error.value), str(error.value)


def bad(**changes):
    entry = {"name": "d", "selector": {"matchLabels": {"a": "b"}}, "dra": {"class": "gpu.nvidia.com"}}
    entry.update(changes)
    return entry


@pytest.mark.parametrize("entry, path", [
    (bad(dra={"class": "gpu.example.com"}), "intent_admission_pools[0] (d).dra.class"),
    (bad(dra={"class": "gpu.nvidia.com", "profile": "1g.10gb"}), "intent_admission_pools[0] (d).dra.profile"),
    (bad(dra={"class": "mig.nvidia.com"}), "intent_admission_pools[0] (d).dra"),
    (bad(dra={"class": "mig.nvidia.com", "profile": "2g.10gb", "product": A100}), "intent_admission_pools[0] (d).dra.profile"),
    (bad(dra={"class": "mig.nvidia.com", "profile": "one"}), "intent_admission_pools[0] (d).dra.profile"),
    (bad(dra={"class": "gpu.nvidia.com", "driver": "x"}), "intent_admission_pools[0] (d).dra"),
    (bad(dra="gpu.nvidia.com"), "intent_admission_pools[0] (d).dra"),
    (bad(extra=1), "intent_admission_pools[0] (d)"),
    (bad(selector={}), "intent_admission_pools[0] (d).selector"),
    (bad(tolerations=[{"key": "k", "value": "v", "tolerationSeconds": 5}]), "intent_admission_pools[0] (d).tolerations[0]"),
    (bad(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]), "intent_admission_pools[0] (d).tolerations[0].value"),
    (bad(tolerations=[{"key": "k", "value": "v", "effect": "Sometimes"}]), "intent_admission_pools[0] (d).tolerations[0].effect"),
    (bad(tolerations=[{"key": "a b", "value": "v"}]), "intent_admission_pools[0] (d).tolerations[0].key"),
    (bad(tolerations="k"), "intent_admission_pools[0] (d).tolerations"),
])
def test_bad_dra_pools(entry, path):
    with pytest.raises(ValueError) as error:
        intents.intent_params([entry], {})
    assert str(error.value).startswith(path + ":"), str(error.value)


def test_dra_pool_names_are_checked_with_the_others():
    with pytest.raises(intents.IntentError) as error:
        intents.intent_params([pool("d", "default"), bad()], CONFIGS)
    assert str(error.value).startswith("intent_admission_pools[1] (d).name:"), str(error.value)


def template(namespace, name, device_class="gpu.nvidia.com", extra=None):
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}
    exactly.update(extra or {})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def test_template_plan():
    desired = [template("a", "t-whole"), template("a", "t-isolated", "mig.nvidia.com"), template("b", "t-whole")]
    held = [template("a", "t-whole"), template("a", "t-isolated", "mig.nvidia.com", {"selectors": [{"cel": {"expression": "x"}}]}),
            template("c", "t-whole"), template("a", "t-1g-10gb", "mig.nvidia.com")]
    held[0]["spec"]["metadata"] = {}  # what the API server adds: not a difference
    held[0]["metadata"]["resourceVersion"] = "7"
    plan = intents.template_plan(held, desired)
    assert plan == {
        "create": [desired[2]], "keep": [desired[0]], "replace": [desired[1]],
        "delete": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t-1g-10gb", "namespace": "a"}},
                   {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t-whole", "namespace": "c"}}],
    }
    assert intents.template_plan([], []) == {"create": [], "keep": [], "replace": [], "delete": []}


def test_dra_pools_per_mig_product_and_exists_taints():
    nodes = [{"name": "m-a", "gpus": 1, "mig": True}, {"name": "m-h", "gpus": 1, "mig": True, "product": "NVIDIA-H100-80GB-HBM3"},
             {"name": "w-1", "gpus": 1}, {"name": "w-0", "gpus": 1}]
    pools = intents.dra_pools(nodes, A100, {}, [{"key": "dedicated", "effect": "NoSchedule"}])
    assert [(p["name"], p["selector"], p["dra"]) for p in pools] == [
        ("dra-whole", {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["w-0", "w-1"]}]},
         {"class": "gpu.nvidia.com"}),
        ("dra-mig-nvidia-a100-sxm4-80gb", {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["m-a"]}]},
         {"class": "mig.nvidia.com", "profile": "1g.10gb"}),
        ("dra-mig-nvidia-h100-80gb-hbm3", {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["m-h"]}]},
         {"class": "mig.nvidia.com", "profile": "1g.10gb"}),
    ]
    assert pools[0]["tolerations"] == [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    # two MIG pools giving the same profile: isolated asks for it on both
    params = intents.intent_params(pools, {})
    assert params["intents"]["isolated"]["pools"] == ["dra-mig-nvidia-a100-sxm4-80gb", "dra-mig-nvidia-h100-80gb-hbm3"]
    assert params["intents"]["isolated"]["tolerations"] == [["dedicated", "Exists", "", "NoSchedule"]]


@pytest.mark.parametrize("nodes, labels, taints, path", [
    ([{"name": "x", "gpus": 0}], {}, [], "x.gpus"),  # dra.normalize_nodes names a node by its name
    ([{"name": "x", "gpus": 1}], ["a"], [], "gpushare_dra_node_labels"),
    ([{"name": "x", "gpus": 1}], {}, [{"key": "k", "value": "v", "effect": "Never"}], "gpushare_dra_node_taints[0].effect"),
])
def test_bad_dra_inventory(nodes, labels, taints, path):
    with pytest.raises(ValueError) as error:
        intents.dra_pools(nodes, A100, labels, taints)
    assert str(error.value).startswith(path), str(error.value)
