# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Build and write a kubeconfig for a ServiceAccount, without ever returning its token or another credential.

The token is an expiring one from the TokenRequest API (the caller asks for it), or,
when asked, the long-lived one of a Secret of type ``kubernetes.io/service-account-token``
(the token controller fills it in); the API server address and CA come from the
connection the caller already has. The file is created 0600 before the token is written
into it and moved into place atomically, so no other user can read it at any moment.
Files this module writes carry a mark (a kubeconfig extension); a file without it is
someone else's and is never replaced or removed unless forced. Diffs show no credential.
This file imports nothing from Ansible.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import tempfile
import time

from ..errors import GpushareError

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token"
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
PRIVATE_MODE = 0o600
WRITER = "gpushare.k8s.service_account_kubeconfig"
MARK_NAME = "gpushare.k8s/service-account-kubeconfig"
MIN_EXPIRATION = 600  # the API server refuses a TokenRequest for less
DEFAULT_EXPIRATION = 8 * 3600


class KubeconfigError(GpushareError):
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


def build_kubeconfig(server, token, user, cluster, context, namespace=None, ca_data=None, insecure=False, owner=None, token_source=None):
    """Return a kubeconfig (a dict) with one cluster, one user and one context, which is current.

    ``owner`` (``namespace/name`` of the ServiceAccount) marks the file as written by this collection
    (an extension kubectl keeps and ignores), so a later run knows it may replace it.
    """
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
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": cluster_entry}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": context, "context": context_entry}],
        "current-context": context,
        "preferences": {},
    }
    if owner:
        mark = {"writtenBy": WRITER, "serviceAccount": owner}
        if token_source:
            mark["tokenSource"] = token_source
        kubeconfig["extensions"] = [{"name": MARK_NAME, "extension": mark}]
    return kubeconfig


def mark_of(kubeconfig):
    """The collection's mark of a parsed kubeconfig (a dict), or ``None`` when this module did not write it."""
    if not isinstance(kubeconfig, dict):
        return None
    for entry in kubeconfig.get("extensions") or []:
        if isinstance(entry, dict) and entry.get("name") == MARK_NAME and isinstance(entry.get("extension"), dict):
            if entry["extension"].get("writtenBy") == WRITER:
                return entry["extension"]
    return None


def check_replaceable(path, text, force=False, action="replace"):
    """Refuse to replace (or remove) a file this module did not write, unless ``force``; it may be someone's kubeconfig."""
    if force or text is None or not text.strip():
        return
    if mark_of(parse_existing(text)) is None:
        raise KubeconfigError(
            f"{path} exists and was not written by {WRITER} (it has no extension {MARK_NAME!r}); it may be a kubeconfig "
            f"someone relies on, so it was left as it is. To proceed, choose another path, move the file away, or set "
            f"force: true to {action} it (its credentials are lost)"
        )


# ----------------------------------------------------------------------------- redaction

REDACTED = "<redacted>"
PENDING_TOKEN = "<a new token from the TokenRequest API>"
# User fields that name files or identities, never a credential; every other user field is hidden in diffs.
_PLAIN_USER_FIELDS = ("username", "client-certificate", "client-key", "tokenFile", "as", "as-uid", "as-groups")
_PLAIN_EXEC_FIELDS = ("apiVersion", "command", "interactiveMode", "provideClusterInfo", "installHint")


def _hide(value):
    """``value`` with every leaf replaced by ``<redacted>`` (the shape stays readable)."""
    if isinstance(value, dict):
        return {key: _hide(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_hide(item) for item in value]
    return REDACTED


def _redact_user(user, ours):
    if not isinstance(user, dict):
        return _hide(user)
    shown = {}
    for key, value in user.items():
        if key in _PLAIN_USER_FIELDS:
            shown[key] = value
        elif key == "token" and isinstance(value, str) and (value == PENDING_TOKEN or ours):
            # Only a token this module wrote (a long random JWT) is shown as a fingerprint, so a diff tells a new token.
            shown[key] = value if value == PENDING_TOKEN else f"<redacted {token_fingerprint(value)}>"
        elif key == "exec" and isinstance(value, dict):
            shown[key] = {k: (v if k in _PLAIN_EXEC_FIELDS else _hide(v)) for k, v in value.items()}
            if isinstance(value.get("env"), list):  # names are kept, values hidden
                shown[key]["env"] = [{"name": e.get("name"), "value": REDACTED} if isinstance(e, dict) else REDACTED for e in value["env"]]
        elif key == "auth-provider" and isinstance(value, dict):
            shown[key] = {k: (v if k == "name" else _hide(v)) for k, v in value.items()}
        else:  # token, password, client-key-data, client-certificate-data, extensions, anything unknown
            shown[key] = _hide(value)
    return shown


def redact(kubeconfig):
    """A copy of ``kubeconfig`` (a dict) fit for a diff: no credential of any user is left.

    Tokens of a file this module wrote become fingerprints; every other credential field (``token``,
    ``password``, ``client-key-data``, ``client-certificate-data``, ``exec`` arguments and environment
    values, ``auth-provider`` configuration, extensions, unknown fields) becomes ``<redacted>``. Clusters
    keep their address and CA (public), but a proxy URL with a user part is hidden.
    """
    if not isinstance(kubeconfig, dict):
        return {}
    ours = mark_of(kubeconfig) is not None
    redacted = json.loads(json.dumps(kubeconfig, default=str))
    for entry in redacted.get("users") or []:
        if isinstance(entry, dict) and "user" in entry:
            entry["user"] = _redact_user(entry["user"], ours)
    for entry in redacted.get("clusters") or []:
        cluster = entry.get("cluster") if isinstance(entry, dict) else None
        if isinstance(cluster, dict):
            if "@" in str(cluster.get("proxy-url", "")):
                cluster["proxy-url"] = REDACTED
            if "extensions" in cluster:
                cluster["extensions"] = _hide(cluster["extensions"])
    for section in ("preferences",):
        if isinstance(redacted.get(section), dict) and "extensions" in redacted[section]:
            redacted[section]["extensions"] = _hide(redacted[section]["extensions"])
    if "extensions" in redacted:
        redacted["extensions"] = [entry if isinstance(entry, dict) and entry.get("name") == MARK_NAME else _hide(entry)
                                  for entry in (redacted["extensions"] if isinstance(redacted["extensions"], list) else [redacted["extensions"]])]
    return redacted


# ----------------------------------------------------------------------------- expiring tokens


def jwt_claims(token):
    """The claims of a JWT (its middle part, not verified), or ``None`` when ``token`` is not one."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


def reusable_token(kubeconfig, service_account, namespace, min_remaining, now=None):
    """The token of a kubeconfig this module wrote for the same ServiceAccount, if it is valid for ``min_remaining``
    seconds more (by its own ``exp`` claim), else ``None``. The caller still asks the API server (TokenReview)."""
    mark = mark_of(kubeconfig)
    if mark is None or mark.get("serviceAccount") != f"{namespace}/{service_account}" or mark.get("tokenSource") != "request":
        return None
    users = kubeconfig.get("users") or []
    if len(users) != 1 or not isinstance(users[0], dict):
        return None
    token = (users[0].get("user") or {}).get("token")
    claims = jwt_claims(token)
    if not claims or claims.get("sub") != f"system:serviceaccount:{namespace}:{service_account}":
        return None
    expires = claims.get("exp")
    now = time.time() if now is None else now
    if not isinstance(expires, (int, float)) or expires - now < min_remaining:
        return None
    return token


def check_expiration(seconds):
    """``seconds`` if the API server accepts it as a TokenRequest's expirationSeconds, else ``KubeconfigError``."""
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < MIN_EXPIRATION:
        raise KubeconfigError(
            f"token_expiration: {seconds!r} is not a number of seconds of at least {MIN_EXPIRATION} (the API server refuses "
            f"shorter tokens). Fix: use e.g. {DEFAULT_EXPIRATION} ({DEFAULT_EXPIRATION // 3600} hours)"
        )
    return seconds


def _expires(token):
    """The ``exp`` claim of ``token`` as an ISO 8601 UTC time, or ``None``."""
    expires = (jwt_claims(token) or {}).get("exp")
    if not isinstance(expires, (int, float)):
        return None
    return datetime.datetime.fromtimestamp(expires, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def choose_token(existing, service_account, namespace, source, expiration, request, review, read_secret=None,
                 wait_timeout=60, check_mode=False, now=None):
    """The token the kubeconfig gets: ``(token, ca_data, expires)``.

    ``source="secret"``: the long-lived token of the Secret (``read_secret()`` returns it as a dict).
    ``source="request"``: the token of the ``existing`` kubeconfig (a dict) when this module wrote it for the same
    ServiceAccount, it is valid for more than half of ``expiration`` and ``review(token)`` (TokenReview) returns the
    ServiceAccount's user name; else ``request(expiration)`` issues a new one. Check mode never issues one: the token
    is then ``PENDING_TOKEN``.
    """
    if source == "secret":
        token, ca_data = wait_for_token(read_secret, service_account, wait_timeout)
        return token, ca_data, _expires(token)
    check_expiration(expiration)
    user = f"system:serviceaccount:{namespace}:{service_account}"
    kept = reusable_token(existing, service_account, namespace, expiration / 2.0, now=now)
    if kept and review(kept) == user:
        return kept, None, _expires(kept)
    if check_mode:
        return PENDING_TOKEN, None, None
    token = request(expiration)
    if not isinstance(token, str) or not token:
        raise KubeconfigError(f"the TokenRequest for ServiceAccount {namespace}/{service_account} returned no token")
    return token, None, _expires(token)


def render(kubeconfig):
    """Deterministic YAML text of a kubeconfig."""
    return yaml.safe_dump(kubeconfig, default_flow_style=False, sort_keys=True)


def read_existing(path):
    """Return ``(text, mode)`` of the file at ``path``, or ``(None, None)`` when it does not exist."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        return text, os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise KubeconfigError(f"cannot read {path}: {exc}") from exc


def parse_existing(text):
    """The kubeconfig in ``text`` as a dict, or ``{}`` when it is not one."""
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


def ensure_kubeconfig(path, kubeconfig, check_mode=False, mode=PRIVATE_MODE, force=False):
    """Make ``path`` hold ``kubeconfig`` with file mode ``mode``.

    Refuses (``KubeconfigError``) to replace a file this module did not write unless ``force``.
    Returns ``(changed, diff)``; the diff holds redacted kubeconfigs (plus the file modes), never a credential.
    """
    text = render(kubeconfig)
    existing, existing_mode = read_existing(path)
    check_replaceable(path, existing, force)
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


def remove_kubeconfig(path, check_mode=False, force=False):
    """Remove ``path`` if this module wrote it (or ``force``). Returns ``(changed, diff)``, the diff redacted."""
    existing, existing_mode = read_existing(path)
    if existing is None:
        return False, {"before": {"mode": None, "kubeconfig": {}}, "after": {"mode": None, "kubeconfig": {}}}
    check_replaceable(path, existing, force, action="remove")
    diff = {"before": {"mode": f"{existing_mode:04o}", "kubeconfig": redact(parse_existing(existing))},
            "after": {"mode": None, "kubeconfig": {}}}
    if not check_mode:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KubeconfigError(f"cannot remove {path}: {exc}") from exc
    return True, diff
