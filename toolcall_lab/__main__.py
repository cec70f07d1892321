from toolcall_lab import _startup

_startup.install()  # (the package is imported by now; the command's own imports are still to come)

from toolcall_lab.cli import main  # noqa: E402

raise SystemExit(main())
