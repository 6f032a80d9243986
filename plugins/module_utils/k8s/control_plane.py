# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Is a cluster's control plane whole, and is a running lab cluster the one asked for? No Ansible import.

``lease_errors`` reads the leader-election Leases that kube-controller-manager and kube-scheduler renew
(every 2 s by default) in kube-system: a component whose Lease was not renewed within its
``leaseDurationSeconds`` is not running, whatever ``holderIdentity`` still says. After an API server
pause longer than the renew deadline both exit ("leaderelection lost") and nothing restarts them.

``kwokctl_mismatches`` compares what a running kwokctl cluster was created with (the
``KwokctlConfiguration`` kwokctl keeps in ``<home>/clusters/<name>/kwok.yaml``) and what the server
reports (``/version``) with what is asked.

``kwokctl_ports`` turns a port base into the kwokctl options that fix every port of a cluster.

``build_progress`` is the line shown while a control-plane component builds (every few seconds, so a cold
build of several minutes is never silent): the component, the time since the build started and its step,
read from the build log that ``roles/lab_cluster/files/build-binaries.sh`` writes.
"""

from __future__ import annotations

import datetime

__all__ = ["build_progress", "format_duration", "lease_errors", "kwokctl_mismatches", "kwokctl_ports", "parse_time"]

# The ports kwokctl (binary runtime) gives a cluster, in the order a port base assigns them, and what each one is.
KWOKCTL_PORTS = (("etcdPeerPort", "etcd peer"), ("etcdPort", "etcd"), ("kubeApiserverPort", "kube-apiserver"),
                 ("kwokControllerPort", "kwok-controller"), ("kubeControllerManagerPort", "kube-controller-manager"),
                 ("kubeSchedulerPort", "kube-scheduler"))


def parse_time(value):
    """A timezone-aware datetime from a datetime or an RFC 3339 (Kubernetes Time/MicroTime) string."""
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
    text = str(value).strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    if "." in text:  # MicroTime has six digits; fromisoformat in 3.9/3.10 wants exactly 3 or 6
        head, _dot, rest = text.partition(".")
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits):]
        text = "%s.%s%s" % (head, (digits + "000000")[:6], zone)
    parsed = datetime.datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)


def _lease_problem(lease, now, since=None):
    spec = (lease or {}).get("spec") or {}
    if not spec.get("holderIdentity"):
        return "its leader Lease has no holder (the component released it or never took it)"
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    if not renewed:
        return "its leader Lease was never renewed"
    duration = spec.get("leaseDurationSeconds") or 15
    renewed = parse_time(renewed)
    age = (now - renewed).total_seconds()
    if age > duration:
        return "its leader Lease was last renewed %d s ago, longer than its %d s duration" % (age, duration)
    if since is not None and renewed < since:
        return "its leader Lease was last renewed %d s ago, before %s" % (age, since.isoformat())
    return None


def lease_errors(leases, components, now, fix, since=None):
    """One message per component of ``components`` whose Lease (kube-system, named after it) is missing or stale.

    ``leases`` are Lease objects as read from the API; ``now`` the current time (datetime or RFC 3339);
    ``fix`` says how to restore the components. Empty when every component holds a fresh lease.

    ``since`` (datetime or RFC 3339, optional) also counts a Lease last renewed before that time as stale. A Lease
    renewed less than its duration ago may belong to a component that has just exited (it stops renewing only at its
    renew deadline, 10 s by default) or to one started again that waits a whole duration before it takes the Lease:
    only a renewal after the component was (re)started or last checked shows it runs.
    """
    now = parse_time(now)
    since = None if since in (None, "") else parse_time(since)
    by_name = {((lease or {}).get("metadata") or {}).get("name"): lease for lease in leases or []}
    problems = []
    for component in components or []:
        lease = by_name.get(component)
        problem = "there is no Lease kube-system/%s" % component if lease is None else _lease_problem(lease, now, since)
        if problem:
            problems.append("%s: %s" % (component, problem))
    if not problems:
        return []
    return ["The control plane is not whole: %s, so it is not running (nothing restarts it after it lost its lease, e.g. "
            "when the API server stopped answering for longer than the lease). Without kube-controller-manager no "
            "ServiceAccount token, quota usage or node lifecycle is updated; without kube-scheduler no Pod is placed. "
            "Fix: %s" % ("; ".join(problems), fix)]


def _version(value):
    text = "" if value is None else str(value).strip()
    return text[1:] if text[:1] in ("v", "V") else text


def _running_configuration(documents):
    for document in documents or []:
        if isinstance(document, dict) and document.get("kind") == "KwokctlConfiguration":
            return document
    return None


def kwokctl_mismatches(asked, documents, server_version=None):
    """How a running kwokctl cluster differs from what is asked: a list of ``"<what>: running X, asked Y"``.

    ``asked``: mapping with ``bindAddress``, ``kubeVersion``, ``etcdVersion``, ``kwokVersion`` (a leading
    ``v`` is ignored), ``components`` (names of components the cluster must run besides kwokctl's own) and
    ``ports`` (the options of :func:`kwokctl_ports`; none when empty).
    ``documents``: the YAML documents of the cluster's kwok.yaml. ``server_version``: the ``gitVersion``
    the API server reports, when it answers.
    """
    running = _running_configuration(documents)
    if running is None:
        return ["configuration: kwok.yaml holds no KwokctlConfiguration (a cluster this role did not create?)"]
    options = running.get("options") or {}
    found = []
    for key, label in (("bindAddress", "bind address"), ("kubeVersion", "Kubernetes version"),
                       ("etcdVersion", "etcd version"), ("kwokVersion", "kwok version")):
        if key not in asked:
            continue
        want, have = asked[key], options.get(key)
        same = (str(want) == str(have)) if key == "bindAddress" else (_version(want) == _version(have))
        if not same:
            found.append("%s: running %s, asked %s" % (label, have if have not in (None, "") else "(unset)", want))
    if server_version and "kubeVersion" in asked and _version(server_version) != _version(asked["kubeVersion"]):
        found.append("kube-apiserver reports version %s, asked %s" % (server_version, asked["kubeVersion"]))
    for key, label in KWOKCTL_PORTS:
        want = (asked.get("ports") or {}).get(key)
        if want is not None and str(want) != str(options.get(key)):
            found.append("%s port: running %s, asked %s" % (label, options.get(key) or "(unset)", want))
    have_components = {str((c or {}).get("name")) for c in running.get("components") or [] if isinstance(c, dict)}
    missing = [str(name) for name in asked.get("components") or [] if str(name) not in have_components]
    if missing:
        found.append("components: %s not running (the cluster was created without them)" % ", ".join(missing))
    return found


def kwokctl_ports(base):
    """The kwokctl options that put a cluster's listeners on ``base`` .. ``base + 5`` (see KWOKCTL_PORTS); ``{}`` for 0.

    kwokctl (binary runtime) otherwise takes, for each listener, the highest free port below 32768 when the cluster is
    created; it does not count the ports saved by its other clusters, so two clusters created at once, or one created
    while another's component is stopped, can be given the same port. Raises ValueError naming the fix.
    """
    if isinstance(base, bool) or not isinstance(base, int):
        raise ValueError("lab_cluster_port_base: %r is not a whole number. Fix: set 0 (kwokctl picks free ports) or a "
                         "port from 1024 to %d" % (base, 65535 - len(KWOKCTL_PORTS) + 1))
    if base == 0:
        return {}
    last = base + len(KWOKCTL_PORTS) - 1
    if not 1024 <= base <= last <= 65535:
        raise ValueError("lab_cluster_port_base: %d leaves the ports %d-%d outside 1024-65535. Fix: set 0 (kwokctl picks "
                         "free ports) or a port from 1024 to %d" % (base, base, last, 65535 - len(KWOKCTL_PORTS) + 1))
    return {key: base + offset for offset, (key, _label) in enumerate(KWOKCTL_PORTS)}


def format_duration(seconds):
    """``seconds`` as ``<m>m<ss>s`` (``7m33s``), the way the build script prints elapsed time."""
    seconds = max(0, int(seconds))
    return "%dm%02ds" % (seconds // 60, seconds % 60)


def _last_step(log_text, component, version):
    prefix = "[build %s %s] " % (component, version)
    for line in reversed(str(log_text or "").splitlines()):
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return None


def build_progress(component, version, started, now, log_text="", finished=False, rc=None):
    """One line on a running build: ``"<component> <version>: <elapsed>, <step>"``.

    ``started`` and ``now`` are datetimes or RFC 3339 strings; ``log_text`` the build log so far (its last
    ``[build <component> <version>]`` line is the step; ``starting`` before there is one). A ``finished``
    build says ``done`` (``rc`` 0) or ``failed (exit <rc>)`` instead of its step.
    """
    elapsed = format_duration((parse_time(now) - parse_time(started)).total_seconds())
    if finished:
        state = "done" if rc in (0, "0") else "failed (exit %s)" % ("?" if rc is None else rc)
    else:
        state = _last_step(log_text, component, version) or "starting"
    return "%s %s: %s, %s" % (component, version, elapsed, state)
