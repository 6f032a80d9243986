# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""ensure: which kwokctl command a cluster's state calls for, ports checked before creating, check mode runs none.

A stand-in kwokctl (a shell script) logs its arguments and answers as kwokctl 0.8 does; the live tests run the real one.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import kwok_cluster
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.kwok_cluster import KwokctlError, check_loopback, ensure, ports_in_use

TABLE = "NAME                      STATUS\netcd                      Ready\nkube-apiserver            %s\n"
MISSING = '{"level":"WARN","msg":"Cluster does not exist","cluster":"lab"}'


def kwokctl(tmp_path, exists=True, status="Ready", other_failure=False):
    """A kwokctl that answers `get components` as asked and logs every call's arguments and KWOK_WORKDIR."""
    path = tmp_path / "kwokctl"
    log = tmp_path / "calls"
    if other_failure:
        get = "echo 'permission denied: /srv/kwok' >&2; exit 1"
    elif exists:
        get = "printf '%s'" % (TABLE % status)
    else:
        get = "echo '%s' >&2; exit 1" % MISSING
    path.write_text('#!/bin/sh\necho "$KWOK_WORKDIR $*" >> %s\ncase "$*" in *"get components"*) %s;; esac\n' % (log, get))
    os.chmod(path, 0o755)
    return str(path), log


def calls(log):
    return log.read_text().splitlines() if log.exists() else []


def test_a_missing_cluster_is_created_from_its_config_without_touching_the_users_kubeconfig(tmp_path):
    program, log = kwokctl(tmp_path, exists=False)
    result = ensure(program, "lab", "/w", config="/w/lab.yaml", wait=300)
    assert result["changed"] and result["created"] and not result["exists"]
    assert calls(log) == ["/w --name lab get components -o wide",
                          "/w --name lab --config /w/lab.yaml create cluster --kubeconfig= --timeout 300s --wait 300s"]
    assert result["kubeconfig"] == "/w/clusters/lab/kubeconfig.yaml"


def test_a_running_cluster_is_left_alone_and_a_stopped_one_started(tmp_path):
    program, log = kwokctl(tmp_path)
    result = ensure(program, "lab", "/w", config="/w/lab.yaml")
    assert not result["changed"] and result["components"] == {"etcd": "Ready", "kube-apiserver": "Ready"}
    (tmp_path / "stopped").mkdir()
    program, log = kwokctl(tmp_path / "stopped", status="Stopped")
    result = ensure(program, "lab", "/w", config="/w/lab.yaml", wait=60)
    assert result["changed"] and result["started"] and not result["created"]
    assert calls(log)[-1] == "/w --name lab start cluster --wait 60s"


@pytest.mark.parametrize("state, exists", [("present", False), ("absent", True)])
def test_check_mode_only_asks_for_the_components(tmp_path, state, exists):
    program, log = kwokctl(tmp_path, exists=exists)
    result = ensure(program, "lab", "/w", state=state, config="/w/lab.yaml", check_mode=True)
    assert result["changed"] and not (result["created"] or result["deleted"])
    assert calls(log) == ["/w --name lab get components -o wide"]


def test_absent_deletes_with_the_clusters_own_kubeconfig_and_then_is_no_change(tmp_path):
    program, log = kwokctl(tmp_path)
    assert ensure(program, "lab", "/w", state="absent")["deleted"]
    assert calls(log)[-1] == "/w --name lab delete cluster --kubeconfig /w/clusters/lab/kubeconfig.yaml"
    program, log = kwokctl(tmp_path, exists=False)
    log.unlink()
    assert not ensure(program, "lab", "/w", state="absent")["changed"]
    assert len(calls(log)) == 1


def test_without_kwokctl_absent_is_no_change_and_present_says_what_to_install(tmp_path):
    assert not ensure(str(tmp_path / "nothing"), "lab", "/w", state="absent")["changed"]
    with pytest.raises(KwokctlError, match="nothing: no such program. Fix: install kwokctl"):
        ensure(str(tmp_path / "nothing"), "lab", "/w", config="/w/lab.yaml")


def test_another_kwokctl_failure_is_reported_with_its_message_not_taken_for_no_cluster(tmp_path):
    program, log = kwokctl(tmp_path, other_failure=True)
    with pytest.raises(KwokctlError, match="get components -o wide exited 1: permission denied: /srv/kwok"):
        ensure(program, "lab", "/w", state="absent")
    assert len(calls(log)) == 1


def test_a_port_in_use_fails_naming_it_before_kwokctl_creates_anything(tmp_path):
    program, log = kwokctl(tmp_path, exists=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(KwokctlError, match="ports %d in use on 127.0.0.1; nothing was created" % port) as caught:
            ensure(program, "lab", "/w", config="/w/lab.yaml", ports={"kube-apiserver": port, "etcd": str(port)})
    assert caught.value.details == {"ports_in_use": [port]}
    assert calls(log) == ["/w --name lab get components -o wide"]


def test_a_port_freed_within_the_wait_is_free(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    ticks = iter(range(100))
    assert ports_in_use("127.0.0.1", [port], wait=5, clock=lambda: next(ticks) * 0.1, sleep=lambda _s: taken.close()) == []


@pytest.mark.parametrize("ports, message", [({"etcd": "x"}, "ports: etcd is 'x', not a port number"),
                                            ({"etcd": 70000}, "ports: etcd is 70000, not a port number")])
def test_bad_ports_fail_before_kwokctl_runs(tmp_path, ports, message):
    program, log = kwokctl(tmp_path, exists=False)
    with pytest.raises(KwokctlError, match=message):
        ensure(program, "lab", "/w", config="/w/lab.yaml", ports=ports)
    assert calls(log) == []


def test_creating_needs_a_config(tmp_path):
    program, _log = kwokctl(tmp_path, exists=False)
    with pytest.raises(KwokctlError, match="config: required to create cluster lab"):
        ensure(program, "lab", "/w")


# --------------------------------------------------------------------------- timeouts


def hanging_kwokctl(tmp_path, hang_on):
    """A kwokctl that logs its arguments, answers `get components` with a running cluster, and sleeps on ``hang_on``."""
    path = tmp_path / "kwokctl"
    log = tmp_path / "calls"
    path.write_text('#!/bin/sh\necho "$*" >> %s\ncase "$*" in *"%s"*) exec sleep 30;; *"get components"*) printf \'%s\';; esac\n'
                    % (log, hang_on, TABLE % "Stopped"))
    os.chmod(path, 0o755)
    return str(path), log


def test_a_kwokctl_that_hangs_is_stopped_after_the_timeout_and_the_error_names_the_command(tmp_path):
    program, log = hanging_kwokctl(tmp_path, "get components")
    started = time.monotonic()
    with pytest.raises(KwokctlError) as caught:
        ensure(program, "lab", "/w", state="absent", timeout=1)
    assert time.monotonic() - started < 10
    assert str(caught.value) == (
        "%s --name lab get components -o wide did not finish within 1 s and was stopped. Fix: look at what it waits for "
        "(kwokctl's logs in /w/clusters/lab/logs), or give it longer (timeout)" % program)
    assert caught.value.details == {"cmd": "%s --name lab get components -o wide" % program, "timed_out": True}


def test_a_start_that_hangs_is_given_its_wait_plus_two_minutes_then_stopped(tmp_path, monkeypatch):
    program, _log = hanging_kwokctl(tmp_path, "start cluster")
    limits = []
    real_run = kwok_cluster._run

    def run(kwokctl, name, args, workdir, timeout=None):
        limits.append((args[0], timeout))
        return real_run(kwokctl, name, args, workdir, 1 if args[0] == "start" else timeout)

    monkeypatch.setattr(kwok_cluster, "_run", run)
    with pytest.raises(KwokctlError, match=r"--name lab start cluster --wait 300s did not finish within 1 s and was stopped"):
        ensure(program, "lab", "/w", wait=300, timeout=60)
    assert limits == [("get", 60), ("start", 420)]


def test_the_default_timeout_is_ten_minutes(tmp_path, monkeypatch):
    limits = []
    monkeypatch.setattr(kwok_cluster, "_run", lambda kwokctl, name, args, workdir, timeout=None: limits.append(timeout) or (
        subprocess.CompletedProcess(args, 1, "", MISSING), "kwokctl"))
    ensure("kwokctl", "lab", "/w", state="absent")
    assert limits == [600]


@pytest.mark.parametrize("timeout", [0, -5, "10", True])
def test_a_timeout_that_is_not_a_positive_number_fails_before_kwokctl_runs(tmp_path, timeout):
    program, log = kwokctl(tmp_path)
    with pytest.raises(KwokctlError, match="timeout: %s is not a number of seconds. Fix: give a whole number of 1 or more, e.g. 600"
                       % re.escape(repr(timeout))):
        ensure(program, "lab", "/w", timeout=timeout)
    assert calls(log) == []


# --------------------------------------------------------------------------- the bind address


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "localhost", "LOCALHOST"])
def test_loopback_addresses_are_accepted(address):
    assert check_loopback(address, "lab_cluster_bind_address") == address


@pytest.mark.parametrize("address", ["0.0.0.0", "10.0.0.1", "192.168.1.20", "::", "128.0.0.1", "", "127.0.0.1\n", " 127.0.0.1",
                                     "localhost.example.com", "127.1", None, 2130706433])
def test_any_other_address_is_refused_naming_the_field_and_the_fix(address):
    with pytest.raises(ValueError) as caught:
        check_loopback(address, "lab_cluster_bind_address")
    assert str(caught.value) == (
        "lab_cluster_bind_address: %r is not a loopback address; the lab cluster's etcd serves without authentication and its "
        "components trust whoever reaches them, so any other address would let anyone who can reach it read and change every "
        "object. Fix: use 127.0.0.1 (or another address of 127.0.0.0/8, ::1 or localhost)" % (address,))
