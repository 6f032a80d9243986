# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A task's ``environment:`` reaches a module run in the controller as it reaches a module process.

ansible-core starts a module process with the task's environment over the controller's (the shell prefix
``ActionBase._compute_environment_string`` builds); kubernetes.core's modules read ``K8S_AUTH_*`` there, after
their own options (module_utils/k8s/client.py ``_create_auth_spec``). The action plugins compute the same mapping
with that same method and run the module with it over ``os.environ``; module_utils/k8s/auth.py reads it at the
call. The live side-by-side test is tests/integration/test_task_environment_auth.py.
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.plugins.loader import connection_loader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpushare.k8s.plugins.action.objects_info import ActionModule
from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import auth as k8s_auth
from ansible_collections.gpushare.k8s.plugins.plugin_utils.controller_action import (
    import_module_file,
    process_environment,
    run_in_process,
    task_environment,
)

PREFIX = "GPUSHARE_UNIT_ENV_"


def action_for(environment, variables=None):
    """This collection's action plugin for a task whose ``environment`` (YAML: the play's, blocks' and task's list) is
    read as a playbook's is (trusted to be templated), on a local connection."""
    loader = DataLoader()
    task = Task()
    task.environment = loader.load(trust_as_template(environment))
    play_context = PlayContext()
    return ActionModule(task=task, connection=connection_loader.get("local", play_context), play_context=play_context,
                        loader=loader, templar=Templar(loader=loader, variables=variables or {}), shared_loader_obj=None)


def test_the_environment_is_ansible_cores_merged_and_templated():
    action = action_for("""
- {K8S_AUTH_KUBECONFIG: "{{ it_kubeconfig }}", K8S_AUTH_CONTEXT: play}
- null
- {}
- {K8S_AUTH_CONTEXT: "{{ 'ta' ~ 'sk' }}", K8S_AUTH_VERIFY_SSL: false, N: 3}
""", {"it_kubeconfig": "/clusters/a.yaml"})
    environment = task_environment(action)
    assert environment == {"K8S_AUTH_KUBECONFIG": "/clusters/a.yaml", "K8S_AUTH_CONTEXT": "task",
                           "K8S_AUTH_VERIFY_SSL": "False", "N": "3"}
    assert all(type(value) is str for value in environment.values())  # pylint: disable=unidiomatic-typecheck
    # What a module process gets: the prefix ansible-core puts before the module's command, from the same method.
    assert action._compute_environment_string() == action._connection._shell.env_prefix(**environment)


@pytest.mark.parametrize("environment", ["null", "[]", "[null]", "[{}]"])
def test_no_environment_is_an_empty_one(environment):
    assert not task_environment(action_for(environment))


def test_the_overlay_is_undone_afterwards_even_on_failure(monkeypatch):
    monkeypatch.setenv(PREFIX + "KEPT", "controller")
    monkeypatch.delenv(PREFIX + "NEW", raising=False)
    before = dict(os.environ)
    with process_environment({PREFIX + "KEPT": "task", PREFIX + "NEW": "task"}):
        assert (os.environ[PREFIX + "KEPT"], os.environ[PREFIX + "NEW"]) == ("task", "task")
    assert dict(os.environ) == before
    with pytest.raises(RuntimeError, match="^module crashed$"):
        with process_environment({PREFIX + "NEW": "task"}):
            raise RuntimeError("module crashed")
    assert dict(os.environ) == before


class _Exit(Exception):
    def __init__(self, result):
        super().__init__(result.get("msg"))
        self.result = result


def as_module_process(monkeypatch, name, args, environment):
    """``name``'s main() under ansible-core's AnsibleModule with ``environment`` set, as a module process has it."""
    def exit_json(self, **result):
        raise _Exit(result)

    def fail_json(self, msg, **result):
        raise _Exit(dict(result, msg=msg, failed=True))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    with monkeypatch.context() as scoped:
        for variable, value in environment.items():
            scoped.setenv(variable, value)
        with patch_module_args(dict(args)):
            with pytest.raises(_Exit) as done:
                import_module_file(name).main()
    result = done.value.result
    result.pop("invocation", None)
    return result


@pytest.mark.parametrize("args, environment, named", [
    ({}, {"K8S_AUTH_KUBECONFIG": "{tmp}/task.yaml"}, "task.yaml"),
    ({"kubeconfig": "{tmp}/option.yaml"}, {"K8S_AUTH_KUBECONFIG": "{tmp}/task.yaml"}, "option.yaml"),  # an option wins
])
def test_the_module_reads_the_tasks_environment_on_both_paths(monkeypatch, tmp_path, args, environment, named):
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", str(tmp_path / "controller.yaml"))  # the controller's own: loses
    args = {key: value.format(tmp=tmp_path) for key, value in dict(args, request_timeout="1").items()}
    environment = {key: value.format(tmp=tmp_path) for key, value in environment.items()}
    in_controller = run_in_process(import_module_file("api_server_check"), dict(args, fail_on_error=False),
                                   environment=environment)
    as_module = as_module_process(monkeypatch, "api_server_check", dict(args, fail_on_error=False), environment)
    assert not in_controller["ok"] and str(tmp_path / named) in in_controller["msg"], in_controller
    assert in_controller["msg"] == as_module["msg"]
    assert os.environ["K8S_AUTH_KUBECONFIG"] == str(tmp_path / "controller.yaml")  # put back


KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "no-such-context",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:32766"}}],
    "users": [{"name": "u", "user": {"token": "secret"}}],
    "contexts": [{"name": "env-only", "context": {"cluster": "c", "user": "u"}}],
}


def test_kubeconfig_of_the_environment_is_read_at_the_call_not_at_import(monkeypatch, tmp_path):
    """The kubernetes library fixes its default file when imported; a task's KUBECONFIG must still be read."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for variable in k8s_auth.AUTH_ENV_VARS["kubeconfig"] + k8s_auth.AUTH_ENV_VARS["context"]:
        monkeypatch.delenv(variable, raising=False)
    path = tmp_path / "env-only.yaml"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    monkeypatch.setattr(k8s_auth.k8s_config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "imported.yaml"))
    with process_environment({"KUBECONFIG": str(path), "K8S_AUTH_CONTEXT": "env-only"}):
        assert k8s_auth.build_configuration({}).host == "https://127.0.0.1:32766"
    environ = {"KUBECONFIG": str(path)}
    assert k8s_auth.default_kubeconfig(environ) == str(path)
    assert k8s_auth.build_configuration({"context": "env-only"}, environ=environ).host == "https://127.0.0.1:32766"
    assert k8s_auth.default_kubeconfig({}) == "~/.kube/config"
    with pytest.raises(k8s_auth.K8sAuthError) as err:
        k8s_auth.build_configuration({"context": "env-only"}, environ={"KUBECONFIG": str(tmp_path / "none.yaml")})
    assert str(err.value).startswith("could not load the default kubeconfig {0} (context 'env-only'): ".format(
        tmp_path / "none.yaml"))
