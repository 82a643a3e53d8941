"""A public alias: the watchdog as the README names it (`from waypost.watchdog import
Watch`). It lives in `waypost.usecases.watchdog`."""

from waypost.usecases.watchdog import Action, SweepReport, Watch, default_watcher_id, sweep

__all__ = ["Action", "SweepReport", "Watch", "default_watcher_id", "sweep"]
