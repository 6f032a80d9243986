# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""k8s_auth resolves options and ``K8S_AUTH_*`` variables as kubernetes.core's own code does, case by case.

The reference is kubernetes.core's ``_create_auth_spec`` and ``_create_headers`` (module_utils/k8s/client.py), run
here with the same options and the same process environment: an option wins over its variables, ``K8S_AUTH_<OPTION>``
over ``K8S_AUTH_<CLIENT NAME>`` (``K8S_AUTH_VALIDATE_CERTS`` over ``K8S_AUTH_VERIFY_SSL``), booleans and lists read
the same way. Both read the environment at the call: what the module runs with (for this collection's action plugins,
the task's ``environment:`` over the controller's: plugin_utils/controller_action.py).
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_MAP
from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as core_client

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s import auth as k8s_auth

CASES = [
    ({}, {"K8S_AUTH_KUBECONFIG": "/env/kc", "K8S_AUTH_CONTEXT": "env"}),
    ({"kubeconfig": "/task/kc"}, {"K8S_AUTH_KUBECONFIG": "/env/kc", "K8S_AUTH_CONTEXT": "env"}),
    ({"context": "task", "host": "https://task"}, {"K8S_AUTH_CONTEXT": "env", "K8S_AUTH_HOST": "https://env",
                                                   "K8S_AUTH_API_KEY": "token"}),
    ({}, {"K8S_AUTH_VALIDATE_CERTS": "no", "K8S_AUTH_VERIFY_SSL": "yes"}),
    ({}, {"K8S_AUTH_VERIFY_SSL": "False"}),
    ({}, {"K8S_AUTH_VERIFY_SSL": "anything"}),
    ({"validate_certs": True}, {"K8S_AUTH_VERIFY_SSL": "0"}),
    ({}, {"K8S_AUTH_SSL_CA_CERT": "/ca.pem", "K8S_AUTH_CERT_FILE": "/c.pem", "K8S_AUTH_KEY_FILE": "/k.pem"}),
    ({}, {"K8S_AUTH_CA_CERT": "/ca.pem", "K8S_AUTH_SSL_CA_CERT": "/other.pem"}),
    ({}, {"K8S_AUTH_USERNAME": "u", "K8S_AUTH_PASSWORD": "p", "K8S_AUTH_PROXY": "http://proxy:3128",
          "K8S_AUTH_NO_PROXY": "localhost", "K8S_AUTH_PERSIST_CONFIG": "true"}),
    ({}, {"K8S_AUTH_PROXY_HEADERS_USER_AGENT": "lab/1.0", "K8S_AUTH_PROXY_HEADERS_BASIC_AUTH": "u:p"}),
    ({}, {"K8S_AUTH_IMPERSONATE_USER": "jane", "K8S_AUTH_IMPERSONATE_GROUPS": "dev,,ops"}),
    ({"impersonate_groups": ["task"]}, {"K8S_AUTH_IMPERSONATE_USER": "jane", "K8S_AUTH_IMPERSONATE_GROUPS": "dev"}),
]


@pytest.fixture
def environment(monkeypatch):
    """Set the process environment to hold no K8S_AUTH_* but ``variables``."""
    def set_to(variables):
        for name in list(os.environ):
            if name.startswith("K8S_AUTH_"):
                monkeypatch.delenv(name)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
    return set_to


def kubernetes_core(params):
    """kubernetes.core's resolution of ``params`` and the process environment, in the collection's option names."""
    auth = core_client._create_auth_spec(**params)  # pylint: disable=protected-access
    resolved = {AUTH_ARG_MAP[name]: value for name, value in auth.items() if value not in (None, {})}
    headers = core_client._create_headers(**params)  # pylint: disable=protected-access
    if "Impersonate-User" in headers:
        resolved["impersonate_user"] = headers["Impersonate-User"]
    if "Impersonate-Group" in headers:
        resolved["impersonate_groups"] = headers["Impersonate-Group"]
    return resolved


@pytest.mark.parametrize("params, variables", CASES)
def test_options_and_environment_resolve_as_kubernetes_core_resolves_them(environment, params, variables):
    environment(variables)
    assert k8s_auth.resolve_auth_params(params) == kubernetes_core(params)


def test_an_explicit_environ_is_read_as_the_process_environment_is(environment):
    environment({"K8S_AUTH_CONTEXT": "process"})
    assert k8s_auth.resolve_auth_params({}, environ={"K8S_AUTH_CONTEXT": "given"}) == {"context": "given"}
    assert k8s_auth.resolve_auth_params({}) == {"context": "process"}


def test_the_process_environment_is_read_at_the_call(environment):
    environment({})
    assert not k8s_auth.resolve_auth_params({})
    os.environ["K8S_AUTH_CONTEXT"] = "later"
    try:
        assert k8s_auth.resolve_auth_params({}) == {"context": "later"}
    finally:
        del os.environ["K8S_AUTH_CONTEXT"]
