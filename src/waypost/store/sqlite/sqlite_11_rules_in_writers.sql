-- migration 11: the rules a writer decides before it writes.
--
-- Who resolves which blocker kind, and whose gates run at the owner's review, are decided by
-- the writer's use case before its event is built (the state machine that `verify` replays
-- holds only what every history ever written meets). A waypost older than these rules
-- would let a worker resolve the owner's blockers and run another's gates as the owner, so
-- the oldest writer taken becomes 11. Older versions still read the store. Nothing else
-- changes: no table, no row of a run.

INSERT INTO meta (name, value) VALUES ('min_writer_version', '11')
    ON CONFLICT (name) DO UPDATE SET value = excluded.value;
