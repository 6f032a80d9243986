# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The intent vocabulary's params and objects (module_utils/intents.py); expectations written by hand."""
from __future__ import annotations

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils import intents

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
    }


def test_renamed_shares_and_two_pools_of_one_intent():
    pools = [pool("a", "shared"), pool("b", "shared", labels={"pool": "b", "zone": "x"}), pool("r", "renamed")]
    params = intents.intent_params(pools, CONFIGS)
    # two pools give shared as nvidia.com/gpu, one as nvidia.com/gpu.shared: the name most pools give wins
    assert params["intents"]["shared"] == {"resource": "nvidia.com/gpu", "max": 1, "pools": ["a", "b"],
                                           "terms": [[[LABEL, "In", "shared"]], [["pool", "In", "b"], ["zone", "In", "x"]]]}
    assert intents.params_data(params)["intent.shared.terms"] == LABEL + " In shared|pool In b;zone In x"
    assert params["pools"][2]["gives"] == [{"intent": "shared", "resource": "nvidia.com/gpu.shared", "max": None, "note": "time-slicing x2"}]


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
            '{"intent.1g.10gb.max": "", "intent.1g.10gb.resource": "nvidia.com/mig-1g.10gb", '
            '"intent.1g.10gb.terms": "kubernetes.io/hostname In lab-node-2", "intent.isolated.max": "", '
            '"intent.isolated.resource": "nvidia.com/mig-1g.10gb", "intent.isolated.terms": "kubernetes.io/hostname In lab-node-2", '
            '"intent.shared.max": "1", "intent.shared.resource": "nvidia.com/gpu", "intent.shared.terms": "%s In shared", '
            '"intent.whole.max": "", "intent.whole.resource": "nvidia.com/gpu", "intent.whole.terms": "%s In default", '
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
    assert [m["patchType"] for m in mutating["spec"]["mutations"]] == ["ApplyConfiguration", "JSONPatch"]
    assert mutating["spec"]["matchConditions"][0]["expression"] == (
        'has(object.metadata.annotations) && "gpushare.k8s/gpu" in object.metadata.annotations')


def test_selector_binding():
    params = intents.intent_params(intents.lab_pools(LAB_NODES), CONFIGS)
    selector = {"matchLabels": {"gpu": "yes"}}
    binding = intents.intent_objects(params, {"namespace_selector": selector})[1]
    assert binding["spec"]["matchResources"] == {"namespaceSelector": selector}
