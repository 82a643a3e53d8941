from waypost.cli import main

raise SystemExit(main())
