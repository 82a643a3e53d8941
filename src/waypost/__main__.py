from waypost.cli import console

raise SystemExit(console())
