"""Build every distribution's sdist and wheel into one folder, and check them.

    python ci/wheels.py [--out dist]

1. `python -m build` for each of the five distributions: the sdist, then the wheel built from
   that sdist (so an sdist that misses a file fails here), into OUT (dist/ unless told, emptied
   first; git ignores it).
2. `twine check --strict`: each file's metadata and README render as a package index shows them.
3. One version, compatible pins: every distribution has the core's version (written once, in
   packages/core/src/deepsharp/core/version.py) and every other requires `deepsharp~=` it; the
   metadata hook that pins them (hatch_build.py) is the same file in each.

Then `pip install --find-links OUT deepsharp deepsharp-engine-torch` installs them by name.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = {
    "deepsharp": "packages/core",
    "deepsharp-engine-torch": "packages/engine-torch",
    "deepsharp-engine-testbuffer": "packages/engine-testbuffer",
    "deepsharp-contracts": "contracts",
    "deepsharp-distributed": "packages/distributed",
}
VERSION_FILE = ROOT / "packages" / "core" / "src" / "deepsharp" / "core" / "version.py"


def version() -> str:
    """The version, as written in the core's version.py."""
    found = re.search(r'^__version__ = "([^"]+)"$', VERSION_FILE.read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f'{VERSION_FILE}: no line __version__ = "..."')
    return found.group(1)


def metadata(wheel: Path) -> dict[str, list[str]]:
    """A wheel's METADATA fields (each a list: Requires-Dist comes many times)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(archive.read(name).decode("utf-8"))
    fields: dict[str, list[str]] = {}
    for key, value in message.items():
        fields.setdefault(key, []).append(value)
    return fields


def problems(out: Path, expected: str) -> list[str]:
    """What is wrong with the files in `out`: a distribution without its wheel and sdist, a
    version that is not `expected`, a sibling not required at `~=expected`."""
    found: list[str] = []
    for name in DISTRIBUTIONS:
        stem = name.replace("-", "_")
        wheels = sorted(out.glob(f"{stem}-*.whl"))
        sdists = sorted(out.glob(f"{stem}-*.tar.gz"))
        if len(wheels) != 1 or len(sdists) != 1:
            found.append(f"{name}: {len(wheels)} wheels and {len(sdists)} sdists, not 1 of each")
            continue
        fields = metadata(wheels[0])
        if fields.get("Version") != [expected]:
            found.append(f"{name}: version {fields.get('Version')}, not the core's {expected}")
        with tarfile.open(sdists[0]) as archive:
            if not any(member.endswith("/PKG-INFO") for member in archive.getnames()):
                found.append(f"{sdists[0].name}: no PKG-INFO")
        if name == "deepsharp":
            continue
        pins = [r for r in fields.get("Requires-Dist", []) if r.startswith("deepsharp")]
        if pins != [f"deepsharp~={expected}"]:
            found.append(f"{name}: requires {pins}, not ['deepsharp~={expected}']")
    hooks = {
        (ROOT / folder / "hatch_build.py").read_bytes()
        for folder in DISTRIBUTIONS.values()
        if folder != "packages/core"
    }
    if len(hooks) != 1:
        found.append("the hatch_build.py files of the distributions differ: make them one file")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    out = parser.parse_args().out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for folder in DISTRIBUTIONS.values():
        subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT / folder)], check=True
        )
    built = sorted(str(path) for path in out.iterdir())
    subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *built], check=True)
    expected = version()
    found = problems(out, expected)
    for problem in found:
        print("wheels:", problem, file=sys.stderr)
    if found:
        return 1
    print(f"built and checked {len(built)} files of version {expected} in {out}:")
    print("\n".join(f"  {Path(path).name}" for path in built))
    return 0


if __name__ == "__main__":
    sys.exit(main())
