# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module-level tests for gpushare.k8s.node_resources, with a fake Node API.

Also covers module_utils/k8s/auth.py, which turns the module's auth options
into a kubernetes client configuration.
"""

from __future__ import annotations

import copy
import os

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import auth as k8s_auth
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.nodes import NodeApiError
from ansible_collections.gpushare.k8s.plugins.modules import node_resources

GPU = "example.com/gpu"
FOO = "example.com/foo"
KWOK = {"kwok.x-k8s.io/node": "fake"}


class Exit(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result = result
        self.failed = failed


def merge(target, patch):
    out = dict(target or {})
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = merge(out.get(key), value)
        else:
            out[key] = value
    return out


class FakeNodeApi:
    """Stands in for CoreNodeApi: same three methods, Nodes in a dict."""

    def __init__(self, *nodes):
        self.nodes = {}
        for name, annotations in nodes:
            self.nodes[name] = {
                "metadata": {"name": name, "resourceVersion": "1", "annotations": annotations,
                             "labels": {"lab": "yes"}},
                "status": {"capacity": {"cpu": "8", "pods": "110", FOO: "1"},
                           "allocatable": {"cpu": "8", "pods": "110", FOO: "1"}},
            }
        self.patches = []
        self.failure = ()  # (status, reason): every patch_node_status call fails so while set

    def get_node(self, name):
        if name not in self.nodes:
            raise NodeApiError(404, "not found")
        return copy.deepcopy(self.nodes[name])

    def list_nodes(self, label_selector=None):
        return [copy.deepcopy(n) for n in self.nodes.values()
                if not label_selector or label_selector == "lab=yes"]

    def patch_node_status(self, name, patch):
        self.patches.append((name, patch))
        if self.failure:
            raise NodeApiError(*self.failure)
        node = self.nodes[name]
        node["status"] = merge(node["status"], patch["status"])
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(node)


@pytest.fixture
def fake(monkeypatch):
    api = FakeNodeApi(("lab-node-0", KWOK), ("lab-node-1", KWOK))
    api.client_calls = []

    def build_api_client(params, pool_maxsize=None):
        api.client_calls.append({"params": dict(params), "pool_maxsize": pool_maxsize})
        return "api-client"

    monkeypatch.setattr(node_resources, "build_api_client", build_api_client)
    monkeypatch.setattr(node_resources, "CoreNodeApi", lambda api_client: api)
    return api


@pytest.fixture
def module_run(monkeypatch):
    def exit_json(self, **result):
        raise Exit(result, failed=False)

    def fail_json(self, **result):
        raise Exit(result, failed=True)

    monkeypatch.setattr(node_resources.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(node_resources.AnsibleModule, "fail_json", fail_json)

    def run(args, check_mode=False, diff=False):
        args = dict(args)
        if check_mode:
            args["_ansible_check_mode"] = True
        if diff:
            args["_ansible_diff"] = True
        with patch_module_args(args):
            with pytest.raises(Exit) as outcome:
                node_resources.main()
        return outcome.value

    return run


def test_apply_then_idempotent(fake, module_run):
    args = {"name": ["lab-node-0", "lab-node-1"], "resources": {GPU: 8}}
    first = module_run(args)
    assert not first.failed, first.result
    assert first.result["changed"] is True
    assert first.result["changed_nodes"] == ["lab-node-0", "lab-node-1"]
    assert first.result["nodes"][0] == {
        "name": "lab-node-0",
        "changed": True,
        "before": {"capacity": {}, "allocatable": {}},
        "after": {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}},
    }
    assert "diff" not in first.result
    assert fake.nodes["lab-node-0"]["status"]["capacity"] == {"cpu": "8", "pods": "110", FOO: "1", GPU: "8"}
    second = module_run(args)
    assert second.result["changed"] is False
    assert second.result["changed_nodes"] == []
    assert len(fake.patches) == 2


def test_check_mode_predicts_and_writes_nothing(fake, module_run):
    args = {"label_selector": "lab=yes", "resources": {GPU: 2}}
    predicted = module_run(args, check_mode=True)
    assert predicted.result["changed"] is True
    assert fake.patches == []
    applied = module_run(args)
    assert predicted.result["nodes"] == applied.result["nodes"]
    again = module_run(args, check_mode=True)
    assert again.result["changed"] is False


def test_diff_is_keyed_by_node_and_lists_changed_nodes_only(fake, module_run):
    module_run({"name": "lab-node-1", "resources": {GPU: 4}})
    result = module_run({"label_selector": "lab=yes", "resources": {GPU: 4}}, diff=True).result
    assert result["diff"] == {
        "before": {"lab-node-0": {"capacity": {}, "allocatable": {}}},
        "after": {"lab-node-0": {"capacity": {GPU: "4"}, "allocatable": {GPU: "4"}}},
    }
    result = module_run({"label_selector": "lab=yes", "resources": {GPU: 4}}, diff=True).result
    assert result["diff"] == {"before": {}, "after": {}}


def test_absent_with_a_list_and_fields(fake, module_run):
    module_run({"node": "lab-node-0", "resources": {GPU: 1}})
    result = module_run({"names": ["lab-node-0"], "state": "absent", "resources": [GPU, FOO],
                         "fields": ["allocatable"]}).result
    assert result["changed"] is True
    assert result["nodes"][0]["before"] == {"allocatable": {GPU: "1", FOO: "1"}}
    assert result["nodes"][0]["after"] == {"allocatable": {}}
    status = fake.nodes["lab-node-0"]["status"]
    assert status["capacity"][GPU] == "1" and FOO in status["capacity"]
    assert GPU not in status["allocatable"] and FOO not in status["allocatable"]


def test_parallelism_sizes_the_connection_pool(fake, module_run):
    module_run({"name": "lab-node-0", "resources": {GPU: 1}, "parallelism": 64, "kubeconfig": "/k"})
    assert fake.client_calls[0]["pool_maxsize"] == 64
    assert fake.client_calls[0]["params"]["kubeconfig"] == "/k"


@pytest.mark.parametrize(
    "args, message",
    [
        ({"name": "lab-node-0", "resources": {GPU: -1}},
         'resources["example.com/gpu"]: -1 is negative; use a non-negative integer, e.g. 8 (0 advertises none)'),
        ({"name": "lab-node-0", "resources": {GPU: "4"}},
         "resources[\"example.com/gpu\"]: '4' is a string, not a count; use an integer, e.g. 8"),
        ({"name": "lab-node-0", "resources": {GPU: 2.5}},
         'resources["example.com/gpu"]: 2.5 is a float, not a count; use an integer, e.g. 8'),
        ({"name": "lab-node-0", "resources": {GPU: True}},
         'resources["example.com/gpu"]: True is a boolean, not a count; use an integer, e.g. 8'),
        ({"name": "lab-node-0", "resources": {"memory": 1}},
         'resources: "memory" is not an extended resource name; cpu, memory, pods and other names without a '
         'domain prefix belong to the kubelet. Use a domain-prefixed name such as "nvidia.com/gpu"'),
        ({"name": ["lab-node-0", "nope-1", "nope-2"], "resources": {GPU: 1}},
         "name: node(s) not found: nope-1, nope-2. Fix: correct the names (see `kubectl get nodes`) or create the nodes; nothing was changed"),
        ({"name": "lab-node-0", "resources": {GPU: 1}, "parallelism": 0},
         "parallelism: 0 is out of range; use an integer from 1 to 256 (default 16)"),
        ({"name": "lab-node-0", "resources": {GPU: 1}, "parallelism": 257},
         "parallelism: 257 is out of range; use an integer from 1 to 256 (default 16)"),
        ({"name": "lab-node-0", "label_selector": "a=b", "resources": {GPU: 1}},
         "parameters are mutually exclusive: name|label_selector|nodes"),
        ({"resources": {GPU: 1}}, "one of the following is required: name, label_selector, nodes"),
        ({"name": "lab-node-0"}, "missing parameter(s) required by 'name': resources"),
        ({"nodes": [{"name": "lab-node-0", "labels": {"a": "b"}}], "resources": {GPU: 1}},
         "parameters are mutually exclusive: nodes|resources"),
        ({"nodes": [{"labels": {"a": "b"}}]}, "missing required arguments: name found in nodes"),
        ({"name": "lab-node-0", "resources": {GPU: 1}, "fields": ["limits"]},
         "value of fields must be one or more of: capacity, allocatable. Got no match for: limits"),
    ],
    ids=["negative", "string", "float", "bool", "native", "missing-nodes", "parallelism-0",
         "parallelism-257", "exclusive", "neither", "no-resources", "nodes-and-resources", "nodes-without-name",
         "bad-field"],
)
def test_errors_are_fail_json_with_the_fix(fake, module_run, args, message):
    outcome = module_run(args)
    assert outcome.failed
    assert outcome.result["msg"] == message
    assert fake.patches == []


def test_real_node_refused(fake, module_run):
    fake.nodes["real"] = copy.deepcopy(fake.nodes["lab-node-0"])
    fake.nodes["real"]["metadata"].update(name="real", annotations={})
    outcome = module_run({"name": ["real"], "resources": {GPU: 1}})
    assert outcome.failed
    assert outcome.result["msg"] == (
        "refusing to change node(s) real: they lack the annotation kwok.x-k8s.io/node=fake, so they are not "
        "kwok nodes. On a real cluster the device plugin owns these numbers and overwrites them; set "
        "allow_real_nodes: true to write anyway"
    )
    assert module_run({"name": ["real"], "resources": {GPU: 1}, "allow_real_nodes": True}).result["changed"]


def test_no_match_allowed(fake, module_run):
    outcome = module_run({"label_selector": "lab=no", "resources": {GPU: 1}})
    assert outcome.failed and outcome.result["msg"].startswith("label_selector: 'lab=no' matches no node.")
    outcome = module_run({"label_selector": "lab=no", "resources": {GPU: 1}, "allow_no_match": True})
    assert not outcome.failed
    assert (outcome.result["changed"], outcome.result["changed_nodes"], outcome.result["nodes"]) == (False, [], [])


def test_write_failure_reports_every_node(fake, module_run):
    fake.failure = (403, "forbidden")
    outcome = module_run({"label_selector": "lab=yes", "resources": {GPU: 1}})
    assert outcome.failed
    assert outcome.result["msg"] == (
        "could not update 2 of 2 node(s): lab-node-0: HTTP 403: forbidden; lab-node-1: HTTP 403: forbidden"
    )
    assert outcome.result["changed"] is False
    assert [n["error"] for n in outcome.result["nodes"]] == ["HTTP 403: forbidden"] * 2


def test_unexpected_errors_do_not_escape_as_tracebacks(fake, module_run):
    fake.list_nodes = lambda label_selector=None: 1 / 0
    outcome = module_run({"label_selector": "lab=yes", "resources": {GPU: 1}})
    assert outcome.failed
    assert outcome.result["msg"] == "unexpected error: ZeroDivisionError: division by zero"


def test_auth_errors_are_reported(monkeypatch, module_run):
    def broken(params, pool_maxsize=None):
        raise k8s_auth.K8sAuthError("kubeconfig: file /nope does not exist; pass the path of a kubeconfig file")

    monkeypatch.setattr(node_resources, "build_api_client", broken)
    outcome = module_run({"name": "n", "resources": {GPU: 1}, "kubeconfig": "/nope"})
    assert outcome.failed
    assert outcome.result["msg"].startswith("kubeconfig: file ")


def test_missing_kubernetes_library(monkeypatch, module_run):
    monkeypatch.setattr(node_resources, "HAS_KUBERNETES", False)
    outcome = module_run({"name": "n", "resources": {GPU: 1}})
    assert outcome.failed
    assert "Failed to import the required Python library (kubernetes)" in outcome.result["msg"]


def test_secrets_are_no_log_and_docs_match_the_spec():
    spec = node_resources.argument_spec()
    assert spec["api_key"]["no_log"] and spec["password"]["no_log"]
    assert spec["kubeconfig"]["no_log"] is False  # a path is shown; a dict's credentials are hidden (test_api_server.py)
    documented = yaml.safe_load(node_resources.DOCUMENTATION)["options"]
    own = {k for k in spec if k not in k8s_auth.AUTH_ARG_SPEC}
    assert own == set(documented)
    for name, option in documented.items():
        assert option["type"] == spec[name]["type"], name
        assert option.get("default") == spec[name].get("default"), name
        assert option.get("choices") == spec[name].get("choices"), name
        assert sorted(option.get("aliases", [])) == sorted(spec[name].get("aliases", [])), name


def test_auth_options_are_kubernetes_core_s_plus_request_timeout():
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC as CORE

    assert len(CORE) == 16
    spec = node_resources.argument_spec()
    for name, option in CORE.items():
        if name == "kubeconfig":  # a path is no secret: ours is not no_log, so messages can name the file
            assert spec[name] == dict(option, no_log=False)
            continue
        assert spec[name] == option, name
    assert set(k8s_auth.AUTH_ARG_SPEC) == set(CORE) | {"request_timeout"}


def test_auth_fragments_document_every_auth_option():
    from ansible_collections.gpushare.k8s.plugins.doc_fragments.k8s_auth import ModuleDocFragment as Own
    from ansible_collections.kubernetes.core.plugins.doc_fragments.k8s_auth_options import ModuleDocFragment as Core

    core = yaml.safe_load(Core.DOCUMENTATION)["options"]
    own = yaml.safe_load(Own.DOCUMENTATION)["options"]
    assert set(core) | set(own) == set(k8s_auth.AUTH_ARG_SPEC) and not set(core) & set(own)
    for name, option in own.items():
        assert option["type"] == k8s_auth.AUTH_ARG_SPEC[name]["type"], name
        assert option.get("default") == k8s_auth.AUTH_ARG_SPEC[name].get("default"), name
    documented = yaml.safe_load(node_resources.DOCUMENTATION)
    assert {"kubernetes.core.k8s_auth_options", "gpushare.k8s.k8s_auth"} <= set(documented["extends_documentation_fragment"])


def test_every_module_with_auth_options_extends_both_fragments_and_the_action_group():
    import importlib
    import pathlib

    root = pathlib.Path(node_resources.__file__).parent
    runtime = yaml.safe_load((root.parents[1] / "meta" / "runtime.yml").read_text())
    group = runtime["action_groups"]["k8s"]
    assert group[0] == {"metadata": {"extend_group": ["kubernetes.core.k8s"]}}
    assert runtime["action_groups"]["modules"] == group[1:]  # the same modules without kubernetes.core's (request_timeout)
    with_auth = set()
    for path in sorted(root.glob("*.py")):
        module = importlib.import_module("ansible_collections.gpushare.k8s.plugins.modules." + path.stem)
        fragments = yaml.safe_load(module.DOCUMENTATION).get("extends_documentation_fragment", [])
        if "gpushare.k8s.k8s_auth" in fragments:
            with_auth.add(path.stem)
            assert "kubernetes.core.k8s_auth_options" in fragments, path.stem
    assert with_auth == set(group[1:])


# --------------------------------------------------------------------------
# module_utils/k8s/auth.py
# --------------------------------------------------------------------------


def authorization(cfg):
    """The Authorization header the client will send."""
    return cfg.auth_settings()["BearerToken"]["value"]


def test_task_options_win_over_environment():
    env = {"K8S_AUTH_HOST": "https://env:6443", "K8S_AUTH_API_KEY": "envtoken", "K8S_AUTH_CONTEXT": "ctx"}
    resolved = k8s_auth.resolve_auth_params({"host": "https://task:6443", "name": "ignored"}, environ=env)
    assert resolved == {"host": "https://task:6443", "api_key": "envtoken", "context": "ctx"}


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"K8S_AUTH_VERIFY_SSL": "no"}, {"validate_certs": False}),
        ({"K8S_AUTH_VERIFY_SSL": "False"}, {"validate_certs": False}),
        ({"K8S_AUTH_VALIDATE_CERTS": "yes"}, {"validate_certs": True}),
        ({"K8S_AUTH_SSL_CA_CERT": "/ca.pem"}, {"ca_cert": "/ca.pem"}),
        ({"K8S_AUTH_CERT_FILE": "/c.pem", "K8S_AUTH_KEY_FILE": "/k.pem"},
         {"client_cert": "/c.pem", "client_key": "/k.pem"}),
        ({"K8S_AUTH_KUBECONFIG": "/kc", "K8S_AUTH_USERNAME": "u", "K8S_AUTH_PASSWORD": "p",
          "K8S_AUTH_PROXY": "http://proxy:3128"},
         {"kubeconfig": "/kc", "username": "u", "password": "p", "proxy": "http://proxy:3128"}),
        ({"K8S_AUTH_HOST": ""}, {}),
        ({"K8S_AUTH_NO_PROXY": "localhost,.svc", "K8S_AUTH_PERSIST_CONFIG": "true"}, {"no_proxy": "localhost,.svc", "persist_config": True}),
        ({"K8S_AUTH_IMPERSONATE_USER": "jane", "K8S_AUTH_IMPERSONATE_GROUPS": "dev,,ops"},
         {"impersonate_user": "jane", "impersonate_groups": ["dev", "ops"]}),
        ({"K8S_AUTH_PROXY_HEADERS_USER_AGENT": "lab/1.0", "K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH": "u:p"},
         {"proxy_headers": {"user_agent": "lab/1.0", "proxy_basic_auth": "u:p"}}),
    ],
)
def test_environment_fallbacks(env, expected):
    assert k8s_auth.resolve_auth_params({}, environ=env) == expected


def test_host_and_token_need_no_kubeconfig():
    cfg = k8s_auth.build_configuration(
        {"host": "https://10.0.0.1:6443/", "api_key": "tok", "validate_certs": False},
        environ={"KUBECONFIG": "/does/not/exist"},
        pool_maxsize=32,
    )
    assert cfg.host == "https://10.0.0.1:6443"
    assert authorization(cfg) == "Bearer tok"
    assert cfg.verify_ssl is False
    assert cfg.connection_pool_maxsize == 32


def test_basic_auth_header():
    cfg = k8s_auth.build_configuration({"host": "https://h", "username": "u", "password": "p"}, environ={})
    assert authorization(cfg) == "Basic dTpw"


KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:32766"}},
                 {"name": "d", "cluster": {"server": "https://127.0.0.1:40000"}}],
    "users": [{"name": "u", "user": {"token": "secret"}}],
    "contexts": [{"name": "lab", "context": {"cluster": "c", "user": "u"}},
                 {"name": "other", "context": {"cluster": "d", "user": "u"}}],
    "current-context": "lab",
}


def test_kubeconfig_file_and_context(tmp_path):
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    cfg = k8s_auth.build_configuration({"kubeconfig": str(path)}, environ={}, pool_maxsize=2)
    assert cfg.host == "https://127.0.0.1:32766"
    assert authorization(cfg) == "Bearer secret"
    assert cfg.connection_pool_maxsize == k8s_auth.MIN_POOL_SIZE
    cfg = k8s_auth.build_configuration({}, environ={"K8S_AUTH_KUBECONFIG": str(path), "K8S_AUTH_CONTEXT": "other"})
    assert cfg.host == "https://127.0.0.1:40000"


def test_api_key_overrides_the_kubeconfig_token():
    cfg = k8s_auth.build_configuration({"kubeconfig": KUBECONFIG, "api_key": "mine"}, environ={})
    assert authorization(cfg) == "Bearer mine"


def test_kubeconfig_dict_and_host_override():
    cfg = k8s_auth.build_configuration({"kubeconfig": KUBECONFIG, "host": "https://override"}, environ={})
    assert cfg.host == "https://override"
    assert authorization(cfg) == "Bearer secret"  # runs the kubeconfig's refresh hook
    assert cfg.host == "https://override"  # which must not undo the task's option


def test_default_configuration_is_not_touched(tmp_path):
    from kubernetes import client

    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    default_host = client.Configuration.get_default_copy().host
    k8s_auth.build_api_client({"kubeconfig": str(path)}, environ={})
    assert client.Configuration.get_default_copy().host == default_host


def test_missing_kubeconfig_file_is_named(tmp_path):
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(k8s_auth.K8sAuthError) as err:
        k8s_auth.build_configuration({"kubeconfig": missing}, environ={})
    assert str(err.value) == (
        "kubeconfig: file {0} does not exist; pass the path of a kubeconfig file "
        "(option kubeconfig or K8S_AUTH_KUBECONFIG)".format(missing)
    )


def test_unknown_context_is_reported(tmp_path):
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    with pytest.raises(k8s_auth.K8sAuthError) as err:
        k8s_auth.build_configuration({"kubeconfig": str(path), "context": "ghost"}, environ={})
    assert str(err.value).startswith("could not load {0} (context 'ghost'): ".format(path))


def test_bad_kubeconfig_type():
    with pytest.raises(k8s_auth.K8sAuthError) as err:
        k8s_auth.build_configuration({"kubeconfig": ["a"]}, environ={})
    assert str(err.value) == "kubeconfig: expected a file path or a kubeconfig dict, got list"


def test_no_credentials_anywhere(monkeypatch, tmp_path):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(k8s_auth.K8sAuthError) as err:
        k8s_auth.build_configuration({}, environ={"KUBECONFIG": str(tmp_path / "none")})
    assert str(err.value).startswith("no Kubernetes credentials found: not running in a cluster and ")


def test_proxy_options_reach_the_client_configuration():
    cfg = k8s_auth.build_configuration(
        {"host": "https://h", "api_key": "t", "proxy": "http://proxy:3128", "no_proxy": "localhost,.svc",
         "proxy_headers": {"proxy_basic_auth": "u:p", "user_agent": "lab/1.0", "basic_auth": None}},
        environ={},
    )
    assert (cfg.proxy, cfg.no_proxy) == ("http://proxy:3128", "localhost,.svc")
    assert cfg.proxy_headers == {"proxy-authorization": "Basic dTpw", "user-agent": "lab/1.0"}


@pytest.mark.parametrize("persist", [None, False, True])
def test_persist_config_is_passed_to_the_kubeconfig_loader(tmp_path, monkeypatch, persist):
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    seen = {}
    real = k8s_auth.k8s_config.load_kube_config

    def load(**kwargs):
        seen.update(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(k8s_auth.k8s_config, "load_kube_config", load)
    k8s_auth.build_configuration({"kubeconfig": str(path), "persist_config": persist}, environ={})
    assert seen["persist_config"] is bool(persist)


ENVIRONMENTS = [
    {"K8S_AUTH_HOST": "https://env", "K8S_AUTH_API_KEY": "t", "K8S_AUTH_CONTEXT": "c"},
    {"K8S_AUTH_VERIFY_SSL": "no", "K8S_AUTH_SSL_CA_CERT": "/ca", "K8S_AUTH_CERT_FILE": "/c", "K8S_AUTH_KEY_FILE": "/k"},
    {"K8S_AUTH_VALIDATE_CERTS": "off", "K8S_AUTH_CA_CERT": "/ca2", "K8S_AUTH_CLIENT_CERT": "/c2", "K8S_AUTH_CLIENT_KEY": "/k2"},
    {"K8S_AUTH_USERNAME": "u", "K8S_AUTH_PASSWORD": "p", "K8S_AUTH_PROXY": "http://p", "K8S_AUTH_NO_PROXY": "a,b"},
    {"K8S_AUTH_PERSIST_CONFIG": "0", "K8S_AUTH_KUBECONFIG": "/kc", "K8S_AUTH_PROXY_HEADERS_BASIC_AUTH": "x:y"},
    {"K8S_AUTH_PERSIST_CONFIG": "yes", "K8S_AUTH_IMPERSONATE_USER": "jane", "K8S_AUTH_IMPERSONATE_GROUPS": "g1,g2,"},
]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_environment_is_read_as_kubernetes_core_reads_it(monkeypatch, env):
    """kubernetes.core's own reading of K8S_AUTH_* (its client module) is the reference."""
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_MAP
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as core_client

    for key in [k for k in os.environ if k.startswith("K8S_AUTH_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    theirs = {AUTH_ARG_MAP[key]: value for key, value in core_client._create_auth_spec().items() if value != {}}
    headers = core_client._create_headers()
    if "Impersonate-User" in headers:
        theirs["impersonate_user"] = headers["Impersonate-User"]
    if "Impersonate-Group" in headers:
        theirs["impersonate_groups"] = headers["Impersonate-Group"]
    assert k8s_auth.resolve_auth_params({}, environ=dict(os.environ)) == theirs
