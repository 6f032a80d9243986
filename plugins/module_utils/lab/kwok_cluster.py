# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A kwokctl cluster brought to a state: present (created, or its stopped components started) or absent.

The logic of module gpushare.k8s.kwok_cluster. kwokctl is run without a shell; KWOK_WORKDIR names its state
directory. No Ansible import: pytest calls it.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import socket
import subprocess
import time

from ..errors import GpushareError

__all__ = ["DEFAULT_TIMEOUT", "NO_CLUSTER", "KwokctlError", "check_loopback", "cluster_kubeconfig", "components", "ensure", "ports_in_use"]

# `kwokctl get components` exits 0 with a table for a cluster that exists, 1 with this message for one that does not.
NO_CLUSTER = "Cluster does not exist"
# The states kwokctl reports a component in (Unknown, Stopped, Running, Ready): these need `kwokctl start cluster`.
NOT_STARTED = frozenset(("Stopped", "Unknown"))
# Seconds one kwokctl command may take (a create or start that waits is given its wait on top).
DEFAULT_TIMEOUT = 600
# What a create or start may take beyond the seconds it was told to wait for the components.
_WAIT_MARGIN = 120


class KwokctlError(GpushareError):
    """kwokctl failed, or a cluster cannot be created as asked; the message says which command and why."""

    def __init__(self, msg, **details):
        super().__init__(msg)
        self.details = details


class KwokctlMissing(KwokctlError):
    """kwokctl itself is not there."""


def check_loopback(address, field="bind_address"):
    """``address`` if it is a loopback address (127.0.0.0/8, ::1, localhost), else ValueError naming ``field`` and the fix.

    The lab cluster's etcd serves without authentication and its components trust whoever reaches them: bound to any
    other address, anyone on the network could read and write every object.
    """
    text = str(address) if isinstance(address, str) else None
    loopback = text is not None and text.strip() == text and text.lower() == "localhost"
    if text is not None and not loopback:
        try:
            loopback = ipaddress.ip_address(text).is_loopback
        except ValueError:
            loopback = False
    if not loopback:
        raise ValueError(
            "%s: %r is not a loopback address; the lab cluster's etcd serves without authentication and its components "
            "trust whoever reaches them, so any other address would let anyone who can reach it read and change every "
            "object. Fix: use 127.0.0.1 (or another address of 127.0.0.0/8, ::1 or localhost)" % (field, address))
    return text


def cluster_kubeconfig(workdir, name):
    """The kubeconfig kwokctl keeps for cluster ``name`` in its state directory ``workdir``."""
    return os.path.join(workdir, "clusters", name, "kubeconfig.yaml")


def _run(kwokctl, name, args, workdir, timeout=None):
    argv = [kwokctl, "--name", name] + list(args)
    command = " ".join(shlex.quote(arg) for arg in argv)
    try:
        # not AnsibleModule.run_command: bounded by timeout (run_command has none), and the controller path has no
        # AnsibleModule (plugin_utils/controller_action.py)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,  # pylint: disable=ansible-bad-function
                              env=dict(os.environ, KWOK_WORKDIR=workdir))
    except FileNotFoundError:
        raise KwokctlMissing("%s: no such program. Fix: install kwokctl, or give its path in kwokctl" % kwokctl) from None
    except PermissionError:
        raise KwokctlError("%s: not executable. Fix: give it mode 0755" % kwokctl) from None
    except subprocess.TimeoutExpired:
        raise KwokctlError("%s did not finish within %s s and was stopped. Fix: look at what it waits for (kwokctl's logs in %s), "
                           "or give it longer (timeout)" % (command, timeout, os.path.join(workdir, "clusters", name, "logs")),
                           cmd=command, timed_out=True) from None
    return proc, command


def _failed(command, proc):
    return KwokctlError("%s exited %d: %s" % (command, proc.returncode, (proc.stderr or proc.stdout).strip()[-2000:]),
                        cmd=command, rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


def components(kwokctl, name, workdir, timeout=DEFAULT_TIMEOUT):
    """``{component: status}`` of cluster ``name``, or None when there is no cluster of that name."""
    proc, command = _run(kwokctl, name, ["get", "components", "-o", "wide"], workdir, timeout)
    if proc.returncode != 0:
        if NO_CLUSTER in proc.stderr:
            return None
        raise _failed(command, proc)
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line.strip()]
    return {row[0]: row[-1] for row in rows}


def _listening(host, port, timeout=0.2):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ports_in_use(host, ports, wait=1.0, interval=0.1, clock=time.monotonic, sleep=time.sleep):
    """The ports of ``ports`` (a list) something still accepts connections on at ``host`` after ``wait`` seconds.

    A cluster removed a moment ago may take a fraction of a second to close its listeners.
    """
    deadline = clock() + wait
    while True:
        busy = [port for port in ports if _listening(host, port)]
        if not busy or clock() >= deadline:
            return busy
        sleep(interval)


def _port_numbers(ports):
    numbers = set()
    for key, value in ports.items():
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = 0
        if not 0 < number < 65536:
            raise KwokctlError("ports: %s is %r, not a port number. Fix: give a number from 1 to 65535" % (key, value))
        numbers.add(number)
    return sorted(numbers)


def _timeout(value):
    if value is None:
        return DEFAULT_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KwokctlError("timeout: %r is not a number of seconds. Fix: give a whole number of 1 or more, e.g. %d" % (value, DEFAULT_TIMEOUT))
    return value


def ensure(kwokctl, name, workdir, state="present", config=None, wait=None, host="127.0.0.1", ports=None, check_mode=False,
           timeout=None):
    """Bring cluster ``name`` to ``state``; the result: changed, exists (before), components (before), and what was run.

    present: create the cluster from ``config`` (after checking that nothing listens on ``ports`` at ``host``), or start
    its stopped components. absent: delete it, with its state and kubeconfig. In check mode, only look.
    Each kwokctl command may take ``timeout`` seconds (default DEFAULT_TIMEOUT; a create or start that waits ``wait``
    seconds at least ``wait`` plus two minutes) before it is stopped.
    Raises KwokctlError (details in ``details``) when kwokctl fails, takes too long or a port is taken; nothing is
    created then.
    """
    numbers = _port_numbers(ports or {})  # bad input fails before kwokctl runs
    timeout = _timeout(timeout)
    try:
        before = components(kwokctl, name, workdir, timeout)
    except KwokctlMissing:
        if state != "absent":
            raise
        before = None  # without kwokctl (never built or installed), there is no cluster it made
    result = dict(changed=False, exists=before is not None, components=before or {}, created=False, started=False, deleted=False,
                  kubeconfig=cluster_kubeconfig(workdir, name))
    wait_args = [] if wait is None else ["--wait", "%ds" % wait]
    if state == "absent":
        if before is None:
            return result
        outcome, args = "deleted", ["delete", "cluster", "--kubeconfig", result["kubeconfig"]]
    elif before is None:
        if not config:
            raise KwokctlError("config: required to create cluster %s. Fix: give the kwokctl configuration file" % name)
        busy = ports_in_use(host, numbers)
        if busy:
            raise KwokctlError("ports %s in use on %s; nothing was created" % (", ".join(map(str, busy)), host), ports_in_use=busy)
        # --kubeconfig= leaves the user's ~/.kube/config alone: the cluster's own kubeconfig is in its directory.
        outcome, args = "created", ["--config", config, "create", "cluster", "--kubeconfig="] + (
            [] if wait is None else ["--timeout", "%ds" % wait]) + wait_args
    elif NOT_STARTED & set(before.values()):
        outcome, args = "started", ["start", "cluster"] + wait_args
    else:
        return result
    result["changed"] = True
    if check_mode:
        return result
    limit = timeout if state == "absent" else max(timeout, (wait or 0) + _WAIT_MARGIN)
    proc, result["cmd"] = _run(kwokctl, name, args, workdir, limit)
    if proc.returncode != 0:
        raise _failed(result["cmd"], proc)
    result[outcome] = True
    return result
