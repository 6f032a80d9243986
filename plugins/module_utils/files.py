# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write several text files at once, each only when its content or mode differs, and remove others (module gpushare.k8s.files).

Each file is written whole through a temporary file in its directory and renamed over the old one, so a
reader never sees half a file; missing directories are created. No Ansible import: pytest calls it.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

from .errors import InputError


def parse_mode(value, field):
    """An octal mode string (``"0644"``) as an int; an InputError naming ``field`` otherwise."""
    text = str(value)
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise InputError(field, "is %r, not an octal file mode" % (value,), 'give it as a quoted string, e.g. "0644"')
    return mode


def _current(path):
    try:
        with open(path, "rb") as handle:
            content = handle.read()
        return content, stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None, None


def _write(path, data, mode, directory_mode):
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=directory_mode, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def write_files(files, directory_mode="0755", check_mode=False, fields=None, dest_option="dest"):
    """Write each ``{dest, content, mode}`` whose file differs; return one ``{dest, changed, diff}`` per file.

    Every entry is checked before the first write, so bad input writes nothing. Errors name ``files[i].mode`` and
    ``files[i].dest``, or ``<fields[i]>.mode`` and ``<fields[i]>.<dest_option>`` for a caller whose option differs.
    """
    planned = []
    dir_mode = parse_mode(directory_mode, "directory_mode")
    for index, entry in enumerate(files):
        field = fields[index] if fields else "files[%d]" % index
        dest = os.path.abspath(os.path.expanduser(entry["dest"]))
        mode = parse_mode(entry.get("mode") or "0644", "%s.mode" % field)
        data = (entry.get("content") or "").encode("utf-8")
        if os.path.isdir(dest):
            raise InputError("%s.%s" % (field, dest_option), "%s is a directory" % dest, "name a file")
        planned.append((dest, data, mode))
    results = []
    for dest, data, mode in planned:
        before, before_mode = _current(dest)
        changed = before != data or before_mode != mode
        if changed and not check_mode:
            _write(dest, data, mode, dir_mode)
        diff = dict(
            before_header=dest,
            after_header=dest,
            before="" if before is None else before.decode("utf-8", "replace"),
            after=data.decode("utf-8"),
        )
        results.append(dict(dest=dest, changed=changed, mode="%04o" % mode, diff=diff))
    return results


def removal_targets(paths, field="absent"):
    """The absolute paths ``remove_paths`` would remove; InputError for an empty one or the file system's root."""
    planned = []
    for index, each in enumerate(paths):
        path = os.path.abspath(os.path.expanduser(each)) if each else ""
        if not path or path == os.path.dirname(path):
            raise InputError("%s[%d]" % (field, index), "is %r" % (each,), "name a file or a directory below /")
        planned.append(path)
    return planned


def remove_paths(paths, check_mode=False, field="absent"):
    """Remove each path that exists (a file, a link, or a directory with all under it); one ``{path, changed, diff}`` each.

    Every path is checked (``removal_targets``) before the first removal: an empty one, or the root, removes nothing.
    """
    results = []
    for path in removal_targets(paths, field):
        kind = "directory" if os.path.isdir(path) and not os.path.islink(path) else ("file" if os.path.lexists(path) else None)
        if kind and not check_mode:
            if kind == "directory":
                shutil.rmtree(path)
            else:
                os.unlink(path)
        diff = dict(before_header=path, after_header=path, before="%s\n" % (kind or "absent"), after="absent\n")
        results.append(dict(path=path, changed=kind is not None, diff=diff))
    return results


def describe_paths(paths):
    """``[{path, exists, isdir, files}]`` for each path: ``files`` lists every file under a directory, sorted."""
    found = []
    for each in paths:
        path = os.path.abspath(os.path.expanduser(each))
        isdir = os.path.isdir(path)
        files = []
        if isdir:
            for directory, _dirs, names in os.walk(path):
                files.extend(os.path.join(directory, name) for name in names)
        found.append(dict(path=path, exists=os.path.lexists(path), isdir=isdir, files=sorted(files)))
    return found
