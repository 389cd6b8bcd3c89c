"""`deepsharp` (the command) and `python -m deepsharp`: the command line of
`deepsharp.core.cli`, its imports (NumPy and the library, most of a second) included in what
Ctrl-C ends with one line instead of a traceback."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from deepsharp.core.cli import main as command
    except KeyboardInterrupt:
        print("deepsharp: interrupted", file=sys.stderr)
        return 130
    return command()


if __name__ == "__main__":
    sys.exit(main())
