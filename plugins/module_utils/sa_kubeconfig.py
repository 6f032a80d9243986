# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Build and write a kubeconfig for a ServiceAccount, without ever returning its token.

The token comes from a Secret of type ``kubernetes.io/service-account-token``
(the token controller fills it in); the API server address and CA come from
the connection the caller already has. The file is created 0600 before the
token is written into it and moved into place atomically, so no other user can
read it at any moment. This file imports nothing from Ansible.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
import time

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token"
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
PRIVATE_MODE = 0o600


class KubeconfigError(Exception):
    """The kubeconfig cannot be built or written; the message says why and what to do.

    ``status`` is the HTTP status of a failed API call, ``None`` otherwise.
    """

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


def token_fingerprint(token):
    """A short, non-reversible name for a token, safe to show in diffs and logs."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:12]


def read_token_secret(secret, service_account):
    """Return ``(token, ca_data)`` from a token Secret as the API returned it (a dict).

    ``ca_data`` is the base64 CA bundle of the Secret (``ca.crt``) or ``None``.
    Raises ``KubeconfigError`` when the Secret is not a token for the ServiceAccount,
    and returns ``(None, None)`` while the token controller has not filled it in yet.
    """
    metadata = secret.get("metadata") or {}
    where = f"Secret {metadata.get('namespace', '?')}/{metadata.get('name', '?')}"
    if secret.get("type") != TOKEN_SECRET_TYPE:
        raise KubeconfigError(f"{where} has type {secret.get('type')!r}, not {TOKEN_SECRET_TYPE!r}: it holds no ServiceAccount token")
    owner = (metadata.get("annotations") or {}).get(SA_NAME_ANNOTATION)
    if owner != service_account:
        raise KubeconfigError(
            f"{where} is a token of ServiceAccount {owner!r}, not {service_account!r}; set annotation {SA_NAME_ANNOTATION}={service_account}"
        )
    data = secret.get("data") or {}
    if not data.get("token"):
        return None, None
    try:
        token = base64.b64decode(data["token"]).decode("utf-8")
    except (ValueError, UnicodeDecodeError) as exc:
        raise KubeconfigError(f"{where}: data.token is not valid base64 text: {exc}") from exc
    return token, data.get("ca.crt") or None


def wait_for_token(read_secret, service_account, timeout, interval=0.5, clock=time.monotonic, sleep=time.sleep):
    """Poll ``read_secret()`` until the token controller has filled the Secret in.

    ``read_secret`` returns the Secret as a dict. Returns ``(token, ca_data)``.
    """
    deadline = clock() + timeout
    while True:
        secret = read_secret()
        token, ca_data = read_token_secret(secret, service_account)
        if token:
            return token, ca_data
        if clock() >= deadline:
            metadata = secret.get("metadata") or {}
            raise KubeconfigError(
                f"Secret {metadata.get('namespace', '?')}/{metadata.get('name', '?')} still has no token after {timeout}s: is "
                "kube-controller-manager running with --service-account-private-key-file (its token controller fills the Secret in)?"
            )
        sleep(interval)


def ca_data_from_file(path):
    """Base64 of a CA bundle file, or ``None`` when no file is given."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            return base64.b64encode(handle.read()).decode("ascii")
    except OSError as exc:
        raise KubeconfigError(f"cannot read the API server's CA bundle {path}: {exc}") from exc


def build_kubeconfig(server, token, user, cluster, context, namespace=None, ca_data=None, insecure=False):
    """Return a kubeconfig (a dict) with one cluster, one user and one context, which is current."""
    if not server:
        raise KubeconfigError("the API server address is unknown; set option server")
    cluster_entry = {"server": server}
    if insecure:
        cluster_entry["insecure-skip-tls-verify"] = True
    elif ca_data:
        cluster_entry["certificate-authority-data"] = ca_data
    context_entry = {"cluster": cluster, "user": user}
    if namespace:
        context_entry["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": cluster_entry}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": context, "context": context_entry}],
        "current-context": context,
        "preferences": {},
    }


def render(kubeconfig):
    """Deterministic YAML text of a kubeconfig."""
    return yaml.safe_dump(kubeconfig, default_flow_style=False, sort_keys=True)


def redact(kubeconfig):
    """A copy of ``kubeconfig`` whose tokens are replaced by their fingerprints (for diffs)."""
    redacted = json.loads(json.dumps(kubeconfig))
    for entry in redacted.get("users") or []:
        user = (entry or {}).get("user") or {}
        if isinstance(user.get("token"), str):
            user["token"] = f"<redacted {token_fingerprint(user['token'])}>"
    return redacted


def read_existing(path):
    """Return ``(text, mode)`` of the file at ``path``, or ``(None, None)`` when it does not exist."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            text = handle.read()
        return text, os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        raise KubeconfigError(f"cannot read {path}: {exc}") from exc


def parse_existing(text):
    """The kubeconfig in ``text`` as a dict, or ``{}`` when it is not one (it will be replaced)."""
    try:
        loaded = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def write_private(path, text, mode=PRIVATE_MODE):
    """Write ``text`` to ``path`` atomically; the file is ``mode`` from its creation on.

    The parent directory is created 0700 when missing. Returns nothing; raises
    ``KubeconfigError`` on failure (and leaves no temporary file behind).
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise KubeconfigError(f"cannot create directory {directory}: {exc}") from exc
    handle, tmp = tempfile.mkstemp(prefix=".kubeconfig-", dir=directory)
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise KubeconfigError(f"cannot write {path}: {exc}") from exc


def ensure_kubeconfig(path, kubeconfig, check_mode=False, mode=PRIVATE_MODE):
    """Make ``path`` hold ``kubeconfig`` with file mode ``mode``.

    Returns ``(changed, diff)``; the diff holds redacted kubeconfigs (plus the
    file modes), never a token.
    """
    text = render(kubeconfig)
    existing, existing_mode = read_existing(path)
    content_changed = existing != text
    mode_changed = existing is not None and existing_mode != mode
    diff = {
        "before": {"mode": f"{existing_mode:04o}" if existing_mode is not None else None,
                   "kubeconfig": redact(parse_existing(existing))},
        "after": {"mode": f"{mode:04o}", "kubeconfig": redact(kubeconfig)},
    }
    if check_mode or not (content_changed or mode_changed):
        return content_changed or mode_changed, diff
    if content_changed:
        write_private(path, text, mode)
    else:
        try:
            os.chmod(path, mode)
        except OSError as exc:
            raise KubeconfigError(f"cannot set mode {mode:04o} on {path}: {exc}") from exc
    return True, diff
