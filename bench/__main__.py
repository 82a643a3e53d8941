from bench.main import main

raise SystemExit(main())
