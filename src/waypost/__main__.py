from waypost.entry import main

raise SystemExit(main())
