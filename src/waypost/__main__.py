from waypost.cli.entry import main

raise SystemExit(main())
