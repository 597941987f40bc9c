"""`nsfleet mn SCRIPT.py [ARGS]` (or `python -m nsfleet.mn SCRIPT.py`): runs a script
written for Mininet unchanged, its `mininet.*` imports answered by `nsfleet.mininet.*`.
Anything else the script imports is the usual module.

`nsfleet mn [OPTIONS]` (no script: `--topo tree,depth=2,fanout=8 --switch ovsk --test
pingall`...) runs Mininet's own `mn` command, from Debian's mininet package, the same way:
its options are Mininet's, its network nsfleet's."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import shutil
import sys
from types import ModuleType
from typing import Optional, Sequence

from .errors import NsfleetError


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`mininet` and `mininet.X` as `nsfleet.mininet` and `nsfleet.mininet.X`."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != "mininet" and not fullname.startswith("mininet."):
            return None
        if fullname == "mininet.examples" or fullname.startswith("mininet.examples."):
            return _mininets_example(fullname)
        real = "nsfleet." + fullname
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname == "mininet")

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module("nsfleet." + spec.name)

    def exec_module(self, module: ModuleType) -> None:
        pass


def _mininets_example(fullname: str) -> Optional[importlib.machinery.ModuleSpec]:
    """`mininet.examples.X` from Mininet's own files, where Mininet is installed: an
    example imports another's classes (tree1024 imports treeping64's HostV4), and their
    `mininet.*` imports are answered by nsfleet in turn."""
    parts = fullname.split(".")
    for base in [*sys.path, "/usr/lib/python3/dist-packages"]:
        folder = os.path.join(base, *parts)
        for path, package in ((os.path.join(folder, "__init__.py"), True), (folder + ".py", False)):
            if os.path.isfile(path):
                return importlib.util.spec_from_file_location(
                    fullname, path, submodule_search_locations=[folder] if package else None)
    return None


def install() -> None:
    """Answers `import mininet...` with nsfleet's modules from now on."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())


# Where Mininet's own `mn` command is installed (Debian's mininet package, or pip's).
MN_PROGRAMS = ("/usr/bin/mn", "/usr/local/bin/mn")


def mininets_mn() -> Optional[str]:
    """Mininet's own `mn` command: a Python program that runs Mininet's `MininetRunner`
    (not a wrapper that would start `nsfleet mn` again)."""
    for path in [*MN_PROGRAMS, shutil.which("mn")]:
        if path and os.path.isfile(path):
            with open(path, "rb") as f:
                head = f.read(64 * 1024)
            if head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0] \
                    and b"MininetRunner" in head:
                return path
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]) and not any(a.endswith(".py") for a in args):
        print(__doc__.strip())
        return 0
    if not args or args[0].startswith("-"):
        # Mininet's `mn` and its options.
        program = mininets_mn()
        if program is None:
            sys.stderr.write("nsfleet mn: without a script, nsfleet mn runs Mininet's own `mn` command "
                             "with its options, which is not installed: apt-get install mininet\n")
            return 2
        args = [program, *args]
    script = args[0]
    install()
    sys.argv = args
    try:
        runpy.run_path(script, run_name="__main__")
    except FileNotFoundError as e:
        if e.filename == script:
            sys.stderr.write(f"nsfleet mn: {script}: no such script\n")
            return 2
        raise
    except NsfleetError as e:
        # What nsfleet refused (a feature it lacks, a topology): its message, no traceback.
        sys.stderr.write(f"nsfleet mn: {e.message}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
