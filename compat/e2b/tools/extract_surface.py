#!/usr/bin/env python3
"""Writes compat/e2b/e2b-surface.tsv: E2B's public surface, one row an item.

Run it with the E2B SDKs installed (a throwaway venv is enough):

    python3 -m venv /tmp/e2bvenv
    /tmp/e2bvenv/bin/pip install 'e2b==2.63.*' 'e2b-code-interpreter==2.11.*'
    /tmp/e2bvenv/bin/python compat/e2b/tools/extract_surface.py

Columns: item, kind, e2b (E2B's signature, shortened), status
(works | warns | unimplemented:<feature key>), rayito (the Rust item that
answers it), note. The first three come from E2B's code through
`inspect`; the last three are ours and are kept from the existing file on a rerun, so a new E2B item
shows up with an empty status and the coverage test fails until someone
decides what it does. The test itself reads the file and needs no Python.
"""

import csv
import inspect
import os
import re
import sys

import e2b
import e2b_code_interpreter as ci
from e2b.sandbox_sync.commands.command import Commands
from e2b.sandbox_sync.commands.command_handle import CommandHandle
from e2b.sandbox_sync.commands.pty import Pty
from e2b.sandbox_sync.filesystem.filesystem import Filesystem
from e2b.template.main import TemplateBuilder

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2b-surface.tsv")
HEADER = ["item", "kind", "e2b", "status", "rayito", "note"]

# The surfaces issue 30 names: the sync classes (the async twins have the
# same names and parameters) and the code interpreter's models.
CLASSES = [
    ("Sandbox", ci.Sandbox),
    ("Commands", Commands),
    ("CommandHandle", CommandHandle),
    ("Filesystem", Filesystem),
    ("WatchHandle", e2b.WatchHandle),
    ("Pty", Pty),
    ("Git", e2b.Git),
    ("SandboxPaginator", e2b.SandboxPaginator),
    ("Execution", ci.Execution),
    ("Result", ci.Result),
    ("Logs", ci.Logs),
    ("ExecutionError", ci.ExecutionError),
    ("Context", ci.Context),
    ("OutputMessage", ci.OutputMessage),
    ("Template", e2b.Template),
    ("TemplateBuilder", TemplateBuilder),
    ("Volume", e2b.Volume),
    ("Secret", e2b.Secret),
    ("SecretPaginator", e2b.SecretPaginator),
    ("SecretInfo", e2b.SecretInfo),
]

# Methods whose keyword arguments are items of their own (the ones a
# migrating program sets); ApiParams' are rows of their own below.
PARAMS_OF = {
    ("Sandbox", "create"),
    ("Sandbox", "connect"),
    ("Sandbox", "list"),
    ("Sandbox", "pause"),
    ("Sandbox", "beta_pause"),
    ("Sandbox", "get_metrics"),
    ("Sandbox", "run_code"),
    ("Sandbox", "create_code_context"),
    ("Commands", "run"),
    ("Commands", "connect"),
    ("Pty", "create"),
}

# Option dictionaries (TypedDicts) whose keys are items.
OPTION_DICTS = [
    ("ApiParams", e2b.ApiParams),
    ("SandboxNetworkOpts", e2b.SandboxNetworkOpts),
    ("SandboxLifecycle", e2b.SandboxLifecycle),
]


def short(sig):
    """A signature without module paths, on one line."""
    text = re.sub(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Za-z_])", r"\1", str(sig))
    text = text.replace("\n", " ").replace("\t", " ")
    return text if len(text) <= 160 else text[:157] + "..."


def signature(obj):
    try:
        return short(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def unbound_params(raw):
    """The parameter names of a class attribute as written (self included)."""
    func = getattr(raw, "__func__", None) or getattr(raw, "_func", None) or raw
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return ["self"]


def model_fields(cls):
    """Dataclass-style fields, from annotations up the MRO."""
    names = []
    for klass in reversed(cls.__mro__):
        for name in getattr(klass, "__annotations__", {}):
            if not name.startswith("_") and name not in names:
                names.append(name)
    return names


def rows():
    out = []
    for prefix, cls in CLASSES:
        seen = set()
        for name, member in inspect.getmembers(cls):
            if name.startswith("_"):
                continue
            seen.add(name)
            raw = inspect.getattr_static(cls, name)
            if isinstance(raw, property):
                kind = "property"
            elif isinstance(raw, (staticmethod, classmethod)) or (
                callable(member) and "self" not in unbound_params(raw)
            ):
                kind = "classmethod"
            elif callable(member):
                kind = "method"
            else:
                kind = "attribute"
            out.append((f"{prefix}.{name}", kind, signature(member) if callable(member) else ""))
            if (prefix, name) in PARAMS_OF:
                for pname, p in inspect.signature(member).parameters.items():
                    if pname in ("self", "opts") or p.kind is p.VAR_KEYWORD:
                        continue
                    ann = short(p.annotation) if p.annotation is not p.empty else ""
                    default = "" if p.default is p.empty else f" = {p.default!r}"
                    out.append((f"{prefix}.{name}({pname})", "parameter", f"{pname}: {ann}{default}"))
        for field in model_fields(cls):
            if field not in seen:
                out.append((f"{prefix}.{field}", "field", ""))
    for prefix, typed in OPTION_DICTS:
        for key, ann in typed.__annotations__.items():
            out.append((f"{prefix}.{key}", "option", short(ann)))
    for name in sorted(dir(e2b)):
        obj = getattr(e2b, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            bases = [b.__name__ for b in obj.__mro__[1:] if issubclass(b, BaseException)]
            bases = [b for b in bases if b not in ("Exception", "BaseException")]
            out.append((name, "exception", " < ".join(bases)))
    return out


def main():
    kept = {}
    if os.path.exists(OUT):
        with open(OUT, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                kept[row["item"]] = (row["status"], row["rayito"], row.get("note", ""))
    with open(OUT, "w", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
        w.writerow(HEADER)
        for item, kind, sig in rows():
            status, rayito, note = kept.get(item, ("", "", ""))
            w.writerow([item, kind, sig, status, rayito, note])
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
