# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/sa_kubeconfig.py: reading token Secrets, building and writing private kubeconfigs."""

from __future__ import annotations

import base64
import os
import stat

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils import sa_kubeconfig as skc

TOKEN = "eyJhbGciOiJSUzI1NiJ9.payload-of-a-test-token.signature"


def b64(text):
    return base64.b64encode(text.encode()).decode()


def secret(token=TOKEN, owner="gpushare-lab", kind=skc.TOKEN_SECRET_TYPE, ca="Q0EK"):
    data = {"token": b64(token), "ca.crt": ca} if token else {}
    return {
        "type": kind,
        "metadata": {"name": "gpushare-lab-token", "namespace": "gpushare-system", "annotations": {skc.SA_NAME_ANNOTATION: owner}},
        "data": data,
    }


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_read_token_secret_returns_token_and_ca():
    assert skc.read_token_secret(secret(), "gpushare-lab") == (TOKEN, "Q0EK")


def test_read_token_secret_not_filled_in_yet():
    assert skc.read_token_secret(secret(token=None), "gpushare-lab") == (None, None)


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "Opaque"}, "holds no ServiceAccount token"),
    ({"owner": "someone-else"}, "not 'gpushare-lab'"),
])
def test_read_token_secret_refuses_other_secrets(kwargs, message):
    with pytest.raises(skc.KubeconfigError, match=message) as caught:
        skc.read_token_secret(secret(**kwargs), "gpushare-lab")
    assert TOKEN not in str(caught.value)


def test_wait_for_token_polls_until_filled_in():
    answers = [secret(token=None), secret(token=None), secret()]
    sleeps = []
    token, ca_data = skc.wait_for_token(lambda: answers.pop(0), "gpushare-lab", timeout=10, sleep=sleeps.append, clock=lambda: 0)
    assert (token, ca_data) == (TOKEN, "Q0EK") and len(sleeps) == 2


def test_wait_for_token_times_out_with_the_fix():
    ticks = iter(range(100))
    with pytest.raises(skc.KubeconfigError, match="service-account-private-key-file"):
        skc.wait_for_token(lambda: secret(token=None), "gpushare-lab", timeout=3, sleep=lambda _s: None, clock=lambda: next(ticks))


def test_build_kubeconfig_is_one_current_context():
    config = skc.build_kubeconfig("https://127.0.0.1:6443", TOKEN, "gpushare-lab", "gpushare", "gpushare-lab", "gpu-share", ca_data="Q0EK")
    assert config["current-context"] == "gpushare-lab"
    assert config["clusters"] == [{"name": "gpushare", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0EK"}}]
    assert config["contexts"][0]["context"] == {"cluster": "gpushare", "user": "gpushare-lab", "namespace": "gpu-share"}
    assert config["users"][0]["user"] == {"token": TOKEN}


def test_build_kubeconfig_insecure_and_missing_server():
    config = skc.build_kubeconfig("https://h", TOKEN, "u", "c", "x", ca_data="Q0EK", insecure=True)
    assert config["clusters"][0]["cluster"] == {"server": "https://h", "insecure-skip-tls-verify": True}
    with pytest.raises(skc.KubeconfigError, match="server"):
        skc.build_kubeconfig("", TOKEN, "u", "c", "x")


def test_redact_hides_the_token_and_keeps_the_rest():
    config = skc.build_kubeconfig("https://h", TOKEN, "u", "c", "x")
    redacted = skc.redact(config)
    assert TOKEN not in repr(redacted) and redacted["users"][0]["user"]["token"].startswith("<redacted sha256:")
    assert config["users"][0]["user"]["token"] == TOKEN  # the original is untouched


def test_ensure_kubeconfig_writes_0600_and_is_idempotent(tmp_path):
    path = tmp_path / "creds" / "lab.kubeconfig"
    config = skc.build_kubeconfig("https://h", TOKEN, "u", "c", "x")
    changed, diff = skc.ensure_kubeconfig(str(path), config)
    assert changed and mode_of(path) == 0o600 and mode_of(path.parent) == 0o700
    assert yaml.safe_load(path.read_text()) == config
    assert TOKEN not in repr(diff)
    assert skc.ensure_kubeconfig(str(path), config)[0] is False
    assert [p.name for p in path.parent.iterdir()] == ["lab.kubeconfig"]  # no temporary file left


def test_ensure_kubeconfig_tightens_a_wide_mode(tmp_path):
    path = tmp_path / "lab.kubeconfig"
    config = skc.build_kubeconfig("https://h", TOKEN, "u", "c", "x")
    skc.ensure_kubeconfig(str(path), config)
    os.chmod(path, 0o644)
    changed, diff = skc.ensure_kubeconfig(str(path), config)
    assert changed and mode_of(path) == 0o600
    assert diff["before"]["mode"] == "0644" and diff["after"]["mode"] == "0600"


def test_ensure_kubeconfig_check_mode_writes_nothing(tmp_path):
    path = tmp_path / "lab.kubeconfig"
    changed, diff = skc.ensure_kubeconfig(str(path), skc.build_kubeconfig("https://h", TOKEN, "u", "c", "x"), check_mode=True)
    assert changed and not path.exists() and diff["before"]["mode"] is None


def test_ensure_kubeconfig_replaces_a_new_token(tmp_path):
    path = tmp_path / "lab.kubeconfig"
    skc.ensure_kubeconfig(str(path), skc.build_kubeconfig("https://h", TOKEN, "u", "c", "x"))
    changed, diff = skc.ensure_kubeconfig(str(path), skc.build_kubeconfig("https://h", TOKEN + "2", "u", "c", "x"))
    assert changed and diff["before"]["kubeconfig"] != diff["after"]["kubeconfig"]
    assert TOKEN not in repr(diff) and mode_of(path) == 0o600
