from toolcall_lab.cli import main

raise SystemExit(main())
