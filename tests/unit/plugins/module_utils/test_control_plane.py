# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parts of the control-plane checks: lease freshness and lab-cluster mismatches."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.gpushare.k8s.plugins.module_utils.k8s.control_plane import (
    build_progress, format_duration, kwokctl_mismatches, kwokctl_ports, lease_errors, parse_time)

NOW = datetime.datetime(2026, 12, 1, 8, 0, 0, tzinfo=datetime.timezone.utc)
COMPONENTS = ["kube-controller-manager", "kube-scheduler"]
FIX = "run `make cluster`."


def lease(name, renewed_seconds_ago, duration=15, holder="host_1234"):
    renew = NOW - datetime.timedelta(seconds=renewed_seconds_ago)
    return {"metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "renewTime": renew.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


def test_fresh_leases_pass():
    assert lease_errors([lease("kube-controller-manager", 2), lease("kube-scheduler", 14.9)], COMPONENTS, NOW, FIX) == []


def test_a_lease_older_than_its_duration_names_the_component_and_the_fix():
    (message,) = lease_errors([lease("kube-controller-manager", 95), lease("kube-scheduler", 1)], COMPONENTS, NOW, FIX)
    assert "kube-controller-manager: its leader Lease was last renewed 95 s ago, longer than its 15 s duration" in message
    assert "kube-scheduler" not in message.split("Fix:")[0].split("so it is not running")[0]
    assert message.endswith("Fix: run `make cluster`.")


def test_the_lease_duration_comes_from_the_lease():
    assert lease_errors([lease("kube-scheduler", 20, duration=30)], ["kube-scheduler"], NOW, FIX) == []
    assert lease_errors([lease("kube-scheduler", 31, duration=30)], ["kube-scheduler"], NOW, FIX)


def test_missing_and_released_leases_are_reported():
    (message,) = lease_errors([lease("kube-scheduler", 1, holder="")], COMPONENTS, NOW, FIX)
    assert "kube-controller-manager: there is no Lease kube-system/kube-controller-manager" in message
    assert "kube-scheduler: its leader Lease has no holder" in message


def test_since_counts_a_lease_renewed_before_it_as_stale():
    # A lease 9 s old is within its duration, yet its holder may be a component that exits at its renew deadline, or
    # one started again that waits a whole duration before it takes the Lease: only a renewal after `since` counts.
    since = NOW - datetime.timedelta(seconds=3)
    leases = [lease("kube-controller-manager", 9), lease("kube-scheduler", 1)]
    assert lease_errors(leases, COMPONENTS, NOW, FIX) == []
    (message,) = lease_errors(leases, COMPONENTS, NOW, FIX, since.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    assert "kube-controller-manager: its leader Lease was last renewed 9 s ago, before 2026-12-01T07:59:57+00:00" in message
    assert "kube-scheduler" not in message.split("so it is not running")[0]
    assert lease_errors(leases, COMPONENTS, NOW, FIX, "") == []
    assert lease_errors([lease("kube-controller-manager", 2), lease("kube-scheduler", 1)], COMPONENTS, NOW, FIX, since) == []


def test_now_may_be_a_string_and_micro_time_any_precision():
    stale = {"metadata": {"name": "kube-scheduler"},
             "spec": {"holderIdentity": "h", "leaseDurationSeconds": 15, "renewTime": "2026-12-01T07:59:00.1Z"}}
    assert lease_errors([stale], ["kube-scheduler"], "2026-12-01T08:00:00Z", FIX)
    assert parse_time("2026-12-01T07:59:00.123456789Z") == datetime.datetime(2026, 12, 1, 7, 59, 0, 123456, tzinfo=datetime.timezone.utc)


ASKED = {"bindAddress": "127.0.0.1", "kubeVersion": "v1.36.3", "etcdVersion": "v3.6.16", "kwokVersion": "v0.8.0", "components": []}


def running(**options):
    base = {"bindAddress": "127.0.0.1", "kubeVersion": "v1.36.3", "etcdVersion": "3.6.16", "kwokVersion": "v0.8.0"}
    base.update(options)
    return [{"kind": "KwokctlConfiguration", "apiVersion": "config.kwok.x-k8s.io/v1alpha1", "options": base,
             "components": [{"name": "etcd"}, {"name": "kube-apiserver"}]}, {"kind": "KwokConfiguration"}]


def test_the_cluster_asked_for_has_no_mismatch():
    assert kwokctl_mismatches(ASKED, running(), "v1.36.3") == []


def test_bind_address_and_versions_that_differ_are_named():
    found = kwokctl_mismatches(ASKED, running(bindAddress="0.0.0.0", kubeVersion="v1.36.2", etcdVersion="3.6.15"), "v1.36.2")
    assert found == ["bind address: running 0.0.0.0, asked 127.0.0.1", "Kubernetes version: running v1.36.2, asked v1.36.3",
                     "etcd version: running 3.6.15, asked v3.6.16", "kube-apiserver reports version v1.36.2, asked v1.36.3"]


def test_an_unset_bind_address_differs():
    found = kwokctl_mismatches(ASKED, running(bindAddress=None))
    assert found == ["bind address: running (unset), asked 127.0.0.1"]


def test_missing_extra_components_are_named():
    assert kwokctl_mismatches(dict(ASKED, components=["operator", "etcd"]), running()) == [
        "components: operator not running (the cluster was created without them)"]


def test_a_port_base_fixes_six_ports_in_kwokctls_option_names():
    assert kwokctl_ports(0) == {}
    assert kwokctl_ports(20100) == {"etcdPeerPort": 20100, "etcdPort": 20101, "kubeApiserverPort": 20102, "kwokControllerPort": 20103,
                                    "kubeControllerManagerPort": 20104, "kubeSchedulerPort": 20105}
    assert kwokctl_ports(65530)["kubeSchedulerPort"] == 65535


@pytest.mark.parametrize("base, problem", [
    (80, "lab_cluster_port_base: 80 leaves the ports 80-85 outside 1024-65535. Fix: set 0 (kwokctl picks free ports) or a port from 1024 to 65530"),
    (65531, "lab_cluster_port_base: 65531 leaves the ports 65531-65536 outside 1024-65535"),
    (-1, "lab_cluster_port_base: -1 leaves the ports"),
    ("20100", "lab_cluster_port_base: '20100' is not a whole number. Fix:"),
    (True, "lab_cluster_port_base: True is not a whole number"),
])
def test_a_port_base_outside_the_port_range_is_refused_naming_the_fix(base, problem):
    with pytest.raises(ValueError) as error:
        kwokctl_ports(base)
    assert str(error.value).startswith(problem)


def test_ports_asked_are_compared_and_no_ports_asked_compares_none():
    asked = dict(ASKED, ports=kwokctl_ports(20100))
    assert kwokctl_mismatches(asked, running(**kwokctl_ports(20100))) == []
    assert kwokctl_mismatches(asked, running(**dict(kwokctl_ports(20100), kubeApiserverPort=32765))) == [
        "kube-apiserver port: running 32765, asked 20102"]
    assert kwokctl_mismatches(asked, running())[0] == "etcd peer port: running (unset), asked 20100"
    assert kwokctl_mismatches(dict(ASKED, ports={}), running(kubeApiserverPort=32765)) == []


def test_a_kwok_yaml_without_configuration_is_a_mismatch():
    assert kwokctl_mismatches(ASKED, [{"kind": "KwokConfiguration"}]) == [
        "configuration: kwok.yaml holds no KwokctlConfiguration (a cluster this role did not create?)"]


@pytest.mark.parametrize("bad, message", [
    ("yesterday", r"^Invalid isoformat string: 'yesterday'$"),
    ("2026-13-01T00:00:00Z", r"^month must be in 1\.\.12$"),
])
def test_an_unreadable_renew_time_is_an_error(bad, message):
    # Python's own message: it names the value but not the Lease or its renewTime field
    with pytest.raises(ValueError, match=message):
        lease_errors([{"metadata": {"name": "kube-scheduler"}, "spec": {"holderIdentity": "h", "renewTime": bad}}],
                     ["kube-scheduler"], NOW, FIX)


# ---------------------------------------------------------------------------------------------- build_progress
LOG = """[build kubernetes v1.36.3] building with go1.26.8 into /c/kubernetes-v1.36.3; Go's output in /c/logs/kubernetes-v1.36.3.log
go: downloading k8s.io/api v0.36.3
[build kubernetes v1.36.3] resolving dependencies (go mod tidy)
go: downloading k8s.io/apiserver v0.36.3
[build kubernetes v1.36.3] compiling kube-apiserver kube-controller-manager kube-scheduler kubectl (the longest step)
"""


@pytest.mark.parametrize("seconds, shown", [(0, "0m00s"), (9.9, "0m09s"), (60, "1m00s"), (453, "7m33s"), (3600, "60m00s"), (-3, "0m00s")])
def test_durations_read_like_the_build_scripts(seconds, shown):
    assert format_duration(seconds) == shown


def test_a_running_build_shows_the_component_the_time_so_far_and_its_last_step():
    started = NOW - datetime.timedelta(seconds=140)
    line = build_progress("kubernetes", "v1.36.3", started, NOW, LOG)
    assert line == "kubernetes v1.36.3: 2m20s, compiling kube-apiserver kube-controller-manager kube-scheduler kubectl (the longest step)"


def test_times_may_be_rfc3339_strings_and_naive_times_are_utc():
    assert build_progress("etcd", "v3.6.16", "2026-12-01T07:59:30", "2026-12-01T08:00:00Z").startswith("etcd v3.6.16: 0m30s, ")


def test_before_the_first_step_and_for_another_components_lines_it_is_starting():
    assert build_progress("etcd", "v3.6.16", NOW, NOW, "") == "etcd v3.6.16: 0m00s, starting"
    assert build_progress("etcd", "v3.6.16", NOW, NOW, LOG) == "etcd v3.6.16: 0m00s, starting"


@pytest.mark.parametrize("rc, state", [(0, "done"), (1, "failed (exit 1)"), (None, "failed (exit ?)")])
def test_a_finished_build_says_done_or_failed(rc, state):
    assert build_progress("kwok", "v0.8.0", NOW - datetime.timedelta(seconds=125), NOW, LOG, finished=True, rc=rc) == "kwok v0.8.0: 2m05s, " + state
