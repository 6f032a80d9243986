# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpushare.k8s.service_account_kubeconfig with a fake API: the token lands in the file (0600), never in the result."""

from __future__ import annotations

import base64
import json
import os
import stat
import types

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpushare.k8s.plugins.modules import service_account_kubeconfig as module

TOKEN = "eyJhbGciOiJSUzI1NiJ9.payload-of-a-module-test-token.signature"


class FakeResponse:  # pylint: disable=too-few-public-methods
    def __init__(self, body):
        self.data = json.dumps(body).encode()

    def release_conn(self):
        pass


class FakeApiException(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.reason, self.body = status, "Error", json.dumps({"message": message})


def fake_client(secrets):
    class CoreV1Api:  # pylint: disable=too-few-public-methods
        def __init__(self, api_client):
            self.api_client = api_client

        def read_namespaced_secret(self, name, namespace, **_kwargs):
            if (namespace, name) not in secrets:
                raise FakeApiException(404, f'secrets "{name}" not found')
            return FakeResponse(secrets[(namespace, name)])

    return types.SimpleNamespace(CoreV1Api=CoreV1Api, ApiClient=lambda configuration: configuration)


@pytest.fixture
def api(monkeypatch, tmp_path):
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text("CA\n")
    configuration = types.SimpleNamespace(host="https://127.0.0.1:6443", ssl_ca_cert=str(ca_file), verify_ssl=True)
    secrets = {("gpushare-system", "gpushare-lab-token"): {
        "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "gpushare-lab-token", "namespace": "gpushare-system",
                     "annotations": {"kubernetes.io/service-account.name": "gpushare-lab"}},
        "data": {"token": base64.b64encode(TOKEN.encode()).decode()},
    }}
    monkeypatch.setattr(module, "build_configuration", lambda params: configuration)
    monkeypatch.setattr(module, "k8s_client", fake_client(secrets))
    monkeypatch.setattr(module, "ApiException", FakeApiException)
    return secrets


def run(capsys, check_mode=False, diff=False, **args):
    args = {"service_account": "gpushare-lab", "namespace": "gpushare-system", **args}
    args["_ansible_check_mode"] = check_mode
    args["_ansible_diff"] = diff
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    out = capsys.readouterr().out
    assert TOKEN not in out and base64.b64encode(TOKEN.encode()).decode() not in out
    return json.loads(out)


@pytest.mark.usefixtures("api")
def test_writes_a_private_kubeconfig_and_returns_no_token(capsys, tmp_path):
    path = tmp_path / "creds" / "lab.kubeconfig"
    result = run(capsys, diff=True, path=str(path), context_namespace="gpu-share")
    assert result["changed"] and result["server"] == "https://127.0.0.1:6443" and result["context"] == "gpushare-lab"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    written = yaml.safe_load(path.read_text())
    assert written["users"][0]["user"]["token"] == TOKEN
    assert base64.b64decode(written["clusters"][0]["cluster"]["certificate-authority-data"]) == b"CA\n"
    assert result["diff"]["after"]["kubeconfig"]["users"][0]["user"]["token"].startswith("<redacted sha256:")
    assert run(capsys, path=str(path), context_namespace="gpu-share")["changed"] is False


@pytest.mark.usefixtures("api")
def test_check_mode_before_the_secret_exists_predicts_a_change(capsys, tmp_path):
    path = tmp_path / "lab.kubeconfig"
    result = run(capsys, check_mode=True, path=str(path), secret="not-created-yet")
    assert result["changed"] and not path.exists()


@pytest.mark.usefixtures("api")
def test_a_missing_secret_fails_naming_it(capsys, tmp_path):
    result = run(capsys, path=str(tmp_path / "lab.kubeconfig"), secret="nope")
    assert result["failed"] and "gpushare-system/nope" in result["msg"] and "404" in result["msg"]


def test_a_token_in_an_unexpected_error_is_masked(capsys, tmp_path, api, monkeypatch):
    def explode(*_args, **_kwargs):
        raise RuntimeError(f"boom with {TOKEN}")

    monkeypatch.setattr(module, "ensure_kubeconfig", explode)
    assert api
    result = run(capsys, path=str(tmp_path / "lab.kubeconfig"))
    assert result["failed"] and "boom with" in result["msg"]
