# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/k8s/api_server.py: the first check of a run, against real files and a real closed port (no mock client);
and the kubeconfig option's credentials kept out of output while its path is shown."""
from __future__ import annotations

import socket

import pytest
import yaml
from ansible.module_utils.basic import AnsibleModule, remove_values
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import auth as k8s_auth
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.api_server import DEFAULT_FIX, api_server_errors, missing_kubeconfigs
from ansible_collections.gpushare.k8s.plugins.modules import api_server_check

FIX = "start it with `make cluster`, or set gpushare_kubeconfig"


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kubeconfig(path, server, context="lab"):
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "lab", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "lab", "user": {"token": "s3cr3t-token"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "lab"}}],
    }))
    return str(path)


def test_a_missing_kubeconfig_is_named_with_the_fix(tmp_path):
    missing = tmp_path / "clusters" / "gpushare" / "kubeconfig.yaml"
    errors, info = api_server_errors({"kubeconfig": str(missing)}, fix=FIX, environ={})
    assert errors == ["kubeconfig %s does not exist, so there is no cluster to run against. Fix: %s." % (missing, FIX)]
    assert info == {"host": None, "version": None}


def test_each_missing_file_of_a_kubeconfig_path_list_is_named(tmp_path):
    present = kubeconfig(tmp_path / "a.yaml", "https://127.0.0.1:1")
    assert missing_kubeconfigs("%s:%s" % (present, tmp_path / "b.yaml")) == [str(tmp_path / "b.yaml")]
    assert missing_kubeconfigs({"clusters": []}) == [] and missing_kubeconfigs(None) == []


def test_the_kubeconfig_may_come_from_k8s_auth_kubeconfig(tmp_path):
    errors, _info = api_server_errors({}, fix=FIX, environ={"K8S_AUTH_KUBECONFIG": str(tmp_path / "nope.yaml")})
    assert errors and str(tmp_path / "nope.yaml") in errors[0]


def test_an_api_server_that_does_not_answer_is_named_by_its_url(tmp_path):
    port = closed_port()
    errors, info = api_server_errors({"kubeconfig": kubeconfig(tmp_path / "k.yaml", "https://127.0.0.1:%d" % port),
                                      "request_timeout": 5}, fix=FIX, environ={})
    assert len(errors) == 1, errors
    assert errors[0].startswith("cannot reach the API server (kube-apiserver) at https://127.0.0.1:%d: " % port), errors[0]
    assert "Connection refused" in errors[0] and errors[0].endswith("Fix: %s." % FIX)
    assert info["host"] == "https://127.0.0.1:%d" % port and info["version"] is None


def test_a_kubeconfig_without_its_context_is_reported_with_the_fix(tmp_path):
    path = kubeconfig(tmp_path / "k.yaml", "https://127.0.0.1:1", context="elsewhere")
    errors, _info = api_server_errors({"kubeconfig": path}, fix=FIX, environ={})
    assert len(errors) == 1 and path in errors[0] and errors[0].endswith("Fix: %s." % FIX), errors


def test_the_default_fix_names_the_lab_cluster():
    assert "`make cluster`" in DEFAULT_FIX and "gpushare.k8s.cluster" in DEFAULT_FIX


# ------------------------------------------------------------------- the kubeconfig option in output
def test_kubeconfig_is_not_no_log_so_its_path_is_shown():
    assert k8s_auth.AUTH_ARG_SPEC["kubeconfig"]["no_log"] is False
    assert k8s_auth.AUTH_ARG_SPEC["api_key"]["no_log"] and k8s_auth.AUTH_ARG_SPEC["password"]["no_log"]


def test_a_kubeconfig_dict_keeps_its_user_credentials_out_of_output_and_nothing_else():
    config = {"clusters": [{"name": "lab", "cluster": {"server": "https://127.0.0.1:6443"}}],
              "users": [{"name": "lab", "user": {"token": "s3cr3t-token", "exec": {"command": "get-token", "args": ["--key", "k3y"]}}},
                        {"name": "other", "user": {"password": "hunter22", "username": "bob"}}]}
    assert k8s_auth.kubeconfig_credentials(config) == {"s3cr3t-token", "get-token", "--key", "k3y", "hunter22", "bob"}
    assert k8s_auth.kubeconfig_credentials("/root/.kube/config") == set()
    with patch_module_args({"kubeconfig": config}):
        module = AnsibleModule(argument_spec=api_server_check.argument_spec(), supports_check_mode=True)
    k8s_auth.hide_kubeconfig_credentials(module)
    shown = remove_values({"invocation": {"module_args": module.params}, "msg": "token s3cr3t-token for https://127.0.0.1:6443"},
                          module.no_log_values)
    assert "s3cr3t-token" not in str(shown) and "hunter22" not in str(shown)
    assert "https://127.0.0.1:6443" in shown["msg"] and shown["invocation"]["module_args"]["kubeconfig"]["clusters"][0]["name"] == "lab"


def test_a_kubeconfig_path_is_not_masked():
    with patch_module_args({"kubeconfig": "/root/.kwok/clusters/gpushare/kubeconfig.yaml"}):
        module = AnsibleModule(argument_spec=api_server_check.argument_spec(), supports_check_mode=True)
    k8s_auth.hide_kubeconfig_credentials(module)
    message = "kubeconfig /root/.kwok/clusters/gpushare/kubeconfig.yaml does not exist"
    assert remove_values({"msg": message}, module.no_log_values)["msg"] == message


@pytest.mark.parametrize("module_name", ["node_resources", "quota_coverage", "mig_migration_report", "service_account_kubeconfig",
                                         "gpu_operator_wait", "api_server_check"])
def test_every_cluster_module_hides_a_dict_kubeconfigs_credentials(module_name):
    import importlib
    import inspect

    module = importlib.import_module("ansible_collections.gpushare.k8s.plugins.modules." + module_name)
    assert "hide_kubeconfig_credentials(module)" in inspect.getsource(module.main)
